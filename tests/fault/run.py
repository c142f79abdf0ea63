#!/usr/bin/env python3
"""run.py - one cell of the fault matrix: a fleet in network namespaces (netlab.py), clients
recording every request (client.py), one fault in the middle of the run, then the checker
(check.py) on the history. Prints the cell's figures as one JSON line; exit 0 when the checker
found nothing, 1 when it found a violation, 77 when this machine cannot run it.

    run.py --store STORE --mode MODE --config CONFIG --fault FAULT [--keep] [--seconds S]

  STORE   memory | redis-module | redis-lua | cluster-module | cluster-lua
  MODE    strict | leased | approximate (the rules' mode; memory decides every mode strictly) |
          strict+replicas (strict, every rule with `replicas: 1`, `replica_wait: 100ms`) |
          strict+inflight (strict, and the in-flight rule inf asked too)
  CONFIG  sqlite | pg
  FAULT   one of FAULTS below

The fleet: sluiced s1 and s2 (memory: s1 alone, its keys are its own) with two event loops
each, --store-timeout 250ms, both reading one config store; Redis r1 (or a Redis Cluster of
three primaries c1-c3 and their replicas c4-c6); PostgreSQL p1 for CONFIG pg; the clients in
cl, two connections to each sluiced. s1 runs under libfaketime (its clock can be stepped).

Rules (fixed_window; the checker's definitions): fw, 20 per second, deny on store errors, an
override vip: 40 (made through s1 once the fleet is up); ledger, 1,000,000 an hour, deny (its
key L0 is never near its limit: after the run the store's count of it is compared with the
admissions the clients saw); roomy, 1,000,000 an hour, allow (its key A0 must be admitted
while the store is unreachable); api-made, a rule made through s1 (it must not be lost). Failover faults add fo, 400 a
minute, deny, asked on key L0 (the slot whose primary fails): reached while the primary is cut off
from its replica, so that what the replica never got is admitted again after it takes over.
Mode strict+inflight adds inf, an in-flight rule (algorithm concurrency) of 3 units, deny, held
on key J0 by acquires of 1 or 2 units with a timeout of 5 s, each released 25-75 ms later.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check  # noqa: E402
import netlab  # noqa: E402

SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
RESP, HTTP, REDIS, PROXY, PG = 6390, 8390, 6379, 7379, 5432
STORE_TIMEOUT_MS = 250
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

RULES_YAML = """rules:
  - name: fw
    algorithm: fixed_window
    limit: 20
    window: 1s
    on_store_error: deny
{mode}
  - name: ledger
    algorithm: fixed_window
    limit: 1000000
    window: 1h
    on_store_error: deny
{mode}
  - name: roomy
    algorithm: fixed_window
    limit: 1000000
    window: 1h
    on_store_error: allow
{mode}
  - name: fo
    algorithm: fixed_window
    limit: 400
    window: 1m
    on_store_error: deny
{mode}
"""
INFLIGHT_YAML = """  - name: inf
    algorithm: concurrency
    limit: 3
    hold_timeout: 5s
    on_store_error: deny
