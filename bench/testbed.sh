#!/usr/bin/env bash
# Replay throughput across the namespace testbed (through the bridge), against
# iperf3 between the same namespaces in the same run; and the clock-sync error
# bounds of agents in the testbed (one kernel clock: the true offset is zero).
# Both hosts run the TCP congestion control CC (default cubic), agents and iperf3
# alike (lib.sh, namespace_cc).
# Usage: [CC=NAME] bench/testbed.sh BUILD_DIR > fragment.md   (root)
set -euo pipefail
build=$(realpath "$1")
tw=$build/cli/tensorwire
work=$(mktemp -d /tmp/tw-bench-tb.XXXXXX)
NAME=twbench
trap '"$tw" testbed down --name $NAME > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
REPS=${REPS:-5}
. "$(dirname "$0")/lib.sh"

"$tw" testbed down --name $NAME > /dev/null 2>&1 || true
"$tw" testbed up --hosts 2 --name $NAME > /dev/null
CC=${CC:-cubic}
namespace_cc "$CC" $NAME-h0 $NAME-h1
A1=$("$tw" testbed status --name $NAME --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["host_list"][1]["address"])')

stream() {  # SIZE COUNT FLOWS
  echo "version: 1"; echo "iterations: $2"; echo "iteration_barrier: false"
  echo "ranks: [{id: 0}, {id: 1}]"; echo "flows:"
  for ((f = 0; f < $3; f++)); do echo "  - {id: f$f, src: 0, dst: 1}"; done
  echo "ops:"
  for ((f = 0; f < $3; f++)); do echo "  - {id: s$f, type: send, flow: f$f, bytes: $1}"; done
}
rate() {  # RUN_DIR -> Gb/s at the receiver
  "$tw" results rates "$1" --json | /usr/bin/python3 -c 'import json, sys; print("%.2f" % (json.load(sys.stdin)["ranks"][1]["bits_per_second"] / 1e9))'
}
iperf() {  # FLOWS -> Gb/s
  ip netns exec $NAME-h1 iperf3 -s -1 -p 5202 > /dev/null 2>&1 &
  local ps=$!
  sleep 0.3
  ip netns exec $NAME-h0 iperf3 -c "$A1" -p 5202 -t 4 -N -P "$1" -J > "$work/iperf.json"
  wait $ps || true
  /usr/bin/python3 -c "import json; j=json.load(open('$work/iperf.json')); print(f\"{j['end']['sum_received']['bits_per_second']/1e9:.2f}\")"
}

echo "## Testbed"
echo
echo "Two hosts of the namespace testbed (\`tensorwire testbed up --hosts 2\`, no shaping),"
echo "traffic through the bridge; \`tensorwire run --testbed 2\` (controller in the root"
echo "namespace, one agent per host) against \`iperf3 -N\` between the same namespaces,"
echo "both hosts under the TCP congestion control $CC (Data plane, above)."
echo "Receiver-side rate, median of $REPS runs (range), alternating; each ratio the median"
echo "(range) of the ratios of a run to the iperf3 run beside it."
echo
echo "| what | tensorwire run --testbed | iperf3 -N | ratio |"
echo "|---|---|---|---|"
table_start
bounds=()
# 12.6 GB a run, about as long as iperf3's 4 s (docs/dataplane-analyses.md, Runs as long
# as iperf3's).
for spec in "8MiB 1500 1" "8MiB 384 4"; do
  set -- $spec
  stream "$1" "$2" "$3" > "$work/p.yaml"
  ours=() theirs=()
  for ((k = 0; k < REPS; k++)); do
    theirs+=("$(iperf "$3")")
    rm -rf "$work/r"
    "$tw" run "$work/p.yaml" --testbed 2 --name $NAME --out "$work/r" --json --spin-us 0 > "$work/r.json"
    ours+=("$(rate "$work/r")")
    bounds+=("$(/usr/bin/python3 -c "import json; j=json.load(open('$work/r.json')); print(max(a['clock_bound_ns'] for a in j['agents'])/1e3, max(abs(a['clock_offset_ns']) for a in j['agents'])/1e3)")")
  done
  what="$3 flow(s) (iperf3 -P $3), $1 messages"
  echo "| $what | $(spread "${ours[@]}") Gb/s | $(spread "${theirs[@]}") Gb/s | $(paired_ratio "${ours[*]}" "${theirs[*]}") |"
done
table_load
echo
echo "A ratio above 100% is no win: iperf3 -P drives its streams from one thread a side, and"
echo "under a pacing congestion control an agent's incoming flow wakes for 128 KiB where"
echo "iperf3's receiver wakes for every few segments (Data plane, above)."
echo
b=$(printf '%s\n' "${bounds[@]}" | awk '{print $1}')
o=$(printf '%s\n' "${bounds[@]}" | awk '{print $2}')
echo "Clock synchronisation across the testbed's namespaces ($((2 * REPS)) runs, 2 agents each):"
echo "largest error bound per run, median $(median $b) us (max $(maximum $b) us); largest"
within=$(printf '%s\n' "${bounds[@]}" | awk '$2 > $1 {bad = 1} END {print bad ? "not always" : "always"}')
echo "estimated offset, median $(median $o) us (max $(maximum $o) us); each run's largest offset was"
echo "$within within its run's largest bound of the true offset, zero (one kernel clock)."
