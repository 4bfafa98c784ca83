#!/usr/bin/env python3
# An agent that goes through a run with the controller (hello, set-up, clock
# sync, start) and, when told to start, says its run went well and its results
# are uploaded, without sending a file: the controller must not write a run of
# that rank as done. Prints the last message the controller sent (or "closed").
# The token comes from TW_TOKEN; the profile's rank asked for has no flow.
# Usage: empty_upload.py PORT RANK SECONDS   (controller_test.sh)
import json, os, sys, time
sys.dont_write_bytecode = True  # nothing written into the source tree
from ws_frames import Reader, dial, frame, upgrade
port, rank, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + seconds
s = dial(port, deadline)
s.settimeout(seconds)
try:
    buf = upgrade(s, "/agent", os.environ["TW_TOKEN"])
except ConnectionError as e:
    sys.exit(str(e))

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
