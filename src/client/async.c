/*
 * async.c - the non-blocking client on a caller's libuv loop (see sluice/client.h).
 *
 * hiredis's async context does the pipelining: every request is appended to one output buffer
 * and its callback to a FIFO, and replies are matched in order. Each request carries a
 * request_t (our privdata) saying what to decode and whom to call.
 *
 * Lifetime. hiredis frees its context by itself (connect failure, lost connection, or after a
 * graceful disconnect) and tells us through on_connect(failure) or on_disconnect(): from then
 * on h->ac is NULL. The handle itself is freed only when all three hold: the user closed it,
 * h->ac is NULL, and no accepted request still owes its callback (h->pending == 0). The free
 * goes through uv_close() of our idle handle, so the memory outlives any frame that is still
 * using it. Pending callbacks see a NULL reply when hiredis tears down, and report SLC_EIO.
 *
 * The libuv glue is the Redis client's, src/remote/uv_glue.c (hiredis's libuv adapter with
 * hiredis 1.0's error fix).
 *
 * Cache hits are answered from the loop, not inside the call: they wait in a queue drained by
 * an idle handle (one pass per loop iteration, so a callback that issues more cached calls
 * cannot starve the loop).
 */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "client/cache.h"
#include "remote/uv_glue.h"
#include "client/common.h"
#include "sluice/client.h"

typedef enum request_kind {
    REQUEST_AUTH,     /* AUTH on connect: no user callback; a refusal is kept in errstr */
    REQUEST_DECISION, /* SL.ALLOW / SL.PEEK / SL.SETTLE: slc_decision_cb */
    REQUEST_DONE,     /* SL.RESET: slc_done_cb */
    REQUEST_ACQUIRE,  /* SL.ACQUIRE: slc_acquire_cb */
    REQUEST_RELEASE,  /* SL.RELEASE: slc_done_cb, SLC_ENOHOLD for no such hold */
} request_kind_t;

typedef struct request {
    slc_async_t *h;      /* the handle it belongs to */
    request_kind_t kind; /* what the reply is and whom to call */
    slc_decision_cb on_decision;
    slc_done_cb on_done;
    slc_acquire_cb on_acquire;
    void *arg;            /* the caller's argument */
    bool remember;        /* the answer goes to the cache */
    bool forget;          /* a settle giving room back, a release: the answer ends the key's
                             refusals */
    int64_t cost;         /* units asked for */
    int64_t sent_ns;      /* cache clock when the request was made */
    uint64_t epoch;       /* the cache's epoch then */
    slc_decision_t d;     /* a cache hit's decision (local requests only) */
    struct request *next; /* in the local queue */
    size_t rule_len;      /* name = rule bytes then key bytes, when remember or forget */
    size_t key_len;
    char name[];
} request_t;

struct slc_async {
    redisAsyncContext *ac; /* NULL once hiredis has freed it */
    char *host;            /* copied, for messages */
    int port;
    cache_t *cache;     /* the over-limit cache */
    slc_clock_fn clock; /* its clock, ns */
    void *clock_arg;
    uv_idle_t idle;        /* drains `local` */
    request_t *local_head; /* cache hits waiting for their callback, FIFO */
    request_t *local_tail;
    unsigned pending; /* accepted requests whose callback has not returned */
    bool connected;   /* the connect completed */
    bool closing;     /* slc_async_close() was called */
    bool freeing;     /* uv_close() of idle is under way */
    int err;          /* last error, SLC_OK or SLC_E* */
    char errstr[SLC_ERRSTR_MAX];
};

#define seterr(h, code, ...) common_seterr(&(h)->err, (h)->errstr, code, __VA_ARGS__)

static void clear_err(slc_async_t *h)
{
    h->err = SLC_OK;
    h->errstr[0] = '\0';
}

static void on_idle_closed(uv_handle_t *handle)
{
    slc_async_t *h = handle->data;
    cache_free(h->cache);
    free(h->host);
    free(h);
}

