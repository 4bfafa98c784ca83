#!/usr/bin/env bash
# `tensorwire run` end to end: the controller, real agent processes on loopback,
# the ssh launcher against a real sshd, the HTTP API, and the fault cases (agents
# that die, hang or present the wrong token; a controller that dies or is
# interrupted), each checked for orphaned processes afterwards.
# Usage: controller_test.sh TENSORWIRE_BINARY SOURCE_DIR   (as root, for sshd)
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
# Each case uses its own controller port: processes of a case are found by it.
next_port=$((17600 + RANDOM % 200))
# take_port: the next port into $next_port (not in a subshell, which would not advance it).
take_port() { next_port=$((next_port + 1)); }

"$TW" profile synth --model mlp --ranks 2 --iterations 100000 -o long2.yaml 2> /dev/null
"$TW" profile synth --model mlp --ranks 8 --iterations 3 -o mlp8.yaml 2> /dev/null

# Processes still running for the controller at PORT (agents name it on their
# command line; the controller names it in --listen).
leftovers() { pgrep -f -- "127.0.0.1:$1" | grep -v "^$$\$" || true; }
no_leftovers() {  # PORT SECONDS: none left within SECONDS
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -le $deadline ]; do
    [ -z "$(leftovers "$1")" ] && return 0
    sleep 0.2
  done
  echo "left running: $(leftovers "$1" | xargs -r ps -o pid,args -p)"
  return 1
}
api() { curl -s -H "Authorization: Bearer $2" "http://127.0.0.1:$1$3"; }
# Waits until the run at PORT has done at least one iteration.
wait_running() {  # PORT TOKEN
  for _ in $(seq 150); do
    api "$1" "$2" /api/runs | $PY -c 'import json,sys; r=json.load(sys.stdin)[0]; sys.exit(0 if r["state"]=="running" and r["iterations_done"]>0 else 1)' \
      2> /dev/null && return 0
    sleep 0.1
  done
  echo "the run at port $1 never got going"
  return 1
}

full_run_4_ranks() {
  "$TW" run "$SRC/traffic_profiles/resnet50-ring-4.yaml" --local 4 --iterations 3 --out r4 --json > r4.json || return 1
  "$TW" results check r4 --profile r4/profile.yaml | grep -q 'ok: .* delivered whole' || return 1
  [ -f r4/compare.json ] && [ -f r4/run.json ] || return 1
  "$TW" results rates r4 --json > r4-rates.json && "$TW" results rates r4 | grep -q 'received per rank' || return 1
  $PY - <<'PY'
import json
j = json.load(open("r4.json"))
assert j["ok"] and len(j["iteration_ns"]) == 3, j
assert len(j["agents"]) == 4
for a in j["agents"]:
    # One kernel clock: the estimated offset must be within its bound of zero.
    assert abs(a["clock_offset_ns"]) <= a["clock_bound_ns"], a
    assert 0 < a["clock_bound_ns"] < 50_000_000, a
c = json.load(open("r4/compare.json"))
assert c["iterations"] == 3 and c["iteration_error_pct"]["n"] == 3, c
# Each agent was sent its rank's slice: a ring rank's own ops and the messages
# to it, so the four together hold each compute once and each message twice,
# well under four whole profiles.
sb = json.load(open("r4/run.json"))["setup_bytes"]
assert 0 < sb["profile"] and sb["profile"] < sb["sent"] < 2.5 * sb["profile"], sb
# Goodput from the records agrees with each agent's own counters; the ring's
# flows each carry 2(N-1)/N of the gradient over the run (segments differ by a
# few bytes where the gradient does not divide evenly).
rates = json.load(open("r4-rates.json"))
for r in rates["ranks"]:
    counters = json.load(open(f"r4/rank-{r['rank']}.json"))["counters"]
    assert r["messages"] == counters["messages_received"] and r["bytes"] == counters["bytes_received"], (r, counters)
    assert r["bits_per_second"] > 0 and r["last_ns"] > r["first_ns"] > 0, r
f = rates["flows"]
assert len(f) == 4 and len({x["messages"] for x in f}) == 1, f
assert max(x["bytes"] for x in f) - min(x["bytes"] for x in f) <= 1e-4 * f[0]["bytes"], f
# The reference is the timing model at the replay's own link rates: a model,
# not a bound, so the replay may come out either side of it. The lower bound is
# a bound: the run as a whole (job-wide iterations tile it, from the first
# rank's start to the last rank's end) cannot beat it. A single iteration can:
# after a late one the next is short, as the other ranks already started it.
assert all(x > 0 for x in c["reference_iteration_ns"]), c["reference_iteration_ns"]
lb = c["lower_bound"]["iteration_ns"]
assert lb > 0 and sum(c["replay_iteration_ns"]) >= 3 * lb, (lb, c["replay_iteration_ns"])
assert c["start_offset_error_ns"]["n"] > 0
PY
}
check "run --local 4: every byte delivered, clocks within their bounds, comparison written" full_run_4_ranks

eight_agents() {
  "$TW" run mlp8.yaml --local 8 --out r8 --quiet > r8.txt &&
    "$TW" results check r8 | grep -q "ok: " &&
    grep -q '3 iterations: median' r8.txt
}
check "run --local 8" eight_agents

# The open loop's per-op offsets travel sliced with the profile: each agent's
# offsets are its slice's, and every message still goes at its own.
open_loop_run() {
  "$TW" run "$SRC/traffic_profiles/resnet50-ps-4w2s.yaml" --local 6 --iterations 2 --open-loop --out rol --quiet > rol.txt &&
    "$TW" results check rol | grep -q "ok: "
}
check "run --local 6 --open-loop: offsets sliced with the profile" open_loop_run

