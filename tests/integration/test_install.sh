#!/usr/bin/env bash
# test_install.sh - the installed tree is usable the ways the docs promise:
#   - libsluice through pkg-config (shared, static) and CMake's find_package(sluice);
#   - libsluice-client through pkg-config (shared, and client.md's static line) and
#     find_package(sluice COMPONENTS client) (sluice::client);
#   - programs built with pkg-config run without LD_LIBRARY_PATH (the .pc's RPATH);
#   - sluice.so at <libdir>/sluice/sluice.so, named by `pkg-config --variable=redis_module`,
#     loads into redis-server (when it is installed);
#   - the licence at share/doc/sluice/copyright;
#   - into /usr/local (a private copy of it and of /etc, in a mount namespace: nothing on the
#     machine changes), the install runs ldconfig, so even a plain `cc app.c -lsluice` runs;
#     into /usr, the .pc carries no RPATH and programs still run.
# Installs the build tree into temp prefixes; needs SLUICE_BUILD_DIR and SLUICE_SOURCE_DIR.
set -euo pipefail
build=${SLUICE_BUILD_DIR:?}
src=${SLUICE_SOURCE_DIR:?}
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset LD_LIBRARY_PATH

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in include/sluice/sluice.h include/sluice/version.h include/sluice/client.h \
         lib/pkgconfig/sluice.pc lib/pkgconfig/sluice-client.pc \
         lib/cmake/sluice/sluiceConfig.cmake lib/cmake/sluice/sluiceClientTargets.cmake \
         lib/sluice/sluice.so share/doc/sluice/copyright bin/sluice bin/sluiced; do
    [ -e "$prefix/$f" ] || fail "not installed: $f"
done
ls "$prefix/lib/"libsluice.so* "$prefix/lib/libsluice.a" "$prefix/lib/"libsluice-client.so* \
    "$prefix/lib/libsluice-client.a" >/dev/null
cmp -s "$prefix/share/doc/sluice/copyright" "$src/LICENSE" || fail "copyright is not LICENSE"

cat >"$tmp/app.c" <<'C'
#include <stdio.h>
#include <sluice/sluice.h>
int main(void)
{
    sl_rule_t rule;
    sl_table_t *table;
    if (sl_rule_init(&rule, SL_SLIDING_LOG, 3, 10 * SL_NS_PER_SEC) != SL_OK ||
        sl_table_create(&rule, NULL, &table) != SL_OK)
        return 2;
    const long at_ms[] = {0, 1000, 2000, 3000, 11000};
    for (int i = 0; i < 5; i++) {
        sl_decision_t d;
        sl_table_decide(table, "A", 1, 1, at_ms[i] * SL_NS_PER_MS, &d);
        printf("%d", d.allowed);
    }
    printf(" %s\n", SL_VERSION_STRING);
    sl_table_free(table);
    return 0;
}
C
want="11101 $(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"

# a client program that needs no server: the backoff is a pure function of its seed
cat >"$tmp/client.c" <<'C'
#include <stdint.h>
#include <stdio.h>
#include <sluice/client.h>
int main(void)
{
    uint64_t rng = 42;
    int64_t d = slc_backoff_ms(3, 100, 10000, &rng);
    printf("%s\n", d >= 0 && d <= 800 ? "client ok" : "client wrong");
    return 0;
}
C

# ---- pkg-config, shared: runs without LD_LIBRARY_PATH ----------------------------------------
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
rpath=$(pkg-config --libs sluice | tr ' ' '\n' | sed -n 's/^-Wl,-rpath,//p')
[ -n "$rpath" ] && [ "$(readlink -f "$rpath")" = "$(readlink -f "$prefix/lib")" ] ||
    fail "sluice.pc's Libs carry no RPATH for $prefix/lib: $(pkg-config --libs sluice)"
cc "$tmp/app.c" -o "$tmp/app-pc" $(pkg-config --cflags --libs sluice)
got=$("$tmp/app-pc") || fail "pkg-config build does not run without LD_LIBRARY_PATH"
[ "$got" = "$want" ] || fail "pkg-config build printed '$got', want '$want'"

cc "$tmp/client.c" -o "$tmp/client-pc" $(pkg-config --cflags --libs sluice-client)
got=$("$tmp/client-pc") || fail "sluice-client build does not run without LD_LIBRARY_PATH"
[ "$got" = "client ok" ] || fail "sluice-client build printed '$got'"

# ---- static --------------------------------------------------------------------------------
cc "$tmp/app.c" -o "$tmp/app-static" $(pkg-config --cflags sluice) "$prefix/lib/libsluice.a" \
    $(pkg-config --libs-only-other --static sluice) -lpthread
got=$("$tmp/app-static")
[ "$got" = "$want" ] || fail "static build printed '$got', want '$want'"
ldd "$tmp/app-static" | grep -q libsluice && fail "the static build links libsluice.so"

# client.md's static line, word for word (its continuation lines joined, its comment dropped)
line=$(awk '/^cc app.c \$\(pkg-config --cflags sluice-client\) \\$/ {on = 1}
            on {print} on && /# static$/ {exit}' "$src/docs/client.md" |
    sed 's/#.*$//' | tr -d '\\\n')
[ -n "$line" ] || fail "no static link line in docs/client.md"
mkdir "$tmp/cl" && cp "$tmp/client.c" "$tmp/cl/app.c"
(cd "$tmp/cl" && eval "$line -o ../client-static") || fail "client.md's static line fails: $line"
got=$("$tmp/client-static")
[ "$got" = "client ok" ] || fail "client static build printed '$got'"
ldd "$tmp/client-static" | grep -q libsluice-client && fail "the static client links the .so"

