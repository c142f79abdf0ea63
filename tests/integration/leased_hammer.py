"""leased_hammer.py - hammers sluiced servers with SL.ALLOW on one hot key and many warm keys,
from one thread per server, and counts from the replies what each fixed window admitted.

usage: leased_hammer.py PORTS RULE WINDOW_MS HOT_LIMIT WARM_LIMIT WARM_KEYS DECISIONS SECONDS [CONNS
       [SYNC_MS]]

Each thread sends DECISIONS decisions (a count: the run's size does not depend on speed);
SECONDS only caps the run, far above what it needs, and "capped" in the output says it was hit.

SYNC_MS (an approximate rule's sync_interval; default 0: a leased or strict rule, exact) raises
each key's limit by approximate's bound (docs/algorithms.md, "Approximate counts"): the sum over
threads j (each connection is on a loop of its own, a node) of A_j(S + d) + A_j(S + 2d), A_j(T)
the most units of the key thread j had admitted in batches whose [send, last reply] meets one
span of T, S the sync interval and d the longest batch round trip seen (a batch that waited for
Redis took at least a trip there and back). Both come from the replies, not from a rate.

PORTS is a comma-separated list of sluiced RESP ports, each hammered over CONNS connections
(default 1; sluiced spreads connections over its loops). Every thread sends batches of 40
pipelined SL.ALLOW RULE <key> (70 % the hot key "hot", the rest one of WARM_KEYS keys "w<i>").
A reply is counted in the fixed window of RULE's WINDOW_MS that holds both the batch's send and
its last reply (the decision was made in between; a batch across a window's edge is not
counted). Prints one line of JSON: decisions, admitted, the hot key's admissions and the limits
its replies showed, the most any window admitted per key kind, and the windows over their
limit; exits 1 when a window admitted more than its key's limit (or bound)."""
import json
import sys
import threading
import time

from resp_client import Conn, enc

BATCH = 40


def hammer(port, rule, window_ms, warm_keys, decisions, deadline, out, lock, seed):
    c = Conn(port)
    counts = {}
    batches = []  # (send, last reply, {key: units admitted})
    hot_limits = set()
    sent = admitted = hot = hot_admitted = 0
    x = seed
    while sent < decisions and time.time() < deadline:
        keys = []
        for _ in range(BATCH):
            x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            r = (x >> 33) % 100
            keys.append("hot" if r < 70 else "w%d" % ((x >> 20) % warm_keys))
        hot += sum(1 for k in keys if k == "hot")
        t0 = time.time()
        c.s.sendall(b"".join(enc(["SL.ALLOW", rule, k]) for k in keys))
        replies = [c.reply() for _ in keys]
        t1 = time.time()
        sent += len(keys)
        w0, w1 = int(t0 * 1000) // window_ms, int(t1 * 1000) // window_ms
        units = {}
        for k, rep in zip(keys, replies):
            if isinstance(rep, str):
                raise SystemExit("error reply: %s" % rep)
            if k == "hot":
                hot_limits.add(rep[1])
            if rep[0] == 1:
                admitted += 1
                hot_admitted += k == "hot"
                units[k] = units.get(k, 0) + 1
                if w0 == w1:
                    counts[(k, w0)] = counts.get((k, w0), 0) + 1
        batches.append((t0, t1, units))
    with lock:
        out["capped"] = out["capped"] or sent < decisions
        out["decisions"] += sent
        out["admitted"] += admitted
        out["hot_admitted"] += hot_admitted
        out["hot_limits"] |= hot_limits
        out["batches"].append(batches)
        for key, n in counts.items():
            out["counts"][key] = out["counts"].get(key, 0) + n


def span_max(batches, key, span):
    """The most units of key one thread's batches admitted whose [send, reply] meets one
    interval of length span (every interval worth trying starts or ends at a batch's edge)."""
    best = 0
    for _, end, _ in batches:
        for lo, hi in ((end - span, end), (end, end + span)):
            best = max(best, sum(u.get(key, 0) for s, e, u in batches if e >= lo and s <= hi))
    return best


def approx_slack(out, key, sync_s):
    d = max((e - s for b in out["batches"] for s, e, _ in b), default=0.0)
    return sum(span_max(b, key, sync_s + d) + span_max(b, key, sync_s + 2 * d)
               for b in out["batches"])


def main():
    ports = [int(p) for p in sys.argv[1].split(",")]
    rule, window_ms = sys.argv[2], int(sys.argv[3])
    hot_limit, warm_limit, warm_keys = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    decisions, seconds = int(sys.argv[7]), float(sys.argv[8])
    conns = int(sys.argv[9]) if len(sys.argv) > 9 else 1
    sync_s = int(sys.argv[10]) / 1000 if len(sys.argv) > 10 else 0
    out = {"decisions": 0, "admitted": 0, "counts": {}, "capped": False, "hot_admitted": 0,
           "hot_limits": set(), "batches": []}
    lock = threading.Lock()
    deadline = time.time() + seconds
    threads = [
        threading.Thread(target=hammer, args=(p, rule, window_ms, warm_keys, decisions, deadline,
                                              out, lock, i + 1))
        for i, p in enumerate(ports * conns)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bounds = {}
    over = []
    most = {"hot": 0, "warm": 0}
    for (k, w), n in out["counts"].items():
        kind = "hot" if k == "hot" else "warm"
        most[kind] = max(most[kind], n)
        if k not in bounds:
            bounds[k] = (hot_limit if kind == "hot" else warm_limit) + \
                (approx_slack(out, k, sync_s) if sync_s > 0 else 0)
        if n > bounds[k]:
            over.append([k, w, n, bounds[k]])
    print(json.dumps({"decisions": out["decisions"], "capped": out["capped"],
                      "admitted": out["admitted"], "hot_admitted": out["hot_admitted"],
                      "hot_limits": sorted(out["hot_limits"]), "most_hot": most["hot"],
                      "most_warm": most["warm"], "over": over[:10],
                      "hot_bound": bounds.get("hot", hot_limit),
                      "warm_bound_max": max([b for k, b in bounds.items() if k != "hot"],
                                            default=warm_limit)}))
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
