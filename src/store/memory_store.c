/*
 * memory_store.c - the memory request store: each rule's keys in an sl_table_t of this process,
 * one more table per override's numbers, the rule's cold-start window, and the tables' part of
 * snapshots (see request_store.h). It is long because every operation of the store's table
 * works on the same private rule data (its own table, its override tables under ov_lock, its
 * cold-start window): splitting it would put that layout in a header for two files.
 *
 * A key's usage lives in one table of its rule: the one its override names, or the rule's own.
 * The list of override tables grows under ov_lock (a key's first decision under new numbers)
 * and is read under it; the tables themselves live as long as the rule's data.
 *
 * Memory. --max-memory is one budget (sl_budget_t) for every table of every rule (named,
 * inline and override tables alike), so no number of rules multiplies it. At the cap a table
 * evicts its own idle keys before it refuses a new one (sl_table_config_t.evict_idle), and
 * relieve() (the main thread, once a poll interval) frees idle keys across all tables while the
 * budget is above RELIEVE_AT, in proportion to what each holds, so that a rule flooded with new
 * keys cannot leave the others no room for long. The rules' data is listed (rules_lock) for it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "rules/ruledef.h"
#include "store/request_store.h"

#define TABLE_SHARDS      64          /* lock shards of a table */
#define TABLE_SHARD_BYTES (64 * 1024) /* under --max-memory, a shard per this much of it */
#define STATE_STACK_MAX   4096        /* cold-start states up to this size live on the stack */
#define TABLES_STACK      16          /* table lists up to this long live on the stack */
#define RELIEVE_AT_NUM    15          /* relieve() frees memory above 15/16 of the budget ... */
#define RELIEVE_AT_DEN    16
#define RELIEVE_TO_NUM    7 /* ... down to 7/8 of it */
#define RELIEVE_TO_DEN    8

typedef struct memory_store {
    request_store_t base;
    store_config_t cfg;
    sl_budget_t *budget;        /* --max-memory for all tables; NULL: no cap */
    pthread_mutex_t rules_lock; /* guards rules */
    store_rule_t *rules;        /* every rule's data, for relieve() */
} memory_store_t;

typedef struct override_table {
    sl_rule_t rule;
    sl_table_t *table;
} override_table_t;

struct store_rule {
    memory_store_t *store;
    store_rule_t *prev, *next; /* in store->rules */
    sl_table_t *table;
    pthread_mutex_t ov_lock;
    override_table_t *ov;
    size_t nov;
    int64_t closed_from_ns;  /* cold_start: closed: keys first seen before closed_until_ns */
    int64_t closed_until_ns; /* start as having used their whole quota at closed_from_ns */
};

extern const request_store_ops_t memory_store_ops; /* this file's entry, at its end */

/* ---- the store ----------------------------------------------------------------------------- */

static bool mem_accepts(const char *url)
{
    return url == NULL || strcmp(url, "memory") == 0;
}

static int mem_open(const char *url, const store_config_t *cfg, request_store_t **out, char *err)
{
    (void)url;
    memory_store_t *m = calloc(1, sizeof *m);
    if (m == NULL) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    m->base.ops = &memory_store_ops;
    m->cfg = *cfg;
    if (cfg->max_memory > 0 && sl_budget_create(cfg->max_memory, &m->budget) != SL_OK) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "out of memory");
        free(m);
        return -1;
    }
    pthread_mutex_init(&m->rules_lock, NULL);
    *out = &m->base;
    return 0;
}

static void mem_close(request_store_t *s)
{
    memory_store_t *m = (memory_store_t *)s;
    pthread_mutex_destroy(&m->rules_lock);
    sl_budget_free(m->budget); /* every rule's data is freed before the store */
    free(m);
}

static int mem_attach(request_store_t *s, uv_loop_t *loop, store_loop_t **slot, char *err)
{
    (void)s;
    (void)loop;
    (void)err;
    *slot = NULL; /* nothing per loop */
    return 0;
}

