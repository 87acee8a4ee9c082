#!/usr/bin/python3
"""Replays switch traces through the v1model program on BMv2 and compares every packet out.

A trace (docs/engines.md §2.10) holds what went into one C++ switch pipeline and what came out.
This script builds a fresh simple_switch per trace in its own network namespace, one veth pair
per port the trace names, installs the profile and each job's entries exactly as
`atp p4 config --trace` derives them, and then, packet by packet: sets the claim clock and the
egress ECN mode the record asks for, sends the packet on its ingress port wrapped in
Ethernet/IPv4/UDP, waits for a barrier packet, and compares what left on every port with the
record (verdict, the passes the packet took through the pipe against the C++ pipeline's count,
then the ATP header field by field, then the values). The first difference fails the trace and
is printed.

Usage (root): PYTHONPATH=build/python bmv2_replay.py --program atp.json --atp build/bin/atp TRACE...
"""
import argparse
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import time

from atp.bmv2 import Cli  # PYTHONPATH: the build tree's python/ (run.sh sets it)

ATP_PORT = 9999
BARRIER_PORT = 510
BARRIER_IP = "10.255.255.254"
HEADER_FIELDS = [  # (name, offset, size) of the ATP header, docs/protocol.md §2
    ("version", 0, 1), ("flags", 1, 1), ("next_level", 2, 1), ("ps_index", 3, 1),
    ("job", 4, 4), ("tensor", 8, 4), ("seq", 12, 4), ("aggregator", 16, 4),
    ("workers_bitmap", 20, 4), ("racks_bitmap", 24, 4), ("rack_fan_in", 28, 1),
    ("job_fan_in", 29, 1), ("rack", 30, 1), ("kind", 31, 1), ("value_count", 32, 2),
    ("results_behind", 34, 2), ("remap_index", 36, 4), ("token", 40, 4)]


def sh(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def ipv4_checksum(header):
    total = sum(struct.unpack("!10H", header))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def frame(payload, dst_ip="10.0.0.2", dst_port=ATP_PORT):
    udp = struct.pack("!HHHH", ATP_PORT, dst_port, 8 + len(payload), 0)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp) + len(payload), 0, 0, 64,
                               17, 0, socket.inet_aton("10.0.0.1"), socket.inet_aton(dst_ip)))
    struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
    return b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00" + bytes(ip) + udp + payload


def atp_payload(data):
    """The UDP payload of an ATP frame, or None."""
    if len(data) < 42 or data[12:14] != b"\x08\x00" or data[14] != 0x45 or data[23] != 17:
        return None
    dst_port, length = struct.unpack("!2xHH", data[34:40])
    if dst_port != ATP_PORT:
        return None
    return data[42:34 + length]


def field(packet, offset, size):
    return int.from_bytes(packet[offset:offset + size], "big")


def compare(expected, actual):
    """The first difference between two ATP packets, named as the C++ compare_outputs does."""
    if len(expected) != len(actual):
        return f"length: expected {len(expected)}, got {len(actual)}"
    if len(expected) >= 44:
        diffs = [f"{name}: expected {field(expected, o, s):#x}, got {field(actual, o, s):#x}"
                 for name, o, s in HEADER_FIELDS if field(expected, o, s) != field(actual, o, s)]
        if diffs:
            return "header " + "; ".join(diffs)
        for i in range(44, len(expected) - 3, 4):
            x = struct.unpack("!i", expected[i:i + 4])[0]
            y = struct.unpack("!i", actual[i:i + 4])[0]
            if x != y:
                return f"value {(i - 44) // 4}: expected {x}, got {y}"
    for i, (x, y) in enumerate(zip(expected, actual)):
        if x != y:
            return f"byte {i}: expected {x:#04x}, got {y:#04x}"
    return ""


def handle_in(output):
    for word in output.replace(":", " ").split():
        if word.isdigit():
            last = int(word)
    return last


