#!/usr/bin/env bash
# The profile subcommands end to end, through the real binary.
# Usage: profile_cli_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"

help_lists_subcommands() {
  "$TW" --help | grep -q 'profile' && "$TW" profile --help | grep -q 'synth' &&
    "$TW" profile synth --help | grep -q -- '--pattern'
}
check "--help lists the subcommands" help_lists_subcommands

synth_validate_show() {
  "$TW" profile synth --model resnet50 --pattern ring-allreduce --ranks 4 -o r.yaml &&
    "$TW" profile validate r.yaml | grep -q 'r.yaml: ok' &&
    "$TW" profile show r.yaml --json > r.json &&
    /usr/bin/python3 - <<'PY'
import json
j = json.load(open("r.json"))
grad = 25557032 * 4
assert j["ranks"] == 4 and j["flows"] == 4, j
assert j["bytes_per_iteration"] == 2 * 3 * grad, j["bytes_per_iteration"]
for r in j["per_rank"]:
    assert abs(r["sent_bytes"] - 1.5 * grad) < 1e5, r
assert j["lower_bound"]["iteration_ns"] > 0
assert j["tensors"] == 161
PY
}
check "synth writes a profile that validates and shows" synth_validate_show

show_text() {
  "$TW" profile show "$SRC/traffic_profiles/resnet50-ps-4w2s.yaml" --link-gbps 25 > out.txt &&
    grep -q 'lower bound at 25.00 Gb/s' out.txt && grep -q 'server' out.txt && grep -q 'tensors 161' out.txt
}
check "show prints ranks, flows and the lower bound" show_text

invalid_profile() {
  cat > bad.yaml <<'YAML'
version: 1
iterations: 0
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 3}]
ops:
  - {id: a, type: compute, rank: 0, duration: -2ms}
  - {id: b, type: send, flow: g, bytes: 10}
YAML
  local out rc
  out=$("$TW" profile validate bad.yaml 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] || { echo "exit $rc"; return 1; }
  [ "$(echo "$out" | wc -l)" -eq 4 ] || { echo "$out"; return 1; }
  echo "$out" | grep -qx "bad.yaml:2:13: the profile: 'iterations' must be at least 1, got 0" &&
    echo "$out" | grep -q "^bad.yaml:4:30: flow 'f': 'dst' names rank 3" &&
    echo "$out" | grep -q "^bad.yaml:6:47: op 'a': 'duration' must be positive" &&
    echo "$out" | grep -q "^bad.yaml:7:31: op 'b' sends on unknown flow 'g'"
}
check "validate prints every problem as FILE:LINE:COL and exits 1" invalid_profile

hostile_input() {
  head -c 200000 /dev/urandom > garbage.yaml
  "$TW" profile validate garbage.yaml > /dev/null 2>&1
  [ $? -eq 1 ] || return 1
  /usr/bin/python3 -c "print('a: ' + 'x' * 100_000_000)" > long.yaml
  "$TW" profile validate long.yaml > /dev/null 2>&1
  [ $? -eq 1 ] || return 1
  /usr/bin/python3 -c "print('[' * 200000)" > deep.yaml
  local out
  out=$("$TW" profile validate deep.yaml 2>&1)
  [ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ]
}
check "garbage, a 100 MB line and deep nesting fail cleanly" timeout 120 bash -c "$(declare -f hostile_input); TW=$TW; hostile_input"

# A plan's size in memory follows what it holds, not numbers it only states: a
# 2-rank ring declaring 16 384 ranks (ranks x ranks tables took 13 GB) and one
# declaring 10 million iterations (all simulated: bad_alloc after 35 s). The
# peak resident size of each analysis stays under 1 GB.
plan_sizes_bounded() {
  "$TW" profile synth --model mlp --ranks 2 --iterations 4 -o small.yaml 2> /dev/null || return 1
  /usr/bin/python3 - <<'PY' || return 1
import re
t = open("small.yaml").read()
ranks = "".join(f"  - {{id: {r}, role: worker}}\n" for r in range(16384))
open("wide.yaml", "w").write(re.sub(r"ranks:\n(  - \{id: \d+[^}]*\}\n)+", lambda m: "ranks:\n" + ranks, t, count=1))
open("long.yaml", "w").write(re.sub(r"(?m)^iterations: 4$", "iterations: 10000000", t, count=1))
PY
  local f rss
  for f in wide long; do
    # Two what-ifs at a time, as on this machine: the bound is for a given number
    # of threads (by default one per core, within 4 GiB of what-ifs).
    /usr/bin/time -f %M -o "$f.rss" timeout 300 "$TW" analyze --threads 2 "$f.yaml" > "$f.out" 2> "$f.err" || { tail -3 "$f.err"; return 1; }
    rss=$(tail -1 "$f.rss")
    echo "$f: peak $((rss / 1024)) MB; $(head -1 "$f.out")"
    [ "$rss" -lt 1048576 ] || return 1
  done
  grep -q "ranks 16384," <("$TW" profile show wide.yaml 2>&1) || { echo "wide.yaml does not declare 16384 ranks"; return 1; }
  grep -q "the first 100 of its 10000000 iterations" long.out
}
check "analyze: a plan declaring 16 384 ranks or 10 million iterations in bounded memory" plan_sizes_bounded

