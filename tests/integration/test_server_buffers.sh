#!/usr/bin/env bash
# test_server_buffers.sh - memory per client is bounded, with real clients that misbehave:
#   - a client that pipelines requests and never reads its replies is closed above
#     --output-buffer-hard at once, above --output-buffer-soft after --output-buffer-soft-time,
#     and (with no output limit) by --idle-timeout once its replies stop moving; each close of
#     the first two is counted, and other clients are served meanwhile.
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
    if other.call("PING") != "PONG":
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
    wait_for(lambda: metric("sluice_clients") == base + 1, "the client to be counted")
    wait_for(lambda: metric("sluice_clients") == base, "the stalled client to be closed",
             each=other_served)
    s.setblocking(True)
    drain_to_close(s)

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
finish
