/*
 * client.c - the blocking client (see sluice/client.h).
 *
 * A handle keeps what it needs to connect again (host, port, password, timeout), so a
 * connection that broke (I/O error, timeout, AUTH refused) is dropped at once and re-made by
 * the next call: a long-lived handle survives a server restart. A command that failed is never
 * re-sent (the server may have executed it).
 *
 * State: ctx is NULL or a connected, authenticated hiredis context. err/errstr hold the last
 * call's outcome.
 */
#include <errno.h>
#include <stdbool.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "client/cache.h"
#include "client/common.h"
#include "sluice/client.h"

struct slc_client {
    redisContext *ctx;           /* NULL when not connected */
    char *host;                  /* copied */
    int port;                    /* 1..65535 */
    char *password;              /* copied, or NULL */
    char *user;                  /* copied, or NULL (AUTH password alone) */
    int timeout_ms;              /* connect and per-command timeout, ms; 0 = none */
    cache_t *cache;              /* the over-limit cache */
    slc_clock_fn clock;          /* the cache's clock, ns */
    void *clock_arg;             /* its argument */
    int err;                     /* last error, SLC_OK or SLC_E* */
    char errstr[SLC_ERRSTR_MAX]; /* its message */
};

#define seterr(c, code, ...) common_seterr(&(c)->err, (c)->errstr, code, __VA_ARGS__)

static void clear_err(slc_client_t *c)
{
    c->err = SLC_OK;
    c->errstr[0] = '\0';
}

static void drop_connection(slc_client_t *c)
{
    redisFree(c->ctx); /* NULL-safe */
    c->ctx = NULL;
}

/* The message for hiredis's I/O error on c->ctx; saved_errno is errno right after the call. */
static int io_error(slc_client_t *c, int saved_errno, const char *what)
{
    if (c->ctx == NULL)
        return seterr(c, SLC_EIO, "%s:%d: %s", c->host, c->port, what);
    if (c->ctx->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK))
        seterr(c, SLC_EIO, "%s:%d: %s: timed out after %d ms", c->host, c->port, what,
               c->timeout_ms);
    else
        seterr(c, SLC_EIO, "%s:%d: %s: %s", c->host, c->port, what, c->ctx->errstr);
    drop_connection(c);
    return SLC_EIO;
}

/* Sends one command on the current connection; on success *reply is a non-error reply. */
static int send_command(slc_client_t *c, int argc, const char **argv, const size_t *lens,
                        redisReply **reply)
{
    errno = 0;
    redisReply *r = redisCommandArgv(c->ctx, argc, argv, lens);
    if (r == NULL)
        return io_error(c, errno, argc > 0 ? argv[0] : "command");
    if (r->type == REDIS_REPLY_ERROR) {
        seterr(c, SLC_ESERVER, "%.*s", (int)r->len, r->str);
        freeReplyObject(r);
        return SLC_ESERVER;
    }
    *reply = r;
    return SLC_OK;
}

/* Connects and authenticates; leaves ctx NULL and the error set on failure. */
static int reconnect(slc_client_t *c)
{
    drop_connection(c);
    struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};
    errno = 0;
    c->ctx = c->timeout_ms > 0 ? redisConnectWithTimeout(c->host, c->port, tv)
                               : redisConnect(c->host, c->port);
    if (c->ctx == NULL)
        return seterr(c, SLC_ENOMEM, "cannot allocate a connection");
    if (c->ctx->err != 0) {
        int saved = errno;
        if (c->ctx->err == REDIS_ERR_IO && (saved == EAGAIN || saved == EINPROGRESS))
            seterr(c, SLC_EIO, "cannot connect to %s:%d: timed out after %d ms", c->host, c->port,
                   c->timeout_ms);
        else
            seterr(c, SLC_EIO, "cannot connect to %s:%d: %s", c->host, c->port, c->ctx->errstr);
        drop_connection(c);
        return SLC_EIO;
    }
    if (c->timeout_ms > 0 && redisSetTimeout(c->ctx, tv) != REDIS_OK)
        return io_error(c, errno, "setting the timeout");
    if (c->password != NULL) {
        const char *argv[3] = {"AUTH", c->user != NULL ? c->user : c->password, c->password};
        redisReply *r = NULL;
        int rc = send_command(c, c->user != NULL ? 3 : 2, argv, NULL, &r);
        freeReplyObject(r);
        if (rc != SLC_OK) {
            drop_connection(c);
            return rc;
        }
    }
    return SLC_OK;
}

slc_client_t *slc_connect(const char *host, int port, const char *password, int timeout_ms)
{
    return slc_connect_user(host, port, NULL, password, timeout_ms);
}

