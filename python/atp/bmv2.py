"""BMv2 simple_switch as ATP's switches on the emulated cluster: `atp cluster run --switch bmv2`.

Every switch namespace runs simple_switch with p4/v1model/atp.p4 on its veths instead of the
Linux bridge and `atp switch`; `atp p4 config` derives its entries from the same cluster file
the software switch reads, with the wiring (each port's neighbour and MAC) this module builds.
Hosts reach their switch through a static neighbour entry (the P4 program answers no ARP) and
send every ATP packet to it; the switch addresses what it sends to the next ATP node
(p4/common/next_hop.p4). Loss is dropped on the hosts (iptables in the host namespaces): the
switch namespaces' kernels never see the packets BMv2 forwards.

A P4 switch has no clock of its own for the aggregators' claims: a claim-clock thread writes
the epoch register every stale_after / 2, as the control plane of a Tofino would.
"""
import os
import shutil
import subprocess
import sys
import threading
import time

from .launch import source_file
from .topology import PREFIX, Topology, sh, teardown

TOOLS = ("simple_switch", "simple_switch_CLI", "p4c-bm2-ss")
ATP_UDP_PORT = 9999  # what the P4 parser takes as ATP (proto::kDefaultUdpPort)
STALE_AFTER_S = 1.0  # engines::SwitchConfig::stale_after, the software switch's default
THRIFT_BASE = 9090
# The P4 program's next steps (p4/common/constants.p4, STEP_*), counted in AtpIngress.next_steps.
STEPS = ("drop_malformed", "drop_unknown_job", "drop_forged", "pass_up", "collide_up", "absorb",
         "drop_duplicate", "emit_sum", "flush_up", "multicast_down", "join_up", "answer_down")