static void mem_detach(request_store_t *s, store_loop_t **slot)
{
    (void)s;
    *slot = NULL;
}

static const char *mem_describe(const request_store_t *s)
{
    (void)s;
    return "memory";
}

/* ---- tables -------------------------------------------------------------------------------- */

/* The table settings: every table counts against the one budget, and evicts its idle keys when
 * the budget is full. Under a small budget, fewer shards (TABLE_SHARD_BYTES of budget each): an
 * empty shard takes about 600 bytes, and a rule's empty table should not take a small budget.
 * Any skew: the loops' times come from sl_now_ns(), which never goes back, so a now behind what
 * a key's shard has seen is only a loop whose batch read the clock before another's and was
 * preempted; its calls are made at the later time (answers never measured from a passed time). */
static sl_table_config_t table_config(const memory_store_t *m)
{
    sl_table_config_t tc = {.key_max = m->cfg.key_max,
                            .shards = TABLE_SHARDS,
                            .budget = m->budget,
                            .evict_idle = m->budget != NULL,
                            .skew_ns = INT64_MAX};
    while (m->budget != NULL && tc.shards > 1 &&
           (size_t)tc.shards * TABLE_SHARD_BYTES > sl_budget_max(m->budget)) {
        tc.shards /= 2;
    }
    return tc;
}

static sl_table_t *table_new(const memory_store_t *m, const sl_rule_t *numbers)
{
    sl_table_config_t tc = table_config(m);
    sl_table_t *t = NULL;
    if (sl_table_create(numbers, &tc, &t) != SL_OK) {
        return NULL;
    }
    return t;
}

/* Whether a key of these numbers can take all the state it may need (sliding_log: N entries)
 * under --max-memory, beside its table's smallest array. */
static bool mem_rule_fits(request_store_t *s, const sl_rule_t *numbers)
{
    const memory_store_t *m = (const memory_store_t *)s;
    sl_table_config_t one = {.max_bytes = m->cfg.max_memory, .shards = 1};
    return sl_table_can_hold(numbers, &one, 1) &&
           (m->cfg.max_memory == 0 || sl_state_size(numbers) <= m->cfg.max_memory / 2);
}

static int mem_rule_new(request_store_t *s, const sl_rule_t *numbers, store_rule_t **out)
{
    store_rule_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return -1;
    }
    r->store = (memory_store_t *)s;
    r->table = table_new(r->store, numbers);
    if (r->table == NULL) {
        free(r);
        return -1;
    }
    pthread_mutex_init(&r->ov_lock, NULL);
    pthread_mutex_lock(&r->store->rules_lock);
    r->next = r->store->rules;
    if (r->next != NULL) {
        r->next->prev = r;
    }
    r->store->rules = r;
    pthread_mutex_unlock(&r->store->rules_lock);
    *out = r;
    return 0;
}

static void mem_rule_free(store_rule_t *r)
{
    if (r == NULL) {
        return;
    }
    pthread_mutex_lock(&r->store->rules_lock);
    *(r->prev != NULL ? &r->prev->next : &r->store->rules) = r->next;
    if (r->next != NULL) {
        r->next->prev = r->prev;
    }
    pthread_mutex_unlock(&r->store->rules_lock);
    sl_table_free(r->table);
    for (size_t i = 0; i < r->nov; i++) {
        sl_table_free(r->ov[i].table);
    }
    free(r->ov);
    pthread_mutex_destroy(&r->ov_lock);
    free(r);
}

/* The rule's tables other than `but` (NULL: all), listed under ov_lock into stack (when they
 * fit) or an allocation: used without the lock. Returns the list (free it unless it is stack),
 * *n its length; NULL when memory ran out. */
