"""The "atp" torch.distributed backend under torchrun, and the controller that admits its jobs.

Each test launches real torchrun processes (tests/python/backend_worker.py) against real
daemons: a loopback fabric in rank 0's process, or `atp switch`, `atp ps` and `atp controller`
processes (atp.launch.LocalFabric) that tests kill -9 and restart.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("atp._c10d", reason="the backend is built only with libtorch-dev")
import atp.launch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def torchrun(mode, directory, env=None, nproc=2, timeout=180, wait=True):
    """Launches backend_worker.py MODE under torchrun."""
    os.makedirs(directory, exist_ok=True)
    command = atp.launch.torchrun_command(os.path.join(HERE, "backend_worker.py"), nproc, [mode])
    full_env = dict(os.environ, ATP_CHECK_DIR=str(directory), OMP_NUM_THREADS="1", **(env or {}))
    process = subprocess.Popen(command, env=full_env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    if not wait:
        return process
    out, _ = process.communicate(timeout=timeout)
    return process.returncode, out


def reports(directory, nproc=2):
    return [json.load(open(os.path.join(directory, f"rank{r}.json"))) for r in range(nproc)]


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {what}")


def assert_collectives_exact(report, size=2):
    for check in ("sum_exact", "avg_exact", "async_exact", "strided_exact"):
        assert report[check], check
    assert report["int_sum"] == [size * (size + 1) // 2] * 5
    assert report["max"] == size - 1
    assert report["gloo_allreduces"] == 2  # the int64 SUM and the MAX
    assert report["atp_allreduces"] == 7
    assert report["broadcast"] == 7.0
    assert report["all_gather"] == [float(r) for r in range(size)]


@pytest.fixture
def fabric(tmp_path):
    with atp.launch.LocalFabric(parameter_servers=2, lease_s=3) as f:  # short socket paths
        yield f


def test_a_single_machine_run_needs_no_controller(tmp_path):
    code, out = torchrun("collectives", tmp_path, env={"ATP_CONTROLLER": ""})
    assert code == 0, out
    for r in reports(tmp_path):
        assert_collectives_exact(r)


def test_half_precision_coalesced_and_reduce_scatter_go_through_atp_exactly(tmp_path):
    """Issue 51: float16 and bfloat16 SUM/AVG (bfloat16 once raised: Gloo has none), coalesced
    tensors and both reduce-scatters (_reduce_scatter_base once raised) go through ATP, each
    equal to the exact sum rounded once to the tensor's dtype, and the traffic says so."""
    for nproc in (2, 3):
        code, out = torchrun("reductions", tmp_path / str(nproc), env={"ATP_CONTROLLER": ""}, nproc=nproc)
        assert code == 0, out
        for r in reports(tmp_path / str(nproc), nproc):
            for check in ("float16_sum", "float16_avg", "bfloat16_sum", "bfloat16_avg", "coalesced",
                          "reduce_scatter", "reduce_scatter_base", "reduce_scatter_base_float32"):
                assert r[check + "_exact"], (nproc, check)
            traffic = r["traffic"]
            for kind in ("allreduce Half", "allreduce BFloat16", "allreduce_coalesced Float",
                         "reduce_scatter Float", "_reduce_scatter_base BFloat16"):
                assert traffic[kind]["atp_calls"] > 0 and traffic[kind]["gloo_calls"] == 0, (kind, traffic)
            assert traffic["allreduce Long"] == {"atp_calls": 0, "atp_bytes": 0, "gloo_calls": 3,
                                                 "gloo_bytes": 96}, traffic
            # Each rank took its own shard's values and a header for every other shard's seq
            # (protocol.md §8.1): of the reduce-scatters' results, (size - 1) / size are done copies.
            results, done = r["reduce_scatter_results"], r["reduce_scatter_done_copies"]
            assert done > 0 and done * nproc == results * (nproc - 1), (results, done)
            # worker_stats() after the group left the job: its last counters, not a crash.
            closed = json.loads((tmp_path / str(nproc) / f"rank{r['rank']}-closed.json").read_text())
            assert closed["done_copies"] >= done and closed["results"] >= results, closed
        # The fallback is said once per rank, at warning level, not once per call.
        assert out.count("allreduce of Long with this op goes through Gloo") == nproc, out[-3000:]


