#!/usr/bin/python3
"""Train a small MLP on scikit-learn's digits with plain PyTorch DDP, under torchrun.

    torchrun --standalone --nproc_per_node 4 --redirects 1 --tee 1 \\
        examples/ddp_train.py --backend atp --json report.json

The script is what any DDP script is: `init_process_group(backend)`, `DistributedDataParallel`,
a training loop. With `--backend atp` (import atp.distributed registers it) DDP's gradient
buckets are summed by ATP; with `--backend gloo` by Gloo's ring. Rank 0 prints the losses and
iterations/s and writes them to --json. `--sharded` trains FSDP's way instead of DDP's
(examples/sharded_optimizer.py: reduce-scatter, shard update, all-gather). examples/torchrun_jobs.py runs two such jobs at once
on one fabric and compares them with Gloo. (Debian's torchrun, torch 1.13 on Python 3.11,
needs `--redirects 1 --tee 1`: without them it fails with "'NoneType' object has no attribute
'get'".)
"""
import argparse
import gc
import json
import time

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits

import atp.distributed  # noqa: F401  (registers the "atp" backend)
from sharded_optimizer import ShardedOptimizer


def dataset(seed):
    """Digits (8x8 images, 10 classes), shuffled once by `seed`: 1500 to train, the rest to test."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = x[order], y[order]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def model(hidden, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 10))


def train(net, optimizer, data, args, rank, world):
    """SGD over `data` for args.epochs; each rank takes its slice of every global batch, so the
    average of the ranks' gradients is the whole batch's. Returns (losses, iterations/s)."""
    x, y = data
    losses = []
    steps_per_epoch = len(x) // args.batch
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.epochs):
        for step in range(steps_per_epoch):
            batch = slice(step * args.batch, (step + 1) * args.batch)
            xb, yb = x[batch][rank::world], y[batch][rank::world]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(xb), yb)
            loss.backward()
            optimizer.step()
            total = loss.detach().clone()
            dist.all_reduce(total)  # for the report only: the batch's mean loss
            losses.append(total.item() / world)
    return losses, len(losses) / (time.perf_counter() - start)


def compression_hook(gradients, backend):
    """DDP's communication hook for --gradients: float16 by torch's fp16_compress_hook, bfloat16
    by atp.distributed's bfloat16_compress_hook (torch 1.13 registers its own only with NCCL). This
    torch's Gloo has no bfloat16 sum: Gloo then sums float32, the uncompressed baseline."""
    if gradients == "float16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        return default_hooks.fp16_compress_hook
    if gradients == "bfloat16" and backend != "gloo":
        return atp.distributed.bfloat16_compress_hook
    return None


def add_training_arguments(parser):
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64, help="global batch size")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gradients", choices=["float32", "float16", "bfloat16"], default="float32",
                        help="the dtype DDP's buckets are summed in (a compression hook)")
    parser.add_argument("--sharded", action="store_true",
                        help="instead of DDP, FSDP's communication (examples/sharded_optimizer.py): "
                        "gradients reduce-scattered, each rank updating its shard, shards all-gathered")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="atp", help="atp or gloo")
    parser.add_argument("--json", metavar="FILE", help="rank 0 writes its report here")
    add_training_arguments(parser)
    args = parser.parse_args()
    if args.sharded and args.gradients != "float32":
        parser.error("--sharded sums float32 gradients (--gradients is DDP's compression hook)")
    torch.set_num_threads(1)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    train_data, (test_x, test_y) = dataset(args.seed)
    if args.sharded:  # FSDP's communication: reduce-scatter, shard update, all-gather
        net = model(args.hidden, args.seed)
        optimizer = ShardedOptimizer(net, args.lr, 0.9, args.backend)
    else:
        net = torch.nn.parallel.DistributedDataParallel(model(args.hidden, args.seed))
        hook = compression_hook(args.gradients, args.backend)
        if hook is not None:
            net.register_comm_hook(None, hook)
        optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    losses, rate = train(net, optimizer, train_data, args, rank, world)
    with torch.no_grad():
        accuracy = (net(test_x).argmax(1) == test_y).float().mean().item()
    group = dist.distributed_c10d._get_default_group()
    job = getattr(group, "job", None)
    # Per call kind and dtype, the calls and bytes through ATP and through Gloo ("atp" only).
    traffic = group.traffic() if hasattr(group, "traffic") else None
    if rank == 0:
        kind = "sharded" if args.sharded else f"{args.gradients} gradients"
        print(f"{args.backend} ({kind}): {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"test accuracy {accuracy:.3f}, {rate:.1f} iterations/s" +
              (f" (ATP job {job})" if job is not None else ""))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"backend": args.backend, "losses": losses, "iterations_per_s": rate,
                           "test_accuracy": accuracy, "job": job, "world": world,
                           "gradients": args.gradients, "sharded": args.sharded,
                           "traffic": traffic}, f)
    # The model goes before the process group: torch 1.13 destroys DDP's reducer holding the
    # GIL, and the group's threads may need it to finish (examples/train.py has the details).
    del net
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
