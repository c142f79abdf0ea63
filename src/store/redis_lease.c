/*
 * redis_lease.c - leased rules over the Redis request store (redis_lease.h): a loop's table of
 * leases, decisions from them, lease requests and their waiters, returns and the sweep.
 */
#include <stdlib.h>
#include <string.h>

#include "store/freelist.h"
#include "store/keyed_table.h"
#include "store/lease_size.h"
#include "remote/overlimit_cache.h"
#include "store/redis_lease.h"

/* A decision waiting for its key's lease request. */
typedef struct lease_waiter {
    struct lease_waiter *next;
    redis_decision_fn fn;
    void *arg;
    int64_t cost; /* units */
} lease_waiter_t;

/* A (rule, key) this loop leases: the lease in hand (granted > 0) and what sizes the next. */
typedef struct lease_entry {
    keyed_entry_t k; /* first: its (name, key) in the loop's table */
    redis_leases_t *table;
    redis_rule_ref_t *ref;   /* held */
    sl_rule_t rule;          /* the numbers it is leased under */
    int64_t lease_ns;        /* the lease time asked for, ns */
    int64_t closed_ns;       /* the rule's closed start, as last given */
    sl_lease_t grant;        /* the lease in hand when grant.granted > 0 (Redis's clock) */
    redis_lease_node_t node; /* where it was granted */
    int64_t left;            /* its units not spent */
    int64_t sent_ns;         /* the lease request's send, node's monotonic clock, ns */
    int64_t end_ns;          /* the lease's end on that clock, ns */
    int64_t strict_until_ns; /* after a grant of nothing: strict until then, ns */
    int64_t remaining;       /* the key's remaining at its last reply, units; -1 unknown */
    double rate_per_s;       /* arrivals, units per second */
    int64_t rate_since_ns;   /* arrivals counted since, ns */
    int64_t arrivals;        /* units asked since rate_since_ns */
    int64_t last_ns;         /* the last decision, ns */
    bool inflight;           /* a lease request is on its way */
    bool serving;            /* its waiters are being answered: not to be freed meanwhile */
    lease_waiter_t *wait_head, *wait_tail;
    size_t nwait;
} lease_entry_t;

struct redis_leases {
    uv_loop_t *loop;
    redis_store_t *rs;
    uv_timer_t sweep;
    bool sweeping;        /* the timer runs */
    bool stopping;        /* redis_leases_stop was called: everything strict */
    unsigned outstanding; /* returns and lease requests on their way */
    redis_lease_stats_t stats;
    freelist_t waiters; /* lease_waiter_t to reuse */
    keyed_table_t keys; /* lease_entry_t, LEASE_SLOTS */
};

#define ADD(field, n) atomic_fetch_add_explicit(&t->stats.field, (n), memory_order_relaxed)

void redis_rule_ref_retire(redis_rule_ref_t *r)
{
    atomic_store_explicit(&r->retired, true, memory_order_release);
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        free(r);
    }
}

static void ref_release(redis_rule_ref_t *r)
{
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        free(r);
    }
}

/* The node's monotonic clock: a lease's end must not move with the wall clock. */
static int64_t mono_ns(void)
{
    return (int64_t)uv_hrtime();
}

static const char *entry_key(const lease_entry_t *e)
{
    return keyed_key(&e->k);
}

/* The entry of tg's (rule, key), or NULL; *slot where it is or would be. */
static lease_entry_t *entry_find(const redis_leases_t *t, const redis_lease_target_t *tg,
                                 size_t *slot)
{
    return keyed_find(&t->keys, tg->name, tg->key, tg->key_len, slot);
}

/* ---- giving back --------------------------------------------------------------------------- */

static void on_returned(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)d;
    (void)err;
    redis_leases_t *t = arg;
    t->outstanding--;
    if (status == 0) {
        ADD(returned, 1);
    } else {
        ADD(unreturned, 1);
    }
}

/* The lease in hand, if any, ends here: its unused units go back to the node that granted
 * them (fire and forget: a return that fails leaves them used until they leave the window). */
static void give_back(lease_entry_t *e)
{
    redis_leases_t *t = e->table;
    if (e->grant.granted > 0 && e->left > 0) {
        t->outstanding++;
        redis_store_return(t->rs, keyed_name(&e->k), &e->rule, entry_key(e), e->k.key_len,
                           &e->grant, e->left, &e->node, on_returned, t);
    }
    e->grant.granted = 0;
    e->left = 0;
}

static void entry_free(redis_leases_t *t, size_t slot)
{
    lease_entry_t *e = keyed_at(&t->keys, slot);
    if (e->grant.granted > 0 && e->left > 0) {
        ADD(unreturned, 1);
    }
    ref_release(e->ref);
    keyed_remove(&t->keys, slot);
}

