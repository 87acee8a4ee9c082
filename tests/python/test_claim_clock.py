"""The claim clock of a Tofino's control plane: `claim_clock_forever` of the bfrt_python script
`atp p4 config --target tofino` writes. (A BMv2 switch's clock is its `atp p4 agent`'s, tested
in tests/p4_switch_agent_test.cpp.)"""
import time


class FakeRegister:
    """bfrt's claim_epoch register: writes succeed until `fail_after`, then fail."""

    def __init__(self, fail_after):
        self.fail_after, self.epochs = fail_after, []

    def mod(self, REGISTER_INDEX, f1):
        if len(self.epochs) >= self.fail_after:
            self.epochs.append(None)
            raise RuntimeError("bf_rt: table operation failed\n(device busy)")
        self.epochs.append(f1)


def tofino_clock(register):
    """`claim_clock_forever` of the bfrt_python script `atp p4 config --target tofino` writes,
    defined over a fake `p4` whose claim_epoch is `register`."""
    import subprocess
    import types
    import atp.launch
    from pathlib import Path
    example = Path(__file__).resolve().parents[2] / "examples" / "p4_two_racks.toml"
    script = subprocess.run([atp.launch.atp_binary(), "p4", "config", "--config", str(example),
                             "--switch", "rackA", "--target", "tofino"],
                            check=True, capture_output=True, text=True).stdout
    # The long-lived loops and their heartbeat helper, without the entries before them.
    clock = "def atp_heartbeat(" + script.partition("\ndef atp_heartbeat(")[2]
    p4 = types.SimpleNamespace(AtpIngress=types.SimpleNamespace(claim_epoch=register))
    scope = {"p4": p4}
    exec(clock, scope)
    return scope["claim_clock_forever"]


def test_the_tofino_clock_says_when_it_stops_ticking_and_keeps_trying(tmp_path, capsys):
    """The Tofino's claim clock once died silently with its first failed write (issue 31 item
    14): now each failure goes to stderr and the heartbeat file, and the next tick tries again."""
    heartbeat = tmp_path / "clock"
    register = FakeRegister(fail_after=2)
    clock = tofino_clock(register)
    clock(stale_after_s=0.008, heartbeat=str(heartbeat), ticks=2)
    assert register.epochs == [2, 2]
    line = heartbeat.read_text().split()
    assert line[1:] == ["epoch", "2", "ok", "failures", "0"]
    assert abs(float(line[0]) - time.time()) < 5
    clock(stale_after_s=0.008, heartbeat=str(heartbeat), ticks=3)
    assert len(register.epochs) == 5  # every tick tried, after the first failure too
    line = heartbeat.read_text()
    assert " FAILED bf_rt: table operation failed (device busy) failures 3" in line
    assert capsys.readouterr().err.count("atp claim clock: epoch ") == 3
