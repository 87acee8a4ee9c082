"""`atp cluster`: an emulated cluster in network namespaces, and benchmarks against baselines.

ATP against the systems users pick instead (Gloo ring allreduce, a plain parameter server,
static partitioning), on the same topology, links and tensors.

Topology (every box a network namespace, every line a veth pair shaped with tc tbf in both
directions at --rate-mbit):

    host r.h ── rack switch r (level 1, `atp switch`, IP router) ──┐
                                                                   ├─ PS-rack switch ── PS hosts
    host r.h ── rack switch r ...                                  ┘  (level 2, IP router)

Host h of rack r runs worker r * hosts_per_rack + h of every job, so jobs share host links,
switches and the pool. Plain traffic (Gloo's TCP) is routed through the same switch namespaces. --loss drops a
share of packets in every switch namespace (iptables -m statistic). Namespaces are always torn
down, also on failure or Ctrl-C.

Congestion (docs/benchmarks.md, "Congestion control on real packets"): every ATP packet is
ECN-capable; an fq_codel with ecn goes under each shaper where the kernel has it; software
switches mark from their backlog (--ecn-backlog-kb); --ce-mark has iptables mark CE on a share
of the ATP packets entering the switches; --tcp-flow runs an iperf3 TCP flow from rack 0's
switch to PS host 0 (across the links ATP's sums take to its PS) and reports both, with the
queueing delay on that path; every run reports the packets the shapers dropped.

--switch bmv2 runs the P4 program (p4/v1model/atp.p4) on BMv2 simple_switch as every switch
instead of `atp switch` (python/atp/bmv2.py): PS hosts hang off the rack switch (one rack) or
the level-2 switch, loss is dropped on the hosts, only ATP systems run. BMv2 forwards a few
thousand packets a second: keep tensors small.

    atp cluster run   --racks 1 --workers 4 --jobs 2 --systems atp,static,gloo
    atp cluster run   --switch bmv2 --racks 2 --workers 4 --jobs 2 --systems atp --floats 20000
    atp cluster bench --workers 2,4,8 --racks 1,2 --jobs 1,2,4 --out results/
    atp cluster train --workers 4 --jobs 2 --rate-mbit 200   # DDP under torchrun, ATP vs Gloo
"""
import argparse
import csv
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time

from . import bmv2, cluster_train
from .cluster_traffic import RunWatch
from .launch import atp_binary
from .topology import (LOCK_FILE, Topology, cleanup_step, cluster_file, cluster_namespaces,
                       namespaces_available, take_cluster_lock, teardown, topology_up,
                       wait_with_cpu)

HEADER_BYTES = 44 + 8 + 20 + 14  # ATP + UDP + IPv4 + Ethernet, as tbf counts them
SYSTEMS = {  # name -> (kind, switch policy)
    "atp": ("atp", "atp"), "static": ("atp", "static"), "ps": ("atp", "none"), "gloo": ("gloo", None)}


def wait_reports(procs, timeout, cpu):
    reports, deadline = [], time.time() + timeout
    for proc, path in procs:
        cpu["workers"] = cpu.get("workers", 0) + wait_with_cpu(proc, max(1, deadline - time.time()))
        try:
            with open(path) as f:
                reports.append(json.load(f))
        except (OSError, ValueError):
            reports.append({"finished": False, "exact": False,
                            "error": f"no report (exit code {proc.returncode})"})
    return reports


def start_software_switches(topo, config, binary, log):
    return [("switches", topo.spawn(ns, [binary, "switch", "--config", config, "--name", name,
                                         "--log-level", "warn"], log))
            for ns, name in topo.switch_names()]


