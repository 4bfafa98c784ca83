#!/usr/bin/env bash
# Naps (--read-nap-us): two agents driving 16 flows of 8 MiB messages between two
# hosts of the namespace testbed on two I/O threads a side with no spin (as replays
# run agents whose threads outnumber the machine's cores), with their receiving
# flows' naps (the default) and without (--read-nap-us 0), each run next to
# iperf3 -N as 4 processes of -P 4; unpinned, and each side on a core of its own
# (taskset: rank 0 and the iperf3 clients on core 0, rank 1 and the servers on
# core 1), where every byte crosses between cores as between hosts.
# Usage: bench/naps.sh BUILD_DIR > fragment.md   (root; needs iproute2, iperf3)
set -euo pipefail
build=$(realpath "$1")
tw=$build/cli/tensorwire
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/lib.sh"
NAME=twnp CC=cubic
. "$src/bench/pair_lib.sh"
REPS=${REPS:-7}
med() { echo "${1%% *}"; }  # "92% (89-96%)" -> "92%"
ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }

# agents_run NAP_US -> "Gb/s switches naps": rank 1 (the receiver) on core 1 and
# rank 0 on core 0 when PIN=1; the machine's context switches over the run, and
# the receiver's naps. Fails when the run did.
agents_run() {
  local out=$work/t c0 v
  mkdir -p "$out"
  printf 'token: "bench"\nranks:\n  - {rank: 0, host: "%s", port: 17100}\n  - {rank: 1, host: "%s", port: 17101}\n' "$IPA" "$IPB" > "$out/roster.yaml"
  c0=$(ctxt)
  on_core 1 ip netns exec $B "$tw" agent --rank 1 --profile "$work/p.yaml" --roster "$out/roster.yaml" --out "$out" --quiet \
    --machine-agents 2 --io-threads 2 --spin-us 0 --read-nap-us "$1" &
  local pb=$!
  on_core 0 ip netns exec $A "$tw" agent --rank 0 --profile "$work/p.yaml" --roster "$out/roster.yaml" --out "$out" --quiet \
    --machine-agents 2 --io-threads 2 --spin-us 0 --read-nap-us "$1" || return 1
  wait $pb || return 1
  v=$(rate "$out") || return 1
  echo "${v%% *} $(($(ctxt) - c0)) $(/usr/bin/python3 -c "import json; print(json.load(open('$out/rank-1.json'))['counters']['naps'])")"
  rm -rf "$out"
}
iperf_run() {  # -> "Gb/s switches"
  local c0 v
  c0=$(ctxt)
  v=$(iperf_processes 4 16 -N)
  echo "$v $(($(ctxt) - c0))"
}

echo "## Naps"
echo
echo "Where a machine has no core to spare, a receiving flow that sleeps in epoll is woken by"
echo "the next segment that lands, takes the core from the sender that queued it, and reads"
echo "the few tens of microseconds' worth it finds. With naps (\`--read-nap-us\`, 200 us by"
echo "default; only where agents run without a spin, their threads crowding the cores, and"
echo "not under a pacing congestion control) a flow that ran dry amid a long message sleeps"
echo "with its I/O thread's other"
echo "flows, out of epoll, until a nap after the last of them ran dry, and reads what came"
echo "meanwhile; it naps only while the rest of its message cannot arrive within two naps"
echo "at its rate so far (docs/dataplane-analyses.md, Naps). Two agents on two hosts of the"
echo "testbed (\`bench/naps.sh\`), cubic, 16 flows of 8 MiB messages, 12.9 GB a run, two I/O"
echo "threads a side and no spin (as \`run --testbed\` runs agents whose threads outnumber the"
echo "cores); iperf3 -N as four processes of -P 4 a side beside each. Receiver-side rate,"
echo "median of $REPS runs (range), the three alternating; each ratio the median (range) of"
echo "the ratios of a run to the iperf3 run beside it; the machine's context switches a run"
echo "(/proc/stat) and the receiving agent's naps, medians."
echo
echo "| placement | naps (default) | ratio | switches, naps | --read-nap-us 0 | ratio | switches | iperf3 -N, 4 of -P 4 | switches |"
echo "|---|---|---|---|---|---|---|---|---|"
quiet_table_start
stream_profile 8MiB 16 96 > "$work/p.yaml"
declare -A R
for PIN in 0 1; do
  napped=() awake=() base=() sw_n=() sw_a=() sw_b=() naps=()
  for ((k = 0; k < REPS; k++)); do
    v=$(iperf_run)
    read -r g s <<< "$v"
    base+=("$g") sw_b+=("$s")
    v=$(agents_run 200)
    read -r g s n <<< "$v"
    napped+=("$g") sw_n+=("$s") naps+=("$n")
    v=$(agents_run 0)
    read -r g s _ <<< "$v"
    awake+=("$g") sw_a+=("$s")
  done
  where="unpinned"
  [ "$PIN" = 0 ] || where="each side on a core of its own"
  R[$PIN n]=$(paired_ratio "${napped[*]}" "${base[*]}") R[$PIN a]=$(paired_ratio "${awake[*]}" "${base[*]}")
  R[$PIN na]=$(paired_ratio "${napped[*]}" "${awake[*]}") R[$PIN sn]=$(median "${sw_n[@]}") R[$PIN sa]=$(median "${sw_a[@]}")
  echo "| $where | $(spread "${napped[@]}") Gb/s | ${R[$PIN n]} | ${R[$PIN sn]}, $(median "${naps[@]}") |" \
    "$(spread "${awake[@]}") Gb/s | ${R[$PIN a]} | ${R[$PIN sa]} | $(spread "${base[@]}") Gb/s | $(median "${sw_b[@]}") |"
done
PIN=0
table_load
echo
echo "Run for run, naps against none beside them: ${R[0 na]} unpinned and ${R[1 na]}"
echo "with each side on a core of its own; the machine switched threads"
echo "${R[0 sn]} against ${R[0 sa]} times a run unpinned, ${R[1 sn]} against ${R[1 sa]} pinned."
