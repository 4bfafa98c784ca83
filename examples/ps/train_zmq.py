#!/usr/bin/python3
"""One rank of a parameter-server job over ZeroMQ (pyzmq; no torch.distributed),
on synthetic data.

Started by examples/ddp/launch.py --script examples/ps/train_zmq.py (RANK,
WORLD_SIZE, MASTER_PORT in the environment). Rank 0 is the server: a ROUTER
socket bound on tcp://127.0.0.1:MASTER_PORT (+ --port-offset), holding the parameters and an SGD
optimizer. Ranks 1..N-1 are workers: a REQ socket each (identity worker-RANK),
connected to the server. One TCP connection per worker, nothing else.

  start:       worker -> server  hello (the rank, as ASCII)
               server -> worker  the initial parameters (flat float32), once all said hello
  iteration:   worker -> server  the flat float32 gradient on its own batch
               server -> worker  the new parameters, once it has every gradient,
                                 averaged them (in rank order) and taken an SGD step
  end:         worker -> server  b"done";  server -> worker  b"bye", once all are done

Every message is one payload frame (REQ adds an empty delimiter frame). The
model, data and update code is train_ps.py's, so the losses are the same as
over Gloo. --log gets the same lines as train_ps.py with "transport":"zeromq".
Every receive waits at most --timeout seconds (default 60): a dead or silent
peer ends the rank with one line on stderr and exit status 1.
"""
import os
import sys
import time

import numpy as np
import torch
import zmq

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_ps import Job, fail, log_line, options  # noqa: E402

SCRIPT = "train_zmq.py"


class Failure(Exception):
    pass


def recv(sock, what, timeout):
    try:
        return sock.recv_multipart()
    except zmq.Again:
        raise Failure(f"no {what} within {timeout:g} s") from None


def as_tensor(payload, nbytes, what):
    if len(payload) != nbytes:
        raise Failure(f"{what}: {len(payload)} bytes, expected {nbytes}")
    return torch.from_numpy(np.frombuffer(payload, dtype=np.float32).copy())


def serve(sock, job, a, world, log):
    ranks = {f"worker-{w}".encode(): w for w in range(1, world)}
    ident = {w: i for i, w in ranks.items()}

    def gather(what, check):
        """One message from every worker; returns {rank: payload}."""
        got = {}
        while len(got) < world - 1:
            missing = ", ".join(str(w) for w in sorted(set(ident) - set(got)))
            frames = recv(sock, f"{what} from worker rank(s) {missing}", a.timeout)
            if len(frames) != 3 or frames[0] not in ranks or frames[1] != b"":
                raise Failure(f"unexpected message from {frames[0]!r} ({len(frames)} frames) while waiting for {what}")
            w = ranks[frames[0]]
            if w in got:
                raise Failure(f"two messages from worker rank {w} while waiting for {what}")
            got[w] = check(w, frames[2])
        return got

    def scatter(payload):
        for w in sorted(ident):
            sock.send_multipart([ident[w], b"", payload])

    def hello(w, p):
        if p != str(w).encode():
            raise Failure(f"bad hello from worker rank {w}: {p[:32]!r}")

    gather("hello", hello)
    scatter(job.flat_params().numpy().tobytes())
    for it in range(a.iterations):
        start = time.time_ns()
        grads = gather(f"gradient of iteration {it}",
                       lambda w, p: as_tensor(p, job.gradient_bytes, f"gradient from worker rank {w}"))
        job.server_step([grads[w] for w in sorted(grads)])
        scatter(job.flat_params().numpy().tobytes())
        end = time.time_ns()
        log_line(log, {"rank": 0, "iteration": it, "start_ns": start, "end_ns": end})
    gather("done", lambda w, p: p)
    scatter(b"bye")


def work(sock, job, a, rank, log):
    def reply(what):
        frames = recv(sock, f"{what} from the server", a.timeout)
        if len(frames) != 1:
            raise Failure(f"{what}: {len(frames)} frames from the server, expected 1")
        return frames[0]

    sock.send(str(rank).encode())
    flat = as_tensor(reply("initial parameters"), job.parameter_bytes, "initial parameters")
    for it in range(a.iterations):
        x, y = job.next_batch()
        start = time.time_ns()
        loss, grad = job.worker_step(flat, x, y)
        sock.send(grad.numpy().tobytes())
        flat = as_tensor(reply(f"parameters of iteration {it}"), job.parameter_bytes, f"parameters of iteration {it}")
        end = time.time_ns()
        log_line(log, {"rank": rank, "iteration": it, "start_ns": start, "end_ns": end, "loss": loss})
    sock.send(b"done")
    if reply("bye") != b"bye":
        raise Failure("no bye from the server")


def main():
    a, rank, world = options(__doc__, lambda ap: ap.add_argument(
        "--port-offset", type=int, default=0,
        help="use MASTER_PORT + this (default 0); tensorwire's capture calls connections on MASTER_PORT the store"))
    job = Job(a, rank)
    endpoint = f"tcp://127.0.0.1:{int(os.environ['MASTER_PORT']) + a.port_offset}"
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER if rank == 0 else zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(a.timeout * 1000))
    sock.setsockopt(zmq.SNDTIMEO, int(a.timeout * 1000))
    try:
        with open(a.log, "w") as log:
            log_line(log, job.header(rank, world, a.model, "zeromq"))
            if rank == 0:
                sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a send to a gone worker is an error, not a drop
                sock.bind(endpoint)
                serve(sock, job, a, world, log)
                # Let the byes go out (bounded), then close.
                sock.setsockopt(zmq.LINGER, int(min(a.timeout, 5) * 1000))
            else:
                sock.setsockopt(zmq.IDENTITY, f"worker-{rank}".encode())
                sock.connect(endpoint)
                work(sock, job, a, rank, log)
    except (Failure, zmq.ZMQError) as e:
        sock.close(linger=0)
        ctx.term()
        fail(SCRIPT, rank, f"{endpoint}: {e}")
    sock.close()
    ctx.term()


if __name__ == "__main__":
    main()
