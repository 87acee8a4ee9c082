"""What `atp cluster` watches and adds on its links: queue discipline drops and backlog, and a
background TCP flow (iperf3) competing with the systems under test.

The emulated links are veth pairs shaped by tc tbf. Where the kernel has an ECN-marking qdisc
(fq_codel), `atp cluster` puts it under each shaper so that the kernel marks CE under queueing;
where it has none, the software switches mark from their own backlog (ecn_backlog_bytes) and
`--ce-mark` can have the kernel (iptables TOS) mark a share of the packets entering them.
"""
import json
import subprocess
import threading
import time

# Tried under every tbf shaper: marks CE once packets wait longer than `target` (an ECN-capable
# packet is marked, not dropped). A kernel built without fq_codel refuses it.
ECN_QDISC = ("fq_codel", "ecn", "target", "1ms", "interval", "20ms")


def qdisc_stats(ns, dev=None):
    """The qdiscs of namespace `ns` (of one device, or all) as tc reports them (JSON)."""
    cmd = ["tc", "-n", ns, "-j", "-s", "qdisc", "show"] + (["dev", dev] if dev else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        return []
    return json.loads(out.stdout)


def qdisc_drops(namespaces):
    """Packets every root qdisc of these namespaces dropped so far (a full shaper queue)."""
    return sum(q.get("drops", 0) for ns in namespaces for q in qdisc_stats(ns) if q.get("root"))


def socket_drops(namespaces):
    """UDP datagrams that arrived to a full receive buffer (RcvbufErrors) in these namespaces so
    far: loss that no shaper counts. (SndbufErrors is not added: a local datagram the shaper
    drops is counted there as well.)"""
    total = 0
    for ns in namespaces:
        out = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"],
                             capture_output=True, text=True).stdout.split("\n")
        udp = [line.split()[1:] for line in out if line.startswith("Udp:")]
        if len(udp) == 2:
            fields = dict(zip(udp[0], udp[1]))
            total += int(fields.get("RcvbufErrors", 0))
    return total


class QueueProbe:
    """Samples one device's shaper backlog every `period` s in a thread: the queueing delay
    a packet joining that queue would see, bytes over the link rate."""

    def __init__(self, ns, dev, rate_mbit, period=0.05):
        self.ns, self.dev, self.rate_bytes, self.period = ns, dev, rate_mbit * 1e6 / 8, period
        self.samples = []  # backlog bytes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.period):
            roots = [q for q in qdisc_stats(self.ns, self.dev) if q.get("root")]
            if roots:
                self.samples.append(roots[0].get("backlog", 0))

    def stop(self):
        self._stop.set()
        self._thread.join()
        if not self.samples:
            return {"samples": 0}
        delays = sorted(b / self.rate_bytes * 1000 for b in self.samples)
        return {"samples": len(delays), "link": f"{self.ns}:{self.dev}",
                "mean_ms": sum(delays) / len(delays), "p99_ms": delays[int(0.99 * (len(delays) - 1))],
                "max_ms": delays[-1]}


class TcpFlow:
    """One iperf3 TCP flow from namespace `client_ns` to `server_ip` in `server_ns`, running
    until stop(); reports its throughput over the window the caller names."""

    PORT = 5201

    def __init__(self, client_ns, server_ns, server_ip, log):
        self.client_ns, self.server_ns, self.server_ip, self.log = client_ns, server_ns, server_ip, log
        self.server = self.client = None

    def start(self):
        self.server = subprocess.Popen(["ip", "netns", "exec", self.server_ns, "iperf3", "-s", "-1",
                                        "-p", str(self.PORT)], stdout=self.log, stderr=subprocess.STDOUT)
        time.sleep(0.3)
        self.started = time.time()
        # -t long, stopped by SIGINT: iperf3 then prints what it measured so far.
        self.client = subprocess.Popen(["ip", "netns", "exec", self.client_ns, "iperf3", "-c",
                                        self.server_ip, "-p", str(self.PORT), "-t", "3600", "-i",
                                        "0.1", "-J"], stdout=subprocess.PIPE, stderr=self.log, text=True)
        return self

    def stop(self, window):
        """Mean Mbit/s of the flow over `window` = (start, end) in time.time() seconds."""
        self.client.send_signal(2)
        try:
            out, _ = self.client.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.client.kill()
            out = ""
        self.server.kill()
        self.server.wait()
        try:
            intervals = json.loads(out)["intervals"]
        except (ValueError, KeyError):
            return {"error": "iperf3 gave no report (see processes.log)"}
        lo, hi = window[0] - self.started, window[1] - self.started
        inside = [i["sum"] for i in intervals if i["sum"]["start"] >= lo and i["sum"]["end"] <= hi]
        if not inside:
            return {"error": "the flow has no interval inside the systems' run"}
        seconds = sum(s["seconds"] for s in inside)
        return {"mbit_s": sum(s["bytes"] for s in inside) * 8 / seconds / 1e6, "seconds": seconds,
                "retransmits": sum(s.get("retransmits", 0) for s in inside)}


class RunWatch:
    """Around one system's run: packets the shapers and the sockets of `namespaces()` dropped,
    and with `tcp_flow` an iperf3 flow from rack 0's switch to PS host 0 (rack 0's uplink and
    the PS link, which ATP's sums take) with the queueing delay at rack 0's uplink, where that
    flow and ATP's sums queue together."""

    def __init__(self, topo, namespaces, tcp_flow, log):
        self.topo, self.namespaces, self.log = topo, namespaces, log
        self.flow = TcpFlow(topo.rack_switch(0), topo.server(0), topo.server_ip(0), log) if tcp_flow else None
        self.probe = QueueProbe(topo.rack_switch(0), "up0", topo.rate_mbit) if tcp_flow else None
        self.result = None
        self.started = None

    def start(self):
        namespaces = self.namespaces()
        self.drops = qdisc_drops(namespaces)
        self.socket_drops = socket_drops(namespaces)
        if self.flow:
            self.flow.start()
            time.sleep(1.0)  # past the flow's slow start: the systems meet it in steady state
            self.probe.start()
        self.started = time.time()
        return self

    def stop(self):
        if self.result is not None:
            return self.result
        if self.started is None:  # the run failed before it started: nothing was measured
            if self.flow:
                try:
                    self.flow.stop((time.time(), time.time()))  # it may have started
                except Exception:  # noqa: BLE001 (it had not)
                    pass
            self.result = {}
            return self.result
        ended = time.time()
        namespaces = self.namespaces()
        self.result = {"qdisc_drops": qdisc_drops(namespaces) - self.drops,
                       "socket_drops": socket_drops(namespaces) - self.socket_drops}
        if self.flow:
            self.result["queue_delay"] = self.probe.stop()
            self.result["tcp_flow"] = self.flow.stop((self.started, ended))
        return self.result
