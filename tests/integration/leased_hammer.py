"""leased_hammer.py - hammers sluiced servers with SL.ALLOW on one hot key and many warm keys,
from one thread per server, and counts from the replies what each fixed window admitted.

usage: leased_hammer.py PORTS RULE WINDOW_MS HOT_LIMIT WARM_LIMIT WARM_KEYS DECISIONS SECONDS [CONNS
       [SYNC_MS]]

SYNC_MS (an approximate rule's sync_interval; default 0: a leased or strict rule, exact) raises
each limit by approximate's bound, 2 x (nodes - 1) x rate x SYNC_MS, taking each thread as a
node (each connection is on a loop of its own) and as its rate of a key twice the fastest
thread's mean rate of it over the run (for its bursts).

PORTS is a comma-separated list of sluiced RESP ports, each hammered over CONNS connections
(default 1; sluiced spreads connections over its loops). Every thread sends batches of 40
pipelined SL.ALLOW RULE <key> (70 % the hot key "hot", the rest one of WARM_KEYS keys "w<i>"),
at most DECISIONS decisions or SECONDS seconds each. A reply is counted in the fixed window of
RULE's WINDOW_MS that holds both the batch's send and its last reply (the decision was made in
between; a batch across a window's edge is not counted). Prints one line of JSON: decisions,
admitted, the most any window admitted per key kind, and the windows over their limit; exits 1
when a window admitted more than its key's limit."""
import json
import sys
import threading
import time

from resp_client import Conn, enc

BATCH = 40


def hammer(port, rule, window_ms, warm_keys, decisions, deadline, out, lock, seed):
    c = Conn(port)
    counts = {}
    sent = admitted = hot = 0
    start = time.time()
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
        for k, rep in zip(keys, replies):
            if isinstance(rep, str):
                raise SystemExit("error reply: %s" % rep)
            if rep[0] == 1:
                admitted += 1
                if w0 == w1:
                    counts[(k, w0)] = counts.get((k, w0), 0) + 1
    elapsed = max(time.time() - start, 1e-3)
    with lock:
        out["hot_rate"] = max(out["hot_rate"], hot / elapsed)
        out["warm_rate"] = max(out["warm_rate"], (sent - hot) / warm_keys / elapsed)
        out["decisions"] += sent
        out["admitted"] += admitted
        for key, n in counts.items():
            out["counts"][key] = out["counts"].get(key, 0) + n


def main():
    ports = [int(p) for p in sys.argv[1].split(",")]
    rule, window_ms = sys.argv[2], int(sys.argv[3])
    hot_limit, warm_limit, warm_keys = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    decisions, seconds = int(sys.argv[7]), float(sys.argv[8])
    conns = int(sys.argv[9]) if len(sys.argv) > 9 else 1
    sync_s = int(sys.argv[10]) / 1000 if len(sys.argv) > 10 else 0
    out = {"decisions": 0, "admitted": 0, "counts": {}, "hot_rate": 0.0, "warm_rate": 0.0}
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
    if sync_s > 0:
        others = len(threads) - 1
        hot_limit += int(2 * others * 2 * out["hot_rate"] * sync_s) + 1
        warm_limit += int(2 * others * 2 * out["warm_rate"] * sync_s) + 1
    over = []
    most = {"hot": 0, "warm": 0}
    for (k, w), n in out["counts"].items():
        kind = "hot" if k == "hot" else "warm"
        most[kind] = max(most[kind], n)
        if n > (hot_limit if kind == "hot" else warm_limit):
            over.append([k, w, n])
    print(json.dumps({"decisions": out["decisions"], "admitted": out["admitted"],
                      "most_hot": most["hot"], "most_warm": most["warm"], "over": over[:10],
                      "hot_bound": hot_limit, "warm_bound": warm_limit}))
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