class Switch:
    """simple_switch with one veth pair per port, the harness on the far ends."""

    def __init__(self, program, ports):
        self.ports = sorted(set(ports) | {BARRIER_PORT})
        for p in self.ports:
            sh("ip", "link", "add", f"sw{p}", "type", "veth", "peer", "name", f"h{p}")
            for name in (f"sw{p}", f"h{p}"):
                sh("ip", "link", "set", name, "mtu", "9000", "up")
        interfaces = [arg for p in self.ports for arg in ("-i", f"{p}@sw{p}")]
        # The notifications socket lives in the shared /tmp, not in the namespace: its own name.
        self.notifications = f"/tmp/atp-p4-replay-{os.getpid()}.ipc"
        notifications = "ipc://" + self.notifications
        self.proc = subprocess.Popen(["simple_switch", "--thrift-port", "9090",
                                      "--notifications-addr", notifications, *interfaces,
                                      program], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", 9090), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        self.sockets = {}
        for p in self.ports:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            s.bind((f"h{p}", 0))
            s.setblocking(False)
            self.sockets[p] = s
        self.cli = Cli(9090)
        self.cli.run(f"table_add AtpIngress.ipv4_routes AtpIngress.ipv4_forward "
                     f"{BARRIER_IP}/32 => {BARRIER_PORT} 00:00:00:00:00:03")
        self.drain(0.2)

    def drain(self, seconds):
        """Packets that left the switch in the next `seconds`: [(port, frame)]."""
        got = []
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return got
            ready, _, _ = select.select(list(self.sockets.values()), [], [], left)
            for s in ready:
                port = next(p for p, q in self.sockets.items() if q is s)
                while True:
                    try:
                        data, address = s.recvfrom(65536)
                    except BlockingIOError:
                        break
                    if address[2] != socket.PACKET_OUTGOING:
                        got.append((port, data))

    def send_and_collect(self, port, payload, expected):
        """Sends one ATP packet, then a barrier behind it; returns what the packet caused.

        A packet that goes round for more passes (recirculation, constants.p4) leaves after the
        barrier: up to `expected` packets are waited for a while longer."""
        self.sockets[port].send(frame(payload))
        self.sockets[port].send(frame(b"barrier", dst_ip=BARRIER_IP, dst_port=1))
        got = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            batch = self.drain(0.05)
            if any(p == BARRIER_PORT for p, _ in batch):
                got += [b for b in batch if b[0] != BARRIER_PORT]
                got += self.drain(0.02)  # copies still in other egress queues
                late = time.monotonic() + 2
                while len(got) < expected and time.monotonic() < late:
                    got += self.drain(0.02)
                return [(p, atp_payload(d)) for p, d in got if atp_payload(d) is not None]
            got += batch
        raise RuntimeError("the barrier packet never came out: is simple_switch running?")

    def close(self):
        self.cli.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)
        if os.path.exists(self.notifications):
            os.unlink(self.notifications)
        for p in self.ports:
            subprocess.run(["ip", "link", "del", f"sw{p}"], stderr=subprocess.DEVNULL)


def read_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Replay:
    def __init__(self, switch, entries):
        self.switch = switch
        self.entries = entries
        self.installed = {}  # job -> (table handles, group, node)
        self.groups = {}     # group -> ports
        self.recirculations = 0  # the switch's counter after the last packet

    def add_job(self, index, job):
        if job["job"] in self.installed:
            self.remove_job(job["job"])
        handles, node = [], None
        for command in self.entries["jobs"][str(index)]:
            table = command.split()[1] if command.startswith("table_add") else None
            if command.startswith("mc_node_associate"):
                command = " ".join(command.split()[:2] + [str(node)])
            out = self.switch.cli.run(command)
            if table:
                handles.append((table, handle_in(out)))
            if command.startswith("mc_node_create"):
                node = handle_in(out)
        self.installed[job["job"]] = (handles, job["multicast_group"], node)
        self.groups[job["multicast_group"]] = job["downstream"]

    def remove_job(self, job):
        handles, group, node = self.installed.pop(job)
        cli = self.switch.cli
        for table, handle in handles:
            cli.run(f"table_delete {table} {handle}")
        cli.run(f"mc_node_dissociate {group} {node}")
        cli.run(f"mc_node_destroy {node}")
        cli.run(f"mc_mgrp_destroy {group}")
        self.groups.pop(group, None)
        # The control plane frees the job's aggregators: those whose owner_id names it.
        out = cli.run("register_read AtpIngress.aggregator.owner_id")
        values = [int(v) for v in out.split("=", 1)[1].replace(",", " ").split()]
        for i, owner in enumerate(values):
            if (owner >> 16) & 0x7FFF == job:
                cli.run(f"register_write AtpIngress.aggregator.owner_epoch {i} 0")

    def packet(self, number, record):
        cli = self.switch.cli
        cli.run(f"register_write AtpIngress.claim_epoch 0 {self.entries['claim_epochs'][number]}")
        cli.run(f"register_write AtpEgress.ecn_mark_all 0 {1 if record['congested'] else 0}")
        verdict = record["verdict"]
        expected_out = bytes.fromhex(record["out"])
        if verdict["action"] == "drop":
            expected = []
        elif verdict["action"] == "port":
            expected = [(verdict["port"], expected_out)]
        else:
            expected = [(p, expected_out) for p in self.groups.get(verdict["group"], [])]
        got = self.switch.send_and_collect(record["ingress_port"], bytes.fromhex(record["in"]),
                                           len(expected))
        if (d := self.check_passes(verdict.get("passes", 1))):
            return d
        got_ports = sorted(p for p, _ in got)
        if got_ports != sorted(p for p, _ in expected):
            return (f"verdict: expected {describe(verdict)} (ports {sorted(p for p, _ in expected)}),"
                    f" got ports {got_ports}")
        for (port, want), (_, have) in zip(sorted(expected), sorted(got)):
            if (d := compare(want, have)):
                return f"port {port}: {d}"
        return ""

    def check_passes(self, passes):
        """The passes the packet took through simple_switch (its recirculation counter) against
        the C++ pipeline's. A dropped packet may still be going round: its count is waited for."""
        deadline = time.monotonic() + 2
        while True:
            out = self.switch.cli.run("counter_read AtpIngress.recirculations 0")
            total = int(re.search(r"(\d+) packets", out).group(1))
            taken = total - self.recirculations + 1
            if taken >= passes or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.recirculations = total
        if taken != passes:
            return f"passes: expected {passes}, got {taken}"
        return ""


