/*
 * route.h - what the files of sluiced's HTTP routes share (private to
 * src/server/http_*.c): a request being routed, the problem reply, and the routes.
 *
 *   http_routes.c   the route table (dispatch), /metrics, /healthz, /readyz, the request loop
 *                   (http_protocol, http_front.h)
 *   http_decide.c   decisions: POST /v1/allow, POST /v1/settle, GET /v1/auth/{rule}
 *   http_rules.c    rules and overrides: /v1/rules[/{name}[/overrides[/{key}]]] (admin token)
 *   http_stats.c    what the console reads: /v1/rules/{name}/top, /v1/stats[/stream]
 *   http_replay.c   POST /v1/replay (admin token), on libuv's thread pool
 *   http_algorithms.c  GET /v1/algorithms: the table of algorithms
 *   http_ui.c       the console's files: /ui/, /ui/<file>
 *   http_rls.c      envoyproxy/ratelimit's routes: POST /json, GET /healthcheck
 *   http_door.c     before any route: what keeps web pages out (Host, Origin, JSON bodies)
 */
#ifndef SLUICE_SERVER_ROUTE_H
#define SLUICE_SERVER_ROUTE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "proto/http.h"
#include "server/server.h"

#define SEGMENTS    8   /* most path segments routed */
#define PROBLEM_MAX 512 /* a problem's detail, bytes */

typedef struct route_ctx {
    conn_t *c;
    http_request_t *req;
    http_segment_t seg[SEGMENTS]; /* the path's decoded segments */
    long nseg;
} route_ctx_t;

/* Replies an RFC 9457 problem with a printf-style detail (401s with WWW-Authenticate). */
static inline void problem(route_ctx_t *x, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void problem(route_ctx_t *x, int status, const char *fmt, ...)
{
    char detail[PROBLEM_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    http_begin(&x->c->out, status);
    if (status == 401) {
        http_header(&x->c->out, "WWW-Authenticate", "Bearer realm=\"sluice\"");
    }
    http_problem_end(&x->c->out, status, x->req->keep_alive, NULL, detail);
}

/* True when path segment i is s. */
static inline bool seg_is(const route_ctx_t *x, long i, const char *s)
{
    return i < x->nseg && x->seg[i].len == strlen(s) &&
           memcmp(x->seg[i].ptr, s, x->seg[i].len) == 0;
}

/* 405 with the methods the resource allows ("GET, HEAD"). */
void route_method_not_allowed(route_ctx_t *x, const char *allow);

/* How much of the browser checks a route gets (http_door.c). */
typedef enum door_kind {
    DOOR_OPEN,   /* none: /v1/auth (proxies forward the browser's own Host, Origin and
                    Sec-Fetch-* fields), /metrics, /healthz, /readyz (probes name the server
                    as they like) */
    DOOR_READ,   /* Host: what only reads (the console's files and reads; they answer 405
                    to any other method) */
    DOOR_API,    /* Host; and for a change, Origin, Sec-Fetch-Site and a JSON body */
    DOOR_IMPORT, /* the same, a YAML body allowed too (POST|PUT /v1/rules) */
} door_kind_t;

/* True when the request may go on to its route; otherwise it was answered (421, 403, 415),
 * counted and logged. */
bool route_door(route_ctx_t *x, door_kind_t kind);

/* http_decide.c */
void route_allow(route_ctx_t *x);
void route_settle(route_ctx_t *x);
/* POST /v1/acquire {"rule","key"[,"cost"][,"timeout_ms"]}: a hold on an in-flight rule (a
 * decision's JSON and "hold_id", 0 when none was made); POST /v1/release {"rule","key","id"}:
 * the hold given back (200), or 409 when the key holds no live hold of that id. */
void route_acquire(route_ctx_t *x);
void route_release(route_ctx_t *x);
void route_auth(route_ctx_t *x);

/* http_rules.c */
void route_rules(route_ctx_t *x);

/* Whether the request may use admin routes: true when sluiced has no --admin-token or the
 * request carries it (Authorization: Bearer, compared in constant time); otherwise replies 401
 * and returns false. */
bool route_admin_ok(route_ctx_t *x);

/* http_stats.c */
void route_top(route_ctx_t *x);          /* GET /v1/rules/{name}/top */
void route_holders(route_ctx_t *x);      /* GET /v1/rules/{name}/holders */
void route_stats(route_ctx_t *x);        /* GET /v1/stats */
void route_stats_stream(route_ctx_t *x); /* GET /v1/stats/stream */

/* http_replay.c */
void route_replay(route_ctx_t *x); /* POST /v1/replay */

/* http_algorithms.c */
void route_algorithms(route_ctx_t *x); /* GET /v1/algorithms */

/* http_ui.c: GET|HEAD /ui (308 to /ui/), /ui/ (index.html), /ui/<file>; 404 for other files. */
void route_ui(route_ctx_t *x);

/* http_rls.c */
void route_rls_json(route_ctx_t *x);    /* POST /json: Envoy's RateLimitRequest as JSON */
void route_healthcheck(route_ctx_t *x); /* GET /healthcheck: 200 "OK", 500 once stopping */

#endif /* SLUICE_SERVER_ROUTE_H */
