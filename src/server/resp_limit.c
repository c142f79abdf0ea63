/*
 * resp_limit.c - sluiced's rate-limiting RESP commands: SL.ALLOW, SL.PEEK, SL.THROTTLE,
 * SL.SETTLE, SL.ALLOWALL, SL.ACQUIREALL, SL.ACQUIRE, SL.RELEASE, SL.RESET and redis-cell's
 * CL.THROTTLE, over the engine; a decision that waits on Redis is replied in order through a
 * deferred reply slot.
 *
 * long because: every command here answers through the same deferred reply and the same error
 * replies (reply_engine_error, reply_hold_error), which are private to this file.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "proto/text.h"
#include "proto/throttle_args.h"
#include "engine/admin.h"
#include "engine/log.h"
#include "server/resp_commands.h"
#include "server/resp_front.h"
#include "sluice/version.h"

/* [allowed, limit, remaining, retry_after_ms, reset_after_ms], and with shadow_info a sixth
 * element, shadowed: 1 when the rule refused and shadow mode let the request through (the five
 * before it are then an admission's), else 0. A delayed admission reports the delay as
 * retry_after_ms: the caller waits that long, then proceeds. */
static void reply_decision(buf_t *b, const engine_decision_t *ed, bool shadow_info)
{
    int64_t v[6];
    throttle_reply_sl(&ed->d, v);
    v[5] = ed->shadowed ? 1 : 0;
    resp_add_int_array(b, v, shadow_info ? 6 : 5);
}

static rule_state_t *find_rule(conn_t *c, const resp_arg_t *name)
{
    rule_state_t *rs = engine_find(c->loop->worker, name->ptr, name->len);
    if (rs == NULL) {
        char b[72];
        resp_add_error(&c->out, "ERR unknown rule '%s'", resp_show(name, b));
    }
    return rs;
}

/* Parses "COST n" at argv[i..i+1]. */
static bool parse_cost(conn_t *c, const resp_arg_t *argv, size_t i, int64_t *cost)
{
    if (!resp_arg_i64(&argv[i + 1], cost)) {
        resp_add_error(&c->out, "ERR cost is not an integer or out of range");
        return false;
    }
    if (*cost < 0) {
        resp_add_error(&c->out, "ERR cost must be >= 0");
        return false;
    }
    return true;
}

/* Replies the error for an engine status other than OK, or for a decision whose cost the rule
 * can never admit (ed, when not NULL). Returns true when it replied one, false when there was
 * nothing to refuse (the caller replies the decision). */
static bool reply_engine_error(buf_t *b, size_t key_max, int rc, const rule_state_t *rs,
                               const engine_decision_t *ed, int64_t cost)
{
    switch (rc) {
    case ENGINE_OK:
        break;
    case ENGINE_EKEY:
        resp_add_error(b, "ERR key is longer than %zu bytes", key_max);
        return true;
    case ENGINE_ECOST:
        resp_add_error(b, "ERR cost must be >= 0");
        return true;
    case ENGINE_ESTORE:
        resp_add_error(b, "ERR the request store failed");
        return true;
    case ENGINE_ENOTSUP:
        resp_add_error(b, "ERR in-flight limits are not available with this request store");
        return true;
    case ENGINE_ENOHOLDS:
        resp_add_error(b,
                       "ERR rule '%s' holds nothing to acquire or release: its algorithm, %s, "
                       "holds no units",
                       rs->def.name, sl_algorithm_name(rs->def.rule.algorithm));
        return true;
    default:
        resp_add_error(b, "ERR internal error %d", rc);
        return true;
    }
    if (ed != NULL && ed->debt_refused) {
        char err[THROTTLE_ERR_MAX];
        sl_rule_t numbers = rs->def.rule; /* the key's override's max_debt, when it has one */
        numbers.max_debt = ed->max_debt;
        throttle_debt_error(&numbers, err);
        resp_add_error(b, "%s", err);
        return true;
    }
    if (ed != NULL && ed->never && !ed->blocked && cost > ed->d.limit) {
        char label[ENGINE_LABEL_MAX];
        engine_rule_label(rs, label);
        if (rs->def.rule.adaptive.algorithm != SL_ADAPTIVE_NONE) { /* it may grow: not "ever" */
            resp_add_error(b,
                           "ERR cost %lld exceeds what %s admits at once now (its adaptive limit "
                           "is %lld)",
                           (long long)cost, label, (long long)ed->d.limit);
            return true;
        }
        resp_add_error(b, "ERR cost %lld exceeds what %s can ever admit (%lld %s)", (long long)cost,
                       label, (long long)ed->d.limit,
                       sl_rule_holds(&rs->def.rule) ? "at once" : "per window");
        return true;
    }
    return false;
}

