"""Clusters on this machine, for examples and tests (real ones write their own files).

    # A fabric run by a controller: jobs are admitted at run time (torchrun + the atp backend).
    with atp.launch.LocalFabric(parameter_servers=2) as fabric:
        env = {"ATP_CONTROLLER": fabric.controller}

    # Daemons from a cluster file that lists its jobs (the Communicator and the DDP hook).
    with atp.launch.LocalCluster(jobs=2, workers=4) as cluster:
        comm = atp.Communicator(cluster.config, job=1, rank=0)

docs/configuration.md describes both files, docs/controller.md the controller.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["LocalCluster", "LocalFabric", "atp_binary", "free_tcp_port", "source_file",
           "torchrun_command"]


def atp_binary():
    """The `atp` program: $ATP_BIN, the one installed with this package, the build tree's, or PATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("ATP_BIN"), os.path.join(here, "bin", "atp"),
                  os.path.join(here, "..", "..", "bin", "atp"), shutil.which("atp")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    raise FileNotFoundError("atp: cannot find the `atp` program; set ATP_BIN or build the project")


def free_tcp_port():
    """A loopback TCP port nobody holds now (a rendezvous store's, a control socket's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def source_file(folder, name, override=None):
    """FOLDER/NAME of this source tree (p4/..., examples/...): under `override` if given, else
    where CMake's build tree says the sources are, else next to the package."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [override]
    try:
        from ._source import SOURCE_DIR  # written by CMake into the build tree's package
        candidates.append(os.path.join(SOURCE_DIR, folder))
    except ImportError:
        pass
    candidates.append(os.path.join(here, "..", "..", folder))
    for directory in candidates:
        if directory and os.path.isfile(os.path.join(directory, name)):
            return os.path.abspath(os.path.join(directory, name))
    raise FileNotFoundError(f"cannot find {folder}/{name}")


