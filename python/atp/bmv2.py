"""BMv2 simple_switch as ATP's switches on the emulated cluster: `atp cluster run --switch bmv2`.

Every switch namespace runs simple_switch with p4/v1model/atp.p4 on its veths instead of the
Linux bridge and `atp switch`; `atp p4 config` derives its entries from the same cluster file
the software switch reads, with the wiring (each port's neighbour and MAC) this module builds.
Hosts reach their switch through a static neighbour entry (the P4 program answers no ARP) and
send every ATP packet to it; the switch addresses what it sends to the next ATP node
(p4/common/next_hop.p4). Loss is dropped on the hosts (iptables in the host namespaces): the
switch namespaces' kernels never see the packets BMv2 forwards.

Each simple_switch is programmed by its own `atp p4 agent` (the switch's control plane, in
its namespace): the cluster file's entries at start, the jobs the controller admits and
removes over the agent's control socket (as `atp switch` takes them), and the claim clock (the
epoch register a P4 switch needs for the aggregators' claims to age).
"""
import json
import os
import shutil
import subprocess
import time

from .launch import atp_binary, source_file
from .topology import PREFIX, Topology, sh, teardown

TOOLS = ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss")
ATP_UDP_PORT = 9999  # what the P4 parser takes as ATP (proto::kDefaultUdpPort)
THRIFT_BASE = 9090


def tools_missing(compiling=True):
    """The tools a BMv2 cluster needs that are not on PATH (the compiler only when the program
    is to be compiled; ethtool sets the hosts' checksums)."""
    return [t for t in TOOLS + ("ethtool",)
            if shutil.which(t) is None and (compiling or t != "p4c-bm2-ss")]


def program_source():
    """p4/v1model/atp.p4 of this source tree: $ATP_P4_DIR, or found from the package."""
    try:
        return source_file("p4", os.path.join("v1model", "atp.p4"), os.environ.get("ATP_P4_DIR"))
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{e}: set ATP_P4_DIR to the p4 folder") from None


def compile_program(out_dir):
    """Compiles the v1model program for simple_switch (about a minute); returns the JSON's path."""
    out = os.path.join(out_dir, "atp.json")
    result = subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "-o", out, program_source()],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("p4c-bm2-ss failed:\n" + result.stderr[-4000:])
    return out


class Cli:
    """One simple_switch_CLI session (in namespace `ns`, or here), command by command: what the
    conformance harness replays traces with (a switch of the cluster is its agent's)."""

    PROMPT = b"RuntimeCmd: "

    def __init__(self, thrift_port, ns=None):
        cmd = ["simple_switch_CLI", "--thrift-port", str(thrift_port)]
        if ns:
            cmd = ["ip", "netns", "exec", ns] + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.read_to_prompt()

    def read_to_prompt(self):
        out = b""
        while not out.endswith(self.PROMPT):
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError("simple_switch_CLI exited: " + out.decode(errors="replace"))
            out += chunk
        return out[:-len(self.PROMPT)].decode(errors="replace")

    def run(self, command):
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        out = self.read_to_prompt()
        if "Error" in out or "Invalid" in out or "error" in out:
            raise RuntimeError(f"{command!r}: {out.strip()}")
        return out

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait(timeout=10)


def wait_for_port(ns, port, timeout=30):
    """Waits until something listens on 127.0.0.1:`port` inside namespace `ns`."""
    probe = ("import socket,sys\n"
             f"socket.create_connection(('127.0.0.1', {port}), timeout=0.2).close()")
    deadline = time.time() + timeout
    while time.time() < deadline:
        if subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", probe],
                          capture_output=True).returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"simple_switch in {ns} never listened on its thrift port {port}")


