/*
 * grpc_calls.c - the calls sluiced's gRPC port answers (methods[]): Envoy's rate limit service
 * (ShouldRateLimit: each descriptor's checks made by rls_plan.c, the
 * descriptors decided together through engine_allowall(), all or nothing, at once with the
 * memory store, later with Redis), limitador's Kuadrant extension of it (CheckRateLimit: the
 * same checks as peeks; Report: each check's cost settled), and the health check. The messages
 * are proto/rls.h's and proto/grpc.h's; the HTTP/2 around them is grpc_front.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/grpc_stream.h"
#include "server/rls_plan.h"
#include "server/server.h"

/*
 * CheckRateLimit's statuses: as ShouldRateLimit's from its peeks, save that a descriptor needs
 * room for one more hit, as limitador's check asks (a peek is allowed with no unit left),
 * unless its rule is in shadow mode or the store failed (then on_store_error decided).
 */
static rls_code_t room_for_one(const rls_plan_t *p, const engine_decision_t *d, rls_status_t *st,
                               rls_code_t overall)
{
    for (size_t i = 0; i < p->req.n; i++) {
        int j = p->check_of[i];
        const engine_decision_t *e = j >= 0 ? &d[j] : NULL;
        if (e == NULL || e->rule == NULL || st[i].code != RLS_CODE_OK || e->d.remaining > 0 ||
            e->rule->def.shadow || e->store_error) {
            continue;
        }
        st[i].code = RLS_CODE_OVER_LIMIT;
        overall = RLS_CODE_OVER_LIMIT;
    }
    return overall;
}

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
    if (s->method == GRPC_KUADRANT_CHECK) {
        overall = room_for_one(&s->plan, d, st, overall);
    }
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
 * A ShouldRateLimit or CheckRateLimit call: each descriptor is decided by the rule in force for
 * it (descriptor_rules) on a key of its values, or, in a domain some rule stands for, by the
 * limit it asks for; descriptors with no rule have no limit (OK, as envoyproxy/ratelimit answers
 * an unknown descriptor), nor do unlimited ones. The rest are decided together; CheckRateLimit's
 * are peeks, each on its own (room_for_one then asks for room for one hit).
 */
static void rls_call(gstream_t *s, const uint8_t *msg, size_t len)
{
    conn_t *c = s->gc->conn;
    char err[GRPC_ERR_MAX];
    bool check = s->method == GRPC_KUADRANT_CHECK;
    grpc_status_t st =
        check ? rls_kuadrant_decode(msg, len, RLS_KUADRANT_CHECK, ENGINE_CHECKS_MAX, &s->plan.req,
                                    err, sizeof err)
              : rls_request_decode(msg, len, ENGINE_CHECKS_MAX, &s->plan.req, err, sizeof err);
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
    int rc = rls_decide(c, &s->plan, checks, n, check ? ENGINE_ALL_INDEPENDENT : 0, rls_decided, s,
                        &bad);
    if (rc != ENGINE_OK) {
        s->pending = false;
        s->gc->pending--;
        rls_refused(s, rc, bad, c->loop->srv->cfg->key_max);
    }
}

/* A Report's settles on their way: the call is answered once the last is in. */
typedef struct report report_t;
typedef struct report_slot {
    report_t *r;
    size_t check; /* which of the call's checks */
} report_slot_t;
struct report {
    gstream_t *s;
    size_t left;           /* settles still on their way */
    size_t debt_check;     /* the first check whose settle max_debt refused; n when none */
    int64_t max_debt;      /* that check's max_debt, units */
    size_t failed_check;   /* the first check the store failed to settle; n when none */
    size_t n;              /* checks */
    report_slot_t slots[]; /* one per check */
};

/* Every settle is in: OK with an empty response, as limitador answers a Report, or the first
 * check that was not counted (another check's settle stands). */
static void report_answer(report_t *r)
{
    gstream_t *s = r->s;
    char err[GRPC_ERR_MAX];
    if (r->debt_check < r->n) {
        snprintf(err, sizeof err,
                 "descriptors[%zu]: the key would owe more than max_debt (%lld units past its "
                 "limit); nothing was charged to it",
                 rls_descriptor_of(&s->plan, r->debt_check), (long long)r->max_debt);
        grpc_answer(s, GRPC_STATUS_FAILED_PRECONDITION, err);
    } else if (r->failed_check < r->n) {
        snprintf(err, sizeof err,
                 "descriptors[%zu]: the request store failed; its cost was not "
                 "counted",
                 rls_descriptor_of(&s->plan, r->failed_check));
        grpc_answer(s, GRPC_STATUS_UNAVAILABLE, err);
    } else {
        rls_response_encode(&s->resp, RLS_CODE_OK, NULL, 0, NULL, 0);
        grpc_answer(s, GRPC_STATUS_OK, NULL);
    }
}

/* One settle of a Report is in; the last answers the call (or frees an orphaned stream). */
static void report_settled(void *arg, int status, const engine_decision_t *d)
{
    (void)status;
    report_slot_t *slot = arg;
    report_t *r = slot->r;
    if (d != NULL && d->debt_refused && r->debt_check == r->n) {
        r->debt_check = slot->check;
        r->max_debt = d->max_debt;
    }
    if (d != NULL && d->store_error && r->failed_check == r->n) {
        r->failed_check = slot->check;
    }
    if (--r->left > 0) {
        return;
    }
    gstream_t *s = r->s;
    pool_t *pool = s->pool;
    if (s->gc != NULL) {
        s->gc->pending--;
    }
    s->pending = false;
    if (s->gc == NULL) {
        grpc_stream_free(s); /* the stream or its connection is gone */
    } else {
        report_answer(r);
        grpc_send_later(s->gc, s->start_ns);
    }
    pool_free(pool, r);
}

