#!/bin/bash
# selftest.sh - shows that layers.py fails on what it is meant to find: a call loop between two
# files, a file that includes a layer after its own, a long file or function with no reason; and passes once
# each is gone. Builds a small tree of its own in a temporary directory.
set -eu
command -v python3 >/dev/null && command -v cc >/dev/null || { echo "SKIP: needs python3 and cc"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/server" "$tmp/src/core" "$tmp/build"

write_tree() { # $1: whether b.c calls a back
    printf '#include "server/b.h"\nint a(void)\n{\n    return b() + 1;\n}\n' >"$tmp/src/server/a.c"
    printf 'int a(void);\n' >"$tmp/src/server/a.h"
    printf 'int b(void);\n' >"$tmp/src/server/b.h"
    if [ "$1" = loop ]; then
        printf '#include "server/a.h"\nint b(void)\n{\n    return a();\n}\n' >"$tmp/src/server/b.c"
    else
        printf 'int b(void)\n{\n    return 2;\n}\n' >"$tmp/src/server/b.c"
    fi
    printf 'int c(void)\n{\n    return 3;\n}\n' >"$tmp/src/core/c.c"
}

build() {
    local cmds=() f
    for f in server/a server/b core/c; do
        cc -c -I"$tmp/src" "$tmp/src/$f.c" -o "$tmp/build/${f//\//_}.o"
        cmds+=("{\"directory\": \"$tmp/build\", \"file\": \"$tmp/src/$f.c\", \"output\": \"${f//\//_}.o\"}")
    done
    (IFS=,; echo "[${cmds[*]}]") >"$tmp/build/compile_commands.json"
}

expect() { # $1: exit status wanted, $2: text wanted in the output ("" for none)
    local out rc=0
    out=$(python3 "$here/layers.py" --source "$tmp" --build "$tmp/build") || rc=$?
    if [ "$rc" != "$1" ] || { [ -n "$2" ] && ! grep -q -- "$2" <<<"$out"; }; then
        echo "selftest: wanted exit $1 and '$2', got exit $rc:"
        echo "$out"
        exit 1
    fi
}

write_tree loop
build
expect 1 "loop: server/a <-> server/b"
write_tree none
build
expect 0 ""
printf '#include "server/a.h"\n' >>"$tmp/src/core/c.c"
build
expect 1 "layer: core/c (core) includes server/a (server)"
write_tree none
seq 900 | sed 's,^,// ,' >>"$tmp/src/core/c.c"
expect 1 "long: src/core/c.c has"
sed -i '1i /* long because: one table, one file */' "$tmp/src/core/c.c"
expect 0 ""
{ printf 'int d(void)\n{\n    int x = 0;\n'; seq 70 | sed 's,^,    x += ,; s,$,;,'; printf '    return x;\n}\n'; } >>"$tmp/src/core/c.c"
build
expect 1 "long: src/core/c.c: 'int d(void)' has a body of 73 lines"
sed -i 's,^int d(void)$,/* d: long because it is a test */\nint d(void),' "$tmp/src/core/c.c"
build
expect 0 ""
echo "selftest: layers.py finds loops, layer breaches and unexplained long files and functions"
