/*
 * resp_commands.c - sluiced's RESP front end: the request loop and the command table.
 *
 * Every command is declared once, in commands[] below: name, arity (Redis's convention: N
 * exactly N arguments counting the name, -N at least N), flags and handler. COMMAND COUNT/INFO
 * and the dispatcher read the same table. Replies and errors follow Redis's wording so client
 * libraries and people recognise them.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "proto/throttle_args.h"
#include "server/admin.h"
#include "server/log.h"
#include "server/resp_front.h"
#include "server/server.h"
#include "sluice/version.h"

#define NS_PER_MS  INT64_C(1000000)
#define NS_PER_SEC INT64_C(1000000000)

enum {
    CMD_NOAUTH = 1u << 0, /* allowed before AUTH */
    CMD_WRITE = 1u << 1,  /* changes state (COMMAND INFO says "write") */
    CMD_ADMIN = 1u << 2,  /* changes rules or overrides */
};

typedef void (*command_fn)(conn_t *c, resp_arg_t *argv, size_t argc);

typedef struct command {
    const char *name; /* lower case */
    int arity;
    unsigned flags;
    command_fn fn;
} command_t;

/* ---- helpers ------------------------------------------------------------------------------- */

static bool arg_is(const resp_arg_t *a, const char *word)
{
    return throttle_arg_is(a, word);
}

static bool arg_i64(const resp_arg_t *a, int64_t *out)
{
    return throttle_arg_i64(a, out);
}

static void reply_wrong_arity(conn_t *c, const resp_arg_t *name)
{
    char lower[64];
    size_t n = name->len < sizeof lower - 1 ? name->len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++) {
        lower[i] = (char)tolower((unsigned char)name->ptr[i]);
    }
    lower[n] = '\0';
    resp_add_error(&c->out, "ERR wrong number of arguments for '%s' command", lower);
}

static void reply_syntax(conn_t *c)
{
    resp_add_error(&c->out, "ERR syntax error");
}

/* An argument for an error message: at most 64 bytes, printable. */
static const char *show(const resp_arg_t *a, char buf[72])
{
    size_t n = a->len < 64 ? a->len : 64;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        buf[i] = ch >= 0x20 && ch < 0x7f && ch != '\'' ? (char)ch : '?';
    }
    if (a->len > 64) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* [allowed, limit, remaining, retry_after_ms, reset_after_ms]. A delayed admission reports the
 * delay as retry_after_ms: the caller waits that long, then proceeds. */
static void reply_decision(buf_t *b, const engine_decision_t *ed)
{
    int64_t v[5];
    throttle_reply_sl(&ed->d, v);
    resp_add_int_array(b, v, 5);
}

static rule_state_t *find_rule(conn_t *c, const resp_arg_t *name)
{
    rule_state_t *rs = engine_find(c->loop->worker, name->ptr, name->len);
    if (rs == NULL) {
        char b[72];
        resp_add_error(&c->out, "ERR unknown rule '%s'", show(name, b));
    }
    return rs;
}

/* Parses "COST n" at argv[i..i+1]. */
static bool parse_cost(conn_t *c, const resp_arg_t *argv, size_t i, int64_t *cost)
{
    if (!arg_i64(&argv[i + 1], cost)) {
        resp_add_error(&c->out, "ERR cost is not an integer or out of range");
        return false;
    }
    if (*cost < 0) {
        resp_add_error(&c->out, "ERR cost must be >= 0");
        return false;
    }
    return true;
}

/* Engine statuses other than OK as errors; returns false after replying one. */
static bool engine_ok(buf_t *b, size_t key_max, int rc, const rule_state_t *rs,
                      const engine_decision_t *ed, int64_t cost)
{
    switch (rc) {
    case ENGINE_OK:
        break;
    case ENGINE_EKEY:
        resp_add_error(b, "ERR key is longer than %zu bytes", key_max);
        return false;
    case ENGINE_ECOST:
        resp_add_error(b, "ERR cost must be >= 0");
        return false;
    case ENGINE_ESTORE:
        resp_add_error(b, "ERR the request store failed");
        return false;
    default:
        resp_add_error(b, "ERR internal error %d", rc);
        return false;
    }
    if (ed != NULL && ed->never && !ed->blocked) {
        resp_add_error(b, "ERR cost %lld exceeds what rule '%s' can ever admit (%lld per window)",
                       (long long)cost, rs->def.name, (long long)ed->d.limit);
        return false;
    }
    return true;
}

/*
 * Deciding and replying, now (the memory store) or when Redis answers (a deferred reply slot
 * keeps the connection's replies in order). One path for SL.ALLOW, SL.PEEK, SL.THROTTLE and
 * CL.THROTTLE; the reply shapes differ.
 */
typedef enum reply_shape {
    SHAPE_SL, /* [allowed, limit, remaining, retry_after_ms, reset_after_ms] */
    SHAPE_CL, /* redis-cell: [limited, limit, remaining, retry_after_s, reset_after_s] */
} reply_shape_t;

typedef struct deferred {
    reply_slot_t *slot;
    reply_shape_t shape;
    int64_t cost;
    size_t key_max;
} deferred_t;

