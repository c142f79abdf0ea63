#!/usr/bin/env python3
"""check.py - the history checker of the fault runs: given every request and reply the clients
recorded (client.py: local monotonic and wall times at send and at reply) and the run's facts
(rules, when each fault was in force, what the store held afterwards), it checks each mode's
promise per rule and key and counts what broke it. In the spirit of Jepsen: the clients' records
are the only witnesses; a violation is reported only when the history proves it.

    check.py RUN.json HISTORY.jsonl     prints the figures as JSON; exit 1 on a violation
    check.py --self-test                hand-made histories that break each promise must fail

What is checked, exactly (rules are fixed_window: its windows are aligned to the epoch, k =
floor(now / W), so the window of a decision is known from the clock of whoever decided it;
every process here reads the same wall clock, except a process whose clock a fault stepped):

  well_formed   every reply is [allowed 0|1, limit, remaining, retry_after_ms, reset_after_ms]
                with limit the key's (the rule's, or its override's: an override that a reply
                does not show was lost; a refusal that shows the rule's limit on an overridden
                key is counted apart, as override_in_reply), 0 <= remaining <= limit, retry_after 0 when allowed and
                >= -1 otherwise, reset_after >= 0; or a RESP error (counted: "errors")
  limit         strict and leased: no fixed window admits more than the key's limit. An
                admission is placed in the window of its send and its reply when both are in
                one window (the decision was made in between); one whose send and reply straddle
                an edge is counted in neither (so a window over its limit is a proof).
                "over" counts the units beyond the limit, "over_max" the most in one window.
                A fault may state extra quotas a window may admit (a memory store's clock
                stepped forward: extra_limits_per_window, each one more limit of the key),
                which the check allows on top of the limit.
  approx        approximate: no window admits more than limit + sum over connections c of
                A_c(S + d) + A_c(S + 2d) (docs/algorithms.md, "Approximate counts"; every
                connection counted as a node, which only loosens it), A_c(T) the most units
                connection c had admitted in replies whose [send, reply] meets one span of T,
                S the sync interval and d the run's stated one-way trip bound (rtt_ms)
  store_error   while the store is unreachable from a node (store_down: from when the fault
                was in force to when it was undone), a request sent to that node after the
                fault began plus the mode's grace (strict 0; leased lease_time, the leases in
                hand; approximate sync_interval, the count in hand) and answered before it
                ended is decided by on_store_error: deny admits none, allow refuses none
                (counted; a refusal the over-limit cache explains is still a refusal, so allow
                rules are checked on keys under their limit only), and none is a RESP error
  ledger        after the run, the store's own count of each ledger key (limit - remaining of
                a peek in the window its admissions were in) against the units the history
                saw admitted there: "phantom" units charged beyond what clients were admitted
                and the requests they never saw answered (a timeout: it may have been decided)
                could explain (a refused request charged after all: under-admission), "lost" units admitted
                that the store no longer counts (an acknowledged decision lost: a later window
                can over-admit). Exact for strict; leased and approximate only once their
                leases and counts went back (the runner waits for that)
  rules         every rule and override the run made is listed by every live node afterwards
  recovery      after each fault ends, each of its nodes decides normally again (an admission
                of a key with room, sent after the fault ended); the time from the end of the
                fault to the first such reply is reported (recover_s), the check is that it
                came before the run ended
  inflight      in-flight rules (algorithm concurrency: SL.ACQUIRE, SL.RELEASE): at no instant do
                the holds the history proves live hold more than the key's limit. A hold
                admitted with an id is live from its acquire's reply until a release of it was
                sent (one that could not be sent, no connection, ends nothing),
                or until its acquire's send plus its TIMEOUT (it cannot have expired before:
                it was made after the send); "inflight_max" the most units held at once
  release       a release of an acknowledged hold, sent and answered before the hold could
                have expired, is answered OK: "no such hold" is always a violation, any other
                error one unless the release met a time when its node's store was unreachable
                (store_down, and release_grace_s after it: the node reconnecting)
  starved       after the faults ended (and settle_s more, default 1 s), no node refuses a
                whole window of a key it was asked at least twice the limit in (a node whose
                clock froze admits nothing)
"""
import json
import sys

