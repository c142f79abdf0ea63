#!/usr/bin/env python3
"""lua_equiv.py - checks sluice's Redis Lua scripts against the core.

    lua_equiv.py PORT SLUICE SCRIPT_DIR TMP SEED [check ...]

SCRIPT_DIR holds the shipped scripts <algorithm>.lua: the texts the build makes from
src/store/lua/ (each script with its lib/ fragments put in) in $SLUICE_BUILD_DIR/src/store/lua.

Checks (all by default): `sha` (SCRIPT LOAD returns the file's SHA1; an unloaded SHA1 is
NOSCRIPT), `errors` (bad arguments and keys that hold no state of the script), `clock` (the
server's TIME when no now_us is given, and the key's absolute expiry), `equiv` (seeded random
(time, key, cost) sequences through every script with the now_us test clock and through the core
with `sluice replay --unit us`: every decision field equal; rejections and peeks leave the key's
bytes alone). Prints one line per case; exits 1 if any check failed.
"""
import hashlib
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from resp_client import Conn  # noqa: E402

ALGORITHMS = ["fixed_window", "sliding_log", "sliding_window", "sliding_buckets",
              "token_bucket", "gcra"]
START_US = 4 * 10**15  # 2096-10-02: keys written with the test clock never expire while we run
MS, SEC, MIN, HOUR, DAY = 1000, 10**6, 60 * 10**6, 3600 * 10**6, 86400 * 10**6


class Checks:
    def __init__(self):
        self.failed = 0

    def expect(self, name, cond, detail=""):
        if not cond:
            self.failed += 1
            print("FAIL %s %s" % (name, detail))
        return cond


def load_scripts(conn, script_dir, ck, verbose):
    shas = {}
    for alg in ALGORITHMS:
        with open(os.path.join(script_dir, alg + ".lua"), "rb") as f:
            text = f.read()
        want = hashlib.sha1(text).hexdigest()
        got = conn.call("SCRIPT", "LOAD", text)
        ck.expect("sha/" + alg, got == want.encode(), "SCRIPT LOAD %r, file sha1 %s" % (got, want))
        shas[alg] = want
        if verbose:
            print("sha1 %s %s" % (alg, want))
    return shas


def check_sha(conn, shas, ck):
    unloaded = hashlib.sha1(b"return 'not a sluice script'").hexdigest()
    r = conn.call("EVALSHA", unloaded, 1, "lua:x", 5, SEC, -1, -1, 0, 1)
    ck.expect("sha/noscript", isinstance(r, str) and r.startswith("-NOSCRIPT"), repr(r))
    r = conn.call("SCRIPT", "EXISTS", *shas.values(), unloaded)
    ck.expect("sha/exists", r == [1] * len(shas) + [0], repr(r))


# (algorithm, arguments after the key, the error's beginning)
BAD_ARGS = [
    ("fixed_window", [0, SEC, -1, -1, 0, 1], "ERR sluice fixed_window: limit must be"),
    ("fixed_window", ["5x", SEC, -1, -1, 0, 1], "ERR sluice fixed_window: limit must be"),
    ("fixed_window", [5, 999, -1, -1, 0, 1], "ERR sluice fixed_window: window_us must be"),
    ("fixed_window", [5, SEC, 3, -1, 0, 1], "ERR sluice fixed_window: burst must be"),
    ("fixed_window", [5, SEC, -1, -1, 0, -1], "ERR sluice fixed_window: cost must be"),
    ("fixed_window", [5, SEC, -1, -1, 0, "1.5"], "ERR sluice fixed_window: cost must be"),
    ("fixed_window", [5, SEC, -1, -1, 0], "ERR sluice fixed_window: cost must be"),
    ("sliding_log", [2**20 + 1, SEC, -1, -1, 0, 1], "ERR sluice sliding_log: limit must be"),
    ("sliding_log", [5, SEC, -1, 4, 0, 1], "ERR sluice sliding_log: buckets must be"),
    ("sliding_window", [5, 367 * DAY, -1, -1, 0, 1], "ERR sluice sliding_window: window_us"),
    ("sliding_window", [5, SEC, -1, -1, 10, 1], "ERR sluice sliding_window: max_delay_us"),
    ("sliding_buckets", [5, SEC, -1, 7, 0, 1], "ERR sluice sliding_buckets: buckets (7)"),
    ("sliding_buckets", [5, SEC, -1, 4097, 0, 1], "ERR sluice sliding_buckets: buckets must"),
    ("sliding_buckets", [5, SEC, -1, 0, 0, 1], "ERR sluice sliding_buckets: buckets must"),
    ("token_bucket", [5, SEC, 0, -1, 0, 1], "ERR sluice token_bucket: burst must be"),
    ("token_bucket", [5, SEC, -1, -1, -1, 1], "ERR sluice token_bucket: max_delay_us must"),
    ("gcra", [5, SEC, -2, -1, 0, 1], "ERR sluice gcra: burst must be"),
    ("gcra", [1, 366 * DAY, 10**6, -1, 0, 1], "ERR sluice gcra: the rule overflows"),
    ("gcra", [5, SEC, -1, -1, 0, 1, "soon"], "ERR sluice gcra: now_us must be"),
]


