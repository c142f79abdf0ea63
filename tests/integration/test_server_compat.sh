#!/usr/bin/env bash
# test_server_compat.sh - sluiced answers as its peers do:
#   - SL.PEEK and SL.RESET take sluice.so's inline forms too (SL.PEEK key algorithm limit
#     window_ms [...], SL.RESET key), with the module's replies and error texts, side by side
#     with a redis-server that loads the built sluice.so; SL.RESET key forgets the key under
#     every inline rule and no named rule, with the memory store and with --store redis://;
#   - INFO answers sections as Redis does (several names, keyspace, a name it has no section
#     for: an empty string, as from redis-server);
#   - COMMAND DOCS describes every command, in the shape redis-cli builds HELP and hints from
#     (checked by running redis-cli's HELP in a terminal).
# Needs redis-server and redis-cli (exits 77 without them). A sluice.so built with TSan cannot be
# loaded into redis-server (its runtime needs static TLS): then only sluiced's side runs.
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
    echo "redis-server or redis-cli not installed: skipped"
    exit 77
}
MODULE=$SLUICE_BUILD_DIR/src/module/sluice.so
[ -f "$MODULE" ] || { echo "not built: $MODULE"; exit 1; }

cat >"$TMP/rules.yaml" <<'YAML'
rules:
  - name: api
    algorithm: sliding_log
    limit: 2
    window: 1h
YAML
start_sluiced s1 --rules "$TMP/rules.yaml" --config-store "$TMP/store.db" --snapshot "" ||
    { cat "$TMP/s1.log"; exit 1; }
SL_PORT=$RESP_PORT
RD_PORT=
WITH_MODULE=1
if ldd "$MODULE" | grep -q libtsan; then
    WITH_MODULE=0
    echo "sluice.so is built with TSan, which redis-server cannot load: sluiced's side only"
else
    start_redis redis --loadmodule "$MODULE" || { cat "$TMP/redis.log"; exit 1; }
    RD_PORT=$REDIS_PORT
fi
# check_m NAME same|same3 x ARGS...: a side-by-side check; without the module, ARGS still go to
# sluiced (later checks expect their effect) and nothing is counted
check_m() {
    if [ "$WITH_MODULE" = 1 ]; then
        check "$@"
    elif [ "$2" = same ] || [ "$2" = same3 ]; then
        rcli "$SL_PORT" "${@:4}" >/dev/null
    fi
}

