"""One rank of the "atp" backend checks (test_distributed_backend.py runs it under torchrun).

Every collective is compared with what Gloo gives for the same tensors in the same process:
ATP's float32 SUM bit for bit (the values are multiples of 2^-10, so both sums are exact),
AVG against SUM / world size; everything else goes to Gloo and must still work.
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import atp.distributed

MODE = sys.argv[1] if len(sys.argv) > 1 else "collectives"


def values(rank, n=10_000):
    g = torch.Generator().manual_seed(1234 + rank)
    return (torch.randint(-1024, 1025, (n,), generator=g).float() / 1024)


def collectives(rank, size, gloo):
    report = {}
    t = values(rank)
    expected = t.clone()
    gloo.allreduce([expected]).wait()
    dist.all_reduce(t)  # through ATP
    report["sum_exact"] = bool(torch.equal(t, expected))
    avg = values(rank)
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    report["avg_exact"] = bool(torch.equal(avg, expected / size))
    # Async, several in flight, and a strided view.
    tensors = [values(rank + 10 * i, 3000 + i) for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in tensors]
    for w in works:
        w.wait()
    ok = True
    for i, x in enumerate(tensors):
        e = values(rank + 10 * i, 3000 + i)
        gloo.allreduce([e]).wait()
        ok = ok and bool(torch.equal(x, e))
    report["async_exact"] = ok
    m = values(rank, 2000).view(40, 50).t()  # not contiguous
    me = m.clone()
    gloo.allreduce([me]).wait()
    dist.all_reduce(m)
    report["strided_exact"] = bool(torch.equal(m, me))
    # Gloo's part: ints, MAX, broadcast, all_gather, barrier.
    pg = dist.distributed_c10d._get_default_group()
    before = pg.gloo_allreduces
    i = torch.full((5,), rank + 1, dtype=torch.int64)
    dist.all_reduce(i)
    mx = torch.tensor([float(rank)])
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    report["int_sum"] = i.tolist()
    report["max"] = mx.item()
    report["gloo_allreduces"] = pg.gloo_allreduces - before
    b = torch.tensor([float(rank) + 7])
    dist.broadcast(b, src=0)
    report["broadcast"] = b.item()
    gathered = [torch.zeros(1) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([float(rank)]))
    report["all_gather"] = [g.item() for g in gathered]
    dist.barrier()
    report["atp_allreduces"] = pg.atp_allreduces
    report["job"] = pg.job
    return report


def exact_sum(gloo, tensor, average=False):
    """The exact sum of every rank's `tensor` (Gloo, in float64), rounded once to its dtype."""
    wide = tensor.double()
    gloo.allreduce([wide]).wait()
    if average:
        wide /= dist.get_world_size()
    return wide.to(tensor.dtype)


def reductions(rank, size, gloo):
    """Issue 51: half precision, coalesced tensors and reduce-scatter through ATP, each checked
    against the exact sum rounded once to the tensor's dtype."""
    report = {}
    pg = dist.distributed_c10d._get_default_group()
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).split(".")[1]
        for op, average in ((dist.ReduceOp.SUM, False), (dist.ReduceOp.AVG, True)):
            t = (values(rank, 5000) * 3.3).to(dtype)  # not exact in float16: rounding shows
            expected = exact_sum(gloo, t.clone(), average)
            dist.all_reduce(t, op=op)
            report[f"{name}_{'avg' if average else 'sum'}_exact"] = bool(torch.equal(t, expected))
    tensors = [values(rank + i, 700 + 13 * i).to(d) for i, d in
               enumerate((torch.float32, torch.float32, torch.float32))]
    expected = [exact_sum(gloo, x.clone()) for x in tensors]
    dist.all_reduce_coalesced(tensors)
    report["coalesced_exact"] = all(bool(torch.equal(x, e)) for x, e in zip(tensors, expected))
    shards = [values(rank * size + r, 1000) for r in range(size)]
    expected = [exact_sum(gloo, s.clone()) for s in shards]  # shard r: every rank's r-th
    mine = torch.zeros(1000)
    before = pg.worker_stats()
    dist.reduce_scatter(mine, shards)
    report["reduce_scatter_exact"] = bool(torch.equal(mine, expected[rank]))
    whole = values(rank, 1000 * size).to(torch.bfloat16)
    part = torch.zeros(1000, dtype=torch.bfloat16)
    dist._reduce_scatter_base(part, whole, op=dist.ReduceOp.AVG)
    report["reduce_scatter_base_exact"] = bool(
        torch.equal(part, exact_sum(gloo, whole.clone(), True)[rank * 1000:(rank + 1) * 1000]))
    flat = values(rank, 1000 * size)  # float32 on the CPU: summed from `flat`, no copy
    flat_before = flat.clone()
    piece = torch.zeros(1000)
    dist._reduce_scatter_base(piece, flat)
    report["reduce_scatter_base_float32_exact"] = bool(
        torch.equal(piece, exact_sum(gloo, flat.clone())[rank * 1000:(rank + 1) * 1000])
        and torch.equal(flat, flat_before))  # the input left as it was
    after = pg.worker_stats()
    report["reduce_scatter_results"] = after["results"] - before["results"]
    report["reduce_scatter_done_copies"] = after["done_copies"] - before["done_copies"]
    for _ in range(3):  # an int64 SUM ATP cannot carry: Gloo's, said once
        dist.all_reduce(torch.ones(4, dtype=torch.int64))
    report["traffic"] = pg.traffic()
    return report


