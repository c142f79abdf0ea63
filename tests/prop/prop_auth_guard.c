/*
 * prop_auth_guard.c - the attempts table (server/auth_guard.h) against a model with no bound, on
 * seeded random sequences of attempts (a right secret in one in five) from random addresses at
 * random (non-decreasing) times.
 *
 * Each case draws 1 to 40 addresses (IPv4, IPv6 sharing /64s or not) or, in one case in four,
 * up to 3 tables' worth, and 200 to 4,000 events. Checked:
 *
 *   model     while no address is judged by the shared entry (the table had room), every
 *             verdict is the model's: let in or not, hot, failures in the window, the hold, the
 *             retry time, the drop; a success clears nothing;
 *   oracle    a second table, fed the same attempts but, whenever the first says the address is
 *             hot, the opposite secret (right for wrong, wrong for right), gives the very same
 *             verdicts: while hot, nothing depends on the secret;
 *   bound     the table never holds more than GUARD_ADDRESSES live addresses; no hold is over
 *             GUARD_QUEUE_MAX_NS; a dropped attempt is neither held nor let in;
 *   spacing   the held replies of one address leave in the order they came, each at least
 *             GUARD_DELAY_NS after the one before: however many connections send them;
 *   free      no address gets more than GUARD_FREE_FAILURES refusals at once, nor more than
 *             GUARD_FREE_FAILURES + 1 wrong secrets looked at, per window of its own failures;
 *   threads   4 threads attempting for one address at once: every failure counted once, and
 *             exactly GUARD_FREE_FAILURES + 1 wrong secrets looked at in all (the decision and
 *             the count are one step).
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
    int64_t last_held_due_ns; /* spacing: when its latest held reply leaves */
    uint32_t free_n;          /* free: refusals at once in the current window */
    uint32_t looked_at;       /* free: wrong secrets looked at in the current window */
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

static guard_verdict_t model_attempt(model_t *m, int64_t now, bool right)
{
    bool fresh = !m->seen || now - m->last_ns > GUARD_WINDOW_NS;
    bool hot = !fresh && m->failures > GUARD_FREE_FAILURES;
    if (right && !hot) {
        return (guard_verdict_t){.let_in = true};
    }
    if (fresh) {
        m->failures = 0;
        m->due_ns = 0;
    }
    m->seen = true;
    m->failures++;
    m->last_ns = now;
    guard_verdict_t v = {.failures = m->failures, .hot = hot};
    if (m->failures <= GUARD_FREE_FAILURES) {
        return v;
    }
    int64_t due = (m->due_ns > now ? m->due_ns : now) + model_delay(m->failures - 5);
    if (due - now > GUARD_QUEUE_MAX_NS) {
        v.drop = true;
        return v;
    }
    m->due_ns = due;
    v.hold_ns = due - now;
    v.retry_ns = now + GUARD_WINDOW_NS - due;
    return v;
}

static bool same_verdict(const guard_verdict_t *x, const guard_verdict_t *y, bool shared_too)
{
    return x->let_in == y->let_in && x->hot == y->hot && x->drop == y->drop &&
           x->hold_ns == y->hold_ns && x->retry_ns == y->retry_ns && x->failures == y->failures &&
           (!shared_too || x->shared == y->shared);
}