static sl_table_t **tables_list(store_rule_t *r, const sl_table_t *but, bool own,
                                sl_table_t **stack, size_t *n)
{
    pthread_mutex_lock(&r->ov_lock);
    size_t cap = r->nov + 1;
    sl_table_t **list = cap <= TABLES_STACK ? stack : malloc(cap * sizeof *list);
    *n = 0;
    for (size_t i = own ? 0 : 1; list != NULL && i <= r->nov; i++) {
        sl_table_t *x = i == 0 ? r->table : r->ov[i - 1].table;
        if (x != but) {
            list[(*n)++] = x;
        }
    }
    pthread_mutex_unlock(&r->ov_lock);
    return list;
}

typedef struct migrate_ctx {
    sl_table_t *to;
    const sl_rule_t *from; /* the numbers the visited states were written under */
    void *buf;             /* a converted state, cap bytes */
    size_t cap;
    int64_t now_ns;
} migrate_ctx_t;

static int migrate_entry(void *arg, const void *key, size_t key_len, const void *state,
                         size_t state_size)
{
    (void)state_size;
    migrate_ctx_t *m = arg;
    const sl_rule_t *to = sl_table_rule(m->to);
    size_t need = core_state_convert_need(m->from, state, to);
    if (need > m->cap) {
        void *p = realloc(m->buf, need);
        if (p == NULL) {
            return 0; /* out of memory: this key is dropped */
        }
        m->buf = p;
        m->cap = need;
    }
    if (core_state_convert(m->from, state, to, m->buf, need, m->now_ns) == SL_OK) {
        /* a key at the cap is dropped */
        sl_table_put_len(m->to, key, key_len, m->buf, need, m->now_ns);
    }
    return 0;
}

/* Converts every state of `from` into `to` (a table no decision sees yet). */
static void table_migrate(sl_table_t *to, sl_table_t *from, int64_t now_ns)
{
    migrate_ctx_t m = {.to = to, .from = sl_table_rule(from), .now_ns = now_ns};
    sl_table_foreach(from, migrate_entry, &m);
    free(m.buf);
}

/*
 * Every state is converted to the new numbers (sl_state_convert: exact where the layouts say
 * the same, else counting more, never less), the override tables' keys into the new rule's
 * table too (a lookup moves each to its override's new table). Decisions made on the old tables
 * while the copy runs are not carried over. A closed cold-start window in force goes on: the
 * keys it has not seen yet are no better known under the new numbers.
 */
static void mem_rule_migrate(store_rule_t *to, store_rule_t *from, int64_t now_ns)
{
    if (from->closed_until_ns > now_ns) {
        to->closed_from_ns = from->closed_from_ns;
        to->closed_until_ns = from->closed_until_ns;
    }
    table_migrate(to->table, from->table, now_ns);
    pthread_mutex_lock(&from->ov_lock);
    for (size_t i = 0; i < from->nov; i++) {
        table_migrate(to->table, from->ov[i].table, now_ns);
    }
    pthread_mutex_unlock(&from->ov_lock);
}

static void mem_cold_start(store_rule_t *r, int64_t from_ns, int64_t until_ns, bool renew)
{
    if (renew || r->closed_until_ns <= from_ns) {
        r->closed_from_ns = from_ns;
        r->closed_until_ns = until_ns;
    }
}

static bool mem_rule_idle(store_rule_t *r, int64_t now_ns)
{
    sl_table_reclaim(r->table, now_ns);
    return sl_table_count(r->table) == 0;
}

static void mem_rule_stats(store_rule_t *r, sl_table_stats_t *out)
{
    sl_table_stats(r->table, out);
    pthread_mutex_lock(&r->ov_lock);
    for (size_t i = 0; i < r->nov; i++) {
        sl_table_stats_t st;
        if (sl_table_stats(r->ov[i].table, &st) == SL_OK) {
            out->keys += st.keys;
            out->bytes += st.bytes;
            out->rebuilds += st.rebuilds;
            out->reclaimed += st.reclaimed;
            out->refused += st.refused;
            out->evicted += st.evicted;
        }
    }
    pthread_mutex_unlock(&r->ov_lock);
}