def test_ddp_with_half_precision_compression_trains_through_atp_as_on_gloo(tmp_path):
    """DDP's fp16_compress_hook and bf16_compress_hook put half-precision buckets through ATP
    (bf16 could not run on "atp" before: Gloo has no bf16 sum); the losses follow Gloo's within
    half-precision rounding."""
    code, out = torchrun("ddp_compress", tmp_path, env={"ATP_CONTROLLER": ""})
    assert code == 0, out
    for r in reports(tmp_path):
        assert r["traffic"]["allreduce Half"]["atp_calls"] > 0, r["traffic"]
        assert r["traffic"]["allreduce BFloat16"]["atp_calls"] > 0, r["traffic"]
        for atp_loss, gloo_loss in zip(r["atp_fp16"], r["gloo_fp16"]):
            assert abs(atp_loss - gloo_loss) <= 1e-3 * abs(gloo_loss), (r["atp_fp16"], r["gloo_fp16"])
        for atp_loss, gloo_loss in zip(r["atp_bf16"], r["gloo_fp32"]):
            assert abs(atp_loss - gloo_loss) <= 2e-2 * abs(gloo_loss), (r["atp_bf16"], r["gloo_fp32"])
        assert r["atp_fp16"][-1] < r["atp_fp16"][0] and r["atp_bf16"][-1] < r["atp_bf16"][0]


def test_an_allreduce_that_cannot_finish_raises_atps_reason(tmp_path):
    code, out = torchrun("failure", tmp_path, env={"ATP_CONTROLLER": "", "ATP_DEADLINE_MS": "1500"})
    assert code == 0, out
    raised = reports(tmp_path)[0]["raised"]
    assert raised and raised.startswith("ATP allreduce of job 1 failed: "), raised
    assert "no result for fragment" in raised


def test_jobs_are_admitted_by_the_controller_and_removed_at_the_end(fabric, tmp_path):
    first = torchrun("collectives", tmp_path / "a", env={"ATP_CONTROLLER": fabric.controller},
                     wait=False)
    second = torchrun("collectives", tmp_path / "b", env={"ATP_CONTROLLER": fabric.controller},
                      wait=False)
    for p in (first, second):
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, out
    ids = set()
    for d in ("a", "b"):
        for r in reports(tmp_path / d):
            assert_collectives_exact(r)
            ids.add(r["job"])
    assert len(ids) == 2
    assert fabric.jobs() == []


def test_a_refused_admission_reaches_every_rank_with_the_reason(fabric, tmp_path):
    code, out = torchrun("collectives", tmp_path, env={"ATP_CONTROLLER": fabric.controller,
                                                       "ATP_WINDOW": "48"})
    assert code != 0
    assert "window must be a power of two" in out
    assert "rank 0 could not start the job" in out  # what rank 1 says
    assert fabric.jobs() == []


def test_killed_workers_jobs_lapse_with_their_lease(fabric, tmp_path):
    run = torchrun("hold", tmp_path, env={"ATP_CONTROLLER": fabric.controller,
                                          "ATP_LEASE_SECONDS": "3"}, wait=False)
    wait_for(lambda: all(os.path.exists(tmp_path / f"ready{r}") for r in range(2)), 60, "ready")
    assert len(fabric.jobs()) == 1
    os.killpg(run.pid, signal.SIGKILL)  # torchrun and its workers: nobody removes the job
    run.wait()
    assert len(fabric.jobs()) == 1
    wait_for(lambda: fabric.jobs() == [], 10, "the job's lease lapses")
    listed = subprocess.run([atp.launch.atp_binary(), "ctl", "--socket", fabric.control["rack0"], "list"],
                            capture_output=True, text=True, check=True)
    assert json.loads(listed.stdout)["jobs"] == []


def test_a_restarted_controller_keeps_running_jobs(fabric, tmp_path):
    run = torchrun("loop", tmp_path, env={"ATP_CONTROLLER": fabric.controller,
                                          "ATP_CHECK_SECONDS": "8"}, wait=False)
    wait_for(lambda: all(os.path.exists(tmp_path / f"ready{r}") for r in range(2)), 60, "ready")
    fabric.restart("controller")  # kill -9: the job's lease and credential come back from state
    out, _ = run.communicate(timeout=180)
    assert run.returncode == 0, out
    for r in reports(tmp_path):
        assert r["exact"] and r["allreduces"] > 10, r
    assert fabric.jobs() == []  # rank 0 removed it through the new controller


def test_a_relaunch_on_the_same_daemons_gets_its_own_sums(fabric, tmp_path):
    """Each launch is a fresh job (id and token): run 0 every time cannot meet the last
    launch's kept results, which an explicit run id reused on the same job could."""
    ids = []
    for launch in ("first", "second"):
        code, out = torchrun("collectives", tmp_path / launch, env={"ATP_CONTROLLER": fabric.controller})
        assert code == 0, out
        for r in reports(tmp_path / launch):
            assert_collectives_exact(r)
        ids.append(reports(tmp_path / launch)[0]["job"])
    assert len(set(ids)) == 2