VIOLATIONS = ("well_formed", "override_in_reply", "limit", "approx", "store_error", "ledger_phantom",
              "ledger_lost", "rules", "recovery", "inflight", "release", "starved")


def key_limit(rule, key):
    return rule.get("overrides", {}).get(key, rule["limit"])


def window_of(wall_s, window_ms):
    return int(wall_s * 1000) // window_ms


def in_flight(rule):
    return rule.get("algorithm") == "concurrency"


def check_hold_reply(rec, rule):
    """None when an acquire's or a release's reply is well formed, else what is wrong."""
    rep = rec["rep"]
    if rec.get("op") == "release":
        return None if rep == "OK" or (isinstance(rep, str) and rep.startswith("-")) else \
            "a release answered %r" % (rep,)
    if isinstance(rep, str):
        return None if rep.startswith("-") else "a status %r where a decision was due" % rep
    if not isinstance(rep, list) or len(rep) != 6 or not all(isinstance(v, int) for v in rep):
        return "an acquire's reply is not six integers: %r" % (rep,)
    allowed, limit, remaining, retry, _, hold = rep
    if allowed not in (0, 1) or limit != rule["limit"] or not 0 <= remaining <= limit:
        return "an acquire's reply out of range: %r" % (rep,)
    if bool(hold) != bool(allowed) or (allowed and retry != 0):
        return "an acquire %s with hold id %d, retry_after %d" % (
            "admitted" if allowed else "refused", hold, retry)
    return None


def check_reply(rec, rule):
    """None when rec's reply is well formed for its rule and key, else what is wrong."""
    rep = rec["rep"]
    if in_flight(rule):
        return check_hold_reply(rec, rule)
    if isinstance(rep, str):
        return None if rep.startswith("-") else "a status %r where a decision was due" % rep
    if not isinstance(rep, list) or len(rep) != 5 or not all(isinstance(v, int) for v in rep):
        return "not five integers: %r" % (rep,)
    allowed, limit, remaining, retry, reset = rep
    want = key_limit(rule, rec["key"])
    if allowed not in (0, 1):
        return "allowed is %d" % allowed
    if limit != want and not allowed and limit == rule["limit"]:
        return ("override_in_reply", "a refusal with the rule's limit %d where the key's "
                "override is %d" % (limit, want))
    if limit != want:
        return "limit %d where the key's is %d (an override lost or wrongly applied)" % (
            limit, want)
    if not 0 <= remaining <= limit:
        return "remaining %d outside 0..%d" % (remaining, limit)
    if allowed and retry != 0:
        return "allowed with retry_after %d" % retry
    if not allowed and retry < -1:
        return "retry_after %d" % retry
    if reset < 0:
        return "reset_after %d" % reset
    return None


def admitted(rec):
    """An SL.ALLOW admitted (an acquire is not counted here: check_inflight)."""
    rep = rec.get("rep")
    return isinstance(rep, list) and len(rep) == 5 and rep[0] == 1


def holds_of(hist):
    """{(rule, key): [(live from, live until, units)]}: every hold the history proves was made
    (an acquire admitted with an id), live from its acquire's reply until its release was sent
    or its acquire's send plus its timeout, whichever is first (a release that could not be
    sent ends nothing); and the releases by (connection, hold id)."""
    releases = {}
    for r in hist:
        if r.get("op") == "release":
            releases.setdefault((r["c"], r["id"]), []).append(r)
    holds = {}
    for rec in hist:
        rep = rec.get("rep")
        if rec.get("op") != "acquire" or not isinstance(rep, list) or len(rep) != 6 or \
                rep[0] != 1 or not rep[5]:
            continue
        until = rec["s"] + rec["tmo"] / 1000
        sent = [r["s"] for r in releases.get((rec["c"], rep[5]), []) if not r.get("unsent")]
        until = min([until] + sent)
        if until > rec["r"]:
            holds.setdefault((rec["rule"], rec["key"]), []).append((rec["r"], until, rec["cost"]))
    return holds, releases


