/*
 * resp_server.c - sluiced's RESP connection and server commands: PING, ECHO, QUIT, SELECT, AUTH,
 * HELLO, CLIENT and INFO, as Redis answers them.
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
#include "server/auth_guard.h"
#include "engine/events.h"
#include "engine/log.h"
#include "server/resp_commands.h"
#include "server/metrics.h"
#include "server/resp_front.h"
#include "store/store_stats.h"
#include "sluice/version.h"

/* ---- connection and server commands -------------------------------------------------------- */

void resp_cmd_ping(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc == 1) {
        resp_add_simple(&c->out, "PONG");
    } else if (argc == 2) {
        resp_add_bulk(&c->out, argv[1].ptr, argv[1].len);
    } else {
        resp_reply_wrong_arity(c, &argv[0]);
    }
}

void resp_cmd_echo(conn_t *c, resp_arg_t *argv, size_t argc)
{
    (void)argc;
    resp_add_bulk(&c->out, argv[1].ptr, argv[1].len);
}

void resp_cmd_quit(conn_t *c, resp_arg_t *argv, size_t argc)
{
    (void)argv;
    (void)argc;
    resp_add_simple(&c->out, "OK");
    c->closing = true;
}

void resp_cmd_select(conn_t *c, resp_arg_t *argv, size_t argc)
{
    (void)argc;
    int64_t db;
    if (!resp_arg_i64(&argv[1], &db)) {
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

#define WRONGPASS "WRONGPASS invalid username-password pair or user is disabled."

/* The refusal v calls for: WRONGPASS for a wrong password, or, from a hot address, when to try
 * again (rounded up to a second). */
static void auth_refusal(buf_t *b, const guard_verdict_t *v)
{
    if (!v->hot) {
        resp_add_error(b, WRONGPASS);
        return;
    }
    resp_add_error(b, "ERR too many failed AUTH attempts from your address; retry in %lld s",
                   (long long)((v->retry_ns + 999999999) / 1000000000));
}

/*
 * A refused AUTH from c (for `user`, user_len bytes as the client wrote it; v: auth_guard.h's
 * verdict): counted and logged at a limited rate with the peer's address. Its reply is written
 * at once, or, when the address keeps failing, held back in a reply slot of its own (dropped
 * if c closes its side meanwhile), the loop and other clients going on; commands pipelined after
 * it wait behind it, in order. When it cannot be held (the address's queue is full, the loop's
 * too, out of memory) the connection is closed at once, unanswered.
 */
static void auth_refused(conn_t *c, const char *user, size_t user_len, const guard_verdict_t *v)
{
    char shown[TEXT_SHOW_CAP(32)];
    text_show(shown, sizeof shown, user, user_len, 32, 0);
    const char *shared = v->shared ? ", counted with others: the table of addresses is full" : "";
    if (v->hot) {
        event_note(EV_AUTH_LOCKED_RESP,
                   "RESP: AUTH for user '%s' from %s:%d refused: its address is locked (failure %u "
                   "without a minute's pause%s)",
                   shown, c->addr, c->port, v->failures, shared);
    } else {
        event_note(EV_AUTH_FAILED_RESP,
                   "RESP: wrong password for user '%s' from %s:%d (failure %u from this address "
                   "without a minute's pause%s)",
                   shown, c->addr, c->port, v->failures, shared);
    }
    if (v->hold_ns == 0 && !v->drop) {
        auth_refusal(&c->out, v);
        return;
    }
    reply_slot_t *slot = v->drop ? NULL : conn_defer(c);
    if (slot == NULL) {
        if (v->drop) {
            event_note(
                EV_AUTH_DROPPED,
                "RESP: closing %s:%d unanswered: the replies held back for its address reach 10 s "
                "(failure %u without a minute's pause)",
                c->addr, c->port, v->failures);
        }
        conn_drop(c);
        return;
    }
    event_note(EV_AUTH_HELD,
               "RESP: slowing down %s:%d: failure %u from its address without a minute's pause; "
               "this reply held back %lld ms",
               c->addr, c->port, v->failures, (long long)(v->hold_ns / 1000000));
    auth_refusal(&slot->buf, v);
    slot->droppable = true;
    if (!conn_resolve_after(slot, v->hold_ns)) {
        conn_drop(c); /* first, so that nothing of it is written */
        conn_resolve(slot);
    }
}

/*
 * Checks [user] password and switches the connection to that user; replies the error itself
 * and returns false on failure. Two users, in the spirit of Redis's ACLs: "default" (deciding;
 * its password is --requirepass) and "admin" (also rules, overrides and resets; its password is
 * --admin-password; the user exists only when that is set). With no admin password every client
 * may administer. The password is compared first, then the address's guard decides
 * (auth_guard.h): from a hot address nothing is let in, a right password neither.
 */
static bool check_auth(conn_t *c, const resp_arg_t *user, const resp_arg_t *pass)
{
    const server_settings_t *cfg = c->loop->srv->cfg;
    bool as_admin = user != NULL && resp_arg_is(user, "admin") && cfg->admin_password != NULL;
    const char *secret = as_admin ? cfg->admin_password : cfg->requirepass;
    if (secret == NULL) {
        resp_add_error(&c->out,
                       "ERR AUTH <password> called without any password configured for the "
                       "default user. Are you sure your configuration is correct?");
        return false;
    }
    bool match = secret_equal(secret, pass);
    bool user_ok = as_admin || user == NULL || resp_arg_is(user, "default");
    guard_verdict_t v =
        guard_attempt(guard_global(), &c->peer, (int64_t)uv_hrtime(), user_ok && match);
    if (!v.let_in) {
        auth_refused(c, user != NULL ? user->ptr : "default", user != NULL ? user->len : 7, &v);
        return false;
    }
    c->authed = true;
    c->admin = as_admin || cfg->admin_password == NULL;
    return true;
}

void resp_cmd_auth(conn_t *c, resp_arg_t *argv, size_t argc)
{
    if (argc > 3) {
        resp_reply_syntax(c);
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

void resp_cmd_hello(conn_t *c, resp_arg_t *argv, size_t argc)
{
    size_t i = 1;
    if (argc > 1) {
        int64_t proto;
        if (!resp_arg_i64(&argv[1], &proto)) {
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
        if (resp_arg_is(&argv[i], "AUTH") && i + 2 < argc) {
            auth_user = &argv[i + 1];
            auth_pass = &argv[i + 2];
            i += 2;
        } else if (resp_arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
            name = &argv[i + 1];
            i += 1;
        } else {
            char b[72];
            resp_add_error(&c->out, "ERR Syntax error in HELLO option '%s'",
                           resp_show(&argv[i], b));
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

void resp_cmd_client(conn_t *c, resp_arg_t *argv, size_t argc)
{
    char b[72];
    if (resp_arg_is(&argv[1], "ID") && argc == 2) {
        resp_add_int(&c->out, (int64_t)c->id);
    } else if (resp_arg_is(&argv[1], "GETNAME") && argc == 2) {
        if (c->name[0] == '\0') {
            resp_add_null(&c->out);
        } else {
            resp_add_bulk(&c->out, c->name, strlen(c->name));
        }
    } else if (resp_arg_is(&argv[1], "SETNAME") && argc == 3) {
        if (set_client_name(c, &argv[2])) {
            resp_add_simple(&c->out, "OK");
        }
    } else if (resp_arg_is(&argv[1], "INFO") && argc == 2) {
        char line[512];
        client_info_line(c, line, sizeof line);
        resp_add_bulk(&c->out, line, strlen(line));
    } else if (resp_arg_is(&argv[1], "LIST") && argc == 2) {
        /* The clients of this connection's loop (each loop owns its connections). */
        buf_t text = {0};
        for (conn_t *o = c->loop->conns; o != NULL; o = o->next) {
            char line[512];
            client_info_line(o, line, sizeof line);
            buf_add_str(&text, line);
        }
        resp_add_bulk(&c->out, text.data != NULL ? text.data : "", text.len);
        buf_free(&text);
    } else if ((resp_arg_is(&argv[1], "SETINFO") && argc == 4) ||
               (resp_arg_is(&argv[1], "NO-EVICT") && argc == 3) ||
               (resp_arg_is(&argv[1], "NO-TOUCH") && argc == 3)) {
        resp_add_simple(&c->out, "OK"); /* accepted for clients that send them; no effect */
    } else {
        resp_add_error(&c->out,
                       "ERR unknown subcommand or wrong number of arguments for '%s'. "
                       "Try CLIENT ID, GETNAME, SETNAME, INFO, LIST.",
                       resp_show(&argv[1], b));
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
    metrics_ctx_t m; /* the numbers /metrics shows too (metrics.h) */
} info_ctx_t;

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
    buf_printf(b, "# Clients\r\n");
    metrics_info(&x->m, METRICS_CLIENTS, b);
}

static void info_stats(buf_t *b, info_ctx_t *x)
{
    buf_printf(b, "# Stats\r\n");
    metrics_info(&x->m, METRICS_STATS, b);
}

static void info_rules(buf_t *b, info_ctx_t *x)
{
    buf_printf(b, "# Rules\r\n");
    metrics_info(&x->m, METRICS_RULES, b);
}

static void info_persistence(buf_t *b, info_ctx_t *x)
{
    buf_printf(b, "# Persistence\r\n");
    metrics_info(&x->m, METRICS_PERSISTENCE, b);
}

/* Redis's shape: one line per database that holds keys. Every key of every rule counts, in
 * database 0; keys carry no TTL of their own (they are dropped when their quota is fresh). */
static void info_keyspace(buf_t *b, info_ctx_t *x)
{
    size_t keys = metrics_rule_keys(&x->m);
    buf_printf(b, "# Keyspace\r\n");
    if (keys > 0) {
        buf_printf(b, "db0:keys=%zu,expires=0,avg_ttl=0\r\n", keys);
    }
}

/* The request store's statistics, as it declares them (store_stats.h): the same rows and values
 * as /metrics, under INFO names. */
static void store_total(info_ctx_t *x, store_stats_t *total)
{
    *total = (store_stats_t){0};
    for (unsigned i = 0; i < x->srv->nloops; i++) {
        store_stats_t st;
        engine_worker_stats(engine_worker(x->srv->engine, i), &st);
        store_stats_add(total, &st);
    }
}

static bool info_has_store(info_ctx_t *x)
{
    store_stats_t total;
    store_total(x, &total);
    return total.n > 0;
}

static void info_store(buf_t *b, info_ctx_t *x)
{
    store_stats_t total;
    store_total(x, &total);
    buf_printf(b, "# Store\r\n");
    store_stats_info(&total, b);
}

static const struct info_section {
    const char *name; /* lower case, as INFO's argument */
    void (*fn)(buf_t *b, info_ctx_t *x);
    bool (*present)(info_ctx_t *x); /* NULL: always */
} info_sections[] = {
    {"server", info_server, NULL},
    {"clients", info_clients, NULL},
    {"stats", info_stats, NULL},
    {"rules", info_rules, NULL},
    {"persistence", info_persistence, NULL},
    {"store", info_store, info_has_store}, /* a store that keeps none has no section */
    {"keyspace", info_keyspace, NULL},
};

#define INFO_NSECTIONS (sizeof info_sections / sizeof info_sections[0])

void resp_cmd_info(conn_t *c, resp_arg_t *argv, size_t argc)
{
    bool want[INFO_NSECTIONS] = {false};
    for (size_t a = 1; a < argc; a++) {
        bool every = resp_arg_is(&argv[a], "all") || resp_arg_is(&argv[a], "default") ||
                     resp_arg_is(&argv[a], "everything");
        for (size_t i = 0; i < INFO_NSECTIONS; i++) {
            want[i] = want[i] || every || resp_arg_is(&argv[a], info_sections[i].name);
        }
    }
    info_ctx_t x = {.srv = c->loop->srv, .now_ns = sl_now_ns(), .m = {.srv = c->loop->srv}};
    buf_t b = {0};
    bool first = true;
    for (size_t i = 0; i < INFO_NSECTIONS; i++) {
        bool present = info_sections[i].present == NULL || info_sections[i].present(&x);
        if ((argc == 1 || want[i]) && present) {
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
