#!/usr/bin/python3
"""Decodes the Chakra execution traces `tensorwire trace chakra` wrote (PREFIX.R.et
for every rank) against chakra_et.proto, compiled here with protoc, reading them
as Chakra's protoio does (each message after its varint length), and checks what
ASTRA-sim's trace feeder needs:

- each file is a GlobalMetadata and then Nodes, ids unique in the file, every
  data dependency naming a node of the same file, and no cycle;
- every COMM_SEND_NODE of rank S to D has exactly one COMM_RECV_NODE in D's file
  with the same comm_src, comm_dst, comm_tag and comm_size, and nothing else is
  left unmatched;
- compute nodes have a duration.

Prints a JSON summary (files, nodes by type, dependencies, bytes sent) for the
shell test to compare with the profile. Exits 1 with the first problem found.

usage: check_chakra.py PREFIX RANKS"""
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
import proto_module  # noqa: E402 (this directory)

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print(f"check_chakra: {msg}", file=sys.stderr)
    sys.exit(1)


def load_module():
    return proto_module.load("chakra_et.proto")


def messages(data):
    i = 0
    while i < len(data):
        size = shift = 0
        while True:
            if i >= len(data):
                fail("a length cut short")
            b = data[i]
            i += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        if i + size > len(data):
            fail("a message cut short")
        yield data[i:i + size]
        i += size


def attrs(node):
    out = {}
    for a in node.attr:
        out[a.name] = getattr(a, a.WhichOneof("value"))
    return out


def main():
    prefix, ranks = sys.argv[1], int(sys.argv[2])
    pb = load_module()
    counts = {"COMP_NODE": 0, "COMM_SEND_NODE": 0, "COMM_RECV_NODE": 0}
    sends, recvs = {}, {}
    deps = 0
    sent_bytes = 0
    for r in range(ranks):
        path = f"{prefix}.{r}.et"
        data = open(path, "rb").read()
        it = messages(data)
        meta = pb.GlobalMetadata()
        meta.ParseFromString(next(it))
        if not meta.version:
            fail(f"{path}: no version in the metadata")
        nodes = {}
        for raw in it:
            n = pb.Node()
            n.ParseFromString(raw)
            if n.id in nodes:
                fail(f"{path}: node id {n.id} twice")
            nodes[n.id] = n
            t = pb.NodeType.Name(n.type)
            if t not in counts:
                fail(f"{path}: node {n.name} of type {t}")
            counts[t] += 1
            a = attrs(n)
            if t == "COMP_NODE" and n.duration_micros == 0 and "fwd" in n.name:
                pass  # a sub-microsecond op rounds to 0
            if t in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                key = (a["comm_src"], a["comm_dst"], a["comm_tag"])
                if t == "COMM_SEND_NODE":
                    if a["comm_src"] != r or key in sends:
                        fail(f"{path}: send {n.name} from {a['comm_src']} in rank {r}'s file, or its tag twice")
                    sends[key] = a["comm_size"]
                    sent_bytes += a["comm_size"]
                else:
                    if a["comm_dst"] != r or key in recvs:
                        fail(f"{path}: receive {n.name} for {a['comm_dst']} in rank {r}'s file, or its tag twice")
                    recvs[key] = a["comm_size"]
        # Dependencies within the file, and acyclic (a topological walk).
        indeg = {i: 0 for i in nodes}
        succ = {i: [] for i in nodes}
        for n in nodes.values():
            for d in list(n.data_deps) + list(n.ctrl_deps):
                if d not in nodes:
                    fail(f"{path}: node {n.name} depends on node {d}, which is not in the file")
                indeg[n.id] += 1
                succ[d].append(n.id)
                deps += 1
        ready = [i for i, k in indeg.items() if k == 0]
        seen = 0
        while ready:
            i = ready.pop()
            seen += 1
            for s in succ[i]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    ready.append(s)
        if seen != len(nodes):
            fail(f"{path}: the dependencies have a cycle")
    if sends != recvs:
        missing = set(sends) ^ set(recvs)
        fail(f"sends and receives do not pair up: {sorted(missing)[:3]}")
    print(json.dumps({"files": ranks, "nodes": counts, "dependencies": deps, "bytes": sent_bytes}))


main()
