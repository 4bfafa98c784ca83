# WebSocket upgrades and frames as a client makes and reads them, for the test
# scripts that play an agent or a feed by hand (late_agent.py, empty_upload.py,
# controller_test.sh).
import base64, os, socket, struct, sys, time


def dial(port, deadline):
    """A connection to 127.0.0.1:port, tried until time.monotonic() passes
    `deadline` (the controller may not listen yet); exits the script then."""
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("never reached the controller")
            time.sleep(0.05)


def upgrade(s, path, token):
    """Upgrades connection `s` to a WebSocket at `path`, with the run's token.
    Returns the bytes read past the response; raises when there is no 101."""
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the upgrade")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError("no upgrade: " + head.decode(errors="replace").splitlines()[0])
    return rest


def frame(opcode, payload):
    """One final frame, masked as a client's must be."""
    mask = os.urandom(4)
    n = len(payload)
    size = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
    return bytes([0x80 | opcode]) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class Reader:
    """Frames from a socket, `buf` holding what was read past the last one
    (the bytes after the upgrade's response, to begin with)."""

    def __init__(self, sock, buf=b""):
        self.sock, self.buf = sock, buf

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def next(self):
        """(opcode, payload) of the next frame; EOFError when the peer closed."""
        b0, b1 = self.read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self.read(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self.read(8))[0]
        return b0 & 0x0F, self.read(n)
