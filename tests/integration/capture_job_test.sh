#!/usr/bin/env bash
# The capture on real jobs (/usr/bin/python3) that do what daemons and launchers
# do: close every descriptor and open new ones, dup2 onto numbers they did not
# open, fork and close; non-blocking connects that never carry data; the sample
# events of send calls; several captures into one directory; and a binary run
# from a build outside the source tree.
# Usage: capture_job_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3

# A job that first uses TCP (the shim's writer is running and has its file), then
# treats descriptors as MODE says, then opens a file and a loopback connection of
# its own and checks that they hold exactly what it wrote: not one byte of the
# shim's. It prints what its own close calls returned, to compare with a plain run.
cat > fds.py <<'PY'
import errno, os, socket, sys, time
mode = sys.argv[1]
out = []
def open_fds():
    found = set()
    for n in os.listdir("/proc/self/fd"):  # listdir's own descriptor is in the listing, closed by now
        try:
            os.fstat(int(n))
            found.add(int(n))
        except OSError:
            pass
    return found
inherited = open_fds()  # whatever the test's shell (or ctest) left open: not the same plainly and traced

def tcp_traffic(n):
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
    c = socket.create_connection(l.getsockname()); a, _ = l.accept()
    for _ in range(n):
        c.sendall(b"w" * 100)
        got = 0
        while got < 100:
            got += len(a.recv(100))
    return l, c, a

before = tcp_traffic(50)
time.sleep(0.05)  # the writer has written: its file exists

def shim_numbers():
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if ".twt" in os.readlink("/proc/self/fd/" + name) or "trace-" in os.readlink("/proc/self/fd/" + name):
                found.append(int(name))
        except OSError:
            pass
    return found

def close_loop():
    closed = []
    for fd in range(3, 4096):
        try:
            os.close(fd)
            if fd not in inherited:
                closed.append(fd)
        except OSError as e:
            assert e.errno == errno.EBADF, e
    return closed

def own_file_and_connection(tag):
    # What a daemon does after closing everything: new files and sockets.
    name = f"job-{tag}-{os.getpid()}.txt"
    f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(f, b"job's 13 byte")
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
    c = socket.create_connection(l.getsockname()); a, _ = l.accept()
    payload = bytes(range(256)) * 40
    for _ in range(20):
        c.sendall(payload)  # traced: events go to the shim's file, never to f, c or a
        got = b""
        while len(got) < len(payload):
            got += a.recv(1 << 16)
        assert got == payload, "foreign bytes on the job's connection"
        time.sleep(0.005)  # the writer writes every millisecond
    a.setblocking(False)
    try:
        extra = a.recv(1 << 16)
    except BlockingIOError:
        extra = b""
    assert extra == b"", ("foreign bytes on the job's connection", len(extra))
    os.close(f)
    data = open(name, "rb").read()
    assert data == b"job's 13 byte", ("foreign bytes in the job's file", len(data))
    c.close(); a.close(); l.close()

if mode == "closerange":
    os.closerange(3, 65536)
elif mode == "loop":
    closed = close_loop()
    # The job's closes found its own sockets and nothing else (never one of the
    # shim's). Their numbers are not compared: what was inherited differs between
    # a plain run and one under the capture, and in the fallback the shim's file
    # takes the lowest free number for a moment, so a socket may get the next one.
    own = sorted(x.fileno() for x in before)
    out.append(("closed its own and nothing else", sorted(closed) == own, len(closed)))
