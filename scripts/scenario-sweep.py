#!/usr/bin/python3
"""Default ATP judged over random scenarios (issue 48, DESIGN.md §7a).

Usage: scripts/scenario-sweep.py --seeds 100001-100500 [--out docs/figures] [--name scenarios]
       scripts/scenario-sweep.py --seeds 7            # one scenario, every baseline, a table

Each seed draws a whole scenario (`atp sim --scenario-seed N`, src/sim/scenario_draw.cpp:
racks, workers, jobs of zoo models or synthetic, rates, delays, K, window, pool, PSs, loss,
arrivals) and runs it as drawn (default ATP), with static slices under the same loss, and, when
the draw is lossy, both again without loss. Every run must be exact or the sweep fails.

Judged, per scenario:
- sharing: ATP / static in mean job throughput, both lossless (every scenario has a pair);
- under loss: ATP / static, both under the drawn loss;
- loss share: per job, ATP's iterations per second under loss over its lossless run's,
  averaged over the jobs (samples/s in a model's terms);
- resends and timeouts per packet the links lost (ATP under loss).
Writes <out>/<name>.json (every run and the per-scenario numbers), <out>/<name>.md (the goal
rows, the distributions' quantiles and the worst scenarios) and <out>/<name>.png (CDFs).
Seeds used to tune a rule must not be the reported ones: docs/simulator.md lists which are which.
"""
import argparse
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor

import simlib
from simlib import plt

def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += list(range(int(low), int(high or low) + 1))
    return seeds


def run(atp, seed, variant):
    r = simlib.run(atp, {"scenario-seed": seed, "scenario-variant": variant})
    r["timeouts"] = sum(j["timeouts"] for j in r["jobs"])
    return r


def variants_of(atp, seed):
    """The variants a seed needs: lossless draws have no separate lossless runs."""
    first = run(atp, seed, "atp")
    lossy = first["scenario"]["loss"] > 0
    return first, (["static", "lossless", "static-lossless"] if lossy else ["static"])


def sweep(atp, seeds, parallel):
    with ThreadPoolExecutor(parallel) as ex:
        firsts = list(ex.map(lambda s: (s, variants_of(atp, s)), seeds))
        tasks = [(s, v) for s, (_, vs) in firsts for v in vs]
        rest = list(ex.map(lambda t: (t, run(atp, *t)), tasks))
    runs = {(s, "atp"): first for s, (first, _) in firsts}
    runs.update({t: r for t, r in rest})
    return runs


def job_rate_share(lossy, lossless):
    """Mean over jobs of iterations/s under loss over lossless (completion time when a job ran
    one iteration too few to have a rate)."""
    shares = []
    for a, b in zip(lossy["jobs"], lossless["jobs"]):
        if a["iterations_per_s"] > 0 and b["iterations_per_s"] > 0:
            shares.append(a["iterations_per_s"] / b["iterations_per_s"])
        else:
            shares.append(b["job_completion_time_s"] / a["job_completion_time_s"])
    return sum(shares) / len(shares)


def judge(runs, seeds):
    rows = []
    for s in seeds:
        atp = runs[(s, "atp")]
        terms = atp["scenario"]
        lossy = terms["loss"] > 0
        clean = runs[(s, "lossless")] if lossy else atp
        static_clean = runs[(s, "static-lossless")] if lossy else runs[(s, "static")]
        row = {"seed": s, "terms": terms, "sharing": clean["mean_gbps"] / static_clean["mean_gbps"]}
        if lossy:
            lost = max(1, atp["packets_lost"])
            row.update({
                "under_loss": atp["mean_gbps"] / runs[(s, "static")]["mean_gbps"],
                "loss_share": job_rate_share(atp, clean),
                "resends_per_lost": atp["retransmissions"] / lost,
                "timeouts_per_lost": atp["timeouts"] / lost,
                "packets_lost": atp["packets_lost"]})
        rows.append(row)
    return rows


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def at_third(r):
    return 0.30 <= r["terms"]["pool_share"] <= 0.37


def goal_rows(rows):
    lossy = [r for r in rows if "loss_share" in r]
    short = [r["sharing"] for r in rows if r["terms"]["pool_share"] < 0.75]
    third = [r["sharing"] for r in rows if at_third(r)]

    def at(level):
        return [r["loss_share"] for r in lossy if abs(r["terms"]["loss"] - level) < 1e-9]
    out = [("sharing: ATP >= 0.98 of static in every scenario", min(r["sharing"] for r in rows), ">=", 0.98,
            len(rows)),
           ("sharing: median where the pool is below 75 %", statistics.median(short) if short else float("nan"),
            ">=", 1.15, len(short)),
           ("sharing: median at 33 % (30-37 %)", statistics.median(third) if third else float("nan"),
            ">=", 1.38, len(third))]
    for level, goal in [(0.001, 0.9), (0.01, 0.8), (0.05, 0.5)]:
        xs = at(level)
        out.append((f"loss share of lossless, 5th percentile at {100 * level:g} %", quantile(xs, 0.05),
                    ">=", goal, len(xs)))
    if lossy:
        out += [("resends per lost packet, median", statistics.median(r["resends_per_lost"] for r in lossy),
                 "<=", 1.5, len(lossy)),
                ("timeouts per lost packet, median", statistics.median(r["timeouts_per_lost"] for r in lossy),
                 "<=", 0.3, len(lossy)),
                ("under loss: ATP / static, lowest (>= 0.98: never below)",
                 min(r["under_loss"] for r in lossy), ">=", 0.98, len(lossy))]
    return out


