#!/usr/bin/env python3
# A flood of idle connections: N held open to HOST:PORT for SECONDS, each one the
# peer closes opened again (at most every 0.2 s); prints how many were opened.
# Usage: flood.py HOST PORT N SECONDS   (controller_test.sh, bench/reliability.sh)
import selectors, socket, sys, time
host, port, n, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
sel = selectors.DefaultSelector()
opened = 0
def open_one():
    global opened
    try:
        s = socket.create_connection((host, port), timeout=1)
    except OSError:
        return
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    opened += 1
end = time.monotonic() + seconds
while time.monotonic() < end:
    for _ in range(n - len(sel.get_map())):
        open_one()
    for key, _ in sel.select(timeout=0.2):
        try:
            data = key.fileobj.recv(4096)
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj)
            key.fileobj.close()
    time.sleep(0.2)
print(opened)