def run_system(system, topo, args, workdir):
    """Runs every job on `system`; returns one report per job (workers' reports inside)."""
    kind, policy = SYSTEMS[system]
    binary = atp_binary()
    folder = os.path.join(workdir, system)
    os.makedirs(folder, exist_ok=True)
    daemons, workers, cpu = [], [], {}  # daemons: (role, process)
    p4_report = None  # what the BMv2 switches did, and their claim clocks
    log = open(os.path.join(folder, "processes.log"), "w")
    started = time.time()
    watch = RunWatch(topo, cluster_namespaces, args.tcp_flow, log)
    try:
        if kind == "atp":
            config = os.path.join(folder, "cluster.toml")
            with open(config, "w") as f:
                f.write(cluster_file(topo, args, policy))
            if args.switch == "bmv2":
                log.flush()
                topo.start_switches(args.p4_program, config, log)
            else:
                daemons += start_software_switches(topo, config, binary, log)
            for j in range(args.jobs):
                daemons.append(("parameter_servers", topo.spawn(topo.server(j), [
                    binary, "ps", "--config", config, "--name", f"ps{j + 1}", "--log-level",
                    "warn"], log)))
            time.sleep(0.5)
        store = os.path.join(folder, "gloo-store")
        os.makedirs(store, exist_ok=True)
        gloo = os.path.join(os.path.dirname(binary), "gloo_allreduce")
        watch.start()
        for j in range(args.jobs):
            for k in range(args.workers):
                r, h = topo.place(k)
                out = os.path.join(folder, f"job{j + 1}-rank{k}.json")
                if kind == "atp":
                    cmd = [binary, "worker", "--config", config, "--job", str(j + 1), "--rank", str(k),
                           "--floats", str(args.floats), "--iterations", str(args.iterations),
                           "--seed", str(j + 1), "--json-out", out,
                           "--compute-ms", str(args.compute_ms)] + (["--no-verify"] if args.no_verify else [])
                else:
                    cmd = [gloo, "--rank", str(k), "--size", str(args.workers), "--store", store,
                           "--prefix", f"job{j + 1}", "--host", topo.host_ip(r, h), "--floats",
                           str(args.floats), "--iterations", str(args.iterations), "--job",
                           str(j + 1), "--json-out", out]
                workers.append((topo.spawn(topo.host(r, h), cmd, log), out))
        reports = wait_reports(workers, args.timeout, cpu)
    finally:
        # Every step runs whatever the others do, and none hides the error that ended the run.
        traffic = cleanup_step(watch.stop, {})
        wall = time.time() - started
        everyone = [("workers", w) for w, _ in workers if w.returncode is None] + daemons
        for _, p in everyone:
            try:
                p.send_signal(signal.SIGTERM)  # a no-op for one that already exited
            except ProcessLookupError:
                pass
        for role, p in everyone:
            cpu[role] = cpu.get(role, 0) + cleanup_step(lambda: wait_with_cpu(p, 10), 0.0)
        if args.switch == "bmv2":  # also those started before a failure: none is left running
            p4_report = cleanup_step(topo.stop_switches, None)  # a fresh BMv2 per system
        log.close()

    jobs = []
    tensor_bytes = 4 * args.floats
    for j in range(args.jobs):
        mine = reports[j * args.workers:(j + 1) * args.workers]
        # An unchecked worker (--no-verify) counts when it finished; a checked one when exact.
        ok = all(r.get("finished") and (r.get("exact") or r.get("verified") is False) for r in mine)
        checked = all(r.get("verified", True) for r in mine)
        slowest = max((r.get("communication_s", 0) for r in mine), default=0)
        per_allreduce = slowest / args.iterations if ok and slowest > 0 else None
        jobs.append({"job": j + 1, "exact": ok and checked, "ok": ok, "checked": checked,
                     "seconds_per_allreduce": per_allreduce,
                     "algbw_gbps": tensor_bytes * 8 / per_allreduce / 1e9 if per_allreduce else 0.0,
                     "errors": sorted({r.get("error", "") for r in mine if r.get("error")}),
                     "workers": mine})
    # Where the machine's time went: CPU seconds per role over the run's wall time (2 cores on
    # the development machine: a sum near 2 x wall means CPU-bound, not link-bound).
    result = {"system": system, "jobs": jobs, "exact": all(j["exact"] for j in jobs),
              "ok": all(j["ok"] for j in jobs), "checked": all(j["checked"] for j in jobs),
              "mean_job_algbw_gbps": sum(j["algbw_gbps"] for j in jobs) / len(jobs),
              "wall_s": wall, "cpu_s": cpu, **traffic, **congestion_summary(jobs)}
    if p4_report is not None:
        result["p4_next_steps"] = p4_report["next_steps"]  # per switch: packets per next step
        result["claim_clock"] = p4_report["claim_clock"]  # per switch: its agent's clock
    return result