def describe(verdict):
    if verdict["action"] == "port":
        return f"port {verdict['port']}"
    if verdict["action"] == "multicast":
        return f"multicast group {verdict['group']}"
    return "drop"


def replay_trace(program, atp, path):
    events = read_trace(path)
    entries = json.loads(subprocess.run([atp, "p4", "config", "--trace", path], check=True,
                                        capture_output=True, text=True).stdout)
    ports = set()
    for e in events[1:]:
        if "add_job" in e:
            ports |= set(e["add_job"]["downstream"]) | set(e["add_job"]["upstream"])
        if "packet" in e:
            ports.add(e["packet"]["ingress_port"])
    switch = Switch(program, ports)
    try:
        for command in entries["profile"]:
            switch.cli.run(command)
        replay = Replay(switch, entries)
        packets = 0
        for index, e in enumerate(events[1:]):
            if "add_job" in e:
                replay.add_job(index, e["add_job"])
            elif "remove_job" in e:
                if e["remove_job"] in replay.installed:
                    replay.remove_job(e["remove_job"])
            else:
                if (d := replay.packet(packets, e["packet"])):
                    return False, f"packet {packets} ({e['packet']['in'][:88]}...): {d}"
                packets += 1
        return True, f"{packets} packets, every output identical"
    finally:
        switch.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--program", required=True, help="BMv2 JSON of p4/v1model/atp.p4")
    parser.add_argument("--atp", required=True, help="the atp binary (for `atp p4 config`)")
    parser.add_argument("--netns", default="atp-p4-replay", help="namespace to run in")
    parser.add_argument("traces", nargs="+")
    args = parser.parse_args()
    if os.environ.get("ATP_IN_NETNS") != args.netns:
        subprocess.run(["ip", "netns", "del", args.netns], stderr=subprocess.DEVNULL)
        sh("ip", "netns", "add", args.netns)
        try:
            env = dict(os.environ, ATP_IN_NETNS=args.netns)
            sh("ip", "netns", "exec", args.netns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", args.netns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            sh("ip", "netns", "exec", args.netns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
            return subprocess.run(["ip", "netns", "exec", args.netns, sys.executable, *sys.argv],
                                  env=env).returncode
        finally:
            subprocess.run(["ip", "netns", "del", args.netns], stderr=subprocess.DEVNULL)
    failed = 0
    for path in args.traces:
        ok, message = replay_trace(os.path.abspath(args.program), os.path.abspath(args.atp), path)
        print(f"{os.path.basename(path)}: {message}", flush=True)
        failed += not ok
    print(f"{len(args.traces) - failed} of {len(args.traces)} traces identical on BMv2")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
