#!/usr/bin/env python3
"""soak_check.py - the chaos soak's checker (tests/soak/soak.sh runs it on a run's directory).

    soak_check.py SOAK_DIR SECONDS     checks the run, prints the summary, exits 1 on any violation
    soak_check.py --self-test          checks the checker on synthetic traces

What it asserts, from the replies the clients got (SOAK_DIR/client-*.trace) and what the driver
did (SOAK_DIR/events):

No key of an exact algorithm is admitted over its limit. A request was decided at some time in
[send, recv] (one CLOCK_REALTIME on one machine; sluice.so reads it in whole microseconds, so
for the Redis store [send - 1 us, recv]). A violation is reported only when it is certain for
every decision time the intervals allow:
  sliding_log, sliding_buckets  admissions whose intervals all lie in some span shorter than W
                                (max recv - min send < W) hold more than N units
  fixed_window                  admissions whose intervals each lie inside the same aligned
                                window hold more than N units
  token_bucket, gcra            admissions whose intervals lie within [a, b] hold more than
                                (b - a + tau) // T units (the GCRA bound: the last of them was
                                admitted with TAT >= a + units * T and TAT - tau <= b)

What a restart or a failover legitimately loses is excluded, and only that. The admissions a
server holds belong to lifetimes: the memory sluiced starts a new one at every kill (a request
sent before the killed process was reaped went to it, any later one to the next), a Redis
shard's at its primary's failover (answered before the kill: the old primary; sent after the
promotion was seen: the new one; in between: either, so such an admission is left out). An
admission counts together with those of a later lifetime only if it survived every restart in
between: its reply came no later than the restored snapshot's written_at (the snapshot holds
every decision answered before it was begun), or, at a failover, no later than the last
replication-offset sample the promoted replica had received. A start without a usable snapshot
keeps nothing of a cold_start: open rule, and owes nothing for a cold_start: closed one (its keys
start saturated for one window, which covers every earlier admission).
"""
import bisect
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from soak_model import (MEM_FILE_STATIC, NS_PER_MS, NS_PER_S, Params, ceil_div,  # noqa: E402
                        key_slot, params_of_rid)

INF = float("inf")
MODULE_CLOCK_NS = 1000  # sluice.so decides at the time truncated to a whole microsecond
HORIZON_WINDOWS = 4  # token_bucket / gcra: spans checked up to this many (W + tau)
UNPLANNED_MARGIN_NS = 10 * NS_PER_S  # around a failover nobody asked for: left out


class Admission:
    __slots__ = ("cost", "send", "recv", "lt", "surv", "why")

    def __init__(self, cost, send, recv):
        self.cost = cost
        self.send = send
        self.recv = recv
        self.lt = 0  # the lifetime of the server that decided it
        self.surv = INF  # the last lifetime whose history holds it
        self.why = None  # the event whose restart lost it


class Transition:
    """A point where a key's server starts a new lifetime: what decides "old" and "new", and
    the cut: an admission of the old lifetime answered no later than `cut` is kept."""

    def __init__(self, kind, cut, killed, promoted=None):
        self.kind = kind  # "kill" (memory sluiced), "failover", "unplanned" (a Redis shard)
        self.cut = cut  # ns, -INF (nothing kept) or INF (nothing owed)
        self.killed = killed  # ns: the old lifetime had ended
        self.promoted = promoted  # ns: the new one had begun (failovers)
        self.lost = 0

    def classify(self, a):
        """1 if a belongs after this transition, 0 before, None when it cannot be told."""
        if self.kind == "kill":
            return 0 if a.send < self.killed else 1
        if a.recv <= self.killed:
            return 0
        if a.send >= self.promoted:
            return 1
        return None


