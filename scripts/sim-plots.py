#!/usr/bin/python3
"""Sweeps `atp sim` and draws the paper's claims in shape: average job throughput versus the
number of jobs (three policies), versus loss, and versus the aggregator pool size.

Usage: scripts/sim-plots.py [--atp build/bin/atp] [--out docs/figures] [--quick]
       scripts/sim-plots.py --loss-recovery [--out docs/figures]
       scripts/sim-plots.py --placement [--out docs/figures]
       scripts/sim-plots.py --two-level [--out docs/figures]
Needs Debian's python3-matplotlib (scripts/setup.sh --plots installs it).
Every point is one deterministic `atp sim --json` run; the commands go to <out>/sim-sweeps.json
(or <out>/loss-recovery.json).

--loss-recovery: the loss issues' benchmark instead: one job of 1 rack x 4 workers (4 MiB x 6
iterations) and two jobs of 2 racks x 3 workers (4 MiB x 4 iterations), both loss models (every
link; one worker's link only, the paper's), K = 64 and 256, seeds 7-14; the share of the
lossless throughput per loss (the iterations after the first: the launch's run handshake is not
the data path), resends per lost packet and the share of resends that found their seq complete,
with the goal rows met or missed, as JSON, a table (<out>/loss-recovery.md) and a figure.

--placement: the paper's Fig. 14 in shape instead: 2-8 always-on jobs (no compute) of 2 racks x
4 workers, 4 MiB x 4 iterations, the pool at 100 % of what static needs (jobs x window 64),
seeds 5 and 6: static slices against hashed and linear lane placement, each with the PSs'
remap suggestions (ours) and without (the paper's ATP); mean job steady_gbps, as JSON and a
figure (<out>/placement.json, placement.png).

--two-level: the paper's Fig. 9 in shape: one job of 6 workers in 3 racks, 8 MiB x 4
iterations; the bytes into its PS with both levels aggregating, and with the PS rack's switch
only forwarding (--rack-only). JSON only (<out>/two-level.json).

The paper's Fig. 15 (incast) runs a model workload: scripts/multi-tenant.py --fig15.
"""
import argparse
import statistics

from simlib import plot, plt, run, variants_over_seeds, write_checked

# A shared cluster: 2 racks, every job has 4 workers in each; jobs compute for about as long
# as they communicate and start out of phase, as independent tenants do.
BASE = {
    "racks": 2, "workers-per-rack": 4, "window": 64, "values-per-packet": 256,
    "tensor-bytes": 2 << 20, "iterations": 6, "compute-us": 1500,
    "link-gbps": 100, "delay-us": 1, "aggregators": 256, "seed": 3, "time-limit-s": 600,
}


def sweep(atp, name, xs, key, policies, **fixed):
    series = {}
    for policy in policies:
        series[policy] = [run(atp, BASE, policy=policy, **{key: x}, **fixed) for x in xs]
        print(f"{name} {policy}: " + " ".join(f"{p['mean_gbps']:.1f}" for p in series[policy]),
              flush=True)
    return series


# The loss issues' benchmark: one job alone on one rack, so that only loss recovery moves the
# numbers, and two jobs on two racks, where one lost packet is noticed by six workers and a
# second level of switches holds partial sums.
LOSS_TOPOLOGIES = {
    "1 rack": {
        "racks": 1, "workers-per-rack": 4, "window": 64, "tensor-bytes": 4 << 20,
        "iterations": 6, "link-gbps": 100, "delay-us": 1, "aggregators": 1024,
        "time-limit-s": 600,
    },
    "2 racks": {
        "racks": 2, "workers-per-rack": 3, "jobs": 2, "window": 64, "tensor-bytes": 4 << 20,
        "iterations": 4, "link-gbps": 100, "delay-us": 1, "aggregators": 1024,
        "time-limit-s": 600,
    },
}
LOSS_SEEDS = [7, 8, 9, 10, 11, 12, 13, 14]
LOSS_MODELS = {"every link": "loss", "one worker's link": "loss-one-worker"}
# (model, loss, least share of lossless) from the loss issues; resends per lost packet and the
# share of resends that met a complete seq, at most, at every loss from 0.1 % on.
LOSS_GOALS = [("every link", 0.001, 0.9), ("every link", 0.01, 0.8), ("every link", 0.05, 0.5),
              ("one worker's link", 0.01, 0.95)]
RESENDS_PER_LOST_GOAL = 1.5
LATE_SHARE_GOAL = 0.2


def loss_point(atp, base, k, option, loss):
    runs = [run(atp, base, **{"values-per-packet": k, "seed": seed, option: loss})
            for seed in LOSS_SEEDS]
    resends = sum(r["retransmissions"] for r in runs)
    return {"loss": loss, "runs": runs,
            "mean_gbps": sum(r["mean_steady_gbps"] for r in runs) / len(runs),
            "resends_per_lost": resends / max(1, sum(r["packets_lost"] for r in runs)),
            "queries_per_lost": sum(j["result_queries"] for r in runs for j in r["jobs"])
                                / max(1, sum(r["packets_lost"] for r in runs)),
            "late_share": sum(j["late_results"] for r in runs for j in r["jobs"]) / max(1, resends)}