def check_inflight(run, hist, out):
    holds, releases = holds_of(hist)
    for (name, key), spans in sorted(holds.items()):
        limit = key_limit(run["rules"][name], key)
        # ends before starts at one instant: a hold released as another is taken never overlaps
        events = sorted([(t0, 1, u) for t0, _, u in spans] + [(t1, 0, -u) for _, t1, u in spans])
        held = most = 0
        for t, _, u in events:
            held += u
            if held > most:
                most, at = held, t
        out["inflight_max"] = max(out["inflight_max"], most)
        if most > limit:
            out["over"] += most - limit
            out["over_max"] = max(out["over_max"], most - limit)
            out["violations"].append({"check": "inflight", "rule": name, "key": key,
                                      "held": most, "limit": limit, "at": at})
    grace = run.get("release_grace_s", 1.0)
    acquires = {(r["c"], r["rep"][5]): r for r in hist if r.get("op") == "acquire" and
                isinstance(r.get("rep"), list) and len(r["rep"]) == 6 and r["rep"][5]}
    for rel in (r for rels in releases.values() for r in rels):
        rep, acq = rel.get("rep"), acquires.get((rel["c"], rel["id"]))
        if not isinstance(rep, str) or rep == "OK" or acq is None or \
                rel["r"] >= acq["s"] + acq["tmo"] / 1000:
            continue
        down = any(rel["n"] in d["nodes"] and rel["s"] < d["t1"] + grace and rel["r"] > d["t0"]
                   for d in run.get("store_down", []))
        if "no such hold" in rep or not down:
            out["violations"].append({"check": "release", "why": "a release of a live hold "
                                      "refused", "rec": rel})


def span_max(items, span):
    """items: (start, end, units) of one connection; the most units whose [start, end] meets
    one interval of length span."""
    items = sorted(items)
    best = 0
    for i, (_, end_i, _) in enumerate(items):
        t0, t1 = end_i - span, end_i  # every span worth trying ends at some reply (or later)
        total = sum(u for s, e, u in items if e >= t0 and s <= t1)
        best = max(best, total)
        t0, t1 = end_i, end_i + span
        best = max(best, sum(u for s, e, u in items if e >= t0 and s <= t1))
    return best


def check_limits(run, hist, out):
    extra = {}
    for f in run.get("faults", []):
        for r, n in f.get("extra_limits_per_window", {}).items():
            extra[r] = extra.get(r, 0) + n
    counts = {}
    per_conn = {}
    for rec in hist:
        if not admitted(rec):
            continue
        rule = run["rules"].get(rec["rule"])
        if rule is None:
            continue
        w0, w1 = window_of(rec["sw"], rule["window_ms"]), window_of(rec["rw"], rule["window_ms"])
        if w0 == w1:
            k = (rec["rule"], rec["key"], w0)
            counts[k] = counts.get(k, 0) + rec["cost"]
        per_conn.setdefault((rec["rule"], rec["c"]), []).append((rec["s"], rec["r"], rec["cost"]))
    bounds = {}
    for name, rule in run["rules"].items():
        if in_flight(rule):
            continue
        if rule.get("mode") == "approximate" and run.get("store") != "memory":
            s = rule.get("sync_interval_ms", 100) / 1000
            d = run.get("rtt_ms", 1) / 1000
            slack = sum(span_max(items, s + d) + span_max(items, s + 2 * d)
                        for (r, _), items in per_conn.items() if r == name)
            bounds[name] = ("approx", slack)
        else:
            bounds[name] = ("limit", 0)
    for (name, key, w), n in sorted(counts.items()):
        rule = run["rules"][name]
        check, slack = bounds[name]
        allowed = key_limit(rule, key) * (1 + extra.get(name, 0)) + slack
        out["most"][name] = max(out["most"].get(name, 0), n)
        if n > allowed:
            out["over"] += n - allowed
            out["over_max"] = max(out["over_max"], n - allowed)
            out["violations"].append({"check": check, "rule": name, "key": key, "window": w,
                                      "admitted": n, "allowed": allowed})
    out["approx_slack"] = {n: b[1] for n, b in bounds.items() if b[0] == "approx"}