# ---- CMake find_package ----------------------------------------------------------------------
mkdir -p "$tmp/proj"
cp "$tmp/app.c" "$tmp/proj/app.c"
cp "$tmp/client.c" "$tmp/proj/client.c"
cat >"$tmp/proj/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(sluice 0.1 REQUIRED COMPONENTS client)
add_executable(app app.c)
target_link_libraries(app sluice::sluice)
add_executable(client client.c)
target_link_libraries(client sluice::client)
add_executable(client_static client.c)
target_link_libraries(client_static sluice::client_static)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
got=$("$tmp/proj/build/app")
[ "$got" = "$want" ] || fail "find_package build printed '$got', want '$want'"
[ "$("$tmp/proj/build/client")" = "client ok" ] || fail "sluice::client build"
[ "$("$tmp/proj/build/client_static")" = "client ok" ] || fail "sluice::client_static build"

"$prefix/bin/sluice" --help >/dev/null

# ---- sluice.so where the docs say -------------------------------------------------------------
module=$(pkg-config --variable=redis_module sluice)
[ "$(readlink -f "$module")" = "$(readlink -f "$prefix/lib/sluice/sluice.so")" ] ||
    fail "pkg-config --variable=redis_module sluice is '$module'"
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null &&
    ! ldd "$module" | grep -q libasan; then
    # a port free when chosen may be taken before redis-server binds it: then another port
    # (free_port.py --serving says 2), so that the answer below is this redis-server's
    for ((try = 1; try <= 5; try++)); do
        port=$(python3 "$src/scripts/free_port.py")
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
            --loadmodule "$module" >"$tmp/redis.log" 2>&1 &
        pids+=($!)
        rc=0
        python3 "$src/scripts/free_port.py" --serving "${pids[-1]}" 30 "$tmp/redis.log" -- "$port" ||
            rc=$?
        case $rc in
        0) break ;;
        2) kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true
            unset 'pids[-1]' ;; # reaped: its PID is no longer ours
        *) cat "$tmp/redis.log"; fail "redis-server with the installed sluice.so did not start" ;;
        esac
    done
    [ "$try" -le 5 ] || fail "no port redis-server could bind in 5 tries"
    got=$(redis-cli -p "$port" SL.THROTTLE k gcra 5 1000 | head -3 | tr '\n' ' ')
    [ "$got" = "1 6 5 " ] || { cat "$tmp/redis.log"; fail "the installed sluice.so answered '$got'"; }
    kill "${pids[-1]}"
    wait "${pids[-1]}" 2>/dev/null || true
    unset 'pids[-1]'
    echo "install: the installed sluice.so loads into redis-server"
fi

# ---- system prefixes, in a private mount namespace -------------------------------------------
system_prefix() { # PREFIX: install there (into an overlay), build, run; prints what was checked
    local p=$1 up=$tmp/ov-$RANDOM
    mkdir -p "$up"/{etc,etc-w,pfx,pfx-w}
    unshare --mount --propagation private bash -euo pipefail -c '
        up=$1 p=$2 build=$3 tmp=$4 want=$5
        mount -t overlay overlay -o "lowerdir=/etc,upperdir=$up/etc,workdir=$up/etc-w" /etc
        mount -t overlay overlay -o "lowerdir=$p,upperdir=$up/pfx,workdir=$up/pfx-w" "$p"
        cmake --install "$build" --prefix "$p" >"$tmp/sys-install.log"
        libdir=$(dirname "$(find "$p" -name libsluice.so -newer "$tmp/app.c" | head -1)")
        export PKG_CONFIG_PATH=$libdir/pkgconfig
        libs=$(pkg-config --libs sluice)
        cc "$tmp/app.c" -o "$tmp/sys-pc" $(pkg-config --cflags sluice) $libs
        [ "$("$tmp/sys-pc")" = "$want" ] || { echo "pkg-config build under $p does not run"; exit 1; }
        echo "libs: $libs"
        if grep -q "Ran ldconfig" "$tmp/sys-install.log"; then
            cc "$tmp/app.c" -o "$tmp/sys-plain" -I"$p/include" -L"$libdir" -lsluice
            [ "$("$tmp/sys-plain")" = "$want" ] || { echo "plain -lsluice under $p does not run"; exit 1; }
            echo "ldconfig ran; a plain -lsluice build runs"
        fi
    ' _ "$up" "$p" "$build" "$tmp" "$want"
}
if [ "$(id -u)" -eq 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    out=$(system_prefix /usr/local) || fail "install into /usr/local: $out"
    [[ "$out" == *"-Wl,-rpath,/usr/local/"* ]] || fail "/usr/local: no RPATH in the .pc: $out"
    [[ "$out" == *"ldconfig ran"* ]] || fail "/usr/local: the install did not run ldconfig: $out"
    out=$(system_prefix /usr) || fail "install into /usr: $out"
    [[ "$out" == *"-Wl,-rpath"* ]] && fail "/usr: an RPATH in the .pc: $out"
    echo "install: /usr/local (RPATH in the .pc, ldconfig run) and /usr (no RPATH) work"
else
    echo "install: system prefixes not checked (needs root and mount namespaces)"
fi

echo "install: pkg-config (shared without LD_LIBRARY_PATH, static), find_package(sluice) with" \
    "sluice::client, sluice.so and the licence in place; programs print '$want'"
