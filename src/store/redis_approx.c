/*
 * redis_approx.c - approximate rules over the Redis request store (redis_approx.h): a loop's
 * table of keys' counts, local decisions, strict ones that bring a count, and the sync timer.
 */
#include <stdlib.h>
#include <string.h>

#include "store/approx_count.h"
#include "store/freelist.h"
#include "store/keyed_table.h"
#include "remote/overlimit_cache.h"
#include "store/redis_approx.h"

/* A (rule, key) this loop decides approximately. */
typedef struct approx_entry {
    keyed_entry_t k; /* first: its (name, key) in the loop's table */
    redis_approx_t *table;
    sl_rule_t rule;       /* the numbers it is decided under */
    int64_t sync_ns;      /* its rule's sync interval, ns */
    int64_t closed_ns;    /* the rule's closed start, as last given */
    approx_count_t count; /* its count and what was admitted since */
    int64_t sync_sent_ns; /* the sync on its way was sent then, node's monotonic clock, ns */
    int64_t last_ns;      /* the last decision, ns */
    int64_t reset_at_ns;  /* when the key is fresh, as of the latest reply, ns */
    unsigned strict;      /* strict decisions on their way, which bring a count */
} approx_entry_t;

/* A strict decision whose reply is the key's count, or a flush of units sent ahead of one. */
typedef struct approx_strict {
    approx_entry_t *e;
    redis_decision_fn fn;
    void *arg;
    int64_t sent_ns; /* node's monotonic clock, ns */
    int64_t units;   /* a flush: the units it charges; a decision: its cost */
} approx_strict_t;

struct redis_approx {
    uv_loop_t *loop;
    redis_store_t *rs;
    uv_timer_t tick;
    int64_t tick_ns;      /* the timer's period (0: stopped), ns */
    bool stopping;        /* redis_approx_stop was called: everything strict */
    unsigned outstanding; /* syncs and strict decisions on their way */
    freelist_t stricts;   /* approx_strict_t to reuse */
    redis_approx_stats_t stats;
    keyed_table_t keys; /* approx_entry_t, APPROX_SLOTS */
};

#define ADD(field, n) atomic_fetch_add_explicit(&t->stats.field, (n), memory_order_relaxed)

/* The node's monotonic clock: a count's age must not move with the wall clock. */
static int64_t mono_ns(void)
{
    return (int64_t)uv_hrtime();
}

static const char *entry_key(const approx_entry_t *e)
{
    return keyed_key(&e->k);
}

/* The entry of tg's (rule, key), or NULL; *slot where it is or would be. */
static approx_entry_t *entry_find(const redis_approx_t *t, const redis_approx_target_t *tg,
                                  size_t *slot)
{
    return keyed_find(&t->keys, tg->name, tg->key, tg->key_len, slot);
}

/* Whether e holds nothing to send and nothing on its way: it may be freed. */
static bool entry_quiet(const approx_entry_t *e)
{
    return e->count.admitted == 0 && !e->count.syncing && e->count.flushing == 0 && e->strict == 0;
}

static void entry_free(redis_approx_t *t, size_t slot)
{
    keyed_remove(&t->keys, slot);
}

/* ---- syncs --------------------------------------------------------------------------------- */

static void on_synced(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)err;
    approx_entry_t *e = arg;
    redis_approx_t *t = e->table;
    t->outstanding--;
    if (status != 0) {
        ADD(failures, 1);
    } else {
        e->reset_at_ns = mono_ns() + d->reset_after_ns;
    }
    approx_sync_end(&e->count, status == 0, status == 0 ? d->remaining : 0, e->sync_sent_ns,
                    e->sync_ns, mono_ns());
}

/* Charges units e's node admitted (0: a peek) past the limit, as SL.SETTLE with reserved 0
 * does; fn gets the key's count after it. */
static void charge_units(approx_entry_t *e, int64_t units, redis_decision_fn fn, void *arg)
{
    redis_approx_t *t = e->table;
    t->outstanding++;
    ADD(units, (uint64_t)units);
    /* units the node admitted already: charged whatever the rule's max_debt, which bounds
     * what a client's settle may charge, not what the nodes' own admissions took */
    sl_rule_t unbounded = e->rule;
    unbounded.max_debt = SL_COUNT_MAX;
    redis_store_settle(t->rs, keyed_name(&e->k), &unbounded, entry_key(e), e->k.key_len, 0, units,
                       -1, e->closed_ns, sl_now_ns(), fn, arg);
}

/* Sends what e admitted since its last sync (0: a peek), and gets its count back. */
static void sync_send(approx_entry_t *e, int64_t now)
{
    redis_approx_t *t = e->table;
    int64_t units = approx_sync_begin(&e->count, now);
    e->sync_sent_ns = now;
    ADD(syncs, 1);
    charge_units(e, units, on_synced, e);
}

