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
#include <time.h>

#include "engine/events.h"
#include "server/server.h"
#include "server/tls.h"
#include "store/store_stats.h"

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

/* The rules that hold units (in-flight limits): units in flight now (where the store can tell: the
 * memory store walks the rule's keys), holds dropped at their expiry, releases refused. */
typedef struct holds_ctx {
    buf_t *b;
    int which; /* 0 in flight, 1 expired, 2 releases refused, 3 the adaptive limit */
    int64_t now_ns;
} holds_ctx_t;

static void holds_row(void *arg, rule_state_t *rs)
{
    holds_ctx_t *x = arg;
    if (rs->inline_rule || !sl_rule_holds(&rs->def.rule)) {
        return;
    }
    rule_row_t row;
    rule_labels(&row, rs);
    engine_holds_t h;
    engine_rule_holds(rs, x->which == 0 ? x->now_ns : 0, &h);
    static const char *const names[] = {"sluice_in_flight", "sluice_holds_expired_total",
                                        "sluice_hold_releases_refused_total",
                                        "sluice_adaptive_limit"};
    long long v = x->which == 0   ? (long long)h.in_flight
                  : x->which == 1 ? (long long)h.expired
                  : x->which == 2 ? (long long)h.releases_refused
                                  : (long long)h.limit_now;
    bool adaptive = rs->def.rule.adaptive.algorithm != SL_ADAPTIVE_NONE;
    if (x->which == 3 && !adaptive) {
        return;
    }
    if (x->which == 3 && v == 0) {
        v = rs->def.rule.limit; /* nothing decided yet: where it starts */
    }
    if (x->which != 0 || v >= 0) {
        buf_printf(x->b, "%s{%s} %lld\n", names[x->which], row.labels, v);
    }
}

static void render_holds(server_t *srv, buf_t *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    holds_ctx_t x = {.b = b, .now_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec};
    help(b, "sluice_in_flight", "gauge",
         "Units held now by an in-flight rule's live holds (the memory store; a Redis store's "
         "holds are in Redis).");
    engine_foreach_rule(srv->engine, holds_row, &x);
    x.which = 1;
    help(b, "sluice_holds_expired_total", "counter",
         "Holds of an in-flight rule dropped at their expiry, never released (a holder that "
         "crashed or forgot), as this server's requests found them.");
    engine_foreach_rule(srv->engine, holds_row, &x);
    x.which = 2;
    help(b, "sluice_hold_releases_refused_total", "counter",
         "Releases refused: the key held no live hold of that id (expired, released before, or "
         "never made).");
    engine_foreach_rule(srv->engine, holds_row, &x);
    x.which = 3;
    help(b, "sluice_adaptive_limit", "gauge",
         "An adaptive in-flight rule's limit now: the limit of its latest acquire or release, "
         "as the key it decided held it (the rule's starting limit before any).");
    engine_foreach_rule(srv->engine, holds_row, &x);
}

/* The request store's statistics, as it declares them (store_stats.h), summed over the loops. */
static void render_store(server_t *srv, buf_t *b)
{
    store_stats_t total = {0};
    for (unsigned i = 0; i < srv->nloops; i++) {
        store_stats_t st;
        engine_worker_stats(engine_worker(srv->engine, i), &st);
        store_stats_add(&total, &st);
    }
    store_stats_prometheus(&total, b);
}

/* ---- the server's statistics: /metrics and INFO from one table --------------------------- */

static uint64_t rules_walk(metrics_ctx_t *x, int which);

#define STAT_GET(name, expr)                                                                       \
    static uint64_t name(metrics_ctx_t *x)                                                         \
    {                                                                                              \
        server_t *srv = x->srv;                                                                    \
        (void)srv;                                                                                 \
        return (uint64_t)(expr);                                                                   \
    }
