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
bytes alone), `settle` (the same sequences with settles among them: refunds, settles below,
equal and above the reservation, debts, charged at an admission's time, at `now` or at any time,
through every script and through libsluice ($SLUICE_BUILD_DIR/src/libsluice.so, called by
tests/integration/sluice_core.py): every reply equal, the key present exactly when the core's
state is not fresh, its expiry the first millisecond the core's state is fresh, and a settle that
leaves the core's state as it was leaves the key's bytes as they were), `convert` (keys whose
numbers change among decisions and settles: converted as the core's sl_state_convert() converts,
the value recording the new numbers, a peek under other numbers writing nothing; values without
numbers, as an older sluiced wrote them, read under the command's numbers), `cold` (a closed
start, closed_from: keys absent within one window of it taken as having used their whole
capacity then, as sl_state_saturate() says, through the scripts and, when the Redis has it
loaded with its test clock, through sluice.so's CLOSED_FROM: every reply, value and expiry).
Prints one line per case; exits 1 if any check failed.
"""
import ctypes
import hashlib
import os
import random
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from resp_client import Conn  # noqa: E402
from sluice_core import (Core, Keys, debt_refused, log_entries, log_packed_old,  # noqa: E402
                         module_value)

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
    ("gcra", [5, SEC, -1, -1, 0, "settle", -1, 0, "now"], "ERR sluice gcra: reserved must be"),
    ("fixed_window", [5, SEC, -1, -1, 0, "settle", 1], "ERR sluice fixed_window: actual must be"),
    ("sliding_log", [5, SEC, -1, -1, 0, "settle", 1, 0], "ERR sluice sliding_log: charged_us must"),
    ("sliding_log", [5, SEC, -1, -1, 0, "settle", 1, 0, "then"],
     "ERR sluice sliding_log: charged_us must be an integer in [-9007199254740991, "
     "9007199254740991], got 'then' (or 'now')"),
    ("sliding_window", [5, SEC, -1, -1, 0, "settle", 1, 0, "now", "x"],
     "ERR sluice sliding_window: now_us must be"),
    ("sliding_buckets", [5, SEC, -1, 4, 0, "Settle", 1, 0, "now"],
     "ERR sluice sliding_buckets: cost must be"),
    ("gcra", [5, SEC, -1, -1, 0, 1, "closed_from", "x"], "ERR sluice gcra: closed_from_us must be"),
    ("token_bucket", [5, SEC, -1, -1, 0, 1, 7, "closed_from", -1],
     "ERR sluice token_bucket: closed_from_us must be"),
    ("fixed_window", [5, SEC, -1, -1, 0, "settle", 1, 0, "now", "closed_from"],
     "ERR sluice fixed_window: closed_from_us must be an integer in [0, 9007199254740991], "
     "got nothing"),
    ("sliding_log", [5, SEC, -1, -1, 0, 1, 7, "closed"],
     "ERR sluice sliding_log: unexpected argument 'closed' (the last ones are [now_us] "
     "[closed_from from_us] [reserve units])"),
    ("sliding_window", [5, SEC, -1, -1, 0, 1, "closed_from", 7, 8],
     "ERR sluice sliding_window: unexpected argument '8'"),
    ("gcra", [5, SEC, -1, -1, 0, "settle", 0, 1, "now", "max_debt", -1],
     "ERR sluice gcra: max_debt must be an integer in [0, 9007199254740991], got '-1'"),
    ("sliding_log", [5, SEC, -1, -1, 0, "settle", 0, 1, "now", 7, "max_debt"],
     "ERR sluice sliding_log: max_debt must be an integer in [0, 9007199254740991], got nothing"),
    ("fixed_window", [5, SEC, -1, -1, 0, "settle", 0, 1, "now", 7, "max", 1],
     "ERR sluice fixed_window: unexpected argument 'max' (the last ones are [now_us] "
     "[max_debt units] [closed_from from_us])"),
    ("token_bucket", [5, SEC, -1, -1, 0, 1, "max_debt", 1],
     "ERR sluice token_bucket: unexpected argument 'max_debt' (the last ones are [now_us] "
     "[closed_from from_us] [reserve units])"),
    ("gcra", [5, SEC, -1, -1, 0, 1, "reserve", -1],
     "ERR sluice gcra: reserve must be an integer in [0, 9007199254740991], got '-1'"),
    ("fixed_window", [5, SEC, -1, -1, 0, "settle", 0, 1, "now", "reserve", 1],
     "ERR sluice fixed_window: unexpected argument 'reserve' (the last ones are [now_us] "
     "[max_debt units] [closed_from from_us])"),
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


def core_fields(d):
    """A core decision (ns) as a script's reply: durations in us, rounded up."""
    f = d.fields()
    return [f[0], f[1], f[2]] + [-1 if v < 0 else -(-v // 1000) for v in f[3:]]


NOW_MAX_NS = (2**63 - 1) // 2  # the core's SL_NOW_MAX_NS: it decides no later than that


def expiry_ok(core, rule, state, pexpiretime):
    """The key's expiry is the first millisecond at which the core's state is fresh (a debt can
    reach past the core's last time: then the state must not be fresh at that time either)."""
    if state is None:
        return pexpiretime == -2  # no key
    ms = 10**6
    if pexpiretime > 0 and (pexpiretime - 1) * ms >= NOW_MAX_NS:
        return not core.fresh(rule, state, NOW_MAX_NS)
    return (pexpiretime > 0 and core.fresh(rule, state, pexpiretime * ms) and
            not core.fresh(rule, state, (pexpiretime - 1) * ms))


def leb128(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7f) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i


def core_view(alg, rule, state, packed):
    """What a core state holds, in us, in the terms a script's value can be compared in."""
    q = struct.unpack("<%dq" % (len(state) // 8), state.raw)
    if alg == "fixed_window":
        return ("count", q[1], "window", q[0])
    if alg == "sliding_window":
        return ("curr", q[1], "prev", q[2], "window", q[0])
    if alg in ("token_bucket", "gcra"):
        return ("tat ns", q[0])
    if alg == "sliding_buckets":
        k, g = rule.buckets, rule.bucket_ns
        newest = q[0] // g
        counts = {j: q[2 + j % (k + 1)] for j in range(newest - k, newest + 1)}
        return ("latest", q[0] // 1000, "counts", {j: c for j, c in counts.items() if c})
    # sliding_log: the packed form (src/core/sliding_log.c)
    return packed_view(packed)


def packed_view(packed):
    """A packed sliding_log (either form) as entries of (time us, units) and the latest time
    recorded when it is later than the newest (None otherwise); the older form's DROPPED as one
    more unit at the oldest, as the core reads it."""
    _, entries, latest, dropped = log_entries(packed)
    entries = [(t // 1000, u) for t, u in entries]
    if dropped:
        entries[0] = (entries[0][0], entries[0][1] + 1)
    return ("entries", entries, "latest", latest and latest // 1000)


def split_value(alg, value):
    """A script's value: its state (as an older sluiced wrote it, without numbers) and the numbers
    it records (None: none)."""
    if alg in ("fixed_window", "sliding_window", "token_bucket", "gcra"):
        if b"#" not in value:
            return value, None
        body, nums = value.split(b"#")
        return body, nums.decode()
    if value[0] & 64 == 0:
        return value, None
    n = value[-1]
    return bytes([value[0] - 64]) + value[1:-1 - n], value[-1 - n:-1].decode()


def script_nums(alg, rule):
    """The numbers a script's value records for a core rule (its NUMS)."""
    w = rule.window_ns // 1000
    if alg == "sliding_log":
        return "%d:%d" % (rule.limit, w)
    if alg == "sliding_buckets":
        return "%d:%d" % (w, rule.buckets)
    if alg in ("token_bucket", "gcra"):
        return "%d" % rule.interval_ns
    return "%d" % w


def script_view(alg, rule, value):
    """What a script's value holds, as core_view shows a core state, and the numbers it records
    when they are not the rule's."""
    value, nums = split_value(alg, value)
    view = plain_view(alg, rule, value)
    return view if nums in (None, script_nums(alg, rule)) else view + ("numbers", nums)


def plain_view(alg, rule, value):
    """script_view of a value without numbers."""
    if alg in ("fixed_window", "sliding_window"):
        v = value.decode()
        if ":" in v:
            parts = [int(x) for x in v.split(":")]
        else:
            d = [int(v[0])] + ([int(v[1])] if alg == "sliding_window" else [])
            pos, parts = len(d), []
            for n in d:
                parts.append(int(v[pos:pos + n]))
                pos += n
            parts.append(int(v[pos:]))
        if alg == "fixed_window":
            return ("count", parts[0], "window", parts[1])
        return ("curr", parts[0], "prev", parts[1], "window", parts[2])
    if alg in ("token_bucket", "gcra"):
        return ("tat ns", int(value))
    width, flags = value[0] % 16, value[0] - value[0] % 16
    base = struct.unpack("<q", value[1:9])[0]
    if alg == "sliding_log" and value[0] >= 128:  # entries: offset, running total mod 2^32
        ofs, prev, out = "<I" if width == 4 else "<q", struct.unpack("<I", value[9:13])[0], []
        for j in range(13, len(value), width + 4):
            t = base + struct.unpack(ofs, value[j:j + width])[0]
            total = struct.unpack("<I", value[j + width:j + width + 4])[0]
            out.append((t, (total - prev) % 2**32))
            prev = total
        latest = out.pop()[0] if flags & 32 else None
        return ("entries", out, "latest", latest)
    fmt = "<%d%s" % ((len(value) - 9) // width, "I" if width == 4 else "q")
    entries = list(struct.unpack(fmt, value[9:]))
    if alg == "sliding_buckets":
        g = rule.bucket_ns // 1000
        newest = base // g
        first = newest - len(entries) + 1
        return ("latest", base, "counts",
                {first + j: c for j, c in enumerate(entries) if c})
    stamps = [base + e for e in entries]  # the older form of sliding_log: one stamp per unit
    latest = stamps.pop() if flags & 32 else None
    out = []
    for t in stamps:
        if out and out[-1][0] == t:
            out[-1] = (t, out[-1][1] + 1)
        else:
            out.append((t, 1))
    if flags & 16:
        out[0] = (out[0][0], out[0][1] + 1)
    return ("entries", out, "latest", latest)


SETTLE_LINES = 900
# besides CASES: small logs, where debts meet logs full of entries (the oldest merged into the
# next) and refunds keep the latest time (LATEST)
SETTLE_CASES = [
    ("log-3", "sliding_log", 3, 100 * MS, -1, -1, 0),
    ("log-8", "sliding_log", 8, 50 * MS, -1, -1, 0),
]


def check_settle(conn, shas, ck, seed):
    """Decisions and settles through every script and through libsluice (sluice_core.py)."""
    core = Core(os.environ["SLUICE_BUILD_DIR"])
    conn.call("FLUSHALL")
    refused_all = 0  # settles refused by max_debt, every case
    for idx, (name, alg, limit, window, burst, buckets, max_delay) in enumerate(
            CASES + SETTLE_CASES):
        rng = random.Random(seed * 100 + 50 + idx)
        rule = core.rule(alg, limit, window * 1000, burst, buckets, max_delay * 1000)
        # max_debt: the default (the capacity), none, or twice the capacity, by turns
        md = [None, 0, 2 * rule.capacity][idx % 3]
        if md is not None:
            rule = core.rule(alg, limit, window * 1000, burst, buckets, max_delay * 1000, md)
        keys, cap = Keys(core, rule), rule.capacity
        k = 10 if buckets == -1 else buckets
        grain = (window // k if alg == "sliding_buckets" else
                 max(1, window // limit) if alg in ("token_bucket", "gcra") else window)
        admitted = {}  # key -> [(time us, cost)], as the core decided them
        cmds, wants = [], []
        stats = {"settles": 0, "refunds that gave back": 0, "debts": 0, "refused peeks": 0,
                 "deleted": 0, "unchanged": 0, "debts refused": 0}
        todo = [(t, key, cost, None) for t, key, cost in sequence(rng, window, grain, cap)]
        todo = todo[:SETTLE_LINES][::-1]  # popped from the end
        while todo:
            t, key, cost, settle = todo.pop()
            rkey = "lua:s:%s:%s" % (name, key)
            head = ["EVALSHA", shas[alg], 1, rkey, limit, window, burst, buckets, max_delay]
            before = keys.packed(key)
            past = admitted.get(key, [])
            if settle is None and rng.random() < 0.45 and cost <= cap:
                r = rng.random()
                if past and r < 0.7:  # one of the key's last admissions, at its time
                    charged, reserved = rng.choice(past[-4:])
                else:  # now, or any time in the last 2 windows or just ahead
                    reserved = rng.randrange(cap + 1)
                    charged = "now" if r < 0.85 else t - rng.randrange(-1000, 2 * window)
                a = rng.random()
                actual = reserved + (
                    -reserved if a < 0.3 else -rng.randrange(reserved + 1) if a < 0.55 else
                    0 if a < 0.62 else rng.randrange(1, cap // 4 + 2) if a < 0.9 else
                    rng.randrange(1, cap + 1) if a < 0.96 else rng.randrange(cap, 3 * cap + 1))
                settle = (reserved, actual, charged)
                if actual > reserved and past and rng.random() < 0.5:
                    # then, at once, a refund of an earlier admission: in a log that a debt
                    # filled, after a merge
                    when, res = rng.choice(past[-4:])
                    todo.append((t, key, 0, (res, rng.randrange(res), when)))
            if settle is not None:
                reserved, actual, charged = settle
                stats["settles"] += 1
                at = t * 1000 if charged == "now" else charged * 1000
                d = keys.settle(key, reserved, actual, at, t * 1000)
                cmd = head + ["settle", reserved, actual, charged, t]
                cmd += [] if md is None else ["max_debt", md]
                stats["refunds that gave back"] += actual < reserved and keys.packed(key) != before
                stats["debts"] += actual > reserved and d is not None
                stats["debts refused"] += d is None
                stats["refused peeks"] += d is not None and not d.allowed
                stats["deleted"] += before is not None and keys.packed(key) is None
                unchanged = (before is not None or d is None) and keys.packed(key) == before
                stats["unchanged"] += unchanged
            else:
                d = keys.decide(key, cost, t * 1000)
                if d.allowed and cost > 0:
                    admitted.setdefault(key, []).append((t, cost))
                cmd = head + [cost, t]
                unchanged = not d.allowed or cost == 0
            cmds += [["GET", rkey], cmd, ["GET", rkey], ["PEXPIRETIME", rkey]]
            state = keys.copy(key)
            view = state and core_view(alg, rule, state, keys.packed(key))
            want = debt_refused(rule, alg) if d is None else core_fields(d)
            wants.append((cmd, want, unchanged, state, view))
        got = conn.pipeline(cmds)
        bad, flagged = [], 0  # sliding_log values keeping a refunded entry's time (LATEST)
        for i, (cmd, want, unchanged, state, view) in enumerate(wants):
            before, g, after, expire = got[4 * i:4 * i + 4]
            flagged += alg == "sliding_log" and after is not None and after[0] & 32 != 0
            got_view = after and script_view(alg, rule, after)
            why = ("reply" if g != want else "write" if unchanged and before != after else
                   "expiry" if not expiry_ok(core, rule, state, expire) else
                   "state" if got_view != view else None)
            if why:
                bad.append((why, " ".join(map(str, cmd[4:])), want, g, view, got_view, expire))
        if alg == "sliding_log":
            stats["flagged values"] = flagged
        print("%-16s %d operations: %s; %d differ" % (
            name, len(wants), ", ".join("%d %s" % (v, k) for k, v in stats.items()), len(bad)))
        for b in bad[:5]:
            print("  %s: %s: core %r, script %r (state: core %r, script %r; pexpiretime %r)" % b)
        # with max_debt 0 no debt is taken, so no peek is refused but at the limit
        refused_all += stats["debts refused"]
        ck.expect("settle/" + name, not bad and stats["settles"] >= SETTLE_LINES // 3 and
                  stats["refunds that gave back"] >= 10 and
                  (md == 0 or stats["debts"] >= 20 and stats["refused peeks"] >= 20) and
                  (md != 0 or stats["debts refused"] >= 20) and
                  (alg != "sliding_log" or flagged >= 3))
    ck.expect("settle/debts-refused", refused_all >= 300, "%d" % refused_all)


LEASE_LINES = 900


def check_lease(conn, shas, ck, seed):
    """Leases, their returns and decisions through every script but sliding_log's and through
    libsluice (sl_lease, sl_lease_return): every reply, the value, its expiry, and a lease of
    nothing or a return that gives nothing back leaving the key's bytes alone."""
    core = Core(os.environ["SLUICE_BUILD_DIR"])
    conn.call("FLUSHALL")
    for idx, (name, alg, limit, window, burst, buckets, max_delay) in enumerate(CASES):
        if alg == "sliding_log":
            continue
        rng = random.Random(seed * 100 + 70 + idx)
        rule = core.rule(alg, limit, window * 1000, burst, buckets, max_delay * 1000)
        keys, cap = Keys(core, rule), rule.capacity
        tokens = alg in ("token_bucket", "gcra")
        longest = min((rule.tolerance_ns - rule.interval_ns) // 1000 if tokens else window,
                      366 * DAY)
        k = 10 if buckets == -1 else buckets
        grain = (window // k if alg == "sliding_buckets" else
                 max(1, window // limit) if tokens else window)
        held = {}  # key -> leases not returned yet
        cmds, wants = [], []
        stats = {"leases": 0, "granted": 0, "units": 0, "returns": 0, "gave back": 0}
        for t, key, cost in sequence(rng, window, grain, cap)[:LEASE_LINES]:
            rkey = "lua:l:%s:%s" % (name, key)
            head = ["EVALSHA", shas[alg], 1, rkey, limit, window, burst, buckets, max_delay]
            before = keys.packed(key)
            r = rng.random()
            mine = held.setdefault(key, [])
            if r < 0.35 and longest >= 1:
                want = rng.choice([0, 1, rng.randrange(1, cap + 3), cap])
                lease_us = rng.randrange(1, longest + 1) if rng.random() < 0.7 else longest
                lease = keys.lease(key, want, lease_us * 1000, t * 1000)
                want_reply = [lease.granted, lease.at_ns // 1000, lease.until_ns // 1000,
                              lease.remaining, -(-lease.reset_after_ns // 1000)]
                cmd = head + ["lease", want, lease_us, t]
                stats["leases"] += 1
                stats["granted"] += lease.granted > 0
                stats["units"] += lease.granted
                if lease.granted > 0:
                    mine.append(lease)
                unchanged = lease.granted == 0
            elif r < 0.6 and mine:
                lease = mine.pop(rng.randrange(len(mine)))
                unused = rng.choice([0, lease.granted, rng.randrange(lease.granted + 1)])
                when = t if rng.random() < 0.8 else lease.at_ns // 1000
                d = keys.lease_return(key, lease, unused, when * 1000)
                want_reply = core_fields(d)
                cmd = head + ["return", lease.granted, unused, lease.at_ns // 1000,
                              lease.until_ns // 1000, when]
                stats["returns"] += 1
                stats["gave back"] += keys.packed(key) != before
                unchanged = keys.packed(key) == before
            else:
                d = keys.decide(key, cost, t * 1000)
                want_reply = core_fields(d)
                cmd = head + [cost, t]
                unchanged = not d.allowed or cost == 0
            cmds += [["GET", rkey], cmd, ["GET", rkey], ["PEXPIRETIME", rkey]]
            state = keys.copy(key)
            view = state and core_view(alg, rule, state, keys.packed(key))
            wants.append((cmd, want_reply, unchanged, state, view))
        got = conn.pipeline(cmds)
        bad = []
        for i, (cmd, want, unchanged, state, view) in enumerate(wants):
            before, g, after, expire = got[4 * i:4 * i + 4]
            got_view = after and script_view(alg, rule, after)
            why = ("reply" if g != want else "write" if unchanged and before != after else
                   "expiry" if not expiry_ok(core, rule, state, expire) else
                   "state" if got_view != view else None)
            if why:
                bad.append((why, " ".join(map(str, cmd[4:])), want, g, view, got_view, expire))
        print("%-16s %d operations: %s; %d differ" % (
            name, len(wants), ", ".join("%d %s" % (v, k) for k, v in stats.items()), len(bad)))
        for b in bad[:5]:
            print("  %s: %s: core %r, script %r (state: core %r, script %r; pexpiretime %r)" % b)
        enough = longest < 1 or (stats["granted"] >= 20 and stats["returns"] >= 20 and
                                 stats["gave back"] >= 5)
        ck.expect("lease/" + name, not bad and enough)


# name, algorithm, then the numbers a key goes between (limit, window_us, burst, buckets,
# max_delay_us): the first the case's, the others what an override or a rule change makes them
CONVERT_CASES = [
    ("fw", "fixed_window", [(5, SEC, -1, -1, 0), (3, SEC, -1, -1, 0), (8, 2500 * MS, -1, -1, 0),
                            (5, 400 * MS, -1, -1, 0), (4, 1500, -1, -1, 0)]),
    ("log", "sliding_log", [(5, SEC, -1, -1, 0), (3, SEC, -1, -1, 0), (8, 700 * MS, -1, -1, 0),
                            (5, 2 * SEC, -1, -1, 0)]),
    ("log-20", "sliding_log", [(20, 700 * MS, -1, -1, 0), (10, 700 * MS, -1, -1, 0),
                               (30, 1400 * MS, -1, -1, 0)]),
    ("sw", "sliding_window", [(5, SEC, -1, -1, 0), (3, SEC, -1, -1, 0), (9, 3 * SEC, -1, -1, 0),
                              (5, 300 * MS, -1, -1, 0), (7, 1500, -1, -1, 0)]),
    ("sb", "sliding_buckets", [(6, 1200 * MS, -1, 4, 0), (6, 1200 * MS, -1, 6, 0),
                               (3, 1200 * MS, -1, 4, 0), (10, 2400 * MS, -1, 8, 0),
                               (6, 600 * MS, -1, 3, 0)]),
    ("tb", "token_bucket", [(5, SEC, 3, -1, 150 * MS), (5, SEC, 5, -1, 0),
                            (10, SEC, 3, -1, 150 * MS), (2, SEC, 2, -1, 0), (3, MS, -1, -1, 0)]),
    ("gcra", "gcra", [(2, SEC, 3, -1, 300 * MS), (2, SEC, 1, -1, 0), (4, SEC, 3, -1, 300 * MS),
                      (3, 1500 * MS, 5, -1, 0), (3000, MS, 3000, -1, 100)]),
]
CONVERT_LINES = 1500

# Rewrites a key's value as a sluiced before recorded numbers wrote it (ARGV[1]: 'decimal',
# 'packed', or 'log': sliding_log's older form of one stamp per unit, for a log of at most N
# units, ARGV[2]), keeping its expiry
STRIP = """local v = redis.call('GET', KEYS[1])
if not v or (ARGV[1] == 'log' and string.byte(v, 1) < 128) then return 0 end -- older already
local n = string.byte(v, -1)
if ARGV[1] == 'decimal' then
  v = string.match(v, '^([^#]+)#')
elseif ARGV[1] == 'packed' then
  v = string.char(string.byte(v, 1) - 64) .. string.sub(v, 2, -n - 2)
else
  v = string.sub(v, 1, -n - 2)
  local w = (string.byte(v, 1) - 192) % 16
  local latest = string.byte(v, 1) - 192 - w == 32
  local fmt, base = w == 4 and '<I4' or '<i8', struct.unpack('<i8', v, 2)
  local prev, cnt, parts = struct.unpack('<I4', v, 10), (#v - 13) / (w + 4), {}
  if latest then cnt = cnt - 1 end
  local first = cnt > 0 and base + struct.unpack(fmt, v, 14) or base
  for i = 0, cnt - 1 do
    local at = 14 + (w + 4) * i
    local t, total = base + struct.unpack(fmt, v, at), struct.unpack('<I4', v, at + w)
    for _ = 1, (total - prev) % 4294967296 do parts[#parts + 1] = struct.pack(fmt, t - first) end
    prev = total
  end
  if latest then
    parts[#parts + 1] = struct.pack(fmt, base + struct.unpack(fmt, v, 14 + (w + 4) * cnt) - first)
  end
  v = string.char(w + (latest and 32 or 0)) .. struct.pack('<i8', first) .. table.concat(parts)
end
redis.call('SET', KEYS[1], v, 'KEEPTTL')
return 1"""


def older_ok(alg, rule, packed):
    """Whether the state is one an older sluiced could have written exactly: for sliding_log, one
    stamp per unit, at most N of them (N with the latest time recorded apart: fewer)."""
    if alg != "sliding_log":
        return True
    _, entries, latest, _ = log_entries(packed)
    units = sum(u for _, u in entries)
    return units < rule.limit or (units == rule.limit and latest is None)


def check_convert(conn, shas, ck, seed):
    """Keys whose numbers change (an override set or removed, a rule's numbers changed): their
    values converted as the core's sl_state_convert() converts a state, then decided and settled
    under the new numbers, against libsluice: every reply, the value (the numbers it records
    too) and its expiry; a peek on a value under other numbers writes nothing, a cost or a
    settle writes the converted value whatever it decides; a value without numbers (an older
    sluiced's) is read under the numbers of the command."""
    core = Core(os.environ["SLUICE_BUILD_DIR"])
    conn.call("FLUSHALL")
    for idx, (name, alg, variants) in enumerate(CONVERT_CASES):
        rng = random.Random(seed * 100 + 80 + idx)
        rules = [core.rule(alg, l, w * 1000, b, k, d * 1000) for l, w, b, k, d in variants]
        keys = Keys(core, rules[0])
        current, pinned, admitted = {}, set(), {}
        window = max(v[1] for v in variants)
        t = START_US + rng.randrange(window)
        cmds, wants = [], []
        stats = {"converted": 0, "converted by a rejection": 0, "unconverted peeks": 0,
                 "refunds": 0, "debts": 0, "older values": 0}
        for _ in range(CONVERT_LINES):
            r = rng.random()
            t += (0 if r < 0.2 else rng.randrange(1, 1000) if r < 0.3 else
                  rng.randrange(1, window // 5) if r < 0.85 else
                  rng.randrange(window // 5, 2 * window) if r < 0.97 else
                  -rng.randrange(window // 5))
            t = max(t, START_US)
            key = "k%d" % rng.randrange(3)
            rkey = "lua:c:%s:%s" % (name, key)
            if key not in pinned and rng.random() < 0.12:
                current[key] = rng.randrange(len(rules))
            i = current.get(key, 0)
            rule, (limit, w, burst, buckets, max_delay) = rules[i], variants[i]
            cap = rule.capacity
            head = ["EVALSHA", shas[alg], 1, rkey, limit, w, burst, buckets, max_delay]
            saved = keys.save(key)
            past = admitted.get(key, [])
            settle = None
            if rng.random() < 0.4:
                if past and rng.random() < 0.7:
                    charged, reserved = rng.choice(past[-4:])
                    reserved = min(reserved, cap)
                else:
                    reserved = rng.randrange(cap + 1)
                    charged = "now" if rng.random() < 0.8 else t - rng.randrange(2 * window)
                a = rng.random()
                actual = (0 if a < 0.3 else rng.randrange(reserved + 1) if a < 0.55 else
                          reserved if a < 0.65 else reserved + rng.randrange(1, cap + 1))
                settle = (reserved, actual, charged)
            # a settle's time is no earlier than its charge's (sl_settle)
            at = t if settle is None or settle[2] == "now" else max(t, settle[2])
            # the script converts, at the command's time, when the numbers its value records
            # differ (the core copies a state whose meaning they leave alone: sl_state_convert)
            if script_nums(alg, keys.rule_of(key)) == script_nums(alg, rule):
                keys.rules[key] = rule
                converted = False
            else:
                converted = keys.with_rule(key, rule, at * 1000)
            before = keys.packed(key)
            if settle is None:
                cost = min(rng.choice([0, 1, 1, 1, 2, 3, cap]), cap)
                d = keys.decide(key, cost, t * 1000)
                if d.allowed and cost > 0:
                    admitted.setdefault(key, []).append((t, cost))
                    pinned.discard(key)  # the value records numbers again
                if cost == 0:
                    keys.restore(key, saved)  # a peek writes nothing
                    stats["unconverted peeks"] += converted
                elif converted:
                    keys.keep(key, t * 1000)
                    stats["converted by a rejection"] += not d.allowed
                cmd = head + [cost, t]
                unchanged = not converted and (not d.allowed or cost == 0) or cost == 0
            else:
                reserved, actual, charged = settle
                d = keys.settle(key, reserved, actual,
                                t * 1000 if charged == "now" else charged * 1000, t * 1000)
                if d is None:  # refused by max_debt: the script writes nothing, converted or not
                    keys.restore(key, saved)
                    converted = False
                elif converted:
                    keys.keep(key, at * 1000)
                stats["refunds"] += actual < reserved and keys.packed(key) != before
                stats["debts"] += actual > reserved and d is not None
                cmd = head + ["settle", reserved, actual, charged, t]
                unchanged = d is None or (not converted and before is not None and
                                          keys.packed(key) == before)
            stats["converted"] += converted and (cmd[-5] == "settle" or cmd[-2] > 0)
            state, written = keys.copy(key), keys.rule_of(key)
            if state is None:
                pinned.discard(key)
            view = state and core_view(alg, written, state, keys.packed(key))
            cmds += [["GET", rkey], cmd, ["GET", rkey], ["PEXPIRETIME", rkey]]
            want = debt_refused(rule, alg) if d is None else core_fields(d)
            wants.append((cmd, want, unchanged, state, view, written))
            if (state is not None and script_nums(alg, written) == script_nums(alg, rule) and
                    older_ok(alg, written, keys.packed(key)) and rng.random() < 0.05):
                # the key's value as an older sluiced wrote it: read under the numbers of the
                # commands until one writes it, which stay these
                form = ("log" if alg == "sliding_log" else "packed" if alg == "sliding_buckets"
                        else "decimal")
                cmds.append(["EVAL", STRIP, 1, rkey, form])
                pinned.add(key)
                stats["older values"] += 1
        got = conn.pipeline(cmds)
        bad, pos = [], 0
        for cmd, want, unchanged, state, view, written in wants:
            before, g, after, expire = got[pos:pos + 4]
            pos += 4
            if pos < len(got) and cmds[pos][0] == "EVAL":
                pos += 1
            got_view = after and script_view(alg, written, after)
            why = ("reply" if g != want else "write" if unchanged and before != after else
                   "expiry" if not expiry_ok(core, written, state, expire) else
                   "state" if got_view != view else None)
            if why:
                bad.append((why, " ".join(map(str, cmd[4:])), want, g, view, got_view, expire))
        print("%-16s %d operations: %s; %d differ" % (
            name, len(wants), ", ".join("%d %s" % (v, k) for k, v in stats.items()), len(bad)))
        for b in bad[:5]:
            print("  %s: %s: core %r, script %r (state: core %r, script %r; pexpiretime %r)" % b)
        ck.expect("convert/" + name, not bad and stats["converted"] >= 30 and
                  stats["converted by a rejection"] >= 1 and stats["unconverted peeks"] >= 2 and
                  stats["refunds"] >= 10 and stats["debts"] >= 30 and
                  stats["older values"] >= 20)


OLDER_LINES = 1500


def older_value(packed, nums):
    """sliding_log's value as an older sluiced wrote it, from the older packed form (one stamp
    per unit, src/core/sliding_log.c): width 4, the oldest stamp, offsets from it (us), with the
    numbers when nums is not None."""
    flags = packed[0] - packed[0] % 16
    unit = 10 ** (packed[0] % 16)
    n, i = leb128(packed, 1)
    stamps, t = [], 0
    for _ in range(n + (1 if flags & 32 else 0)):
        d, i = leb128(packed, i)
        t += d * unit
        stamps.append(t // 1000)
    base = stamps[0] if stamps else 0
    out = bytes([4 + flags + (64 if nums else 0)]) + struct.pack("<q", base)
    out += b"".join(struct.pack("<I", x - base) for x in stamps)
    return out + (nums.encode() + bytes([len(nums)]) if nums else b"")


def check_older(conn, shas, ck, seed):
    """sliding_log values of older sluiceds (one stamp per unit; a debt's DROPPED, a refund's
    LATEST; with and without numbers): states the core makes from random decisions, debts and
    refunds, written in the older form (the newest N stamps and DROPPED when a debt holds more),
    are read by the script as the core reads the same older packed bytes (sl_state_unpack): a
    random decision or settle on both, every reply and the value written."""
    core = Core(os.environ["SLUICE_BUILD_DIR"])
    conn.call("FLUSHALL")
    for idx, (limit, window) in enumerate([(3, 100 * MS), (5, SEC)]):
        rng = random.Random(seed * 100 + 95 + idx)
        name = "older-%d" % limit
        rule = core.rule("sliding_log", limit, window * 1000)
        keys, older = Keys(core, rule), Keys(core, rule)
        nums = "%d:%d" % (limit, window)
        t, cmds, wants = START_US + rng.randrange(window), [], []
        stats = {"dropped": 0, "latest": 0, "without numbers": 0, "written": 0}
        head = ["EVALSHA", shas["sliding_log"], 1, None, limit, window, -1, -1, 0]
        for j in range(OLDER_LINES):
            t += rng.choice([0, rng.randrange(1, window // 4), rng.randrange(window)])
            if rng.random() < 0.6:
                keys.decide("k", rng.randrange(limit + 1), t * 1000)
            elif rng.random() < 0.4:
                keys.settle("k", 0, rng.randrange(1, 2 * limit + 2), t * 1000, t * 1000)
            else:
                keys.settle("k", rng.randrange(1, limit + 1), 0, t * 1000, t * 1000)
            packed = keys.packed("k")
            if packed is None:
                continue
            old = log_packed_old(rule, packed)
            state = ctypes.create_string_buffer(rule.state_size)
            assert core.lib.sl_state_unpack(ctypes.byref(rule), old, len(old), state) == 0
            older.states["o"] = state
            recorded = nums if rng.random() < 0.7 else None
            stats["dropped"] += old[0] & 16 != 0
            stats["latest"] += old[0] & 32 != 0
            stats["without numbers"] += recorded is None
            at = t + rng.randrange(window)
            if rng.random() < 0.6:
                cost = rng.randrange(limit + 1)
                d = older.decide("o", cost, at * 1000)
                cmd = head + [cost, at]
            else:
                reserved, actual = rng.randrange(limit + 1), rng.randrange(2 * limit + 1)
                d = older.settle("o", reserved, actual, at * 1000, at * 1000)
                cmd = head + ["settle", reserved, actual, "now", at]
            rkey = "lua:older:%s:%d" % (name, j)
            cmd[3] = rkey
            cmds += [["SET", rkey, older_value(old, recorded), "PX", 10**9], cmd, ["GET", rkey]]
            after = older.packed("o")
            want = debt_refused(rule, "sliding_log") if d is None else core_fields(d)
            wants.append((cmd, want, after and packed_view(after), old))
        got = conn.pipeline(cmds)
        bad = []
        for i, (cmd, want, view, old) in enumerate(wants):
            g, value = got[3 * i + 1], got[3 * i + 2]
            stats["written"] += value is not None and value[0] >= 128
            got_view = None
            if value is not None:
                got_view = script_view("sliding_log", rule, value)
                got_view = got_view[:4]  # the numbers it records are the command's
            # an older value the command did not write stays, and reads as the core's
            why = ("reply" if g != want else "state" if value is not None and view is not None
                   and got_view != view else None)
            if why:
                bad.append((why, " ".join(map(str, cmd[4:])), want, g, view, got_view, old))
        print("%-16s %d operations: %s; %d differ" % (
            name, len(wants), ", ".join("%d %s" % (v, k) for k, v in stats.items()), len(bad)))
        for b in bad[:5]:
            print("  %s: %s: core %r, script %r (state: core %r, script %r; older %r)" % b)
        ck.expect("older/" + name, not bad and stats["dropped"] >= 20 and stats["latest"] >= 5 and
                  stats["without numbers"] >= 20 and stats["written"] >= 100)


def check_saturation(conn, shas, ck):
    """A debt of 2^53 - 1 units (a client naming the largest actual, which would lock a key for
    centuries) is refused by the default max_debt, the capacity, and writes nothing; allowed by a
    max_debt of 2^53 - 1 it saturates at the scripts' bounds (2^53 - 1 units, 2^52 for
    sliding_window, 2^32 - 1 in sliding_log's one entry, a TAT just below 2^53 us) without an
    error, and the key refuses even a peek."""
    big, t = 2**53 - 1, START_US + 7
    want = {"fixed_window": ("count", big), "sliding_window": ("curr", 2**52),
            "sliding_buckets": ("counts", {(t // 250000): big}),
            "sliding_log": ("entries", [(t, 2**32 - 1)]),
            "token_bucket": ("tat ns", 9007199254740990000), "gcra": ("tat ns", 9007199254740990000)}
    core = Core(os.environ["SLUICE_BUILD_DIR"])
    for alg in ALGORITHMS:
        key = "lua:sat:" + alg
        conn.call("DEL", key)
        buckets = 4 if alg == "sliding_buckets" else -1
        args = [5, SEC, -1, buckets, 0]
        rule = core.rule(alg, 5, SEC * 1000, buckets=buckets)
        r0 = conn.call("EVALSHA", shas[alg], 1, key, *args, "settle", 0, big, "now", t)
        ck.expect("attack/" + alg, r0 == debt_refused(rule, alg) and
                  conn.call("EXISTS", key) == 0, "%r" % (r0,))
        r1 = conn.call("EVALSHA", shas[alg], 1, key, *args, "settle", 0, big, "now", t,
                       "max_debt", big)
        r2 = conn.call("EVALSHA", shas[alg], 1, key, *args, 0, t + 1)
        value = conn.call("GET", key)
        view = value and script_view(alg, rule, value)
        field, expected = want[alg]
        got = view and view[view.index(field) + 1]
        ck.expect("saturation/" + alg, isinstance(r1, list) and r1[0] == 0 and r1[2] == 0 and
                  isinstance(r2, list) and r2[0] == 0 and got == expected,
                  "%r %r %r" % (r1, r2, view))


COLD_LINES = 1200


def module_rule_args(alg, limit, window, burst, buckets, max_delay):
    """sluice.so's rule arguments for a case (window and max_delay in us), or None when it takes
    only whole milliseconds and the case has others."""
    if window % MS or max_delay % MS:
        return None
    args = [alg, limit, window // MS]
    if burst != -1:
        args += ["BURST", burst]
    if buckets != -1:
        args += ["BUCKETS", buckets]
    if max_delay:
        args += ["MAX_DELAY", max_delay // MS]
    return args


def module_fields(d):
    """A core decision as sluice.so's SL.THROTTLE replies: durations in ms, rounded up; a delayed
    admission's delay as its retry."""
    f = d.fields()
    retry = f[5] if f[0] else f[3]
    return [f[0], f[1], f[2], -1 if retry < 0 else -(-retry // 10**6), -(-f[4] // 10**6)]


def cold_ops(rng, window, grain, cap):
    """A seeded sequence for the closed-start check: (time us, key, op, closed_from us or None),
    op ("cost", c), ("settle", reserved, actual, charged us or "now") or ("del",): a key whose
    data is lost. closed_from is whole ms, at or before the time it was chosen at (a node that
    lost its data, a rule whose algorithm changed), moving on now and then, sometimes a window
    or more back (then absent keys are fresh)."""
    t = START_US + rng.randrange(window)
    closed, ops, admitted = None, [], {}
    for _ in range(COLD_LINES):
        r = rng.random()
        t += (0 if r < 0.2 else rng.randrange(1, 1000) if r < 0.3 else
              rng.randrange(1, max(2, window // 8)) if r < 0.8 else
              rng.randrange(window // 3, 2 * window) if r < 0.95 else
              (t // grain + 1) * grain - t)
        if rng.random() < 0.03:
            t = max(START_US, t - rng.randrange(1, window))  # time going back
        if t > START_US + 200 * window:  # far ahead (a 30-day window): back to the start, so
            t = START_US + rng.randrange(window)  # that every time stays before NOW_MAX_NS
        if closed is None or rng.random() < 0.1:
            back = rng.choice([0, 0, 0, 0, MS, window // 2, window + MS])
            closed = max(0, (t - back) // MS * MS)
            if back == 0:
                t = max(closed, START_US)  # decided at the closed start itself too
        key = "k%d" % rng.randrange(6)
        a = rng.random()
        if a < 0.12:
            ops.append((t, key, ("del",), None))
            admitted.pop(key, None)
            continue
        if a < 0.3:
            reserved = rng.randrange(cap + 1)
            past = admitted.get(key, [])
            charged = ("now" if not past or rng.random() < 0.4 else
                       min(rng.choice(past[-3:]), t) // MS * MS)
            b = rng.random()
            actual = (0 if b < 0.35 else rng.randrange(reserved + 1) if b < 0.6 else
                      reserved if b < 0.7 else reserved + rng.randrange(1, cap + 1))
            op = ("settle", reserved, actual, charged)
        else:
            c = rng.random()
            op = ("cost", 0 if c < 0.2 else rng.randrange(1, max(2, cap // 4)) if c < 0.7 else
                  rng.randrange(1, cap + 1))
            admitted.setdefault(key, []).append(t)
        ops.append((t, key, op, closed if rng.random() < 0.75 else None))
    return ops


def check_cold(conn, shas, ck, seed):
    """A closed start (the scripts' closed_from, sluice.so's CLOSED_FROM when the Redis has it
    loaded with its test clock): seeded decisions, peeks and settles, some naming a closed start,
    on keys that now and then lose their data, through the scripts (and sluice.so), against
    libsluice with sl_state_saturate() for a key that is absent within one window of the closed
    start: every reply, the value and its expiry; a peek of a saturated key writes nothing, a cost
    or a settle writes it whatever it decides."""
    core = Core(os.environ["SLUICE_BUILD_DIR"])
    info = conn.call("COMMAND", "INFO", "sl.throttle")
    module = isinstance(info, list) and info[0] is not None
    conn.call("FLUSHALL")
    for idx, (name, alg, limit, window, burst, buckets, max_delay) in enumerate(CASES):
        rng = random.Random(seed * 100 + 90 + idx)
        rule = core.rule(alg, limit, window * 1000, burst, buckets, max_delay * 1000)
        keys, cap = Keys(core, rule), rule.capacity
        margs = module_rule_args(alg, limit, window, burst, buckets, max_delay) if module else None
        k = 10 if buckets == -1 else buckets
        grain = (window // k if alg == "sliding_buckets" else
                 max(1, window // limit) if alg in ("token_bucket", "gcra") else window)
        head = ["EVALSHA", shas[alg], 1, None, limit, window, burst, buckets, max_delay]
        stats = {"saturated": 0, "saturated and refused": 0, "saturated peeks": 0,
                 "saturated settles": 0, "fresh past the window": 0, "lost": 0}
        cmds, wants = [], []
        for t, key, op, closed in cold_ops(rng, window, grain, cap):
            lkey, mkey = "lua:cold:%s:%s" % (name, key), "mod:cold:%s:%s" % (name, key)
            if op[0] == "del":
                cmds += [["DEL", lkey, mkey]]
                wants.append(None)
                keys.states.pop(key, None)
                stats["lost"] += 1
                continue
            absent = keys.copy(key) is None
            saved, before = keys.save(key), keys.packed(key)
            sat = closed is not None and keys.closed_start(key, closed * 1000, t * 1000)
            stats["fresh past the window"] += absent and closed is not None and not sat
            stats["saturated"] += sat
            tail = [] if closed is None else ["closed_from", closed]
            mtail = [] if closed is None else ["CLOSED_FROM", closed // MS]
            if op[0] == "settle":
                _, reserved, actual, charged = op
                at = t if charged == "now" else charged
                d = keys.settle(key, reserved, actual, at * 1000, t * 1000)
                if d is None:  # refused by max_debt: nothing is written, saturated or not
                    keys.restore(key, saved)
                elif sat:
                    keys.keep(key, t * 1000)
                stats["saturated settles"] += sat
                unchanged = d is None or (not sat and before is not None and
                                          keys.packed(key) == before)
                lua = head + ["settle", reserved, actual, charged, t] + tail
                mod = margs and (["SL.SETTLE", mkey] + margs + ["RESERVED", reserved, "ACTUAL",
                                 actual] + ([] if charged == "now" else ["AT", charged // MS]) +
                                 mtail)
            else:
                cost = op[1]
                d = keys.decide(key, cost, t * 1000)
                if sat and cost == 0:
                    keys.restore(key, saved)  # a peek writes nothing
                    stats["saturated peeks"] += 1
                elif sat:
                    keys.keep(key, t * 1000)
                    stats["saturated and refused"] += not d.allowed
                unchanged = cost == 0 or (not d.allowed and not sat)
                lua = head + [cost, t] + tail
                peek = cost == 0 and rng.random() < 0.5
                mod = margs and (["SL.PEEK", mkey] + margs + mtail if peek else
                                 ["SL.THROTTLE", mkey] + margs + ["COST", cost] + mtail)
            lua[3] = lkey
            state = keys.copy(key)
            view = state and core_view(alg, rule, state, keys.packed(key))
            value = module_value(rule, keys.packed(key))
            cmds += [["GET", lkey], lua, ["GET", lkey], ["PEXPIRETIME", lkey]]
            if mod:
                cmds += [["SL.DEBUG", "SETTIME", t * 1000], ["GET", mkey], mod, ["GET", mkey],
                         ["PEXPIRETIME", mkey]]
            want = debt_refused(rule, alg) if d is None else core_fields(d)
            mwant = debt_refused(rule) if d is None else module_fields(d)
            wants.append((lua, mod, want, mwant, unchanged, state, view, value))
        got = conn.pipeline(cmds)
        bad, pos = [], 0
        for w in wants:
            if w is None:
                pos += 1
                continue
            lua, mod, want, mwant, unchanged, state, view, value = w
            before, g, after, expire = got[pos:pos + 4]
            pos += 4
            got_view = after and script_view(alg, rule, after)
            why = ("reply" if g != want else "write" if unchanged and before != after else
                   "expiry" if not expiry_ok(core, rule, state, expire) else
                   "state" if got_view != view else None)
            if why:
                bad.append(("lua " + why, " ".join(map(str, lua[4:])), want, g, view, got_view,
                            expire))
            if mod:
                before, g, after, expire = got[pos + 1:pos + 5]
                pos += 5
                why = ("reply" if g != mwant else "write" if unchanged and before != after else
                       "expiry" if not expiry_ok(core, rule, state, expire) else
                       "state" if after != value else None)
                if why:
                    bad.append(("module " + why, " ".join(map(str, mod[2:])), mwant, g, value,
                                after, expire))
        print("%-16s %d operations%s: %s; %d differ" % (
            name, len(wants), " (scripts and sluice.so)" if margs else "",
            ", ".join("%d %s" % (v, k) for k, v in stats.items()), len(bad)))
        for b in bad[:5]:
            print("  %s: %s: core %r, got %r (state: core %r, got %r; pexpiretime %r)" % b)
        ck.expect("cold/" + name, not bad and stats["saturated"] >= 20 and
                  stats["saturated and refused"] >= 5 and stats["saturated peeks"] >= 1 and
                  stats["saturated settles"] >= 1 and stats["fresh past the window"] >= 5)


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
    # a request of cost 10^6 under a limit of 2^20 is one entry, as a request of cost 1 is
    rows.append(("sliding_log, cost 10^6", lambda j: [ev("sliding_log", j, 2**20, cost=10**6)]))
    # logs of 100 requests (at 100 times), and a ZSET log of 1000 (past
    # zset-max-listpack-entries, 128, as a ZSET log of a busy key)
    rows.append(("sliding_log, 100 requests", lambda j: [
        ev("sliding_log", j, 1000) + [START_US + i] for i in range(100)]))
    rows.append(("ZSET log, 1000 entries", lambda j: [
        ["ZADD", "user:%d" % j] + [x for i in range(1000) for x in (1700000000000000 + i,
                                                                     "1700000000000000-%d" % i)],
        ["PEXPIRE", "user:%d" % j, 3600000]]))
    per_key(conn, port, 2000, rows[1][1])  # warm-up: one-time allocations are not per key
    got = {}
    for name, make in rows:
        got[name] = per_key(conn, port, n if "100" not in name else n // 20, make)
        usage = conn.call("MEMORY", "USAGE", "user:1")
        print("memory per key: %-24s %7.1f B (MEMORY USAGE %s B)" % (name, got[name], usage))
    log_1, log_100 = got["sliding_log"], got["sliding_log, 100 requests"]
    zset_1000 = got["ZSET log, 1000 entries"]
    print("memory per stored request: sliding_log %.1f B, ZSET log %.1f B"
          % ((log_100 - log_1) / 99, (zset_1000 - got["SET k v PX t"]) / 1000))
    # the value's size follows the requests, not their cost: a cost of 10^6, one entry
    ck.expect("memory/sliding_log-cost", got["sliding_log, cost 10^6"] <= log_1 + 16)
    conn.call("FLUSHALL")
    # a decimal state with the numbers it records is a string short enough to be kept with its
    # object in one allocation: at most 40 bytes more than SET k v PX t
    for alg in ("fixed_window", "sliding_window", "token_bucket", "gcra"):
        ck.expect("memory/" + alg, got[alg] <= got["SET k v PX t"] + 40)


def main():
    port, sluice, script_dir, tmp, seed = sys.argv[1:6]
    which = sys.argv[6:] or ["sha", "errors", "clock", "equiv", "settle", "lease", "convert",
                             "cold", "memory"]
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
    if "settle" in which:
        check_settle(conn, shas, ck, int(seed))
        check_saturation(conn, shas, ck)
        check_older(conn, shas, ck, int(seed))
    if "lease" in which:
        check_lease(conn, shas, ck, int(seed))
    if "convert" in which:
        check_convert(conn, shas, ck, int(seed))
    if "cold" in which:
        check_cold(conn, shas, ck, int(seed))
    if "memory" in which:
        report_memory(conn, int(port), shas, ck)
    sys.exit(1 if ck.failed else 0)


if __name__ == "__main__":
    main()