class Checker:
    def __init__(self):
        self.versions = {}  # (srv, rid, capacity) -> Params
        self.spans = {}  # (srv, rid) -> the longest span over the rule's versions, ns
        self.closed = {r.name for r in MEM_FILE_STATIC if r.closed}
        self.kills = []  # memory sluiced: (killed_ns, snapshot cut, loaded, kill_sent, restarted)
        self.failovers = []  # (slot ranges, Transition)
        self.violations = []
        self.unexplained = {}  # "srv proto connections broke|refused" -> (count, the first)
        self.stats = {}
        self.lost_at_kill = 0  # answered after the snapshot the restart loaded
        self.lost_cold = 0  # a cold_start: open rule's, at a start without a usable snapshot
        self.lost_at_failover = 0
        self.across = 0  # sets checked whose admissions span a restart or a failover
        self.ambiguous = 0
        self.checked_keys = 0
        self.checked_admissions = 0

    def violation(self, text):
        self.violations.append(text)

    # ---- inputs ------------------------------------------------------------------------------
    def add_version(self, srv, rid, p):
        self.versions[(srv, rid, p.capacity)] = p
        self.spans[(srv, rid)] = max(self.spans.get((srv, rid), 0), p.span_ns())

    def params(self, srv, rid, cap):
        p = self.versions.get((srv, rid, cap))
        if p is None:
            p = params_of_rid(rid)
            if p is not None and p.capacity == cap:
                self.add_version(srv, rid, p)
            else:
                p = None
        return p

    def read_events(self, path):
        with open(path) as f:
            for line in f:
                w = line.split()
                if not w:
                    continue
                kind = w[0]
                if kind == "version":
                    self.add_version(w[1], w[2], Params.decode(w[4:9]))
                elif kind in ("kill", "crash") and w[1] == "m":
                    # kill m killed_ns cut|none|bad loaded|cold|unusable kill_sent restarted
                    cut = None if w[3] in ("none", "bad") else int(w[3])
                    self.kills.append((int(w[2]), cut, w[4] == "loaded", int(w[5]), int(w[6])))
                    if w[4] == "loaded" and cut is None:
                        self.violation("a snapshot without a readable time was loaded: %s" %
                                       line.strip())
                    if w[4] == "unusable":
                        self.violation("sluiced found its own snapshot unusable: %s" % line.strip())
                elif kind == "failover":
                    # failover r killed promoted cut|none kill_sent slots lag_bytes
                    cut = -INF if w[4] == "none" else int(w[4])
                    self.failovers.append((parse_slots(w[6]),
                                           Transition("failover", cut, int(w[2]), int(w[3]))))
                elif kind == "unplanned":
                    # unplanned r last_seen_ns noticed_ns slots
                    t = Transition("unplanned", -INF, int(w[2]) - UNPLANNED_MARGIN_NS,
                                   int(w[3]) + UNPLANNED_MARGIN_NS)
                    self.failovers.append((parse_slots(w[4]), t))
                    self.stats["unplanned_failovers"] = self.stats.get("unplanned_failovers", 0) + 1
                elif kind == "violation":
                    self.violation(line[len("violation "):].strip())
                elif kind == "stat":
                    self.stats[w[1]] = self.stats.get(w[1], 0) + int(w[2]) if w[1] not in (
                        "rss_max_kb_m", "rss_max_kb_r") else max(self.stats.get(w[1], 0),
                                                                  int(w[2]))
        self.kills.sort()
        self.failovers.sort(key=lambda f: f[1].killed)

    def transitions(self, srv, rid, key):
        """The lifetimes' transitions that apply to (srv, rid, key), in time order."""
        if srv == "m":
            closed = rid in self.closed
            out = []
            for killed, cut, loaded, _, _ in self.kills:
                if loaded:
                    c = cut
                else:
                    c = INF if closed else -INF
                out.append(Transition("kill", c, killed))
            return out
        slot = key_slot(key)
        return [t for slots, t in self.failovers if any(lo <= slot <= hi for lo, hi in slots)]

    # ---- the limit -----------------------------------------------------------------------------
    def place(self, adms, trans):
        """Sets each admission's lifetime and survival; returns those that can be placed."""
        out = []
        for a in adms:
            lt = 0
            known = True
            for t in trans:
                c = t.classify(a)
                if c is None:
                    known = False
                    break
                lt += c
            if not known:
                self.ambiguous += 1
                continue
            a.lt = lt
            a.surv = INF
            for e in range(lt, len(trans)):
                if a.recv > trans[e].cut:
                    a.surv = e
                    a.why = trans[e]
                    trans[e].lost += 1
                    break
            out.append(a)
        return out

    def check_key(self, srv, rid, cap, key, adms):
        p = self.params(srv, rid, cap)
        if p is None:
            self.violation("%s: %s admitted %d requests with limit %d, which is no version of "
                           "the rule" % (srv, rid, len(adms), cap))
            return
        if p.algorithm == "sliding_window":
            return
        if srv == "r":
            for a in adms:
                a.send -= MODULE_CLOCK_NS
        trans = self.transitions(srv, rid, key)
        adms = self.place(adms, trans)
        if srv == "m":
            self.lost_at_kill += sum(t.lost for t in trans if t.cut != -INF)
            self.lost_cold += sum(t.lost for t in trans if t.cut == -INF)
        adms.sort(key=lambda a: (a.send, a.recv))
        self.checked_keys += 1
        self.checked_admissions += len(adms)
        what = "%s %s (%s, limit %d) key %s" % (srv, rid, p.algorithm, cap, key)
        if p.algorithm in ("sliding_log", "sliding_buckets"):
            bad, across = over_sliding(adms, p)
        elif p.algorithm == "fixed_window":
            bad, across = over_fixed(adms, p)
        else:
            bad, across = over_interval(adms, p)
        self.across += across
        if bad is not None:
            units, bound, members = bad
            self.violation("%s: %d units admitted where at most %d can be: %s" % (
                what, units, bound, describe(members)))

    # ---- the form of what depends on a version ------------------------------------------------
    def check_versions(self, srv_rid_cap_unit, v):
        srv, rid, cap, unit = srv_rid_cap_unit.split()
        cap = int(cap)
        p = self.params(srv, rid, cap)
        if p is None:
            self.violation("%s %s: replies with limit %d, which is no version of the rule"
                           % (srv, rid, cap))
            return
        n, max_retry, max_reset, ws = v
        span = self.spans.get((srv, rid), p.span_ns())
        if srv == "r":  # a store error's refusal waits min(window, 1 s)
            span = max(span, min(p.window_ns, NS_PER_S))
        per = NS_PER_MS if unit == "ms" else NS_PER_S
        bound = ceil_div(span, per)
        if max_retry > bound or max_reset > bound:
            self.violation("%s %s limit %d: retry_after up to %d %s, reset_after up to %d %s, "
                           "beyond %d %s" % (srv, rid, cap, max_retry, unit, max_reset, unit,
                                              bound, unit))
        w_want = ceil_div(p.window_ns, NS_PER_S)
        for w in ws:
            if w != w_want:
                self.violation("%s %s limit %d: RateLimit-Policy w=%d, the window is %d s"
                               % (srv, rid, cap, w, w_want))

    # ---- connections ---------------------------------------------------------------------------
    def check_disconnect(self, w):
        """D srv proto connect_start noticed why / F srv proto ns error: only a kill explains
        them (the memory sluiced's)."""
        srv, proto = w[1], w[2]
        if srv == "m":
            if w[0] == "D":
                start, noticed = int(w[3]), int(w[4])
                if any(k[0] >= start and k[3] <= noticed for k in self.kills):
                    return
            else:
                t = int(w[3])
                if any(k[3] <= t <= k[4] for k in self.kills):
                    return
        what = "%s %s connections %s" % (srv, proto, "broke" if w[0] == "D" else "refused")
        n, first = self.unexplained.get(what, (0, " ".join(w[3:])))
        self.unexplained[what] = (n + 1, first)

    # ---- all of it -----------------------------------------------------------------------------
    def run(self, soak, seconds, clients_expected):
        self.read_events(os.path.join(soak, "events"))
        groups = {}
        counts = {}
        versions = {}
        broken = []
        paths = sorted(glob.glob(os.path.join(soak, "client-*.trace")))
        found = len(paths)
        driver = os.path.join(soak, "driver.trace")
        for path in paths + ([driver] if os.path.exists(driver) else []):
            summary = path[:-len(".trace")] + ".json"
            if path == driver:
                pass
            elif not os.path.exists(summary):
                self.violation("%s: the client did not finish" % os.path.basename(path))
            else:
                with open(summary) as f:
                    s = json.load(f)
                for k, v in s["counts"].items():
                    counts[k] = counts.get(k, 0) + v
                for k, v in s["versions"].items():
                    old = versions.get(k)
                    versions[k] = v if old is None else [
                        old[0] + v[0], max(old[1], v[1]), max(old[2], v[2]),
                        sorted(set(old[3]) | set(v[3]))]
            with open(path) as f:
                for line in f:
                    w = line.split()
                    if not w:
                        continue
                    if w[0] == "A":
                        g = (w[1], w[2], int(w[3]), w[4])
                        groups.setdefault(g, []).append(
                            Admission(int(w[5]), int(w[6]), int(w[7])))
                    elif w[0] == "B":
                        self.violation("malformed reply: " + line[2:].strip())
                    elif w[0] in ("D", "F"):
                        broken.append(w)
        if found < clients_expected:
            self.violation("%d client traces, %d clients were started" % (found,
                                                                          clients_expected))
        for (srv, rid, cap, key), adms in sorted(groups.items()):
            self.check_key(srv, rid, cap, key, adms)
        for k, v in sorted(versions.items()):
            self.check_versions(k, v)
        for w in broken:
            self.check_disconnect(w)
        for what, (n, first) in sorted(self.unexplained.items()):
            self.violation("%d %s with no kill to explain it (the first: %s)" % (n, what, first))
        for _, t in self.failovers:
            self.lost_at_failover += t.lost
        self.summary(counts, seconds)
        return 1 if self.violations else 0

    def summary(self, counts, seconds):
        s = self.stats
        decisions = counts.get("decisions", 0)
        print("soak summary (%d s):" % seconds)
        print("  decisions        %d (%.0f/s): memory store %d, Redis Cluster store %d" % (
            decisions, decisions / max(seconds, 1), counts.get("decisions_m", 0),
            counts.get("decisions_r", 0)))
        print("    by protocol    RESP %d, HTTP %d; pipelines %d, SL.ALLOWALL %d, "
              "multi-check POSTs %d, settles %d%s" % (
                  counts.get("resp_m", 0) + counts.get("resp_r", 0),
                  counts.get("http_m", 0) + counts.get("http_r", 0), counts.get("pipelines", 0),
                  counts.get("allowall", 0), counts.get("http_checks", 0),
                  counts.get("settles", 0),
                  " (SL.SETTLE not in this sluiced: skipped)"
                  if counts.get("settle_unsupported") and not counts.get("settle_supported")
                  else ""))
        print("  allowed          %d" % counts.get("allowed", 0))
        print("  refused          %d" % counts.get("refused", 0))
        print("  kills            %d (snapshots removed before the restart: %d; crash loops: "
              "%d)" % (s.get("kills", 0), s.get("snapshots_removed", 0), s.get("crash_loops", 0)))
        print("  restarts         %d" % s.get("restarts", 0))
        print("  reloads          %d (SIGHUP after a rules file edit)" % s.get("reloads", 0))
        print("  API rule changes %d" % s.get("api_changes", 0))
        print("  failovers        %d%s" % (s.get("failovers", 0),
                                          " (and %d nobody asked for)" % s["unplanned_failovers"]
                                          if s.get("unplanned_failovers") else ""))
        print("  rule checks      %d" % s.get("rule_checks", 0))
        print("  RSS max          memory sluiced %.1f MiB, Redis-store sluiced %.1f MiB "
              "(bound %.0f MiB)" % (s.get("rss_max_kb_m", 0) / 1024,
                                    s.get("rss_max_kb_r", 0) / 1024,
                                    s.get("rss_bound_kb", 0) / 1024))
        print("  checked          %d admissions on %d keys of exact algorithms, %d sets of them "
              "across a restart or failover" % (self.checked_admissions, self.checked_keys,
                                                self.across))
        print("  allowed as lost  at kill %d (answered after the snapshot loaded), at cold "
              "starts of open rules %d, at failover %d; left out (either primary) %d" % (
                  self.lost_at_kill, self.lost_cold, self.lost_at_failover, self.ambiguous))
        print("  connections      %d broke, %d refused (each must be explained by a kill)" % (
            counts.get("disconnects", 0), counts.get("connect_failures", 0)))
        print("  violations       %d" % len(self.violations))
        for v in self.violations[:30]:
            print("    " + v)
        if len(self.violations) > 30:
            print("    ... and %d more" % (len(self.violations) - 30))


