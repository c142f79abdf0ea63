/*
 * rls_plan.c - Envoy's rate limit service request decided (rls_plan.h): the rule in force for
 * each descriptor found in the rule set's descriptor trees, or the limit it asks for made into
 * an inline rule, its key made of its values; and the decisions turned into statuses. Shared by
 * the gRPC call (grpc_calls.c) and the HTTP JSON route (http_rls.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/algorithms.h"
#include "rules/descriptor.h"
#include "server/rls_plan.h"
#include "server/server.h"

/*
 * A descriptor that asks for its own limit (its `limit` field) is decided by the inline
 * fixed-window rule of that limit per unit, shared by every descriptor asking the same, on a
 * key naming the descriptor (rls_override_key), as envoyproxy/ratelimit puts an override in
 * place of whatever its configuration says (its caller applies it only in a domain some rule
 * stands for, as envoyproxy/ratelimit does). NULL with err when the rule cannot be had (this
 * connection made too many, or the server holds the most it may).
 */
static rule_state_t *override_rule(conn_t *c, const rls_request_t *req, const rls_descriptor_t *d,
                                   buf_t *keys, char *err, size_t cap)
{
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
    if (!rls_override_key(req->domain, req->domain_len, d, keys)) {
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
/* A descriptor's last entry when its key is `priority` and the others match a rule with
 * priorities (*rule then that rule, and *d the others); else NULL, d and *rule untouched. */
static const rls_entry_t *priority_entry(engine_worker_t *w, const rls_request_t *req,
                                         rls_descriptor_t *d, bool *known, const char **counted,
                                         rule_state_t **rule)
{
    const rls_entry_t *last = d->n_entries > 1 ? &d->entries[d->n_entries - 1] : NULL;
    if (last == NULL || last->key_len != 8 || memcmp(last->key, "priority", 8) != 0 ||
        d->n_entries - 1 > DESC_ENTRIES_MAX) {
        return NULL;
    }
    bool k = false;
    rule_state_t *rs = engine_descriptor(w, req->domain, req->domain_len, d->entries,
                                         d->n_entries - 1, &k, counted);
    if (rs == NULL || rs->def.prio.n == 0) {
        return NULL; /* an entry like any other, as before priorities */
    }
    *known = *known || k;
    *rule = rs;
    d->n_entries--;
    return last;
}

static void descriptor_rules(engine_worker_t *w, const rls_request_t *req, rule_state_t **rules,
                             bool *known, buf_t *keys, size_t *key_off, size_t *key_len,
                             const rls_entry_t **priority)
{
    for (size_t i = 0; i < req->n; i++) {
        rls_descriptor_t whole = req->descs[i], *d = &whole;
        const char *counted[DESC_ENTRIES_MAX]; /* a longer descriptor matches no rule */
        priority[i] = priority_entry(w, req, d, known, counted, &rules[i]);
        bool fits = d->n_entries <= DESC_ENTRIES_MAX;
        if (priority[i] == NULL) {
            rules[i] = engine_descriptor(w, req->domain, req->domain_len, d->entries, d->n_entries,
                                         known, fits ? counted : NULL);
        }
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
    for (size_t i = 0; *known && i < req->n; i++) {
        if (req->descs[i].has_override) {
            rules[i] = NULL;
        }
    }
    bool drop[ENGINE_CHECKS_MAX] = {false};
    for (size_t i = 0; i < req->n; i++) {
        drop[i] = rules[i] != NULL && replaced(rules[i]->def.desc, rules, req->n);
    }
    for (size_t i = 0; i < req->n; i++) {
        rules[i] = drop[i] ? NULL : rules[i];
    }
}

_Static_assert(ENGINE_CHECKS_MAX <= 64, "rls_plan_t.quota has a bit per check");

/* rls_checks (rls_plan.h) */
int rls_checks(conn_t *c, rls_plan_t *p, engine_check_t *checks, size_t *n, char *err,
               size_t err_len)
{
    const rls_request_t *req = &p->req;
    rule_state_t *found[ENGINE_CHECKS_MAX];
    bool known = false;
    buf_t *keys = &p->keys;
    size_t key_off[ENGINE_CHECKS_MAX], key_len[ENGINE_CHECKS_MAX], check_off[ENGINE_CHECKS_MAX];
    descriptor_rules(c->loop->worker, req, found, &known, keys, key_off, key_len, p->priority);
    bool quota_all = c->loop->srv->cfg->grpc_quota_mode; /* envoyproxy/ratelimit's QUOTA_MODE */
    p->quota = 0;
    p->quota_free = false;
    *n = 0;
    for (size_t i = 0; i < req->n; i++) {
        const rls_descriptor_t *d = &req->descs[i];
        char why[256];
        check_off[*n] = key_off[i];
        rule_state_t *rule = found[i];
        size_t klen = key_len[i];
        if (d->has_override && known) {
            check_off[*n] = keys->len;
            rule = override_rule(c, req, d, keys, why, sizeof why);
            klen = keys->len - check_off[*n];
            if (rule == NULL) {
                snprintf(err, err_len, "descriptors[%zu]: %.200s", i, why);
                return -1;
            }
        } else if (rule != NULL && rule->def.unlimited) {
            p->check_of[i] = CHECK_UNLIMITED;
            continue;
        }
        p->check_of[i] = rule != NULL ? (int)*n : CHECK_NONE;
        p->quota_free = p->quota_free || (rule == NULL && quota_all);
        if (rule != NULL) {
            const rule_descriptor_t *desc = rule == found[i] ? rule->def.desc : NULL;
            if (quota_all || (desc != NULL && desc->quota)) {
                p->quota |= UINT64_C(1) << *n;
            }
            checks[*n] = (engine_check_t){.rule = rule, .key_len = klen, .cost = (int64_t)d->cost};
            const rls_entry_t *pe = rule == found[i] ? p->priority[i] : NULL;
            if (pe != NULL && engine_priority(rule, pe->value, pe->value_len, &checks[*n].priority,
                                              why, sizeof why) != 0) {
                snprintf(err, err_len, "descriptors[%zu]: %.200s", i, why);
                return -2;
            }
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
 * The name a status gives its limit (current_limit.name), as envoyproxy/ratelimit names it: a
 * rule that stands for a descriptor (domain and descriptor, as an envoyproxy/ratelimit file's
 * limits become) has its limit's `name`, empty when it has none, as upstream's unnamed limits;
 * a descriptor's own limit (an inline rule) has none either. Envoy copies a non-empty name into
 * the X-RateLimit-Limit header its clients see, where a name sluiced made up ("edge.path", an
 * inline rule's) has no place. A rule that stands for descriptors by its name alone
 * (`edge.remote_address`) has that name, the only one it was given.
 */
static const char *limit_name(const rule_state_t *rule)
{
    const rule_descriptor_t *desc = rule->def.desc;
    if (desc != NULL) {
        return desc->limit_name != NULL ? desc->limit_name : "";
    }
    return rule->inline_rule ? "" : rule->def.name;
}

rls_code_t rls_statuses(const rls_plan_t *p, const engine_decision_t *d, size_t n, size_t refused,
                        rls_status_t *st)
{
    bool over = refused < n && (p->quota >> refused & 1) == 0;
    size_t quotas = p->quota_free, quotas_over = 0; /* as upstream counts them */
    for (size_t i = 0; i < p->req.n; i++) {
        int j = p->check_of[i];
        if (j < 0) { /* as envoyproxy/ratelimit: an unlimited descriptor has all it could want */
            st[i] = (rls_status_t){.code = RLS_CODE_OK,
                                   .remaining = j == CHECK_UNLIMITED ? UINT32_MAX : 0};
            continue;
        }
        const engine_decision_t *e = &d[j];
        bool quota = (p->quota >> j & 1) != 0;
        quotas += quota;
        if (e->rule == NULL) { /* not looked at: a cost never admissible answered the whole */
            st[i] = (rls_status_t){.code = RLS_CODE_OK};
            continue;
        }
        bool refused_it = (size_t)j == refused || e->never || !e->d.allowed;
        over = over || (refused_it && !quota);
        quotas_over += refused_it && quota;
        const rule_descriptor_t *desc = e->rule->def.desc;
        st[i] =
            (rls_status_t){.code = refused_it ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK,
                           .has_limit = true,
                           .name = limit_name(e->rule),
                           .policy = desc != NULL && desc->limit_name != NULL ? desc->limit_name
                                                                              : e->rule->def.name,
                           .limit = (uint64_t)e->d.limit,
                           .window_ns = e->window_ns,
                           .remaining = e->d.remaining > 0 ? (uint64_t)e->d.remaining : 0,
                           .reset_ns = e->d.reset_after_ns};
    }
    return over || (quotas > 0 && quotas_over == quotas) ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK;
}

/* ---- deciding, quota mode's tries ---------------------------------------------------------- */

/* rls_decide's tries while a request with quota checks is decided. */
struct rls_quota {
    loop_t *loop;                             /* the connection's: its worker and time */
    engine_check_t checks[ENGINE_CHECKS_MAX]; /* the request's, keys in the plan; rules held */
    size_t n;
    uint64_t out;                             /* bit j: check j is out, refused by a try */
    size_t in[ENGINE_CHECKS_MAX];             /* a try's check k is check in[k] */
    engine_decision_t got[ENGINE_CHECKS_MAX]; /* each check's decision, from the try that last
                                                 decided it */
    int *next;                                /* while a try is started: what its answer says
                                                 comes next (QUOTA_*), for the loop in quota_try */
};

enum { QUOTA_WAIT, QUOTA_AGAIN, QUOTA_DONE };

/* The request is decided: fn gets every check's decision (it frees the plan, but not q, which
 * holds the decisions and the rules until it returns). */
static void quota_end(rls_plan_t *p, size_t refused)
{
    rls_quota_t *q = p->q;
    p->q = NULL;
    p->fn(p->arg, q->got, q->n, refused);
    for (size_t j = 0; j < q->n; j++) {
        engine_rule_release(q->checks[j].rule);
    }
    free(q);
}

static void quota_try(rls_plan_t *p, int *first_rc, size_t *first_bad);

/* A try's answer: admitted, or refused by a check not in quota mode, or by the last quota check
 * in: the request's answer. Refused by another quota check: that one is out, and so is every
 * quota check the try found refused on its own (a refused whole answers each other check as its
 * cost decided alone: see engine_allowall), then try again. Where a store answers the others
 * with peeks (Redis step by step), a try puts out one quota check; on the others, at most two
 * tries decide any request. */
static void quota_decided(void *arg, const engine_decision_t *d, size_t m, size_t refused)
{
    rls_plan_t *p = arg;
    rls_quota_t *q = p->q;
    for (size_t k = 0; k < m; k++) {
        q->got[q->in[k]] = d[k];
    }
    size_t j = refused < m ? q->in[refused] : q->n;
    bool again = false;
    if (j < q->n && (p->quota >> j & 1) != 0) {
        q->out |= UINT64_C(1) << j;
        for (size_t k = 0; k < m; k++) {
            if ((p->quota >> q->in[k] & 1) != 0 && !d[k].d.allowed) {
                q->out |= UINT64_C(1) << q->in[k];
            }
        }
        again = (p->quota & ~q->out) != 0;
    }
    if (q->next != NULL) { /* answered within engine_allowall: quota_try's loop goes on */
        *q->next = again ? QUOTA_AGAIN : QUOTA_DONE;
    } else if (again) {
        quota_try(p, NULL, NULL);
        return;
    }
    if (!again) {
        quota_end(p, j);
    }
}

/* Tries the checks still in, again while each try is answered at once and says to. The first
 * try's error goes to *first_rc (the caller answers it); a later one's (out of memory: every
 * key was already taken by the first) refuses the request, charged nothing. */
static void quota_try(rls_plan_t *p, int *first_rc, size_t *first_bad)
{
    rls_quota_t *q = p->q;
    for (;;) {
        engine_check_t in[ENGINE_CHECKS_MAX];
        size_t m = 0;
        for (size_t j = 0; j < q->n; j++) {
            if ((q->out >> j & 1) == 0) {
                q->in[m] = j;
                in[m++] = q->checks[j];
            }
        }
        int next = QUOTA_WAIT;
        size_t bad = 0;
        q->next = &next;
        int rc =
            engine_allowall(q->loop->worker, in, m, q->loop->now_ns, 0, quota_decided, p, &bad);
        if (next == QUOTA_DONE) {
            return; /* p is gone */
        }
        q->next = NULL;
        if (rc != ENGINE_OK && first_rc != NULL) {
            *first_rc = rc;
            *first_bad = q->in[bad < m ? bad : 0];
            return;
        }
        if (rc != ENGINE_OK) { /* refused, by the check an earlier try put out */
            size_t first_out = 0;
            while ((q->out >> first_out & 1) == 0) {
                first_out++;
            }
            p->quota = 0;
            p->quota_free = false;
            quota_end(p, first_out);
            return;
        }
        if (next == QUOTA_WAIT) {
            return;
        }
        first_rc = NULL;
    }
}

/* One check's decision, as all or nothing of one. */
static void one_decided(void *arg, int status, const engine_decision_t *d)
{
    (void)status;
    rls_plan_t *p = arg;
    p->fn(p->arg, d, 1, d->d.allowed ? 1 : 0);
}

int rls_decide(conn_t *c, rls_plan_t *p, const engine_check_t *checks, size_t n, unsigned flags,
               engine_allowall_fn fn, void *arg, size_t *bad)
{
    engine_worker_t *w = c->loop->worker;
    p->fn = fn;
    p->arg = arg;
    if ((flags & ENGINE_ALL_INDEPENDENT) != 0) { /* limitador's check: no quota mode */
        p->quota = 0;
        p->quota_free = false;
    }
    if (p->quota == 0 && n == 1) { /* a decision of its own, without all or nothing's bookkeeping */
        engine_request_t one = {.cost = checks[0].cost, .priority = checks[0].priority};
        return engine_request_async(w, checks[0].rule, checks[0].key, checks[0].key_len, &one,
                                    c->loop->now_ns, one_decided, p);
    }
    if (p->quota == 0) {
        return engine_allowall(w, checks, n, c->loop->now_ns, flags, fn, arg, bad);
    }
    p->q = calloc(1, sizeof *p->q);
    if (p->q == NULL) {
        return ENGINE_ENOTSUP;
    }
    rls_quota_t *q = p->q;
    q->loop = c->loop;
    q->n = n;
    for (size_t j = 0; j < n; j++) {
        q->checks[j] = checks[j];
        engine_rule_hold(checks[j].rule);
    }
    int rc = ENGINE_OK;
    quota_try(p, &rc, bad);
    if (rc != ENGINE_OK) { /* fn is never called */
        for (size_t j = 0; j < n; j++) {
            engine_rule_release(checks[j].rule);
        }
        free(p->q);
        p->q = NULL;
    }
    return rc;
}

size_t rls_descriptor_of(const rls_plan_t *p, size_t bad)
{
    size_t desc = 0;
    for (size_t i = 0; i < p->req.n; i++) {
        if (p->check_of[i] == (int)bad) {
            desc = i;
        }
    }
    return desc;
}

void rls_plan_free(rls_plan_t *p)
{
    free(p->q);
    p->q = NULL;
    rls_request_free(&p->req);
    buf_free(&p->keys);
}
