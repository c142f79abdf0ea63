/*
 * test_store_contract.c - every request store keeps request_store.h's completion contract: an
 * answer is returned by the call that asked for it, or called back after that call has
 * returned, never inside it, and exactly once.
 *
 * Each call through the table is made with a flag set that the caller clears when the call
 * returns; the callback fails when it finds the flag set, when it runs for an operation that was
 * answered at once, or twice. Over the memory store (always), and over every Redis store named in
 * SLUICE_CONTRACT_REDIS (space-separated URLs; tests/integration/test_store_contract.sh starts
 * Redis with sluice.so, Redis through the Lua scripts and a Redis Cluster, and runs this program
 * with them): strict decisions, peeks and refusals remembered by the over-limit cache, a cost
 * past the capacity, settles, leased decisions (a lease asked for, then decided from), approximate
 * decisions (a strict one, then from the key's count), all-or-nothing decisions (the script, and
 * leases), resets, a key too long and a rule the store cannot take.
 *
 * The answers at once are counted per kind, so the test proves it reached the paths that used
 * to answer inside the call (a cached refusal, a lease's units, a key's count, an error found
 * before sending).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "store/request_stores.h"

#define NS_PER_MS   INT64_C(1000000)
#define NS_PER_SEC  INT64_C(1000000000)
#define WAIT_MS     5000 /* the most one answer is waited for */
#define TRIES       40   /* calls per kind of operation */
#define KEY_TOO_BIG 2000

/* One operation in flight. */
typedef struct call {
    bool inside;  /* set while the call through the table runs */
    bool at_once; /* the call returned its answer */
    int answers;  /* callbacks */
    int status;   /* the callback's */
    sl_decision_t d;
    long refused;
} call_t;

static void on_done(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)err;
    call_t *c = arg;
    if (c->inside) {
        fail_msg("a store called back inside the call that asked");
    }
    if (c->at_once) {
        fail_msg("a store called back for an answer it had returned");
    }
    c->answers++;
    c->status = status;
    if (status == 0 && d != NULL) {
        c->d = *d;
    }
}

static void on_all(void *arg, int status, const sl_decision_t *d, size_t n, long refused,
                   const char *err)
{
    (void)n;
    (void)d;
    on_done(arg, status, NULL, err);
    ((call_t *)arg)->refused = refused;
}

typedef struct fixture {
    request_store_t *s;
    uv_loop_t loop;
    store_loop_t *l;
    store_rule_t *rule;
    sl_rule_t numbers;
    int64_t lease_ns, sync_ns;
    unsigned at_once, later; /* answers */
} fixture_t;

