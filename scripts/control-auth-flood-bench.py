#!/usr/bin/python3
"""A running job while peers without the secret send big requests to the switch's TCP control
(issue 49 item 4).

Usage: scripts/control-auth-flood-bench.py [--atp build/bin/atp] [--pairs 3] [--clients 3]

Starts `atp switch` (control on tcp://127.0.0.1:PORT with a secret) and `atp ps`, then runs one
job of 4 `atp worker`s over real UDP on loopback in pairs: once alone, once while `--clients`
threads each send 256 KiB requests to the switch's control port without the secret, over and
over (a fresh connection each time), and once while they send the same to a decoy listener of
this script's (the flood's own cost to this 2-core host, which the switch's loop does not pay).
Prints each triple's throughputs, switch-flooded / alone (the goal: >= 0.95) and switch-flooded
/ decoy-flooded (the loop's share of the loss; above 1 once the switch takes connections at its
capped rate, which leaves the flooders waiting instead of spending the host's cores). Before the handshake (runtime/control_auth.h) the
switch parsed each such request on its packet loop before checking the secret; now it reads
no more than a hello line of it. Timing is compared within each pair only.
"""
import argparse
import json
import os
import socket
import subprocess
import tempfile
import threading
import time

WORKERS = 4


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_fabric(folder):
    control = free_port()
    text = (f'[[switch]]\nname = "rack0"\naddress = "127.0.0.1:{free_port()}"\naggregators = 256\n'
            f'control = "tcp://127.0.0.1:{control}"\n'
            f'[[ps]]\nname = "ps0"\naddress = "127.0.0.1:{free_port()}"\n'
            f'control = "{folder}/ps0.sock"\n'
            '[[job]]\nid = 1\nwindow = 64\ntoken = 77\nparameter_servers = ["ps0"]\nworkers = [\n')
    for _ in range(WORKERS):
        text += f'  {{ rack = "rack0", address = "127.0.0.1:{free_port()}" }},\n'
    path = os.path.join(folder, "cluster.toml")
    with open(path, "w") as f:
        f.write(text + "]\n")
    secret = os.path.join(folder, "secret")
    with open(secret, "w") as f:
        f.write(os.urandom(16).hex() + "\n")
    os.chmod(secret, 0o600)
    return path, secret, control


def flood(stop, port, sent):
    """Sends 256 KiB requests without the secret to the control port until `stop`."""
    request = b'{"cmd":"list","pad":"' + b"x" * (256 << 10) + b'"}\n'
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(request)
                s.recv(4096)
                sent[0] += 1
        except OSError:
            pass  # the switch closed the connection before taking it all: as it should


def decoy():
    """A listener of this script's own that takes each connection, reads what comes and closes
    it: the same flood sent there costs the host the same work, and the switch's loop nothing."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)

    def serve():
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            with c:
                c.settimeout(1)
                try:
                    c.recv(64)
                    c.sendall(b'{"ok":false}\n')
                except OSError:
                    pass
    threading.Thread(target=serve, daemon=True).start()
    return listener


def run_job(atp, config, folder, floats, clients, port):
    stop, sent = threading.Event(), [0]
    flooders = [threading.Thread(target=flood, args=(stop, port, sent)) for _ in range(clients)]
    for t in flooders:
        t.start()
    time.sleep(0.2)
    workers = [subprocess.Popen([atp, "worker", "--config", config, "--job", "1", "--rank", str(r),
                                 "--floats", str(floats), "--iterations", "8",
                                 "--json-out", os.path.join(folder, f"w{r}.json")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for r in range(WORKERS)]
    for w in workers:
        w.wait(timeout=600)
    stop.set()
    for t in flooders:
        t.join()
    reports = [json.load(open(os.path.join(folder, f"w{r}.json"))) for r in range(WORKERS)]
    if not all(r["exact"] for r in reports):
        raise SystemExit("a run was not exact: " + json.dumps(reports))
    return sum(r["throughput_gbps"] for r in reports) / WORKERS, sent[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atp", default="build/bin/atp")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--floats", type=int, default=1 << 20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        config, secret, port = write_fabric(folder)
        daemons = [subprocess.Popen([args.atp, "switch", "--config", config, "--name", "rack0",
                                     "--control-secret-file", secret], stderr=subprocess.DEVNULL),
                   subprocess.Popen([args.atp, "ps", "--config", config, "--name", "ps0"],
                                    stderr=subprocess.DEVNULL)]
        time.sleep(0.5)
        try:
            decoy_port = decoy().getsockname()[1]
            ratios, kept = [], []
            for pair in range(args.pairs):
                alone, _ = run_job(args.atp, config, folder, args.floats, 0, port)
                elsewhere, _ = run_job(args.atp, config, folder, args.floats, args.clients, decoy_port)
                flooded, sent = run_job(args.atp, config, folder, args.floats, args.clients, port)
                ratios.append(flooded / elsewhere)
                kept.append(flooded / alone)
                print(f"pair {pair + 1}: alone {alone:.2f} Gbit/s; with {args.clients} clients "
                      f"sending 256 KiB requests without the secret to a decoy {elsewhere:.2f}, to "
                      f"the switch {flooded:.2f} ({sent} refused): switch / decoy "
                      f"{flooded / elsewhere:.2f}, switch / alone {flooded / alone:.2f}", flush=True)
            print(f"switch / alone: mean {sum(kept) / len(kept):.2f}, lowest {min(kept):.2f} (goal "
                  f">= 0.95); switch / decoy: mean {sum(ratios) / len(ratios):.2f}, lowest "
                  f"{min(ratios):.2f}")
        finally:
            for d in daemons:
                d.terminate()
                d.wait()


if __name__ == "__main__":
    main()
