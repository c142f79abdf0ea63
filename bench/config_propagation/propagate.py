#!/usr/bin/env python3
"""propagate.py - how long a rule change made through one sluiced takes to be in force on
another sharing its config store. Prints figures; asserts nothing.

    propagate.py A_PORT B_PORT N SEED PAUSE_MS

N times: a random pause (0 to PAUSE_MS, seeded; the poll interval: changes land at every phase
of a poll, as they would, not just after one), then
SL.RULE SET prop {..."limit": L...} through A (RESP on A_PORT), then SL.PEEK prop k on B until
B reports limit L (at most 5 s). A change's time runs from the moment the SET is sent to B's
first reply with the new limit, so it holds A's write and reload, the store's commit, and B's
finding out (its poll, or the store's push) and reload.

Prints one line: N p50_ms p99_ms max_ms mean_ms timeouts.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration"))
from resp_client import Conn, enc  # noqa: E402

RULE = '{"algorithm":"fixed_window","limit":%d,"window":"1h"}'


def call(conn, *args):
    conn.s.sendall(enc(list(args)))
    return conn.reply()


def main():
    a_port, b_port, n, seed, pause_ms = (int(x) for x in sys.argv[1:6])
    rnd = random.Random(seed)
    a, b = Conn(a_port), Conn(b_port)
    times, timeouts = [], 0
    for i in range(n):
        time.sleep(rnd.uniform(0, pause_ms / 1000))
        limit = 1000 + i
        t0 = time.perf_counter()
        r = call(a, "SL.RULE", "SET", "prop", RULE % limit)
        if r != "OK":
            raise SystemExit("SL.RULE SET through A: %r" % (r,))
        deadline = t0 + 5
        while True:
            r = call(b, "SL.PEEK", "prop", "k")
            now = time.perf_counter()
            if isinstance(r, list) and r[1] == limit:
                times.append((now - t0) * 1000)
                break
            if now > deadline:
                timeouts += 1
                break
    times.sort()

    def pct(p):
        return times[min(len(times) - 1, int(p / 100 * len(times)))] if times else float("nan")

    mean = sum(times) / len(times) if times else float("nan")
    print("%d %.1f %.1f %.1f %.1f %d" % (n, pct(50), pct(99), times[-1] if times else float("nan"),
                                         mean, timeouts))


if __name__ == "__main__":
    main()
