#!/usr/bin/env bash
# Agents sharing cores: the I/O threads' scheduling policy (--sched-batch) where a
# sender and its receiver run on the same cores, each figure next to its baseline
# measured in the same run:
#   throughput  16 flows of 8 MiB messages between two hosts of the namespace
#               testbed, two I/O threads a side, at the normal policy and at
#               SCHED_BATCH, each with and without the look at dry sockets
#               (--spin-us 0), against four iperf3 processes of -P 4 -N; per GB
#               received in each run, the whole machine's context switches and the
#               segments the sending host took in (its acknowledgements)
#   timing      the bundled 4-rank ResNet-50 ring replayed by 4 agents on this
#               machine (replay --local 4), both policies: iteration time, and the
#               error of iterations and messages against the timing model
# Usage: bench/shared_cores.sh BUILD_DIR > fragment.md   (root; needs iproute2, iperf3)
set -euo pipefail
build=$(realpath "$1")
tw=$build/cli/tensorwire
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/lib.sh"
NAME=twsc CC=cubic
. "$src/bench/pair_lib.sh"
# As the data plane's throughput rows: their runs spread by a third and more.
REPS=${REPS:-9}
RING_REPS=${RING_REPS:-5}

switches() { awk '/^ctxt/ {print $2}' /proc/stat; }
received() { ip netns exec $B awk 'NR > 2 {gsub(":", " "); s += $2} END {printf "%.0f\n", s}' /proc/net/dev; }
# The TCP segments host A (the sender) has taken in: its acknowledgements.
acks() { ip netns exec $A awk '$1 == "Tcp:" {if (n++) print $i; else for (i = 1; i <= NF; i++) if ($i == "InSegs") break}' /proc/net/snmp; }
# counted COMMAND...: COMMAND's output (a rate), then the context switches of the
# whole machine and the segments A took in, per GB that B received while it ran;
# nothing when COMMAND failed or printed nothing (the caller's read then fails,
# and with it the script).
counted() {
  local s0 r0 a0 v s1 r1 a1
  s0=$(switches) r0=$(received) a0=$(acks)
  v=$("$@") || return 1
  [ -n "$v" ] || return 1
  s1=$(switches) r1=$(received) a1=$(acks)
  echo "$v $(((s1 - s0) * 1000000000 / (r1 - r0 + 1))) $(((a1 - a0) * 1000000000 / (r1 - r0 + 1)))"
}
agents_rate() {  # [agent options] -> Gb/s
  local v
  stream_profile 8MiB 16 96 > "$work/p.yaml"
  agents "$work/p.yaml" "$work/t" --io-threads 2 "$@" > /dev/null || return 1
  v=$(rate "$work/t") || return 1
  rm -rf "$work/t"
  echo "${v%% *}"
}