"""
MODE_YAML = {"strict": "", "strict+inflight": "",
             "leased": "    mode: leased\n    lease_time: 200ms",
             "approximate": "    mode: approximate\n    sync_interval: 50ms",
             "strict+replicas": "    replicas: 1\n    replica_wait: 100ms"}


def run_rules(mode, store):
    inflight = mode.endswith("+inflight")
    extra = {"strict": {}, "strict+inflight": {}, "leased": {"lease_time_ms": 200},
             "approximate": {"sync_interval_ms": 50},
             "strict+replicas": {"replicas": 1, "replica_wait_ms": 100}}[mode]
    mode = mode.partition("+")[0]

    def rule(limit, window_ms, ose, **kw):
        r = {"algorithm": "fixed_window", "limit": limit, "window_ms": window_ms,
             "mode": mode if store != "memory" else "strict", "on_store_error": ose}
        r.update(extra)
        r.update(kw)
        return r
    rules = {"fw": rule(20, 1000, "deny", overrides={"vip": 40}),
             "ledger": rule(1000000, 3600000, "deny"), "roomy": rule(1000000, 3600000, "allow"),
             "api-made": rule(5, 60000, "deny"), "fo": rule(400, 60000, "deny")}
    if inflight:
        rules["inf"] = rule(3, 5000, "deny", algorithm="concurrency", mode="strict")
    return rules


class Resp:
    """A RESP call from inside a namespace (a short python3 there): [args] -> reply."""

    def __init__(self, lab, node):
        self.lab, self.node = lab, node

    def call(self, addr, port, *args):
        code = ("import sys,json,socket\nsys.path.insert(0,%r)\nfrom client import enc,Reader\n"
                "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),5);s.settimeout(5)\n"
                "s.sendall(enc(json.loads(sys.argv[3])))\nprint(json.dumps(Reader(s,text=True).reply()))"
                % HERE)
        r = self.lab.nsexec(self.node, [PY, "-c", code, addr, str(port), json.dumps(args)],
                            check=False, timeout=20)
        if r.returncode != 0:
            return "!" + r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "!failed"
        return json.loads(r.stdout)


def poll(secs, fn):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if fn():
            return True
        time.sleep(0.1)
    return fn()


class Cell:
    def __init__(self, lab, args):
        self.lab, self.a = lab, args
        self.build = os.environ.get("SLUICE_BUILD_DIR", os.path.join(SRC, "build-test"))
        self.sluiced_bin = os.path.join(self.build, "src", "server", "sluiced")
        self.module = os.path.join(self.build, "src", "module", "sluice.so")
        self.cl = lab.node("cl")
        self.resp = Resp(lab, self.cl)
        self.store_nodes, self.store_procs, self.sluiced = [], [], {}
        self.proxy_file = os.path.join(lab.dir, "proxy.delay")

    # ---- the fleet ------------------------------------------------------------------------------
    def redis_argv(self, node, port, extra):
        d = os.path.join(self.lab.dir, node.name)
        os.makedirs(d, exist_ok=True)
        argv = ["redis-server", "--bind", node.addr, "127.0.0.1", "--port", str(port),
                "--save", "", "--appendonly", "no", "--dir", d, "--protected-mode", "no"]
        if self.a.store.endswith("module"):
            argv += ["--loadmodule", self.module]
        return argv + extra

    def start_store(self):
        st = self.a.store
        if st == "memory":
            return "memory"
        if st.startswith("redis"):
            r1 = self.lab.node("r1")
            p = self.lab.spawn(r1, "r1", self.redis_argv(r1, REDIS, []))
            self.lab.wait_port(r1, REDIS, p)
            self.store_nodes, self.store_procs = [r1], [p]
            if self.a.fault == "slow-store":
                with open(self.proxy_file, "w") as f:
                    f.write("0\n")
                px = self.lab.spawn(r1, "proxy", [PY, os.path.join(HERE, "faultproxy.py"),
                                                  r1.addr, str(PROXY), "127.0.0.1", str(REDIS),
                                                  self.proxy_file])
                self.lab.wait_port(r1, PROXY, px)
                return "redis://%s:%d" % (r1.addr, PROXY)
            return "redis://%s:%d" % (r1.addr, REDIS)
        nodes = [self.lab.node("c%d" % i) for i in range(1, 7)]
        for n in nodes:
            os.makedirs(os.path.join(self.lab.dir, n.name), exist_ok=True)
            p = self.lab.spawn(n, n.name, self.redis_argv(n, REDIS, [
                "--cluster-enabled", "yes", "--cluster-config-file",
                os.path.join(self.lab.dir, n.name, "nodes.conf"), "--cluster-node-timeout", "2000",
                "--repl-diskless-sync-delay", "0"]))
            self.store_procs.append(p)
        for n, p in zip(nodes, self.store_procs):
            self.lab.wait_port(n, REDIS, p)
        self.lab.nsexec(nodes[0], ["redis-cli", "--cluster", "create"] +
                        ["%s:%d" % (n.addr, REDIS) for n in nodes] +
                        ["--cluster-replicas", "1", "--cluster-yes"], timeout=60)

        def ok():
            for n in nodes:
                r = self.lab.nsexec(n, ["redis-cli", "-h", n.addr, "-p", str(REDIS), "CLUSTER",
                                        "INFO"], check=False)
                if "cluster_state:ok" not in r.stdout:
                    return False
                r = self.lab.nsexec(n, ["redis-cli", "-h", n.addr, "-p", str(REDIS), "INFO",
                                        "replication"], check=False)
                if "master_link_status:down" in r.stdout:
                    return False
            return True
        if not poll(60, ok):
            raise RuntimeError("the cluster is not ok after 60 s")
        self.store_nodes = nodes
        return "redis-cluster://%s:%d,%s:%d" % (nodes[0].addr, REDIS, nodes[1].addr, REDIS)

    def start_config(self):
        if self.a.config == "sqlite":
            return os.path.join(self.lab.dir, "config.db")
        p1 = self.lab.node("p1")
        d = os.path.join(self.lab.dir, "pg")
        lib = ". %s/scripts/postgres.sh; pg_find_bin || exit 77; " % SRC
        r = subprocess.run(["bash", "-c", lib + 'pg_initdb "$1" "$1.log"', "-", d],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError("initdb: %s %s" % (r.stdout, r.stderr))
        with open(os.path.join(d, "pg_hba.conf"), "a") as f:
            f.write("host all all %s0/24 trust\n" % netlab.NET)  # the lab's addresses only
        self.pg = self.lab.spawn(p1, "p1", ["bash", "-c", lib + 'pg_exec_server "$1" %d -c '
                                            'listen_addresses="$2"' % PG, "-", d, p1.addr])
        self.lab.wait_port(p1, PG, self.pg, secs=60)
        self.lab.nsexec(p1, ["psql", "-X", "-q", "-h", p1.addr, "-p", str(PG), "-U", "sluice",
                             "-d", "postgres", "-c", "CREATE DATABASE sluice"])
        self.pg_node = p1
        return "postgresql://sluice@%s:%d/sluice" % (p1.addr, PG)

    def start_sluiced(self, name, store_url, config_url):
        n = self.lab.node(name)
        rules = os.path.join(self.lab.dir, "rules.yaml")
        with open(rules, "w") as f:
            f.write(RULES_YAML.format(mode=MODE_YAML[self.a.mode]))
            if self.a.mode.endswith("+inflight"):
                f.write(INFLIGHT_YAML)
        snap = os.path.join(self.snap_dir, name + ".snapshot") if self.snap_dir else ""
        argv = [self.sluiced_bin, "--bind", n.addr, "--port", str(RESP), "--http-port",
                str(HTTP), "--grpc-port", "0", "--threads", "2", "--rules", rules,
                "--config-store", config_url, "--snapshot", snap, "--snapshot-interval", "1s",
                "--store", store_url, "--store-timeout", "%dms" % STORE_TIMEOUT_MS,
                "--poll-interval", "1s", "--insecure-admin"]
        p = self.lab.spawn(n, name, argv, clock=(name == "s1"))
        self.lab.wait_port(n, RESP, p)
        self.sluiced[name] = (n, p)

    def call(self, name, *args):
        n, _ = self.sluiced[name]
        return self.resp.call(n.addr, RESP, *args)

    def up(self):
        self.snap_dir = None
        if self.a.fault == "disk-full":
            self.snap_dir = self.lab.small_fs(os.path.join(self.lab.dir, "small"), 2 << 20)
        store_url = self.start_store()
        config_url = self.start_config()
        if self.a.fault == "disk-full" and self.a.config == "sqlite":
            config_url = os.path.join(self.snap_dir, "config.db")
        names = ["s1"] if self.a.store == "memory" else ["s1", "s2"]
        for name in names:
            self.start_sluiced(name, store_url, config_url)
        got = self.call("s1", "SL.RULE", "SET", "api-made",
                        '{"algorithm":"fixed_window","limit":5,"window":"1m",'
                        '"on_store_error":"deny"}')
        got2 = self.call("s1", "SL.OVERRIDE", "SET", "fw", "vip", '{"limit":40}')
        if got != "OK" or got2 != "OK":
            raise RuntimeError("setting the API-made rule and override: %r %r" % (got, got2))
        for name in names:
            if not poll(15, lambda: "api-made" in (self.call(name, "SL.RULE", "LIST") or [])):
                raise RuntimeError("%s does not serve the API-made rule" % name)
            # another node applies the override within --override-ttl (10 s)
            if not poll(15, lambda: (self.call(name, "SL.PEEK", "fw", "vip") or [0, 0])[1] == 40):
                raise RuntimeError("%s does not apply the override" % name)

    # ---- the run --------------------------------------------------------------------------------
    def client_spec(self, seconds):
        conns = []
        for name, (n, _) in self.sluiced.items():
            for i in range(2):
                conns.append({"id": "%s.%d" % (name, i), "node": name, "addr": n.addr,
                              "port": RESP})
        ops = [["fw", "k%d" % i, 1, 4] for i in range(4)] + \
            [["fw", "vip", 1, 2], ["ledger", "L0", 1, 3], ["roomy", "A0", 1, 1]]
        if self.a.fault.startswith("failover"):
            ops.append(["fo", "L0", 1, 2])
        inflight = [["inf", "J0", 1, 1, 50, 5000], ["inf", "J0", 2, 1, 50, 5000]] \
            if self.a.mode.endswith("+inflight") else []
        return {"conns": conns, "ops": ops, "inflight": inflight, "count": 200000,
                "seconds": seconds,
                "gap_ms": 2, "timeout_ms": 1000, "seed": self.a.seed,
                "stop_file": os.path.join(self.lab.dir, "stop")}

    def go(self):
        a = self.a
        spec = self.client_spec(a.pre + a.hold * a.rounds + a.post + 30 * a.rounds)
        spec_path = os.path.join(self.lab.dir, "client.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        hist_path = os.path.join(self.lab.dir, "history.jsonl")
        client = self.lab.spawn(self.cl, "client", [PY, os.path.join(HERE, "client.py"),
                                                    spec_path, hist_path])
        time.sleep(a.pre)
        faults = FAULTS[a.fault](self)
        time.sleep(a.post)
        with open(spec["stop_file"], "w"):
            pass
        try:
            client.popen.wait(60)
        except subprocess.TimeoutExpired:
            client.stop()
        self.after_run()
        time.sleep(1.0)  # leases (200 ms) end and go back; counts (50 ms) are synced
        self.expect_overrides = {"fw": {"vip": 40}}
        for rule, keys in faults.get("expect_overrides", {}).items():
            self.expect_overrides.setdefault(rule, {}).update(keys)
        final = self.final()
        run = {"store": "memory" if a.store == "memory" else "redis",
               "rules": run_rules(a.mode, a.store), "rtt_ms": 5 + getattr(self, "delay_ms", 0),
               "faults": faults.get("faults", []), "store_down": faults.get("store_down", []),
               "allow_errors": True, "final": final,
               "expect_rules": ["fw", "ledger", "roomy", "api-made"] +
               (["inf"] if a.mode.endswith("+inflight") else []),
               "expect_overrides": self.expect_overrides}
        with open(os.path.join(self.lab.dir, "run.json"), "w") as f:
            json.dump(run, f)
        hist = check.load_history(hist_path)
        out = check.check(run, hist)
        out["events"] = faults.get("notes", {})
        out["events"].update(self.counters())
        return out

    COUNTED = ("sluice_store_late_charges_total", "sluice_redis_failures_total",
               "sluice_store_unreplicated_total")

    def counters(self):
        """The live nodes' counters of COUNTED, summed by name and labels (e.g. the admissions
        Redis made after their deadline and that were given back)."""
        got = {}
        for name, (n, p) in self.sluiced.items():
            if not p.alive():
                continue
            r = self.lab.nsexec(self.cl, ["curl", "-s", "-m", "5", "http://%s:%d/metrics" %
                                          (n.addr, HTTP)], check=False)
            for line in (r.stdout or "").splitlines():
                if line.startswith(self.COUNTED):
                    metric, _, value = line.rpartition(" ")
                    got[metric] = got.get(metric, 0) + int(float(value))
        return got

    def after_run(self):
        pass

    def final(self):
        live = [n for n, (_, p) in self.sluiced.items() if p.alive()]
        peeks = []
        if live:
            rep = self.call(live[0], "SL.PEEK", "ledger", "L0")
            if isinstance(rep, list):
                peeks.append({"rule": "ledger", "key": "L0", "remaining": rep[2],
                              "wall": time.time()})
        rules, overrides = {}, {}
        for name in live:
            got = self.call(name, "SL.RULE", "LIST")
            rules[name] = got if isinstance(got, list) else []
            overrides[name] = {}
            for rule, keys in self.expect_overrides.items():
                got = overrides[name].setdefault(rule, {})
                for key in keys:
                    ov = self.call(name, "SL.OVERRIDE", "GET", rule, key)
                    if isinstance(ov, str) and ov.startswith("{"):
                        got[key] = json.loads(ov)["limit"]
        return {"peeks": peeks, "rules": rules, "overrides": overrides}


# ---- the faults -----------------------------------------------------------------------------------
def _span(lab, label):
    """(t0, t1) of the last fault whose label starts with label, from the lab's events."""
    t0 = t1 = None
    for t, kind, what, _ in lab.events:
        if what.startswith(label) and kind == "fault+":
            t0 = t
        if what.startswith(label) and kind == "fault-":
            t1 = t
    return t0, t1


