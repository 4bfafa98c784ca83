#!/usr/bin/python3
"""Reads a pcapng file as the format's specification lays it out (section
header, interface descriptions, enhanced packet blocks and their options), not
with tensorwire's writer, and checks it against the pcap files it came from:
every frame there, in order, bytes unchanged, each on an interface whose link
type is its file's, timestamps in nanoseconds. Prints a JSON summary with the
packet comments.

usage: check_pcapng.py FILE.pcapng PCAP..."""
import json
import struct
import sys


def fail(msg):
    print(f"check_pcapng: {msg}", file=sys.stderr)
    sys.exit(1)


def options(body):
    out, i = [], 0
    while i + 4 <= len(body):
        code, length = struct.unpack_from("<HH", body, i)
        i += 4
        if code == 0:
            break
        out.append((code, body[i:i + length]))
        i += (length + 3) // 4 * 4
    return out


def read_pcap(path):
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data, 0)[0]
    nanos = magic == 0xA1B23C4D
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        fail(f"{path}: not a little-endian pcap file")
    linktype = struct.unpack_from("<I", data, 20)[0] & 0xFFFF
    frames, i = [], 24
    while i + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack_from("<IIII", data, i)
        i += 16
        if i + incl > len(data):
            break
        frames.append((sec * 10**9 + frac * (1 if nanos else 1000), data[i:i + incl], orig))
        i += incl
    return linktype, frames


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    data = open(sys.argv[1], "rb").read()
    i, interfaces, packets = 0, [], []
    while i < len(data):
        if i + 12 > len(data):
            fail(f"a block cut at {i}")
        btype, blen = struct.unpack_from("<II", data, i)
        if blen < 12 or blen % 4 or i + blen > len(data) or struct.unpack_from("<I", data, i + blen - 4)[0] != blen:
            fail(f"block at {i}: bad length {blen}")
        body = data[i + 8:i + blen - 4]
        if i == 0 and (btype != 0x0A0D0D0A or struct.unpack_from("<I", body, 0)[0] != 0x1A2B3C4D):
            fail("no section header first")
        if btype == 1:
            linktype = struct.unpack_from("<H", body, 0)[0]
            opts = dict(options(body[8:]))
            if opts.get(9) != b"\x09":
                fail("an interface without nanosecond timestamps (if_tsresol 9)")
            interfaces.append(linktype)
        elif btype == 6:
            iface, hi, lo, cap, orig = struct.unpack_from("<IIIII", body, 0)
            if iface >= len(interfaces):
                fail(f"a packet on interface {iface} before its description")
            frame = body[20:20 + cap]
            comments = [v.decode() for c, v in options(body[20 + (cap + 3) // 4 * 4:]) if c == 1]
            packets.append((iface, (hi << 32) | lo, frame, orig, comments))
        i += blen
    # Against the pcap files, one interface each, in order.
    at = 0
    for n, path in enumerate(sys.argv[2:]):
        linktype, frames = read_pcap(path)
        if n >= len(interfaces) or interfaces[n] != linktype:
            fail(f"{path}: its interface is missing or has another link type")
        for ts, frame, orig in frames:
            if at >= len(packets):
                fail(f"{path}: frames missing from the pcapng file")
            iface, pts, pframe, porig, _ = packets[at]
            if (iface, pts, pframe, porig) != (n, ts, frame, orig):
                fail(f"{path}: frame {at} differs")
            at += 1
    if at != len(packets):
        fail(f"{len(packets) - at} frames more than the pcap files hold")
    comments = [c for p in packets for c in p[4]]
    print(json.dumps({"interfaces": len(interfaces), "frames": len(packets), "comments": len(comments),
                      "with_iteration": sum("iteration" in c for c in comments), "sample": comments[:3]}, indent=1))


if __name__ == "__main__":
    main()