echo "## Agents sharing cores"
echo
echo "Where one machine runs both ends of a flow (the namespace testbed, \`replay --local\`,"
echo "several ranks a host), a sender and its receiver share cores, and at the normal"
echo "policy a receiver woken by arriving bytes takes the core from the sender that queued"
echo "them. \`--sched-batch\` runs the agents' I/O threads at SCHED_BATCH: woken, they wait"
echo "for the running thread to sleep or end its turn (on an idle core they run at once)."
echo "Both hosts run cubic (\`bench/shared_cores.sh\`)."
echo
echo "16 flows of 8 MiB messages between two hosts of the testbed, two I/O threads a"
echo "side, against four iperf3 -N processes of -P 4 (as the data plane's 16-flow rows):"
echo "receiver-side rate, median of $REPS runs (range), the five alternating; each ratio"
echo "the median of the ratios of a run to the run beside it. Each policy with the spin of"
echo "agents started by hand (\`--spin-us 20\`) and without it (\`--spin-us 0\`, as \`run"
echo "--testbed\` chooses here: two agents on two cores). Per GB received,"
echo "over each run: the whole machine's context switches (/proc/stat), and the TCP segments"
echo "the sending host took in, its acknowledgements (/proc/net/snmp InSegs)."
echo
echo "| what | rate | ratio to iperf3 | context switches per GB | acknowledgements per GB |"
echo "|---|---|---|---|---|"
quiet_table_start
declare -A rates switches_of acks_of
variants=("iperf:" "normal:" "normal0:--spin-us 0" "batch:--sched-batch" "batch0:--sched-batch --spin-us 0")
for ((k = 0; k < REPS; k++)); do
  for spec in "${variants[@]}"; do
    name=${spec%%:*} opts=${spec#*:}
    if [ "$name" = iperf ]; then
      read -r v c a < <(counted iperf 16 -N)
    else
      # shellcheck disable=SC2086  # the variant's options, as words
      read -r v c a < <(counted agents_rate $opts)
    fi
    rates[$name]="${rates[$name]:-} $v" switches_of[$name]="${switches_of[$name]:-} $c" acks_of[$name]="${acks_of[$name]:-} $a"
  done
done
row() {  # NAME LABEL
  local ratio=""
  [ "$1" = iperf ] || ratio=$(paired_ratio "${rates[$1]}" "${rates[iperf]}")
  # shellcheck disable=SC2086  # lists of figures
  echo "| $2 | $(spread ${rates[$1]}) Gb/s | $ratio | $(spread ${switches_of[$1]}) | $(spread ${acks_of[$1]}) |"
}
row iperf "iperf3 -N, 4 processes of -P 4"
row normal "tensorwire, normal policy"
row normal0 "tensorwire, normal policy, \`--spin-us 0\`"
row batch "tensorwire, \`--sched-batch\`"
row batch0 "tensorwire, \`--sched-batch --spin-us 0\`"
table_load
echo
echo "Run for run: without the spin against with it, $(paired_ratio "${rates[normal0]}" "${rates[normal]}") at the normal policy and"
echo "$(paired_ratio "${rates[batch0]}" "${rates[batch]}") at SCHED_BATCH; SCHED_BATCH against the normal policy, $(paired_ratio "${rates[batch]}" "${rates[normal]}") with the"
echo "spin and $(paired_ratio "${rates[batch0]}" "${rates[normal0]}") without."
echo
echo "The look at a dry socket (\`--spin-us\`: a flow whose socket ran dry looks again for up"
echo "to 20 us before it sleeps) saves a wake-up where a core would otherwise idle; here"
echo "four I/O threads share two cores, and a looking thread would hold one that another I/O"
echo "thread, or the bridge's work for a sender, is waiting for. So a flow looks only while"
echo "the machine has a core to spare: no more threads runnable than cores online, as the"
echo "kernel counts them in /proc/loadavg, read at most once a millisecond by each I/O thread"
echo "(spare_cores.hpp; the run summaries count the looks and the looks skipped). At the"
echo "normal policy the senders took a median"
echo "$(median ${acks_of[normal]}) acknowledgements per GB with the spin and $(median ${acks_of[normal0]}) without (iperf3's $(median ${acks_of[iperf]})), and the"
echo "machine switched threads $(median ${switches_of[normal]}) and $(median ${switches_of[normal0]}) times per GB. An agent knows nothing else of"
echo "the others on its machine; before it asked the kernel (2026-12-06, in this table's run"
echo "before, from a load of 0.37), agents started by hand looked here all the same, and moved 84% (79-94%)"
echo "of iperf3 with the spin against 94% (86-98%) without. The replays (\`replay --local\`,"
echo "\`run --local\`, \`run --testbed\`) still turn the spin off where a machine's agents are"
echo "as many as its cores or their I/O threads outnumber them, the spin before deadlines"
echo "with it. Without the spin a flow that runs dry amid a long message also naps out of epoll"
echo "(\`--read-nap-us\`, Naps above) rather than being woken by each arrival, which is most"
echo "of what the \`--spin-us 0\` rows switch threads less for."
echo
echo "Where the normal policy's rate goes (2026-12-06, the 2-core AMD EPYC virtual machine,"
echo "Linux 6.18.44-fc-v1272, cubic, 1-minute load at most 0.5 before each set of runs;"
echo "perf record -a of sched_switch and sched_wakeup for one second of a run, from a load"
echo "of 0.00): the agents' threads were switched out 15 000 times a second, 7 700 of them"
echo "asleep (the receiving threads, in epoll_wait) and 7 400 still runnable (the sending"
echo "threads, preempted). Each sending thread woke the receiving thread it fed on its own"
echo "core, 2 600-3 100 times a second: the bridge runs the receiving side's TCP input in the"
echo "sender's system call, the wake-up lands there, and the receiver preempts the sender"
echo "to read a few segments. iperf3's eight processes were switched out 2 900 times a"
echo "second. A receiver that reads as soon as bytes land keeps the window opening, and is"
echo "acknowledged more often: the table's last column. The machine's CPU was otherwise"
echo "spent alike (user 1-6%, system 65-73%, softirq 20-28% of both cores, /proc/stat). In"
echo "the first 8 paired rounds of the option (from a load of 0.47), 16 flows moved 44.0"
echo "Gb/s (41.0-47.1) at SCHED_BATCH against 41.0"
echo "(35.7-43.4) at the normal policy, faster in 8 of 8, 94% (81-97%) of iperf3 against"
echo "82% (76-91%). One flow of 1 MiB or of 4 KiB messages, where each side has a core to"
echo "itself most of the time, did not change beyond the noise (5-6 paired rounds)."
echo
echo "What it can cost: a thread woken on a busy core waits up to a scheduler slice, and so"
echo "do the messages and ops behind it. The bundled ResNet-50 ring of 4 ranks replayed by"
echo "4 agents on this machine (\`replay --local 4 traffic_profiles/resnet50-ring-4.yaml"
echo "--iterations 20\`), both policies alternating, median of $RING_REPS runs (range); errors"
echo "are \`compare\`'s against the timing model at the rates the replay reached"
echo "(docs/fidelity.md), p50 over the run's iterations or messages:"
echo
echo "| policy | iteration time | iteration error | message completion error |"
echo "|---|---|---|---|"
quiet_table_start
ring() {  # [options] -> "iteration_ms iteration_error_% message_error_%"
  rm -rf "$work/r"
  "$tw" replay --local 4 "$src/traffic_profiles/resnet50-ring-4.yaml" --out "$work/r" --iterations 20 "$@" > /dev/null
  "$tw" compare "$src/traffic_profiles/resnet50-ring-4.yaml" "$work/r" --json | /usr/bin/python3 -c '
import json, statistics, sys
j = json.load(sys.stdin)
print("%.1f %.1f %.1f" % (statistics.median(j["replay_iteration_ns"]) / 1e6, j["iteration_error_pct"]["p50"],
                          j["message_completion_error_pct"]["p50"]))'
  rm -rf "$work/r"
}
declare -A it err msg
for ((k = 0; k < RING_REPS; k++)); do
  for policy in normal batch; do
    opts=()
    [ $policy = normal ] || opts=(--sched-batch)
    read -r a b c < <(ring "${opts[@]}")
    it[$policy]="${it[$policy]:-} $a" err[$policy]="${err[$policy]:-} $b" msg[$policy]="${msg[$policy]:-} $c"
  done
done
for policy in normal batch; do
  label="normal"
  [ $policy = normal ] || label="\`--sched-batch\`"
  # shellcheck disable=SC2086  # lists of figures
  echo "| $label | $(spread ${it[$policy]}) ms | $(spread_signed ${err[$policy]})% | $(spread_signed ${msg[$policy]})% |"
done
table_load
echo
# shellcheck disable=SC2086  # lists of figures
echo "In this table the ring's iterations took a median $(median ${it[batch]}) ms at SCHED_BATCH against"
# shellcheck disable=SC2086
echo "$(median ${it[normal]}) ms at the normal policy, with median iteration errors of $(median ${err[batch]})% and $(median ${err[normal]})%."
echo "The option stays off unless asked for, so that by default a woken thread takes its"
echo "core at once, as the replayed job's threads would; the run summaries say whether it"
echo "ran (\`sched_batch_applied\`). Where an idle core waits for each woken thread, the two"
echo "policies run it alike: there is no thread to preempt."
