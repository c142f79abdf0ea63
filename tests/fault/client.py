"""client.py - a recording client for the fault runs: one thread per connection sends SL.ALLOW
requests one at a time to one sluiced and writes each request and its outcome, with its local
times (monotonic and wall, at send and at reply), as one JSON line of the history.

    client.py SPEC.json OUT.jsonl

SPEC: {"conns": [{"id": "c0", "node": "s1", "addr": "10.77.0.5", "port": 6390}, ...],
       "ops": [[rule, key, cost, weight], ...], "count": N (per connection), "seconds": S,
       "inflight": [[rule, key, cost, weight, hold_ms, timeout_ms], ...] (optional),
       "gap_ms": pause between requests, "timeout_ms": a reply's deadline, "seed": n,
       "stop_file": path (the run ends when it exists)}

A history line: {"c": conn, "n": node, "rule", "key", "cost", "s": send monotonic, "sw": send
wall, "r": reply monotonic, "rw": reply wall} and one of "rep": the reply (a list, or a string
for an error reply "-ERR ..."), "err": what broke (the connection closed or refused), "to": true
(no reply within timeout_ms: the connection is closed and made again). Every loop is bounded by
count and by S seconds.

An in-flight op (a rule of `algorithm: concurrency`, drawn with the ops by weight) is an
SL.ACQUIRE of cost units with TIMEOUT timeout_ms, recorded with "op": "acquire" and "tmo"; when
it was admitted with a hold id, the connection holds it 0.5 to 1.5 times hold_ms (its other ops
wait) and sends SL.RELEASE of the id, recorded with "op": "release", "id" and "acq": the acquire's
send time (monotonic), whatever the stop time (a hold taken is given back); a release that could
not be sent (no connection: "unsent") is tried again until the hold's timeout.
"""
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from resp_client import enc, Reader  # noqa: E402


def call(conn, sock, reader, timeout, cmd, rec):
    """Sends cmd on the connection (made first when there is none) and records into rec its
    times and its reply, or what broke ("unsent": the connection could not be made, the command
    never left); -> the connection and its reader (None after a break)."""
    rec["s"], rec["sw"] = time.monotonic(), time.time()
    try:
        if sock is None:
            rec["unsent"] = True
            sock = socket.create_connection((conn["addr"], conn["port"]), timeout)
            sock.settimeout(timeout)
            reader = Reader(sock, text=True)
            rec["s"], rec["sw"] = time.monotonic(), time.time()
            del rec["unsent"]
        sock.sendall(enc(cmd))
        rec["rep"] = reader.reply()
    except socket.timeout:
        rec["to"] = True
    except (OSError, ConnectionError, ValueError) as e:
        rec["err"] = str(e)[:120]
    rec["r"], rec["rw"] = time.monotonic(), time.time()
    if "rep" not in rec and sock is not None:
        sock.close()
        sock = None
    return sock, reader


def release(conn, sock, reader, timeout, acq):
    """Releases acq's hold; sent again (every 50 ms, until the hold's timeout) while the
    connection cannot be made (a node killed and not yet back), never after it was sent (a
    release whose reply did not come may have been done). -> sock, reader, the records."""
    hold = acq["rep"][5]
    recs = []
    for _ in range(200):
        rel = {"c": conn["id"], "n": conn["node"], "rule": acq["rule"], "key": acq["key"],
               "cost": acq["cost"], "op": "release", "id": hold, "acq": acq["s"]}
        sock, reader = call(conn, sock, reader, timeout,
                            ["SL.RELEASE", acq["rule"], acq["key"], hold], rel)
        recs.append(json.dumps(rel))
        if not rel.get("unsent") or time.monotonic() > acq["s"] + acq["tmo"] / 1000:
            break
        time.sleep(0.05)
    return sock, reader, recs


def worker(spec, conn, out, lock, stop_at):
    rnd = random.Random("%s/%s" % (spec.get("seed", 1), conn["id"]))
    ops = spec["ops"] + spec.get("inflight", [])
    weights = [o[3] for o in ops]
    timeout = spec.get("timeout_ms", 1000) / 1000
    gap = spec.get("gap_ms", 0) / 1000
    stop_file = spec.get("stop_file")
    sock = reader = None
    lines = []
    for i in range(spec["count"]):
        if time.monotonic() >= stop_at or (stop_file and i % 16 == 0 and os.path.exists(stop_file)):
            break
        op = rnd.choices(ops, weights)[0]
        rule, key, cost = op[:3]
        rec = {"c": conn["id"], "n": conn["node"], "rule": rule, "key": key, "cost": cost}
        if len(op) > 4:
            rec.update(op="acquire", tmo=op[5])
            cmd = ["SL.ACQUIRE", rule, key, "COST", cost, "TIMEOUT", op[5]]
        else:
            cmd = ["SL.ALLOW", rule, key, "COST", cost]
        sock, reader = call(conn, sock, reader, timeout, cmd, rec)
        lines.append(json.dumps(rec))
        rep = rec.get("rep")
        if len(op) > 4 and isinstance(rep, list) and len(rep) == 6 and rep[0] == 1 and rep[5]:
            time.sleep(op[4] / 1000 * rnd.uniform(0.5, 1.5))
            sock, reader, rec = release(conn, sock, reader, timeout, rec)
            lines.extend(rec)
            rec = json.loads(rec[-1])
        if "err" in rec or "to" in rec:
            time.sleep(0.02)  # a refused connect returns at once: do not spin
        elif gap:
            time.sleep(gap)
    if sock is not None:
        sock.close()
    with lock:
        out.write("\n".join(lines) + ("\n" if lines else ""))


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    stop_at = time.monotonic() + spec["seconds"]
    lock = threading.Lock()
    with open(sys.argv[2], "w") as out:
        threads = [threading.Thread(target=worker, args=(spec, c, out, lock, stop_at))
                   for c in spec["conns"]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
