/*
 * allowall.c - all-or-nothing decisions over several (rule, key, cost) checks: SL.ALLOWALL and
 * /v1/allow's checks (see engine_allowall in engine.h).
 *
 * The checks are first merged: a (rule, key) named twice is one check of the summed cost, since
 * two requests on one key must count together (`SL.ALLOWALL api dd api dd COST 150` on a limit of
 * 200 asks for 300). Then every check's override is looked up (on the config thread, when a loop's
 * cache lacks it), and the checks are decided:
 *
 *   memory store  in one sl_table_decide_all under every shard's lock (engine_decide_all_local):
 *                 either every check is charged, or none;
 *   Redis store   with sluice.so and every key in one cluster slot, in one script inside Redis
 *                 (engine_allowall_async); otherwise every check is charged (all sent at once),
 *                 and when one is refused, each check that was charged is refunded (a settle
 *                 of actual 0, at once: exact, the units go back where they were taken).
 *                 Meanwhile another client may find the refunded units taken and be refused:
 *                 a refused whole never keeps its units, but can delay others for a round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "server/engine_impl.h"

/* With ENGINE_ALL_INDEPENDENT the checks are validated together (an invalid one fails the whole
 * before anything is decided) and then decided one by one, each charged or not on its own. */

typedef enum phase { PHASE_CHARGE, PHASE_REFUND } phase_t;

