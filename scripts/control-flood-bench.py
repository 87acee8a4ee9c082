#!/usr/bin/python3
"""A running job under a flood of idle and trickling control connections (issue 31 item 3).

Usage: scripts/control-flood-bench.py [--atp build/bin/atp] [--pairs 3] [--connections 100]

Runs `atp demo --json` (one switch on loopback, 2 jobs x 4 workers, real UDP) in pairs: once
alone, once while this script holds `--connections` connections to the switch's control
socket, half idle (connected, silent) and half trickling (a byte every 100 ms, never a whole
line), reopening each one the switch closes. Prints each pair's throughput ratio (flooded /
alone, mean over the jobs) and their mean; the goal is >= 0.9. Timing is compared within each
pair only (these machines are noisy).
"""
import argparse
import json
import os
import socket
import subprocess
import threading
import time

SOCKET = "/tmp/atp-rack0.sock"  # the demo's switch is `rack0`, on its default control path


def flood(stop, connections, opened):
    """Keeps `connections` connections open to the switch's control socket until `stop`."""
    held = []
    while not stop.is_set():
        while len(held) < connections and os.path.exists(SOCKET):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(SOCKET)
                s.setblocking(False)
                held.append(s)
                opened[0] += 1
            except OSError:
                s.close()
                break
        for i, s in enumerate(list(held)):
            try:
                if i % 2:
                    s.send(b"{")  # trickling: never a whole request
                if s.recv(4096) == b"":
                    raise OSError("closed")
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                held.remove(s)
        time.sleep(0.1)
    for s in held:
        s.close()


def demo(atp, connections):
    stop, opened = threading.Event(), [0]
    flooder = threading.Thread(target=flood, args=(stop, connections, opened))
    if connections:
        flooder.start()
    out = subprocess.run([atp, "demo", "--json"], capture_output=True, text=True, timeout=600)
    stop.set()
    if connections:
        flooder.join()
    report = json.loads(out.stdout)
    jobs = report["jobs"]
    if not all(j["exact"] for j in jobs):
        raise SystemExit("a demo run was not exact:\n" + out.stdout)
    return sum(j["throughput_gbps"] for j in jobs) / len(jobs), opened[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=100)
    args = parser.parse_args()
    ratios = []
    for pair in range(args.pairs):
        alone, _ = demo(args.atp, 0)
        flooded, opened = demo(args.atp, args.connections)
        ratios.append(flooded / alone)
        print(f"pair {pair + 1}: alone {alone:.2f} Gbit/s, with {args.connections} idle and "
              f"trickling connections {flooded:.2f} Gbit/s ({opened} opened): {flooded / alone:.2f}",
              flush=True)
    print(f"mean flooded / alone: {sum(ratios) / len(ratios):.2f} (goal >= 0.9)")


if __name__ == "__main__":
    main()