slc_client_t *slc_connect_user(const char *host, int port, const char *user, const char *password,
                               int timeout_ms)
{
    slc_client_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->clock = common_monotonic_ns;
    c->port = port;
    c->timeout_ms = timeout_ms;
    if (!common_valid_endpoint(host, port) || timeout_ms < 0) {
        seterr(c, SLC_EINVAL, "invalid address or timeout (host '%s', port %d, timeout %d ms)",
               host != NULL ? host : "(null)", port, timeout_ms);
        return c;
    }
    c->host = strdup(host);
    c->password = password != NULL ? strdup(password) : NULL;
    c->user = user != NULL && password != NULL ? strdup(user) : NULL;
    c->cache = cache_create(SLC_CACHE_DEFAULT);
    if (c->host == NULL || (password != NULL && c->password == NULL) ||
        (user != NULL && password != NULL && c->user == NULL) || c->cache == NULL) {
        seterr(c, SLC_ENOMEM, "out of memory");
        return c;
    }
    reconnect(c);
    return c;
}

void slc_free(slc_client_t *c)
{
    if (c == NULL)
        return;
    drop_connection(c);
    cache_free(c->cache);
    free(c->host);
    free(c->password);
    free(c->user);
    free(c);
}

int slc_err(const slc_client_t *c)
{
    return c != NULL ? c->err : SLC_EINVAL;
}

const char *slc_errstr(const slc_client_t *c)
{
    return c != NULL ? c->errstr : "no client";
}

/* slc_connect() failed for a reason no reconnect can fix (bad argument, no memory). */
static bool unusable(const slc_client_t *c)
{
    return c->host == NULL || c->cache == NULL;
}

static int unusable_error(slc_client_t *c)
{
    return seterr(c, SLC_EINVAL, "the handle is unusable: slc_connect() failed");
}

/* Everything a call needs before it may talk: a usable handle and a connection. */
static int ready(slc_client_t *c)
{
    if (unusable(c))
        return unusable_error(c);
    clear_err(c);
    return c->ctx != NULL ? SLC_OK : reconnect(c);
}

int slc_command(slc_client_t *c, int argc, const char **argv, const size_t *argvlen,
                struct redisReply **reply)
{
    if (c == NULL)
        return SLC_EINVAL;
    if (argc <= 0 || argv == NULL || reply == NULL)
        return seterr(c, SLC_EINVAL, "slc_command: no command");
    *reply = NULL;
    int rc = ready(c);
    return rc != SLC_OK ? rc : send_command(c, argc, argv, argvlen, reply);
}

/* Sends a command whose reply is a decision and decodes it into *out. */
static int ask_decision(slc_client_t *c, int argc, const char **argv, const size_t *lens,
                        slc_decision_t *out)
{
    redisReply *r = NULL;
    int rc = slc_command(c, argc, argv, lens, &r);
    if (rc != SLC_OK)
        return rc;
    rc = slc_decision_from_reply(r, out, c->errstr, sizeof c->errstr);
    freeReplyObject(r);
    c->err = rc;
    return rc;
}

/* SL.ALLOW (peek 0) or SL.PEEK (peek 1), through the cache unless a priority is named. */
static int decide(slc_client_t *c, const char *rule, const char *key, int64_t cost, int peek,
                  const slc_request_opts_t *opts, slc_decision_t *out)
{
    if (c == NULL)
        return SLC_EINVAL;
    if (rule == NULL || key == NULL || out == NULL || cost < 0)
        return seterr(c, SLC_EINVAL, "%s", cost < 0 ? "cost must be >= 0" : "NULL argument");
    if (unusable(c))
        return unusable_error(c);
    const char *priority = common_priority(opts);
    bool cached = !peek && priority == NULL; /* a refusal holds for its priority only */
    size_t rule_len = strlen(rule), key_len = strlen(key);
    int64_t now_ns = c->clock(c->clock_arg);
    uint64_t epoch = cache_epoch(c->cache);
    if (cached && cost > 0 &&
        cache_lookup(c->cache, rule, rule_len, key, key_len, cost, now_ns, out)) {
        clear_err(c);
        return SLC_OK;
    }
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char costbuf[COMMON_INT_CHARS];
    int argc = common_decision_argv(rule, key, cost, peek, priority, argv, lens, costbuf);
    int rc = ask_decision(c, argc, argv, lens, out);
    if (rc != SLC_OK)
        return rc;
    if (cached)
        cache_remember(c->cache, rule, rule_len, key, key_len, cost, out, now_ns, epoch);
    return SLC_OK;
}

int slc_allow(slc_client_t *c, const char *rule, const char *key, int64_t cost, slc_decision_t *out)
{
    return decide(c, rule, key, cost, 0, NULL, out);
}

int slc_peek(slc_client_t *c, const char *rule, const char *key, slc_decision_t *out)
{
    return decide(c, rule, key, 0, 1, NULL, out);
}

int slc_allow_ex(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                 const slc_request_opts_t *opts, slc_decision_t *out)
{
    return decide(c, rule, key, cost, 0, opts, out);
}

int slc_peek_ex(slc_client_t *c, const char *rule, const char *key, const slc_request_opts_t *opts,
                slc_decision_t *out)
{
    return decide(c, rule, key, 0, 1, opts, out);
}