/*
 * Deciding and replying, now (the memory store) or when Redis answers (a deferred reply slot
 * keeps the connection's replies in order). One path for SL.ALLOW, SL.PEEK, SL.THROTTLE and
 * CL.THROTTLE; the reply shapes differ.
 */
typedef enum reply_shape {
    SHAPE_SL,        /* [allowed, limit, remaining, retry_after_ms, reset_after_ms] */
    SHAPE_SL_SHADOW, /* SHAPE_SL's and shadowed (SL.ALLOW ... SHADOWINFO) */
    SHAPE_CL,        /* redis-cell: [limited, limit, remaining, retry_after_s, reset_after_s] */
    SHAPE_ACQUIRE,   /* SHAPE_SL's and the hold id (0: none made) */
    SHAPE_RELEASE,   /* +OK */
} reply_shape_t;

typedef struct deferred {
    reply_slot_t *slot;
    reply_shape_t shape;
    int64_t cost;
    size_t key_max;
} deferred_t;

/* An acquire's or a release's own error (engine.h, hold_status): true when it replied one. */
static bool reply_hold_error(buf_t *b, const engine_decision_t *ed)
{
    switch (ed->hold_status) {
    case SL_EHOLD:
        resp_add_error(b, "ERR no such hold: the key holds no live hold of that id (expired, "
                          "released before, or never made); nothing changed");
        return true;
    case SL_EHOLDTIME:
        resp_add_error(b, "ERR timeout must be within 1..%lld ms (rule '%s' hold_timeout)",
                       (long long)(ed->window_ns / 1000000), ed->rule->def.name);
        return true;
    case SL_ENOHOLDS:
        resp_add_error(b, "ERR rule '%s' holds nothing to acquire or release", ed->rule->def.name);
        return true;
    default:
        return false;
    }
}

static void write_hold(buf_t *b, reply_shape_t shape, const engine_decision_t *ed, int64_t cost,
                       size_t key_max)
{
    if (reply_hold_error(b, ed) || reply_engine_error(b, key_max, ENGINE_OK, ed->rule, ed, cost)) {
        return;
    }
    if (shape == SHAPE_RELEASE) {
        if (ed->store_error) { /* on_store_error decides acquires, not whether a hold is freed */
            resp_add_error(b, "ERR " SERVER_RELEASE_UNCONFIRMED);
            return;
        }
        resp_add_simple(b, "OK");
        return;
    }
    int64_t v[6];
    throttle_reply_sl(&ed->d, v);
    v[5] = (int64_t)ed->hold.id;
    resp_add_int_array(b, v, 6);
}

static void write_decision(buf_t *b, reply_shape_t shape, const engine_decision_t *ed, int64_t cost,
                           size_t key_max)
{
    if (shape == SHAPE_ACQUIRE || shape == SHAPE_RELEASE) {
        write_hold(b, shape, ed, cost, key_max);
        return;
    }
    if (shape == SHAPE_SL || shape == SHAPE_SL_SHADOW) {
        if (!reply_engine_error(b, key_max, ENGINE_OK, ed->rule, ed, cost)) {
            reply_decision(b, ed, shape == SHAPE_SL_SHADOW);
        }
        return;
    }
    int64_t reply[5];
    throttle_reply_cl(&ed->d, reply);
    resp_add_int_array(b, reply, 5);
}

static void on_decided(void *arg, int status, const engine_decision_t *ed)
{
    (void)status;
    deferred_t *p = arg;
    write_decision(&p->slot->buf, p->shape, ed, p->cost, p->key_max);
    conn_resolve(p->slot);
    free(p);
}

static void discard_decision(void *arg, int status, const engine_decision_t *ed)
{
    (void)arg;
    (void)status;
    (void)ed;
}

