#!/usr/bin/env python3
# An agent whose request to the controller is accepted before the run ends and
# finished after: connects, sends its upgrade request but the blank line that ends
# it, waits for FILE (the run's run.json: written as the run ends), then finishes
# the request, says hello and prints the first message the controller sends (or
# "closed" / "timeout"), answering WebSocket pings meanwhile. A feed prints every
# message until the controller closes it. The token comes from
# TW_TOKEN.
# Usage: late_agent.py PORT FILE SECONDS [PATH]   (controller_test.sh; PATH /agent,
# the default, or /api/feed, which says no hello)
import base64, json, os, socket, sys, time
sys.dont_write_bytecode = True  # nothing written into the source tree
from ws_frames import Reader, dial, frame
port, sentinel, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
path = sys.argv[4] if len(sys.argv) > 4 else "/agent"
deadline = time.monotonic() + seconds
s = dial(port, deadline)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           f"Authorization: Bearer {os.environ['TW_TOKEN']}\r\n").encode())
while not os.path.exists(sentinel):
    if time.monotonic() > deadline:
        sys.exit("the run never ended")
    time.sleep(0.01)
s.sendall(b"\r\n")
s.settimeout(max(0.1, deadline - time.monotonic()))
buf = b""
try:
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            print("closed")
            sys.exit(0)
        buf += chunk
    head, buf = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        sys.exit("no upgrade: " + head.decode(errors="replace").splitlines()[0])
    hello = {"type": "hello", "version": 5, "host": "late", "pid": os.getpid(), "data_host": "127.0.0.1", "data_port": 9}
    if path == "/agent":
        s.sendall(frame(1, json.dumps(hello).encode()))
    frames = Reader(s, buf)
    while True:
        op, payload = frames.next()
        if op == 1:
            print(payload.decode())
            if path == "/agent":
                s.sendall(frame(8, b"\x03\xe8"))
                break
            continue  # a feed, as a browser's: open until the controller closes it
        if op == 8:
            print("closed")
            break
        if op == 9:  # as a real agent's WebSocket does: the connection stays up
            s.sendall(frame(10, payload))
except EOFError:
    print("closed")
except socket.timeout:
    print("timeout")
