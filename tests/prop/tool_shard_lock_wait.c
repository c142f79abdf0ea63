/*
 * tool_shard_lock_wait.c - how long a waiter for a shard lock (sl_table_reclaim) waits behind
 * threads that decide on one hot key of that shard and take its lock back at once, counted in
 * the decisions the others made meanwhile (not in time: the count is what starvation means).
 *
 *     tool_shard_lock_wait [RECLAIMS [DECIDERS [CAP_DECISIONS [CAP_SECONDS]]]]
 *
 * DECIDERS threads (default 2) decide one key of a gcra rule that admits them all (so every
 * decision writes the state under the shard's lock) in a tight loop. The main thread calls
 * sl_table_reclaim() RECLAIMS times (default 200), each of which takes every shard's lock once,
 * the hot key's shard among them, and records how many decisions the deciders completed while
 * it ran. Bounded: the run stops when the reclaims are done, when the deciders have made
 * CAP_DECISIONS (default 2e9) decisions in all, or after CAP_SECONDS (default 60; a watchdog
 * thread) -- a waiter still waiting then is starved, and the tool says so.
 *
 * Prints: reclaims done, the decisions made during each (median, 90th percentile, max) and the
 * total. Run it beside a CPU hog (scripts/stress.sh) to see a waiter on an oversubscribed
 * machine. A figure, not a test: src/core/table.c states the bound (a waiter that napped
 * HANDOFF_NAPS times has the lock kept for it), which the max here shows.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sluice/sluice.h"

static atomic_ullong decided;
static atomic_bool stop;

struct decider {
    sl_table_t *t;
    unsigned long long cap;
};

static void *decide_loop(void *arg)
{
    struct decider *d = arg;
    sl_decision_t out;
    int64_t now = sl_now_ns();
    for (unsigned long long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        if (sl_table_decide(d->t, "hot", 3, 1, now + (int64_t)i, &out) != SL_OK)
            break;
        if (atomic_fetch_add_explicit(&decided, 1, memory_order_relaxed) + 1 >= d->cap)
            atomic_store(&stop, true);
    }
    return NULL;
}

static void *watchdog(void *arg)
{
    double secs = *(double *)arg;
    for (long i = 0; i < (long)(secs * 100) && !atomic_load(&stop); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, true);
    return NULL;
}

static int cmp_ull(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reclaims = argc > 1 ? atoi(argv[1]) : 200;
    int deciders = argc > 2 ? atoi(argv[2]) : 2;
    unsigned long long cap = argc > 3 ? strtoull(argv[3], NULL, 10) : 2000000000ull;
    double secs = argc > 4 ? atof(argv[4]) : 60;
    if (reclaims < 1 || reclaims > 100000 || deciders < 1 || deciders > 64)
        return 2;
    sl_rule_t rule;
    sl_table_t *t;
    /* a huge limit per ns window: every decision is admitted and writes the key's state */
    if (sl_rule_init(&rule, SL_GCRA, 1000000000, 1000000000) != SL_OK ||
        sl_table_create(&rule, NULL, &t) != SL_OK)
        return 2;
    pthread_t th[64], dog;
    struct decider d = {t, cap};
    pthread_create(&dog, NULL, watchdog, &secs);
    for (int i = 0; i < deciders; i++)
        pthread_create(&th[i], NULL, decide_loop, &d);
    while (atomic_load(&decided) == 0 && !atomic_load(&stop)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    unsigned long long *during = calloc((size_t)reclaims, sizeof(*during));
    int done = 0;
    for (; done < reclaims && !atomic_load(&stop); done++) {
        unsigned long long c0 = atomic_load(&decided);
        sl_table_reclaim(t, sl_now_ns());
        during[done] = atomic_load(&decided) - c0;
    }
    bool starved = done < reclaims;
    atomic_store(&stop, true);
    for (int i = 0; i < deciders; i++)
        pthread_join(th[i], NULL);
    pthread_join(dog, NULL);
    qsort(during, (size_t)done, sizeof(*during), cmp_ull);
    printf("reclaims done %d of %d, deciders %d, decisions in all %llu\n", done, reclaims, deciders,
           (unsigned long long)atomic_load(&decided));
    if (done > 0)
        printf("decisions made by the others during one reclaim: median %llu, p90 %llu, max %llu\n",
               during[done / 2], during[done * 9 / 10], during[done - 1]);
    if (starved)
        printf("STARVED: reclaim %d still waiting when the run was stopped (cap %llu decisions or "
               "%.0f s)\n",
               done + 1, cap, secs);
    free(during);
    sl_table_free(t);
    return starved ? 1 : 0;
}
