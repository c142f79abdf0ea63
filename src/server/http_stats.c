/*
 * http_stats.c - what the console reads over HTTP (no admin token: reads, like /metrics):
 *
 *   GET /v1/rules/{name}/top[?n=10][&by=decisions|denied]
 *        the rule's heaviest keys of the last minute:
 *        {"rule":..,"by":..,"window_s":60,"total":N,"keys":[{"key":..,"count":N,"error":N}]}
 *   GET /v1/rules/{name}/holders[?n=10]
 *        an in-flight rule's units held now and the keys holding most (a walk of its keys, as
 *        /metrics makes; a Redis store's holds are in Redis: in_flight null, no keys):
 *        {"rule":..,"limit":N,"in_flight":N|null,"keys":[{"key":..,"units":N}]}
 *   GET /v1/stats[?seconds=N]
 *        every named rule's decisions per second, the last N (1..900, default 900) complete
 *        seconds, oldest first:
 *        {"interval_ms":1000,"end_ms":..,"seconds":N,"rules":[{"name":..,"algorithm":..,
 *         "limit":..,"window_ms":..,"shadow":..,"allowed":[..],"denied":[..],
 *         "shadow_denied":[..]}]}
 *   GET /v1/stats/stream
 *        the same as Server-Sent Events, one `stats` event per second with the second that
 *        just ended: {"end_ms":..,"rules":[{"name":..,"allowed":N,"denied":N,
 *        "shadow_denied":N}]}
 *
 * A stream is a connection of the loop that accepted it: each loop that has any keeps a timer,
 * set for just after each second ends, that writes the event to its streams. At most
 * STREAMS_MAX streams per server (503 past it). A stream whose client does not read is closed
 * when, at an event, more than STREAM_OUT_MAX bytes (or --output-buffer-hard, if less) of the
 * events before still wait for it; one whose client reads is never idle. When
 * the server stops, every connection closes, streams too; the loop's timer goes once it has no
 * stream left.
 */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http.h"
#include "server/conn.h"
#include "server/json_write.h"
#include "server/route.h"
#include "server/server.h"

#define TOP_DEFAULT    10
#define STREAMS_MAX    64           /* stats streams per server */
#define STREAM_OUT_MAX (256 * 1024) /* bytes waiting for a stream's client before it is closed */
#define STREAM_LAG_MS  50           /* an event is written this long after its second ends */

static void reply_json(route_ctx_t *x, buf_t *body)
{
    if (body->failed) {
        problem(x, 503, "out of memory");
    } else {
        http_begin(&x->c->out, 200);
        http_header(&x->c->out, "Cache-Control", "no-store");
        http_end(&x->c->out, x->req->keep_alive, "application/json", body->data, body->len);
    }
    buf_free(body);
}

/* ---- GET /v1/rules/{name}/top -------------------------------------------------------------- */

/* One key of a top: {"key":..,"count":N,"error":N}, with "key_hex" (the exact bytes) when the
 * key is not UTF-8 and "truncated":true when only its first bytes were kept. */
static void top_item(buf_t *b, const topk_item_t *it)
{
    size_t len = it->key_len < TOPK_KEY_INLINE ? it->key_len : TOPK_KEY_INLINE;
    buf_add_str(b, "{");
    json_write_key(b, it->key, len);
    if (it->key_len > TOPK_KEY_INLINE) {
        buf_add_str(b, ",\"truncated\":true");
    }
    buf_add_str(b, ",\"count\":");
    json_write_u64(b, it->count);
    buf_add_str(b, ",\"error\":");
    json_write_u64(b, it->error);
    buf_add_str(b, "}");
}

/* ?n= and ?by=: false when it replied a 400. */
static bool top_query(route_ctx_t *x, long *n, bool *denied)
{
    char v[24];
    size_t len;
    if (http_query_get(x->req, "n", v, sizeof v, &len)) {
        char *end = NULL;
        *n = strtol(v, &end, 10);
        if (len == 0 || *end != '\0' || *n < 1 || *n > WATCH_TOP_MAX) {
            problem(x, 400, "n: must be an integer from 1 to %d", WATCH_TOP_MAX);
            return false;
        }
    }
    if (http_query_get(x->req, "by", v, sizeof v, &len)) {
        if (strcmp(v, "decisions") != 0 && strcmp(v, "denied") != 0) {
            problem(x, 400, "by: must be decisions or denied");
            return false;
        }
        *denied = strcmp(v, "denied") == 0;
    }
    return true;
}

