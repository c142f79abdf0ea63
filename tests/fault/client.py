"""client.py - a recording client for the fault runs: one thread per connection sends SL.ALLOW
requests one at a time to one sluiced and writes each request and its outcome, with its local
times (monotonic and wall, at send and at reply), as one JSON line of the history.

    client.py SPEC.json OUT.jsonl

SPEC: {"conns": [{"id": "c0", "node": "s1", "addr": "10.77.0.5", "port": 6390}, ...],
       "ops": [[rule, key, cost, weight], ...], "count": N (per connection), "seconds": S,
       "gap_ms": pause between requests, "timeout_ms": a reply's deadline, "seed": n,
       "stop_file": path (the run ends when it exists)}

A history line: {"c": conn, "n": node, "rule", "key", "cost", "s": send monotonic, "sw": send
wall, "r": reply monotonic, "rw": reply wall} and one of "rep": the reply (a list, or a string
for an error reply "-ERR ..."), "err": what broke (the connection closed or refused), "to": true
(no reply within timeout_ms: the connection is closed and made again). Every loop is bounded by
count and by S seconds.
"""
import json
import os
import random
import socket
import sys
import threading
import time


def enc(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Reader:
    def __init__(self, sock):
        self.s, self.buf = sock, b""

    def _fill(self, n):
        while len(self.buf) < n:
            data = self.s.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.buf += data

    def _line(self):
        for _ in range(1 << 20):
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill(len(self.buf) + 1)
        raise ConnectionError("a line without end")

    def reply(self, depth=0):
        line = self._line()
        t, rest = line[:1], line[1:].decode("utf-8", "replace")
        if t == b"+":
            return rest
        if t == b"-":
            return "-" + rest
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            self._fill(n + 2)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode("utf-8", "replace")
        if t == b"*" and depth < 4:
            n = int(rest)
            return None if n < 0 else [self.reply(depth + 1) for _ in range(n)]
        raise ConnectionError("not RESP: %r" % line[:40])


def worker(spec, conn, out, lock, stop_at):
    rnd = random.Random("%s/%s" % (spec.get("seed", 1), conn["id"]))
    ops = spec["ops"]
    weights = [o[3] for o in ops]
    timeout = spec.get("timeout_ms", 1000) / 1000
    gap = spec.get("gap_ms", 0) / 1000
    stop_file = spec.get("stop_file")
    sock = reader = None
    lines = []
    for i in range(spec["count"]):
        if time.monotonic() >= stop_at or (stop_file and i % 16 == 0 and os.path.exists(stop_file)):
            break
        rule, key, cost, _ = rnd.choices(ops, weights)[0]
        rec = {"c": conn["id"], "n": conn["node"], "rule": rule, "key": key, "cost": cost}
        rec["s"], rec["sw"] = time.monotonic(), time.time()
        try:
            if sock is None:
                sock = socket.create_connection((conn["addr"], conn["port"]), timeout)
                sock.settimeout(timeout)
                reader = Reader(sock)
                rec["s"], rec["sw"] = time.monotonic(), time.time()
            sock.sendall(enc(["SL.ALLOW", rule, key, "COST", cost]))
            rec["rep"] = reader.reply()
        except socket.timeout:
            rec["to"] = True
        except (OSError, ConnectionError, ValueError) as e:
            rec["err"] = str(e)[:120]
        rec["r"], rec["rw"] = time.monotonic(), time.time()
        if "rep" not in rec and sock is not None:
            sock.close()
            sock = None
        lines.append(json.dumps(rec))
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