def congestion_summary(jobs):
    """How the jobs shared and backed off: Jain's fairness index over their bandwidths (1: equal
    shares), and the workers' ECN marks, window cuts and resends (ATP systems)."""
    rates = [j["algbw_gbps"] for j in jobs]
    out = {}
    if len(rates) > 1 and any(rates):
        out["jain_index"] = sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates))
    workers = [w for j in jobs for w in j["workers"]]
    for key in ("ecn_marks", "window_cuts", "retransmissions"):
        if any(key in w for w in workers):
            out[key] = sum(w.get(key, 0) for w in workers)
    return out



def wire_ceiling_gbps(rate_mbit, values_per_packet):
    """ATP's best algorithm bandwidth on a host link: its payload share of the wire bytes."""
    payload = 4 * values_per_packet
    return rate_mbit / 1000 * payload / (payload + HEADER_BYTES)


def run_point(args, systems, progress=None):
    """One topology, every system on it in turn; returns the point's record."""
    hosts = math.ceil(args.workers / args.racks)
    topology = bmv2.Bmv2Topology if args.switch == "bmv2" else Topology
    topo = topology(args.racks, hosts, args.jobs, args.rate_mbit, args.loss, args.ce_mark,
                    args.mtu)
    results = {}
    with topology_up(topo, args.keep) as workdir:
        for system in systems:
            results[system] = run_system(system, topo, args, workdir)
            if progress:
                progress()
    ceiling = wire_ceiling_gbps(args.rate_mbit, args.values_per_packet)
    record = {"switch": args.switch, "racks": args.racks, "workers": args.workers, "jobs": args.jobs,
              "rate_mbit": args.rate_mbit, "floats": args.floats, "loss": args.loss,
              "aggregators": args.aggregators, "window": args.window,
              "values_per_packet": args.values_per_packet, "mtu": args.mtu,
              "wire_ceiling_gbps": ceiling,
              "kernel_ecn_qdisc": topo.ecn_qdisc or None, "ce_mark": args.ce_mark,
              "ecn_backlog_kb": args.ecn_backlog_kb,
              "ecn_receive_backlog_kb": args.ecn_receive_backlog_kb, "congestion_control": not args.no_congestion_control,
              "aggregator_window": args.aggregator_window,
              "tcp_flow": args.tcp_flow, "systems": results}
    if "atp" in results:
        atp = results["atp"]["mean_job_algbw_gbps"]
        record["atp_vs"] = {s: (atp / r["mean_job_algbw_gbps"] if r["mean_job_algbw_gbps"] else None)
                            for s, r in results.items() if s != "atp"}
        # Every host runs a worker of every job, so the jobs share each host link: what the
        # ceiling bounds is the jobs' bandwidths added up.
        total = sum(j["algbw_gbps"] for j in results["atp"]["jobs"])
        record["atp_share_of_ceiling"] = total / ceiling if ceiling else None
    return record


def rate_text(gbps):
    """Gbit/s, or Mbit/s below 0.1 Gbit/s (BMv2 runs)."""
    return f"{gbps:.3f} Gbit/s" if gbps >= 0.1 or gbps == 0 else f"{gbps * 1000:.3f} Mbit/s"


def size_text(nbytes):
    return f"{nbytes / 1e6:.1f} MB" if nbytes >= 100_000 else f"{nbytes / 1e3:.1f} kB"


