/*
 * prop_auth_guard.c - the failed-secrets table (server/auth_guard.h) against a model with no
 * bound, on seeded random sequences of failures and successes from random addresses at random
 * (non-decreasing) times.
 *
 * Each case draws 1 to 40 addresses (IPv4, IPv6 sharing /64s or not) or, in one case in four,
 * up to 3 tables' worth, and 200 to 4,000 events. Checked:
 *
 *   model     while no address is counted in the shared entry (the table had room), every
 *             verdict is the model's: failures in the window, the hold, the close;
 *   bound     the table never holds more than GUARD_ADDRESSES live addresses; a hold is at
 *             most GUARD_DELAY_MAX_NS per failure counted, and closes its connection exactly
 *             when it is over GUARD_QUEUE_MAX_NS;
 *   spacing   the held replies of one address leave in the order they came, each at least
 *             GUARD_DELAY_NS after the one before: however many connections send them;
 *   free      no address gets more than GUARD_FREE_FAILURES answers at once per window of its
 *             own failures (an address in the shared entry gets fewer);
 *   threads   4 threads failing for one address at once: every failure counted once.
 *
 * SLUICE_SEED replays a run; SLUICE_CASES sets the number of cases (default 200).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prop/gen.h"
#include "server/auth_guard.h"

#define MS        INT64_C(1000000)
#define ADDRS_MAX (3 * GUARD_ADDRESSES)

/* The model: one record per address key, no bound, the rules of auth_guard.h written plainly. */
typedef struct model {
    uint32_t failures;
    int64_t last_ns, due_ns;
    bool seen;
    int64_t last_held_due_ns; /* spacing: when its latest held (not closed) reply leaves */
} model_t;

typedef struct tcase {
    long idx;
    int failed;
} tcase_t;