def _sluiced_nodes(cell):
    return [n for n, _ in cell.sluiced.values()]


def _store_cut(cell, how):
    if not cell.store_nodes:
        return _nothing(cell)
    cell.lab.partition(_sluiced_nodes(cell), cell.store_nodes, cell.a.hold, how=how)
    t0, t1 = _span(cell.lab, "partition")
    names = list(cell.sluiced)
    return {"store_down": [{"t0": t0, "t1": t1, "nodes": names, "roomy_keys": ["A0"]}],
            "faults": [{"label": "store cut (%s)" % how, "t0": t0, "t1": t1, "nodes": names,
                        "roomy_keys": ["L0"]}]}


def _nothing(cell):
    time.sleep(cell.a.hold)
    return {}


def fault_lossy_store(cell):
    """30 % of the packets of every store node dropped, both ways: TCP retransmits, some
    replies come after --store-timeout (on_store_error decides those)."""
    if not cell.store_nodes:
        return _nothing(cell)
    lab = cell.lab
    undos = [lab.loss(n, 30) for n in cell.store_nodes]
    t0 = time.monotonic()
    time.sleep(cell.a.hold)
    t1 = time.monotonic()
    for u in undos:
        u()
    return {"faults": [{"label": "lossy store", "t0": t0, "t1": t1, "nodes": list(cell.sluiced),
                        "roomy_keys": ["L0"]}]}


