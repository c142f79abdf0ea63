/*
 * http_decide.c - sluiced's HTTP decisions:
 *
 *   POST   /v1/allow        one check {"rule","key","cost","priority"} or {"checks":[..]}
 *   POST   /v1/settle       {"rule","key","reserved","actual"[,"at"]}
 *   POST   /v1/acquire      one hold {"rule","key","cost","timeout_ms","priority"}, or
 *                           {"checks":[..]}: a hold on each, or on none
 *   POST   /v1/release      {"rule","key","id","latency_ms","dropped"}, or {"releases":[..]}
 *   GET    /v1/auth/{rule}  204 / 429 for auth_request and forward-auth
 *
 * Decisions carry the IETF RateLimit-Policy / RateLimit fields; a 429 carries Retry-After
 * (seconds, rounded up) and an application/problem+json body. A decision that waits on Redis is
 * answered in order through a deferred reply slot (a job). Every route's body refuses a field it
 * does not know (fields_known()), and a check may name its rule's priority.
 *
 * long because: every decision route (allow, settle, acquire, release, auth) fills and answers
 * the same job, whose layout and answer writers are private to this file.
 */
#include <http_parser.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http.h"
#include "proto/json_fields.h"
#include "proto/text.h"
#include "proto/throttle_args.h"
#include "rules/keytpl.h"
#include "engine/admin.h"
#include "server/route.h"
#include "server/server.h"

#define CHECKS_MAX 64

/* ---- decisions ----------------------------------------------------------------------------- */

static int64_t sec_ceil(int64_t ns)
{
    return sl_ns_to_units_ceil(ns, SL_NS_PER_SEC);
}

static void ratelimit_headers(buf_t *b, const engine_decision_t *ed)
{
    http_ratelimit_headers(b, ed->rule->def.name, ed->d.limit, sec_ceil(ed->window_ns),
                           ed->d.remaining, sec_ceil(ed->d.reset_after_ns));
}

static void decision_json(buf_t *b, const engine_decision_t *ed, const char *key, size_t key_len)
{
    char num[256];
    buf_add(b, "{\"rule\":", 8);
    http_json_append(b, ed->rule->def.name, strlen(ed->rule->def.name));
    buf_add(b, ",\"key\":", 7);
    http_json_append(b, key, key_len);
    int64_t retry_ns = ed->d.allowed ? 0 : ed->d.retry_after_ns;
    int n =
        snprintf(num, sizeof num,
                 ",\"allowed\":%s,\"limit\":%lld,\"remaining\":%lld,\"retry_after_ms\":%lld,"
                 "\"reset_after_ms\":%lld,\"delay_ms\":%lld,\"shadow\":%s}",
                 ed->d.allowed ? "true" : "false", (long long)ed->d.limit,
                 (long long)ed->d.remaining, (long long)sl_ns_to_units_ceil(retry_ns, SL_NS_PER_MS),
                 (long long)sl_ns_to_units_ceil(ed->d.reset_after_ns, SL_NS_PER_MS),
                 (long long)sl_ns_to_units_ceil(ed->d.delay_ns, SL_NS_PER_MS),
                 ed->shadowed ? "true" : "false");
    buf_add(b, num, (size_t)n);
}

/* A release's JSON: the hold is given back; in a batch, or why not ("error"). */
static void release_json(buf_t *b, const engine_decision_t *ed, const char *key, size_t key_len)
{
    buf_add(b, "{\"rule\":", 8);
    http_json_append(b, ed->rule->def.name, strlen(ed->rule->def.name));
    buf_add(b, ",\"key\":", 7);
    http_json_append(b, key, key_len);
    const char *why = ed->hold_status == SL_EHOLD ? THROTTLE_NO_HOLD
                      : ed->store_error           ? SERVER_RELEASE_UNCONFIRMED
                                                  : NULL;
    if (why == NULL) {
        buf_add(b, ",\"released\":true}", 17);
        return;
    }
    buf_add(b, ",\"released\":false,\"error\":", 26);
    http_json_append(b, why, strlen(why));
    buf_add(b, "}", 1);
}

/*
 * Decisions of one HTTP request (the auth endpoint's one, /v1/allow's one or many), with either
 * store: each check is decided with engine_decide_async(); the response is written into the
 * request's reply slot when the last answer is in (at once with the memory store).
 */
typedef enum job_kind {
    JOB_AUTH,         /* 204 / 429 */
    JOB_ALLOW_ONE,    /* 200, one decision's JSON */
    JOB_ALLOW_MANY,   /* 200, {"checks":[...],"allowed":...} */
    JOB_SETTLE,       /* 200, the settled key's decision's JSON */
    JOB_ACQUIRE,      /* 200, the decision's JSON and the hold's id */
    JOB_RELEASE,      /* 200, {"rule","key","released":true} */
    JOB_ACQUIRE_MANY, /* 200, JOB_ALLOW_MANY's with each check's hold id: every hold or none */
    JOB_RELEASE_MANY  /* 200, {"releases":[...],"released":<all>}: each on its own */
} job_kind_t;

typedef struct job job_t;

typedef struct job_ref {
    job_t *job;
    size_t i;
} job_ref_t;

