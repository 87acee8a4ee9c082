"""The Python module and the PyTorch integration, against an exact reference.

The reference is computed here in numpy, independently of the C++ code: each worker's values
quantized with the job's scale (round half to even), summed as integers, divided by the scale.
Run by ctest (`python_tests`) with /usr/bin/python3 -m pytest, PYTHONPATH=build/python.
"""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import atp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def exact_sum(arrays, scale):
    scale = np.float32(scale)
    total = sum(np.rint(a.astype(np.float32) * scale).astype(np.int64) for a in arrays)
    return total.astype(np.float32) / scale


def gradients(rank, n, seed=0):
    return np.random.default_rng(seed * 100 + rank).uniform(-1, 1, n).astype(np.float32)


def run_all(functions):
    """Runs one function per worker, each in its own thread; returns results, raises errors."""
    results, errors = [None] * len(functions), []

    def call(i):
        try:
            results[i] = functions[i]()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(functions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture(scope="module")
def cluster():
    with atp.launch.LocalCluster(jobs=2, workers=2, deadline_ms=4000) as c:
        yield c


def test_numpy_allreduce_in_place_out_of_place_and_async_is_exact(cluster):
    comms = [atp.Communicator(cluster.config, job=1, rank=r) for r in range(2)]
    n = 100_003  # not a multiple of K
    inputs = [gradients(r, n) for r in range(2)]
    expected = exact_sum(inputs, comms[0].config["scale"])

    def work(r):
        def run():
            in_place = inputs[r].copy()
            returned = comms[r].allreduce(in_place)
            out = np.empty_like(inputs[r])
            comms[r].allreduce(inputs[r], out)
            a, b = inputs[r].copy(), inputs[r].copy()
            pending = [comms[r].allreduce_async(a), comms[r].allreduce_async(b)]
            # A Work may be waited on from several threads, and again after it completed.
            waiters = [threading.Thread(target=pending[0].wait) for _ in range(3)]
            for t in waiters:
                t.start()
            for p in pending:
                assert p.wait() is (a if p is pending[0] else b)
            for t in waiters:
                t.join()
            assert all(p.is_completed() and p.wait() is not None for p in pending)
            return returned is in_place, in_place, out, a, b
        return run

    for same_object, *results in run_all([work(0), work(1)]):
        assert same_object  # in place: the very array comes back
        for result in results:
            np.testing.assert_array_equal(result, expected)
    assert comms[0].stats["results"] > 0
    assert comms[0].config["workers"] == 2


def test_values_past_the_scale_come_back_as_exact_float_sums(cluster):
    comms = [atp.Communicator(cluster.config, job=2, rank=r) for r in range(2)]
    inputs = [gradients(r, 5000, seed=3) for r in range(2)]
    inputs[0][17] = 1e30  # cannot be carried as an integer: its fragment goes as floats
    inputs[1][4000] = np.nan
    outs = run_all([lambda r=r: comms[r].allreduce(inputs[r].copy()) for r in range(2)])
    k = comms[0].config["values_per_packet"]
    expected = exact_sum(inputs, comms[0].config["scale"])
    for fragment in (17 // k, 4000 // k):  # float fragments: the float32 sum in rank order
        part = slice(fragment * k, (fragment + 1) * k)
        expected[part] = inputs[0][part] + inputs[1][part]
    for out in outs:
        np.testing.assert_array_equal(out, expected)  # NaN where NaN: equal_nan by default
    assert comms[0].stats["float_fragments"] >= 2


def test_bad_buffers_and_configurations_are_refused_clearly(cluster):
    comm = atp.Communicator(cluster.config, job=1, rank=0)
    with pytest.raises(TypeError, match="float32"):
        comm.allreduce(np.zeros(10, dtype=np.float64))
    with pytest.raises(ValueError, match="contiguous"):
        comm.allreduce(np.zeros((10, 10), dtype=np.float32)[:, 1])
    with pytest.raises(ValueError, match="values"):
        comm.allreduce(np.zeros(10, np.float32), np.zeros(11, np.float32))
    with pytest.raises(ValueError, match="job 9"):
        atp.Communicator(cluster.config, job=9, rank=0)
    with pytest.raises(ValueError, match="no rank 5"):
        atp.Communicator(cluster.config, job=1, rank=5)
    with pytest.raises(ValueError, match="cannot read"):
        atp.Communicator("/nonexistent.toml", job=1, rank=0)


def test_a_worker_alone_fails_with_the_reason(cluster):
    comm = atp.Communicator(cluster.config, job=1, rank=1, run=1)  # its peer never comes
    with pytest.raises(RuntimeError, match="no result"):
        comm.allreduce(np.ones(100, np.float32))


def test_a_relaunched_job_on_the_same_daemons_gets_its_own_sums(cluster):
    # A short tensor (all its fragments still kept by the PS for late resends) and default
    # arguments: each launch must be answered with its own sum, never the last launch's.
    runs = []
    for launch in range(3):
        comms = [atp.Communicator(cluster.config, job=1, rank=r) for r in range(2)]
        assert comms[0].config["run"] is None  # handed out by the job's first PS
        inputs = [gradients(r, 1000, seed=100 + launch) for r in range(2)]
        outs = run_all([lambda r=r: comms[r].allreduce(inputs[r].copy()) for r in range(2)])
        expected = exact_sum(inputs, comms[0].config["scale"])
        for out in outs:
            np.testing.assert_array_equal(out, expected)
        assert comms[0].run == comms[1].run and comms[0].run is not None
        runs.append(comms[0].run)
        del comms
    assert len(set(runs)) == 3  # each launch its own


def test_a_run_id_used_again_on_the_same_daemons_fails_loudly(cluster):
    # Issue 49 item 8: a second launch with the same explicit run id (400 floats, its first
    # fragments still kept by the PS) was answered with the first launch's sums: exact false,
    # no error. The job's first PS now refuses the run to another launch, and says why.
    inputs = [gradients(r, 400, seed=r) for r in range(2)]
    comms = [atp.Communicator(cluster.config, job=2, rank=r, run=7) for r in range(2)]
    outs = run_all([lambda r=r: comms[r].allreduce(inputs[r].copy()) for r in range(2)])
    for out in outs:
        np.testing.assert_array_equal(out, exact_sum(inputs, comms[0].config["scale"]))
    del comms
    again = [gradients(r, 400, seed=10 + r) for r in range(2)]
    comms = [atp.Communicator(cluster.config, job=2, rank=r, run=7) for r in range(2)]
    for r in range(2):
        with pytest.raises(RuntimeError, match="run 7 was used by another launch"):
            comms[r].allreduce(again[r].copy())


def test_torch_allreduce_sums_and_averages_tensors_in_place(cluster):
    torch = pytest.importorskip("torch")
    import atp.torch
    # Job 2 ran on these daemons before: this later launch must not meet its state.
    comms = [atp.Communicator(cluster.config, job=2, rank=r) for r in range(2)]
    inputs = [gradients(r, 3000, seed=7) for r in range(2)]
    tensors = [torch.from_numpy(a.copy()) for a in inputs]
    means = [torch.from_numpy(a.copy()) for a in inputs]
    run_all([lambda r=r: atp.torch.allreduce(tensors[r], comm=comms[r]) for r in range(2)])
    run_all([lambda r=r: atp.torch.allreduce(means[r], op="mean", comm=comms[r]) for r in range(2)])
    expected = exact_sum(inputs, comms[0].config["scale"])
    for t, m in zip(tensors, means):
        np.testing.assert_array_equal(t.numpy(), expected)
        np.testing.assert_array_equal(m.numpy(), expected / np.float32(2))
    with pytest.raises(TypeError, match="float32"):
        atp.torch.allreduce(torch.zeros(4, dtype=torch.float64), comm=comms[0])
    with pytest.raises(ValueError, match="op"):
        atp.torch.allreduce(torch.zeros(4), op="max", comm=comms[0])


def test_ddp_hook_gives_the_exact_average_of_the_workers_gradients(tmp_path):
    pytest.importorskip("torch")
    with atp.launch.LocalCluster(jobs=1, workers=2) as c:
        out = tmp_path / "grads.json"
        subprocess.run([sys.executable, os.path.join(HERE, "ddp_hook_check.py"), c.config, str(out)],
                       check=True, timeout=300, env=dict(os.environ))
        report = json.loads(out.read_text())
    assert report["buckets"] >= 1
    for name, check in report["parameters"].items():
        assert check["equal"], f"{name}: largest difference {check['largest_difference']}"


def test_short_training_run_converges_and_matches_gloo(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    out = tmp_path / "train.json"
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train.py"), "--jobs", "2",
                    "--workers", "2", "--epochs", "3", "--json", str(out)],
                   check=True, timeout=600, env=dict(os.environ))
    report = json.loads(out.read_text())
    assert report["largest_difference"] < 1e-3
    for job in ("1", "2"):
        losses = report["atp"][job]["losses"]
        assert losses[-1] < 0.5 * losses[0]
        assert report["atp"][job]["test_accuracy"] > 0.8


def test_pip_installs_the_package_offline(tmp_path):
    """`pip install --no-build-isolation .` from the source tree, reusing this build."""
    target = tmp_path / "site"
    env = dict(os.environ, ATP_BUILD_DIR=os.environ.get("ATP_BUILD_DIR", os.path.join(ROOT, "build")))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                    "--no-index", "--quiet", "--target", str(target), ROOT],
                   check=True, timeout=900, env=env, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ATP_BIN")}
    env["PYTHONPATH"] = str(target)
    check = ("import atp, atp.torch, os; print(atp.__file__); "
             "print(os.path.exists(atp.launch.atp_binary()))")
    lines = subprocess.run([sys.executable, "-c", check], check=True, capture_output=True,
                           text=True, env=env, cwd=tmp_path).stdout.split()
    assert lines[0].startswith(str(target))
    assert lines[1] == "True"