void route_top(route_ctx_t *x)
{
    long n = TOP_DEFAULT;
    bool denied = false;
    if (!top_query(x, &n, &denied)) {
        return;
    }
    rule_state_t *rs = engine_find(x->c->loop->worker, x->seg[2].ptr, x->seg[2].len);
    if (rs == NULL) {
        problem(x, 404, "unknown rule '%.64s'", x->seg[2].ptr);
        return;
    }
    topk_item_t items[WATCH_TOP_MAX];
    uint64_t total;
    long got = engine_top(rs, denied, x->c->loop->now_ns, (size_t)n, items, &total);
    if (got < 0) {
        problem(x, 503, "out of memory");
        return;
    }
    buf_t body = {0};
    buf_add_str(&body, "{\"rule\":");
    json_write_text(&body, rs->def.name, strlen(rs->def.name));
    buf_add_str(&body, denied ? ",\"by\":\"denied\"" : ",\"by\":\"decisions\"");
    buf_add_str(&body, ",\"window_s\":");
    json_write_u64(&body, WATCH_WINDOW_S);
    buf_add_str(&body, ",\"total\":");
    json_write_u64(&body, total);
    buf_add_str(&body, ",\"keys\":[");
    for (long i = 0; i < got; i++) {
        if (i > 0) {
            buf_add_str(&body, ",");
        }
        top_item(&body, &items[i]);
    }
    buf_add_str(&body, "]}");
    reply_json(x, &body);
}

/* ---- GET /v1/rules/{name}/holders ---------------------------------------------------------- */

void route_holders(route_ctx_t *x)
{
    char v[24];
    size_t len;
    long n = TOP_DEFAULT;
    if (http_query_get(x->req, "n", v, sizeof v, &len)) {
        char *end = NULL;
        n = strtol(v, &end, 10);
        if (len == 0 || *end != '\0' || n < 1 || n > WATCH_TOP_MAX) {
            problem(x, 400, "n: must be an integer from 1 to %d", WATCH_TOP_MAX);
            return;
        }
    }
    rule_state_t *rs = engine_find(x->c->loop->worker, x->seg[2].ptr, x->seg[2].len);
    if (rs == NULL) {
        problem(x, 404, "unknown rule '%.64s'", x->seg[2].ptr);
        return;
    }
    if (!sl_rule_holds(&rs->def.rule)) {
        problem(x, 400, "rule '%s' holds nothing: its algorithm, %s, holds no units", rs->def.name,
                sl_algorithm_name(rs->def.rule.algorithm));
        return;
    }
    topk_item_t items[WATCH_TOP_MAX];
    size_t got = 0;
    int64_t units = engine_rule_holders(rs, sl_now_ns(), items, (size_t)n, &got);
    buf_t body = {0};
    buf_add_str(&body, "{\"rule\":");
    json_write_text(&body, rs->def.name, strlen(rs->def.name));
    buf_add_str(&body, ",\"limit\":");
    json_write_u64(&body, (uint64_t)rs->def.rule.limit);
    buf_add_str(&body, ",\"in_flight\":");
    if (units >= 0) {
        json_write_u64(&body, (uint64_t)units);
    } else {
        buf_add_str(&body, "null");
    }
    buf_add_str(&body, ",\"keys\":[");
    for (size_t i = 0; i < got; i++) {
        const topk_item_t *it = &items[i];
        size_t klen = it->key_len < TOPK_KEY_INLINE ? it->key_len : TOPK_KEY_INLINE;
        buf_add_str(&body, i > 0 ? ",{" : "{");
        json_write_key(&body, it->key, klen);
        if (it->key_len > TOPK_KEY_INLINE) {
            buf_add_str(&body, ",\"truncated\":true");
        }
        buf_add_str(&body, ",\"units\":");
        json_write_u64(&body, it->count);
        buf_add_str(&body, "}");
    }
    buf_add_str(&body, "]}");
    reply_json(x, &body);
}

/* ---- GET /v1/stats ------------------------------------------------------------------------- */

