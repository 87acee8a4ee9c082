#!/usr/bin/python3
"""PyTorch's own c10d suite (torch/testing/_internal/distributed/distributed_test.py, the
_DistTestBase that Debian's python3-torch ships) against a backend: "atp" or "gloo".

    BACKEND=atp WORLD_SIZE=2 PYTHONPATH=build/python /usr/bin/python3 tests/python/c10d_suite.py \
        [--outcomes FILE.json] [-k PATTERN ...]

With --outcomes, each test's outcome ("ok", "skipped", "failed", "error") and message are
written to FILE.json. With GATES=gloo, the suite's gates (which skip coalesced, object, sparse
and monitored-barrier tests, and DDP's get_future ones, for any backend but Gloo) and the test
bodies' own branches on the backend's name are decided as for Gloo, while every process group
is still BACKEND's: the gated tests then run on it too.

Each test spawns WORLD_SIZE processes that initialize the backend through a file store; with
"atp" rank 0 starts a loopback fabric (a switch and a PS) for every group. Two things of the
suite's own are set aside: `expecttest` is not in Debian (torch's common_utils needs only its
TestCase and ACCEPT), and DDP's ReplicatedTensor mode, which the suite turns on in each process,
fails to import on this Python with torch 1.13, for Gloo too. The suite gates features by
backend name (DistTestCases.backend_feature): "atp" joins the sets of the features it has (DDP,
subgroups, plugin). tests/python/test_c10d_suite.py runs a selection at 2 and 3 ranks on both
backends and compares them.
"""
import json
import logging
import os
import sys
import tempfile
import types
import unittest

try:
    import expecttest  # noqa: F401
except ImportError:
    stand_in = types.ModuleType("expecttest")
    stand_in.ACCEPT = False
    stand_in.TestCase = unittest.TestCase
    sys.modules["expecttest"] = stand_in

os.environ.setdefault("BACKEND", "atp")
# The spawned processes import this file again, with the environment as changed below.
RUN_BACKEND = os.environ.setdefault("C10D_RUN_BACKEND", os.environ["BACKEND"])
if os.environ.get("GATES"):
    os.environ["BACKEND"] = os.environ["GATES"]  # what the decorators read at import
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    # Read at import; the suite's setUp makes its own. Kept in a global so it goes at exit.
    _import_temp_dir = tempfile.TemporaryDirectory(prefix="atp-c10d-")
    os.environ["TEMP_DIR"] = _import_temp_dir.name
os.environ.setdefault("ATP_CONTROLLER", "")  # a loopback fabric per group, in its rank 0
logging.disable(logging.INFO)  # each spawned process logs its start and barriers

import torch.nn.parallel._replicated_tensor_ddp_utils as replicated  # noqa: E402

replicated._set_ddp_with_replicated_tensor = lambda enabled: None

import atp.distributed  # noqa: E402,F401 (registers "atp")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402

if RUN_BACKEND == "atp":
    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("atp")

import torch.testing._internal.distributed.distributed_test as suite  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)

if os.environ.get("GATES"):
    # Test bodies branch on the backend's name too (a CPU model is built only "if BACKEND ==
    # 'gloo'"): they keep the gates' name, and every process group is the run backend's.
    import torch.distributed as dist  # noqa: E402
    _init_process_group = dist.init_process_group

    def _init_run_backend(*args, **kwargs):
        kwargs["backend"] = RUN_BACKEND
        return _init_process_group(*args, **kwargs)
    dist.init_process_group = _init_run_backend
else:
    suite.BACKEND = RUN_BACKEND  # what each process initializes (and test bodies compare)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class Outcomes(unittest.TextTestResult):
    """Keeps each test's outcome for --outcomes."""
    kept = {}

    def addSuccess(self, test):
        super().addSuccess(test)
        self.kept[test.id()] = {"outcome": "ok"}

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.kept[test.id()] = {"outcome": "skipped", "why": reason}

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.kept[test.id()] = {"outcome": "failed", "why": self._exc_info_to_string(err, test)[-2000:]}

    def addError(self, test, err):
        super().addError(test, err)
        self.kept[test.id()] = {"outcome": "error", "why": self._exc_info_to_string(err, test)[-2000:]}


if __name__ == "__main__":
    if "--outcomes" in sys.argv:
        at = sys.argv.index("--outcomes")
        path = sys.argv[at + 1]
        del sys.argv[at:at + 2]
        unittest.main(testRunner=unittest.TextTestRunner(resultclass=Outcomes, verbosity=1),
                      exit=False)
        with open(path, "w") as f:
            json.dump(Outcomes.kept, f, indent=1)
    else:
        run_tests()