/* ---- the sweep ----------------------------------------------------------------------------- */

static void on_sweep(uv_timer_t *timer)
{
    redis_leases_t *t = timer->data;
    int64_t now = mono_ns();
    for (size_t i = 0; i < keyed_slots(&t->keys); i++) {
        lease_entry_t *e = keyed_at(&t->keys, i);
        if (e == NULL || e->inflight || e->serving) {
            continue;
        }
        bool retired = atomic_load_explicit(&e->ref->retired, memory_order_acquire);
        if (e->grant.granted > 0 && (now >= e->end_ns || retired)) {
            give_back(e);
        }
        if (retired || now - e->last_ns > LEASE_IDLE_TIMES * e->lease_ns) {
            entry_free(t, i);
        }
    }
    if (t->keys.count == 0) {
        uv_timer_stop(&t->sweep);
        t->sweeping = false;
    }
}

/* ---- entries ------------------------------------------------------------------------------- */

/* The entry for tg: found, or made (in place of another key's idle one, given back first).
 * NULL when the slot is busy with another key's lease request, or out of memory. */
static lease_entry_t *entry_for(redis_leases_t *t, const redis_lease_target_t *tg, int64_t now)
{
    size_t slot;
    lease_entry_t *e = entry_find(t, tg, &slot);
    if (e != NULL) {
        return e;
    }
    if ((e = keyed_at(&t->keys, slot)) != NULL) {
        if (e->inflight || e->serving) {
            return NULL;
        }
        give_back(e);
        entry_free(t, slot);
    }
    if ((e = keyed_add(&t->keys, slot, tg->name, tg->key, tg->key_len)) == NULL) {
        return NULL;
    }
    e->table = t;
    e->ref = tg->ref;
    atomic_fetch_add_explicit(&e->ref->refs, 1, memory_order_relaxed);
    e->rule = *tg->rule;
    e->lease_ns = tg->lease_ns;
    e->remaining = -1;
    e->rate_since_ns = now;
    e->last_ns = now;
    if (!t->sweeping) {
        uv_timer_start(&t->sweep, on_sweep, LEASE_SWEEP_MS, LEASE_SWEEP_MS);
        t->sweeping = true;
    }
    return e;
}

/* tg names other numbers, another rule's data or another lease time than e's lease: the lease
 * goes back, and e follows tg (its rate is the key's still). */
static void entry_follow(lease_entry_t *e, const redis_lease_target_t *tg)
{
    if (e->ref == tg->ref && sl_rule_same(&e->rule, tg->rule) && e->lease_ns == tg->lease_ns) {
        return;
    }
    give_back(e);
    atomic_fetch_add_explicit(&tg->ref->refs, 1, memory_order_relaxed);
    ref_release(e->ref);
    e->ref = tg->ref;
    e->rule = *tg->rule;
    e->lease_ns = tg->lease_ns;
    e->remaining = -1;
    e->strict_until_ns = 0;
}

/* ---- decisions ----------------------------------------------------------------------------- */

/* A decision from e's lease, which has the units. */
static void take(lease_entry_t *e, int64_t cost, int64_t now, sl_decision_t *d)
{
    redis_leases_t *t = e->table;
    e->left -= cost;
    ADD(hits, 1);
    ADD(spent, (uint64_t)cost);
    int64_t since = now - e->sent_ns;
    int64_t reset = e->grant.reset_after_ns - (since > 0 ? since : 0);
    *d = (sl_decision_t){.allowed = true,
                         .limit = e->rule.capacity,
                         .remaining = (e->remaining > 0 ? e->remaining : 0) + e->left,
                         .reset_after_ns = reset > 0 ? reset : 0};
}

static bool running(const lease_entry_t *e, int64_t cost, int64_t now)
{
    return e->grant.granted > 0 && e->left >= cost && now < e->end_ns;
}

static void on_lease(void *arg, int status, const sl_decision_t *d, const char *err);

/* Asks for a lease for e, sized for cost (what the waiters w.. ask) and e's rate, and makes the
 * waiters wait for it. */
static void ask(lease_entry_t *e, const redis_lease_target_t *tg, int64_t cost, int64_t now_ns,
                int64_t now, lease_waiter_t *w)
{
    redis_leases_t *t = e->table;
    give_back(e); /* ended, or short of units */
    e->rate_per_s = lease_rate_update(e->rate_per_s, e->arrivals, now - e->rate_since_ns,
                                      LEASE_RATE_HORIZON * e->lease_ns);
    e->arrivals = 0;
    e->rate_since_ns = now;
    int64_t want = lease_want(e->rate_per_s, e->lease_ns, e->remaining, cost);
    e->inflight = true;
    e->wait_head = w;
    e->nwait = 0;
    for (e->wait_tail = w; e->wait_tail->next != NULL; e->wait_tail = e->wait_tail->next) {
        e->nwait++;
    }
    e->nwait++;
    e->sent_ns = now;
    t->outstanding++;
    redis_store_lease(t->rs, tg->name, tg->rule, tg->key, tg->key_len, want, e->lease_ns,
                      tg->closed_ns, now_ns, &e->grant, &e->node, on_lease, e);
}