def tools_missing():
    return [t for t in TOOLS if shutil.which(t) is None]


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
    """One simple_switch_CLI session (in namespace `ns`, or here), command by command."""

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
    """simple_switch as switch `name` of the cluster file, in namespace `ns`, on the given
    {port number: device} interfaces."""

    def __init__(self, name, ns, ports, device_id, program, log):
        self.name, self.ns, self.thrift_port = name, ns, THRIFT_BASE + device_id
        # The notifications socket lives in the shared /tmp, not in the namespace: its own name.
        self.notifications = f"/tmp/{ns}-{os.getpid()}.ipc"
        interfaces = [a for number, dev in sorted(ports.items()) for a in ("-i", f"{number}@{dev}")]
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "simple_switch", "--device-id", str(device_id),
             "--thrift-port", str(self.thrift_port), "--notifications-addr",
             "ipc://" + self.notifications, *interfaces, program], stdout=log, stderr=log)
        try:
            wait_for_port(ns, self.thrift_port)
            self.cli = Cli(self.thrift_port, ns)
        except BaseException:
            self._stop_process()  # not yet among the topology's switches: nobody else would
            raise
        self.started = time.monotonic()
        self.epoch = None

    def configure(self, commands):
        for command in commands:
            self.cli.run(command)

    def tick(self):
        """Writes the claim epoch engines::claim_clock would give now (from 2, every
        stale_after / 2 since the switch started)."""
        epoch = 2 + int((time.monotonic() - self.started) / (STALE_AFTER_S / 2))
        if epoch != self.epoch:
            self.cli.run(f"register_write AtpIngress.claim_epoch 0 {epoch}")
            self.epoch = epoch

    def next_steps(self):
        """Packets per next step so far: what the switch did (aggregated, collided, ...)."""
        counts = {}
        for index, step in enumerate(STEPS):
            out = self.cli.run(f"counter_read AtpIngress.next_steps {index}")
            counts[step] = int(out.split(" packets)")[0].split(", ")[-1])  # "= (B bytes, P packets)"
        return counts

    def close(self):
        try:
            self.cli.close()
        finally:
            self._stop_process()

    def _stop_process(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if os.path.exists(self.notifications):
            os.unlink(self.notifications)


class ClaimClock(threading.Thread):
    """Ticks every switch's claim epoch until stopped. A switch whose tick fails is said so at
    once (a line on stderr and in `log`) and in report(), and no longer ticked; the others go
    on. A switch whose epoch stops takes no stale aggregator over, and it loses the protection
    against the 2^32 seq wrap (docs/engines.md §2.2): a run must never lose its ticker unseen."""

    def __init__(self, switches, log=None, period=STALE_AFTER_S / 8):
        super().__init__(daemon=True)
        self.switches, self.log, self.period = switches, log, period
        self.done = threading.Event()
        self.ticks = {s.name: 0 for s in switches}
        self.stopped = {}  # switch name -> why its ticks failed

    def run(self):
        while not self.done.wait(self.period):
            for s in self.switches:
                if s.name not in self.stopped:
                    self.tick(s)

    def tick(self, switch):
        try:
            switch.tick()
            self.ticks[switch.name] += 1
        except (RuntimeError, OSError) as e:  # the switch died, or its CLI did
            self.stopped[switch.name] = str(e) or type(e).__name__
            line = (f"atp cluster: the claim clock of switch {switch.name} stopped: {e}; its "
                    "claims no longer age")
            print(line, file=sys.stderr)
            if self.log:
                self.log.write(line + "\n")
                self.log.flush()

    def report(self):
        """Ticks per switch, and the switches whose clock stopped with why."""
        return {"ticks": dict(self.ticks), "stopped": dict(self.stopped)}

    def stop(self):
        self.done.set()
        self.join(timeout=5)


def mac_of(ip, kind):
    """A locally administered MAC derived from an IPv4 address: 02:kind:a:b:c:d."""
    octets = [int(x) for x in ip.split(".")]
    return "02:%02x:%02x:%02x:%02x:%02x" % (kind, *octets)


class Bmv2Topology(Topology):
    """The cluster of Topology with simple_switch as every switch.

    One rack: hosts and PS hosts on the rack switch. Several racks: rack switches up to a
    level-2 switch with the PS hosts on it. Every switch is a BMv2 (level 1 or 2); no kernel
    routes anything, so only ATP crosses (Gloo needs the software fabric)."""

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
        sh("ip", "-n", ns, "link", "set", "eth0", "address", mac_of(ip, 0))
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
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

    def start_switches(self, program, config, binary, log):
        """simple_switch in every switch namespace, configured by `atp p4 config`; returns
        them with their claim clock running. Every switch's entries are derived before any
        simple_switch starts: what the P4 programs cannot hold is refused with `atp p4
        config`'s reason, and nothing is left running."""
        entries = {}
        for ns, name in self.switch_names():
            commands = subprocess.run([binary, "p4", "config", "--config", config, "--switch", name],
                                      capture_output=True, text=True)
            if commands.returncode != 0:
                raise RuntimeError(f"atp p4 config --switch {name}: {commands.stderr.strip()}")
            entries[name] = [c for c in commands.stdout.split("\n") if c.strip()]
        for device_id, (ns, name) in enumerate(self.switch_names()):
            ports = {n: dev for n, (dev, _, _) in self.wiring[ns].items()}
            switch = Bmv2Switch(name, ns, ports, device_id, program, log)
            self.switches.append(switch)
            switch.configure(entries[name])
            switch.tick()
        clock = ClaimClock(self.switches, log)
        clock.start()
        return clock

    def stop_switches(self):
        """Stops every switch; returns each one's packets per next step."""
        steps, errors = {}, []
        for s in self.switches:  # every one is closed, whatever another one did
            try:
                steps[s.name] = s.next_steps()
            except Exception as e:  # noqa: BLE001
                errors.append(f"{s.name}: {e}")
            try:
                s.close()
            except Exception as e:  # noqa: BLE001
                errors.append(f"{s.name} closing: {e}")
        self.switches = []
        if errors:
            raise RuntimeError("stopping the BMv2 switches: " + "; ".join(errors))
        return steps