/* Frees the handle once it is closed, hiredis is done with it and no callback is owed. */
static void maybe_free(slc_async_t *h)
{
    if (!h->closing || h->ac != NULL || h->pending > 0 || h->freeing)
        return;
    h->freeing = true;
    uv_close((uv_handle_t *)&h->idle, on_idle_closed);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    slc_async_t *h = ac->data;
    if (status == REDIS_OK) {
        h->connected = true;
        return;
    }
    seterr(h, SLC_EIO, "cannot connect to %s:%d: %s", h->host, h->port,
           ac->errstr != NULL ? ac->errstr : "error");
    h->ac = NULL; /* hiredis frees it after this returns */
    maybe_free(h);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    slc_async_t *h = ac->data;
    if (status != REDIS_OK)
        seterr(h, SLC_EIO, "%s:%d: connection lost: %s", h->host, h->port,
               ac->errstr != NULL ? ac->errstr : "error");
    h->ac = NULL;
    maybe_free(h);
}

/* Calls the request's callback (none for AUTH) with the handle's current error, frees it. */
static void complete(request_t *req, int status, const slc_decision_t *d, uint64_t hold_id)
{
    slc_async_t *h = req->h;
    switch (req->kind) {
    case REQUEST_AUTH:
        break;
    case REQUEST_DECISION:
        req->on_decision(h, status, status == SLC_OK ? d : NULL, req->arg);
        break;
    case REQUEST_ACQUIRE:
        req->on_acquire(h, status, status == SLC_OK ? d : NULL, status == SLC_OK ? hold_id : 0,
                        req->arg);
        break;
    case REQUEST_DONE:
    case REQUEST_RELEASE:
        req->on_done(h, status, req->arg);
        break;
    }
    free(req);
    h->pending--;
    maybe_free(h);
}

/* The outcome of a reply to req (the message in h->errstr), and what it tells the cache. */
static int decode(slc_async_t *h, request_t *req, const redisReply *reply, slc_decision_t *d,
                  uint64_t *hold_id)
{
    int status = SLC_OK;
    switch (req->kind) {
    case REQUEST_AUTH:
    case REQUEST_DONE:
        if (reply->type == REDIS_REPLY_ERROR)
            status = seterr(h, SLC_ESERVER, "%.*s", (int)reply->len, reply->str);
        break;
    case REQUEST_DECISION:
        status = slc_decision_from_reply(reply, d, h->errstr, sizeof h->errstr);
        break;
    case REQUEST_ACQUIRE:
        status = slc_acquire_from_reply(reply, d, hold_id, h->errstr, sizeof h->errstr);
        break;
    case REQUEST_RELEASE:
        status = slc_release_from_reply(reply, h->errstr, sizeof h->errstr);
        break;
    }
    h->err = status;
    if (req->forget) /* the settle or release has run: refusals given before it ran are stale */
        cache_forget(h->cache, req->name, req->rule_len, req->name + req->rule_len, req->key_len);
    if (status == SLC_OK && req->remember)
        cache_remember(h->cache, req->name, req->rule_len, req->name + req->rule_len, req->key_len,
                       req->cost, d, req->sent_ns, req->epoch);
    return status;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    request_t *req = privdata;
    slc_async_t *h = req->h;
    redisReply *reply = r;
    slc_decision_t d;
    uint64_t hold_id = 0;
    int status;
    if (reply == NULL) {
        /* hiredis is tearing the connection down; on_connect may have said why already */
        if (!(h->ac == NULL && h->err == SLC_EIO))
            seterr(h, SLC_EIO, "%s:%d: %s", h->host, h->port,
                   ac->err != 0 && ac->errstr != NULL ? ac->errstr : "connection closed");
        status = SLC_EIO;
    } else {
        clear_err(h);
        status = decode(h, req, reply, &d, &hold_id);
    }
    complete(req, status, &d, hold_id);
}

static void on_idle(uv_idle_t *idle)
{
    slc_async_t *h = idle->data;
    request_t *req = h->local_head;
    h->local_head = h->local_tail = NULL;
    uv_idle_stop(idle);
    h->pending++; /* hold the handle while this pass runs: a callback may close it */
    while (req != NULL) {
        request_t *next = req->next;
        clear_err(h);
        complete(req, SLC_OK, &req->d, 0);
        req = next;
    }
    h->pending--;
    maybe_free(h);
}

/* Queues AUTH [user] password as the connection's first request. */
static int send_auth(slc_async_t *h, const char *user, const char *password)
{
    request_t *req = calloc(1, sizeof *req);
    if (req == NULL)
        return SLC_ENOMEM;
    req->h = h;
    req->kind = REQUEST_AUTH;
    const char *argv[3] = {"AUTH", user != NULL ? user : password, password};
    if (redisAsyncCommandArgv(h->ac, on_reply, req, user != NULL ? 3 : 2, argv, NULL) != REDIS_OK) {
        free(req);
        return SLC_ENOMEM;
    }
    h->pending++;
    return SLC_OK;
}

