"""A cluster on this machine: `atp switch` and `atp ps` daemons on loopback for a few jobs.

    with atp.launch.LocalCluster(jobs=2, workers=4) as cluster:
        comm = atp.Communicator(cluster.config, job=1, rank=0)

For examples and tests; real clusters write their own file (docs/configuration.md).
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

__all__ = ["LocalCluster", "atp_binary"]


def atp_binary():
    """The `atp` program: $ATP_BIN, the one installed with this package, the build tree's, or PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("ATP_BIN"), os.path.join(here, "bin", "atp"),
                  os.path.join(here, "..", "..", "bin", "atp"), shutil.which("atp")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    raise FileNotFoundError("atp: cannot find the `atp` program; set ATP_BIN or build the project")


def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """One rack switch and one parameter server per job, all on 127.0.0.1.

    jobs, workers: jobs 1..jobs with `workers` workers each. The other arguments go into the
    cluster file: aggregators (switch pool), window, max_gradient (picks the scale),
    policy ("atp", "static" or "none"), deadline_ms.
    """

    def __init__(self, jobs=1, workers=2, aggregators=1024, window=64, max_gradient=1.0,
                 policy="atp", deadline_ms=30000, directory=None):
        self._own_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="atp-cluster-")
        self.jobs, self.workers = jobs, workers
        self.config = os.path.join(self.dir, "cluster.toml")
        lines = ["[[switch]]", 'name = "rack0"', f'address = "127.0.0.1:{_free_udp_port()}"',
                 f"aggregators = {aggregators}", f'policy = "{policy}"']
        for j in range(1, jobs + 1):
            lines += ["[[ps]]", f'name = "ps{j}"', f'address = "127.0.0.1:{_free_udp_port()}"']
        for j in range(1, jobs + 1):
            lines += ["[[job]]", f"id = {j}", f"window = {window}", f"max_gradient = {max_gradient}",
                      f"deadline_ms = {deadline_ms}", f'parameter_servers = ["ps{j}"]', "workers = ["]
            lines += [f'  {{ rack = "rack0", address = "127.0.0.1:{_free_udp_port()}" }},'
                      for _ in range(workers)]
            lines.append("]")
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        self._daemons = []

    def start(self):
        binary = atp_binary()
        names = [("switch", "rack0")] + [("ps", f"ps{j}") for j in range(1, self.jobs + 1)]
        try:
            for kind, name in names:
                with open(os.path.join(self.dir, f"{name}.log"), "w") as log:
                    self._daemons.append(subprocess.Popen(
                        [binary, kind, "--config", self.config, "--name", name, "--log-level",
                         "warn", "--stats-json", os.path.join(self.dir, f"{name}.json")],
                        stdout=log, stderr=subprocess.STDOUT))
        except BaseException:
            self.stop()  # the daemons that did start
            raise
        time.sleep(0.3)
        for p in self._daemons:
            if p.poll() is not None:
                logs = "".join(open(os.path.join(self.dir, f)).read()
                               for f in sorted(os.listdir(self.dir)) if f.endswith(".log"))
                self.stop()
                raise RuntimeError(f"atp: a daemon exited at start (code {p.returncode}):\n{logs}")
        return self

    def stop(self):
        for p in self._daemons:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self._daemons:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._daemons = []
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