def loss_goals(results):
    """Each goal row of the loss issues, met or missed, per series it applies to."""
    goals = []
    for name, points in results.items():
        for model, loss, least in LOSS_GOALS:
            for p in points:
                if name.split(", ")[1] == model and p["loss"] == loss:
                    goals.append({"series": name, "goal": f"share at {loss:g} >= {least}",
                                  "value": round(p["of_lossless"], 3),
                                  "met": p["of_lossless"] >= least})
        lossy = [p for p in points if p["loss"] >= 0.001]
        worst = max(p["resends_per_lost"] for p in lossy)
        late = max(p["late_share"] for p in lossy)
        # More than 0.01 above the point before: within that, eight seeds' means are noise.
        rising = [p["loss"] for a, p in zip(points, points[1:])
                  if p["of_lossless"] > a["of_lossless"] + 0.01]
        goals += [{"series": name, "goal": f"resends per lost <= {RESENDS_PER_LOST_GOAL}",
                   "value": round(worst, 3), "met": worst <= RESENDS_PER_LOST_GOAL},
                  {"series": name, "goal": f"late share of resends <= {LATE_SHARE_GOAL}",
                   "value": round(late, 3), "met": late <= LATE_SHARE_GOAL},
                  {"series": name, "goal": "never rising with more loss (by more than 0.01)",
                   "value": rising, "met": not rising}]
    for g in goals:
        print(f"{'met   ' if g['met'] else 'MISSED'} {g['series']}: {g['goal']} ({g['value']})")
    return goals


def write_loss_table(out, results, goals):
    """<out>/loss-recovery.md: the share of lossless per series and loss (steady, then the
    slower job's completion), the resend counters, and every goal row met or missed."""
    losses = [p["loss"] for p in next(iter(results.values()))][1:]
    lines = ["# Loss recovery: the sweep's table", "",
             "Written by `scripts/sim-plots.py --loss-recovery`; every run's command is in "
             "`loss-recovery.json`. Share of lossless throughput over the iterations after the "
             "first (steady), and by the slower job's completion time, the launch included.", "",
             "| series | " + " | ".join(f"{x * 100:g} %" for x in losses) +
             " | resends per lost | queries per lost | late share |",
             "|---" * (len(losses) + 4) + "|"]
    for name, points in results.items():
        lossy = [p for p in points if p["loss"] >= 0.001]
        def span(key):
            return f"{min(p[key] for p in lossy):.2f}-{max(p[key] for p in lossy):.2f}"
        lines.append(f"| {name} | " + " | ".join(
            f"{p['of_lossless']:.2f} ({p['completion_of_lossless']:.2f})" for p in points[1:]) +
            f" | {span('resends_per_lost')} | {span('queries_per_lost')} | {span('late_share')} |")
    lines += ["", "Steady share, and in parentheses the completion share. Counters at 0.1 % and "
              "above.", "", "| goal | series | value | |", "|---|---|---|---|"]
    lines += [f"| {g['goal']} | {g['series']} | {g['value']} | {'met' if g['met'] else '**missed**'} |"
              for g in goals]
    with open(f"{out}/loss-recovery.md", "w") as f:
        f.write("\n".join(lines) + "\n")


def completion_share(lossless, point):
    """The lossless runs' completion time over the lossy runs', seed by seed, as a mean: the
    slower job's, the first iteration included. Unlike the mean of the jobs' steady rates, it
    cannot rise when one job stalls and the other runs alone on a link they share."""
    def slowest(run):
        return max(j["job_completion_time_s"] for j in run["jobs"])
    return statistics.mean(slowest(a) / slowest(b) for a, b in zip(lossless["runs"], point["runs"]))


def loss_recovery(atp, out, quick):
    losses = [0, 0.001, 0.01] if quick else [0, 0.0001, 0.001, 0.01, 0.02, 0.05, 0.1]
    results = {}
    for topology, base in LOSS_TOPOLOGIES.items():
        for model, option in LOSS_MODELS.items():
            for k in (64, 256):
                name = f"{topology}, {model}, K={k}"
                points = [loss_point(atp, base, k, option, loss) for loss in losses]
                for p in points:
                    p["of_lossless"] = p["mean_gbps"] / points[0]["mean_gbps"]
                    p["completion_of_lossless"] = completion_share(points[0], p)
                results[name] = points
                print(f"{name}: " + " ".join(
                    f"{p['loss']:g}={p['of_lossless']:.2f} ({p['resends_per_lost']:.2f}/lost, "
                    f"completion {p['completion_of_lossless']:.2f})" for p in points), flush=True)
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.4), sharey=True)
    for row, topology in zip(axes, LOSS_TOPOLOGIES):
        for ax, model in zip(row, LOSS_MODELS):
            for name, points in results.items():
                if name.startswith(f"{topology}, {model}"):
                    xs = [max(p["loss"], losses[1] / 10) for p in points]  # lossless at the left
                    ax.plot(xs, [p["of_lossless"] for p in points], marker="o",
                            label=name.split(", ")[2])
            ax.set_xscale("log")
            ax.set_title(f"{topology}: loss on {model}", fontsize=10)
            ax.grid(alpha=0.3)
            ax.legend()
        row[0].set_ylabel("share of lossless throughput")
    for ax in axes[1]:
        ax.set_xlabel("loss probability (lossless at the left edge)")
    axes[0][0].set_ylim(0, 1.05)
    fig.tight_layout()
    fig.savefig(f"{out}/loss-recovery.png", dpi=120)
    plt.close(fig)
    goals = loss_goals(results)
    write_loss_table(out, results, goals)
    write_checked(out, "loss-recovery", {"series": results, "goals": goals},
                  [r for ps in results.values() for p in ps for r in p["runs"]],
                  f"{out}/loss-recovery.png")


