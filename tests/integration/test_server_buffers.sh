#!/usr/bin/env bash
# test_server_buffers.sh - memory per client is bounded, with real clients that misbehave:
#   - a client that pipelines requests and never reads its replies is closed above
#     --output-buffer-hard at once, above --output-buffer-soft after --output-buffer-soft-time,
#     and (with no output limit) by --idle-timeout once its replies stop moving; each close of
#     the first two is counted, and other clients are served meanwhile;
#   - many clients holding partial requests push all input buffers over --max-input-buffers:
#     the clients with the largest buffers are closed first, with the protocol's error, and
#     counted; the total stays under the cap; the smaller clients and a normal one keep working.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" && export PYTHONPATH

# buffers.py MODE RESP_PORT HTTP_PORT: one scenario as a Python client (exits non-zero with the
# reason when the server does not behave).
cat >"$TMP/buffers.py" <<'PY'
import select
import socket
import sys
import time
import urllib.request

from resp_client import Conn

mode, port, http_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def metric(name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port, timeout=5).read()
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise SystemExit("no metric %s" % name)


def wait_for(cond, what, secs=20, each=None):
    """Polls cond (and each, e.g. a check that another client is served) until it holds."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if each is not None:
            each()
        if cond():
            return
        time.sleep(0.05)
    raise SystemExit("timed out waiting for " + what)


def drain_to_close(s, limit=256 << 20):
    """Reads what the server sent until it closed the connection; returns the bytes read."""
    s.settimeout(20)
    got = 0
    try:
        while got < limit:
            data = s.recv(1 << 16)
            if not data:
                return got
            got += len(data)
    except ConnectionResetError:
        return got
    raise SystemExit("the connection was not closed (%d bytes read)" % got)


other = Conn(port)


def other_served():
    global other
    try:
        reply = other.call("PING")
    except ConnectionError:
        # closed by --idle-timeout (the stall scenario's 2 s): on a loaded machine this client
        # can sit idle that long between checks, and sluiced closes it as it should; another
        # connection must then be served
        other = Conn(port)
        reply = other.call("PING")
    if reply != "PONG":
        raise SystemExit("another client was not served")


def never_reads(request, count):
    """A client that pipelines count requests and never reads a reply."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(20)
    try:
        s.sendall(request * count)
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed while still sending
    return s


if mode == "hard":
    # INFO answers ~520 bytes to 6: one read of requests makes megabytes of replies.
    s = never_reads(b"INFO\r\n", 20000)
    wait_for(lambda: metric('sluice_output_buffer_disconnections_total{limit="hard"}') == 1,
             "the hard limit to close the client", each=other_served)
    drain_to_close(s)
    other_served()
    assert metric('sluice_output_buffer_disconnections_total{limit="soft"}') == 0

elif mode == "soft":
    # ~10 MB of replies: more than the sockets' buffers take (up to ~4 MB each way on
    # loopback); the batch that overflows them leaves up to ~2.8 MB waiting in sluiced.
    s = never_reads(b"INFO\r\n", 20000)
    wait_for(lambda: metric('sluice_output_buffer_disconnections_total{limit="soft"}') == 1,
             "the soft limit to close the client", each=other_served)
    drain_to_close(s)
    assert metric('sluice_output_buffer_disconnections_total{limit="hard"}') == 0

elif mode == "stall":
    # Small replies, no output limit: the client's socket fills, sluiced's write stops moving.
    base = metric("sluice_clients")
    s = socket.create_connection(("127.0.0.1", port))
    # counted before it sends: once its write stalls, the idle timeout may close it at any time
    wait_for(lambda: metric("sluice_clients") == base + 1, "the client to be counted")
    s.setblocking(False)
    sent = 0
    chunk = b"PING\r\n" * 10000
    deadline = time.monotonic() + 20
    while sent < (256 << 20) and time.monotonic() < deadline:
        try:
            sent += s.send(chunk)
        except BlockingIOError:
            # full; sluiced stopped reading once its replies backed up
            if not select.select([], [s], [], 1)[1]:
                break
        except (BrokenPipeError, ConnectionResetError):
            break  # already closed: this client was descheduled past the idle timeout
    wait_for(lambda: metric("sluice_clients") == base, "the stalled client to be closed",
             each=other_served)
    s.setblocking(True)
    drain_to_close(s)