def print_record(rec):
    print(f"{rec['switch']} switches  racks {rec['racks']}  workers {rec['workers']}  jobs {rec['jobs']}  "
          f"{rec['rate_mbit']} Mbit/s  {size_text(rec['floats'] * 4)}  loss {rec['loss']}  "
          f"(ATP wire ceiling {rec['wire_ceiling_gbps']:.3f} Gbit/s)")
    if rec.get("switch") == "software":
        # None: the cluster file's default (docs/configuration.md), not repeated here.
        sent, received = (rec.get(k) for k in ("ecn_backlog_kb", "ecn_receive_backlog_kb"))
        shown = [f"{'default' if kb is None else f'{kb:g} KiB'} {side}"
                 for kb, side in ((sent, "sent"), (received, "received"))]
        print(f"  ECN: marking qdisc under the shapers: {rec.get('kernel_ecn_qdisc') or 'none (not in this kernel)'};"
              + (" switches never mark from backlog" if sent == received == 0 else
                 f" switches mark at a backlog of {', '.join(shown)} (0: never)")
              + (f"; iptables marks CE on {rec['ce_mark']:g} of what enters them" if rec.get("ce_mark") else "")
              + ("" if rec.get("congestion_control", True) else "; workers' congestion control OFF"))
    for system, r in rec["systems"].items():
        times = [j["seconds_per_allreduce"] for j in r["jobs"]]
        shown = ", ".join(f"{t * 1000:.1f}" if t else "-" for t in times)
        ratio = rec.get("atp_vs", {}).get(system)
        verdict = "exact" if r["exact"] else "unchecked" if r.get("ok") else "NOT EXACT"
        print(f"  {system:7s} {verdict:9s} ms/allreduce per job [{shown}]"
              f"  mean algbw {rate_text(r['mean_job_algbw_gbps'])}"
              + (f"  ATP/{system} {ratio:.2f}x" if ratio else ""))
        cpu = ", ".join(f"{role} {seconds:.1f}" for role, seconds in sorted(r["cpu_s"].items()))
        print(f"          CPU s over {r['wall_s']:.1f} s wall: {cpu}")
        print_congestion(r, rec["rate_mbit"])
        for j in r["jobs"]:
            for e in j["errors"]:
                print(f"    job {j['job']}: {e}")
        for switch, steps in r.get("p4_next_steps", {}).items():
            done = ", ".join(f"{step} {n}" for step, n in steps.items() if n)
            print(f"          BMv2 {switch}: {done or 'no ATP packets'}")
        for switch, clock in r.get("claim_clock", {}).items():
            if clock.get("failures"):
                print(f"          BMv2 {switch}: CLAIM CLOCK FAILED {clock['failures']} writes "
                      f"(last: {clock['last_error']}): claims aged late")
    if rec.get("atp_share_of_ceiling") is not None:
        print(f"  ATP (all jobs together, as they share host links) at "
              f"{rec['atp_share_of_ceiling'] * 100:.0f}% of its wire ceiling")


def print_congestion(r, rate_mbit):
    counts = [f"{key.replace('_', ' ')} {r[key]}" for key in
              ("ecn_marks", "window_cuts", "retransmissions") if key in r]
    line = f"          shaper drops {r.get('qdisc_drops', 0)}, socket drops {r.get('socket_drops', 0)}"
    line += (", " + ", ".join(counts)) if counts else ""
    line += f", Jain's index {r['jain_index']:.3f}" if "jain_index" in r else ""
    print(line)
    flow, delay = r.get("tcp_flow"), r.get("queue_delay")
    if flow:
        shown = (f"{flow['mbit_s']:.1f} Mbit/s ({flow['mbit_s'] / rate_mbit * 100:.0f}% of the link),"
                 f" {flow['retransmits']} retransmits" if "mbit_s" in flow else flow["error"])
        print(f"          TCP flow beside it: {shown}")
    if delay and delay.get("samples"):
        print(f"          queueing delay at {delay['link']}: mean {delay['mean_ms']:.2f} ms, "
              f"p99 {delay['p99_ms']:.2f} ms, max {delay['max_ms']:.2f} ms")


