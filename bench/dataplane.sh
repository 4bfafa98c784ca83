#!/usr/bin/env bash
# Data-plane benchmarks between two agents on two hosts of the namespace testbed
# (`tensorwire testbed up --hosts 2`: namespaces joined through a bridge), each
# next to its baseline measured in the same run:
#   throughput     one flow of 1, 8, 64 MiB messages vs iperf3; 4 and 16 flows vs
#                  iperf3 -P 4/16, on one I/O thread and on two (--io-threads 2);
#                  one flow of 1 MiB with each side pinned to a core, and vs a
#                  blocking pair; one flow each way vs iperf3 --bidir and two iperf3
#   small messages 4 KiB and 64 KiB messages per second vs a blocking write loop;
#                  64 KiB with each side pinned to a core; with every 16th message stamped
#   start error    planned start to first write, p50 and p99, with and without spin,
#                  at normal and at real-time priority pinned to a core
#   fidelity       a bundled profile on a shaped link, communication- and
#                  compute-bound, vs its lower bound and timing model
#   pacing         the rows most affected, under BBR (a pacing congestion control)
# Every host of the testbed runs the TCP congestion control CC (default cubic,
# Linux's own default): agents and baselines alike take it from their namespace.
# Usage: [CC=NAME] bench/dataplane.sh BUILD_DIR > fragment.md   (root; needs iproute2, iperf3)
set -euo pipefail
build=$(realpath "$1")
tw=$build/cli/tensorwire
pair=$build/bench/blocking_pair
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/lib.sh"
NAME=twdp
# Both hosts' congestion control (lib.sh, namespace_cc).
CC=${CC:-cubic}
set_cc() { namespace_cc "$1" $A $B; }
. "$src/bench/pair_lib.sh"

shape() {  # shape RATE: both hosts' links, both directions; "off" removes
  if [ "$RATE" = off ]; then
    "$tw" testbed up --hosts 2 --name $NAME > /dev/null
  else
    "$tw" testbed up --hosts 2 --name $NAME --rate "$RATE" > /dev/null
  fi
  set_cc "$CC"
}

# Run-to-run noise on a shared virtual machine is large (a factor of two between
# runs of iperf3 itself), so each figure is the median of REPS runs that alternate
# with the baseline's, shown with its range, and each ratio the median of the
# REPS ratios of a run to the baseline run beside it (paired_ratio).
REPS=${REPS:-5}
# The throughput rows, whose runs spread most (by a third and more), take 9: with
# 5, the four-flow row's median ratio moved 94-98% between runs of the table.
TREPS=${TREPS:-9}

