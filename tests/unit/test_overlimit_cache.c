/*
 * test_overlimit_cache.c - the over-limit cache shared by sluiced's Redis store and
 * libsluice-client (src/remote/overlimit_cache.c), with explicit times: tables of (now, what the
 * store answered or what is asked, what the cache must answer), as redis-cell's it_rate_limits.
 *
 * The defects these rows pin down: a refusal of cost 8 (5 of 10 left) must not answer a cost of
 * 1, nor a cost of 10 (which fits later than 8: its retry time is the store's alone), nor, after
 * an admission, the cost 8 again with the retry time from before it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "remote/overlimit_cache.h"

#define MS INT64_C(1000000) /* ns */

typedef enum op {
    REFUSED,  /* the store refused `cost`: retry, reset, remaining as given */
    ADMITTED, /* the store admitted `cost`, remaining and reset as given */
    ASK,      /* a request of `cost`: hit (and the answer) or miss */
    FORGET,   /* the key's room came back */
} op_t;

typedef struct row {
    op_t op;
    int64_t now_ms;   /* when asked */
    uint64_t key;     /* the key, 1, 2, ... (its hash is spread over 64 bits by hash_of) */
    int64_t cost;     /* units */
    int64_t remain;   /* REFUSED/ADMITTED: the store's remaining; ASK: the answer's */
    int64_t retry_ms; /* REFUSED: the store's retry_after; ASK hit: the answer's */
    int64_t reset_ms; /* likewise for reset_after */
    bool hit;         /* ASK: answered from the cache */
    uint64_t epoch;   /* the caller's epoch */
    int64_t delay_ms; /* REFUSED: the rule's max_delay */
} row_t;

#define LIMIT 10

/* Keys 1, 2, ... as hashes of all 64 bits, as real ones are. */
static uint64_t hash_of(uint64_t key)
{
    return key * UINT64_C(0x9e3779b97f4a7c15);
}

static void run(olc_t *c, const row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        int64_t now_ns = r->now_ms * MS;
        olc_answer_t a = {.allowed = r->op == ADMITTED,
                          .limit = LIMIT,
                          .remaining = r->remain,
                          .retry_after_ns = r->op == REFUSED ? r->retry_ms * MS : 0,
                          .reset_after_ns = r->reset_ms * MS,
                          .max_delay_ns = r->delay_ms * MS};
        if (r->op == REFUSED || r->op == ADMITTED) {
            olc_record(c, hash_of(r->key), r->epoch, r->cost, &a, now_ns);
            continue;
        }
        if (r->op == FORGET) {
            olc_forget(c, hash_of(r->key));
            continue;
        }
        olc_answer_t got = {.limit = -7};
        bool hit = olc_lookup(c, hash_of(r->key), r->epoch, r->cost, now_ns, &got);
        print_message("row %zu: ask cost %lld at %lld ms: %s\n", i, (long long)r->cost,
                      (long long)r->now_ms, hit ? "hit" : "miss");
        assert_int_equal(hit, r->hit);
        if (!hit) {
            assert_int_equal(got.limit, -7); /* untouched */
            continue;
        }
        assert_false(got.allowed);
        assert_int_equal(got.limit, LIMIT);
        assert_int_equal(got.remaining, r->remain);
        assert_int_equal(got.retry_after_ns, r->retry_ms * MS);
        assert_int_equal(got.reset_after_ns, r->reset_ms * MS);
    }
}

static void run_direct(const row_t *rows, size_t n)
{
    static olc_entry_t slots[4096];
    olc_t c;
    olc_init(&c, slots, 4096, 1);
    run(&c, rows, n);
}

#define RUN_DIRECT(rows) run_direct(rows, sizeof rows / sizeof rows[0])

/* token_bucket, limit 10 per 10 s: 5 taken, 8 refused (retry 3 s), 1 still fits */
static void test_other_costs_go_to_the_store(void **unused)
{
    static const row_t rows[] = {
        {ADMITTED, 0, 1, 5, .remain = 5, .reset_ms = 5000},
        {REFUSED, 10, 1, 8, .remain = 5, .retry_ms = 3000, .reset_ms = 4990},
        {ASK, 20, 1, 1, .hit = false},
        {ASK, 20, 1, 7, .hit = false},
        {ASK, 20, 1, 0, .hit = false},  /* a peek */
        {ASK, 20, 1, 10, .hit = false}, /* refused too, but until later than 8 */
        {ASK, 20, 1, 8, .remain = 5, .retry_ms = 2990, .reset_ms = 4980, .hit = true},
        /* a peek's report is the latest: the next answer says what it did */
        {ADMITTED, 30, 1, 0, .remain = 5, .reset_ms = 4970},
        {ASK, 40, 1, 8, .remain = 5, .retry_ms = 2970, .reset_ms = 4960, .hit = true},
        /* 1 ms before the hold ends */
        {ASK, 3009, 1, 8, .remain = 5, .retry_ms = 1, .reset_ms = 1991, .hit = true},
        {ASK, 3010, 1, 8, .hit = false}, /* at the retry time: gone */
        {ASK, 20, 1, 8, .hit = false},   /* and dropped */
        /* an admission of 1 moves the key's usage: 8 fits later than the store said before */
        {REFUSED, 4000, 2, 8, .remain = 5, .retry_ms = 3000, .reset_ms = 5000},
        {ADMITTED, 4010, 2, 1, .remain = 4, .reset_ms = 5990},
        {ASK, 4020, 2, 8, .hit = false},
    };
    RUN_DIRECT(rows);
}