/* A decision or a settle (req) on key under rule, replied in shape. */
static void request_and_reply(conn_t *c, rule_state_t *rs, const resp_arg_t *key,
                              const engine_request_t *req, reply_shape_t shape)
{
    engine_worker_t *w = c->loop->worker;
    size_t key_max = c->loop->srv->cfg->key_max;
    engine_decision_t ed;
    engine_pending_t *pending = NULL;
    int rc = engine_request_start(w, rs, key->ptr, key->len, req, c->loop->now_ns, &ed, &pending);
    if (rc != ENGINE_PENDING) { /* decided at once: the common case, no allocation */
        if (!reply_engine_error(&c->out, key_max, rc, rs, NULL, req->cost)) {
            write_decision(&c->out, shape, &ed, req->cost, key_max);
        }
        return;
    }
    /* it waits for Redis or an override lookup: a reply slot keeps the replies in order */
    deferred_t *p = malloc(sizeof *p);
    reply_slot_t *slot = p != NULL ? conn_defer(c) : NULL;
    if (slot == NULL) {
        free(p);
        engine_pending_then(pending, discard_decision, NULL);
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    *p = (deferred_t){.slot = slot, .shape = shape, .cost = req->cost, .key_max = key_max};
    engine_pending_then(pending, on_decided, p);
}

static void on_reset(void *arg, int status)
{
    reply_slot_t *slot = arg;
    if (status == ENGINE_OK) {
        resp_add_simple(&slot->buf, "OK");
    } else {
        resp_add_error(&slot->buf, "ERR the request store failed");
    }
    conn_resolve(slot);
}

/* ---- rate limiting ------------------------------------------------------------------------- */

static bool parse_timeout(conn_t *c, const resp_arg_t *argv, size_t i, int64_t *hold_ns);

/* The options after "rule key" of SL.ALLOW, SL.PEEK and SL.ACQUIRE, each at most once: NAME
 * value, but SHADOWINFO, a word alone. */
enum {
    OPT_COST = 1u << 0,
    OPT_TIMEOUT = 1u << 1,
    OPT_PRIORITY = 1u << 2,
    OPT_SHADOWINFO = 1u << 3
};
#define OPTIONS 4
static const char *const option_names[OPTIONS] = {"COST", "TIMEOUT", "PRIORITY", "SHADOWINFO"};

/* Replies the error of an option argv[i] that is none of `allowed`, or given twice. */
static void unknown_option(conn_t *c, const resp_arg_t *arg, unsigned allowed, unsigned seen)
{
    char b[72], list[64] = "";
    for (unsigned o = 0; o < OPTIONS; o++) {
        if ((allowed & (1u << o)) && resp_arg_is(arg, option_names[o]) && (seen & (1u << o))) {
            resp_add_error(&c->out, "ERR option %s given twice", option_names[o]);
            return;
        }
        if (allowed & (1u << o)) {
            strcat(list, list[0] ? " or " : "");
            strcat(list, option_names[o]);
        }
    }
    resp_add_error(&c->out, "ERR unknown option '%s' (expected %s)", resp_show(arg, b), list);
}

/* Parses the options at argv[3..argc) of those `allowed` into req, *priority (the PRIORITY's
 * argument, NULL when none) and *seen (the options given). An odd word alone where no option
 * list can be (SL.ALLOW rule key x) is an arity error, as it always was. False when it replied
 * an error. */
static bool parse_options(conn_t *c, const resp_arg_t *argv, size_t argc, unsigned allowed,
                          engine_request_t *req, const resp_arg_t **priority, unsigned *seen)
{
    *seen = 0;
    *priority = NULL;
    if (argc < 3 || (argc == 4 && !resp_arg_is(&argv[3], "SHADOWINFO"))) {
        resp_reply_wrong_arity(c, &argv[0]);
        return false;
    }
    for (size_t i = 3; i < argc; i++) {
        unsigned o = 0;
        while (o < OPTIONS && !((allowed & (1u << o)) && resp_arg_is(&argv[i], option_names[o])))
            o++;
        if (o == OPTIONS || (*seen & (1u << o))) {
            unknown_option(c, &argv[i], allowed, *seen);
            return false;
        }
        *seen |= 1u << o;
        if (o == 3) /* SHADOWINFO */
            continue;
        if (i + 1 == argc) {
            resp_add_error(&c->out, "ERR option %s takes a value", option_names[o]);
            return false;
        }
        bool ok = o == 0   ? parse_cost(c, argv, i, &req->cost)
                  : o == 1 ? parse_timeout(c, argv, i, &req->hold_ns)
                           : (*priority = &argv[i + 1]) != NULL;
        if (!ok)
            return false;
        i++;
    }
    return true;
}

/* The rule argv[1] names, and the request's priority under it: NULL when it replied an error
 * (an unknown rule or priority). */
static rule_state_t *find_rule_priority(conn_t *c, const resp_arg_t *argv,
                                        const resp_arg_t *priority, engine_request_t *req)
{
    rule_state_t *rs = find_rule(c, &argv[1]);
    char err[256];
    if (rs != NULL && priority != NULL &&
        engine_priority(rs, priority->ptr, priority->len, &req->priority, err, sizeof err) != 0) {
        resp_add_error(&c->out, "ERR %s", err);
        return NULL;
    }
    return rs;
}

/* SL.ALLOW rule key [COST n] [PRIORITY p] [SHADOWINFO] and SL.PEEK rule key [PRIORITY p], the
 * options in any order. SHADOWINFO asks for the sixth element (reply_decision); without it the
 * reply is the five every client decodes. */
static void decide_named(conn_t *c, resp_arg_t *argv, size_t argc, bool peek)
{
    engine_request_t req = {.cost = peek ? 0 : 1};
    const resp_arg_t *priority;
    unsigned seen;
    unsigned allowed = peek ? OPT_PRIORITY : OPT_COST | OPT_PRIORITY | OPT_SHADOWINFO;
    if (!parse_options(c, argv, argc, allowed, &req, &priority, &seen)) {
        return;
    }
    rule_state_t *rs = find_rule_priority(c, argv, priority, &req);
    if (rs != NULL) {
        request_and_reply(c, rs, &argv[2], &req,
                          seen & OPT_SHADOWINFO ? SHAPE_SL_SHADOW : SHAPE_SL);
    }
}

void resp_cmd_allow(conn_t *c, resp_arg_t *argv, size_t argc)
{
    decide_named(c, argv, argc, false);
}

static void throttle(conn_t *c, resp_arg_t *argv, size_t argc, throttle_cmd_t cmd);

/* SL.PEEK rule key, or the module's form, SL.PEEK key algorithm limit window_ms [BURST b]
 * [BUCKETS k] [MAX_DELAY ms]: told apart by the argument count; every other count gets the
 * module's errors (one parser for both). */
void resp_cmd_peek(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc == 3 || (argc == 5 && resp_arg_is(&argv[3], "PRIORITY"))) {
        decide_named(c, argv, argc, true);
    } else {
        throttle(c, argv, argc, THROTTLE_SL_PEEK);
    }
}

