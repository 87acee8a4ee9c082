"""Helper of test_ddp_hook_gives_the_exact_average_of_the_workers_gradients.

Two processes run one backward pass of the same model through DDP with atp.torch's hook, on
different data. Each also computes its local gradients without DDP; rank 0 gathers them and
checks DDP's averaged gradients against the exact average: (sum of quantized values) / scale,
then divided by the number of workers, both in float32.

    ddp_hook_check.py CLUSTER_FILE OUT_JSON
"""
import faulthandler
import gc
import json
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import atp
import atp.torch

HANG_SECONDS = 90


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))


def worker(rank, config, port, out):
    # A hang prints every thread's stack and ends the process, instead of waiting for the test's timeout.
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(100 + rank)
    x, y = torch.randn(16, 32), torch.randn(16, 8)

    local = build_model()
    torch.nn.functional.mse_loss(local(x), y).backward()

    comm = atp.torch.init(config, job=1, rank=rank)
    state = atp.torch.HookState(comm)
    buckets = []

    def counting_hook(state, bucket):
        buckets.append(bucket.index())
        return atp.torch.allreduce_hook(state, bucket)

    ddp = torch.nn.parallel.DistributedDataParallel(build_model(), bucket_cap_mb=0.01)
    ddp.register_comm_hook(state, counting_hook)
    torch.nn.functional.mse_loss(ddp(x), y).backward()

    gathered = {}
    for name, p in local.named_parameters():
        parts = [torch.zeros_like(p.grad) for _ in range(2)]
        dist.all_gather(parts, p.grad)
        gathered[name] = [t.numpy() for t in parts]
    if rank == 0:
        scale = np.float32(comm.config["scale"])
        report = {"buckets": len(buckets), "parameters": {}}
        for name, p in ddp.module.named_parameters():
            total = sum(np.rint(g * scale).astype(np.int64) for g in gathered[name])
            expected = (total.astype(np.float32) / scale) / np.float32(2)
            got = p.grad.numpy()
            report["parameters"][name] = {
                "equal": bool(np.array_equal(got, expected)),
                "largest_difference": float(np.max(np.abs(got - expected)))}
        with open(out, "w") as f:
            json.dump(report, f)
    # DDP goes before the process group: see examples/train.py.
    del ddp
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(sys.argv[1], port, sys.argv[2]), nprocs=2, join=True)