static void write_decision(buf_t *b, reply_shape_t shape, const engine_decision_t *ed, int64_t cost,
                           size_t key_max)
{
    if (shape == SHAPE_SL) {
        if (engine_ok(b, key_max, ENGINE_OK, ed->rule, ed, cost)) {
            reply_decision(b, ed);
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
        if (engine_ok(&c->out, key_max, rc, rs, NULL, req->cost)) {
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

static void decide_and_reply(conn_t *c, rule_state_t *rs, const resp_arg_t *key, int64_t cost,
                             reply_shape_t shape)
{
    engine_request_t req = {.cost = cost};
    request_and_reply(c, rs, key, &req, shape);
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

static void decide_named(conn_t *c, resp_arg_t *argv, size_t argc, bool peek)
{
    int64_t cost = peek ? 0 : 1;
    if (!peek && argc == 5 && arg_is(&argv[3], "COST")) {
        if (!parse_cost(c, argv, 3, &cost)) {
            return;
        }
    } else if (argc != 3) {
        if (argc == 5 && !peek) {
            reply_syntax(c);
        } else {
            reply_wrong_arity(c, &argv[0]);
        }
        return;
    }
    rule_state_t *rs = find_rule(c, &argv[1]);
    if (rs != NULL) {
        decide_and_reply(c, rs, &argv[2], cost, SHAPE_SL);
    }
}

static void cmd_allow(conn_t *c, resp_arg_t *argv, size_t argc)
{
    decide_named(c, argv, argc, false);
}

static void throttle(conn_t *c, resp_arg_t *argv, size_t argc, throttle_cmd_t cmd);

/* SL.PEEK rule key, or the module's form, SL.PEEK key algorithm limit window_ms [BURST b]
 * [BUCKETS k] [MAX_DELAY ms]: told apart by the argument count; every other count gets the
 * module's errors (one parser for both). */
static void cmd_peek(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc == 3) {
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
        engine_ok(&c->out, key_max, ENGINE_EKEY, NULL, NULL, 0);
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
static void cmd_reset(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc == 2) {
        reset_inline(c, &argv[1]);
        return;
    }
    if (argc != 3) {
        reply_wrong_arity(c, &argv[0]);
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
        engine_ok(&slot->buf, c->loop->srv->cfg->key_max, rc, rs, NULL, 0);
        conn_resolve(slot);
    }
}

/*
 * SL.ALLOWALL rule key [rule key ...] [COST n]: admitted only if every pair admits the cost, all
 * or nothing (engine_allowall). The reply is the refusing pair's decision, or, when every pair
 * was charged, the decision of the pair with the least left.
 */
typedef struct allowall_reply {
    reply_slot_t *slot;
    int64_t cost;
    size_t key_max;
} allowall_reply_t;

static void allowall_replied(void *arg, const engine_decision_t *d, size_t n, size_t refused)
{
    allowall_reply_t *r = arg;
    buf_t *b = &r->slot->buf;
    if (refused < n) {
        int64_t cost = d[refused].never ? d[refused].cost : r->cost; /* a pair named twice: both */
        if (engine_ok(b, r->key_max, ENGINE_OK, d[refused].rule, &d[refused], cost)) {
            reply_decision(b, &d[refused]);
        }
    } else {
        const engine_decision_t *least = &d[0];
        for (size_t i = 1; i < n; i++) {
            if (d[i].d.remaining < least->d.remaining) {
                least = &d[i];
            }
        }
        reply_decision(b, least);
    }
    conn_resolve(r->slot);
    free(r);
}

static void cmd_allowall(conn_t *c, resp_arg_t *argv, size_t argc)
{
    int64_t cost = 1;
    size_t npairs_args = argc - 1;
    if (argc >= 5 && arg_is(&argv[argc - 2], "COST") && (argc - 3) % 2 == 0) {
        if (!parse_cost(c, argv, argc - 2, &cost)) {
            return;
        }
        npairs_args = argc - 3;
    }
    if (npairs_args == 0 || npairs_args % 2 != 0) {
        reply_wrong_arity(c, &argv[0]);
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
        checks[i] = (engine_check_t){.rule = find_rule(c, &argv[1 + 2 * i]),
                                     .key = key->ptr,
                                     .key_len = key->len,
                                     .cost = cost};
        if (checks[i].rule == NULL) {
            return;
        }
    }
    allowall_reply_t *r = malloc(sizeof *r);
    reply_slot_t *slot = r != NULL ? conn_defer(c) : NULL;
    if (slot == NULL) {
        free(r);
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    size_t key_max = c->loop->srv->cfg->key_max, bad;
    *r = (allowall_reply_t){.slot = slot, .cost = cost, .key_max = key_max};
    int rc =
        engine_allowall(c->loop->worker, checks, n, c->loop->now_ns, 0, allowall_replied, r, &bad);
    if (rc != ENGINE_OK) {
        if (rc == ENGINE_ENOTSUP) {
            resp_add_error(&slot->buf, "ERR out of memory");
        } else {
            engine_ok(&slot->buf, key_max, rc, checks[bad].rule, NULL, cost);
        }
        conn_resolve(slot);
        free(r);
    }
}

/* SL.THROTTLE key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] [COST n] and
 * CL.THROTTLE key max_burst count period_s [quantity]: arguments and errors shared with the
 * Redis module (proto/throttle_args.h), one table per parameter set. */
static void throttle(conn_t *c, resp_arg_t *argv, size_t argc, throttle_cmd_t cmd)
{
    throttle_req_t req;
    char err[THROTTLE_ERR_MAX];
    if (throttle_parse(cmd, argv, argc, &req, err) != 0) {
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
    decide_and_reply(c, rs, &argv[1], req.cost, cmd == THROTTLE_CL ? SHAPE_CL : SHAPE_SL);
}

static void cmd_throttle(conn_t *c, resp_arg_t *argv, size_t argc)
{
    throttle(c, argv, argc, THROTTLE_SL);
}

/*
 * SL.SETTLE rule key reserved actual [AT unix_ms], or the module's form, SL.SETTLE key algorithm
 * limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] RESERVED r ACTUAL a [AT unix_ms]: told
 * apart by the RESERVED / ACTUAL words, which only the module's form has. Replies with the key's
 * decision after settling, as a peek reports it.
 */
static void cmd_settle(conn_t *c, resp_arg_t *argv, size_t argc)
{
    bool module_form = false;
    for (size_t i = 3; i < argc && !module_form; i++) {
        module_form = arg_is(&argv[i], "RESERVED") || arg_is(&argv[i], "ACTUAL");
    }
    throttle_req_t req;
    char err[THROTTLE_ERR_MAX];
    rule_state_t *rs = NULL;
    if (module_form) {
        if (throttle_parse(THROTTLE_SL_SETTLE, argv, argc, &req, err) != 0) {
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
            reply_wrong_arity(c, &argv[0]);
            return;
        }
        /* the named form's numbers are positional: the same checks as the module's options */
        resp_arg_t opts[6] = {{"RESERVED", 8}, argv[3], {"ACTUAL", 6}, argv[4]};
        size_t nopts = 4;
        if (argc == 7) {
            if (!arg_is(&argv[5], "AT")) {
                reply_syntax(c);
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

static void cmd_cl_throttle(conn_t *c, resp_arg_t *argv, size_t argc)
{
    throttle(c, argv, argc, THROTTLE_CL);
}

/* ---- rules and overrides ------------------------------------------------------------------- */

/*
 * SL.RULE and SL.OVERRIDE run on the config thread (server/admin.h): the command takes a reply
 * slot, and the reply is written when the operation is done and its change in force on this
 * loop. Validation, the store and the reload are admin.c's; this is only the RESP shape.
 */
static void admin_replied(admin_req_t *r)
{
    reply_slot_t *slot = r->arg;
    buf_t *b = &slot->buf;
    switch (r->status) {
    case ADMIN_OK:
        break;
    case ADMIN_NOTFOUND:
        if (r->op == ADMIN_RULE_DEL || r->op == ADMIN_OVERRIDE_DEL) {
            resp_add_int(b, 0);
        } else if (r->op == ADMIN_OVERRIDE_GET) {
            resp_add_null(b);
        } else {
            resp_add_error(b, "ERR %s", r->err);
        }
        goto out;
    default:
        resp_add_error(b, "ERR %s", r->err);
        goto out;
    }
    switch (r->op) {
    case ADMIN_RULE_GET:
    case ADMIN_RULES_EXPORT:
    case ADMIN_OVERRIDE_GET:
        resp_add_bulk(b, r->text, strlen(r->text));
        break;
    case ADMIN_RULE_DEL:
    case ADMIN_OVERRIDE_DEL:
        resp_add_int(b, 1);
        break;
    case ADMIN_RULE_LIST:
        resp_add_array(b, r->nrows);
        for (size_t i = 0; i < r->nrows; i++) {
            resp_add_bulk(b, r->rows[i].name, strlen(r->rows[i].name));
        }
        break;
    case ADMIN_RULE_PUT:
    case ADMIN_RULES_IMPORT:
    case ADMIN_OVERRIDE_PUT:
        resp_add_simple(b, "OK");
        break;
    case ADMIN_OVERRIDE_LIST: {
        /* like SCAN: [next cursor ("0" at the end), [key, json, key, json, ...]]; a cursor is
         * the last key returned, in hex */
        bool failed;
        char *cursor = admin_next_cursor(r, &failed);
        resp_add_array(b, 2);
        if (cursor != NULL) {
            resp_add_bulk(b, cursor, strlen(cursor));
        } else {
            resp_add_bulk(b, "0", 1);
        }
        b->failed = b->failed || failed;
        free(cursor);
        resp_add_array(b, 2 * r->novs);
        for (size_t i = 0; i < r->novs; i++) {
            resp_add_bulk(b, r->ovs[i].key, r->ovs[i].key_len);
            resp_add_bulk(b, r->ovs[i].json, strlen(r->ovs[i].json));
        }
        break;
    }
    }
out:
    conn_resolve(slot);
    admin_free(r);
}

static void admin_start(conn_t *c, admin_op_t op, const resp_arg_t *rule, const resp_arg_t *key,
                        const resp_arg_t *body, bool option, size_t limit)
{
    admin_req_t *r = admin_new(c->loop->srv->engine, op, rule ? rule->ptr : NULL,
                               rule ? rule->len : 0, key ? key->ptr : NULL, key ? key->len : 0,
                               body ? body->ptr : NULL, body ? body->len : 0);
    reply_slot_t *slot = r != NULL ? conn_defer(c) : NULL;
    if (slot == NULL) {
        admin_free(r);
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    r->arg = slot;
    r->done = admin_replied;
    r->replace = option;
    r->limit = limit;
    admin_submit(c->loop->worker, r);
}

/* One subcommand of SL.RULE or SL.OVERRIDE: its name, the arguments it takes after the
 * subcommand (rule, key, body: which are present), and its operation. */
typedef struct admin_command {
    const char *name;
    admin_op_t op;
    bool rule, key, body;
    const char *option; /* an optional last word (IMPORT ... REPLACE) */
} admin_command_t;

static const admin_command_t rule_commands[] = {
    {"SET", ADMIN_RULE_PUT, true, false, true, NULL},
    {"GET", ADMIN_RULE_GET, true, false, false, NULL},
    {"DEL", ADMIN_RULE_DEL, true, false, false, NULL},
    {"LIST", ADMIN_RULE_LIST, false, false, false, NULL},
    {"IMPORT", ADMIN_RULES_IMPORT, false, false, true, "REPLACE"},
    {"EXPORT", ADMIN_RULES_EXPORT, false, false, false, NULL},
};

static const admin_command_t override_commands[] = {
    {"SET", ADMIN_OVERRIDE_PUT, true, true, true, NULL},
    {"GET", ADMIN_OVERRIDE_GET, true, true, false, NULL},
    {"DEL", ADMIN_OVERRIDE_DEL, true, true, false, NULL},
};

static void admin_command(conn_t *c, resp_arg_t *argv, size_t argc, const admin_command_t *table,
                          size_t n, const char *names)
{
    char b[72];
    for (size_t i = 0; i < n; i++) {
        const admin_command_t *cmd = &table[i];
        if (!arg_is(&argv[1], cmd->name)) {
            continue;
        }
        size_t want = 2 + cmd->rule + cmd->key + cmd->body;
        bool option = cmd->option != NULL && argc == want + 1;
        if (argc != want && !option) {
            reply_wrong_arity(c, &argv[0]);
            return;
        }
        if (option && !arg_is(&argv[want], cmd->option)) {
            reply_syntax(c);
            return;
        }
        size_t at = 2;
        const resp_arg_t *rule = cmd->rule ? &argv[at++] : NULL;
        const resp_arg_t *key = cmd->key ? &argv[at++] : NULL;
        const resp_arg_t *body = cmd->body ? &argv[at++] : NULL;
        admin_start(c, cmd->op, rule, key, body, option, ADMIN_LIST_DEFAULT);
        return;
    }
    resp_add_error(&c->out, "ERR unknown subcommand '%s'. Try %s.", show(&argv[1], b), names);
}

static void cmd_rule(conn_t *c, resp_arg_t *argv, size_t argc)
{
    admin_command(c, argv, argc, rule_commands, sizeof rule_commands / sizeof rule_commands[0],
                  "SET, GET, DEL, LIST, IMPORT, EXPORT");
}

/* SL.OVERRIDE LIST rule [cursor] [COUNT n]: a page of the rule's overrides, by key. */
static void override_list(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc < 3 || argc > 6) {
        reply_wrong_arity(c, &argv[0]);
        return;
    }
    size_t at = 3;
    unsigned char key[OVERRIDE_KEY_MAX];
    size_t key_len = 0;
    bool after = false;
    if (at < argc && !arg_is(&argv[at], "COUNT")) {
        const resp_arg_t *cur = &argv[at++];
        after = !(cur->len == 1 && cur->ptr[0] == '0');
        if (after && !admin_cursor_parse(cur->ptr, cur->len, key, &key_len)) {
            resp_add_error(&c->out, "ERR invalid cursor");
            return;
        }
    }
    int64_t count = ADMIN_LIST_DEFAULT;
    if (at < argc) {
        if (at + 2 != argc || !arg_is(&argv[at], "COUNT")) {
            reply_syntax(c);
            return;
        }
        if (!arg_i64(&argv[at + 1], &count) || count < 1 || count > ADMIN_LIST_MAX) {
            resp_add_error(&c->out, "ERR count must be 1 to %d", ADMIN_LIST_MAX);
            return;
        }
    }
    resp_arg_t cursor = {.ptr = (const char *)key, .len = key_len};
    admin_start(c, ADMIN_OVERRIDE_LIST, &argv[2], after ? &cursor : NULL, NULL, false,
                (size_t)count);
}

static void cmd_override(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (arg_is(&argv[1], "LIST")) {
        override_list(c, argv, argc);
        return;
    }
    admin_command(c, argv, argc, override_commands,
                  sizeof override_commands / sizeof override_commands[0], "SET, GET, DEL, LIST");
}

/* ---- connection and server commands -------------------------------------------------------- */

static void cmd_ping(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc == 1) {
        resp_add_simple(&c->out, "PONG");
    } else if (argc == 2) {
        resp_add_bulk(&c->out, argv[1].ptr, argv[1].len);
    } else {
        reply_wrong_arity(c, &argv[0]);
    }
}

static void cmd_echo(conn_t *c, resp_arg_t *argv, size_t argc)
{
    (void)argc;
    resp_add_bulk(&c->out, argv[1].ptr, argv[1].len);
}

static void cmd_quit(conn_t *c, resp_arg_t *argv, size_t argc)
{
    (void)argv;
    (void)argc;
    resp_add_simple(&c->out, "OK");
    c->closing = true;
}

static void cmd_select(conn_t *c, resp_arg_t *argv, size_t argc)
{
    (void)argc;
    int64_t db;
    if (!arg_i64(&argv[1], &db)) {
        resp_add_error(&c->out, "ERR value is not an integer or out of range");
    } else if (db != 0) {
        resp_add_error(&c->out, "ERR DB index is out of range");
    } else {
        resp_add_simple(&c->out, "OK");
    }
}

/* Compares in time independent of where the first difference is. */
static bool secret_equal(const char *secret, const resp_arg_t *given)
{
    size_t n = strlen(secret);
    unsigned char diff = (unsigned char)(n != given->len);
    for (size_t i = 0; i < given->len; i++) {
        diff |= (unsigned char)(given->ptr[i] ^ secret[i < n ? i : 0]);
    }
    return n > 0 && diff == 0;
}

/* Checks [user] password; replies the error itself and returns false on failure. */
/*
 * Checks [user] password and switches the connection to that user; replies the error itself
 * and returns false on failure. Two users, in the spirit of Redis's ACLs: "default" (deciding;
 * its password is --requirepass) and "admin" (also rules, overrides and resets; its password is
 * --admin-password; the user exists only when that is set). With no admin password every client
 * may administer.
 */
static bool check_auth(conn_t *c, const resp_arg_t *user, const resp_arg_t *pass)
{
    const server_config_t *cfg = c->loop->srv->cfg;
    if (user != NULL && arg_is(user, "admin") && cfg->admin_password != NULL) {
        if (!secret_equal(cfg->admin_password, pass)) {
            resp_add_error(&c->out,
                           "WRONGPASS invalid username-password pair or user is disabled.");
            return false;
        }
        c->authed = true;
        c->admin = true;
        return true;
    }
    const char *secret = cfg->requirepass;
    if (secret == NULL) {
        resp_add_error(&c->out,
                       "ERR AUTH <password> called without any password configured for the "
                       "default user. Are you sure your configuration is correct?");
        return false;
    }
    if ((user != NULL && !arg_is(user, "default")) || !secret_equal(secret, pass)) {
        resp_add_error(&c->out, "WRONGPASS invalid username-password pair or user is disabled.");
        return false;
    }
    c->authed = true;
    c->admin = cfg->admin_password == NULL;
    return true;
}

static void cmd_auth(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc > 3) {
        reply_syntax(c);
        return;
    }
    if (check_auth(c, argc == 3 ? &argv[1] : NULL, &argv[argc - 1])) {
        resp_add_simple(&c->out, "OK");
    }
}

/* A client's name, as CLIENT SETNAME and HELLO SETNAME set it: printable, no spaces (it is one
 * field of a CLIENT LIST line). Replies the error and returns false when it is not one. */
static bool set_client_name(conn_t *c, const resp_arg_t *n)
{
    for (size_t i = 0; i < n->len; i++) {
        if (n->ptr[i] <= ' ' || n->ptr[i] > '~') {
            resp_add_error(&c->out, "ERR Client names cannot contain spaces, newlines or "
                                    "special characters.");
            return false;
        }
    }
    if (n->len >= sizeof c->name) {
        resp_add_error(&c->out, "ERR client name longer than %zu bytes", sizeof c->name - 1);
        return false;
    }
    memcpy(c->name, n->ptr, n->len);
    c->name[n->len] = '\0';
    return true;
}

static void cmd_hello(conn_t *c, resp_arg_t *argv, size_t argc)
{
    size_t i = 1;
    if (argc > 1) {
        int64_t proto;
        if (!arg_i64(&argv[1], &proto)) {
            resp_add_error(&c->out, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (proto != 2) {
            resp_add_error(&c->out, "NOPROTO unsupported protocol version");
            return;
        }
        i = 2;
    }
    /* the options' syntax first; then AUTH; a name is set only once authenticated, with
     * CLIENT SETNAME's checks */
    const resp_arg_t *auth_user = NULL, *auth_pass = NULL, *name = NULL;
    for (; i < argc; i++) {
        if (arg_is(&argv[i], "AUTH") && i + 2 < argc) {
            auth_user = &argv[i + 1];
            auth_pass = &argv[i + 2];
            i += 2;
        } else if (arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
            name = &argv[i + 1];
            i += 1;
        } else {
            char b[72];
            resp_add_error(&c->out, "ERR Syntax error in HELLO option '%s'", show(&argv[i], b));
            return;
        }
    }
    if (auth_pass != NULL && !check_auth(c, auth_user, auth_pass)) {
        return;
    }
    if (!c->authed) {
        resp_add_error(&c->out, "NOAUTH HELLO must be called with the client already "
                                "authenticated, otherwise the HELLO <proto> AUTH <user> <pass> "
                                "option can be used to authenticate the client and select the "
                                "RESP protocol version at the same time");
        return;
    }
    if (name != NULL && !set_client_name(c, name)) {
        return;
    }
    resp_add_array(&c->out, 14);
    resp_add_bulk(&c->out, "server", 6);
    resp_add_bulk(&c->out, "sluice", 6);
    resp_add_bulk(&c->out, "version", 7);
    resp_add_bulk(&c->out, SL_VERSION_STRING, strlen(SL_VERSION_STRING));
    resp_add_bulk(&c->out, "proto", 5);
    resp_add_int(&c->out, 2);
    resp_add_bulk(&c->out, "id", 2);
    resp_add_int(&c->out, (int64_t)c->id);
    resp_add_bulk(&c->out, "mode", 4);
    resp_add_bulk(&c->out, "standalone", 10);
    resp_add_bulk(&c->out, "role", 4);
    resp_add_bulk(&c->out, "master", 6);
    resp_add_bulk(&c->out, "modules", 7);
    resp_add_array(&c->out, 0);
}

static void client_info_line(conn_t *c, char *buf, size_t cap)
{
    int64_t now_ns = (int64_t)uv_now(&c->loop->uv) * NS_PER_MS;
    snprintf(buf, cap, "id=%llu addr=%s:%d name=%s age=%lld idle=%lld db=0 proto=%s\n",
             (unsigned long long)c->id, c->addr, c->port, c->name,
             (long long)((now_ns - c->created_ns) / NS_PER_SEC),
             (long long)((now_ns - c->last_active_ns) / NS_PER_SEC), c->proto->name);
}

static void cmd_client(conn_t *c, resp_arg_t *argv, size_t argc)
{
    char b[72];
    if (arg_is(&argv[1], "ID") && argc == 2) {
        resp_add_int(&c->out, (int64_t)c->id);
    } else if (arg_is(&argv[1], "GETNAME") && argc == 2) {
        if (c->name[0] == '\0') {
            resp_add_null(&c->out);
        } else {
            resp_add_bulk(&c->out, c->name, strlen(c->name));
        }
    } else if (arg_is(&argv[1], "SETNAME") && argc == 3) {
        if (set_client_name(c, &argv[2])) {
            resp_add_simple(&c->out, "OK");
        }
    } else if (arg_is(&argv[1], "INFO") && argc == 2) {
        char line[512];
        client_info_line(c, line, sizeof line);
        resp_add_bulk(&c->out, line, strlen(line));
    } else if (arg_is(&argv[1], "LIST") && argc == 2) {
        /* The clients of this connection's loop (each loop owns its connections). */
        buf_t text = {0};
        for (conn_t *o = c->loop->conns; o != NULL; o = o->next) {
            char line[512];
            client_info_line(o, line, sizeof line);
            buf_add_str(&text, line);
        }
        resp_add_bulk(&c->out, text.data != NULL ? text.data : "", text.len);
        buf_free(&text);
    } else if ((arg_is(&argv[1], "SETINFO") && argc == 4) ||
               (arg_is(&argv[1], "NO-EVICT") && argc == 3) ||
               (arg_is(&argv[1], "NO-TOUCH") && argc == 3)) {
        resp_add_simple(&c->out, "OK"); /* accepted for clients that send them; no effect */
    } else {
        resp_add_error(&c->out,
                       "ERR unknown subcommand or wrong number of arguments for '%s'. "
                       "Try CLIENT ID, GETNAME, SETNAME, INFO, LIST.",
                       show(&argv[1], b));
    }
}

static const command_t commands[];
static const size_t ncommands;

static void command_entry(conn_t *c, const command_t *cmd)
{
    resp_add_array(&c->out, 6);
    resp_add_bulk(&c->out, cmd->name, strlen(cmd->name));
    resp_add_int(&c->out, cmd->arity);
    size_t nflags = 1 + ((cmd->flags & CMD_NOAUTH) != 0);
    resp_add_array(&c->out, nflags);
    const char *kind = (cmd->flags & CMD_WRITE) ? "write" : "readonly";
    resp_add_simple(&c->out, kind);
    if (cmd->flags & CMD_NOAUTH) {
        resp_add_simple(&c->out, "no_auth");
    }
    /* Key positions: the first argument for commands that take a key first (none of ours is
     * routed by key; clients only need the shape). */
    resp_add_int(&c->out, 0);
    resp_add_int(&c->out, 0);
    resp_add_int(&c->out, 0);
}

/*
 * COMMAND DOCS: each command described as Redis 7 describes its own (summary, since, group,
 * arguments, subcommands), so redis-cli's HELP and the hints it shows while typing work for
 * ours. redis-cli builds a hint from the arguments: a value's name, "TOKEN name" for an option
 * with a token, [...] around optional ones, "x [x ...]" for repeated ones, '|' between the
 * alternatives of a oneof and ' ' between the parts of a block.
 */
enum {
    DOC_OPTIONAL = 1u << 0,
    DOC_MULTIPLE = 1u << 1,
};

typedef struct doc_arg {
    const char *name;           /* shown in hints; NULL ends a list */
    const char *type;           /* key, string, integer, pure-token, block or oneof */
    const char *token;          /* the word before the value ("BURST"), or NULL */
    unsigned flags;             /* DOC_OPTIONAL, DOC_MULTIPLE */
    const struct doc_arg *args; /* a block's or oneof's parts, or NULL */
} doc_arg_t;

typedef struct command_doc {
    const char *name;               /* as in commands[]; a subcommand "sl.rule|set" */
    const char *summary;            /* one line */
    const char *group;              /* Redis's groups: connection, server; module for SL.* */
    const doc_arg_t *args;          /* NULL: none */
    const struct command_doc *subs; /* subcommands, NULL-name terminated, or NULL */
} command_doc_t;

#define DOC_END                                                                                    \
    {                                                                                              \
        NULL, NULL, NULL, 0, NULL                                                                  \
    }
#define DOC_KEY                                                                                    \
    {                                                                                              \
        "key", "key", NULL, 0, NULL                                                                \
    }
#define DOC_RULE                                                                                   \
    {                                                                                              \
        "rule", "string", NULL, 0, NULL                                                            \
    }
#define DOC_COST                                                                                   \
    {                                                                                              \
        "cost", "integer", "COST", DOC_OPTIONAL, NULL                                              \
    }

/* the inline rule: key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] */
#define DOC_INLINE_RULE                                                                            \
    DOC_KEY, {"algorithm", "string", NULL, 0, NULL}, {"limit", "integer", NULL, 0, NULL},          \
        {"window_ms", "integer", NULL, 0, NULL},                                                   \
        {"burst", "integer", "BURST", DOC_OPTIONAL, NULL},                                         \
        {"buckets", "integer", "BUCKETS", DOC_OPTIONAL, NULL},                                     \
    {                                                                                              \
        "max_delay_ms", "integer", "MAX_DELAY", DOC_OPTIONAL, NULL                                 \
    }

static const doc_arg_t doc_rule_key[] = {DOC_RULE, DOC_KEY, DOC_END};
static const doc_arg_t doc_inline[] = {DOC_INLINE_RULE, DOC_END};
static const doc_arg_t doc_throttle[] = {DOC_INLINE_RULE, DOC_COST, DOC_END};
static const doc_arg_t doc_allow[] = {DOC_RULE, DOC_KEY, DOC_COST, DOC_END};
static const doc_arg_t doc_allowall[] = {
    {"pair", "block", NULL, DOC_MULTIPLE, doc_rule_key}, DOC_COST, DOC_END};
static const doc_arg_t doc_peek_forms[] = {
    {"named", "block", NULL, 0, doc_rule_key}, {"inline", "block", NULL, 0, doc_inline}, DOC_END};
static const doc_arg_t doc_peek[] = {{"form", "oneof", NULL, 0, doc_peek_forms}, DOC_END};
static const doc_arg_t doc_reset_forms[] = {
    {"named", "block", NULL, 0, doc_rule_key}, DOC_KEY, DOC_END};
static const doc_arg_t doc_reset[] = {{"form", "oneof", NULL, 0, doc_reset_forms}, DOC_END};
static const doc_arg_t doc_settle_named[] = {DOC_RULE,
                                             DOC_KEY,
                                             {"reserved", "integer", NULL, 0, NULL},
                                             {"actual", "integer", NULL, 0, NULL},
                                             {"unix-ms", "integer", "AT", DOC_OPTIONAL, NULL},
                                             DOC_END};
static const doc_arg_t doc_settle_inline[] = {DOC_INLINE_RULE,
                                              {"reserved", "integer", "RESERVED", 0, NULL},
                                              {"actual", "integer", "ACTUAL", 0, NULL},
                                              {"unix-ms", "integer", "AT", DOC_OPTIONAL, NULL},
                                              DOC_END};
static const doc_arg_t doc_settle_forms[] = {{"named", "block", NULL, 0, doc_settle_named},
                                             {"inline", "block", NULL, 0, doc_settle_inline},
                                             DOC_END};
static const doc_arg_t doc_settle[] = {{"form", "oneof", NULL, 0, doc_settle_forms}, DOC_END};
static const doc_arg_t doc_cl_throttle[] = {DOC_KEY,
                                            {"max_burst", "integer", NULL, 0, NULL},
                                            {"count", "integer", NULL, 0, NULL},
                                            {"period", "integer", NULL, 0, NULL},
                                            {"quantity", "integer", NULL, DOC_OPTIONAL, NULL},
                                            DOC_END};
static const doc_arg_t doc_name[] = {{"name", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_name_json[] = {
    {"name", "string", NULL, 0, NULL}, {"json", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_import[] = {{"yaml", "string", NULL, 0, NULL},
                                       {"replace", "pure-token", "REPLACE", DOC_OPTIONAL, NULL},
                                       DOC_END};
static const doc_arg_t doc_rule_key_json[] = {
    DOC_RULE, DOC_KEY, {"json", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_override_list[] = {DOC_RULE,
                                              {"cursor", "string", NULL, DOC_OPTIONAL, NULL},
                                              {"count", "integer", "COUNT", DOC_OPTIONAL, NULL},
                                              DOC_END};
static const doc_arg_t doc_message[] = {{"message", "string", NULL, DOC_OPTIONAL, NULL}, DOC_END};
static const doc_arg_t doc_echo[] = {{"message", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_auth[] = {{"username", "string", NULL, DOC_OPTIONAL, NULL},
                                     {"password", "string", NULL, 0, NULL},
                                     DOC_END};
static const doc_arg_t doc_hello_auth[] = {
    {"username", "string", NULL, 0, NULL}, {"password", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_hello_opts[] = {{"protover", "integer", NULL, 0, NULL},
                                           {"auth", "block", "AUTH", DOC_OPTIONAL, doc_hello_auth},
                                           {"clientname", "string", "SETNAME", DOC_OPTIONAL, NULL},
                                           DOC_END};
static const doc_arg_t doc_hello[] = {{"arguments", "block", NULL, DOC_OPTIONAL, doc_hello_opts},
                                      DOC_END};
static const doc_arg_t doc_setname[] = {{"connection-name", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_setinfo[] = {
    {"attr", "string", NULL, 0, NULL}, {"value", "string", NULL, 0, NULL}, DOC_END};
static const doc_arg_t doc_command_names[] = {
    {"command-name", "string", NULL, DOC_OPTIONAL | DOC_MULTIPLE, NULL}, DOC_END};
static const doc_arg_t doc_info[] = {{"section", "string", NULL, DOC_OPTIONAL | DOC_MULTIPLE, NULL},
                                     DOC_END};
static const doc_arg_t doc_select[] = {{"index", "integer", NULL, 0, NULL}, DOC_END};

#define DOC_SUBS_END                                                                               \
    {                                                                                              \
        NULL, NULL, NULL, NULL, NULL                                                               \
    }

static const command_doc_t doc_rule_subs[] = {
    {"sl.rule|set", "Creates or replaces a rule, given as JSON", "module", doc_name_json, NULL},
    {"sl.rule|get", "Returns a rule as JSON", "module", doc_name, NULL},
    {"sl.rule|del", "Deletes a rule and its overrides", "module", doc_name, NULL},
    {"sl.rule|list", "Returns the names of the rules", "module", NULL, NULL},
    {"sl.rule|import", "Adds and changes the rules of a YAML rules file (REPLACE: only those)",
     "module", doc_import, NULL},
    {"sl.rule|export", "Returns every rule and override as a YAML rules file", "module", NULL,
     NULL},
    DOC_SUBS_END,
};

static const command_doc_t doc_override_subs[] = {
    {"sl.override|set", "Gives a key of a rule its own numbers, given as JSON", "module",
     doc_rule_key_json, NULL},
    {"sl.override|get", "Returns a key's override as JSON, or nil", "module", doc_rule_key, NULL},
    {"sl.override|del", "Deletes a key's override", "module", doc_rule_key, NULL},
    {"sl.override|list", "Returns a page of a rule's overrides, like SCAN", "module",
     doc_override_list, NULL},
    DOC_SUBS_END,
};

static const command_doc_t doc_client_subs[] = {
    {"client|id", "Returns the connection's id", "connection", NULL, NULL},
    {"client|getname", "Returns the connection's name", "connection", NULL, NULL},
    {"client|setname", "Sets the connection's name", "connection", doc_setname, NULL},
    {"client|info", "Returns information about the connection", "connection", NULL, NULL},
    {"client|list", "Lists the connections of this connection's thread", "connection", NULL, NULL},
    {"client|setinfo", "Accepted for clients that send it; no effect", "connection", doc_setinfo,
     NULL},
    DOC_SUBS_END,
};

static const command_doc_t doc_command_subs[] = {
    {"command|count", "Returns the number of commands", "server", NULL, NULL},
    {"command|info", "Returns information about commands", "server", doc_command_names, NULL},
    {"command|docs", "Returns documentary information about commands", "server", doc_command_names,
     NULL},
    DOC_SUBS_END,
};

static const command_doc_t command_docs[] = {
    {"sl.throttle", "Decides a request for a key under an inline rule (no configuration needed)",
     "module", doc_throttle, NULL},
    {"sl.allow", "Decides a request for a key under a named rule", "module", doc_allow, NULL},
    {"cl.throttle", "Decides a request as redis-cell's CL.THROTTLE does, with its reply", "module",
     doc_cl_throttle, NULL},
    {"sl.allowall", "Admits the cost for every rule/key pair, or for none", "module", doc_allowall,
     NULL},
    {"sl.peek", "Reports what a request would be told, consuming nothing", "module", doc_peek,
     NULL},
    {"sl.settle",
     "Settles a reservation with its actual cost: refunds the rest, or charges past "
     "the limit",
     "module", doc_settle, NULL},
    {"sl.reset", "Forgets a key's usage (under a named rule, or under every inline rule)", "module",
     doc_reset, NULL},
    {"sl.rule", "Manages the rules", "module", NULL, doc_rule_subs},
    {"sl.override", "Manages the per-key overrides of a rule", "module", NULL, doc_override_subs},
    {"ping", "Returns PONG, or the message", "connection", doc_message, NULL},
    {"echo", "Returns the message", "connection", doc_echo, NULL},
    {"auth", "Authenticates the connection", "connection", doc_auth, NULL},
    {"hello", "Handshakes with the server (RESP2 only)", "connection", doc_hello, NULL},
    {"client", "Manages the connection", "connection", NULL, doc_client_subs},
    {"command", "Returns information about the commands", "server", NULL, doc_command_subs},
    {"info", "Returns information and statistics about the server", "server", doc_info, NULL},
    {"select", "Selects database 0, the only one", "connection", doc_select, NULL},
    {"quit", "Closes the connection", "connection", NULL, NULL},
};

#define NCOMMAND_DOCS (sizeof command_docs / sizeof command_docs[0])

static size_t doc_count_args(const doc_arg_t *a)
{
    size_t n = 0;
    while (a != NULL && a[n].name != NULL) {
        n++;
    }
    return n;
}

static void doc_add_args(buf_t *b, const doc_arg_t *args)
{
    size_t n = doc_count_args(args);
    resp_add_array(b, n);
    for (size_t i = 0; i < n; i++) {
        const doc_arg_t *a = &args[i];
        size_t nflags = ((a->flags & DOC_OPTIONAL) != 0) + ((a->flags & DOC_MULTIPLE) != 0);
        resp_add_array(b, 2 * (2 + (a->token != NULL) + (nflags > 0) + (a->args != NULL)));
        resp_add_bulk(b, "name", 4);
        resp_add_bulk(b, a->name, strlen(a->name));
        resp_add_bulk(b, "type", 4);
        resp_add_bulk(b, a->type, strlen(a->type));
        if (a->token != NULL) {
            resp_add_bulk(b, "token", 5);
            resp_add_bulk(b, a->token, strlen(a->token));
        }
        if (nflags > 0) {
            resp_add_bulk(b, "flags", 5);
            resp_add_array(b, nflags);
            if (a->flags & DOC_OPTIONAL) {
                resp_add_simple(b, "optional");
            }
            if (a->flags & DOC_MULTIPLE) {
                resp_add_simple(b, "multiple");
            }
        }
        if (a->args != NULL) {
            resp_add_bulk(b, "arguments", 9);
            doc_add_args(b, a->args);
        }
    }
}

/* One command's map (a flat array): summary, since, group, [arguments], [subcommands]. */
static void doc_add(buf_t *b, const command_doc_t *d)
{
    size_t nsubs = 0;
    while (d->subs != NULL && d->subs[nsubs].name != NULL) {
        nsubs++;
    }
    resp_add_array(b, 2 * (3 + (d->args != NULL) + (nsubs > 0)));
    resp_add_bulk(b, "summary", 7);
    resp_add_bulk(b, d->summary, strlen(d->summary));
    resp_add_bulk(b, "since", 5);
    resp_add_bulk(b, SL_VERSION_STRING, strlen(SL_VERSION_STRING));
    resp_add_bulk(b, "group", 5);
    resp_add_bulk(b, d->group, strlen(d->group));
    if (d->args != NULL) {
        resp_add_bulk(b, "arguments", 9);
        doc_add_args(b, d->args);
    }
    if (nsubs > 0) {
        resp_add_bulk(b, "subcommands", 11);
        resp_add_array(b, 2 * nsubs);
        for (size_t i = 0; i < nsubs; i++) {
            resp_add_bulk(b, d->subs[i].name, strlen(d->subs[i].name));
            doc_add(b, &d->subs[i]);
        }
    }
}

/* No names asks for every command; else the ones named (each once, unknown names left out). */
static bool doc_asked(const command_doc_t *d, const resp_arg_t *argv, size_t argc)
{
    bool asked = argc == 2;
    for (size_t a = 2; a < argc && !asked; a++) {
        asked = arg_is(&argv[a], d->name);
    }
    return asked;
}

/* COMMAND DOCS [name ...]: a map (a flat array in RESP2) of name -> doc. */
static void command_docs_reply(conn_t *c, resp_arg_t *argv, size_t argc)
{
    size_t n = 0;
    for (size_t i = 0; i < NCOMMAND_DOCS; i++) {
        n += doc_asked(&command_docs[i], argv, argc);
    }
    resp_add_array(&c->out, 2 * n);
    for (size_t i = 0; i < NCOMMAND_DOCS; i++) {
        if (doc_asked(&command_docs[i], argv, argc)) {
            resp_add_bulk(&c->out, command_docs[i].name, strlen(command_docs[i].name));
            doc_add(&c->out, &command_docs[i]);
        }
    }
}

static void cmd_command(conn_t *c, resp_arg_t *argv, size_t argc)
{
    char b[72];
    if (argc == 1) {
        resp_add_array(&c->out, ncommands);
        for (size_t i = 0; i < ncommands; i++) {
            command_entry(c, &commands[i]);
        }
    } else if (arg_is(&argv[1], "COUNT")) {
        resp_add_int(&c->out, (int64_t)ncommands);
    } else if (arg_is(&argv[1], "INFO")) {
        resp_add_array(&c->out, argc - 2);
        for (size_t a = 2; a < argc; a++) {
            const command_t *found = NULL;
            for (size_t i = 0; i < ncommands && found == NULL; i++) {
                if (arg_is(&argv[a], commands[i].name)) {
                    found = &commands[i];
                }
            }
            if (found != NULL) {
                command_entry(c, found);
            } else {
                resp_add_null(&c->out);
            }
        }
    } else if (arg_is(&argv[1], "DOCS")) {
        command_docs_reply(c, argv, argc);
    } else {
        resp_add_error(&c->out, "ERR unknown subcommand '%s'. Try COMMAND COUNT, INFO, DOCS.",
                       show(&argv[1], b));
    }
}

/*
 * INFO [section ...]: Redis's sections where we have them, as Redis answers them. No argument,
 * "default", "all" and "everything" give every section; several names give those sections (in
 * our order, once each); a name we have no section for gives nothing: an empty bulk string, as
 * from Redis (clients probing "INFO memory" or "INFO replication" find no fields, not errors).
 */
typedef struct info_ctx {
    server_t *srv;
    int64_t now_ns;
    bool counted; /* the fields below are filled (one walk of the rules serves every section) */
    size_t keys;
    size_t bytes;
    size_t rules;
    size_t inline_rules;
} info_ctx_t;

static void info_rule(void *arg, rule_state_t *rs)
{
    info_ctx_t *x = arg;
    sl_table_stats_t st;
    engine_rule_stats(rs, &st);
    x->keys += st.keys;
    x->bytes += st.bytes;
    if (rs->inline_rule) {
        x->inline_rules++;
    } else {
        x->rules++;
    }
}

static void info_count(info_ctx_t *x)
{
    if (!x->counted) {
        engine_foreach_rule(x->srv->engine, info_rule, x);
        x->counted = true;
    }
}

static void info_server(buf_t *b, info_ctx_t *x)
{
    server_t *srv = x->srv;
    buf_printf(b, "# Server\r\n");
    buf_printf(b, "sluice_version:%s\r\n", SL_VERSION_STRING);
    /* Some clients gate features on redis_version; sluice speaks the RESP2 subset of 7.0. */
    buf_printf(b, "redis_version:7.0.0\r\n");
    buf_printf(b, "redis_mode:standalone\r\n");
    buf_printf(b, "process_id:%d\r\n", (int)getpid());
    buf_printf(b, "tcp_port:%d\r\n", srv->cfg->resp_port);
    buf_printf(b, "http_port:%d\r\n", srv->cfg->http_port);
    buf_printf(b, "threads:%u\r\n", srv->nloops);
    buf_printf(b, "request_store:%s\r\n", engine_store_name(srv->engine));
    buf_printf(b, "uptime_in_seconds:%lld\r\n",
               (long long)((x->now_ns - srv->started_ns) / NS_PER_SEC));
}

static void info_clients(buf_t *b, info_ctx_t *x)
{
    server_t *srv = x->srv;
    buf_printf(b, "# Clients\r\n");
    buf_printf(b, "connected_clients:%zu\r\n", atomic_load(&srv->clients));
    buf_printf(b, "maxclients:%zu\r\n", srv->cfg->max_clients);
    buf_printf(b, "clients_input_buffers_bytes:%zu\r\n", atomic_load(&srv->input_bytes));
}

static void info_stats(buf_t *b, info_ctx_t *x)
{
    server_t *srv = x->srv;
    buf_printf(b, "# Stats\r\n");
    buf_printf(b, "total_connections_received:%llu\r\n",
               (unsigned long long)SERVER_STAT(srv, connections));
    buf_printf(b, "total_commands_processed:%llu\r\n",
               (unsigned long long)SERVER_STAT(srv, commands));
    buf_printf(b, "total_http_requests:%llu\r\n",
               (unsigned long long)SERVER_STAT(srv, http_requests));
    buf_printf(b, "rejected_connections:%llu\r\n",
               (unsigned long long)SERVER_STAT(srv, rejected_clients));
    buf_printf(b, "protocol_errors:%llu\r\n",
               (unsigned long long)SERVER_STAT(srv, protocol_errors));
    buf_printf(b, "client_output_buffer_limit_disconnections:%llu\r\n",
               (unsigned long long)(SERVER_STAT(srv, output_hard_closed) +
                                    SERVER_STAT(srv, output_soft_closed)));
    buf_printf(b, "evicted_clients:%llu\r\n",
               (unsigned long long)SERVER_STAT(srv, evicted_clients));
}

static void info_rules(buf_t *b, info_ctx_t *x)
{
    info_count(x);
    buf_printf(b, "# Rules\r\n");
    buf_printf(b, "rules_version:%lld\r\n", (long long)engine_version(x->srv->engine));
    buf_printf(b, "rules:%zu\r\n", x->rules);
    buf_printf(b, "inline_rules:%zu\r\n", x->inline_rules);
    buf_printf(b, "reloads:%llu\r\n", (unsigned long long)engine_reloads(x->srv->engine));
    buf_printf(b, "keys:%zu\r\n", x->keys);
    buf_printf(b, "table_bytes:%zu\r\n", x->bytes);
}

static void info_persistence(buf_t *b, info_ctx_t *x)
{
    server_t *srv = x->srv;
    buf_printf(b, "# Persistence\r\n");
    buf_printf(b, "loading:0\r\n");
    buf_printf(b, "snapshots:%llu\r\n", (unsigned long long)atomic_load(&srv->snapshots));
    buf_printf(b, "snapshot_errors:%llu\r\n",
               (unsigned long long)atomic_load(&srv->snapshot_errors));
    buf_printf(b, "last_snapshot_time:%lld\r\n",
               (long long)(atomic_load(&srv->last_snapshot_ns) / NS_PER_SEC));
}

/* Redis's shape: one line per database that holds keys. Every key of every rule counts, in
 * database 0; keys carry no TTL of their own (they are dropped when their quota is fresh). */
static void info_keyspace(buf_t *b, info_ctx_t *x)
{
    info_count(x);
    buf_printf(b, "# Keyspace\r\n");
    if (x->keys > 0) {
        buf_printf(b, "db0:keys=%zu,expires=0,avg_ttl=0\r\n", x->keys);
    }
}

static const struct info_section {
    const char *name; /* lower case, as INFO's argument */
    void (*fn)(buf_t *b, info_ctx_t *x);
} info_sections[] = {
    {"server", info_server}, {"clients", info_clients},         {"stats", info_stats},
    {"rules", info_rules},   {"persistence", info_persistence}, {"keyspace", info_keyspace},
};

#define INFO_NSECTIONS (sizeof info_sections / sizeof info_sections[0])

static void cmd_info(conn_t *c, resp_arg_t *argv, size_t argc)
{
    bool want[INFO_NSECTIONS] = {false};
    for (size_t a = 1; a < argc; a++) {
        bool every = arg_is(&argv[a], "all") || arg_is(&argv[a], "default") ||
                     arg_is(&argv[a], "everything");
        for (size_t i = 0; i < INFO_NSECTIONS; i++) {
            want[i] = want[i] || every || arg_is(&argv[a], info_sections[i].name);
        }
    }
    info_ctx_t x = {.srv = c->loop->srv, .now_ns = sl_now_ns()};
    buf_t b = {0};
    bool first = true;
    for (size_t i = 0; i < INFO_NSECTIONS; i++) {
        if (argc == 1 || want[i]) {
            if (!first) {
                buf_add_str(&b, "\r\n");
            }
            info_sections[i].fn(&b, &x);
            first = false;
        }
    }
    resp_add_bulk(&c->out, b.data != NULL ? b.data : "", b.len);
    buf_free(&b);
}

/* ---- the table ----------------------------------------------------------------------------- */

static const command_t commands[] = {
    /* the hot ones first: lookup is a scan */
    {"sl.throttle", -5, CMD_WRITE, cmd_throttle},
    {"sl.allow", -3, CMD_WRITE, cmd_allow},
    {"cl.throttle", -5, CMD_WRITE, cmd_cl_throttle},
    {"sl.allowall", -3, CMD_WRITE, cmd_allowall},
    {"sl.settle", -5, CMD_WRITE, cmd_settle},
    {"sl.peek", -3, 0, cmd_peek},
    {"sl.reset", -2, CMD_WRITE | CMD_ADMIN, cmd_reset},
    {"sl.rule", -2, CMD_WRITE | CMD_ADMIN, cmd_rule},
    {"sl.override", -3, CMD_WRITE | CMD_ADMIN, cmd_override},
    {"ping", -1, 0, cmd_ping},
    {"echo", 2, 0, cmd_echo},
    {"auth", -2, CMD_NOAUTH, cmd_auth},
    {"hello", -1, CMD_NOAUTH, cmd_hello},
    {"client", -2, 0, cmd_client},
    {"command", -1, 0, cmd_command},
    {"info", -1, 0, cmd_info},
    {"select", 2, 0, cmd_select},
    {"quit", 1, CMD_NOAUTH, cmd_quit},
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

bool resp_command_is_admin(const resp_arg_t *name)
{
    for (size_t i = 0; i < ncommands; i++) {
        if (arg_is(name, commands[i].name)) {
            return (commands[i].flags & CMD_ADMIN) != 0;
        }
    }
    return false;
}

static const command_t *lookup(const resp_arg_t *name)
{
    for (size_t i = 0; i < ncommands; i++) {
        if (arg_is(name, commands[i].name)) {
            return &commands[i];
        }
    }
    return NULL;
}

typedef struct dispatch_ctx {
    conn_t *c;
    resp_arg_t *argv;
    size_t argc;
} dispatch_ctx_t;

static void dispatch_now(void *arg)
{
    dispatch_ctx_t *x = arg;
    conn_t *c = x->c;
    resp_arg_t *argv = x->argv;
    size_t argc = x->argc;
    const command_t *cmd = lookup(&argv[0]);
    if (cmd == NULL) {
        char b[72], args[256] = "";
        size_t used = 0;
        for (size_t i = 1; i < argc && used < 160; i++) {
            char a[72];
            int n = snprintf(args + used, sizeof args - used, "'%s' ", show(&argv[i], a));
            used += n > 0 ? (size_t)n : 0;
        }
        resp_add_error(&c->out, "ERR unknown command '%s', with args beginning with: %s",
                       show(&argv[0], b), args);
        return;
    }
    if (!c->authed && !(cmd->flags & CMD_NOAUTH)) {
        resp_add_error(&c->out, "NOAUTH Authentication required.");
        return;
    }
    if ((cmd->flags & CMD_ADMIN) && !c->admin) {
        resp_add_error(&c->out,
                       "NOPERM this user has no permissions to run the '%s' command (AUTH admin "
                       "<password> first)",
                       cmd->name);
        return;
    }
    if ((cmd->arity > 0 && argc != (size_t)cmd->arity) ||
        (cmd->arity < 0 && argc < (size_t)-cmd->arity)) {
        reply_wrong_arity(c, &argv[0]);
        return;
    }
    cmd->fn(c, argv, argc);
}

void resp_dispatch(conn_t *c, resp_arg_t *argv, size_t argc)
{
    dispatch_ctx_t x = {c, argv, argc};
    /* While replies are deferred (the Redis store), later replies queue behind them. */
    conn_in_order(c, dispatch_now, &x);
}

/* The first word of an HTTP request line, or a header's name: what a browser sends when a web
 * page posts to 127.0.0.1:6390 (as Redis, such a connection is closed before anything in it
 * runs: the body could hold commands). */
static bool looks_like_http(const resp_arg_t *first)
{
    static const char *const words[] = {"post",    "get",   "put",     "delete", "head",
                                        "options", "patch", "connect", "trace",  "host:"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (arg_is(first, words[i])) {
            return true;
        }
    }
    return false;
}

/* A RESP connection's state (conn_state()). */
typedef struct resp_conn {
    size_t need; /* bytes c->in must hold before parsing can get further */
} resp_conn_t;

/* The arguments of the request being answered: one array per loop thread, pointing into the
 * connection's input buffer. */
static _Thread_local resp_arg_t loop_argv[RESP_ARGS_MAX];

static void resp_process(conn_t *c)
{
    loop_t *l = c->loop;
    resp_conn_t *rc = conn_state(c);
    resp_arg_t *argv = loop_argv;
    server_t *srv = l->srv;
    resp_limits_t limits = {.bulk_max = srv->cfg->request_max, .args_max = RESP_ARGS_MAX};
    char err[RESP_ERR_MAX];
    size_t off = 0;
    uint64_t n = 0;
    int64_t start_ns = sl_now_ns();
    l->now_ns = start_ns;
    engine_worker_begin(l->worker);
    c->in_batch = true;
    /* a request whose bulk argument is still arriving is not parsed again until it has all */
    bool waiting = c->in_len < rc->need;
    while (off < c->in_len && !c->closing && !c->writing && !waiting) {
        size_t argc = 0;
        long used = resp_parse(c->in + off, c->in_len - off, &limits, argv, RESP_ARGS_MAX, &argc,
                               &rc->need, err);
        if (used == RESP_PARTIAL) {
            if (c->in_len - off > srv->cfg->request_max + 64 * 1024) {
                resp_add_error(&c->out, "ERR Protocol error: request larger than %zu bytes",
                               srv->cfg->request_max);
                c->closing = true;
                atomic_fetch_add_explicit(&l->stats.protocol_errors, 1, memory_order_relaxed);
            }
            break;
        }
        if (used < 0) {
            resp_add_error(&c->out, "ERR %s", err);
            c->closing = true;
            atomic_fetch_add_explicit(&l->stats.protocol_errors, 1, memory_order_relaxed);
            break;
        }
        bool inline_request = c->in[off] != '*';
        off += (size_t)used;
        rc->need = 0;
        if (argc == 0) {
            continue;
        }
        if (inline_request && looks_like_http(&argv[0])) {
            /* a web page making a browser POST to this port: nothing it sent runs */
            log_warn("client %s:%d sent an HTTP request to the RESP port: possible cross-protocol "
                     "attack, connection closed",
                     c->addr, c->port);
            atomic_fetch_add_explicit(&l->stats.protocol_errors, 1, memory_order_relaxed);
            c->closing = true;
            break;
        }
        resp_dispatch(c, argv, argc);
        n++;
    }
    atomic_fetch_add_explicit(&l->stats.commands, n, memory_order_relaxed);
    conn_batch_done(c, off, n, start_ns);
}

static void resp_reply_full(buf_t *out)
{
    resp_add_error(out, "ERR max number of clients reached");
}

static void resp_reply_closing(buf_t *out, const char *why)
{
    resp_add_error(out, "ERR %s", why);
}

const protocol_t resp_protocol = {
    .name = "resp2",
    .label = "RESP",
    .state_size = sizeof(resp_conn_t),
    .process = resp_process,
    .reply_full = resp_reply_full,
    .reply_closing = resp_reply_closing,
};