int slc_async_connect(uv_loop_t *loop, const char *host, int port, const char *password,
                      slc_async_t **out)
{
    return slc_async_connect_user(loop, host, port, NULL, password, out);
}

int slc_async_connect_user(uv_loop_t *loop, const char *host, int port, const char *user,
                           const char *password, slc_async_t **out)
{
    if (out == NULL)
        return SLC_EINVAL;
    *out = NULL;
    if (loop == NULL || !common_valid_endpoint(host, port))
        return SLC_EINVAL;
    slc_async_t *h = calloc(1, sizeof *h);
    if (h == NULL || (h->host = strdup(host)) == NULL ||
        (h->cache = cache_create(SLC_CACHE_DEFAULT)) == NULL) {
        if (h != NULL)
            free(h->host);
        free(h);
        return SLC_ENOMEM;
    }
    h->port = port;
    h->clock = common_monotonic_ns;
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    if (ac == NULL || ac->err != 0 || uv_glue_attach(ac, loop) != REDIS_OK) {
        int rc = ac == NULL ? SLC_ENOMEM : SLC_EIO;
        if (ac != NULL)
            redisAsyncFree(ac);
        cache_free(h->cache);
        free(h->host);
        free(h);
        return rc;
    }
    ac->data = h;
    h->ac = ac;
    uv_idle_init(loop, &h->idle);
    h->idle.data = h;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (password != NULL && send_auth(h, user, password) != SLC_OK) {
        h->closing = true;
        h->ac = NULL;
        redisAsyncFree(ac);
        maybe_free(h);
        return SLC_ENOMEM;
    }
    *out = h;
    return SLC_OK;
}

void slc_async_close(slc_async_t *h)
{
    if (h == NULL || h->closing)
        return;
    h->closing = true;
    if (h->ac != NULL) {
        if (h->connected || h->ac->replies.head != NULL) {
            redisAsyncDisconnect(h->ac); /* after the replies still owed; then on_disconnect */
        } else {
            /* Still connecting with nothing sent: hiredis would free without on_disconnect. */
            redisAsyncContext *ac = h->ac;
            h->ac = NULL;
            redisAsyncFree(ac);
        }
    }
    maybe_free(h);
}

int slc_async_err(const slc_async_t *h)
{
    return h != NULL ? h->err : SLC_EINVAL;
}

const char *slc_async_errstr(const slc_async_t *h)
{
    return h != NULL ? h->errstr : "no client";
}

/* A request that may be sent: the handle is open and still has a connection. */
static int usable(slc_async_t *h)
{
    if (h->closing || h->freeing)
        return seterr(h, SLC_EINVAL, "the handle is closing");
    if (h->ac == NULL || (h->ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) != 0)
        return h->err != SLC_OK ? SLC_EIO
                                : seterr(h, SLC_EIO, "%s:%d: not connected", h->host, h->port);
    return SLC_OK;
}

static request_t *request_new(slc_async_t *h, request_kind_t kind, const char *rule,
                              const char *key, bool keep_name)
{
    size_t rule_len = keep_name ? strlen(rule) : 0, key_len = keep_name ? strlen(key) : 0;
    request_t *req = calloc(1, sizeof *req + rule_len + key_len + 1);
    if (req == NULL)
        return NULL;
    req->h = h;
    req->kind = kind;
    req->rule_len = rule_len;
    req->key_len = key_len;
    memcpy(req->name, rule, rule_len);
    memcpy(req->name + rule_len, key, key_len);
    return req;
}

static int send_request(slc_async_t *h, request_t *req, int argc, const char **argv,
                        const size_t *lens)
{
    if (redisAsyncCommandArgv(h->ac, on_reply, req, argc, argv, lens) != REDIS_OK) {
        free(req);
        return seterr(h, SLC_EIO, "%s:%d: cannot queue the request", h->host, h->port);
    }
    h->pending++;
    return SLC_OK;
}