def fault_slow_store(cell):
    if not cell.a.store.startswith("redis"):
        return _nothing(cell)
    cell.delay_ms = 400

    def put(ms):
        with open(cell.proxy_file + ".tmp", "w") as f:
            f.write("%d\n" % ms)
        os.rename(cell.proxy_file + ".tmp", cell.proxy_file)
    cell.lab._fault("slow store 400ms", lambda: put(400), lambda: put(0), cell.a.hold)
    t0, t1 = _span(cell.lab, "slow store")
    t0 += 0.1  # the proxy reads its delay every 20 ms
    names = list(cell.sluiced)
    return {"store_down": [{"t0": t0, "t1": t1, "nodes": names, "roomy_keys": ["A0"]}],
            "faults": [{"label": "slow store", "t0": t0, "t1": t1 + 0.5, "nodes": names,
                        "roomy_keys": ["L0"]}]}


def fault_pause_store(cell):
    if not cell.store_procs:
        return _nothing(cell)
    victim = cell.store_procs[0]
    cell.lab.pause(victim, cell.a.hold)
    t0, t1 = _span(cell.lab, "pause")
    names = list(cell.sluiced)
    if cell.a.store.startswith("redis"):
        return {"store_down": [{"t0": t0, "t1": t1, "nodes": names, "roomy_keys": ["A0"]}],
                "faults": [{"label": "pause redis", "t0": t0, "t1": t1, "nodes": names,
                            "roomy_keys": ["L0"]}]}
    return {"faults": [{"label": "pause a primary", "t0": t0, "t1": t1, "nodes": names,
                        "roomy_keys": ["L0"]}]}