typedef struct in_flight_ctx {
    const sl_rule_t *rule;
    int64_t now_ns, units;
    topk_item_t *top; /* [n]: the keys holding most so far, most first */
    size_t n, got;
} in_flight_ctx_t;

/* Puts (key, units) among the keys holding most, if it is one of them (an insertion into x->top,
 * most first; n is at most a top's few dozen entries). */
static void in_flight_top(in_flight_ctx_t *x, const void *key, size_t key_len, int64_t units)
{
    if (x->n == 0 || units <= 0 || (x->got == x->n && (int64_t)x->top[x->n - 1].count >= units))
        return;
    size_t i = x->got < x->n ? x->got++ : x->n - 1;
    for (; i > 0 && (int64_t)x->top[i - 1].count < units; i--)
        x->top[i] = x->top[i - 1];
    topk_item_t *it = &x->top[i];
    *it = (topk_item_t){.count = (uint64_t)units, .key_len = (uint32_t)key_len};
    memcpy(it->key, key, key_len < TOPK_KEY_INLINE ? key_len : TOPK_KEY_INLINE);
}

static int in_flight_entry(void *arg, const void *key, size_t key_len, const void *state,
                           size_t state_size)
{
    (void)state_size;
    in_flight_ctx_t *x = arg;
    int64_t units = sl_in_flight(x->rule, state, x->now_ns);
    x->units += units;
    in_flight_top(x, key, key_len, units);
    return 0;
}

static int64_t mem_rule_in_flight(store_rule_t *r, int64_t now_ns, topk_item_t *top, size_t n,
                                  size_t *got)
{
    sl_table_t *stack[TABLES_STACK];
    size_t ntables;
    sl_table_t **list = tables_list(r, NULL, true, stack, &ntables);
    in_flight_ctx_t x = {.now_ns = now_ns, .top = top, .n = top != NULL ? n : 0};
    for (size_t i = 0; list != NULL && i < ntables; i++) {
        x.rule = sl_table_rule(list[i]);
        if (sl_rule_holds(x.rule)) {
            sl_table_foreach(list[i], in_flight_entry, &x);
        }
    }
    if (list != stack) {
        free(list);
    }
    if (got != NULL) {
        *got = x.got;
    }
    return x.units;
}

/* ---- memory ------------------------------------------------------------------------------- */

static sl_budget_t *mem_budget(const request_store_t *s)
{
    return ((const memory_store_t *)s)->budget;
}

/* Bytes of every table of r. */
static size_t rule_bytes(store_rule_t *r)
{
    sl_table_stats_t st;
    mem_rule_stats(r, &st);
    return st.bytes;
}

/* Frees about `want` bytes of r's tables, in proportion to what each holds of `total`. */
static size_t rule_relieve(store_rule_t *r, int64_t now_ns, size_t want, size_t total)
{
    sl_table_t *stack[TABLES_STACK];
    size_t n = 0, freed = 0;
    sl_table_t **list = tables_list(r, NULL, true, stack, &n);
    for (size_t i = 0; list != NULL && i < n; i++) {
        size_t share =
            (size_t)((__int128)want * sl_table_memory(list[i]) / (total > 0 ? total : 1));
        freed += sl_table_evict(list[i], now_ns, share + 1);
    }
    if (list != stack) {
        free(list);
    }
    return freed;
}

/*
 * Above RELIEVE_AT of the budget, frees memory down to RELIEVE_TO of it from every rule's
 * tables, each giving up its share of what they all hold: the idle keys with the most units
 * left go first (sl_table_evict()). A table's keys in use since the last call stay. Returns the
 * bytes freed.
 */