elif mode == "dup2":
    # Onto the shim's own numbers, where the job can see them, and onto every free
    # number below 1024 (where a shim that hides high would be).
    f = os.open("dup-target.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    busy = {int(n) for n in os.listdir("/proc/self/fd")}
    targets = shim_numbers() + [n for n in range(3, 1000) if n not in busy]
    for t in targets:
        os.dup2(f, t)
    tcp_traffic(50)
    time.sleep(0.05)
    for t in targets:
        os.close(t)
    os.close(f)
    assert open("dup-target.txt", "rb").read() == b"", "foreign bytes in a file dup2'd onto free numbers"
elif mode == "fork":
    pid = os.fork()
    if pid == 0:
        os.closerange(3, 65536)
        own_file_and_connection("child")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
own_file_and_connection(mode)
# The job's own view of its descriptors is its own: nothing of the shim's (but in
# the fallback, where the shim's file has a high number in the job's table).
if os.environ.get("TW_CAPTURE_SHARED_FDS") != "1":
    out.append(("shim fds seen", shim_numbers()))
print(out)
PY

fds_job() {  # MODE [ENV...]: the same output plainly and under the capture, and the capture readable
  local mode=$1 plain traced
  shift
  plain=$(env "$@" $PY fds.py "$mode") || { echo "plain run failed: $plain"; return 1; }
  rm -rf "cap-$mode"
  traced=$(env "$@" "$TW" capture --out "cap-$mode" --wire off --quiet -- $PY fds.py "$mode") || { echo "$traced"; return 1; }
  [ "$plain" = "$traced" ] || { echo "plain:  $plain"; echo "traced: $traced"; return 1; }
  "$TW" trace show "cap-$mode" --json > "cap-$mode.json" || return 1
  $PY - "cap-$mode.json" "$mode" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ps = j["processes"]
assert all(p["final"] for p in ps), ps
want = 2 if sys.argv[2] == "fork" else 1
assert len(ps) == want, [p["cmdline"] for p in ps]
# The connection opened after the descriptors were closed is in the trace, whole.
sent = [c["bytes_sent"] for c in j["connections"]]
assert 20 * 256 * 40 in sent, sent
if sys.argv[2] == "fork":
    assert sent.count(20 * 256 * 40) == 2, sent  # the child's and the parent's
PY
}
for mode in closerange loop dup2 fork; do
  check "a job that treats its descriptors as $mode: not one byte of the shim's in its files or sockets" fds_job $mode
done
# Where the kernel refuses the writer a table of its own: the shim's files in the
# job's table at a high number, kept off the job's close, close_range and dup2,
# and checked before each write.
for mode in closerange loop dup2 fork; do
  check "the same with a shared descriptor table (the fallback): $mode" fds_job $mode TW_CAPTURE_SHARED_FDS=1
done

# Samples: after each send call that moved bytes, its first 32 and last 16 bytes.
cat > sends.py <<'PY'
import os, socket, threading
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
stream = bytearray()
def rx():
    while a.recv(1 << 16):
        pass
t = threading.Thread(target=rx); t.start()
def sent(b):
    stream.extend(b)
c.send(b"A"); sent(b"A")
msg = bytes((i * 7) % 251 for i in range(40)); c.sendall(msg); sent(msg)
big = bytes((i * 13) % 253 for i in range(300000)); c.sendall(big); sent(big)
parts = [b"head-of-writev:", b"", bytes(range(50)), b"the end"]
n = os.writev(c.fileno(), parts); sent(b"".join(parts)[:n])
parts = [b"x" * 5, b"sendmsg middle " * 3, b"tail bytes 0123456789"]
n = c.sendmsg(parts); sent(b"".join(parts)[:n])
c.shutdown(socket.SHUT_WR); t.join()
open("stream.bin", "wb").write(stream)
PY
cat > samples.py <<'PY'
# Reads a capture's .twt files (docs/trace-format.md) and checks each sample
# against the bytes the job sent: SAMPLES_EXPECTED is "yes" or "no".
import glob, json, os, stat, struct, sys
cap, expected = sys.argv[1], sys.argv[2]
stream = open("stream.bin", "rb").read()
sends, samples = {}, {}
for f in glob.glob(cap + "/trace-*.twt"):
    assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, oct(os.stat(f).st_mode)
    assert stat.S_IMODE(os.stat(f[:-4] + ".json").st_mode) == 0o600
    b = open(f, "rb").read()
    assert b[:8] == b"TWTRACE1"
    for at in range(16, len(b), 64):
        e = b[at:at + 64]
        if e[0] == 1:
            conn, = struct.unpack_from("<I", e, 8)
            result, = struct.unpack_from("<q", e, 32)
            offset, = struct.unpack_from("<Q", e, 48)
            if result > 0:
                sends[(conn, offset)] = result
        elif e[0] == 10:
            hl, tl = e[1], e[2]
            conn, offset = struct.unpack_from("<IQ", e, 4)
            samples[(conn, offset)] = (e[16:16 + hl], e[48:48 + tl])
if expected == "no":
    assert sends and not samples, (len(sends), len(samples))
    sys.exit(0)
# The client's connection sent the whole stream; its calls cover it exactly.
client = [k for k in sends if sum(r for (c, o), r in sends.items() if c == k[0]) == len(stream)]
conn = client[0][0]
calls = sorted((o, r) for (c, o), r in sends.items() if c == conn)
assert len(calls) >= 5, calls
assert set(samples) == {(conn, o) for o, r in calls}, (sorted(samples), calls)
for o, r in calls:
    head, tail = samples[(conn, o)]
    hl = min(32, r); tl = min(16, r - hl)
    assert head == stream[o:o + hl], (o, r, head)
    assert tail == stream[o + r - tl:o + r], (o, r, tail)
print(len(samples), "samples")
PY
samples_check() {
  rm -rf caps capn
  "$TW" capture --out caps --wire off --quiet -- $PY sends.py || return 1
  $PY samples.py caps yes || return 1
  "$TW" trace show caps --json | $PY -c '
import json, sys
j = json.load(sys.stdin)
assert sum(p["samples"] for p in j["processes"]) >= 5, j["processes"]' || return 1
  "$TW" capture --out capn --wire off --no-samples --quiet -- $PY sends.py || return 1
  $PY samples.py capn no || return 1
  TW_CAPTURE_SAMPLES=0 "$TW" capture --out capn --append --wire off --quiet -- $PY sends.py || return 1
  $PY samples.py capn no
}
check "samples: each send call's first 32 and last 16 bytes, exactly; none with --no-samples; files 0600" samples_check

# A non-blocking connect to a listener in another process, and nothing sent
# either way: both ends are in the capture, each the other's peer. Three ways
# to learn it completed: getsockopt(SO_ERROR), none before close(), none at all
# before the process exits.
cat > idle.py <<'PY'
import os, select, socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
port = l.getsockname()[1]
pid = os.fork()
if pid == 0:
    l.close()
    socks = []
    for how in ("so_error", "close", "exit"):
        s = socket.socket(); s.setblocking(False)
        assert s.connect_ex(("127.0.0.1", port)) in (0, 115), how  # EINPROGRESS
        select.select([], [s], [], 5)
        if how == "so_error":
            assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
        socks.append((how, s))
    time.sleep(0.2)
    for how, s in socks:
        if how != "exit":
            s.close()
    os._exit(0)  # the last one is still open: _exit announces it
accepted = [l.accept()[0] for _ in range(3)]
os.waitpid(pid, 0)
print("ok")
PY
idle_connects() {
  rm -rf capidle
  "$TW" capture --out capidle --wire off --quiet -- $PY idle.py | grep -q ok || return 1
  "$TW" trace show capidle --json > capidle.json || return 1
  $PY - <<'PY'
import json
j = json.load(open("capidle.json"))
pids = sorted(p["pid"] for p in j["processes"])
assert len(pids) == 2, pids
connect = [c for c in j["connections"] if c["how"] == "connect"]
accept = [c for c in j["connections"] if c["how"] == "accept"]
assert len(connect) == 3 and len(accept) == 3, [(c["pid"], c["how"], c["local"], c["remote"]) for c in j["connections"]]
for c in connect + accept:
    assert "peer_pid" in c and c["peer_pid"] != c["pid"], c
    assert c["bytes_sent"] == 0 and c["bytes_received"] == 0, c
PY
}
check "idle connections from non-blocking connects: on both ends, each the other's peer" idle_connects

# Several captures into one directory at once (one per rank, or one per host into
# a shared directory): separate files, read back whole; a used directory is
# refused without --append, and left as it was.
cat > ping.py <<'PY'
import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
n = int(sys.argv[1])
for i in range(n):
    c.sendall(b"p" * 1000)
    got = 0
    while got < 1000:
        got += len(a.recv(1000))
    a.sendall(b"q" * 10)
    got = 0
    while got < 10:
        got += len(c.recv(10))
print("done", n)
PY
concurrent() {
  rm -rf shared
  local pids=() i
  for i in 1 2 3; do
    "$TW" capture --out shared --append --quiet -- $PY ping.py $((i * 700)) > "ping-$i.out" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do wait "${pids[$i]}" || { cat ping-*.out; return 1; }; done
  [ "$(ls shared | grep -c '^capture-.*\.json$')" -eq 3 ] && [ "$(ls shared | grep -c '^wire-any-.*\.pcap$')" -eq 3 ] || { ls shared; return 1; }
  "$TW" trace show shared --json > shared.json || return 1
  "$TW" trace show shared > /dev/null || return 1
  $PY - <<'PY'
import json
j = json.load(open("shared.json"))
assert len(j["processes"]) == 3 and all(p["final"] for p in j["processes"]), j["processes"]
w = j["wire"]
assert w["interfaces"] == ["any"] and w["frames"] > 0 and w["status"] == "" and not w["truncated"], w
sent = sorted(c["bytes_sent"] for c in j["connections"] if c["bytes_sent"] >= 1000)
assert sent == [700000, 1400000, 2100000], sent
for c in j["connections"]:
    if c["bytes_sent"]:
        assert c["on_wire"] and c["wire_bytes"] == c["bytes_sent"], c
        assert "peer_pid" in c, c
PY
  # A used directory: refused in one line, and what is there stays as it was.
  local before out
  before=$(cd shared && sha256sum * | sort)
  out=$("$TW" capture --out shared --quiet -- $PY ping.py 1 2>&1)
  [ $? -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q 'holds a capture already.*--append' || { echo "$out"; return 1; }
  [ "$before" = "$(cd shared && sha256sum * | sort)" ] || { echo "the first capture changed"; return 1; }
  # An older capture's layout (capture.json, wire-any.pcap) is still read.
  mkdir -p old && cp shared/trace-* old/ || return 1
  local s
  s=$(ls shared/capture-*.json | head -1)
  $PY - "$s" <<'PY'
import json, shutil, sys
c = json.load(open(sys.argv[1]))
shutil.copy("shared/" + c["wire"]["files"][0], "old/wire-any.pcap")
c["wire"]["files"] = ["wire-any.pcap"]
json.dump(c, open("old/capture.json", "w"))
PY
  "$TW" trace show old --json | $PY -c 'import json, sys; j = json.load(sys.stdin); assert j["wire"]["frames"] > 0, j["wire"]'
}
check "three captures into one directory at once: separate files, read whole; a used one refused" concurrent

# A build outside the source tree: the binary finds the shim and python/ beside
# it (the build copies python/ to BUILD/python), from any working directory,
# without TW_PYTHON_DIR.
out_of_tree() {
  local build
  build=$(dirname "$(dirname "$TW")")
  [ -f "$build/python/tensorwire/annotate.py" ] || { echo "no $build/python/tensorwire/annotate.py"; return 1; }
  cmp "$build/python/tensorwire/annotate.py" "$SRC/python/tensorwire/annotate.py" || return 1
  mkdir -p ob/cli ob/capture elsewhere && cp "$TW" ob/cli/ && cp "$build/capture/libtensorwire_capture.so" ob/capture/ &&
    cp -r "$build/python" ob/ || return 1
  (cd elsewhere && env -u TW_PYTHON_DIR -u PYTHONPATH "$TW_TMP/ob/cli/tensorwire" capture --out capo --wire off --quiet -- \
     $PY -c 'import tensorwire.annotate as t; assert t.enabled(); t.mark("here"); import socket; print("ok")') | grep -q '^ok$'
}
check "an out-of-tree build: python/ found beside the binary, from another directory" out_of_tree

finish
