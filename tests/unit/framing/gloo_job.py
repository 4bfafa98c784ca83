import os, sys, torch, torch.distributed as dist
rank = int(sys.argv[1])
os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = sys.argv[2]
dist.init_process_group("gloo", rank=rank, world_size=2)
t = torch.ones(4108)  # 16,432 bytes
for _ in range(2):
    dist.all_reduce(t)
if rank == 0:
    dist.send(torch.arange(10, dtype=torch.float32), 1)
else:
    x = torch.zeros(10); dist.recv(x, 0)
dist.barrier()
dist.destroy_process_group()
