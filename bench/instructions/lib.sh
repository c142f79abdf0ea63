# shellcheck shell=bash
# bench/instructions/lib.sh - shared by the scripts of bench/instructions/ (source it after
# bench/lib.sh and bench_init; every dump goes to $TMP/cg).
#
#   last_dump                     the newest callgrind dump in $TMP/cg
#   dump_total PID                dumps (and zeroes) PID's counters; prints the dump's total
#                                 (with KEEP_DUMPS=DIR set, each dump is also copied into DIR,
#                                 which outlives $TMP, for callgrind_annotate afterwards)
#   layers N ENGINE CORE REPLY    splits the last dump's instructions per request (N requests) by layer, from
#                                 callgrind_annotate --inclusive=yes: each argument is a
#                                 comma-separated list of the layer's entry functions, whose
#                                 inclusive costs are summed. core is inside engine, so engine is
#                                 printed without it; read+parse is the rest of the total (the
#                                 read, the parse, the loop's own work), so the four add up.
#   nghttp2_split N               the last dump's instructions per request in libnghttp2's own code
#                                 (self cost by object file, callbacks into sluiced left out)
#                                 session, the stream map, its buffers)

last_dump() { find "$TMP/cg" -name 'cg.out*' -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2; }

dump_total() {
    local before i DUMP
    before=$(last_dump)
    callgrind_control -d "$1" >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do
        DUMP=$(last_dump)
        [ "$DUMP" != "$before" ] && [ -s "$DUMP" ] && break
        sleep 0.1
    done
    if [ -n "${KEEP_DUMPS:-}" ]; then
        mkdir -p "$KEEP_DUMPS"
        cp "$DUMP" "$KEEP_DUMPS/$(date +%H%M%S)-$1-$(basename "$DUMP")"
    fi
    awk '/^(summary|totals):/ { print $2; exit }' "$DUMP"
}

# inclusive FILE FUNCS: the summed inclusive cost of the comma-separated functions FUNCS
inclusive() {
    awk -v funcs="$2" '
        BEGIN { n = split(funcs, f, ","); for (i = 1; i <= n; i++) want[f[i]] = 1 }
        $1 ~ /^[0-9,]+$/ {
            name = $0; sub(/^.*:/, "", name); sub(/ .*$/, "", name); sub(/'"'"'.*$/, "", name)
            if (name in want && !(name in seen)) { seen[name] = 1; c = $1; gsub(/,/, "", c); sum += c }
        }
        END { print sum + 0 }' "$1"
}

layers() {
    local n=$1 ann total engine core reply DUMP
    DUMP=$(last_dump)
    ann="$TMP/annotate.txt"
    callgrind_annotate --inclusive=yes --threshold=100 "$DUMP" >"$ann" 2>/dev/null
    total=$(awk '/^(summary|totals):/ { print $2; exit }' "$DUMP")
    engine=$(inclusive "$ann" "$2")
    core=$(inclusive "$ann" "$3")
    reply=$(inclusive "$ann" "$4")
    printf '      %-14s %6d   %-14s %6d   %-8s %6d   %-14s %6d\n' \
        "read+parse" $(((total - engine - reply) / n)) "engine" $(((engine - core) / n)) \
        "core" $((core / n)) "reply+write" $((reply / n))
}

nghttp2_split() {
    local n=$1 DUMP
    DUMP=$(last_dump)
    awk -v n="$n" '
        /^ob=/ {
            id = $0; sub(/^ob=/, "", id); name = id; sub(/^\([0-9]+\) ?/, "", name); sub(/ .*$/, "", id)
            if (name != "") obname[id] = name
            cur = (id in obname) ? obname[id] : name
            next
        }
        /^calls=/ { skip = 1; next }
        /^[0-9+*-]/ {
            if (skip) { skip = 0; next }
            if (cur ~ /libnghttp2/) own += $2
            else other += $2
        }
        END { printf "      %-14s %6d   (%.0f %% of the call)\n", "libnghttp2", own / n, 100 * own / (own + other) }' "$DUMP"
}