def check_errors(conn, shas, ck):
    for alg, args, want in BAD_ARGS:
        r = conn.call("EVALSHA", shas[alg], 1, "lua:err:" + alg, *args)
        ck.expect("errors/" + alg, isinstance(r, str) and r[1:].startswith(want),
                  "%r -> %r, want %r" % (args, r, want))
    # a key of another type, and a string that is no state of the script
    conn.call("DEL", "lua:err:list", "lua:err:str")
    conn.call("RPUSH", "lua:err:list", "x")
    conn.call("SET", "lua:err:str", "hello, world")
    for alg in ALGORITHMS:
        args = [5, SEC, -1, 4 if alg == "sliding_buckets" else -1, 0, 1, START_US]
        r = conn.call("EVALSHA", shas[alg], 1, "lua:err:list", *args)
        ck.expect("errors/wrongtype/" + alg, isinstance(r, str) and "WRONGTYPE" in r, repr(r))
        r = conn.call("EVALSHA", shas[alg], 1, "lua:err:str", *args)
        ck.expect("errors/foreign/" + alg, isinstance(r, str) and r.startswith(
            "-ERR sluice %s: key lua:err:str holds no %s state" % (alg, alg)), repr(r))
    ck.expect("errors/untouched", conn.call("GET", "lua:err:str") == b"hello, world")


