#!/usr/bin/env bash
# The capture on real jobs: a PyTorch DDP job over Gloo (python3-torch from
# Debian, run by /usr/bin/python3) with and without the shim, and small jobs for
# errno, fork and exec, signals, and processes that never touch TCP.
# Usage: capture_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
LAUNCH="$SRC/examples/ddp/launch.py"

losses() { grep -h -o '"rank": [0-9]*, "iteration": [0-9]*, .*"loss": [-0-9.e]*' "$1"/rank-*.jsonl | sed 's/"start_ns.*"loss"/"loss"/' | sort; }

ddp_unchanged() {
  $PY "$LAUNCH" --nproc 2 --logs plain -- --model mlp --iterations 5 || return 1
  "$TW" capture --out cap2 --quiet -- $PY "$LAUNCH" --nproc 2 --logs traced -- --model mlp --iterations 5 || return 1
  [ "$(losses plain)" = "$(losses traced)" ] || { diff <(losses plain) <(losses traced); return 1; }
  [ -n "$(losses plain)" ] || return 1
  "$TW" trace show cap2 --json > cap2.json
}
check "a real DDP job: the same losses with and without the capture" ddp_unchanged

# The capture is complete: every byte each rank sent is in exactly one message,
# the streams have no holes, and the peer received all of it.
complete() {  # CAPTURE_JSON
  $PY - "$1" <<'PY'
import json, sys, collections
j = json.load(open(sys.argv[1]))
ranks = sorted(p["rank"] for p in j["processes"])
assert ranks == [f"rank {i}" for i in range(len(ranks))] and len(ranks) >= 2, ranks
assert all(p["events_dropped"] == 0 and p["final"] for p in j["processes"]), j["processes"]
by_conn = collections.defaultdict(list)
for m in j["messages"]:
    by_conn[m["connection"]].append(m)
conns = j["connections"]
for i, c in enumerate(conns):
    ms = sorted(by_conn[i], key=lambda m: m["begin"])
    at = 0
    for m in ms:
        assert m["begin"] == at, (c, m, at)
        at = m["end"]
    assert at == c["bytes_sent"], (c, at)
    if c["bytes_sent"] and "peer_pid" in c:
        peer = [d for d in conns if d["local"] == c["remote"] and d["remote"] == c["local"]][0]
        assert peer["bytes_received"] == c["bytes_sent"], (c, peer)
        # Causality (one clock): no byte is read before its send call began.
        for m in ms:
            assert m["recv_first_ns"] >= m["ready_ns"] and m["recv_last_ns"] >= m["recv_first_ns"], m
PY
}
check "the capture is complete: every byte in one message, no holes, all received" complete cap2.json

# Bytes per iteration: each rank sends 2(N-1)/N x the gradient per iteration (ring
# all-reduce), plus small control messages, told apart by size.
per_iteration() {  # CAPTURE_JSON LOG_DIR
  $PY - "$1" "$2" <<'PY'
import glob, json, sys
j = json.load(open(sys.argv[1]))
logs = {}
for f in glob.glob(sys.argv[2] + "/rank-*.jsonl"):
    lines = [json.loads(l) for l in open(f)]
    logs[lines[0]["rank"]] = lines
n = len(logs)
grad = logs[0][0]["gradient_bytes"]
expect = 2 * (n - 1) / n * grad
pid_rank = {p["pid"]: int(p["rank"].split()[1]) for p in j["processes"]}
conns = j["connections"]
for rank, lines in logs.items():
    for it in lines[1:]:
        data = control = 0
        for m in j["messages"]:
            c = conns[m["connection"]]
            if pid_rank[c["pid"]] != rank or not (it["start_ns"] <= m["ready_ns"] <= it["end_ns"]):
                continue
            if c["role"] == "store":
                control += m["end"] - m["begin"]
                continue
            size = m["end"] - m["begin"]
            if size < 1024:
                control += size
            else:
                data += size
        err = abs(data - expect) / expect
        assert err < 0.01, (rank, it["iteration"], data, expect)
        assert control < 0.01 * expect, (rank, it["iteration"], control)
print("ok")
PY
}
check "2 ranks: each sends the gradient size x 2(N-1)/N per iteration" per_iteration cap2.json traced

three_ranks() {
  "$TW" capture --out cap3 --quiet -- $PY "$LAUNCH" --nproc 3 --logs t3 -- --model mlp --iterations 3 || return 1
  "$TW" trace show cap3 --json > cap3.json && complete cap3.json && per_iteration cap3.json t3
}
check "3 ranks: complete, and 2(N-1)/N x the gradient per iteration" three_ranks

show_text() {
  "$TW" trace show cap2 > show.txt || return 1
  grep -q 'rank 0' show.txt && grep -q 'in send p50/p99' show.txt && grep -q 'No wire tap' show.txt
}
check "trace show names ranks, connections and timing" show_text

# errno and results: the same with and without the shim.
cat > errno.py <<'PY'
import errno, os, socket
out = []
s = socket.socket()
try:
    s.connect(("127.0.0.1", 1))
except OSError as e:
    out.append(("connect", e.errno))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
a.setblocking(False)
try:
    a.recv(10)
except OSError as e:
    out.append(("recv", e.errno))
