#!/usr/bin/python3
"""Congestion control on real packets: the benchmark of docs/benchmarks.md ("Congestion control
on real packets"). Runs `atp cluster run` (root: network namespaces) for four questions, each
`--repeats` times, and writes every record and a summary to <out>/congestion.json:

  incast    one job, 8 workers in one rack, 50 Mbit/s links, half the aggregators its window
            needs (32 for a window of 64): collided fragments converge on the PS link (the
            paper's Fig. 15). With congestion control, then without (--no-congestion-control).
  fairness  two ATP jobs of 4 workers each on the same hosts, links and switch: Jain's index.
  tcp       one ATP job of 4 workers and an iperf3 TCP flow across rack 0's uplink, which
            ATP's sums to the PS take too: each one's share of the link, the link's use, and
            the queueing delay there.
  loss      on all of the above: packets the shapers dropped, and ATP's resends.

Usage: scripts/congestion-bench.py [--atp build/bin/atp] [--out docs/figures] [--repeats 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SCENARIOS = {
    "incast_cc": ["--workers", "8", "--rate-mbit", "50", "--aggregators", "32", "--window", "64",
                  "--floats", "1000000", "--iterations", "3"],
    "incast_no_cc": ["--workers", "8", "--rate-mbit", "50", "--aggregators", "32", "--window", "64",
                     "--floats", "1000000", "--iterations", "3", "--no-congestion-control"],
    "fairness": ["--workers", "4", "--jobs", "2", "--rate-mbit", "100", "--floats", "1000000",
                 "--iterations", "5"],
    "tcp": ["--workers", "4", "--rate-mbit", "100", "--floats", "2000000", "--iterations", "5",
            "--tcp-flow"],
}


def run(atp, name, extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "record.json")
        cmd = [atp, "cluster", "run", "--racks", "1", "--systems", "atp", "--json", out] + extra
        done = subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(out):
            sys.exit(f"congestion-bench: {name} failed:\n{done.stdout}{done.stderr}")
        with open(out) as f:
            record = json.load(f)
    record["command"] = "atp cluster run --racks 1 --systems atp " + " ".join(extra)
    return record


def summarize(records):
    def atp(name):
        return [r["systems"]["atp"] for r in records[name]]

    def mean(values):
        return statistics.mean(values) if values else None

    ceiling = records["tcp"][0]["wire_ceiling_gbps"]
    rate_gbps = records["tcp"][0]["rate_mbit"] / 1000
    tcp_runs = [a for a in atp("tcp") if "mbit_s" in a.get("tcp_flow", {})]
    atp_share = [a["mean_job_algbw_gbps"] / ceiling for a in tcp_runs]
    tcp_share = [a["tcp_flow"]["mbit_s"] / 1000 / rate_gbps for a in tcp_runs]
    cc = mean([a["mean_job_algbw_gbps"] for a in atp("incast_cc")])
    no_cc = mean([a["mean_job_algbw_gbps"] for a in atp("incast_no_cc")])
    return {
        "incast_gbps_with_cc": cc, "incast_gbps_without_cc": no_cc,
        "incast_ratio": cc / no_cc if no_cc else None,
        "fairness_jain": mean([a.get("jain_index", 0) for a in atp("fairness")]),
        "fairness_jain_min": min(a.get("jain_index", 0) for a in atp("fairness")),
        "tcp_atp_share": mean(atp_share), "tcp_flow_share": mean(tcp_share),
        "tcp_min_share": min(atp_share + tcp_share) if tcp_runs else None,
        "tcp_link_use": mean([a + t for a, t in zip(atp_share, tcp_share)]),
        "tcp_queue_delay_mean_ms": mean([a["queue_delay"]["mean_ms"] for a in tcp_runs]),
        "tcp_queue_delay_max_ms": max((a["queue_delay"]["max_ms"] for a in tcp_runs), default=None),
        "shaper_drops": {name: [a["qdisc_drops"] for a in atp(name)] for name in records},
        "socket_drops": {name: [a["socket_drops"] for a in atp(name)] for name in records},
        "atp_resends": {name: [a.get("retransmissions", 0) for a in atp(name)] for name in records},
        "exact": all(a["exact"] for name in records for a in atp(name)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n", 1)[1])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("congestion-bench: needs root (atp cluster builds network namespaces)")
    records = {name: [] for name in SCENARIOS}
    for i in range(args.repeats):
        for name, extra in SCENARIOS.items():
            print(f"[{i + 1}/{args.repeats}] {name}", file=sys.stderr, flush=True)
            records[name].append(run(args.atp, name, extra))
    summary = summarize(records)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "congestion.json"), "w") as f:
        json.dump({"summary": summary, "records": records}, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if summary["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