def add_common(p, sweep):
    p.add_argument("--systems", default="atp,static,ps,gloo",
                   help="comma list of atp, static (SwitchML-style slices), ps (PS only), gloo")
    if sweep:
        p.add_argument("--floats", default="2000000", help="comma list: floats per allreduce")
    else:
        p.add_argument("--floats", type=int, default=2_000_000, help="floats per allreduce")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--loss", type=float, default=0.0, help="drop probability in every switch")
    p.add_argument("--aggregators", type=int, default=1024, help="pool of each switch")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--compute-ms", type=float, default=0,
                   help="ATP workers idle this long before each allreduce (a training step's "
                        "computation; jobs then contend only part of the time)")
    p.add_argument("--values-per-packet", type=int, default=256, help="K")
    p.add_argument("--mtu", type=int, default=1500,
                   help="every link's MTU (9000: jumbo frames, for K up to 1024 in one datagram)")
    p.add_argument("--ecn-backlog-kb", type=float, default=None,
                   help="software switches mark ECN while their socket's kernel backlog exceeds "
                        "this (KiB; 0: never; default: the cluster file's, 128)")
    p.add_argument("--ecn-receive-backlog-kb", type=float, default=None,
                   help="... and while what they received and have not read exceeds this (KiB; "
                        "0: never; default: the cluster file's, 1024)")
    p.add_argument("--no-verify", action="store_true",
                   help="ATP workers skip checking each result against the exact sum (which "
                        "regenerates every worker's gradients: most of their user CPU); results "
                        "are then reported as unchecked")
    p.add_argument("--no-congestion-control", action="store_true",
                   help="ATP workers keep their window at its ceiling (the incast baseline)")
    p.add_argument("--aggregator-window", action="store_true",
                   help="ATP workers also keep the A2TP-style aggregator window (collisions "
                        "shrink it, down to half the congestion window; docs/engines.md)")
    p.add_argument("--ce-mark", type=float, default=0.0,
                   help="share of ATP packets entering each switch that iptables marks CE")
    p.add_argument("--tcp-flow", action="store_true",
                   help="an iperf3 TCP flow from rack 0's switch to PS host 0 during each run")
    p.add_argument("--timeout", type=float, default=600, help="seconds per system run")
    p.add_argument("--keep", action="store_true", help="keep each run's folder (configs, reports, logs)")
    p.add_argument("--json", metavar="FILE", help="write the results here")
    add_switch_options(p)


def add_switch_options(p):
    p.add_argument("--switch", choices=("software", "bmv2"), default="software",
                   help="what the switches run: `atp switch`, or the P4 program on BMv2 "
                        "simple_switch, each programmed by its `atp p4 agent` (slow: small "
                        "tensors; Gloo's TCP crosses it on one rack only)")
    p.add_argument("--p4-program", metavar="JSON",
                   help="with --switch bmv2: the compiled p4/v1model/atp.p4 (default: compile it, "
                        "about a minute)")


def parse_systems(text):
    systems = [s for s in text.split(",") if s]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad or not systems:
        raise SystemExit(f"atp cluster: unknown systems {bad}; choose from {', '.join(SYSTEMS)}")
    return systems


def ints(text):
    return [int(x) for x in text.split(",") if x]


