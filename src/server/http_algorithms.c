/*
 * http_algorithms.c - GET /v1/algorithms: the table of algorithms (core/algorithms.h) as JSON,
 * for the console's forms and anyone else who would otherwise type the algorithms out:
 *
 *   {"algorithms":[{"name":"fixed_window","value":1,"summary":"...",
 *     "limit":{"min":1,"max":null},"burst":null,"buckets":null,"max_delay":null,
 *     "capacity":"limit","capabilities":["refundable","leasable","approximate","aligned"],
 *     "modes":["strict","leased","approximate"],"suggested":false}, ...]}
 *
 * In sl_algorithm_t order (`value`). A parameter the algorithm does not take is null; one it
 * takes has its min and max (null: no bound of its own), and its default when it has one: a
 * number, or "limit" (the rule's limit). max_delay's bounds are in milliseconds (min_ms,
 * max_ms), as rules write it. `capacity` is what a fresh key admits at once: "limit", "burst"
 * or "burst + 1". Open, as the other reads: it says nothing about the rules in force.
 *
 * `adaptive` on an algorithm is null when its limit cannot adapt, else the bounds of min_limit
 * and max_limit; the top-level "adaptive" lists the adaptive algorithms (core/adaptive.h's
 * table) with the rule fields each reads besides min_limit and max_limit:
 *
 *   "adaptive":[{"name":"aimd","summary":"...","options":["backoff","latency_timeout"]}, ...]
 */
#include <inttypes.h>
#include <stdio.h>

#include "core/adaptive.h"
#include "core/algorithms.h"
#include "server/json_write.h"
#include "server/route.h"

/* A bound: the number, or null when there is none of its own (INT64_MAX). */
static void bound(buf_t *b, int64_t v, int64_t unit)
{
    if (v == INT64_MAX)
        buf_add_str(b, "null");
    else
        buf_printf(b, "%" PRId64, v / unit);
}

/* "name":{"min":..,"max":..[,"default":..][,"divides_window":true]}, or "name":null. */
static void param(buf_t *b, const char *name, const core_param_t *p, int64_t unit)
{
    const char *suffix = unit == SL_NS_PER_MS ? "_ms" : "";
    buf_printf(b, ",\"%s\":", name);
    if (!p->taken) {
        buf_add_str(b, "null");
        return;
    }
    buf_printf(b, "{\"min%s\":", suffix);
    bound(b, p->min, unit);
    buf_printf(b, ",\"max%s\":", suffix);
    bound(b, p->max, unit);
    if (p->def == CORE_DEFAULT_LIMIT)
        buf_add_str(b, ",\"default\":\"limit\"");
    else if (p->def != CORE_DEFAULT_NONE)
        buf_printf(b, ",\"default%s\":%" PRId64, suffix, p->def / unit);
    if (p->divides_window)
        buf_add_str(b, ",\"divides_window\":true");
    buf_add_str(b, "}");
}

/* "capabilities":[..],"modes":[..] */
static void caps(buf_t *b, const core_algorithm_t *row)
{
    buf_add_str(b, ",\"capabilities\":[");
    const char *sep = "";
    for (unsigned i = 0; i < CORE_CAP_COUNT; i++) {
        if (row->caps & (1u << i)) {
            buf_printf(b, "%s\"%s\"", sep, core_cap_names[i]);
            sep = ",";
        }
    }
    buf_add_str(b, "],\"modes\":[\"strict\"");
    if (row->caps & CORE_CAP_LEASABLE)
        buf_add_str(b, ",\"leased\"");
    if (row->caps & CORE_CAP_APPROXIMATE)
        buf_add_str(b, ",\"approximate\"");
    buf_add_str(b, "]");
}

/* The rule fields of the adaptive options (ADAPTIVE_OPT_*), as rules write them. */
static const struct {
    uint32_t opt;
    const char *field;
} adaptive_fields[] = {
    {ADAPTIVE_OPT_BACKOFF, "backoff"},
    {ADAPTIVE_OPT_TIMEOUT, "latency_timeout"},
    {ADAPTIVE_OPT_PROBE, "probe"},
};

/* ,"adaptive":[{"name":..,"summary":..,"options":[..]}, ...] */
static void adaptive_list(buf_t *b)
{
    buf_add_str(b, ",\"adaptive\":[");
    const char *sep = "";
    for (uint64_t i = 0; i < ADAPTIVE_SLOTS; i++) {
        const adaptive_algorithm_t *row = adaptive_row(i);
        if (row == NULL)
            continue;
        buf_printf(b, "%s{\"name\":", sep);
        json_write_text(b, row->name, strlen(row->name));
        buf_add_str(b, ",\"summary\":");
        json_write_text(b, row->summary, strlen(row->summary));
        buf_add_str(b, ",\"options\":[");
        const char *osep = "";
        for (size_t f = 0; f < sizeof adaptive_fields / sizeof adaptive_fields[0]; f++) {
            if (row->opts & adaptive_fields[f].opt) {
                buf_printf(b, "%s\"%s\"", osep, adaptive_fields[f].field);
                osep = ",";
            }
        }
        buf_add_str(b, "]}");
        sep = ",";
    }
    buf_add_str(b, "]");
}

static void algorithm(buf_t *b, const core_algorithm_t *row)
{
    buf_add_str(b, "{\"name\":");
    json_write_text(b, row->name, strlen(row->name));
    buf_printf(b, ",\"value\":%d,\"summary\":", (int)core_algorithm_id(row));
    json_write_text(b, row->summary, strlen(row->summary));
    buf_add_str(b, ",\"limit\":{\"min\":1,\"max\":");
    bound(b, row->limit_max, 1);
    buf_add_str(b, "}");
    param(b, "burst", &row->burst, 1);
    param(b, "buckets", &row->buckets, 1);
    param(b, "max_delay", &row->max_delay, SL_NS_PER_MS);
    if (!(row->caps & CORE_CAP_TOKENS))
        buf_add_str(b, ",\"capacity\":\"limit\"");
    else if (row->capacity_extra == 0)
        buf_add_str(b, ",\"capacity\":\"burst\"");
    else
        buf_printf(b, ",\"capacity\":\"burst + %" PRId64 "\"", row->capacity_extra);
    caps(b, row);
    if (core_algorithm_holds(row))
        buf_printf(b, ",\"adaptive\":{\"min_limit\":{\"min\":1},\"max_limit\":{\"max\":%d}}",
                   (int)SL_HOLDS_MAX);
    else
        buf_add_str(b, ",\"adaptive\":null");
    buf_printf(b, ",\"suggested\":%s}", row->suggested ? "true" : "false");
}

void route_algorithms(route_ctx_t *x)
{
    buf_t body = {0};
    buf_add_str(&body, "{\"algorithms\":[");
    CORE_ALGORITHM_EACH(row)
    {
        if (row != core_algorithm_next(NULL))
            buf_add_str(&body, ",");
        algorithm(&body, row);
    }
    buf_add_str(&body, "]");
    adaptive_list(&body);
    buf_add_str(&body, "}");
    if (body.failed) {
        problem(x, 503, "out of memory");
    } else {
        http_begin(&x->c->out, 200);
        http_end(&x->c->out, x->req->keep_alive, "application/json", body.data, body.len);
    }
    buf_free(&body);
}
