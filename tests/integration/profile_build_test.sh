#!/usr/bin/env bash
# The loop from a real job to its replay and back: each real job in examples/ runs
# under `tensorwire capture`, its profile is built (`profile build`), validated,
# replayed, and compared with the capture, with its error inside a loose bound
# (the real targets are measured in bench/fidelity.sh). DDP runs across two
# namespace hosts of the testbed, one capture per host; the parameter-server jobs
# (Gloo, ZeroMQ) and the pipeline on loopback. Bad input gets one line and a
# non-zero exit.
# Usage: profile_build_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
NAME=twb$((RANDOM % 100))
trap '"$TW" testbed down --name $NAME > /dev/null 2>&1; rm -rf "$TW_TMP"' EXIT
# Loose: the replay runs next to the other tests on two cores; a broken build
# (wrong iterations, lost dependencies) is off by far more.
MAX_ERROR=75

# build DIR... -> job.yaml, report in build.txt and build.json
build() {
  local out=$1
  shift
  "$TW" profile build "$@" -o "$out" > "$out.txt" 2> "$out.err" || { cat "$out.err"; return 1; }
  "$TW" profile build "$@" -o "$out" --json > "$out.json" 2> "$out.err" || { cat "$out.err"; return 1; }
  "$TW" profile validate "$out" > /dev/null || return 1
}

# replay_and_compare PROFILE CAPTURE RANKS [run options...]
replay_and_compare() {
  local profile=$1 capture=$2 ranks=$3
  shift 3
  local run=${profile%.yaml}-run
  "$TW" run "$profile" --out "$run" --quiet "$@" > "$run.out" 2>&1 || { tail -20 "$run.out"; return 1; }
  "$TW" compare "$capture" "$run" --json --max-error $MAX_ERROR > "$run-compare.json" 2> "$run-compare.err" ||
    { cat "$run-compare.err"; "$TW" compare "$capture" "$run" | head -12; return 1; }
  "$TW" compare "$profile" "$run" --max-error $MAX_ERROR > /dev/null || return 1
  $PY - "$run-compare.json" "$ranks" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["iterations"] >= 3, j["iterations"]
assert len(j["rank_iteration_error_pct"]) == int(sys.argv[2]), j["rank_iteration_error_pct"]
assert j["start_offset_error_ns"]["n"] > 0
PY
}

# report_says JOB.yaml.json PYTHON-EXPRESSION-ON-r
report_says() {
  $PY -c 'import json, sys; r = json.load(open(sys.argv[1])); assert '"$2"', json.dumps(r, indent=1)[:1500]' "$1"
}

launch() {  # DIR SCRIPT NPROC ARGS...
  local dir=$1 script=$2 n=$3
  shift 3
  "$TW" capture --out "$dir" --quiet -- $PY "$SRC/examples/ddp/launch.py" --nproc "$n" --logs "$dir-logs" --timeout 300 \
    --script "$SRC/examples/$script" -- "$@" > "$dir.out" 2>&1 || { tail -20 "$dir.out"; return 1; }
}

ddp_two_hosts() {
  "$TW" testbed up --hosts 2 --name $NAME > /dev/null || return 1
  "$TW" testbed status --name $NAME --json > tb.json || return 1
  local master port=$((20000 + RANDOM % 20000)) pids=() r rc=0
  master=$($PY -c 'import json; print(json.load(open("tb.json"))["host_list"][0]["address"])')
  mkdir -p ddp-logs
  for r in 0 1; do
    ip netns exec $NAME-h$r "$TW" capture --out ddp-h$r --quiet -- env RANK=$r WORLD_SIZE=2 MASTER_ADDR=$master \
      MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0 $PY "$SRC/examples/ddp/train.py" --model mlp --iterations 16 \
      --log ddp-logs/rank-$r.jsonl > ddp-h$r.out 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || { tail -5 ddp-h*.out; return 1; }
  build ddp.yaml ddp-h0 ddp-h1 || return 1
  # Two ranks found from RANK, the Gloo pair as data, the store left out, the
  # iterations from the traffic alone, warm-up dropped, and both hosts on one clock.
  report_says ddp.yaml.json 'len(r["ranks"]) == 2 and r["ranks"][0]["how"] == "RANK=0"' || return 1
  report_says ddp.yaml.json 'r["iterations"]["source"] == "periodic traffic" and r["iterations"]["used"] >= 10' || return 1
  report_says ddp.yaml.json 'sum(c["use"] == "data" for c in r["connections"]) == 2' || return 1
  report_says ddp.yaml.json 'any(c["use"] == "store" for c in r["connections"])' || return 1
  report_says ddp.yaml.json 'len(r["iterations"]["dropped"]) >= 1' || return 1
  report_says ddp.yaml.json 'r["dependencies"]["with_dependencies"] > r["dependencies"]["sends"] // 2' || return 1
  grep -q '^iterations from periodic traffic' ddp.yaml.txt || return 1
  replay_and_compare ddp.yaml ddp-h0 2 --testbed 2 --name $NAME || return 1
  "$TW" testbed down --name $NAME > /dev/null
}
check "DDP over Gloo on two testbed hosts: captured per host, built, replayed on the same hosts, compared" ddp_two_hosts