STAT_GET(get_connections, SERVER_STAT(srv, connections))
STAT_GET(get_commands, SERVER_STAT(srv, commands))
STAT_GET(get_http, SERVER_STAT(srv, http_requests))
STAT_GET(get_grpc, SERVER_STAT(srv, grpc_calls))
STAT_GET(get_rejected, SERVER_STAT(srv, rejected_clients))
STAT_GET(get_protocol_errors, SERVER_STAT(srv, protocol_errors))
STAT_GET(get_out_hard, SERVER_STAT(srv, output_hard_closed))
STAT_GET(get_out_soft, SERVER_STAT(srv, output_soft_closed))
STAT_GET(get_out_both, SERVER_STAT(srv, output_hard_closed) + SERVER_STAT(srv, output_soft_closed))
STAT_GET(get_evicted, SERVER_STAT(srv, evicted_clients))
STAT_GET(get_clients, atomic_load(&srv->clients))
STAT_GET(get_max_clients, srv->cfg->max_clients)
STAT_GET(get_input_bytes, atomic_load_explicit(&srv->input_bytes, memory_order_relaxed))
STAT_GET(get_streams, atomic_load(&srv->streams))
STAT_GET(get_replays, atomic_load(&srv->replays))
STAT_GET(get_held, SERVER_STAT(srv, held_replies))
STAT_GET(get_version, engine_version(srv->engine))
STAT_GET(get_rules, rules_walk(x, 0))
STAT_GET(get_inline_rules, rules_walk(x, 1))
STAT_GET(get_reloads, engine_reloads(srv->engine))
STAT_GET(get_keys, rules_walk(x, 2))
STAT_GET(get_table_bytes, rules_walk(x, 3))
STAT_GET(get_config_errors, engine_store_errors(srv->engine))
STAT_GET(get_config_up, engine_store_up(srv->engine) ? 1 : 0)
STAT_GET(get_config_writable, engine_store_writable(srv->engine) ? 1 : 0)
STAT_GET(get_loading, 0)
STAT_GET(get_snapshots, atomic_load(&srv->snapshots))
STAT_GET(get_snapshot_errors, atomic_load(&srv->snapshot_errors))
STAT_GET(get_last_snapshot, atomic_load(&srv->last_snapshot_ns) / SL_NS_PER_SEC)
#undef STAT_GET

/* One number of the server's: a Prometheus sample (metric NULL: INFO only), an INFO field
 * (info NULL: /metrics only), or both, read once by get. A family's rows are together, its help
 * on the first; within an INFO section the rows are in INFO's order. */
typedef struct server_stat {
    const char *metric;
    const char *help;
    const char *type; /* "counter", "gauge" */
    const char *labels;
    metrics_section_t section;
    const char *info;
    uint64_t (*get)(metrics_ctx_t *x);
} server_stat_t;

#define S_NONE        METRICS_NONE
#define S_CLIENTS     METRICS_CLIENTS
#define S_STATS       METRICS_STATS
#define S_RULES       METRICS_RULES
#define S_PERSISTENCE METRICS_PERSISTENCE
static const server_stat_t server_stats[] = {
    {"sluice_connections_total", "Connections accepted.", "counter", "", S_STATS,
     "total_connections_received", get_connections},
    {"sluice_requests_total", "Requests handled, by protocol.", "counter", "protocol=\"resp\"",
     S_STATS, "total_commands_processed", get_commands},
    {"sluice_requests_total", NULL, "counter", "protocol=\"http\"", S_STATS, "total_http_requests",
     get_http},
    {"sluice_requests_total", NULL, "counter", "protocol=\"grpc\"", S_NONE, NULL, get_grpc},
    {"sluice_rejected_connections_total", "Connections refused at max_clients.", "counter", "",
     S_STATS, "rejected_connections", get_rejected},
    {"sluice_protocol_errors_total", "Malformed requests (the connection was closed).", "counter",
     "", S_STATS, "protocol_errors", get_protocol_errors},
    {"sluice_output_buffer_disconnections_total",
     "Clients closed because too many of their replies were waiting, by limit "
     "(--output-buffer-hard, --output-buffer-soft).",
     "counter", "limit=\"hard\"", S_NONE, NULL, get_out_hard},
    {"sluice_output_buffer_disconnections_total", NULL, "counter", "limit=\"soft\"", S_NONE, NULL,
     get_out_soft},
    {NULL, NULL, NULL, "", S_STATS, "client_output_buffer_limit_disconnections", get_out_both},
    {"sluice_evicted_clients_total",
     "Clients closed because all clients' input buffers were over --max-input-buffers.", "counter",
     "", S_STATS, "evicted_clients", get_evicted},
    {"sluice_clients", "Open connections.", "gauge", "", S_CLIENTS, "connected_clients",
     get_clients},
    {NULL, NULL, NULL, "", S_CLIENTS, "maxclients", get_max_clients},
    {"sluice_input_buffers_bytes",
     "Memory of all clients' input buffers (requests not yet complete), bytes.", "gauge", "",
     S_CLIENTS, "clients_input_buffers_bytes", get_input_bytes},
    {"sluice_stats_streams", "Open GET /v1/stats/stream connections.", "gauge", "", S_NONE, NULL,
     get_streams},
    {"sluice_replays_running", "POST /v1/replay replays running now.", "gauge", "", S_NONE, NULL,
     get_replays},
    {"sluice_held_replies",
     "Replies held back now: /v1/auth answers admitted with a delay, refused AUTHs and admin "
     "tokens from addresses that keep failing.",
     "gauge", "", S_NONE, NULL, get_held},
    {"sluice_rules_version", "Config store version of the rule set in force.", "gauge", "", S_RULES,
     "rules_version", get_version},
    {NULL, NULL, NULL, "", S_RULES, "rules", get_rules},
    {NULL, NULL, NULL, "", S_RULES, "inline_rules", get_inline_rules},
    {"sluice_rules_reloads_total", "Rule sets published.", "counter", "", S_RULES, "reloads",
     get_reloads},
    {NULL, NULL, NULL, "", S_RULES, "keys", get_keys},
    {NULL, NULL, NULL, "", S_RULES, "table_bytes", get_table_bytes},
    {"sluice_config_store_errors_total", "Config store failures (polls, reloads, imports).",
     "counter", "", S_NONE, NULL, get_config_errors},
    {"sluice_config_store_up",
     "1 while the config store can be reached, 0 while it cannot (the rules in force stay).",
     "gauge", "", S_NONE, NULL, get_config_up},
    {"sluice_config_store_writable",
     "1 while rule and override changes can be written to the config store, 0 while they "
     "cannot (unreachable; a read-only or immutable file; writes failing).",
     "gauge", "", S_NONE, NULL, get_config_writable},
    {NULL, NULL, NULL, "", S_PERSISTENCE, "loading", get_loading},
    {"sluice_snapshots_total", "Snapshots written.", "counter", "", S_PERSISTENCE, "snapshots",
     get_snapshots},
    {"sluice_snapshot_errors_total", "Snapshots that failed.", "counter", "", S_PERSISTENCE,
     "snapshot_errors", get_snapshot_errors},
    {NULL, NULL, NULL, "", S_PERSISTENCE, "last_snapshot_time", get_last_snapshot},
};
#define NSERVER_STATS (sizeof server_stats / sizeof server_stats[0])