struct job {
    reply_slot_t *slot;
    loop_t *loop;
    bool spare_sized; /* JOB_SPARE_BYTES allocated: may be kept as the loop's spare_job */
    job_kind_t kind;
    bool head; /* HEAD: the response without its body */
    size_t n, left;
    int64_t now_ns;
    size_t key_max;
    size_t refused;          /* JOB_ALLOW_MANY: the check that refused the whole, or n */
    bool independent;        /* JOB_ALLOW_MANY: "independent": true, each check on its own */
    engine_request_t settle; /* JOB_SETTLE: what is settled; JOB_ACQUIRE, JOB_RELEASE: the hold */
    engine_request_t *reqs;  /* JOB_ACQUIRE_MANY, JOB_RELEASE_MANY: each check's hold request
                                (allocated apart: the one-check jobs of the hot routes zero no
                                room for it) */
    /* per check, [0, checks) of the allocation's tail (job_new): a job of one check is a few
     * hundred bytes to allocate and zero, not room for CHECKS_MAX */
    engine_decision_t *got;
    job_ref_t *ref;
    rule_state_t **rules;
    const char **keys;
    size_t *key_len;
    int64_t *costs;
    unsigned *prios; /* each check's priority (0 the lowest) */
    char *bytes;     /* the keys */
};

/* A batch decided all or nothing (or, asked for, each check on its own) by engine_allowall. */
static bool job_all(const job_t *j)
{
    return j->kind == JOB_ALLOW_MANY || j->kind == JOB_ACQUIRE_MANY;
}

