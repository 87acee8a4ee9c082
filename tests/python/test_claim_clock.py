"""The BMv2 runs' claim clock (python/atp/bmv2.py): a switch whose epoch stops ticking is told at
once and in the run's report, and the other switches keep ticking (issue 31 item 14). Before,
the first failing switch ended the thread for every switch, and nothing reported it."""
import io
import time

from atp.bmv2 import ClaimClock


class FakeSwitch:
    def __init__(self, name, fail_after=None):
        self.name, self.fail_after, self.calls = name, fail_after, 0

    def tick(self):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("simple_switch_CLI: connection refused")


def test_a_stopped_switch_is_reported_and_the_others_keep_ticking():
    good, dying = FakeSwitch("rack0"), FakeSwitch("spine", fail_after=2)
    log = io.StringIO()
    clock = ClaimClock([dying, good], log, period=0.005)
    clock.start()
    deadline = time.monotonic() + 5
    while good.calls < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    clock.done.set()
    clock.join(timeout=5)
    report = clock.report()
    assert good.calls >= 20
    assert report["ticks"]["rack0"] == good.calls
    assert report["ticks"]["spine"] == 2
    assert report["stopped"] == {"spine": "simple_switch_CLI: connection refused"}
    assert "claim clock of switch spine stopped" in log.getvalue()
    assert dying.calls == 3  # not ticked again once it failed
