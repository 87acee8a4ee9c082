"""`atp cluster train`: PyTorch DDP under torchrun on the emulated cluster, ATP against Gloo.

Each job is one torchrun launch of examples/ddp_train.py with a process on each of its hosts
(worker k of every job on the same host, as `atp cluster run` places them), over the same
shaped links, one system after the other in the same run:

    atp   `atp switch` per switch and `atp ps` per job from a fabric file with no jobs, and
          `atp controller` in rack 0's switch namespace: each launch finds it in
          $ATP_CONTROLLER and is admitted when its process group is created
    gloo  the same script with --backend gloo: DDP's ring allreduce over TCP

With --switch bmv2 every switch is BMv2 simple_switch running p4/v1model/atp.p4, programmed by
its `atp p4 agent`: the controller admits each launch's job on the P4 switch through it, as on
`atp switch`, and removes it when the job ends; Gloo's TCP crosses the same switch (one rack).

Per job: iterations/s of both, their ratio, and the largest difference between the loss curves.
--hidden sets the model's width and so the gradient bytes per step (4 x (64 h + h^2 + 10 h));
--gradients float16 or bfloat16 sums DDP's buckets in half precision (a compression hook: half
the bytes; this torch's Gloo has no bfloat16 sum, so Gloo then runs float32, the baseline);
--sharded trains FSDP's way (examples/sharded_optimizer.py: gradients reduce-scattered through
ATP, each rank updating its shard, shards all-gathered; Gloo, with no flat reduce-scatter,
allreduces and slices).
"""
import json
import os
import signal
import sys
import time

from .bmv2 import Bmv2Topology
from .launch import atp_binary, source_file
from .topology import Topology, cleanup_step, cluster_file, topology_up, wait_with_cpu

CONTROLLER_PORT = 50051


def fabric_file(topo, args, folder):
    """The cluster file of `atp cluster run` without its jobs, control sockets in `folder`."""
    text = cluster_file(topo, args, "atp").split("[[job]]")[0]
    lines = []
    for line in text.splitlines():
        lines.append(line)
        if line.startswith("name = "):
            name = line.split('"')[1]
            lines.append(f'control = "{folder}/{name}.sock"')
    return "\n".join(lines) + "\n"


def start_fabric(topo, args, folder, log):
    """Switches, PSs and the controller; returns their processes and the controller's address.
    BMv2 switches (started by the caller) are programmed by their agents, on the sockets the
    fabric file names; the controller then runs on PS host 0, which every host reaches through
    the P4 switch (a switch namespace has no address of its own there)."""
    binary = atp_binary()
    fabric = fabric_path(folder)
    processes = []
    if args.switch != "bmv2":
        for ns, name in topo.switch_names():
            processes.append(topo.spawn(ns, [binary, "switch", "--config", fabric, "--name", name,
                                             "--log-level", "warn", "--control",
                                             f"{folder}/{name}.sock"], log))
    for j in range(args.jobs):
        name = f"ps{j + 1}"
        processes.append(topo.spawn(topo.server(j), [binary, "ps", "--config", fabric, "--name",
                                                     name, "--log-level", "warn", "--control",
                                                     f"{folder}/{name}.sock"], log))
    time.sleep(0.5)
    if args.switch == "bmv2":
        where, address = topo.server(0), f"{topo.server_ip(0)}:{CONTROLLER_PORT}"
    else:
        where, address = topo.rack_switch(0), f"{topo.rack_switch_ip(0)}:{CONTROLLER_PORT}"
    processes.append(topo.spawn(where, [
        binary, "controller", "--config", fabric, "--listen", address, "--state",
        os.path.join(folder, "controller-state.json"), "--log-level", "warn"], log))
    time.sleep(1.0)
    for p in processes:
        if p.poll() is not None:
            raise RuntimeError(f"a daemon exited at start (code {p.returncode}); see {log.name}")
    return processes, address


def fabric_path(folder):
    return os.path.join(folder, "fabric.toml")


def launch_job(topo, args, backend, job, folder, env, log):
    """One torchrun per host of job `job` (static rendezvous at its rank 0's host)."""
    master = topo.host_ip(*topo.place(0))
    report = os.path.join(folder, f"{backend}-job{job}.json")
    processes = []
    for k in range(args.workers):
        r, h = topo.place(k)
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(args.workers),
                   "--nproc_per_node", "1", "--node_rank", str(k), "--master_addr", master,
                   "--master_port", str(29500 + job), "--redirects", "1", "--tee", "1",
                   "--log_dir", os.path.join(folder, f"{backend}-job{job}-rank{k}"),
                   source_file("examples", "ddp_train.py"), "--backend", backend, "--json", report,
                   "--epochs", str(args.epochs), "--hidden", str(args.hidden),
                   "--seed", str(job), "--gradients", args.gradients] + \
                  (["--sharded"] if args.sharded else [])
        worker_env = dict(env, ATP_RACK=f"rack{r}")
        processes.append(subprocess_in(topo.host(r, h), command, worker_env, log))
    return processes, report


