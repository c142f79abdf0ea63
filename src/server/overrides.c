/*
 * overrides.c - per-key overrides as the engine sees them: each worker's cache of what the
 * config store says about (rule, key), the lookups behind its misses, and the tables that hold
 * overridden keys' state (memory store).
 *
 * The cache is direct-mapped (OV_CACHE_SLOTS per worker). An entry says "no override" or the
 * override's parameters; it is valid for the override TTL and only while the worker's rule set
 * is of the generation it was read under, so a change made through this server is seen by the
 * next decision. Rules the store held no overrides for are never looked up.
 *
 * A miss is a read of the config store, which a loop never does itself: the decision waits
 * (engine_op_t) while the config thread reads, and continues on its loop when the answer comes.
 * Decisions for a (rule, key) that is already being looked up wait for the same lookup, in the
 * order they came. Without a config thread (tests, tools) a miss is read at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "server/engine_impl.h"

/* ---- override tables ----------------------------------------------------------------------- */

sl_table_t *override_table(engine_t *e, rule_tables_t *t, const sl_rule_t *rule)
{
    sl_table_t *found = NULL;
    pthread_mutex_lock(&t->ov_lock);
    for (size_t i = 0; i < t->nov && found == NULL; i++) {
        if (params_equal(&t->ov[i].rule, rule)) {
            found = t->ov[i].table;
        }
    }
    if (found == NULL) {
        override_table_t *grown = realloc(t->ov, (t->nov + 1) * sizeof *t->ov);
        if (grown != NULL) {
            t->ov = grown;
            found = engine_new_table(e, rule);
            if (found != NULL) {
                t->ov[t->nov].rule = *rule;
                t->ov[t->nov].table = found;
                t->nov++;
            }
        }
    }
    pthread_mutex_unlock(&t->ov_lock);
    return found;
}

/*
 * A key's usage lives in one table of its rule: the one its override names, or the rule's own.
 * Moves the key into `to` from whichever other table of t holds it (sl_table_adopt: converted,
 * the copy with the most usage kept when two do). The tables are listed under ov_lock and
 * adopted from without it; there are at most SL_MULTI_MAX - 1 per call, so more are done in
 * turns (each turn keeps the most usage of `to` and its share).
 */
static void tables_adopt(rule_tables_t *t, sl_table_t *to, const void *key, size_t key_len,
                         int64_t now_ns)
{
    pthread_mutex_lock(&t->ov_lock);
    size_t n = 0, cap = t->nov + 1;
    sl_table_t *stack[16];
    sl_table_t **from = cap <= 16 ? stack : malloc(cap * sizeof *from);
    for (size_t i = 0; from != NULL && i <= t->nov; i++) {
        sl_table_t *x = i == 0 ? t->table : t->ov[i - 1].table;
        if (x != to) {
            from[n++] = x;
        }
    }
    pthread_mutex_unlock(&t->ov_lock);
    for (size_t at = 0; from != NULL && at < n; at += SL_MULTI_MAX - 1) {
        size_t part = n - at < SL_MULTI_MAX - 1 ? n - at : SL_MULTI_MAX - 1;
        sl_table_adopt(to, key, key_len, from + at, part, now_ns); /* at the cap: stays put */
    }
    if (from != stack) {
        free(from);
    }
}

/* The store's answer for a key (en) names the table its usage belongs in: moved there if it is
 * elsewhere. Memory store only (Redis keeps one state per key whatever its numbers); a blocked
 * key's state stays where it is, for when it is unblocked. */
static void entry_adopt(engine_worker_t *w, const rule_state_t *rs, const ov_entry_t *en,
                        const void *key, size_t key_len, int64_t now_ns)
{
    rule_tables_t *t = rs->t;
    if (w->redis != NULL || en->blocked) {
        return;
    }
    sl_table_t *to = en->present ? en->table : t->table;
    pthread_mutex_lock(&t->ov_lock);
    bool alone = t->nov == 0; /* no override table yet: nowhere else to be */
    pthread_mutex_unlock(&t->ov_lock);
    if (!alone) {
        tables_adopt(t, to, key, key_len, now_ns);
    }
}