def check_store_error(run, hist, out):
    for down in run.get("store_down", []):
        nodes = set(down["nodes"])
        for rec in hist:
            rule = run["rules"].get(rec["rule"])
            if rule is None or rec["n"] not in nodes or "rep" not in rec or \
                    rec.get("op") == "release":
                continue
            mode = rule.get("mode", "strict") if run.get("store") != "memory" else "strict"
            grace = {"leased": rule.get("lease_time_ms", 0),
                     "approximate": rule.get("sync_interval_ms", 100)}.get(mode, 0) / 1000
            if not (rec["s"] > down["t0"] + grace and rec["r"] < down["t1"]):
                continue
            out["during_fault"] += 1
            if isinstance(rec["rep"], str):
                out["violations"].append({"check": "store_error", "why": "a RESP error while the "
                                          "store was unreachable", "rec": rec})
                continue
            deny = rule.get("on_store_error", "allow") == "deny"
            if deny and rec["rep"][0] == 1:
                out["admitted_while_down"] += rec["cost"]
                out["violations"].append({"check": "store_error", "why": "admitted while the "
                                          "store was unreachable (on_store_error deny)", "rec": rec})
            if not deny and rec["rep"][0] == 0 and rec["key"] in down.get("roomy_keys", []):
                out["violations"].append({"check": "store_error", "why": "refused while the "
                                          "store was unreachable (on_store_error allow)", "rec": rec})


def check_ledger(run, hist, out):
    for peek in run.get("final", {}).get("peeks", []):
        rule = run["rules"][peek["rule"]]
        w_end = window_of(peek["wall"], rule["window_ms"])
        seen = [r for r in hist if r["rule"] == peek["rule"] and r["key"] == peek["key"]
                and admitted(r)]
        if any(window_of(r["sw"], rule["window_ms"]) != w_end or
               window_of(r["rw"], rule["window_ms"]) != w_end for r in seen):
            out["ledger_skipped"] += 1  # the window turned during the run: nothing to compare
            continue
        units = sum(r["cost"] for r in seen)
        # a request whose reply never came (a timeout, a connection lost) may have been decided
        maybe = sum(r["cost"] for r in hist if r["rule"] == peek["rule"] and
                    r["key"] == peek["key"] and "rep" not in r)
        charged = key_limit(rule, peek["key"]) - peek["remaining"]
        if charged > units + maybe:
            out["phantom"] += charged - units - maybe
            out["violations"].append({"check": "ledger_phantom", "rule": peek["rule"],
                                      "key": peek["key"], "charged": charged, "admitted": units,
                                      "unanswered": maybe})
        elif charged < units:
            out["lost"] += units - charged
            out["violations"].append({"check": "ledger_lost", "rule": peek["rule"],
                                      "key": peek["key"], "charged": charged, "admitted": units})


def check_rules(run, out):
    final = run.get("final", {})
    want_rules = set(run.get("expect_rules", []))
    for node, names in final.get("rules", {}).items():
        missing = want_rules - set(names)
        if missing:
            out["rules_lost"] += len(missing)
            out["violations"].append({"check": "rules", "node": node, "missing": sorted(missing)})
    for node, per_rule in final.get("overrides", {}).items():
        for rule, keys in run.get("expect_overrides", {}).items():
            for key, limit in keys.items():
                got = per_rule.get(rule, {}).get(key)
                if got != limit:
                    out["rules_lost"] += 1
                    out["violations"].append({"check": "rules", "node": node, "rule": rule,
                                              "override": key, "got": got, "want": limit})


def check_recovery(run, hist, out):
    end_of_run = max((r["r"] for r in hist), default=0)
    for f in run.get("faults", []):
        if not f.get("recover", True):
            continue
        worst = 0.0
        for node in f["nodes"]:
            firsts = [r["r"] for r in hist if r["n"] == node and r["s"] >= f["t1"] and
                      admitted(r) and r["key"] in f.get("roomy_keys", [r["key"]])]
            if not firsts:
                out["violations"].append({"check": "recovery", "fault": f["label"],
                                          "node": node, "why": "no admission after the fault "
                                          "ended, up to the end of the run (%.1f s later)" %
                                          (end_of_run - f["t1"])})
                continue
            worst = max(worst, min(firsts) - f["t1"])
        out["recover_s"] = max(out["recover_s"], round(worst, 3))


