/*
 * prop_adopt_concurrency.c - sl_table_adopt() under threads: a key's usage follows it from table
 * to table while other threads decide on it, and what a racing decision can lose is bounded.
 *
 * Two tables of one algorithm, A and B, stand for a rule's table and an override's. Each key has
 * a home (A or B) that a MOVER thread flips at random: it marks the key as moving (a per-key
 * sequence number made odd), flips the home, calls sl_table_adopt(new home, key, old home) and
 * marks the move done (the number even again). DECIDE threads read a key's home and decide on
 * that table, as a sluiced loop decides on the table its override cache names; a decision whose
 * sequence number was odd or changed while it ran raced a move and is counted as racing.
 *
 * Rules whose conversion between A and B is exact in counts (fixed_window with another limit,
 * the same window: counts are copied; sliding_log with the same numbers, states out of line), so
 * after the threads stop and each key is adopted home once more, for every key:
 *   - it is in its home table only;
 *   - admitted - racing <= held <= admitted, held = the units its state records (limit - the
 *     remaining of a peek), admitted = the units decided on it, racing = the units of decisions
 *     that raced a move.
 * A table that kept both copies, or an adoption that dropped the only one, fails the first
 * bound; an adoption that added usage fails the second.
 *
 * Run under TSan by `make test-tsan` (label concurrency). SLUICE_SEED overrides the seed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "sluice/sluice.h"

#define DECIDERS 2
#define KEYS     48
#define OPS      20000 /* decisions per decide thread */
#define T0       (INT64_C(1700000000) * SL_NS_PER_SEC)

typedef struct shared {
    sl_table_t *t[2];
    int64_t limit[2];
    _Atomic int home[KEYS];
    _Atomic unsigned seq[KEYS];
    _Atomic long admitted[KEYS];
    _Atomic long racing[KEYS];
    _Atomic int deciders_left;
    _Atomic long moves;
    _Atomic int failed;
} shared_t;

typedef struct worker {
    shared_t *sh;
    prng_t rng;
} worker_t;

static size_t key_of(unsigned k, char *buf)
{
    return (size_t)snprintf(buf, 64, k % 2 ? "key-%u-a-long-one-stored-out-of-line" : "k%u", k);
}

static void *decide_main(void *arg)
{
    worker_t *w = arg;
    shared_t *sh = w->sh;
    for (int i = 0; i < OPS && !atomic_load(&sh->failed); i++) {
        unsigned k = (unsigned)(prng_next(&w->rng) % KEYS);
        int64_t cost = 1 + (int64_t)(prng_next(&w->rng) % 3);
        char key[64];
        size_t len = key_of(k, key);
        unsigned s1 = atomic_load(&sh->seq[k]);
        int h = atomic_load(&sh->home[k]);
        sl_decision_t d;
        int rc = sl_table_decide(sh->t[h], key, len, cost, T0, &d);
        unsigned s2 = atomic_load(&sh->seq[k]);
        if (rc != SL_OK || !d.allowed) {
            fprintf(stderr, "decision on key %u: rc %d allowed %d\n", k, rc, d.allowed);
            atomic_store(&sh->failed, 1);
            break;
        }
        atomic_fetch_add(&sh->admitted[k], cost);
        if (s1 != s2 || (s1 & 1) != 0) {
            atomic_fetch_add(&sh->racing[k], cost);
        }
    }
    atomic_fetch_sub(&sh->deciders_left, 1);
    return NULL;
}

static void *move_main(void *arg)
{
    worker_t *w = arg;
    shared_t *sh = w->sh;
    while (atomic_load(&sh->deciders_left) > 0 && !atomic_load(&sh->failed)) {
        unsigned k = (unsigned)(prng_next(&w->rng) % KEYS);
        char key[64];
        size_t len = key_of(k, key);
        atomic_fetch_add(&sh->seq[k], 1); /* odd: moving */
        int to = 1 - atomic_load(&sh->home[k]);
        atomic_store(&sh->home[k], to);
        int rc = sl_table_adopt(sh->t[to], key, len, &sh->t[1 - to], 1, T0);
        atomic_fetch_add(&sh->seq[k], 1); /* even: done */
        if (rc < 0) {
            fprintf(stderr, "adopt of key %u: %s\n", k, sl_strerror(rc));
            atomic_store(&sh->failed, 1);
        }
        atomic_fetch_add(&sh->moves, 1);
    }
    return NULL;
}

