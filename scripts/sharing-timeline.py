#!/usr/bin/python3
"""Fig. 13b/13c in shape: each job's aggregations per 10 ms, in network and at its PS, as jobs
arrive and leave (issue 30, docs/sharing.md).

Usage: scripts/sharing-timeline.py [--out docs/figures] [--atp build/bin/atp] [--seed 21]
       scripts/sharing-timeline.py --pools [--seeds 21,22] [--out docs/figures]

3 jobs on the fabric of scripts/sharing-sweep.py (2 racks x 4 workers, 10/40 Gbit/s, window
64, K = 256) share a pool of 64 aggregators (a third of what static needs); each job runs 8
iterations of 4 MiB with 3 ms compute phases, and arrives 30 ms after the one before it, so
the first job is alone for a while, then shares, and the last is alone again at the end.
Variants: static slices, ATP's default (planned placement, absent jobs' homes lent to the
present ones), the same with every job kept to its own home (--keep-homes), the paper's hashed
lanes, and planned placement with --borrow-aggregators. Writes <out>/sharing-timeline.json (every run
with its series) and <out>/sharing-timeline.png, and prints each job's throughput.

--pools: the same arrivals on every pool of the sharing sweep (100-25 % of what static needs),
one PS per job and 8 shards, each seed; static, the default and --keep-homes. Prints atp /
static in mean job throughput and the lowest single job's ratio (a job's own throughput
against its own under static), and writes <out>/sharing-arrivals.json.
"""
import argparse
from concurrent.futures import ThreadPoolExecutor

from simlib import plt, run, write_checked

BASE = {
    "racks": 2, "workers-per-rack": 4, "jobs": 3, "aggregators": 64, "window": 64,
    "values-per-packet": 256, "link-gbps": 10, "core-gbps": 40, "delay-us": 5,
    "tensor-bytes": 4194304, "compute-us": 3000, "iterations": 8, "arrival-gap-us": 30000,
    "series-ms": 10,
}
VARIANTS = {
    "static slices": {"policy": "static"},
    "atp (default: planned, homes lent)": {},
    "atp, homes kept (--keep-homes)": {"keep-homes": ""},
    "atp, hashed lanes (paper)": {"placement": "hash"},
    "atp + borrow": {"borrow-aggregators": ""},
}


def plot(results, path):
    fig, axes = plt.subplots(len(results), 1, figsize=(8, 2.1 * len(results)), sharex=True,
                             sharey=True)
    for ax, (name, r) in zip(axes, results.items()):
        ms = [1000 * s["end_s"] for s in r["series"]]
        for j in range(len(r["jobs"])):
            color = f"C{j}"
            ax.plot(ms, [s["jobs"][j]["in_network"] for s in r["series"]], color=color,
                    label=f"job {j + 1} in network")
            ax.plot(ms, [s["jobs"][j]["at_ps"] for s in r["series"]], color=color, ls="--",
                    label=f"job {j + 1} at its PS")
        ax.set_title(f"{name}: {r['mean_gbps']:.2f} Gbit/s per job", fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_ylabel("seqs / 10 ms", fontsize=8)
    axes[0].legend(fontsize=7, ncol=3)
    axes[-1].set_xlabel("simulated time (ms); jobs arrive at 0, 30 and 60 ms")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


POOLS = [192, 128, 96, 64, 48]
ARRIVAL_VARIANTS = {"static": {"policy": "static"}, "default": {},
                    "homes kept": {"keep-homes": ""}}


def pools(args):
    """The arrivals over every pool and PS placement: atp / static, mean and worst job."""
    seeds = [int(x) for x in args.seeds.split(",")]
    base = {k: v for k, v in BASE.items() if k != "series-ms"}
    tasks = [(pool, ps, seed, v) for pool in POOLS for ps in (1, 8) for seed in seeds
             for v in ARRIVAL_VARIANTS]

    def go(t):
        pool, ps, seed, v = t
        return t, run(args.atp, base, aggregators=pool, seed=seed,
                      **{"parameter-servers": ps}, **ARRIVAL_VARIANTS[v])

    with ThreadPoolExecutor(2) as ex:
        results = dict(ex.map(go, tasks))
    print("| PS | variant | " + " | ".join(f"{round(100 * p / 192)}%" for p in POOLS) + " |")
    print("|---|---|" + "---|" * len(POOLS))
    for ps in (1, 8):
        for v in ("default", "homes kept"):
            cells = []
            for pool in POOLS:
                means, worst = [], []
                for seed in seeds:
                    a, st = results[(pool, ps, seed, v)], results[(pool, ps, seed, "static")]
                    means.append(a["mean_gbps"] / st["mean_gbps"])
                    worst += [ja["steady_gbps"] / js["steady_gbps"]
                              for ja, js in zip(a["jobs"], st["jobs"])]
                cells.append(f"{sum(means) / len(means):.2f} ({min(worst):.2f})")
            print(f"| {ps} | {v} | " + " | ".join(cells) + " |")
    write_checked(args.out, "sharing-arrivals",
                  [dict(zip(["pool", "parameter_servers", "seed", "variant"], t), **r)
                   for t, r in results.items()], list(results.values()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--pools", action="store_true",
                        help="the arrivals over every pool and PS placement (a table)")
    parser.add_argument("--seeds", default="21,22", help="with --pools: comma-separated seeds")
    args = parser.parse_args()
    if args.pools:
        return pools(args)
    results = {name: run(args.atp, BASE, seed=args.seed, **options)
               for name, options in VARIANTS.items()}
    static = results["static slices"]["mean_gbps"]
    for name, r in results.items():
        alone = sum(s["jobs"][0]["in_network"] + s["jobs"][0]["at_ps"]
                    for s in r["series"][:3]) / 3
        print(f"{name}: {r['mean_gbps']:.2f} Gbit/s per job ({r['mean_gbps'] / static:.2f} of "
              f"static); job 1 alone: {alone:.0f} seqs per 10 ms, "
              f"{sum(s['jobs'][0]['at_ps'] for s in r['series'][:3]) / 3:.0f} of them at its PS")
    plot(results, f"{args.out}/sharing-timeline.png")
    write_checked(args.out, "sharing-timeline", results, list(results.values()),
                  f"{args.out}/sharing-timeline.png")


if __name__ == "__main__":
    main()
