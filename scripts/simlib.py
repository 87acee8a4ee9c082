"""What the simulator scripts share: one `atp sim --json` run as a dict, the checked JSON
writer, and the line plot. Needs Debian's python3-matplotlib (scripts/setup.sh --plots)."""
import json
import subprocess
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("needs python3-matplotlib (run: scripts/setup.sh --plots)")

# Per job, what the scripts read from a run's report.
JOB_FIELDS = ["job", "exact", "steady_gbps", "iterations_per_s", "samples_per_s_per_worker",
              "start_s", "job_completion_time_s", "fraction_in_network", "collisions",
              # Loss recovery: every resend by its cause, the PS's requests and its results
              # sent again for resends that found the seq complete; the result queries (the
              # header alone), those asked at once because a later result showed the seq's
              # result sent, and those the PS answered with the result it kept.
              "retransmissions", "timeouts", "fast_resends", "probes", "fallback_resends",
              "requested_resends", "resend_requests", "late_results", "result_queries",
              "lost_down_queries", "answered_queries"]


def run(atp, base, **overrides):
    """One deterministic `atp sim --json` run of base + overrides (a value of "" is a flag)."""
    args = dict(base, **overrides)
    cmd = [atp, "sim", "--json"] + [x for k, v in args.items()
                                    for x in ((f"--{k}",) if v == "" else (f"--{k}", str(v)))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    report = json.loads(out.stdout)
    jobs = report["jobs"]
    return {
        "command": " ".join(cmd),
        "params": args,
        "exact": report["totals"]["exact"],
        "mean_gbps": sum(j["throughput_gbps"] for j in jobs) / len(jobs),
        # The iterations after the first (without the launch's run handshake).
        "mean_steady_gbps": sum(j["steady_gbps"] for j in jobs) / len(jobs),
        "mean_samples_per_s": sum(j["samples_per_s_per_worker"] for j in jobs) / len(jobs),
        "in_network": sum(j["fraction_in_network"] for j in jobs) / len(jobs),
        "retransmissions": report["totals"]["retransmissions"],
        "packets_lost": report["totals"]["packets_lost"],
        "ps_bytes_in": sum(j["ps_bytes_in"] for j in jobs),
        "jobs": [{k: j[k] for k in JOB_FIELDS} for j in jobs],
        "wall_time_s": report["wall_time_s"],
        "events_per_second": report["events_per_second"],
        # Per interval (atp sim --series-ms), when asked for.
        "series": report.get("series"),
        # A drawn scenario's terms (atp sim --scenario-seed).
        "scenario": report.get("scenario"),
    }


def write_checked(out, name, results, runs, shown=None):
    """Writes <out>/<name>.json; exits naming every inexact run, else says all were exact and
    where the results are shown (default: that JSON)."""
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(results, f, indent=1)
    inexact = [r["command"] for r in runs if not r["exact"]]
    if inexact:
        sys.exit("NOT EXACT:\n" + "\n".join(inexact))
    print(f"all {len(runs)} runs exact; {shown or f'{out}/{name}.json'}")


def plot(series, xs, xlabel, title, path, logx=False, key="mean_gbps",
         ylabel="mean job throughput (Gbit/s)"):
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for name, points in series.items():
        ax.plot(xs, [p[key] for p in points], marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


MEANS = ["mean_steady_gbps", "mean_samples_per_s", "ps_bytes_in", "retransmissions"]


def variants_over_seeds(atp, out, name, base, variants, seeds):
    """Runs each variant on every seed; prints the means and writes them to <out>/<name>.json."""
    results = {}
    for variant, options in variants.items():
        runs = [run(atp, base, seed=seed, **options) for seed in seeds]
        results[variant] = dict({"runs": runs},
                                **{k: sum(r[k] for r in runs) / len(runs) for k in MEANS})
        m = results[variant]
        samples = f"{m['mean_samples_per_s']:.1f} samples/s per worker, " if m["mean_samples_per_s"] else ""
        print(f"{name} {variant}: {samples}{m['mean_steady_gbps']:.1f} Gbit/s steady, "
              f"PS in {m['ps_bytes_in'] / 1e6:.1f} MB, {m['retransmissions']:.0f} resends",
              flush=True)
    write_checked(out, name, results, [r for v in results.values() for r in v["runs"]])
