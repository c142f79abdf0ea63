#!/usr/bin/env python3
"""soak_ctl.py - the chaos soak driver's helpers (tests/soak/soak.sh calls them one at a time).

    soak_ctl.py init SOAK                  writes SOAK/mem-rules.yaml, SOAK/redis-rules.yaml,
                                           SOAK/state.json and every first rule version to
                                           SOAK/events
    soak_ctl.py api-change SOAK R PORT HTTP
                                           changes API rule R % 6 to its next version, through
                                           SL.RULE SET (R even) or PUT /v1/rules/{name} (R odd)
    soak_ctl.py file-change SOAK R         edits the memory sluiced's rules file (R picks what:
                                           an edited rule's next version, f_extra in or out);
                                           the caller sends SIGHUP
    soak_ctl.py rules-check SOAK SRV PORT HTTP [WAIT_S]
                                           the rules SRV ("m" or "r") serves (SL.RULE LIST, GET
                                           and GET /v1/rules) are the expected ones; with WAIT_S,
                                           waits that long for them, every set seen on the way
                                           being the one before the change or the expected one
    soak_ctl.py probe SOAK PORT RULE KEY N  N x SL.ALLOW RULE KEY, each admission written to
                                           SOAK/driver.trace as a client's are
    soak_ctl.py snapshot-time PATH         the snapshot's written_at_ns (header), or "none"
    soak_ctl.py cluster-victim PORT R      a primary to kill: "port id replica_port replica_id
                                           slot-ranges" (R picks which)
    soak_ctl.py cluster-primaries PORT     the ports of the primaries serving slots, sorted, as
                                           PORT sees them
    soak_ctl.py kill-primary PORT PID OUT  samples PORT's replication offset with its time (to
                                           OUT), then kills PID with SIGKILL at once
    soak_ctl.py failover-event SOAK SAMPLES REPLICA_PORT KILLED_NS PROMOTED_NS SLOTS
                                           what the promoted replica had received
                                           (second_repl_offset - 1) against the samples: the
                                           latest sample time whose offset it had is the cut
                                           before which no admission can have been lost; writes
                                           the failover event

Exit status 0, or 1 with the reason on stdout.
"""
import http.client
import json
import os
import signal
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
import resp_client  # noqa: E402
from soak_model import (MEM_API, MEM_FILE_EDITED, MEM_FILE_STATIC, MEM_FILE_TOGGLED,  # noqa: E402
                        REDIS_RULES, dumps, rules_yaml, versioned_rule)

SNAPSHOT_MAGIC = b"SLUICESN"


def event(soak, text):
    with open(os.path.join(soak, "events"), "a") as f:
        f.write(text + "\n")


def version_event(soak, srv, rule):
    p = rule.params
    event(soak, "version %s %s %d %s" % (srv, rule.name, p.capacity, p.encode()))


def load_state(soak):
    with open(os.path.join(soak, "state.json")) as f:
        return json.load(f)


def save_state(soak, state):
    path = os.path.join(soak, "state.json")
    with open(path + ".tmp", "w") as f:
        json.dump(state, f)
    os.rename(path + ".tmp", path)


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def file_rules(state):
    """The memory sluiced's rules file as state says."""
    rules = list(MEM_FILE_STATIC)
    rules += [versioned_rule(n, state["file"][n]) for n in MEM_FILE_EDITED]
    if state["file"].get(MEM_FILE_TOGGLED) is not None:
        rules.append(versioned_rule(MEM_FILE_TOGGLED, state["file"][MEM_FILE_TOGGLED]))
    return rules


def expected(state):
    """{name: rule JSON} that the memory sluiced must serve."""
    rules = file_rules(state) + [versioned_rule(n, g) for n, g in state["api"].items()]
    return {r.name: r.json() for r in rules}


def cmd_init(soak):
    state = {"file": {n: 0 for n in MEM_FILE_EDITED}, "api": {n: 0 for n in MEM_API},
             "previous": None}
    state["file"][MEM_FILE_TOGGLED] = 0
    state["extra_gen"] = 0
    for r in file_rules(state) + [versioned_rule(n, 0) for n in MEM_API]:
        version_event(soak, "m", r)
    for r in REDIS_RULES:
        version_event(soak, "r", r)
    write_atomic(os.path.join(soak, "mem-rules.yaml"), rules_yaml(file_rules(state)))
    write_atomic(os.path.join(soak, "redis-rules.yaml"), rules_yaml(REDIS_RULES))
    # the API rules are made by the driver once sluiced runs (api-change with each R)
    state["api_made"] = []
    save_state(soak, state)
    return 0


def resp_call(port, *args):
    c = resp_client.Conn(port)
    c.s.settimeout(30)
    try:
        return c.call(*args)
    finally:
        c.s.close()