def bench(args, systems):
    points = [(w, r, j, rate, f) for w in ints(args.workers) for r in ints(args.racks)
              for j in ints(args.jobs) for rate in ints(args.rate_mbit) for f in ints(args.floats)
              if r <= w]
    os.makedirs(args.out, exist_ok=True)
    records, done, total = [], 0, len(points) * len(systems)

    def progress():
        nonlocal done
        done += 1
        filled = int(30 * done / total)
        print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} runs", end="", file=sys.stderr,
              flush=True)

    for w, r, j, rate, f in points:
        point = argparse.Namespace(**vars(args))
        point.workers, point.racks, point.jobs, point.rate_mbit, point.floats = w, r, j, rate, f
        records.append(run_point(point, systems, progress))
    print(file=sys.stderr)
    for rec in records:
        print_record(rec)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(records, f, indent=1)
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["racks", "workers", "jobs", "rate_mbit", "floats", "system", "exact",
                      "mean_job_algbw_gbps", "wire_ceiling_gbps", "atp_over_system"])
        for rec in records:
            for s, res in rec["systems"].items():
                out.writerow([rec["racks"], rec["workers"], rec["jobs"], rec["rate_mbit"], rec["floats"],
                              s, res["exact"], f"{res['mean_job_algbw_gbps']:.4f}",
                              f"{rec['wire_ceiling_gbps']:.4f}", rec.get("atp_vs", {}).get(s) or ""])
    plot(records, args.out)
    return 0 if all(res["ok"] for rec in records for res in rec["systems"].values()) else 1


