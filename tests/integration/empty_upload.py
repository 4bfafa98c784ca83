#!/usr/bin/env python3
# An agent that goes through a run with the controller (hello, set-up, clock
# sync, start) and, when told to start, says its run went well and its results
# are uploaded, without sending a file: the controller must not write a run of
# that rank as done. Prints the last message the controller sent (or "closed").
# The token comes from TW_TOKEN; the profile's rank asked for has no flow.
# Usage: empty_upload.py PORT RANK SECONDS   (controller_test.sh)
import base64, json, os, socket, sys, time
sys.dont_write_bytecode = True  # nothing written into the source tree
from ws_frames import Reader, dial, frame
port, rank, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + seconds
s = dial(port, deadline)
s.settimeout(seconds)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET /agent HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           f"Authorization: Bearer {os.environ['TW_TOKEN']}\r\n\r\n").encode())
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = s.recv(4096)
    if not chunk:
        sys.exit("closed before the upgrade")
    buf += chunk
head, buf = buf.split(b"\r\n\r\n", 1)
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit("no upgrade: " + head.decode(errors="replace").splitlines()[0])


def send(message):
    s.sendall(frame(1, json.dumps(message).encode()))


send({"type": "hello", "version": 5, "host": "empty-upload", "pid": os.getpid(), "data_host": "127.0.0.1", "data_port": 9,
      "rank_hint": rank})
last = "closed"
try:
    frames = Reader(s, buf)
    while True:
        op, payload = frames.next()
        if op == 8:
            break
        if op == 9:  # as a real agent's WebSocket does: the connection stays up
            s.sendall(frame(10, payload))
            continue
        if op != 1:
            continue
        m = json.loads(payload)
        last = payload.decode()
        if m["type"] == "setup":
            send({"type": "connected"})
        elif m["type"] == "ping":
            send({"type": "pong", "seq": m["seq"], "t": time.time_ns()})
        elif m["type"] == "start":
            send({"type": "done", "ok": True})
            send({"type": "uploaded"})
        elif m["type"] in ("bye", "stop"):
            s.sendall(frame(8, b"\x03\xe8"))
            break
except EOFError:
    pass
print(last)