def check_starved(run, hist, out):
    """Windows of the "fw"-like rules (window under 10 s) that began after every fault ended
    (plus settle_s, the stated recovery time), in which a key got at least twice its limit of
    requests (all nodes together: one node may take the whole limit) and none was admitted."""
    faults = run.get("faults", [])
    after = max((f["t1"] for f in faults), default=None)
    if after is None:
        return
    after += run.get("settle_s", 1.0)
    seen, early = {}, set()
    for rec in hist:
        rule = run["rules"].get(rec["rule"])
        if rule is None or rule["window_ms"] > 10000 or in_flight(rule):
            continue
        w0, w1 = window_of(rec["sw"], rule["window_ms"]), window_of(rec["rw"], rule["window_ms"])
        if rec["s"] < after:  # a window that began before: its units may be spent already
            early.update({(rec["rule"], rec["key"], w0), (rec["rule"], rec["key"], w1)})
            continue
        if w0 != w1 or "rep" not in rec:
            continue
        k = (rec["rule"], rec["key"], w0)
        asked, got = seen.get(k, (0, 0))
        seen[k] = (asked + rec["cost"], got + (rec["cost"] if admitted(rec) else 0))
    per_node = {}
    for rec in hist:
        rule = run["rules"].get(rec["rule"])
        if rule is None or rule["window_ms"] > 10000 or in_flight(rule) or rec["s"] < after or \
                "rep" not in rec:
            continue
        w0 = window_of(rec["sw"], rule["window_ms"])
        if (rec["rule"], rec["key"], w0) in early:
            continue
        k = (rec["n"], rec["rule"], rec["key"])
        wins = per_node.setdefault(k, {})
        asked, got = wins.get(w0, (0, 0))
        wins[w0] = (asked + rec["cost"], got + (rec["cost"] if admitted(rec) else 0))
    for (node, name, key), wins in sorted(per_node.items()):
        busy = [w for w, (asked, _) in wins.items() if asked >= key_limit(run["rules"][name], key)]
        if len(busy) >= 3 and all(wins[w][1] == 0 for w in busy):
            out["starved"] += 1
            out["violations"].append({"check": "starved", "node": node, "rule": name,
                                      "key": key, "windows": len(busy),
                                      "why": "the node admitted none in any window"})
    for (name, key, w), (asked, got) in sorted(seen.items()):
        if (name, key, w) not in early and asked >= 2 * key_limit(run["rules"][name], key) and got == 0:
            out["starved"] += 1
            out["violations"].append({"check": "starved", "rule": name,
                                      "key": key, "window": w, "asked": asked})


def check(run, hist):
    out = {"requests": len(hist), "admitted": sum(1 for r in hist if admitted(r)),
           "errors": 0, "unanswered": 0, "over": 0, "over_max": 0, "most": {},
           "during_fault": 0, "admitted_while_down": 0, "phantom": 0, "lost": 0,
           "ledger_skipped": 0, "rules_lost": 0, "recover_s": 0.0, "starved": 0, "inflight_max": 0,
           "violations": []}
    for rec in hist:
        if "rep" not in rec:
            out["unanswered"] += 1
            continue
        rule = run["rules"].get(rec["rule"])
        why = "no such rule in the run" if rule is None else check_reply(rec, rule)
        if isinstance(why, tuple):
            out["violations"].append({"check": why[0], "why": why[1], "rec": rec})
        elif why:
            out["violations"].append({"check": "well_formed", "why": why, "rec": rec})
        elif isinstance(rec["rep"], str) and rec["rep"].startswith("-"):
            out["errors"] += 1
    check_limits(run, hist, out)
    check_store_error(run, hist, out)
    check_ledger(run, hist, out)
    check_rules(run, out)
    check_recovery(run, hist, out)
    check_inflight(run, hist, out)
    check_starved(run, hist, out)
    if out["errors"] and not run.get("allow_errors"):
        out["violations"].append({"check": "well_formed", "why": "%d RESP error replies" %
                                  out["errors"]})
    out["failed"] = sorted({v["check"] for v in out["violations"]})
    return out


