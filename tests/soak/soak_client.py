#!/usr/bin/env python3
"""soak_client.py - one client process of the chaos soak (tests/soak/soak.sh).

    soak_client.py ID SEED OUT_DIR DEADLINE_NS STOP_FILE MEM_RESP MEM_HTTP REDIS_RESP REDIS_HTTP

Decides against two sluiced, "m" (the memory store, killed and restarted by the driver) and "r"
(the Redis Cluster store), until DEADLINE_NS (CLOCK_REALTIME) or until STOP_FILE exists, mixing
RESP (single commands and pipelined batches) and HTTP (/v1/auth, POST /v1/allow with one check
and with several) over named rules and inline rules (SL.THROTTLE, CL.THROTTLE), with costs of 1
to 3, and SL.SETTLE when the memory sluiced has it. The mix is drawn from a generator seeded with
SEED and ID.

Every reply is checked for form as it arrives (soak_model.py's shapes and ranges); what depends
on a rule's version (its window, reset_after's bound) is summed up per (server, rule, capacity)
for the checker. Writes OUT_DIR/client-ID.trace, one line per event:
    A srv rid capacity key cost send_ns recv_ns     an admission (the request was decided
                                                    somewhere in [send_ns, recv_ns])
    B srv what                                      a malformed or unexpected reply
    D srv proto connect_start_ns noticed_ns         a connection that broke
    F srv proto ns error                            a connection that could not be made
and OUT_DIR/client-ID.json, the counts.
"""
import http.client
import json
import os
import random
import re
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import resp_client  # noqa: E402
from soak_model import (CL_PARAMS, CL_THROTTLE, INLINE, MEM_API, MEM_FILE_EDITED,  # noqa: E402
                        MEM_FILE_STATIC, REDIS_RULES, SETTLE)

REPLY_TIMEOUT_S = 30  # a live sluiced that has not answered by then is a failure
RECONNECT_NS = 50 * 1000000  # a server found down is tried again after this long
HOT_KEYS = 6
COLD_KEYS = 50000

now_ns = time.time_ns


class Broken(Exception):
    """The connection broke (reset, closed, refused): expected around a kill."""


class Resp(resp_client.Conn):
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT_S)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _fill(self, n):
        while len(self.buf) < n:
            try:
                data = self.s.recv(1 << 16)
            except socket.timeout:
                raise
            except OSError as e:
                raise Broken(str(e))
            if not data:
                raise Broken("closed by the server")
            self.buf += data

    def send(self, cmds):
        try:
            self.s.sendall(b"".join(resp_client.enc(c) for c in cmds))
        except OSError as e:
            raise Broken(str(e))

    def close(self):
        self.s.close()


class Server:
    """One sluiced: a RESP and an HTTP connection, made when needed and again after a break."""

    def __init__(self, client, srv, resp_port, http_port):
        self.c = client
        self.srv = srv
        self.ports = {"resp": resp_port, "http": http_port}
        self.conn = {"resp": None, "http": None}
        self.opened = {"resp": 0, "http": 0}
        self.down_until = {"resp": 0, "http": 0}

    def get(self, proto):
        conn = self.conn[proto]
        if conn is not None:
            return conn
        t = now_ns()
        if t < self.down_until[proto]:
            return None
        try:
            if proto == "resp":
                conn = Resp(self.ports[proto])
            else:
                conn = http.client.HTTPConnection("127.0.0.1", self.ports[proto],
                                                  timeout=REPLY_TIMEOUT_S)
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:
            self.down_until[proto] = now_ns() + RECONNECT_NS
            self.c.count("connect_failures")
            self.c.line("F %s %s %d %s" % (self.srv, proto, t, type(e).__name__))
            return None
        self.conn[proto] = conn
        self.opened[proto] = t
        return conn

    def broke(self, proto, why):
        conn = self.conn[proto]
        self.conn[proto] = None
        if conn is not None:
            conn.close()
        self.c.count("disconnects")
        self.c.line("D %s %s %d %d %s" % (self.srv, proto, self.opened[proto], now_ns(),
                                          why.replace(" ", "_")))


