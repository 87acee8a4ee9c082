"""PyTorch on ATP: a DDP communication hook and an allreduce for CPU tensors.

    import atp.torch
    dist.init_process_group("gloo", ...)                       # any process group
    comm = atp.torch.init("cluster.toml", job=1, rank=rank)
    model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(atp.torch.HookState(comm), atp.torch.allreduce_hook)

DDP still needs a process group for its own bookkeeping (broadcasting the initial parameters);
gradient buckets, the traffic that matters, go through ATP instead.
"""
import queue
import threading

import torch

from ._atp import Communicator

__all__ = ["HookState", "allreduce_hook", "allreduce", "init", "communicator"]

_default = None


def init(cluster_file, job, rank, run=None):
    """Opens the process's default communicator, used by allreduce() without `comm`.

    run: None lets the job's first PS hand this launch a fresh run id (see atp.Communicator).
    """
    global _default
    _default = Communicator(cluster_file, job, rank, run)
    return _default


def communicator():
    if _default is None:
        raise RuntimeError("atp.torch: call atp.torch.init(cluster_file, job, rank) first")
    return _default


def _float32_view(tensor):
    """The tensor's memory as a numpy array, shared, not copied."""
    if tensor.device.type != "cpu":
        raise ValueError(f"atp.torch: tensors must be on the CPU, not {tensor.device}")
    if tensor.dtype != torch.float32:
        raise TypeError(f"atp.torch: tensors must be float32, not {tensor.dtype}")
    if not tensor.is_contiguous():
        raise ValueError("atp.torch: tensors must be contiguous")
    return tensor.detach().numpy()


def allreduce(tensor, op="sum", comm=None):
    """Sums (op="sum") or averages (op="mean") a CPU float32 tensor over the job, in place.

    Returns the tensor.
    """
    if op not in ("sum", "mean"):
        raise ValueError(f"atp.torch: op must be 'sum' or 'mean', not {op!r}")
    comm = comm or communicator()
    comm.allreduce(_float32_view(tensor))
    if op == "mean":
        tensor.div_(comm.config["workers"])
    return tensor


class HookState:
    """State of allreduce_hook: the communicator, and a thread completing futures.

    The hook starts each bucket's allreduce and returns at once, so backward computation
    overlaps communication; this thread waits for each allreduce in order and completes its
    future with the averaged bucket.
    """

    def __init__(self, comm):
        self.comm = comm
        self.workers = comm.config["workers"]
        self._pending = queue.Queue()
        self._thread = threading.Thread(target=self._complete, name="atp-hook", daemon=True)
        self._thread.start()

    def _complete(self):
        while True:
            work, bucket, future = self._pending.get()
            try:
                work.wait()
                bucket.div_(self.workers)
            except Exception as error:  # the engine's error reaches the training loop
                future.set_exception(error)
            else:
                future.set_result(bucket)
            # Hold no bucket between iterations: its memory belongs to DDP.
            del work, bucket, future

    def submit(self, bucket):
        future = torch.futures.Future()
        work = self.comm.allreduce_async(_float32_view(bucket))
        self._pending.put((work, bucket, future))
        return future


def allreduce_hook(state, bucket):
    """DDP communication hook: averages the gradient bucket over the job through ATP."""
    return state.submit(bucket.buffer())
