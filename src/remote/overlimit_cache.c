/*
 * overlimit_cache.c - remembered refusals (see overlimit_cache.h for the contract and layout).
 *
 * Invariants: a slot is free iff its cost is 0; a used slot's hold_ns <= retry_at_ns; a hash
 * occupies at most one slot, within its probe window; count is the number of used slots. Times
 * from the network are added with saturation.
 */
#include "remote/overlimit_cache.h"

#include <string.h>

#include "sluice/sluice.h"

void olc_init(olc_t *c, olc_entry_t *slots, size_t nslots, size_t probe)
{
    if (probe < 1) {
        probe = 1;
    }
    if (probe > OLC_PROBE_MAX) {
        probe = OLC_PROBE_MAX;
    }
    *c = (olc_t){.slots = slots, .nslots = nslots, .probe = probe < nslots ? probe : nslots};
    olc_clear(c);
}

void olc_clear(olc_t *c)
{
    if (c->nslots > 0) {
        memset(c->slots, 0, c->nslots * sizeof *c->slots);
    }
    c->count = 0;
}

uint64_t olc_key_hash(uint64_t seed, const void *a, size_t a_len, const void *b, size_t b_len)
{
    uint64_t h = sl_hash64(a, a_len, seed);
    return b_len == 0 ? h : sl_hash64(b, b_len, h ^ SL_HASH_P1);
}

/* The first slot of h's probe window: h scaled to [0, nslots) (nslots > 0). */
static size_t window_start(const olc_t *c, uint64_t h)
{
    return (size_t)(((__uint128_t)h * c->nslots) >> 64);
}

static olc_entry_t *window_slot(const olc_t *c, size_t start, size_t i)
{
    size_t k = start + i;
    return &c->slots[k < c->nslots ? k : k - c->nslots];
}

/* The slot holding h, or NULL. */
static olc_entry_t *find(const olc_t *c, uint64_t h)
{
    if (c->nslots == 0) {
        return NULL;
    }
    size_t start = window_start(c, h);
    for (size_t i = 0; i < c->probe; i++) {
        olc_entry_t *e = window_slot(c, start, i);
        if (e->cost != 0 && e->hash == h) {
            return e;
        }
    }
    return NULL;
}

static void drop(olc_t *c, olc_entry_t *e)
{
    memset(e, 0, sizeof *e);
    c->count--;
}

/* at_ns + d_ns, saturating at INT64_MAX (d_ns >= 0). */
static int64_t add_sat(int64_t at_ns, int64_t d_ns)
{
    int64_t sum;
    return __builtin_add_overflow(at_ns, d_ns, &sum) ? INT64_MAX : sum;
}

/* later_ns - now_ns for later_ns > now_ns, saturating at INT64_MAX. */
static int64_t until(int64_t later_ns, int64_t now_ns)
{
    int64_t d;
    return __builtin_sub_overflow(later_ns, now_ns, &d) ? INT64_MAX : d;
}

bool olc_lookup(olc_t *c, uint64_t h, uint64_t epoch, int64_t cost, int64_t now_ns,
                olc_answer_t *out)
{
    olc_entry_t *e = find(c, h);
    if (e == NULL) {
        return false;
    }
    if (e->epoch != epoch || now_ns >= e->hold_ns) {
        drop(c, e);
        return false;
    }
    if (cost != e->cost) {
        return false; /* a smaller cost may fit, a larger one fits later: only the store knows */
    }
    /* now_ns < hold_ns <= retry_at_ns, so retry_after_ns >= 1 */
    *out = (olc_answer_t){.allowed = false,
                          .limit = e->limit,
                          .remaining = e->remaining,
                          .retry_after_ns = until(e->retry_at_ns, now_ns),
                          .reset_after_ns =
                              now_ns < e->reset_at_ns ? until(e->reset_at_ns, now_ns) : 0};
    return true;
}

/* The slot a new entry for h goes to: a free or expired one in its window, else the one whose
 * hold ends first (dropped). */
static olc_entry_t *claim(olc_t *c, uint64_t h, int64_t now_ns)
{
    size_t start = window_start(c, h);
    olc_entry_t *victim = NULL;
    for (size_t i = 0; i < c->probe; i++) {
        olc_entry_t *e = window_slot(c, start, i);
        if (e->cost == 0) {
            return e;
        }
        if (now_ns >= e->hold_ns) {
            drop(c, e);
            return e;
        }
        if (victim == NULL || e->hold_ns < victim->hold_ns) {
            victim = e;
        }
    }
    drop(c, victim);
    return victim;
}

/* The last report for the key, into a live entry. */
static void update_report(olc_entry_t *e, const olc_answer_t *a, int64_t asked_ns)
{
    e->limit = a->limit;
    e->remaining = a->remaining;
    e->reset_at_ns = add_sat(asked_ns, a->reset_after_ns > 0 ? a->reset_after_ns : 0);
}

void olc_record(olc_t *c, uint64_t h, uint64_t epoch, int64_t cost, const olc_answer_t *a,
                int64_t asked_ns)
{
    if (c->nslots == 0) {
        return;
    }
    olc_entry_t *e = find(c, h);
    if (e != NULL && (e->epoch != epoch || asked_ns >= e->hold_ns)) {
        drop(c, e); /* dead already */
        e = NULL;
    }
    if (a->allowed) {
        if (e != NULL && cost >= 1) {
            drop(c, e); /* the key's usage moved: the entry's retry time is no longer the store's */
        } else if (e != NULL) {
            update_report(e, a, asked_ns);
        }
        return;
    }
    int64_t max_delay_ns = a->max_delay_ns > 0 ? a->max_delay_ns : 0;
    bool holds = cost >= 1 && a->retry_after_ns > max_delay_ns;
    if (!holds) {
        if (e != NULL) {
            update_report(e, a, asked_ns); /* a refusal that teaches nothing new */
        }
        return;
    }
    if (e == NULL) {
        e = claim(c, h, asked_ns);
        c->count++;
    }
    e->hash = h;
    e->epoch = epoch;
    e->cost = cost;
    e->retry_at_ns = add_sat(asked_ns, a->retry_after_ns);
    e->hold_ns = add_sat(asked_ns, a->retry_after_ns - max_delay_ns);
    update_report(e, a, asked_ns);
}

void olc_forget(olc_t *c, uint64_t h)
{
    olc_entry_t *e = find(c, h);
    if (e != NULL) {
        drop(c, e);
    }
}
