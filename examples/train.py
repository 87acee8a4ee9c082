#!/usr/bin/python3
"""Train a small MLP on scikit-learn's digits through ATP, and the same run on Gloo.

Two jobs (tenants) of four workers each train at the same time through one `atp switch`: each
worker is a process running PyTorch DistributedDataParallel, whose gradient buckets are averaged
by ATP through a DDP comm hook (atp.torch.allreduce_hook) from a cluster file that lists the
jobs. The torch.distributed backend needs neither (examples/ddp_train.py under torchrun,
examples/torchrun_jobs.py). Then the same jobs, seeds and data run with DDP's own Gloo
allreduce. The script prints both loss curves, their largest difference and the iterations per
second of each, and exits non-zero if the curves differ by more than --tolerance.

    PYTHONPATH=build/python /usr/bin/python3 examples/train.py [--jobs 2 --workers 4 --epochs 4]
"""
import argparse
import gc
import json
import queue
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import atp
import atp.launch
import atp.torch
import ddp_train  # the model, data and loop, shared with the torchrun example


def worker(backend, job, rank, args, cluster_file, port, results):
    """One DDP worker: trains on its shard of every batch, reports losses from rank 0."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.workers)
    seed = args.seed + job
    train_data, (test_x, test_y) = ddp_train.dataset(seed)
    net = torch.nn.parallel.DistributedDataParallel(ddp_train.model(args.hidden, seed))
    if backend == "atp":
        comm = atp.torch.init(cluster_file, job, rank)
        net.register_comm_hook(atp.torch.HookState(comm), atp.torch.allreduce_hook)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    losses, rate = ddp_train.train(net, optimizer, train_data, args, rank, args.workers)
    with torch.no_grad():
        accuracy = (net(test_x).argmax(1) == test_y).float().mean().item()
    if rank == 0:
        results.put({"backend": backend, "job": job, "losses": losses,
                     "iterations_per_s": rate, "test_accuracy": accuracy})
    # The model goes before the process group. Torch 1.13 destroys DDP's reducer holding the GIL;
    # were it the group's last owner, the group would join its worker threads, one of which may
    # still be freeing a tensor and wait for the GIL: a deadlock (seen under CPU load).
    del net
    gc.collect()
    dist.destroy_process_group()


def reports_of(results, procs, count, timeout, backend):
    """`count` reports from `results`; a worker that died first (its job's report would never
    come) or the timeout ends the wait at once, with the reason."""
    deadline = time.monotonic() + timeout
    for _ in range(count):
        while True:
            try:
                yield results.get(timeout=0.5)
                break
            except queue.Empty:
                failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if failed:
                    raise RuntimeError(f"{backend}: a worker exited with {failed[0]}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{backend}: no report within {timeout:.0f} s")


def run(backend, args, cluster_file):
    """Every job's workers at once; returns {job: rank 0's report}."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = []
    for job in range(1, args.jobs + 1):
        port = atp.launch.free_tcp_port()
        for rank in range(args.workers):
            p = ctx.Process(target=worker, args=(backend, job, rank, args, cluster_file, port, results))
            p.start()
            procs.append(p)
    reports = {}
    try:
        for r in reports_of(results, procs, args.jobs, args.timeout, backend):
            reports[r["job"]] = r
    except BaseException:
        for p in procs:
            p.terminate()
        raise
    for p in procs:
        p.join(timeout=args.timeout)
        if p.exitcode != 0:
            raise RuntimeError(f"{backend}: a worker exited with {p.exitcode}")
    return reports


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="concurrent jobs (tenants)")
    parser.add_argument("--workers", type=int, default=4, help="workers per job")
    ddp_train.add_training_arguments(parser)
    parser.add_argument("--aggregators", type=int, default=1024, help="the switch's pool")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest loss difference between ATP and Gloo accepted")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--json", metavar="FILE", help="also write the reports here")
    args = parser.parse_args()
    if args.jobs < 1 or args.workers < 1 or args.epochs < 1 or args.batch < args.workers:
        parser.error("jobs, workers and epochs must be positive, and batch at least workers")

    # Gradients of this model stay well below 8: max_gradient picks the scale (values past it
    # are summed as floats, still exactly).
    with atp.launch.LocalCluster(jobs=args.jobs, workers=args.workers, max_gradient=8.0,
                                 aggregators=args.aggregators) as cluster:
        on_atp = run("atp", args, cluster.config)
    on_gloo = run("gloo", args, None)

    worst = 0.0
    for job in range(1, args.jobs + 1):
        a, g = on_atp[job], on_gloo[job]
        diff = max(abs(p - q) for p, q in zip(a["losses"], g["losses"]))
        worst = max(worst, diff)
        print(f"job {job}: loss by step (ATP | Gloo)")
        n = len(a["losses"])
        for i in sorted(set(list(range(0, n, max(1, n // 8))) + [n - 1])):
            print(f"  step {i:4d}  {a['losses'][i]:.6f} | {g['losses'][i]:.6f}")
        print(f"  largest difference {diff:.2e}; test accuracy {a['test_accuracy']:.3f} | "
              f"{g['test_accuracy']:.3f}; iterations/s {a['iterations_per_s']:.1f} | "
              f"{g['iterations_per_s']:.1f} (ratio {a['iterations_per_s'] / g['iterations_per_s']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"atp": on_atp, "gloo": on_gloo, "largest_difference": worst}, f)
    ok = worst <= args.tolerance
    print(f"ATP and Gloo loss curves {'agree' if ok else 'DISAGREE'}: largest difference "
          f"{worst:.2e} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
