#!/usr/bin/python3
"""Multi-tenant training on the simulator with model workloads (atp sim --model): the paper's
Fig. 13a in shape, and a mixed cluster against the host-only and PS-only baselines.

Usage: scripts/multi-tenant.py --fig13a [--out docs/figures] [--atp build/bin/atp]
       scripts/multi-tenant.py --mixed  [--out docs/figures]
       scripts/multi-tenant.py --fig15  [--out docs/figures]

The fabric: 2 racks, every job with 4 workers in each; 10 Gbit/s host links and 40 Gbit/s
switch-to-switch links, 5 us per link, so a window of 64 fragments is what a job needs for its
line rate (a window of 16 reaches 40 % of it). Models are scaled down 64x in bytes and compute
time alike (--model-scale 64); samples/s are reported at full size. Every run is checked exact.

--fig13a: 3 VGG16 jobs launched together on a pool from 100 % down to 33 % of the 192
aggregators static needs for every job's peak (3 x window 64), seeds 21-22, every job with 8
PS shards (one per worker host, as BytePS, which ATP builds on, colocates them): ATP's dynamic
policy, static slices (SwitchML-style), and each sharing option; per-worker images/s; and
ATP and static with a single PS per job (<out>/fig13a.json, fig13a.png).

--fig15: the paper's Fig. 15 in shape: one VGG16 job of 8 workers in one rack with half the
aggregators its window needs (32 for 64) and one PS, seeds 1-3, with and without congestion
control, with the default placement and with hashed lanes (whose collisions make the incast);
images/s per worker (<out>/fig15.json).

--mixed: 6 jobs (ResNet50, VGG16, BERT-base, twice each) arriving 5 ms apart (scaled time),
each training 6 iterations on a pool of 256 aggregators; the same cluster with ATP, static
slices, PS only and a ring allreduce, plus each model alone with ATP (its stand-alone speed);
with one PS per job, then with 8 (BytePS-style, one per worker host). Per job samples/s and
completion time; the mean over jobs of ATP's speed over each baseline's
(<out>/mixed-cluster.json, mixed-cluster.png: one PS per job).
"""
import argparse

from simlib import plot, plt, run, variants_over_seeds, write_checked

FABRIC = {
    "racks": 2, "workers-per-rack": 4, "window": 64, "values-per-packet": 256,
    "link-gbps": 10, "core-gbps": 40, "delay-us": 5, "model-scale": 64, "gpu": "a100",
    "time-limit-s": 600,
}

POOLS = [192, 128, 96, 64]
FIG13A_VARIANTS = {
    "atp": {"policy": "atp"},
    "static": {"policy": "static"},
    "atp + aggregator window": {"policy": "atp", "aggregator-window": ""},
    "atp, 1 PS per job": {"policy": "atp", "parameter-servers": 1},
    "static, 1 PS per job": {"policy": "static", "parameter-servers": 1},
}


def mean(xs):
    return sum(xs) / len(xs)


def fig13a(atp, out):
    base = dict(FABRIC, jobs=3, model="vgg16", iterations=4, **{"parameter-servers": 8})
    results = {}
    for name, options in FIG13A_VARIANTS.items():
        points = []
        for pool in POOLS:
            runs = [run(atp, base, aggregators=pool, seed=seed, **options) for seed in (21, 22)]
            points.append({"pool": pool, "runs": runs,
                           "images_per_s": mean([r["mean_samples_per_s"] for r in runs])})
        results[name] = points
        print(f"{name}: " + " ".join(f"{p['pool']}={p['images_per_s']:.1f}" for p in points),
              flush=True)
    for name, points in results.items():
        static = results["static, 1 PS per job" if "1 PS" in name else "static"]
        for p, s in zip(points, static):
            p["of_static"] = p["images_per_s"] / s["images_per_s"]
    plot(results, [f"{100 * p // 192}%" for p in POOLS],
         "aggregator pool (share of what static needs)",
         "3 VGG16 jobs sharing a shrinking pool (Fig. 13a shape)", f"{out}/fig13a.png",
         key="images_per_s", ylabel="images/s per worker")
    write_checked(out, "fig13a", results,
                  [r for ps in results.values() for p in ps for r in p["runs"]],
                  f"{out}/fig13a.png")