elif mode == "input":
    cap = 2 << 20
    small_req = b"*2\r\n$4\r\nECHO\r\n$20000\r\n"
    big_req = b"*2\r\n$4\r\nECHO\r\n$400000\r\n"
    http_head = (b"POST /v1/allow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 400000\r\n\r\n")
    smalls = []
    for _ in range(6):  # 10 KB of 20 KB: a 32 KiB buffer each
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(small_req + b"s" * 10000)
        smalls.append(s)
    wait_for(lambda: metric("sluice_input_buffers_bytes") == 6 * 32768, "the small buffers")
    bigs = []  # (socket, is_http): 300 KB of 400 KB, a 512 KiB buffer each
    for i in range(6):
        http = i % 3 == 2
        s = socket.create_connection(("127.0.0.1", http_port if http else port))
        try:
            s.sendall((http_head if http else big_req) + b"x" * 300000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        bigs.append((s, http))

    def settled():
        evicted = metric("sluice_evicted_clients_total")
        held = metric("sluice_input_buffers_bytes")
        return evicted >= 3 and held == 6 * 32768 + (6 - evicted) * 524288

    wait_for(settled, "the largest clients to be closed", each=other_served)
    evicted = int(metric("sluice_evicted_clients_total"))
    if metric("sluice_input_buffers_bytes") > cap or evicted > 4:
        raise SystemExit("%d evicted, %d bytes held" % (evicted, metric("sluice_input_buffers_bytes")))
    # the evicted ones got the protocol's error, then the close
    told = []
    deadline = time.monotonic() + 20
    while len(told) < evicted and time.monotonic() < deadline:
        ready = select.select([s for s, _ in bigs if s not in told], [], [], 1)[0]
        for s in ready:
            s.settimeout(20)
            head = s.recv(1 << 16)
            want = (b"HTTP/1.1 503 " if dict(bigs)[s] else
                    b"-ERR connection closed: the input buffers of all clients exceed "
                    b"max-input-buffers")
            if not head.startswith(want):
                raise SystemExit("an evicted client got %r" % head[:120])
            drain_to_close(s)
            told.append(s)
    if len(told) != evicted:
        raise SystemExit("%d clients told, %d counted" % (len(told), evicted))
    info = other.call("INFO", "stats").decode()
    if "evicted_clients:%d\r\n" % evicted not in info:
        raise SystemExit("INFO stats does not count %d evicted clients: %r" % (evicted, info))
    # the others finish their requests and get answers
    for s, http in bigs:
        if s in told:
            continue
        s.sendall(b"x" * 100000 + (b"" if http else b"\r\n"))
        s.settimeout(20)
        if http:
            head = s.recv(1 << 16)
            if not head.startswith(b"HTTP/1.1 ") or head.startswith(b"HTTP/1.1 503"):
                raise SystemExit("a big HTTP client that was not evicted got %r" % head[:80])
        else:
            c = Conn.__new__(Conn)
            c.s, c.buf = s, b""
            if c.reply() != b"x" * 400000:
                raise SystemExit("a big RESP client that was not evicted got another reply")
    for s in smalls:
        s.sendall(b"s" * 10000 + b"\r\n")
        c = Conn.__new__(Conn)
        c.s, c.buf = s, b""
        if c.reply() != b"s" * 20000:
            raise SystemExit("a small client did not get its reply")
    other_served()
else:
    raise SystemExit("unknown mode " + mode)
print("ok")
PY

scenario() { # NAME MODE ARGS..: starts sluiced NAME with ARGS, runs MODE against it, stops it
    local name=$1 mode=$2
    shift 2
    start_sluiced "$name" --config-store "$TMP/$name.db" --snapshot "" "$@" ||
        { cat "$TMP/$name.log"; return 1; }
    local rc=0
    timeout 120 python3 "$TMP/buffers.py" "$mode" "$RESP_PORT" "$HTTP_PORT" || rc=1
    stop_bg "$name" TERM || rc=1
    [ "$rc" -eq 0 ] || tail -n 20 "$TMP/$name.log"
    return "$rc"
}

check output-hard scenario hard hard --threads 1 --output-buffer-hard 1m --output-buffer-soft 0
check output-soft scenario soft soft --threads 1 --output-buffer-hard 0 --output-buffer-soft 1k \
    --output-buffer-soft-time 1s
check output-stalled scenario stall stall --threads 1 --output-buffer-hard 0 \
    --output-buffer-soft 0 --idle-timeout 2s
check input-cap scenario input input --threads 2 --max-input-buffers 2m --max-request-size 1m
finish
