#!/usr/bin/env bash
# Regenerates docs/RELIABILITY.md: what tensorwire was put through and what held,
# in figures, on this machine.
#   1. forged and damaged run directories: each damage against every reader
#      (results check, results rates, compare, analyze, view, report): exit code,
#      time, peak memory, and whether the one-line error names the file;
#   2. hostile peers: a flood of idle connections at ulimit -n 200 against the
#      controller and an agent's data listener during a run;
#   3. faults on the namespace testbed (tests/integration/faults.py), each case
#      TW_REL_FAULT_RUNS times (default 5): detection, exit and clean-up times;
#   4. a soak: TW_REL_SOAK_ITERATIONS (default 20000) iterations on a 4-host
#      testbed (tests/integration/soak.py): RSS and descriptors of every process;
#   5. fuzzing: every libFuzzer target for TW_REL_FUZZ_SECONDS (default 60) each,
#      its executions and what it found.
# Usage: bench/reliability.sh [BUILD_DIR (default build)] [FUZZ_BUILD_DIR (default build-fuzz)]
# Run on a quiet machine, as root (nothing here needs the network beyond loopback
# and the testbed's namespaces).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TW=$root/${1:-build}/cli/tensorwire
FUZZ=$root/${2:-build-fuzz}/tests/fuzz
fuzz_seconds=${TW_REL_FUZZ_SECONDS:-60}
fault_runs=${TW_REL_FAULT_RUNS:-5}
soak_iterations=${TW_REL_SOAK_ITERATIONS:-20000}
PY=/usr/bin/python3
out=$root/docs/RELIABILITY.md
work=$(mktemp -d /tmp/tw-reliability.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
cd "$work" || exit 1
. "$root/bench/lib.sh"
wait_quiet "${TW_BENCH_MAX_LOAD:-0.5}" 300 || { echo "reliability: the load average is $(load1): not a quiet machine" >&2; exit 1; }
load=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')

# ---- 1. forged run directories ---------------------------------------------------
"$TW" run "$root/traffic_profiles/resnet50-ring-4.yaml" --local 4 --iterations 3 --out good --quiet > /dev/null 2>&1 ||
  { echo "the reference run failed"; exit 1; }
# forge CASE: a damaged copy of good/ in CASE/.
forge() {
  local c=$1
  rm -rf "$c" && cp -r good "$c"
  case $c in
    iterations-negative) $PY -c "import json;p='$c/rank-0.json';j=json.load(open(p));j['iterations']=-1;json.dump(j,open(p,'w'))" ;;
    iterations-4e9) $PY -c "import json;p='$c/rank-0.json';j=json.load(open(p));j['iterations']=4000000000;json.dump(j,open(p,'w'))" ;;
    iterations-string) $PY -c "import json;p='$c/rank-0.json';j=json.load(open(p));j['iterations']='x';json.dump(j,open(p,'w'))" ;;
    summary-not-json) echo '{"rank": 0, "iter' > "$c/rank-0.json" ;;
    summary-dev-zero) ln -sf /dev/zero "$c/rank-0.json" ;;
    profile-dev-zero) rm "$c/profile.yaml"; $PY -c "import json;p='$c/rank-0.json';j=json.load(open(p));j['profile']='/dev/zero';json.dump(j,open(p,'w'))" ;;
    profile-fifo) rm "$c/profile.yaml"; mkfifo "$c/profile.yaml" ;;
    record-iteration-3e6 | record-iteration-ffffffff | record-op-ffffffff | record-flow-99999 | record-bytes-huge | record-rank-65535)
      $PY - "$c" <<'PY'
import struct, sys
c = sys.argv[1]
p = f"{c}/rank-0.twr"
b = bytearray(open(p, "rb").read())
kind, off, fmt, val = {
    "record-iteration-3e6": (4, 8, "<I", 3_000_000), "record-iteration-ffffffff": (4, 8, "<I", 0xffffffff),
    "record-op-ffffffff": (1, 4, "<I", 0xffffffff), "record-flow-99999": (2, 12, "<I", 99999),
    "record-bytes-huge": (2, 16, "<q", -8), "record-rank-65535": (3, 2, "<H", 65535)}[c]
for i in range(16, len(b), 64):
    if b[i] == kind:
        struct.pack_into(fmt, b, i + off, val)
        break
open(p, "wb").write(b)
PY
      ;;
    record-duplicate) $PY -c "