static size_t mem_relieve(request_store_t *s, int64_t now_ns)
{
    memory_store_t *m = (memory_store_t *)s;
    size_t used = sl_budget_used(m->budget), max = sl_budget_max(m->budget);
    if (m->budget == NULL || used < max / RELIEVE_AT_DEN * RELIEVE_AT_NUM) {
        return 0;
    }
    size_t want = used - max / RELIEVE_TO_DEN * RELIEVE_TO_NUM, total = 0, freed = 0;
    pthread_mutex_lock(&m->rules_lock);
    for (store_rule_t *r = m->rules; r != NULL; r = r->next) {
        total += rule_bytes(r);
    }
    for (store_rule_t *r = m->rules; r != NULL; r = r->next) {
        freed += rule_relieve(r, now_ns, want, total);
    }
    pthread_mutex_unlock(&m->rules_lock);
    return freed;
}

/* ---- override tables ----------------------------------------------------------------------- */

static int mem_override(store_rule_t *r, const sl_rule_t *numbers, void **handle)
{
    sl_table_t *found = NULL;
    pthread_mutex_lock(&r->ov_lock);
    for (size_t i = 0; i < r->nov && found == NULL; i++) {
        if (sl_rule_same(&r->ov[i].rule, numbers)) {
            found = r->ov[i].table;
        }
    }
    if (found == NULL) {
        override_table_t *grown = realloc(r->ov, (r->nov + 1) * sizeof *r->ov);
        if (grown != NULL) {
            r->ov = grown;
            found = table_new(r->store, numbers);
            if (found != NULL) {
                r->ov[r->nov].rule = *numbers;
                r->ov[r->nov].table = found;
                r->nov++;
            }
        }
    }
    pthread_mutex_unlock(&r->ov_lock);
    *handle = found;
    return found != NULL ? 0 : -1;
}

/*
 * Moves the key into `to` from whichever other table of r holds it (sl_table_adopt: converted,
 * the copy with the most usage kept when two do). The tables are listed under ov_lock and
 * adopted from without it; there are at most SL_MULTI_MAX - 1 per call, so more are done in
 * turns (each turn keeps the most usage of `to` and its share).
 */
static void tables_adopt(store_rule_t *r, sl_table_t *to, const void *key, size_t key_len,
                         int64_t now_ns)
{
    sl_table_t *stack[TABLES_STACK];
    size_t n = 0;
    sl_table_t **from = tables_list(r, to, true, stack, &n);
    for (size_t at = 0; from != NULL && at < n; at += SL_MULTI_MAX - 1) {
        size_t part = n - at < SL_MULTI_MAX - 1 ? n - at : SL_MULTI_MAX - 1;
        sl_table_adopt(to, key, key_len, from + at, part, now_ns); /* at the cap: stays put */
    }
    if (from != stack) {
        free(from);
    }
}