def parse_slots(text):
    out = []
    for r in text.split(","):
        if not r:
            continue
        lo, _, hi = r.partition("-")
        out.append((int(lo), int(hi or lo)))
    return out


def describe(members):
    ms = sorted(members, key=lambda a: a.send)
    t0 = ms[0].send
    return "; ".join("%d at +[%.3f, %.3f] ms (lifetime %d)" % (
        a.cost, (a.send - t0) / 1e6, (a.recv - t0) / 1e6, a.lt) for a in ms[:40])


def sub_sets(cands):
    """For a candidate set, its subsets that one lifetime's history holds: for each lifetime L
    of a member, those members of L or earlier that survived into L."""
    lts = sorted({a.lt for a in cands})
    if len(lts) == 1:
        return [cands]
    return [[a for a in cands if a.lt <= L <= a.surv] for L in lts]


def spans_lifetimes(sub):
    return len({a.lt for a in sub}) > 1


def over_sliding(adms, p):
    """Admissions (sorted by send) certainly inside one window (t - W, t]: anchored at each
    admission's send time, those sent no earlier and answered before send + W."""
    w, n = p.window_ns, p.limit
    sends = [a.send for a in adms]
    across = 0
    for i, a in enumerate(adms):
        end = bisect.bisect_left(sends, a.send + w, i)
        cands = [b for b in adms[i:end] if b.recv < a.send + w]
        for sub in sub_sets(cands):
            across += spans_lifetimes(sub)
            units = sum(b.cost for b in sub)
            if units > n:
                return (units, n, sub), across
    return None, across


