"""ATP: in-network gradient aggregation for multi-tenant training (worker library).

    import atp, numpy as np
    comm = atp.Communicator("cluster.toml", job=1, rank=0)
    grad = np.random.rand(1_000_000).astype(np.float32)
    comm.allreduce(grad)                  # in place: the sum over the job's workers
    work = comm.allreduce_async(grad)     # several may be in flight
    work.wait()

Buffers are float32 and C-contiguous (numpy arrays, or CPU torch tensors through atp.torch);
they are summed where they lie, without copies. Every result is exact: the sum of the
workers' values quantized with the job's scale (cluster file), or their float32 sum when a
value cannot be carried as an integer. See docs/pytorch.md.
"""
from . import launch
from ._atp import Communicator, Work

__all__ = ["Communicator", "Work", "launch"]