def subprocess_in(ns, command, env, log):
    import subprocess
    return subprocess.Popen(["ip", "netns", "exec", ns] + command, env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def run_backend(topo, args, backend, workdir):
    """Every job at once on `backend`; returns {job: rank 0's report}, the CPU seconds and,
    with --switch bmv2, what the P4 switches did (bmv2.Bmv2Topology.stop_switches)."""
    folder = os.path.join(workdir, backend)
    os.makedirs(folder, exist_ok=True)
    log = open(os.path.join(folder, "processes.log"), "w")
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=package, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="eth0",
               ATP_VALUES_PER_PACKET=str(args.values_per_packet), ATP_WINDOW=str(args.window))
    daemons, launches, cpu, p4 = [], [], {"workers": 0.0, "daemons": 0.0}, None
    try:
        with open(fabric_path(folder), "w") as f:
            f.write(fabric_file(topo, args, folder))
        if args.switch == "bmv2":  # every packet of either backend crosses them
            log.flush()
            topo.start_switches(args.p4_program, fabric_path(folder), log)
        if backend == "atp":
            daemons, env["ATP_CONTROLLER"] = start_fabric(topo, args, folder, log)
        for job in range(1, args.jobs + 1):
            launches.append(launch_job(topo, args, backend, job, folder, env, log))
        deadline = time.time() + args.timeout
        for processes, _ in launches:
            for p in processes:
                cpu["workers"] += wait_with_cpu(p, max(1, deadline - time.time()))
    finally:
        for p in daemons:
            p.send_signal(signal.SIGTERM)
        for p in daemons:
            cpu["daemons"] += wait_with_cpu(p, 10)
        if args.switch == "bmv2":
            p4 = cleanup_step(topo.stop_switches, None)
        log.close()
    reports = {}
    for job, (processes, report) in enumerate(launches, start=1):
        try:
            with open(report) as f:
                reports[job] = json.load(f)
        except (OSError, ValueError):
            codes = [p.returncode for p in processes]
            reports[job] = {"error": f"no report (exit codes {codes}); see {log.name}"}
    return reports, cpu, p4


def train(args):
    hosts = -(-args.workers // args.racks)
    kind = Bmv2Topology if args.switch == "bmv2" else Topology
    topo = kind(args.racks, hosts, args.jobs, args.rate_mbit, mtu=args.mtu)
    results = {}
    with topology_up(topo, args.keep, prefix="atp-cluster-train-") as workdir:
        for backend in ("atp", "gloo"):
            results[backend] = run_backend(topo, args, backend, workdir)
    record = summarize(args, results)
    print_summary(record)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0 if record["ok"] else 1


def summarize(args, results):
    jobs, ok = [], True
    for job in range(1, args.jobs + 1):
        a, g = results["atp"][0][job], results["gloo"][0][job]
        entry = {"job": job, "atp": a, "gloo": g}
        if "losses" in a and "losses" in g:
            entry["largest_loss_difference"] = max(abs(p - q) for p, q in zip(a["losses"], g["losses"]))
            entry["atp_vs_gloo"] = a["iterations_per_s"] / g["iterations_per_s"]
            ok = ok and entry["largest_loss_difference"] <= args.tolerance
        else:
            ok = False
        jobs.append(entry)
    gradient_bytes = (4 if args.gradients == "float32" else 2) * (64 * args.hidden + args.hidden + args.hidden * args.hidden + args.hidden
                          + 10 * args.hidden + 10)
    record = {"racks": args.racks, "workers": args.workers, "jobs": args.jobs,
              "rate_mbit": args.rate_mbit, "epochs": args.epochs, "hidden": args.hidden,
              "gradients": args.gradients, "sharded": args.sharded,
              "gradient_bytes_per_step": gradient_bytes, "values_per_packet": args.values_per_packet,
              "switch": args.switch, "cpu_s": {b: results[b][1] for b in results}, "per_job": jobs,
              "ok": ok}
    if args.switch == "bmv2":
        record["p4_switches"] = {b: results[b][2] for b in results}
    return record


def print_summary(record):
    print(f"DDP under torchrun: {record['jobs']} job(s) x {record['workers']} workers, "
          f"{record['racks']} rack(s), {record['rate_mbit']} Mbit/s links, "
          f"{record['gradient_bytes_per_step'] / 1e6:.2f} MB of {record['gradients']} gradients "
          f"per step" + (", sharded (reduce-scatter, all-gather)" if record["sharded"] else ""))
    for j in record["per_job"]:
        if "atp_vs_gloo" not in j:
            print(f"  job {j['job']}: failed: ATP {j['atp'].get('error', 'ok')}; "
                  f"Gloo {j['gloo'].get('error', 'ok')}")
            continue
        print(f"  job {j['job']}: iterations/s ATP {j['atp']['iterations_per_s']:.2f} | Gloo "
              f"{j['gloo']['iterations_per_s']:.2f} (ATP/Gloo {j['atp_vs_gloo']:.2f}); loss curves "
              f"differ by at most {j['largest_loss_difference']:.2e}")
    for backend, cpu in record["cpu_s"].items():
        print(f"  CPU seconds, {backend}: workers {cpu['workers']:.1f}, daemons {cpu['daemons']:.1f}")
    for backend, p4 in record.get("p4_switches", {}).items():
        for switch, steps in (p4 or {}).get("next_steps", {}).items():
            done = ", ".join(f"{step} {n}" for step, n in steps.items() if n)
            print(f"  BMv2 {switch} under {backend}: {done or 'no ATP packets'}")