static void json_series(buf_t *b, const char *name, const uint64_t *v, size_t n)
{
    buf_add_str(b, ",\"");
    buf_add_str(b, name);
    buf_add_str(b, "\":[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            buf_add_str(b, ",");
        }
        json_write_u64(b, v[i]);
    }
    buf_add_str(b, "]");
}

/* One rule's entry of /v1/stats: its numbers and n seconds ending at end_s. */
static void stats_rule(buf_t *b, const rule_state_t *rs, int64_t end_s, size_t n, uint64_t *a,
                       uint64_t *d, uint64_t *sh)
{
    engine_rates(rs, end_s, n, a, d, sh);
    buf_add_str(b, "{\"name\":");
    json_write_text(b, rs->def.name, strlen(rs->def.name));
    buf_add_str(b, ",\"algorithm\":\"");
    buf_add_str(b, sl_algorithm_name(rs->def.rule.algorithm));
    buf_add_str(b, "\",\"limit\":");
    json_write_u64(b, (uint64_t)rs->def.rule.limit);
    buf_add_str(b, ",\"window_ms\":");
    json_write_u64(b, (uint64_t)(rs->def.rule.window_ns / SL_NS_PER_MS));
    buf_add_str(b, rs->def.shadow ? ",\"shadow\":true" : ",\"shadow\":false");
    json_series(b, "allowed", a, n);
    json_series(b, "denied", d, n);
    json_series(b, "shadow_denied", sh, n);
    buf_add_str(b, "}");
}

void route_stats(route_ctx_t *x)
{
    char v[24];
    size_t len;
    long n = WATCH_SECONDS;
    if (http_query_get(x->req, "seconds", v, sizeof v, &len)) {
        char *end = NULL;
        n = strtol(v, &end, 10);
        if (len == 0 || *end != '\0' || n < 1 || n > WATCH_SECONDS) {
            problem(x, 400, "seconds: must be an integer from 1 to %d", WATCH_SECONDS);
            return;
        }
    }
    int64_t end_s = sl_now_ns() / SL_NS_PER_SEC; /* the current second is not complete */
    const ruleset_t *set = engine_worker_set(x->c->loop->worker);
    uint64_t a[WATCH_SECONDS], d[WATCH_SECONDS], sh[WATCH_SECONDS];
    buf_t body = {0};
    buf_add_str(&body, "{\"interval_ms\":1000,\"end_ms\":");
    json_write_u64(&body, (uint64_t)end_s * 1000);
    buf_add_str(&body, ",\"seconds\":");
    json_write_u64(&body, (uint64_t)n);
    buf_add_str(&body, ",\"rules\":[");
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        if (i > 0) {
            buf_add_str(&body, ",");
        }
        stats_rule(&body, set->rules[i], end_s, (size_t)n, a, d, sh);
    }
    buf_add_str(&body, "]}");
    reply_json(x, &body);
}

/* ---- GET /v1/stats/stream ------------------------------------------------------------------ */

/* A loop's streams: its connections' ids, and the timer that writes them. */
typedef struct streams {
    loop_t *loop;
    uv_timer_t timer;
    size_t n;
    uint64_t ids[STREAMS_MAX];
} streams_t;

/* The event of the second ending at end_s, for the rules of set. */
static void stream_event(buf_t *b, const ruleset_t *set, int64_t end_s)
{
    buf_add_str(b, "event: stats\ndata: {\"end_ms\":");
    json_write_u64(b, (uint64_t)end_s * 1000);
    buf_add_str(b, ",\"rules\":[");
    for (size_t i = 0; set != NULL && i < set->n; i++) {
        uint64_t a, d, sh;
        const rule_state_t *rs = set->rules[i];
        engine_rates(rs, end_s, 1, &a, &d, &sh);
        buf_add_str(b, i > 0 ? ",{\"name\":" : "{\"name\":");
        json_write_text(b, rs->def.name, strlen(rs->def.name));
        buf_add_str(b, ",\"allowed\":");
        json_write_u64(b, a);
        buf_add_str(b, ",\"denied\":");
        json_write_u64(b, d);
        buf_add_str(b, ",\"shadow_denied\":");
        json_write_u64(b, sh);
        buf_add_str(b, "}");
    }
    buf_add_str(b, "]}\n\n");
}

static void streams_closed(uv_handle_t *h)
{
    free(h->data);
}