c.sendall(b"x" * 100000)
got = 0
a.setblocking(True)
while got < 100000:
    got += len(a.recv(65536))
out.append(("bytes", got))
a.close()
try:
    os.write(a.fileno(), b"x")  # a closed fd
except OSError as e:
    out.append(("write-closed", e.errno))
r, w = os.pipe(); os.write(w, b"pipe"); out.append(("pipe", os.read(r, 4).decode()))
print(out)
PY
errno_same() {
  local a b
  a=$($PY errno.py) || return 1
  b=$("$TW" capture --out cape --quiet -- $PY errno.py) || return 1
  [ "$a" = "$b" ] || { echo "plain: $a"; echo "traced: $b"; return 1; }
  ls cape/trace-*.twt > /dev/null 2>&1
}
check "results and errno are the same with the shim" errno_same

cat > forks.py <<'PY'
import os, socket, subprocess, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
port = l.getsockname()[1]
pid = os.fork()
if pid == 0:
    c = socket.create_connection(("127.0.0.1", port)); c.sendall(b"f" * 3000); c.close()
    os._exit(0)
a, _ = l.accept(); got = b""
while len(got) < 3000:
    got += a.recv(4096)
os.waitpid(pid, 0)
# exec: a new program, still traced through the environment
subprocess.run([sys.executable, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port})).sendall(b'e' * 500)"], check=True)
b, _ = l.accept(); got = b""
while len(got) < 500:
    got += b.recv(4096)
print("ok")
PY
fork_exec() {
  "$TW" capture --out capf --quiet -- $PY forks.py | grep -q ok || return 1
  "$TW" trace show capf --json > capf.json
  $PY - <<'PY'
import json
j = json.load(open("capf.json"))
assert len(j["processes"]) == 3, [p["cmdline"] for p in j["processes"]]  # parent, forked child, exec'd child
sent = sorted(c["bytes_sent"] for c in j["connections"] if c["bytes_sent"])
assert sent == [500, 3000], sent
assert all(p["final"] for p in j["processes"])  # os._exit flushed too
PY
}
check "fork and exec: children are traced, _exit flushes" fork_exec

cat > loop.py <<'PY'
import signal, socket, time
# A background job of a non-interactive shell starts with SIGINT ignored; a job
# run from a terminal has Python's KeyboardInterrupt handler: put it back.
signal.signal(signal.SIGINT, signal.default_int_handler)
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
open("ready", "w").close()
while True:
    c.sendall(b"z" * 1000); a.recv(1000); time.sleep(0.001)
PY
interrupted() {
  "$TW" capture --out capi --quiet -- $PY loop.py &
  local cap=$!
  for _ in $(seq 100); do [ -f ready ] && break; sleep 0.05; done
  sleep 0.2
  pkill -INT -f "python3 loop.py"
  for _ in $(seq 100); do kill -0 $cap 2> /dev/null || break; sleep 0.05; done
  kill -0 $cap 2> /dev/null && { pkill -KILL -f "python3 loop.py"; echo "the job ignored SIGINT"; return 1; }
  wait $cap
  local rc=$?
  [ $rc -eq 130 ] || { echo "exit $rc"; return 1; }
  "$TW" trace show capi --json > capi.json
  $PY -c '
import json; j = json.load(open("capi.json"))
assert j["processes"][0]["final"], j["processes"]
assert sum(c["bytes_sent"] for c in j["connections"]) > 10000'
}
check "Ctrl-C: the job gets it, its exit status comes back, the trace is flushed" interrupted

no_tcp() {
  local out
  out=$("$TW" capture --out capn --quiet -- /bin/sh -c 'echo hello > f && cat f') || return 1
  [ "$out" = hello ] && [ -z "$(ls capn | grep trace-)" ] || return 1
  "$TW" capture --out capn2 --quiet -- /bin/sh -c 'exit 3'
  [ $? -eq 3 ] || return 1
  out=$("$TW" capture --out capn3 -- /nonexistent/job 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q 'exited with status 127\|cannot start'
}
check "jobs that never touch TCP: no trace, same output and exit status" no_tcp

bad_traces() {
  local out
  mkdir -p bad1 bad2 bad3
  printf 'garbage-garbage-' > bad1/trace-1.twt && echo '{"pid": 1}' > bad1/trace-1.json
  out=$("$TW" trace show bad1 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'bad1/trace-1.twt: not a tensorwire trace' || { echo "$out"; return 1; }
  echo 'not json' > bad2/trace-2.json
  out=$("$TW" trace show bad2 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'bad2/trace-2.json: not a trace description' || { echo "$out"; return 1; }
  out=$("$TW" trace show bad3 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'no traces' || { echo "$out"; return 1; }
  # A process killed mid-write leaves a partial last event: dropped and counted, not fatal.
  local f
  f=$(ls cap2/trace-*.twt | head -1)
  mkdir -p cut && cp "${f%.twt}.json" cut/ && head -c $(( $(stat -c %s "$f") - 10 )) "$f" > "cut/$(basename "$f")"
  "$TW" trace show cut --json | $PY -c 'import json,sys; assert json.load(sys.stdin)["processes"][0]["events_dropped"] == 1'
}
check "bad or cut traces: one clear line, or the partial event counted" bad_traces

finish
