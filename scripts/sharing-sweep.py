#!/usr/bin/python3
"""Dynamic sharing against static slices over the whole sweep (issue 30, DESIGN.md §7).

Usage: scripts/sharing-sweep.py [--out docs/figures] [--atp build/bin/atp] [--seeds 21,22]

3 jobs on the multi-tenant fabric of scripts/multi-tenant.py (2 racks x 4 workers, 10/40
Gbit/s, window 64), on a pool of 100 / 67 / 50 / 33 / 25 % of the 192 aggregators static needs
for every job's window; each model of the zoo (VGG16, ResNet50, BERT-base, scaled 64x) and a
synthetic job (4 MiB per iteration, 3 ms compute phases); one PS per job and 8 PS shards;
every seed. Variants: static slices (SwitchML-style, the baseline), ATP's default (planned
placement), the paper's ATP (hashed lanes) and planned placement with --borrow-aggregators.
Static's window is its slice rounded down to a power of two (scenario.cpp); the best static
with non-power-of-two windows packs as the planned placement does without borrowing.

Writes <out>/sharing.json (every run) and <out>/sharing.png, and prints the table of
atp / static (mean over seeds, and the lowest single run) with the goal rows marked.
"""
import argparse
from concurrent.futures import ThreadPoolExecutor

from simlib import plt, run, write_checked

FABRIC = {
    "racks": 2, "workers-per-rack": 4, "window": 64, "values-per-packet": 256,
    "link-gbps": 10, "core-gbps": 40, "delay-us": 5, "gpu": "a100", "time-limit-s": 600,
    "jobs": 3,
}
POOLS = [192, 128, 96, 64, 48]
WORKLOADS = {
    "vgg16": {"model": "vgg16", "model-scale": 64, "iterations": 4},
    "resnet50": {"model": "resnet50", "model-scale": 64, "iterations": 4},
    "bert-base": {"model": "bert-base", "model-scale": 64, "iterations": 4},
    "synthetic": {"tensor-bytes": 4194304, "compute-us": 3000, "iterations": 6},
}
VARIANTS = {
    "static": {"policy": "static"},
    "atp (default: planned)": {"policy": "atp"},
    "atp, hashed lanes (paper)": {"policy": "atp", "placement": "hash"},
    "atp + borrow": {"policy": "atp", "borrow-aggregators": ""},
}
SHARDS = [1, 8]


def share(pool):
    return f"{round(100 * pool / 192)}%"


def sweep(atp, seeds):
    tasks = [(w, ps, pool, seed, v) for w in WORKLOADS for ps in SHARDS for pool in POOLS
             for seed in seeds for v in VARIANTS]

    def go(t):
        w, ps, pool, seed, v = t
        return t, run(atp, dict(FABRIC, **WORKLOADS[w]), aggregators=pool, seed=seed,
                      **{"parameter-servers": ps}, **VARIANTS[v])

    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(go, tasks))


def ratios(results, seeds):
    """(workload, shards, pool, variant) -> (mean over seeds of atp/static, lowest run)."""
    by = {(w, ps, pool, seed, v): r for (w, ps, pool, seed, v), r in results}
    out = {}
    for w in WORKLOADS:
        for ps in SHARDS:
            for pool in POOLS:
                for v in VARIANTS:
                    if v == "static":
                        continue
                    rs = [by[(w, ps, pool, s, v)]["mean_gbps"] / by[(w, ps, pool, s, "static")]["mean_gbps"]
                          for s in seeds]
                    out[(w, ps, pool, v)] = (sum(rs) / len(rs), min(rs))
    return out


def table(r):
    lines = ["| workload | PS | variant | " + " | ".join(share(p) for p in POOLS) + " |",
             "|---|---|---|" + "---|" * len(POOLS)]
    for w in WORKLOADS:
        for ps in SHARDS:
            for v in VARIANTS:
                if v == "static":
                    continue
                cells = [f"{r[(w, ps, p, v)][0]:.2f} ({r[(w, ps, p, v)][1]:.2f})" for p in POOLS]
                lines.append(f"| {w} | {ps} | {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goals(r):
    default = "atp (default: planned)"
    cells = [(w, ps, p) for w in WORKLOADS for ps in SHARDS for p in POOLS]
    lowest_mean = min(r[(w, ps, p, default)][0] for w, ps, p in cells)
    lowest_run = min(r[(w, ps, p, default)][1] for w, ps, p in cells)
    third = [r[(w, ps, 64, default)][0] for w in WORKLOADS for ps in SHARDS]
    rows = [
        ("atp / static >= 1.0 at every point (mean of seeds)", lowest_mean >= 1.0,
         f"lowest {lowest_mean:.2f}"),
        ("never below 0.98 in any single run", lowest_run >= 0.98, f"lowest {lowest_run:.2f}"),
        (">= 1.38 at 33 % (1 PS and 8 shards, every workload)", min(third) >= 1.38,
         f"{min(third):.2f} .. {max(third):.2f}"),
    ]
    return "\n".join(f"| {g} | {'met' if ok else 'MISSED'} | {n} |" for g, ok, n in rows)


def plot(r, path):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, ps in zip(axes, SHARDS):
        for v in VARIANTS:
            if v == "static":
                continue
            for w in WORKLOADS:
                ax.plot([share(p) for p in POOLS], [r[(w, ps, p, v)][0] for p in POOLS],
                        marker="o", alpha=0.8,
                        color={"atp (default: planned)": "C0", "atp, hashed lanes (paper)": "C1",
                               "atp + borrow": "C2"}[v],
                        label=v if w == "vgg16" else None)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"{ps} PS per job (each line a workload)", fontsize=10)
        ax.set_xlabel("aggregator pool (share of what static needs)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("throughput / static slices")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--seeds", default="21,22", help="comma-separated simulator seeds")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    results = sweep(args.atp, seeds)
    r = ratios(results, seeds)
    print(table(r))
    print()
    print("| goal | | measured |\n|---|---|---|\n" + goals(r))
    plot(r, f"{args.out}/sharing.png")
    write_checked(args.out, "sharing",
                  {"runs": [dict(zip(["workload", "parameter_servers", "pool", "seed", "variant"], t),
                                 **res) for t, res in results],
                   "ratios": [{"workload": w, "parameter_servers": ps, "pool": p, "variant": v,
                               "atp_over_static": m, "lowest_run": lo}
                              for (w, ps, p, v), (m, lo) in r.items()]},
                  [res for _, res in results], f"{args.out}/sharing.png")


if __name__ == "__main__":
    main()
