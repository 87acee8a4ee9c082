"""The emulated cluster's network: namespaces, links, addresses, routes, shaping and loss, and the
cluster file that describes it to `atp switch`, `atp ps` and `atp worker`.

Every box is a network namespace, every line a veth pair shaped with tc tbf in both directions:

    host r.h ── rack switch r (level 1, IP router) ──┐
                                                     ├─ PS-rack switch ── PS hosts
    host r.h ── rack switch r ...                    ┘  (level 2, IP router)

What runs on it stands on this module: the allreduce runs of `atp cluster run` and `bench`
(python/atp/cluster.py: `atp switch` in the switch namespaces, or BMv2 through
python/atp/bmv2.py, whose Bmv2Topology rewires the same namespaces) and the training run of
`atp cluster train` (python/atp/cluster_train.py). One `atp cluster` at a time owns the atpc-*
namespaces (take_cluster_lock); topology_up tears them down whatever happens.
"""
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .cluster_traffic import ECN_QDISC

PREFIX = "atpc-"


def sh(*args, check=True):
    result = subprocess.run(args, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip()}")
    return result


def namespaces_available():
    """None if this machine can build the cluster, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "tc", "iptables"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    probe = sh("ip", "netns", "add", PREFIX + "probe", check=False)
    if probe.returncode != 0:
        return "cannot create network namespaces: " + probe.stderr.strip()
    sh("ip", "netns", "del", PREFIX + "probe", check=False)
    return None


LOCK_FILE = "/run/lock/atp-cluster.lock"


def take_cluster_lock():
    """The open lock file while this process owns the atpc-* namespaces, or None if another
    `atp cluster` does (one would tear the other's namespaces down mid-run)."""
    os.makedirs(os.path.dirname(LOCK_FILE), exist_ok=True)
    lock = open(LOCK_FILE, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def cluster_namespaces():
    """The names of every atpc-* network namespace that exists now."""
    listing = sh("ip", "netns", "list", check=False).stdout.split("\n")
    return [line.split(" ")[0] for line in listing if line.startswith(PREFIX)]


def teardown():
    for name in cluster_namespaces():
        sh("ip", "netns", "del", name, check=False)


class Topology:
    """Namespaces, links, addresses, routes, shaping and loss for racks x hosts and PS hosts."""

    SWITCH_PORT = 9000  # where `atp switch` listens

    def __init__(self, racks, hosts_per_rack, servers, rate_mbit, loss=0.0, ce_mark=0.0, mtu=1500):
        self.racks, self.hosts_per_rack, self.servers = racks, hosts_per_rack, servers
        self.rate_mbit, self.loss, self.ce_mark, self.mtu = rate_mbit, loss, ce_mark, mtu
        self.ecn_qdisc = None  # the marking qdisc under the shapers; False: the kernel has none

    # Names and addresses.
    @staticmethod
    def rack_switch(r):
        return f"{PREFIX}s{r}"

    SPINE = PREFIX + "sp"

    @staticmethod
    def host(r, h):
        return f"{PREFIX}h{r}-{h}"

    @staticmethod
    def server(p):
        return f"{PREFIX}p{p}"

    @staticmethod
    def rack_switch_ip(r):
        return f"10.10.{r}.1"

    @staticmethod
    def host_ip(r, h):
        return f"10.10.{r}.{h + 10}"

    SPINE_IP = "10.30.0.1"

    @staticmethod
    def server_ip(p):
        return f"10.30.0.{p + 10}"

    def place(self, rank):
        """(rack, host) of a job's worker `rank`: rack-major, so a ring in rank order crosses
        racks as few times as it can (what a Gloo or NCCL user would do)."""
        return rank // self.hosts_per_rack, rank % self.hosts_per_rack

    def shape(self, ns, dev):
        rate_bytes = self.rate_mbit * 1e6 / 8
        burst = max(16384, int(rate_bytes * 0.002))  # 2 ms of traffic, at least a few packets
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:",
           "tbf", "rate", f"{self.rate_mbit}mbit", "burst", str(burst), "latency", "20ms")
        if self.ecn_qdisc is not False:
            marking = sh("tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
                         *ECN_QDISC, check=False)
            self.ecn_qdisc = " ".join(ECN_QDISC) if marking.returncode == 0 else False

    def link(self, ns_a, dev_a, ns_b, dev_b):
        sh("ip", "link", "add", dev_a, "netns", ns_a, "type", "veth", "peer", "name", dev_b,
           "netns", ns_b)
        for ns, dev in ((ns_a, dev_a), (ns_b, dev_b)):
            sh("ip", "-n", ns, "link", "set", dev, "mtu", str(self.mtu), "up")
            self.shape(ns, dev)

    def router(self, ns, bridge_ip):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "-n", ns, "link", "add", "br0", "mtu", str(self.mtu), "type", "bridge")
        sh("ip", "-n", ns, "addr", "add", f"{bridge_ip}/24", "dev", "br0")
        sh("ip", "-n", ns, "link", "set", "br0", "up")

    def endpoint(self, ns, switch_ns, port, ip, gateway):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        self.link(ns, "eth0", switch_ns, port)
        sh("ip", "-n", switch_ns, "link", "set", port, "master", "br0")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        sh("ip", "-n", ns, "route", "add", "default", "via", gateway)

    def build(self):
        teardown()
        self.router(self.SPINE, self.SPINE_IP)
        for r in range(self.racks):
            sw = self.rack_switch(r)
            self.router(sw, self.rack_switch_ip(r))
            self.link(sw, "up0", self.SPINE, f"r{r}")
            sh("ip", "-n", sw, "addr", "add", f"10.20.{r}.1/30", "dev", "up0")
            sh("ip", "-n", self.SPINE, "addr", "add", f"10.20.{r}.2/30", "dev", f"r{r}")
            sh("ip", "-n", sw, "route", "add", "default", "via", f"10.20.{r}.2")
            sh("ip", "-n", self.SPINE, "route", "add", f"10.10.{r}.0/24", "via", f"10.20.{r}.1")
            for h in range(self.hosts_per_rack):
                self.endpoint(self.host(r, h), sw, f"h{h}", self.host_ip(r, h), self.rack_switch_ip(r))
        for p in range(self.servers):
            self.endpoint(self.server(p), self.SPINE, f"p{p}", self.server_ip(p), self.SPINE_IP)
        switches = [self.rack_switch(r) for r in range(self.racks)] + [self.SPINE]
        if self.loss > 0:
            for ns in switches:
                for chain in ("INPUT", "FORWARD"):
                    sh("ip", "netns", "exec", ns, "iptables", "-A", chain, "-m", "statistic",
                       "--mode", "random", "--probability", str(self.loss), "-j", "DROP")
        if self.ce_mark > 0:  # the kernel marks CE, as a marking queue in front would
            for ns in switches:
                sh("ip", "netns", "exec", ns, "iptables", "-t", "mangle", "-A", "PREROUTING", "-p",
                   "udp", "--dport", str(self.SWITCH_PORT), "-m", "statistic", "--mode", "random",
                   "--probability", str(self.ce_mark), "-j", "TOS", "--set-tos", "0x03/0x03")
        return self

    @staticmethod
    def spawn(ns, cmd, log):
        return subprocess.Popen(["ip", "netns", "exec", ns] + cmd, stdout=log, stderr=subprocess.STDOUT)

    def switch_names(self):
        """(namespace, cluster file name) of every switch."""
        names = [(self.rack_switch(r), f"rack{r}") for r in range(self.racks)]
        if self.racks > 1:
            names.append((self.SPINE, "spine"))
        return names

    def wiring_lines(self, switch_ns):
        """What the cluster file says about a switch's ports: nothing for `atp switch`."""
        return []


