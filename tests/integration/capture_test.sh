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

# The checks below read a capture's `trace show --json` and the job's per-rank logs.
cat > twcheck.py <<'PY'
import glob, json, sys
def load(capture_json, log_dir):
    j = json.load(open(capture_json))
    logs = {}
    for f in glob.glob(log_dir + "/rank-*.jsonl"):
        lines = [json.loads(l) for l in open(f)]
        logs[lines[0]["rank"]] = lines
    pid_rank = {p["pid"]: int(p["rank"].split()[1]) for p in j["processes"]}
    return j, logs, pid_rank
PY

# Bytes per iteration: each rank sends 2(N-1)/N x the gradient per iteration (ring
# all-reduce), plus small control messages, told apart by size.
per_iteration() {  # CAPTURE_JSON LOG_DIR
  $PY - "$1" "$2" <<'PY'
import sys
from twcheck import load
j, logs, pid_rank = load(*sys.argv[1:3])
n = len(logs)
grad = logs[0][0]["gradient_bytes"]
expect = 2 * (n - 1) / n * grad
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

# The wire tap (auto: every interface; these tests run as root): every byte each
# connection sent was seen on the wire, and each message's times are in order on
# the one clock: its send call began, its first byte went out, all of it went out,
# the ACK of its last byte came back; the peer read nothing before it was sent.
wire_complete() {  # CAPTURE_JSON
  $PY - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
w = j["wire"]
assert w["interfaces"] == ["any"] and w["frames"] > 0 and w["dropped"] == 0 and w["status"] == "", w
conns = j["connections"]
sent = [c for c in conns if c["bytes_sent"]]
assert sent and all(c["on_wire"] and c["wire_bytes"] == c["bytes_sent"] for c in sent), [(c["local"], c["on_wire"], c["wire_bytes"], c["bytes_sent"]) for c in sent]
n = 0
for m in j["messages"]:
    assert m["ready_ns"] <= m["wire_first_ns"] <= m["wire_last_ns"] <= m["acked_ns"], m
    if m["recv_first_ns"] >= 0:
        assert m["recv_first_ns"] >= m["wire_first_ns"] and m["recv_last_ns"] >= m["wire_last_ns"], m
    n += 1
# Loopback: the kernel retransmits rarely; the wire's count is never below zero
# and the data connections' distributions are there.
assert all(c["retransmits"] >= 0 for c in sent)
assert all(c["queued"] and c["on_wire_time"] and c["ack_wait"] for c in sent if c["role"] == "data")
print(n, "messages")
PY
}
three_ranks() {
  "$TW" capture --out cap3 --quiet -- $PY "$LAUNCH" --nproc 3 --logs t3 -- --model mlp --iterations 3 || return 1
  "$TW" trace show cap3 --json > cap3.json && complete cap3.json && per_iteration cap3.json t3 && wire_complete cap3.json
}
check "3 ranks: complete, 2(N-1)/N x the gradient per iteration, all on the wire" three_ranks

transformer() {
  "$TW" capture --out capx --quiet -- $PY "$LAUNCH" --nproc 2 --logs tx -- --model transformer --iterations 3 || return 1
  "$TW" trace show capx --json > capx.json && complete capx.json && per_iteration capx.json tx && wire_complete capx.json
}
check "a Transformer encoder: complete, the gradient per iteration, all on the wire" transformer

# Parameter servers: per iteration each worker sends its gradient to the server
# and gets the parameters back, over Gloo point-to-point and over ZeroMQ.
ps_bytes() {  # CAPTURE_JSON LOG_DIR
  $PY - "$1" "$2" <<'PY'
import sys
from twcheck import load
j, logs, pid_rank = load(*sys.argv[1:3])
assert logs[0][0]["role"] == "server" and len(logs) >= 3
size = logs[1][0]["gradient_bytes"]
conns = j["connections"]
by_port = {c["local"]: c for c in conns}
def peer_rank(c):
    d = by_port.get(c["remote"])
    return pid_rank[d["pid"]] if d else None
for rank in range(1, len(logs)):
    for it in logs[rank][1:]:
        up = down = 0
        for m in j["messages"]:
            c = conns[m["connection"]]
            n = m["end"] - m["begin"]
            if c["role"] != "data" or n < 1024:
                continue  # framework headers, notices and the rendezvous
            if pid_rank[c["pid"]] == rank and peer_rank(c) == 0 and it["start_ns"] <= m["ready_ns"] <= it["end_ns"]:
                up += n
            # The parameters for this iteration left the server before the worker's window ended.
            if pid_rank[c["pid"]] == 0 and peer_rank(c) == rank and m["recv_last_ns"] >= 0 and it["start_ns"] <= m["recv_last_ns"] <= it["end_ns"]:
                down += n
        assert abs(up - size) <= 0.01 * size, ("worker->server", rank, it["iteration"], up, size)
        assert abs(down - size) <= 0.01 * size, ("server->worker", rank, it["iteration"], down, size)
print("ok")
PY
}
ps_gloo() {
  "$TW" capture --out capps --quiet -- $PY "$LAUNCH" --nproc 3 --logs tps --script "$SRC/examples/ps/train_ps.py" -- --iterations 3 || return 1
  "$TW" trace show capps --json > capps.json && complete capps.json && wire_complete capps.json && ps_bytes capps.json tps
}
check "parameter server over Gloo send/recv: gradient up, parameters down, per iteration" ps_gloo

ps_zmq() {
  "$TW" capture --out capz --quiet -- $PY "$LAUNCH" --nproc 3 --logs tz --script "$SRC/examples/ps/train_zmq.py" -- --iterations 3 --port-offset 1 || return 1
  "$TW" trace show capz --json > capz.json && complete capz.json && wire_complete capz.json && ps_bytes capz.json tz || return 1
  # The same model, data and update as over Gloo: the same losses.
  [ "$(losses tps)" = "$(losses tz)" ] || { diff <(losses tps) <(losses tz); return 1; }
}
check "parameter server over ZeroMQ: the same traffic pattern and losses" ps_zmq

show_text() {
  "$TW" trace show cap2 > show.txt || return 1
  grep -q 'rank 0' show.txt && grep -q 'queued' show.txt && grep -q 'wire tap on any: [1-9][0-9]* frames, 0 lost' show.txt
}
check "trace show names ranks, connections and timing" show_text

check "wire tap: every sent byte seen; ready <= wire_first <= wire_last <= acked per message" wire_complete cap2.json

wire_off() {
  "$TW" capture --out capo --wire off --quiet -- $PY "$LAUNCH" --nproc 2 --logs offl -- --model mlp --iterations 2 || return 1
  [ -z "$(ls capo | grep pcap)" ] || return 1
  "$TW" trace show capo | grep -q 'wire tap: no wire tap in this capture (--wire off)' || return 1
  "$TW" trace show capo --json | $PY -c '
import json, sys
j = json.load(sys.stdin)
assert j["wire"]["mode"] == "off" and all(m["wire_first_ns"] == -1 and m["acked_ns"] == -1 for m in j["messages"])
assert all(not c["on_wire"] for c in j["connections"])'
}
check "--wire off: application events only, and trace show says so" wire_off

# Without permission to capture: auto goes on without the tap and says so in one
# line; interfaces asked for by name must work, or the job does not start.
no_permission() {
  id nobody > /dev/null 2>&1 || { echo "no user nobody"; return 1; }
  local out here=$PWD
  cd "$(mktemp -d /tmp/tw-nobody.XXXXXX)" && chmod 755 . && mkdir capu && chmod 777 capu || return 1
  out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$TW" capture --out capu -- \
        $PY -c 'import socket; l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(); c = socket.create_connection(l.getsockname()); c.sendall(b"x" * 100); print("ran")' 2>&1)
  [ $? -eq 0 ] || { echo "$out"; return 1; }
  echo "$out" | grep -q '^ran$' || { echo "$out"; return 1; }
  echo "$out" | grep -q '^tensorwire capture: no wire tap (wire tap on any: .*); the traces hold the application' || { echo "$out"; return 1; }
  ls capu/trace-*.twt > /dev/null || return 1
  "$TW" trace show capu | grep -q 'wire tap: wire tap on any:' || return 1
  out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$TW" capture --out capu --append --wire lo -- touch capu/started 2>&1)
  [ $? -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q 'wire tap on lo:' && [ ! -e capu/started ] || { echo "$out"; return 1; }
  rm -rf "$PWD" && cd "$here"
}
check "no permission: --wire auto warns and runs the job; --wire lo refuses to start it" no_permission

bad_wire() {
  mkdir -p badw && cp cap2/trace-* cap2/capture-*.json badw/ || return 1
  local wf out
  wf=$(cd cap2 && ls wire-any-*.pcap | head -1)
  [ -n "$wf" ] || return 1
  printf 'not a pcap file, only text' > "badw/$wf"
  out=$("$TW" trace show badw 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q "badw/$wf: not a pcap file" || { echo "$out"; return 1; }
  head -c $(( $(stat -c %s "cap2/$wf") - 30 )) "cap2/$wf" > "badw/$wf"
  "$TW" trace show badw | grep -q 'a file was cut short' || return 1
  rm "badw/$wf"
  out=$("$TW" trace show badw 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q "badw/$wf: listed in capture-.*\.json but missing" || { echo "$out"; return 1; }
}
check "bad, cut or missing wire files: one clear line, or the cut counted" bad_wire

# Annotations (python/tensorwire/annotate.py, no compiled extension): iterations,
# compute spans and DDP gradient buckets on the capture's clock; each bucket's
# all-reduce messages are found and carry exactly its share of the bytes.
annotated() {
  "$TW" capture --out capa --quiet -- $PY "$LAUNCH" --nproc 2 --logs ta -- --model resnet18 --iterations 3 --annotate || return 1
  "$TW" trace show capa --json > capa.json && complete capa.json || return 1
  "$TW" trace show capa | grep -q 'DDP gradient buckets' || return 1
  $PY - capa.json ta <<'PY' || return 1
import collections, sys
from twcheck import load
j, logs, pid_rank = load(*sys.argv[1:3])
n = len(logs)
grad = logs[0][0]["gradient_bytes"]
spans = collections.defaultdict(list)
for s in j["spans"]:
    spans[(pid_rank[s["pid"]], s["type"])].append(s)
buckets_seen = 0
for rank, lines in logs.items():
    its = spans[(rank, "iteration")]
    assert [s["value"] for s in its] == [l["iteration"] for l in lines[1:]], its
    for s, l in zip(its, lines[1:]):
        # The marks sit inside the job's own timing of the iteration.
        assert l["start_ns"] <= s["begin_ns"] < s["end_ns"] <= l["end_ns"], (s, l)
        for kind in ("forward", "backward", "optimizer"):
            inner = [x for x in spans[(rank, kind)] if s["begin_ns"] <= x["begin_ns"] <= x["end_ns"] <= s["end_ns"]]
            assert len(inner) == 1, (rank, kind, s)
        b = [x for x in spans[(rank, "bucket")] if s["begin_ns"] <= x["begin_ns"] <= s["end_ns"]]
        assert sum(x["value"] for x in b) == grad, (rank, s["value"], [x["value"] for x in b], grad)
        for x in b:
            assert x["begin_ns"] < x["end_ns"] <= s["end_ns"], x
    # Each message goes to the earliest-ready bucket not yet reduced. A bucket's own
    # messages go to it or to one that became ready before it (Gloo may reduce two
    # at once), so in ready order the attributed bytes never fall behind the
    # buckets' shares, and over the iteration they add up exactly.
    for s in its:
        b = sorted(((i, x) for i, x in enumerate(j["spans"]) if x["type"] == "bucket" and pid_rank[x["pid"]] == rank
                    and s["begin_ns"] <= x["begin_ns"] <= s["end_ns"]), key=lambda ix: ix[1]["begin_ns"])
        got = share = 0
        for i, x in b:
            got += sum(m["end"] - m["begin"] for m in j["messages"] if m["bucket_span"] == i)
            share += 2 * (n - 1) / n * x["value"]
            assert got >= 0.99 * share, (rank, s["value"], x, got, share)
            buckets_seen += 1
        assert abs(got - share) <= 0.01 * share, (rank, s["value"], got, share)
assert buckets_seen >= 2 * n * len(logs[0][1:]), buckets_seen  # ResNet-18: several buckets an iteration
print(buckets_seen, "bucket all-reduces matched")
PY
  # Without the capture the module does nothing and the job runs as before.
  PYTHONPATH="$SRC/python" $PY "$LAUNCH" --nproc 2 --logs tplain -- --model resnet18 --iterations 3 --annotate || return 1
  [ "$(losses ta)" = "$(losses tplain)" ] || { diff <(losses ta) <(losses tplain); return 1; }
  PYTHONPATH="$SRC/python" $PY -c 'import tensorwire.annotate as t; assert not t.enabled(); t.mark("x")
with t.iteration(1): pass'
}
check "annotations: iterations, compute spans and DDP buckets; each bucket's messages carry its bytes" annotated

# A profiler's Chrome trace (PyTorch's own, of rank 0) imported onto the
# capture's clock: its matrix multiplies fall inside rank 0's annotated
# iterations; the export is Chrome-trace JSON with messages, spans and ops.
profiler_import() {
  "$TW" capture --out capp --quiet -- $PY "$LAUNCH" --nproc 2 --logs tp -- --model mlp --iterations 3 --annotate --profile "$PWD/prof.json" || return 1
  local start pid out
  start=$($PY -c 'import json; print([json.loads(l) for l in open("tp/rank-0.jsonl")][1]["profile_start_ns"])')
  pid=$("$TW" trace show capp --json | $PY -c 'import json,sys; print([p["pid"] for p in json.load(sys.stdin)["processes"] if p["rank"] == "rank 0"][0])')
  out=$("$TW" trace import capp prof.json --pid "$pid" 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'prof.json: its timestamps are relative .*give --start-ns' || { echo "$out"; return 1; }
  out=$("$TW" trace import capp prof.json 2>&1 --start-ns "$start")
  [ $? -eq 1 ] && echo "$out" | grep -q 'process "CPU functions" is not one of the capture.s; give --pid' || { echo "$out"; return 1; }
  out=$("$TW" trace import capp prof.json --pid "$pid" --start-ns 1000 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'fall outside the capture' || { echo "$out"; return 1; }
  "$TW" trace import capp prof.json --pid "$pid" --start-ns "$start" || return 1
  "$TW" trace show capp | grep -q 'aten::mm' || return 1
  "$TW" trace show capp --json > capp.json && "$TW" trace export capp -o capp-export.json || return 1
  $PY "$SRC/tests/perfetto/check_trace.py" --json capp-export.json > /dev/null || return 1
  $PY - "$pid" <<'PY'
import json, sys
pid = int(sys.argv[1])
ops = json.load(open("capp/ops-prof.json"))["ops"]
its = [s for s in json.load(open("capp.json"))["spans"] if s["pid"] == pid and s["type"] == "iteration"]
mm = [o for o in ops if o["name"] in ("aten::mm", "aten::addmm")]
assert len(its) == 3 and len(mm) >= 9, (len(its), len(mm))
# PyTorch 1.13's profiler times are relative to its start, which the job can only
# log just before it (profile_start_ns): the mapping is late by the time between
# the two, a few milliseconds at most under a sanitizer's slowdown.
slack = 5_000_000
inside = [o for o in mm if any(s["begin_ns"] - slack <= o["begin_ns"] <= o["end_ns"] <= s["end_ns"] + slack for s in its)]
assert len(inside) == len(mm), (len(inside), len(mm))
e = json.load(open("capp-export.json"))["traceEvents"]
x = [v for v in e if v["ph"] == "X"]
assert all(isinstance(v["ts"], (int, float)) and v["dur"] >= 0 for v in x)
cats = {v.get("cat") for v in x}
assert {"message", "iteration", "annotation", "stage", "read"} <= cats, cats
names = {v["name"] for v in x}
assert "forward" in names and any(n.startswith("bucket ") for n in names), names
assert sum(1 for v in x if v["name"] == "aten::mm") == sum(1 for o in ops if o["name"] == "aten::mm")
# Every message with its stages from the wire tap, drawn as nested slices.
assert any(v["name"] == "on the wire" for v in x if v.get("cat") == "stage")
print(len(mm), "matrix multiplies inside the iterations;", len(e), "events exported")
PY
}
check "a PyTorch profiler trace imported onto the capture's clock; Chrome-trace export" profiler_import

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

# A full disk: the traces and the wire tap's file stop where the space ends, the
# job runs on unharmed with its own exit status, and the capture says what was lost.
cat > chatty.py <<'PY'
import socket, threading
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
got = [0]
def rx():
    while got[0] < 20000 * 1000:
        got[0] += len(a.recv(1 << 16))
t = threading.Thread(target=rx); t.start()
for _ in range(20000):
    c.sendall(b"y" * 1000)
t.join()
print("sent", got[0])
PY
full_disk() {
  mkdir -p full && mount -t tmpfs -o size=256k tmpfs full || { echo "cannot mount a tmpfs"; return 1; }
  local out rc
  out=$(timeout 120 "$TW" capture --out full/cap -- $PY chatty.py 2> full.err)
  rc=$?
  umount full
  [ $rc -eq 0 ] && [ "$out" = "sent 20000000" ] || { echo "rc $rc: $out"; cat full.err; return 1; }
  grep -q 'No space left on device' full.err || { cat full.err; return 1; }
}
check "a full disk: the job runs on with its exit status; the capture says what it lost" full_disk

bad_traces() {
  local out
  mkdir -p bad1 bad2 bad3
  printf 'garbage-garbage-' > bad1/trace-1.twt && echo '{"pid": 1}' > bad1/trace-1.json
  out=$("$TW" trace show bad1 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'bad1/trace-1.twt: not a tensorwire trace' || { echo "$out"; return 1; }
  echo 'not json' > bad2/trace-2.json
  out=$("$TW" trace show bad2 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'bad2/trace-2.json: not valid JSON' || { echo "$out"; return 1; }
  out=$("$TW" trace show bad3 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q 'no traces' || { echo "$out"; return 1; }
  # A process killed mid-write leaves a partial last event: dropped and counted, not fatal.
  local f
  f=$(ls cap2/trace-*.twt | head -1)
  mkdir -p cut && cp "${f%.twt}.json" cut/ && head -c $(( $(stat -c %s "$f") - 10 )) "$f" > "cut/$(basename "$f")"
  "$TW" trace show cut --json | $PY -c 'import json,sys; assert json.load(sys.stdin)["processes"][0]["events_dropped"] == 1' ||
    return 1
  # A send that says it moved 2^63-1 bytes (more than it asked for) is damage, not traffic.
  mkdir -p huge && cp "${f%.twt}.json" huge/ && cp "$f" "huge/$(basename "$f")"
  $PY - "huge/$(basename "$f")" <<'PY' || return 1
import struct, sys
path = sys.argv[1]
b = bytearray(open(path, "rb").read())
for at in range(16, len(b) - 63, 64):  # after the 16-byte header, 64-byte events
    if b[at] == 1 and struct.unpack_from("<q", b, at + 32)[0] > 0:  # a send that moved bytes
        struct.pack_into("<q", b, at + 32, 2**63 - 1)
        break
else:
    sys.exit("no send in " + path)
open(path, "wb").write(bytes(b))
PY
  out=$("$TW" trace show huge 2>&1)
  [ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
    echo "$out" | grep -q "huge/$(basename "$f"): event [0-9]*: a send of 9223372036854775807 bytes at stream offset [0-9]* that asked for" ||
    { echo "$out"; return 1; }
}
check "bad, cut or forged traces: one clear line, or the partial event counted" bad_traces

finish