ps_gloo() {
  launch ps ps/train_ps.py 4 --iterations 14 || return 1
  build ps.yaml ps || return 1
  report_says ps.yaml.json '[x["role"] for x in r["ranks"]] == ["server", "worker", "worker", "worker"]' || return 1
  report_says ps.yaml.json 'sum(c["use"] == "data" for c in r["connections"]) == 6' || return 1
  replay_and_compare ps.yaml ps 4 --local 4
}
check "parameter server over Gloo send/recv (1 server, 3 workers): the server found from the traffic" ps_gloo

ps_zmq() {
  launch zmq ps/train_zmq.py 3 --iterations 14 || return 1
  build zmq.yaml zmq || return 1
  # The ROUTER is bound on MASTER_PORT: its connections carry the tensors, so they are data.
  report_says zmq.yaml.json 'sum(c["use"] == "data" for c in r["connections"]) == 4' || return 1
  replay_and_compare zmq.yaml zmq 3 --local 3
}
check "parameter server over ZeroMQ bound on MASTER_PORT: its connections are data" ps_zmq

pipeline() {
  [ -f "$SRC/examples/pipeline/train_pipeline.py" ] || { echo "no pipeline job"; return 1; }
  launch pp pipeline/train_pipeline.py 3 --iterations 14 || return 1
  build pp.yaml pp || return 1
  report_says pp.yaml.json 'all(x["role"] == "worker" for x in r["ranks"])' || return 1
  replay_and_compare pp.yaml pp 3 --local 3
}
check "pipeline over Gloo send/recv (3 stages)" pipeline

iteration_range() {
  "$TW" profile build ps --iterations 3:7 -o range.yaml > range.txt || return 1
  grep -q 'used (3 to 6)' range.txt || { cat range.txt; return 1; }
  [ "$($PY -c 'import yaml; print(yaml.safe_load(open("range.yaml"))["iterations"])')" = 4 ] || return 1
  ! "$TW" profile build ps --iterations 900:901 -o bad.yaml 2> range.err && grep -q 'holds none of the iterations' range.err &&
    [ "$(wc -l < range.err)" = 1 ] || { cat range.err; return 1; }
  ! "$TW" profile build ps --iterations 7:3 -o bad.yaml 2> range.err && grep -q 'A:B' range.err
}
check "--iterations A:B is used, and refused in one line when outside what was found" iteration_range