prioritised() {
  # Sends with priorities wait for the kernel's queue to drain below the credit
  # before their first write: every byte still arrives, every record is whole.
  "$TW" simulate "$SRC/traffic_profiles/mlp-ring-2.yaml" --prioritize --emit prio.yaml > /dev/null &&
    grep -q 'priority: ' prio.yaml &&
    "$TW" run prio.yaml --local 2 --iterations 3 --out rp --quiet > rp.txt &&
    "$TW" results check rp --profile prio.yaml | grep -q 'ok: .* delivered whole'
}
check "run --local 2 of a profile with send priorities" prioritised

compare_outputs() {
  # A run against itself: every error is exactly zero.
  "$TW" compare r4 r4 --json > self.json &&
    $PY -c '
import json; c = json.load(open("self.json"))
for k in ("iteration_error_pct", "message_completion_error_pct", "start_offset_error_ns", "flow_rate_error_pct"):
    assert c[k]["n"] > 0 and c[k]["max_abs"] == 0, (k, c[k])
assert all(e["drift_ns"] == 0 for e in c["drifted_edges"])' || return 1
  # Against the profile's plan, with a threshold.
  "$TW" compare "$SRC/traffic_profiles/resnet50-ring-4.yaml" r4 | grep -q 'iteration time (job-wide)' || return 1
  "$TW" compare "$SRC/traffic_profiles/resnet50-ring-4.yaml" r4 --max-error 100000 > /dev/null || return 1
  "$TW" compare "$SRC/traffic_profiles/resnet50-ring-4.yaml" r4 --max-error 0 > /dev/null 2> over.txt
  [ $? -eq 1 ] && grep -q 'beyond --max-error 0%' over.txt || return 1
  # --max-error must be a number it can hold to: nan turned the gate off.
  ! "$TW" compare "$SRC/traffic_profiles/resnet50-ring-4.yaml" r4 --max-error nan 2> nan.txt && grep -q 'must be a number from 0' nan.txt || return 1
  # A failed run is refused with its error, even with every rank's records there.
  rm -rf r4f && cp -r r4 r4f &&
    $PY -c 'import json; j = json.load(open("r4f/run.json")); j["error"] = "rank 1: the agent disconnected"; json.dump(j, open("r4f/run.json", "w"))'
  ! "$TW" compare "$SRC/traffic_profiles/resnet50-ring-4.yaml" r4f 2> failed.txt &&
    grep -q 'r4f: the run failed (rank 1: the agent disconnected): nothing to compare' failed.txt || { cat failed.txt; return 1; }
  # So is one without run.json (replay --local, agents by hand) whose summaries say
  # a rank did not finish; rates and analyze say it failed.
  rm -rf r4h && cp -r r4 r4h && rm r4h/run.json &&
    $PY -c 'import json; j = json.load(open("r4h/rank-1.json")); j["finished"] = False; j["error"] = "no progress for 1.000 s"; json.dump(j, open("r4h/rank-1.json", "w"))'
  ! "$TW" compare "$SRC/traffic_profiles/resnet50-ring-4.yaml" r4h 2> failed.txt &&
    grep -q 'r4h: the run failed (rank 1 did not finish: no progress for 1.000 s): nothing to compare' failed.txt || { cat failed.txt; return 1; }
  "$TW" results rates r4h | grep -q 'the run failed (rank 1 did not finish: no progress' || return 1
  "$TW" analyze r4h --json | $PY -c 'import json, sys; s = json.load(sys.stdin)["source"]; assert "the run failed: rank 1 did not finish" in s, s' || return 1
  # A different profile is refused.
  ! "$TW" compare mlp8.yaml r4 2> other.txt && grep -q 'does not replay the same profile' other.txt
}
check "compare: a run against itself is exact; against the plan; --max-error; a failed run refused" compare_outputs

# A tiny WebSocket client: the first text message of /api/feed; with a PATH,
# only the upgrade of that path, then it leaves; with a PATH and a MESSAGE, it
# sends MESSAGE (JSON) there and prints the first message it gets back.
cat > feed.py <<'PY'
import base64, json, os, socket, sys
port, token = int(sys.argv[1]), sys.argv[2]
path = sys.argv[3] if len(sys.argv) > 3 else "/api/feed"
s = socket.create_connection(("127.0.0.1", port), timeout=5)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET {path}?token={token} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
assert b" 101 " in head.split(b"\r\n")[0], head
if len(sys.argv) == 4:
    s.close()
    sys.exit(0)
