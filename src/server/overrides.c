/*
 * overrides.c - per-key overrides as the engine sees them: each worker's cache of what the
 * config store says about (rule, key), and the lookups behind its misses. An override's numbers
 * are handed to the request store, which may keep a handle for them (the memory store: the table
 * that holds the overridden keys' state).
 *
 * The cache is direct-mapped (OV_CACHE_SLOTS per worker). An entry says "no override" or the
 * override's parameters; it is valid for the override TTL and only while the worker's rule set
 * is of the generation it was read under, so a change made through this server is seen by the
 * next decision. Rules the store held no overrides for are never looked up.
 *
 * A miss is a read of the config store, which a loop never does itself: the decision waits
 * (an ov_waiter_t) while the config thread reads, and resumes on its loop when the answer comes.
 * Decisions for a (rule, key) that is already being looked up wait for the same lookup, in the
 * order they came. Without a config thread (tests, tools) a miss is read at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/engine_impl.h"

/* ---- override handles ---------------------------------------------------------------------- */

void *override_table(rule_tables_t *t, const sl_rule_t *rule)
{
    void *handle = NULL;
    if (t->ops->override != NULL && t->ops->override(t->data, rule, &handle) != 0) {
        return NULL;
    }
    return handle;
}

/* The store's answer for a key (en) names the numbers its usage belongs under: the store moves
 * it there if it is elsewhere (the memory store: into the override's table). A blocked key's
 * state stays where it is, for when it is unblocked. */
static void entry_adopt(const rule_state_t *rs, const ov_entry_t *en, const void *key,
                        size_t key_len, int64_t now_ns)
{
    rule_tables_t *t = rs->t;
    if (t->ops->adopt == NULL || en->blocked) {
        return;
    }
    t->ops->adopt(t->data, en->present ? en->handle : NULL, key, key_len, now_ns);
}

/* ---- the cache ----------------------------------------------------------------------------- */

static uint64_t entry_hash(const rule_state_t *rs, const void *key, size_t key_len)
{
    return sl_hash64(key, key_len, (uint64_t)(uintptr_t)rs);
}

static ov_entry_t *cache_slot(engine_worker_t *w, uint64_t h)
{
    if (w->ov_cache == NULL) {
        w->ov_cache = calloc(OV_CACHE_SLOTS, sizeof *w->ov_cache);
        if (w->ov_cache == NULL) {
            return NULL;
        }
    }
    return &w->ov_cache[h & (OV_CACHE_SLOTS - 1)];
}

const ov_entry_t *override_cached(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                  size_t key_len, int64_t now_ns)
{
    uint64_t h = entry_hash(rs, key, key_len);
    ov_entry_t *en = cache_slot(w, h);
    if (en != NULL && en->hash == h && en->generation == w->set->generation && en->rule == rs &&
        en->expires_ns > now_ns && en->key_len == key_len && memcmp(en->key, key, key_len) == 0) {
        return en;
    }
    return NULL;
}

/*
 * Caches what the store answered for (rs, key): rc as config_store_get_override returned it,
 * json its text (consumed), read while the worker's set was of `generation`. Returns the entry,
 * or NULL when the answer is an error, invalid, or memory ran out (apply on_store_error).
 */
static const ov_entry_t *cache_fill(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                    size_t key_len, int rc, char *json, uint64_t generation,
                                    int64_t now_ns)
{
    uint64_t h = entry_hash(rs, key, key_len);
    ov_entry_t *en = cache_slot(w, h);
    char *copy = rc >= 0 && en != NULL ? malloc(key_len + 1) : NULL;
    if (copy == NULL) {
        free(json);
        return NULL;
    }
    memcpy(copy, key, key_len);
    free(en->key);
    *en = (ov_entry_t){.hash = h,
                       .generation = generation,
                       .rule = rs,
                       .expires_ns = now_ns + w->engine->cfg.override_ttl_ns,
                       .key = copy,
                       .key_len = key_len,
                       .window_ns = rs->def.rule.window_ns};
    if (rc == CONFIG_STORE_NOTFOUND) {
        return en; /* the negative cache */
    }
    rule_override_t ov;
    char perr[RULEDEF_ERR_MAX];
    rc = override_parse_json(&rs->def, key, key_len, json, strlen(json), &ov, perr);
    free(json);
    if (rc != 0) {
        en->hash = 0;
        return NULL;
    }
    en->present = true;
    en->blocked = ov.blocked;
    en->window_ns = ov.rule.window_ns;
    en->ov_rule = ov.rule;
    const request_store_ops_t *ops = rs->t->ops;
    if (!ov.blocked && ops->override != NULL) {
        if (ops->override(rs->t->data, &ov.rule, &en->handle) != 0) {
            en->hash = 0;
            override_free(&ov);
            return NULL;
        }
    }
    override_free(&ov);
    return en;
}

/* cache_fill, and the key's usage moved to the table the answer names (unless the answer is
 * stale: generation 0, read before a change), converted at decided_ns: the time of the first
 * decision waiting for it (converted later, a state would look younger to that decision). */
static const ov_entry_t *cache_fill_adopt(engine_worker_t *w, const rule_state_t *rs,
                                          const void *key, size_t key_len, int rc, char *json,
                                          uint64_t generation, int64_t now_ns, int64_t decided_ns)
{
    const ov_entry_t *en = cache_fill(w, rs, key, key_len, rc, json, generation, now_ns);
    if (en != NULL && generation != 0) {
        entry_adopt(rs, en, key, key_len, decided_ns);
    }
    return en;
}

