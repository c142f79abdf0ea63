/*
 * prop_redis_overlimit_cache.c - seeded property test of the over-limit cache that the Redis
 * store and libsluice-client share (src/remote/overlimit_cache.c), over the cache alone: random
 * costs and times against a real Redis would be too slow, and the cache's whole claim is about
 * what it was told.
 *
 * Each case draws a small table (1..16 slots, 1..8 per key), a few keys (each with its rule's
 * max_delay, 0 or not) and a random sequence of events at non-decreasing times: the store's
 * answers (refusals of cost 0..10 with retry -1, 0 or up to 2 s; admissions), asked up to 5 ms
 * before they are told; requests of cost 0..10; forgets of a key; new epochs. A reference keeps,
 * per key, every refusal told since the key's usage last moved (a forget, a new epoch, or an
 * admission of cost >= 1: room back, or taken, so a refusal's retry time is no longer known).
 *
 *   sound     a request answered from the cache is proven refused with the store's retry time:
 *             some remembered refusal of that very cost still holds (now < asked + retry -
 *             max_delay), and the answer's retry_after is that refusal's, less the time since it
 *             was asked
 *   reported  the answer's remaining and reset_after are the store's latest for the key
 *   useful    a request of a refusal's cost, right when that refusal is told (asked that
 *             instant), is answered
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 3000). Exit status 0 when every property
 * held.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prop/gen.h"
#include "remote/overlimit_cache.h"

#define KEYS_MAX    6
#define REFUSED_MAX 256 /* remembered refusals per key in the reference */
#define EVENTS      400
#define MS          INT64_C(1000000)

enum { P_SOUND, P_REPORTED, P_USEFUL, P_COUNT };
static const char *const names[P_COUNT] = {"sound", "reported", "useful"};

typedef struct refusal {
    int64_t cost, asked_ns, retry_ns, hold_ns;
} refusal_t;

typedef struct ref_key {
    uint64_t hash;
    int64_t max_delay_ns;
    refusal_t refused[REFUSED_MAX];
    size_t n;
    bool reported;     /* the store said something of the key */
    int64_t remaining; /* its latest report */
    int64_t reset_at_ns;
} ref_key_t;

/* The reference is told an answer. */
static void ref_record(ref_key_t *k, int64_t cost, const olc_answer_t *a, int64_t asked_ns)
{
    k->reported = true;
    k->remaining = a->remaining;
    k->reset_at_ns = asked_ns + a->reset_after_ns;
    if (a->allowed) {
        if (cost >= 1) {
            k->n = 0; /* the key's usage moved */
        }
        return;
    }
    if (cost >= 1 && a->retry_after_ns > k->max_delay_ns && k->n < REFUSED_MAX) {
        k->refused[k->n++] = (refusal_t){.cost = cost,
                                         .asked_ns = asked_ns,
                                         .retry_ns = a->retry_after_ns,
                                         .hold_ns = asked_ns + a->retry_after_ns - k->max_delay_ns};
    }
}

/* Some remembered refusal proves `cost` refused at now with this retry_after. */
static bool ref_proves(const ref_key_t *k, int64_t cost, int64_t now_ns, int64_t retry_after_ns)
{
    for (size_t i = 0; i < k->n; i++) {
        const refusal_t *r = &k->refused[i];
        if (r->cost == cost && now_ns < r->hold_ns &&
            r->asked_ns + r->retry_ns - now_ns == retry_after_ns) {
            return true;
        }
    }
    return false;
}

static olc_answer_t gen_answer(prng_t *r, const ref_key_t *k)
{
    olc_answer_t a = {.allowed = prng_chance(r, 30),
                      .limit = 10,
                      .remaining = prng_range(r, 0, 10),
                      .reset_after_ns = prng_range(r, 0, 3000) * MS,
                      .max_delay_ns = k->max_delay_ns};
    if (!a.allowed) {
        int pick = (int)prng_range(r, 0, 9);
        a.retry_after_ns = pick == 0 ? -1 : pick == 1 ? 0 : prng_range(r, 1, 2000 * MS);
    }
    return a;
}

