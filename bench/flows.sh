#!/usr/bin/env bash
# Many flows, like for like: two agents driving 4 or 16 flows of 8 MiB messages
# between two hosts of the namespace testbed on 1, 2 or 4 I/O threads a side,
# each run next to two iperf3 -N baselines measured beside it:
#   as many threads   as many iperf3 processes a side as the agents have I/O
#                     threads (iperf3 3.12 serves a process's streams from one
#                     thread), the streams split evenly between them
#   4 streams each    processes of -P 4 (the data plane's 16-flow baseline, which
#                     runs 4 threads a side whatever the agents run)
# Usage: bench/flows.sh BUILD_DIR > fragment.md   (root; needs iproute2, iperf3)
set -euo pipefail
build=$(realpath "$1")
tw=$build/cli/tensorwire
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/lib.sh"
NAME=twfl CC=cubic
. "$src/bench/pair_lib.sh"
# As the data plane's throughput rows: their runs spread by a third and more.
REPS=${REPS:-9}
med() { echo "${1%% *}"; }  # "92% (89-96%)" -> "92%"

agents_rate() {  # FLOWS IO_THREADS -> Gb/s; fails when the run did
  local v
  # 12.9 GB a run, as the data plane's rows.
  stream_profile 8MiB "$1" $((1536 / $1)) > "$work/p.yaml"
  agents "$work/p.yaml" "$work/t" --io-threads "$2" > /dev/null || return 1
  v=$(rate "$work/t") || return 1
  rm -rf "$work/t"
  echo "${v%% *}"
}

echo "## Many flows, like for like"
echo
echo "iperf3 3.12 serves all of a process's streams from one thread a side, as an agent's"
echo "I/O thread serves its flows. So the like-for-like baseline for agents on T I/O threads"
echo "a side is T iperf3 -N processes a side, the flows split evenly between them; the data"
echo "plane's table above compares 16 flows with four processes of -P 4 whatever the agents'"
echo "threads, a measure of what the machine moves with four threads a side, shown here too."
echo "Two agents on two hosts of the testbed (\`bench/flows.sh\`), cubic, 8 MiB messages,"
echo "12.9 GB a run; receiver-side rate, median of $REPS runs (range), each agents' run"
echo "between its two baselines; each ratio the median (range) of the ratios of a run to the"
echo "baseline run beside it."
echo
echo "| what | tensorwire | iperf3 -N, as many threads | ratio | iperf3 -N, 4 streams a process | ratio |"
echo "|---|---|---|---|---|---|"
quiet_table_start
# FLOWS:THREADS; the like-for-like baseline has THREADS processes, the other
# FLOWS/4 (the same where they agree: run once).
specs=("4:2" "16:1" "16:2" "16:4")
declare -A ours same wide
for ((k = 0; k < REPS; k++)); do
  for spec in "${specs[@]}"; do
    flows=${spec%%:*} threads=${spec#*:}
    same[$spec]="${same[$spec]:-} $(iperf_processes "$threads" "$flows" -N)"
    ours[$spec]="${ours[$spec]:-} $(agents_rate "$flows" "$threads")"
    if [ $((flows / 4)) != "$threads" ]; then
      wide[$spec]="${wide[$spec]:-} $(iperf_processes $((flows / 4)) "$flows" -N)"
    fi
  done
done
declare -A ratio
for spec in "${specs[@]}"; do
  flows=${spec%%:*} threads=${spec#*:}
  ratio[$spec]=$(paired_ratio "${ours[$spec]}" "${same[$spec]}")
  # shellcheck disable=SC2086  # lists of figures
  if [ -n "${wide[$spec]:-}" ]; then
    wide_cells="$(spread ${wide[$spec]}) Gb/s ($((flows / 4)) of -P 4) | $(paired_ratio "${ours[$spec]}" "${wide[$spec]}")"
  else
    wide_cells="the same | ${ratio[$spec]}"
  fi
  # shellcheck disable=SC2086
  echo "| $flows flows, $threads I/O thread$([ "$threads" = 1 ] || echo s) a side | $(spread ${ours[$spec]}) Gb/s |" \
    "$(spread ${same[$spec]}) Gb/s ($threads of -P $((flows / threads))) | ${ratio[$spec]} | $wide_cells |"
done
table_load
echo
echo "Against iperf3 on as many threads: $(med "${ratio[4:2]}") with 4 flows on two threads a side, and with 16"
echo "flows $(med "${ratio[16:1]}") on one thread, $(med "${ratio[16:2]}") on two and $(med "${ratio[16:4]}") on four. On this 2-core machine both"
echo "ends share the cores, and on one thread a side agents and iperf3 alike swing between"
echo "a slow and a fast rate from run to run; the slow runs switch threads several times as"
echo "often as the fast ones (docs/dataplane-analyses.md, 16 flows)."
