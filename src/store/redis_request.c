/*
 * redis_request.c - the Redis request store's entry (request_store.h): an adapter over
 * redis_store.h, where the module and Lua ways to decide live. The store is engine-wide (the
 * nodes' modes, the caches' epochs: redis_shared_t); each loop has its own redis_store_t. Keys
 * under any numbers of one algorithm share one state in Redis, so there is nothing per rule,
 * no override handle, and nothing to move when a key's override changes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis_store.h"
#include "store/request_store.h"

typedef struct redis_request {
    request_store_t base;
    rc_config_t rc;         /* where */
    redis_shared_t *shared; /* what every loop's store shares (modes, caches) */
    store_config_t cfg;
} redis_request_t;

extern const request_store_ops_t redis_request_ops; /* this file's entry, at its end */

static bool redis_accepts(const char *url)
{
    return url != NULL &&
           (strncmp(url, "redis://", 8) == 0 || strncmp(url, "redis-cluster://", 16) == 0);
}

static int redis_open(const char *url, const store_config_t *cfg, request_store_t **out, char *err)
{
    redis_request_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    char rerr[RC_ERR_MAX > REDIS_STORE_ERR_MAX ? RC_ERR_MAX : REDIS_STORE_ERR_MAX];
    if (rc_parse_url(url, &r->rc, rerr) != 0 ||
        redis_shared_create(&r->rc, cfg->timeout_ns, &r->shared, rerr) != 0) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "%s", rerr);
        free(r);
        return -1;
    }
    r->base.ops = &redis_request_ops;
    r->cfg = *cfg;
    *out = &r->base;
    return 0;
}

static void redis_close(request_store_t *s)
{
    redis_request_t *r = (redis_request_t *)s;
    redis_shared_free(r->shared);
    free(r);
}

/* A Redis node's mode changed (found on a connection to it): one line, from whichever loop saw
 * it first. */
static void mode_changed(void *arg, const char *node, redis_mode_t mode)
{
    const redis_request_t *r = arg;
    store_note_fn note = r->cfg.note;
    char text[REQUEST_STORE_ERR_MAX];
    if (note == NULL) {
        return;
    }
    if (mode == REDIS_MODE_MODULE) {
        snprintf(text, sizeof text, "redis %s: sluice.so is loaded: deciding with its commands",
                 node);
        note(0, text);
    } else {
        snprintf(text, sizeof text,
                 "redis %s: sluice.so is not loaded: deciding with the Lua "
                 "scripts",
                 node);
        note(1, text);
    }
}

static int redis_attach(request_store_t *s, uv_loop_t *loop, store_loop_t **slot, char *err)
{
    redis_request_t *r = (redis_request_t *)s;
    char rerr[REDIS_STORE_ERR_MAX];
    redis_store_t *rs;
    if (redis_store_create(loop, &r->rc, r->shared, r->cfg.timeout_ns, mode_changed, r, &rs,
                           rerr) != 0) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "redis store: %s", rerr);
        return -1;
    }
    redis_shared_set(r->shared, (redis_store_t **)slot, rs); /* stats() reads it */
    return 0;
}

static void redis_detach(request_store_t *s, store_loop_t **slot)
{
    redis_request_t *r = (redis_request_t *)s;
    redis_store_t *rs = (redis_store_t *)*slot;
    if (rs != NULL) {
        redis_shared_set(r->shared, (redis_store_t **)slot, NULL);
        redis_store_free(rs);
    }
}

static int redis_decide(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                        const store_request_t *req, int64_t now_ns, sl_decision_t *d,
                        store_done_fn fn, void *arg)
{
    (void)s;
    (void)d;
    redis_store_t *rs = (redis_store_t *)l;
    if (req->settle) {
        redis_store_settle(rs, tg->name, tg->numbers, tg->key, tg->key_len, req->reserved,
                           req->actual, req->charged_ns, now_ns, fn, arg);
    } else {
        redis_store_decide(rs, tg->name, tg->numbers, tg->key, tg->key_len, req->cost, now_ns, fn,
                           arg);
    }
    return STORE_PENDING;
}

