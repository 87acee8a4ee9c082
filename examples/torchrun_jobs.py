#!/usr/bin/python3
"""Two DDP jobs at once under torchrun on one ATP fabric, then the same jobs on Gloo.

A fabric of one rack switch and two parameter servers runs on this machine with `atp
controller` (atp.launch.LocalFabric). Each job is a plain `torchrun ... examples/ddp_train.py
--backend atp`: its processes find the controller in $ATP_CONTROLLER, rank 0 has the job
admitted when the process group is created and removed when it is destroyed. The same jobs
then run with `--backend gloo`. Prints each job's losses against Gloo's, the iterations/s of
both, and whether the controller holds no job at the end; exits non-zero if the loss curves
differ by more than --tolerance or a job was left behind.

    PYTHONPATH=build/python /usr/bin/python3 examples/torchrun_jobs.py [--jobs 2 --workers 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import atp.launch

HERE = os.path.dirname(os.path.abspath(__file__))


def launch(backend, job, args, directory, env):
    """One torchrun launch of ddp_train.py; returns (process, report path)."""
    report = os.path.join(directory, f"{backend}-{job}.json")
    command = atp.launch.torchrun_command(
        os.path.join(HERE, "ddp_train.py"), args.workers,
        ["--backend", backend, "--json", report, "--epochs", str(args.epochs),
         "--seed", str(args.seed + job)],
        log_dir=os.path.join(directory, f"{backend}-{job}-logs"))
    log = open(os.path.join(directory, f"{backend}-{job}.log"), "w")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), report


def run(backend, args, directory, env):
    """Every job at once; returns {job: rank 0's report}."""
    launches = {job: launch(backend, job, args, directory, env) for job in range(1, args.jobs + 1)}
    reports = {}
    for job, (process, report) in launches.items():
        if process.wait(timeout=args.timeout) != 0:
            log = open(os.path.join(directory, f"{backend}-{job}.log")).read()
            raise RuntimeError(f"{backend} job {job} exited with {process.returncode}:\n{log}")
        with open(report) as f:
            reports[job] = json.load(f)
    return reports


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="concurrent torchrun launches")
    parser.add_argument("--workers", type=int, default=2, help="processes per launch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per launch")
    parser.add_argument("--json", metavar="FILE", help="also write the reports here")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="atp-torchrun-")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with atp.launch.LocalFabric(parameter_servers=2) as fabric:
        on_atp = run("atp", args, directory, dict(env, ATP_CONTROLLER=fabric.controller))
        left = fabric.jobs()
    on_gloo = run("gloo", args, directory, env)

    worst = 0.0
    for job in range(1, args.jobs + 1):
        a, g = on_atp[job], on_gloo[job]
        diff = max(abs(p - q) for p, q in zip(a["losses"], g["losses"]))
        worst = max(worst, diff)
        print(f"job {job} (ATP job id {a['job']}): loss {a['losses'][0]:.4f} -> "
              f"{a['losses'][-1]:.4f} | Gloo {g['losses'][-1]:.4f}; largest difference {diff:.2e}; "
              f"iterations/s {a['iterations_per_s']:.1f} | {g['iterations_per_s']:.1f} "
              f"(ratio {a['iterations_per_s'] / g['iterations_per_s']:.2f})")
    ids = sorted(r["job"] for r in on_atp.values())
    print(f"ATP job ids {ids}; jobs left on the controller at the end: {len(left)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"atp": on_atp, "gloo": on_gloo, "largest_difference": worst,
                       "jobs_left": left}, f)
    ok = worst <= args.tolerance and not left and len(set(ids)) == args.jobs
    print(f"ATP and Gloo loss curves {'agree' if worst <= args.tolerance else 'DISAGREE'}: "
          f"largest difference {worst:.2e} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