static void timer_noop(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop until c is answered (bounded by WAIT_MS). */
static void await(fixture_t *f, call_t *c)
{
    uv_timer_t t;
    uv_timer_init(&f->loop, &t);
    uv_timer_start(&t, timer_noop, WAIT_MS, 0);
    while (c->answers == 0 && uv_is_active((uv_handle_t *)&t)) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(c->answers, 1);
}

/* A call's end: answered now, or exactly once later. */
static void settle_call(fixture_t *f, call_t *c, int st)
{
    c->inside = false;
    if (st == STORE_PENDING) {
        assert_int_equal(c->answers, 0);
        await(f, c);
        f->later++;
        return;
    }
    c->at_once = true;
    assert_int_equal(c->answers, 0);
    f->at_once++;
}

static store_target_t target(const fixture_t *f, const char *key, size_t key_len, int64_t lease_ns,
                             int64_t sync_ns)
{
    return (store_target_t){.rule = f->rule,
                            .name = "contract",
                            .numbers = &f->numbers,
                            .key = key,
                            .key_len = key_len,
                            .lease_ns = lease_ns,
                            .sync_ns = sync_ns};
}

/* One decision (or settle) through the table; returns what it answered. */
static call_t decide(fixture_t *f, const store_target_t *tg, const store_request_t *req)
{
    call_t c = {.inside = true};
    int st = f->s->ops->decide(f->s, f->l, tg, req, sl_now_ns(), &c.d, on_done, &c);
    settle_call(f, &c, st);
    if (c.at_once) {
        c.status = st;
    }
    return c;
}

static void reset(fixture_t *f, const store_target_t *tg)
{
    call_t c = {.inside = true};
    int st = f->s->ops->reset(f->s, f->l, tg, on_done, &c);
    settle_call(f, &c, st);
}

static void decide_all(fixture_t *f, const store_pair_t *pairs, size_t n)
{
    call_t c = {.inside = true};
    sl_decision_t d[STORE_ALL_MAX];
    size_t at = n;
    int st = f->s->ops->decide_all(f->s, f->l, pairs, n, sl_now_ns(), d, &at, on_all, &c);
    if (st == STORE_ENOTSUP) {
        c.inside = false;
        assert_int_equal(c.answers, 0);
        return;
    }
    settle_call(f, &c, st);
}

static void open_store(fixture_t *f, const char *url)
{
    memset(f, 0, sizeof *f);
    store_config_t cfg = {.key_max = 1024, .timeout_ns = 2 * NS_PER_SEC};
    char err[REQUEST_STORE_ERR_MAX];
    int rc = request_store_open(url, &cfg, &f->s, err);
    if (rc != 0) {
        fail_msg("%s: %s", url, err);
    }
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(f->s->ops->attach(f->s, &f->loop, &f->l, err), 0);
    /* 5 per minute: refused after five, for long enough that the cache remembers it */
    assert_int_equal(sl_rule_init(&f->numbers, SL_GCRA, 5, 60 * NS_PER_SEC), SL_OK);
    assert_int_equal(f->s->ops->rule_new(f->s, &f->numbers, &f->rule), 0);
}

static void close_store(fixture_t *f)
{
    if (f->s->ops->stop != NULL) {
        for (int i = 0; i < 100 && f->s->ops->stop(f->l) > 0; i++) {
            uv_run(&f->loop, UV_RUN_NOWAIT);
            uv_sleep(10);
        }
    }
    if (f->rule != NULL) {
        f->s->ops->rule_free(f->rule);
    }
    f->s->ops->detach(f->s, &f->l);
    for (int i = 0; i < 100 && uv_loop_alive(&f->loop); i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
    }
    request_store_close(f->s);
    uv_loop_close(&f->loop);
}

/* A unique key per run, so that a Redis kept between runs holds nothing of it. */
static void key_of(char *out, size_t n, const char *what)
{
    snprintf(out, n, "%s:%lld", what, (long long)sl_now_ns());
}

/* Strict decisions until refused, then more: the refusals the cache remembers; a peek; a cost
 * past the capacity; settles. */
static void strict_calls(fixture_t *f)
{
    char key[64];
    key_of(key, sizeof key, "strict");
    store_target_t tg = target(f, key, strlen(key), 0, 0);
    unsigned admitted = 0, refused = 0;
    for (int i = 0; i < TRIES; i++) {
        store_request_t req = {.cost = 1};
        call_t c = decide(f, &tg, &req);
        assert_int_equal(c.status, SL_OK);
        admitted += c.d.allowed;
        refused += !c.d.allowed;
    }
    /* the capacity, whichever way each was answered */
    assert_int_equal(admitted, f->numbers.capacity);
    assert_int_equal(refused, TRIES - f->numbers.capacity);
    store_request_t peek = {.cost = 0};
    assert_int_equal(decide(f, &tg, &peek).status, SL_OK);
    store_request_t big = {.cost = 1000};
    call_t c = decide(f, &tg, &big);
    assert_int_equal(c.status, SL_OK);
    assert_false(c.d.allowed);
    store_request_t settle = {.settle = true, .reserved = 1, .actual = 0, .charged_ns = -1};
    assert_int_equal(decide(f, &tg, &settle).status, SL_OK);
    reset(f, &tg);
}

/* Leased decisions: a lease asked for, then decisions from it; approximate ones: strict first,
 * then from the key's count. */
static void leased_calls(fixture_t *f)
{
    if (!f->s->ops->leases) {
        return;
    }
    char key[64];
    key_of(key, sizeof key, "leased");
    store_target_t lt = target(f, key, strlen(key), NS_PER_SEC, 0);
    key_of(key + 32, 32, "approx");
    store_target_t at = target(f, key + 32, strlen(key + 32), 0, 100 * NS_PER_MS);
    for (int i = 0; i < TRIES; i++) {
        store_request_t req = {.cost = 1};
        decide(f, &lt, &req);
        decide(f, &at, &req);
    }
    store_pair_t pairs[2] = {{.tg = lt, .cost = 1}, {.tg = lt, .cost = 1}};
    decide_all(f, pairs, 2);
    reset(f, &lt);
    reset(f, &at);
}

/* All or nothing over two keys (one slot: the hash tag is the key). */
static void all_calls(fixture_t *f)
{
    char key[64];
    key_of(key, sizeof key, "all");
    store_pair_t pairs[2] = {{.tg = target(f, key, strlen(key), 0, 0), .cost = 1},
                             {.tg = target(f, key, strlen(key), 0, 0), .cost = 1}};
    for (int i = 0; i < 4; i++) {
        decide_all(f, pairs, 2);
    }
}

/* Requests no store can send: a key too long, a rule finer than the store takes. */
static void refused_calls(fixture_t *f)
{
    static char big[KEY_TOO_BIG];
    memset(big, 'k', sizeof big);
    store_target_t tg = target(f, big, sizeof big, 0, 0);
    store_request_t req = {.cost = 1};
    decide(f, &tg, &req);
    sl_rule_t fine;
    assert_int_equal(sl_rule_init(&fine, SL_GCRA, 5, 60 * NS_PER_SEC + 1), SL_OK);
    store_rule_t *fine_rule = NULL;
    assert_int_equal(f->s->ops->rule_new(f->s, &fine, &fine_rule), 0);
    tg = target(f, "fine", 4, 0, 0);
    tg.numbers = &fine;
    tg.rule = fine_rule;
    decide(f, &tg, &req);
    if (fine_rule != NULL) {
        f->s->ops->rule_free(fine_rule);
    }
}

static void run_all(const char *url, unsigned *at_once, unsigned *later)
{
    fixture_t f;
    open_store(&f, url);
    strict_calls(&f);
    leased_calls(&f);
    all_calls(&f);
    refused_calls(&f);
    *at_once = f.at_once;
    *later = f.later;
    close_store(&f);
}

static void test_memory_store(void **unused)
{
    (void)unused;
    unsigned at_once, later;
    run_all("memory", &at_once, &later);
    assert_int_equal(later, 0); /* completes_at_once */
    assert_true(at_once > TRIES);
}

static void test_redis_stores(void **unused)
{
    (void)unused;
    const char *urls = getenv("SLUICE_CONTRACT_REDIS");
    if (urls == NULL || urls[0] == '\0') {
        skip(); /* tests/integration/test_store_contract.sh runs it with Redis */
    }
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", urls);
    unsigned stores = 0;
    for (char *save = NULL, *url = strtok_r(buf, " ", &save); url != NULL;
         url = strtok_r(NULL, " ", &save)) {
        unsigned at_once, later;
        run_all(url, &at_once, &later);
        printf("%s: %u answered at once, %u later\n", url, at_once, later);
        /* cached refusals, leases' units and keys' counts, errors found before sending: at
         * once; the first decisions and every reset: later */
        assert_true(at_once >= TRIES);
        assert_true(later >= 5);
        stores++;
    }
    assert_true(stores > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_store),
        cmocka_unit_test(test_redis_stores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