def cluster_file(topo, args, policy):
    jobs, workers, window = args.jobs, args.workers, args.window
    values_per_packet = args.values_per_packet
    common = [f"aggregators = {args.aggregators}", f'policy = "{policy}"',
              f"values_per_aggregator = {values_per_packet}"]
    if args.ecn_backlog_kb is not None:
        common.append(f"ecn_backlog_bytes = {int(args.ecn_backlog_kb * 1024)}")
    if args.ecn_receive_backlog_kb is not None:
        common.append(f"ecn_receive_backlog_bytes = {int(args.ecn_receive_backlog_kb * 1024)}")
    lines = []
    for r in range(topo.racks):
        lines += ["[[switch]]", f'name = "rack{r}"',
                  f'address = "{topo.rack_switch_ip(r)}:{topo.SWITCH_PORT}"', "level = 1"] + common
        lines += topo.wiring_lines(topo.rack_switch(r))
        if topo.racks > 1:
            lines.append('uplink = "spine"')
    if topo.racks > 1:
        lines += ["[[switch]]", 'name = "spine"', f'address = "{topo.SPINE_IP}:{topo.SWITCH_PORT}"',
                  "level = 2"] + common
        lines += topo.wiring_lines(topo.SPINE)
    for j in range(jobs):
        lines += ["[[ps]]", f'name = "ps{j + 1}"', f'address = "{topo.server_ip(j)}:9100"']
    # A P4 switch maps a static slice with a mask: each job's share of the pool, cut to a power
    # of two (a software switch takes the whole share, the switches' own derivation).
    p4_static = policy == "static" and getattr(args, "switch", "software") == "bmv2"
    for j in range(jobs):
        lines += ["[[job]]", f"id = {j + 1}", f"window = {window}",
                  f"values_per_packet = {values_per_packet}", "deadline_ms = 120000",
                  f'parameter_servers = ["ps{j + 1}"]']
        if p4_static and args.aggregators >= jobs:
            lines.append(f"static_aggregators = {1 << ((args.aggregators // jobs).bit_length() - 1)}")
        if args.no_congestion_control:
            lines.append("congestion_control = false")
        if args.aggregator_window:
            lines.append("aggregator_window = true")
        lines.append("workers = [")
        for k in range(workers):
            r, h = topo.place(k)
            lines.append(f'  {{ rack = "rack{r}", address = "{topo.host_ip(r, h)}:{9200 + j}" }},')
        lines.append("]")
    return "\n".join(lines) + "\n"


def wait_with_cpu(proc, timeout):
    """Waits for `proc` (killing it after `timeout` s); returns the CPU seconds it used."""
    deadline = time.time() + timeout
    while True:
        if proc.returncode is not None:  # already reaped (by poll()): its CPU time is lost
            return 0.0
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return 0.0
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.time() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.01)


@contextlib.contextmanager
def topology_up(topo, keep, prefix="atp-cluster-"):
    """Builds `topo` and yields a work folder; the namespaces are torn down and the folder
    removed (or, with --keep, named) whatever happens."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    try:
        topo.build()
        yield workdir
    finally:
        teardown()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir}", file=sys.stderr)


def cleanup_step(step, failed):
    """Runs one step of a run's cleanup; its error goes to stderr, and `failed` is returned in
    its place, so the error that ended the run (if one did) is the one raised."""
    try:
        return step()
    except Exception as e:  # noqa: BLE001 (a cleanup step must not mask the run's own error)
        print(f"atp cluster: cleanup: {type(e).__name__}: {e}", file=sys.stderr)
        return failed