class Client:
    def __init__(self, cid, seed, out_dir, deadline_ns, stop_file, ports):
        self.cid = cid
        self.rng = random.Random("%s/%s" % (seed, cid))
        self.deadline_ns = deadline_ns
        self.stop_file = stop_file
        self.out = open(os.path.join(out_dir, "client-%d.trace" % cid), "w", buffering=1 << 20)
        self.summary_path = os.path.join(out_dir, "client-%d.json" % cid)
        self.counts = {}
        self.versions = {}  # "srv rid cap unit" -> [decisions, max retry, max reset, [w seen]]
        self.servers = {"m": Server(self, "m", ports[0], ports[1]),
                        "r": Server(self, "r", ports[2], ports[3])}
        self.settle = None  # None: not asked yet; True / False: SL.SETTLE there or not
        self.settle_gen = 0
        # named rules of each server, and the capacity of those that never change
        self.named = {"m": [r.name for r in MEM_FILE_STATIC] + MEM_FILE_EDITED + MEM_API,
                      "r": [r.name for r in REDIS_RULES]}
        self.static = {"m": {r.name: r.params.capacity for r in MEM_FILE_STATIC},
                       "r": {r.name: r.params.capacity for r in REDIS_RULES}}
        # how this client mixes its work: (weight, operation), per client a different emphasis
        ops = [(6, self.op_allow), (4, self.op_pipeline), (3, self.op_throttle),
               (2, self.op_cl_throttle), (2, self.op_allowall), (3, self.op_auth),
               (3, self.op_http_allow), (2, self.op_http_checks), (1, self.op_settle)]
        boost = cid % len(ops)
        self.ops = [(w * (3 if i == boost else 1), op) for i, (w, op) in enumerate(ops)]
        self.op_total = sum(w for w, _ in self.ops)

    # ---- output ------------------------------------------------------------------------------
    def line(self, text):
        self.out.write(text + "\n")

    def count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n

    def bad(self, srv, what):
        self.count("malformed")
        self.line("B %s %s" % (srv, what.replace("\n", "\\n")[:600]))

    def version(self, srv, rid, cap, unit, retry, reset, w=None):
        k = "%s %s %d %s" % (srv, rid, cap, unit)
        v = self.versions.get(k)
        if v is None:
            v = self.versions[k] = [0, 0, 0, []]
        v[0] += 1
        v[1] = max(v[1], retry)
        v[2] = max(v[2], reset)
        if w is not None and w not in v[3]:
            v[3].append(w)

    def decided(self, srv, proto, rid, cap, key, cost, send, recv, allowed):
        self.count("decisions")
        self.count("decisions_" + srv)
        self.count("%s_%s" % (proto, srv))
        if allowed:
            self.count("allowed")
            self.line("A %s %s %d %s %d %d %d" % (srv, rid, cap, key, cost, send, recv))
        else:
            self.count("refused")

    # ---- checks of form ----------------------------------------------------------------------
    def check_ms(self, srv, what, r, cost, static_cap=None, batch_refused=False):
        """SL.ALLOW / SL.THROTTLE / SL.ALLOWALL's reply: [allowed, limit, remaining, retry_ms,
        reset_ms]. Returns (allowed, limit), or None when malformed."""
        if not (isinstance(r, list) and len(r) == 5 and all(type(x) is int for x in r)):
            self.bad(srv, "%s: not 5 integers: %r" % (what, r))
            return None
        allowed, limit, remaining, retry, reset = r
        problem = decision_problem(allowed in (0, 1) and bool(allowed), allowed in (0, 1), limit,
                                   remaining, retry, reset, cost, batch_refused)
        if problem is None and static_cap is not None and limit not in static_cap:
            problem = "limit %d is not the rule's %s" % (limit, sorted(static_cap))
        if problem is not None:
            self.bad(srv, "%s: %s: %r" % (what, problem, r))
            return None
        return bool(allowed), limit

    def check_cl(self, srv, what, r, cost):
        """CL.THROTTLE's reply: [limited, limit, remaining, retry_s (-1 when allowed), reset_s]."""
        if not (isinstance(r, list) and len(r) == 5 and all(type(x) is int for x in r)):
            self.bad(srv, "%s: not 5 integers: %r" % (what, r))
            return None
        limited, limit, remaining, retry, reset = r
        problem = None
        if limited not in (0, 1):
            problem = "limited is not 0 or 1"
        elif limit != CL_PARAMS.capacity:
            problem = "limit is not max_burst + 1"
        elif not 0 <= remaining <= limit:
            problem = "remaining out of [0, limit]"
        elif (retry != -1) if limited == 0 else (retry < 0):
            problem = "retry_after is not -1 when allowed, >= 0 when limited"
        elif reset < 0:
            problem = "reset_after < 0"
        elif limited == 0 and remaining > limit - cost:
            problem = "allowed with more remaining than limit - cost"
        if problem is not None:
            self.bad(srv, "%s: %s: %r" % (what, problem, r))
            return None
        return limited == 0, limit

    # ---- RESP --------------------------------------------------------------------------------
    def resp(self, srv, cmds):
        """Sends cmds pipelined; returns (send_ns, [(reply, recv_ns)]) with the replies that
        came, fewer when the connection broke."""
        s = self.servers[srv]
        conn = s.get("resp")
        if conn is None:
            return 0, []
        out = []
        send = now_ns()
        try:
            conn.send(cmds)
            for _ in cmds:
                r = conn.reply()
                out.append((r, now_ns()))
        except Broken as e:
            s.broke("resp", str(e))
        except socket.timeout:
            self.bad(srv, "no reply within %d s to %r" % (REPLY_TIMEOUT_S, cmds[len(out)]))
            s.broke("resp", "timeout")
        return send, out

    def named_rule(self, srv):
        return self.rng.choice(self.named[srv])

    def key(self):
        if self.rng.random() < 0.05:
            return "u%d" % self.rng.randrange(COLD_KEYS)
        return "k%d" % self.rng.randrange(HOT_KEYS)

    def cost(self):
        return 1 if self.rng.random() < 0.7 else self.rng.randint(2, 3)

    def srv(self):
        return "m" if self.rng.random() < 0.65 else "r"

    def gen_command(self, srv):
        """One random deciding command: (args, handler(reply, send, recv))."""
        x = self.rng.random()
        if srv == "m" and x < 0.25:
            return self.throttle_cmd(self.rng.choice(INLINE))
        if srv == "m" and x < 0.35:
            return self.cl_cmd()
        if x < 0.5:
            return self.allowall_cmd(srv)
        return self.allow_cmd(srv)

    def allow_cmd(self, srv):
        rule, key, cost = self.named_rule(srv), self.key(), self.cost()
        cmd = ["SL.ALLOW", rule, key, "COST", cost]

        def handle(r, send, recv):
            got = self.check_ms(srv, "SL.ALLOW %s %s" % (rule, key), r, cost,
                                self.static_caps(srv, [rule]))
            if got is not None:
                self.version(srv, rule, got[1], "ms", r[3], r[4])
                self.decided(srv, "resp", rule, got[1], key, cost, send, recv, got[0])
        return cmd, handle

    def static_caps(self, srv, rules):
        caps = [self.static[srv].get(r) for r in rules]
        return None if None in caps else set(caps)

    def throttle_cmd(self, p, key=None, cost=None):
        key = key or self.key()
        cost = cost or self.cost()
        rid = p.rid()
        cmd = ["SL.THROTTLE", key] + p.throttle_args() + ["COST", cost]

        def handle(r, send, recv):
            got = self.check_ms("m", "SL.THROTTLE %s %s" % (rid, key), r, cost, {p.capacity})
            if got is not None:
                self.version("m", rid, got[1], "ms", r[3], r[4])
                self.decided("m", "resp", rid, got[1], key, cost, send, recv, got[0])
        return cmd, handle

    def cl_cmd(self):
        key, cost = self.key(), self.cost()
        rid = CL_PARAMS.rid()
        cmd = ["CL.THROTTLE", key] + list(CL_THROTTLE) + [cost]

        def handle(r, send, recv):
            got = self.check_cl("m", "CL.THROTTLE %s" % key, r, cost)
            if got is not None:
                self.version("m", rid, got[1], "s", max(r[3], 0), r[4])
                self.decided("m", "resp", rid, got[1], key, cost, send, recv, got[0])
        return cmd, handle

    def allowall_cmd(self, srv):
        """SL.ALLOWALL over 2 or 3 distinct pairs of rules that never change (the reply's limit is
        one pair's, so the others' capacities must be known)."""
        rules = list(self.static[srv])
        pairs = set()
        while len(pairs) < self.rng.randint(2, 3):
            pairs.add((self.rng.choice(rules), self.key()))
        pairs = sorted(pairs)
        cost = self.cost()
        cmd = ["SL.ALLOWALL"] + [x for pair in pairs for x in pair] + ["COST", cost]

        def handle(r, send, recv):
            got = self.check_ms(srv, "SL.ALLOWALL %r" % pairs, r, cost,
                                self.static_caps(srv, [p[0] for p in pairs]))
            if got is None:
                return
            self.count("allowall")
            for rule, key in pairs:
                cap = self.static[srv][rule]
                self.decided(srv, "resp", rule, cap, key, cost, send, recv, got[0])
        return cmd, handle

    def run_commands(self, srv, gens):
        send, replies = self.resp(srv, [g[0] for g in gens])
        for (cmd, handle), (r, recv) in zip(gens, replies):
            if isinstance(r, str) and r.startswith("-"):
                self.bad(srv, "%r: error reply %s" % (cmd, r))
            else:
                handle(r, send, recv)
        return replies

    def op_allow(self):
        srv = self.srv()
        self.run_commands(srv, [self.allow_cmd(srv)])

    def op_pipeline(self):
        srv = self.srv()
        self.count("pipelines")
        self.run_commands(srv, [self.gen_command(srv) for _ in range(self.rng.randint(4, 16))])

    def op_throttle(self):
        self.run_commands("m", [self.throttle_cmd(self.rng.choice(INLINE))])

    def op_cl_throttle(self):
        self.run_commands("m", [self.cl_cmd()])

    def op_allowall(self):
        srv = self.srv()
        self.run_commands(srv, [self.allowall_cmd(srv)])

    # ---- SL.SETTLE ---------------------------------------------------------------------------
    def op_settle(self):
        """A reservation of r units on a key this client alone uses, settled at once on the same
        connection with a smaller actual cost. AT is the millisecond before the one the request
        was sent in, so the charge time the settle names is before the admission however AT's
        millisecond is read: a refund then gives back no more than had the admission cost only
        `actual` (a token bucket refills from AT; a log gives back older stamps, which leave the
        window sooner). The admission is recorded with the actual cost."""
        s = self.servers["m"]
        conn = s.get("resp")
        if conn is None:
            return
        if self.settle is None:
            _, got = self.resp("m", [["SL.SETTLE", "probe-%d" % self.cid] +
                                     SETTLE[0].throttle_args() + ["RESERVED", 0, "ACTUAL", 0]])
            if not got:
                return
            r = got[0][0]
            self.settle = not (isinstance(r, str) and "unknown command" in r.lower())
            self.count("settle_supported" if self.settle else "settle_unsupported")
            if self.settle and isinstance(r, str):
                self.bad("m", "SL.SETTLE probe: %s" % r)
        if not self.settle:
            return
        which = self.rng.randrange(len(SETTLE))
        p = SETTLE[which]
        key = "s%d-%d-%d" % (self.cid, which, self.rng.randrange(4))
        reserved = self.rng.randint(2, 5)
        cmd = ["SL.THROTTLE", key] + p.throttle_args() + ["COST", reserved]
        send, got = self.resp("m", [cmd])
        if not got or s.conn["resp"] is not conn:
            return
        r, recv = got[0]
        if isinstance(r, str):
            self.bad("m", "%r: error reply %s" % (cmd, r))
            return
        ok = self.check_ms("m", "SL.THROTTLE %s" % key, r, reserved, {p.capacity})
        if ok is None:
            return
        self.version("m", p.rid(), ok[1], "ms", r[3], r[4])
        if not ok[0]:
            self.decided("m", "resp", p.rid(), ok[1], key, reserved, send, recv, False)
            return
        actual = self.rng.randrange(reserved)
        settle = ["SL.SETTLE", key] + p.throttle_args() + [
            "RESERVED", reserved, "ACTUAL", actual, "AT", send // 1000000 - 1]
        r2 = None
        try:
            conn.send([settle])
            r2 = conn.reply()
        except Broken as e:
            s.broke("resp", str(e))
        except socket.timeout:
            self.bad("m", "no reply within %d s to %r" % (REPLY_TIMEOUT_S, settle))
            s.broke("resp", "timeout")
        # Counted as `actual` units whether or not the settle arrived: the key holds at least
        # that much of this admission either way.
        self.count("settles")
        self.decided("m", "resp", p.rid(), ok[1], key, actual, send, recv, True)
        if isinstance(r2, str):
            self.bad("m", "%r: error reply %s" % (settle, r2))
        elif r2 is not None:
            # a settle answers the key's peek afterwards
            self.check_ms("m", "SL.SETTLE %s" % key, r2, 0, {p.capacity}, batch_refused=True)

    # ---- HTTP --------------------------------------------------------------------------------
    def http(self, srv, method, path, body=None):
        """One HTTP request: (send_ns, recv_ns, status, headers {lower name: value}, body), or
        None when the connection broke."""
        s = self.servers[srv]
        conn = s.get("http")
        if conn is None:
            return None
        send = now_ns()
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except socket.timeout:
            self.bad(srv, "no HTTP response within %d s to %s %s" % (REPLY_TIMEOUT_S, method, path))
            s.broke("http", "timeout")
            return None
        except (OSError, http.client.HTTPException) as e:
            s.broke("http", "%s:%s" % (type(e).__name__, e))
            return None
        recv = now_ns()
        hdrs = {}
        for k, v in resp.getheaders():
            if k.lower() in hdrs:
                self.bad(srv, "%s %s: header %s twice" % (method, path, k))
            hdrs[k.lower()] = v
        if resp.will_close:
            s.broke("http", "server_closed_keep_alive")
        return send, recv, resp.status, hdrs, data

    def ratelimit(self, srv, what, hdrs, name=None):
        """The RateLimit fields: (policy name, q, w, r, t), or None when malformed."""
        pol = RE_POLICY.match(hdrs.get("ratelimit-policy", ""))
        rl = RE_RATELIMIT.match(hdrs.get("ratelimit", ""))
        if pol is None or rl is None or pol.group(1) != rl.group(1):
            self.bad(srv, "%s: RateLimit fields malformed: %r" % (what, hdrs))
            return None
        if name is not None and pol.group(1) != name:
            self.bad(srv, "%s: RateLimit policy of %r, not %r" % (what, pol.group(1), name))
            return None
        q, w, r, t = (int(pol.group(2)), int(pol.group(3)), int(rl.group(2)), int(rl.group(3)))
        if r > q:
            self.bad(srv, "%s: RateLimit r %d > q %d" % (what, r, q))
            return None
        return pol.group(1), q, w, r, t

    def op_auth(self):
        srv = self.srv()
        rule, key, cost = self.named_rule(srv), self.key(), self.cost()
        what = "GET /v1/auth/%s?key=%s&cost=%d" % (rule, key, cost)
        got = self.http(srv, "GET", "/v1/auth/%s?key=%s&cost=%d" % (rule, key, cost))
        if got is None:
            return
        send, recv, status, hdrs, data = got
        if status not in (204, 429):
            self.bad(srv, "%s: status %d: %r" % (what, status, data))
            return
        rl = self.ratelimit(srv, what, hdrs, rule)
        if rl is None:
            return
        _, q, w, r, t = rl
        caps = self.static_caps(srv, [rule])
        if caps is not None and q not in caps:
            self.bad(srv, "%s: q %d is not the rule's capacity" % (what, q))
            return
        retry_s = 0
        if status == 204:
            if data or "retry-after" in hdrs or r > q - cost:
                self.bad(srv, "%s: a 204 with a body, Retry-After or r > q - cost: %r %r"
                         % (what, hdrs, data))
                return
        else:
            ra = hdrs.get("retry-after", "")
            problem = None
            if not ra.isdigit() or int(ra) < 1:
                problem = "Retry-After %r is not seconds >= 1" % ra
            elif hdrs.get("content-type") != "application/problem+json":
                problem = "content type %r" % hdrs.get("content-type")
            else:
                try:
                    doc = json.loads(data)
                    if doc.get("status") != 429 or not isinstance(doc.get("title"), str):
                        problem = "problem body %r" % doc
                except ValueError:
                    problem = "problem body is not JSON: %r" % data
            if problem is not None:
                self.bad(srv, "%s: 429: %s" % (what, problem))
                return
            retry_s = int(ra)
        self.version(srv, rule, q, "s", retry_s, t, w)
        self.decided(srv, "http", rule, q, key, cost, send, recv, status == 204)

    def decision_json(self, srv, what, d, rule, key, cost, batch_refused=False):
        """A decision's JSON object; returns (allowed, limit, reset_ms) or None."""
        if not isinstance(d, dict) or set(d) != DECISION_FIELDS:
            self.bad(srv, "%s: decision fields %r" % (what, d))
            return None
        ints = ("limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms")
        if (type(d["allowed"]) is not bool or d["shadow"] is not False or d["rule"] != rule or
                d["key"] != key or any(type(d[f]) is not int for f in ints) or d["delay_ms"] != 0):
            self.bad(srv, "%s: decision %r" % (what, d))
            return None
        problem = decision_problem(d["allowed"], True, d["limit"], d["remaining"],
                                   d["retry_after_ms"], d["reset_after_ms"], cost, batch_refused)
        caps = self.static_caps(srv, [rule]) if not rule.startswith("i:") else None
        if problem is None and caps is not None and d["limit"] not in caps:
            problem = "limit is not the rule's capacity"
        if problem is not None:
            self.bad(srv, "%s: %s: %r" % (what, problem, d))
            return None
        return d["allowed"], d["limit"], d["reset_after_ms"]

    def op_http_allow(self):
        srv = self.srv()
        rule, key, cost = self.named_rule(srv), self.key(), self.cost()
        body = json.dumps({"rule": rule, "key": key, "cost": cost})
        what = "POST /v1/allow %s" % body
        got = self.http(srv, "POST", "/v1/allow", body)
        if got is None:
            return
        send, recv, status, hdrs, data = got
        doc = self.http_json(srv, what, status, hdrs, data)
        if doc is None:
            return
        dec = self.decision_json(srv, what, doc, rule, key, cost)
        rl = self.ratelimit(srv, what, hdrs, rule)
        if dec is None or rl is None:
            return
        allowed, limit, reset_ms = dec
        _, q, w, r, t = rl
        if (q, r, t) != (limit, doc["remaining"], -(-reset_ms // 1000)):
            self.bad(srv, "%s: RateLimit q=%d r=%d t=%d against the JSON %r" % (what, q, r, t, doc))
            return
        self.version(srv, rule, limit, "ms", doc["retry_after_ms"], reset_ms, w)
        self.decided(srv, "http", rule, limit, key, cost, send, recv, allowed)

    def http_json(self, srv, what, status, hdrs, data):
        if status != 200 or hdrs.get("content-type") != "application/json":
            self.bad(srv, "%s: status %d, %r: %r" % (what, status, hdrs.get("content-type"), data))
            return None
        try:
            return json.loads(data)
        except ValueError:
            self.bad(srv, "%s: body is not JSON: %r" % (what, data))
            return None

    def op_http_checks(self):
        """POST /v1/allow with 2 or 3 checks, all or nothing (or "independent")."""
        srv = self.srv()
        pairs = set()
        while len(pairs) < self.rng.randint(2, 3):
            pairs.add((self.named_rule(srv), self.key()))
        pairs = sorted(pairs)
        cost = self.cost()
        independent = self.rng.random() < 0.3
        req = {"checks": [{"rule": r, "key": k, "cost": cost} for r, k in pairs]}
        if independent:
            req["independent"] = True
        body = json.dumps(req)
        what = "POST /v1/allow %s" % body
        got = self.http(srv, "POST", "/v1/allow", body)
        if got is None:
            return
        send, recv, status, hdrs, data = got
        doc = self.http_json(srv, what, status, hdrs, data)
        if doc is None:
            return
        if (not isinstance(doc, dict) or set(doc) != {"checks", "allowed"} or
                type(doc["allowed"]) is not bool or not isinstance(doc["checks"], list) or
                len(doc["checks"]) != len(pairs)):
            self.bad(srv, "%s: reply %r" % (what, doc))
            return
        refused = not doc["allowed"] and not independent
        decs = []
        for (rule, key), d in zip(pairs, doc["checks"]):
            dec = self.decision_json(srv, what, d, rule, key, cost, batch_refused=refused)
            if dec is None:
                return
            decs.append(dec)
        if doc["allowed"] != all(dec[0] for dec in decs):
            self.bad(srv, "%s: allowed is not every check's: %r" % (what, doc))
            return
        if self.ratelimit(srv, what, hdrs) is None:
            return
        self.count("http_checks")
        for (rule, key), d, dec in zip(pairs, doc["checks"], decs):
            self.version(srv, rule, dec[1], "ms", d["retry_after_ms"], dec[2])
            self.decided(srv, "http", rule, dec[1], key, cost, send, recv, dec[0])

    # ---- the loop ----------------------------------------------------------------------------
    def run(self):
        n = 0
        while now_ns() < self.deadline_ns:
            n += 1
            if n % 256 == 0 and os.path.exists(self.stop_file):
                break
            x = self.rng.randrange(self.op_total)
            for w, op in self.ops:
                x -= w
                if x < 0:
                    op()
                    break
            if self.servers["m"].conn["resp"] is None and self.servers["r"].conn["resp"] is None:
                time.sleep(0.005)  # both down (the redis sluiced never is): do not spin
        self.out.close()
        with open(self.summary_path + ".tmp", "w") as f:
            json.dump({"counts": self.counts, "versions": self.versions}, f)
        os.rename(self.summary_path + ".tmp", self.summary_path)


RE_POLICY = re.compile(r'^"([^"\\]*)";q=(\d+);w=(\d+)$')
RE_RATELIMIT = re.compile(r'^"([^"\\]*)";r=(\d+);t=(\d+)$')
DECISION_FIELDS = {"rule", "key", "allowed", "limit", "remaining", "retry_after_ms",
                   "reset_after_ms", "delay_ms", "shadow"}


def decision_problem(allowed, allowed_ok, limit, remaining, retry, reset, cost, batch_refused):
    """What is wrong with a decision's numbers (ms), or None. A check that another check of
    its all-or-nothing batch refused is reported not allowed, with nothing to wait for."""
    if not allowed_ok:
        return "allowed is not 0 or 1"
    if limit < 1:
        return "limit < 1"
    if not 0 <= remaining <= limit:
        return "remaining out of [0, limit]"
    if reset < 0:
        return "reset_after < 0"
    if allowed:
        if retry != 0:
            return "allowed with retry_after != 0"
        if cost > 0 and (remaining > limit - cost or reset < 1):
            return "allowed with remaining > limit - cost or reset_after < 1"
    elif retry < (0 if batch_refused or cost == 0 else 1):
        return "refused with retry_after < 1"
    return None


def main():
    if len(sys.argv) != 10:
        sys.exit(__doc__)
    cid, seed, out_dir, deadline, stop = sys.argv[1:6]
    ports = [int(p) for p in sys.argv[6:10]]
    Client(int(cid), seed, out_dir, int(deadline), stop, ports).run()


if __name__ == "__main__":
    main()