static void rules_count(void *arg, rule_state_t *rs)
{
    metrics_ctx_t *x = arg;
    sl_table_stats_t st;
    engine_rule_stats(rs, &st);
    x->keys += st.keys;
    x->bytes += st.bytes;
    *(rs->inline_rule ? &x->inline_rules : &x->rules) += 1;
}

/* The rules' totals (which: rules, inline rules, keys, bytes), counted at the first ask. */
static uint64_t rules_walk(metrics_ctx_t *x, int which)
{
    if (!x->counted) {
        engine_foreach_rule(x->srv->engine, rules_count, x);
        x->counted = true;
    }
    const size_t v[] = {x->rules, x->inline_rules, x->keys, x->bytes};
    return v[which];
}

size_t metrics_rule_keys(metrics_ctx_t *x)
{
    return (size_t)rules_walk(x, 2);
}

void metrics_info(metrics_ctx_t *x, metrics_section_t section, buf_t *b)
{
    for (size_t i = 0; i < NSERVER_STATS; i++) {
        const server_stat_t *r = &server_stats[i];
        if (r->info != NULL && r->section == section) {
            buf_printf(b, "%s:%lld\r\n", r->info, (long long)r->get(x));
        }
    }
}

/* Every row of the table with a metric. */
static void render_server(server_t *srv, buf_t *b)
{
    metrics_ctx_t x = {.srv = srv};
    for (size_t i = 0; i < NSERVER_STATS; i++) {
        const server_stat_t *r = &server_stats[i];
        if (r->metric == NULL) {
            continue;
        }
        if (r->help != NULL) {
            help(b, r->metric, r->type, r->help);
        }
        const char *open = r->labels[0] != '\0' ? "{" : "";
        const char *close = r->labels[0] != '\0' ? "}" : "";
        buf_printf(b, "%s%s%s%s %lld\n", r->metric, open, r->labels, close, (long long)r->get(&x));
    }
}

static void render_latency(server_t *srv, buf_t *b)
{
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
}

static void render_memory(server_t *srv, buf_t *b)
{
    size_t memory_used, memory_max;
    engine_memory(srv->engine, &memory_used, &memory_max);
    help(b, "sluice_memory_bytes", "gauge",
         "Memory of every rule's keys counted against --max-memory (the memory store), bytes.");
    buf_printf(b, "sluice_memory_bytes %zu\n", memory_used);
    help(b, "sluice_memory_max_bytes", "gauge", "--max-memory, bytes; 0 when there is no cap.");
    buf_printf(b, "sluice_memory_max_bytes %zu\n", memory_max);
}

void metrics_render(server_t *srv, buf_t *b)
{
    render_rules(srv, b);
    render_holds(srv, b);
    render_latency(srv, b);
    render_server(srv, b);
    render_store(srv, b);
    render_memory(srv, b);
    if (srv->tls != NULL) {
        help(b, "sluice_tls_certificate_expiry_timestamp_seconds", "gauge",
             "When the TLS certificate new connections get stops being valid, unix seconds.");
        buf_printf(b, "sluice_tls_certificate_expiry_timestamp_seconds %lld\n",
                   (long long)tls_ctx_not_after(srv->tls));
    }
    events_render(b);
}