def load_history(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- self-test: each promise broken by a hand-made history must fail ---------------------------
def _rec(c, n, key, s, r, rep, rule="fw", cost=1, wall0=1000.0):
    return {"c": c, "n": n, "rule": rule, "key": key, "cost": cost, "s": s, "sw": wall0 + s,
            "r": r, "rw": wall0 + r, "rep": rep}


def _run(**kw):
    run = {"store": "redis", "rules": {"fw": {"algorithm": "fixed_window", "limit": 3,
                                              "window_ms": 1000, "mode": "strict",
                                              "on_store_error": "deny",
                                              "overrides": {"vip": 5}}},
           "rtt_ms": 1}
    run.update(kw)
    return run


def _ok(key="k", n=3, t=0.1, limit=3):
    return [_rec("c0", "s1", key, t + i * 0.01, t + i * 0.01 + 0.001,
                 [1, limit, limit - 1 - i, 0, 900]) for i in range(n)]


def _acq(c, s, r, hold, cost=1, tmo=1000, limit=3, n="s1"):
    rep = [1, limit, 0, 0, tmo, hold] if hold else [0, limit, 0, 100, tmo, 0]
    return dict(_rec(c, n, "j", s, r, rep, rule="inf", cost=cost), op="acquire", tmo=tmo)


def _rel(c, s, r, hold, rep="OK", acq=0.0, n="s1"):
    return dict(_rec(c, n, "j", s, r, rep, rule="inf"), op="release", id=hold, acq=acq)


def _unsent(c, s, hold):
    rec = dict(_rel(c, s, s + 0.001, hold), unsent=True, err="connection refused")
    del rec["rep"]
    return rec


def inflight_cases():
    """In-flight rules (a limit of 3 units held at once): the hold and release promises."""
    run = _run(allow_errors=True)  # as the runs: an error is judged by its own check
    run["rules"]["inf"] = {"algorithm": "concurrency", "limit": 3, "window_ms": 5000,
                           "mode": "strict", "on_store_error": "deny"}
    two = [_acq("c0", 0.10, 0.11, 7, cost=2), _rel("c0", 0.30, 0.31, 7),
           _acq("c1", 0.20, 0.21, 8, cost=1), _rel("c1", 0.40, 0.41, 8)]
    over = two + [_acq("c2", 0.22, 0.23, 9, cost=1)]
    handover = two + [_acq("c2", 0.29, 0.30, 9, cost=2), _rel("c2", 0.5, 0.51, 9)]
    expired = [_acq("c0", 0.10, 0.11, 7, cost=3, tmo=100), _acq("c1", 0.25, 0.26, 8, cost=3)]
    down = dict(run, store_down=[{"t0": 1.0, "t1": 2.0, "nodes": ["s1"]}])
    err = [_acq("c0", 0.5, 0.51, 7), _rel("c0", 1.2, 1.45, 7, rep="-ERR store timeout")]
    late_err = [_acq("c0", 3.2, 3.21, 7), _rel("c0", 3.5, 3.51, 7, rep="-ERR store timeout")]
    return [
        ("in flight: two holds within the limit, released", run, two, []),
        ("in flight: a third hold past the limit while two are held", run, over, ["inflight"]),
        ("in flight: a hold taken as another is released (the release sent first)", run,
         handover, []),
        ("in flight: a hold that expired (no release), then the whole limit again", run,
         expired, []),
        ("in flight: the same, the first hold's timeout not yet passed", run,
         [expired[0], dict(expired[1], s=0.15, r=0.16, sw=1000.15, rw=1000.16)], ["inflight"]),
        ("in flight: a refused acquire holds nothing", run, two + [_acq("c2", 0.22, 0.23, 0)], []),
        ("in flight: a release that could not be sent frees nothing (a node restarted empty)",
         run, [_acq("c0", 0.1, 0.11, 7, cost=2),
               _unsent("c0", 0.2, 7),
               _acq("c1", 0.3, 0.31, 8, cost=2)], ["inflight"]),
        ("in flight: the same release sent at last frees its hold", run,
         [_acq("c0", 0.1, 0.11, 7, cost=2),
          _unsent("c0", 0.2, 7),
          _rel("c0", 0.25, 0.26, 7), _acq("c1", 0.3, 0.31, 8, cost=2)], []),
        ("release: a live hold refused as no such hold", run,
         two[:1] + [_rel("c0", 0.3, 0.31, 7, rep="-ERR no such hold: ...")], ["release"]),
        ("release: a hold past its timeout refused (expired): fine", run,
         [_acq("c0", 0.1, 0.11, 7, tmo=100), _rel("c0", 0.3, 0.31, 7, rep="-ERR no such hold")],
         []),
        ("release: a store error while the store was unreachable: fine", down, err, []),
        ("release: a store error while it was reachable", down, late_err, ["release"]),
        ("release: no such hold while the store was unreachable", down,
         [err[0], dict(err[1], rep="-ERR no such hold")], ["release"]),
    ]


def self_test():
    cases = []
    good = _ok() + [_rec("c0", "s1", "k", 0.2, 0.201, [0, 3, 0, 800, 800])]
    cases.append(("a clean history", _run(), good, []))
    cases.append(("a reply that is not five integers", _run(),
                  good + [_rec("c0", "s1", "k", 0.3, 0.31, [1, 3])], ["well_formed"]))
    cases.append(("an override lost (the rule's limit on the override's key)", _run(),
                  _ok(key="vip", n=1), ["well_formed"]))
    cases.append(("a refusal showing the rule's limit on an override's key", _run(),
                  [_rec("c0", "s1", "vip", 0.1, 0.11, [0, 3, 0, 5, 900])], ["override_in_reply"]))
    cases.append(("allowed with a retry_after", _run(),
                  [_rec("c0", "s1", "k", 0.1, 0.11, [1, 3, 2, 5, 900])], ["well_formed"]))
    cases.append(("an error reply where none may be", _run(),
                  good + [_rec("c0", "s1", "k", 0.3, 0.31, "-ERR store")], ["well_formed"]))
    over = _ok() + [_rec("c1", "s2", "k", 0.5, 0.51, [1, 3, 0, 0, 500])]
    cases.append(("a fourth admission in a window of 3 (strict)", _run(), over, ["limit"]))
    leased = _run()
    leased["rules"]["fw"]["mode"] = "leased"
    cases.append(("the same, leased", leased, over, ["limit"]))
    straddle = _ok() + [_rec("c1", "s2", "k", 0.95, 1.05, [1, 3, 0, 0, 500])]
    cases.append(("a fourth admission across the window's edge proves nothing", _run(),
                  straddle, []))
    clock = _run(faults=[{"label": "clock", "t0": 0, "t1": 1, "nodes": [], "recover": False,
                          "extra_limits_per_window": {"fw": 1}}])
    cases.append(("a stated extra quota (a clock step) allowed", clock, over, []))
    cases.append(("past the stated extra quota", clock, over + over[:3], ["limit"]))
    approx = _run()
    approx["rules"]["fw"].update(mode="approximate", sync_interval_ms=10)
    # two connections, each admitting once every 0.1 s: A_c(12 ms) is 1 each, slack 4
    burst = [_rec("c%d" % (i % 2), "s%d" % (i % 2), "k", i * 0.1, i * 0.1 + 0.001,
                  [1, 3, 0, 0, 500]) for i in range(7)]
    cases.append(("approximate within its bound", approx, burst, []))
    burst8 = burst + [_rec("c1", "s1", "k", 0.75, 0.751, [1, 3, 0, 0, 500]),
                      _rec("c1", "s1", "k", 0.85, 0.851, [1, 3, 0, 0, 500])]
    cases.append(("approximate past its bound", approx, burst8, ["approx"]))
    down = _run(store_down=[{"t0": 0.5, "t1": 0.8, "nodes": ["s1"]}])
    cases.append(("admitted while the store was down (deny)", down,
                  [_rec("c0", "s1", "k", 0.6, 0.61, [1, 3, 2, 0, 400])], ["store_error"]))
    cases.append(("refused while it was down (deny): fine", down,
                  [_rec("c0", "s1", "k", 0.6, 0.61, [0, 3, 0, 100, 400])], []))
    cases.append(("an error while it was down", _run(allow_errors=True,
                  store_down=[{"t0": 0.5, "t1": 0.8, "nodes": ["s1"]}]),
                  [_rec("c0", "s1", "k", 0.6, 0.61, "-ERR timeout")], ["store_error"]))
    allow = _run(store_down=[{"t0": 0.5, "t1": 0.8, "nodes": ["s1"], "roomy_keys": ["k"]}])
    allow["rules"]["fw"]["on_store_error"] = "allow"
    cases.append(("refused while it was down (allow)", allow,
                  [_rec("c0", "s1", "k", 0.6, 0.61, [0, 3, 0, 100, 400])], ["store_error"]))
    lease_down = _run(store_down=[{"t0": 0.5, "t1": 0.9, "nodes": ["s1"]}])
    lease_down["rules"]["fw"].update(mode="leased", lease_time_ms=200)
    cases.append(("leased: a lease in hand spent after the cut: fine", lease_down,
                  [_rec("c0", "s1", "k", 0.6, 0.61, [1, 3, 2, 0, 400])], []))
    cases.append(("leased: admitted past the lease time", lease_down,
                  [_rec("c0", "s1", "k", 0.75, 0.76, [1, 3, 2, 0, 400])], ["store_error"]))
    peek = {"rule": "fw", "key": "k", "remaining": 0, "wall": 1000.5}
    cases.append(("the store charged what was admitted", _run(final={"peeks": [peek]}), good, []))
    ledger = _run(final={"peeks": [dict(peek, rule="ledger", remaining=88)]})
    ledger["rules"]["ledger"] = {"algorithm": "fixed_window", "limit": 100, "window_ms": 3600000}
    one = [_rec("c0", "s1", "k", 0.1, 0.11, [1, 100, 99, 0, 9000], rule="ledger")] + \
        [_rec("c0", "s1", "k", 0.2, 0.21, [0, 100, 99, 1, 9000], rule="ledger")] * 11
    cases.append(("a refused request charged after all (12 units for 1 admitted)", ledger, one,
                  ["ledger_phantom"]))
    cases.append(("a charge explained by a request that timed out", ledger,
                  one[:1] + [dict({k: v for k, v in r.items() if k != "rep"}, to=True)
                              for r in one[1:]], []))
    cases.append(("an acknowledged decision lost (a failover)",
                  _run(final={"peeks": [dict(peek, remaining=1)]}), good, ["ledger_lost"]))
    cases.append(("a rule lost on a node", _run(expect_rules=["fw", "other"],
                  final={"rules": {"s1": ["fw"]}}), good, ["rules"]))
    cases.append(("an override lost on a node", _run(expect_overrides={"fw": {"vip": 5}},
                  final={"overrides": {"s1": {"fw": {}}}}), good, ["rules"]))
    fault = {"label": "cut", "t0": 0.05, "t1": 0.15, "nodes": ["s1"]}
    cases.append(("no recovery after a fault", _run(faults=[fault]),
                  _ok(n=1) + [_rec("c0", "s1", "k", 0.3, 0.31, [0, 3, 0, 1, 1])], ["recovery"]))
    cases.append(("a recovery", _run(faults=[fault]), _ok(n=1, t=0.2), []))
    late = {"label": "clock", "t0": 0.0, "t1": 0.01, "nodes": ["s1"], "recover": False}
    frozen = [_rec("c0", "s1", "k", 1.2 + i * 0.01, 1.2 + i * 0.01 + 0.001, [0, 3, 0, 440, 440])
              for i in range(6)]
    cases.append(("a node that admits nothing after the fault (a frozen clock)",
                  _run(faults=[late]), frozen, ["starved"]))
    cases.append(("the same node admitting again", _run(faults=[late]),
                  frozen[:3] + _ok(n=1, t=1.5), []))
    one_node = [_rec("c0", "s1", "k", 1.1 + w + i * 0.01, 1.1 + w + i * 0.01 + 0.001,
                     [0, 3, 0, 440, 440]) for w in range(3) for i in range(3)] + \
        [_rec("c1", "s2", "k", 1.5 + w, 1.501 + w, [1, 3, 2, 0, 400]) for w in range(3)]
    cases.append(("one node admits nothing after the fault, the other goes on",
                  _run(faults=[late]), one_node, ["starved"]))
    cases.append(("the same node admitting in one window", _run(faults=[late]),
                  one_node + [_rec("c0", "s1", "k", 2.6, 2.601, [1, 3, 1, 0, 400])], []))
    cases += inflight_cases()
    bad = 0
    for name, run, hist, want in cases:
        got = check(run, hist)["failed"]
        ok = got == sorted(want)
        bad += not ok
        print("%s %s: failed %s, want %s" % ("ok  " if ok else "FAIL", name, got, sorted(want)))
    print("%d passed, %d failed" % (len(cases) - bad, bad))
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    with open(sys.argv[1]) as f:
        run = json.load(f)
    out = check(run, load_history(sys.argv[2]))
    print(json.dumps(out, indent=1)[:20000])
    sys.exit(1 if out["violations"] else 0)


if __name__ == "__main__":
    main()
