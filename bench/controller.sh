#!/usr/bin/env bash
# Controller overhead: for 2, 8 and 32 local agents, the time from launching the
# agents to the common start (the first byte of the run), and from the last
# iteration to the results being written; next to the baseline of starting that
# many tensorwire processes at all. Also the clock-sync error bounds: on one kernel
# clock the true offset is zero, so the estimate shows the method's own error.
# Usage: bench/controller.sh BUILD_DIR > fragment.md
set -euo pipefail
build=$(realpath "$1")
tw=$build/cli/tensorwire
work=$(mktemp -d /tmp/tw-bench-ctl.XXXXXX)
trap 'rm -rf "$work"' EXIT
REPS=${REPS:-5}
. "$(dirname "$0")/lib.sh"

echo "## Controller"
echo
echo "\`tensorwire run --local N\` on a 1-iteration ring all-reduce of the MLP model (N"
echo "ranks); median of $REPS runs. Setup is launch to the common start (agents dial in,"
echo "get the profile, connect their flows, synchronise clocks; the start itself is"
echo "300 ms after clock sync); collection is the last iteration to every result"
echo "written. The baseline starts N \`tensorwire --version\` processes and waits for"
echo "them. Clock offsets are estimated on one kernel clock, where the truth is zero."
echo
quiet_table_start
echo "| agents | setup | baseline: N processes | results collected | largest clock bound | largest offset |"
echo "|---|---|---|---|---|---|"
for n in 2 8 32; do
  "$tw" profile synth --model mlp --ranks $n --iterations 1 -o "$work/p$n.yaml" 2> /dev/null
  setup=() collect=() spawn=() bound=() offset=()
  for ((k = 0; k < REPS; k++)); do
    rm -rf "$work/r"
    "$tw" run "$work/p$n.yaml" --local $n --out "$work/r" --json --join-timeout 120 > "$work/r.json"
    read -r s c b o < <(/usr/bin/python3 - "$work/r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"], j
b = max(a["clock_bound_ns"] for a in j["agents"])
o = max(abs(a["clock_offset_ns"]) for a in j["agents"])
print(j["setup_ns"] / 1e6, j["collect_ns"] / 1e6, b / 1e3, o / 1e3)
PY
)
    setup+=("$s") collect+=("$c") bound+=("$b") offset+=("$o")
    t0=$(date +%s%N)
    for ((i = 0; i < n; i++)); do "$tw" --version > /dev/null & done
    wait
    spawn+=("$(( ($(date +%s%N) - t0) / 1000 ))")
  done
  printf '| %d | %.0f ms | %.0f ms | %.1f ms | %.0f us | %.0f us |\n' $n "$(median "${setup[@]}")" \
    "$(awk "BEGIN {print $(median "${spawn[@]}") / 1000}")" "$(median "${collect[@]}")" "$(median "${bound[@]}")" "$(median "${offset[@]}")"
done
table_load
echo
echo "The start lead (300 ms) is a fixed part of setup: it leaves every agent time to"
echo "arm its timer for the common instant."