class Bmv2Switch:
    """simple_switch as switch `name` of cluster file `config`, in namespace `ns`, on the given
    {port number: device} interfaces, with its `atp p4 agent` on control socket `control`."""

    def __init__(self, name, ns, ports, device_id, program, config, control, log):
        self.name, self.ns, self.thrift_port = name, ns, THRIFT_BASE + device_id
        self.control, self.agent = control, None
        # The notifications socket lives in the shared /tmp, not in the namespace: its own name.
        self.notifications = f"/tmp/{ns}-{os.getpid()}.ipc"
        interfaces = [a for number, dev in sorted(ports.items()) for a in ("-i", f"{number}@{dev}")]
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "simple_switch", "--device-id", str(device_id),
             "--thrift-port", str(self.thrift_port), "--notifications-addr",
             "ipc://" + self.notifications, *interfaces, program], stdout=log, stderr=log)
        try:
            wait_for_port(ns, self.thrift_port)
            self.agent = subprocess.Popen(
                ["ip", "netns", "exec", ns, atp_binary(), "p4", "agent", "--config", config,
                 "--name", name, "--thrift-port", str(self.thrift_port), "--control", control,
                 "--log-level", "warn"], stdout=log, stderr=log)
            self.wait_for_agent()
        except BaseException:
            self._stop_processes()  # not yet among the topology's switches: nobody else would
            raise

    def wait_for_agent(self, timeout=30):
        """Until the agent answers on its control socket (it has programmed the switch)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.agent.poll() is not None:
                raise RuntimeError(f"atp p4 agent of {self.name} exited (code "
                                   f"{self.agent.returncode}); see the run's processes.log")
            try:
                self.ask("list")
                return
            except RuntimeError:
                time.sleep(0.2)
        raise RuntimeError(f"atp p4 agent of {self.name} never answered on {self.control}")

    def ask(self, command):
        """`atp ctl` `command` to the agent; its JSON answer."""
        result = subprocess.run([atp_binary(), "ctl", "--socket", self.control, command],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise RuntimeError(f"atp ctl {command} to {self.name}'s agent: "
                               f"{(result.stderr or result.stdout).strip()}")
        return json.loads(result.stdout)

    def report(self):
        """From its agent: what the switch did (packets per next step), its claim clock (epoch,
        ticks, failed writes and the last one's error) and the jobs it holds now."""
        stats = self.ask("stats")["stats"]
        return stats["next_steps"], stats["claim_clock"], sorted(int(j) for j in stats["jobs"])

    def close(self):
        self._stop_processes()

    def _stop_processes(self):
        for proc in (self.agent, self.proc):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if os.path.exists(self.notifications):
            os.unlink(self.notifications)


def mac_of(ip, kind):
    """A locally administered MAC derived from an IPv4 address: 02:kind:a:b:c:d."""
    octets = [int(x) for x in ip.split(".")]
    return "02:%02x:%02x:%02x:%02x:%02x" % (kind, *octets)


class Bmv2Topology(Topology):
    """The cluster of Topology with simple_switch as every switch.

    One rack: hosts and PS hosts on the rack switch. Several racks: rack switches up to a
    level-2 switch with the PS hosts on it. Every switch is a BMv2 (level 1 or 2); no kernel
    routes anything. Plain IPv4 (Gloo's TCP, torchrun's rendezvous, the controller's gRPC)
    reaches a switch's neighbours only: on one rack, every host and PS host."""

    SWITCH_PORT = ATP_UDP_PORT

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wiring = {}  # switch namespace -> {port number: (device, peer ip, peer mac)}
        self.switches = []

    def switch_ip(self, ns):
        if ns == self.SPINE:
            return self.SPINE_IP
        return self.rack_switch_ip(int(ns[len(PREFIX) + 1:]))

    def ps_switch(self):
        return self.SPINE if self.racks > 1 else self.rack_switch(0)

    def bare_switch(self, ns):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self.wiring[ns] = {}

    def attach(self, ns, dev, peer_ip, peer_mac):
        self.wiring[ns][len(self.wiring[ns])] = (dev, peer_ip, peer_mac)

    def endpoint(self, ns, switch_ns, port, ip, gateway=None):
        """A host on port `port` of the P4 switch in `switch_ns`; its gateway is that switch
        (the kernel routes nothing here, so `gateway` is not used)."""
        gateway = self.switch_ip(switch_ns)
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        self.link(ns, "eth0", switch_ns, port)
        # A host's NIC cuts its UDP GSO trains into datagrams (USO), so a switch port only ever
        # sees wire-size frames; a veth would hand simple_switch the whole train as one frame.
        # One segment per GSO packet at most makes the kernel segment before the veth.
        sh("ip", "-n", ns, "link", "set", "eth0", "gso_max_segs", "1")
        # And it fills its own checksums: a veth leaves TCP's to a NIC that is not there, and
        # simple_switch forwards what it gets, so the peer dropped every TCP segment.
        sh("ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off")
        sh("ip", "-n", ns, "link", "set", "eth0", "address", mac_of(ip, 0))
        # A /32: every packet goes to the switch, even to a host of the same rack (the P4
        # program answers no ARP, and forwards plain IPv4 to its neighbours: TCP crosses it).
        sh("ip", "-n", ns, "addr", "add", f"{ip}/32", "dev", "eth0")
        sh("ip", "-n", ns, "route", "add", "default", "via", gateway, "dev", "eth0", "onlink")
        sh("ip", "-n", ns, "neigh", "replace", gateway, "lladdr", mac_of(gateway, 1), "dev", "eth0",
           "nud", "permanent")
        self.attach(switch_ns, port, ip, mac_of(ip, 0))

    def build(self):
        teardown()
        for r in range(self.racks):
            self.bare_switch(self.rack_switch(r))
        if self.racks > 1:
            self.bare_switch(self.SPINE)
            for r in range(self.racks):
                sw = self.rack_switch(r)
                self.link(sw, "up0", self.SPINE, f"r{r}")
                self.attach(sw, "up0", self.SPINE_IP, mac_of(self.SPINE_IP, 1))
                self.attach(self.SPINE, f"r{r}", self.rack_switch_ip(r),
                            mac_of(self.rack_switch_ip(r), 1))
        for r in range(self.racks):
            for h in range(self.hosts_per_rack):
                self.endpoint(self.host(r, h), self.rack_switch(r), f"h{h}", self.host_ip(r, h))
        for p in range(self.servers):
            self.endpoint(self.server(p), self.ps_switch(), f"p{p}", self.server_ip(p))
        if self.loss > 0:
            hosts = [self.host(r, h) for r in range(self.racks) for h in range(self.hosts_per_rack)]
            for ns in hosts + [self.server(p) for p in range(self.servers)]:
                for chain in ("INPUT", "OUTPUT"):
                    sh("ip", "netns", "exec", ns, "iptables", "-A", chain, "-m", "statistic",
                       "--mode", "random", "--probability", str(self.loss), "-j", "DROP")
        return self

    def wiring_lines(self, switch_ns):
        """The cluster file's `mac` and `ports` of the switch in namespace `switch_ns`."""
        ip = self.switch_ip(switch_ns)
        ports = ", ".join(f'{{ port = {n}, peer = "{peer}", mac = "{mac}" }}'
                          for n, (_, peer, mac) in sorted(self.wiring[switch_ns].items()))
        return [f'mac = "{mac_of(ip, 1)}"', f"ports = [ {ports} ]"]

    def start_switches(self, program, config, log):
        """simple_switch in every switch namespace, each programmed by its `atp p4 agent`
        (control socket NAME.sock beside `config`). Every switch's entries are derived before
        any simple_switch starts: what the P4 programs cannot hold is refused with `atp p4
        config`'s reason, and nothing is left running."""
        for ns, name in self.switch_names():
            derived = subprocess.run([atp_binary(), "p4", "config", "--config", config, "--switch",
                                      name], capture_output=True, text=True)
            if derived.returncode != 0:
                raise RuntimeError(f"atp p4 config --switch {name}: {derived.stderr.strip()}")
        folder = os.path.dirname(os.path.abspath(config))
        for device_id, (ns, name) in enumerate(self.switch_names()):
            ports = {n: dev for n, (dev, _, _) in self.wiring[ns].items()}
            self.switches.append(Bmv2Switch(name, ns, ports, device_id, program, config,
                                            os.path.join(folder, f"{name}.sock"), log))

    def stop_switches(self):
        """Stops every switch and its agent; returns what each did, {"next_steps": {switch:
        packets per next step}, "claim_clock": {switch: its clock}, "jobs": {switch: the jobs
        it held at the end}}."""
        report, errors = {"next_steps": {}, "claim_clock": {}, "jobs": {}}, []
        for s in self.switches:  # every one is closed, whatever another one did
            try:
                (report["next_steps"][s.name], report["claim_clock"][s.name],
                 report["jobs"][s.name]) = s.report()
            except Exception as e:  # noqa: BLE001
                errors.append(f"{s.name}: {e}")
            try:
                s.close()
            except Exception as e:  # noqa: BLE001
                errors.append(f"{s.name} closing: {e}")
        self.switches = []
        if errors:
            raise RuntimeError("stopping the BMv2 switches: " + "; ".join(errors))
        return report
