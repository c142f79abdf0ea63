/*
 * prop_concurrency_all.c - sl_table_decide_all() under threads: all or nothing, never over.
 *
 * Two tables, fixed_window (limit 50) and sliding_log (limit 40, states out of line), both with
 * few shards that start small, so shards grow and reclaim while calls hold several locks. Each
 * of GROUPS pair groups has one key in each table. In each phase (a barrier between phases, one
 * `now` per phase, a window apart so every key starts the phase fresh):
 *
 *   - PAIR threads call sl_table_decide_all() on 1..4 random groups, each group as two requests
 *     of cost 1 (its key in each table), sometimes a group twice, sometimes with one more request
 *     that can never be admitted (so the call is refused after tentative charges);
 *   - SINGLE threads call sl_table_decide() and sl_table_decide_batch() on the same pair keys and
 *     on keys of their own, and now and then sl_table_refund() of a unit they were just admitted
 *     on one of their keys (a key given all back is dropped, as reclamation would).
 *
 * After each phase, for every key: the units its state holds (limit - remaining of a peek) are
 * exactly the admitted pair calls that named it plus the admitted single requests on it, less
 * the refunds (so no call left a partial charge, and no refused call charged anything), and
 * never more than its limit. Within a call refused, the others are reported as they stand alone,
 * and the admitted ones as allowed.
 *
 * Run under TSan by `make test-tsan` (label concurrency). SLUICE_SEED overrides the seed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define PAIR_THREADS   2
#define SINGLE_THREADS 2
#define THREADS        (PAIR_THREADS + SINGLE_THREADS)
#define PHASES         8
#define OPS            2500 /* calls per thread per phase */
#define GROUPS         48
#define OWN_KEYS       400 /* keys only the single threads use, per table */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Pair key g of table `which` (0 or 1); odd groups long (stored out of line). */
static size_t pair_key(unsigned g, int which, char *buf)
{
    return (size_t)snprintf(buf, 64, g % 2 ? "pair-%u-of-the-tenant-%c" : "p%u%c", g,
                            which ? 'y' : 'x');
}

static size_t own_key(unsigned k, char *buf)
{
    return (size_t)snprintf(buf, 64, "own:%u", k);
}

typedef struct shared {
    sl_table_t *tables[2];
    pthread_barrier_t barrier;
    /* [phase][thread][table][group]: admitted units on pair keys, written by that thread */
    unsigned pair_units[PHASES][THREADS][2][GROUPS];
    unsigned own_units[PHASES][THREADS][2][OWN_KEYS];
} shared_t;

typedef struct worker {
    shared_t *sh;
    int id;
    uint64_t seed;
    int failures;
} worker_t;

static int64_t phase_now(int phase)
{
    return INT64_C(1700000000) * SL_NS_PER_SEC + (int64_t)phase * 2 * SL_NS_PER_SEC;
}

static void fail(worker_t *w, const char *what)
{
    if (w->failures++ < 5)
        fprintf(stderr, "  thread %d: %s\n", w->id, what);
}

static void pair_call(worker_t *w, int p, int64_t now)
{
    shared_t *sh = w->sh;
    char keys[SL_MULTI_MAX][64];
    unsigned groups[SL_MULTI_MAX];
    sl_multi_request_t q[SL_MULTI_MAX];
    size_t n = 0;
    int ngroups = 1 + (int)(splitmix(&w->seed) % 4);
    for (int j = 0; j < ngroups; j++) {
        uint64_t r = splitmix(&w->seed);
        unsigned g = (unsigned)(r % 8 < 5 ? (r >> 8) % 6 : (r >> 8) % GROUPS); /* hot groups */
        int repeat = (r >> 40) % 8 == 0 ? 2 : 1;
        for (int k = 0; k < repeat; k++) {
            for (int t = 0; t < 2; t++) {
                groups[n] = g;
                q[n] = (sl_multi_request_t){.table = sh->tables[t],
                                            .key = keys[n],
                                            .key_len = pair_key(g, t, keys[n]),
                                            .cost = 1};
                n++;
            }
        }
    }
    bool doomed = splitmix(&w->seed) % 10 == 0;
    if (doomed) { /* a cost no key can take: refused after every tentative charge */
        groups[n] = GROUPS;
        q[n] = (sl_multi_request_t){
            .table = sh->tables[1], .key = "doomed", .key_len = 6, .cost = 1000};
        n++;
    }
    size_t refused = 0;
    if (sl_table_decide_all(q, n, now, &refused) != SL_OK) {
        fail(w, "sl_table_decide_all returned an error");
        return;
    }
    if (doomed && refused == n) {
        fail(w, "a call with a request no key can take was admitted");
        return;
    }
    if (refused < n) {
        for (size_t i = 0; i < n; i++) {
            bool ok = i < refused ? q[i].decision.allowed : i > refused || !q[i].decision.allowed;
            if (!ok || q[i].status != SL_OK)
                fail(w, "a refused call's decisions are not as documented");
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!q[i].decision.allowed)
            fail(w, "an admitted call reports a refused request");
        sh->pair_units[p][w->id][i % 2][groups[i]]++;
    }
}