/* The one-slot script when every pair asks one cost, else STORE_ENOTSUP: pair by pair. */
static int redis_decide_all(request_store_t *s, store_loop_t *l, const store_pair_t *pairs,
                            size_t n, int64_t now_ns, sl_decision_t *d, size_t *at, store_all_fn fn,
                            void *arg)
{
    (void)s;
    (void)now_ns;
    (void)d;
    (void)at;
    redis_pair_t rp[REDIS_ALL_MAX];
    if (n == 0 || n > REDIS_ALL_MAX) {
        return STORE_ENOTSUP;
    }
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].cost != pairs[0].cost) {
            return STORE_ENOTSUP;
        }
        rp[i] = (redis_pair_t){.name = pairs[i].tg.name,
                               .rule = pairs[i].tg.numbers,
                               .key = pairs[i].tg.key,
                               .key_len = pairs[i].tg.key_len,
                               .shadow = pairs[i].shadow};
    }
    if (redis_store_decide_all((redis_store_t *)l, rp, n, pairs[0].cost, fn, arg) != 0) {
        return STORE_ENOTSUP;
    }
    return STORE_PENDING;
}

/* The key under the rule's own numbers: an override's key (other numbers, same name) is the
 * same key in Redis. */
static int redis_reset(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                       store_done_fn fn, void *arg)
{
    (void)s;
    redis_store_reset((redis_store_t *)l, tg->name, tg->numbers, tg->key, tg->key_len, fn, arg);
    return STORE_PENDING;
}

static void redis_forget(store_loop_t *l, const store_target_t *tg)
{
    redis_store_forget((redis_store_t *)l, tg->name, tg->numbers, tg->key, tg->key_len);
}

static const char *redis_describe(const request_store_t *s)
{
    const redis_request_t *r = (const redis_request_t *)s;
    size_t module, lua;
    redis_shared_modes(r->shared, &module, &lua);
    if (lua == 0) {
        return "redis (sluice.so module)";
    }
    return module == 0 ? "redis (Lua scripts)"
                       : "redis (sluice.so module on some nodes, Lua scripts on others)";
}

static void redis_modes(const request_store_t *s, size_t *module_nodes, size_t *lua_nodes)
{
    const redis_request_t *r = (const redis_request_t *)s;
    redis_shared_modes(r->shared, module_nodes, lua_nodes);
}

/* The counters of a loop's store, under the lock that keeps it from being freed meanwhile. */
static void stats_of(void *arg, const redis_store_t *store)
{
    store_stats_t *out = arg;
    const redis_store_stats_t *s = redis_store_stats(store);
    const rc_stats_t *r = redis_store_client_stats(store);
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
    *out = (store_stats_t){.decisions = LOAD(s->decisions),
                           .cache_hits = LOAD(s->cache_hits),
                           .timeouts = LOAD(s->timeouts),
                           .errors = LOAD(s->errors),
                           .noscript = LOAD(s->noscript),
                           .redirects = LOAD(r->redirects),
                           .refreshes = LOAD(r->refreshes),
                           .reconnects = LOAD(r->reconnects)};
#undef LOAD
}

static void redis_stats(request_store_t *s, store_loop_t *const *slot, store_stats_t *out)
{
    redis_request_t *r = (redis_request_t *)s;
    redis_shared_visit(r->shared, (redis_store_t *const *)slot, stats_of, out);
}

const request_store_ops_t redis_request_ops = {
    .name = "redis",
    .url_form = "redis://host:port or redis-cluster://host:port,host:port,...",
    .accepts = redis_accepts,
    .open = redis_open,
    .close = redis_close,
    .attach = redis_attach,
    .detach = redis_detach,
    .decide = redis_decide,
    .decide_all = redis_decide_all,
    .reset = redis_reset,
    .forget = redis_forget,
    .describe = redis_describe,
    .modes = redis_modes,
    .stats = redis_stats,
};

_Static_assert(STORE_ALL_RETRY == REDIS_ALL_RETRY && STORE_ALL_MAX == REDIS_ALL_MAX,
               "redis_store_decide_all's answer is passed on as it is");
