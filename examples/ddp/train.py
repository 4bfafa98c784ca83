#!/usr/bin/python3
"""One rank of a PyTorch DDP job over Gloo on CPU, on synthetic data.

Started like torchrun would (Debian's torch 1.13 torchrun is broken on Python
3.11, so examples/ddp/launch.py starts the ranks): RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT in the environment. Writes one JSON line per iteration to
--log (rank, iteration, start_ns, end_ns on CLOCK_REALTIME, loss), and a first
line with the model's gradient size, so tests can check the traffic.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def build(name):
    """The model, one input sample's shape, and the number of classes."""
    if name == "mlp":
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)), (256,), 10
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10), (3, 32, 32), 10
    if name == "transformer":
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
                self.body = nn.TransformerEncoder(layer, num_layers=2)
                self.head = nn.Linear(128, 10)

            def forward(self, x):
                return self.head(self.body(x).mean(dim=1))
        return Encoder(), (16, 128), 10
    raise SystemExit(f"unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp", choices=["mlp", "resnet18", "transformer"])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--bucket-mb", type=float, default=25, help="DDP's bucket_cap_mb (the fusion hint's what-if, for real)")
    ap.add_argument("--log", required=True)
    ap.add_argument("--annotate", action="store_true",
                    help="mark iterations, compute spans and gradient buckets for tensorwire capture (python/tensorwire)")
    ap.add_argument("--profile", help="write PyTorch's profiler trace (Chrome JSON) of rank 0 here")
    a = ap.parse_args()
    twa = None
    if a.annotate:
        import tensorwire.annotate as twa  # on PYTHONPATH under tensorwire capture

    torch.set_num_threads(1)  # deterministic, and two cores go round
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts them too)
    model, shape, classes = build(a.model)
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb)
    if twa:
        twa.ddp_buckets(ddp, model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    prof = None
    if a.profile and rank == 0:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU])
    with open(a.log, "w") as log:
        log.write(json.dumps({"rank": rank, "world_size": world, "model": a.model, "gradient_bytes": grad_bytes}) + "\n")
        if prof:
            # torch 1.13's profiler writes timestamps relative to its start: note when that was.
            log.write(json.dumps({"rank": rank, "profile": a.profile, "profile_start_ns": time.time_ns()}) + "\n")
            prof.__enter__()
        for it in range(a.iterations):
            x = torch.randn((a.batch,) + shape, generator=gen)
            y = torch.randint(0, classes, (a.batch,), generator=gen)
            start = time.time_ns()
            if twa:
                with twa.iteration(it):
                    opt.zero_grad()
                    with twa.forward():
                        loss = loss_fn(ddp(x), y)
                    with twa.backward():
                        loss.backward()
                    with twa.optimizer():
                        opt.step()
            else:
                opt.zero_grad()
                loss = loss_fn(ddp(x), y)
                loss.backward()  # DDP all-reduces the gradient buckets here
                opt.step()
            end = time.time_ns()
            log.write(json.dumps({"rank": rank, "iteration": it, "start_ns": start, "end_ns": end, "loss": loss.item()}) + "\n")
            log.flush()
    if prof:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.profile)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
