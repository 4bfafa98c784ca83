#!/usr/bin/python3
"""One stage of a pipeline-parallel job over torch.distributed point-to-point
(Gloo, dist.isend/dist.recv on CPU), GPipe-style, on synthetic data.

Started by examples/ddp/launch.py --script examples/pipeline/train_pipeline.py
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment): rank R is stage
R of WORLD_SIZE (2 to 4). An MLP of --width is cut into one block per stage; the
last stage also holds the head and the loss. Each iteration is split into
--micro-batches micro-batches of --micro-batch samples. Forward: stage 0 makes
each micro-batch's input, every stage sends its output activation to the next
one (tag = micro-batch). Backward, last micro-batch first: the last stage sends
the gradient of its input activation back, every stage sends its own input's
gradient to the one before (tag = 1000 + micro-batch). Then the flush: each
stage waits for its sends and takes an SGD step. So per iteration each pair of
neighbours carries micro-batches x (micro-batch x width x 4) bytes each way, and
nothing else talks (the Gloo pairs between other ranks stay idle).

--log gets a first line {"rank", "world_size", "role": "stage", "stage", "model",
"micro_batches", "activation_bytes"} (one micro-batch's activation or gradient),
then one line per iteration {"rank", "iteration", "start_ns", "end_ns"}
(CLOCK_REALTIME), plus "loss" on the last stage. --annotate marks iterations and
forward, backward and optimizer spans for tensorwire capture. A dead peer or no
message within --timeout seconds ends the rank with one line on stderr and exit
status 1.
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

BACKWARD_TAG = 1000


def options():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--micro-batch", type=int, default=8, help="samples per micro-batch")
    ap.add_argument("--width", type=int, default=512, help="features of every activation")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--timeout", type=float, default=60, help="seconds any receive may wait (default 60)")
    ap.add_argument("--log", required=True)
    ap.add_argument("--annotate", action="store_true",
                    help="mark iterations and compute spans for tensorwire capture (python/tensorwire)")
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if not 2 <= world <= 4:
        raise SystemExit("a pipeline job has 2 to 4 stages (WORLD_SIZE)")
    if a.micro_batches < 1 or a.micro_batch < 1 or a.width < 1:
        raise SystemExit("--micro-batches, --micro-batch and --width must be at least 1")
    return a, rank, world


class Stage:
    """This rank's block of the MLP (plus the head and loss on the last stage)."""

    def __init__(self, a, rank, world):
        torch.set_num_threads(1)  # deterministic, and two cores go round
        torch.manual_seed(rank)  # each stage its own block, the same every run
        self.first, self.last = rank == 0, rank == world - 1
        layers = [nn.Linear(a.width, a.width), nn.ReLU()]
        if self.last:
            layers.append(nn.Linear(a.width, 10))
        self.block = nn.Sequential(*layers)
        self.opt = torch.optim.SGD(self.block.parameters(), lr=a.lr)
        self.loss_fn = nn.CrossEntropyLoss()
        self.gen = torch.Generator().manual_seed(1000)  # stage 0's inputs, the last stage's labels
        self.shape = (a.micro_batch, a.width)


class Twa:
    """tensorwire.annotate's spans, or none."""

    def __init__(self, on):
        self.m = None
        if on:
            import tensorwire.annotate as m  # on PYTHONPATH under tensorwire capture
            self.m = m

    def __getattr__(self, name):
        import contextlib
        return getattr(self.m, name) if self.m else (lambda *args: contextlib.nullcontext())


def iteration(a, s, rank, twa):
    """One GPipe iteration: all forwards, all backwards, the flush. Returns the
    mean loss on the last stage, else None."""
    sends = []
    inputs, outputs, losses = [], [], []
    # Labels and inputs are drawn for every micro-batch on every stage, so every
    # stage's generator stays in step whatever its role.
    batches = [(torch.randn(s.shape, generator=s.gen), torch.randint(0, 10, (s.shape[0],), generator=s.gen))
               for _ in range(a.micro_batches)]
    with twa.forward():
        for m in range(a.micro_batches):
            if s.first:
                x = batches[m][0]
            else:
                x = torch.empty(s.shape)
                dist.recv(x, src=rank - 1, tag=m)
                x.requires_grad_(True)
            y = s.block(x)
            if s.last:
                loss = s.loss_fn(y, batches[m][1]) / a.micro_batches
                losses.append(loss)
                outputs.append(loss)
            else:
                sends.append(dist.isend(y.detach().contiguous(), dst=rank + 1, tag=m))
                outputs.append(y)
            inputs.append(x)
    with twa.backward():
        for m in reversed(range(a.micro_batches)):
            if s.last:
                outputs[m].backward()
            else:
                g = torch.empty(s.shape)
                dist.recv(g, src=rank + 1, tag=BACKWARD_TAG + m)
                outputs[m].backward(g)
            if not s.first:
                sends.append(dist.isend(inputs[m].grad.contiguous(), dst=rank - 1, tag=BACKWARD_TAG + m))
    with twa.optimizer():
        for w in sends:
            w.wait()
        s.opt.step()
        s.opt.zero_grad(set_to_none=True)
    return sum(x.item() for x in losses) if s.last else None


def main():
    a, rank, world = options()
    twa = Twa(a.annotate)
    s = Stage(a, rank, world)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=a.timeout))
    except Exception as e:  # noqa: BLE001  (a rendezvous that never completes)
        print(f"train_pipeline.py: rank {rank}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
              file=sys.stderr, flush=True)
        os._exit(1)
    with open(a.log, "w") as log:
        log.write(json.dumps({"rank": rank, "world_size": world, "role": "stage", "stage": rank, "model": "mlp-pipeline",
                              "micro_batches": a.micro_batches, "activation_bytes": s.shape[0] * s.shape[1] * 4}) + "\n")
        for it in range(a.iterations):
            start = time.time_ns()
            try:
                with twa.iteration(it):
                    loss = iteration(a, s, rank, twa)
            except RuntimeError as e:  # a dead peer or a receive past --timeout
                first = (str(e).strip().splitlines() or ["RuntimeError"])[0]
                print(f"train_pipeline.py: rank {rank}: iteration {it}: {first}", file=sys.stderr, flush=True)
                log.flush()
                os._exit(1)  # not destructors that may wait on the dead peer
            end = time.time_ns()
            line = {"rank": rank, "iteration": it, "start_ns": start, "end_ns": end}
            if loss is not None:
                line["loss"] = loss
            log.write(json.dumps(line) + "\n")
            log.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
