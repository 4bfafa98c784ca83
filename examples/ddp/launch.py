#!/usr/bin/python3
"""Starts N ranks of examples/ddp/train.py (or --script PATH, e.g.
examples/ps/train_ps.py) on this machine, as torchrun would:
RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, GLOO_SOCKET_IFNAME=lo.
  launch.py --nproc 2 --logs DIR [--port P] [--timeout S] [--script PATH] -- [script options]
Each rank gets --log DIR/rank-R.jsonl before the script options.
Exits non-zero if any rank fails or the job exceeds the timeout (then all ranks
are killed; on a timeout each live rank first prints, to standard error, what each
of its threads waits in and its Python stacks). Without --port, the port is one that nothing holds, below the
kernel's ephemeral range where that leaves room, with the three after it free too."""
import argparse
import os
import random
import signal
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


# x86-64 numbers of the system calls a rank of a collective job waits in.
SYSCALLS = {"0": "read", "1": "write", "7": "poll", "23": "select", "35": "nanosleep", "42": "connect",
            "43": "accept", "44": "sendto", "45": "recvfrom", "46": "sendmsg", "47": "recvmsg", "61": "wait4",
            "202": "futex", "230": "clock_nanosleep", "232": "epoll_wait", "270": "pselect6", "271": "ppoll",
            "281": "epoll_pwait", "288": "accept4"}


def report_waits(pid):
    """What each thread of a rank that outlived the timeout waits in: its kernel
    wait channel and system call, from /proc."""
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return
    for tid in tids:
        fields = []
        for name in ("comm", "wchan", "syscall"):
            try:
                with open(f"/proc/{pid}/task/{tid}/{name}") as f:
                    fields.append(f.read().strip().split(" ")[0] or "-")
            except OSError:
                fields.append("?")
        call = SYSCALLS.get(fields[2], fields[2]) if os.uname().machine == "x86_64" else fields[2]
        print(f"launch.py: rank pid {pid} thread {tid} ({fields[0]}): waits in {fields[1]}, system call {call}",
              file=sys.stderr, flush=True)


def report_hang(live):
    """Each live rank's waits, then its Python stacks, one rank after another:
    the ranks run with PYTHONFAULTHANDLER, so SIGABRT makes one print its stacks
    before it dies (up to 5 s each; the caller kills what is left)."""
    for p in live:
        report_waits(p.pid)
    # Stopped first, so that one rank's death does not end another (its peers'
    # sockets reset) before that one has printed its stacks.
    for p in live:
        try:
            p.send_signal(signal.SIGSTOP)
        except OSError:
            pass
    for p in live:
        try:
            p.send_signal(signal.SIGABRT)
            p.send_signal(signal.SIGCONT)
        except OSError:
            continue
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


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
                   GLOO_SOCKET_IFNAME="lo", PYTHONFAULTHANDLER="1")
        procs.append(subprocess.Popen([sys.executable, script, "--log",
                                       os.path.join(a.logs, f"rank-{r}.jsonl")] + rest, env=env))
    deadline = time.monotonic() + a.timeout
    codes = [None] * a.nproc
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            codes[i] = p.poll()
        timed_out = time.monotonic() > deadline
        if any(c not in (None, 0) for c in codes) or timed_out:
            if timed_out and not any(c not in (None, 0) for c in codes):
                report_hang([p for p in procs if p.poll() is None])
            for p in procs:
                if p.poll() is None:
                    p.kill()
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            print(f"launch.py: rank {bad[0] if bad else '?'} failed" if bad else "launch.py: timed out", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
