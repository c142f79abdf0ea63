#!/usr/bin/env bash
# test_rules_watch.sh - watched rules: `--rules DIR` reads every *.yaml in a directory (dot-files
# left out), and a change applies with no signal. The directory is laid out and updated the way
# kubelet's atomic writer updates a mounted ConfigMap: the files are links through "..data",
# itself a link to a timestamped directory; an update writes a new timestamped directory, makes
# "..data_tmp" point at it and renames it over "..data" (one atomic step), then removes the old
# directory. Checked: the swap applies (the new limit is in force) with no SIGHUP; a file added
# and a file removed apply; a broken file is logged with its line and column, counted, and the
# rules in force stay; SIGHUP still reloads; a rules file watched through the directory it is in
# is not imported again when something else in that directory changes (the config store's
# database beside it): that would undo rules changed through the API. A plain directory's files
# that are not *.yaml or *.yml are named in the log, not read. Then envoyproxy/ratelimit's
# runtime directory through its variables (RUNTIME_ROOT a link, /srv/runtime/current style): a
# swap of the link (mv -T, ln -sfn) applies with no signal, RUNTIME_WATCH_ROOT=true or false;
# every file under it is read whatever its name, subdirectories too, dot-files unless
# RUNTIME_IGNOREDOTFILES=true; a FIFO is left out (not waited on); a tree too deep or with too
# many files is refused by name and the rules in force stay. Every wait is bounded (poll,
# wait_log).
set -u
. "$SLUICE_SOURCE_DIR/tests/integration/lib.sh"

