#!/usr/bin/env python3
"""run.py - how long a Kubernetes ConfigMap update takes to be in force in sluiced, with its
default settings (--rules DIR, --rules-watch 200ms): the directory is laid out and swapped the way
kubelet's atomic writer does it (files linked through "..data", itself a link to a timestamped
directory; a new directory, "..data_tmp" pointed at it, renamed over "..data"), and the rule's
limit is asked over RESP every millisecond until it is the new one. Prints each repetition and
the median; asserts nothing.

    bench/rules_swap/run.py [--sluiced build/src/server/sluiced] [--reps 7]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "integration"))
from resp_client import Reader, enc  # noqa: E402


def edge(limit):
    return ("domain: edge\ndescriptors:\n  - key: remote_address\n"
            "    rate_limit: {unit: second, requests_per_unit: %d}\n" % limit)


def swap(cfg, n, limit):
    """kubelet's atomic writer: a new timestamped directory, ..data swapped to it."""
    ts = "..2026_01_01_00_00_%02d.000000000" % n
    old = os.readlink(os.path.join(cfg, "..data")) if os.path.islink(os.path.join(cfg, "..data")) else None
    os.mkdir(os.path.join(cfg, ts))
    with open(os.path.join(cfg, ts, "edge.yaml"), "w") as f:
        f.write(edge(limit))
    tmp = os.path.join(cfg, "..data_tmp")
    os.symlink(ts, tmp)
    os.rename(tmp, os.path.join(cfg, "..data"))
    if not os.path.islink(os.path.join(cfg, "edge.yaml")):
        os.symlink("..data/edge.yaml", os.path.join(cfg, "edge.yaml"))
    if old:
        subprocess.run(["rm", "-rf", os.path.join(cfg, old)], check=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluiced", default="build/src/server/sluiced")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sluice-swap-")
    cfg = os.path.join(tmp, "config")
    os.mkdir(cfg)
    swap(cfg, 0, 1000)
    port = free_port()
    log = open(os.path.join(tmp, "sluiced.log"), "w")
    proc = subprocess.Popen([a.sluiced, "--port", str(port), "--http-port", "0", "--grpc-port", "0",
                             "--rules", cfg, "--config-store", os.path.join(tmp, "store.db"),
                             "--snapshot", ""], stdout=log, stderr=log)
    try:
        for _ in range(200):
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("sluiced did not start: see " + log.name)
        rd = Reader(sock, text=True)

        def limit():
            sock.sendall(enc(["SL.RULE", "GET", "edge.remote_address"]))
            r = rd.reply()
            return r if isinstance(r, str) else ""

        times = []
        for i in range(1, a.reps + 1):
            want = '"limit":%d,' % (1000 + i)
            t0 = time.monotonic()
            swap(cfg, i, 1000 + i)
            while want not in limit():
                if time.monotonic() - t0 > 10:
                    sys.exit("repetition %d: the new limit is not in force after 10 s" % i)
                time.sleep(0.001)
            ms = (time.monotonic() - t0) * 1000
            times.append(ms)
            print("swap %d: %.0f ms" % (i, ms))
            time.sleep(0.5)
        print("median of %d: %.0f ms (min %.0f, max %.0f)" % (len(times), statistics.median(times),
                                                             min(times), max(times)))
    finally:
        proc.terminate()
        proc.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