/*
 * A Report call: each descriptor's cost (hits_addend) charged to the key its check names, as a
 * settle of a reservation of 0 (engine_request_async), past the limit up to the rule's
 * max_debt; descriptors with no limit charge nothing. Every key is checked before any is
 * charged.
 */
static void report_call(gstream_t *s, const uint8_t *msg, size_t len)
{
    conn_t *c = s->gc->conn;
    char err[GRPC_ERR_MAX];
    grpc_status_t st = rls_kuadrant_decode(msg, len, RLS_KUADRANT_REPORT, ENGINE_CHECKS_MAX,
                                           &s->plan.req, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        grpc_answer(s, st, err);
        return;
    }
    engine_check_t checks[ENGINE_CHECKS_MAX];
    size_t n = 0;
    if (rls_checks(c, &s->plan, checks, &n, err, sizeof err) != 0) {
        grpc_answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, err);
        return;
    }
    size_t key_max = c->loop->srv->cfg->key_max;
    for (size_t j = 0; j < n; j++) {
        if (checks[j].key_len > key_max) {
            rls_refused(s, ENGINE_EKEY, j, key_max);
            return;
        }
    }
    report_t *r = pool_alloc(s->pool, sizeof *r + n * sizeof r->slots[0]);
    if (r == NULL) {
        grpc_answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    *r = (report_t){.s = s, .left = n + 1, .debt_check = n, .failed_check = n, .n = n};
    s->pending = true;
    s->gc->pending++;
    for (size_t j = 0; j < n; j++) {
        r->slots[j] = (report_slot_t){r, j};
        engine_request_t req = {
            .settle = true, .reserved = 0, .actual = checks[j].cost, .charged_ns = -1};
        if (engine_request_async(c->loop->worker, checks[j].rule, checks[j].key, checks[j].key_len,
                                 &req, c->loop->now_ns, report_settled,
                                 &r->slots[j]) != ENGINE_OK) {
            report_settled(&r->slots[j], ENGINE_OK, &(engine_decision_t){.store_error = true});
        }
    }
    report_settled(&(report_slot_t){r, n}, ENGINE_OK, NULL); /* the guard: all are started */
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
    if (service[0] != '\0' && strcmp(service, SERVICE_RLS) != 0 &&
        strcmp(service, SERVICE_KUADRANT) != 0 && strcmp(service, SERVICE_UPSTREAM) != 0) {
        char why[GRPC_ERR_MAX];
        snprintf(why, sizeof why, "unknown service '%.100s'", service);
        grpc_answer(s, GRPC_STATUS_NOT_FOUND, why);
        return;
    }
    bool draining = atomic_load(&s->gc->conn->loop->srv->draining);
    grpc_health_encode(&s->resp, draining ? GRPC_HEALTH_NOT_SERVING : GRPC_HEALTH_SERVING);
    grpc_answer(s, GRPC_STATUS_OK, NULL);
}

/* The methods this port serves, each once: its path, its call. */
static const struct grpc_method_row {
    grpc_method_t method;
    const char *path;
    void (*call)(gstream_t *s, const uint8_t *msg, size_t len);
} methods[] = {
    {GRPC_RLS, PATH_RLS, rls_call},
    {GRPC_KUADRANT_CHECK, PATH_KUADRANT_CHECK, rls_call},
    {GRPC_KUADRANT_REPORT, PATH_KUADRANT_REPORT, report_call},
    {GRPC_HEALTH, PATH_HEALTH, health_call},
};
#define METHODS_N (sizeof methods / sizeof methods[0])

/* Answers a call to a path no row names: UNIMPLEMENTED, naming the paths served. */
static void unknown_method(gstream_t *s)
{
    char why[2 * GRPC_ERR_MAX]; /* room for every path */
    int at = snprintf(why, sizeof why, "unknown method '%s': this server serves ",
                      s->path[0] != '\0' ? s->path : "(too long)");
    for (size_t i = 0; i < METHODS_N && at > 0 && (size_t)at < sizeof why; i++) {
        at += snprintf(why + at, sizeof why - (size_t)at, "%s%s",
                       i == 0               ? ""
                       : i + 1 == METHODS_N ? " and "
                                            : ", ",
                       methods[i].path);
    }
    grpc_answer(s, GRPC_STATUS_UNIMPLEMENTED, why);
}

void grpc_call(gstream_t *s)
{
    conn_t *c = s->gc->conn;
    s->start_ns = c->loop->now_ns;
    if (!s->post || !s->grpc_ct) {
        grpc_answer_not_grpc(s);
        return;
    }
    const struct grpc_method_row *m = NULL;
    for (size_t i = 0; m == NULL && i < METHODS_N; i++) {
        m = strcmp(s->path, methods[i].path) == 0 ? &methods[i] : NULL;
    }
    if (m == NULL) {
        unknown_method(s);
        return;
    }
    s->method = m->method;
    const uint8_t *msg;
    size_t len;
    char err[GRPC_ERR_MAX];
    grpc_status_t st =
        grpc_unary_message((const uint8_t *)s->body.data, s->body.len,
                           c->loop->srv->cfg->request_max, &msg, &len, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        grpc_answer(s, st, err);
    } else {
        m->call(s, msg, len);
    }
}