/* A decision that waits for nothing: strict, through the store (and its over-limit cache). */
static void strict(redis_leases_t *t, const lease_entry_t *e, const redis_lease_target_t *tg,
                   int64_t cost, int64_t now_ns, redis_decision_fn fn, void *arg)
{
    if (tg != NULL) {
        redis_store_decide(t->rs, tg->name, tg->rule, tg->key, tg->key_len, cost, tg->closed_ns,
                           now_ns, fn, arg);
    } else {
        redis_store_decide(t->rs, keyed_name(&e->k), &e->rule, entry_key(e), e->k.key_len, cost,
                           e->closed_ns, now_ns, fn, arg);
    }
}

void redis_leases_decide(redis_leases_t *t, const redis_lease_target_t *tg, int64_t cost,
                         int64_t now_ns, redis_decision_fn fn, void *arg)
{
    int64_t now = mono_ns();
    lease_entry_t *e = NULL;
    if (!t->stopping && cost > 0 && cost <= tg->rule->capacity) {
        e = entry_for(t, tg, now);
    }
    if (e == NULL) {
        strict(t, NULL, tg, cost, now_ns, fn, arg);
        return;
    }
    if (e->inflight && (e->ref != tg->ref || !sl_rule_same(&e->rule, tg->rule))) {
        strict(t, NULL, tg, cost, now_ns, fn, arg); /* a lease under other numbers is coming */
        return;
    }
    if (!e->inflight) {
        entry_follow(e, tg);
    }
    e->closed_ns = tg->closed_ns;
    e->arrivals += cost;
    e->last_ns = now;
    sl_decision_t d;
    if (!e->inflight && running(e, cost, now)) {
        take(e, cost, now, &d);
        redis_store_answer(t->rs, fn, arg, 0, &d, NULL);
        return;
    }
    lease_waiter_t *w = NULL;
    if ((e->inflight && e->nwait >= LEASE_WAITERS_MAX) ||
        (!e->inflight && now < e->strict_until_ns) || (w = freelist_get(&t->waiters)) == NULL) {
        strict(t, NULL, tg, cost, now_ns, fn, arg);
        return;
    }
    *w = (lease_waiter_t){.fn = fn, .arg = arg, .cost = cost};
    if (e->inflight) {
        e->wait_tail->next = w;
        e->wait_tail = w;
        e->nwait++;
        return;
    }
    ask(e, tg, cost, now_ns, now, w);
}

/* e's lease request is answered (status 0 with d, the grant in e->grant): what it holds now. */
static void grant_in(lease_entry_t *e, int status, const sl_decision_t *d)
{
    redis_leases_t *t = e->table;
    t->outstanding--;
    e->inflight = false;
    e->serving = true;
    if (status != 0) {
        e->grant.granted = 0;
        e->left = 0;
        return;
    }
    e->remaining = d->remaining;
    if (e->grant.granted > 0) {
        e->left = e->grant.granted;
        e->end_ns = lease_local_end(e->sent_ns, &e->grant);
        ADD(taken, 1);
        ADD(units, (uint64_t)e->grant.granted);
    } else {
        e->strict_until_ns = e->sent_ns + e->lease_ns;
    }
}

/* Answers waiters w.. from e's lease, in order, while it has their units; returns the first
 * not answered, and whether any was. */
static lease_waiter_t *serve(lease_entry_t *e, lease_waiter_t *w, int64_t now, bool *served)
{
    redis_leases_t *t = e->table;
    while (w != NULL && running(e, w->cost, now)) {
        lease_waiter_t *next = w->next;
        sl_decision_t got;
        *served = true;
        take(e, w->cost, now, &got);
        redis_store_answer(t->rs, w->fn, w->arg, 0, &got, NULL);
        freelist_put(&t->waiters, w);
        w = next;
    }
    return w;
}

/* Asks for another lease for waiters w.. (the grant ran short, the key had room), sized from
 * the rate they arrived at. */
