"""Real runs through the P4 program: `atp cluster run --switch bmv2` puts BMv2 simple_switch
running p4/v1model/atp.p4 in every switch namespace, programmed by its `atp p4 agent`, with real
`atp worker` and `atp ps` processes on the hosts and iptables loss on the hosts' links. Two
jobs share the switches; every result must be exact and the switches must have aggregated
(their next-step counters say so). BMv2 forwards a few thousand packets a second: small
tensors, a small window. Run by p4/conformance/run.sh (make p4-test, ctest p4_conformance)
with ATP_BIN and ATP_P4_PROGRAM (the compiled atp.json) set; skips where they are missing."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ATP = os.environ.get("ATP_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/atp"))
PROGRAM = os.environ.get("ATP_P4_PROGRAM", "")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(ATP)), "..", "python"))
from atp import topology  # noqa: E402

REASON = topology.namespaces_available()
if not REASON and not os.path.isfile(PROGRAM):
    REASON = "set ATP_P4_PROGRAM to the compiled p4/v1model/atp.p4 (p4/conformance/run.sh does)"
if not REASON and shutil.which("simple_switch") is None:
    REASON = "simple_switch is not on PATH"


def run(racks, workers, systems, loss):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "report.json")
        result = subprocess.run(
            [ATP, "cluster", "run", "--switch", "bmv2", "--p4-program", PROGRAM, "--racks",
             str(racks), "--workers", str(workers), "--jobs", "2", "--systems", systems,
             "--floats", "3000", "--values-per-packet", "64", "--window", "8", "--aggregators",
             "64", "--iterations", "2", "--loss", str(loss), "--timeout", "180", "--json", out],
            capture_output=True, text=True, timeout=900)
        print(result.stdout, file=sys.stderr)
        if result.returncode != 0:
            raise AssertionError(f"exit code {result.returncode}:\n{result.stdout}{result.stderr}")
        with open(out) as f:
            return json.load(f)


@unittest.skipIf(REASON, f"atp cluster --switch bmv2: {REASON} (skipped)")
class Bmv2Cluster(unittest.TestCase):
    def check(self, report, systems, switches):
        self.assertEqual(report["switch"], "bmv2")
        self.assertEqual(set(report["systems"]), set(systems))
        for system, result in report["systems"].items():
            self.assertTrue(result["exact"], (system, result["jobs"]))
            workers = [w for j in result["jobs"] for w in j["workers"]]
            self.assertTrue(all(w["exact"] and w["finished"] for w in workers))
            self.assertGreater(sum(w["retransmissions"] for w in workers), 0)  # the loss happened
            steps = result["p4_next_steps"]
            self.assertEqual(set(steps), set(switches))
            for switch, counts in steps.items():
                # The switch summed in its registers and multicast the sums; nothing was refused.
                self.assertGreater(counts["emit_sum"], 0, (system, switch, counts))
                self.assertGreater(counts["multicast_down"], 0, (system, switch, counts))
                self.assertEqual(counts["drop_forged"] + counts["drop_unknown_job"]
                                 + counts["drop_malformed"], 0, (system, switch, counts))
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(topology.PREFIX, listing)  # torn down

    def test_one_rack_two_jobs_dynamic_and_static_under_loss(self):
        report = run(racks=1, workers=3, systems="atp,static", loss=0.02)
        self.check(report, ["atp", "static"], ["rack0"])

    def test_two_racks_and_a_level_two_switch_under_loss(self):
        report = run(racks=2, workers=4, systems="atp", loss=0.02)
        self.check(report, ["atp"], ["rack0", "rack1", "spine"])

    def test_torchrun_jobs_the_controller_admits_on_the_p4_switch_train_as_gloo_does(self):
        """`atp cluster train --switch bmv2`: two torchrun launches, each admitted by the
        controller on the BMv2 switch through its `atp p4 agent`, train through it with the
        same loss curves as Gloo's ring; the switch summed, and held no job once they ended."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.json")
            result = subprocess.run(
                [ATP, "cluster", "train", "--switch", "bmv2", "--p4-program", PROGRAM, "--workers",
                 "2", "--jobs", "2", "--hidden", "16", "--timeout", "600", "--json", out],
                capture_output=True, text=True, timeout=1500)
            print(result.stdout, file=sys.stderr)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            with open(out) as f:
                record = json.load(f)
        self.assertTrue(record["ok"])
        for job in record["per_job"]:
            self.assertLessEqual(job["largest_loss_difference"], 1e-3, job)
        atp = record["p4_switches"]["atp"]
        steps = atp["next_steps"]["rack0"]
        self.assertGreater(steps["emit_sum"], 0, steps)
        self.assertEqual(steps["drop_forged"] + steps["drop_unknown_job"] + steps["drop_malformed"],
                         0, steps)
        self.assertEqual(atp["jobs"]["rack0"], [])  # the controller removed both
        self.assertEqual(atp["claim_clock"]["rack0"]["failures"], 0)
        self.assertGreater(atp["claim_clock"]["rack0"]["ticks"], 1)
        gloo = record["p4_switches"]["gloo"]["next_steps"]["rack0"]
        self.assertEqual(gloo["emit_sum"], 0)  # Gloo's TCP crossed it as plain IPv4


if __name__ == "__main__":
    unittest.main(verbosity=2)