p='$c/rank-0.twr';b=open(p,'rb').read()
r=next(b[i:i+64] for i in range(16,len(b),64) if b[i]==2)
open(p,'ab').write(r)" ;;
    records-cut) truncate -s 1000 "$c/rank-0.twr" ;;
    records-not-records) head -c 5000 /dev/urandom > "$c/rank-0.twr" ;;
    records-missing) rm "$c/rank-2.twr" ;;
  esac
}
cases="iterations-negative iterations-4e9 iterations-string summary-not-json summary-dev-zero profile-dev-zero profile-fifo
  record-iteration-3e6 record-iteration-ffffffff record-op-ffffffff record-flow-99999 record-bytes-huge record-rank-65535
  record-duplicate records-cut records-not-records records-missing"
commands=("results check D" "results rates D" "compare D/../good/profile.yaml D" "analyze D" "view D -o D.json" "report D -o D.html")
names=("check" "rates" "compare" "analyze" "view" "report")
forged_rows=""
n_cases=0
n_runs=0
n_refused=0
n_named=0
worst_s=0
worst_kb=0
for c in $cases; do
  forge "$c"
  n_cases=$((n_cases + 1))
  row="| $c |"
  for i in "${!commands[@]}"; do
    cmd=${commands[$i]//D/$c}
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %M" -o t.txt timeout 30 "$TW" $cmd > o.txt 2> e.txt
    rc=$?
    read -r secs kb < <(tail -1 t.txt)
    n_runs=$((n_runs + 1))
    last=$(grep -v '^Command ' e.txt | tail -1)
    named=no
    case "$last" in *"$c/"* | *"/dev/zero"* | *"$c:"*) named=yes ;; esac
    cell="ok"
    if [ $rc -eq 124 ]; then
      cell="**hang**"
    elif [ $rc -ge 128 ]; then
      cell="**crash $rc**"
    elif [ $rc -ne 0 ]; then
      n_refused=$((n_refused + 1))
      [ "$named" = yes ] && n_named=$((n_named + 1))
      cell="refused$([ "$named" = yes ] || echo ' (file not named)')"
    fi
    awk -v a="$secs" -v b="$worst_s" 'BEGIN {exit !(a > b)}' && worst_s=$secs
    [ "${kb:-0}" -gt "$worst_kb" ] && worst_kb=$kb
    row="$row $cell |"
  done
  example=$(grep -v '^Command ' e.txt | tail -1 | sed "s|$work/||g; s/|/\\\\|/g" | cut -c1-110)
  forged_rows+="$row \`${example:-}\` |"$'\n'
done