def torchrun_command(script, nproc, args=(), log_dir=None):
    """torchrun (torch.distributed.run) with `nproc` processes of `script` on this host, on a
    rendezvous port of its own (torch 1.13's --standalone takes 29400, so launches at the same
    time would share the first one's store and lose it when it ends), with the
    `--redirects 1 --tee 1` Debian's torchrun needs on Python 3.11."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
               "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_tcp_port()}",
               "--nproc_per_node", str(nproc), "--redirects", "1", "--tee", "1"]
    if log_dir:
        command += ["--log_dir", log_dir]
    return command + [script] + list(args)


def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _LocalProcesses:
    """What LocalCluster and LocalFabric share: a with-block starts and stops them, and stopping
    removes their folder unless the caller gave it."""

    def _remove_folder(self):
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class LocalCluster(_LocalProcesses):
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
        names = [("switch", "rack0")] + [("ps", f"ps{j}") for j in range(1, self.jobs + 1)]
        self._daemons = _start_daemons(self.dir, [
            (name, [kind, "--config", self.config, "--name", name, "--log-level", "warn",
                    "--stats-json", os.path.join(self.dir, f"{name}.json")])
            for kind, name in names])
        return self

    def stop(self):
        _stop(self._daemons)
        self._daemons = []
        self._remove_folder()



def _start_daemons(directory, commands, settle=0.3):
    """Starts `atp ARGS...` per (name, args), logging to DIRECTORY/NAME.log; all or none."""
    binary, started = atp_binary(), []
    try:
        for name, args in commands:
            with open(os.path.join(directory, f"{name}.log"), "w") as log:
                started.append(subprocess.Popen([binary] + args, stdout=log,
                                                stderr=subprocess.STDOUT))
            time.sleep(settle)
            if started[-1].poll() is not None:
                log = open(os.path.join(directory, f"{name}.log")).read()
                raise RuntimeError(f"atp: {name} exited at start "
                                   f"(code {started[-1].returncode}):\n{log}")
    except BaseException:
        _stop(started)
        raise
    return started


def _stop(processes):
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class LocalFabric(_LocalProcesses):
    """A fabric on 127.0.0.1 run by `atp controller`: one rack switch, `parameter_servers`
    PSs and the controller, with an operator credential and a state file in `dir`.

    controller: its host:port (ATP_CONTROLLER for the torch backend, --controller for `atp job`).
    operator_credential_file: what `atp job list` and other administrative calls present.
    restart(name): kill -9 one daemon ("rack0", "ps1", ..., "controller") and start it again.
    """

    def __init__(self, parameter_servers=1, aggregators=1024, policy="atp",
                 values_per_aggregator=256, lease_s=30, check_every_s=1, directory=None,
                 tls=False, tcp_control=False):
        self._own_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="atp-fabric-")
        os.makedirs(self.dir, exist_ok=True)
        self.fabric = os.path.join(self.dir, "fabric.toml")
        self.servers = [f"ps{i}" for i in range(parameter_servers)]
        # tcp_control: the daemons take control requests on TCP ports, with a secret the
        # controller holds (as daemons on other hosts would); else Unix sockets in `dir`.
        self.daemon_secret_file = os.path.join(self.dir, "daemon-secret") if tcp_control else None
        self.control = {name: (f"tcp://127.0.0.1:{free_tcp_port()}" if tcp_control
                               else f"{self.dir}/{name}.sock") for name in ["rack0"] + self.servers}
        lines = ["[[switch]]", 'name = "rack0"', f'address = "127.0.0.1:{_free_udp_port()}"',
                 f"aggregators = {aggregators}", f'policy = "{policy}"',
                 f"values_per_aggregator = {values_per_aggregator}",
                 f'control = "{self.control["rack0"]}"']
        for name in self.servers:
            lines += ["[[ps]]", f'name = "{name}"', f'address = "127.0.0.1:{_free_udp_port()}"',
                      f'control = "{self.control[name]}"']
        with open(self.fabric, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.operator_credential_file = os.path.join(self.dir, "operator")
        with open(self.operator_credential_file, "w") as f:
            f.write(os.urandom(16).hex() + "\n")
        os.chmod(self.operator_credential_file, 0o600)
        if tcp_control:
            with open(self.daemon_secret_file, "w") as f:
                f.write(os.urandom(16).hex() + "\n")
            os.chmod(self.daemon_secret_file, 0o600)
        self.state = os.path.join(self.dir, "controller-state.json")
        self.port_file = os.path.join(self.dir, "controller.address")
        self._lease_s, self._check_every_s = lease_s, check_every_s
        # tls: the controller serves a self-signed certificate for 127.0.0.1, which is also the
        # CA its clients trust (tls_ca_file: ATP_CONTROLLER_CA, `atp job --tls-ca-file`).
        self.tls_ca_file = os.path.join(self.dir, "controller-cert.pem") if tls else None
        if tls:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", os.path.join(self.dir, "controller-key.pem"),
                            "-out", self.tls_ca_file], check=True, capture_output=True)
        self._processes = {}
        self.controller = None

    def _command(self, name):
        if name == "controller":
            # A restarted controller comes back where its clients know it.
            return ["controller", "--config", self.fabric, "--listen", self.controller or "127.0.0.1:0",
                    "--state", self.state, "--operator-credential-file",
                    self.operator_credential_file, "--port-file", self.port_file,
                    "--default-lease-s", str(self._lease_s),
                    "--check-every-s", str(self._check_every_s)] + (
                        ["--tls-cert-file", self.tls_ca_file, "--tls-key-file",
                         os.path.join(self.dir, "controller-key.pem")] if self.tls_ca_file else []) + (
                        ["--daemon-secret-file", self.daemon_secret_file]
                        if self.daemon_secret_file else [])
        kind = "switch" if name == "rack0" else "ps"
        return [kind, "--config", self.fabric, "--name", name, "--log-level", "warn"] + (
            ["--control-secret-file", self.daemon_secret_file] if self.daemon_secret_file else [])

    def _start(self, names):
        for name, process in zip(names, _start_daemons(self.dir, [(n, self._command(n))
                                                                  for n in names])):
            self._processes[name] = process
        if "controller" in names:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if os.path.exists(self.port_file) and open(self.port_file).read().strip():
                    self.controller = open(self.port_file).read().strip()
                    return
                time.sleep(0.05)
            raise RuntimeError("atp controller did not start: " +
                               open(os.path.join(self.dir, "controller.log")).read())

    def start(self):
        self._start(["rack0"] + self.servers + ["controller"])
        return self

    def restart(self, name):
        """kill -9, then start again (the controller from its state file)."""
        process = self._processes.pop(name)
        process.kill()
        process.wait()
        if name == "controller":
            os.remove(self.port_file)
        self._start([name])

    def job(self, *args, credential_file=None, tls=True):
        """`atp job ARGS...` against this controller: (exit code, stdout, stderr). tls=False
        leaves out the CA (a plaintext client)."""
        command = [atp_binary(), "job", "--controller", self.controller]
        if tls and self.tls_ca_file:
            command += ["--tls-ca-file", self.tls_ca_file]
        if credential_file:
            command += ["--credential-file", credential_file]
        r = subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr

    def jobs(self):
        """Every admitted job, as the operator sees it."""
        code, out, err = self.job("list", credential_file=self.operator_credential_file)
        if code != 0:
            raise RuntimeError(f"atp job list: {err}")
        return json.loads(out)

    def stop(self):
        # The controller first: it must not see the daemons go and re-admit jobs.
        order = ["controller"] + [n for n in self._processes if n != "controller"]
        _stop([self._processes[n] for n in order if n in self._processes])
        self._processes = {}
        self._remove_folder()