static void mem_adopt(store_rule_t *r, void *handle, const void *key, size_t key_len,
                      int64_t now_ns)
{
    sl_table_t *to = handle != NULL ? handle : r->table;
    pthread_mutex_lock(&r->ov_lock);
    bool alone = r->nov == 0; /* no override table yet: nowhere else to be */
    pthread_mutex_unlock(&r->ov_lock);
    if (!alone) {
        tables_adopt(r, to, key, key_len, now_ns);
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

/* Every key of the override tables goes back to the rule's own table (converted): no lookup
 * will move them any more. Any thread; deciding goes on meanwhile. */
static void mem_overrides_gone(store_rule_t *r, int64_t now_ns)
{
    sl_table_t *stack[TABLES_STACK];
    size_t nov = 0;
    sl_table_t **ov = tables_list(r, NULL, false, stack, &nov);
    for (size_t i = 0; ov != NULL && i < nov; i++) {
        keys_ctx_t k = {0};
        sl_table_foreach(ov[i], collect_key, &k);
        for (size_t at = 0; at < k.len;) {
            size_t len;
            memcpy(&len, k.buf + at, sizeof len);
            tables_adopt(r, r->table, k.buf + at + sizeof len, len, now_ns);
            at += sizeof len + len;
        }
        free(k.buf);
    }
    if (ov != stack) {
        free(ov);
    }
}

/* ---- decisions ----------------------------------------------------------------------------- */

static sl_table_t *target_table(const store_target_t *tg)
{
    return tg->handle != NULL ? tg->handle : tg->rule->table;
}

/*
 * cold_start closed: a key first seen inside the closed window starts as if it had taken the
 * whole capacity when the window began (sl_state_saturate). A request that may write (a cost >
 * 0, a settle) stores that state before it is decided or settled; a peek decides on a saturated
 * copy and stores nothing, so it answers what an admission would. Returns true when it answered
 * the peek (*out filled); false when the caller goes on on the table as usual (the key was not
 * fresh, or now holds the saturated state; or memory ran out).
 */
static bool cold_start_decide(const store_rule_t *r, sl_table_t *table, const void *key,
                              size_t key_len, bool peek, int64_t now_ns, sl_decision_t *out)
{
    const sl_rule_t *rule = sl_table_rule(table);
    size_t size = sl_state_size(rule);
    unsigned char stack[STATE_STACK_MAX];
    unsigned char *state = size <= sizeof stack ? stack : malloc(size);
    bool peeked = false;
    if (state == NULL) {
        return false;
    }
    if (sl_table_get(table, key, key_len, state) == SL_OK) {
        bool fresh = true;
        for (size_t i = 0; i < size && fresh; i++) {
            fresh = state[i] == 0;
        }
        if (fresh) {
            sl_state_saturate(rule, state, r->closed_from_ns);
            if (!peek) {
                sl_table_put(table, key, key_len, state, now_ns);
            } else {
                sl_decide(rule, state, 0, now_ns, out);
                peeked = true;
            }
        }
    }
    if (state != stack) {
        free(state);
    }
    return peeked;
}

static int mem_decide(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                      const store_request_t *req, int64_t now_ns, sl_decision_t *d,
                      store_done_fn fn, void *arg)
{
    (void)s;
    (void)l;
    (void)fn;
    (void)arg;
    sl_table_t *table = target_table(tg);
    bool peek = !req->settle && req->hold_op != STORE_HOLD_RELEASE && req->cost == 0;
    if (tg->closed && now_ns < tg->rule->closed_until_ns &&
        cold_start_decide(tg->rule, table, tg->key, tg->key_len, peek, now_ns, d)) {
        return SL_OK;
    }
    if (req->hold_op == STORE_HOLD_ACQUIRE) {
        return sl_table_acquire_reserved(table, tg->key, tg->key_len, req->cost, req->reserve,
                                         req->hold_ns, now_ns, d, req->hold);
    }
    if (req->hold_op == STORE_HOLD_RELEASE) {
        return sl_table_release_sample(table, tg->key, tg->key_len, req->hold_id, now_ns,
                                       req->sampled ? &req->sample : NULL, d, req->hold);
    }
    if (req->settle) {
        int64_t charged_ns = req->charged_ns < 0 ? now_ns : req->charged_ns;
        return sl_table_settle(table, tg->key, tg->key_len, req->reserved, req->actual, charged_ns,
                               now_ns, d);
    }
    return sl_table_decide_reserved(table, tg->key, tg->key_len, req->cost, req->reserve, now_ns,
                                    d);
}

/* Every pair charged or none, in one sl_table_decide_all under every shard's lock at once. */
static int mem_decide_all(request_store_t *s, store_loop_t *l, const store_pair_t *pairs, size_t n,
                          int64_t now_ns, sl_decision_t *d, size_t *at, store_all_fn fn, void *arg)
{
    (void)s;
    (void)l;
    (void)fn;
    (void)arg;
    sl_multi_request_t reqs[SL_MULTI_MAX];
    if (n > SL_MULTI_MAX) {
        *at = n;
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const store_target_t *tg = &pairs[i].tg;
        sl_table_t *table = target_table(tg);
        if (tg->closed && now_ns < tg->rule->closed_until_ns && pairs[i].cost > 0) {
            /* saturates a new key */
            cold_start_decide(tg->rule, table, tg->key, tg->key_len, false, now_ns, &d[i]);
        }
        reqs[i] = (sl_multi_request_t){.table = table,
                                       .key = tg->key,
                                       .key_len = tg->key_len,
                                       .cost = pairs[i].cost,
                                       .reserve = pairs[i].reserve,
                                       .acquire = pairs[i].acquire,
                                       .hold_ns = pairs[i].hold_ns};
    }
    size_t r = n;
    int rc = n > 0 ? sl_table_decide_all(reqs, n, now_ns, &r) : SL_OK;
    *at = r;
    if (rc != SL_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        d[i] = reqs[i].decision;
        if (pairs[i].hold != NULL) {
            *pairs[i].hold = reqs[i].hold; /* id 0 when the whole was refused */
        }
    }
    return SL_OK;
}

static int mem_reset(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                     store_done_fn fn, void *arg)
{
    (void)s;
    (void)l;
    (void)fn;
    (void)arg;
    store_rule_t *r = tg->rule;
    sl_table_reset(r->table, tg->key, tg->key_len);
    pthread_mutex_lock(&r->ov_lock);
    for (size_t i = 0; i < r->nov; i++) {
        sl_table_reset(r->ov[i].table, tg->key, tg->key_len);
    }
    pthread_mutex_unlock(&r->ov_lock);
    return SL_OK;
}

/* ---- snapshots ----------------------------------------------------------------------------- */

typedef struct save_ctx {
    snapshot_writer_t *w;
    char *err;
    size_t keys;
    int failed;
} save_ctx_t;

static int save_entry(void *arg, const void *key, size_t key_len, const void *state,
                      size_t state_size)
{
    save_ctx_t *s = arg;
    if (snapshot_entry(s->w, key, key_len, state, state_size, s->err) != 0) {
        s->failed = 1;
        return 1;
    }
    s->keys++;
    return 0;
}

static void save_table(save_ctx_t *s, char kind, const char *name, sl_table_t *table,
                       const snapshot_closed_t *closed)
{
    if (s->failed) {
        return;
    }
    char id[RULE_NAME_MAX + 64];
    int n = snprintf(id, sizeof id, "%c:%s", kind, name);
    if (snapshot_section(s->w, id, (size_t)n, sl_table_rule(table), closed, s->err) != 0) {
        s->failed = 1;
        return;
    }
    /* no shard lock is held while save_entry writes (sl_table_foreach visits a copy) */
    int rc = sl_table_foreach(table, save_entry, s);
    if (rc != 0 && !s->failed) {
        snprintf(s->err, REQUEST_STORE_ERR_MAX, "table of '%s': %s", name, sl_strerror(rc));
        s->failed = 1;
    }
}

/*
 * The rule's table, then its override tables. The list of override tables is copied under
 * ov_lock and written without it: a loop takes ov_lock to find an override's table (a key's
 * first override decision) and a reset, and must not wait for the disk. The tables live as long
 * as r, which the caller holds; a table added meanwhile waits for the next snapshot.
 */
static int mem_save_rule(store_rule_t *r, snapshot_writer_t *wr, char kind, const char *name,
                         int64_t now_ns, size_t *keys, char *err)
{
    save_ctx_t s = {.w = wr, .err = err};
    /* a rule still in its cold_start: closed window keeps it across the restart: the keys it
     * has not seen since are not in the snapshot, yet may have used their quota before */
    snapshot_closed_t closed = {r->closed_from_ns, r->closed_until_ns};
    save_table(&s, kind, name, r->table, now_ns < closed.until_ns ? &closed : NULL);
    sl_table_t *stack[TABLES_STACK];
    size_t nov = 0;
    sl_table_t **ov = tables_list(r, NULL, false, stack, &nov);
    if (ov == NULL && !s.failed) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "override tables of '%s': out of memory", name);
        s.failed = 1;
    }
    for (size_t i = 0; ov != NULL && i < nov; i++) {
        save_table(&s, 'o', name, ov[i], NULL);
    }
    if (ov != stack) {
        free(ov);
    }
    *keys += s.keys;
    return s.failed ? -1 : 0;
}