echo
echo "### Set-up at scale"
echo
echo "\`tensorwire run --testbed 4\`: N agents spread over the 4 hosts of a namespace testbed"
echo "(N/4 agents per host), on two profiles of N ranks and 1 iteration; median of $REPS runs (range)."
echo "The ring is the MLP model's all-reduce (\`profile synth\`): a rank sends 2(N-1) messages"
echo "per bucket, so its slice grows with N and the profile with N squared. The pipeline"
echo "(written by the benchmark) has N stages, each sending a 1 MiB activation to the next"
echo "and a 1 MiB gradient back: a stage's slice is the same whatever N, so what it shows"
echo "is the controller's and the agents' own cost per agent."
echo "The phases (run.json's \`setup_phases_ns\`, medians) are: prepare, writing the profile"
echo "and finding each rank's part of it in one pass; join, launching the agents until all"
echo "have dialled in; connect, cutting each rank's slice from its part and sending each its"
echo "set-up, until every flow is connected (before 2026-12-06 the slices were all cut in"
echo "prepare and held until sent: 8192 ranks of a small ring took 1.9 GB); sync, the clock"
echo "synchronisation; setup adds the 300 ms start lead. \"whole profile to each\" is what"
echo "sending every agent the whole profile would have taken."
echo
# After the 32 agents above: from a quiet machine again.
quiet_table_start
echo "| profile | agents | setup | per agent | prepare | join | connect | sync | sent at set-up | per agent | whole profile to each |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
"$tw" testbed down --name twctl > /dev/null 2>&1 || true
trap '"$tw" testbed down --name twctl > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$tw" testbed up --hosts 4 --name twctl > /dev/null
# A pipeline of N stages: forward 1 ms, 1 MiB to the next stage; backward 2 ms,
# 1 MiB back, each after what it receives.
pipeline() {
  /usr/bin/python3 - "$1" <<'PY'
import sys
n = int(sys.argv[1])
print("version: 1\nmetadata: {source: manual, pattern: pipeline}\niterations: 1\nranks:")
for i in range(n): print(f"  - {{id: {i}}}")
print("flows:")
for i in range(n - 1):
    print(f"  - {{id: f{i}, src: {i}, dst: {i + 1}}}")
    print(f"  - {{id: b{i + 1}, src: {i + 1}, dst: {i}}}")
print("ops:")
for i in range(n):
    after = f", after: [recv:fs{i - 1}]" if i else ""
    print(f"  - {{id: fwd{i}, type: compute, rank: {i}, duration: 1ms{after}}}")
    if i < n - 1: print(f"  - {{id: fs{i}, type: send, flow: f{i}, bytes: 1MiB, after: [fwd{i}]}}")
for i in range(n - 1, -1, -1):
    after = f"fwd{i}" if i == n - 1 else f"recv:bs{i + 1}"
    print(f"  - {{id: bwd{i}, type: compute, rank: {i}, duration: 2ms, after: [{after}]}}")
    if i > 0: print(f"  - {{id: bs{i}, type: send, flow: b{i}, bytes: 1MiB, after: [bwd{i}]}}")
PY
}
loads_256=()
for shape in ring pipeline; do
for n in 8 32 64 256; do
  if [ $shape = ring ]; then
    "$tw" profile synth --model mlp --ranks $n --iterations 1 -o "$work/s$n.yaml" 2> /dev/null
  else
    pipeline $n > "$work/s$n.yaml"
  fi
  setup=() sent=() whole=() prepare=() join=() connect=() sync=() loads=()
  for ((k = 0; k < REPS; k++)); do
    loads+=("$(load1)")
    rm -rf "$work/r"
    "$tw" run "$work/s$n.yaml" --testbed 4 --name twctl --keep --out "$work/r" --json --join-timeout 300 > "$work/r.json"
    read -r s b w pp jj cc ss < <(/usr/bin/python3 - "$work/r.json" "$work/r/run.json" $n <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"], j
sb = json.load(open(sys.argv[2]))["setup_bytes"]
ph = j["setup_phases_ns"]
print(round(j["setup_ns"] / 1e6), sb["sent"], sb["profile"] * int(sys.argv[3]),
      *(round(ph[k] / 1e6) for k in ("prepare", "join", "connect", "sync")))
PY
)
    setup+=("$s") sent+=("$b") whole+=("$w") prepare+=("$pp") join+=("$jj") connect+=("$cc") sync+=("$ss")
  done
  m=$(median "${setup[@]}")
  printf '| %s | %d | %s ms | %.1f ms | %s ms | %s ms | %s ms | %s ms | %s | %s | %s |\n' $shape $n "$(spread "${setup[@]}")" "$(awk "BEGIN {print $m / $n}")" \
    "$(median "${prepare[@]}")" "$(median "${join[@]}")" "$(median "${connect[@]}")" "$(median "${sync[@]}")" \
    "$(human_bytes "$(median "${sent[@]}")")" "$(human_bytes "$(awk "BEGIN {print $(median "${sent[@]}") / $n}")")" \
    "$(human_bytes "$(median "${whole[@]}")")"
  if [ $n = 256 ]; then loads_256+=("$shape: $(echo "${loads[*]}" | sed 's/ /, /g')"); fi
done
done
"$tw" testbed down --name twctl > /dev/null 2>&1 || true
table_load
echo
echo "With 256 agents (64 per host, 128 a core) each run loads the machine itself, and"
echo "the next run starts on the load average the one before left (its processes are"
echo "gone; the average decays over minutes). 1-minute load average at the start of each"
echo "256-agent run: $(printf '%s; ' "${loads_256[@]}" | sed 's/; $//')."
echo
echo "Per agent, the ring's set-up grows with N because its slice does (\"sent at set-up\","
echo "per agent); per byte of set-up it does not. The pipeline's slice stays the same"
echo "size (but for one short line per rank id), and so does its set-up per agent: the"
echo "controller and the agents add no cost of their own that grows with N. What an agent"
echo "does with its bytes, step by step, is in \"Set-up message of one agent\" below."