# ---- 2. hostile peers ------------------------------------------------------------
"$TW" profile synth --model mlp --ranks 2 --iterations 100000 -o long2.yaml 2> /dev/null
port=$((18300 + RANDOM % 200))
# The flood outlasts the controller's join timeout: the agents must get in while it
# holds the slots, not after it.
flood_seconds=10 flood_join=5
# The baseline: the same run, same limit, no flood.
b0=$(date +%s.%N)
(ulimit -n 200 && exec "$TW" run long2.yaml --local 2 --iterations 400 --out quiet-run --quiet) > /dev/null 2>&1
b1=$(date +%s.%N)
base_wall=$($PY -c "print(f'{$b1-$b0:.1f}')")
(ulimit -n 200 && exec /usr/bin/time -f "%U %S %e" -o ctl-time.txt "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$port \
  --token flood --iterations 400 --out flood-run --quiet --join-timeout $flood_join) > /dev/null 2> flood.err &
ctl=$!
sleep 0.3
$PY "$root/tests/integration/flood.py" 127.0.0.1 $port 400 $flood_seconds > flood-opened.txt &
fl=$!
sleep 1
t0=$(date +%s.%N)
(ulimit -n 200 && TW_TOKEN=flood exec "$TW" agent --controller 127.0.0.1:$port --quiet) 2> /dev/null &
(ulimit -n 200 && TW_TOKEN=flood exec "$TW" agent --controller 127.0.0.1:$port --quiet) 2> /dev/null
wait $ctl
ctl_rc=$?
t1=$(date +%s.%N)
wait
read -r cu cs ce < ctl-time.txt
flood_opened=$(cat flood-opened.txt)
flood_closed=$(grep -oE 'closed [0-9]+ unauthenticated connection\(s\) in all' flood.err | tr -dc 0-9)
flood_evicted=$(grep -oE '\([0-9]+ of them the oldest' flood.err | tr -dc 0-9)
flood_lines=$(grep -c 'made room for a connection\|refused a connection' flood.err)
flood_files=$(ls flood-run | grep -c -E '^(run|rank-[0-9]+)\.json$')
flood_check=$("$TW" results check flood-run 2>&1 | grep -c ': ok: ')
flood_cpu=$($PY -c "print(f'{($cu+$cs):.2f}')")
run_wall=$($PY -c "print(f'{$t1-$t0:.1f}')")

# ---- 3. faults on the testbed ----------------------------------------------------
: > faults.jsonl
for k in $(seq "$fault_runs"); do
  for c in $($PY "$root/tests/integration/faults.py" --list); do
    $PY "$root/tests/integration/faults.py" "$TW" "$c" "$work/fault-$c-$k" --name twrel >> faults.jsonl
  done
done
fault_rows=$($PY - faults.jsonl <<'PY'
import json, re, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = list(dict.fromkeys(r["case"] for r in runs))
def span(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"
for c in cases:
    rs = [r for r in runs if r["case"] == c]
    held = sum(not r["problems"] for r in rs)
    d = rs[-1]["deadline_s"]
    line = re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "ADDR", rs[-1]["line"].replace("tensorwire run: ", ""))
    line = re.sub(r"pid \d+", "pid N", line).replace("|", "\\|")
    probs = "; ".join(sorted({p for r in rs for p in r["problems"]}))[:200]
    print(f"| {rs[0]['what']} | {'-' if d is None else d} | {span([r.get('detected_s') for r in rs])} | "
          f"{span([r.get('exit_s') for r in rs])} | {span([r.get('clean_s') for r in rs])} | {held}/{len(rs)}"
          f"{' **' + probs + '**' if probs else ''} | {line[:160]} |")
PY
)

# ---- 4. the soak ------------------------------------------------------------------
soak_t0=$(date +%s.%N)
$PY "$root/tests/integration/soak.py" "$TW" "$work/soak" --name twrel --iterations "$soak_iterations" > soak.json 2> /dev/null
soak_wall=$($PY -c "print(f'{$(date +%s.%N) - $soak_t0:.0f}')")
soak_rows=$($PY - soak.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for name, s in r.get("processes", {}).items():
    a, b = s[0], s[-1]
    print(f"| {name} | {a['at']} | {a['rss'] >> 10} | {a['fds']} | {b['at']} | {b['rss'] >> 10} | {b['fds']} | {(b['rss'] - a['rss']) / 1024:+.0f} |")
if r["problems"]:
    print("\n**Problems: " + "; ".join(r["problems"]) + "**")
PY
)

# ---- 5. fuzzing ------------------------------------------------------------------
fuzz_rows=""
while read -r name _ options; do
  [ -x "$FUZZ/$name" ] || { fuzz_rows+="| $name | not built ($FUZZ) | | |"$'\n'; continue; }
  corpus=$(mktemp -d)
  [ -d "$root/tests/fuzz/corpus/${name%_fuzz}" ] && cp "$root/tests/fuzz/corpus/${name%_fuzz}"/* "$corpus/"
  # shellcheck disable=SC2086  # options: a list
  (cd "$root" && "$FUZZ/$name" -max_total_time="$fuzz_seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 $options \
    -artifact_prefix="$root/${2:-build-fuzz}/$name-" "$corpus") > "$name.log" 2>&1
  rc=$?
  runs=$(grep -oE '^Done [0-9]+ runs' "$name.log" | grep -oE '[0-9]+')
  cov=$(grep -oE 'cov: [0-9]+' "$name.log" | tail -1 | grep -oE '[0-9]+')
  found=$([ $rc -eq 0 ] && echo "nothing" || echo "**exit $rc: $(ls "$root/${2:-build-fuzz}/$name-"* 2> /dev/null | head -1 | xargs -r basename)**")
  fuzz_rows+="| $name | ${runs:-?} | ${cov:-?} | $found |"$'\n'
  rm -rf "$corpus"
done < <(grep -vE '^(#|$)' "$root/tests/fuzz/targets.txt")

# ---- the document ----------------------------------------------------------------
{
  cat <<EOF2
# Reliability: hostile peers, forged files, faults, fuzzing

What tensorwire was put through and what held, in figures. Regenerated by
\`bench/reliability.sh\` (on $cpu, $(nproc) cores, load average $load at the
start, $(date -u +%Y-%m-%d)); the tests that keep each property are named with it.

## Forged and damaged run directories

A 4-rank run (resnet50-ring-4, 3 iterations) damaged one way at a time, then
handed to every reader. *refused*: a non-zero exit with one line naming the file;
a hang (30 s) or a crash would be marked in bold. $n_cases damages x 6 readers =
$n_runs runs: $n_refused refused ($n_named naming the file), the rest read what
was still sound; the slowest took ${worst_s} s, the largest peak memory was
$((worst_kb / 1024)) MiB. Tests: \`DataFile.*\` and \`Records.RecordsThatDoNotFitTheProfileOrTheFileAreRefused\`
(unit), the damaged-input checks of profile_build_test.sh and profile_cli_test.sh.

| damage | check | rates | compare | analyze | view | report | the error (last reader) |
|---|---|---|---|---|---|---|---|
$forged_rows
## Hostile peers

With \`ulimit -n 200\` for the controller and both agents, 400 idle connections
held against the controller (each one it closes opened again) for $flood_seconds s, longer
than its join timeout (\`--join-timeout $flood_join\`), while the agents join and run 400
iterations: the flood opened $flood_opened connections; the controller closed
$flood_closed of them beyond its caps ($flood_evicted of them the oldest, for newer ones)
in $flood_lines log lines, used $flood_cpu CPU-s in all over ${ce} s of wall time (before the caps,
e1308df spun at 0.85 CPU-s per second and lost its results), exited $ctl_rc, and wrote $flood_files of its 3
result summaries (run.json, rank-0.json, rank-1.json), which \`results check\`
found sound ($flood_check). The agents, started 1 s into the flood (their own
connections from the same address each take the slot of the oldest stranger), finished
in $run_wall s from their start; the same run
without the flood (\`--local 2\`, same limit, just before) took $base_wall s. The caps, deadlines and back-off are in docs/protocol.md (*Hostile
peers*). Tests: controller_test.sh "a flood of idle connections at ulimit -n 200"
(the controller's and an agent's data listener), \`AcceptLoop.OutOfDescriptorsItClosesTheWaitingAndRecovers\`,
\`Admission.*\`, \`AdmitSocket.TheOldestConnectionIsShutDownForANewOne\`,
\`HttpRouter.OversizedRequestsAreRefusedWithTheirStatus\`,
\`ControlSession.AMessageOverTheLimitEndsTheSession\`, \`Outbox.AFullQueueClosesTheConnection\`.

## Faults on the namespace testbed

A real run on a 3-host testbed (one agent per namespace, a ring of 256 KiB
messages) and one fault, $fault_runs times each case (\`tests/integration/faults.py\`,
the same driver fault_test.sh runs). *detected*: seconds from the fault until
the run left \`running\` (for the controller's death: until no agent was left);
*exit*: until the controller exited 1 with its one line; *clean*: until no agent
process, no namespace of the testbed and no agent's working directory was left.
Median (min-max). *held*: the runs in which everything faults.py checks held:
the deadline, the line naming the rank and its host (\`NAME-hK\`), nothing left
within 10 s, run.json recording the failure, no partial file in the run
directory, and the surviving ranks' records read by \`results rates\` and
\`view\`. The deadlines are docs/protocol.md's: a process or connection
that dies is seen at once (1 s allowed), silence after the 1.8 s heartbeat
(2.5 s allowed), a stalled flow after \`--idle-timeout\` (3 s here, 3.5 s
allowed). Exit comes up to ~1.5 s later: the controller waits 300 ms to name the
cause, then stops the others and collects what they measured.

| fault | deadline (s) | detected (s) | exit (s) | clean (s) | held | the line (last run) |
|---|---|---|---|---|---|---|
$fault_rows

## Security checks

What the test command holds, every run (controller_test.sh, replay_test):
a wrong or missing token is refused with \`401\` and a line naming the peer, for
the API, the feed and \`/agent\`; the token is never printed (\`run --expect\`
writes it to \`OUT/token\`, mode 0600, removed at the end; \`replay --local\`'s
roster and \`dashboard.url\` are 0600 too) and never logged (a request line
holding \`token=\` is redacted); data flows carry a token of their own, never the
control plane's; with \`--tls-cert\` the controller speaks only TLS: a plain
client, an agent that trusts another certificate and an agent given a
certificate for another address are refused, each with its reason in one line
(controller_test.sh "TLS on the control plane").

## Soak

$soak_iterations iterations of a 4-rank ring (256 KiB per hop, 1 ms of compute)
on a 4-host testbed, one agent per host, in $soak_wall s
(\`tests/integration/soak.py\`; fault_test.sh runs it with 2000 iterations and
holds every process to its descriptors and to less than 2 MiB of RSS growth
between 10% and 90% of the run). Resident memory (KiB) and open descriptors of
each process at 10% and 90% of the run:

| process | iteration | RSS | descriptors | iteration | RSS | descriptors | growth (KiB) |
|---|---|---|---|---|---|---|---|
$soak_rows

## Fuzzing

Each libFuzzer target (AddressSanitizer and UndefinedBehaviorSanitizer) for
$fuzz_seconds s, seeded from tests/fuzz/corpus/ (real files); the test command
runs them all for 60 s together.

| target | executions | coverage (edges) | found |
|---|---|---|---|
$fuzz_rows
EOF2
} > "$out"
echo "wrote $out"
cat "$out"