def fault_pause_sluiced(cell):
    name = "s2" if "s2" in cell.sluiced else "s1"
    cell.lab.pause(cell.sluiced[name][1], cell.a.hold)
    t0, t1 = _span(cell.lab, "pause")
    return {"faults": [{"label": "pause " + name, "t0": t0, "t1": t1, "nodes": [name],
                        "roomy_keys": ["L0"]}]}


def fault_kill_sluiced(cell):
    """SIGKILL one sluiced (its leases, unsynced counts, memory keys since the last snapshot
    die with it), start it again after hold seconds."""
    name = "s2" if "s2" in cell.sluiced else "s1"
    proc = cell.sluiced[name][1]
    cell.lab.restart(proc, cell.a.hold, sig=signal.SIGKILL)
    cell.lab.wait_port(cell.sluiced[name][0], RESP, proc)
    t0, t1 = _span(cell.lab, "restart")
    return {"faults": [{"label": "kill " + name, "t0": t0, "t1": t1, "nodes": [name],
                        "roomy_keys": ["L0"]}]}


def _clock(offset, extra_windows):
    def fault(cell):
        proc = cell.sluiced["s1"][1]
        cell.lab.step_clock(proc, offset, cell.a.hold)
        t0, t1 = _span(cell.lab, "clock")
        f = {"label": "clock s1 " + offset, "t0": t0, "t1": t1, "nodes": ["s1"],
             "roomy_keys": ["L0"], "recover": extra_windows is not None}
        if extra_windows:
            f["extra_limits_per_window"] = extra_windows(cell)
        return {"faults": [f]}
    return fault