/* One case; returns the first property that failed, or -1. */
static int run_case(uint64_t seed, long idx, long *hits)
{
    prng_t r = prop_case_prng(seed, 0, idx);
    olc_entry_t slots[16];
    olc_t c;
    size_t nslots = (size_t)prng_range(&r, 1, 16);
    olc_init(&c, slots, nslots, (size_t)prng_range(&r, 1, OLC_PROBE_MAX));
    size_t nkeys = (size_t)prng_range(&r, 1, KEYS_MAX);
    static ref_key_t keys[KEYS_MAX];
    for (size_t i = 0; i < nkeys; i++) {
        keys[i] =
            (ref_key_t){.hash = prng_next(&r),
                        .max_delay_ns = prng_chance(&r, 30) ? prng_range(&r, 1, 500) * MS : 0};
    }
    uint64_t epoch = prng_next(&r);
    int64_t now = PROP_START;
    for (int e = 0; e < EVENTS; e++) {
        now += prng_chance(&r, 30) ? 0 : prng_range(&r, 1, 300) * MS;
        ref_key_t *k = &keys[prng_range(&r, 0, (int64_t)nkeys - 1)];
        int kind = (int)prng_range(&r, 0, 99);
        if (kind < 45) { /* the store answers a request asked a little earlier */
            int64_t cost = prng_range(&r, 0, 10);
            int64_t asked = now - (prng_chance(&r, 50) ? 0 : prng_range(&r, 1, 5) * MS);
            olc_answer_t a = gen_answer(&r, k);
            olc_record(&c, k->hash, epoch, cost, &a, asked);
            ref_record(k, cost, &a, asked);
            bool holds =
                asked == now && !a.allowed && cost >= 1 && a.retry_after_ns > k->max_delay_ns;
            olc_answer_t got;
            if (holds && !olc_lookup(&c, k->hash, epoch, cost, now, &got)) {
                return P_USEFUL;
            }
        } else if (kind < 92) { /* a request */
            int64_t cost = prng_range(&r, 0, 10);
            olc_answer_t got;
            if (olc_lookup(&c, k->hash, epoch, cost, now, &got)) {
                (*hits)++;
                if (got.allowed || !ref_proves(k, cost, now, got.retry_after_ns)) {
                    return P_SOUND;
                }
                int64_t reset = k->reset_at_ns > now ? k->reset_at_ns - now : 0;
                if (!k->reported || got.remaining != k->remaining || got.reset_after_ns != reset ||
                    got.limit != 10) {
                    return P_REPORTED;
                }
            }
        } else if (kind < 97) { /* the key gets room back */
            olc_forget(&c, k->hash);
            k->n = 0;
        } else { /* a new epoch: every key may have room back */
            epoch++;
            for (size_t i = 0; i < nkeys; i++) {
                keys[i].n = 0;
            }
        }
    }
    return -1;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 3000);
    printf("prop_redis_overlimit_cache: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases\n",
           seed, cases);
    long failed[P_COUNT] = {0}, hits = 0;
    for (long idx = 0; idx < cases; idx++) {
        int p = run_case(seed, idx, &hits);
        if (p >= 0 && failed[p]++ == 0) {
            printf("FAIL [%s] case %ld\n", names[p], idx);
        }
    }
    long total = 0;
    for (int p = 0; p < P_COUNT; p++) {
        printf("  %-9s %s (%ld failures)\n", names[p], failed[p] == 0 ? "held" : "FAILED",
               failed[p]);
        total += failed[p];
    }
    printf("  %ld requests answered from the cache\n", hits);
    if (hits < cases) { /* a cache that never answers would pass the rest */
        printf("FAIL: too few requests answered from the cache\n");
        return 1;
    }
    return total == 0 ? 0 : 1;
}