struct store_loader {
    sl_table_t *target;
    sl_rule_t from;       /* the section's numbers, when its states are converted */
    bool convert;         /* the section's numbers differ from the target's */
    unsigned char *state; /* a converted state */
    size_t state_size;    /* bytes allocated at state */
    int64_t now_ns;
    size_t keys;
};

static store_loader_t *mem_load_open(int64_t now_ns)
{
    store_loader_t *l = calloc(1, sizeof *l);
    if (l != NULL) {
        l->now_ns = now_ns;
    }
    return l;
}

/* Sets up converting the section's states (under `from`) to another rule's numbers. */
static void load_convert(store_loader_t *l, const sl_rule_t *from)
{
    l->from = *from;
    l->convert = true;
}

/* Makes l->state hold at least `size` bytes. */
static bool load_room(store_loader_t *l, size_t size)
{
    if (size > l->state_size) {
        unsigned char *p = realloc(l->state, size);
        if (p == NULL) {
            return false;
        }
        l->state = p;
        l->state_size = size;
    }
    return true;
}

static int mem_load_section(store_loader_t *l, store_rule_t *r, char kind, const sl_rule_t *from)
{
    l->target = NULL;
    l->convert = false;
    if (kind == 'o') {
        void *h = NULL;
        if (from->algorithm == sl_table_rule(r->table)->algorithm &&
            mem_override(r, from, &h) == 0) {
            l->target = h;
        }
        return l->target != NULL ? 0 : -1;
    }
    const sl_rule_t *now = sl_table_rule(r->table);
    if (!sl_rule_same(now, from)) { /* numbers changed while stopped: carry usage */
        load_convert(l, from);
        l->target = r->table;
        return 1;
    }
    l->target = r->table;
    return 0;
}

