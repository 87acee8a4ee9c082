"""Smoke run of `atp cluster` (in make test): 2 workers in one rack, a low link rate, small
tensors, ATP and Gloo. Both must be exact and the report well formed. Skips with a message
where network namespaces are not available (needs root, ip, tc, iptables)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ATP = os.environ.get("ATP_BIN", os.path.join(os.path.dirname(__file__), "../../build/bin/atp"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(ATP)), "..", "python"))
from atp import topology  # noqa: E402

REASON = topology.namespaces_available()


class Layout(unittest.TestCase):
    def test_the_runs_stand_on_the_topology_not_on_the_command_that_picks_them(self):
        """atp.topology is what the allreduce runs (atp.cluster), the BMv2 switches (atp.bmv2)
        and the training run (atp.cluster_train) share; none of them imports atp.cluster back."""
        check = ("import sys, atp.topology, atp.bmv2, atp.cluster_train; "
                 "print(sorted(m for m in sys.modules if m.startswith('atp.')))")
        env = dict(os.environ, PYTHONPATH=sys.path[0])
        loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                                env=env, check=True).stdout
        self.assertIn("'atp.topology'", loaded)
        self.assertNotIn("'atp.cluster'", loaded)


@unittest.skipIf(REASON, f"atp cluster: {REASON} (skipped)")
class ClusterSmoke(unittest.TestCase):
    def test_atp_and_gloo_are_exact_on_shaped_namespaces(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.json")
            run = subprocess.run([ATP, "cluster", "run", "--racks", "1", "--workers", "2", "--jobs",
                                  "1", "--rate-mbit", "100", "--floats", "100000", "--iterations",
                                  "2", "--systems", "atp,gloo", "--json", out],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            with open(out) as f:
                report = json.load(f)
        self.assertEqual(set(report["systems"]), {"atp", "gloo"})
        for system, result in report["systems"].items():
            self.assertTrue(result["exact"], (system, result))
            job = result["jobs"][0]
            self.assertGreater(job["algbw_gbps"], 0)
            # Nothing can beat the shaped link: 100 Mbit/s (a little slack for tbf's burst).
            self.assertLess(job["algbw_gbps"], 0.11)
            self.assertEqual(len(job["workers"]), 2)
        self.assertLess(0, report["wire_ceiling_gbps"])
        self.assertIn("gloo", report["atp_vs"])
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(topology.PREFIX, listing)  # torn down

    def run_train(self, *extra):
        """`atp cluster train` of small jobs (2 workers, 100 Mbit/s, --hidden 128); its report.
        Skips where the torch backend is not built."""
        try:
            import torch  # noqa: F401
            from atp import _c10d  # noqa: F401
        except ImportError as e:
            self.skipTest(f"the torch backend is not built ({e})")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.json")
            run = subprocess.run([ATP, "cluster", "train", "--workers", "2", "--rate-mbit", "100",
                                  "--hidden", "128", "--json", out, *extra],
                                 capture_output=True, text=True, timeout=600)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            with open(out) as f:
                return json.load(f)

    def test_ddp_under_torchrun_on_two_racks_matches_gloo(self):
        """`atp cluster train`: the torch backend's jobs admitted by a controller in a switch
        namespace, one torchrun per host across two racks; losses equal to Gloo's."""
        report = self.run_train("--racks", "2", "--jobs", "2")
        self.assertTrue(report["ok"])
        self.assertEqual(len(report["per_job"]), 2)
        for job in report["per_job"]:
            self.assertLess(job["largest_loss_difference"], 1e-3)
            self.assertGreater(job["atp"]["iterations_per_s"], 0)
            self.assertEqual(job["atp"]["world"], 2)
        self.assertEqual(len({j["atp"]["job"] for j in report["per_job"]}), 2)  # admitted apart

    def test_ddp_with_bfloat16_gradients_trains_through_atp(self):
        """`atp cluster train --gradients bfloat16`: DDP's buckets compressed to bfloat16 go
        through ATP (this torch's Gloo cannot sum them, and runs float32); the loss curves agree
        within bfloat16's rounding."""
        report = self.run_train("--gradients", "bfloat16")
        self.assertTrue(report["ok"])
        job = report["per_job"][0]
        self.assertEqual(job["atp"]["gradients"], "bfloat16")
        self.assertLess(job["largest_loss_difference"], 1e-3)

    def test_sharded_training_reduce_scatters_through_atp(self):
        """`atp cluster train --sharded`: FSDP's communication (reduce-scatter, shard update,
        all-gather); every reduce-scatter goes through ATP, and the losses equal Gloo's
        (allreduce and slice) within float32 rounding."""
        report = self.run_train("--sharded")
        self.assertTrue(report["ok"])
        job = report["per_job"][0]
        self.assertTrue(job["atp"]["sharded"])
        self.assertLess(job["largest_loss_difference"], 1e-3)
        scattered = job["atp"]["traffic"]["_reduce_scatter_base Float"]
        self.assertEqual(scattered["atp_calls"], len(job["atp"]["losses"]))  # one a step
        self.assertEqual(scattered["gloo_calls"], 0)

    def test_the_aggregator_window_reaches_the_workers_and_stays_exact(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.json")
            # Two jobs on 8 aggregators for windows of 16: their seqs collide.
            run = subprocess.run([ATP, "cluster", "run", "--racks", "1", "--workers", "2", "--jobs",
                                  "2", "--rate-mbit", "100", "--floats", "100000", "--iterations",
                                  "2", "--systems", "atp", "--aggregators", "8", "--window", "16",
                                  "--aggregator-window", "--json", out],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            with open(out) as f:
                report = json.load(f)
        self.assertTrue(report["aggregator_window"])
        self.assertTrue(report["systems"]["atp"]["exact"], report["systems"]["atp"])

    def test_loss_in_the_switches_is_recovered_exactly(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.json")
            run = subprocess.run([ATP, "cluster", "run", "--workers", "2", "--rate-mbit", "100",
                                  "--floats", "200000", "--iterations", "2", "--loss", "0.02",
                                  "--systems", "atp", "--json", out],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            with open(out) as f:
                workers = json.load(f)["systems"]["atp"]["jobs"][0]["workers"]
        for w in workers:
            self.assertTrue(w["exact"], w)
        self.assertGreater(sum(w["retransmissions"] for w in workers), 0)  # the drops happened

    def run_atp(self, *extra):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "report.json")
            run = subprocess.run([ATP, "cluster", "run", "--workers", "2", "--rate-mbit", "100",
                                  "--floats", "100000", "--iterations", "2", "--systems", "atp",
                                  "--json", out, *extra], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            with open(out) as f:
                return json.load(f)["systems"]["atp"]

    def test_a_ce_mark_set_by_the_kernel_reaches_the_workers_windows(self):
        # The switches' own backlog marking is off, so marks can only come from the IP header:
        # iptables (TOS) sets CE on packets entering the switch namespaces; the switch daemon
        # reads it (IP_RECVTOS), keeps it in the aggregator, the PS copies it into the result.
        off = ("--ecn-backlog-kb", "0", "--ecn-receive-backlog-kb", "0")
        quiet = self.run_atp(*off)
        self.assertEqual((quiet["ecn_marks"], quiet["window_cuts"]), (0, 0), quiet)
        marked = self.run_atp(*off, "--ce-mark", "0.05")
        self.assertTrue(marked["exact"], marked)
        for w in marked["jobs"][0]["workers"]:
            self.assertGreater(w["ecn_marks"], 0, w)
            self.assertGreater(w["window_cuts"], 0, w)
        self.assertEqual(marked["qdisc_drops"], 0)  # marked, not dropped

    def test_unchecked_workers_count_when_they_finish_and_say_so(self):
        unchecked = self.run_atp("--no-verify")  # run_atp requires exit code 0
        self.assertFalse(unchecked["exact"])
        self.assertTrue(unchecked["ok"])
        self.assertFalse(unchecked["checked"])
        self.assertGreater(unchecked["mean_job_algbw_gbps"], 0)

    def test_jumbo_frames_carry_k_1024_and_a_k_beyond_the_mtu_is_refused(self):
        refused = subprocess.run([ATP, "cluster", "run", "--values-per-packet", "1024", "--systems",
                                  "atp"], capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("raise --mtu", refused.stderr)
        jumbo = self.run_atp("--values-per-packet", "1024", "--mtu", "9000")
        self.assertTrue(jumbo["exact"], jumbo)

    def test_a_failed_run_still_tears_the_namespaces_down(self):
        run = subprocess.run([ATP, "cluster", "run", "--workers", "2", "--floats", "1000",
                              "--systems", "atp", "--aggregators", "0"],
                             capture_output=True, text=True, timeout=120)
        self.assertNotEqual(run.returncode, 0)
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(topology.PREFIX, listing)

    def test_a_second_cluster_run_refuses_rather_than_tear_down_the_first(self):
        lock = topology.take_cluster_lock()  # this test plays the running cluster
        self.assertIsNotNone(lock)
        try:
            subprocess.run(["ip", "netns", "add", topology.PREFIX + "busy"], check=True)
            run = subprocess.run([ATP, "cluster", "run", "--workers", "2", "--floats", "1000",
                                  "--systems", "atp"], capture_output=True, text=True, timeout=60)
            self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
            self.assertIn("another atp cluster is running", run.stderr)
            listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            self.assertIn(topology.PREFIX + "busy", listing)  # the running one's, untouched
        finally:
            subprocess.run(["ip", "netns", "del", topology.PREFIX + "busy"])
            lock.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