/* a + b for costs, saturating at INT64_MAX (both >= 0) */
static int64_t cost_sum(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

typedef struct allowall allowall_t;

typedef struct allowall_ref {
    allowall_t *a;
    size_t i;
} allowall_ref_t;

struct allowall {
    engine_worker_t *w;
    int64_t now_ns;
    engine_allowall_fn fn;
    void *arg;
    size_t n;                      /* checks asked for */
    size_t map[ENGINE_CHECKS_MAX]; /* check -> the merged check it counts in */
    size_t m;                      /* merged checks */
    rule_state_t *rules[ENGINE_CHECKS_MAX];
    const char *keys[ENGINE_CHECKS_MAX];
    size_t key_lens[ENGINE_CHECKS_MAX];
    int64_t costs[ENGINE_CHECKS_MAX];
    engine_decision_t got[ENGINE_CHECKS_MAX];
    allowall_ref_t ref[ENGINE_CHECKS_MAX];
    phase_t phase;
    bool independent; /* ENGINE_ALL_INDEPENDENT: each check on its own, none merged */
    size_t left;
    size_t refused; /* PHASE_REFUND: the first check refused */
    bool error;     /* a step could not start: every check a store error */
    char bytes[];   /* the keys */
};

/* Answers with the merged checks' decisions spread back over the checks asked for. */
static void allowall_end(allowall_t *a, size_t refused_merged)
{
    engine_decision_t d[ENGINE_CHECKS_MAX];
    size_t refused = a->n;
    for (size_t i = 0; i < a->n; i++) {
        d[i] = a->got[a->map[i]];
        if (refused == a->n && refused_merged < a->m && a->map[i] == refused_merged) {
            refused = i;
        }
    }
    a->fn(a->arg, d, a->n, refused);
    for (size_t j = 0; j < a->m; j++) {
        engine_state_release(a->rules[j]);
    }
    free(a);
}

static void allowall_step(allowall_t *a);

static void allowall_decided(void *arg, int status, const engine_decision_t *ed)
{
    (void)status;
    allowall_ref_t *ref = arg;
    allowall_t *a = ref->a;
    a->got[ref->i] = *ed; /* a refund's answer: what the key holds after it, as a peek */
    if (--a->left == 0) {
        allowall_step(a);
    }
}

/* Starts, for merged checks [0, m) that `want` selects, a decision of its cost (PHASE_CHARGE) or
 * the refund of its charged cost (PHASE_REFUND). */
static void allowall_send(allowall_t *a, bool (*want)(const allowall_t *a, size_t j))
{
    a->left = 1; /* held until every request is started, so none completes the phase early */
    for (size_t j = 0; j < a->m; j++) {
        if (!want(a, j)) {
            continue;
        }
        engine_request_t req = {.cost = a->costs[j]};
        if (a->phase == PHASE_REFUND) {
            /* dated no later than the charge (when the request was read, before the charges
             * were sent): a refund dated when it runs, after other admissions on the key,
             * would give back their newer units or a refill the charge no longer holds */
            req = (engine_request_t){
                .settle = true, .reserved = a->costs[j], .actual = 0, .charged_ns = a->now_ns};
        }
        a->left++;
        if (engine_request_async(a->w, a->rules[j], a->keys[j], a->key_lens[j], &req, a->now_ns,
                                 allowall_decided, &a->ref[j]) != ENGINE_OK) {
            a->left--; /* checked before: a store refusing */
            if (a->phase == PHASE_CHARGE) {
                a->error = true;
                a->got[j] = (engine_decision_t){.rule = a->rules[j], .store_error = true};
            }
        }
    }
    if (--a->left == 0) {
        allowall_step(a);
    }
}

static bool every_check(const allowall_t *a, size_t j)
{
    (void)a;
    (void)j;
    return true;
}

/* A check whose charge took units: admitted for real (not by shadow mode or on_store_error). */
static bool was_charged(const allowall_t *a, size_t j)
{
    const engine_decision_t *ed = &a->got[j];
    return a->costs[j] > 0 && ed->d.allowed && !ed->shadowed && !ed->store_error;
}

/* The step-by-step path (the Redis store without one atomic script). */
static void allowall_step(allowall_t *a)
{
    if (a->phase == PHASE_REFUND) {
        allowall_end(a, a->refused);
        return;
    }
    if (a->error) {
        allowall_end(a, 0);
        return;
    }
    size_t refused = a->m;
    for (size_t j = 0; j < a->m && !a->independent && refused == a->m; j++) {
        if (!a->got[j].d.allowed) {
            refused = j;
        }
    }
    if (refused == a->m) {
        allowall_end(a, a->m);
        return;
    }
    a->phase = PHASE_REFUND;
    a->refused = refused;
    allowall_send(a, was_charged);
}

/* The one atomic script's answer: the refusal, or every check charged. */
static void allowall_atomic(void *arg, const engine_decision_t *d, size_t n, long refused)
{
    allowall_t *a = arg;
    if (refused == ENGINE_ALL_RETRY) { /* the node lost sluice.so: nothing was decided */
        a->phase = PHASE_CHARGE;
        allowall_send(a, every_check);
        return;
    }
    if (refused >= 0) {
        for (size_t j = 0; j < n; j++) {
            a->got[j] = d[j]; /* the refusal, and the others' peeks */
        }
        allowall_end(a, (size_t)refused);
        return;
    }
    size_t first_denied = a->m;
    for (size_t j = 0; j < n; j++) {
        a->got[j] = d[j];
        if (first_denied == a->m && !d[j].d.allowed) { /* a store error on a deny rule */
            first_denied = j;
        }
    }
    allowall_end(a, first_denied);
}

/* A check whose cost its rule (or its key's override) can never admit: the whole is answered by
 * it before anything is decided, so an invalid batch charges nothing. Returns its index or m. */
static size_t never_admissible(allowall_t *a)
{
    for (size_t j = 0; j < a->m; j++) {
        rule_state_t *rs = a->rules[j];
        const sl_rule_t *rule = &rs->t->rule;
        const ov_entry_t *en =
            rs->has_overrides ? override_cached(a->w, rs, a->keys[j], a->key_lens[j], a->now_ns)
                              : NULL;
        if (en != NULL && en->present) {
            if (en->blocked) {
                continue; /* refused when decided, as a blocked key is */
            }
            rule = &en->ov_rule;
        }
        if (a->costs[j] > rule->capacity) {
            a->got[j] = (engine_decision_t){
                .rule = rs,
                .window_ns = rule->window_ns,
                .never = true,
                .cost = a->costs[j],
                .d = {.allowed = false, .limit = rule->capacity, .retry_after_ns = -1}};
            return j;
        }
    }
    return a->m;
}

static void allowall_resolved(void *arg, int status)
{
    (void)status;
    allowall_t *a = arg;
    engine_worker_t *w = a->w;
    size_t never = never_admissible(a);
    if (never < a->m) {
        allowall_end(a, never);
        return;
    }
    if (a->independent) {
        a->phase = PHASE_CHARGE;
        allowall_send(a, every_check);
        return;
    }
    if (w->redis == NULL) {
        size_t refused;
        engine_decide_all_local(w, a->rules, a->keys, a->key_lens, a->costs, a->m, a->now_ns,
                                a->got, &refused);
        allowall_end(a, refused);
        return;
    }
    bool one_cost = true;
    for (size_t j = 1; j < a->m; j++) {
        one_cost = one_cost && a->costs[j] == a->costs[0];
    }
    if (one_cost && engine_allowall_async(w, a->rules, a->keys, a->key_lens, a->m, a->costs[0],
                                          a->now_ns, allowall_atomic, a) == ENGINE_OK) {
        return;
    }
    a->phase = PHASE_CHARGE;
    allowall_send(a, every_check);
}

int engine_allowall(engine_worker_t *w, const engine_check_t *checks, size_t n, int64_t now_ns,
                    unsigned flags, engine_allowall_fn fn, void *arg, size_t *bad)
{
    size_t bytes = 0;
    *bad = n;
    if (n == 0 || n > ENGINE_CHECKS_MAX) {
        return ENGINE_ENOTSUP;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = checks[i].cost < 0                           ? ENGINE_ECOST
                 : checks[i].key_len > w->engine->cfg.key_max ? ENGINE_EKEY
                                                              : ENGINE_OK;
        if (rc != ENGINE_OK) {
            *bad = i;
            return rc;
        }
        bytes += checks[i].key_len;
    }
    allowall_t *a = calloc(1, sizeof *a + bytes);
    if (a == NULL) {
        return ENGINE_ENOTSUP;
    }
    *a = (allowall_t){.w = w,
                      .now_ns = now_ns,
                      .fn = fn,
                      .arg = arg,
                      .n = n,
                      .independent = (flags & ENGINE_ALL_INDEPENDENT) != 0};
    char *p = a->bytes;
    for (size_t i = 0; i < n; i++) {
        const engine_check_t *c = &checks[i];
        size_t j = a->independent ? a->m : 0;
        while (j < a->m && !(a->rules[j] == c->rule && a->key_lens[j] == c->key_len &&
                             memcmp(a->keys[j], c->key, c->key_len) == 0)) {
            j++;
        }
        if (j == a->m) { /* a new (rule, key) */
            memcpy(p, c->key, c->key_len);
            a->keys[j] = p;
            p += c->key_len;
            a->key_lens[j] = c->key_len;
            a->rules[j] = c->rule;
            a->ref[j] = (allowall_ref_t){a, j};
            engine_rule_hold(c->rule);
            a->m++;
        }
        a->costs[j] = cost_sum(a->costs[j], c->cost);
        a->map[i] = j;
    }
    if (engine_resolve_overrides(w, a->rules, a->keys, a->key_lens, a->m, now_ns, allowall_resolved,
                                 a) == ENGINE_OK) {
        allowall_resolved(a, ENGINE_OK);
    }
    return ENGINE_OK;
}