/* Ms from now to STREAM_LAG_MS after the current second ends. */
static uint64_t next_tick_ms(void)
{
    int64_t now_ns = sl_now_ns();
    int64_t left_ns = SL_NS_PER_SEC - now_ns % SL_NS_PER_SEC;
    return (uint64_t)(left_ns / SL_NS_PER_MS + STREAM_LAG_MS);
}

/* Drops stream i of s (its connection is gone or closed). */
static void streams_drop(streams_t *s, size_t i)
{
    s->ids[i] = s->ids[--s->n];
    atomic_fetch_sub(&s->loop->srv->streams, 1);
}

/* Writes ev to stream connection c: closes it instead when its client does not read. */
static void stream_write(conn_t *c, const buf_t *ev, int64_t now_ns)
{
    size_t hard = c->loop->srv->cfg->output_hard;
    size_t most = hard != 0 && hard < STREAM_OUT_MAX ? hard : STREAM_OUT_MAX;
    if (conn_output_bytes(c) > most) { /* what it was sent before still waits */
        c->closing = true;
        conn_close_now(c);
        return;
    }
    buf_add(&c->out, ev->data, ev->len);
    conn_flush(c);
    if (conn_output_bytes(c) == 0) {
        c->last_active_ns = now_ns; /* the client takes what it is sent: not idle */
    }
}

static void streams_tick(uv_timer_t *t)
{
    streams_t *s = t->data;
    loop_t *l = s->loop;
    bool found[STREAMS_MAX] = {false};
    buf_t ev = {0};
    int64_t now_ns = (int64_t)uv_now(&l->uv) * SL_NS_PER_MS;
    const ruleset_t *set = engine_worker_begin(l->worker);
    stream_event(&ev, set, sl_now_ns() / SL_NS_PER_SEC); /* the second that just ended */
    for (conn_t *c = l->conns, *next; c != NULL; c = next) {
        next = c->next;
        for (size_t i = 0; i < s->n; i++) {
            if (s->ids[i] == c->id && !c->closing && !uv_is_closing((uv_handle_t *)&c->tcp)) {
                found[i] = true;
                stream_write(c, &ev, now_ns);
            }
        }
    }
    buf_free(&ev);
    for (size_t i = s->n; i-- > 0;) {
        if (!found[i]) {
            streams_drop(s, i);
        }
    }
    if (s->n == 0 || atomic_load(&l->srv->stopping)) {
        while (s->n > 0) {
            streams_drop(s, s->n - 1);
        }
        l->streams = NULL;
        uv_close((uv_handle_t *)&s->timer, streams_closed);
        return;
    }
    uv_timer_start(&s->timer, streams_tick, next_tick_ms(), 0);
}

/* The loop's streams, created with their timer when it has none. NULL when out of memory. */
static streams_t *loop_streams(loop_t *l)
{
    streams_t *s = l->streams;
    if (s != NULL) {
        return s;
    }
    if ((s = calloc(1, sizeof *s)) == NULL) {
        return NULL;
    }
    s->loop = l;
    uv_timer_init(&l->uv, &s->timer);
    s->timer.data = s;
    uv_timer_start(&s->timer, streams_tick, next_tick_ms(), 0);
    l->streams = s;
    return s;
}

void route_stats_stream(route_ctx_t *x)
{
    if (x->req->method != HTTP_GET) {
        route_method_not_allowed(x, "GET");
        return;
    }
    loop_t *l = x->c->loop;
    server_t *srv = l->srv;
    if (x->c->detached) { /* no socket and no running loop (the fuzz target) */
        problem(x, 503, "a stream needs a connection");
        return;
    }
    if (atomic_fetch_add(&srv->streams, 1) >= STREAMS_MAX) {
        atomic_fetch_sub(&srv->streams, 1);
        problem(x, 503, "too many stats streams (at most %d per server)", STREAMS_MAX);
        return;
    }
    streams_t *s = loop_streams(l);
    if (s == NULL || s->n >= STREAMS_MAX) {
        atomic_fetch_sub(&srv->streams, 1);
        problem(x, 503, "out of memory");
        return;
    }
    s->ids[s->n++] = x->c->id;
    buf_t *out = &x->c->out;
    http_begin(out, 200);
    http_header(out, "Content-Type", "text/event-stream");
    http_header(out, "Cache-Control", "no-store");
    http_header(out, "Connection", "close");
    buf_add_str(out, "\r\n: sluice\n\n");
}
