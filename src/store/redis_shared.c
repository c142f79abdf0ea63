/*
 * redis_shared.c - what the Redis stores of every loop share (redis_shared_t): the start-up
 * probe, each node's mode, and the over-limit caches' epochs (see redis_store.h).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "proto/buf.h"
#include "store/lua_scripts.h"
#include "remote/overlimit_cache.h"
#include "store/redis_store_impl.h"

/* ---- the shared state: start-up probe, node modes, epochs ---------------------------------- */

/* The mode a reply to COMMAND INFO sl.throttle says, or 0 when it is no such reply. */
redis_mode_t rs_probe_mode(const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
        return 0;
    }
    return r->element[0]->type == REDIS_REPLY_ARRAY ? REDIS_MODE_MODULE : REDIS_MODE_LUA;
}

/* The run_id in a reply to INFO server into out, or "" when it has none. */
void rs_probe_run_id(const redisReply *r, char out[RUN_ID_MAX + 1])
{
    static const char field[] = "\r\nrun_id:";
    out[0] = '\0';
    const char *at = NULL;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        at = strstr(r->str, field);
    }
    if (at == NULL) {
        return;
    }
    at += sizeof field - 1;
    size_t n = strspn(at, "0123456789abcdefABCDEF");
    if (n == RUN_ID_MAX) {
        memcpy(out, at, n);
        out[n] = '\0';
    }
}

unsigned rs_node_probed(redis_shared_t *sh, shared_node_t *n, redis_mode_t mode, const char *run_id,
                        int64_t now_ns)
{
    unsigned news = 0;
    pthread_mutex_lock(&sh->lock);
    if (mode != 0 && atomic_exchange(&n->mode, (int)mode) != (int)mode) {
        news |= REDIS_NODE_MODE;
    }
    if (run_id[0] != '\0') {
        if (n->run_id[0] != '\0' && strcmp(n->run_id, run_id) != 0) {
            news |= REDIS_NODE_LOST;
        }
        snprintf(n->run_id, sizeof n->run_id, "%s", run_id);
    }
    if (news != 0) {
        atomic_fetch_add_explicit(&n->generation, 1, memory_order_relaxed);
    }
    if (n->known && news != 0) { /* before, nothing was sent to it in another mode */
        atomic_store_explicit(&n->closed_ns, now_ns, memory_order_relaxed);
        news |= REDIS_NODE_CLOSED;
    }
    n->known = n->known || mode != 0;
    pthread_mutex_unlock(&sh->lock);
    return news;
}

/* Asks the first reachable node of cfg, blocking. Returns 0 with *mode, its run_id ("" when it
 * did not say) and its name, or -1. */