static void mem_load_entry(store_loader_t *l, const void *key, size_t key_len, const void *state,
                           size_t state_len)
{
    if (l->target != NULL && l->convert) {
        const sl_rule_t *to = sl_table_rule(l->target);
        size_t need = core_state_convert_need(&l->from, state, to);
        if (!load_room(l, need) ||
            core_state_convert(&l->from, state, to, l->state, need, l->now_ns) != SL_OK) {
            return;
        }
        state = l->state;
        state_len = need;
    }
    if (l->target != NULL &&
        sl_table_put_len(l->target, key, key_len, state, state_len, l->now_ns) == SL_OK) {
        l->keys++;
    }
}

static size_t mem_load_close(store_loader_t *l)
{
    if (l == NULL) {
        return 0;
    }
    size_t keys = l->keys;
    free(l->state);
    free(l);
    return keys;
}

const request_store_ops_t memory_store_ops = {
    .name = "memory",
    .completes_at_once = true,
    .has_snapshots = true,
    .accepts = mem_accepts,
    .open = mem_open,
    .close = mem_close,
    .attach = mem_attach,
    .detach = mem_detach,
    .rule_new = mem_rule_new,
    .rule_migrate = mem_rule_migrate,
    .rule_free = mem_rule_free,
    .cold_start = mem_cold_start,
    .rule_idle = mem_rule_idle,
    .rule_fits = mem_rule_fits,
    .rule_stats = mem_rule_stats,
    .rule_in_flight = mem_rule_in_flight,
    .holds = true,
    .override = mem_override,
    .adopt = mem_adopt,
    .overrides_gone = mem_overrides_gone,
    .decide = mem_decide,
    .decide_all = mem_decide_all,
    .reset = mem_reset,
    .save_rule = mem_save_rule,
    .load_open = mem_load_open,
    .load_section = mem_load_section,
    .load_entry = mem_load_entry,
    .load_close = mem_load_close,
    .describe = mem_describe,
    .relieve = mem_relieve,
    .budget = mem_budget,
};