/* SL.RESET key (the module's form): forgets the key's usage under every inline rule in force,
 * as the module's SL.RESET forgets whatever parameter set its key was used with. */
typedef struct reset_inline {
    reply_slot_t *slot;
    size_t left;          /* resets not answered yet, + 1 while they are being started */
    bool failed;          /* a store failed */
    rule_state_t **rules; /* the inline rules, held */
    size_t n, cap;
    bool oom;
} reset_inline_t;

static void reset_inline_collect(void *arg, rule_state_t *rs)
{
    reset_inline_t *r = arg;
    if (!rs->inline_rule || r->oom) {
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap > 0 ? 2 * r->cap : 16;
        rule_state_t **grown = realloc(r->rules, cap * sizeof *grown);
        if (grown == NULL) {
            r->oom = true;
            return;
        }
        r->rules = grown;
        r->cap = cap;
    }
    engine_rule_hold(rs);
    r->rules[r->n++] = rs;
}

static void reset_inline_done(void *arg, int status)
{
    reset_inline_t *r = arg;
    r->failed = r->failed || status != ENGINE_OK;
    if (--r->left > 0) {
        return;
    }
    if (r->failed) {
        resp_add_error(&r->slot->buf, "ERR the request store failed");
    } else {
        resp_add_simple(&r->slot->buf, "OK");
    }
    conn_resolve(r->slot);
    free(r);
}

