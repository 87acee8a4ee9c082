#!/usr/bin/python3
"""Coalesced allreduce on the "atp" backend: `all_reduce_coalesced` (each tensor its own ATP sum,
all in flight at once) against one ATP sum of the tensors laid end to end (concatenated, summed,
split back: the other way the backend could carry it).

Usage: bench/coalesced_bench.py [--tensors 16] [--floats 65536] [--rounds 10]
(runs itself under torchrun with 2 ranks on a loopback fabric; PYTHONPATH=build/python)

Both ways run in the same processes, alternating round by round, so the ratio is measured
under the same load; every round's sums must equal the first round's, bit for bit (both ways
are exact).
"""
import argparse
import json
import os
import subprocess
import sys
import time


def rank_main(args):
    import torch
    import torch.distributed as dist
    import atp.distributed  # noqa: F401
    dist.init_process_group("atp")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(rank)
    base = [(torch.randint(-512, 513, (args.floats,), generator=g).float() / 512) for _ in range(args.tensors)]
    times = {"coalesced": [], "concatenated": []}
    first = None
    for _ in range(args.rounds):
        for way in ("coalesced", "concatenated"):
            tensors = [t.clone() for t in base]
            dist.barrier()
            start = time.perf_counter()
            if way == "coalesced":
                dist.all_reduce_coalesced(tensors)
            else:
                flat = torch.cat(tensors)
                dist.all_reduce(flat)
                for t, part in zip(tensors, flat.split([t.numel() for t in tensors])):
                    t.copy_(part)
            times[way].append(time.perf_counter() - start)
            first = first or tensors
            if not all(torch.equal(a, b) for a, b in zip(first, tensors)):
                raise SystemExit(f"rank {rank}: {way}'s sums differ from the first round's")
    if rank == 0:
        print(json.dumps(times), flush=True)
    dist.barrier()
    atp.distributed.destroy_process_group()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=16)
    parser.add_argument("--floats", type=int, default=65536)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        return rank_main(args)
    import atp.launch
    command = atp.launch.torchrun_command(os.path.abspath(__file__), 2,
                                          ["--rank-main", "--tensors", str(args.tensors), "--floats",
                                           str(args.floats), "--rounds", str(args.rounds)])
    out = subprocess.run(command, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, ATP_CONTROLLER="", OMP_NUM_THREADS="1"))
    line = next((l for l in out.stdout.splitlines() if '"coalesced"' in l), None)
    if line is None:
        sys.exit(out.stdout[-3000:] + out.stderr[-3000:])
    times = json.loads(line.split(":", 1)[1] if line.startswith("[") else line)
    ratios = sorted(c / e for c, e in zip(times["coalesced"], times["concatenated"]))
    median = lambda v: sorted(v)[len(v) // 2]
    print(f"{args.tensors} tensors x {args.floats} floats, {args.rounds} rounds: coalesced median "
          f"{median(times['coalesced']) * 1e3:.1f} ms, concatenated {median(times['concatenated']) * 1e3:.1f} ms; "
          f"coalesced / concatenated per round: median {median(ratios):.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