static void ask_again(lease_entry_t *e, lease_waiter_t *w, int64_t now_ns, int64_t now)
{
    int64_t cost = 0;
    for (const lease_waiter_t *x = w; x != NULL; x = x->next) {
        cost += x->cost;
    }
    redis_lease_target_t tg = {.ref = e->ref,
                               .name = keyed_name(&e->k),
                               .rule = &e->rule,
                               .key = entry_key(e),
                               .key_len = e->k.key_len,
                               .lease_ns = e->lease_ns,
                               .closed_ns = e->closed_ns};
    e->serving = false;
    ask(e, &tg, cost, now_ns, now, w);
}

/* The answer to e's lease request: its waiters are answered from the grant in order, and
 * strictly when it runs short; a store error is theirs too. */
static void on_lease(void *arg, int status, const sl_decision_t *d, const char *err)
{
    lease_entry_t *e = arg;
    redis_leases_t *t = e->table;
    lease_waiter_t *w = e->wait_head;
    e->wait_head = e->wait_tail = NULL;
    e->nwait = 0;
    int64_t now = mono_ns();
    int64_t now_ns = sl_now_ns();
    grant_in(e, status, d);
    bool served = false;
    if (status == 0) {
        w = serve(e, w, now, &served);
    }
    if (w != NULL && served && !t->stopping &&
        !atomic_load_explicit(&e->ref->retired, memory_order_acquire)) {
        ask_again(e, w, now_ns, now);
        return;
    }
    while (w != NULL) { /* a store error is theirs too; a grant of nothing: strict */
        lease_waiter_t *next = w->next;
        if (status != 0) {
            redis_store_answer(t->rs, w->fn, w->arg, -1, NULL, err);
        } else {
            strict(t, e, NULL, w->cost, now_ns, w->fn, w->arg);
        }
        freelist_put(&t->waiters, w);
        w = next;
    }
    e->serving = false;
    if (t->stopping) {
        give_back(e);
    }
}

bool redis_leases_take_all(redis_leases_t *t, const redis_lease_target_t *tg, size_t n,
                           int64_t cost, sl_decision_t *d)
{
    int64_t now = mono_ns();
    lease_entry_t *found[REDIS_ALL_MAX];
    if (t->stopping || n > REDIS_ALL_MAX || cost < 1) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        size_t slot;
        lease_entry_t *e = entry_find(t, &tg[i], &slot);
        if (tg[i].lease_ns <= 0 || e == NULL || e->inflight || e->ref != tg[i].ref ||
            !sl_rule_same(&e->rule, tg[i].rule) || !running(e, cost, now)) {
            return false;
        }
        int64_t times = 1; /* one key named several times needs each cost */
        for (size_t j = 0; j < i; j++) {
            times += found[j] == e;
        }
        if (e->left < times * cost) {
            return false;
        }
        found[i] = e;
    }
    for (size_t i = 0; i < n; i++) {
        found[i]->arrivals += cost;
        found[i]->last_ns = now;
        take(found[i], cost, now, &d[i]);
    }
    return true;
}

void redis_leases_drop(redis_leases_t *t, const redis_lease_target_t *tg)
{
    size_t slot;
    lease_entry_t *e = entry_find(t, tg, &slot);
    if (e != NULL && e->grant.granted > 0 && !e->inflight) {
        if (e->left > 0) {
            ADD(unreturned, 1);
        }
        e->grant.granted = 0;
        e->left = 0;
    }
}

unsigned redis_leases_stop(redis_leases_t *t)
{
    if (!t->stopping) {
        t->stopping = true;
        for (size_t i = 0; i < keyed_slots(&t->keys); i++) {
            lease_entry_t *e = keyed_at(&t->keys, i);
            if (e != NULL && !e->inflight) {
                give_back(e);
            }
        }
    }
    return t->outstanding;
}

const redis_lease_stats_t *redis_leases_stats(const redis_leases_t *t)
{
    return &t->stats;
}

void redis_leases_asked(redis_leases_t *t)
{
    ADD(asked, 1);
}

redis_leases_t *redis_leases_create(uv_loop_t *loop, redis_store_t *rs)
{
    redis_leases_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    t->loop = loop;
    t->rs = rs;
    uint64_t seed = (uint64_t)uv_hrtime() ^ (uint64_t)(uintptr_t)t;
    if (keyed_init(&t->keys, LEASE_SLOTS, sizeof(lease_entry_t), seed) != 0) {
        free(t);
        return NULL;
    }
    t->waiters = (freelist_t){.size = sizeof(lease_waiter_t), .keep = LEASE_WAITERS_MAX};
    uv_timer_init(loop, &t->sweep);
    t->sweep.data = t;
    return t;
}

static void on_sweep_closed(uv_handle_t *h)
{
    free(h->data);
}

void redis_leases_free(redis_leases_t *t)
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
    freelist_clear(&t->waiters);
    uv_timer_stop(&t->sweep);
    uv_close((uv_handle_t *)&t->sweep, on_sweep_closed);
}