def fig15(atp, out):
    base = dict(FABRIC, racks=1, **{"workers-per-rack": 8}, jobs=1, model="vgg16",
                iterations=4, aggregators=32)
    variants_over_seeds(atp, out, "fig15", base,
                        {"congestion control": {}, "none": {"no-congestion-control": ""},
                         "hashed lanes, congestion control": {"placement": "hash"},
                         "hashed lanes, none": {"placement": "hash", "no-congestion-control": ""}},
                        [1, 2, 3])


MODELS = ["resnet50", "vgg16", "bert-base"]
SYSTEMS = {
    "atp": {"policy": "atp"},
    "static": {"policy": "static"},
    "ps only": {"policy": "none"},
    "ring allreduce": {"collective": "ring"},
}


def mixed(atp, out):
    results = {}
    for shards in (1, 8):
        name = f"{shards} PS per job"
        print(f"-- {name}")
        results[name] = mixed_cluster(atp, dict(
            FABRIC, jobs=6, model=",".join(MODELS), iterations=6, aggregators=256, seed=31,
            **{"arrival-gap-us": 5000, "parameter-servers": shards}))
    runs = [r for c in results.values()
            for r in list(c["systems"].values()) + list(c["alone"].values())]
    if all(r["exact"] for r in runs):
        plot_mixed(results["1 PS per job"], f"{out}/mixed-cluster.png")
    write_checked(out, "mixed-cluster", results, runs, f"{out}/mixed-cluster.png")


def mixed_cluster(atp, base):
    results = {"systems": {}, "alone": {}}
    for name, options in SYSTEMS.items():
        results["systems"][name] = run(atp, base, **options)
        jobs = results["systems"][name]["jobs"]
        print(f"{name}: samples/s " + " ".join(f"{j['samples_per_s_per_worker']:.1f}" for j in jobs)
              + "; completion ms " + " ".join(f"{1e3 * j['job_completion_time_s']:.1f}" for j in jobs),
              flush=True)
    for model in MODELS:
        results["alone"][model] = run(atp, dict(base, jobs=1, model=model))
    if not all(r["exact"] for r in list(results["systems"].values()) + list(results["alone"].values())):
        return results  # an unfinished job has no speed to compare; write_checked names it
    atp_jobs = results["systems"]["atp"]["jobs"]
    results["ratios"] = {}
    for name, r in results["systems"].items():
        speed = [a["samples_per_s_per_worker"] / b["samples_per_s_per_worker"]
                 for a, b in zip(atp_jobs, r["jobs"])]
        jct = [b["job_completion_time_s"] / a["job_completion_time_s"]
               for a, b in zip(atp_jobs, r["jobs"])]
        results["ratios"][name] = {"atp_speed_over_it": mean(speed), "its_jct_over_atp": mean(jct)}
        print(f"atp / {name}: mean speed ratio {mean(speed):.2f}, "
              f"mean completion time ratio {mean(jct):.2f}")
    return results


def plot_mixed(results, path):
    fig, ax = plt.subplots(figsize=(6, 3.4))
    names = list(results["systems"])
    jobs = len(results["systems"]["atp"]["jobs"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        alone = [results["alone"][MODELS[j % len(MODELS)]]["jobs"][0]["samples_per_s_per_worker"]
                 for j in range(jobs)]
        share = [j["samples_per_s_per_worker"] / a
                 for j, a in zip(results["systems"][name]["jobs"], alone)]
        ax.bar([j + i * width for j in range(jobs)], share, width, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(jobs)])
    ax.set_xticklabels([f"{MODELS[j % len(MODELS)]}\n#{j}" for j in range(jobs)], fontsize=7)
    ax.set_ylabel("speed / ATP stand-alone")
    ax.set_title("Mixed cluster: 6 jobs arriving 5 ms apart", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--fig13a", action="store_true", help="the paper's Fig. 13a in shape")
    parser.add_argument("--mixed", action="store_true", help="the mixed cluster and baselines")
    parser.add_argument("--fig15", action="store_true", help="the paper's Fig. 15 in shape")
    args = parser.parse_args()
    if not (args.fig13a or args.mixed or args.fig15):
        parser.error("choose --fig13a, --mixed or --fig15")
    if args.fig15:
        fig15(args.atp, args.out)
    if args.fig13a:
        fig13a(args.atp, args.out)
    if args.mixed:
        mixed(args.atp, args.out)


if __name__ == "__main__":
    main()