def http_call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def cmd_api_change(soak, r, port, http_port):
    """The next version of one API rule (the first time: the rule is made)."""
    state = load_state(soak)
    name = MEM_API[r % len(MEM_API)]
    made = name in state["api_made"]
    gen = state["api"][name] + (1 if made else 0)
    rule = versioned_rule(name, gen)
    version_event(soak, "m", rule)
    body = dumps(rule.params.fields())
    if r % 2 == 0:
        got = resp_call(port, "SL.RULE", "SET", name, body)
        ok = got == "OK"
    else:
        status, got = http_call(http_port, "PUT", "/v1/rules/" + name, body)
        ok = status in (200, 201, 204)
    if not ok:
        print("api-change %s: %r" % (name, got))
        return 1
    state["api"][name] = gen
    if not made:
        state["api_made"].append(name)
    save_state(soak, state)
    print("%s version %d (capacity %d) %s" % (name, gen, rule.params.capacity,
                                              "by SL.RULE SET" if r % 2 == 0 else "by PUT"))
    return 0


def cmd_file_change(soak, r):
    state = load_state(soak)
    state["previous"] = expected_live(state)
    what = r % 3
    if what < 2:
        name = MEM_FILE_EDITED[what]
        state["file"][name] += 1
        version_event(soak, "m", versioned_rule(name, state["file"][name]))
        said = "%s version %d" % (name, state["file"][name])
    elif state["file"].get(MEM_FILE_TOGGLED) is None:
        state["extra_gen"] += 1
        state["file"][MEM_FILE_TOGGLED] = state["extra_gen"]
        version_event(soak, "m", versioned_rule(MEM_FILE_TOGGLED, state["extra_gen"]))
        said = "%s back in" % MEM_FILE_TOGGLED
    else:
        state["file"][MEM_FILE_TOGGLED] = None
        said = "%s out" % MEM_FILE_TOGGLED
    write_atomic(os.path.join(soak, "mem-rules.yaml"), rules_yaml(file_rules(state)))
    save_state(soak, state)
    print("rules file: " + said)
    return 0


def expected_live(state):
    """The expected rules, API rules counted once made."""
    out = expected(state)
    for n in MEM_API:
        if n not in state["api_made"]:
            out.pop(n, None)
    return out


def served(port, http_port):
    """The rules a sluiced serves, as {name: JSON} from GET /v1/rules, checked against SL.RULE
    LIST and SL.RULE GET; raises ValueError when they disagree."""
    status, body = http_call(http_port, "GET", "/v1/rules")
    if status != 200:
        raise ValueError("GET /v1/rules: %d %r" % (status, body))
    doc = json.loads(body)
    rules = {r["name"]: r for r in doc["rules"]}
    c = resp_client.Conn(port)
    c.s.settimeout(30)
    try:
        names = c.call("SL.RULE", "LIST")
        names = sorted(n.decode() for n in names)
        gets = c.pipeline([["SL.RULE", "GET", n] for n in names])
    finally:
        c.s.close()
    by_get = {}
    for n, g in zip(names, gets):
        if not isinstance(g, bytes):
            raise ValueError("SL.RULE GET %s: %r" % (n, g))
        by_get[n] = json.loads(g)
    return rules, by_get


def cmd_rules_check(soak, srv, port, http_port, wait_s=None):
    if srv == "m":
        state = load_state(soak)
        want = expected_live(state)
        before = state.get("previous")
    else:
        want = {r.name: r.json() for r in REDIS_RULES}
        before = None
    deadline = time.monotonic() + (wait_s or 0)
    seen = 0
    while True:
        seen += 1
        try:
            http_rules, resp_rules = served(port, http_port)
        except (OSError, ValueError) as e:
            print("rules of %s: %s" % (srv, e))
            return 1
        if http_rules != resp_rules:
            # the two reads are not atomic together: only a problem if it lasts
            if wait_s is None or time.monotonic() > deadline:
                print("rules of %s: GET /v1/rules %s, SL.RULE %s" % (srv, dumps(http_rules),
                                                                   dumps(resp_rules)))
                return 1
        elif http_rules == want:
            return 0
        elif wait_s is None or http_rules != before or time.monotonic() > deadline:
            print("rules of %s after %d reads: %s, expected %s" % (srv, seen, dumps(http_rules),
                                                                   dumps(want)))
            return 1
        time.sleep(0.05)


def cmd_probe(soak, port, rule, key, n):
    """Decisions the driver makes itself, on a key no client uses, checked like the clients'."""
    c = resp_client.Conn(port)
    c.s.settimeout(30)
    out = []
    try:
        for _ in range(n):
            send = time.time_ns()
            r = c.call("SL.ALLOW", rule, key)
            recv = time.time_ns()
            if not (isinstance(r, list) and len(r) == 5 and all(type(x) is int for x in r) and
                    r[0] in (0, 1)):
                out.append("B m probe SL.ALLOW %s %s: %r" % (rule, key, r))
            elif r[0] == 1:
                out.append("A m %s %d %s 1 %d %d" % (rule, r[1], key, send, recv))
    finally:
        c.s.close()
        with open(os.path.join(soak, "driver.trace"), "a") as f:
            f.write("".join(line + "\n" for line in out))
    print("%d of %d admitted" % (sum(line.startswith("A") for line in out), n))
    return 0


