/*
 * prop_shard_lock_concurrency.c - the shard lock's fairness, counted: DECIDERS threads decide one
 * hot key (every decision writes its state under its shard's lock, and each takes the lock back
 * at once) while the main thread reclaims (sl_table_reclaim takes every shard's lock) again and
 * again. A waiter that napped HANDOFF_NAPS times has the lock kept for it; the table counts, per
 * shard, such handoffs and the most acquisitions by other threads between a claim and the
 * claimant's own (sl_table_lock_counts). Property: that most is at most the number of other
 * threads (one locker each that was already past the check), however the threads are scheduled
 * -- with a CPU hog on every core too. A waiter that lets others re-take the lock without bound
 * would show a larger count.
 *
 * Bounded: RECLAIMS_MAX reclaims, stopping once HANDOFFS_WANT handoffs were seen; a watchdog
 * stops the deciders after CAP_S seconds (a reclaim that never got the lock then says so). A
 * run with no handoff at all (no waiter ever napped that long) proves nothing and says so; it
 * is not a failure, since how often waiters nap is a matter of speed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/core.h"
#include "sluice/sluice.h"

#define DECIDERS      3
#define RECLAIMS_MAX  200000
#define HANDOFFS_WANT 50
#define CAP_S         60

static atomic_bool stop;

static void *decide_loop(void *arg)
{
    sl_table_t *t = arg;
    sl_decision_t out;
    int64_t now = sl_now_ns();
    for (long long i = 0; i < 2000000000LL && !atomic_load_explicit(&stop, memory_order_relaxed);
         i++) {
        if (sl_table_decide(t, "hot", 3, 1, now + i, &out) != SL_OK)
            break;
    }
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (int i = 0; i < CAP_S * 100 && !atomic_load(&stop); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, true);
    return NULL;
}

int main(void)
{
    sl_rule_t rule;
    sl_table_t *t;
    /* a huge limit: every decision is admitted and writes the key's state */
    if (sl_rule_init(&rule, SL_GCRA, 1000000000, 1000000000) != SL_OK ||
        sl_table_create(&rule, NULL, &t) != SL_OK)
        return 2;
    pthread_t th[DECIDERS], dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    for (int i = 0; i < DECIDERS; i++)
        pthread_create(&th[i], NULL, decide_loop, t);
    uint64_t handoffs = 0;
    unsigned passed_max = 0;
    int done = 0;
    for (; done < RECLAIMS_MAX && !atomic_load(&stop); done++) {
        sl_table_reclaim(t, sl_now_ns());
        if (done % 64 == 63) {
            sl_table_lock_counts(t, &handoffs, &passed_max);
            if (handoffs >= HANDOFFS_WANT)
                break;
        }
    }
    atomic_store(&stop, true);
    for (int i = 0; i < DECIDERS; i++)
        pthread_join(th[i], NULL);
    pthread_join(dog, NULL);
    sl_table_lock_counts(t, &handoffs, &passed_max);
    sl_table_free(t);
    printf("reclaims %d, handoffs %llu, most acquisitions by others while one waited %u (bound "
           "%d)\n",
           done, (unsigned long long)handoffs, passed_max, DECIDERS);
    if (handoffs == 0)
        printf("no waiter napped long enough to claim the lock: the bound went untested\n");
    if (passed_max > DECIDERS) {
        printf("FAIL: a waiter that claimed the lock saw %u acquisitions by the others, more than "
               "the %d other threads\n",
               passed_max, DECIDERS);
        return 1;
    }
    return 0;
}