static void reset_inline(conn_t *c, const resp_arg_t *key)
{
    size_t key_max = c->loop->srv->cfg->key_max;
    if (key->len > key_max) {
        reply_engine_error(&c->out, key_max, ENGINE_EKEY, NULL, NULL, 0);
        return;
    }
    reset_inline_t *r = calloc(1, sizeof *r);
    if (r != NULL) {
        engine_foreach_rule(c->loop->srv->engine, reset_inline_collect, r);
    }
    reply_slot_t *slot = r != NULL && !r->oom ? conn_defer(c) : NULL;
    if (slot == NULL) {
        for (size_t i = 0; r != NULL && i < r->n; i++) {
            engine_rule_release(r->rules[i]);
        }
        if (r != NULL) {
            free(r->rules);
        }
        free(r);
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    r->slot = slot;
    r->left = 1 + r->n;
    rule_state_t **rules = r->rules;
    size_t n = r->n;
    for (size_t i = 0; i < n; i++) {
        if (engine_reset_async(c->loop->worker, rules[i], key->ptr, key->len, reset_inline_done,
                               r) != ENGINE_OK) {
            reset_inline_done(r, ENGINE_ESTORE);
        }
        engine_rule_release(rules[i]);
    }
    free(rules);
    reset_inline_done(r, ENGINE_OK);
}

/* SL.RESET rule key, or the module's form, SL.RESET key. */
void resp_cmd_reset(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc == 2) {
        reset_inline(c, &argv[1]);
        return;
    }
    if (argc != 3) {
        resp_reply_wrong_arity(c, &argv[0]);
        return;
    }
    rule_state_t *rs = find_rule(c, &argv[1]);
    if (rs == NULL) {
        return;
    }
    reply_slot_t *slot = conn_defer(c);
    if (slot == NULL) {
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    int rc = engine_reset_async(c->loop->worker, rs, argv[2].ptr, argv[2].len, on_reset, slot);
    if (rc != ENGINE_OK) {
        reply_engine_error(&slot->buf, c->loop->srv->cfg->key_max, rc, rs, NULL, 0);
        conn_resolve(slot);
    }
}

/*
 * SL.ALLOWALL rule key [rule key ...] [COST n] [PRIORITY p]: admitted only if every pair admits
 * the cost (every pair's rule having priority p, each under its reserve above p), all
 * or nothing (engine_allowall). The reply is the refusing pair's decision, or, when every pair
 * was charged, the decision of the pair with the least left.
 *
 * SL.ACQUIREALL rule key [rule key ...] [COST n] [TIMEOUT ms] [PRIORITY p]: the same of
 * acquires (ENGINE_ALL_ACQUIRE), every pair's rule an in-flight rule: a hold on every pair, or on
 * none. The reply is SL.ALLOWALL's decision and, sixth, the array of the pairs' hold ids in the
 * order given (each 0 when the whole was refused; a pair named twice holds one hold, its id in
 * both places).
 */
typedef struct allowall_reply {
    reply_slot_t *slot;
    int64_t cost;
    size_t key_max;
    bool acquire;
} allowall_reply_t;

static void allowall_replied(void *arg, const engine_decision_t *d, size_t n, size_t refused)
{
    allowall_reply_t *r = arg;
    buf_t *b = &r->slot->buf;
    const engine_decision_t *shown = &d[0];
    if (refused < n) {
        shown = &d[refused];
        int64_t cost = shown->never ? shown->cost : r->cost; /* a pair named twice: both */
        if (reply_engine_error(b, r->key_max, ENGINE_OK, shown->rule, shown, cost)) {
            conn_resolve(r->slot);
            free(r);
            return;
        }
    } else {
        for (size_t i = 1; i < n; i++) {
            if (d[i].d.remaining < shown->d.remaining) {
                shown = &d[i];
            }
        }
    }
    if (!r->acquire) {
        reply_decision(b, shown, false);
    } else {
        int64_t v[6];
        throttle_reply_sl(&shown->d, v);
        resp_add_array(b, 6);
        for (size_t i = 0; i < 5; i++) {
            resp_add_int(b, v[i]);
        }
        resp_add_array(b, n);
        for (size_t i = 0; i < n; i++) {
            resp_add_int(b, refused < n ? 0 : (int64_t)d[i].hold.id);
        }
    }
    conn_resolve(r->slot);
    free(r);
}

/* The options ending SL.ALLOWALL and SL.ACQUIREALL, in any order, each at most once (a word that
 * comes back is a rule of the pairs): COST, PRIORITY, and SL.ACQUIREALL's TIMEOUT. Returns the
 * index where they start, or 0 when it replied an error. */
static size_t allowall_options(conn_t *c, const resp_arg_t *argv, size_t argc, bool acquire,
                               int64_t *cost, int64_t *hold_ns, const resp_arg_t **priority)
{
    size_t end = argc;
    unsigned seen = 0;
    for (int k = 0; k < 3 && end >= 5; k++) {
        const resp_arg_t *name = &argv[end - 2];
        if (resp_arg_is(name, "COST") && !(seen & OPT_COST)) {
            if (!parse_cost(c, argv, end - 2, cost)) {
                return 0;
            }
            seen |= OPT_COST;
        } else if (resp_arg_is(name, "PRIORITY") && !(seen & OPT_PRIORITY)) {
            *priority = &argv[end - 1];
            seen |= OPT_PRIORITY;
        } else if (acquire && resp_arg_is(name, "TIMEOUT") && !(seen & OPT_TIMEOUT)) {
            if (!parse_timeout(c, argv, end - 2, hold_ns)) {
                return 0;
            }
            seen |= OPT_TIMEOUT;
        } else {
            break;
        }
        end -= 2;
    }
    return end;
}

static void allowall_command(conn_t *c, resp_arg_t *argv, size_t argc, bool acquire)
{
    int64_t cost = 1, hold_ns = 0;
    const resp_arg_t *priority = NULL;
    size_t end = allowall_options(c, argv, argc, acquire, &cost, &hold_ns, &priority);
    if (end == 0) {
        return;
    }
    size_t npairs_args = end - 1;
    if (npairs_args == 0 || npairs_args % 2 != 0) {
        resp_reply_wrong_arity(c, &argv[0]);
        return;
    }
    size_t n = npairs_args / 2;
    if (n > ENGINE_CHECKS_MAX) {
        resp_add_error(&c->out, "ERR at most %d rule/key pairs", ENGINE_CHECKS_MAX);
        return;
    }
    engine_check_t checks[ENGINE_CHECKS_MAX];
    for (size_t i = 0; i < n; i++) {
        const resp_arg_t *key = &argv[2 + 2 * i];
        engine_request_t req = {.cost = cost};
        checks[i] = (engine_check_t){.rule = find_rule_priority(c, &argv[2 * i], priority, &req),
                                     .key = key->ptr,
                                     .key_len = key->len,
                                     .cost = cost,
                                     .hold_ns = hold_ns};
        if (checks[i].rule == NULL) {
            return;
        }
        checks[i].priority = req.priority;
    }
    allowall_reply_t *r = malloc(sizeof *r);
    reply_slot_t *slot = r != NULL ? conn_defer(c) : NULL;
    if (slot == NULL) {
        free(r);
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    size_t key_max = c->loop->srv->cfg->key_max, bad;
    *r = (allowall_reply_t){.slot = slot, .cost = cost, .key_max = key_max, .acquire = acquire};
    int rc = engine_allowall(c->loop->worker, checks, n, c->loop->now_ns,
                             acquire ? ENGINE_ALL_ACQUIRE : 0, allowall_replied, r, &bad);
    if (rc != ENGINE_OK) {
        if (rc == ENGINE_ENOTSUP) {
            resp_add_error(&slot->buf, "ERR out of memory");
        } else if (rc == ENGINE_EHOLDTIME) {
            resp_add_error(&slot->buf,
                           "ERR timeout must be within 1..%lld ms (rule '%s' hold_timeout)",
                           (long long)(checks[bad].rule->def.rule.window_ns / 1000000),
                           checks[bad].rule->def.name);
        } else {
            reply_engine_error(&slot->buf, key_max, rc, checks[bad].rule, NULL, cost);
        }
        conn_resolve(slot);
        free(r);
    }
}

void resp_cmd_allowall(conn_t *c, resp_arg_t *argv, size_t argc)
{
    allowall_command(c, argv, argc, false);
}

void resp_cmd_acquireall(conn_t *c, resp_arg_t *argv, size_t argc)
{
    allowall_command(c, argv, argc, true);
}

/* An inline rule's command, parsed as the module parses it (throttle_parse): 0, or -1 with the
 * error in err, which also refuses the module's CLOSED_FROM (sluiced's rules have a cold_start,
 * and a closed start on an inline rule has no window to be in). */
static int parse_inline(throttle_cmd_t cmd, const resp_arg_t *argv, size_t argc,
                        throttle_req_t *req, char err[THROTTLE_ERR_MAX])
{
    if (throttle_parse(cmd, argv, argc, req, err) != 0) {
        return -1;
    }
    if (req->closed_from_ms >= 0) {
        snprintf(err, THROTTLE_ERR_MAX, "%s", THROTTLE_ERR_CLOSED_FROM);
        return -1;
    }
    return 0;
}

/* SL.THROTTLE key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] [COST n] and
 * CL.THROTTLE key max_burst count period_s [quantity]: arguments and errors shared with the
 * Redis module (proto/throttle_args.h), one table per parameter set. */
static void throttle(conn_t *c, resp_arg_t *argv, size_t argc, throttle_cmd_t cmd)
{
    throttle_req_t req;
    char err[THROTTLE_ERR_MAX];
    if (parse_inline(cmd, argv, argc, &req, err) != 0) {
        resp_add_error(&c->out, "%s", err);
        return;
    }
    rule_state_t *rs = NULL;
    char eerr[ENGINE_ERR_MAX];
    if (engine_inline_rule(c->loop->worker, &req.params, &c->inline_budget, c->loop->now_ns, &rs,
                           eerr) != ENGINE_OK) {
        resp_add_error(&c->out, "ERR %s", eerr);
        return;
    }
    engine_request_t er = {.cost = req.cost, .reserve = req.reserve};
    request_and_reply(c, rs, &argv[1], &er, cmd == THROTTLE_CL ? SHAPE_CL : SHAPE_SL);
}

void resp_cmd_throttle(conn_t *c, resp_arg_t *argv, size_t argc)
{
    throttle(c, argv, argc, THROTTLE_SL);
}

/*
 * SL.SETTLE rule key reserved actual [AT unix_ms], or the module's form, SL.SETTLE key algorithm
 * limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] RESERVED r ACTUAL a [AT unix_ms]: told
 * apart by the RESERVED / ACTUAL words, which only the module's form has. Replies with the key's
 * decision after settling, as a peek reports it.
 */
void resp_cmd_settle(conn_t *c, resp_arg_t *argv, size_t argc)
{
    bool module_form = false;
    for (size_t i = 3; i < argc && !module_form; i++) {
        module_form = resp_arg_is(&argv[i], "RESERVED") || resp_arg_is(&argv[i], "ACTUAL");
    }
    throttle_req_t req;
    char err[THROTTLE_ERR_MAX];
    rule_state_t *rs = NULL;
    if (module_form) {
        if (parse_inline(THROTTLE_SL_SETTLE, argv, argc, &req, err) != 0) {
            resp_add_error(&c->out, "%s", err);
            return;
        }
        char eerr[ENGINE_ERR_MAX];
        if (engine_inline_rule(c->loop->worker, &req.params, &c->inline_budget, c->loop->now_ns,
                               &rs, eerr) != ENGINE_OK) {
            resp_add_error(&c->out, "ERR %s", eerr);
            return;
        }
    } else {
        if (argc != 5 && argc != 7) {
            resp_reply_wrong_arity(c, &argv[0]);
            return;
        }
        /* the named form's numbers are positional: the same checks as the module's options */
        resp_arg_t opts[6] = {{"RESERVED", 8}, argv[3], {"ACTUAL", 6}, argv[4]};
        size_t nopts = 4;
        if (argc == 7) {
            if (!resp_arg_is(&argv[5], "AT")) {
                resp_reply_syntax(c);
                return;
            }
            opts[4] = argv[5];
            opts[5] = argv[6];
            nopts = 6;
        }
        if (throttle_parse_settle(opts, nopts, 0, &req, err) != 0) {
            resp_add_error(&c->out, "%s", err);
            return;
        }
        if ((rs = find_rule(c, &argv[1])) == NULL) {
            return;
        }
    }
    engine_request_t er = {
        .settle = true,
        .reserved = req.reserved,
        .actual = req.actual,
        .charged_ns = req.at_ms < 0 ? -1 : throttle_settle_charged_ns(&req, c->loop->now_ns)};
    request_and_reply(c, rs, &argv[module_form ? 1 : 2], &er, SHAPE_SL);
}

void resp_cmd_cl_throttle(conn_t *c, resp_arg_t *argv, size_t argc)
{
    throttle(c, argv, argc, THROTTLE_CL);
}

/* ---- in-flight limits ---------------------------------------------------------------------- */

/* Parses "TIMEOUT ms" at argv[i..i+1] into *hold_ns (the rule's bounds are checked by the
 * store's core, which knows the key's numbers). */
static bool parse_timeout(conn_t *c, const resp_arg_t *argv, size_t i, int64_t *hold_ns)
{
    int64_t ms;
    if (!resp_arg_i64(&argv[i + 1], &ms) || ms < 1 || ms > SL_WINDOW_MAX_NS / 1000000) {
        resp_add_error(&c->out, "ERR timeout must be a positive integer of milliseconds");
        return false;
    }
    *hold_ns = ms * 1000000;
    return true;
}

/* SL.ACQUIRE rule key [COST n] [TIMEOUT ms]: the decision and, admitted, a hold's id. */
void resp_cmd_acquire(conn_t *c, resp_arg_t *argv, size_t argc)
{
    engine_request_t req = {.cost = 1, .hold_op = STORE_HOLD_ACQUIRE};
    const resp_arg_t *priority;
    unsigned seen;
    if (!parse_options(c, argv, argc, OPT_COST | OPT_TIMEOUT | OPT_PRIORITY, &req, &priority,
                       &seen)) {
        return;
    }
    rule_state_t *rs = find_rule_priority(c, argv, priority, &req);
    if (rs != NULL) {
        request_and_reply(c, rs, &argv[2], &req, SHAPE_ACQUIRE);
    }
}

/* LATENCY's value: integer milliseconds or a duration with a unit ("1500us"), at most an hour. */
static bool parse_latency(conn_t *c, const resp_arg_t *arg, int64_t *ns)
{
    int64_t ms;
    bool ok = resp_arg_i64(arg, &ms) ? ms >= 0 && ms <= SL_ADAPTIVE_LATENCY_MAX_NS / 1000000 &&
                                           (*ns = ms * 1000000, true)
                                     : sl_duration_parse(arg->ptr, arg->len, ns) == SL_OK &&
                                           *ns <= SL_ADAPTIVE_LATENCY_MAX_NS;
    if (!ok) {
        resp_add_error(
            &c->out, "ERR latency must be an integer of milliseconds or a duration (1500us, 2ms), "
                     "at most 1h");
    }
    return ok;
}

/* SL.RELEASE's options after the id, [LATENCY ms] [DROPPED], into req's sample: false when
 * it replied an error. */
static bool parse_release_options(conn_t *c, const resp_arg_t *argv, size_t argc,
                                  engine_request_t *req)
{
    req->sample = (sl_sample_t){-1, false};
    bool latency_seen = false;
    for (size_t i = 4; i < argc; i++) {
        if (resp_arg_is(&argv[i], "LATENCY") && !latency_seen && i + 1 < argc) {
            if (!parse_latency(c, &argv[++i], &req->sample.latency_ns)) {
                return false;
            }
            latency_seen = true;
        } else if (resp_arg_is(&argv[i], "DROPPED") && !req->sample.dropped) {
            req->sample.dropped = true;
        } else {
            resp_reply_syntax(c);
            return false;
        }
    }
    req->sampled = latency_seen || req->sample.dropped;
    return true;
}

/* SL.RELEASE rule key id [LATENCY ms] [DROPPED]: +OK, or the error of a hold the key does not
 * hold. LATENCY and DROPPED report how the hold's work went to an adaptive limit. */
void resp_cmd_release(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc < 4 || argc > 7) {
        resp_reply_wrong_arity(c, &argv[0]);
        return;
    }
    int64_t id;
    if (!resp_arg_i64(&argv[3], &id) || id < 0) {
        resp_add_error(&c->out, "ERR hold id is not a non-negative integer");
        return;
    }
    engine_request_t req = {.hold_op = STORE_HOLD_RELEASE, .hold_id = (uint64_t)id};
    if (!parse_release_options(c, argv, argc, &req)) {
        return;
    }
    rule_state_t *rs = find_rule(c, &argv[1]);
    if (rs != NULL) {
        request_and_reply(c, rs, &argv[2], &req, SHAPE_RELEASE);
    }
}
