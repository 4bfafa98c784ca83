import sys, zmq
ctx = zmq.Context()
if sys.argv[1] == "server":
    s = ctx.socket(zmq.ROUTER); s.bind("tcp://127.0.0.1:" + sys.argv[2])
    for _ in range(4):
        parts = s.recv_multipart(); s.send_multipart([parts[0], b"ok"])
else:
    s = ctx.socket(zmq.DEALER); s.connect("tcp://127.0.0.1:" + sys.argv[2])
    for msg in ([b"hello"], [b"m" * 10, b"\x01" * 100000], [b"x" * 20, b"\x02" * 5000, b"\x03" * 300], [b"y" * 100, b"\x04" * 20000]):
        s.send_multipart(msg); s.recv_multipart()
s.close(); ctx.term()