typedef struct keys_ctx {
    char *buf; /* key_len (size_t) then the key, one after another */
    size_t len, cap;
} keys_ctx_t;

static int collect_key(void *arg, const void *key, size_t key_len, const void *state,
                       size_t state_size)
{
    (void)state;
    (void)state_size;
    keys_ctx_t *k = arg;
    size_t need = k->len + sizeof key_len + key_len;
    if (need > k->cap) {
        size_t cap = need > 2 * k->cap ? need : 2 * k->cap;
        char *grown = realloc(k->buf, cap);
        if (grown == NULL) {
            return 1;
        }
        k->buf = grown;
        k->cap = cap;
    }
    memcpy(k->buf + k->len, &key_len, sizeof key_len);
    memcpy(k->buf + k->len + sizeof key_len, key, key_len);
    k->len = need;
    return 0;
}

void override_tables_return(rule_tables_t *t, int64_t now_ns)
{
    pthread_mutex_lock(&t->ov_lock);
    size_t nov = t->nov;
    sl_table_t *stack[16];
    sl_table_t **ov = nov <= 16 ? stack : malloc(nov * sizeof *ov);
    for (size_t i = 0; ov != NULL && i < nov; i++) {
        ov[i] = t->ov[i].table;
    }
    pthread_mutex_unlock(&t->ov_lock);
    for (size_t i = 0; ov != NULL && i < nov; i++) {
        keys_ctx_t k = {0};
        sl_table_foreach(ov[i], collect_key, &k);
        for (size_t at = 0; at < k.len;) {
            size_t len;
            memcpy(&len, k.buf + at, sizeof len);
            tables_adopt(t, t->table, k.buf + at + sizeof len, len, now_ns);
            at += sizeof len + len;
        }
        free(k.buf);
    }
    if (ov != stack) {
        free(ov);
    }
}

/* ---- the cache ----------------------------------------------------------------------------- */

static uint64_t entry_hash(const rule_state_t *rs, const void *key, size_t key_len)
{
    return hash_bytes(key, key_len, (uint64_t)(uintptr_t)rs);
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
    if (!ov.blocked && w->redis == NULL) {
        en->table = override_table(w->engine, rs->t, &ov.rule);
        if (en->table == NULL) {
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
        entry_adopt(w, rs, en, key, key_len, decided_ns);
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
    engine_op_t *head, *tail; /* decisions waiting, oldest first */
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
    for (engine_op_t *op = x->head, *next; op != NULL; op = next) {
        next = op->next;
        engine_op_continue(op, en != NULL ? &copy : NULL);
    }
    wait_free(x);
}

static void wait_drop(config_job_t *job)
{
    wait_free((ov_wait_t *)job);
}

void override_wait(engine_worker_t *w, engine_op_t *op)
{
    op->next = NULL;
    uint64_t h = entry_hash(op->rs, op->key, op->key_len);
    for (ov_wait_t *x = w->ov_waits; x != NULL; x = x->next) {
        if (x->hash == h && x->rs == op->rs && x->key_len == op->key_len &&
            memcmp(x->key, op->key, op->key_len) == 0) {
            x->tail->next = op;
            x->tail = op;
            return;
        }
    }
    ov_wait_t *x = w->nov_waits < OV_WAITS_MAX ? calloc(1, sizeof *x) : NULL;
    char *key = x != NULL ? malloc(op->key_len + 1) : NULL;
    if (key == NULL) {
        free(x);
        engine_op_continue(op, NULL); /* too many lookups in flight: on_store_error */
        return;
    }
    memcpy(key, op->key, op->key_len);
    *x = (ov_wait_t){.job = {.run = wait_run,
                             .done = wait_done,
                             .drop = wait_drop,
                             .inbox = w->inbox,
                             .admin = false},
                     .w = w,
                     .rs = op->rs,
                     .generation = w->set->generation,
                     .hash = h,
                     .key = key,
                     .key_len = op->key_len,
                     .head = op,
                     .tail = op,
                     .next = w->ov_waits};
    engine_rule_hold(op->rs);
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
        for (engine_op_t *op = x->head, *next; op != NULL; op = next) {
            next = op->next;
            engine_op_continue(op, NULL);
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
