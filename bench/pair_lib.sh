# shellcheck shell=bash
# Two agents, or iperf3, between two hosts of a namespace testbed: what the
# data-plane benchmarks share. Source it after lib.sh with tw (the tensorwire
# binary), NAME (the testbed's) and CC (the hosts' TCP congestion control) set:
# it brings up the testbed (A sends, B receives; IPA and IPB their addresses) and
# a scratch directory, work, both gone when the script exits.
work=$(mktemp -d /tmp/tw-bench.XXXXXX)
A=$NAME-h0 B=$NAME-h1
# Whatever happens, the testbed goes (also one a crashed run left).
trap '"$tw" testbed down --name $NAME > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$tw" testbed down --name $NAME > /dev/null 2>&1 || true
"$tw" testbed up --hosts 2 --name $NAME > /dev/null
namespace_cc "$CC" $A $B
address() { "$tw" testbed status --name $NAME --json | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['host_list'][$1]['address'])"; }
IPA=$(address 0) IPB=$(address 1)

# agents PROFILE OUT [agent options]: rank 0 in A, rank 1 in B. The two share this
# machine's cores (--machine-agents 2: automatic I/O threads count both).
agents() {
  local profile=$1 out=$2
  shift 2
  mkdir -p "$out"
  cat > "$out/roster.yaml" <<YAML
token: "bench"
ranks:
  - {rank: 0, host: "$IPA", port: 17100}
  - {rank: 1, host: "$IPB", port: 17101}
YAML
  ip netns exec $B "$tw" agent --rank 1 --profile "$profile" --roster "$out/roster.yaml" --out "$out" --quiet --machine-agents 2 "$@" &
  local pb=$!
  ip netns exec $A "$tw" agent --rank 0 --profile "$profile" --roster "$out/roster.yaml" --out "$out" --quiet --machine-agents 2 "$@"
  wait $pb
}

stream_profile() {  # SIZE FLOWS COUNT > profile
  echo "version: 1"; echo "iterations: $3"; echo "iteration_barrier: false"
  echo "ranks: [{id: 0}, {id: 1}]"; echo "flows:"
  for ((f = 0; f < $2; f++)); do echo "  - {id: f$f, src: 0, dst: 1}"; done
  echo "ops:"
  for ((f = 0; f < $2; f++)); do echo "  - {id: s$f, type: send, flow: f$f, bytes: $1}"; done
}

# Receiver-side rate of a run: bytes and messages over first byte .. last byte.
rate() {  # RUN_DIR -> "Gb/s messages/s" at the receiver
  "$tw" results rates "$1" --json |
    /usr/bin/python3 -c 'import json, sys; r = json.load(sys.stdin)["ranks"][1]; print("%.2f %.0f" % (r["bits_per_second"] / 1e9, r["messages_per_second"]))'
}

# PIN=1: the sending side on core 0 and the receiving side on core 1, for the
# baselines (taskset) as for the agents (--pin: rank 0's threads on core 0, rank
# 1's on core 1). Unpinned, where the scheduler puts the two sides, their threads
# and the bridge's softirq work moves the rate from run to run.
PIN=0
on_core() {  # CORE COMMAND...: COMMAND, on CORE when PIN=1
  local core=$1
  shift
  if [ "$PIN" = 1 ]; then taskset -c "$core" "$@"; else "$@"; fi
}

# iperf3 3.12 drives all of a process's streams from one thread: more than 4 flows
# are run as FLOWS/4 pairs of processes of -P 4 each, side by side, their received
# rates summed, so that the baseline can use both cores as the agents do.
iperf() {  # FLOWS [iperf3 options] -> Gb/s
  local flows=$1 procs=1
  shift
  [ "$flows" -gt 4 ] && procs=$((flows / 4))
  iperf_processes "$procs" "$flows" "$@"
}

# iperf_processes PROCS FLOWS [iperf3 options] -> Gb/s: FLOWS streams as PROCS
# pairs of processes (one thread a side each) of FLOWS/PROCS streams, side by side,
# their received rates summed. PROCS divides FLOWS.
iperf_processes() {
  local procs=$1 flows=$2 k
  shift 2
  local servers=() clients=()
  for ((k = 0; k < procs; k++)); do
    on_core 1 ip netns exec $B iperf3 -s -1 -p $((5201 + k)) > /dev/null 2>&1 &
    servers+=($!)
  done
  sleep 0.3
  for ((k = 0; k < procs; k++)); do
    on_core 0 ip netns exec $A iperf3 -c $IPB -p $((5201 + k)) -t 4 -P $((flows / procs)) -J "$@" > "$work/iperf$k.json" &
    clients+=($!)
  done
  wait "${clients[@]}"
  # The client has its server's figures; a server whose client never connected
  # would wait for good.
  kill "${servers[@]}" 2> /dev/null || true
  wait "${servers[@]}" || true
  /usr/bin/python3 -c "
import json, sys
print(f\"{sum(json.load(open(f'$work/iperf{k}.json'))['end']['sum_received']['bits_per_second'] for k in range($procs)) / 1e9:.2f}\")"
}
