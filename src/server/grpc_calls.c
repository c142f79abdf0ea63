/*
 * grpc_calls.c - the calls sluiced's gRPC port answers: Envoy's rate limit service
 * (ShouldRateLimit: each descriptor's rule found in the rule set's descriptor trees, the
 * descriptors decided together through engine_allowall(), all or nothing, at once with the
 * memory store, later with Redis) and the health check. The messages are proto/rls.h's and
 * proto/grpc.h's; the HTTP/2 around them is grpc_front.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/algorithms.h"
#include "rules/descriptor.h"
#include "server/grpc_stream.h"
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
    bool over = refused < n;
    for (size_t i = 0; i < s->req.n; i++) {
        int j = s->check_of[i];
        if (j < 0) { /* as envoyproxy/ratelimit: an unlimited descriptor has all it could want */
            st[i] = (rls_status_t){.code = RLS_CODE_OK,
                                   .remaining = j == CHECK_UNLIMITED ? UINT32_MAX : 0};
            continue;
        }
        const engine_decision_t *e = &d[j];
        if (e->rule == NULL) { /* not looked at: a cost never admissible answered the whole */
            st[i] = (rls_status_t){.code = RLS_CODE_OK};
            continue;
        }
        bool refused_it = (size_t)j == refused || e->never || !e->d.allowed;
        over = over || refused_it;
        const rule_descriptor_t *desc = e->rule->def.desc;
        st[i] = (rls_status_t){.code = refused_it ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK,
                               .has_limit = true,
                               .name = desc != NULL && desc->limit_name != NULL ? desc->limit_name
                                                                                : e->rule->def.name,
                               .limit = (uint64_t)e->d.limit,
                               .window_ns = e->window_ns,
                               .remaining = e->d.remaining > 0 ? (uint64_t)e->d.remaining : 0,
                               .reset_ns = e->d.reset_after_ns};
    }
    rls_header_t headers[2];
    buf_t policy = {0}, limit = {0};
    size_t nh = s->gc->conn->loop->srv->cfg->grpc_ratelimit_headers
                    ? rls_ratelimit_headers(st, s->req.n, &policy, &limit, headers)
                    : 0;
    rls_response_encode(&s->resp, over ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK, st, s->req.n, headers,
                        nh);
    s->resp.failed = s->resp.failed || policy.failed || limit.failed;
    buf_free(&policy);
    buf_free(&limit);
    rls_request_free(&s->req);
    buf_free(&s->keys);
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
    size_t desc = 0;
    for (size_t i = 0; i < s->req.n; i++) {
        if (s->check_of[i] == (int)bad) {
            desc = i;
        }
    }
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
 * A descriptor that asks for its own limit (its `limit` field) is decided by the inline
 * fixed-window rule of that limit per unit, shared by every descriptor asking the same, on a
 * key naming the descriptor (rls_override_key), as envoyproxy/ratelimit puts an override in
 * place of whatever its configuration says (its caller applies it only in a domain some rule
 * stands for, as envoyproxy/ratelimit does). NULL with err when the rule cannot be had (this
 * connection made too many, or the server holds the most it may).
 */
static rule_state_t *override_rule(gstream_t *s, const rls_descriptor_t *d, buf_t *keys, char *err,
                                   size_t cap)
{
    conn_t *c = s->gc->conn;
    sl_rule_t params;
    if (sl_rule_init(&params, core_algorithm_id_with(CORE_CAP_ALIGNED), d->override_per_unit,
                     rls_unit_ns(d->override_unit)) != SL_OK) {
        snprintf(err, cap, "its limit of %u per unit %d is not a rule", d->override_per_unit,
                 (int)d->override_unit);
        return NULL;
    }
    rule_state_t *rule;
    char eerr[ENGINE_ERR_MAX];
    if (engine_inline_rule(c->loop->worker, &params, &c->inline_budget, c->loop->now_ns, &rule,
                           eerr) != ENGINE_OK) {
        snprintf(err, cap, "its limit cannot be applied: %.160s", eerr);
        return NULL;
    }
    if (!rls_override_key(s->req.domain, s->req.domain_len, d, keys)) {
        snprintf(err, cap, "its domain and keys are longer than %d bytes", RLS_NAME_MAX - 1);
        return NULL;
    }
    return rule;
}

/* True when a rule's limit_name is among the names some rule of rules[0..n) replaces. */
static bool replaced(const rule_descriptor_t *mine, rule_state_t *const *rules, size_t n)
{
    for (size_t j = 0; mine != NULL && mine->limit_name != NULL && j < n; j++) {
        const rule_descriptor_t *other = rules[j] != NULL ? rules[j]->def.desc : NULL;
        for (size_t k = 0; other != NULL && k < other->nreplaces; k++) {
            if (strcmp(other->replaces[k], mine->limit_name) == 0) {
                return true;
            }
        }
    }
    return false;
}