int slc_settle(slc_client_t *c, const char *rule, const char *key, int64_t reserved, int64_t actual,
               int64_t at_ms, slc_decision_t *out)
{
    if (c == NULL)
        return SLC_EINVAL;
    const char *invalid = common_settle_invalid(reserved, actual, at_ms);
    if (rule == NULL || key == NULL || out == NULL || invalid != NULL)
        return seterr(c, SLC_EINVAL, "%s", invalid != NULL ? invalid : "NULL argument");
    if (unusable(c))
        return unusable_error(c);
    /* Room given back ends the cached refusals of the key. Once is enough here: nothing else
     * is in flight on a blocking handle while the settle is. */
    if (actual < reserved)
        cache_forget(c->cache, rule, strlen(rule), key, strlen(key));
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[3][COMMON_INT_CHARS];
    int argc = common_settle_argv(rule, key, reserved, actual, at_ms, argv, lens, nums);
    return ask_decision(c, argc, argv, lens, out);
}

int slc_acquire(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                int64_t timeout_ms, slc_decision_t *out, uint64_t *hold_id)
{
    return slc_acquire_ex(c, rule, key, cost, timeout_ms, NULL, out, hold_id);
}

int slc_acquire_ex(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                   int64_t timeout_ms, const slc_request_opts_t *opts, slc_decision_t *out,
                   uint64_t *hold_id)
{
    if (c == NULL)
        return SLC_EINVAL;
    const char *invalid = common_acquire_invalid(cost, timeout_ms);
    if (rule == NULL || key == NULL || out == NULL || hold_id == NULL || invalid != NULL)
        return seterr(c, SLC_EINVAL, "%s", invalid != NULL ? invalid : "NULL argument");
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[2][COMMON_INT_CHARS];
    int argc =
        common_acquire_argv(rule, key, cost, timeout_ms, common_priority(opts), argv, lens, nums);
    redisReply *r = NULL;
    int rc = slc_command(c, argc, argv, lens, &r);
    if (rc != SLC_OK)
        return rc;
    rc = slc_acquire_from_reply(r, out, hold_id, c->errstr, sizeof c->errstr);
    freeReplyObject(r);
    c->err = rc;
    return rc;
}

int slc_release(slc_client_t *c, const char *rule, const char *key, uint64_t hold_id)
{
    return slc_release_ex(c, rule, key, hold_id, NULL);
}

int slc_release_ex(slc_client_t *c, const char *rule, const char *key, uint64_t hold_id,
                   const slc_release_opts_t *opts)
{
    if (c == NULL)
        return SLC_EINVAL;
    const char *invalid = common_release_invalid(hold_id, opts);
    if (rule == NULL || key == NULL || invalid != NULL)
        return seterr(c, SLC_EINVAL, "%s", invalid != NULL ? invalid : "NULL argument");
    if (c->cache != NULL) /* freed units may admit what the cache refuses */
        cache_forget(c->cache, rule, strlen(rule), key, strlen(key));
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[2][COMMON_INT_CHARS];
    int argc = common_release_argv(rule, key, hold_id, opts, argv, lens, nums);
    redisReply *r = NULL;
    int rc = slc_command(c, argc, argv, lens, &r);
    if (rc == SLC_ESERVER && common_is_no_hold(c->errstr, strlen(c->errstr)))
        return c->err = SLC_ENOHOLD;
    if (rc != SLC_OK)
        return rc;
    rc = slc_release_from_reply(r, c->errstr, sizeof c->errstr);
    freeReplyObject(r);
    c->err = rc;
    return rc;
}

int slc_reset(slc_client_t *c, const char *rule, const char *key)
{
    if (c == NULL)
        return SLC_EINVAL;
    if (rule == NULL || key == NULL)
        return seterr(c, SLC_EINVAL, "NULL argument");
    if (c->cache != NULL)
        cache_forget(c->cache, rule, strlen(rule), key, strlen(key));
    const char *argv[3] = {"SL.RESET", rule, key};
    redisReply *r = NULL;
    int rc = slc_command(c, 3, argv, NULL, &r);
    freeReplyObject(r);
    return rc;
}

int slc_set_cache_size(slc_client_t *c, size_t entries)
{
    if (c == NULL)
        return SLC_EINVAL;
    if (entries > SLC_CACHE_MAX)
        return seterr(c, SLC_EINVAL, "cache size %zu is above the maximum %u", entries,
                      SLC_CACHE_MAX);
    if (c->cache == NULL)
        return unusable_error(c);
    if (!cache_resize(&c->cache, entries))
        return seterr(c, SLC_ENOMEM, "cannot allocate a cache of %zu entries", entries);
    return SLC_OK;
}

void slc_set_clock(slc_client_t *c, slc_clock_fn clock, void *arg)
{
    if (c == NULL)
        return;
    c->clock = clock != NULL ? clock : common_monotonic_ns;
    c->clock_arg = clock != NULL ? arg : NULL;
    if (c->cache != NULL)
        cache_clear(c->cache);
}

uint64_t slc_cache_hits(const slc_client_t *c)
{
    return c != NULL && c->cache != NULL ? cache_hits(c->cache) : 0;
}
