/*
 * http_routes.c - sluiced's HTTP front end: the route table, the request loop (http_protocol)
 * and the small routes; decisions are in http_decide.c, rules and overrides in http_rules.c.
 *
 *   POST   /v1/allow                           one check {"rule","key","cost"} or {"checks":[..]}
 *   POST   /v1/settle                          {"rule","key","reserved","actual"[,"at"]}
 *   POST   /v1/acquire                         {"rule","key"[,"cost"][,"timeout_ms"]}: a hold
 *   POST   /v1/release                         {"rule","key","id"}: the hold given back
 *   GET    /v1/auth/{rule}                     204 / 429 for auth_request and forward-auth
 *   GET    /v1/rules                           every rule             (open)
 *   GET|PUT|DELETE /v1/rules/{name}            one rule       (admin token, GET open)
 *   GET|PUT|DELETE /v1/rules/{name}/overrides/{key}                   (admin token)
 *   GET    /v1/rules/{name}/top  /v1/rules/{name}/holders  /v1/stats  /v1/stats/stream
 *                                          the console's reads (open)
 *   GET    /v1/algorithms                      the table of algorithms (open; http_algorithms.c)
 *   POST   /v1/replay                          a log replayed against a candidate rule
 *                                              (admin token; http_replay.c, off the loop)
 *   GET    /metrics  /healthz  /readyz
 *   GET    /ui/  /ui/<file>                    the console's files (http_ui.c)
 *   POST   /json  GET /healthcheck             envoyproxy/ratelimit's (http_rls.c; any method)
 *
 * Before any route, route_door() (http_door.c) refuses what a web page of another site could
 * make a browser send: a foreign Host, a change with a foreign Origin or without a JSON body.
 */
#include <http_parser.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http.h"
#include "server/metrics.h"
#include "server/http_front.h"
#include "server/route.h"
#include "server/server.h"

/* ---- dispatch ------------------------------------------------------------------------------ */

static void only_get(route_ctx_t *x, void (*fn)(route_ctx_t *))
{
    if (x->req->method != HTTP_GET && x->req->method != HTTP_HEAD) {
        route_method_not_allowed(x, "GET, HEAD");
        return;
    }
    fn(x);
}

static void route_metrics(route_ctx_t *x)
{
    buf_t body = {0};
    metrics_render(x->c->loop->srv, &body);
    http_begin(&x->c->out, 200);
    http_end(&x->c->out, x->req->keep_alive, "text/plain; version=0.0.4", body.data, body.len);
    buf_free(&body);
}

static void route_healthz(route_ctx_t *x)
{
    http_begin(&x->c->out, 200);
    http_end(&x->c->out, x->req->keep_alive, "text/plain", "ok\n", 3);
}

static void route_readyz(route_ctx_t *x)
{
    server_t *srv = x->c->loop->srv;
    bool ready = !atomic_load(&srv->draining);
    http_begin(&x->c->out, ready ? 200 : 503);
    http_end(&x->c->out, x->req->keep_alive, "text/plain", ready ? "ready\n" : "stopping\n",
             ready ? 6 : 9);
}

/* What the browser checks ask of a path (route.h, http_door.c): nothing of the proxies' and
 * the probes' routes, whose callers name the server as they like; of every other, a Host of
 * this server, and for a change an Origin of this server and a JSON body. Paths that only read
 * answer 405 to a change; unknown paths get every check: a route added later is safe by
 * default. */
static door_kind_t door_kind(const route_ctx_t *x)
{
    bool v1 = seg_is(x, 0, "v1");
    if (x->nseg == 1 && (seg_is(x, 0, "json") || seg_is(x, 0, "healthcheck"))) {
        return DOOR_OPEN; /* envoyproxy/ratelimit's: its Lua clients and probes send no JSON type */
    }
    if ((v1 && seg_is(x, 1, "auth") && x->nseg == 3) ||
        (x->nseg == 1 &&
         (seg_is(x, 0, "metrics") || seg_is(x, 0, "healthz") || seg_is(x, 0, "readyz")))) {
        return DOOR_OPEN;
    }
    if (seg_is(x, 0, "ui") || (v1 && seg_is(x, 1, "stats")) || (v1 && seg_is(x, 1, "algorithms")) ||
        (v1 && seg_is(x, 1, "rules") && x->nseg == 4 && seg_is(x, 3, "top"))) {
        return DOOR_READ;
    }
    return v1 && seg_is(x, 1, "rules") && x->nseg == 2 ? DOOR_IMPORT : DOOR_API;
}

typedef struct handle_ctx {
    conn_t *c;
    http_request_t *req;
} handle_ctx_t;

static void handle_now(void *arg);

void http_handle(conn_t *c, http_request_t *req)
{
    handle_ctx_t x = {c, req};
    /* While replies are deferred (the Redis store), later replies queue behind them. */
    conn_in_order(c, handle_now, &x);
}