def cmd_snapshot_time(path):
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except FileNotFoundError:
        print("none")
        return 0
    if len(head) < 24 or head[:8] != SNAPSHOT_MAGIC:
        print("bad")
        return 0
    version, flags, written = struct.unpack("<IIq", head[8:24])
    print(written)
    return 0


def cluster_nodes(port):
    """[(id, port, flags, master_id, slots)] of CLUSTER NODES as PORT sees it."""
    text = resp_call(port, "CLUSTER", "NODES").decode()
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        p = int(f[1].split("@")[0].rsplit(":", 1)[1])
        out.append((f[0], p, f[2], f[3], [s for s in f[8:] if not s.startswith("[")]))
    return out


def cmd_cluster_victim(port, r):
    nodes = cluster_nodes(port)
    primaries = sorted((n for n in nodes if "master" in n[2] and "fail" not in n[2] and n[4]),
                       key=lambda n: n[1])
    if not primaries:
        print("no primary")
        return 1
    v = primaries[r % len(primaries)]
    replicas = [n for n in nodes if n[3] == v[0] and "fail" not in n[2]]
    if not replicas:
        print("primary %d has no replica" % v[1])
        return 1
    print("%d %s %d %s %s" % (v[1], v[0], replicas[0][1], replicas[0][0], ",".join(v[4])))
    return 0


def cmd_cluster_primaries(port):
    """The nodes serving slots (a node suspected or failed still serves them until a replica
    takes them over)."""
    nodes = cluster_nodes(port)
    print(" ".join(str(n[1]) for n in sorted(nodes, key=lambda n: n[1])
                   if "master" in n[2] and n[4]))
    return 0


def repl_info(conn):
    text = conn.call("INFO", "replication").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def cmd_kill_primary(port, pid, out):
    """Samples of (send time of INFO, master_repl_offset): every write answered before the
    time is within the offset. The last sample comes right before the kill."""
    c = resp_client.Conn(port)
    c.s.settimeout(10)
    samples = []
    for i in range(8):
        t = time.time_ns()
        samples.append((t, int(repl_info(c)["master_repl_offset"])))
        if i < 7:
            time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    sent = time.time_ns()
    c.s.close()
    with open(out, "w") as f:
        json.dump({"samples": samples, "kill_sent": sent}, f)
    return 0


def cmd_failover_event(soak, samples_path, replica_port, killed_ns, promoted_ns, slots):
    with open(samples_path) as f:
        s = json.load(f)
    c = resp_client.Conn(replica_port)
    c.s.settimeout(10)
    info = repl_info(c)
    c.s.close()
    if info.get("role") != "master" or "second_repl_offset" not in info:
        print("replica on %d: %r" % (replica_port, info))
        return 1
    had = int(info["second_repl_offset"]) - 1  # the old primary's stream the replica received
    cut = None
    for t, off in s["samples"]:
        if off <= had:
            cut = t
    last = s["samples"][-1][1]
    event(soak, "failover r %d %d %s %d %s %d" % (killed_ns, promoted_ns,
                                                 "none" if cut is None else cut, s["kill_sent"],
                                                 slots, max(0, last - had)))
    lag = "unknown (older than every sample)" if cut is None else "%.1f ms" % (
        (s["kill_sent"] - cut) / 1e6)
    print("failover: the replica had offset %d, the primary %d at its last sample; "
          "admissions answered in the last %s before the kill may be lost" % (had, last, lag))
    return 0


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    cmd = a[0]
    if cmd == "init":
        return cmd_init(a[1])
    if cmd == "api-change":
        return cmd_api_change(a[1], int(a[2]), int(a[3]), int(a[4]))
    if cmd == "file-change":
        return cmd_file_change(a[1], int(a[2]))
    if cmd == "rules-check":
        wait_s = float(a[5]) if len(a) > 5 else 0
        return cmd_rules_check(a[1], a[2], int(a[3]), int(a[4]), wait_s if wait_s > 0 else None)
    if cmd == "probe":
        return cmd_probe(a[1], int(a[2]), a[3], a[4], int(a[5]))
    if cmd == "snapshot-time":
        return cmd_snapshot_time(a[1])
    if cmd == "cluster-victim":
        return cmd_cluster_victim(int(a[1]), int(a[2]))
    if cmd == "cluster-primaries":
        return cmd_cluster_primaries(int(a[1]))
    if cmd == "kill-primary":
        return cmd_kill_primary(int(a[1]), int(a[2]), a[3])
    if cmd == "failover-event":
        return cmd_failover_event(a[1], a[2], int(a[3]), int(a[4]), int(a[5]), a[6])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
