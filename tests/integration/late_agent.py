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
import base64, json, os, socket, struct, sys, time
port, sentinel, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
path = sys.argv[4] if len(sys.argv) > 4 else "/agent"
deadline = time.monotonic() + seconds
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("never reached the controller")
        time.sleep(0.05)
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
    def frame(opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        size = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
        return bytes([0x80 | opcode]) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    hello = {"type": "hello", "version": 5, "host": "late", "pid": os.getpid(), "data_host": "127.0.0.1", "data_port": 9}
    if path == "/agent":
        s.sendall(frame(1, json.dumps(hello).encode()))
    def read(n):
        global buf
        while len(buf) < n:
            chunk = s.recv(4096)
            if not chunk:
                raise EOFError
            buf += chunk
        out, buf = buf[:n], buf[n:]
        return out
    while True:
        b0, b1 = read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", read(8))[0]
        payload = read(n)
        if b0 & 0x0F == 1:
            print(payload.decode())
            if path == "/agent":
                s.sendall(frame(8, b"\x03\xe8"))
                break
            continue  # a feed, as a browser's: open until the controller closes it
        if b0 & 0x0F == 8:
            print("closed")
            break
        if b0 & 0x0F == 9:  # as a real agent's WebSocket does: the connection stays up
            s.sendall(frame(10, payload))
except EOFError:
    print("closed")
except socket.timeout:
    print("timeout")
