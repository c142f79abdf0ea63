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

static void cmd_command(conn_t *c, resp_arg_t *argv, size_t argc);

static const command_t commands[] = {
    /* the hot ones first: lookup is a scan */
    {"sl.throttle", -5, CMD_WRITE, resp_cmd_throttle},
    {"sl.allow", -3, CMD_WRITE, resp_cmd_allow},
    {"cl.throttle", -5, CMD_WRITE, resp_cmd_cl_throttle},
    {"sl.allowall", -3, CMD_WRITE, resp_cmd_allowall},
    {"sl.settle", -5, CMD_WRITE, resp_cmd_settle},
    {"sl.peek", -3, 0, resp_cmd_peek},
    {"sl.top", -2, 0, resp_cmd_top},
    {"sl.reset", -2, CMD_WRITE | CMD_ADMIN, resp_cmd_reset},
    {"sl.rule", -2, CMD_WRITE | CMD_ADMIN, resp_cmd_rule},
    {"sl.override", -3, CMD_WRITE | CMD_ADMIN, resp_cmd_override},
    {"ping", -1, 0, resp_cmd_ping},
    {"echo", 2, 0, resp_cmd_echo},
    {"auth", -2, CMD_NOAUTH, resp_cmd_auth},
    {"hello", -1, CMD_NOAUTH, resp_cmd_hello},
    {"client", -2, 0, resp_cmd_client},
    {"command", -1, 0, cmd_command},
    {"info", -1, 0, resp_cmd_info},
    {"select", 2, 0, resp_cmd_select},
    {"quit", 1, CMD_NOAUTH, resp_cmd_quit},
};
static const size_t ncommands = sizeof commands / sizeof commands[0];

bool resp_command_is_admin(const resp_arg_t *name)
{
    for (size_t i = 0; i < ncommands; i++) {
        if (resp_arg_is(name, commands[i].name)) {
            return (commands[i].flags & CMD_ADMIN) != 0;
        }
    }
    return false;
}

static const command_t *lookup(const resp_arg_t *name)
{
    for (size_t i = 0; i < ncommands; i++) {
        if (resp_arg_is(name, commands[i].name)) {
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
static const doc_arg_t doc_top[] = {DOC_RULE,
                                    {"count", "integer", NULL, DOC_OPTIONAL, NULL},
                                    {"denied", "pure-token", "DENIED", DOC_OPTIONAL, NULL},
                                    DOC_END};

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
    {"sl.top", "Returns a rule's heaviest keys of the last minute, by decisions or denials",
     "module", doc_top, NULL},
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
        asked = resp_arg_is(&argv[a], d->name);
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
    } else if (resp_arg_is(&argv[1], "COUNT")) {
        resp_add_int(&c->out, (int64_t)ncommands);
    } else if (resp_arg_is(&argv[1], "INFO")) {
        resp_add_array(&c->out, argc - 2);
        for (size_t a = 2; a < argc; a++) {
            const command_t *found = NULL;
            for (size_t i = 0; i < ncommands && found == NULL; i++) {
                if (resp_arg_is(&argv[a], commands[i].name)) {
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
