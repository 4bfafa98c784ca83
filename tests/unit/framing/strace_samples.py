# Turns strace -xx -s 64 lines for one fd into the shim's samples: per send
# call, the bytes it moved and its first 32 / last 16 bytes where strace showed them.
import re, sys
path, fd = sys.argv[1], sys.argv[2]
call = re.compile(r'^(?:\d+ )?(writev|sendto|write|sendmsg)\(' + fd + r', (.*)\) = (\d+)$')
strs = re.compile(r'"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?')
print("# bytes-moved head-hex tail-hex|- (strace -xx -s 64 of a real run; see framing_test.cpp)")
for line in open(path):
    m = call.match(line.strip())
    if not m: continue
    kind, args, result = m.group(1), m.group(2), int(m.group(3))
    if result == 0: continue
    data, complete = b"", True
    if kind == "writev":
        for iov in re.finditer(r'iov_base=(NULL|"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?), iov_len=(\d+)', args):
            if iov.group(1) == "NULL": continue
            b = bytes.fromhex(iov.group(2).replace("\\x", ""))
            data += b
            if iov.group(3) or len(b) != int(iov.group(4)): complete = False; break
    else:
        s = strs.search(args)
        if not s: continue
        data = bytes.fromhex(s.group(1).replace("\\x", "")); complete = not s.group(2)
    data_known = data[:result]
    head = data_known[:32]
    if complete and len(data) >= result:
        tail = data_known[32:][-16:] if result > 32 else b""
        tail_hex = tail.hex() if tail else "-"
    else:
        tail_hex = "?"
    print(result, head.hex(), tail_hex)