def _fwd_extra(cell):
    """What a clock stepped forward may add: s1's memory store finds every key in a new window
    when its clock jumps (one more quota per key, in the window of the jump); set right again,
    its time stays at the later value (no more). Redis decides on its own clock: nothing."""
    return {"fw": 1} if cell.a.store == "memory" else {}


def fault_failover(cell):
    """A primary cut off from its replica (so its writes stop replicating) and then killed:
    the replica takes over without what the primary acknowledged meanwhile. --rounds N: N times,
    the killed node started again after each (it comes back as the new primary's replica, so
    that a rule with replicas can admit on the slot again)."""
    if not cell.a.store.startswith("cluster"):
        return _nothing(cell)
    out = None
    for i in range(cell.a.rounds):
        got = _failover_once(cell, restart=cell.a.rounds > 1)
        if out is None:
            out = got
        else:
            out["faults"][0]["t1"] = got["faults"][0]["t1"]
    return out


def _failover_once(cell, restart):
    lab = cell.lab
    # the primary of L0's slot, and its replica
    c1 = cell.store_nodes[0]
    slot = lab.nsexec(c1, ["redis-cli", "-h", c1.addr, "-p", str(REDIS), "CLUSTER", "KEYSLOT",
                           "{L0}"]).stdout.strip()
    nodes = lab.nsexec(c1, ["redis-cli", "-h", c1.addr, "-p", str(REDIS), "CLUSTER",
                            "NODES"]).stdout.splitlines()
    by_addr = {n.addr: (n, p) for n, p in zip(cell.store_nodes, cell.store_procs)}
    primary = replica = None
    ids = {}
    for line in nodes:
        f = line.split()
        ids[f[0]] = f[1].split(":")[0]
        if "master" in f[2]:
            for rng in f[8:]:
                lo, _, hi = rng.partition("-")
                if lo.isdigit() and int(lo) <= int(slot) <= int(hi or lo):
                    primary = f[0]
    for line in nodes:
        f = line.split()
        if "slave" in f[2] and f[3] == primary:
            replica = f[0]
    pn, pp = by_addr[ids[primary]]
    rn, _ = by_addr[ids[replica]]
    undo = lab.partition([pn], [rn])  # the primary stops replicating
    time.sleep(cell.a.hold)
    pp.stop(signal.SIGKILL)
    undo()

    def promoted():
        r = lab.nsexec(rn, ["redis-cli", "-h", rn.addr, "-p", str(REDIS), "ROLE"], check=False)
        return r.stdout.startswith("master")
    poll(30, promoted)
    if restart:  # the old primary back, as the new one's replica, synced, before the next round
        pp.start()
        lab.wait_port(pn, REDIS, pp)

        def synced():
            r = lab.nsexec(pn, ["redis-cli", "-h", pn.addr, "-p", str(REDIS), "INFO",
                                "replication"], check=False)
            return "role:slave" in r.stdout and "master_link_status:up" in r.stdout
        poll(30, synced)
        time.sleep(1.0)
    t0, t1 = _span(lab, "partition")
    lab.events.append((time.monotonic(), "fault-", "failover", None))
    names = list(cell.sluiced)
    return {"faults": [{"label": "failover", "t0": t0, "t1": time.monotonic(), "nodes": names,
                        "roomy_keys": ["L0"]}]}