CFG="$TMP/config"
mkdir -p "$CFG"
cli() { redis-cli -p "$RESP_PORT" "$@" 2>&1 | tr '\n' ' ' | sed 's/ *$//'; }
limit_of() { # limit_of RULE: the limit SL.RULE GET reports
    cli SL.RULE GET "$1" | sed -n 's/.*"limit":\([0-9]*\).*/\1/p'
}
limit_is() { [ "$(limit_of "$1")" = "$2" ]; }
gone() { case "$(cli SL.RULE GET "$1")" in *ERR*|*"(nil)"*|"") return 0 ;; esac; return 1; }
edge() { # edge LIMIT: an envoyproxy/ratelimit file for the domain edge
    printf 'domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: %s}\n' "$1"
}
# kubelet's atomic writer: ts DIR with the files given as NAME=TEXT, ..data swapped to it
N=0
swap() {
    N=$((N + 1))
    local ts="..2026_01_01_00_00_0${N}.000000000" old
    old=$(readlink "$CFG/..data" 2>/dev/null || true)
    mkdir "$CFG/$ts"
    local f
    for f in "$@"; do
        printf '%s\n' "${f#*=}" >"$CFG/$ts/${f%%=*}"
    done
    ln -s "$ts" "$CFG/..data_tmp"
    mv -T "$CFG/..data_tmp" "$CFG/..data"
    for f in "$@"; do # the user-visible files: links through ..data (made once, as kubelet does)
        [ -L "$CFG/${f%%=*}" ] || ln -s "..data/${f%%=*}" "$CFG/${f%%=*}"
    done
    for f in "$CFG"/*.yaml; do # files the new version no longer has
        [ -e "$f" ] || rm -f "$f"
    done
    [ -n "$old" ] && rm -rf "${CFG:?}/$old"
    return 0
}

swap "edge.yaml=$(edge 10)"
printf 'domain: hidden\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n' >"$CFG/.hidden.yaml"
start_sluiced s --rules "$CFG" --rules-watch 100ms --config-store "$TMP/store.db" --snapshot "" \
    --poll-interval 100ms || { cat "$TMP/s.log"; exit 1; }
check start-loaded limit_is edge.remote_address 10
check dotfile-ignored gone hidden.k

# 1. the ConfigMap swap applies with no signal
swap "edge.yaml=$(edge 20)"
check swap-applied poll 10 limit_is edge.remote_address 20
check swap-logged grep -q "rules changed: rules file $CFG: changed 1 rules: edge.remote_address" "$TMP/s.log"

# 2. a file added, in the same swap, then removed in the next
swap "edge.yaml=$(edge 20)" "api.yaml=domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 7}"
check added poll 10 limit_is api.user 7
swap "edge.yaml=$(edge 20)"
check removed poll 10 gone api.user
check kept limit_is edge.remote_address 20

# 3. a broken file: logged with line and column, counted (once per reload: a slow machine may
#    see the swap as two bursts), the rules in force stay
swap "edge.yaml=domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: fortnight, requests_per_unit: 5}"
check broken-logged wait_log s "rules changed: rules not reloaded (the rules in force stay): .*edge.yaml: line 4, column 24: descriptors\[0\].rate_limit.unit: unknown unit 'fortnight'"
check broken-stays limit_is edge.remote_address 20
check broken-counted poll 10 sh -c "curl -s http://127.0.0.1:$HTTP_PORT/metrics | grep -q '^sluice_rules_reload_failures_total.* [1-9][0-9]*$'"

# 4. a plain edit of a file in a watched directory (no links) and SIGHUP still work; a file
#    that is not *.yaml is named in the log at each load, not read
rm -rf "$CFG"/..?* "$CFG"/*.yaml
echo "not rules" >"$CFG/README.md"
edge 30 >"$CFG/edge.yaml.tmp" && mv "$CFG/edge.yaml.tmp" "$CFG/edge.yaml"
check edit-applied poll 10 limit_is edge.remote_address 30
check skipped-named wait_log s "rules: $CFG: 1 entries not read (only \*.yaml and \*.yml files are): README.md$"
kill -HUP "$(cat "$TMP/s.pid")"
check hup-still wait_log s "SIGHUP: rules file $CFG"
stop_bg s TERM

# 5. one rules file beside the config store's database and other files: their changes are no
#    reason to import the file again, over a rule changed through the API since; the file's own
#    change is
ONE=$TMP/one
mkdir -p "$ONE"
printf 'rules:\n  - name: a\n    algorithm: gcra\n    limit: 5\n    window: 1s\n  - name: b\n    algorithm: gcra\n    limit: 5\n    window: 1s\n' >"$ONE/rules.yaml"
start_sluiced o --rules "$ONE/rules.yaml" --rules-watch 100ms --config-store "$ONE/store.db" \
    --snapshot "" || { cat "$TMP/o.log"; exit 1; }
check one-loaded limit_is b 5
check one-api-change test "$(cli SL.RULE SET b '{"algorithm":"gcra","limit":9,"window":"1s"}')" = OK
echo notes >"$ONE/notes.txt"
: >"$ONE/.rules.yaml.swp"
sqlite3 "$ONE/store.db" 'PRAGMA user_version' >/dev/null 2>&1 || true
sleep 0.5 # past the debounce: a reload these caused would have been started
check one-api-kept limit_is b 9
check one-no-reload test "$(grep -c 'rules changed: ' "$TMP/o.log")" -eq 0
sed -i 's/limit: 5/limit: 6/' "$ONE/rules.yaml"
check one-file-change-applied poll 10 limit_is a 6
stop_bg o TERM

# 6. envoyproxy/ratelimit's runtime directory, through its variables: RUNTIME_ROOT is a link
#    swapped to a new version's directory
RT=$TMP/rt
domain() { # domain NAME KEY LIMIT: an envoyproxy/ratelimit file
    printf 'domain: %s\ndescriptors:\n  - key: %s\n    rate_limit: {unit: second, requests_per_unit: %s}\n' "$1" "$2" "$3"
}
version() { # version DIR EDGE-LIMIT: a version's tree, every kind of file upstream's loader reads
    local c=$RT/$1/ratelimit/config
    mkdir -p "$c/sub"
    edge "$2" >"$c/edge.yaml"
    domain api user 7 >"$c/api.conf"       # any name
    domain deep k 3 >"$c/sub/deep.txt"     # a subdirectory
    domain dot k 4 >"$c/.dot.yaml"         # a dot-file: read unless RUNTIME_IGNOREDOTFILES=true
    mkfifo "$c/pipe"                       # not a file: left out, never opened
    domain other k 1 >"$RT/$1/ratelimit/elsewhere.yaml" # beside the app directory: not read
}
launch_rt() { # NAME VAR=VALUE..: sluiced with upstream's variables only for its rules
    local name=$1
    shift
    RESP_PORT=${SERVE_PORTS[0]} HTTP_PORT=${SERVE_PORTS[1]}
    start_bg "$name" env HOST=127.0.0.1 RUNTIME_ROOT="$RT/current" RUNTIME_SUBDIRECTORY=ratelimit \
        RUNTIME_APPDIRECTORY=config "$@" "$SLUICED" --port "$RESP_PORT" --http-port "$HTTP_PORT" \
        --grpc-port 0 --rules-watch 100ms --config-store "$TMP/$name.db" --snapshot ""
}
version v1 10
ln -s v1 "$RT/current"
serve rt 2 launch_rt RUNTIME_WATCH_ROOT=true || { cat "$TMP/rt.log"; exit 1; }
check rt-loaded limit_is edge.remote_address 10
check rt-any-name limit_is api.user 7
check rt-subdirectory limit_is deep.k 3
check rt-dotfile limit_is dot.k 4
check rt-beside-not-read gone other.k
check rt-fifo-named grep -q "rules: $RT/current/ratelimit/config: 1 entries not read (only files are): pipe (not a regular file)" "$TMP/rt.log"
version v2 20
ln -s v2 "$RT/current.tmp" && mv -T "$RT/current.tmp" "$RT/current" # the atomic swap
rm -rf "${RT:?}/v1"
check rt-swap-applied poll 10 limit_is edge.remote_address 20
version v3 30
ln -sfn v3 "$RT/current" # the swap as ln does it (unlink, symlink)
check rt-ln-sfn-applied poll 10 limit_is edge.remote_address 30
check rt-no-signal test "$(grep -c 'SIGHUP' "$TMP/rt.log")" -eq 0
#    bounds: more than 1000 files moved in at once: refused by name, the rules in force stay
#    (here, as a second failure within a second of another may be logged later, in one line)
mkdir "$TMP/many" && (cd "$TMP/many" && touch f{1..1001}.yaml)
mv "$TMP/many" "$RT/v3/ratelimit/config/many"
check rt-too-many wait_log rt "rules not reloaded (the rules in force stay): $RT/current/ratelimit/config: more than 1000 files in it"
check rt-too-many-stays limit_is edge.remote_address 30
rm -rf "${RT:?}/v3/ratelimit/config/many"
stop_bg rt TERM

#    RUNTIME_WATCH_ROOT=false: a change in the directory applies (so does a swap: sluiced
#    watches both); RUNTIME_IGNOREDOTFILES=true leaves dot-files out
serve rtf 2 launch_rt RUNTIME_WATCH_ROOT=false RUNTIME_IGNOREDOTFILES=true ||
    { cat "$TMP/rtf.log"; exit 1; }
check rtf-loaded limit_is edge.remote_address 30
check rtf-no-dotfile gone dot.k
C3=$RT/v3/ratelimit/config
edge 40 >"$C3/edge.new" && mv "$C3/edge.new" "$C3/edge.yaml"
check rtf-edit-applied poll 10 limit_is edge.remote_address 40
version v4 50
ln -sfn v4 "$RT/current"
check rtf-swap-applied poll 10 limit_is edge.remote_address 50
#    bounds: a tree deeper than 16 directories moved in at once: refused by name, the rules in
#    force stay
C4=$RT/v4/ratelimit/config
mkdir -p "$TMP/deep/$(printf 'd/%.0s' $(seq 17))"
mv "$TMP/deep" "$C4/deep"
check rtf-too-deep wait_log rtf "rules not reloaded (the rules in force stay): $RT/current/ratelimit/config: deep/d/.* is more than 16 directories deep"
check rtf-deep-stays limit_is edge.remote_address 50
stop_bg rtf TERM
finish