static void test_latest_refused_cost_is_kept(void **unused)
{
    static const row_t rows[] = {
        {REFUSED, 0, 1, 8, .remain = 5, .retry_ms = 3000, .reset_ms = 5000},
        /* another refused cost (asked meanwhile) replaces it, shorter as it may be */
        {REFUSED, 0, 1, 6, .remain = 5, .retry_ms = 1000, .reset_ms = 5000},
        {ASK, 500, 1, 6, .remain = 5, .retry_ms = 500, .reset_ms = 4500, .hit = true},
        {ASK, 500, 1, 5, .hit = false},
        {ASK, 500, 1, 8, .hit = false},
        /* and a larger one replaces that */
        {REFUSED, 600, 1, 9, .remain = 3, .retry_ms = 6000, .reset_ms = 7000},
        {ASK, 700, 1, 6, .hit = false},
        {ASK, 700, 1, 9, .remain = 3, .retry_ms = 5900, .reset_ms = 6900, .hit = true},
        /* the same cost again: the newer refusal */
        {REFUSED, 2000, 1, 4, .remain = 0, .retry_ms = 100, .reset_ms = 100},
        {REFUSED, 2050, 1, 4, .remain = 0, .retry_ms = 900, .reset_ms = 900},
        {ASK, 2500, 1, 4, .remain = 0, .retry_ms = 450, .reset_ms = 450, .hit = true},
    };
    RUN_DIRECT(rows);
}

static void test_what_is_not_remembered(void **unused)
{
    static const row_t rows[] = {
        {ADMITTED, 0, 1, 1, .remain = 9, .reset_ms = 1000},
        {ASK, 0, 1, 1, .hit = false},
        {REFUSED, 0, 2, 11, .remain = 10, .retry_ms = -1}, /* above the capacity: never */
        {ASK, 0, 2, 11, .hit = false},
        {REFUSED, 0, 3, 1, .remain = 0, .retry_ms = 0},
        {ASK, 0, 3, 1, .hit = false},
        {REFUSED, 0, 4, 0, .remain = 0, .retry_ms = 500}, /* a refused peek */
        {ASK, 0, 4, 0, .hit = false},
        {ASK, 0, 4, 1, .hit = false},
        /* max_delay 400 ms: admitted with a delay from 100 ms on, so the hold ends there ... */
        {REFUSED, 0, 5, 2, .remain = 0, .retry_ms = 500, .reset_ms = 900, .delay_ms = 400},
        {ASK, 99, 5, 2, .remain = 0, .retry_ms = 401, .reset_ms = 801, .hit = true},
        {ASK, 100, 5, 2, .hit = false},
        /* ... and a refusal within max_delay of its retry time proves nothing */
        {REFUSED, 0, 6, 2, .remain = 0, .retry_ms = 400, .reset_ms = 900, .delay_ms = 400},
        {ASK, 0, 6, 2, .hit = false},
    };
    RUN_DIRECT(rows);
}

static void test_room_given_back(void **unused)
{
    static const row_t rows[] = {
        {REFUSED, 0, 1, 3, .remain = 2, .retry_ms = 1000, .reset_ms = 1000},
        {FORGET, 10, 1, .cost = 0},
        {ASK, 10, 1, 3, .hit = false},
        /* a new epoch (a reset or a refund seen by another owner) */
        {REFUSED, 20, 1, 3, .remain = 2, .retry_ms = 1000, .reset_ms = 1000, .epoch = 0},
        {ASK, 30, 1, 3, .remain = 2, .retry_ms = 990, .reset_ms = 990, .hit = true, .epoch = 0},
        {ASK, 30, 1, 3, .hit = false, .epoch = 1},
        {ASK, 30, 1, 3, .hit = false, .epoch = 0}, /* dropped when seen stale */
        /* an admission: room came back unseen, or was taken */
        {REFUSED, 40, 1, 3, .remain = 2, .retry_ms = 1000, .reset_ms = 1000},
        {ADMITTED, 70, 1, 3, .remain = 0, .reset_ms = 1500},
        {ASK, 80, 1, 3, .hit = false},
        /* other keys are untouched by all this */
        {REFUSED, 0, 2, 1, .remain = 0, .retry_ms = 5000, .reset_ms = 5000},
        {FORGET, 10, 3, .cost = 0},
        {ASK, 100, 2, 1, .remain = 0, .retry_ms = 4900, .reset_ms = 4900, .hit = true},
    };
    RUN_DIRECT(rows);
}