static void job_free(loop_t *loop, job_t *j);
static void job_problem(job_t *j, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void job_problem(job_t *j, int status, const char *fmt, ...)
{
    char detail[PROBLEM_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    http_problem(&j->slot->buf, status, !j->slot->close_after, NULL, detail);
}

/* Answers with a problem when a check cannot be answered with a decision: a release of no live
 * hold (409) or one the store did not confirm (503), a settle refused for its debt (422), a cost
 * no window can ever admit (400). Returns whether it did. */
static bool job_respond_problem(job_t *j)
{
    for (size_t i = 0; i < j->n && j->kind != JOB_RELEASE_MANY; i++) { /* its own, per release */
        const engine_decision_t *ed = &j->got[i];
        if (ed->hold_status == SL_EHOLD) {
            job_problem(j, 409, THROTTLE_NO_HOLD);
            return true;
        }
        if (j->kind == JOB_RELEASE && ed->store_error) {
            job_problem(j, 503, SERVER_RELEASE_UNCONFIRMED);
            return true;
        }
        if (ed->hold_status == SL_EHOLDTIME) {
            job_problem(j, 400, "timeout_ms must be within 1..%lld (rule '%s' hold_timeout)",
                        (long long)(ed->window_ns / SL_NS_PER_MS), j->rules[i]->def.name);
            return true;
        }
        if (ed->debt_refused) { /* a settle: nothing was charged */
            job_problem(j, 422,
                        THROTTLE_DEBT_REFUSED " of rule '%s' (%lld units past its limit); "
                                              "nothing was charged",
                        j->rules[i]->def.name, (long long)ed->max_debt);
            return true;
        }
        int64_t cost = job_all(j) ? ed->cost : j->costs[i];
        if (ed->never && !ed->blocked && cost > ed->d.limit) { /* else: its priority's reserve */
            char where[32] = "";
            if (job_all(j)) {
                snprintf(where, sizeof where, "checks[%zu]: ", i);
            }
            if (j->rules[i]->def.rule.adaptive.algorithm != SL_ADAPTIVE_NONE) {
                job_problem(j, 400,
                            "%scost %lld exceeds what rule '%s' admits at once now (its adaptive "
                            "limit is %lld)",
                            where, (long long)cost, j->rules[i]->def.name, (long long)ed->d.limit);
                return true;
            }
            job_problem(j, 400,
                        "%scost %lld exceeds what rule '%s' can ever admit (%lld per window)",
                        where, (long long)cost, j->rules[i]->def.name, (long long)ed->d.limit);
            return true;
        }
    }
    return false;
}

/* /v1/auth: 204 when admitted, 429 with Retry-After and a problem when not. */
static void job_respond_auth(job_t *j)
{
    buf_t *b = &j->slot->buf;
    bool keep_alive = !j->slot->close_after;
    const engine_decision_t *ed = &j->got[0];
    if (ed->d.allowed) {
        http_begin(b, 204);
        ratelimit_headers(b, ed);
        http_end(b, keep_alive, NULL, NULL, 0);
        return;
    }
    http_begin(b, 429);
    ratelimit_headers(b, ed);
    if (ed->d.retry_after_ns >= 0) {
        http_header_int(b, "Retry-After", sec_ceil(ed->d.retry_after_ns));
    }
    char detail[256];
    snprintf(detail, sizeof detail, "rule '%s' allows %lld per %llds", ed->rule->def.name,
             (long long)ed->d.limit, (long long)sec_ceil(ed->window_ns));
    http_problem_end(b, 429, keep_alive, "Too Many Requests", detail);
}

/* The JSON answers: one decision, or {"checks":[...],"allowed":...} for a batch. */
static void job_respond_json(job_t *j)
{
    buf_t body = {0};
    const engine_decision_t *first = &j->got[0];
    bool all = true, releases = j->kind == JOB_RELEASE || j->kind == JOB_RELEASE_MANY;
    if (job_all(j)) {
        buf_add(&body, "{\"checks\":[", 11);
    } else if (j->kind == JOB_RELEASE_MANY) {
        buf_add(&body, "{\"releases\":[", 13);
    }
    for (size_t i = 0; i < j->n; i++) {
        if (i > 0) {
            buf_add(&body, ",", 1);
        }
        if (job_all(j) && j->refused < j->n && i != j->refused) {
            /* all or nothing, refused by another check: this one was not charged either */
            j->got[i].d.allowed = false;
            j->got[i].shadowed = false;
            j->got[i].hold.id = 0;
        }
        if (releases) {
            release_json(&body, &j->got[i], j->keys[i], j->key_len[i]);
        } else {
            decision_json(&body, &j->got[i], j->keys[i], j->key_len[i]);
        }
        if (j->kind == JOB_ACQUIRE || j->kind == JOB_ACQUIRE_MANY) { /* with the hold's id */
            char num[48];
            int len = snprintf(num, sizeof num, ",\"hold_id\":%llu}",
                               (unsigned long long)j->got[i].hold.id);
            body.len--;
            buf_add(&body, num, (size_t)len);
        }
        bool ok = releases ? j->got[i].hold_status == SL_OK && !j->got[i].store_error
                           : j->got[i].d.allowed;
        if (all && !ok) {
            first = &j->got[i]; /* the headers describe the first refusal, if any */
        }
        all = all && ok;
    }
    if (job_all(j)) {
        buf_add(&body, all ? "],\"allowed\":true}" : "],\"allowed\":false}", all ? 17 : 18);
    } else if (j->kind == JOB_RELEASE_MANY) {
        buf_add(&body, all ? "],\"released\":true}" : "],\"released\":false}", all ? 18 : 19);
    }
    if (job_all(j) && j->refused < j->n) {
        first = &j->got[j->refused]; /* every check says false: the one that refused the whole */
    }
    http_begin(&j->slot->buf, 200);
    if (!releases) { /* a release decides nothing: no quota to describe */
        ratelimit_headers(&j->slot->buf, first);
    }
    http_end(&j->slot->buf, !j->slot->close_after, "application/json", body.data, body.len);
    buf_free(&body);
}

static void job_respond(job_t *j)
{
    if (job_respond_problem(j)) {
        return;
    }
    if (j->kind == JOB_AUTH) {
        job_respond_auth(j);
    } else {
        job_respond_json(j);
    }
}

static void job_end(job_t *j)
{
    job_respond(j);
    if (j->head) {
        http_head_only(&j->slot->buf, 0);
    }
    for (size_t i = 0; i < j->n; i++) {
        engine_rule_release(j->rules[i]);
    }
    loop_t *loop = j->loop;
    /* /v1/auth admitted with a delay (a max_delay rule): the answer waits that long, as nginx's
     * limit_req delays the request, since auth_request cannot pass the delay on; at once when
     * the loop cannot hold it (its cap: counted) */
    int64_t delay_ns = j->kind == JOB_AUTH && j->got[0].d.allowed ? j->got[0].d.delay_ns : 0;
    if (!conn_resolve_after(j->slot, delay_ns)) {
        conn_resolve(j->slot);
    }
    job_free(loop, j);
}

static void job_decided(void *arg, int status, const engine_decision_t *ed)
{
    (void)status;
    job_ref_t *ref = arg;
    job_t *j = ref->job;
    j->got[ref->i] = *ed;
    if (--j->left == 0) {
        job_end(j);
    }
}

/* A job for n checks whose keys total `bytes`; NULL (with a 503 problem) when out of memory. */
_Static_assert(sizeof(job_t) % _Alignof(engine_decision_t) == 0 &&
                   sizeof(engine_decision_t) % _Alignof(job_ref_t) == 0,
               "each check's arrays follow the job aligned");

/* A job's memory, zeroed: the loop's spare_job when it is large enough (the usual one-check
 * job, finished in the turn that took it with the memory store), so a decision allocates
 * nothing; a job this size otherwise allocated whole, so it can be kept in turn. */
#define JOB_SPARE_BYTES 1024

static job_t *job_alloc(loop_t *loop, size_t size)
{
    job_t *j;
    if (size > JOB_SPARE_BYTES) {
        return calloc(1, size);
    }
    if (loop->spare_job != NULL) {
        j = loop->spare_job;
        loop->spare_job = NULL;
        memset(j, 0, size);
    } else if ((j = calloc(1, JOB_SPARE_BYTES)) == NULL) {
        return NULL;
    }
    j->spare_sized = true;
    return j;
}

static void job_free(loop_t *loop, job_t *j)
{
    if (j != NULL && j->reqs != NULL) { /* a batch of holds: no call for the one-check jobs */
        free(j->reqs);
        j->reqs = NULL;
    }
    if (j != NULL && j->spare_sized && loop->spare_job == NULL) {
        loop->spare_job = j;
    } else {
        free(j);
    }
}

/* A job of `checks` checks whose keys take `bytes`, in one allocation: the job, each check's
 * arrays, the keys. */
static job_t *job_new(route_ctx_t *x, job_kind_t kind, size_t checks, size_t bytes)
{
    size_t each = sizeof(engine_decision_t) + sizeof(job_ref_t) + sizeof(rule_state_t *) +
                  sizeof(const char *) + sizeof(size_t) + sizeof(int64_t) +
                  sizeof(unsigned); /* the keys' bytes last */
    job_t *j = job_alloc(x->c->loop, sizeof *j + checks * each + bytes);
    if (j != NULL) {
        j->loop = x->c->loop;
        j->got = (engine_decision_t *)(j + 1);
        j->ref = (job_ref_t *)(j->got + checks);
        j->rules = (rule_state_t **)(j->ref + checks);
        j->keys = (const char **)(j->rules + checks);
        j->key_len = (size_t *)(j->keys + checks);
        j->costs = (int64_t *)(j->key_len + checks);
        j->prios = (unsigned *)(j->costs + checks);
        j->bytes = (char *)(j->prios + checks);
    }
    reply_slot_t *slot = j != NULL ? conn_defer(x->c) : NULL;
    if (slot == NULL) {
        job_free(x->c->loop, j);
        problem(x, 503, "out of memory");
        return NULL;
    }
    slot->close_after = !x->req->keep_alive;
    j->slot = slot;
    j->kind = kind;
    j->head = x->req->method == HTTP_HEAD;
    j->now_ns = x->c->loop->now_ns;
    j->key_max = x->c->loop->srv->cfg->key_max;
    return j;
}

/* Adds a check (the key is copied: with the Redis store the request's bytes are gone before the
 * answer comes). */
static void job_add(job_t *j, rule_state_t *rs, const char *key, size_t key_len, int64_t cost,
                    char **space)
{
    size_t i = j->n++;
    memcpy(*space, key, key_len);
    j->keys[i] = *space;
    *space += key_len;
    j->key_len[i] = key_len;
    j->costs[i] = cost;
    j->prios[i] = 0; /* the lowest, unless the caller sets it */
    j->rules[i] = rs;
    j->ref[i] = (job_ref_t){j, i};
    engine_rule_hold(rs);
}

/* Decides every check; the response is written when the last answer is in. */
static void job_all_decided(void *arg, const engine_decision_t *d, size_t n, size_t refused)
{
    job_t *j = arg;
    for (size_t i = 0; i < n; i++) {
        j->got[i] = d[i];
    }
    j->refused = refused;
    job_end(j);
}

static void job_run(job_t *j, engine_worker_t *w)
{
    if (job_all(j)) {
        /* validated whole, then all or nothing (or, asked for, each on its own) */
        engine_check_t checks[CHECKS_MAX];
        for (size_t i = 0; i < j->n; i++) {
            checks[i] = (engine_check_t){.rule = j->rules[i],
                                         .key = j->keys[i],
                                         .key_len = j->key_len[i],
                                         .cost = j->costs[i],
                                         .priority = j->prios[i],
                                         .hold_ns = j->reqs != NULL ? j->reqs[i].hold_ns : 0};
        }
        size_t bad;
        unsigned flags = (j->independent ? ENGINE_ALL_INDEPENDENT : 0) |
                         (j->kind == JOB_ACQUIRE_MANY ? ENGINE_ALL_ACQUIRE : 0);
        if (engine_allowall(w, checks, j->n, j->now_ns, flags, job_all_decided, j, &bad) !=
            ENGINE_OK) {
            for (size_t i = 0; i < j->n; i++) { /* checked before: out of memory */
                j->got[i] = (engine_decision_t){.rule = j->rules[i], .store_error = true};
            }
            j->refused = j->n;
            job_end(j);
        }
        return;
    }
    j->left = j->n + 1; /* held until every decision has started */
    for (size_t i = 0; i < j->n; i++) {
        bool own = j->kind == JOB_SETTLE || j->kind == JOB_ACQUIRE || j->kind == JOB_RELEASE;
        engine_request_t req =
            j->reqs != NULL ? j->reqs[i]
            : own           ? j->settle
                            : (engine_request_t){.cost = j->costs[i], .priority = j->prios[i]};
        int rc = engine_request_async(w, j->rules[i], j->keys[i], j->key_len[i], &req, j->now_ns,
                                      job_decided, &j->ref[i]);
        if (rc != ENGINE_OK) {
            /* keys and costs were checked before; a failure here is a store refusing */
            j->got[i] = (engine_decision_t){.rule = j->rules[i], .store_error = true};
            j->left--;
        }
    }
    if (--j->left == 0) {
        job_end(j);
    }
}

/* The fields of a check (/v1/allow's body or one of its checks), and of an acquire. */
static const char *const check_fields[] = {"rule", "key", "cost", "priority", NULL};

/* Whether obj has only fields of names (NULL-terminated); else replies 400 naming the first
 * other one: every JSON route refuses a field it does not know (a typo must not silently take a
 * default). */
static bool fields_known(route_ctx_t *x, json_t *obj, const char *where, const char *const *names)
{
    const char *field = json_unknown_field(obj, names);
    if (field != NULL) {
        char shown[72];
        problem(x, 400, "%s: unknown field '%s'", where,
                text_show(shown, sizeof shown, field, strlen(field), 64, TEXT_MASK));
        return false;
    }
    return true;
}

/* A check's "priority" (a name of its rule's priorities) into *priority (0, the lowest, when
 * absent): true, or false after replying 400. */
static bool check_priority(route_ctx_t *x, json_t *obj, const char *where, rule_state_t *rs,
                           unsigned *priority)
{
    json_t *p = json_object_get(obj, "priority");
    char err[256];
    *priority = 0;
    if (p == NULL) {
        return true;
    }
    if (!json_is_string(p)) {
        problem(x, 400, "%s: priority must be a string (a priority of the rule)", where);
        return false;
    }
    if (engine_priority(rs, json_string_value(p), json_string_length(p), priority, err,
                        sizeof err) != 0) {
        problem(x, 400, "%s: %s", where, err);
        return false;
    }
    return true;
}

/* One check of /v1/allow from a JSON object: validated, not yet decided. Replies a problem and
 * returns NULL on bad input. */
static rule_state_t *check_parse(route_ctx_t *x, json_t *obj, const char *where, int64_t *cost)
{
    json_t *rule = json_object_get(obj, "rule"), *k = json_object_get(obj, "key"),
           *c = json_object_get(obj, "cost");
    if (!json_is_object(obj) || !json_is_string(rule) || !json_is_string(k)) {
        problem(x, 400, "%s: needs \"rule\" and \"key\" strings", where);
        return NULL;
    }
    *cost = 1;
    if (c != NULL) {
        if (!json_is_integer(c) || json_integer_value(c) < 0) {
            problem(x, 400, "%s: cost must be an integer >= 0", where);
            return NULL;
        }
        *cost = json_integer_value(c);
    }
    if (json_string_length(k) > x->c->loop->srv->cfg->key_max) {
        problem(x, 400, "%s: key is longer than %zu bytes", where, x->c->loop->srv->cfg->key_max);
        return NULL;
    }
    const char *name = json_string_value(rule);
    rule_state_t *rs = engine_find(x->c->loop->worker, name, json_string_length(rule));
    if (rs == NULL) {
        problem(x, 404, "%s: unknown rule '%.64s'", where, name);
    }
    return rs;
}

/* The request's body as JSON (duplicate names refused); NULL after answering 400 with where
 * it is malformed. The caller owns the result (json_decref). */
static json_t *body_json(route_ctx_t *x)
{
    json_error_t jerr;
    json_t *root = json_loadb(x->req->body, x->req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        problem(x, 400, "invalid JSON: line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    }
    return root;
}

void route_allow(route_ctx_t *x)
{
    json_t *root = body_json(x);
    if (root == NULL) {
        return;
    }
    static const char *const batch_fields[] = {"checks", "independent", NULL};
    json_t *checks = json_object_get(root, "checks");
    json_t *independent = json_object_get(root, "independent");
    size_t n = checks != NULL ? json_array_size(checks) : 1;
    if (json_is_object(root) &&
        !fields_known(x, root, "body", checks != NULL ? batch_fields : check_fields)) {
        json_decref(root);
        return;
    }
    if (checks != NULL && (!json_is_array(checks) || n == 0 || n > CHECKS_MAX)) {
        problem(x, 400, "checks: must be an array of 1 to %d checks", CHECKS_MAX);
        json_decref(root);
        return;
    }
    if (independent != NULL && (checks == NULL || !json_is_boolean(independent))) {
        problem(x, 400, "independent: must be true or false, beside \"checks\"");
        json_decref(root);
        return;
    }
    rule_state_t *rules[CHECKS_MAX];
    int64_t costs[CHECKS_MAX];
    size_t bytes = 0;
    unsigned prios[CHECKS_MAX];
    for (size_t i = 0; i < n; i++) {
        char where[32];
        snprintf(where, sizeof where, checks != NULL ? "checks[%zu]" : "body", i);
        json_t *obj = checks != NULL ? json_array_get(checks, i) : root;
        if ((json_is_object(obj) && !fields_known(x, obj, where, check_fields)) ||
            (rules[i] = check_parse(x, obj, where, &costs[i])) == NULL ||
            !check_priority(x, obj, where, rules[i], &prios[i])) {
            json_decref(root);
            return;
        }
        bytes += json_string_length(json_object_get(obj, "key"));
    }
    job_t *j = job_new(x, checks != NULL ? JOB_ALLOW_MANY : JOB_ALLOW_ONE, n, bytes);
    if (j != NULL) {
        char *space = j->bytes;
        for (size_t i = 0; i < n; i++) {
            json_t *key = json_object_get(checks != NULL ? json_array_get(checks, i) : root, "key");
            job_add(j, rules[i], json_string_value(key), json_string_length(key), costs[i], &space);
            j->prios[i] = prios[i];
        }
        j->independent = independent != NULL && json_is_true(independent);
        job_run(j, x->c->loop->worker);
    }
    json_decref(root);
}

/* A JSON field that must be an integer >= 0 when present: true with *out set (unchanged when
 * absent), false after replying a problem. */
static bool json_units_at(route_ctx_t *x, json_t *obj, const char *where, const char *name,
                          bool required, int64_t *out)
{
    json_t *v = json_object_get(obj, name);
    if (v == NULL && !required) {
        return true;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        problem(x, 400, "%s: %s must be an integer >= 0", where, name);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

static bool json_units(route_ctx_t *x, json_t *obj, const char *name, bool required, int64_t *out)
{
    return json_units_at(x, obj, "body", name, required, out);
}

/* POST /v1/settle {"rule","key","reserved","actual"[,"at":unix_ms]}: SL.SETTLE's named form. */
void route_settle(route_ctx_t *x)
{
    json_t *root = body_json(x);
    if (root == NULL) {
        return;
    }
    static const char *const settle_fields[] = {"rule", "key", "reserved", "actual", "at", NULL};
    int64_t unused;
    throttle_req_t tr = {.at_ms = -1};
    rule_state_t *rs = NULL;
    if (json_is_object(root) && json_object_get(root, "cost") == NULL &&
        !fields_known(x, root, "body", settle_fields)) {
        /* replied */
    } else if (json_object_get(root, "cost") != NULL) {
        problem(x, 400, "body: a settle takes no cost (reserved and actual say what to settle)");
    } else if (json_units(x, root, "reserved", true, &tr.reserved) &&
               json_units(x, root, "actual", true, &tr.actual) &&
               json_units(x, root, "at", false, &tr.at_ms)) {
        rs = check_parse(x, root, "body", &unused);
    }
    job_t *j = rs != NULL
                   ? job_new(x, JOB_SETTLE, 1, json_string_length(json_object_get(root, "key")))
                   : NULL;
    if (j != NULL) {
        char *space = j->bytes;
        json_t *key = json_object_get(root, "key");
        job_add(j, rs, json_string_value(key), json_string_length(key), 0, &space);
        j->settle = (engine_request_t){
            .settle = true,
            .reserved = tr.reserved,
            .actual = tr.actual,
            .charged_ns = tr.at_ms < 0 ? -1 : throttle_settle_charged_ns(&tr, j->now_ns)};
        job_run(j, x->c->loop->worker);
    }
    json_decref(root);
}

static bool header_lookup(void *arg, const char *name, size_t name_len, const char **value,
                          size_t *value_len)
{
    char lname[128];
    if (name_len >= sizeof lname) {
        return false;
    }
    memcpy(lname, name, name_len);
    lname[name_len] = '\0';
    return http_header_get(arg, lname, value, value_len);
}

/* True when the TCP peer is one of the trusted proxies. */
static bool peer_trusted(const conn_t *c)
{
    const server_t *srv = c->loop->srv;
    return netaddr_in_any(srv->trusted, srv->ntrusted, &c->peer);
}

/*
 * A forward-auth request describes another request: Traefik and Caddy send its method and URI
 * as X-Forwarded-Method / X-Forwarded-Uri, nginx configurations conventionally as
 * X-Original-Method / X-Original-URI. From a trusted proxy, {method} and {path} are that
 * request's; otherwise they are this request's own.
 */
static void forwarded_request(route_ctx_t *x, keytpl_request_t *kr)
{
    if (!peer_trusted(x->c)) {
        return;
    }
    const char *v;
    size_t vlen;
    if (http_header_get(x->req, "x-forwarded-method", &v, &vlen) ||
        http_header_get(x->req, "x-original-method", &v, &vlen)) {
        kr->method = v;
        kr->method_len = vlen;
    }
    if (http_header_get(x->req, "x-forwarded-uri", &v, &vlen) ||
        http_header_get(x->req, "x-original-uri", &v, &vlen)) {
        kr->path = v; /* keytpl splits off the query */
        kr->path_len = vlen;
    }
}

/* What a key template reads of a /v1/auth request (client set when it is known: kept in
 * *client). */
static keytpl_request_t auth_request(route_ctx_t *x, netaddr_t *client)
{
    conn_t *c = x->c;
    server_t *srv = c->loop->srv;
    bool known = c->peer.family != 0 &&
                 http_client_addr(x->req, &c->peer, srv->trusted, srv->ntrusted, client) == 0;
    keytpl_request_t kr = {
        .client = known ? client : NULL,
        .method = http_method_str(x->req->method),
        .method_len = strlen(http_method_str(x->req->method)),
        .path = x->req->path,
        .path_len = x->req->path_len,
        .header = header_lookup,
        .header_arg = x->req,
    };
    forwarded_request(x, &kr);
    return kr;
}

/* The priority of a /v1/auth request: read by the rule's `priority` template; none (a rule
 * without one, or what it reads absent) is the lowest. Returns whether it is one of the rule's
 * (else answered 400). */
static bool auth_priority(route_ctx_t *x, const rule_state_t *rs, unsigned *priority)
{
    *priority = 0;
    if (!rs->def.has_priority_src) {
        return true;
    }
    netaddr_t client;
    keytpl_request_t kr = auth_request(x, &client);
    char name[PRIO_NAME_MAX + 1], err[256];
    size_t len = 0;
    int rc = keytpl_build(&rs->def.priority_src, &kr, name, sizeof name, &len);
    if (rc == KEYTPL_EMISSING) {
        return true; /* no priority: the lowest */
    }
    if (rc != KEYTPL_OK || engine_priority(rs, name, len, priority, err, sizeof err) != 0) {
        problem(x, 400, "priority: %s",
                rc != KEYTPL_OK ? "not one of the rule's priorities (too long)" : err);
        return false;
    }
    return true;
}

/* The key of a /v1/auth request with no ?key=: built from the request by the rule's key template
 * ({ip} when it has none), into keybuf. Returns whether it could be (else answered 400). */
static bool auth_key_from_request(route_ctx_t *x, const rule_state_t *rs, char *keybuf,
                                  size_t keybuf_size, size_t *key_len)
{
    netaddr_t client;
    keytpl_request_t kr = auth_request(x, &client);
    keytpl_t ip_tpl;
    const keytpl_t *tpl = &rs->def.key;
    if (!rs->def.has_key) {
        char e[KEYTPL_ERR_MAX];
        keytpl_parse("{ip}", 4, &ip_tpl, e);
        tpl = &ip_tpl;
    }
    int rc = keytpl_build(tpl, &kr, keybuf, keybuf_size, key_len);
    if (rc == KEYTPL_EMISSING) {
        problem(x, 400, "the request lacks what rule '%s' builds its key from (%s)", rs->def.name,
                rs->def.has_key ? rs->def.key_text : "{ip}");
        return false;
    }
    if (rc != KEYTPL_OK) {
        problem(x, 400, "cannot build the key of rule '%s' from this request", rs->def.name);
        return false;
    }
    return true;
}

void route_auth(route_ctx_t *x)
{
    conn_t *c = x->c;
    server_t *srv = c->loop->srv;
    rule_state_t *rs = engine_find(c->loop->worker, x->seg[2].ptr, x->seg[2].len);
    if (rs == NULL) {
        problem(x, 404, "unknown rule '%.64s'", x->seg[2].ptr);
        return;
    }
    char keybuf[4096], costbuf[24];
    size_t key_len = 0, cost_len = 0;
    int64_t cost = 1;
    if (http_query_get(x->req, "cost", costbuf, sizeof costbuf, &cost_len)) {
        char *end = NULL;
        long long v = strtoll(costbuf, &end, 10);
        if (cost_len == 0 || *end != '\0' || v < 0 || costbuf[0] == '-' || costbuf[0] == '+') {
            problem(x, 400, "cost must be an integer >= 0");
            return;
        }
        cost = v;
    }
    if (!http_query_get(x->req, "key", keybuf, sizeof keybuf, &key_len) &&
        !auth_key_from_request(x, rs, keybuf, sizeof keybuf, &key_len)) {
        return;
    }
    if (key_len > srv->cfg->key_max) {
        problem(x, 400, "key is longer than %zu bytes", srv->cfg->key_max);
        return;
    }
    unsigned priority;
    if (!auth_priority(x, rs, &priority)) {
        return;
    }
    job_t *j = job_new(x, JOB_AUTH, 1, key_len);
    if (j != NULL) {
        char *space = j->bytes;
        job_add(j, rs, keybuf, key_len, cost, &space);
        j->prios[0] = priority;
        job_run(j, c->loop->worker);
    }
}

/* ---- in-flight limits ---------------------------------------------------------------------- */

/* The rule of an acquire's or a release's body (an in-flight rule), after its fields' checks;
 * NULL after replying a problem. */
static rule_state_t *hold_rule(route_ctx_t *x, json_t *root, const char *const *names)
{
    int64_t unused;
    if (!json_is_object(root) || !fields_known(x, root, "body", names)) {
        if (!json_is_object(root)) {
            problem(x, 400, "body: must be a JSON object");
        }
        return NULL;
    }
    rule_state_t *rs = check_parse(x, root, "body", &unused);
    if (rs != NULL && !sl_rule_holds(&rs->def.rule)) {
        problem(x, 400, "rule '%s' holds nothing to acquire or release", rs->def.name);
        return NULL;
    }
    return rs;
}

/* Decides j's one check, the hold request req, after the rule and key were checked. */
static void hold_run(route_ctx_t *x, json_t *root, rule_state_t *rs, job_kind_t kind,
                     const engine_request_t *req)
{
    json_t *key = json_object_get(root, "key");
    job_t *j = job_new(x, kind, 1, json_string_length(key));
    if (j != NULL) {
        char *space = j->bytes;
        job_add(j, rs, json_string_value(key), json_string_length(key), req->cost, &space);
        j->settle = *req;
        job_run(j, x->c->loop->worker);
    }
}

/* A release's "latency_ms" (a number >= 0, fractions allowed: 0.25 is 250us) and "dropped" (a
 * boolean) into req's sample: false when it answered a problem. */
static bool release_sample(route_ctx_t *x, json_t *root, const char *where, engine_request_t *req)
{
    json_t *lat = json_object_get(root, "latency_ms"), *drop = json_object_get(root, "dropped");
    double ms = lat != NULL && json_is_number(lat) ? json_number_value(lat) : -1;
    if (lat != NULL && !(ms >= 0 && ms <= (double)(SL_ADAPTIVE_LATENCY_MAX_NS / 1000000))) {
        problem(x, 400, "%s: latency_ms must be a number of milliseconds, 0 to 3600000", where);
        return false;
    }
    if (drop != NULL && !json_is_boolean(drop)) {
        problem(x, 400, "%s: dropped must be true or false", where);
        return false;
    }
    req->sample = (sl_sample_t){lat != NULL ? (int64_t)(ms * 1e6 + 0.5) : -1, json_is_true(drop)};
    req->sampled = lat != NULL || req->sample.dropped;
    return true;
}

/* One check of a batch of holds: its fields known, its rule an in-flight rule; NULL after
 * replying a problem. */
static rule_state_t *hold_check(route_ctx_t *x, json_t *obj, const char *where,
                                const char *const *names, int64_t *cost)
{
    if (!json_is_object(obj)) {
        problem(x, 400, "%s: must be a JSON object", where);
        return NULL;
    }
    rule_state_t *rs = fields_known(x, obj, where, names) ? check_parse(x, obj, where, cost) : NULL;
    if (rs != NULL && !sl_rule_holds(&rs->def.rule)) {
        problem(x, 400, "%s: rule '%s' holds nothing to acquire or release", where, rs->def.name);
        return NULL;
    }
    return rs;
}

/* A check's "timeout_ms" into req->hold_ns (0 when absent): within 1 ms..the rule's
 * hold_timeout; false after replying 400. */
static bool hold_timeout_at(route_ctx_t *x, json_t *obj, const char *where, rule_state_t *rs,
                            engine_request_t *req)
{
    int64_t ms = 0;
    if (!json_units_at(x, obj, where, "timeout_ms", false, &ms)) {
        return false;
    }
    int64_t max_ms = rs->def.rule.window_ns / SL_NS_PER_MS;
    if (json_object_get(obj, "timeout_ms") != NULL && (ms < 1 || ms > max_ms)) {
        problem(x, 400, "%s: timeout_ms must be within 1..%lld (rule '%s' hold_timeout)", where,
                (long long)max_ms, rs->def.name);
        return false;
    }
    req->hold_ns = ms * SL_NS_PER_MS;
    return true;
}

/*
 * long because: the two batch forms share one validation of every item, in order, before
 * anything is decided; split, each half would repeat it.
 *
 * The batch forms, validated whole before anything is decided: POST /v1/acquire
 * {"checks":[{"rule","key","cost","timeout_ms","priority"}..],"independent":b}, every hold or
 * none (as SL.ACQUIREALL), and POST /v1/release {"releases":[{"rule","key","id","latency_ms",
 * "dropped"}..]}, each on its own. The array is under `list`; `names` are an item's fields.
 */
static void holds_batch(route_ctx_t *x, json_t *root, job_kind_t kind)
{
    static const char *const acquire_names[] = {"rule",       "key",      "cost",
                                                "timeout_ms", "priority", NULL};
    static const char *const release_names[] = {"rule", "key", "id", "latency_ms", "dropped", NULL};
    static const char *const acquire_fields[] = {"checks", "independent", NULL};
    static const char *const release_fields[] = {"releases", NULL};
    bool acquire = kind == JOB_ACQUIRE_MANY;
    const char *list = acquire ? "checks" : "releases";
    json_t *items = json_object_get(root, list),
           *independent = json_object_get(root, "independent");
    size_t n = json_array_size(items), bytes = 0;
    if (!fields_known(x, root, "body", acquire ? acquire_fields : release_fields)) {
        return;
    }
    if (!json_is_array(items) || n == 0 || n > CHECKS_MAX) {
        problem(x, 400, "%s: must be an array of 1 to %d items", list, CHECKS_MAX);
        return;
    }
    if (independent != NULL && !json_is_boolean(independent)) {
        problem(x, 400, "independent: must be true or false");
        return;
    }
    rule_state_t *rules[CHECKS_MAX];
    engine_request_t reqs[CHECKS_MAX];
    for (size_t i = 0; i < n; i++) {
        char where[32];
        snprintf(where, sizeof where, "%s[%zu]", list, i);
        json_t *obj = json_array_get(items, i);
        int64_t id = 0;
        reqs[i] = (engine_request_t){.cost = 1,
                                     .hold_op = acquire ? STORE_HOLD_ACQUIRE : STORE_HOLD_RELEASE};
        rules[i] =
            hold_check(x, obj, where, acquire ? acquire_names : release_names, &reqs[i].cost);
        if (rules[i] == NULL ||
            (acquire ? !check_priority(x, obj, where, rules[i], &reqs[i].priority) ||
                           !hold_timeout_at(x, obj, where, rules[i], &reqs[i])
                     : !json_units_at(x, obj, where, "id", true, &id) ||
                           !release_sample(x, obj, where, &reqs[i]))) {
            return;
        }
        reqs[i].hold_id = (uint64_t)id;
        bytes += json_string_length(json_object_get(obj, "key"));
    }
    engine_request_t *own = malloc(n * sizeof *own);
    job_t *j = own != NULL ? job_new(x, kind, n, bytes) : NULL;
    if (j == NULL) {
        if (own == NULL) {
            problem(x, 503, "out of memory");
        }
        free(own);
        return;
    }
    memcpy(own, reqs, n * sizeof *own);
    j->reqs = own;
    char *space = j->bytes;
    for (size_t i = 0; i < n; i++) {
        json_t *key = json_object_get(json_array_get(items, i), "key");
        job_add(j, rules[i], json_string_value(key), json_string_length(key), reqs[i].cost, &space);
        j->prios[i] = reqs[i].priority;
    }
    j->independent = independent != NULL && json_is_true(independent);
    job_run(j, x->c->loop->worker);
}

void route_acquire(route_ctx_t *x)
{
    static const char *const names[] = {"rule", "key", "cost", "timeout_ms", "priority", NULL};
    json_t *root = body_json(x);
    if (root == NULL) {
        return;
    }
    if (json_is_object(root) && json_object_get(root, "checks") != NULL) {
        holds_batch(x, root, JOB_ACQUIRE_MANY);
        json_decref(root);
        return;
    }
    engine_request_t req = {.cost = 1, .hold_op = STORE_HOLD_ACQUIRE};
    int64_t timeout_ms = 0;
    rule_state_t *rs = hold_rule(x, root, names);
    if (rs != NULL && check_priority(x, root, "body", rs, &req.priority) &&
        json_units(x, root, "cost", false, &req.cost) &&
        json_units(x, root, "timeout_ms", false, &timeout_ms)) {
        if (json_object_get(root, "timeout_ms") != NULL &&
            (timeout_ms < 1 || timeout_ms > SL_WINDOW_MAX_NS / SL_NS_PER_MS)) {
            problem(x, 400, "body: timeout_ms must be a positive integer of milliseconds");
        } else {
            req.hold_ns = timeout_ms * SL_NS_PER_MS;
            hold_run(x, root, rs, JOB_ACQUIRE, &req);
        }
    }
    json_decref(root);
}

void route_release(route_ctx_t *x)
{
    static const char *const names[] = {"rule", "key", "id", "latency_ms", "dropped", NULL};
    json_t *root = body_json(x);
    if (root == NULL) {
        return;
    }
    if (json_is_object(root) && json_object_get(root, "releases") != NULL) {
        holds_batch(x, root, JOB_RELEASE_MANY);
        json_decref(root);
        return;
    }
    int64_t id = 0;
    rule_state_t *rs = hold_rule(x, root, names);
    engine_request_t req = {.hold_op = STORE_HOLD_RELEASE};
    if (rs != NULL && json_units(x, root, "id", true, &id) &&
        release_sample(x, root, "body", &req)) {
        req.hold_id = (uint64_t)id;
        hold_run(x, root, rs, JOB_RELEASE, &req);
    }
    json_decref(root);
}
