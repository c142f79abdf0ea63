/*
 * prop_topk.c - the heavy-hitter sketch (core/topk.h) on seeded Zipf streams.
 *
 * Each case draws a key space (100 to 20,000 keys), a Zipf exponent (0.8 to 1.6), a stream of
 * 20,000 to 200,000 keys, and splits the stream over 1 to 4 writers (loops) and 1 to 6 sketches
 * each (intervals), as sluiced does; the sketches are read and merged. Checked:
 *
 *   recall      the merged top 10 holds at least 9 of the true top 10 (ties at the 10th true
 *               count count as in the true top 10);
 *   over        no reported count is under the key's true count;
 *   under       no count minus its error is over the true count;
 *   bound       every error is at most N / TOPK_CAPACITY (N: keys given to all the sketches);
 *   heavy       every key whose true count is over N / TOPK_CAPACITY is reported.
 *
 * The largest error seen relative to N is printed. SLUICE_SEED replays a run; SLUICE_CASES
 * sets the number of cases (default 60).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/topk.h"
#include "prop/gen.h"

#define KEYS_MAX   20000
#define LOOPS_MAX  4
#define SKETCH_MAX 6
#define TOP        10
#define STREAM_MAX 200000

typedef struct tcase {
    long idx;
    uint64_t seed;
    int failed;
} tcase_t;

static void fail(tcase_t *c, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(tcase_t *c, const char *what, const char *fmt, ...)
{
    va_list ap;
    if (c->failed++ > 0) {
        return;
    }
    fprintf(stderr, "FAIL %s: case %ld (SLUICE_SEED=0x%" PRIx64 "): ", what, c->idx, c->seed);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* The key named by rank r (1-based): text of varying length, some longer than the inline part. */
static size_t key_of(long r, char *buf)
{
    if (r % 7 == 0) {
        return (size_t)snprintf(
            buf, 128, "a-long-key-that-does-not-fit-in-the-sixty-four-bytes-kept-for-display-%ld",
            r);
    }
    return (size_t)snprintf(buf, 128, "user:%ld", r);
}

