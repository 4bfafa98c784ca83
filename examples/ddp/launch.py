#!/usr/bin/python3
"""Starts N ranks of examples/ddp/train.py (or --script PATH, e.g.
examples/ps/train_ps.py) on this machine, as torchrun would:
RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, GLOO_SOCKET_IFNAME=lo.
  launch.py --nproc 2 --logs DIR [--port P] [--timeout S] [--script PATH] -- [script options]
Each rank gets --log DIR/rank-R.jsonl before the script options.
Exits non-zero if any rank fails or the job exceeds the timeout (then all ranks
are killed)."""
import argparse
import os
import random
import subprocess
import sys
import time


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
    port = a.port or random.randint(20000, 40000)
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