# The section's opening sums up its tables, so it is printed last, above them
# (the tables and their prose go to $body meanwhile). Each figure is the median
# ratio of a row below; the keys are those the tables store.
declare -A T TR TB S LOOP LOOP_STAMPED PACED_OURS PACED_BASE  # rows: median ratio (range) to the baseline; TR and TB,
# the throughput rows' median rates, the agents' and iperf3 -N's
med() { echo "${1%% *}"; }  # "92% (89-96%)" -> "92%"
intro() {
  echo "## Data plane"
  echo
  echo "Two agents on two hosts of the namespace testbed (\`tensorwire testbed up --hosts 2\`:"
  echo "network namespaces joined through a bridge; \`bench/dataplane.sh\`)."
  echo
  echo "Where: the tables are regenerated on whatever machine runs \`bench/run.sh\`, named at"
  echo "the end of this section; each table starts once the machine is quiet (1-minute load"
  echo "${TW_BENCH_MAX_LOAD:-0.5} or less, or after ten minutes without) and says its load. Both hosts run the"
  echo "TCP congestion control $CC (\`CC=NAME bench/dataplane.sh\` chooses another), agents"
  if [ "$PACED_MEASURED" = 1 ]; then
    echo "and baselines alike; a last table repeats the rows it moves most under $PACED (Under"
    echo "a pacing congestion control, below)."
  else
    echo "and baselines alike."
  fi
  echo "In the tables below: one flow at $(med "${T[1MiB 1]}"), $(med "${T[8MiB 1]}") and $(med "${T[64MiB 1]}") of iperf3 -N with 1,"
  echo "8 and 64 MiB messages ($(med "${T[1MiB 1 pin]}") with 1 MiB, each side pinned; $(med "$PAIR") of a blocking"
  echo "pair); four flows at $(med "${T[8MiB 4]}") ($(med "${T[8MiB 4 2]}") with the agents' two I/O threads, against"
  echo "iperf3's one: Reading the ratios); 16 flows at $(med "${T[8MiB 16]}") of four iperf3 processes,"
  echo "$(med "${T[8MiB 16 2]}") with two I/O threads and $(med "${T[8MiB 16 2 nospin]}") with two and no spin; 64 KiB"
  echo "messages at $(med "${S[65536 plain]}") of the plain blocking loop and $(med "${S[65536 stamped]}") of the timestamped"
  echo "one ($(med "${S[65536 every16]}") of the plain loop with every 16th message stamped); 4 KiB messages"
  echo "at $(med "${S[4096 plain]}") and $(med "${S[4096 stamped]}") ($(med "${S[4096 every16]}") with every 16th stamped; the kernel's"
  echo "timestamps alone take the loop to $LOOP4); and the start p99 at $START_P99 us ($START_P99_RT"
  echo "at real-time priority, pinned), with a 500 us spin."
  echo
  echo "The analyses behind these rows (where the agent's time went, what changed in it"
  echo "because of them, what was tried and not kept), each dated and naming its machine and"
  echo "load, are in docs/dataplane-analyses.md."
  echo
}
PACED=${PACED:-bbr} PACED_MEASURED=0
body=$work/body.md
exec 3>&1 > "$body"
echo "### Throughput"
echo
echo "Receiver-side rate: median of $TREPS runs (range), alternating with the baselines."
echo "Each ratio is the median (range) of the $TREPS ratios of a run to the baseline run"
echo "beside it: this machine changes speed from one minute to the next, and a ratio of"
echo "neighbours cancels that where a ratio of two medians does not."
echo "The agents set TCP_NODELAY, as Gloo, NCCL and the other frameworks they replay do;"
echo "the like-for-like baseline is therefore \`iperf3 -N\` (TCP_NODELAY). Plain iperf3"
echo "(Nagle's algorithm on) is shown too, a second measure of what the machine moves at"
echo "the time (the ratio against it is no measure of the replayer)."
echo
echo "| what | tensorwire | iperf3 -N (same socket options) | ratio | iperf3 (Nagle on) | ratio |"
echo "|---|---|---|---|---|---|"
quiet_table_start
pin_option() { [ "$PIN" = 1 ] && echo --pin; }
# The agents run with their default spin (20 us: before a deadline, and at a flow
# whose socket ran dry before it sleeps, while the machine has a core to spare)
# unless a row says --spin-us 0.
SPIN=()
tput() {  # SIZE FLOWS COUNT IO_THREADS -> Gb/s; fails (and the script with it) when the run did
  local v
  stream_profile "$1" "$2" "$3" > "$work/p.yaml"
  # shellcheck disable=SC2046  # one option or none
  agents "$work/p.yaml" "$work/t" --io-threads "$4" $(pin_option) "${SPIN[@]}" || return 1
  v=$(rate "$work/t") || return 1
  rm -rf "$work/t"
  echo "${v%% *}"
}
# Every run carries 12.6-12.9 GB, 2-7 s at these machines' rates, about as long as
# iperf3's 4 s: the rate of either switches between steady states that last tenths
# of a second (docs/dataplane-analyses.md, Runs as long as iperf3's), so a shorter run
# draws one or two.
for spec in "1MiB 1 12000 1" "1MiB 1 12000 1 pin" "8MiB 1 1500 1" "64MiB 1 192 1" "8MiB 4 384 1" "8MiB 4 384 1 nospin" \
  "8MiB 4 384 2" "8MiB 16 96 1" "8MiB 16 96 2" "8MiB 16 96 2 nospin"; do
  set -- $spec
  PIN=0 SPIN=()
  [ "${5:-}" = pin ] && PIN=1
  [ "${5:-}" = nospin ] && SPIN=(--spin-us 0)
  ours=() nodelay=() nagle=()
  for ((k = 0; k < TREPS; k++)); do
    nodelay+=("$(iperf "$2" -N)")
    ours+=("$(tput "$1" "$2" "$3" "$4")")
    nagle+=("$(iperf "$2")")
  done
  if [ "$2" = 1 ]; then
    what="1 flow, $1 messages"
  elif [ "$2" -gt 4 ]; then
    what="$2 flows ($(($2 / 4)) iperf3 processes of -P 4), $1 messages"
  else
    what="$2 flows (iperf3 -P $2), $1 messages"
  fi
  [ "$4" = 1 ] || what="$what, --io-threads $4"
  [ "$PIN" = 0 ] || what="$what, each side pinned to a core"
  [ ${#SPIN[@]} -eq 0 ] || what="$what, --spin-us 0"
  key="$1 $2"
  [ "$4" = 1 ] || key="$key $4"
  [ -z "${5:-}" ] || key="$key $5"
  T[$key]=$(paired_ratio "${ours[*]}" "${nodelay[*]}") TR[$key]=$(median "${ours[@]}") TB[$key]=$(median "${nodelay[@]}")
  echo "| $what | $(spread "${ours[@]}") Gb/s | $(spread "${nodelay[@]}") Gb/s | ${T[$key]} |" \
    "$(spread "${nagle[@]}") Gb/s | $(paired_ratio "${ours[*]}" "${nagle[*]}") |"
done
PIN=0
table_load
echo
echo "Reading the ratios: where the two hosts share the machine's cores, each agent (with"
echo "its recorder) shares them with the other and with the bridge's softirq work. Ratios"
echo "above 100% are not wins. iperf3 3.12 drives all of a process's streams from one thread"
echo "a side, so four flows on the agents' one I/O thread are like for like with iperf3 -P 4:"
echo "${T[8MiB 4]}. With two I/O threads a side (\`--io-threads 2\`) the agents can use two"
echo "cores for four flows and iperf3 -P 4 cannot: ${TR[8MiB 4 2]} Gb/s, ${T[8MiB 4 2]}, not a like-for-like"
echo "comparison. 16 flows are compared with 4 iperf3 processes of 4 streams each, which use"
echo "both cores: ${T[8MiB 16]} with one I/O thread, ${T[8MiB 16 2]} with two, and ${T[8MiB 16 2 nospin]} with two and"
echo "no spin (\`--spin-us 0\`, as \`run --testbed\` runs agents that are as many as the"
echo "machine's cores, or whose I/O threads outnumber them). With two I/O threads a side the"
echo "agents' four busy threads leave no core to spare, and a flow whose socket ran dry"
echo "looks again only while one is (Agents sharing cores, below); without a spin it naps"
echo "amid a long message instead of being woken by each arrival (Naps, below). So those two"
echo "rows differ in the spin before deadlines, which a stream without compute hardly uses, and"
echo "in the naps (they are not paired with each other). Where the 16-flow rows lose:"
echo "docs/dataplane-analyses.md, 16 flows."
echo "Against iperf3 on as many threads a side as the agents: Many flows, like for like, below."
echo "Without \`--io-threads\` an agent takes one I/O thread per 4 flows it drives, up to its"
echo "share of its machine's cores (the cores it may use over the agents on the machine):"
echo "the two agents here, sharing two cores, one each, as in the rows on one thread; an"
echo "agent of 16 flows with two cores to itself, two. The rows above pass the count."
echo
pair_rate() {  # MODE SIZE COUNT [LOWAT [CHUNK]] -> msg/s ("" for no LOWAT)
  # shellcheck disable=SC2086  # an empty LOWAT or CHUNK is no argument
  on_core 1 ip netns exec $B "$pair" recv 17200 "$2" "$3" ${4:-} > "$work/pair.out" &
  local pr=$!
  # shellcheck disable=SC2086
  on_core 0 ip netns exec $A "$pair" "$1" $IPB 17200 "$2" "$3" ${5:-} 2> /dev/null
  wait $pr
  cat "$work/pair.out"
}
echo "An agent's incoming flow asks for the rest of its message, up to 128 KiB"
echo "(SO_RCVLOWAT), before it wakes where its connection's congestion control paces (BBR),"
echo "and reads as iperf3's receiver does where it does not (cubic): while fewer bytes than"
echo "the mark wait, Linux acknowledges every arrival of more than a segment at once, which"
echo "costs cubic's bursts more than the wake-ups it saves, and paced bytes nothing"
echo "(docs/dataplane-analyses.md, The low-water mark). The blocking pair (bench/blocking_pair)"
echo "writes as the agents do (128 KiB a call, from a buffer aligned to a cache line) and"
echo "reads 256 KiB a call, without and with the"
echo "low-water mark. One flow of 1 MiB messages; median of $REPS runs (range), ratios"
echo "paired, the runs alternating:"
echo
echo "| what | tensorwire | blocking pair | ratio | blocking pair, SO_RCVLOWAT 128 KiB | ratio |"
echo "|---|---|---|---|---|---|"
ours=() plain=() lowat=() PIN=0 SPIN=()
quiet_table_start
gbps() { awk '{printf "%.2f", $1 * 8 * 1048576 / 1e9}'; }  # 1 MiB messages/s -> Gb/s
for ((k = 0; k < REPS; k++)); do
  plain+=("$(pair_rate "send" 1048576 12000 "" 131072 | gbps)")
  ours+=("$(tput 1MiB 1 12000 1)")
  lowat+=("$(pair_rate "send" 1048576 12000 131072 131072 | gbps)")
done
PAIR=$(paired_ratio "${ours[*]}" "${plain[*]}")
echo "| 1 flow, 1MiB messages | $(spread "${ours[@]}") Gb/s | $(spread "${plain[@]}") Gb/s | $PAIR |" \
  "$(spread "${lowat[@]}") Gb/s | $(paired_ratio "${ours[*]}" "${lowat[*]}") |"
table_load
echo
# Both directions at once, as each rank of a ring sends to one neighbour while it
# receives from the other: one flow each way, each agent sending and receiving on
# its one I/O thread. Baselines: iperf3 --bidir (one process a side, one thread
# for both directions, as an agent) and two iperf3 processes, one each way.
bidir_profile() {  # SIZE COUNT > profile
  echo "version: 1"; echo "iterations: $2"; echo "iteration_barrier: false"
  echo "ranks: [{id: 0}, {id: 1}]"
  echo "flows: [{id: f0, src: 0, dst: 1}, {id: f1, src: 1, dst: 0}]"
  echo "ops: [{id: s0, type: send, flow: f0, bytes: $1}, {id: s1, type: send, flow: f1, bytes: $1}]"
}
bidir_ours() {  # SIZE COUNT -> Gb/s: the bytes both ranks received over the span
  # from the first byte either received to the last (a direction that finished
  # first leaves the other alone on the link, which iperf3's timed runs never do)
  bidir_profile "$1" "$2" > "$work/b.yaml"
  agents "$work/b.yaml" "$work/b"
  "$tw" results rates "$work/b" --json | /usr/bin/python3 -c '
import json, sys
ranks = json.load(sys.stdin)["ranks"]
span = max(r["last_ns"] for r in ranks) - min(r["first_ns"] for r in ranks)
print("%.2f" % (sum(r["bytes"] for r in ranks) * 8 / span))'
  rm -rf "$work/b"
}
bidir_iperf() {  # -> Gb/s of iperf3 --bidir -N, both directions summed
  ip netns exec $B iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
  local server=$!
  sleep 0.3
  ip netns exec $A iperf3 -c $IPB -p 5201 -t 4 --bidir -N -J > "$work/bidir.json"
  kill $server 2> /dev/null || true
  wait $server || true
  /usr/bin/python3 -c "
import json
e = json.load(open('$work/bidir.json'))['end']
print(f\"{(e['sum_received']['bits_per_second'] + e['sum_received_bidir_reverse']['bits_per_second']) / 1e9:.2f}\")"
}
two_iperf() {  # -> Gb/s of two iperf3 -N processes, one each way, summed
  ip netns exec $B iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
  local s1=$!
  ip netns exec $A iperf3 -s -1 -p 5202 > /dev/null 2>&1 &
  local s2=$!
  sleep 0.3
  ip netns exec $A iperf3 -c $IPB -p 5201 -t 4 -N -J > "$work/way1.json" &
  local c1=$!
  ip netns exec $B iperf3 -c $IPA -p 5202 -t 4 -N -J > "$work/way2.json"
  wait $c1
  kill $s1 $s2 2> /dev/null || true
  wait $s1 $s2 || true
  /usr/bin/python3 -c "
import json
print(f\"{sum(json.load(open(f'$work/way{k}.json'))['end']['sum_received']['bits_per_second'] for k in (1, 2)) / 1e9:.2f}\")"
}
echo "Both directions at once, as each rank of a ring sends to one neighbour while it"
echo "receives from the other: one flow each way, each agent sending and receiving on its"
echo "one I/O thread; the bytes both received over the span from the first byte either"
echo "received to the last (iperf3: both directions' rates over its timed run). Baselines: iperf3"
echo "--bidir -N (one process a side, one thread for both directions, as an agent) and two"
echo "iperf3 -N processes, one each way. Median of $REPS runs (range), ratios paired, the"
echo "runs alternating:"
echo
echo "| what | tensorwire | iperf3 --bidir -N | ratio | two iperf3 -N, one each way | ratio |"
echo "|---|---|---|---|---|---|"
ours=() bidir=() two=()
quiet_table_start
for ((k = 0; k < REPS; k++)); do
  bidir+=("$(bidir_iperf)")
  ours+=("$(bidir_ours 8MiB 768)")
  two+=("$(two_iperf)")
done
echo "| 1 flow each way, 8MiB messages | $(spread "${ours[@]}") Gb/s | $(spread "${bidir[@]}") Gb/s | $(paired_ratio "${ours[*]}" "${bidir[*]}") |" \
  "$(spread "${two[@]}") Gb/s | $(paired_ratio "${ours[*]}" "${two[*]}") |"
TWO_MED=$(median "${two[@]}") TWO_RATIO=$(med "$(paired_ratio "${ours[*]}" "${two[*]}")")
table_load
echo
echo "Against iperf3 --bidir the ratio is no measure of the replayer: iperf3 3.12 serves both directions"
echo "from one select() loop a side and starves one of them (docs/dataplane-analyses.md,"
echo "Both directions). Two iperf3 processes a side, one each way, run two threads a side"
echo "and reach $TWO_MED Gb/s in the table; the agents, with one I/O thread each for both"
echo "directions, $TWO_RATIO of that."
echo
echo "### Small messages"
echo
echo "Messages per second at the receiver: median of $REPS runs (range); ratios paired as"
echo "above. Two baselines:"
echo "a plain blocking write loop, and the same loop asking the kernel for the same"
echo "transmit timestamps as the agents (on the wire and acknowledged: two reports per"
echo "message, read back after each write). The second isolates the replayer's own"
echo "overhead from the kernel's cost of measuring."
echo
echo "| message | tensorwire | blocking loop | ratio | blocking loop, timestamped | ratio |"
echo "|---|---|---|---|---|---|"
quiet_table_start
# The agents' options of a row follow its size and count; the timestamped loop is
# the baseline wherever the agents ask for transmit timestamps.
# 2-7 s a run at these machines' rates, as the throughput table's.
for spec in "4096 600000" "65536 200000" "65536 200000 pin" "4096 600000 --no-tx-timestamps" "4096 600000 --read-gap-us 0" \
  "4096 600000 --tx-stamp-every 16" "65536 200000 --tx-stamp-every 16"; do
  set -- $spec
  size=$1 count=$2
  shift 2
  PIN=0
  [ "${1:-}" = pin ] && PIN=1 && shift
  # The timestamped loop stamps every message: the baseline only for agents that do.
  stamps=1
  case "${1:-}" in --no-tx-timestamps | --tx-stamp-every) stamps=0 ;; esac
  ours=() plain=() stamped=()
  for ((k = 0; k < REPS; k++)); do
    plain+=("$(pair_rate send $size $count)")
    [ $stamps = 0 ] || stamped+=("$(pair_rate send-stamped $size $count)")
    stream_profile $size 1 $count > "$work/p.yaml"
    # shellcheck disable=SC2046  # one option or none
    agents "$work/p.yaml" "$work/s" $(pin_option) "$@"
    ours+=("$(rate "$work/s" | cut -d' ' -f2)")
    rm -rf "$work/s"
  done
  label="$((size / 1024)) KiB"
  [ "$PIN" = 0 ] || label="$label, each side pinned to a core"
  cells="| - | - |"
  if [ "${1:-}" = --no-tx-timestamps ]; then
    label="$label, without transmit timestamps"
  else
    [ $# = 0 ] || label="$label, \`$*\`"
    [ $stamps = 0 ] || cells="| $(spread "${stamped[@]}") | $(paired_ratio "${ours[*]}" "${stamped[*]}") |"
  fi
  ratio=$(paired_ratio "${ours[*]}" "${plain[*]}")
  case "$spec" in
    "$size $count")
      S[$size plain]=$ratio S[$size stamped]=$(paired_ratio "${ours[*]}" "${stamped[*]}")
      LOOP[$size]=$(median "${plain[@]}") LOOP_STAMPED[$size]=$(median "${stamped[@]}") ;;
    "$size $count --tx-stamp-every 16") S[$size every16]=$ratio ;;
  esac
  echo "| $label | $(spread "${ours[@]}") | $(spread "${plain[@]}") | $ratio $cells"
done
PIN=0
# 128928 -> "128 928"
grouped() { awk -v n="$1" 'BEGIN {s = sprintf("%.0f", n); t = ""; while (length(s) > 3) {t = " " substr(s, length(s) - 2) t; s = substr(s, 1, length(s) - 3)}; print s t}'; }
# The kernel's timestamps alone: the stamped loop's rate as a share of the plain one's.
share() { awk -v a="${LOOP_STAMPED[$1]}" -v b="${LOOP[$1]}" 'BEGIN {printf "%.0f%%", 100 * a / b}'; }
LOOP4=$(share 4096)
table_load
echo
echo "Measurement has a cost of its own, in the kernel: in the table above, the transmit"
echo "timestamps alone took the blocking loop from $(grouped "${LOOP[4096]}") to $(grouped "${LOOP_STAMPED[4096]}") messages of 4 KiB a"
echo "second ($LOOP4), and from $(grouped "${LOOP[65536]}") to $(grouped "${LOOP_STAMPED[65536]}") of 64 KiB ($(share 65536)). So against the plain"
echo "loop, every message stamped, the agent reached $(med "${S[4096 plain]}") with 4 KiB messages and the"
echo "timestamped loop $LOOP4 (it reads its reports after each write, the agent 16 at a"
echo "time). Stamping every 16th message of each flow (\`--tx-stamp-every 16\`; the results"
echo "say they are sampled, and every message keeps its other times): $(med "${S[4096 every16]}") of the plain"
echo "loop with 4 KiB messages and $(med "${S[65536 every16]}") with 64 KiB ones, the"
echo "last two rows. Ratios above 100% are no wins here either (Reading the ratios, above)."
echo "Where the agents move more small messages than the plain loop, their receiver is why: a"
echo "flow that gathers the reads of a stream of small messages (\`--read-gap-us\`, 20 us by"
echo "default) has the kernel acknowledge fewer of them than the loop's blocking reader, which"
echo "is woken every message or two where the two sides share the cores, and the sender has"
echo "fewer acknowledgements to process; the row with \`--read-gap-us 0\` compares the senders"
echo "(docs/dataplane-analyses.md, Small messages)."
echo
echo "### Under a pacing congestion control"
echo
if [ "$PACED" = "$CC" ] || ! set_cc "$PACED" 2> /dev/null; then
  echo "Not measured: this host has no $PACED other than the tables' own."
else
  PACED_MEASURED=1
  own=""
  [ "$(sysctl -n net.ipv4.tcp_congestion_control)" = "$PACED" ] && own=" (this machine's own default)"
  echo "The rows above that the congestion control moves most, with both hosts under $PACED$own,"
  echo "agents and baselines alike; median of $REPS runs (range), ratios paired, the runs"
  echo "alternating."
  echo
  echo "| what | tensorwire | baseline | ratio |"
  echo "|---|---|---|---|"
  quiet_table_start
  for spec in "1MiB 1 12000" "8MiB 4 384"; do
    set -- $spec
    ours=() base=()
    for ((k = 0; k < REPS; k++)); do
      base+=("$(iperf "$2" -N)")
      ours+=("$(tput "$1" "$2" "$3" 1)")
    done
    what="1 flow, $1 messages"
    [ "$2" = 1 ] || what="$2 flows (iperf3 -P $2), $1 messages"
    echo "| $what | $(spread "${ours[@]}") Gb/s | iperf3 -N: $(spread "${base[@]}") Gb/s | $(paired_ratio "${ours[*]}" "${base[*]}") |"
    PACED_OURS[$1 $2]=$(median "${ours[@]}") PACED_BASE[$1 $2]=$(spread "${base[@]}")
  done
  ours=() base=()
  for ((k = 0; k < REPS; k++)); do
    base+=("$(pair_rate send 65536 200000)")
    stream_profile 65536 1 200000 > "$work/p.yaml"
    agents "$work/p.yaml" "$work/s"
    ours+=("$(rate "$work/s" | cut -d' ' -f2)")
    rm -rf "$work/s"
  done
  echo "| 64 KiB messages a second | $(spread "${ours[@]}") | blocking loop: $(spread "${base[@]}") | $(paired_ratio "${ours[*]}" "${base[*]}") |"
  table_load
  echo
  echo "Under $PACED the sender paces, and on this bridge, where a round trip takes"
  echo "microseconds, its pacing switches between rates that last tenths of a second (docs/dataplane-analyses.md,"
  echo "Runs as long as iperf3's): here iperf3 -N's one flow moved ${PACED_BASE[1MiB 1]} Gb/s (a median of"
  echo "${TB[1MiB 1]} under $CC, above), and its four flows ${PACED_BASE[8MiB 4]}. The agents read with the"
  echo "low-water mark here (above the blocking pair's table); their one flow moved a median"
  echo "${PACED_OURS[1MiB 1]} Gb/s against ${TR[1MiB 1]} under $CC, and four flows ${PACED_OURS[8MiB 4]} against ${TR[8MiB 4]}. A"
  echo "ratio above 100% here is iperf3's slow states, not the agents' speed."
  set_cc "$CC"
fi
echo
echo "### Start precision"
echo
echo "Messages of 4 KiB, each planned 1 ms after the previous one was handed to the kernel;"
echo "the error is the time from the planned start to the first write. Spinning costs the"
echo "agent's core for the spin window before every deadline; on this virtual machine timer"
echo "wake-ups come tens of microseconds late at the p99 and milliseconds late at worst (the"
echo "bare loop's rows without a spin), and the longer the window the more of that it absorbs."
echo
echo "The baseline is a bare loop on the same hosts (bench/blocking_pair send-paced): it"
echo "sleeps in clock_nanosleep until the spin window (with a timer slack of 1 ns: the"
echo "agents' timerfd has none), spins on the clock to the deadline and writes; its error"
echo "is its last clock read's lateness. Unlike the agents it does not wake early by the"
echo "wake-up delay it has seen, so without a spin it is late by that delay. Real-time: the agents at"
echo "SCHED_FIFO priority 50 with their I/O thread pinned to a core (\`--realtime --pin\`,"
echo "as root), the loop likewise (chrt -f 50, taskset)."
echo
echo "Each row: median of $REPS runs (range) of each run's percentile, each agent run"
echo "beside a run of the loop, the rows alternating."
echo
{
  echo "version: 1"; echo "iterations: 3000"; echo "iteration_barrier: false"
  echo "ranks: [{id: 0}, {id: 1}]"; echo "flows: [{id: f, src: 0, dst: 1}]"
  echo "ops:"; echo "  - {id: s, type: send, flow: f, bytes: 4096, gap: 1ms, after: [s@-1]}"
} > "$work/prec.yaml"
specs=("0 normal" "50 normal" "500 normal" "0 realtime" "50 realtime" "500 realtime")
declare -A p50 p99 pmax l50 l99 lmax
quiet_table_start
gaps_rate="" gaps_lost="" gaps_p99="" gaps_read="" gaps_loc="" gaps_irq="" gaps_steal=""
# Core 0's local timer interrupts, all its interrupts, and its steal time (ticks).
cpu0_counts() {
  echo "$(awk '$1 == "LOC:" {print $2}' /proc/interrupts)" \
    "$(awk 'NR > 1 && $2 ~ /^[0-9]+$/ {s += $2} END {print s}' /proc/interrupts)" \
    "$(awk '$1 == "cpu0" {print $9}' /proc/stat)"
}
for ((k = 0; k < REPS; k++)); do
  # What the machine itself takes from a core that spins, nothing else running,
  # and what the guest's own interrupts and steal time say of it meanwhile.
  read -r loc0 irq0 steal0 < <(cpu0_counts)
  read -r g_read g_rate g_lost _ g_p99 _ _ < <(taskset -c 0 "$build/bench/vcpu_gaps" 3)
  read -r loc1 irq1 steal1 < <(cpu0_counts)
  gaps_read+=" $g_read" gaps_rate+=" $g_rate" gaps_lost+=" $g_lost" gaps_p99+=" $g_p99"
  gaps_loc+=" $(((loc1 - loc0) / 3))" gaps_irq+=" $(((irq1 - irq0 - loc1 + loc0) / 3))" gaps_steal+=" $((steal1 - steal0))"
  for i in "${!specs[@]}"; do
    set -- ${specs[$i]}
    if [ "$2" = realtime ]; then extra=(--realtime --pin) rt=(chrt -f 50); else extra=() rt=(); fi
    PIN=0
    [ "$2" = realtime ] && PIN=1
    on_core 1 ip netns exec $B "$pair" recv 17200 4096 3000 > /dev/null &
    pr=$!
    read -r a b c < <(on_core 0 ip netns exec $A "${rt[@]}" "$pair" send-paced $IPB 17200 4096 3000 1000 "$1")
    wait $pr
    l50[$i]+=" $a" l99[$i]+=" $b" lmax[$i]+=" $c"
    PIN=0
    agents "$work/prec.yaml" "$work/prec" --spin-us "$1" "${extra[@]}"
    # The start error of each message (planned start to first write), in us.
    read -r a b c < <(/usr/bin/python3 - "$work/prec" <<'PY'
import struct, sys
data = open(sys.argv[1] + "/rank-0.twr", "rb").read()[16:]
err = []
for i in range(0, len(data), 64):
    if data[i] != 1: continue
    t = struct.unpack_from("<5q", data, i + 24)
    err.append((t[1] - t[0]) / 1e3)
err.sort()
print(f"{err[len(err)//2]:.1f} {err[int(len(err)*0.99)]:.1f} {err[-1]:.1f}")
PY
)
    p50[$i]+=" $a" p99[$i]+=" $b" pmax[$i]+=" $c"
    rm -rf "$work/prec"
  done
done
echo "| scheduler | priority | tensorwire p50 | p99 | max | bare loop p50 | p99 | max |"
echo "|---|---|---|---|---|---|---|---|"
for i in "${!specs[@]}"; do
  set -- ${specs[$i]}
  if [ "$1" = 0 ]; then label="timer only (no spin)"; else label="timer, then spin the last $1 us"; fi
  if [ "$2" = realtime ]; then prio="SCHED_FIFO 50, pinned"; else prio=normal; fi
  echo "| $label | $prio | $(spread_signed ${p50[$i]}) us | $(spread ${p99[$i]}) us | $(spread ${pmax[$i]}) us" \
    "| $(spread_signed ${l50[$i]}) us | $(spread ${l99[$i]}) us | $(spread ${lmax[$i]}) us |"
done
# shellcheck disable=SC2086  # lists of figures
START_P99=$(median ${p99[2]}) START_P99_RT=$(median ${p99[5]})  # the 500 us spin rows
table_load
echo
echo "What the machine takes from a core that only spins (bench/vcpu_gaps, 3 s on core 0"
echo "before each round, nothing else running; median (range) of the $REPS rounds): a"
echo "clock read costs $(spread $gaps_read) ns; the core is away for more than 10 us"
echo "$(spread $gaps_rate) times a second, $(spread $gaps_lost)% of the time in all. A"
echo "deadline at a random instant is seen $(spread $gaps_p99) us late or more one time"
echo "in a hundred by a thread that does nothing but spin: the floor under any p99 above."
echo "Meanwhile the guest handled $(spread $gaps_loc) local timer interrupts a second on"
echo "that core and $(spread $gaps_irq) others (/proc/interrupts), and its steal time"
echo "grew by $(spread $gaps_steal) ticks in the 3 s (/proc/stat). Where these fall far"
echo "short of the gaps, the guest did not take the core: the host took the vCPU away,"
echo "which no priority inside the guest prevents; so do the maxima, at any priority."
echo "The agent's p50 above the loop's is its own path from the end of"
echo "the spin to the write."
echo
echo "### Fidelity on a synthetic profile"
echo
echo "The 2-rank MLP ring all-reduce (PyTorch DDP over Gloo) on links shaped by the testbed;"
echo "replayed iteration time (median of 20) against the profile's lower bound and the"
echo "simulated timing model at the same rate."
echo
echo "| case | link | replayed | timing model | lower bound |"
echo "|---|---|---|---|---|"
quiet_table_start
"$tw" profile synth --model mlp --ranks 2 --iterations 20 -o "$work/comm.yaml" 2> /dev/null
"$tw" profile synth --model mlp --ranks 2 --iterations 20 --fwd-ms 100 --bwd-ms 200 -o "$work/comp.yaml" 2> /dev/null
for spec in "communication-bound comm.yaml 1gbit 1" "compute-bound comp.yaml 5gbit 5"; do
  set -- $spec
  RATE=$3 shape
  agents "$work/$2" "$work/f-$2" --spin-us 0
  replayed=$(/usr/bin/python3 - "$work/f-$2" <<'PY'
import json, sys
its = []
r0 = json.load(open(sys.argv[1] + "/rank-0.json"))["iteration_times_ns"]
r1 = json.load(open(sys.argv[1] + "/rank-1.json"))["iteration_times_ns"]
for a, b in zip(r0, r1):
    its.append(max(a[1], b[1]) - min(a[0], b[0]))
its.sort()
print(f"{its[len(its)//2]/1e6:.2f} ms")
PY
)
  model=$("$tw" profile show "$work/$2" --json --link-gbps "$4" | /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"{j['lower_bound']['iteration_ns']/1e6:.2f} ms\")")
  sim=$(cd "$work" && "$tw" replay --local 2 "$2" --out "$work/sim-$2" --iterations 1 --link-gbps "$4" --json | /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"{j['model_iteration_ns'][0]/1e6:.2f} ms\")")
  echo "| $1 | $3 | $replayed | $sim | $model |"
done
table_load
exec 1>&3 3>&-
intro
cat "$body"
