/*
 * grpc_calls.c - the calls sluiced's gRPC port answers: Envoy's rate limit service
 * (ShouldRateLimit: each descriptor's checks made by rls_plan.c, the
 * descriptors decided together through engine_allowall(), all or nothing, at once with the
 * memory store, later with Redis) and the health check. The messages are proto/rls.h's and
 * proto/grpc.h's; the HTTP/2 around them is grpc_front.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/grpc_stream.h"
#include "server/rls_plan.h"
#include "server/server.h"

/* The decisions are in: the response, in request order. */
static void rls_decided(void *arg, const engine_decision_t *d, size_t n, size_t refused)
{
    gstream_t *s = arg;
    if (s->pending && s->gc != NULL) {
        s->gc->pending--;
    }
    s->pending = false;
    if (s->gc == NULL) {
        grpc_stream_free(s); /* the stream or its connection is gone */
        return;
    }
    rls_status_t st[ENGINE_CHECKS_MAX];
    rls_code_t overall = rls_statuses(&s->plan, d, n, refused, st);
    rls_header_t headers[2];
    buf_t policy = {0}, limit = {0};
    size_t nh = s->gc->conn->loop->srv->cfg->grpc_ratelimit_headers
                    ? rls_ratelimit_headers(st, s->plan.req.n, &policy, &limit, headers)
                    : 0;
    rls_response_encode(&s->resp, overall, st, s->plan.req.n, headers, nh);
    s->resp.failed = s->resp.failed || policy.failed || limit.failed;
    buf_free(&policy);
    buf_free(&limit);
    rls_plan_free(&s->plan);
    grpc_answer(s, GRPC_STATUS_OK, NULL);
    grpc_send_later(s->gc, s->start_ns);
}

/* The one check's decision: as all or nothing of one. */
static void rls_one_decided(void *arg, int status, const engine_decision_t *d)
{
    (void)status;
    rls_decided(arg, d, 1, d->d.allowed ? 1 : 0);
}

/* The engine refused the checks before deciding (engine_allowall's error): why, in gRPC's words. */
static void rls_refused(gstream_t *s, int rc, size_t bad, size_t key_max)
{
    char err[GRPC_ERR_MAX];
    size_t desc = rls_descriptor_of(&s->plan, bad);
    if (rc == ENGINE_EKEY) {
        snprintf(err, sizeof err, "descriptors[%zu]: its key is longer than %zu bytes", desc,
                 key_max);
        grpc_answer(s, GRPC_STATUS_INVALID_ARGUMENT, err);
    } else if (rc == ENGINE_ECOST) {
        snprintf(err, sizeof err, "descriptors[%zu]: hits_addend is out of range", desc);
        grpc_answer(s, GRPC_STATUS_INVALID_ARGUMENT, err);
    } else {
        grpc_answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
}

/*
 * A ShouldRateLimit call: each descriptor is decided by the rule in force for it (descriptor_rules)
 * on a key of its values, or, in a domain some rule stands for, by the limit it asks for;
 * descriptors with no rule have no limit (OK, as envoyproxy/ratelimit answers an unknown
 * descriptor), nor do unlimited ones. The rest are decided together.
 */
static void rls_call(gstream_t *s, const uint8_t *msg, size_t len)
{
    conn_t *c = s->gc->conn;
    engine_worker_t *w = c->loop->worker;
    char err[GRPC_ERR_MAX];
    grpc_status_t st =
        rls_request_decode(msg, len, ENGINE_CHECKS_MAX, &s->plan.req, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        grpc_answer(s, st, err);
        return;
    }
    engine_check_t checks[ENGINE_CHECKS_MAX];
    size_t n = 0;
    int bad_checks = rls_checks(c, &s->plan, checks, &n, err, sizeof err);
    if (bad_checks != 0) { /* -2: the request's own error (a priority its rule does not have) */
        grpc_answer(
            s, bad_checks == -2 ? GRPC_STATUS_INVALID_ARGUMENT : GRPC_STATUS_RESOURCE_EXHAUSTED,
            err);
        return;
    }
    if (n == 0) { /* no limit applies to any descriptor */
        rls_decided(s, NULL, 0, 0);
        return;
    }
    s->pending = true;
    s->gc->pending++;
    size_t bad = 0;
    /* one check: a decision of its own, without all or nothing's bookkeeping */
    engine_request_t one = {.cost = checks[0].cost, .priority = checks[0].priority};
    int rc = n == 1 ? engine_request_async(w, checks[0].rule, checks[0].key, checks[0].key_len,
                                           &one, c->loop->now_ns, rls_one_decided, s)
                    : engine_allowall(w, checks, n, c->loop->now_ns, 0, rls_decided, s, &bad);
    if (rc != ENGINE_OK) {
        s->pending = false;
        s->gc->pending--;
        rls_refused(s, rc, bad, c->loop->srv->cfg->key_max);
    }
}

/* ---- calls --------------------------------------------------------------------------------- */

static void health_call(gstream_t *s, const uint8_t *msg, size_t len)
{
    char service[128], err[GRPC_ERR_MAX];
    grpc_status_t st = grpc_health_decode(msg, len, service, sizeof service, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        grpc_answer(s, st, err);
        return;
    }
    if (service[0] != '\0' && strcmp(service, SERVICE_RLS) != 0) {
        char why[GRPC_ERR_MAX];
        snprintf(why, sizeof why, "unknown service '%.100s'", service);
        grpc_answer(s, GRPC_STATUS_NOT_FOUND, why);
        return;
    }
    bool stopping = atomic_load(&s->gc->conn->loop->srv->stopping);
    grpc_health_encode(&s->resp, stopping ? GRPC_HEALTH_NOT_SERVING : GRPC_HEALTH_SERVING);
    grpc_answer(s, GRPC_STATUS_OK, NULL);
}

void grpc_call(gstream_t *s)
{
    conn_t *c = s->gc->conn;
    s->start_ns = c->loop->now_ns;
    bool rls = strcmp(s->path, PATH_RLS) == 0, health = strcmp(s->path, PATH_HEALTH) == 0;
    if (!s->post || !s->grpc_ct) {
        grpc_answer_not_grpc(s);
        return;
    }
    if (!rls && !health) {
        char why[GRPC_ERR_MAX];
        snprintf(why, sizeof why,
                 "unknown method '%s': this server serves " PATH_RLS " and " PATH_HEALTH,
                 s->path[0] != '\0' ? s->path : "(too long)");
        grpc_answer(s, GRPC_STATUS_UNIMPLEMENTED, why);
        return;
    }
    const uint8_t *msg;
    size_t len;
    char err[GRPC_ERR_MAX];
    grpc_status_t st =
        grpc_unary_message((const uint8_t *)s->body.data, s->body.len,
                           c->loop->srv->cfg->request_max, &msg, &len, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        grpc_answer(s, st, err);
    } else if (rls) {
        rls_call(s, msg, len);
    } else {
        health_call(s, msg, len);
    }
}