def train(rank, group, hook, steps=8):
    """Losses of a small model trained by DDP over `group` with communication hook `hook`."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    hooks = {"fp16_compress_hook": default_hooks.fp16_compress_hook,
             "bf16_compress": atp.distributed.bfloat16_compress_hook}
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.001)
    if hook is not None:
        ddp.register_comm_hook(group, hooks[hook])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(50 + rank)
    x, y = torch.randn(32, 16, generator=g), torch.randn(32, 4, generator=g)  # one batch: it fits
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def ddp_compress(rank, size, gloo):
    """Issue 51: DDP with fp16_compress_hook and bf16 compression (bf16_compress_hook's steps)
    trains through ATP; its losses against Gloo's (fp16: the same hook on Gloo; bf16, which this
    torch's Gloo cannot sum: Gloo without compression)."""
    pg = dist.distributed_c10d._get_default_group()
    return {"atp_fp16": train(rank, pg, "fp16_compress_hook"),
            "gloo_fp16": train(rank, gloo, "fp16_compress_hook"),
            "atp_bf16": train(rank, pg, "bf16_compress"),
            "gloo_fp32": train(rank, gloo, None),
            "traffic": pg.traffic()}


def failure(rank, size, gloo):
    """Rank 1 skips an allreduce: rank 0's cannot finish and must fail with ATP's reason."""
    t = values(rank)
    if rank == 0:
        try:
            dist.all_reduce(t)
            return {"raised": None}
        except RuntimeError as e:
            return {"raised": str(e)}
    return {"raised": "skipped"}


def hold(rank, size, gloo):
    """Joins, says so, and waits to be killed (the lease test)."""
    open(os.path.join(os.environ["ATP_CHECK_DIR"], f"ready{rank}"), "w").close()
    time.sleep(600)
    return {}


def loop(rank, size, gloo):
    """Allreduces for ATP_CHECK_SECONDS, each checked against Gloo (restarts happen meanwhile)."""
    deadline = time.monotonic() + float(os.environ.get("ATP_CHECK_SECONDS", "6"))
    count, exact = 0, True
    open(os.path.join(os.environ["ATP_CHECK_DIR"], f"ready{rank}"), "w").close()
    while True:
        go = torch.tensor([1 if time.monotonic() < deadline else 0])
        dist.all_reduce(go, op=dist.ReduceOp.MIN)  # Gloo: every rank stops at the same step
        if go.item() == 0:
            break
        t = values(rank + count, 20_000)
        e = t.clone()
        gloo.allreduce([e]).wait()
        dist.all_reduce(t)
        exact = exact and bool(torch.equal(t, e))
        count += 1
        time.sleep(0.05)
    return {"allreduces": count, "exact": exact,
            "job": dist.distributed_c10d._get_default_group().job}


def main():
    dist.init_process_group("atp")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("check/", dist.distributed_c10d._get_default_store()),
                                 rank, size)
    modes = {"collectives": collectives, "reductions": reductions, "ddp_compress": ddp_compress,
             "failure": failure,
             "hold": hold, "loop": loop}
    report = modes[MODE](rank, size, gloo)
    report["rank"] = rank
    with open(os.path.join(os.environ["ATP_CHECK_DIR"], f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    if MODE != "failure":
        dist.barrier()
    pg = dist.distributed_c10d._get_default_group()
    dist.destroy_process_group()
    if MODE == "reductions":  # the counters outlive the group's leaving the job
        pg.shutdown()
        with open(os.path.join(os.environ["ATP_CHECK_DIR"], f"rank{rank}-closed.json"), "w") as f:
            json.dump(pg.worker_stats(), f)
    # The checking Gloo group is torch's own: freed holding the GIL, torch 1.13 can deadlock
    # joining its threads (docs/pytorch.md). The ATP group was freed above, without the GIL.
    os._exit(0)


if __name__ == "__main__":
    main()