static long held(sl_table_t *t, int64_t limit, const char *key, size_t len)
{
    sl_decision_t d;
    if (sl_table_decide(t, key, len, 0, T0, &d) != SL_OK) {
        return -1;
    }
    return (long)(limit - d.remaining);
}

static int run(const char *name, const sl_rule_t *ra, const sl_rule_t *rb, uint64_t seed)
{
    shared_t *sh = calloc(1, sizeof *sh);
    sl_table_config_t cfg = {.shards = 4};
    if (sh == NULL || sl_table_create(ra, &cfg, &sh->t[0]) != SL_OK ||
        sl_table_create(rb, &cfg, &sh->t[1]) != SL_OK) {
        fprintf(stderr, "%s: setup failed\n", name);
        return 1;
    }
    sh->limit[0] = ra->limit;
    sh->limit[1] = rb->limit;
    atomic_store(&sh->deciders_left, DECIDERS);
    pthread_t th[DECIDERS + 1];
    worker_t w[DECIDERS + 1];
    for (int i = 0; i <= DECIDERS; i++) {
        w[i] = (worker_t){.sh = sh, .rng = {seed + (uint64_t)i * 7919}};
        pthread_create(&th[i], NULL, i < DECIDERS ? decide_main : move_main, &w[i]);
    }
    for (int i = 0; i <= DECIDERS; i++) {
        pthread_join(th[i], NULL);
    }
    int bad = atomic_load(&sh->failed);
    long racing_total = 0;
    for (unsigned k = 0; k < KEYS && !bad; k++) {
        char key[64];
        size_t len = key_of(k, key);
        int h = atomic_load(&sh->home[k]);
        if (sl_table_adopt(sh->t[h], key, len, &sh->t[1 - h], 1, T0) < 0) {
            fprintf(stderr, "%s: final adopt of key %u failed\n", name, k);
            bad = 1;
            break;
        }
        long got = held(sh->t[h], sh->limit[h], key, len);
        long other = held(sh->t[1 - h], sh->limit[1 - h], key, len);
        long admitted = atomic_load(&sh->admitted[k]), racing = atomic_load(&sh->racing[k]);
        racing_total += racing;
        if (other != 0 || got > admitted || got < admitted - racing) {
            fprintf(stderr,
                    "%s key %u: home holds %ld, the other table %ld; admitted %ld, of which %ld "
                    "raced a move\n",
                    name, k, got, other, admitted, racing);
            bad = 1;
        }
    }
    printf("%s: %d deciders x %d decisions, %ld moves, %ld units raced a move: %s\n", name,
           DECIDERS, OPS, atomic_load(&sh->moves), racing_total, bad ? "FAILED" : "ok");
    sl_table_free(sh->t[0]);
    sl_table_free(sh->t[1]);
    free(sh);
    return bad;
}

int main(void)
{
    uint64_t seed = prop_seed();
    printf("seed %llu (SLUICE_SEED)\n", (unsigned long long)seed);
    sl_rule_t fa, fb, sa, sb;
    sl_rule_init(&fa, SL_FIXED_WINDOW, 1000000, 3600 * SL_NS_PER_SEC);
    sl_rule_init(&fb, SL_FIXED_WINDOW, 900000, 3600 * SL_NS_PER_SEC);
    sl_rule_init(&sa, SL_SLIDING_LOG, 4096, 3600 * SL_NS_PER_SEC);
    sl_rule_init(&sb, SL_SLIDING_LOG, 4096, 3600 * SL_NS_PER_SEC);
    int bad = run("fixed_window", &fa, &fb, seed);
    bad |= run("sliding_log", &sa, &sb, seed + 1);
    return bad;
}
