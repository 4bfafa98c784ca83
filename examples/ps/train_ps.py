#!/usr/bin/python3
"""One rank of a parameter-server job over torch.distributed point-to-point
(Gloo, dist.send/dist.recv on CPU; no DDP, no RPC), on synthetic data.

Started by examples/ddp/launch.py --script examples/ps/train_ps.py (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment). Rank 0 is the server:
it holds the model's parameters and an SGD optimizer. Ranks 1..N-1 are workers.
Each iteration the server sends the parameters (one flat float32 tensor) to
every worker; each worker computes the loss and gradient on its own batch and
sends the flat float32 gradient back; the server averages the gradients (in
rank order, so runs are deterministic) and takes an SGD step.

--log gets a first line {"rank", "world_size", "role", "model", "transport",
"gradient_bytes", "parameter_bytes"}, then one line per iteration {"rank",
"iteration", "start_ns", "end_ns"} (CLOCK_REALTIME), plus "loss" on workers.
A dead peer or no message within --timeout seconds ends the rank with one line
on stderr and exit status 1.

The model, data and update code is shared with train_zmq.py (same losses).
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ddp"))
from train import build  # noqa: E402  (examples/ddp/train.py)


def options(doc, more=None):
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--model", default="mlp", choices=["mlp", "resnet18", "transformer"])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--timeout", type=float, default=60, help="seconds any receive may wait (default 60)")
    ap.add_argument("--log", required=True)
    if more:
        more(ap)
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world < 2:
        raise SystemExit("a parameter-server job needs WORLD_SIZE >= 2 (a server and a worker)")
    return a, rank, world


class Job:
    """The model on one rank, flattened: parameters and gradients travel as one
    flat float32 tensor, in model.parameters() order."""

    def __init__(self, a, rank):
        torch.set_num_threads(1)  # deterministic, and two cores go round
        torch.manual_seed(0)  # the server's initial weights; workers overwrite theirs
        self.model, self.shape, self.classes = build(a.model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        assert all(p.dtype == torch.float32 for p in self.params)
        self.numel = sum(p.numel() for p in self.params)
        self.parameter_bytes = self.numel * 4
        self.gradient_bytes = self.numel * 4
        self.batch = a.batch
        self.opt = torch.optim.SGD(self.params, lr=a.lr)
        self.loss_fn = nn.CrossEntropyLoss()
        self.gen = torch.Generator().manual_seed(1000 + rank)  # each worker its own data

    def header(self, rank, world, model, transport):
        return {"rank": rank, "world_size": world, "role": "server" if rank == 0 else "worker", "model": model,
                "transport": transport, "gradient_bytes": self.gradient_bytes, "parameter_bytes": self.parameter_bytes}

    def flat_params(self):
        with torch.no_grad():
            return torch.cat([p.detach().reshape(-1) for p in self.params]).contiguous()

    def next_batch(self):
        x = torch.randn((self.batch,) + self.shape, generator=self.gen)
        y = torch.randint(0, self.classes, (self.batch,), generator=self.gen)
        return x, y

    def worker_step(self, flat, x, y):
        """Loads the flat parameters, returns (loss, flat gradient)."""
        with torch.no_grad():
            at = 0
            for p in self.params:
                p.copy_(flat[at:at + p.numel()].view_as(p))
                at += p.numel()
        self.model.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in self.params])
        return loss.item(), grad.contiguous()

    def server_step(self, grads):
        """Averages the workers' flat gradients (in the order given) and takes an SGD step."""
        total = grads[0].clone()
        for g in grads[1:]:
            total += g
        total /= len(grads)
        at = 0
        for p in self.params:
            p.grad = total[at:at + p.numel()].view_as(p).clone()
            at += p.numel()
        self.opt.step()


def log_line(log, d):
    log.write(json.dumps(d) + "\n")
    log.flush()


def fail(script, rank, what):
    """One line on stderr and exit 1, without running destructors that may
    wait on a dead peer."""
    first = (str(what).strip().splitlines() or [type(what).__name__])[0]
    print(f"{script}: rank {rank}: {first}", file=sys.stderr, flush=True)
    os._exit(1)


def main():
    a, rank, world = options(__doc__)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=a.timeout))
    except Exception as e:  # noqa: BLE001  (no store or peers within the timeout)
        fail("train_ps.py", rank, f"init_process_group: {e}")
    job = Job(a, rank)
    workers = range(1, world)
    doing = "starting"  # for the error line
    try:
        with open(a.log, "w") as log:
            log_line(log, job.header(rank, world, a.model, "gloo-p2p"))
            if rank == 0:
                bufs = [torch.empty(job.numel) for _ in workers]
                for it in range(a.iterations):
                    start = time.time_ns()
                    doing = f"iteration {it}: sending the parameters to and receiving the gradients from the workers"
                    flat = job.flat_params()
                    ops = [dist.isend(flat, dst=w) for w in workers]
                    ops += [dist.irecv(bufs[w - 1], src=w) for w in workers]
                    for op in ops:
                        op.wait()
                    job.server_step(bufs)
                    end = time.time_ns()
                    log_line(log, {"rank": rank, "iteration": it, "start_ns": start, "end_ns": end})
            else:
                flat = torch.empty(job.numel)
                for it in range(a.iterations):
                    x, y = job.next_batch()
                    start = time.time_ns()
                    doing = f"iteration {it}: receiving the parameters from the server"
                    dist.recv(flat, src=0)
                    loss, grad = job.worker_step(flat, x, y)
                    doing = f"iteration {it}: sending the gradient to the server"
                    dist.send(grad, dst=0)
                    end = time.time_ns()
                    log_line(log, {"rank": rank, "iteration": it, "start_ns": start, "end_ns": end, "loss": loss})
        doing = "final barrier"
        dist.barrier()
    except RuntimeError as e:  # Gloo: peer closed or reset, or a timeout
        fail("train_ps.py", rank, f"{doing}: {e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