static int decide(slc_async_t *h, const char *rule, const char *key, int64_t cost, int peek,
                  const slc_request_opts_t *opts, slc_decision_cb cb, void *arg)
{
    if (h == NULL)
        return SLC_EINVAL;
    if (rule == NULL || key == NULL || cb == NULL || cost < 0)
        return seterr(h, SLC_EINVAL, "%s", cost < 0 ? "cost must be >= 0" : "NULL argument");
    int rc = usable(h);
    if (rc != SLC_OK)
        return rc;
    const char *priority = common_priority(opts);
    bool cached = !peek && priority == NULL; /* a refusal holds for its priority only */
    request_t *req = request_new(h, REQUEST_DECISION, rule, key, cached);
    if (req == NULL)
        return seterr(h, SLC_ENOMEM, "out of memory");
    req->on_decision = cb;
    req->arg = arg;
    req->cost = cost;
    req->remember = cached;
    req->sent_ns = h->clock(h->clock_arg);
    req->epoch = cache_epoch(h->cache);
    if (cached && cost > 0 &&
        cache_lookup(h->cache, rule, req->rule_len, key, req->key_len, cost, req->sent_ns,
                     &req->d)) {
        req->remember = false;
        if (h->local_tail != NULL)
            h->local_tail->next = req;
        else
            h->local_head = req;
        h->local_tail = req;
        h->pending++;
        uv_idle_start(&h->idle, on_idle);
        return SLC_OK;
    }
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char costbuf[COMMON_INT_CHARS];
    int argc = common_decision_argv(rule, key, cost, peek, priority, argv, lens, costbuf);
    return send_request(h, req, argc, argv, lens);
}

int slc_async_allow(slc_async_t *h, const char *rule, const char *key, int64_t cost,
                    slc_decision_cb cb, void *arg)
{
    return decide(h, rule, key, cost, 0, NULL, cb, arg);
}

int slc_async_peek(slc_async_t *h, const char *rule, const char *key, slc_decision_cb cb, void *arg)
{
    return decide(h, rule, key, 0, 1, NULL, cb, arg);
}

int slc_async_allow_ex(slc_async_t *h, const char *rule, const char *key, int64_t cost,
                       const slc_request_opts_t *opts, slc_decision_cb cb, void *arg)
{
    return decide(h, rule, key, cost, 0, opts, cb, arg);
}

int slc_async_peek_ex(slc_async_t *h, const char *rule, const char *key,
                      const slc_request_opts_t *opts, slc_decision_cb cb, void *arg)
{
    return decide(h, rule, key, 0, 1, opts, cb, arg);
}

/*
 * A settle that gives room back forgets the key's refusals twice. When sent: an answer on its
 * way to a request sent before is from an older epoch, so it is not remembered. When answered:
 * every answer after it is to a request sent while the settle was on its way, which the server
 * may have decided before the settle ran (the client relies on the order of the replies, not
 * on the order in which the server decides), so none of those is remembered either.
 */
int slc_async_settle(slc_async_t *h, const char *rule, const char *key, int64_t reserved,
                     int64_t actual, int64_t at_ms, slc_decision_cb cb, void *arg)
{
    if (h == NULL)
        return SLC_EINVAL;
    const char *invalid = common_settle_invalid(reserved, actual, at_ms);
    if (rule == NULL || key == NULL || cb == NULL || invalid != NULL)
        return seterr(h, SLC_EINVAL, "%s", invalid != NULL ? invalid : "NULL argument");
    int rc = usable(h);
    if (rc != SLC_OK)
        return rc;
    bool gives_back = actual < reserved;
    request_t *req = request_new(h, REQUEST_DECISION, rule, key, gives_back);
    if (req == NULL)
        return seterr(h, SLC_ENOMEM, "out of memory");
    req->on_decision = cb;
    req->arg = arg;
    req->forget = gives_back;
    if (gives_back)
        cache_forget(h->cache, rule, req->rule_len, key, req->key_len);
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[3][COMMON_INT_CHARS];
    int argc = common_settle_argv(rule, key, reserved, actual, at_ms, argv, lens, nums);
    return send_request(h, req, argc, argv, lens);
}

int slc_async_acquire(slc_async_t *h, const char *rule, const char *key, int64_t cost,
                      int64_t timeout_ms, slc_acquire_cb cb, void *arg)
{
    return slc_async_acquire_ex(h, rule, key, cost, timeout_ms, NULL, cb, arg);
}