/* Direct-mapped: two keys of one slot replace each other; a probe window keeps both. */
static void test_layout(void **unused)
{
    olc_entry_t slots[8];
    olc_t c;
    olc_init(&c, slots, 1, 1);
    static const row_t one_slot[] = {
        {REFUSED, 0, 1, 1, .remain = 0, .retry_ms = 1000, .reset_ms = 1000},
        {REFUSED, 0, 2, 1, .remain = 0, .retry_ms = 1000, .reset_ms = 1000},
        {ASK, 0, 1, 1, .hit = false},
        {ASK, 0, 2, 1, .remain = 0, .retry_ms = 1000, .reset_ms = 1000, .hit = true},
    };
    run(&c, one_slot, 4);
    assert_int_equal(c.count, 1);

    olc_init(&c, slots, 4, OLC_PROBE_MAX); /* probe capped at the table's size */
    assert_int_equal(c.probe, 4);
    assert_int_equal(c.count, 0);
    static const row_t window[] = {
        {REFUSED, 0, 1, 1, .remain = 0, .retry_ms = 500, .reset_ms = 500},
        {REFUSED, 0, 2, 1, .remain = 0, .retry_ms = 100, .reset_ms = 100},
        {REFUSED, 0, 3, 1, .remain = 0, .retry_ms = 900, .reset_ms = 900},
        {REFUSED, 0, 4, 1, .remain = 0, .retry_ms = 300, .reset_ms = 300},
        {REFUSED, 0, 5, 1, .remain = 0, .retry_ms = 700, .reset_ms = 700}, /* evicts 2 */
        {ASK, 0, 2, 1, .hit = false},
        {ASK, 0, 1, 1, .remain = 0, .retry_ms = 500, .reset_ms = 500, .hit = true},
        {ASK, 0, 5, 1, .remain = 0, .retry_ms = 700, .reset_ms = 700, .hit = true},
        /* an expired entry (1 or 4) is reused before a live one is evicted */
        {REFUSED, 600, 6, 1, .remain = 0, .retry_ms = 100, .reset_ms = 100},
        {ASK, 600, 3, 1, .remain = 0, .retry_ms = 300, .reset_ms = 300, .hit = true},
        {ASK, 600, 1, 1, .hit = false}, /* expired at 500 */
        {ASK, 600, 4, 1, .hit = false}, /* expired at 300 */
        {ASK, 600, 5, 1, .remain = 0, .retry_ms = 100, .reset_ms = 100, .hit = true},
        {ASK, 600, 6, 1, .remain = 0, .retry_ms = 100, .reset_ms = 100, .hit = true},
    };
    run(&c, window, sizeof window / sizeof window[0]);
    assert_int_equal(c.count, 3);
    olc_clear(&c);
    assert_int_equal(c.count, 0);

    olc_init(&c, NULL, 0, 1); /* holds nothing */
    static const row_t none[] = {
        {REFUSED, 0, 1, 1, .remain = 0, .retry_ms = 500, .reset_ms = 500},
        {ASK, 0, 1, 1, .hit = false},
        {FORGET, 0, 1, .cost = 0},
    };
    run(&c, none, 3);
}

static void test_saturation(void **unused)
{
    olc_entry_t slots[4];
    olc_t c;
    olc_init(&c, slots, 4, 1);
    int64_t now = INT64_C(4000000000000000000);
    olc_answer_t a = {.limit = 1, .retry_after_ns = INT64_MAX, .reset_after_ns = INT64_MAX};
    olc_record(&c, 9, 0, 1, &a, now);
    olc_answer_t got;
    assert_true(olc_lookup(&c, 9, 0, 1, now + 5 * MS, &got));
    assert_int_equal(got.retry_after_ns, INT64_MAX - now - 5 * MS);
    assert_int_equal(got.reset_after_ns, got.retry_after_ns);
    assert_true(olc_lookup(&c, 9, 0, 1, -now, &got)); /* a clock of another origin */
    assert_int_equal(got.retry_after_ns, INT64_MAX);
}

static void test_key_hash(void **unused)
{
    uint64_t h = olc_key_hash(1, "ab", 2, "c", 1);
    assert_int_not_equal(h, olc_key_hash(1, "a", 1, "bc", 2));
    assert_int_not_equal(h, olc_key_hash(1, "abc", 3, NULL, 0));
    assert_int_not_equal(h, olc_key_hash(2, "ab", 2, "c", 1));
    assert_int_equal(h, olc_key_hash(1, "ab", 2, "c", 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_other_costs_go_to_the_store),
        cmocka_unit_test(test_latest_refused_cost_is_kept),
        cmocka_unit_test(test_what_is_not_remembered),
        cmocka_unit_test(test_room_given_back),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_key_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