# The paper's Fig. 14 in shape: always-on jobs, a pool exactly as large as static needs.
PLACEMENT_BASE = {
    "racks": 2, "workers-per-rack": 4, "window": 64, "tensor-bytes": 4 << 20, "iterations": 4,
    "link-gbps": 100, "delay-us": 1, "time-limit-s": 600,
}
PLACEMENT_SEEDS = [5, 6]
PLACEMENTS = {
    "static": {"policy": "static"},
    "planned (default)": {},
    "hash (the paper's ATP)": {"placement": "hash"},
    "linear": {"placement": "linear"},
}


def placement(atp, out, quick):
    jobs = [2, 8] if quick else [2, 3, 4, 6, 8]
    results = {}
    for name, options in PLACEMENTS.items():
        points = []
        for n in jobs:
            runs = [run(atp, PLACEMENT_BASE, jobs=n, aggregators=64 * n, seed=seed, **options)
                    for seed in PLACEMENT_SEEDS]
            points.append({"jobs": n, "runs": runs,
                           "mean_gbps": sum(r["mean_steady_gbps"] for r in runs) / len(runs)})
        results[name] = points
        print(f"{name}: " + " ".join(f"{p['jobs']}={p['mean_gbps']:.1f}" for p in points),
              flush=True)
    for name, points in results.items():
        for p, s in zip(points, results["static"]):
            p["of_static"] = p["mean_gbps"] / s["mean_gbps"]
    plot(results, jobs, "always-on jobs (pool = jobs x 64)",
         "Lane placement at 100 % of the pool (Fig. 14 shape)", f"{out}/placement.png")
    write_checked(out, "placement", results,
                  [r for ps in results.values() for p in ps for r in p["runs"]],
                  f"{out}/placement.png")


def two_level(atp, out):
    base = {"racks": 3, "workers-per-rack": 2, "window": 64, "tensor-bytes": 8 << 20,
            "iterations": 4, "aggregators": 1024, "time-limit-s": 600}
    variants_over_seeds(atp, out, "two-level", base, {"two levels": {}, "rack only": {"rack-only": ""}}, [1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--quick", action="store_true", help="fewer points (smoke run)")
    parser.add_argument("--loss-recovery", action="store_true",
                        help="the loss issue's benchmark instead (see above)")
    parser.add_argument("--placement", action="store_true",
                        help="the paper's Fig. 14 in shape instead (see above)")
    parser.add_argument("--two-level", action="store_true",
                        help="the paper's Fig. 9 in shape instead (see above)")
    args = parser.parse_args()
    if args.two_level:
        return two_level(args.atp, args.out)
    if args.loss_recovery:
        return loss_recovery(args.atp, args.out, args.quick)
    if args.placement:
        return placement(args.atp, args.out, args.quick)
    policies = ["atp", "static", "none"]

    jobs = [1, 2, 4] if args.quick else [1, 2, 3, 4, 6, 8]
    losses = [0, 0.01] if args.quick else [0, 0.0001, 0.001, 0.005, 0.01, 0.02]
    pools = [16, 256] if args.quick else [8, 16, 32, 64, 128, 256, 512, 1024]

    results = {
        "jobs": sweep(args.atp, "jobs", jobs, "jobs", policies),
        "loss": sweep(args.atp, "loss", losses, "loss", ["atp", "none"], jobs=4),
        "pool": sweep(args.atp, "pool", pools, "aggregators", policies, jobs=4),
    }
    plot(results["jobs"], jobs, "concurrent jobs", "Throughput vs jobs (pool 256)",
         f"{args.out}/sim-jobs.png")
    plot(results["loss"], losses, "loss probability per link", "Throughput vs loss (4 jobs)",
         f"{args.out}/sim-loss.png")
    plot(results["pool"], pools, "aggregators per switch", "Throughput vs pool (4 jobs)",
         f"{args.out}/sim-pool.png", logx=True)
    write_checked(args.out, "sim-sweeps", results,
                  [p for s in results.values() for ps in s.values() for p in ps],
                  f"figures in {args.out}")


if __name__ == "__main__":
    main()
