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
echo
echo "The start lead (300 ms) is a fixed part of setup: it leaves every agent time to"
echo "arm its timer for the common instant."

echo
echo "### Set-up at scale"
echo
echo "\`tensorwire run --testbed 4\`: N agents spread over the 4 hosts of a namespace testbed"
echo "(N/4 agents per host) on the same 1-iteration ring of N ranks; median of $REPS runs (range)."
echo "The phases (run.json's \`setup_phases_ns\`, medians) are: prepare, cutting each rank's"
echo "slice of the profile; join, launching the agents until all have dialled in; connect,"
echo "sending each its set-up until every flow is connected; sync, the clock"
echo "synchronisation; setup adds the 300 ms start lead. Each agent is sent its rank's slice"
echo "of the profile: in a ring all-reduce a rank sends 2(N-1) messages per bucket, so a"
echo "slice grows with N and the profile with N squared. \"whole profile to each\" is what"
echo "sending every agent the whole profile would have taken."
echo
echo "| agents | setup | per agent | prepare | join | connect | sync | sent at set-up | per agent | whole profile to each |"
echo "|---|---|---|---|---|---|---|---|---|---|"
"$tw" testbed down --name twctl > /dev/null 2>&1 || true
trap '"$tw" testbed down --name twctl > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$tw" testbed up --hosts 4 --name twctl > /dev/null
for n in 8 32 64 256; do
  "$tw" profile synth --model mlp --ranks $n --iterations 1 -o "$work/s$n.yaml" 2> /dev/null
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
  printf '| %d | %s ms | %.1f ms | %s ms | %s ms | %s ms | %s ms | %s | %s | %s |\n' $n "$(spread "${setup[@]}")" "$(awk "BEGIN {print $m / $n}")" \
    "$(median "${prepare[@]}")" "$(median "${join[@]}")" "$(median "${connect[@]}")" "$(median "${sync[@]}")" \
    "$(human_bytes "$(median "${sent[@]}")")" "$(human_bytes "$(awk "BEGIN {print $(median "${sent[@]}") / $n}")")" \
    "$(human_bytes "$(median "${whole[@]}")")"
  last_loads=${loads[*]}
done
"$tw" testbed down --name twctl > /dev/null 2>&1 || true
echo
echo "With 256 agents (64 per host, 128 a core) each run loads the machine itself, and"
echo "the next run starts on the load average the one before left (its processes are"
echo "gone; the average decays over minutes). 1-minute load average at the start of each"
echo "256-agent run: ${last_loads// /, }."
echo
echo "Per agent, set-up grows with N because a ring's slice does (\"sent at set-up\", per"
echo "agent). Per byte of set-up it does not: divide setup by \"sent at set-up\" and the"
echo "time per megabyte falls as N grows, as the fixed costs (launching, the start lead)"
echo "spread over more bytes. What an agent does with its bytes, step by step, is in"
echo "\"Set-up message of one agent\" below."
