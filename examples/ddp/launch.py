#!/usr/bin/python3
"""Starts N ranks of examples/ddp/train.py (or --script PATH, e.g.
examples/ps/train_ps.py) on this machine, as torchrun would:
RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, GLOO_SOCKET_IFNAME=lo.
  launch.py --nproc 2 --logs DIR [--port P] [--timeout S] [--script PATH] -- [script options]
Each rank gets --log DIR/rank-R.jsonl before the script options.
Exits non-zero if any rank fails or the job exceeds the timeout (then all ranks
are killed). Without --port, the port is one that nothing holds, below the
kernel's ephemeral range where that leaves room, with the three after it free too."""
import argparse
import os
import random
import socket
import subprocess
import sys
import time


def free_port(span=4):
    """A port, with the span-1 after it, that nothing holds now and, where
    the kernel's ephemeral range leaves at least 1000 ports below it, that no
    outgoing connection will take: one below that range (an outgoing connection
    can hold any port inside it; Debian's is 32768-60999)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    # Where the ephemeral range leaves less room below it, anywhere above the
    # privileged ports: a connection may then take the port first, and the
    # master fails to bind (an error, not a hang).
    top = low - span
    bottom = 20000 if top - 20000 >= 1000 else 1024
    if top - bottom < 1000:
        bottom, top = 1024, 65536 - span
    for _ in range(200):
        base = random.randint(bottom, top)
        try:
            for port in range(base, base + span):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    sys.exit("launch.py: found no free port; give one with --port")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--script", default=None, help="the rank's script (default: train.py next to launch.py)")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    os.makedirs(a.logs, exist_ok=True)
    port = a.port or free_port()
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.abspath(a.script) if a.script else os.path.join(here, "train.py")
    if not os.path.isfile(script):
        ap.error(f"--script {a.script}: no such file")
    procs = []
    for r in range(a.nproc):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   GLOO_SOCKET_IFNAME="lo")
        procs.append(subprocess.Popen([sys.executable, script, "--log",
                                       os.path.join(a.logs, f"rank-{r}.jsonl")] + rest, env=env))
    deadline = time.monotonic() + a.timeout
    codes = [None] * a.nproc
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            codes[i] = p.poll()
        if any(c not in (None, 0) for c in codes) or time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            print(f"launch.py: rank {bad[0] if bad else '?'} failed" if bad else "launch.py: timed out", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