static void single_calls(worker_t *w, int p, int64_t now)
{
    shared_t *sh = w->sh;
    char keys[16][64];
    unsigned ids[16];
    int which[16];
    sl_request_t reqs[16];
    uint64_t r = splitmix(&w->seed);
    int t = (int)(r & 1);
    int n = (r >> 1) % 2 ? 16 : 1;
    for (int j = 0; j < n; j++) {
        uint64_t x = splitmix(&w->seed);
        bool own = x % 4 != 0;
        ids[j] = own ? (unsigned)((x >> 8) % OWN_KEYS) : (unsigned)((x >> 8) % 6); /* hot pairs */
        which[j] = own;
        size_t len = own ? own_key(ids[j], keys[j]) : pair_key(ids[j], t, keys[j]);
        reqs[j] = (sl_request_t){.key = keys[j], .key_len = len, .cost = 1};
    }
    if (n == 1)
        reqs[0].status =
            sl_table_decide(sh->tables[t], reqs[0].key, reqs[0].key_len, 1, now, &reqs[0].decision);
    else
        sl_table_decide_batch(sh->tables[t], reqs, (size_t)n, now);
    for (int j = 0; j < n; j++) {
        if (reqs[j].status != SL_OK) {
            fail(w, "a single decision returned an error");
        } else if (reqs[j].decision.allowed) {
            if (which[j])
                sh->own_units[p][w->id][t][ids[j]]++;
            else
                sh->pair_units[p][w->id][t][ids[j]]++;
        }
    }
    /* give one back: at the same now, the unit charged last comes off exactly */
    int j = (int)(splitmix(&w->seed) % 64);
    if (j < n && which[j] && reqs[j].status == SL_OK && reqs[j].decision.allowed) {
        sl_decision_t d;
        if (sl_table_refund(sh->tables[t], reqs[j].key, reqs[j].key_len, 1, now, now, &d) != SL_OK)
            fail(w, "a refund returned an error");
        else
            sh->own_units[p][w->id][t][ids[j]]--;
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (int p = 0; p < PHASES; p++) {
        pthread_barrier_wait(&w->sh->barrier);
        int64_t now = phase_now(p);
        for (int i = 0; i < OPS; i++) {
            if (w->id < PAIR_THREADS)
                pair_call(w, p, now);
            else
                single_calls(w, p, now);
        }
        pthread_barrier_wait(&w->sh->barrier); /* the main thread checks this phase */
        pthread_barrier_wait(&w->sh->barrier);
    }
    return NULL;
}

/* Units a key holds at now: limit - remaining of a peek. */
static long held(sl_table_t *t, const char *key, size_t len, int64_t now)
{
    sl_decision_t d;
    if (sl_table_decide(t, key, len, 0, now, &d) != SL_OK)
        return -1;
    return (long)(d.limit - d.remaining);
}

static int check_phase(shared_t *sh, int p, long *pairs_total)
{
    int bad = 0;
    int64_t now = phase_now(p);
    char key[64];
    for (int t = 0; t < 2; t++) {
        long limit = (long)sl_table_rule(sh->tables[t])->limit;
        for (unsigned g = 0; g < GROUPS + OWN_KEYS; g++) {
            bool own = g >= GROUPS;
            unsigned id = own ? g - GROUPS : g;
            size_t len = own ? own_key(id, key) : pair_key(id, t, key);
            long want = 0;
            for (int i = 0; i < THREADS; i++)
                want += own ? sh->own_units[p][i][t][id] : sh->pair_units[p][i][t][id];
            long got = held(sh->tables[t], key, len, now);
            if (got != want || want > limit) {
                if (bad++ < 5)
                    fprintf(stderr, "  phase %d %s: holds %ld units, admitted %ld, limit %ld\n", p,
                            key, got, want, limit);
            }
            if (!own && t == 0)
                *pairs_total += want;
        }
    }
    return bad;
}

int main(void)
{
    const char *env = getenv("SLUICE_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : UINT64_C(20261124);
    printf("prop_concurrency_all: seed %llu (SLUICE_SEED to replay), %d threads calling "
           "sl_table_decide_all, %d deciding single keys\n",
           (unsigned long long)seed, PAIR_THREADS, SINGLE_THREADS);
    static shared_t sh;
    memset(&sh, 0, sizeof(sh));
    sl_rule_t fw, log;
    if (sl_rule_init(&fw, SL_FIXED_WINDOW, 50, SL_NS_PER_SEC) != SL_OK ||
        sl_rule_init(&log, SL_SLIDING_LOG, 40, SL_NS_PER_SEC) != SL_OK)
        return 1;
    sl_table_config_t cfg = {.shards = 4, .seed = seed | 1};
    if (sl_table_create(&fw, &cfg, &sh.tables[0]) != SL_OK ||
        sl_table_create(&log, &cfg, &sh.tables[1]) != SL_OK)
        return 1;
    pthread_barrier_init(&sh.barrier, NULL, THREADS + 1);
    worker_t workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){.sh = &sh, .id = i, .seed = seed * 31 + (uint64_t)i};
        pthread_create(&threads[i], NULL, worker_main, &workers[i]);
    }
    int bad = 0;
    long units = 0;
    for (int p = 0; p < PHASES; p++) {
        pthread_barrier_wait(&sh.barrier); /* start */
        pthread_barrier_wait(&sh.barrier); /* done */
        bad += check_phase(&sh, p, &units);
        pthread_barrier_wait(&sh.barrier); /* go on */
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        failures += workers[i].failures;
    }
    pthread_barrier_destroy(&sh.barrier);
    printf("%ld units admitted on pair keys of the first table, %zu + %zu keys at the end, "
           "%d keys whose units disagree, %d call errors\n",
           units, sl_table_count(sh.tables[0]), sl_table_count(sh.tables[1]), bad, failures);
    sl_table_free(sh.tables[0]);
    sl_table_free(sh.tables[1]);
    printf("prop_concurrency_all: %s\n", bad || failures ? "FAILED" : "passed");
    return bad || failures;
}