/* long because the route table is one chain of tests on the path, a branch per route */
static void handle_now(void *arg)
{
    conn_t *c = ((handle_ctx_t *)arg)->c;
    http_request_t *req = ((handle_ctx_t *)arg)->req;
    route_ctx_t x = {.c = c, .req = req};
    char storage[HTTP_HEAD_MAX + 1];
    x.nseg = http_path_segments(req->path, req->path_len, storage, sizeof storage, x.seg, SEGMENTS);
    if (x.nseg < 0) {
        problem(&x, 404, "no such resource");
        return;
    }
    if (!route_door(&x, door_kind(&x))) {
        return;
    }
    if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "auth") && x.nseg == 3) {
        only_get(&x, route_auth);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "allow") && x.nseg == 2) {
        if (req->method != HTTP_POST) {
            route_method_not_allowed(&x, "POST");
            return;
        }
        route_allow(&x);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "settle") && x.nseg == 2) {
        if (req->method != HTTP_POST) {
            route_method_not_allowed(&x, "POST");
            return;
        }
        route_settle(&x);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "acquire") && x.nseg == 2) {
        if (req->method != HTTP_POST) {
            route_method_not_allowed(&x, "POST");
            return;
        }
        route_acquire(&x);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "release") && x.nseg == 2) {
        if (req->method != HTTP_POST) {
            route_method_not_allowed(&x, "POST");
            return;
        }
        route_release(&x);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "rules") && x.nseg == 4 &&
               seg_is(&x, 3, "top")) {
        only_get(&x, route_top);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "rules") && x.nseg == 4 &&
               seg_is(&x, 3, "holders")) {
        only_get(&x, route_holders);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "stats") && x.nseg == 2) {
        only_get(&x, route_stats);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "algorithms") && x.nseg == 2) {
        only_get(&x, route_algorithms);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "replay") && x.nseg == 2) {
        route_replay(&x);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "stats") && x.nseg == 3 &&
               seg_is(&x, 2, "stream")) {
        route_stats_stream(&x);
    } else if (seg_is(&x, 0, "v1") && seg_is(&x, 1, "rules")) {
        route_rules(&x);
    } else if (seg_is(&x, 0, "ui")) {
        route_ui(&x);
    } else if (x.nseg == 1 && seg_is(&x, 0, "metrics")) {
        only_get(&x, route_metrics);
    } else if (x.nseg == 1 && seg_is(&x, 0, "healthz")) {
        only_get(&x, route_healthz);
    } else if (x.nseg == 1 && seg_is(&x, 0, "readyz")) {
        only_get(&x, route_readyz);
    } else if (x.nseg == 1 && seg_is(&x, 0, "json")) {
        route_rls_json(&x);
    } else if (x.nseg == 1 && seg_is(&x, 0, "healthcheck")) {
        route_healthcheck(&x);
    } else {
        problem(&x, 404, "no such resource");
    }
}

/* An HTTP connection's state (conn_state()). */
typedef struct http_conn {
    http_reader_t rd; /* how far the request being received is parsed */
    bool continued;   /* "100 Continue" sent for the request being read */
} http_conn_t;

static void http_process(conn_t *c)
{
    loop_t *l = c->loop;
    http_conn_t *hc = conn_state(c);
    server_t *srv = l->srv;
    http_limits_t limits = {.body_max = srv->cfg->request_max};
    char err[HTTP_ERR_MAX];
    size_t off = 0;
    uint64_t n = 0;
    int64_t start_ns = conn_batch_begin(c);
    while (off < c->in_len && !c->closing) {
        http_request_t req;
        int status = 0;
        long used =
            http_parse_more(&hc->rd, c->in + off, c->in_len - off, &limits, &req, &status, err);
        if (used == HTTP_PARSE_PARTIAL) {
            if (status == 100 && !hc->continued) {
                http_continue(&c->out); /* the head asked to be told to send its body */
                hc->continued = true;
            }
            break;
        }
        hc->continued = false;
        if (used < 0) {
            http_problem(&c->out, status, false, NULL, err);
            c->closing = true;
            atomic_fetch_add_explicit(&l->stats.protocol_errors, 1, memory_order_relaxed);
            break;
        }
        off += (size_t)used;
        size_t before = c->out.len;
        http_handle(c, &req);
        if (req.method == HTTP_HEAD) {
            http_head_only(&c->out, before);
        }
        if (!req.keep_alive) {
            c->closing = true;
        }
        n++;
    }
    atomic_fetch_add_explicit(&l->stats.http_requests, n, memory_order_relaxed);
    conn_batch_done(c, off, n, start_ns);
}

static void http_input_dropped(conn_t *c)
{
    http_conn_t *hc = conn_state(c);
    http_reader_init(&hc->rd);
    hc->continued = false;
}

static void http_reply_full(buf_t *out)
{
    buf_add_str(out, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n");
}

static void http_reply_closing(buf_t *out, const char *why)
{
    http_problem(out, 503, false, NULL, why);
}

const protocol_t http_protocol = {
    .name = "http",
    .label = "HTTP",
    .alpn = "http/1.1",
    .state_size = sizeof(http_conn_t),
    .process = http_process,
    .input_dropped = http_input_dropped,
    .reply_full = http_reply_full,
    .reply_closing = http_reply_closing,
};
