/*
 * http_rls.c - envoyproxy/ratelimit's HTTP routes, for clients of it that cannot speak gRPC
 * (Lua filters, scripts) and its health probes:
 *
 *   POST   /json          a RateLimitRequest as JSON (any method, as upstream): 200 with the
 *                         RateLimitResponse as JSON, 429 when over the limit, 400 for a request
 *                         that cannot be read
 *   GET    /healthcheck   200 "OK"; 500 once a stop signal came (--stop-delay too)
 *
 * A request is read by proto/rls_json.c into what a gRPC call decodes to, and decided by
 * rls_plan.c as ShouldRateLimit is, so both answer alike. The answer is written into the
 * request's reply slot when the decisions are in (at once with the memory store).
 */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/rls_json.h"
#include "server/rls_plan.h"
#include "server/route.h"
#include "server/server.h"

/* One POST /json while it is decided. */
typedef struct rls_job {
    reply_slot_t *slot;
    bool headers; /* --grpc-ratelimit-headers: the IETF fields in responseHeadersToAdd */
    rls_plan_t plan;
} rls_job_t;

static void rls_job_decided(void *arg, const engine_decision_t *d, size_t n, size_t refused)
{
    rls_job_t *j = arg;
    rls_status_t st[ENGINE_CHECKS_MAX];
    rls_code_t overall = rls_statuses(&j->plan, d, n, refused, st);
    rls_header_t headers[2];
    buf_t policy = {0}, limit = {0}, body = {0};
    size_t nh = j->headers ? rls_ratelimit_headers(st, j->plan.req.n, &policy, &limit, headers) : 0;
    rls_response_json(&body, overall, st, j->plan.req.n, headers, nh);
    bool keep_alive = !j->slot->close_after;
    if (body.failed || policy.failed || limit.failed) {
        http_problem(&j->slot->buf, 503, keep_alive, NULL, "out of memory");
    } else {
        /* as upstream: 429 over the limit, 500 for a code it does not know, else 200 */
        int status = overall == RLS_CODE_OVER_LIMIT ? 429 : overall == RLS_CODE_OK ? 200 : 500;
        http_begin(&j->slot->buf, status);
        http_end(&j->slot->buf, keep_alive, "application/json", body.data, body.len);
    }
    buf_free(&policy);
    buf_free(&limit);
    buf_free(&body);
    rls_plan_free(&j->plan);
    conn_resolve(j->slot);
    free(j);
}

/* The engine refused the checks before deciding: why, as a problem in the job's slot. */
static void rls_job_refused(rls_job_t *j, int rc, size_t bad, size_t key_max)
{
    char detail[PROBLEM_MAX];
    size_t desc = rls_descriptor_of(&j->plan, bad);
    int status = rc == ENGINE_EKEY || rc == ENGINE_ECOST ? 400 : 503;
    if (rc == ENGINE_EKEY) {
        snprintf(detail, sizeof detail, "descriptors[%zu]: its key is longer than %zu bytes", desc,
                 key_max);
    } else if (rc == ENGINE_ECOST) {
        snprintf(detail, sizeof detail, "descriptors[%zu]: hitsAddend is out of range", desc);
    } else {
        snprintf(detail, sizeof detail, "out of memory");
    }
    http_problem(&j->slot->buf, status, !j->slot->close_after, NULL, detail);
    rls_plan_free(&j->plan);
    conn_resolve(j->slot);
    free(j);
}

/* Decides the job's checks[0, n); the answer comes through its slot. */
static void rls_job_run(rls_job_t *j, conn_t *c, engine_check_t *checks, size_t n)
{
    if (n == 0) { /* no limit applies to any descriptor */
        rls_job_decided(j, NULL, 0, 0);
        return;
    }
    size_t bad = 0;
    int rc = rls_decide(c, &j->plan, checks, n, 0, rls_job_decided, j, &bad);
    if (rc != ENGINE_OK) {
        rls_job_refused(j, rc, bad, c->loop->srv->cfg->key_max);
    }
}

void route_rls_json(route_ctx_t *x)
{
    conn_t *c = x->c;
    rls_job_t *j = calloc(1, sizeof *j);
    if (j == NULL) {
        problem(x, 503, "out of memory");
        return;
    }
    char err[PROBLEM_MAX];
    grpc_status_t st = rls_request_from_json(x->req->body, x->req->body_len, ENGINE_CHECKS_MAX,
                                             &j->plan.req, err, sizeof err);
    engine_check_t checks[ENGINE_CHECKS_MAX];
    size_t n = 0;
    int bad_checks =
        st == GRPC_STATUS_OK ? rls_checks(c, &j->plan, checks, &n, err, sizeof err) : 0;
    if (bad_checks != 0) { /* -2: the request's own error (a priority its rule does not have) */
        st = bad_checks == -2 ? GRPC_STATUS_INVALID_ARGUMENT : GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    reply_slot_t *slot = st == GRPC_STATUS_OK ? conn_defer(c) : NULL;
    if (slot == NULL) {
        /* as upstream: a request that cannot be read, or has no descriptor, is a 400 */
        bool bad = st == GRPC_STATUS_INVALID_ARGUMENT ||
                   (st == GRPC_STATUS_RESOURCE_EXHAUSTED && j->plan.req.n == 0);
        problem(x,
                st == GRPC_STATUS_OK ? 503
                : bad                ? 400
                                     : 503,
                "%s", st == GRPC_STATUS_OK ? "out of memory" : err);
        rls_plan_free(&j->plan);
        free(j);
        return;
    }
    slot->close_after = !x->req->keep_alive;
    j->slot = slot;
    j->headers = c->loop->srv->cfg->grpc_ratelimit_headers;
    rls_job_run(j, c, checks, n);
}

void route_healthcheck(route_ctx_t *x)
{
    bool ok = !atomic_load(&x->c->loop->srv->draining);
    http_begin(&x->c->out, ok ? 200 : 500);
    http_end(&x->c->out, x->req->keep_alive, "text/plain; charset=utf-8", ok ? "OK" : "",
             ok ? 2 : 0);
}
