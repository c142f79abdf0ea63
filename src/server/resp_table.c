/*
 * resp_table.c - sluiced's RESP front end: the command table, COMMAND, the dispatcher and the
 * request loop (resp_protocol, resp_front.h).
 *
 * Every command is declared once, in commands[] below: name, arity (Redis's convention: N
 * exactly N arguments counting the name, -N at least N), flags and handler. COMMAND COUNT/INFO/
 * DOCS and the dispatcher read the same table.
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
#include "engine/events.h"
#include "engine/log.h"
#include "server/resp_commands.h"
#include "server/resp_front.h"
#include "sluice/version.h"

/* ---- the table ----------------------------------------------------------------------------- */

static void resp_cmd_command(conn_t *c, resp_arg_t *argv, size_t argc);

static const command_t commands[] = {
    /* the hot ones first: lookup is a scan */
    {&desc_sl_throttle, resp_cmd_throttle},
    {&desc_sl_allow, resp_cmd_allow},
    {&desc_cl_throttle, resp_cmd_cl_throttle},
    {&desc_sl_allowall, resp_cmd_allowall},
    {&desc_sl_settle, resp_cmd_settle},
    {&desc_sl_acquire, resp_cmd_acquire},
    {&desc_sl_acquireall, resp_cmd_acquireall},
    {&desc_sl_release, resp_cmd_release},
    {&desc_sl_peek, resp_cmd_peek},
    {&desc_sl_top, resp_cmd_top},
    {&desc_sl_reset, resp_cmd_reset},
    {&desc_sl_rule, resp_cmd_rule},
    {&desc_sl_override, resp_cmd_override},
    {&desc_ping, resp_cmd_ping},
    {&desc_echo, resp_cmd_echo},
    {&desc_auth, resp_cmd_auth},
    {&desc_hello, resp_cmd_hello},
    {&desc_client, resp_cmd_client},
    {&desc_command, resp_cmd_command},
    {&desc_info, resp_cmd_info},
    {&desc_select, resp_cmd_select},
    {&desc_quit, resp_cmd_quit},
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

bool resp_command_is_admin(const resp_arg_t *name)
{
    for (size_t i = 0; i < ncommands; i++) {
        if (resp_arg_is(name, commands[i].desc->name)) {
            return (commands[i].desc->flags & CMD_ADMIN) != 0;
        }
    }
    return false;
}

/* The name a loop thread looked up last, byte for byte as the client wrote it, and what it
 * found: a pipeline repeats one command, whose lookup is then one comparison instead of a scan
 * of case-insensitive comparisons. The table never changes, so the answer for the same bytes
 * is the same. */
#define LOOKUP_CACHE_NAME 16 /* longest name kept, bytes (every command's fits) */
static _Thread_local struct {
    size_t len; /* 0: nothing kept */
    char name[LOOKUP_CACHE_NAME];
    const command_t *cmd;
} last_lookup;

static const command_t *lookup(const resp_arg_t *name)
{
    if (name->len == last_lookup.len && memcmp(name->ptr, last_lookup.name, name->len) == 0) {
        return last_lookup.cmd;
    }
    for (size_t i = 0; i < ncommands; i++) {
        if (resp_arg_is(name, commands[i].desc->name)) {
            if (name->len > 0 && name->len <= LOOKUP_CACHE_NAME) {
                last_lookup.len = name->len;
                memcpy(last_lookup.name, name->ptr, name->len);
                last_lookup.cmd = &commands[i];
            }
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
            int n = snprintf(args + used, sizeof args - used, "'%s' ", resp_show(&argv[i], a));
            used += n > 0 ? (size_t)n : 0;
        }
        resp_add_error(&c->out, "ERR unknown command '%s', with args beginning with: %s",
                       resp_show(&argv[0], b), args);
        return;
    }
    if (!c->authed && !(cmd->desc->flags & CMD_NOAUTH)) {
        resp_add_error(&c->out, "NOAUTH Authentication required.");
        return;
    }
    if ((cmd->desc->flags & CMD_ADMIN) && !c->admin) {
        resp_add_error(&c->out,
                       "NOPERM this user has no permissions to run the '%s' command (AUTH admin "
                       "<password> first)",
                       cmd->desc->name);
        return;
    }
    if ((cmd->desc->arity > 0 && argc != (size_t)cmd->desc->arity) ||
        (cmd->desc->arity < 0 && argc < (size_t)-cmd->desc->arity)) {
        resp_reply_wrong_arity(c, &argv[0]);
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
        if (resp_arg_is(first, words[i])) {
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
    int64_t start_ns = conn_batch_begin(c);
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
            event_note(EV_CROSS_PROTOCOL,
                       "client %s:%d sent an HTTP request to the RESP port: possible "
                       "cross-protocol attack, connection closed",
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

static void command_entry(conn_t *c, const command_t *cmd)
{
    resp_add_array(&c->out, 6);
    resp_add_bulk(&c->out, cmd->desc->name, strlen(cmd->desc->name));
    resp_add_int(&c->out, cmd->desc->arity);
    size_t nflags = 1 + ((cmd->desc->flags & CMD_NOAUTH) != 0);
    resp_add_array(&c->out, nflags);
    const char *kind = (cmd->desc->flags & CMD_WRITE) ? "write" : "readonly";
    resp_add_simple(&c->out, kind);
    if (cmd->desc->flags & CMD_NOAUTH) {
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
 * arguments, subcommands), from its description (proto/commands.h), so redis-cli's HELP and the
 * hints it shows while typing work for ours.
 */
static void doc_add_args(buf_t *b, const cmd_arg_t *args)
{
    size_t n = cmd_args_count(args);
    resp_add_array(b, n);
    for (size_t i = 0; i < n; i++) {
        const cmd_arg_t *a = &args[i];
        size_t nflags = ((a->flags & CMD_ARG_OPTIONAL) != 0) + ((a->flags & CMD_ARG_MULTIPLE) != 0);
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
            if (a->flags & CMD_ARG_OPTIONAL) {
                resp_add_simple(b, "optional");
            }
            if (a->flags & CMD_ARG_MULTIPLE) {
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
static void doc_add(buf_t *b, const cmd_desc_t *d)
{
    size_t nsubs = cmd_subs_count(d);
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
static bool doc_asked(const cmd_desc_t *d, const resp_arg_t *argv, size_t argc)
{
    bool asked = argc == 2;
    for (size_t a = 2; a < argc && !asked; a++) {
        asked = resp_arg_is(&argv[a], d->name);
    }
    return asked;
}

/* COMMAND DOCS [name ...]: a map (a flat array in RESP2) of name -> doc, for every command of
 * the table. */
static void command_docs_reply(conn_t *c, resp_arg_t *argv, size_t argc)
{
    size_t n = 0;
    for (size_t i = 0; i < ncommands; i++) {
        n += doc_asked(commands[i].desc, argv, argc);
    }
    resp_add_array(&c->out, 2 * n);
    for (size_t i = 0; i < ncommands; i++) {
        const cmd_desc_t *d = commands[i].desc;
        if (doc_asked(d, argv, argc)) {
            resp_add_bulk(&c->out, d->name, strlen(d->name));
            doc_add(&c->out, d);
        }
    }
}

static void resp_cmd_command(conn_t *c, resp_arg_t *argv, size_t argc)
{
    char b[72];
    if (argc == 1) {
        resp_add_array(&c->out, ncommands);
        for (size_t i = 0; i < ncommands; i++) {
            command_entry(c, &commands[i]);
        }
    } else if (resp_arg_is(&argv[1], "COUNT")) {
        resp_add_int(&c->out, (int64_t)ncommands);
    } else if (resp_arg_is(&argv[1], "INFO")) {
        resp_add_array(&c->out, argc - 2);
        for (size_t a = 2; a < argc; a++) {
            const command_t *found = NULL;
            for (size_t i = 0; i < ncommands && found == NULL; i++) {
                if (resp_arg_is(&argv[a], commands[i].desc->name)) {
                    found = &commands[i];
                }
            }
            if (found != NULL) {
                command_entry(c, found);
            } else {
                resp_add_null(&c->out);
            }
        }
    } else if (resp_arg_is(&argv[1], "DOCS")) {
        command_docs_reply(c, argv, argc);
    } else {
        resp_add_error(&c->out, "ERR unknown subcommand '%s'. Try COMMAND COUNT, INFO, DOCS.",
                       resp_show(&argv[1], b));
    }
}
