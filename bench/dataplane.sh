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
  echo "$(med "${T[8MiB 16 2]}") with two I/O threads and $(med "${T[8MiB 16 2 nospin]}") with two and no look at dry sockets; 64 KiB"
  echo "messages at $(med "${S[65536 plain]}") of the plain blocking loop and $(med "${S[65536 stamped]}") of the timestamped"
  echo "one ($(med "${S[65536 every16]}") of the plain loop with every 16th message stamped); 4 KiB messages"
  echo "at $(med "${S[4096 plain]}") and $(med "${S[4096 stamped]}") ($(med "${S[4096 every16]}") with every 16th stamped; the kernel's"
  echo "timestamps alone take the loop to $LOOP4); and the start p99 at $START_P99 us ($START_P99_RT"
  echo "at real-time priority, pinned), with a 500 us spin."
  echo
  echo "The dated analyses in the prose below were made on two 2-core virtual machines, an"
  echo "Intel Xeon (Linux 6.18.44-fc-v1252) and an AMD EPYC (Linux 6.18.44-fc-v1272), under"
  echo "BBR until 2026-12-06 and under cubic since. Under BBR, as this page measured until"
  echo "then, iperf3's one-flow rate swung from 18 to 46 Gb/s between runs, and the rows near"
  echo "their targets moved more between runs of the table than they missed by. All the"
  echo "figures before 2026-12-05's fix of transmit timestamps (Small messages, below) were"
  echo "measured while a busy sending agent lost many of its timestamp reports: 95% with 4 KiB"
  echo "messages, 30% with 1 MiB ones."
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
# whose socket ran dry before it sleeps) unless a row says --spin-us 0.
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
# of a second (Runs as long as iperf3's, below), so a shorter run draws one or two.
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
echo "no look at dry sockets (\`--spin-us 0\`, as \`run --testbed\` runs agents that are as many"
echo "as the machine's cores, or whose I/O threads outnumber them: Agents sharing cores,"
echo "below). In runs on the Intel Xeon machine (2026-12-06, one or two runs each, 1-minute"
echo "load 0.01-0.5 at their start), two I/O threads moved 84-90 Gb/s with 4 or 8 flows and"
echo "55-75 with 16; with 16 flows the"
echo "sending agent's copy into socket buffers cost about 1.8 times as much per byte as with"
echo "four (perf record); turns of 2 reads and 1 write instead of 16 and 4 changed nothing;"
echo "four I/O threads moved 60, and pinning them 35. The senders retransmitted 14-349"
echo "segments a run of 16 flows (DSACKs: the segments had arrived), without a pattern in"
echo "the rate. Not resolved. Under BBR (until 2026-12-06) iperf3's receivers fell behind by"
echo "turns with 16 streams: in 3 runs (2026-12-05, ss -ti at the sender; 1-minute load"
echo "about 1.0, from these runs alone), 4 to 8 of its 16 connections were limited by the"
echo "receive window for 29-86% of their busy time, the agent's for at most 1.8%; and with"
echo "one flow iperf3 swung by a third from one minute to the next (three runs of this table"
echo "on 2026-12-04: one-flow medians of 26.1-46.7 Gb/s, the agent's 27.5-42.3)."
echo
echo "Where 16 flows lose on two I/O threads (2026-12-06, a 2-core AMD EPYC virtual machine,"
echo "Linux 6.18.44-fc-v1272, cubic; each set of runs below started at a 1-minute load of"
echo "0.47-0.49, and its own runs took it to 1.8-3.1): there they moved 33.4-41.8 Gb/s"
echo "(median 40.9) against 40.8-52.2 (median 46.7) for four iperf3 processes of -P 4, a"
echo "median ratio of 84% (78-89%), 5 alternating runs. System calls in one second of a run"
echo "(perf record -a): the agents made 69 000 reads, 45 000 epoll_wait, 21 000 sendmsg and 8"
echo "000 epoll_ctl (Asio re-arms a descriptor with epoll_ctl at every wait for readiness);"
echo "iperf3 made 39 000 reads, 38 000 writes and 11 000 pselect6. The agents' extra reads and"
echo "epoll_wait are the look at dry sockets (20 us, the default for agents started by hand):"
echo "without it (\`--spin-us 0\`), 32 000 reads and 7 000 epoll_wait. fdget and fput took 1.3%"
echo "of the agents' cycles against 0.3% of iperf3's: they count a reference to the socket's"
echo "file at every call in a process of several threads only (iperf3 3.12 has one). Both"
echo "sides spent 95-98% of their cycles in the kernel. The profile does not show where the"
echo "rate goes, though: in the one pair of runs profiled, the agents moved as much as iperf3"
echo "(41.8 against 40.9 Gb/s), their copies into and out of socket buffers cost 23% less per"
echo "byte, and the rest of their cycles 14% more. Three changes were tried and not kept; none"
echo "moved the rate beyond the noise (paired rounds, each ratio the change's rate to the"
echo "default's beside it). Writes that end at a 64-byte stream position, so that flows"
echo "sharing a sending thread keep each other's receive copies aligned (copy_alignment.hpp;"
echo "with 8 MiB messages each one's 24-byte header shifts the others): median ratio 1.04"
echo "(0.96-1.10), 6 rounds. No look (\`--spin-us 0\`): 1.05 (0.84-1.14), 10 rounds (later"
echo "rounds made it the replays' choice where agents' I/O threads outnumber the cores:"
echo "Agents sharing cores, below). One flow"
echo "of a thread looking at a time instead of each: 1.02 (0.94-1.21), 8 rounds; it made 56 000"
echo "reads and 21 000 epoll_wait a second. What the profile did not show were the context"
echo "switches of a sender and its receiver sharing a core: Agents sharing cores, below."
echo
echo "Runs as long as iperf3's (2026-12-05, Intel Xeon machine, 1-minute load 0.2-1.7 from"
echo "these runs alone). Until then the agents' runs carried 2.0-3.4 GB, 0.5-0.9 s at these"
echo "rates, against iperf3's 4 s, and the rows with four flows and 64 KiB messages fell"
echo "short by as much from one run of the whole table to the next as they did of their"
echo "baselines (64 KiB: 86%, 93%, then 54% of the timestamped loop, the agent unchanged for"
echo "it). On that machine the rate of any sender switched between steady states that last"
echo "tenths of a second: iperf3 -N with 64 KiB writes moved 10.3-58.8 Gb/s from one 100 ms"
echo "interval to the next within runs of 1 s; a run of the agents of 50 000 such messages"
echo "(0.95 s) moved 13.3-14.3 Gb/s for its first 290 ms, then 22-43. In the slow states the"
echo "sender's core goes to BBR's pacing: perf stat of the sending side counted, for the"
echo "blocking loop, 4 300 pacing timers (hrtimer_start from tcp_write_xmit) in a run at 74"
echo "700 messages a second and 15 800 in one at 43 400; for the agent, 6 400 at 66 400 and"
echo "34 800 at 36 600. Each fires an interrupt and a softirq on the sender's core. So a"
echo "short run draws one or two states, and the draw decides the row. Four flows of 8 MiB"
echo "messages, 3 rounds by length: 50 iterations (1.6 GB) 29.0-46.4 Gb/s, 100 iterations"
echo "44.6-46.3, 200 40.1-51.7, 400 50.1-59.5, 800 51.2-58.2, iperf3 -P 4 -N 50.6-55.2; and 5"
echo "paired rounds: 100 iterations median 41.1 Gb/s, 400 iterations 52.2, iperf3 52.9. 64"
echo "KiB messages against the timestamped loop: 50 000 a run, median ratio 86% (34-139%) in"
echo "20 paired rounds and 85% (46-102%) in 16 more; 200 000 a run, 96-112% in 6. Every run"
echo "of the tables above and below now carries 12.6-12.9 GB (small messages: 2.4 GB of 4"
echo "KiB, 13 GB of 64 KiB), 2-4 s there and 3-7 s on the AMD EPYC machine. Tried in the same"
echo "hour and not kept: reading only when"
echo "the socket holds the rest of the message (asked with SIOCINQ), which cut the receiver's"
echo "acknowledgements of 64 KiB messages from 1.6 to 1.0 a message (nstat) but raised the"
echo "rate in only 7 of 20 paired rounds (median ratio 82% against 86%), and four flows'"
echo "not at all (median 36.8 against 40.1 Gb/s, 6 rounds); the read gap for 64 KiB messages"
echo "too, which gathered two at a time and left 31 000-32 000 a second against 57 000"
echo "(40 000-50 000 pacing timers a run, 6 rounds)."
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
echo "iperf3's receiver wakes for every few segments that arrive. Under a pacing congestion"
echo "control (BBR) an agent's incoming flow asks for the rest of its message, up to 128 KiB"
echo "(SO_RCVLOWAT), before it wakes; under cubic it reads as iperf3's does. While"
echo "fewer bytes than the mark wait, Linux acknowledges every arrival of more than a"
echo "segment at once (__tcp_ack_snd_check), and cubic's bursts queue up while a reader"
echo "wakes: under cubic the mark doubled a blocking pair's acknowledgements (11-12 a"
echo "message of 1 MiB against 6, nstat) and cost it 8% (55-59 Gb/s against 60-64, 3 paired"
echo "rounds, 2026-12-06, Intel Xeon machine, nothing else running, 1-minute load 0.3-1.0 at the start of each set, from these runs alone), and it cost the agents"
echo "15-20% (one flow 52-54 Gb/s with it, 62-65 without, 3 of 3 rounds; four flows 60"
echo "against 65, 2 rounds). Paced bytes arrive a burst at a time and are acknowledged about"
echo "as often without it, so under BBR the mark only saves wake-ups, which on one host are"
echo "paid on the sender's core (the bridge runs the receiving side's TCP input there): four"
echo "flows moved 45-57 Gb/s with it against 30-37 without (3 of 3 rounds), one flow a"
echo "median 50 against 43 (4 of 5; the same machine and day). So the agents set it only where their connection's"
echo "congestion control paces (incoming_flow.cpp). The blocking pair (bench/blocking_pair)"
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
echo "from one select() loop a side and starves one of them. In a run of 6.25 GB"
echo "(2026-12-06, Intel Xeon machine, perf stat, cubic, nothing else running, 1-minute load 0.1 before it) it moved 57.9 Gb/s one way and"
echo "6.7 the other; its server, busy reading, wrote 6 025 times against its client's 51"
echo "247. The agents moved 6.7 GB each way in 1.33 s, 52 004 writes a side: each core sends"
echo "one flow and receives the other, where iperf3's rate is about one flow's. Two iperf3"
echo "processes a side, one each way, run two threads a side and reach $TWO_MED Gb/s in the table;"
echo "the agents, with one I/O thread each for both directions, $TWO_RATIO of that. Under BBR (2026-12-05) both"
echo "iperf3 baselines read without a low-water mark where the agents read with one, and"
echo "iperf3 --bidir was switched out 1 058-3 009 times a side against the agents' 334-398,"
echo "for about the same CPU time."
echo
echo "Where the time went before the copies were aligned (2026-12-03, AMD EPYC machine; perf stat -e"
echo "task-clock and perf record; one flow of 8 MiB"
echo "messages, 2.5 GB in all, the sender pinned to core 0 and the receiver to core 1; 5"
echo "runs alternating with the baselines; load 0.26 before, 0.50 after; median (range)):"
echo "the agent 24.8 (24.1-26.5) Gb/s with 0.79 s of sender CPU time (its 0.14 s of"
echo "start-up, measured with one message, taken off), a plain blocking loop of 256 KiB"
echo "writes (bench/blocking_pair) 29.5 (19.3-35.9) Gb/s with 0.67 s, iperf3 -N 28.2"
echo "(25.6-38.3) Gb/s with 0.72 s. Every sender's rate follows its CPU time per byte. The"
echo "sending agent spends over 90% of it in the kernel (the copy into socket buffers, TCP's"
echo "transmit path, and the receiving side's softirq work, which the bridge runs on the"
echo "sender's core); its own code, recorder included, is under 5%, and turning transmit"
echo "timestamps off lowers it by 3-5%. The receiving agent makes two system calls per"
echo "wake-up that a blocking read loop does not (a read that finds the socket empty, and"
echo "the epoll_ctl with which Asio re-arms a wait), but sleeps a sixth of the time: the"
echo "sender's core is the limit."
echo
echo "The copy into socket buffers, looked at again (perf record -a, 2026-12-04, same"
echo "machine, load 0.6-1.2 left by the runs before, so indications; one flow of 8 MiB"
echo "messages, 3.36 GB): the sending agent's"
echo "_copy_from_iter took 3.6 times the samples per byte of iperf3's. A test sender"
echo "reproduced it: a 24-byte header then a 256 KiB view of a buffer 16 bytes past a"
echo "page, as the agent wrote, cost 2800-3350 samples per 6 GB of copy, plain 128 KiB"
echo "writes 650-850, the same header and view with the view aligned as its"
echo "destination 790-985. On this AMD EPYC the kernel's copy costs 3.5-4 times more"
echo "when source and destination are misaligned against each other by 8 or 24 bytes."
echo "The agent now takes its payload views and places its reads at the stream's offset"
echo "modulo 64 (replayer/agent/src/copy_alignment.hpp), and writes and reads at most"
echo "128 KiB at a time: 5 runs alternating, sender on core 0 and receiver on core 1,"
echo "median (range) 31.3 (24.5-34.0) Gb/s with 0.83 s of sender system time, against"
echo "22.0 (21.6-22.9) Gb/s and 1.21 s for 128 KiB unaligned and 21.4 (20.4-23.5) Gb/s"
echo "and 1.28 s for 256 KiB aligned; 64 KiB writes moved 29.3, 64 KiB reads 23.2."
echo "Unpinned, beside iperf3 -N in the same loop: 23.8 (21.4-26.0) Gb/s against 21.0"
echo "(19.1-22.2) before, iperf3 -N 35.0 (27.5-38.0): still short of it. An incoming flow"
echo "now also waits for the rest of its message, up to 128 KiB, before it wakes"
echo "(SO_RCVLOWAT; one wake-up and one full read per 128 KiB; measured at load 1.5-1.7,"
echo "left by the runs before, so an indication): in the four of 6 paired"
echo "rounds where iperf3 -N moved 25-28 Gb/s, 30.5, 30.8, 29.8, 26.6 Gb/s against 22.2,"
echo "22.0, 19.5, 21.7 without it; 4 KiB and 64 KiB messages and four flows unchanged."
echo
echo "Four flows, looked at again (2026-12-04, AMD EPYC machine, nothing else running,"
echo "1-minute load 0.4-1.0 from these runs alone; one flow of 8 MiB messages carries 2.5"
echo "GB, four carry 3.36 GB). Before the change below, the receiving agent fell behind"
echo "with four flows, and then each byte cost it more:"
echo "- the sending agent's four connections (ss -tin, a run at 26.9 Gb/s) were limited"
echo "  by the receive window 35-41% of their busy time, with send windows of 0.57-1.96"
echo "  MB; iperf3 -P 4's were never window-limited, with windows of 7.0-9.7 MB;"
echo "- the receiving agent's queues (ss -tinm, a run at 18.4 Gb/s) held 1.1-7.3 MB,"
echo "  70-97% of their buffers, and had dropped 1103-3931 packets for want of room;"
echo "  iperf3's held 0-1.2 MB, under a quarter of theirs;"
echo "- its copy to user memory (perf, _copy_to_iter samples per GB) took 357-467 with"
echo "  four flows against 168-204 with one; iperf3's took 190 with four streams and"
echo "  174 with one. What it read had waited megabytes deep and left the cache."
echo
echo "The cause was the sender: a flow wrote its message until its socket was full,"
echo "about 15 writes of 128 KiB (27 000 writes, 1 747 switches between flows in a run),"
echo "so the four sockets were fed in turns megabytes deep. iperf3 -P writes its streams"
echo "one write at a time. Flows that share an I/O thread now take turns of 4 writes"
echo "(OutgoingFlow::kWritesPerTurn); in 6 runs alternating with the build before, four"
echo "flows moved 37.6 (20.4-38.3) Gb/s against 23.0 (18.4-34.6), and one flow of 1 MiB"
echo "messages, alone on its thread and so without turns, was unchanged. Turns of 1"
echo "write did no better than turns of 4 (4 flows 31.7 against 37.6 in the same runs)."
echo "Changes that did not help, in paired runs before it: reading at a fixed offset"
echo "rather than the stream position's alignment; ending every write at a 64-byte"
echo "boundary of the flow's stream; no SO_RCVLOWAT; SO_RCVBUF fixed at 1 or 2 MB (256"
echo "KB made it slower); 1 or 2 reads per incoming flow's turn instead of 16. Both"
echo "sides used the system's congestion control then, BBR (the namespaces allowed only"
echo "reno and bbr), as iperf3 did."
echo
echo "Four flows, where the sender's time goes (2026-12-05, AMD EPYC machine, 1-minute load"
echo "0.03 at the start; 3.36 GB in four flows of 8 MiB messages against iperf3 -P 4 -N"
echo "moving the same bytes, 3 paired rounds, perf stat and perf record): the receiving"
echo "sides cost the same (456-489 ms of CPU for the agent, 473-493 for iperf3), the"
echo "sending agent 709-782 ms against iperf3's 479-516. Transmit timestamps are not it"
echo "(off, or every 16th message: 694-727 ms). Its copy into the socket buffers is"
echo "cheaper than iperf3's (aligned, above); the difference is in waking the other"
echo "side: the bridge runs the receiver's TCP input on the sender's core, and"
echo "sock_def_readable, which wakes whoever waits on the receiving socket, took 8.8% of"
echo "the sending agent's samples against 3.9% of iperf3's, with the paravirtual guest's"
echo "interrupt enable (pvm_irq_enable) 863 samples against 571, most of the gap. It is"
echo "not that the receiving agent keeps its sockets registered with epoll for good (Asio"
echo "does): a test pair of our own, a select() loop writing 128 KiB to four sockets,"
echo "cost its sender the same whether its receiver waited in epoll with every socket"
echo "registered for good or in select() (767-961 ms against 825-1184 ms of sender CPU, 3"
echo "rounds). Why the sending agent wakes the other side more often is open."
echo
echo "A receiving flow whose socket runs dry now looks again, after its thread's other"
echo "work, for up to the agent's spin (\`--spin-us\`, 20 us by default; at most 20 us) before it sleeps in"
echo "epoll. In 5 paired rounds (AMD EPYC machine, 2026-12-05), four flows moved 38.7-44.5"
echo "Gb/s (median 43.0) with the receiving agent spinning against 35.6-39.1 (36.6)"
echo "without, and in 3 more the receiving agent was switched out 2 250-3 300 times a"
echo "run against 8 000-12 600. The Intel Xeon machine does not show it: in 8 paired rounds"
echo "there (2026-12-06, 1-minute load 0.00 before them, nothing else running) four flows"
echo "moved 42.9-56.1 Gb/s (median 51.0) spinning and"
echo "44.0-59.0 (52.7) without, and that day's table's two rows overlapped as widely."
echo
echo "Four flows, still short (2026-12-05, AMD EPYC machine, 1-minute load up to 1.0 from"
echo "these runs alone): in 2 runs with ss -ti at the sender, the agent's four connections"
echo "were limited by the receive window for 6-23% of their busy time, iperf3 -P 4's for"
echo "under 1% (with windows of up to 15 MB): with four flows the receiving agent still"
echo "falls behind by turns. Reading 256 KiB a call instead of 128 did not move the rate"
echo "beyond that hour's noise (the same build moved 15-44 Gb/s from one run to the next)."
echo
echo "Four flows, the receiver's buffers (2026-12-05, AMD EPYC machine, 1-minute load 0.5-1.2"
echo "from these runs alone; 3.36 GB in four flows of 8 MiB messages, iperf3 -P 4 -N moving"
echo "the same bytes). Linux grows a receive buffer from the bytes the reader took in the"
echo "last round trip as the receiver estimates it, less what still waits in the queue"
echo "(tracepoint tcp:tcp_rcvbuf_grow). In one traced run of each, the receiving agent's"
echo "four sockets grew 4-8 times each, to 3.7-7.0 MB, estimating round trips of 42-157 us"
echo "at their last growth; iperf3's grew 8-13 times, to 19.1-19.5 MB, at 556-953 us. A sender limited"
echo "by a smaller window measures a shorter round trip at the receiver, which grows the"
echo "buffer less: two steady states, and both programs land in either (iperf3 moved"
echo "19.3-65.9 Gb/s in these rounds, the agent 32.7-58.4). Forcing 16 MB buffers"
echo "(SO_RCVBUFFORCE) did not move the agent's rate (40.9-52.2 against 40.5-53.9 Gb/s,"
echo "5 paired rounds), and 0.5, 1 or 2 MB were no better (26.2-45.0 against 42.4-46.2,"
echo "5 more rounds of each). Reads per flow's turn did, in paired rounds: 1 instead of 16,"
echo "lower in 4 of 5 (20.2-55.2 against 40.5-53.9 Gb/s); 4, lower in 4 of 5; 64, higher in 8 of"
echo "10 (by 4% in the median). The turn stays 16 reads: it bounds how long one incoming"
echo "flow keeps the thread from the agent's own sends (16 reads of 128 KiB, 0.3-0.4 ms at"
echo "these rates), which a rank of a ring, sending while it receives, pays in start error."
echo "Discarding the received bytes instead of copying them (recv with MSG_TRUNC) moved"
echo "49.8-63.2 Gb/s against 40.5-53.9 in the same rounds; not adopted: a replayed"
echo "receiver copies what it receives, as the job's did and as iperf3 does."
echo
echo "Four flows, near parity (2026-12-06, Intel Xeon machine, 1-minute load 0.3-1.2 from"
echo "these runs alone; four flows of 8 MiB messages, 384 iterations, against iperf3 -P 4 -N"
echo "as in the table). In 18 paired rounds the agent's median ratio was 99% (77-119%), the"
echo "agent moving 41.7-58.7 Gb/s and iperf3 42.4-58.8; the table had put the median at"
echo "94-98% in three runs of 5 rounds, so the row now takes 9, and at 90% in the first run"
echo "of 9: at this spread, 5 or 9 rounds do not settle a few percent either way. The"
echo "sending agent still spends more of its core per byte: 0.16-0.18 s a GB of CPU"
echo "(/usr/bin/time, 3 runs)"
echo "against iperf3's 0.14, and perf record puts the difference in acknowledgements:"
echo "tcp_ack took 5.0% of its samples against iperf3's 0.5%, release_sock 8.8% against"
echo "2.0%. The bridge hands an acknowledgement to the sending socket on the core of the"
echo "receiver that sent it, unless the sender holds that socket at the moment; then it waits"
echo "in the socket's backlog for the sender. The receiving agent reads a flow as soon as 128"
echo "KiB of it is there, while the sender is still in its turn of 4 writes to that flow;"
echo "iperf3 writes once per stream and moves on. Other turns did worse, in 6 rounds: 1, 2"
echo "and 8 writes moved 37.2, 47.9 and 45.0 Gb/s (medians) against 52.4 with 4 (iperf3 48.3"
echo "in those rounds); so did other low-water marks (none, 32, 256, 512 KiB; 3 rounds each)"
echo "and a receiver that looks 200 us before it sleeps (4 rounds). iperf3's own sendfile mode"
echo "(-Z, page references instead of a copy) moved 20.9-34.5 Gb/s with four streams and 15"
echo "with one, well below its copying mode, so a sendfile data path was not tried."
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
echo
echo "Where a stamped 4 KiB message's cost goes (2026-12-06, Intel Xeon machine, 1-minute"
echo "load 0.3-0.4 before and after these runs, nothing else running; 600 000 messages, perf"
echo "stat and perf record of the sending side): the agent used 5.5 us of"
echo "CPU a message (0.46 s user, 2.80 s system) against the timestamped loop's 4.4 (0.13,"
echo "2.50), with the same system calls a message (one sendmsg; the agent reads the reports"
echo "16 messages at a time with recvmmsg, the loop after each write). Of the system time,"
echo "sock_def_error_report took 5.2% of the agent's samples against 0.8% of the loop's:"
echo "Asio keeps a socket registered with epoll as long as it is open, so each of a"
echo "message's two reports runs epoll's wake-up callback, where the loop's reports find"
echo "nobody waiting. Taking a busy socket out of epoll and back costs two system calls per"
echo "wait; not done. Without transmit timestamps the agent kept about the same share"
echo "against the plain loop on that machine then."
echo
echo "In the AMD EPYC machine's table of 2026-12-05, before the fix below, the agent's 4 KiB"
echo "median was 110% (92-151%) of the plain loop's: a ratio above 100%, and no win, as the"
echo "ranges overlapped widely. On the Intel Xeon machine it was well below, for the reason"
echo "that follows."
echo
echo "Transmit timestamps lost, and found (2026-12-05, Intel Xeon machine). A sending agent"
echo "read its timestamp reports when its event loop saw the socket signal them, and a flow"
echo "that always finds room in its socket never goes back to the event loop; the kernel"
echo "keeps a socket's reports within its receive buffer (128 KiB in a sending socket) and"
echo "drops the rest. One flow of 4 KiB messages lost 95% of its timestamp"
echo "fields (the summary's \`tx_timestamps_lost\`: 381 000 of 400 000), 64 KiB messages 67%,"
echo "1 MiB messages 30%; the tracker then also stamped messages with the late reports of"
echo "messages it had given up on (wire_first 23 ms before the message was ready). So the"
echo "rates with transmit timestamps measured here before the fix, the analysis below"
echo "included, and probably the AMD machine's 110% above (its losses were not counted), had"
echo "the kernel make the reports and the agent skip reading most of them. The agent now"
echo "also reads them itself once 16 of its writes that asked for them have gone (after the"
echo "message that made it so is handed over, so that paced messages absorb the read in"
echo "their pause), and ignores a report about no message awaiting. With a first version,"
echo "which read them every 16 stamped messages before the message's write, 0 to 3 were"
echo "lost in the same runs, and in 3 alternating rounds of 4 KiB messages the agent moved"
echo "184 000-197 000 messages a second against the timestamped loop's 244 000-259 000,"
echo "where before the fix it had moved 216 000-238 000. Reading them every 32 such writes"
echo "instead of 16 still lost 0-97 of 100 000 fields a run of 64 KiB messages (runs of"
echo "consecutive messages without wire_last); every 16, none in 6 runs, and 4 KiB messages"
echo "moved 176 000-184 000 a second against 160 000-180 000 (4 paired rounds)."
echo
echo "Small messages on the Intel Xeon machine: acknowledgements (2026-12-05, 1-minute load"
echo "0.1-1.3 from these runs alone; one flow of 200 000 messages of 4 KiB). In the first 5"
echo "alternating rounds (3 with transmit timestamps, 2 without) the agent moved 224 000-250"
echo "000 messages a second against the loop's 292 000-341 000. Both senders make one system"
echo "call per message (perf stat). The sending agent spent 4.5 us of CPU per message (a"
echo "run's CPU time less that of a run of 20 000 messages), the loop's sender 3.1 us,"
echo "nearly all in the kernel (the agent's user time was 0.13 s of 0.95 s). The gap is the"
echo "receiver's acknowledgements: the receiving namespace sent 185 000-188 000 ACK segments"
echo "for the agent's 200 000 messages and 42 000-65 000 for the loop's (nstat). A receiving"
echo "agent looks at a socket that ran dry again and again for up to its spin (20 us;"
echo "0.78-1.5 million recv calls a run), so it drains each message as it lands. Linux"
echo "acknowledges at once what arrives at an empty receive queue (more than one full"
echo "segment unacknowledged and a window that does not shrink: __tcp_ack_snd_check in"
echo "tcp_input.c), and again at the read that empties the queue. The loop's blocking reader"
echo "woke 19 000 times a run and found about ten messages each time. The bridge hands each"
echo "acknowledgement to the sending socket while the sender is inside sendmsg, and the"
echo "sender processes it on its way out (__release_sock: 12% of the sending agent's"
echo "samples, 6% of the loop sender's). A receiving agent that sleeps instead (\`--spin-us"
echo "0\`) sent 88 000 acknowledgements but moved 184 000-189 000 messages a second: waking"
echo "it through its epoll registration took 13% of the sender's samples"
echo "(sock_def_readable), against 7% for the loop's blocked read, and the sender used 1.20"
echo "s of CPU against the spinning receiver's 0.94 s and the loop's 0.60 s. In an"
echo "experiment, a flow that ran dry was looked at again no sooner than a fixed gap after"
echo "its last read that returned bytes (4 alternating rounds): without the gap the agent"
echo "moved 216 000-237 000 messages a second, with 10 us 246 000-274 000, with 20 us 245"
echo "000-294 000, with 40 us 262 000-320 000, and the loop 236 000-376 000; at 10 us the"
echo "receiver sent 107 000-125 000 acknowledgements, at 20 us 70 000. The gap delays the"
echo "read of a message's last byte by up to its length, and 9 rounds of 64 KiB messages (34"
echo "000-89 000 a second under every setting) and 3 of 1 MiB messages (33-57 Gb/s) moved"
echo "too much to show whether it helps them. Reading a gathered burst one message at a time"
echo "to time each brought the acknowledgements back (160 000-181 000 with a gap of 10 or 20"
echo "us, 3 rounds each), as more bytes arrive between the reads, and the kernel's receive"
echo "timestamp (SO_TIMESTAMPING) is one per read, its last segment's. So while it waits out"
echo "the gap a flow asks how much its socket holds (ioctl SIOCINQ, which sends no"
echo "acknowledgement) each time it would have read, and gives each message the time its"
echo "last byte was first seen there: the receive records keep the default's resolution, and"
echo "what the gap delays is the delivery to the ops that wait on a message. In 3"
echo "alternating rounds (4 KiB, 200 000 messages, 2026-12-05, Intel Xeon machine, nothing"
echo "else running) the loop moved 340 000-352 000 messages a second (41 000-65 000"
echo "acknowledgements), the agent 208 000-229 000 (183 000-189 000), with a 20 us gap and"
echo "no watching 276 000-281 000 (58 000-68 000), and with the gap and the watching 247"
echo "000-277 000 (56 000-68 000). That left a choice between every message delivered to the"
echo "ops at once and a sender that keeps up with small messages. It is no longer one: the gap"
echo "now holds only while no op of the rank waits for the flow's messages (an op armed with"
echo "a dependency on them still unmet, or, with the iteration barrier, an iteration whose own"
echo "ops are done; Executor::awaited), and a flow that an op waits for is read at its next"
echo "look. It holds only for messages under 64 KiB: in paired rounds (Intel Xeon machine,"
echo "2026-12-05, nothing else running) it raised the rate of 16 and 32 KiB messages in 8 of 8,"
echo "by 10-15%, and lowered that of 64 KiB messages in 6 of 10 (medians 48 000 against 59 000"
echo "a second, within that size's swings below) and of four flows of 8 MiB messages in 6 of 6"
echo "(45 against 51 Gb/s). So it is on by default, 20 us (\`--read-gap-us 0\` turns it off;"
echo "the run's summaries give \`read_gap_ns\`), and the row with \`--read-gap-us 0\` in the"
echo "table measures the agent without it. In the replay tests, of a stream of 1000 messages"
echo "that an op waits for, one every 300 us, none was read more than 500 us after it was seen"
echo "with a 1 ms gap (3-27 under ThreadSanitizer, whose receiver falls behind), against"
echo "512-522 when the flow is not told that an op waits."
echo
echo "Why 64 KiB messages swing (2026-12-05, AMD EPYC machine, 1-minute load 0.7-1.2 from"
echo "these runs alone; 60 000 messages a run, perf stat). Two things move the rate more"
echo "than the agent's own code does:"
echo "- where the scheduler puts the two sides. With the sending agent on core 0 and the"
echo "  receiving one on core 1 (taskset), 3 runs moved 52 000-79 000 messages a second;"
echo "  with both on core 0, 21 000-26 000. Unpinned, each run lands somewhere between."
echo "  Pinned, the agent with \`--pin\` moved 42 000-75 000 against the pinned loop's"
echo "  53 000-83 000 in 5 paired rounds (ratios 73-99%, median 91%); unpinned in the same"
echo "  rounds, 63-90% (median 80%)."
echo "- the machine's own speed. The blocking loop, pinned, moved 77 000-80 000 in two"
echo "  rounds and 44 000-46 000 in the next two, for the same work: its sender's CPU"
echo "  time per message went from 12.4-12.8 to 21.2-22.3 us. The agents' runs next to them moved"
echo "  with them."
echo "The receiving agent makes more system calls than the loop, whose \`read\` takes 256"
echo "KiB (per message 1.3-2.2 recv against 0.8 read, 0.3-0.7 epoll_wait, 0.1 setsockopt"
echo "for SO_RCVLOWAT; 20 000 messages), and spends 12-21 us of CPU a message against the"
echo "loop's 9-13 (its start-up taken off); skipping SO_RCVLOWAT, or waiting between messages for 64 KiB rather"
echo "than the first byte, did not change the rate beyond the noise (4 rounds each)."
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
  echo "microseconds, its pacing switches between rates that last tenths of a second (Runs as"
  echo "long as iperf3's, above): here iperf3 -N's one flow moved ${PACED_BASE[1MiB 1]} Gb/s (a median of"
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