bad_arguments() {
  local out
  out=$("$TW" profile synth --model nosuch -o x.yaml 2>&1) && return 1
  [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "unknown model 'nosuch'" || { echo "$out"; return 1; }
  out=$("$TW" profile synth --model mlp --ranks 1 2>&1) && return 1
  echo "$out" | grep -q 'ranks' || { echo "$out"; return 1; }
  out=$("$TW" profile show /nonexistent.yaml 2>&1) && return 1
  [ "$out" = "/nonexistent.yaml: cannot open: No such file or directory" ] || { echo "$out"; return 1; }
  out=$("$TW" profile synth --model mlp -o /nonexistent-dir/x.yaml 2>&1) && return 1
  echo "$out" | grep -q 'cannot write' || { echo "$out"; return 1; }
}
check "bad arguments give one-line errors and exit non-zero" bad_arguments

committed_profiles_are_current() {
  local f gen
  for f in "$SRC"/traffic_profiles/*.yaml; do
    gen=$(grep -m1 '^  generator: ' "$f" | sed 's/^  generator: tensorwire //')
    [ -n "$gen" ] || { echo "$f has no generator line"; return 1; }
    # shellcheck disable=SC2086
    "$TW" $gen -o regen.yaml 2>/dev/null || { echo "cannot run: $gen"; return 1; }
    cmp -s regen.yaml "$f" || { echo "$f differs from: tensorwire $gen"; return 1; }
  done
}
check "bundled profiles are what their generator line produces" committed_profiles_are_current

sample_validates() {
  "$TW" profile validate "$SRC/docs/sample-profile.yaml" | grep -q ': ok'
}
check "the documented sample profile validates" sample_validates

# A replay of a synthesised profile is compared with the timing model at the link
# rates it measured, and the lower bound printed below it is one: the replay's
# mean iteration is not faster. A parameter server (several flows share the server's
# link) and a ring (one flow per rank's link) on loopback.
bound_holds() {  # NAME "RUN_ARGS" SYNTH_ARGS...
  local name=$1 run_args=$2
  shift 2
  # shellcheck disable=SC2086
  "$TW" profile synth "$@" --iterations 3 -o "$name.yaml" &&
    "$TW" run "$name.yaml" --local "$(/usr/bin/python3 -c "import yaml; print(len(yaml.safe_load(open('$name.yaml'))['ranks']))")" \
      --out "run-$name" --quiet --timeout 240 $run_args > /dev/null &&
    "$TW" compare "$name.yaml" "run-$name" --json > "$name-compare.json" &&
    "$TW" compare "$name.yaml" "run-$name" > "$name-compare.txt" || return 1
  /usr/bin/python3 - "$name-compare.json" "$name-compare.txt" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
bound = j["lower_bound"]["iteration_ns"]
assert bound > 0, j["lower_bound"]
assert "timing model at the replay's measured link rates" in j["reference"], j["reference"]
times = [t for t in j["replay_iteration_ns"] if t >= 0]
# The run as a whole cannot beat it; one job-wide iteration can (after a late
# one, the ranks already started it), as the comparison's note says.
assert times and sum(times) / len(times) >= bound, (times, j["lower_bound"])
model = j["reference_iteration_ns"]
assert all(t >= bound for t in model), (model, bound)
# The headline (median iteration time against the model), the bound on the next line.
head = [i for i, l in enumerate(text) if l.startswith("median iteration time: replay ")]
assert head and text[head[0] + 1].startswith("lower bound: "), text[:5]
PY
}
check "parameter server on loopback: the mean iteration does not beat the lower bound" \
  bound_holds ps "" --model vgg16 --pattern ps --workers 3 --servers 1
check "ring all-reduce on loopback: the mean iteration does not beat the lower bound" \
  bound_holds ring "" --model resnet50 --pattern ring-allreduce --ranks 3
check "ring all-reduce in open loop: the mean iteration does not beat the lower bound" \
  bound_holds ring-open "--open-loop --link-gbps 40" --model resnet50 --pattern ring-allreduce --ranks 3

models_listed() {
  "$TW" profile models | grep -q 'bert-large *391'
}
check "profile models lists the bundled tensor lists" models_listed

finish