/*
 * The rule in force for each descriptor (descriptors.h), NULL for none. As envoyproxy/ratelimit
 * does: a descriptor that asks for its own limit in a known domain takes no rule (the caller
 * makes its limit, which has no name and replaces nothing); then every limit named in the
 * `replaces` of any matched rule (unlimited ones too) no longer applies, whatever the order of
 * the descriptors and whether the replacing rule is itself replaced.
 */
static void descriptor_rules(gstream_t *s, rule_state_t **rules, bool *known, buf_t *keys,
                             size_t *key_off, size_t *key_len)
{
    engine_worker_t *w = s->gc->conn->loop->worker;
    for (size_t i = 0; i < s->req.n; i++) {
        const rls_descriptor_t *d = &s->req.descs[i];
        const char *counted[DESC_ENTRIES_MAX]; /* a longer descriptor matches no rule */
        bool fits = d->n_entries <= DESC_ENTRIES_MAX;
        rules[i] = engine_descriptor(w, s->req.domain, s->req.domain_len, d->entries, d->n_entries,
                                     known, fits ? counted : NULL);
        key_off[i] = keys->len;
        rls_entry_t as[DESC_ENTRIES_MAX]; /* each value, or the pattern it is counted as */
        for (size_t k = 0; rules[i] != NULL && fits && k < d->n_entries; k++) {
            as[k] = d->entries[k];
            if (counted[k] != NULL) {
                as[k].value = counted[k];
                as[k].value_len = strlen(counted[k]);
            }
        }
        if (rules[i] != NULL && fits) {
            rls_key(&(rls_descriptor_t){.entries = as, .n_entries = d->n_entries}, keys);
        }
        key_len[i] = keys->len - key_off[i];
    }
    for (size_t i = 0; *known && i < s->req.n; i++) {
        if (s->req.descs[i].has_override) {
            rules[i] = NULL;
        }
    }
    bool drop[ENGINE_CHECKS_MAX] = {false};
    for (size_t i = 0; i < s->req.n; i++) {
        drop[i] = rules[i] != NULL && replaced(rules[i]->def.desc, rules, s->req.n);
    }
    for (size_t i = 0; i < s->req.n; i++) {
        rules[i] = drop[i] ? NULL : rules[i];
    }
}

/*
 * The checks of s's decoded request, into checks[0, *n): each descriptor's rule (an override's
 * rule for one with a limit of its own) and key (in s->keys); s->check_of[i] says which check
 * descriptor i is, or that it has no limit. Returns 0, or -1 with err set (an override that
 * cannot be made, or no memory for the keys).
 */
static int rls_checks(gstream_t *s, engine_check_t *checks, size_t *n, char *err, size_t err_len)
{
    rule_state_t *found[ENGINE_CHECKS_MAX];
    bool known = false;
    buf_t *keys = &s->keys;
    size_t key_off[ENGINE_CHECKS_MAX], key_len[ENGINE_CHECKS_MAX], check_off[ENGINE_CHECKS_MAX];
    descriptor_rules(s, found, &known, keys, key_off, key_len);
    *n = 0;
    for (size_t i = 0; i < s->req.n; i++) {
        const rls_descriptor_t *d = &s->req.descs[i];
        char why[GRPC_ERR_MAX];
        check_off[*n] = key_off[i];
        rule_state_t *rule = found[i];
        size_t klen = key_len[i];
        if (d->has_override && known) {
            check_off[*n] = keys->len;
            rule = override_rule(s, d, keys, why, sizeof why);
            klen = keys->len - check_off[*n];
            if (rule == NULL) {
                snprintf(err, err_len, "descriptors[%zu]: %.200s", i, why);
                return -1;
            }
        } else if (rule != NULL && rule->def.unlimited) {
            s->check_of[i] = CHECK_UNLIMITED;
            continue;
        }
        s->check_of[i] = rule != NULL ? (int)*n : CHECK_NONE;
        if (rule != NULL) {
            checks[*n] = (engine_check_t){.rule = rule, .key_len = klen, .cost = (int64_t)d->cost};
            (*n)++;
        }
    }
    if (keys->failed) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    for (size_t j = 0; j < *n; j++) {
        checks[j].key = keys->data != NULL ? keys->data + check_off[j] : ""; /* all keys empty */
    }
    return 0;
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
    grpc_status_t st = rls_request_decode(msg, len, ENGINE_CHECKS_MAX, &s->req, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        grpc_answer(s, st, err);
        return;
    }
    engine_check_t checks[ENGINE_CHECKS_MAX];
    size_t n = 0;
    if (rls_checks(s, checks, &n, err, sizeof err) != 0) {
        grpc_answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, err);
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
    int rc = n == 1 ? engine_decide_async(w, checks[0].rule, checks[0].key, checks[0].key_len,
                                          checks[0].cost, c->loop->now_ns, rls_one_decided, s)
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