def over_fixed(adms, p):
    """Admissions whose intervals each lie inside the same aligned window."""
    w, n = p.window_ns, p.limit
    by_window = {}
    for a in adms:
        k = a.send // w
        if a.recv // w == k:
            by_window.setdefault(k, []).append(a)
    across = 0
    for k in sorted(by_window):
        for sub in sub_sets(by_window[k]):
            across += spans_lifetimes(sub)
            units = sum(b.cost for b in sub)
            if units > n:
                return (units, n, sub), across
    return None, across


def over_interval(adms, p):
    """token_bucket / gcra: anchored at each admission's send time a, the admissions sent no
    earlier, in order of reply: units by reply time b never above (b - a + tau) // T."""
    t_ns, tau = p.interval_ns, p.tau_ns
    horizon = HORIZON_WINDOWS * (p.window_ns + tau)
    sends = [a.send for a in adms]
    across = 0
    for i, a in enumerate(adms):
        end = bisect.bisect_left(sends, a.send + horizon, i)
        cands = [b for b in adms[i:end] if b.recv - a.send <= horizon]
        if sum(b.cost for b in cands) <= tau // t_ns:
            continue  # within the bound at any b
        for sub in sub_sets(cands):
            across += spans_lifetimes(sub)
            units = 0
            sub.sort(key=lambda b: b.recv)
            for j, b in enumerate(sub):
                units += b.cost
                bound = (b.recv - a.send + tau) // t_ns
                if units > bound:
                    return (units, bound, sub[:j + 1]), across
    return None, across


