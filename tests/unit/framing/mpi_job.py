from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD; r = c.Get_rank()
sizes = [100, 1 << 20, 3000, 300000]
for n in sizes:
    if r == 0:
        c.Send(np.full(n, 7, dtype=np.uint8), dest=1, tag=5)
    else:
        b = np.empty(n, dtype=np.uint8); c.Recv(b, source=0, tag=5)
c.Barrier()