def fault_disk_full(cell):
    """The snapshots' (and, with SQLite, the config store's) file system full for hold
    seconds: a rule change through s1 meanwhile must be refused or kept, never half-made."""
    lab = cell.lab
    undo = lab.fill(cell.snap_dir)
    t0 = time.monotonic()
    got = cell.call("s1", "SL.OVERRIDE", "SET", "api-made", "p3", '{"limit":3}')
    time.sleep(cell.a.hold)
    undo()
    t1 = time.monotonic()
    return {"faults": [{"label": "disk full", "t0": t0, "t1": t1, "nodes": list(cell.sluiced),
                        "roomy_keys": ["L0"]}], "notes": {"override while full": got},
            "expect_overrides": {"api-made": {"p3": 3}} if got == "OK" else {}}


def fault_pg_restart(cell):
    """PostgreSQL stopped (fast shutdown) for hold seconds, then started again: a change
    through s1 meanwhile is refused; after, a change through s1 reaches every node."""
    if cell.a.config != "pg":
        return _nothing(cell)
    lab = cell.lab
    undo = lab.restart(cell.pg, None, sig=signal.SIGINT)
    t0 = time.monotonic()
    during = cell.call("s1", "SL.OVERRIDE", "SET", "api-made", "p3", '{"limit":3}')
    time.sleep(cell.a.hold)
    undo()
    t1 = time.monotonic()
    lab.wait_port(cell.pg_node, PG, cell.pg, secs=60)
    after = [None]

    def set_after():
        after[0] = cell.call("s1", "SL.OVERRIDE", "SET", "api-made", "p2", '{"limit":2}')
        return after[0] == "OK"
    poll(20, set_after)
    seen = {}
    for name in cell.sluiced:
        seen[name] = poll(20, lambda: str(cell.call(name, "SL.OVERRIDE", "GET", "api-made",
                                                    "p2")).startswith('{"limit":2'))
    return {"faults": [{"label": "pg restart", "t0": t0, "t1": t1, "nodes": list(cell.sluiced),
                        "roomy_keys": ["L0"]}],
            "notes": {"change while down": during, "change after": after[0],
                      "seen after": seen},
            "expect_overrides": {"api-made": {"p2": 2}} if after[0] == "OK" else {}}