static int probe_blocking(const rc_config_t *cfg, int64_t timeout_ns, redis_mode_t *mode,
                          char run_id[RUN_ID_MAX + 1], char name[NODE_NAME_MAX], char *err)
{
    struct timeval tv = {.tv_sec = (time_t)(timeout_ns / 1000000000),
                         .tv_usec = (suseconds_t)(timeout_ns % 1000000000 / 1000)};
    if (tv.tv_sec < 1) {
        tv.tv_sec = 1; /* connecting at start-up may take longer than one decision */
        tv.tv_usec = 0;
    }
    char last[REDIS_STORE_ERR_MAX] = "no nodes";
    for (size_t i = 0; i < cfg->nseeds; i++) {
        redisContext *c = redisConnectWithTimeout(cfg->host[i], cfg->port[i], tv);
        if (c == NULL || c->err != 0) {
            snprintf(last, sizeof last, "redis %s:%d: %s", cfg->host[i], cfg->port[i],
                     c != NULL ? c->errstr : "out of memory");
            redisFree(c);
            continue;
        }
        redisSetTimeout(c, tv);
        if (cfg->password[0] != '\0') {
            redisReply *a = cfg->user[0] != '\0'
                                ? redisCommand(c, "AUTH %s %s", cfg->user, cfg->password)
                                : redisCommand(c, "AUTH %s", cfg->password);
            bool refused = a == NULL || a->type == REDIS_REPLY_ERROR;
            if (refused) {
                snprintf(last, sizeof last, "redis %s:%d: AUTH refused: %.160s", cfg->host[i],
                         cfg->port[i], a != NULL ? a->str : c->errstr);
            }
            freeReplyObject(a);
            if (refused) {
                redisFree(c);
                continue;
            }
        }
        redisReply *r = redisCommand(c, "COMMAND INFO sl.throttle");
        redis_mode_t found = rs_probe_mode(r);
        if (r == NULL) {
            snprintf(last, sizeof last, "redis %s:%d: %s", cfg->host[i], cfg->port[i], c->errstr);
        } else if (found == 0) {
            snprintf(last, sizeof last, "redis %s:%d: COMMAND INFO: %s", cfg->host[i], cfg->port[i],
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        }
        freeReplyObject(r);
        r = found != 0 ? redisCommand(c, "INFO server") : NULL;
        rs_probe_run_id(r, run_id);
        freeReplyObject(r);
        redisFree(c);
        if (found != 0) {
            *mode = found;
            snprintf(name, NODE_NAME_MAX, "%s:%d", cfg->host[i], cfg->port[i]);
            return 0;
        }
    }
    snprintf(err, REDIS_STORE_ERR_MAX, "%s", last);
    return -1;
}

/* The shared node named name, added with the start mode if new; NULL when the table is full. */
shared_node_t *rs_shared_node(redis_shared_t *sh, const char *name)
{
    size_t n = atomic_load_explicit(&sh->nnodes, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(sh->nodes[i].name, name) == 0) {
            return &sh->nodes[i];
        }
    }
    pthread_mutex_lock(&sh->lock);
    shared_node_t *found = NULL;
    n = atomic_load_explicit(&sh->nnodes, memory_order_relaxed);
    for (size_t i = 0; i < n && found == NULL; i++) {
        if (strcmp(sh->nodes[i].name, name) == 0) {
            found = &sh->nodes[i];
        }
    }
    if (found == NULL && n < SHARED_NODES_MAX) {
        found = &sh->nodes[n];
        snprintf(found->name, sizeof found->name, "%s", name);
        atomic_store_explicit(&found->mode, sh->start_mode, memory_order_relaxed);
        atomic_store_explicit(&sh->nnodes, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&sh->lock);
    return found;
}

int redis_shared_create(const rc_config_t *cfg, int64_t timeout_ns, redis_shared_t **out, char *err)
{
    redis_mode_t mode;
    char name[NODE_NAME_MAX], run_id[RUN_ID_MAX + 1];
    if (probe_blocking(cfg, timeout_ns, &mode, run_id, name, err) != 0) {
        return -1;
    }
    redis_shared_t *sh = calloc(1, sizeof *sh);
    if (sh == NULL) {
        snprintf(err, REDIS_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    pthread_mutex_init(&sh->lock, NULL);
    sh->start_mode = mode;
    /* keys come from clients: a seed they cannot know keeps them from choosing keys that
     * share a cache entry (or an epoch stripe) with someone else's */
    sh->seed =
        sl_hash_mix((uint64_t)sl_now_ns() ^ (uint64_t)(uintptr_t)sh ^ SL_HASH_P0, SL_HASH_P2);
    shared_node_t *first = rs_shared_node(sh, name);
    rs_node_probed(sh, first, mode, run_id, 0); /* known now: nothing to close */
    *out = sh;
    return 0;
}

void redis_shared_free(redis_shared_t *sh)
{
    if (sh == NULL) {
        return;
    }
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

void redis_shared_modes(const redis_shared_t *sh, size_t *module_nodes, size_t *lua_nodes)
{
    *module_nodes = *lua_nodes = 0;
    size_t n = atomic_load_explicit(&sh->nnodes, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&sh->nodes[i].mode, memory_order_relaxed) == REDIS_MODE_MODULE) {
            (*module_nodes)++;
        } else {
            (*lua_nodes)++;
        }
    }
}

void redis_shared_on_event(redis_shared_t *sh, redis_event_fn fn, void *arg)
{
    sh->on_event = fn;
    sh->on_event_arg = arg;
}

void rs_event(const redis_shared_t *sh, redis_event_t ev, const char *fmt, ...)
{
    if (sh->on_event == NULL) {
        return;
    }
    char text[REDIS_STORE_ERR_MAX + RC_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    sh->on_event(sh->on_event_arg, ev, text);
}

void redis_shared_set(redis_shared_t *sh, void **slot, void *store)
{
    pthread_mutex_lock(&sh->lock);
    *slot = store;
    pthread_mutex_unlock(&sh->lock);
}

void redis_shared_visit(redis_shared_t *sh, void *const *slot,
                        void (*fn)(void *arg, const void *store), void *arg)
{
    pthread_mutex_lock(&sh->lock);
    if (*slot != NULL) {
        fn(arg, *slot);
    }
    pthread_mutex_unlock(&sh->lock);
}

_Atomic uint64_t *rs_epoch_of(redis_shared_t *sh, uint64_t h)
{
    return &sh->epoch[h & (EPOCH_STRIPES - 1)];
}

/* Every cache entry of every loop is dropped, and no answer already on its way is remembered. */
void rs_forget_all(redis_shared_t *sh)
{
    for (size_t i = 0; i < EPOCH_STRIPES; i++) {
        atomic_fetch_add_explicit(&sh->epoch[i], 1, memory_order_release);
    }
}
