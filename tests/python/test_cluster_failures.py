"""What `atp cluster run --switch bmv2` does when a run cannot start (issue 33, found while
trying it): a static slice the P4 programs could not map (3 jobs on 32 aggregators gave 10)
ended in a traceback from the cleanup (`RunWatch` had no `drops`), which hid the cause, and left
simple_switch running. These run without root, BMv2 or namespaces."""
import argparse
import subprocess

import atp.bmv2 as bmv2
import atp.launch
from atp.topology import cleanup_step
from atp.cluster_traffic import RunWatch
from atp.topology import Topology, cluster_file


def run_args(**overrides):
    args = dict(jobs=3, workers=2, window=64, values_per_packet=14, aggregators=32,
                ecn_backlog_kb=None, ecn_receive_backlog_kb=None, no_congestion_control=False,
                aggregator_window=False, switch="bmv2")
    args.update(overrides)
    return argparse.Namespace(**args)


def test_a_p4_static_slice_is_a_power_of_two_the_switch_config_accepts(tmp_path):
    """Each job's share, cut to a power of two, as the simulator's static is: `atp p4 config`
    derives entries from it (it refused the whole share of 10)."""
    topo = bmv2.Bmv2Topology(1, 2, 3, 100)  # its wiring by hand: no namespaces here
    rack = topo.rack_switch(0)
    topo.wiring[rack] = {}
    for h in range(2):
        topo.attach(rack, f"h{h}", topo.host_ip(0, h), bmv2.mac_of(topo.host_ip(0, h), 0))
    for p in range(3):
        topo.attach(rack, f"p{p}", topo.server_ip(p), bmv2.mac_of(topo.server_ip(p), 0))
    text = cluster_file(topo, run_args(), "static")
    assert text.count("static_aggregators = 8") == 3
    config = tmp_path / "cluster.toml"
    config.write_text(text)
    derived = subprocess.run([atp.launch.atp_binary(), "p4", "config", "--config", str(config),
                              "--switch", "rack0"], capture_output=True, text=True)
    assert derived.returncode == 0, derived.stderr
    # A software switch keeps the whole share (its own derivation), and ATP names no slice.
    software = Topology(1, 2, 3, 100)
    assert "static_aggregators" not in cluster_file(software, run_args(switch="software"), "static")
    assert "static_aggregators" not in cluster_file(topo, run_args(), "atp")


def test_a_run_that_fails_before_it_starts_measures_nothing_and_raises_nothing():
    watch = RunWatch(None, lambda: [], False, None)
    assert watch.stop() == {}


def test_a_failing_cleanup_step_is_said_and_does_not_hide_the_runs_error(capsys):
    def broken():
        raise AttributeError("'RunWatch' object has no attribute 'drops'")
    assert cleanup_step(broken, {}) == {}
    assert "cleanup: AttributeError" in capsys.readouterr().err
    assert cleanup_step(lambda: 3, 0) == 3


def test_no_simple_switch_starts_unless_every_switchs_entries_derive(monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr(bmv2, "Bmv2Switch", lambda *a, **k: started.append(a) or None)

    class Refused:
        returncode, stdout = 1, ""
        stderr = "job 1: the P4 programs need a power-of-two static slice, not 10"

    class Fine:
        returncode, stdout, stderr = 0, "table_add x y\n", ""

    answers = iter([Fine(), Refused()])
    monkeypatch.setattr(bmv2.subprocess, "run", lambda *a, **k: next(answers))
    topo = bmv2.Bmv2Topology(2, 1, 1, 100)
    topo.wiring = {ns: {} for ns, _ in topo.switch_names()}
    try:
        topo.start_switches("atp.json", str(tmp_path / "cluster.toml"), None)
        raise AssertionError("started")
    except RuntimeError as e:
        assert "atp p4 config --switch rack1: job 1: the P4 programs need a power-of-two" in str(e)
    assert started == []  # the first switch's entries derived, but nothing was started