def check_clock(conn, shas, ck):
    """Without now_us the script reads TIME; an admission sets an absolute expiry at reset."""
    for alg in ALGORITHMS:
        key = "lua:clock:" + alg
        conn.call("DEL", key)
        buckets = 4 if alg == "sliding_buckets" else -1
        t0 = int(conn.call("TIME")[0])
        r = conn.call("EVALSHA", shas[alg], 1, key, 3, 10 * SEC, -1, buckets, 0, 1)
        ttl = conn.call("PTTL", key)
        ok = (isinstance(r, list) and r[0] == 1 and 0 < r[4] <= 20 * SEC and
              0 < ttl <= -(-r[4] // MS) + 1 and abs(int(conn.call("TIME")[0]) - t0) < 5)
        ck.expect("clock/" + alg, ok, "reply %r pttl %r" % (r, ttl))
        # with the test clock: PEXPIRETIME is ceil((now + reset_after) / 1 ms)
        now = START_US + 123457
        r = conn.call("EVALSHA", shas[alg], 1, key + ":t", 3, 10 * SEC, -1, buckets, 0, 2, now)
        exp = conn.call("PEXPIRETIME", key + ":t")
        ck.expect("expiry/" + alg, isinstance(r, list) and exp == -(-(now + r[4]) // MS),
                  "reply %r pexpiretime %r" % (r, exp))
        # a peek and a rejection do not create a key
        r1 = conn.call("EVALSHA", shas[alg], 1, key + ":p", 3, 10 * SEC, -1, buckets, 0, 0, now)
        r2 = conn.call("EVALSHA", shas[alg], 1, key + ":p", 3, 10 * SEC, -1, buckets, 0, 9, now)
        ck.expect("nowrite/" + alg, r1[0] == 1 and r2[0] == 0 and r2[3] == -1 and
                  conn.call("EXISTS", key + ":p") == 0, "%r %r" % (r1, r2))


# name, algorithm, limit, window_us, burst, buckets, max_delay_us; why the case is there
CASES = [
    ("fw", "fixed_window", 5, SEC, -1, -1, 0),
    ("fw-1.5ms", "fixed_window", 3, 1500, -1, -1, 0),  # a window not a whole ms
    ("fw-big", "fixed_window", 3 * 10**10, SEC, -1, -1, 0),  # counts of 10+ digits: "count:k"
    ("log", "sliding_log", 5, SEC, -1, -1, 0),
    ("log-1h", "sliding_log", 5, HOUR, -1, -1, 0),  # 4-byte offsets, rebased past 2^32 us
    ("log-2h", "sliding_log", 20, 2 * HOUR, -1, -1, 0),  # 8-byte offsets (W > 2^32 us)
    ("sw", "sliding_window", 5, SEC, -1, -1, 0),
    ("sw-dense", "sliding_window", 1500, MS, -1, -1, 0),  # N > W in us
    ("sw-30d", "sliding_window", 10000, 30 * DAY, -1, -1, 0),  # N * W > 2^52: exact muldiv
    ("sw-big", "sliding_window", 4 * 10**12, 10 * SEC, -1, -1, 0),  # and "curr:prev:k"
    ("sb", "sliding_buckets", 6, 1200 * MS, -1, 4, 0),
    ("sb-1ms", "sliding_buckets", 10, 10 * MS, -1, -1, 0),  # default 10, G = 1 ms
    ("sb-1h", "sliding_buckets", 50, HOUR, -1, 60, 0),
    ("sb-big", "sliding_buckets", 5 * 10**9, SEC, -1, 5, 0),  # 8-byte counts (N >= 2^32)
    ("tb", "token_bucket", 5, SEC, 3, -1, 150 * MS),
    ("tb-third", "token_bucket", 3, MS, -1, -1, 0),  # T = 333 334 ns, not whole us
    ("tb-dense", "token_bucket", 3000, MS, 3000, -1, 100),  # T = 334 ns < 1 us
    ("gcra", "gcra", 2, SEC, 3, -1, 300 * MS),
    ("gcra-cell", "gcra", 1, SEC, 4, -1, 0),  # redis-cell's table's rule
    ("gcra-30d", "gcra", 7, 30 * DAY, 100, -1, DAY),  # tolerance > 2^53 ns
]
LINES = 1200


def capacity(alg, limit, burst):
    if alg == "token_bucket":
        return limit if burst == -1 else burst
    if alg == "gcra":
        return (limit if burst == -1 else burst) + 1
    return limit


def sequence(rng, window, grain, cap):
    t = START_US + rng.randrange(window)
    unit = max(1, cap // 8)
    lines = []
    for _ in range(LINES):
        r = rng.random()
        if r < 0.2:
            pass  # an equal timestamp
        elif r < 0.3:
            t += rng.randrange(1, 1000)
        elif r < 0.55:
            t += rng.randrange(1, max(2, window // 20))
        elif r < 0.8:
            t += rng.randrange(1, max(2, window // 3))
        elif r < 0.87:
            t += rng.randrange(window // 3, 2 * window)
        elif r < 0.93:  # onto a boundary of the grain, or 1 us either side
            t = (t // grain + 1) * grain + rng.choice([-1, 0, 0, 1])
        else:  # time going back
            t = max(START_US, t - rng.randrange(1, window))
        c = rng.random()
        cost = (0 if c < 0.08 else rng.randrange(1, unit + 1) if c < 0.7 else
                rng.randrange(1, cap + 1) if c < 0.93 else cap if c < 0.96 else
                cap + 1 + rng.randrange(3))
        lines.append((t, "k%d" % rng.randrange(4), cost))
    return lines


def replay(sluice, tmp, name, alg, limit, window, burst, buckets, max_delay, lines):
    path = os.path.join(tmp, "lua-equiv-%s.log" % name)
    with open(path, "w") as f:
        f.writelines("%d %s %d\n" % l for l in lines)
    cmd = [sluice, "replay", "--algorithm", alg, "--limit", str(limit), "--window",
           "%dus" % window, "--unit", "us"]
    if burst != -1:
        cmd += ["--burst", str(burst)]
    if buckets != -1:
        cmd += ["--buckets", str(buckets)]
    if alg in ("token_bucket", "gcra"):
        cmd += ["--max-delay", "%dus" % max_delay]
    out = subprocess.run(cmd + [path], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("sluice replay failed: " + out.stderr)
    rows = []
    for line in out.stdout.splitlines():
        f = line.split("\t")
        rows.append([int(x) for x in f[3:8]] + [int(f[8]) if len(f) > 8 else 0])
    assert len(rows) == len(lines), (name, len(rows))
    return rows


def check_equiv(conn, shas, ck, sluice, tmp, seed):
    conn.call("FLUSHALL")
    for idx, (name, alg, limit, window, burst, buckets, max_delay) in enumerate(CASES):
        rng = random.Random(seed * 100 + idx)
        cap = capacity(alg, limit, burst)
        k = 10 if buckets == -1 else buckets
        grain = (window // k if alg == "sliding_buckets" else
                 max(1, window // limit) if alg in ("token_bucket", "gcra") else window)
        lines = sequence(rng, window, grain, cap)
        want = replay(sluice, tmp, name, alg, limit, window, burst, buckets, max_delay, lines)
        cmds = []
        for t, key, cost in lines:
            rkey = "lua:%s:%s" % (name, key)
            cmds += [["GET", rkey],
                     ["EVALSHA", shas[alg], 1, rkey, limit, window, burst, buckets, max_delay,
                      cost, t],
                     ["GET", rkey]]
        got = conn.pipeline(cmds)
        bad, wrote = [], 0
        for i, ((t, key, cost), w) in enumerate(zip(lines, want)):
            before, g, after = got[3 * i:3 * i + 3]
            if g != w:
                bad.append((t, key, cost, w, g))
            elif (w[0] == 0 or cost == 0) and before != after:
                bad.append((t, key, cost, "no write", "%r -> %r" % (before, after)))
            wrote += before != after
        admitted = sum(1 for w in want if w[0] == 1)
        never = sum(1 for w in want if w[3] == -1)
        delayed = sum(1 for w in want if w[5] > 0)
        print("%-16s %d decisions: %d admitted (%d delayed), %d rejected (%d never), "
              "%d writes, %d differ" % (name, LINES, admitted, delayed, LINES - admitted, never,
                                        wrote, len(bad)))
        for b in bad[:5]:
            print("  at %d key %s cost %d: core %r, script %r" % b)
        # both outcomes must be exercised, or the comparison proves little
        ck.expect("equiv/" + name, not bad and admitted >= LINES // 5 and
                  LINES - admitted - never >= LINES // 16)


def used_memory(conn):
    info = conn.call("INFO", "memory").decode()
    return int([l for l in info.split("\r\n") if l.startswith("used_memory:")][0].split(":")[1])


def per_key(conn, port, n, make):
    """Bytes of used_memory per key after writing n keys with make(j) (a list of commands)."""
    conn.call("FLUSHALL")
    before = used_memory(conn)
    w = Conn(port)  # closed before measuring: its buffers are not the keys' memory
    w.pipeline([c for j in range(n) for c in make(j)], chunk=2000)
    w.s.close()
    time.sleep(0.5)  # the keyspace's incremental rehash finishes in serverCron
    return (used_memory(conn) - before) / n


def report_memory(conn, port, shas, ck):
    """Prints memory per key (used_memory delta over 20000 keys, and MEMORY USAGE of one)."""
    n = 10000

    def ev(alg, j, limit=3, window=HOUR, buckets=-1, cost=1):
        return ["EVALSHA", shas[alg], 1, "user:%d" % j, limit, window, -1, buckets, 0, cost]

    rows = [("SET k v PX t", lambda j: [["SET", "user:%d" % j, "v", "PX", 3600000]])]
    for alg in ALGORITHMS:
        rows.append((alg, lambda j, a=alg: [ev(a, j)]))
    # logs of 1000 requests: past zset-max-listpack-entries (128), as a ZSET log of a busy key
    rows.append(("sliding_log, 1000 stamps", lambda j: [ev("sliding_log", j, 1000, cost=1000)]))
    rows.append(("ZSET log, 1000 entries", lambda j: [
        ["ZADD", "user:%d" % j] + [x for i in range(1000) for x in (1700000000000000 + i,
                                                                     "1700000000000000-%d" % i)],
        ["PEXPIRE", "user:%d" % j, 3600000]]))
    per_key(conn, port, 2000, rows[1][1])  # warm-up: one-time allocations are not per key
    got = {}
    for name, make in rows:
        got[name] = per_key(conn, port, n if "1000" not in name else n // 20, make)
        usage = conn.call("MEMORY", "USAGE", "user:1")
        print("memory per key: %-24s %7.1f B (MEMORY USAGE %s B)" % (name, got[name], usage))
    log_1, log_1000 = got["sliding_log"], got["sliding_log, 1000 stamps"]
    zset_1000 = got["ZSET log, 1000 entries"]
    print("memory per stored request: sliding_log %.1f B, ZSET log %.1f B"
          % ((log_1000 - log_1) / 999, (zset_1000 - got["SET k v PX t"]) / 1000))
    conn.call("FLUSHALL")
    # gcra's state is an integer-encoded string: no larger than SET k v PX t
    ck.expect("memory/gcra", got["gcra"] <= got["SET k v PX t"] + 1)


def main():
    port, sluice, script_dir, tmp, seed = sys.argv[1:6]
    which = sys.argv[6:] or ["sha", "errors", "clock", "equiv", "memory"]
    conn = Conn(int(port))
    ck = Checks()
    shas = load_scripts(conn, script_dir, ck, "sha" in which)
    if "sha" in which:
        check_sha(conn, shas, ck)
    if "errors" in which:
        check_errors(conn, shas, ck)
    if "clock" in which:
        check_clock(conn, shas, ck)
    if "equiv" in which:
        check_equiv(conn, shas, ck, sluice, tmp, int(seed))
    if "memory" in which:
        report_memory(conn, int(port), shas, ck)
    sys.exit(1 if ck.failed else 0)


if __name__ == "__main__":
    main()