static void on_flushed(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)err;
    approx_strict_t *f = arg;
    approx_entry_t *e = f->e;
    redis_approx_t *t = e->table;
    t->outstanding--;
    if (status != 0) {
        ADD(failures, 1);
    }
    approx_flush_end(&e->count, f->units, status == 0, status == 0 ? d->remaining : 0, f->sent_ns,
                     e->sync_ns, mono_ns());
    freelist_put(&t->stricts, f);
}

static void on_tick(uv_timer_t *timer);

/* The timer runs every period_ns (the smallest sync interval of the table's keys); 0 stops it. */
static void tick_set(redis_approx_t *t, int64_t period_ns)
{
    if (period_ns == t->tick_ns) {
        return;
    }
    t->tick_ns = period_ns;
    if (period_ns == 0) {
        uv_timer_stop(&t->tick);
        return;
    }
    uint64_t ms = (uint64_t)(period_ns / SL_NS_PER_MS);
    uv_timer_start(&t->tick, on_tick, ms, ms);
}

static void on_tick(uv_timer_t *timer)
{
    redis_approx_t *t = timer->data;
    int64_t now = mono_ns();
    int64_t least = 0;
    /* half a period early is on time: the timer's ticks are not exact */
    int64_t due_at = now + t->tick_ns / 2;
    for (size_t i = 0; i < keyed_slots(&t->keys); i++) {
        approx_entry_t *e = keyed_at(&t->keys, i);
        if (e == NULL) {
            continue;
        }
        if (approx_sync_due(&e->count, e->sync_ns, due_at)) {
            sync_send(e, now);
        }
        if (entry_quiet(e) && now - e->last_ns > APPROX_IDLE_TIMES * e->sync_ns) {
            entry_free(t, i);
            continue;
        }
        least = least == 0 || e->sync_ns < least ? e->sync_ns : least;
    }
    tick_set(t, least);
}

/* ---- entries ------------------------------------------------------------------------------- */

/* The entry for tg: found, or made (in place of another key's quiet one). NULL when the slot is
 * busy with another key's units, or out of memory. */
static approx_entry_t *entry_for(redis_approx_t *t, const redis_approx_target_t *tg, int64_t now)
{
    size_t slot;
    approx_entry_t *e = entry_find(t, tg, &slot);
    if (e != NULL) {
        return e;
    }
    if ((e = keyed_at(&t->keys, slot)) != NULL) {
        if (!entry_quiet(e)) {
            return NULL;
        }
        entry_free(t, slot);
    }
    if ((e = keyed_add(&t->keys, slot, tg->name, tg->key, tg->key_len)) == NULL) {
        return NULL;
    }
    e->table = t;
    e->rule = *tg->rule;
    e->sync_ns = tg->sync_ns;
    e->count = APPROX_COUNT_NEW;
    e->last_ns = now;
    if (t->tick_ns == 0 || tg->sync_ns < t->tick_ns) {
        tick_set(t, tg->sync_ns);
    }
    return e;
}

/* ---- decisions ----------------------------------------------------------------------------- */

static void on_strict(void *arg, int status, const sl_decision_t *d, const char *err)
{
    approx_strict_t *s = arg;
    approx_entry_t *e = s->e;
    redis_approx_t *t = e->table;
    redis_decision_fn fn = s->fn;
    void *fn_arg = s->arg;
    t->outstanding--;
    e->strict--;
    int64_t now = mono_ns();
    approx_strict_end(&e->count, s->units, status == 0, status == 0 ? d->remaining : 0, s->sent_ns,
                      e->sync_ns, now);
    if (status == 0) {
        e->reset_at_ns = now + d->reset_after_ns;
    }
    freelist_put(&t->stricts, s);
    redis_store_answer(t->rs, fn, fn_arg, status, d, err);
}

/* Decides strictly at Redis, at now (the node's monotonic clock); with e, the reply is e's
 * count, and what e's node admitted and has not sent goes first, on the same connection, so the
 * decision is made on a count that holds it (a late sync timer leaves units unsent when the
 * count expires). */