/* A rank drawn from Zipf(s) over n keys, by inverse CDF. */
static long zipf_draw(prng_t *r, const double *cdf, long n)
{
    double u = (double)(prng_next(r) >> 11) / 9007199254740992.0;
    long lo = 0, hi = n - 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (cdf[mid] < u) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo + 1;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

static topk_t sketches[LOOPS_MAX * SKETCH_MAX];
static topk_item_t items[LOOPS_MAX * SKETCH_MAX * TOPK_CAPACITY];
static uint64_t truth[KEYS_MAX + 1];
static uint64_t sorted[KEYS_MAX];
static uint64_t hash_of[KEYS_MAX + 1];
static double cdf[KEYS_MAX];

typedef struct hrank {
    uint64_t hash;
    long rank;
} hrank_t;
static hrank_t by_hash[KEYS_MAX];

static int cmp_hrank(const void *a, const void *b)
{
    uint64_t x = ((const hrank_t *)a)->hash, y = ((const hrank_t *)b)->hash;
    return x < y ? -1 : x > y;
}

/* The true count of the key an item names (by hash). */
static uint64_t true_count(const topk_item_t *it, long nkeys)
{
    hrank_t want = {.hash = it->hash};
    const hrank_t *f = bsearch(&want, by_hash, (size_t)nkeys, sizeof want, cmp_hrank);
    return f != NULL ? truth[f->rank] : 0;
}

static double run_case(tcase_t *c, prng_t *r, uint64_t seed)
{
    long nkeys = prng_range(r, 100, KEYS_MAX);
    double s = 0.8 + (double)prng_range(r, 0, 80) / 100.0;
    long len = prng_range(r, 20000, STREAM_MAX);
    int loops = (int)prng_range(r, 1, LOOPS_MAX);
    int per = (int)prng_range(r, 1, SKETCH_MAX);
    double sum = 0;
    for (long k = 0; k < nkeys; k++) {
        sum += 1.0 / pow((double)(k + 1), s);
        cdf[k] = sum;
    }
    for (long k = 0; k < nkeys; k++) {
        cdf[k] /= sum;
    }
    int nsk = loops * per;
    uint64_t sketch_seed = prng_next(r);
    for (int i = 0; i < nsk; i++) {
        topk_init(&sketches[i], sketch_seed, i);
    }
    memset(truth, 0, sizeof truth);
    char key[128];
    for (long k = 1; k <= nkeys; k++) {
        hash_of[k] = topk_hash(&sketches[0], key, key_of(k, key));
        by_hash[k - 1] = (hrank_t){hash_of[k], k};
    }
    qsort(by_hash, (size_t)nkeys, sizeof by_hash[0], cmp_hrank);
    for (long i = 0; i < len; i++) {
        long rank = zipf_draw(r, cdf, nkeys);
        truth[rank]++;
        /* intervals in order, each loop's share at random */
        int sk = (int)(i * per / len) * loops + (int)prng_range(r, 0, loops - 1);
        size_t kl = key_of(rank, key);
        topk_add(&sketches[sk], topk_hash(&sketches[sk], key, kl), key, kl);
    }
    size_t n = 0;
    uint64_t floor_sum = 0, total = 0;
    for (int i = 0; i < nsk; i++) {
        int64_t epoch;
        uint64_t added;
        size_t got = topk_read(&sketches[i], items + n, &epoch, &added);
        if (epoch != i) {
            fail(c, "read", "sketch %d reads epoch %" PRId64, i, epoch);
        }
        for (size_t j = n; j < n + got; j++) { /* a key reads back as given, zeros after it */
            hrank_t want = {.hash = items[j].hash};
            const hrank_t *f = bsearch(&want, by_hash, (size_t)nkeys, sizeof want, cmp_hrank);
            char given[128], shown[TOPK_KEY_INLINE] = {0};
            size_t kl = f != NULL ? key_of(f->rank, given) : 0;
            memcpy(shown, given, kl < TOPK_KEY_INLINE ? kl : TOPK_KEY_INLINE);
            if (f == NULL || items[j].key_len != kl || memcmp(items[j].key, shown, sizeof shown)) {
                fail(c, "read", "sketch %d reads a key other than the one counted", i);
            }
        }
        floor_sum += got > 0 ? items[n].floor : 0;
        total += added;
        n += got;
    }
    if (total != (uint64_t)len) {
        fail(c, "read", "the sketches count %" PRIu64 " keys, %ld were given", total, len);
    }
    n = topk_merge(items, n, floor_sum);
    for (long k = 1; k <= nkeys; k++) {
        sorted[k - 1] = truth[k];
    }
    qsort(sorted, (size_t)nkeys, sizeof sorted[0], cmp_desc);
    uint64_t tenth = sorted[TOP - 1 < nkeys ? TOP - 1 : nkeys - 1];
    int hits = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = true_count(&items[i], nkeys);
        if (i < TOP && t >= tenth) {
            hits++;
        }
        if (items[i].count < t) {
            fail(c, "over", "key '%.*s' reported %" PRIu64 ", true %" PRIu64,
                 (int)(items[i].key_len < TOPK_KEY_INLINE ? items[i].key_len : TOPK_KEY_INLINE),
                 items[i].key, items[i].count, t);
        }
        if (items[i].count - items[i].error > t) {
            fail(c, "under", "key reported %" PRIu64 " - %" PRIu64 ", true %" PRIu64,
                 items[i].count, items[i].error, t);
        }
        if (items[i].error * TOPK_CAPACITY > total) {
            fail(c, "bound", "error %" PRIu64 " over N/m = %" PRIu64 "/%d", items[i].error, total,
                 TOPK_CAPACITY);
        }
        double rel = (double)items[i].error / (double)total;
        worst = rel > worst ? rel : worst;
    }
    if (hits < TOP - 1 && n >= TOP) {
        fail(c, "recall",
             "%d of the true top %d in the reported top %d (keys %ld, s %.2f, "
             "N %ld, %d loops x %d sketches)",
             hits, TOP, TOP, nkeys, s, len, loops, per);
    }
    for (long k = 1; k <= nkeys; k++) {
        if (truth[k] * TOPK_CAPACITY <= total) {
            continue;
        }
        bool seen = false;
        for (size_t i = 0; i < n && !seen; i++) {
            seen = items[i].hash == hash_of[k];
        }
        if (!seen) {
            fail(c, "heavy", "key rank %ld (true %" PRIu64 " > N/m) not reported", k, truth[k]);
        }
    }
    (void)seed;
    return worst;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_CASES", 60);
    printf("prop_topk: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases\n", seed, cases);
    int failed = 0;
    double worst = 0;
    for (long i = 0; i < cases; i++) {
        tcase_t c = {.idx = i, .seed = seed};
        prng_t r = prop_case_prng(seed, 0, i);
        double w = run_case(&c, &r, seed);
        worst = w > worst ? w : worst;
        failed += c.failed > 0;
    }
    printf("largest error seen: %.5f of N (bound 1/%d = %.5f)\n", worst, TOPK_CAPACITY,
           1.0 / TOPK_CAPACITY);
    printf("prop_topk: %s (%d of %ld cases failed)\n", failed ? "FAILED" : "passed", failed, cases);
    return failed ? 1 : 0;
}
