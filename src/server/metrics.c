/*
 * metrics.c - GET /metrics: Prometheus text exposition format 0.0.4.
 *
 * Counters are per loop (or per loop and rule), written with relaxed atomics by their own loop
 * and summed here; a scrape never stops a loop.
 */
#include "server/metrics.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/events.h"
#include "server/server.h"
#include "server/tls.h"

static void help(buf_t *b, const char *name, const char *type, const char *text)
{
    buf_printf(b, "# HELP %s %s\n", name, text);
    buf_printf(b, "# TYPE %s %s\n", name, type);
}

/* One series' numbers: a rule's, or the inline rules without series of their own together. */
typedef struct rule_row {
    /* the series' labels, copied (the rule may be gone once the walk is over): rule="name",
     * then domain="..." for a rule that answers Envoy's rate limit service */
    char labels[sizeof "rule=\"\",domain=\"\"" + RULE_NAME_MAX + 2 * DESC_NAME_MAX];
    uint64_t allowed, denied, shadow, errors, evicted;
    size_t keys, bytes;
} rule_row_t;

typedef struct rules_ctx {
    rule_row_t *rows; /* the rules with series of their own, then "inline:other" */
    size_t n, cap;
    rule_row_t other;
} rules_ctx_t;

/* Writes a label value: text with \\, " and newline escaped as the exposition format asks. */
static size_t label_value(char *out, size_t cap, const char *text)
{
    size_t n = 0;
    for (; *text != '\0' && n + 2 < cap; text++) {
        char c = *text;
        if (c == '\\' || c == '"' || c == '\n') {
            out[n++] = '\\';
            c = c == '\n' ? 'n' : c;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    return n;
}

static void rule_labels(rule_row_t *row, const rule_state_t *rs)
{
    int n = snprintf(row->labels, sizeof row->labels, "rule=\"%s\"", rs->def.name);
    const rule_descriptor_t *d = rs->def.desc;
    if (d != NULL && d->domain != NULL && n > 0 && (size_t)n + 12 < sizeof row->labels) {
        memcpy(row->labels + n, ",domain=\"", 9);
        n += 9;
        n += (int)label_value(row->labels + n, sizeof row->labels - (size_t)n - 1, d->domain);
        memcpy(row->labels + n, "\"", 2);
    }
}

static void collect_rule(void *arg, rule_state_t *rs)
{
    rules_ctx_t *x = arg;
    if (rs->inline_rule && !rs->own_series) {
        return; /* in "inline:other", summed by the engine */
    }
    rule_row_t row = {.allowed = 0};
    rule_labels(&row, rs);
    engine_counters_sum(rs, &row.allowed, &row.denied, &row.shadow, &row.errors);
    sl_table_stats_t st;
    engine_rule_stats(rs, &st);
    row.keys = st.keys;
    row.bytes = st.bytes;
    row.evicted = st.evicted;
    if (x->n == x->cap) {
        size_t cap = x->cap > 0 ? 2 * x->cap : 64;
        rule_row_t *grown = realloc(x->rows, cap * sizeof *grown);
        if (grown == NULL) {
            return; /* out of memory: the rules that fitted */
        }
        x->rows = grown;
        x->cap = cap;
    }
    x->rows[x->n++] = row;
}

/*
 * The per-rule series. Every named rule has its own; inline rules (one per SL.THROTTLE parameter
 * set, made by clients) have their own only up to --metrics-inline-rules at once, and the rest
 * share rule="inline:other", so no client can make /metrics grow without bound.
 */
static void render_rules(server_t *srv, buf_t *b)
{
    rules_ctx_t x = {.other = {.labels = "rule=\"inline:other\""}};
    engine_foreach_rule(srv->engine, collect_rule, &x);
    engine_inline_other_t o;
    engine_inline_other(srv->engine, &o);
    x.other.allowed = o.allowed;
    x.other.denied = o.denied;
    x.other.shadow = o.shadow_denied;
    x.other.errors = o.store_errors;
    x.other.keys = o.keys;
    x.other.bytes = o.bytes;
    static const struct {
        const char *name, *type, *help;
    } metrics[] = {
        {"sluice_decisions_total", "counter", "Decisions by rule and result."},
        {"sluice_shadow_rejections_total", "counter",
         "Requests a shadow-mode rule would have rejected (they were allowed)."},
        {"sluice_store_errors_total", "counter",
         "Decisions made by on_store_error (table full, override lookup failed)."},
        {"sluice_keys", "gauge", "Keys held in the rule's tables."},
        {"sluice_table_bytes", "gauge", "Memory of the rule's tables, bytes."},
        {"sluice_evicted_keys_total", "counter",
         "Idle keys evicted near --max-memory (their usage forgotten)."},
    };
    for (int m = 0; m < 6; m++) {
        help(b, metrics[m].name, metrics[m].type, metrics[m].help);
        for (size_t i = 0; i <= x.n; i++) {
            const rule_row_t *r = i < x.n ? &x.rows[i] : &x.other;
            switch (m) {
            case 0:
                buf_printf(b, "%s{%s,result=\"allowed\"} %llu\n", metrics[m].name, r->labels,
                           (unsigned long long)r->allowed);
                buf_printf(b, "%s{%s,result=\"denied\"} %llu\n", metrics[m].name, r->labels,
                           (unsigned long long)r->denied);
                break;
            case 1:
                buf_printf(b, "%s{%s} %llu\n", metrics[m].name, r->labels,
                           (unsigned long long)r->shadow);
                break;
            case 2:
                buf_printf(b, "%s{%s} %llu\n", metrics[m].name, r->labels,
                           (unsigned long long)r->errors);
                break;
            case 3:
                buf_printf(b, "%s{%s} %zu\n", metrics[m].name, r->labels, r->keys);
                break;
            case 4:
                buf_printf(b, "%s{%s} %zu\n", metrics[m].name, r->labels, r->bytes);
                break;
            default:
                buf_printf(b, "%s{%s} %llu\n", metrics[m].name, r->labels,
                           (unsigned long long)r->evicted);
                break;
            }
        }
    }
    free(x.rows);
}

/* Approximate rules: their syncs, and the decisions answered from a key's count. */
static void metrics_approx(buf_t *b, const engine_store_stats_t *t)
{
    help(b, "sluice_redis_approx_syncs_total", "counter",
         "Syncs of approximate rules' keys sent to Redis (one command each): sent, and failed "
         "(their units are sent again with the next).");
    buf_printf(b, "sluice_redis_approx_syncs_total{event=\"sent\"} %llu\n",
               (unsigned long long)t->approx_syncs);
    buf_printf(b, "sluice_redis_approx_syncs_total{event=\"failed\"} %llu\n",
               (unsigned long long)t->approx_failures);
    help(b, "sluice_redis_approx_units_total", "counter",
         "Units admitted here by approximate rules and charged to Redis by syncs.");
    buf_printf(b, "sluice_redis_approx_units_total %llu\n", (unsigned long long)t->approx_units);
    help(b, "sluice_redis_approx_local_total", "counter",
         "Decisions of approximate rules answered here from a key's count, without a command.");
    buf_printf(b, "sluice_redis_approx_local_total %llu\n", (unsigned long long)t->approx_local);
    help(b, "sluice_redis_approx_sync_lag_seconds", "summary",
         "Age of the count each local decision of an approximate rule was made from: the time "
         "since the request that brought it was sent.");
    buf_printf(b, "sluice_redis_approx_sync_lag_seconds_sum %.9f\n",
               (double)t->approx_lag_ns / 1e9);
    buf_printf(b, "sluice_redis_approx_sync_lag_seconds_count %llu\n",
               (unsigned long long)t->approx_local);
}

/* Leased rules' leases, and what they save: Redis commands per decision asked of the store. */
static void metrics_leases(buf_t *b, const engine_store_stats_t *t)
{
    help(b, "sluice_redis_leases_total", "counter",
         "Leases of leased rules: taken (granted units), returned (unused units given back), "
         "unreturned (unused units never given back: the node lost its data, a return failed, "
         "a reset, a stop).");
    buf_printf(b, "sluice_redis_leases_total{event=\"taken\"} %llu\n",
               (unsigned long long)t->leases_taken);
    buf_printf(b, "sluice_redis_leases_total{event=\"returned\"} %llu\n",
               (unsigned long long)t->leases_returned);
    buf_printf(b, "sluice_redis_leases_total{event=\"unreturned\"} %llu\n",
               (unsigned long long)t->leases_unreturned);
    help(b, "sluice_redis_lease_units_total", "counter",
         "Units of leases: granted by Redis, and spent here by decisions answered from them.");
    buf_printf(b, "sluice_redis_lease_units_total{use=\"granted\"} %llu\n",
               (unsigned long long)t->lease_units);
    buf_printf(b, "sluice_redis_lease_units_total{use=\"spent\"} %llu\n",
               (unsigned long long)t->lease_units_spent);
    help(b, "sluice_redis_lease_hits_total", "counter",
         "Decisions answered from a lease, without a Redis command.");
    buf_printf(b, "sluice_redis_lease_hits_total %llu\n", (unsigned long long)t->lease_hits);
    help(b, "sluice_redis_asked_total", "counter",
         "Decisions and settles asked of the Redis store, leased or not.");
    buf_printf(b, "sluice_redis_asked_total %llu\n", (unsigned long long)t->asked);
    help(b, "sluice_redis_commands_per_decision", "gauge",
         "Redis commands sent per decision or settle asked, since start.");
    buf_printf(b, "sluice_redis_commands_per_decision %.6f\n",
               t->asked > 0 ? (double)t->decisions / (double)t->asked : 0.0);
}

void metrics_render(server_t *srv, buf_t *b)
{
    render_rules(srv, b);

    help(b, "sluice_request_duration_seconds", "histogram",
         "Time from the read that completed a request to its reply being ready to write.");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < LATENCY_BUCKETS; i++) {
        cumulative += SERVER_STAT(srv, latency[i]);
        buf_printf(b, "sluice_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                   (double)loop_latency_bounds_ns[i] / 1e9, (unsigned long long)cumulative);
    }
    cumulative += SERVER_STAT(srv, latency[LATENCY_BUCKETS]);
    buf_printf(b, "sluice_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
               (unsigned long long)cumulative);
    buf_printf(b, "sluice_request_duration_seconds_sum %.9f\n",
               (double)SERVER_STAT(srv, latency_sum_ns) / 1e9);
    buf_printf(b, "sluice_request_duration_seconds_count %llu\n",
               (unsigned long long)SERVER_STAT(srv, latency_count));

    help(b, "sluice_requests_total", "counter", "Requests handled, by protocol.");
    buf_printf(b, "sluice_requests_total{protocol=\"resp\"} %llu\n",
               (unsigned long long)SERVER_STAT(srv, commands));
    buf_printf(b, "sluice_requests_total{protocol=\"http\"} %llu\n",
               (unsigned long long)SERVER_STAT(srv, http_requests));
    buf_printf(b, "sluice_requests_total{protocol=\"grpc\"} %llu\n",
               (unsigned long long)SERVER_STAT(srv, grpc_calls));
    help(b, "sluice_protocol_errors_total", "counter",
         "Malformed requests (the connection was closed).");
    buf_printf(b, "sluice_protocol_errors_total %llu\n",
               (unsigned long long)SERVER_STAT(srv, protocol_errors));
    help(b, "sluice_connections_total", "counter", "Connections accepted.");
    buf_printf(b, "sluice_connections_total %llu\n",
               (unsigned long long)SERVER_STAT(srv, connections));
    help(b, "sluice_rejected_connections_total", "counter", "Connections refused at max_clients.");
    buf_printf(b, "sluice_rejected_connections_total %llu\n",
               (unsigned long long)SERVER_STAT(srv, rejected_clients));
    help(b, "sluice_clients", "gauge", "Open connections.");
    buf_printf(b, "sluice_clients %zu\n", atomic_load(&srv->clients));
    help(b, "sluice_stats_streams", "gauge", "Open GET /v1/stats/stream connections.");
    buf_printf(b, "sluice_stats_streams %zu\n", atomic_load(&srv->streams));
    help(b, "sluice_replays_running", "gauge", "POST /v1/replay replays running now.");
    buf_printf(b, "sluice_replays_running %zu\n", atomic_load(&srv->replays));
    help(b, "sluice_output_buffer_disconnections_total", "counter",
         "Clients closed because too many of their replies were waiting, by limit "
         "(--output-buffer-hard, --output-buffer-soft).");
    buf_printf(b, "sluice_output_buffer_disconnections_total{limit=\"hard\"} %llu\n",
               (unsigned long long)SERVER_STAT(srv, output_hard_closed));
    buf_printf(b, "sluice_output_buffer_disconnections_total{limit=\"soft\"} %llu\n",
               (unsigned long long)SERVER_STAT(srv, output_soft_closed));
    help(b, "sluice_input_buffers_bytes", "gauge",
         "Memory of all clients' input buffers (requests not yet complete), bytes.");
    buf_printf(b, "sluice_input_buffers_bytes %zu\n",
               atomic_load_explicit(&srv->input_bytes, memory_order_relaxed));
    help(b, "sluice_evicted_clients_total", "counter",
         "Clients closed because all clients' input buffers were over --max-input-buffers.");
    buf_printf(b, "sluice_evicted_clients_total %llu\n",
               (unsigned long long)SERVER_STAT(srv, evicted_clients));
    help(b, "sluice_held_replies", "gauge",
         "Replies held back now: /v1/auth answers admitted with a delay, refused AUTHs and admin "
         "tokens from addresses that keep failing.");
    buf_printf(b, "sluice_held_replies %llu\n", (unsigned long long)SERVER_STAT(srv, held_replies));

    if (engine_is_remote(srv->engine)) {
        engine_store_stats_t total = {0};
        for (unsigned i = 0; i < srv->nloops; i++) {
            engine_store_stats_t st;
            engine_worker_stats(engine_worker(srv->engine, i), &st);
            total.decisions += st.decisions;
            total.cache_hits += st.cache_hits;
            total.timeouts += st.timeouts;
            total.errors += st.errors;
            total.noscript += st.noscript;
            total.redirects += st.redirects;
            total.refreshes += st.refreshes;
            total.reconnects += st.reconnects;
            total.leases_taken += st.leases_taken;
            total.leases_returned += st.leases_returned;
            total.leases_unreturned += st.leases_unreturned;
            total.lease_units += st.lease_units;
            total.lease_hits += st.lease_hits;
            total.lease_units_spent += st.lease_units_spent;
            total.asked += st.asked;
            total.approx_syncs += st.approx_syncs;
            total.approx_units += st.approx_units;
            total.approx_local += st.approx_local;
            total.approx_lag_ns += st.approx_lag_ns;
            total.approx_failures += st.approx_failures;
            total.nodes_down += st.nodes_down;
        }
        static const char *const names[][2] = {
            {"sluice_redis_decisions_total",
             "Commands sent to Redis: decisions, settles, leases and their returns."},
            {"sluice_redis_cache_hits_total",
             "Decisions answered from the over-limit cache, without a round trip."},
            {"sluice_redis_timeouts_total", "Decisions past their deadline (on_store_error)."},
            {"sluice_redis_errors_total", "Redis replies that were errors, or none."},
            {"sluice_redis_noscript_total", "EVALSHA answered NOSCRIPT (re-sent as EVAL)."},
            {"sluice_redis_redirects_total", "MOVED and ASK redirects followed."},
            {"sluice_redis_slot_refreshes_total", "Cluster slot map reloads."},
            {"sluice_redis_reconnects_total", "Connections to Redis made again."},
        };
        const uint64_t values[] = {total.decisions, total.cache_hits, total.timeouts,
                                   total.errors,    total.noscript,   total.redirects,
                                   total.refreshes, total.reconnects};
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            help(b, names[i][0], "counter", names[i][1]);
            buf_printf(b, "%s %llu\n", names[i][0], (unsigned long long)values[i]);
        }
        metrics_leases(b, &total);
        metrics_approx(b, &total);
        size_t module_nodes, lua_nodes;
        engine_store_modes(srv->engine, &module_nodes, &lua_nodes);
        help(b, "sluice_redis_up", "gauge",
             "1 while every connection to Redis is up, 0 while one is lost or cannot be made.");
        buf_printf(b, "sluice_redis_up %d\n", total.nodes_down == 0 ? 1 : 0);
        help(b, "sluice_redis_connections_down", "gauge",
             "Connections to Redis nodes (one per loop and node) lost or not made, not yet made "
             "again.");
        buf_printf(b, "sluice_redis_connections_down %llu\n", (unsigned long long)total.nodes_down);
        help(b, "sluice_redis_nodes", "gauge",
             "Redis nodes deciding with the sluice.so module or with the Lua scripts.");
        buf_printf(b, "sluice_redis_nodes{mode=\"module\"} %zu\n", module_nodes);
        buf_printf(b, "sluice_redis_nodes{mode=\"lua\"} %zu\n", lua_nodes);
    }

    size_t memory_used, memory_max;
    engine_memory(srv->engine, &memory_used, &memory_max);
    help(b, "sluice_memory_bytes", "gauge",
         "Memory of every rule's keys counted against --max-memory (the memory store), bytes.");
    buf_printf(b, "sluice_memory_bytes %zu\n", memory_used);
    help(b, "sluice_memory_max_bytes", "gauge", "--max-memory, bytes; 0 when there is no cap.");
    buf_printf(b, "sluice_memory_max_bytes %zu\n", memory_max);

    help(b, "sluice_rules_version", "gauge", "Config store version of the rule set in force.");
    buf_printf(b, "sluice_rules_version %lld\n", (long long)engine_version(srv->engine));
    help(b, "sluice_rules_reloads_total", "counter", "Rule sets published.");
    buf_printf(b, "sluice_rules_reloads_total %llu\n",
               (unsigned long long)engine_reloads(srv->engine));
    help(b, "sluice_config_store_errors_total", "counter",
         "Config store failures (polls, reloads, imports).");
    buf_printf(b, "sluice_config_store_errors_total %llu\n",
               (unsigned long long)engine_store_errors(srv->engine));
    help(b, "sluice_config_store_up", "gauge",
         "1 while the config store can be reached, 0 while it cannot (the rules in force stay).");
    buf_printf(b, "sluice_config_store_up %d\n", engine_store_up(srv->engine) ? 1 : 0);
    help(b, "sluice_config_store_writable", "gauge",
         "1 while rule and override changes can be written to the config store, 0 while they "
         "cannot (unreachable; a read-only or immutable file; writes failing).");
    buf_printf(b, "sluice_config_store_writable %d\n", engine_store_writable(srv->engine) ? 1 : 0);
    help(b, "sluice_snapshots_total", "counter", "Snapshots written.");
    buf_printf(b, "sluice_snapshots_total %llu\n",
               (unsigned long long)atomic_load(&srv->snapshots));
    help(b, "sluice_snapshot_errors_total", "counter", "Snapshots that failed.");
    buf_printf(b, "sluice_snapshot_errors_total %llu\n",
               (unsigned long long)atomic_load(&srv->snapshot_errors));
    if (srv->tls != NULL) {
        help(b, "sluice_tls_certificate_expiry_timestamp_seconds", "gauge",
             "When the TLS certificate new connections get stops being valid, unix seconds.");
        buf_printf(b, "sluice_tls_certificate_expiry_timestamp_seconds %lld\n",
                   (long long)tls_ctx_not_after(srv->tls));
    }
    events_render(b);
}