def test_a_relaunch_after_a_ps_restart_never_meets_a_dead_launchs_partial_sums(fabric, tmp_path):
    """A launch dies with partial sums on the way (rank 1 never sends); the PS restarts; the
    next launch is a new job, so nothing the dead one left can be counted in its sums."""
    code, out = torchrun("failure", tmp_path / "dead", env={"ATP_CONTROLLER": fabric.controller,
                                                            "ATP_DEADLINE_MS": "1500"})
    assert code == 0, out
    dead = reports(tmp_path / "dead")
    for server in fabric.servers:
        fabric.restart(server)
    code, out = torchrun("collectives", tmp_path / "next", env={"ATP_CONTROLLER": fabric.controller})
    assert code == 0, out
    for r in reports(tmp_path / "next"):
        assert_collectives_exact(r)
    assert "failed" in dead[0]["raised"]
    assert fabric.jobs() == []


def test_the_job_client_checks_credentials_and_input(fabric, tmp_path):
    code, out, err = fabric.job("admit", "--worker", "rack0=127.0.0.1:7000",
                                "--worker", "rack0=127.0.0.1:7001")
    assert code == 0, err
    admitted = json.loads(out)
    own = tmp_path / "own"
    own.write_text(admitted["credential"] + "\n")
    forged = tmp_path / "forged"
    forged.write_text("0" * 32 + "\n")
    job = str(admitted["job"])
    for credential in (None, str(forged)):
        code, _, err = fabric.job("remove", "--job", job, credential_file=credential)
        assert code == 1 and "PERMISSION_DENIED" in err, err
    code, _, err = fabric.job("list", credential_file=str(own))
    assert code == 1 and "operator" in err
    code, _, err = fabric.job("admit", "--worker", "rack0=127.0.0.1")
    assert code == 1 and "INVALID_ARGUMENT" in err
    code, _, err = fabric.job("admit", "--worker", "nowhere=127.0.0.1:9")
    assert code == 1 and "nowhere" in err
    assert [j["job"] for j in fabric.jobs()] == [admitted["job"]]
    code, out, err = fabric.job("show", "--job", job, credential_file=str(own))
    assert code == 0 and json.loads(out)["stats"]["rack0"]["aggregated"] == 0, out + err
    code, _, err = fabric.job("remove", "--job", job, credential_file=str(own))
    assert code == 0, err
    assert fabric.jobs() == []


def test_the_torchrun_example_trains_two_jobs_at_once_like_gloo(tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "jobs.json"
    subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "examples", "torchrun_jobs.py"),
                    "--jobs", "2", "--workers", "2", "--epochs", "2", "--json", str(out)],
                   check=True, timeout=600)
    report = json.loads(out.read_text())
    assert report["largest_difference"] < 1e-3
    assert report["jobs_left"] == []
    assert len({report["atp"][j]["job"] for j in ("1", "2")}) == 2
    for job in ("1", "2"):
        losses = report["atp"][job]["losses"]
        assert losses[-1] < 0.5 * losses[0]


def test_a_tls_controller_talks_only_to_clients_that_trust_its_certificate(tmp_path):
    with atp.launch.LocalFabric(tls=True) as fabric:
        code, out, err = fabric.job("fabric")
        assert code == 0, err
        code, _, err = fabric.job("fabric", tls=False)  # plaintext against TLS: no connection
        assert code == 3 and "UNAVAILABLE" in err, err
        tls = {"ATP_CONTROLLER": fabric.controller, "ATP_CONTROLLER_CA": fabric.tls_ca_file}
        code, out = torchrun("collectives", tmp_path / "tls", env=tls)
        assert code == 0, out
        for r in reports(tmp_path / "tls"):
            assert_collectives_exact(r)
        code, out = torchrun("collectives", tmp_path / "plain", env={"ATP_CONTROLLER": fabric.controller})
        assert code != 0 and "UNAVAILABLE" in out
        assert fabric.jobs() == []


def test_daemons_controlled_over_tcp_answer_only_with_their_secret(tmp_path):
    """Daemons on other hosts than the controller: control over TCP, each request proving the
    daemons' secret without sending it (runtime/control_auth.h)."""
    with atp.launch.LocalFabric(tcp_control=True) as fabric:
        code, out = torchrun("collectives", tmp_path, env={"ATP_CONTROLLER": fabric.controller})
        assert code == 0, out
        for r in reports(tmp_path):
            assert_collectives_exact(r)
        ctl = [atp.launch.atp_binary(), "ctl", "--socket", fabric.control["rack0"]]
        refused = subprocess.run(ctl + ["list"], capture_output=True, text=True)
        assert refused.returncode == 2 and "needs its secret" in refused.stderr, refused.stderr
        wrong = tmp_path / "wrong-secret"
        wrong.write_text("not the daemons' secret\n")
        wrong.chmod(0o600)
        refused = subprocess.run(ctl + ["--secret-file", str(wrong), "list"], capture_output=True, text=True)
        assert refused.returncode == 2 and "did not prove it holds" in refused.stderr, refused.stderr
        listed = subprocess.run(ctl + ["--secret-file", fabric.daemon_secret_file, "list"],
                                capture_output=True, text=True, check=True)
        assert json.loads(listed.stdout)["jobs"] == []  # removed at the end, over TCP