def describe(t):
    loss = (f"{100 * t['loss']:g} % {'one worker' if t['loss_on_one_worker'] else 'every link'}"
            if t["loss"] > 0 else "no loss")
    return (f"{t['racks']}x{t['workers_per_rack']} workers, {t['jobs']} jobs "
            f"({','.join(t['models'])}), {t['link_gbps']:g}/{t['core_gbps']:g} Gbit/s, "
            f"{t['delay_us']:.1f} us, K={t['values_per_packet']}, window {t['window']}, pool "
            f"{100 * t['pool_share']:.0f} %, {t['parameter_servers']} PS, {loss}, gap "
            f"{t['arrival_gap_us']:.0f} us")


def worst(rows, key, n=10, reverse=False):
    have = [r for r in rows if key in r]
    return sorted(have, key=lambda r: r[key], reverse=reverse)[:n]


def markdown(rows, runs, seeds, command):
    lines = [f"Made by `{command}` ({len(seeds)} scenarios, {len(runs)} runs, every run exact).", "",
             "| goal | measured | goal | scenarios | |", "|---|---|---|---|---|"]
    for name, value, op, goal, n in goal_rows(rows):
        ok = value >= goal if op == ">=" else value <= goal
        lines.append(f"| {name} | {value:.3f} | {op} {goal} | {n} | {'met' if ok else 'MISSED'} |")
    lines += ["", "| distribution | min | 5 % | median | 95 % | max |", "|---|---|---|---|---|---|"]
    for key in ["sharing", "under_loss", "loss_share", "resends_per_lost", "timeouts_per_lost"]:
        xs = [r[key] for r in rows if key in r]
        if xs:
            lines.append(f"| {key} | {min(xs):.3f} | {quantile(xs, 0.05):.3f} | "
                         f"{statistics.median(xs):.3f} | {quantile(xs, 0.95):.3f} | {max(xs):.3f} |")
    for key, title, rev in [("sharing", "lowest sharing (ATP / static, lossless)", False),
                            ("loss_share", "lowest loss share", False),
                            ("under_loss", "lowest ATP / static under loss", False),
                            ("timeouts_per_lost", "most timeouts per lost packet", True)]:
        lines += ["", f"Worst ten, {title}:", "", "| seed | value | scenario |", "|---|---|---|"]
        for r in worst(rows, key, reverse=rev):
            lines.append(f"| {r['seed']} | {r[key]:.3f} | {describe(r['terms'])} |")
    eps = [r["events_per_second"] for r in runs.values()]
    lines += ["", f"Simulator speed over the runs (noisy, two at once): median "
              f"{statistics.median(eps) / 1e6:.2f} M events/s, 5th percentile {quantile(eps, 0.05) / 1e6:.2f}; "
              f"wall time in all {sum(r['wall_time_s'] for r in runs.values()) / 60:.1f} min of runs."]
    return "\n".join(lines)


def plot(rows, path):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for key, label in [("sharing", "ATP / static, lossless"), ("under_loss", "ATP / static, under loss")]:
        xs = sorted(r[key] for r in rows if key in r)
        axes[0].step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=label)
    axes[0].axvline(0.98, color="k", lw=0.8, ls=":")
    axes[0].set_xlabel("throughput over static slices")
    axes[0].set_title("sharing, every scenario", fontsize=10)
    for level in sorted({r["terms"]["loss"] for r in rows if "loss_share" in r}):
        xs = sorted(r["loss_share"] for r in rows if "loss_share" in r and r["terms"]["loss"] == level)
        axes[1].step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post",
                     label=f"{100 * level:g} % loss ({len(xs)})")
    axes[1].set_xlabel("iterations/s under loss over lossless")
    axes[1].set_title("loss recovery, lossy scenarios", fontsize=10)
    for ax in axes:
        ax.set_ylabel("share of scenarios")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def single(runs, seed):
    print(describe(runs[(seed, "atp")]["scenario"]))
    for (s, v), r in sorted(runs.items()):
        print(f"{v:>16}: {r['mean_gbps']:8.3f} Gbit/s mean job, lost {r['packets_lost']}, "
              f"resends {r['retransmissions']}, timeouts {r['timeouts']}, exact {r['exact']}  "
              f"({r['command']})")
    print(json.dumps(judge(runs, [seed])[0], indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", required=True, help="e.g. 100001-100500 or 3,7,9")
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--name", default="scenarios")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    runs = sweep(args.atp, seeds, args.parallel)
    inexact = [r["command"] for r in runs.values() if not r["exact"]]
    if len(seeds) == 1:
        if inexact:
            sys.exit("NOT EXACT:\n" + "\n".join(inexact))
        single(runs, seeds[0])
        sys.exit(0)
    # An inexact run may not have finished (no rate to divide by): every run is written, then the
    # sweep fails naming them, before anything is judged.
    rows = [] if inexact else judge(runs, seeds)
    with open(f"{args.out}/{args.name}.json", "w") as f:
        json.dump({"rows": rows, "runs": [dict(r, seed=s, variant=v) for (s, v), r in runs.items()]},
                  f, separators=(",", ":"))
    if inexact:
        sys.exit("NOT EXACT:\n" + "\n".join(inexact))
    text = markdown(rows, runs, seeds, "scripts/scenario-sweep.py " + " ".join(sys.argv[1:]))
    with open(f"{args.out}/{args.name}.md", "w") as f:
        f.write(text + "\n")
    plot(rows, f"{args.out}/{args.name}.png")
    print(text)


if __name__ == "__main__":
    main()