# rcli PORT ARGS...: the reply on one line ("1 2 0 ..."), errors as redis-cli prints them
rcli() { redis-cli -p "$1" "${@:2}" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
same() { # NAME ARGS...: sluiced and the module answer ARGS alike (whole replies)
    local a b
    a=$(rcli "$SL_PORT" "${@:2}")
    b=$(rcli "$RD_PORT" "${@:2}")
    [ "$a" = "$b" ] || { echo "  sluiced: '$a'"; echo "  module:  '$b'"; return 1; }
}
first3() { awk '{print $1, $2, $3}' <<<"$1"; }
same3() { # NAME ARGS...: the same allowed, limit and remaining (times differ by when they ran)
    local a b
    a=$(first3 "$(rcli "$SL_PORT" "${@:2}")")
    b=$(first3 "$(rcli "$RD_PORT" "${@:2}")")
    [ "$a" = "$b" ] && [[ "$a" =~ ^[01]\ [0-9]+\ [0-9]+$ ]] ||
        { echo "  sluiced: '$a'"; echo "  module:  '$b'"; return 1; }
}
is() { [ "$1" = "$2" ] || { echo "  got '$1', want '$2'"; return 1; }; }

# ---- SL.PEEK and SL.RESET: the module's inline forms -------------------------------------------

LOG=(sliding_log 2 3600000)
for port in "$SL_PORT" "$RD_PORT"; do
    [ "$port" = "$RD_PORT" ] && [ "$WITH_MODULE" = 0 ] && continue
    rcli "$port" SL.THROTTLE k "${LOG[@]}" >/dev/null
    rcli "$port" SL.THROTTLE k "${LOG[@]}" >/dev/null
done
check_m "SL.PEEK key algorithm limit window_ms: nothing left, as the module says" same3 x SL.PEEK k "${LOG[@]}"
check "nothing left on sluiced" is "$(first3 "$(rcli "$SL_PORT" SL.PEEK k "${LOG[@]}")")" "1 2 0"
check_m "SL.PEEK with options" same3 x SL.PEEK k2 gcra 10 1000 BURST 3 MAX_DELAY 5
check_m "SL.RESET key: OK on both" same x SL.RESET k
check_m "after SL.RESET key: a fresh quota, the whole reply alike" same x SL.PEEK k "${LOG[@]}"
check "fresh on sluiced" is "$(rcli "$SL_PORT" SL.PEEK k "${LOG[@]}")" "1 2 2 0 0"
check_m "SL.RESET of a key never used" same x SL.RESET never-used

check_m "SL.PEEK key: wrong arity on both" same x SL.PEEK k
check_m "SL.PEEK with 3 of the inline arguments" same x SL.PEEK k sliding_log 2
check_m "SL.PEEK with COST" same x SL.PEEK k sliding_log 2 1000 COST 1
check_m "SL.PEEK rule key COST n: the same error" same x SL.PEEK api u1 COST 1
check "that error" is "$(rcli "$SL_PORT" SL.PEEK api u1 COST 1)" \
    "ERR SL.PEEK takes no COST (it reports without consuming)"
check_m "SL.PEEK unknown algorithm" same x SL.PEEK k leaky 1 1000
check_m "SL.PEEK invalid rule" same x SL.PEEK k sliding_log 2 1000 BURST 1
check_m "SL.PEEK bad limit" same x SL.PEEK k gcra x 1000
check_m "SL.PEEK unknown option" same x SL.PEEK k gcra 1 1000 FOO 1
check_m "SL.RESET: wrong arity on both" same x SL.RESET
check_m "SL.RESET with three keys: wrong arity on both" same x SL.RESET a b c

# the named forms still work on sluiced
check "SL.PEEK rule key" is "$(rcli "$SL_PORT" SL.PEEK api u1)" "1 2 2 0 0"
check "SL.ALLOW rule key" is "$(first3 "$(rcli "$SL_PORT" SL.ALLOW api u1)")" "1 2 1"
check "SL.PEEK nope key: unknown rule" is "$(rcli "$SL_PORT" SL.PEEK nope u1)" "ERR unknown rule 'nope'"

# SL.RESET key: every inline rule's usage of the key, never a named rule's
reset_scope() { # PORT: prints what is left after SL.RESET u1
    local p=$1
    rcli "$p" SL.THROTTLE u1 gcra 1 3600000 >/dev/null
    rcli "$p" SL.THROTTLE u1 fixed_window 3 3600000 >/dev/null
    rcli "$p" SL.RESET u1 >/dev/null
    echo "$(first3 "$(rcli "$p" SL.PEEK u1 gcra 1 3600000)")|$(first3 "$(rcli "$p" SL.PEEK u1 fixed_window 3 3600000)")"
}
check "SL.RESET key: every inline rule of the key" is "$(reset_scope "$SL_PORT")" "1 2 2|1 3 3"
check "SL.RESET key leaves the named rule's usage" is "$(first3 "$(rcli "$SL_PORT" SL.PEEK api u1)")" "1 2 1"
check "SL.RESET rule key still resets the named rule" is "$(rcli "$SL_PORT" SL.RESET api u1)" "OK"
check "... and it did" is "$(first3 "$(rcli "$SL_PORT" SL.PEEK api u1)")" "1 2 2"
LONG=$(head -c 1100 /dev/zero | tr '\0' k)
check "SL.RESET of a key too long" is "$(rcli "$SL_PORT" SL.RESET "$LONG")" "ERR key is longer than 1024 bytes"

# the same through a sluiced whose state is in Redis (the module's commands, asynchronous; a
# deadline no busy machine misses, so on_store_error never answers instead)
if [ "$WITH_MODULE" = 1 ]; then
    RESP_PORT_1=$SL_PORT
    start_sluiced s2 --rules "$TMP/rules.yaml" --config-store "$TMP/store2.db" --snapshot "" \
        --store "redis://127.0.0.1:$RD_PORT" --store-timeout 5s || { cat "$TMP/s2.log"; exit 1; }
    check "redis store: SL.RESET key" is "$(reset_scope "$RESP_PORT")" "1 2 2|1 3 3"
    check "redis store: SL.PEEK inline" is "$(rcli "$RESP_PORT" SL.PEEK v "${LOG[@]}")" "1 2 2 0 0"
    stop_bg s2
    SL_PORT=$RESP_PORT_1
fi

# ---- INFO ----------------------------------------------------------------------------------

info() { redis-cli -p "$1" INFO "${@:2}" | tr -d '\r'; }
raw_info() { # PORT ARGS...: INFO's reply, as sent
    PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 -c '
import sys
from resp_client import Conn
print(repr(Conn(int(sys.argv[1])).call("INFO", *sys.argv[2:])))' "$@"
}
check "INFO nonsense: an empty string" is "$(raw_info "$SL_PORT" nonsense)" "b''"
check_m "INFO nonsense: as from redis-server" is "$(raw_info "$RD_PORT" nonsense)" "b''"
rcli "$SL_PORT" SL.THROTTLE kept gcra 1 3600000 >/dev/null
rcli "$SL_PORT" SL.ALLOW api kept >/dev/null
check "INFO keyspace: Redis's section" \
    is "$(info "$SL_PORT" keyspace | sed 's/keys=[0-9]*/keys=N/')" "# Keyspace
db0:keys=N,expires=0,avg_ttl=0"
check "INFO keyspace counts the keys" test "$(info "$SL_PORT" keyspace | sed -n 's/^db0:keys=\([0-9]*\),.*/\1/p')" -eq 2
check "INFO server clients: both, in order" is "$(info "$SL_PORT" server clients | grep '^#')" "# Server
# Clients"
check "INFO: every section" is "$(info "$SL_PORT" | grep '^#' | tr '\n' ' ')" \
    "# Server # Clients # Stats # Rules # Persistence # Keyspace "
check "INFO ALL is INFO" is "$(info "$SL_PORT" ALL | grep '^#' | tr '\n' ' ')" \
    "# Server # Clients # Stats # Rules # Persistence # Keyspace "
check "INFO memory: a section sluiced does not have, nothing" is "$(info "$SL_PORT" memory)" ""
check "INFO rules server: our order, once each" is "$(info "$SL_PORT" rules server rules | grep '^#' | tr '\n' ' ')" \
    "# Server # Rules "

# ---- COMMAND DOCS --------------------------------------------------------------------------

PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$SL_PORT" >"$TMP/docs.out" 2>&1 <<'PY'
import sys
from resp_client import Conn
c = Conn(int(sys.argv[1]))
names = sorted(e[0].decode() for e in c.call("COMMAND"))
docs = c.call("COMMAND", "DOCS")
assert isinstance(docs, list) and len(docs) % 2 == 0, docs
docs = {docs[i].decode(): docs[i + 1] for i in range(0, len(docs), 2)}
assert sorted(docs) == names, ("commands without docs", sorted(set(names) - set(docs)))

def check_args(args, where):
    assert isinstance(args, list), where
    for a in args:
        m = {a[i].decode(): a[i + 1] for i in range(0, len(a), 2)}
        assert isinstance(m.get("name"), bytes) and isinstance(m.get("type"), bytes), (where, m)
        assert m["type"].decode() in ("key", "string", "integer", "pure-token", "block", "oneof"), (where, m)
        for f in m.get("flags", []):
            assert f in ("optional", "multiple"), (where, f)  # status replies, as redis-cli asserts
        if m["type"] in (b"block", b"oneof"):
            check_args(m["arguments"], where + "/" + m["name"].decode())

def check_doc(name, d):
    m = {d[i].decode(): d[i + 1] for i in range(0, len(d), 2)}
    for k in ("summary", "since", "group"):
        assert isinstance(m.get(k), bytes) and m[k], (name, k)
    check_args(m.get("arguments", []), name)
    subs = m.get("subcommands", [])
    for i in range(0, len(subs), 2):
        assert subs[i].decode().startswith(name + "|"), (name, subs[i])
        check_doc(subs[i].decode(), subs[i + 1])

for name, d in docs.items():
    check_doc(name, d)
only = c.call("COMMAND", "DOCS", "sl.peek", "nope", "SL.PEEK")
assert [only[0]] == [b"sl.peek"] and len(only) == 2, only
print("ok", len(docs))
PY
check "COMMAND DOCS: every command, in Redis 7's shape" grep -q '^ok ' "$TMP/docs.out" ||
    cat "$TMP/docs.out"

# redis-cli's HELP, in a terminal (redis-cli asks COMMAND DOCS only when interactive)
python3 - "$SL_PORT" >"$TMP/help.out" 2>&1 <<'PY'
import os, pty, re, select, sys, time
port = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "dumb"
    os.environ["REDISCLI_HISTFILE"] = "/dev/null"
    os.environ["REDISCLI_RCFILE"] = "/dev/null"
    os.execvp("redis-cli", ["redis-cli", "-p", port])
out = b""
def read_until(marker, secs=10):
    global out
    end = time.monotonic() + secs
    while marker not in out and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
read_until(b"> ")
for cmd in (b"HELP SL.THROTTLE\r", b"HELP SL.RESET\r", b"HELP SL.RULE SET\r"):
    out = b""
    os.write(fd, cmd)
    read_until(b"group:", 10)
    read_until(b"> ", 10)
    sys.stdout.write(re.sub(rb"\x1b\[[0-9;]*m", b"", out).decode(errors="replace").replace("\r", ""))
os.write(fd, b"quit\r")
time.sleep(0.1)
os.kill(pid, 9)
os.waitpid(pid, 0)
PY
check "redis-cli HELP SL.THROTTLE shows the arguments" \
    grep -q 'SL.THROTTLE key algorithm limit window_ms \[BURST burst\] \[BUCKETS buckets\] \[MAX_DELAY max_delay_ms\] \[COST cost\]' "$TMP/help.out"
check "redis-cli HELP SL.RESET shows both forms" grep -q 'SL.RESET rule key|key' "$TMP/help.out"
check "redis-cli HELP SL.RULE SET" grep -q 'SL.RULE SET name json' "$TMP/help.out"
check "redis-cli shows the group" grep -q 'group: module' "$TMP/help.out"
[ "$FAILS" -eq 0 ] || cat "$TMP/help.out"

check "sluiced stops cleanly" stop_bg s1
finish