# ---- the checker's own check -------------------------------------------------------------------

def self_test():
    """Synthetic traces at exactly the limit (no violation) and over it by one (a violation),
    for each exact algorithm, across a kill (the allowance is exactly the admissions answered
    after the snapshot), a cold_start: closed restart (no allowance) and a failover."""
    t0 = 1_800_000_000 * NS_PER_S  # an aligned second
    ms = NS_PER_MS
    fails = []

    def run(name, p, adms, want, kills=(), failovers=(), srv="m", rid="x", key="k"):
        c = Checker()
        c.add_version(srv, rid, p)
        c.kills = list(kills)
        c.failovers = list(failovers)
        if rid in ("closed",):
            c.closed = {"closed"}
        c.check_key(srv, rid, p.capacity, key, [Admission(*a) for a in adms])
        got = len(c.violations)
        ok = (got > 0) == want
        print("  %-60s %s" % (name, "ok" if ok else "WRONG: %d violations %r" % (
            got, c.violations)))
        if not ok:
            fails.append(name)

    def burst(n, at, cost=1, lat=ms // 2):
        return [(cost, at + i * 10000, at + i * 10000 + lat) for i in range(n)]

    for alg, extra in (("sliding_log", {}), ("sliding_buckets", {"buckets": 4})):
        p = Params(alg, 5, 1000, **extra)
        run("%s: 5 of 5 in a window" % alg, p, burst(5, t0 + 10 * ms), False)
        run("%s: 6 of 5 in a window" % alg, p, burst(6, t0 + 10 * ms), True)
        run("%s: 5, then 5 one window later" % alg, p,
            burst(5, t0) + burst(5, t0 + 1000 * ms), False)
        run("%s: 5, then 5 just inside the window" % alg, p,
            burst(5, t0) + burst(1, t0 + 998 * ms, lat=ms // 2), True)
        run("%s: costs 2 + 3, then 1" % alg, p,
            [(2, t0, t0 + ms), (3, t0 + 2 * ms, t0 + 3 * ms), (1, t0 + 5 * ms, t0 + 6 * ms)], True)
        # an answer so slow the window may have moved: not certain
        run("%s: 6, one answered a window later" % alg, p,
            burst(5, t0) + [(1, t0 + 1 * ms, t0 + 1000 * ms)], False)
    p = Params("fixed_window", 5, 1000)
    run("fixed_window: 5 of 5 in an aligned window", p, burst(5, t0 + 500 * ms), False)
    run("fixed_window: 6 of 5 in an aligned window", p, burst(6, t0 + 500 * ms), True)
    run("fixed_window: 5 at a window's end, 5 at the next's start", p,
        burst(5, t0 + 990 * ms) + burst(5, t0 + 1000 * ms), False)
    run("fixed_window: 6, one straddling the boundary", p,
        burst(5, t0 + 990 * ms) + [(1, t0 + 999 * ms, t0 + 1001 * ms)], False)
    for alg, burst_n in (("token_bucket", 5), ("gcra", 4)):
        p = Params(alg, 5, 1000, burst=burst_n)  # T 200 ms, capacity 5
        steady = [(1, t0 + k * 200 * ms + 50000, t0 + k * 200 * ms + 60000) for k in range(1, 20)]
        run("%s: a burst of its capacity, then one per T" % alg, p,
            burst(5, t0) + steady, False)
        run("%s: capacity + 1 at once" % alg, p, burst(6, t0), True)
        run("%s: a burst, then one per T and one more" % alg, p,
            burst(5, t0) + steady + [(1, t0 + 1000 * ms + 70000, t0 + 1000 * ms + 80000)], True)
        run("%s: a burst, then the next before T" % alg, p,
            burst(5, t0) + [(1, t0 + 150 * ms, t0 + 151 * ms)], True)

    # a kill: 5 admitted, 2 answered after the snapshot (written at +5 ms); after the restart
    # 2 more fit in the window, 3 are one too many
    p = Params("sliding_log", 5, 1000)
    before = burst(3, t0) + burst(2, t0 + 6 * ms)
    killed = t0 + 20 * ms
    kill = [(killed, t0 + 5 * ms, True, killed - ms, killed + 5 * ms)]
    run("kill: 2 answered after the snapshot, 2 after the restart", p,
        before + burst(2, t0 + 30 * ms), False, kills=kill)
    run("kill: 2 answered after the snapshot, 3 after the restart", p,
        before + burst(3, t0 + 30 * ms), True, kills=kill)
    run("kill: snapshot at +7 ms, 1 lost, 2 after the restart", p,
        before + burst(2, t0 + 30 * ms), True,
        kills=[(killed, t0 + 7 * ms, True, killed - ms, killed + 5 * ms)])
    cold = [(killed, None, False, killed - ms, killed + 5 * ms)]
    run("kill, no snapshot, cold_start open: 5 after the restart", p,
        before + burst(5, t0 + 30 * ms), False, kills=cold)
    run("kill, no snapshot, cold_start closed: 1 after the restart", p,
        before + burst(1, t0 + 30 * ms), True, kills=cold, rid="closed")
    # a request sent before the process was reaped went to it
    run("kill: a request sent before the kill was reaped is the old process's", p,
        before + [(1, killed - 2 * ms, killed + 10 * ms)], True, kills=kill)
    run("kill: one sent after it is the new process's", p,
        before + [(1, killed + 1 * ms, killed + 10 * ms)], False, kills=kill)
    # a failover: the replica had everything answered until +5 ms
    key = "k"
    slot = key_slot(key)
    fo = [([(slot, slot)], Transition("failover", t0 + 5 * ms, killed, killed + 50 * ms))]
    after = [(1, killed + 60 * ms + i * 10000, killed + 61 * ms + i * 10000) for i in range(3)]
    run("failover: 2 answered after the last sample it had, 2 after", p,
        before + after[:2], False, failovers=fo, srv="r")
    run("failover: 2 answered after the last sample it had, 3 after", p,
        before + after, True, failovers=fo, srv="r")
    other = [([(slot + 1, slot + 1)], Transition("failover", t0 + 5 * ms, killed,
                                                 killed + 50 * ms))]
    run("failover of another shard: 5, then 2 after", p, before + after[:2], True,
        failovers=other, srv="r")
    # sluice.so's microsecond clock: a decision up to 1 us before the send is its
    p = Params("fixed_window", 5, 1000)
    run("Redis store: 6 of 5, the first sent 0.5 us into the window", p,
        [(1, t0 + 500, t0 + 600)] + burst(5, t0 + 10 * ms), False, srv="r")
    print("checker self-test: %s" % ("ok" if not fails else "%d WRONG" % len(fails)))
    return 1 if fails else 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    return Checker().run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))


if __name__ == "__main__":
    sys.exit(main())