if len(sys.argv) > 4:  # one masked text frame, as a client sends
    data, mask = sys.argv[4].encode(), os.urandom(4)
    assert len(data) < 126
    s.sendall(bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
def need(n):
    global buf
    while len(buf) < n:
        buf += s.recv(65536)
def message():
    global buf
    need(2)
    op, ln = buf[0] & 15, buf[1] & 127
    at = 2
    if ln == 126: need(4); ln = int.from_bytes(buf[2:4], "big"); at = 4
    elif ln == 127: need(10); ln = int.from_bytes(buf[2:10], "big"); at = 10
    need(at + ln)
    assert op == 1, op
    m, buf = json.loads(buf[at:at + ln]), buf[at + ln:]
    return m
m = message()
while len(sys.argv) > 4 and m["type"] == "ping":  # clock probes come first
    m = message()
print(json.dumps(m) if len(sys.argv) > 4 else m["type"])
PY

# Automatic I/O threads: the controller counts the agents that name the same
# host in their hello. Two agents of 16 flows each, on two cores (taskset): named
# hosts of their own, each takes both cores (one thread per 4 flows, at most its
# share); named one host, one core each.
sixteen_flows() {
  echo "version: 1"; echo "iterations: 2"; echo "ranks: [{id: 0}, {id: 1}]"; echo "flows:"
  local k
  for k in $(seq 0 7); do echo "  - {id: a$k, src: 0, dst: 1}"; echo "  - {id: b$k, src: 1, dst: 0}"; done
  echo "ops:"
  for k in $(seq 0 7); do echo "  - {id: s$k, type: send, flow: a$k, bytes: 64KiB}"; echo "  - {id: t$k, type: send, flow: b$k, bytes: 64KiB, after: [recv:s$k]}"; done
}
io_threads_by_host() {
  sixteen_flows > sixteen.yaml
  local cores names p ctl want on=()
  cores=$($PY -c 'import os; print(min(2, len(os.sched_getaffinity(0))))')
  [ "$cores" -lt 2 ] || on=(taskset -c "$($PY -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0))[:2])))')")
  for names in "h1 h2" "same same"; do
    take_port
    p=$next_port
    rm -rf io
    "$TW" run sixteen.yaml --expect 2 --listen 127.0.0.1:$p --token io-token --out io --quiet > io.txt 2> io.err &
    ctl=$!
    set -- $names
    TW_TOKEN=io-token "${on[@]}" "$TW" agent --controller 127.0.0.1:$p --host-name "$1" --quiet &
    local a1=$!
    TW_TOKEN=io-token "${on[@]}" "$TW" agent --controller 127.0.0.1:$p --host-name "$2" --quiet || { kill $ctl $a1; return 1; }
    wait $a1 && wait $ctl || { cat io.err; return 1; }
    if [ "$1" = "$2" ]; then want=$((cores / 2)); else want=$cores; fi
    [ "$want" -ge 1 ] || want=1
    for r in 0 1; do
      $PY -c 'import json,sys; n=json.load(open(sys.argv[1]))["options"]["io_threads"]; sys.exit(0 if n==int(sys.argv[2]) else "%s: %d I/O threads, not %s" % (sys.argv[1], n, sys.argv[2]))' \
        io/rank-$r.json $want || return 1
    done
    "$TW" results check io | grep -q "ok: " || return 1
  done
}
check "automatic I/O threads: agents naming one host share its cores, agents naming their own take their flows' share" io_threads_by_host

token_and_api() {
  local p tok=right-token
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --token $tok --iterations 20 --out rt --quiet > rt.txt 2> rt.err &
  local ctl=$!
  sleep 0.5
  # A stranger: refused and logged, and it exits with a clear error.
  "$TW" agent --controller 127.0.0.1:$p --token wrong-token --join-timeout 5 2> stranger.err
  [ $? -ne 0 ] && grep -q 'refused the token' stranger.err || { echo "stranger: $(cat stranger.err)"; echo "controller:"; cat rt.err; ss -tanp | grep ":$p " ; return 1; }
  [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$p/api/runs)" = 401 ] || return 1
  # A stranger knocking again and again grows the log by a few lines, not one each.
  local k
  for k in $(seq 30); do curl -s -o /dev/null http://127.0.0.1:$p/api/runs; done
  api $p $tok /api/runs | $PY -c 'import json,sys; r=json.load(sys.stdin); assert r[0]["state"]=="joining" and r[0]["ranks"]==2, r' || return 1
  api $p $tok /metrics > metrics.txt || return 1
  grep -q '^tensorwire_iterations_planned{run=".*"} 20$' metrics.txt || return 1
  grep -q '^tensorwire_rank_iterations_completed_total{run=".*",rank="1"} 0$' metrics.txt || return 1
  # Prometheus' own linter (Debian's prometheus package, scripts/install-deps.sh).
  promtool check metrics < metrics.txt || { echo "promtool check metrics:"; cat metrics.txt; return 1; }
  [ "$($PY feed.py $p $tok)" = status ] || return 1
  # Connections to /agent that leave before their hello are forgotten and logged a
  # few lines in all: a token holder's loop of them grew the controller by about
  # 4 KB and a line each. A sanitizer's allocator keeps what is freed for a while
  # (ASan's quarantine): its growth is no measure, and a sanitized controller is
  # slow, so fewer connections, the log's lines still counted.
  local sanitized=0
  [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] && sanitized=1
  $PY - "$SRC/tests/integration" $p $tok $ctl $sanitized <<'PY' || return 1
import socket, sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from ws_frames import upgrade
port, token, pid, sanitized = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1"
def rss_kb():
    return int(next(l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")).split()[1])
def upgrade_and_leave():
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        upgrade(s, "/agent", token)
for _ in range(300):
    upgrade_and_leave()
if not sanitized:
    before = rss_kb()
    for _ in range(3000):
        upgrade_and_leave()
    grown = rss_kb() - before
    assert grown < 6000, f"the controller grew by {grown} KB over 3000 connections that left before their hello"
PY
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet &
  local a1=$!
  "$TW" agent --controller 127.0.0.1:$p --token $tok --quiet || return 1
  wait $a1 || return 1
  wait $ctl || { echo "controller: $(cat rt.err)"; return 1; }
  grep -q 'rejected a connection from 127.0.0.1:[0-9]* to /agent: wrong or missing token (1 so far)' rt.err || { cat rt.err; return 1; }
  grep -q 'rejected a request from 127.0.0.1:[0-9]* to /api/runs: wrong or missing token (10 so far)' rt.err || { cat rt.err; return 1; }
  [ "$(grep -c 'rejected a ' rt.err)" -le 3 ] || { echo "one line per stranger:"; grep -c 'rejected a ' rt.err; return 1; }
  grep -q 'rejected 32 request(s) or connection(s) in all' rt.err || { cat rt.err; return 1; }
  [ "$(grep -c 'left before its hello' rt.err)" -le 4 ] || { echo "one line per connection that left:"; grep -c 'left before its hello' rt.err; return 1; }
  grep -q '20 iterations: median' rt.txt
}
check "a wrong token is refused and logged; /api/runs, /metrics, /api/feed need the token" token_and_api

# run --expect without --token: the token it makes is never printed, it is in
# OUT/token (mode 0600) for the agents' operator, agents take it from TW_TOKEN, an
# oversized request gets 431 before any token is asked for, a token holder that
# opens /agent and leaves without a hello is logged and ignored, and the file
# goes when the run ends.
token_file() {
  local p
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --iterations 5 --out rtf --quiet > rtf.txt 2> rtf.err &
  local ctl=$!
  token_file_run $p $ctl && return 0
  kill $ctl 2> /dev/null
  wait $ctl 2> /dev/null
  return 1
}
token_file_run() {  # PORT CONTROLLER_PID
  local p=$1 ctl=$2 i
  for i in $(seq 50); do [ -s rtf/token ] && break; sleep 0.1; done
  [ "$(stat -c %a rtf/token)" = 600 ] || { cat rtf.err; return 1; }
  local tok
  tok=$(cat rtf/token)
  [ ${#tok} -ge 16 ] || return 1
  grep -q -- 'TW_TOKEN=$(cat TOKEN_FILE) tensorwire agent --controller' rtf.err || { cat rtf.err; return 1; }
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(head -c 10000 /dev/zero | tr '\0' x)" \
    http://127.0.0.1:$p/api/runs)" = 431 ] || return 1
  # A token holder that opens /agent and leaves without a hello ends nothing.
  $PY feed.py $p "$tok" /agent || return 1
  # An agent of another release is told why it is turned away, and counts for nothing.
  $PY feed.py $p "$tok" /agent '{"type": "hello", "version": 2, "data_host": "127.0.0.1", "data_port": 9}' > old.json || return 1
  $PY -c 'import json,sys; m=json.load(open("old.json")); assert m["type"]=="stop" and "control protocol version 2, this controller 5" in m["reason"], m' || return 1
  sleep 0.3
  TW_TOKEN=$(cat rtf/token) "$TW" agent --controller 127.0.0.1:$p --quiet &
  local a1=$!
  TW_TOKEN=$(cat rtf/token) "$TW" agent --controller 127.0.0.1:$p --quiet || return 1
  wait $a1 || return 1
  wait $ctl || { cat rtf.err; return 1; }
  ! grep -q -- "$tok" rtf.err rtf.txt || { echo "the token was printed"; return 1; }
  grep -q 'request headers too large' rtf.err || return 1
  grep -q 'on /agent: it left before its hello' rtf.err || { cat rtf.err; return 1; }
  # The agent turned away is logged once, as turned away.
  grep -q 'turned away an agent (127.0.0.1:[0-9]*): the agent speaks control protocol version 2' rtf.err || { cat rtf.err; return 1; }
  [ "$(grep -c 'left before its hello' rtf.err)" = 1 ] || { cat rtf.err; return 1; }
  [ ! -e rtf/token ] || { echo "rtf/token left behind"; return 1; }
}
check "run --expect: its token only in a private file; 431 for oversized requests; /agent without a hello ignored" token_file

# TLS on the control plane (--tls-cert/--tls-key): agents the run starts trust its
# certificate and complete the run; the API answers over HTTPS to a client that
# trusts it; a plain client, an agent trusting another certificate and an agent
# given a certificate for another address are refused, each with its reason.
tls_run() {
  local p
  take_port
  p=$next_port
  mk_cert() {  # NAME SUBJECT_ALT_NAME
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $1.key -out $1.pem -days 2 \
      -subj /CN=tensorwire-test -addext "subjectAltName=$2" 2> /dev/null
  }
  mk_cert ctl IP:127.0.0.1 && mk_cert other IP:127.0.0.1 && mk_cert elsewhere IP:10.9.8.7 || return 1
  "$TW" run long2.yaml --local 2 --listen 127.0.0.1:$p --tls-cert ctl.pem --tls-key ctl.key --iterations 20 --out rtls \
    --quiet > rtls.txt 2> rtls.err || { cat rtls.err; return 1; }
  "$TW" results check rtls | grep -q 'ok: ' || return 1
  take_port
  p=$next_port
  TW_TOKEN=tls-token "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --tls-cert ctl.pem --tls-key ctl.key \
    --iterations 5 --join-timeout 20 --out rtls2 --quiet > rtls2.txt 2> rtls2.err &
  local ctl=$!
  for _ in $(seq 50); do curl -s -o /dev/null --cacert ctl.pem https://127.0.0.1:$p/ && break; sleep 0.1; done
  grep -q -- "--controller 127.0.0.1:$p --controller-ca '$PWD/ctl.pem'" rtls2.err || { cat rtls2.err; return 1; }
  [ "$(curl -s --cacert ctl.pem -H 'Authorization: Bearer tls-token' https://127.0.0.1:$p/api/runs |
    $PY -c 'import json,sys; print(json.load(sys.stdin)[0]["state"])')" = joining ] || return 1
  [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$p/api/runs)" = 000 ] || return 1
  TW_TOKEN=tls-token "$TW" agent --controller 127.0.0.1:$p --controller-ca other.pem --join-timeout 5 2> other.err &&
    { echo "an agent trusting another certificate joined"; return 1; }
  grep -q 'TLS handshake with the controller at 127.0.0.1:'$p' failed: certificate verify failed (self-signed certificate)' other.err ||
    { cat other.err; return 1; }
  TW_TOKEN=tls-token "$TW" agent --controller 127.0.0.1:$p --join-timeout 2 2> plain.err &&
    { echo "a plain agent joined a TLS controller"; return 1; }
  grep -q 'a controller run with --tls-cert needs --controller-ca' plain.err || { cat plain.err; return 1; }
  # The controller's certificate for another address: refused for its name.
  take_port
  TW_TOKEN=tls-token "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$next_port --tls-cert elsewhere.pem \
    --tls-key elsewhere.key --join-timeout 5 --out rtls3 --quiet 2> /dev/null &
  local ctl3=$!
  sleep 0.5
  TW_TOKEN=tls-token "$TW" agent --controller 127.0.0.1:$next_port --controller-ca elsewhere.pem --join-timeout 3 2> elsewhere.err
  grep -q 'certificate verify failed (IP address mismatch)' elsewhere.err || { cat elsewhere.err; return 1; }
  wait $ctl3
  # A TLS agent and a plain controller.
  take_port
  TW_TOKEN=tls-token "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$next_port --join-timeout 5 --out rtls5 --quiet 2> /dev/null &
  ctl3=$!
  sleep 0.5
  TW_TOKEN=tls-token "$TW" agent --controller 127.0.0.1:$next_port --controller-ca ctl.pem --join-timeout 2 2> noplain.err
  grep -q 'a controller run without --tls-cert does not speak TLS' noplain.err || { cat noplain.err; return 1; }
  wait $ctl3
  TW_TOKEN=tls-token "$TW" agent --controller 127.0.0.1:$p --controller-ca ctl.pem --quiet &
  local a1=$!
  TW_TOKEN=tls-token "$TW" agent --controller 127.0.0.1:$p --controller-ca ctl.pem --quiet || return 1
  wait $a1 && wait $ctl || { cat rtls2.err; return 1; }
  grep -q 'rejected a connection from 127.0.0.1:[0-9]*: TLS handshake failed: .* (1 so far)' rtls2.err || { cat rtls2.err; return 1; }
  # Mismatched key, and a key without its certificate: one line each.
  "$TW" run long2.yaml --local 2 --tls-cert ctl.pem --tls-key other.key --out rtls4 2>&1 | grep -q "other.key: is not the key of the certificate in" ||
    return 1
  "$TW" run long2.yaml --local 2 --tls-key ctl.key --out rtls4 2>&1 | grep -q -- "--tls-cert and --tls-key go together"
}
tls_case() {  # whatever fails, the controllers it started go
  tls_run && return 0
  pkill -f -- "--out rtls" 2> /dev/null
  return 1
}
check "TLS on the control plane: a run over it; its API over HTTPS; plain clients and untrusted or misnamed certificates refused" tls_case

# A flood of idle connections at a low descriptor limit (ulimit -n 200 for the
# controller and the agents, 400 connections held against each listener, each one
# closed opened again, for longer than the join and connect timeouts): the run
# completes and keeps every result file; the real peers get in, each taking the
# slot of the oldest stranger, and the strangers closed are logged a few times, not
# once each. (When the newest were refused instead, a flood held every slot and
# the run failed at its timeout.)
flood_at_fd_limit() {
  local p q tok=flood-token
  take_port
  p=$next_port
  take_port
  q=$next_port
  (ulimit -n 200 && exec "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --token $tok --iterations 400 --out rfl --quiet \
    --join-timeout 5) > rfl.txt 2> rfl.err &
  local ctl=$!
  sleep 0.3
  $PY "$SRC/tests/integration/flood.py" 127.0.0.1 $p 400 8 > flood-ctl.txt &
  local fl=$!
  sleep 1
  (ulimit -n 200 && TW_TOKEN=$tok exec "$TW" agent --controller 127.0.0.1:$p --quiet) 2> rfl-a1.err &
  local a1=$!
  (ulimit -n 200 && TW_TOKEN=$tok exec "$TW" agent --controller 127.0.0.1:$p --quiet) 2> rfl-a2.err
  local rc=$?
  wait $a1 || rc=1
  wait $ctl || rc=1
  wait $fl
  [ $rc -eq 0 ] || { echo "controller:"; tail -5 rfl.err; tail -n 3 rfl-a1.err rfl-a2.err; return 1; }
  [ -s rfl/run.json ] && [ -s rfl/rank-0.json ] && [ -s rfl/rank-1.json ] || { ls rfl; return 1; }
  "$TW" results check rfl --profile rfl/profile.yaml | grep -q 'ok: ' || return 1
  [ "$(cat flood-ctl.txt)" -ge 400 ] || { echo "the flood opened $(cat flood-ctl.txt)"; return 1; }
  grep -q 'made room for a connection from 127.0.0.1: closed the oldest .*the cap' rfl.err || { tail -5 rfl.err; return 1; }
  grep -q 'closed [0-9]* unauthenticated connection(s) in all over the caps' rfl.err || { tail -5 rfl.err; return 1; }
  local lines
  lines=$(grep -c 'made room for a connection\|refused a connection' rfl.err)
  [ "$lines" -le 8 ] || { echo "$lines lines for the strangers closed"; return 1; }
  # The agents' data listener, by hand with a roster: rank 1 listens on q, the
  # flood holds 400 connections to it before rank 0 dials in.
  printf 'token: "%s"\nranks:\n  - {rank: 0, host: "127.0.0.1", port: %s}\n  - {rank: 1, host: "127.0.0.1", port: %s}\n' \
    $tok $((q + 1000)) $q > flood-roster.yaml
  "$TW" profile synth --model mlp --ranks 2 --iterations 50 -o flood2.yaml 2> /dev/null
  (ulimit -n 200 && exec "$TW" agent --rank 1 --profile flood2.yaml --roster flood-roster.yaml --out rfd1 --connect-timeout 4) \
    2> rfd1.err &
  local r1=$!
  sleep 0.3
  $PY "$SRC/tests/integration/flood.py" 127.0.0.1 $q 400 7 > flood-data.txt &
  fl=$!
  sleep 1
  (ulimit -n 200 && exec "$TW" agent --rank 0 --profile flood2.yaml --roster flood-roster.yaml --out rfd0 --connect-timeout 4) \
    2> rfd0.err || rc=1
  wait $r1 || rc=1
  wait $fl
  [ $rc -eq 0 ] || { tail -n 3 rfd0.err rfd1.err; return 1; }
  grep -q 'made room for a data connection from 127.0.0.1: closed the oldest .*the cap' rfd1.err || { tail -5 rfd1.err; return 1; }
  [ -s rfd0/rank-0.json ] && [ -s rfd1/rank-1.json ]
}
check "a flood of idle connections at ulimit -n 200, longer than the timeouts: the run completes with its results, strangers closed beyond the caps" flood_at_fd_limit

# The dashboard (under the sanitizers here; in a browser in browser_test.sh): its
# static page opens without the token, nothing else does, and without --dashboard
# there is no page at all.
dashboard_page() {
  local p tok=dash-token
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --token $tok --iterations 5 --out rd --quiet --dashboard > rd.txt 2> rd.err &
  local ctl=$! i
  for i in $(seq 100); do [ -s rd/dashboard.url ] && break; sleep 0.1; done
  [ "$(stat -c %a rd/dashboard.url)" = 600 ] && grep -q "^http://127.0.0.1:$p/dashboard#token=$tok$" rd/dashboard.url || { cat rd.err; return 1; }
  curl -s -D page.h http://127.0.0.1:$p/dashboard > page.html || return 1
  grep -qi '^content-type: text/html' page.h && grep -qi '^cache-control: no-store' page.h && grep -q "connect-src 'self'" page.html || return 1
  ! grep -q "$tok" page.html || { echo "the page holds the token"; return 1; }
  [ "$(curl -s --path-as-is -o /dev/null -w '%{http_code}' http://127.0.0.1:$p/dashboard/../api/runs)" = 401 ] || return 1
  [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$p/dashboard/x)" = 401 ] || return 1
  [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST http://127.0.0.1:$p/dashboard)" = 401 ] || return 1
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet &
  local a1=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet || return 1
  wait $a1 && wait $ctl || { cat rd.err; return 1; }
  [ ! -e rd/dashboard.url ] || return 1
  # Without --dashboard: no page.
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --token $tok --iterations 5 --out rn --quiet > rn.txt 2> rn.err &
  ctl=$!
  for i in $(seq 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$p/api/runs)" = 401 ] && break; sleep 0.1; done
  [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$p/dashboard)" = 401 ] || return 1
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet &
  a1=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet || return 1
  wait $a1 && wait $ctl
}
check "run --dashboard: the static page opens without the token, nothing else does; its address file is private and goes" dashboard_page

# fault_case SIGNAL RANK SECONDS PATTERN: signal one agent of a running run; the
# controller must exit 1 within SECONDS with a line matching PATTERN, stop the
# others, and keep what they measured.
fault_case() {
  local sig=$1 rank=$2 limit=$3 pattern=$4 p tok=fault t0
  take_port
  p=$next_port
  "$TW" run long2.yaml --local 2 --listen 127.0.0.1:$p --token $tok --out rf$p --quiet > /dev/null 2> rf.err &
  local ctl=$!
  wait_running $p $tok || return 1
  t0=$SECONDS
  pkill -$sig -f -- "--controller 127.0.0.1:$p --rank-hint $rank"
  wait $ctl
  local rc=$?
  [ $rc -eq 1 ] || { echo "exit $rc: $(cat rf.err)"; return 1; }
  [ $((SECONDS - t0)) -le $limit ] || { echo "took $((SECONDS - t0)) s"; return 1; }
  grep -q "$pattern" rf.err || { cat rf.err; return 1; }
  no_leftovers $p 3 && [ -f rf$p/run.json ] && [ -f rf$p/rank-$((1 - rank)).twr ]
}
check "an agent killed mid-run: the controller names it, stops the others, keeps their results" \
  fault_case KILL 1 5 '^tensorwire run: rank 1 (.*pid [0-9]*).*\(disconnected\|exited\|killed\)'
# The agent killed above could not remove its working directory: its controller
# did when the run ended (the agents ran on its machine). An agent's directory on
# another machine (here: a dead pid's, in an --expect run the controller does not
# sweep) goes when the next agent on that host starts.
stale_dirs_swept() {
  ! ls -d "$TMPDIR"/tensorwire-agent-* 2> /dev/null || { echo "the controller left: $(ls -d "$TMPDIR"/tensorwire-agent-*)"; return 1; }
  local dead p tok=sweep
  sh -c 'exit 0' &
  dead=$!
  wait $dead
  mkdir "$TMPDIR/tensorwire-agent-$dead-AbCdEf" || return 1
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --token $tok --iterations 3 --out rsw --quiet > /dev/null 2> rsw.err &
  local ctl=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet &
  local a1=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet || { cat rsw.err; return 1; }
  wait $a1 && wait $ctl || { cat rsw.err; return 1; }
  [ ! -e "$TMPDIR/tensorwire-agent-$dead-AbCdEf" ]
}
check "a killed agent's working directory is removed by its controller, or by the next agent" stale_dirs_swept
check "a hung agent (SIGSTOP) is detected by heartbeats" \
  fault_case STOP 0 4 '^tensorwire run: rank 0 (.*): the agent stopped answering heartbeats'

dead_controller() {
  # Agents started by something else (not children): only heartbeats tie them.
  local p tok=t3 t0
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --listen 127.0.0.1:$p --token $tok --out rc --quiet > /dev/null 2>&1 &
  local ctl=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p 2> a0.err &
  local a0=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p 2> a1.err &
  local a1=$!
  wait_running $p $tok || return 1
  t0=$SECONDS
  kill -KILL $ctl
  wait $a0
  local r0=$?
  wait $a1
  local r1=$?
  [ $((SECONDS - t0)) -le 5 ] || { echo "agents took $((SECONDS - t0)) s"; return 1; }
  [ $r0 -ne 0 ] && [ $r1 -ne 0 ] || return 1
  grep -q 'lost the controller at 127.0.0.1' a0.err || { cat a0.err; return 1; }
  no_leftovers $p 2
}
check "agents stop within 5 s when the controller dies" dead_controller

interrupted() {
  local p tok=t4
  take_port
  p=$next_port
  "$TW" run long2.yaml --local 2 --listen 127.0.0.1:$p --token $tok --out ri --quiet > /dev/null 2> ri.err &
  local ctl=$!
  wait_running $p $tok || return 1
  kill -INT $ctl
  wait $ctl
  local rc=$?
  [ $rc -eq 130 ] || { echo "exit $rc: $(cat ri.err)"; return 1; }
  grep -q 'interrupted by signal 2' ri.err && no_leftovers $p 3 && [ -f ri/rank-1.twr ]
}
check "Ctrl-C stops everything cleanly and keeps the results" interrupted

random_kills() {
  # SIGKILL the controller or an agent at a random moment, five times: nothing
  # may be left running.
  local p tok=t5 k victim
  for k in 1 2 3 4 5; do
    take_port
    p=$next_port
    "$TW" run long2.yaml --local 2 --listen 127.0.0.1:$p --token $tok --out "rr$k" --quiet > /dev/null 2> "rr$k.err" &
    local ctl=$!
    sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
    victim=$ctl
    if [ $((RANDOM % 3)) -ne 0 ]; then
      # An agent: wait for it to exist (a slow build starts it late; killing
      # nobody would leave a 100000-iteration run going).
      local rank=$((RANDOM % 2))
      victim=""
      for _ in $(seq 100); do
        victim=$(pgrep -f -- "--controller 127.0.0.1:$p --rank-hint $rank" | head -1)
        [ -n "$victim" ] && break
        sleep 0.1
      done
      [ -n "$victim" ] || { echo "round $k: agent $rank never started"; kill -KILL $ctl; return 1; }
    fi
    kill -KILL "$victim" 2> /dev/null
    # The controller ends by itself once an agent is gone; if it was the victim, already.
    for _ in $(seq 100); do kill -0 $ctl 2> /dev/null || break; sleep 0.1; done
    kill -0 $ctl 2> /dev/null && { echo "round $k: controller still running"; kill -KILL $ctl; cat "rr$k.err"; return 1; }
    wait $ctl 2> /dev/null
    no_leftovers $p 6 || { echo "round $k"; return 1; }
  done
}
check "SIGKILL at random points leaves no orphans" random_kills

late_agent() {
  # An agent whose request was accepted before the run ended and finished after
  # (seen when an agent was killed before its peer had dialled in): told the run
  # has ended, and the controller's end does not wait for it.
  local p tok=t6 rc
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --join-timeout 1 --listen 127.0.0.1:$p --token $tok --out rla --quiet > /dev/null 2> rla.err &
  local ctl=$!
  TW_TOKEN=$tok $PY "$SRC/tests/integration/late_agent.py" $p rla/run.json 20 > late.txt || { cat late.txt rla.err; kill $ctl; return 1; }
  wait $ctl
  rc=$?
  [ $rc -ne 0 ] || { echo "the run succeeded"; return 1; }
  grep -q '"type":"stop"' late.txt && grep -q 'the run has ended' late.txt || { echo "the late agent got: $(cat late.txt)"; return 1; }
  grep -q 'turned away an agent from 127.0.0.1:[0-9]*: the run has ended' rla.err || { cat rla.err; return 1; }
  ! grep -q 'after the end of the run' rla.err || { cat rla.err; return 1; }
  # A dashboard's feed the same way: the run's last status, then closed.
  take_port
  p=$next_port
  "$TW" run long2.yaml --expect 2 --join-timeout 1 --listen 127.0.0.1:$p --token $tok --out rlf --quiet > /dev/null 2> rlf.err &
  ctl=$!
  TW_TOKEN=$tok $PY "$SRC/tests/integration/late_agent.py" $p rlf/run.json 20 /api/feed > late-feed.txt || { cat late-feed.txt rlf.err; kill $ctl; return 1; }
  wait $ctl
  grep -q '"type":"status"' late-feed.txt && grep -q '"state":"failed"' late-feed.txt || { echo "the late feed got: $(cat late-feed.txt)"; return 1; }
  ! grep -q 'after the end of the run' rlf.err || { cat rlf.err; return 1; }
}
check "an agent or a feed whose request ends after the run is told so, and not waited for" late_agent

empty_upload() {
  # An agent that says its run went well and its results are uploaded, and sends
  # no file: the run fails, naming it, where it was written done.
  local p tok=t7
  take_port
  p=$next_port
  printf 'version: 1\niterations: 5\nranks: [{id: 0}, {id: 1}]\nflows: []\nops:\n  - {id: c0, type: compute, rank: 0, duration: 1ms}\n  - {id: c1, type: compute, rank: 1, duration: 1ms}\n' > noflow.yaml
  TW_TOKEN=$tok "$TW" run noflow.yaml --expect 2 --listen 127.0.0.1:$p --out reu --quiet > /dev/null 2> reu.err &
  local ctl=$!
  TW_TOKEN=$tok $PY "$SRC/tests/integration/empty_upload.py" $p 0 20 > eu.txt &
  local fake=$!
  TW_TOKEN=$tok "$TW" agent --controller 127.0.0.1:$p --quiet || { cat reu.err; return 1; }
  wait $fake || { cat eu.txt reu.err; return 1; }
  ! wait $ctl || { echo "the run succeeded"; cat reu.err; return 1; }
  grep -q 'rank 0 (empty-upload, .*): said its results were uploaded, but sent no rank-0.json' reu.err || { cat reu.err; return 1; }
  $PY -c 'import json; j = json.load(open("reu/run.json")); assert j["state"] == "failed" and "sent no rank-0.json" in j["error"], j'
}
check "an agent that says it uploaded and sent no file fails the run" empty_upload

ssh_launcher() {
  [ "$(id -u)" = 0 ] || { echo "needs root for sshd"; return 1; }
  take_port
  local sp=$next_port d=$TW_TMP/ssh
  mkdir -p $d /run/sshd && chmod 700 $d
  ssh-keygen -q -t ed25519 -N '' -f $d/host_key && ssh-keygen -q -t ed25519 -N '' -f $d/client_key || return 1
  cp $d/client_key.pub $d/authorized_keys
  cat > $d/sshd_config <<EOF
ListenAddress 127.0.0.1
Port $sp
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile $d/sshd.pid
EOF
  cat > $d/ssh_config <<EOF
Host twhost
  HostName 127.0.0.1
  Port $sp
  User root
  IdentityFile $d/client_key
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOF
  /usr/sbin/sshd -D -e -f $d/sshd_config 2> $d/sshd.log &
  local sshd=$!
  for _ in $(seq 50); do ssh -F $d/ssh_config -o BatchMode=yes twhost true 2> /dev/null && break; sleep 0.1; done
  local ok=0
  "$TW" run mlp8.yaml --hosts twhost:5,twhost:3 --ssh-config $d/ssh_config --listen 127.0.0.1:0 --out rs --quiet > rs.txt 2> rs.err &&
    "$TW" results check rs --profile rs/profile.yaml | grep -q 'ok: ' && grep -q '3 iterations: median' rs.txt || ok=1
  # A host that cannot be reached: a clear error naming it, quickly.
  "$TW" run mlp8.yaml --hosts twhost:4,nohost.invalid:4 --ssh-config $d/ssh_config --listen 127.0.0.1:0 --out rn --quiet > /dev/null 2> rn.err
  [ $? -eq 1 ] && grep -q 'ssh to nohost.invalid exited with status 255' rn.err || { echo "unreachable: $(cat rn.err)"; ok=1; }
  kill $sshd
  wait $sshd 2> /dev/null
  [ $ok -eq 0 ] || { cat rs.err; return 1; }
}
check "ssh launcher against a real sshd (two slot groups; an unreachable host)" ssh_launcher

bad_usage() {
  local out
  out=$("$TW" run mlp8.yaml 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q 'exactly one of --local N, --testbed N, --hosts LIST, --expect N' || return 1
  out=$("$TW" run mlp8.yaml --local 3 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q -- '--local 3: the profile has 8 ranks' || return 1
  out=$("$TW" run mlp8.yaml --hosts a:2,b:2 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q -- '--hosts: give --listen' || return 1
  out=$("$TW" run mlp8.yaml --hosts 127.0.0.1:2 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q -- '--hosts: 2 slot(s) for 8 ranks' || return 1
  local v
  for v in 0 65 many 2x; do
    out=$("$TW" run mlp8.yaml --local 8 --io-threads $v 2>&1)
    [ $? -ne 0 ] && echo "$out" | grep -q -- "--io-threads: must be auto or from 1 to 64, not $v" || { echo "$out"; return 1; }
  done
  out=$("$TW" agent --controller 127.0.0.1:1 --join-timeout 1 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "needs the run's token" || return 1
  out=$(TW_TOKEN=x "$TW" agent --controller 127.0.0.1:1 --join-timeout 1 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q 'cannot reach the controller at 127.0.0.1:1 within 1[.0]* s'
}
check "bad usage gets one clear line" bad_usage

finish
