/*
 * prop_watch_concurrency.c - a rule's watch (engine/watch.h) read while two loops write it, as
 * sluiced's readers (SL.TOP, /v1/stats) do: each of two writer threads records seeded keys (one
 * key in four is "hot") with its own advancing clock, while a reader merges the top and sums the
 * seconds over and over. Checked on every read: no count is above what the writers recorded so
 * far, no count minus its error is above its key's true count, the seconds never sum to more
 * than was recorded, and the hot key leads the top once it holds a quarter of the decisions.
 * Under TSan (the "concurrency" label) this is the check that the readers race with nothing.
 * SLUICE_SEED replays a run.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "prop/gen.h"
#include "engine/watch.h"

#define RECORDS 200000 /* per writer */
#define KEYS    5000   /* distinct cold keys */
#define S       INT64_C(1000000000)
#define T0      (INT64_C(1700000000) * S)
#define STEP_NS INT64_C(100000) /* each writer's clock per record: 20 s in all */

static watch_t *w;
static _Atomic uint64_t recorded[2]; /* per writer, published after each record */
static _Atomic uint64_t hot_recorded[2];
static uint64_t seed;

static void *writer(void *arg)
{
    unsigned loop = (unsigned)(uintptr_t)arg;
    prng_t r = {seed + loop};
    char key[32];
    for (uint64_t i = 0; i < RECORDS; i++) {
        bool hot = prng_chance(&r, 25);
        size_t len =
            hot ? (size_t)snprintf(key, sizeof key, "hot")
                : (size_t)snprintf(key, sizeof key, "k%" PRId64, prng_range(&r, 0, KEYS - 1));
        /* counted first: a reader's later load is never below what the sketch holds */
        if (hot) {
            atomic_fetch_add(&hot_recorded[loop], 1);
        }
        atomic_fetch_add(&recorded[loop], 1);
        watch_record(w, loop, key, len, prng_chance(&r, 10) ? WATCH_DENIED : WATCH_ALLOWED,
                     T0 + (int64_t)i * STEP_NS);
    }
    return NULL;
}

static int check_read(long *reads)
{
    static topk_item_t out[WATCH_TOP_MAX];
    static uint64_t a[30], d[30], sh[30];
    uint64_t hot_before = atomic_load(&hot_recorded[0]) + atomic_load(&hot_recorded[1]);
    uint64_t total;
    long n = watch_top(w, false, T0 + RECORDS * STEP_NS, 10, out, &total);
    watch_rates(w, T0 / S + 30, 30, a, d, sh);
    uint64_t all_after = atomic_load(&recorded[0]) + atomic_load(&recorded[1]);
    uint64_t hot_after = atomic_load(&hot_recorded[0]) + atomic_load(&hot_recorded[1]);
    uint64_t sum = 0;
    for (int i = 0; i < 30; i++) {
        sum += a[i] + d[i] + sh[i];
    }
    (*reads)++;
    if (n < 0 || sum > all_after || total > all_after) {
        fprintf(stderr,
                "FAIL: read %ld: %" PRIu64 " in the seconds, %" PRIu64 " in the sketches, %" PRIu64
                " recorded\n",
                *reads, sum, total, all_after);
        return 1;
    }
    for (long i = 0; i < n; i++) {
        bool hot = out[i].key_len == 3 && memcmp(out[i].key, "hot", 3) == 0;
        if (out[i].count > all_after || (hot && out[i].count - out[i].error > hot_after)) {
            fprintf(stderr, "FAIL: read %ld: key %.*s count %" PRIu64 " error %" PRIu64 "\n",
                    *reads, (int)out[i].key_len, out[i].key, out[i].count, out[i].error);
            return 1;
        }
    }
    if (hot_before > 20000 && (n == 0 || memcmp(out[0].key, "hot", 3) != 0)) {
        fprintf(stderr, "FAIL: read %ld: the hot key does not lead\n", *reads);
        return 1;
    }
    return 0;
}

int main(void)
{
    seed = prop_seed();
    printf("prop_watch_concurrency: seed 0x%" PRIx64 " (SLUICE_SEED to replay)\n", seed);
    w = watch_create(2, seed | 1);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, writer, (void *)i);
    }
    long reads = 0;
    int failed = 0;
    while (!failed && atomic_load(&recorded[0]) + atomic_load(&recorded[1]) < 2 * RECORDS &&
           reads < 100000) {
        failed = check_read(&reads);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    failed = failed || check_read(&reads);
    uint64_t a[30], d[30], sh[30], sum = 0;
    watch_rates(w, T0 / S + 30, 30, a, d, sh);
    for (int i = 0; i < 30; i++) {
        sum += a[i] + d[i] + sh[i];
    }
    if (sum != 2 * RECORDS) {
        fprintf(stderr, "FAIL: the seconds sum to %" PRIu64 ", %d were recorded\n", sum,
                2 * RECORDS);
        failed = 1;
    }
    watch_release(w);
    printf("prop_watch_concurrency: %s after %ld reads\n", failed ? "FAILED" : "passed", reads);
    return failed;
}
