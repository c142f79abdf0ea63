"""client.py - the load of bench/holds/run.sh: N operations over one connection, pipelined in
batches of P, each batch sent in one write and its replies read before the next.

    client.py PORT N P MODE KEYS SEED

MODE  allow      SL.ALLOW api k:<i>                         (a named gcra rule through sluiced)
      pair       SL.ACQUIRE jobs k:<i>, then SL.RELEASE jobs k:<i> <id>   (a named concurrency rule)
      module     SL.ACQUIRE k:<i> concurrency 100 10000, then SL.RELEASE k:<i> concurrency 100 10000 ID <id>
      zset       EVALSHA <semaphore.lua> 1 k:<i> <now_ms> 10000 100 <id>, then ZREM k:<i> <id>
                 (the sorted-set semaphore: the script is loaded first; ids made here)
      gcra       SL.THROTTLE k:<i> gcra 100 1000           (sluice.so's decision, for scale)
A pair counts as one operation (its two commands go in two pipelined batches). Keys are picked
uniformly from KEYS with a seeded generator. Prints the operations whose every reply was well
formed; exits 1 at the first malformed or error reply."""
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration"))
from resp_client import Conn  # noqa: E402

SEMAPHORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "semaphore.lua")


def fail(what):
    print("client.py: %s" % what, file=sys.stderr)
    sys.exit(1)


def main():
    port, n, p, mode, nkeys, seed = sys.argv[1:7]
    n, p, nkeys = int(n), int(p), int(nkeys)
    rnd = random.Random(int(seed))
    c = Conn(int(port))
    sha = None
    if mode == "zset":
        with open(SEMAPHORE, "rb") as f:
            sha = c.call("SCRIPT", "LOAD", f.read()).decode()
    done, serial = 0, 0
    while done < n:
        keys = ["k:%d" % rnd.randrange(nkeys) for _ in range(min(p, n - done))]
        if mode == "allow":
            rep = c.pipeline([("SL.ALLOW", "api", k) for k in keys], p)
        elif mode == "gcra":
            rep = c.pipeline([("SL.THROTTLE", k, "gcra", 100, 1000) for k in keys], p)
        elif mode in ("pair", "module"):
            acq = [("SL.ACQUIRE", "jobs", k) if mode == "pair" else
                   ("SL.ACQUIRE", k, "concurrency", 100, 10000) for k in keys]
            got = c.pipeline(acq, p)
            ids = [r[5] if isinstance(r, list) and len(r) == 6 else fail("acquire: %r" % (r,))
                   for r in got]
            rel = [("SL.RELEASE", "jobs", k, i) if mode == "pair" else
                   ("SL.RELEASE", k, "concurrency", 100, 10000, "ID", i)
                   for k, i in zip(keys, ids) if i != 0]
            rep = c.pipeline(rel, p)
        elif mode == "zset":
            now_ms = int(time.time() * 1000)
            ids = []
            for _ in keys:
                serial += 1
                ids.append("%d-%d" % (os.getpid(), serial))
            got = c.pipeline([("EVALSHA", sha, 1, k, now_ms, 10000, 100, i)
                              for k, i in zip(keys, ids)], p)
            if any(r not in (0, 1) for r in got):
                fail("semaphore: %r" % (got[:3],))
            rep = c.pipeline([("ZREM", k, i) for k, i, r in zip(keys, ids, got) if r == 1], p)
        else:
            fail("unknown mode %s" % mode)
        if any(isinstance(r, str) and r.startswith("-") for r in rep):
            fail("error reply: %r" % ([r for r in rep if isinstance(r, str)][:1],))
        done += len(keys)
    print(done)


if __name__ == "__main__":
    main()
