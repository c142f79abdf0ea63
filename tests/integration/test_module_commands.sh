#!/usr/bin/env bash
# test_module_commands.sh - each RESP command described once (src/proto/commands.c), and read by
# both servers:
#   sluiced  COMMAND lists exactly the commands of its table (src/server/resp_table.c), COMMAND
#            COUNT counts them, COMMAND INFO of each is its COMMAND entry, with the arity of its
#            description, and COMMAND DOCS has each one, no other, with its description's summary
#   sluice.so  Redis's COMMAND INFO has each module command's description's arity, and COMMAND
#            DOCS its summary and arguments: SL.THROTTLE's and CL.THROTTLE's the same as
#            sluiced's, SL.PEEK's and SL.SETTLE's the inline block of sluiced's, SL.RESET's a key
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"
need redis-server python3

start_sluiced s --config-store "$TMP/s.db" --snapshot "" --threads 1 || { cat "$TMP/s.log"; exit 1; }
start_redis r --loadmodule "$SLUICE_BUILD_DIR/src/module/sluice.so" || { cat "$TMP/r.log"; exit 1; }

PYTHONPATH="$SLUICE_SOURCE_DIR/tests/integration" python3 - "$RESP_PORT" "$REDIS_PORT" \
    "$SLUICE_SOURCE_DIR/src" >"$TMP/out" 2>&1 <<'PY'
import re, sys
from resp_client import Conn
sl_port, redis_port, src = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
commands_c = open(f"{src}/proto/commands.c").read()
descs = {m.group(1): (m.group(2), int(m.group(3))) for m in re.finditer(
    r'const cmd_desc_t (desc_\w+) = \{\s*\.name = "([^"]+)",\s*\.arity = (-?\d+)', commands_c)}
def table(path, fn):
    return [descs[d] for d in re.findall(r'\{&(desc_\w+), ' + fn, open(path).read())]
sl_table = table(f"{src}/server/resp_table.c", r'(?:resp_cmd_\w+)\}')
mod_table = table(f"{src}/module/sluice_module.c", r'(?:cmd_\w+)\}')
assert len(sl_table) == 22 and len(mod_table) == 10, (sl_table, mod_table)

def docs_of(c, *names):
    d = c.call("COMMAND", "DOCS", *names)
    return {d[i].decode(): {d[i+1][j].decode(): d[i+1][j+1] for j in range(0, len(d[i+1]), 2)}
            for i in range(0, len(d), 2)}

def args_of(args):  # name, type, token, flags and parts; nothing Redis adds (key_spec_index)
    out = []
    for a in args:
        m = {a[i].decode(): a[i+1] for i in range(0, len(a), 2)}
        out.append((m["name"], m["type"], m.get("token"), sorted(m.get("flags", [])),
                    args_of(m["arguments"]) if "arguments" in m else None))
    return out

sl = Conn(sl_port)
entries = sl.call("COMMAND")
names = sorted(e[0].decode() for e in entries)
assert names == sorted(n for n, _ in sl_table), ("COMMAND is not the table", names)
assert sl.call("COMMAND", "COUNT") == len(sl_table)
for e in entries:
    name = e[0].decode()
    assert sl.call("COMMAND", "INFO", name) == [e], name
    assert e[1] == dict(sl_table)[name], (name, e[1])
sl_docs = docs_of(sl)
assert sorted(sl_docs) == names, sorted(sl_docs)

r = Conn(redis_port)
mod_docs = docs_of(r, *[n for n, _ in mod_table])
for name, arity in mod_table:
    info = r.call("COMMAND", "INFO", name)[0]
    assert info[1] == arity, (name, info[1], arity)
    assert mod_docs[name]["summary"], name
for name in ("sl.throttle", "cl.throttle"):
    assert mod_docs[name]["summary"] == sl_docs[name]["summary"], name
    assert args_of(mod_docs[name]["arguments"]) == args_of(sl_docs[name]["arguments"]), name
for name in ("sl.peek", "sl.settle"):
    forms = args_of(sl_docs[name]["arguments"])[0][4]  # the oneof's blocks
    inline = [f for f in forms if f[0] == b"inline"][0][4]
    assert args_of(mod_docs[name]["arguments"]) == inline, (name, inline)
    assert mod_docs[name]["summary"] == sl_docs[name]["summary"], name
assert args_of(mod_docs["sl.reset"]["arguments"]) == [(b"key", b"key", None, [], None)]
print("ok", len(sl_table), "sluiced commands,", len(mod_table), "module commands")
PY
check "one description per command, read by both" grep -q '^ok ' "$TMP/out" || cat "$TMP/out"
check "arity enforced by Redis as described" test \
    "$(redis-cli -p "$REDIS_PORT" SL.RESET a b 2>&1)" = "ERR wrong number of arguments for 'sl.reset' command"
finish