def plot(records, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("atp cluster bench: matplotlib missing (scripts/setup.sh --plots): no plots",
              file=sys.stderr)
        return
    labels = [f"w{r['workers']} r{r['racks']} j{r['jobs']}\n{r['rate_mbit']}M {r['floats'] * 4 // 1_000_000}MB"
              for r in records]
    systems = sorted({s for r in records for s in r["systems"]})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(records)), 4))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        ax.bar([x + i * width for x in range(len(records))],
               [r["systems"].get(s, {}).get("mean_job_algbw_gbps", 0) for r in records], width, label=s)
    ax.plot([x + 0.4 - width / 2 for x in range(len(records))], [r["wire_ceiling_gbps"] for r in records],
            "k_", markersize=20, label="ATP wire ceiling")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(records))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("mean job algorithm bandwidth (Gbit/s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "algbw.png"), dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="atp cluster", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="build the cluster, run every system once, tear it down")
    run.add_argument("--racks", type=int, default=1)
    run.add_argument("--workers", type=int, default=4, help="workers per job")
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument("--rate-mbit", type=int, default=1000, help="every link's rate")
    add_common(run, sweep=False)
    sweep = sub.add_parser("bench", help="sweep topologies and sizes; JSON, CSV and a plot")
    sweep.add_argument("--racks", default="1", help="comma list")
    sweep.add_argument("--workers", default="2,4", help="comma list")
    sweep.add_argument("--jobs", default="1,2", help="comma list")
    sweep.add_argument("--rate-mbit", default="1000", help="comma list")
    sweep.add_argument("--out", default="cluster-results", help="results folder")
    add_common(sweep, sweep=True)
    train = sub.add_parser("train", help="PyTorch DDP under torchrun, ATP's backend against "
                                         "Gloo (python/atp/cluster_train.py)")
    train.add_argument("--racks", type=int, default=1)
    train.add_argument("--workers", type=int, default=4, help="workers (hosts) per job")
    train.add_argument("--jobs", type=int, default=1, help="torchrun launches at once")
    train.add_argument("--rate-mbit", type=int, default=200, help="every link's rate")
    train.add_argument("--epochs", type=int, default=1, help="23 steps each")
    train.add_argument("--hidden", type=int, default=512,
                       help="the MLP's width: gradient bytes per step grow as its square")
    train.add_argument("--gradients", choices=["float32", "float16", "bfloat16"],
                       default="float32", help="the dtype DDP's buckets are summed in "
                       "(float16, bfloat16: a compression hook; Gloo has no bfloat16 sum and runs "
                       "float32 then)")
    train.add_argument("--sharded", action="store_true",
                       help="FSDP's communication instead of DDP's: gradients reduce-scattered, "
                       "each rank updating its shard, shards all-gathered")
    train.add_argument("--values-per-packet", type=int, default=256, help="K")
    train.add_argument("--window", type=int, default=64)
    train.add_argument("--aggregators", type=int, default=1024, help="pool of each switch")
    train.add_argument("--mtu", type=int, default=1500)
    train.add_argument("--tolerance", type=float, default=1e-3,
                       help="largest loss difference between ATP and Gloo accepted")
    train.add_argument("--timeout", type=float, default=900, help="seconds per backend")
    train.add_argument("--keep", action="store_true", help="keep the run's folder")
    train.add_argument("--json", metavar="FILE", help="write the results here")
    add_switch_options(train)
    train.set_defaults(systems="atp,gloo", ce_mark=0.0, tcp_flow=False,
                       loss=0.0, ecn_backlog_kb=None, ecn_receive_backlog_kb=None,
                       no_congestion_control=False, aggregator_window=False)
    args = parser.parse_args(argv)
    systems = parse_systems(args.systems)
    if not 1280 <= args.mtu <= 65535:
        parser.error("--mtu must be 1280..65535")
    ip_packet = 4 * args.values_per_packet + HEADER_BYTES - 14  # what the MTU bounds: no Ethernet
    if ip_packet > args.mtu:
        parser.error(f"--values-per-packet {args.values_per_packet} makes {ip_packet}-byte IP packets: "
                     "raise --mtu (jumbo frames: 9000) rather than fragment them")
    if not 0 <= args.ce_mark <= 1:
        parser.error("--ce-mark is a probability: 0..1")
    if args.tcp_flow and shutil.which("iperf3") is None:
        parser.error("--tcp-flow needs iperf3 (scripts/setup.sh installs it)")
    if args.switch == "bmv2":
        if args.ce_mark or args.ecn_backlog_kb is not None or args.ecn_receive_backlog_kb is not None:
            parser.error("--ce-mark and --ecn-*backlog-kb act on software switches (BMv2 marks "
                         "from its own queue depth)")
        if "gloo" in systems and args.racks > 1:
            parser.error("--switch bmv2 runs Gloo on one rack only (the P4 switches route plain "
                         "IPv4 to their neighbours, not across racks)")
        missing = bmv2.tools_missing(compiling=not args.p4_program)
        if missing:
            print(f"atp cluster: --switch bmv2 needs {', '.join(missing)} on PATH "
                  "(docs/p4.md: installing the P4 toolchain)", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("atp cluster: needs root", file=sys.stderr)
        return 2
    lock = take_cluster_lock()  # held until this process exits
    if lock is None:
        print(f"atp cluster: another atp cluster is running (it holds {LOCK_FILE}); "
              "wait for it to finish", file=sys.stderr)
        return 2
    reason = namespaces_available()
    if reason:
        print(f"atp cluster: {reason}", file=sys.stderr)
        return 2

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        if args.switch == "bmv2" and not args.p4_program:
            print("atp cluster: compiling p4/v1model/atp.p4 for BMv2 (about a minute)",
                  file=sys.stderr)
            args.p4_program = bmv2.compile_program(tempfile.mkdtemp(prefix="atp-p4-"))
        if args.command == "bench":
            return bench(args, systems)
        if args.command == "train":
            if args.racks < 1 or args.workers < args.racks or args.jobs < 1 or args.epochs < 1:
                parser.error("need racks >= 1, workers >= racks, jobs >= 1, epochs >= 1")
            if args.sharded and args.gradients != "float32":
                parser.error("--sharded sums float32 gradients (--gradients is DDP's compression hook)")
            return cluster_train.train(args)
        if args.racks < 1 or args.workers < args.racks or args.jobs < 1 or args.floats < 1:
            parser.error("need racks >= 1, workers >= racks, jobs >= 1, floats >= 1")
        record = run_point(args, systems)
        print_record(record)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(record, f, indent=1)
        return 0 if all(r["ok"] for r in record["systems"].values()) else 1
    except KeyboardInterrupt:
        print("\natp cluster: interrupted; namespaces removed", file=sys.stderr)
        return 130
    finally:
        teardown()


if __name__ == "__main__":
    sys.exit(main())