const ov_entry_t *override_lookup_now(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                      size_t key_len, int64_t now_ns)
{
    char serr[CONFIG_STORE_ERR_MAX];
    if (w->store == NULL && config_store_open(w->engine->store_url, &w->store, serr) != 0) {
        w->store = NULL;
        return NULL;
    }
    char *json = NULL;
    int rc = config_store_get_override(w->store, rs->def.name, key, key_len, &json, serr);
    return cache_fill_adopt(w, rs, key, key_len, rc, json, w->set->generation, now_ns, now_ns);
}

/* ---- lookups on the config thread ---------------------------------------------------------- */

struct ov_wait {
    config_job_t job; /* first: the config thread hands it back */
    engine_worker_t *w;
    rule_state_t *rs;    /* held */
    uint64_t generation; /* the worker's set when the lookup was asked for */
    uint64_t hash;
    char *key; /* owned */
    size_t key_len;
    int rc; /* config_store_get_override's answer */
    char *json;
    ov_waiter_t *head, *tail; /* decisions waiting, oldest first */
    bool cancelled;           /* its worker detached: nothing waits any more */
    ov_wait_t *next;          /* in the worker's list of lookups in flight */
};

static int wait_run(config_job_t *job, config_store_t *store, bool last)
{
    (void)last;
    ov_wait_t *x = (ov_wait_t *)job;
    char serr[CONFIG_STORE_ERR_MAX];
    x->rc = config_store_get_override(store, x->rs->def.name, x->key, x->key_len, &x->json, serr);
    return CONFIG_JOB_DONE;
}

static void wait_free(ov_wait_t *x)
{
    engine_rule_release(x->rs);
    free(x->json);
    free(x->key);
    free(x);
}

static void wait_unlink(engine_worker_t *w, ov_wait_t *x)
{
    for (ov_wait_t **pp = &w->ov_waits; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == x) {
            *pp = x->next;
            w->nov_waits--;
            return;
        }
    }
}

/* On the worker's loop: the answer is cached and every waiting decision goes on, in order. */
static void wait_done(config_job_t *job)
{
    ov_wait_t *x = (ov_wait_t *)job;
    if (x->cancelled) {
        wait_free(x);
        return;
    }
    engine_worker_t *w = x->w;
    wait_unlink(w, x);
    int64_t now_ns = sl_now_ns();
    /* read before a change made meanwhile: good for the decisions that asked, stale for later */
    uint64_t generation = w->set != NULL && w->set->generation == x->generation ? x->generation : 0;
    const ov_entry_t *en =
        cache_fill_adopt(w, x->rs, x->key, x->key_len, x->rc, x->json, generation, now_ns,
                         x->head != NULL && x->head->now_ns < now_ns ? x->head->now_ns : now_ns);
    x->json = NULL;
    ov_entry_t copy; /* the cache slot may be reused by what the decisions start */
    if (en != NULL) {
        copy = *en;
    }
    for (ov_waiter_t *wt = x->head, *next; wt != NULL; wt = next) {
        next = wt->next;
        wt->resume(wt, en != NULL ? &copy : NULL);
    }
    wait_free(x);
}

static void wait_drop(config_job_t *job)
{
    wait_free((ov_wait_t *)job);
}

void override_wait(engine_worker_t *w, rule_state_t *rs, const void *key_in, size_t key_len,
                   ov_waiter_t *waiter)
{
    waiter->next = NULL;
    uint64_t h = entry_hash(rs, key_in, key_len);
    for (ov_wait_t *x = w->ov_waits; x != NULL; x = x->next) {
        if (x->hash == h && x->rs == rs && x->key_len == key_len &&
            memcmp(x->key, key_in, key_len) == 0) {
            x->tail->next = waiter;
            x->tail = waiter;
            return;
        }
    }
    ov_wait_t *x = w->nov_waits < OV_WAITS_MAX ? calloc(1, sizeof *x) : NULL;
    char *key = x != NULL ? malloc(key_len + 1) : NULL;
    if (key == NULL) {
        free(x);
        waiter->resume(waiter, NULL); /* too many lookups in flight: on_store_error */
        return;
    }
    memcpy(key, key_in, key_len);
    *x = (ov_wait_t){.job = {.run = wait_run,
                             .done = wait_done,
                             .drop = wait_drop,
                             .inbox = w->inbox,
                             .admin = false},
                     .w = w,
                     .rs = rs,
                     .generation = w->set->generation,
                     .hash = h,
                     .key = key,
                     .key_len = key_len,
                     .head = waiter,
                     .tail = waiter,
                     .next = w->ov_waits};
    engine_rule_hold(rs);
    w->ov_waits = x;
    w->nov_waits++;
    config_job_submit(w->engine->ct, &x->job);
}

void override_worker_detach(engine_worker_t *w)
{
    while (w->ov_waits != NULL) {
        ov_wait_t *x = w->ov_waits;
        w->ov_waits = x->next;
        x->cancelled = true;
        for (ov_waiter_t *wt = x->head, *next; wt != NULL; wt = next) {
            next = wt->next;
            wt->resume(wt, NULL);
        }
        x->head = x->tail = NULL;
    }
    w->nov_waits = 0;
}

void override_worker_free(engine_worker_t *w)
{
    if (w->ov_cache != NULL) {
        for (size_t j = 0; j < OV_CACHE_SLOTS; j++) {
            free(w->ov_cache[j].key);
        }
        free(w->ov_cache);
        w->ov_cache = NULL;
    }
    config_store_close(w->store);
    w->store = NULL;
}