# Timelines (`tensorwire view`) of the captures, the run and the profile above,
# decoded against Perfetto's message definitions (tests/perfetto/check_trace.py:
# slices nest, flows have both ends, names and tracks are defined before use),
# with what they hold counted against `trace show` and `results rates`.
timelines() {
  local chk="$SRC/tests/perfetto/check_trace.py" shown=0 d
  [ -d ddp-run ] && [ -d ps-run ] || { echo "the DDP and parameter-server runs above did not run"; return 1; }
  "$TW" view ddp-h0 ddp-h1 -o cap.pftrace 2> view.err || { cat view.err; return 1; }
  $PY "$chk" cap.pftrace > cap.sum || return 1
  for d in ddp-h0 ddp-h1; do
    shown=$((shown + $("$TW" trace show $d --json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["messages"]))')))
  done
  $PY - cap.sum $shown ddp-h0 <<'PY' || return 1
import glob, json, sys
s = json.load(open(sys.argv[1])); shown = int(sys.argv[2])
# Every message of both hosts' traces, each read by its traced receiver, each with its stages from the wire tap.
assert s["slices"]["message"] == shown, (s["slices"], shown)
assert s["slices"]["read"] == s["about"]["receipts"] == shown, s["slices"]
assert s["slices"].get("stage", 0) >= shown, s["slices"]
assert s["flows"] + s["about"]["flows_not_drawn"] == shown
assert len(s["processes"]) == 2 and s["processes"][0].startswith("rank 0"), s["processes"]
assert s["slices"]["iteration"] >= 2 * 10, s["slices"]
assert any(c.startswith("cwnd to rank 1") for c in s["counters"]) and any(c.startswith("throughput") for c in s["counters"])
# On the capture's clock: inside the job's life, with the hosts' offsets and bounds in the file.
cap = json.load(open(glob.glob(sys.argv[3] + "/capture-*.json")[0]))
assert cap["started_ns"] - 1e9 <= s["first_ns"] <= s["last_ns"] <= cap["ended_ns"] + 1e9, (s["first_ns"], cap["started_ns"])
assert "CLOCK_REALTIME" in s["about"]["clock"] and "bound_ns" in s["about"]["hosts"], s["about"]
assert s["bytes"] / shown <= 150, s["bytes"] / shown
PY
  # The messages the run's records hold, as `results rates` counts them (its
  # receive records; `results check` may refuse a run whose timers fired early).
  local sent
  sent=$("$TW" results rates ddp-run --json | $PY -c 'import json,sys; print(sum(f["messages"] for f in json.load(sys.stdin)["flows"]))')
  "$TW" view ddp-run -o run.pftrace 2> view.err || { cat view.err; return 1; }
  $PY "$chk" run.pftrace > run.sum || return 1
  $PY - run.sum "$sent" ddp-run/run.json <<'PY' || return 1
import json, sys
s = json.load(open(sys.argv[1])); sent = int(sys.argv[2]); run = json.load(open(sys.argv[3]))
a = s["about"]
assert s["slices"]["message"] == sent and s["slices"]["read"] == sent, (s["slices"], sent)
assert s["slices"]["compute"] == a["compute"] and s["slices"]["compute"] > 0
assert s["flows"] + a["flows_not_drawn"] == sent + a["dependencies"] and a["dependencies"] > 0, a
assert s["slices"]["iteration"] == 2 * run["iterations_done"], (s["slices"], run["iterations_done"])
assert s["first_ns"] >= run["start_ns"], (s["first_ns"], run["start_ns"])
assert "controller" in a["clock"] and "bound_ns" in a["hosts"], a
PY
  # The wire tap for Wireshark: every frame as captured, read back as the format
  # lays it out (tests/perfetto/check_pcapng.py), data segments named in comments.
  "$TW" trace pcapng ddp-h0 ddp-h1 -o wire.pcapng 2> pcapng.err || { cat pcapng.err; return 1; }
  $PY "$SRC/tests/perfetto/check_pcapng.py" wire.pcapng ddp-h0/wire-*.pcap ddp-h1/wire-*.pcap > pcapng.sum || return 1
  $PY - pcapng.sum $shown <<'PY' || return 1
import json, sys
s = json.load(open(sys.argv[1])); shown = int(sys.argv[2])
assert s["interfaces"] == 2 and s["frames"] > shown, s
# Messages crossed the wire in segments, each named by its first byte's message
# (small ones may share a segment); most in an iteration.
assert s["comments"] >= shown // 2 and s["with_iteration"] > s["comments"] // 2, (s, shown)
assert all(c.startswith("tensorwire: rank ") for c in s["sample"]), s["sample"]
PY
  # The run beside the capture it replays; a profile; the legacy JSON; selections.
  "$TW" view ddp-run --against ddp-h0 ddp-h1 -o both.pftrace 2> view.err || { cat view.err; return 1; }
  $PY "$chk" both.pftrace | $PY -c '
import json, sys; s = json.load(sys.stdin)
assert sorted(p.split(":")[0] for p in s["processes"]) == ["capture"] * 2 + ["run"] * 2, s["processes"]' || return 1
  "$TW" view ddp.yaml -o prof.pftrace 2> view.err && $PY "$chk" prof.pftrace > prof.sum || { cat view.err; return 1; }
  "$TW" view ps-run -o ps.json 2> view.err && $PY "$chk" --json ps.json > ps.sum || { cat view.err; return 1; }
  $PY -c 'import json,sys; s = json.load(open("ps.sum")); assert s["slices"]["message"] == s["metadata"]["messages"] > 0, s' || return 1
  "$TW" view ps-run --iterations 2:4 --ranks 1 -o sel.pftrace 2> view.err && $PY "$chk" sel.pftrace > sel.sum || { cat view.err; return 1; }
  $PY -c '
import json; s = json.load(open("sel.sum")); a = json.load(open("ps.sum"))
assert len(s["processes"]) == 1 and s["processes"][0].startswith("rank 1"), s["processes"]
assert s["slices"]["iteration"] == 2 and 0 < s["slices"]["message"] < a["slices"]["message"], s["slices"]' || return 1
  # Bad input: one line naming what is wrong, and no file.
  ! "$TW" view /nonexistent -o x.pftrace 2> e1 && [ "$(wc -l < e1)" = 1 ] && grep -q /nonexistent e1 || { cat e1; return 1; }
  ! "$TW" view ps-run --iterations 4:2 -o x.pftrace 2> e2 && grep -q -- --iterations e2 || { cat e2; return 1; }
  cp -r ps-run cut && truncate -s 1000 cut/rank-1.twr
  ! "$TW" view cut -o x.pftrace 2> e3 && [ "$(wc -l < e3)" = 1 ] && grep -q rank-1.twr e3 || { cat e3; return 1; }
  # A record whose time is far outside the run (a damaged or forged file): refused, naming it.
  cp -r ps-run forged && $PY -c '
import struct
data = open("forged/rank-1.twr", "rb").read()
# the unfinished iteration after the last (a record of it is allowed; a second record of an op instance is not)
n = sum(1 for i in range(16, len(data), 64) if data[i] == 4)
with open("forged/rank-1.twr", "ab") as f:  # a compute record (kind 3) of rank 1 ending at the end of time
    f.write(struct.pack("<BBHIIIQqqq16x", 3, 0, 1, 0, n, 0, 0, -1, 1000, 2**62 - 1))'
  ! "$TW" view forged --against ps-run -o x.pftrace 2> e4 && [ "$(wc -l < e4)" = 1 ] && grep -q 'rank-1.twr: record .* outside the run' e4 ||
    { cat e4; return 1; }
  # Every reader, not the timeline alone (results check said ok, compare gave 10^13 %).
  local reader
  for reader in "results check forged" "compare ps-run forged" "analyze forged"; do
    # shellcheck disable=SC2086  # the reader's words
    ! "$TW" $reader > /dev/null 2> e6 && grep -q 'rank-1.twr: record .* outside the run' e6 || { echo "$reader:"; cat e6; return 1; }
  done
  ! "$TW" view ps-run --ranks 9 -o x.pftrace 2> e5 && grep -q 'rank 9' e5 || { cat e5; return 1; }
  [ ! -e x.pftrace ] && ! ls x.pftrace.tmp-* > /dev/null 2>&1
}
check "timelines of the captures, runs and profile: decoded, nested, every message and flow there" timelines

bad_input() {
  mkdir -p empty notcap && echo hi > notcap/readme.txt
  ! "$TW" profile build empty -o x.yaml 2> e1 && [ "$(wc -l < e1)" = 1 ] && grep -q 'empty' e1 || { cat e1; return 1; }
  ! "$TW" profile build notcap -o x.yaml 2> e2 && [ "$(wc -l < e2)" = 1 ] || { cat e2; return 1; }
  ! "$TW" profile build /nonexistent -o x.yaml 2> e3 || return 1
  # A damaged trace: its header overwritten.
  cp -r ps damaged && f=$(ls damaged/trace-*.twt | head -1) && printf 'garbage!garbage!' | dd of="$f" conv=notrunc 2> /dev/null
  ! "$TW" profile build damaged -o x.yaml 2> e4 && [ "$(wc -l < e4)" = 1 ] && grep -q "$(basename "$f")" e4 || { cat e4; return 1; }
  [ ! -e x.yaml ] || return 1
  # compare with a capture the run did not replay.
  ! "$TW" compare zmq ps-run 2> e5 && grep -q 'did not replay a profile built from zmq' e5 || { cat e5; return 1; }
  # A run whose profile names, beside the capture, a directory that is none: not
  # read as a capture, and the error says where the path came from.
  rm -rf forged-gen && cp -r ps-run forged-gen &&
    sed -i 's|tensorwire profile build ps |tensorwire profile build ps /etc |' forged-gen/profile.yaml && grep -q 'build ps /etc ' forged-gen/profile.yaml || return 1
  ! "$TW" compare ps forged-gen 2> e6 && [ "$(wc -l < e6)" = 1 ] &&
    grep -q 'forged-gen/profile.yaml: its generator names /etc among the captures it was built from, which is no capture directory here' e6 || { cat e6; return 1; }
}
check "bad input: an empty or foreign directory, a damaged trace, a capture the run did not replay" bad_input

finish