static void show(char *out, size_t cap, const guard_verdict_t *v)
{
    snprintf(out, cap, "{in %d hot %d drop %d hold %lld retry %lld failures %u shared %d}",
             v->let_in, v->hot, v->drop, (long long)v->hold_ns, (long long)v->retry_ns, v->failures,
             v->shared);
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

/* The verdict's own bounds, whatever the history. */
static void check_bounds(tcase_t *c, long e, const guard_verdict_t *v)
{
    if (v->hold_ns < 0 || v->hold_ns > GUARD_QUEUE_MAX_NS ||
        (v->drop && (v->hold_ns != 0 || v->let_in)) || (v->let_in && (v->hot || v->hold_ns)) ||
        (v->hot && v->failures <= GUARD_FREE_FAILURES)) {
        char b[160];
        show(b, sizeof b, v);
        fail(c, "event %ld: verdict %s", e, b);
    }
}

/* spacing and free, for address k's refusal got (not in the shared entry) at now. */
static void check_address(tcase_t *c, long e, int k, model_t *m, const guard_verdict_t *got,
                          bool right, int64_t now)
{
    if (got->failures == 1) { /* a new window */
        m->free_n = 0;
        m->looked_at = 0;
    }
    if (got->hold_ns == 0 && !got->drop && ++m->free_n > GUARD_FREE_FAILURES) {
        fail(c, "event %ld: address %d refused at once %u times in a window", e, k, m->free_n);
    }
    if (!right && !got->hot && ++m->looked_at > GUARD_FREE_FAILURES + 1) {
        fail(c, "event %ld: address %d had %u wrong secrets looked at in a window", e, k,
             m->looked_at);
    }
    if (got->hold_ns > 0) {
        int64_t due = now + got->hold_ns;
        if (m->last_held_due_ns != 0 && due < m->last_held_due_ns + GUARD_DELAY_NS) {
            fail(c, "event %ld: address %d's held replies %lld ns apart", e, k,
                 (long long)(due - m->last_held_due_ns));
        }
        m->last_held_due_ns = due;
    }
}

static void run_case(tcase_t *c, uint64_t seed)
{
    prng_t r = prop_case_prng(seed, 0, c->idx);
    bool many = prng_chance(&r, 25), v6 = prng_chance(&r, 40);
    long naddr = many ? prng_range(&r, GUARD_ADDRESSES / 2, ADDRS_MAX) : prng_range(&r, 1, 40);
    long nevents = many ? 4 * naddr : prng_range(&r, 200, 4000);
    uint64_t table_seed = prng_next(&r);
    guard_t *g = guard_create(table_seed), *twin = guard_create(table_seed);
    model_t *m = calloc(ADDRS_MAX, sizeof *m);     /* the model's records */
    model_t *obs = calloc(ADDRS_MAX, sizeof *obs); /* what was seen of each address */
    if (g == NULL || twin == NULL || m == NULL || obs == NULL) {
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
        bool right = prng_chance(&r, 20);
        guard_verdict_t got = guard_attempt(g, &a, now, right);
        guard_verdict_t other = guard_attempt(twin, &a, now, got.hot ? !right : right);
        char b1[160], b2[160];
        if (!same_verdict(&got, &other, true)) {
            show(b1, sizeof b1, &got);
            show(b2, sizeof b2, &other);
            fail(c, "event %ld: the other secret changed the verdict: %s, then %s", e, b1, b2);
        }
        shared_seen = shared_seen || got.shared;
        check_bounds(c, e, &got);
        guard_verdict_t want = model_attempt(&m[k], now, right);
        if (!shared_seen && !same_verdict(&got, &want, false)) {
            show(b1, sizeof b1, &got);
            show(b2, sizeof b2, &want);
            fail(c, "event %ld, address %d, %s secret: got %s, model %s", e, k,
                 right ? "right" : "wrong", b1, b2);
        }
        if (!got.shared && !got.let_in) {
            check_address(c, e, k, &obs[k], &got, right, now);
        }
    }
    if (guard_live(g, now) > GUARD_ADDRESSES) {
        fail(c, "%zu live addresses", guard_live(g, now));
    }
    guard_free(g);
    guard_free(twin);
    free(m);
    free(obs);
}

/* 4 threads x 5,000 attempts for one address at one time, every other one with the right
 * secret: the last failure counts every one not let in; exactly six wrong secrets were looked
 * at (the first six failures), and none let in once the address was hot. */
typedef struct hammer {
    guard_t *g;
    uint32_t max_failures;
    uint32_t let_in, looked_at;
} hammer_t;

static void *hammer(void *arg)
{
    hammer_t *h = arg;
    netaddr_t a = {.family = 4, .addr = {192, 0, 2, 1}};
    for (int i = 0; i < 5000; i++) {
        bool right = i % 2 == 0;
        guard_verdict_t v = guard_attempt(h->g, &a, INT64_C(1) << 40, right);
        h->let_in += v.let_in;
        h->looked_at += !right && !v.hot;
        if (v.failures > h->max_failures) {
            h->max_failures = v.failures;
        }
    }
    return NULL;
}

static int threads_case(void)
{
    guard_t *g = guard_create(7);
    hammer_t h[4] = {{.g = g}, {.g = g}, {.g = g}, {.g = g}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&t[i], NULL, hammer, &h[i]);
    }
    uint32_t most = 0, let_in = 0, looked_at = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        most = h[i].max_failures > most ? h[i].max_failures : most;
        let_in += h[i].let_in;
        looked_at += h[i].looked_at;
    }
    netaddr_t a = {.family = 4, .addr = {192, 0, 2, 1}};
    guard_verdict_t after = guard_attempt(g, &a, INT64_C(1) << 40, true);
    guard_free(g);
    int failed = 0;
    if (most != 20000 - let_in) {
        printf("FAIL threads: the last failure counted %u, want %u\n", most, 20000 - let_in);
        failed = 1;
    }
    if (looked_at != GUARD_FREE_FAILURES + 1) {
        printf("FAIL threads: %u wrong secrets looked at, want %d\n", looked_at,
               GUARD_FREE_FAILURES + 1);
        failed = 1;
    }
    if (after.let_in || !after.hot) {
        printf("FAIL threads: a right secret let in after them\n");
        failed = 1;
    }
    return failed;
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
