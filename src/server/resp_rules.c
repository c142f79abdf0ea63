/*
 * resp_rules.c - sluiced's RESP commands for rules and overrides: SL.RULE and SL.OVERRIDE, run
 * by the admin module (admin.h) on the config store's thread and replied in order.
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

/* ---- rules and overrides ------------------------------------------------------------------- */

/*
 * SL.RULE and SL.OVERRIDE run on the config thread (engine/admin.h): the command takes a reply
 * slot, and the reply is written when the operation is done and its change in force on this
 * loop. Validation, the store and the reload are admin.c's; this is only the RESP shape.
 */
/* SL.OVERRIDE LIST's answer, like SCAN's: [next cursor ("0" at the end), [key, json, ...]]; a
 * cursor is the last key returned, in hex. */
static void reply_override_list(buf_t *b, admin_req_t *r)
{
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
}

/* The answer to an operation that succeeded. */
static void reply_admin_ok(buf_t *b, admin_req_t *r)
{
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
    case ADMIN_OVERRIDE_LIST:
        reply_override_list(b, r);
        break;
    }
}

static void admin_replied(admin_req_t *r)
{
    reply_slot_t *slot = r->arg;
    buf_t *b = &slot->buf;
    if (r->status == ADMIN_OK) {
        reply_admin_ok(b, r);
    } else if (r->status == ADMIN_NOTFOUND &&
               (r->op == ADMIN_RULE_DEL || r->op == ADMIN_OVERRIDE_DEL)) {
        resp_add_int(b, 0);
    } else if (r->status == ADMIN_NOTFOUND && r->op == ADMIN_OVERRIDE_GET) {
        resp_add_null(b);
    } else {
        resp_add_error(b, "ERR %s", r->err);
    }
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
    bool admin_user = c->admin && c->loop->srv->cfg->admin_password != NULL;
    admin_set_who(r, "RESP", c->addr, c->port, c->name, strlen(c->name),
                  admin_user ? "user admin" : "user default");
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
        if (!resp_arg_is(&argv[1], cmd->name)) {
            continue;
        }
        size_t want = 2 + cmd->rule + cmd->key + cmd->body;
        bool option = cmd->option != NULL && argc == want + 1;
        if (argc != want && !option) {
            resp_reply_wrong_arity(c, &argv[0]);
            return;
        }
        if (option && !resp_arg_is(&argv[want], cmd->option)) {
            resp_reply_syntax(c);
            return;
        }
        size_t at = 2;
        const resp_arg_t *rule = cmd->rule ? &argv[at++] : NULL;
        const resp_arg_t *key = cmd->key ? &argv[at++] : NULL;
        const resp_arg_t *body = cmd->body ? &argv[at++] : NULL;
        admin_start(c, cmd->op, rule, key, body, option, ADMIN_LIST_DEFAULT);
        return;
    }
    resp_add_error(&c->out, "ERR unknown subcommand '%s'. Try %s.", resp_show(&argv[1], b), names);
}

void resp_cmd_rule(conn_t *c, resp_arg_t *argv, size_t argc)
{
    admin_command(c, argv, argc, rule_commands, sizeof rule_commands / sizeof rule_commands[0],
                  "SET, GET, DEL, LIST, IMPORT, EXPORT");
}

/* SL.OVERRIDE LIST rule [cursor] [COUNT n]: a page of the rule's overrides, by key. */
static void override_list(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc < 3 || argc > 6) {
        resp_reply_wrong_arity(c, &argv[0]);
        return;
    }
    size_t at = 3;
    unsigned char key[OVERRIDE_KEY_MAX];
    size_t key_len = 0;
    bool after = false;
    if (at < argc && !resp_arg_is(&argv[at], "COUNT")) {
        const resp_arg_t *cur = &argv[at++];
        after = !(cur->len == 1 && cur->ptr[0] == '0');
        if (after && !admin_cursor_parse(cur->ptr, cur->len, key, &key_len)) {
            resp_add_error(&c->out, "ERR invalid cursor");
            return;
        }
    }
    int64_t count = ADMIN_LIST_DEFAULT;
    if (at < argc) {
        if (at + 2 != argc || !resp_arg_is(&argv[at], "COUNT")) {
            resp_reply_syntax(c);
            return;
        }
        if (!resp_arg_i64(&argv[at + 1], &count) || count < 1 || count > ADMIN_LIST_MAX) {
            resp_add_error(&c->out, "ERR count must be 1 to %d", ADMIN_LIST_MAX);
            return;
        }
    }
    resp_arg_t cursor = {.ptr = (const char *)key, .len = key_len};
    admin_start(c, ADMIN_OVERRIDE_LIST, &argv[2], after ? &cursor : NULL, NULL, false,
                (size_t)count);
}

void resp_cmd_override(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (resp_arg_is(&argv[1], "LIST")) {
        override_list(c, argv, argc);
        return;
    }
    admin_command(c, argv, argc, override_commands,
                  sizeof override_commands / sizeof override_commands[0], "SET, GET, DEL, LIST");
}
