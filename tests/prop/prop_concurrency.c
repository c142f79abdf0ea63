/*
 * prop_concurrency.c - several threads deciding on one table never over-admit.
 *
 * Property: for requests of cost 1 that all carry the same `now`, how many a key admits does not
 * depend on the order they arrive in (it is min(requests, room)). So the test runs phases: in
 * each phase every thread sends a random stream of requests over a shared key set at the phase's
 * `now` (a barrier separates phases, and `now` advances between them), while one reference table
 * receives the same multiset of requests from a single thread. After each phase the admitted
 * count of every key must be identical in both. Keys are many and the table starts small, so
 * shards grow and reclaim while other threads decide; half the threads use the batch entry point.
 *
 * Run under TSan by `make test-tsan`. SLUICE_SEED overrides the seed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define THREADS    4
#define PHASES     12
#define PER_THREAD 6000 /* requests per thread per phase */
#define KEYS       3000

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static size_t key_of(unsigned k, char *buf)
{
    /* odd keys are long (stored out of line), even keys short */
    int n = snprintf(buf, 64, k % 2 ? "tenant-%06u:user-%010u" : "k%u:%u", k, k * 7919u);
    return (size_t)n;
}

typedef struct worker {
    sl_table_t *table;
    pthread_barrier_t *barrier;
    uint64_t seed;
    int id;
    unsigned (*admitted)[KEYS]; /* [phase][key], written by this worker only */
    unsigned (*requested)[KEYS];
    int failures;
} worker_t;

static int64_t phase_now(int phase)
{
    /* starts at a realistic epoch time; steps of 0.37 s cross window boundaries unevenly */
    return INT64_C(1700000000) * SL_NS_PER_SEC + (int64_t)phase * 370 * SL_NS_PER_MS;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    char keys[16][64];
    unsigned key_ids[16];
    sl_request_t reqs[16];
    for (int p = 0; p < PHASES; p++) {
        pthread_barrier_wait(w->barrier);
        int64_t now = phase_now(p);
        for (int i = 0; i < PER_THREAD;) {
            int n = w->id % 2 ? 16 : 1; /* odd workers use batches */
            for (int j = 0; j < n; j++) {
                /* skewed: a few hot keys get most of the traffic */
                uint64_t r = splitmix(&w->seed);
                unsigned k = (unsigned)(r % 8 < 5 ? (r >> 8) % 16 : (r >> 8) % KEYS);
                key_ids[j] = k;
                reqs[j] = (sl_request_t){.key = keys[j], .key_len = key_of(k, keys[j]), .cost = 1};
                w->requested[p][k]++;
            }
            if (n == 1) {
                reqs[0].status = sl_table_decide(w->table, reqs[0].key, reqs[0].key_len, 1, now,
                                                 &reqs[0].decision);
            } else {
                sl_table_decide_batch(w->table, reqs, (size_t)n, now);
            }
            for (int j = 0; j < n; j++) {
                if (reqs[j].status != SL_OK) {
                    w->failures++;
                    continue;
                }
                if (reqs[j].decision.allowed)
                    w->admitted[p][key_ids[j]]++;
            }
            i += n;
        }
    }
    return NULL;
}

static int run(sl_algorithm_t algorithm, int64_t limit, int64_t window_ns, uint64_t seed)
{
    sl_rule_t rule;
    if (sl_rule_init(&rule, algorithm, limit, window_ns) != SL_OK) {
        fprintf(stderr, "bad rule\n");
        return 1;
    }
    sl_table_config_t cfg = {.shards = 8, .seed = seed | 1};
    sl_table_t *shared, *reference;
    if (sl_table_create(&rule, &cfg, &shared) != SL_OK ||
        sl_table_create(&rule, NULL, &reference) != SL_OK)
        return 1;

    static unsigned admitted[THREADS][PHASES][KEYS], requested[THREADS][PHASES][KEYS];
    memset(admitted, 0, sizeof(admitted));
    memset(requested, 0, sizeof(requested));
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    worker_t workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){.table = shared,
                                .barrier = &barrier,
                                .seed = seed + (uint64_t)i,
                                .id = i,
                                .admitted = admitted[i],
                                .requested = requested[i]};
        pthread_create(&threads[i], NULL, worker_main, &workers[i]);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        failures += workers[i].failures;
    }
    pthread_barrier_destroy(&barrier);

    /* the reference: the same multiset of requests, one thread, phase by phase */
    int mismatches = 0;
    long total_admitted = 0;
    for (int p = 0; p < PHASES; p++) {
        for (unsigned k = 0; k < KEYS; k++) {
            unsigned want = 0, got = 0, asked = 0;
            for (int i = 0; i < THREADS; i++) {
                asked += requested[i][p][k];
                got += admitted[i][p][k];
            }
            char key[64];
            size_t len = key_of(k, key);
            for (unsigned r = 0; r < asked; r++) {
                sl_decision_t d;
                if (sl_table_decide(reference, key, len, 1, phase_now(p), &d) == SL_OK && d.allowed)
                    want++;
            }
            total_admitted += got;
            if (want != got && mismatches++ < 5)
                fprintf(stderr,
                        "  %s phase %d key %u: %u requested, threads admitted %u, one "
                        "thread admits %u\n",
                        sl_algorithm_name(algorithm), p, k, asked, got, want);
        }
    }
    printf("%-16s limit %3lld window %6lld ms: %ld admitted, %zu keys at the end, %d "
           "mismatches, %d errors\n",
           sl_algorithm_name(algorithm), (long long)limit, (long long)(window_ns / SL_NS_PER_MS),
           total_admitted, sl_table_count(shared), mismatches, failures);
    sl_table_free(shared);
    sl_table_free(reference);
    return mismatches != 0 || failures != 0;
}

int main(void)
{
    const char *env = getenv("SLUICE_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : UINT64_C(20261122);
    printf("prop_concurrency: seed %llu (SLUICE_SEED to replay), %d threads\n",
           (unsigned long long)seed, THREADS);
    int failed = 0;
    failed += run(SL_GCRA, 20, 1 * SL_NS_PER_SEC, seed);
    failed += run(SL_TOKEN_BUCKET, 20, 1 * SL_NS_PER_SEC, seed + 1);
    failed += run(SL_FIXED_WINDOW, 25, 1 * SL_NS_PER_SEC, seed + 2);
    failed += run(SL_SLIDING_WINDOW, 25, 2 * SL_NS_PER_SEC, seed + 3);
    failed += run(SL_SLIDING_LOG, 30, 2 * SL_NS_PER_SEC, seed + 4);
    failed += run(SL_SLIDING_BUCKETS, 30, 2 * SL_NS_PER_SEC, seed + 5);
    printf("%d passed, %d failed\n", 6 - failed, failed);
    return failed != 0;
}