def fault_cut_config(cell):
    if cell.a.config != "pg":
        return _nothing(cell)
    cell.lab.partition(_sluiced_nodes(cell), [cell.pg_node], cell.a.hold)
    t0, t1 = _span(cell.lab, "partition")
    return {"faults": [{"label": "config store cut", "t0": t0, "t1": t1,
                        "nodes": list(cell.sluiced), "roomy_keys": ["L0"]}]}


FAULTS = {
    "none": _nothing,
    "cut-store": lambda c: _store_cut(c, "drop"),
    "reset-store": lambda c: _store_cut(c, "reject"),
    "slow-store": fault_slow_store,
    "lossy-store": fault_lossy_store,
    "pause-store": fault_pause_store,
    "pause-sluiced": fault_pause_sluiced,
    "kill-sluiced": fault_kill_sluiced,
    "clock-back": _clock("-3600", lambda c: {}),
    "clock-forward": _clock("+1d", _fwd_extra),
    "failover": fault_failover,
    "disk-full": fault_disk_full,
    "pg-restart": fault_pg_restart,
    "cut-config": fault_cut_config,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="redis-module",
                    choices=["memory", "redis-module", "redis-lua", "cluster-module",
                             "cluster-lua"])
    ap.add_argument("--mode", default="strict",
                    choices=["strict", "leased", "approximate", "strict+replicas",
                             "strict+inflight"])
    ap.add_argument("--config", default="sqlite", choices=["sqlite", "pg"])
    ap.add_argument("--fault", default="none", choices=sorted(FAULTS))
    ap.add_argument("--pre", type=float, default=1.5)
    ap.add_argument("--hold", type=float, default=3.0)
    ap.add_argument("--post", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1, help="failover: how many, one after another")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    why = netlab.can_run()
    if why:
        print("SKIP: " + why)
        sys.exit(77)
    cell = {"store": a.store, "mode": a.mode, "config": a.config, "fault": a.fault}
    with netlab.Lab(keep=a.keep) as lab:
        c = Cell(lab, a)
        try:
            c.up()
            out = c.go()
        except RuntimeError as e:
            print(json.dumps(dict(cell, setup_error=str(e), dir=lab.dir)))
            lab.keep = True
            sys.exit(2)
        out.update(cell)
        if a.rounds > 1:
            out["fault"] = "%s x%d" % (a.fault, a.rounds)
        out["command"] = "tests/fault/run.py --store %s --mode %s --config %s --fault %s" % (
            a.store, a.mode, a.config, a.fault) + (" --rounds %d" % a.rounds if a.rounds > 1 else "")
        if out["violations"]:
            with open(os.path.join(lab.dir, "violations.json"), "w") as f:
                json.dump(out["violations"], f, indent=1)
            out["violations"] = out["violations"][:5]
            if a.keep:
                out["dir"] = lab.dir
        print(json.dumps(out))
    sys.exit(1 if out["failed"] else 0)


if __name__ == "__main__":
    main()