static void decide_strict(redis_approx_t *t, const redis_approx_target_t *tg, approx_entry_t *e,
                          int64_t cost, int64_t now, int64_t now_ns, redis_decision_fn fn,
                          void *arg)
{
    if (e == NULL) {
        redis_store_decide(t->rs, tg->name, tg->rule, tg->key, tg->key_len, cost, tg->closed_ns,
                           now_ns, fn, arg);
        return;
    }
    approx_strict_t *s = freelist_get(&t->stricts);
    approx_strict_t *f = e->count.admitted > 0 ? freelist_get(&t->stricts) : NULL;
    if (s == NULL || (f == NULL && e->count.admitted > 0)) {
        /* out of memory: a decision without the units would over-admit; on_store_error's */
        if (s != NULL) {
            freelist_put(&t->stricts, s);
        }
        if (f != NULL) {
            freelist_put(&t->stricts, f);
        }
        approx_strict_end(&e->count, cost, false, 0, 0, 0, 0);
        redis_store_answer(t->rs, fn, arg, -1, NULL, "out of memory");
        return;
    }
    if (f != NULL) {
        *f = (approx_strict_t){.e = e, .sent_ns = now, .units = approx_flush_begin(&e->count)};
        ADD(syncs, 1);
        charge_units(e, f->units, on_flushed, f);
    }
    *s = (approx_strict_t){.e = e, .fn = fn, .arg = arg, .sent_ns = now, .units = cost};
    e->strict++;
    t->outstanding++;
    redis_store_decide(t->rs, tg->name, tg->rule, tg->key, tg->key_len, cost, tg->closed_ns, now_ns,
                       on_strict, s);
}

void redis_approx_decide(redis_approx_t *t, const redis_approx_target_t *tg, int64_t cost,
                         int64_t now_ns, redis_decision_fn fn, void *arg)
{
    int64_t now = mono_ns();
    approx_entry_t *e = NULL;
    if (!t->stopping && cost > 0 && cost <= tg->rule->capacity) {
        e = entry_for(t, tg, now);
    }
    if (e != NULL) {
        if (!sl_rule_same(&e->rule, tg->rule) || e->sync_ns != tg->sync_ns) {
            /* the rule changed: its units are sent under the new numbers (Redis converts the
             * key), and the count is asked again */
            e->rule = *tg->rule;
            e->sync_ns = tg->sync_ns;
            approx_forget(&e->count, now);
            if (tg->sync_ns < t->tick_ns) {
                tick_set(t, tg->sync_ns);
            }
        }
        e->closed_ns = tg->closed_ns;
        e->last_ns = now;
        approx_verdict_t v = approx_decide(&e->count, cost, now);
        if (v != APPROX_STRICT) {
            int64_t lag = now - e->count.count_ns;
            ADD(local, 1);
            ADD(lag_ns, (uint64_t)(lag > 0 ? lag : 0));
            int64_t reset = e->reset_at_ns - now;
            sl_decision_t d = {.allowed = v == APPROX_ADMIT,
                               .limit = tg->rule->capacity,
                               .remaining = approx_left(&e->count),
                               .reset_after_ns = reset > 0 ? reset : 0};
            if (!d.allowed) {
                /* the count may change at the next sync */
                int64_t wait = e->sync_ns - lag;
                d.retry_after_ns = wait > 0 ? wait : 0;
            }
            redis_store_answer(t->rs, fn, arg, 0, &d, NULL);
            return;
        }
    }
    decide_strict(t, tg, e, cost, now, now_ns, fn, arg);
}

void redis_approx_drop(redis_approx_t *t, const redis_approx_target_t *tg)
{
    size_t slot;
    approx_entry_t *e = entry_find(t, tg, &slot);
    if (e != NULL) {
        e->count.admitted = 0;
        approx_forget(&e->count, mono_ns());
    }
}

unsigned redis_approx_stop(redis_approx_t *t)
{
    if (!t->stopping) {
        t->stopping = true;
        int64_t now = mono_ns();
        for (size_t i = 0; i < keyed_slots(&t->keys); i++) {
            approx_entry_t *e = keyed_at(&t->keys, i);
            if (e != NULL && e->count.admitted > 0 && !e->count.syncing) {
                sync_send(e, now);
            }
        }
    }
    return t->outstanding;
}

const redis_approx_stats_t *redis_approx_stats(const redis_approx_t *t)
{
    return &t->stats;
}

redis_approx_t *redis_approx_create(uv_loop_t *loop, redis_store_t *rs)
{
    redis_approx_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->loop = loop;
    t->rs = rs;
    uint64_t seed = (uint64_t)uv_hrtime() ^ (uint64_t)(uintptr_t)t;
    if (keyed_init(&t->keys, APPROX_SLOTS, sizeof(approx_entry_t), seed) != 0) {
        free(t);
        return NULL;
    }
    t->stricts = (freelist_t){.size = sizeof(approx_strict_t), .keep = 1024};
    uv_timer_init(loop, &t->tick);
    t->tick.data = t;
    return t;
}

static void on_tick_closed(uv_handle_t *h)
{
    free(h->data);
}

void redis_approx_free(redis_approx_t *t)
{
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < keyed_slots(&t->keys); i++) {
        if (keyed_at(&t->keys, i) != NULL) {
            entry_free(t, i);
        }
    }
    keyed_destroy(&t->keys);
    freelist_clear(&t->stricts);
    uv_timer_stop(&t->tick);
    uv_close((uv_handle_t *)&t->tick, on_tick_closed);
}
