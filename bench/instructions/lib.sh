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
#                                 (self costs, callbacks into sluiced left out), and when the
#                                 library has its symbols (not Debian's stripped one: run with
#                                 LD_LIBRARY_PATH pointing at a build of the same version with
#                                 them), split by its functions into HPACK decoding and encoding,
#                                 receiving frames, submitting and sending them, and the streams
#                                 (the stream map, opening and closing); call after layers, whose
#                                 callgrind_annotate output it reads for the pool's share

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
    local n=$1 DUMP pool
    DUMP=$(last_dump)
    # nghttp2's allocations run sluiced's code (grpc_front.c's mem_* hand them to the loop's pool)
    pool=$(inclusive "$TMP/annotate.txt" mem_malloc,mem_calloc,mem_realloc,mem_free)
    awk -v n="$n" -v pool="$pool" '
        # names are compressed: an object or a function is named once per dump, where it first
        # shows (on an ob=/fn= line, or on the cob=/cfn= line of a call into it); later lines
        # carry its number only
        function named(kind, v,    id, name) {
            id = v; sub(/ .*$/, "", id); name = v; sub(/^\([0-9]+\) ?/, "", name)
            if (name != "") names[kind, id] = name
            return ((kind, id) in names) ? names[kind, id] : name
        }
        # the part of nghttp2 a function of its belongs to
        function part(f) {
            if (f ~ /^0x/) return "unnamed"
            if (f ~ /^(nghttp2_hd_inflate|decode_length|nghttp2_hd_table_get|nghttp2_hd_huff_decode|nghttp2_rcbuf|hd_inflate)/) return "hpack_dec"
            if (f ~ /^(nghttp2_hd_deflate|lookup_token|nghttp2_hd_huff_encode|hd_deflate|search_hd_table|hd_map|emit_|pack_first_byte|deflate_nv|encode_length)/) return "hpack_enc"
            if (f ~ /^(hd_|nghttp2_hd_)/) return "hpack_dec"
            if (f ~ /^(nghttp2_map|insert$|nghttp2_session_(open|close|destroy)_stream|nghttp2_stream_|nghttp2_session_adjust_(idle|closed)_stream|nghttp2_session_[gs]et_stream|session_detect_idle_stream|nghttp2_pq_|bubble_|session_ob_data|nghttp2_session_get_stream)/) return "streams"
            if (f ~ /^(nghttp2_session_mem_recv|session_inbound|nghttp2_frame_unpack|nghttp2_session_on_|session_on_|session_process_|nghttp2_session_update_recv|nghttp2_frame_trail_padlen|nghttp2_frame_priority_len|nghttp2_cpymem|nghttp2_buf_reset|nghttp2_session_want_read|nghttp2_is_fatal|nghttp2_get_uint|session_call_on|nghttp2_session_consume)/) return "recv"
            return "send"
        }
        /^ob=/ { cur = named("ob", substr($0, 4)); next }
        /^cob=/ { named("ob", substr($0, 5)); next }
        /^fn=/ { fn = named("fn", substr($0, 4)); where = (cur ~ /libnghttp2/) ? part(fn) : ""; next }
        /^cfn=/ { named("fn", substr($0, 5)); next }
        /^calls=/ { skip = 1; next }
        /^[0-9+*-]/ {
            if (skip) { skip = 0; next }
            if (where != "") { own += $2; p[where] += $2 }
            else other += $2
        }
        END {
            printf "      %-14s %6d   (%.0f %% of the call)\n", "libnghttp2", own / n, 100 * own / (own + other)
            if (p["unnamed"] < own / 2)
                printf "        HPACK decode %d, HPACK encode %d, receiving frames %d, submitting and sending frames %d, streams (map, open, close) %d; its allocations in sluiced'"'"'s pool %d more\n", \
                    p["hpack_dec"] / n, p["hpack_enc"] / n, p["recv"] / n, p["send"] / n, p["streams"] / n, pool / n
            else
                printf "        (libnghttp2 has no symbols for its own functions: see docs/dev/benchmarks.md for a build with them)\n"
        }' "$DUMP"
}
