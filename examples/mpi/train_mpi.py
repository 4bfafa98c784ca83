#!/usr/bin/python3
"""One rank of a data-parallel job over MPI (mpi4py, Debian's OpenMPI), on CPU
with synthetic data: every rank holds the whole model (examples/ddp/train.py's
models), computes the gradient on its own batch, and all-reduces it in buckets
with MPI Allreduce on the gradients' numpy views, as DDP does over Gloo.

Started by mpirun, which sets OMPI_COMM_WORLD_RANK and friends; on loopback:
  mpirun --allow-run-as-root --oversubscribe -np 3 --mca btl tcp,self \
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      /usr/bin/python3 examples/mpi/train_mpi.py --log-dir DIR

Buckets are filled in reverse parameter order (the order backward produces
gradients) up to --bucket-kb each, one Allreduce per bucket, in place, then
divided by the number of ranks. --log-dir DIR gets rank-R.jsonl: a first line
{"rank", "world_size", "model", "transport", "gradient_bytes", "buckets"}
(bytes per bucket), then one line per iteration {"rank", "iteration",
"start_ns", "end_ns", "loss"} (CLOCK_REALTIME). --annotate marks iterations,
forward, backward and optimizer spans and one "allreduce" span per bucket for
tensorwire capture.
"""
import argparse
import contextlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from mpi4py import MPI

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ddp"))
from train import build  # noqa: E402  (examples/ddp/train.py)


def buckets_of(params, limit_bytes):
    """Lists of parameters, last parameter first, each list at most limit_bytes
    (a larger parameter gets a bucket of its own)."""
    out, cur, size = [], [], 0
    for p in reversed(params):
        b = p.numel() * 4
        if cur and size + b > limit_bytes:
            out.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += b
    if cur:
        out.append(cur)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp", choices=["mlp", "resnet18", "transformer"])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--bucket-kb", type=int, default=512, help="largest bucket, KiB (default 512)")
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--annotate", action="store_true",
                    help="mark iterations, compute spans and each bucket's all-reduce for tensorwire capture")
    a = ap.parse_args()
    twa = None
    if a.annotate:
        import tensorwire.annotate as twa  # on PYTHONPATH under tensorwire capture

    def span(kind, *args):
        return getattr(twa, kind)(*args) if twa else contextlib.nullcontext()

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)  # deterministic, and two cores go round
    torch.manual_seed(0)  # the same initial weights on every rank
    model, shape, classes = build(a.model)
    params = [p for p in model.parameters() if p.requires_grad]
    assert all(p.dtype == torch.float32 for p in params)
    buckets = buckets_of(params, a.bucket_kb * 1024)
    # One contiguous float32 buffer per bucket: the Allreduce works on its numpy view.
    flat = [np.zeros(sum(p.numel() for p in b), dtype=np.float32) for b in buckets]
    opt = torch.optim.SGD(params, lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    os.makedirs(a.log_dir, exist_ok=True)
    with open(os.path.join(a.log_dir, f"rank-{rank}.jsonl"), "w") as log:
        log.write(json.dumps({"rank": rank, "world_size": world, "model": a.model, "transport": "mpi",
                              "gradient_bytes": sum(p.numel() * 4 for p in params),
                              "buckets": [int(f.nbytes) for f in flat]}) + "\n")
        for it in range(a.iterations):
            x = torch.randn((a.batch,) + shape, generator=gen)
            y = torch.randint(0, classes, (a.batch,), generator=gen)
            start = time.time_ns()
            with span("iteration", it):
                opt.zero_grad(set_to_none=True)
                with span("forward"):
                    loss = loss_fn(model(x), y)
                with span("backward"):
                    loss.backward()
                for i, (b, buf) in enumerate(zip(buckets, flat)):
                    at = 0
                    for p in b:
                        g = p.grad if p.grad is not None else torch.zeros_like(p)
                        buf[at:at + p.numel()] = g.reshape(-1).numpy()
                        at += p.numel()
                    with span("span", "allreduce", i):
                        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
                    buf /= world
                    at = 0
                    for p in b:
                        p.grad = torch.from_numpy(buf[at:at + p.numel()].copy()).view_as(p)
                        at += p.numel()
                with span("optimizer"):
                    opt.step()
            end = time.time_ns()
            log.write(json.dumps({"rank": rank, "iteration": it, "start_ns": start, "end_ns": end, "loss": loss.item()}) + "\n")
            log.flush()
    comm.Barrier()


if __name__ == "__main__":
    main()