int slc_async_acquire_ex(slc_async_t *h, const char *rule, const char *key, int64_t cost,
                         int64_t timeout_ms, const slc_request_opts_t *opts, slc_acquire_cb cb,
                         void *arg)
{
    if (h == NULL)
        return SLC_EINVAL;
    const char *invalid = common_acquire_invalid(cost, timeout_ms);
    if (rule == NULL || key == NULL || cb == NULL || invalid != NULL)
        return seterr(h, SLC_EINVAL, "%s", invalid != NULL ? invalid : "NULL argument");
    int rc = usable(h);
    if (rc != SLC_OK)
        return rc;
    request_t *req = request_new(h, REQUEST_ACQUIRE, rule, key, false);
    if (req == NULL)
        return seterr(h, SLC_ENOMEM, "out of memory");
    req->on_acquire = cb;
    req->arg = arg;
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[2][COMMON_INT_CHARS];
    int argc =
        common_acquire_argv(rule, key, cost, timeout_ms, common_priority(opts), argv, lens, nums);
    return send_request(h, req, argc, argv, lens);
}

int slc_async_release(slc_async_t *h, const char *rule, const char *key, uint64_t hold_id,
                      slc_done_cb cb, void *arg)
{
    return slc_async_release_ex(h, rule, key, hold_id, NULL, cb, arg);
}

int slc_async_release_ex(slc_async_t *h, const char *rule, const char *key, uint64_t hold_id,
                         const slc_release_opts_t *opts, slc_done_cb cb, void *arg)
{
    if (h == NULL)
        return SLC_EINVAL;
    const char *invalid = common_release_invalid(hold_id, opts);
    if (rule == NULL || key == NULL || cb == NULL || invalid != NULL)
        return seterr(h, SLC_EINVAL, "%s", invalid != NULL ? invalid : "NULL argument");
    int rc = usable(h);
    if (rc != SLC_OK)
        return rc;
    request_t *req = request_new(h, REQUEST_RELEASE, rule, key, true);
    if (req == NULL)
        return seterr(h, SLC_ENOMEM, "out of memory");
    req->on_done = cb;
    req->arg = arg;
    req->forget = true; /* as a settle giving units back: see slc_async_settle() */
    cache_forget(h->cache, rule, req->rule_len, key, req->key_len);
    const char *argv[COMMON_ARGV_MAX];
    size_t lens[COMMON_ARGV_MAX];
    char nums[2][COMMON_INT_CHARS];
    int argc = common_release_argv(rule, key, hold_id, opts, argv, lens, nums);
    return send_request(h, req, argc, argv, lens);
}

int slc_async_reset(slc_async_t *h, const char *rule, const char *key, slc_done_cb cb, void *arg)
{
    if (h == NULL)
        return SLC_EINVAL;
    if (rule == NULL || key == NULL || cb == NULL)
        return seterr(h, SLC_EINVAL, "NULL argument");
    int rc = usable(h);
    if (rc != SLC_OK)
        return rc;
    request_t *req = request_new(h, REQUEST_DONE, rule, key, false);
    if (req == NULL)
        return seterr(h, SLC_ENOMEM, "out of memory");
    req->on_done = cb;
    req->arg = arg;
    cache_forget(h->cache, rule, strlen(rule), key, strlen(key));
    const char *argv[3] = {"SL.RESET", rule, key};
    return send_request(h, req, 3, argv, NULL);
}

int slc_async_set_cache_size(slc_async_t *h, size_t entries)
{
    if (h == NULL)
        return SLC_EINVAL;
    if (entries > SLC_CACHE_MAX)
        return seterr(h, SLC_EINVAL, "cache size %zu is above the maximum %u", entries,
                      SLC_CACHE_MAX);
    if (!cache_resize(&h->cache, entries))
        return seterr(h, SLC_ENOMEM, "cannot allocate a cache of %zu entries", entries);
    return SLC_OK;
}

void slc_async_set_clock(slc_async_t *h, slc_clock_fn clock, void *arg)
{
    if (h == NULL)
        return;
    h->clock = clock != NULL ? clock : common_monotonic_ns;
    h->clock_arg = clock != NULL ? arg : NULL;
    cache_clear(h->cache);
}

uint64_t slc_async_cache_hits(const slc_async_t *h)
{
    return h != NULL ? cache_hits(h->cache) : 0;
}