static void fail(tcase_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(tcase_t *c, const char *fmt, ...)
{
    if (c->failed++ < 5) {
        va_list ap;
        va_start(ap, fmt);
        printf("FAIL case %ld: ", c->idx);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
    }
}

static int64_t model_delay(uint32_t n)
{
    int64_t d = GUARD_DELAY_NS;
    for (uint32_t i = 1; i < n && d < GUARD_DELAY_MAX_NS; i++) {
        d *= 2;
    }
    return d < GUARD_DELAY_MAX_NS ? d : GUARD_DELAY_MAX_NS;
}

static guard_verdict_t model_fail(model_t *m, int64_t now)
{
    if (!m->seen || now - m->last_ns > GUARD_WINDOW_NS) {
        m->failures = 0;
        m->due_ns = 0;
    }
    m->seen = true;
    m->failures++;
    m->last_ns = now;
    guard_verdict_t v = {.failures = m->failures};
    if (m->failures <= GUARD_FREE_FAILURES) {
        return v;
    }
    m->due_ns = (m->due_ns > now ? m->due_ns : now) + model_delay(m->failures - 5);
    v.hold_ns = m->due_ns - now;
    v.close = v.hold_ns > GUARD_QUEUE_MAX_NS;
    return v;
}

/* Address i of the case: IPv4, or IPv6 where i and i ^ 1 share a /64 (one model record). */
static netaddr_t case_addr(long i, bool v6, int *key)
{
    netaddr_t a = {0};
    if (!v6) {
        a.family = 4;
        a.addr[0] = 10;
        a.addr[1] = (uint8_t)(i >> 16);
        a.addr[2] = (uint8_t)(i >> 8);
        a.addr[3] = (uint8_t)i;
        *key = (int)i;
        return a;
    }
    a.family = 6;
    a.addr[0] = 0x20;
    a.addr[1] = 0x01;
    a.addr[6] = (uint8_t)((i >> 1) >> 8);
    a.addr[7] = (uint8_t)(i >> 1);
    a.addr[15] = (uint8_t)(i & 1) + 1;
    *key = (int)(i >> 1);
    return a;
}

static void run_case(tcase_t *c, uint64_t seed)
{
    prng_t r = prop_case_prng(seed, 0, c->idx);
    bool many = prng_chance(&r, 25), v6 = prng_chance(&r, 40);
    long naddr = many ? prng_range(&r, GUARD_ADDRESSES / 2, ADDRS_MAX) : prng_range(&r, 1, 40);
    long nevents = many ? 4 * naddr : prng_range(&r, 200, 4000);
    guard_t *g = guard_create(prng_next(&r));
    model_t *m = calloc(ADDRS_MAX, sizeof *m);
    int64_t *free_since = calloc(ADDRS_MAX, sizeof *free_since); /* free answers in window */
    uint32_t *free_n = calloc(ADDRS_MAX, sizeof *free_n);
    if (g == NULL || m == NULL || free_since == NULL || free_n == NULL) {
        fail(c, "out of memory");
        return;
    }
    bool shared_seen = false;
    int64_t now = INT64_C(1) << 40;
    for (long e = 0; e < nevents && c->failed == 0; e++) {
        now += prng_chance(&r, 70) ? prng_range(&r, 0, 20 * MS)
                                   : prng_range(&r, 0, 2 * GUARD_WINDOW_NS / 3);
        int k;
        netaddr_t a = case_addr(many ? e % naddr : prng_range(&r, 0, naddr - 1), v6, &k);
        if (prng_chance(&r, 3)) {
            guard_success(g, &a);
            m[k] = (model_t){0};
            free_n[k] = 0;
            continue;
        }
        guard_verdict_t got = guard_fail(g, &a, now);
        shared_seen = shared_seen || got.shared;
        if (got.hold_ns < 0 || got.hold_ns > GUARD_DELAY_MAX_NS * (int64_t)got.failures) {
            fail(c, "event %ld: hold %lld ns after %u failures", e, (long long)got.hold_ns,
                 got.failures);
        }
        if (got.close != (got.hold_ns > GUARD_QUEUE_MAX_NS)) {
            fail(c, "event %ld: hold %lld ns, close %d", e, (long long)got.hold_ns, got.close);
        }
        if (got.hold_ns == 0 && !got.shared) { /* free: at most five in a window of failures */
            if (free_n[k] == 0 || now - free_since[k] > GUARD_WINDOW_NS) {
                free_since[k] = now;
                free_n[k] = 0;
            }
            if (++free_n[k] > GUARD_FREE_FAILURES) {
                fail(c, "event %ld: address %d answered at once %u times in a window", e, k,
                     free_n[k]);
            }
        }
        guard_verdict_t want = model_fail(&m[k], now);
        if (!shared_seen && (got.failures != want.failures || got.hold_ns != want.hold_ns ||
                             got.close != want.close)) {
            fail(c, "event %ld, address %d: got %u %lld %d, model %u %lld %d", e, k, got.failures,
                 (long long)got.hold_ns, got.close, want.failures, (long long)want.hold_ns,
                 want.close);
        }
        if (!got.shared && got.hold_ns > 0) {
            int64_t due = now + got.hold_ns;
            if (m[k].last_held_due_ns != 0 && due < m[k].last_held_due_ns + GUARD_DELAY_NS) {
                fail(c, "event %ld: address %d's held replies %lld ns apart", e, k,
                     (long long)(due - m[k].last_held_due_ns));
            }
            m[k].last_held_due_ns = due;
        }
    }
    if (guard_live(g, now) > GUARD_ADDRESSES) {
        fail(c, "%zu live addresses", guard_live(g, now));
    }
    guard_free(g);
    free(m);
    free(free_since);
    free(free_n);
}

/* 4 threads x 5,000 failures for one address at one time: the last of them counts 20,000. */
typedef struct hammer {
    guard_t *g;
    uint32_t max_failures;
} hammer_t;

static void *hammer(void *arg)
{
    hammer_t *h = arg;
    netaddr_t a = {.family = 4, .addr = {192, 0, 2, 1}};
    for (int i = 0; i < 5000; i++) {
        guard_verdict_t v = guard_fail(h->g, &a, INT64_C(1) << 40);
        if (v.failures > h->max_failures) {
            h->max_failures = v.failures;
        }
    }
    return NULL;
}

static int threads_case(void)
{
    guard_t *g = guard_create(7);
    hammer_t h[4] = {{g, 0}, {g, 0}, {g, 0}, {g, 0}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, hammer, &h[i]);
    }
    uint32_t most = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        most = h[i].max_failures > most ? h[i].max_failures : most;
    }
    guard_free(g);
    if (most != 20000) {
        printf("FAIL threads: the last failure counted %u, want 20000\n", most);
        return 1;
    }
    return 0;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_CASES", 200);
    int failed = 0;
    for (long i = 0; i < cases; i++) {
        tcase_t c = {.idx = i};
        run_case(&c, seed);
        failed += c.failed != 0;
    }
    failed += threads_case();
    printf("prop_auth_guard: seed 0x%llx, %ld cases, %d failed\n", (unsigned long long)seed, cases,
           failed);
    return failed != 0;
}
