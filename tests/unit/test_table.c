/*
 * test_table.c - the per-key table: storage, keys, growth, reclamation, the memory cap, the
 * iterator, get/put round trips and the batch entry point, each against sl_decide() on
 * caller-owned state as the reference.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bounded.h"
#include "core/core.h"
#include "sluice/sluice.h"

#define T0       (INT64_C(1700000000) * SL_NS_PER_SEC)
#define SEC_HALF (SL_NS_PER_SEC / 2)

static sl_rule_t rule_of(sl_algorithm_t a, int64_t limit, int64_t window_ns)
{
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, a, limit, window_ns), SL_OK);
    return r;
}

static sl_table_t *table_of(const sl_rule_t *r, const sl_table_config_t *cfg)
{
    sl_table_t *t = NULL;
    assert_int_equal(sl_table_create(r, cfg, &t), SL_OK);
    assert_non_null(t);
    return t;
}

static bool allow(sl_table_t *t, const char *key, int64_t cost, int64_t now)
{
    sl_decision_t d;
    assert_int_equal(sl_table_decide(t, key, strlen(key), cost, now, &d), SL_OK);
    return d.allowed;
}

/* Keys are independent; the table decides exactly as sl_decide() on a private state. */
static void test_matches_private_state(void **unused)
{
    sl_algorithm_t algs[] = {SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
                             SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA};
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        sl_rule_t r = rule_of(algs[a], 5, 10 * SL_NS_PER_SEC);
        sl_table_t *t = table_of(&r, NULL);
        const char *keys[] = {"", "a", "user:42", "a-key-that-is-much-longer-than-a-slot-holds"};
        uint64_t states[4][64] = {{0}};
        uint64_t rng = 7;
        for (int i = 0; i < 2000; i++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            int k = (int)(rng >> 60) % 4;
            int64_t now = T0 + i * 37 * SL_NS_PER_MS;
            int64_t cost = (int64_t)((rng >> 40) % 3);
            sl_decision_t want, got;
            assert_int_equal(sl_decide(&r, states[k], cost, now, &want), SL_OK);
            assert_int_equal(sl_table_decide(t, keys[k], strlen(keys[k]), cost, now, &got), SL_OK);
            assert_int_equal(got.allowed, want.allowed);
            assert_int_equal(got.remaining, want.remaining);
            assert_int_equal(got.retry_after_ns, want.retry_after_ns);
            assert_int_equal(got.reset_after_ns, want.reset_after_ns);
        }
        sl_table_free(t);
    }
}

/* An absent key's peek and impossible cost (decided without a state) match sl_decide() on a
 * zero state, for every algorithm, including large out-of-line states. */
static void test_absent_key_matches_fresh_state(void **unused)
{
    sl_algorithm_t algs[] = {SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
                             SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA};
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        sl_rule_t r = rule_of(algs[a], 40, 10 * SL_NS_PER_SEC); /* sliding_log: out of line */
        sl_table_t *t = table_of(&r, NULL);
        unsigned char *zero = calloc(1, sl_state_size(&r));
        int64_t costs[] = {0, r.capacity + 1, INT64_MAX};
        for (size_t c = 0; c < 3; c++) {
            sl_decision_t want, got;
            assert_int_equal(sl_decide(&r, zero, costs[c], T0, &want), SL_OK);
            assert_int_equal(sl_table_decide(t, "nobody", 6, costs[c], T0, &got), SL_OK);
            assert_int_equal(got.allowed, want.allowed);
            assert_int_equal(got.limit, want.limit);
            assert_int_equal(got.remaining, want.remaining);
            assert_int_equal(got.retry_after_ns, want.retry_after_ns);
            assert_int_equal(got.reset_after_ns, want.reset_after_ns);
            assert_int_equal(got.delay_ns, want.delay_ns);
        }
        assert_int_equal(sl_table_count(t), 0);
        free(zero);
        sl_table_free(t);
    }
}

static void test_key_limits(void **unused)
{
    sl_rule_t r = rule_of(SL_GCRA, 1, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.key_max = 64};
    sl_table_t *t = table_of(&r, &cfg);
    char big[65];
    memset(big, 'x', sizeof(big));
    sl_decision_t d;
    assert_int_equal(sl_table_decide(t, big, 65, 1, T0, &d), SL_EKEY);
    assert_int_equal(sl_table_decide(t, big, 64, 1, T0, &d), SL_OK);
    assert_int_equal(sl_table_decide(t, big, 1, -1, T0, &d), SL_ECOST);
    assert_int_equal(sl_table_decide(t, NULL, 3, 1, T0, &d), SL_EINVAL);
    /* binary keys: embedded NULs and keys that differ only in their last byte */
    assert_true(allow(t, "", 1, T0));
    const char a[] = {'k', 0, 'a'}, b[] = {'k', 0, 'b'};
    assert_int_equal(sl_table_decide(t, a, 3, 2, T0, &d), SL_OK);
    assert_true(d.allowed);
    assert_int_equal(sl_table_decide(t, b, 3, 2, T0, &d), SL_OK);
    assert_true(d.allowed);
    assert_int_equal(sl_table_decide(t, a, 3, 1, T0, &d), SL_OK);
    assert_false(d.allowed);
    assert_int_equal(sl_table_count(t), 4); /* "", big[64], a, b */
    sl_table_free(t);
}

/* Peeks and rejections of an absent key store nothing. */
static void test_only_admissions_store(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 2, SL_NS_PER_SEC);
    sl_table_t *t = table_of(&r, NULL);
    assert_true(allow(t, "peek", 0, T0));
    assert_false(allow(t, "huge", 3, T0));
    assert_int_equal(sl_table_count(t), 0);
    assert_true(allow(t, "real", 1, T0));
    assert_int_equal(sl_table_count(t), 1);
    sl_table_free(t);
}

/* Many keys force every shard through several rebuilds; nothing is lost on the way. */
static void test_growth_keeps_every_key(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 3, 60 * SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 4};
    sl_table_t *t = table_of(&r, &cfg);
    char key[64];
    const int n = 50000;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), i % 3 ? "k%d" : "a-long-key-to-store-out-of-line-%d", i);
        assert_true(allow(t, key, 1 + i % 2, T0));
    }
    assert_int_equal(sl_table_count(t), n);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), i % 3 ? "k%d" : "a-long-key-to-store-out-of-line-%d", i);
        sl_decision_t d;
        assert_int_equal(sl_table_decide(t, key, strlen(key), 0, T0, &d), SL_OK);
        assert_int_equal(d.remaining, 3 - (1 + i % 2));
    }
    size_t mem = sl_table_memory(t);
    assert_true(mem > (size_t)n * 28);
    /* growth by 1.25x from 4 chunks to ~1.7 k per shard is ~25 rebuilds per shard: a rebuild per
     * insert (a regression once: long probes at high load triggered "tidying") would be 50 k */
    sl_table_stats_t st;
    assert_int_equal(sl_table_stats(t, &st), SL_OK);
    assert_int_equal(st.keys, n);
    assert_int_equal(st.bytes, mem);
    assert_true(st.rebuilds >= 4 * 10 && st.rebuilds <= 4 * 40);
    assert_int_equal(st.reclaimed, 0);
    sl_table_free(t);
}

static void test_reset_get_put(void **unused)
{
    sl_rule_t r = rule_of(SL_SLIDING_LOG, 3, 10 * SL_NS_PER_SEC); /* 80-byte state, inline */
    sl_table_t *t = table_of(&r, NULL);
    assert_true(allow(t, "u", 3, T0));
    assert_false(allow(t, "u", 1, T0));
    uint64_t state[10], zero[10] = {0};
    assert_int_equal(sl_table_get(t, "u", 1, state), SL_OK);
    assert_memory_not_equal(state, zero, sizeof(state));
    assert_int_equal(sl_table_reset(t, "u", 1), SL_OK);
    assert_int_equal(sl_table_count(t), 0);
    assert_true(allow(t, "u", 3, T0));
    assert_int_equal(sl_table_reset(t, "absent", 6), SL_OK);
    /* put the saved (full) state under another key: it is full there too */
    assert_int_equal(sl_table_put(t, "v", 1, state, T0), SL_OK);
    assert_false(allow(t, "v", 1, T0));
    uint64_t back[10];
    assert_int_equal(sl_table_get(t, "absent", 6, back), SL_OK);
    assert_memory_equal(back, zero, sizeof(back));
    /* putting a state that is fresh by now removes the key */
    assert_int_equal(sl_table_put(t, "v", 1, state, T0 + 11 * SL_NS_PER_SEC), SL_OK);
    assert_int_equal(sl_table_get(t, "v", 1, back), SL_OK);
    assert_memory_equal(back, zero, sizeof(back));
    sl_table_free(t);
}

typedef struct copy_ctx {
    sl_table_t *into;
    int64_t now;
    int visited;
} copy_ctx_t;

static int copy_visit(void *arg, const void *key, size_t len, const void *state, size_t size)
{
    copy_ctx_t *c = arg;
    c->visited++;
    /* an out-of-line sliding_log key's buffer holds its entries, with room for one more: one
     * admission takes a small part of the 40 entries a buffer could need; an inline state is
     * handed out whole */
    size_t whole = sl_state_size(sl_table_rule(c->into));
    assert_true(whole > 128 ? size < whole / 4 : size == whole);
    return sl_table_put_len(c->into, key, len, state, size, c->now);
}

/* A snapshot through the iterator restores the same decisions in another table; sliding_log's
 * large states are out of line, its small ones (a limit of 4) in the entry. A state a snapshot
 * unpacks into a buffer of the size it needs goes into either. */
static void test_foreach_round_trip(void **unused)
{
    static const int64_t limits[] = {40, 4};
    for (size_t l = 0; l < 2; l++) {
        int64_t n = limits[l];
        sl_rule_t r = rule_of(SL_SLIDING_LOG, n, 10 * SL_NS_PER_SEC);
        sl_table_t *a = table_of(&r, NULL), *b = table_of(&r, NULL);
        char key[32];
        for (int i = 0; i < 300; i++) {
            snprintf(key, sizeof(key), "key-%d", i);
            assert_true(allow(a, key, 1 + i % n, T0 + i));
        }
        copy_ctx_t c = {.into = b, .now = T0 + 1000};
        assert_int_equal(sl_table_foreach(a, copy_visit, &c), 0);
        assert_int_equal(c.visited, 300);
        assert_int_equal(sl_table_count(b), 300);
        for (int i = 0; i < 300; i++) {
            snprintf(key, sizeof(key), "key-%d", i);
            sl_decision_t da, db;
            sl_table_decide(a, key, strlen(key), 0, T0 + 2000, &da);
            sl_table_decide(b, key, strlen(key), 0, T0 + 2000, &db);
            assert_int_equal(da.remaining, n - (1 + i % n));
            assert_int_equal(db.remaining, da.remaining);
            assert_int_equal(db.reset_after_ns, da.reset_after_ns);
        }
        /* a state in a buffer of the size it needs, as a snapshot's reader unpacks it */
        unsigned char packed[1024];
        uint64_t whole[1024];
        assert_true(sl_state_size(&r) <= sizeof(whole) && sl_state_packed_max(&r) <= 1024);
        assert_int_equal(sl_table_get(a, "key-1", 5, whole), SL_OK);
        size_t plen = sl_state_pack(&r, whole, packed);
        size_t need = core_state_unpack_need(&r, packed, plen);
        assert_true(need > 0 && need < sl_state_size(&r));
        unsigned char *exact = malloc(need); /* ASan: a read past it would be caught */
        assert_int_equal(core_state_unpack(&r, packed, plen, exact, need), SL_OK);
        assert_int_equal(sl_table_put_len(b, "copy", 4, exact, need, T0 + 1000), SL_OK);
        free(exact);
        sl_decision_t d;
        assert_int_equal(sl_table_decide(b, "copy", 4, 0, T0 + 2000, &d), SL_OK);
        assert_int_equal(d.remaining, n - 2);
        sl_table_free(a);
        sl_table_free(b);
    }
}

static int stop_at_three(void *arg, const void *key, size_t len, const void *state, size_t size)
{
    return ++*(int *)arg == 3 ? 42 : 0;
}

static void test_foreach_stops(void **unused)
{
    sl_rule_t r = rule_of(SL_GCRA, 1, SL_NS_PER_SEC);
    sl_table_t *t = table_of(&r, NULL);
    assert_true(allow(t, "a", 1, T0));
    assert_true(allow(t, "b", 1, T0));
    assert_true(allow(t, "c", 1, T0));
    assert_true(allow(t, "d", 1, T0));
    int n = 0;
    assert_int_equal(sl_table_foreach(t, stop_at_three, &n), 42);
    assert_int_equal(n, 3);
    sl_table_free(t);
}

#define REENTER_KEYS 40

/* A visitor that decides on the key it is given (in the same table and shard), charges it in an
 * all-or-nothing decision across this table and another, and resets a key. Failures are counted
 * here, not asserted: the visitor runs on another thread. */
typedef struct reenter_ctx {
    sl_table_t *t, *other;
    uint64_t before[REENTER_KEYS + 1]; /* each key's state before the call; [REENTER_KEYS] "gone" */
    int visited, gone_visited, wrong_state, failed_calls, rc;
} reenter_ctx_t;

static void reenter_key(char *buf, size_t cap, int i)
{
    if (i == REENTER_KEYS)
        snprintf(buf, cap, "gone");
    else /* odd keys are longer than an entry holds */
        snprintf(buf, cap, i % 2 ? "a-key-longer-than-an-entry-holds-%d" : "key-%d", i);
}

static int reenter_visit(void *arg, const void *key, size_t len, const void *state, size_t size)
{
    reenter_ctx_t *c = arg;
    char name[64];
    int i = 0;
    for (; i <= REENTER_KEYS; i++) {
        reenter_key(name, sizeof(name), i);
        if (strlen(name) == len && memcmp(name, key, len) == 0)
            break;
    }
    c->visited++;
    c->gone_visited += i == REENTER_KEYS;
    if (i > REENTER_KEYS || size != 8 || memcmp(state, &c->before[i], 8) != 0)
        c->wrong_state++;
    sl_decision_t d;
    if (sl_table_decide(c->t, key, len, 1, T0, &d) != SL_OK || !d.allowed)
        c->failed_calls++;
    sl_multi_request_t reqs[2] = {{.table = c->t, .key = key, .key_len = len, .cost = 1},
                                  {.table = c->other, .key = key, .key_len = len, .cost = 1}};
    size_t refused = 0;
    if (sl_table_decide_all(reqs, 2, T0, &refused) != SL_OK || refused != 2)
        c->failed_calls++;
    if (sl_table_reset(c->t, "gone", 4) != SL_OK)
        c->failed_calls++;
    return 0;
}

static void reenter_run(void *arg)
{
    reenter_ctx_t *c = arg;
    c->rc = sl_table_foreach(c->t, reenter_visit, c);
}

/* Address space in use now, bytes (Linux: /proc/self/statm's first field). 0 if unknown. */
static size_t address_space_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f == NULL)
        return 0;
    if (fscanf(f, "%lu", &pages) != 1)
        pages = 0;
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static int count_visit(void *arg, const void *key, size_t key_len, const void *state, size_t size)
{
    (void)key, (void)key_len, (void)state, (void)size;
    (*(size_t *)arg)++;
    return 0;
}

/* The bounded walk of test_foreach_bounded_memory, in a process of its own (exec'ed, so that no
 * heap an earlier test freed is there to be reused unseen): exits 0 when the walk visited every
 * key under RLIMIT_AS. */
static int foreach_bounded_child(void)
{
    sl_rule_t r = rule_of(SL_SLIDING_LOG, 8192, 3600 * SL_NS_PER_SEC); /* 128 KiB a key */
    sl_table_config_t cfg = {.shards = 1};
    sl_table_t *t = table_of(&r, &cfg);
    char key[32];
    for (int i = 0; i < 256; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        for (int j = 0; j < 8192; j++) {
            if (!allow(t, key, 1, T0 + j))
                return 2;
        }
    }
    if (sl_table_memory(t) < ((size_t)32 << 20))
        return 4;
    size_t limit = address_space_bytes() + ((size_t)16 << 20);
    struct rlimit rl = {limit, limit};
    size_t visited = 0;
    if (limit == ((size_t)16 << 20) || setrlimit(RLIMIT_AS, &rl) != 0)
        return 3;
    int rc = sl_table_foreach(t, count_visit, &visited);
    return rc == 0 && visited == 256 ? 0 : 1;
}

/* sl_table_foreach() needs a piece's copy beside the table, never a shard's: a shard of 32 MiB
 * of states (256 sliding_log keys of 8192 admissions each) is walked with 16 MiB of address
 * space to spare (not under the sanitizers, whose shadow memory needs terabytes of address
 * space). */
static void test_foreach_bounded_memory(void **unused)
{
    (void)unused;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    skip();
#endif
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_table", "foreach-bounded", (char *)NULL);
        _exit(5);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The visitor runs with no lock held: it may decide on the table being visited (the same shard,
 * with one shard), decide all or nothing across tables, and reset keys; it sees every key as it
 * was when its shard was copied. (It used to run under the shard's lock, and deadlocked.) */
static void test_foreach_visitor_calls_into_tables(void **unused)
{
    sl_rule_t r = rule_of(SL_GCRA, 10, 10 * SL_NS_PER_SEC); /* capacity 11 */
    unsigned shard_counts[] = {1, 64};
    for (size_t k = 0; k < 2; k++) {
        sl_table_config_t cfg = {.shards = shard_counts[k]};
        reenter_ctx_t c = {.t = table_of(&r, &cfg), .other = table_of(&r, NULL)};
        char key[64];
        for (int i = 0; i <= REENTER_KEYS; i++) {
            reenter_key(key, sizeof(key), i);
            assert_true(allow(c.t, key, 1 + i % 3, T0));
            assert_int_equal(sl_table_get(c.t, key, strlen(key), &c.before[i]), SL_OK);
        }
        if (!run_bounded(reenter_run, &c, 20))
            fail_msg("%u shard(s): sl_table_foreach did not return: a visitor calling into the "
                     "table deadlocked",
                     shard_counts[k]);
        assert_int_equal(c.rc, 0);
        assert_int_equal(c.failed_calls, 0);
        assert_int_equal(c.wrong_state, 0);
        /* with one shard, every key was copied before the first reset; with 64, "gone" only if
         * its shard was copied first */
        if (shard_counts[k] == 1)
            assert_int_equal(c.gone_visited, 1);
        assert_int_equal(c.visited, REENTER_KEYS + c.gone_visited);
        for (int i = 0; i < REENTER_KEYS; i++) { /* two charges each, during the visit */
            reenter_key(key, sizeof(key), i);
            sl_decision_t d;
            assert_int_equal(sl_table_decide(c.t, key, strlen(key), 0, T0, &d), SL_OK);
            assert_int_equal(d.remaining, 11 - (1 + i % 3) - 2);
            assert_int_equal(sl_table_decide(c.other, key, strlen(key), 0, T0, &d), SL_OK);
            assert_int_equal(d.remaining, 10);
        }
        uint64_t gone = 1;
        assert_int_equal(sl_table_get(c.t, "gone", 4, &gone), SL_OK);
        assert_int_equal(gone, 0);
        sl_table_free(c.t);
        sl_table_free(c.other);
    }
}

static void test_reclaim_drops_only_fresh(void **unused)
{
    sl_rule_t r = rule_of(SL_GCRA, 1, SL_NS_PER_SEC); /* burst 1: capacity 2, T = 1 s */
    sl_table_t *t = table_of(&r, NULL);
    assert_true(allow(t, "old", 1, T0));                     /* fresh again at T0 + 1 s */
    assert_true(allow(t, "new", 2, T0 + 2 * SL_NS_PER_SEC)); /* fresh at T0 + 4 s */
    assert_int_equal(sl_table_reclaim(t, T0 + 3 * SL_NS_PER_SEC), 1);
    sl_table_stats_t st;
    assert_int_equal(sl_table_stats(t, &st), SL_OK);
    assert_int_equal(st.reclaimed, 1);
    assert_int_equal(sl_table_count(t), 1);
    assert_false(allow(t, "new", 2, T0 + 3 * SL_NS_PER_SEC)); /* its usage survived */
    sl_table_free(t);
}

/* At the cap, new keys are refused (never a live key evicted) until idle keys become fresh. */
static void test_memory_cap(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 1, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 64 * 1024};
    sl_table_t *t = table_of(&r, &cfg);
    char key[32];
    int stored = 0, refused = 0;
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        sl_decision_t d;
        int rc = sl_table_decide(t, key, strlen(key), 1, T0, &d);
        if (rc == SL_OK)
            stored++;
        else {
            assert_int_equal(rc, SL_EFULL);
            refused++;
        }
    }
    assert_true(stored > 100);
    assert_true(refused > 0);
    sl_table_stats_t stats;
    assert_int_equal(sl_table_stats(t, &stats), SL_OK);
    assert_int_equal(stats.refused, refused);
    assert_true(sl_table_memory(t) <= 64 * 1024 + 4096);
    /* every stored key still holds its usage */
    for (int i = 0, checked = 0; checked < stored; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        uint64_t st[2];
        sl_table_get(t, key, strlen(key), st);
        if (st[1] == 0)
            continue;
        assert_false(allow(t, key, 1, T0));
        checked++;
    }
    /* a window later the old keys are fresh: new keys fit again */
    assert_true(allow(t, "late-comer", 1, T0 + 2 * SL_NS_PER_SEC));
    sl_table_free(t);
}

/* Stores keys "<prefix><i>" from i = *next with cost(i), until the table has evicted one (or
 * `max` keys were tried); returns the number stored. The first new key at the cap is refused:
 * the hand's first lap finds every key marked (each was just stored) and unmarks them all. */
static int fill_until_evicted(sl_table_t *t, const char *prefix, int *next, int64_t (*cost)(int),
                              int max)
{
    char key[32];
    sl_table_stats_t st = {0};
    int stored = 0;
    for (; *next < max && st.evicted == 0; (*next)++) {
        snprintf(key, sizeof(key), "%s%d", prefix, *next);
        sl_decision_t d;
        int rc = sl_table_decide(t, key, strlen(key), cost(*next), T0, &d);
        if (rc == SL_OK)
            stored++;
        else
            assert_int_equal(rc, SL_EFULL);
        assert_int_equal(sl_table_stats(t, &st), SL_OK);
    }
    return stored;
}

static int64_t cost_one(int i)
{
    (void)i;
    return 1;
}

/* Units a key of a fixed_window rule has used (its state: window start, count). */
static int64_t used_of(sl_table_t *t, const char *key)
{
    int64_t st[2];
    assert_int_equal(sl_table_get(t, key, strlen(key), st), SL_OK);
    return st[1];
}

/* At the cap with evict_idle, new keys take the place of idle ones; a key decided on between
 * every two new keys is never idle when the hand passes, so it keeps its usage however many new
 * keys come. */
static void test_evict_idle_keeps_hot_keys(void **unused)
{
    (void)unused;
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, 3600 * SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 32 * 1024, .evict_idle = true, .seed = 7};
    sl_table_t *t = table_of(&r, &cfg);
    sl_decision_t d;
    assert_int_equal(sl_table_decide(t, "hot", 3, 7, T0, &d), SL_OK);
    int next = 0, capacity = 0;
    capacity = fill_until_evicted(t, "k", &next, cost_one, 100000);
    assert_true(capacity > 100);
    char key[32];
    int refused = 0;
    for (int i = 0; i < 10 * capacity; i++, next++) {
        assert_int_equal(sl_table_decide(t, "hot", 3, 0, T0, &d), SL_OK); /* a peek touches */
        snprintf(key, sizeof(key), "k%d", next);
        int rc = sl_table_decide(t, key, strlen(key), 1, T0, &d);
        refused += rc == SL_EFULL;
        assert_true(rc == SL_OK || rc == SL_EFULL);
    }
    assert_int_equal(used_of(t, "hot"), 7);
    sl_table_stats_t st;
    assert_int_equal(sl_table_stats(t, &st), SL_OK);
    assert_true(st.evicted >= (uint64_t)(9 * capacity)); /* the new keys found room */
    /* one refusal per lap of the hand that found every key in use: the first lap at the cap
     * (every key had just been stored), and none after it (only "hot" is in use) */
    assert_int_equal(refused, 0);
    assert_int_equal(st.refused, 1);
    assert_true(sl_table_memory(t) <= 32 * 1024 + 4096);
    sl_table_free(t);
}

static int64_t cost_by_parity(int i)
{
    return i % 2 == 0 ? 9 : 1; /* even keys near their limit of 10, odd ones with 9 left */
}

/* Of the idle keys the hand sees, the one with the most units left is evicted: the keys near
 * their limit are the last to go. */
static void test_evict_least_usage_first(void **unused)
{
    (void)unused;
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, 3600 * SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 64 * 1024, .evict_idle = true, .seed = 11};
    sl_table_t *t = table_of(&r, &cfg);
    int next = 0;
    int stored = fill_until_evicted(t, "k", &next, cost_by_parity, 100000);
    /* a tenth as many new keys again: each eviction compares up to EVICT_SAMPLE idle keys */
    char key[32];
    for (int i = 0; i < stored / 10; i++) {
        snprintf(key, sizeof(key), "new%d", i);
        sl_decision_t d;
        int rc = sl_table_decide(t, key, strlen(key), 1, T0, &d);
        assert_true(rc == SL_OK || rc == SL_EFULL);
    }
    int even_gone = 0, odd_gone = 0;
    for (int i = 0; i < next; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        if (used_of(t, key) == 0)
            *(i % 2 == 0 ? &even_gone : &odd_gone) += 1;
    }
    assert_true(odd_gone > stored / 20);
    assert_true(even_gone * 20 <= odd_gone); /* only when a whole sample was near its limit */
    sl_table_free(t);
}

/* Without evict_idle the cap refuses and keeps every key (the library's default). */
static void test_no_eviction_by_default(void **unused)
{
    (void)unused;
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, 3600 * SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 32 * 1024};
    sl_table_t *t = table_of(&r, &cfg);
    int next = 0;
    fill_until_evicted(t, "k", &next, cost_one, 5000);
    sl_table_stats_t st;
    assert_int_equal(sl_table_stats(t, &st), SL_OK);
    assert_int_equal(st.evicted, 0);
    assert_true(st.refused > 0);
    /* asked, it evicts: a first lap unmarks the keys (all just stored), the second evicts */
    assert_int_equal(sl_table_evict(t, T0, 1 << 20), 0);
    assert_true(sl_table_evict(t, T0, 1 << 20) > 0);
    assert_int_equal(sl_table_stats(t, &st), SL_OK);
    assert_true(st.evicted > 0);
    sl_table_free(t);
}

/* Tables sharing a budget stop growing at its cap, together; what they count is given back
 * exactly, whatever they did (a seeded mix of new keys, resets, refunds, evictions). */
static void test_budget_shared_and_balanced(void **unused)
{
    (void)unused;
    sl_budget_t *b = NULL;
    assert_int_equal(sl_budget_create(0, &b), SL_EINVAL);
    assert_int_equal(sl_budget_create(256 * 1024, &b), SL_OK);
    sl_rule_t gcra = rule_of(SL_GCRA, 100, SL_NS_PER_SEC);
    sl_rule_t slog = rule_of(SL_SLIDING_LOG, 40, SL_NS_PER_SEC); /* out-of-line states */
    sl_table_config_t cfg = {.budget = b};
    sl_table_t *t1 = table_of(&gcra, &cfg), *t2 = table_of(&slog, &cfg);
    assert_true(sl_budget_used(b) > 0); /* the empty tables' arrays */
    uint64_t x = 0x5eed;
    int full = 0;
    char key[32];
    for (int i = 0; i < 40000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        sl_table_t *t = (x >> 33) % 2 ? t1 : t2;
        snprintf(key, sizeof(key), "k%llu", (unsigned long long)((x >> 40) % 20000));
        sl_decision_t d;
        switch ((x >> 20) % 8) {
        case 0:
            assert_int_equal(sl_table_reset(t, key, strlen(key)), SL_OK);
            break;
        case 1:
            assert_int_equal(sl_table_refund(t, key, strlen(key), 1, T0, T0, &d), SL_OK);
            break;
        case 2:
            if ((x >> 10) % 16 == 0)
                sl_table_evict(t, T0, 1024);
            break;
        default: {
            int rc = sl_table_decide(t, key, strlen(key), 1, T0, &d);
            assert_true(rc == SL_OK || rc == SL_EFULL);
            full += rc == SL_EFULL;
            break;
        }
        }
        /* growth is checked before and counted after: it may pass the cap by one step */
        assert_true(sl_budget_used(b) <= 256 * 1024 + 64 * 1024);
    }
    assert_true(full > 0);
    assert_false(sl_budget_take(b, 64 * 1024)); /* full: the caller's own memory is refused */
    sl_table_free(t2);
    size_t used = sl_budget_used(b);
    assert_true(used < 256 * 1024);
    assert_true(sl_budget_take(b, 1000));
    assert_int_equal(sl_budget_used(b), used + 1000);
    sl_budget_give(b, 1000);
    sl_table_free(t1);
    assert_int_equal(sl_budget_used(b), 0);
    assert_false(sl_budget_take(b, 256 * 1024 + 1));
    assert_true(sl_budget_take(b, 256 * 1024));
    assert_int_equal(sl_budget_max(b), 256 * 1024);
    sl_budget_free(b);
}

/* sl_table_evict() frees what it is asked for when idle keys hold it, shrinking arrays, and
 * gives it back to the budget; hot keys stay. */
static void test_table_evict_frees(void **unused)
{
    (void)unused;
    sl_budget_t *b = NULL;
    assert_int_equal(sl_budget_create(64 << 20, &b), SL_OK);
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, 3600 * SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 4, .budget = b};
    sl_table_t *t = table_of(&r, &cfg);
    char key[32];
    for (int i = 0; i < 50000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_true(allow(t, key, 1, T0));
    }
    size_t before = sl_budget_used(b), memory = sl_table_memory(t);
    /* a first lap unmarks every key (all were decided on), freeing nothing; the keys touched
     * after it are in use again */
    assert_int_equal(sl_table_evict(t, T0, memory / 2), 0);
    assert_true(allow(t, "k1", 1, T0));
    size_t freed = sl_table_evict(t, T0, memory / 2);
    assert_true(freed >= memory / 4 && freed <= memory / 4 * 3); /* about what it was asked */
    assert_int_equal(sl_budget_used(b), before - freed);
    assert_int_equal(sl_table_memory(t), memory - freed);
    assert_int_equal(used_of(t, "k1"), 2);
    sl_table_free(t);
    assert_int_equal(sl_budget_used(b), 0);
    sl_budget_free(b);
}

/* The batch entry point decides as the same calls in a row would, including repeated keys. */
static void test_batch_equals_sequential(void **unused)
{
    sl_rule_t r = rule_of(SL_TOKEN_BUCKET, 3, SL_NS_PER_SEC);
    sl_table_t *a = table_of(&r, NULL), *b = table_of(&r, NULL);
    enum { N = 100 };
    char keys[N][32];
    sl_request_t reqs[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "user-%d", i % 7);
        reqs[i] = (sl_request_t){.key = keys[i], .key_len = strlen(keys[i]), .cost = i % 3};
    }
    reqs[50].key_len = 5000; /* over key_max: fails alone */
    reqs[51].cost = -2;
    assert_int_equal(sl_table_decide_batch(a, reqs, N, T0), 2);
    for (int i = 0; i < N; i++) {
        sl_decision_t d;
        int rc = sl_table_decide(b, keys[i], reqs[i].key_len, reqs[i].cost, T0, &d);
        assert_int_equal(reqs[i].status, rc);
        if (rc != SL_OK)
            continue;
        assert_int_equal(reqs[i].decision.allowed, d.allowed);
        assert_int_equal(reqs[i].decision.remaining, d.remaining);
    }
    sl_table_free(a);
    sl_table_free(b);
}

/* Snapshot bytes are checked: corrupt states are refused with SL_ESTATE and store nothing. */
static void test_put_refuses_corrupt_states(void **unused)
{
    sl_rule_t log = rule_of(SL_SLIDING_LOG, 40, SL_NS_PER_SEC);
    sl_table_t *t = table_of(&log, NULL);
    /* sliding_log.c: head, count, cap, 0, base, latest; entries of (stamp, running total) */
    uint32_t *hdr = calloc(1, sl_state_size(&log));
    int64_t *ring = (int64_t *)(hdr + 8);
    hdr[0] = 0xFFFFFF00u; /* head far outside the ring */
    hdr[1] = 1;
    assert_int_equal(sl_table_put(t, "k", 1, hdr, T0), SL_ESTATE);
    hdr[0] = 0;
    hdr[1] = 41; /* more entries than the limit */
    assert_int_equal(sl_table_put(t, "k", 1, hdr, T0), SL_ESTATE);
    hdr[1] = 2;
    memcpy(hdr + 6, &(int64_t){T0}, 8); /* the latest time */
    ring[0] = T0;
    ring[1] = 1;
    ring[2] = T0 - 1; /* not sorted */
    ring[3] = 2;
    assert_int_equal(sl_table_put(t, "k", 1, hdr, T0), SL_ESTATE);
    ring[2] = T0;
    assert_int_equal(sl_table_put(t, "k", 1, hdr, T0), SL_ESTATE); /* two entries at one time */
    ring[0] = T0 - 1;
    ring[3] = 1; /* an entry of no unit */
    assert_int_equal(sl_table_put(t, "k", 1, hdr, T0), SL_ESTATE);
    ring[3] = 2;
    assert_int_equal(sl_table_put(t, "k", 1, hdr, T0), SL_OK);
    assert_int_equal(sl_table_count(t), 1);
    free(hdr);
    sl_table_free(t);

    sl_rule_t fw = rule_of(SL_FIXED_WINDOW, 2, SL_NS_PER_SEC);
    t = table_of(&fw, NULL);
    int64_t st[3] = {INT64_C(1) << 62, 1, 0}; /* window index past SL_NOW_MAX_NS */
    assert_int_equal(sl_table_put(t, "k", 1, st, T0), SL_ESTATE);
    st[0] = 1700000000;
    st[1] = SL_COUNT_MAX + 1; /* above the limit by more than any debt */
    assert_int_equal(sl_table_put(t, "k", 1, st, T0), SL_ESTATE);
    st[1] = -1;
    assert_int_equal(sl_table_put(t, "k", 1, st, T0), SL_ESTATE);
    sl_table_free(t);

    sl_rule_t g = rule_of(SL_GCRA, 1, SL_NS_PER_SEC);
    t = table_of(&g, NULL);
    int64_t tat = -5;
    assert_int_equal(sl_table_put(t, "k", 1, &tat, T0), SL_ESTATE);
    assert_int_equal(sl_table_count(t), 0);
    tat = INT64_MAX; /* a debt saturated: refused until the end of time, but a state */
    assert_int_equal(sl_table_put(t, "k", 1, &tat, T0), SL_OK);
    assert_int_equal(sl_table_count(t), 1);
    sl_table_free(t);

    sl_rule_t sb;
    assert_int_equal(sl_rule_init(&sb, SL_SLIDING_BUCKETS, 5, SL_NS_PER_SEC), SL_OK);
    t = table_of(&sb, NULL);
    int64_t *b = calloc(1, sl_state_size(&sb));
    b[0] = T0;
    b[1] = 3; /* total != sum of counts (all 0) */
    assert_int_equal(sl_table_put(t, "k", 1, b, T0), SL_ESTATE);
    b[2] = 3;
    assert_int_equal(sl_table_put(t, "k", 1, b, T0), SL_OK);
    free(b);
    sl_table_free(t);
}

/*
 * Removals can leave overflow counts that chain through every chunk: a white-box construction
 * (one shard of 4 chunks, the table's own hash and home mapping) where each chunk's overflow
 * count is held by a key that overflowed from it while its own home-chunk keys are gone. A lookup
 * for an absent key must still end (before the bound it spun forever, holding the lock), and the
 * insert that follows tidies the shard without losing a key.
 */
#define WB_SEED 12345u

static unsigned wb_home(const char *k)
{
    uint64_t h = sl_hash64(k, strlen(k), WB_SEED);
    return (unsigned)(((h & 0xffffffffu) * 4u) >> 32); /* 4 chunks: a new shard's size */
}

static void wb_key_in(unsigned chunk, char *buf, int *counter)
{
    do
        snprintf(buf, 32, "k%d", (*counter)++);
    while (wb_home(buf) != chunk);
}

static void test_lookup_ends_after_removals(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .seed = WB_SEED};
    sl_table_t *t = table_of(&r, &cfg);
    char filler[4][32], survivors[4][32];
    int counter = 0;
    for (unsigned c = 0; c < 4; c++) {
        unsigned n = c == 0 ? 4 : 3; /* fill chunk c, then one more home-c key overflows */
        for (unsigned i = 0; i < n; i++) {
            wb_key_in(c, filler[i], &counter);
            assert_true(allow(t, filler[i], 1, T0));
        }
        wb_key_in(c, survivors[c], &counter);
        assert_true(allow(t, survivors[c], 3, T0));
        for (unsigned i = 0; i < n; i++)
            assert_int_equal(sl_table_reset(t, filler[i], strlen(filler[i])), SL_OK);
    }
    assert_int_equal(sl_table_count(t), 4);
    assert_true(allow(t, "absent", 0, T0)); /* returns */
    assert_true(allow(t, "absent", 1, T0)); /* inserts, after tidying */
    for (unsigned c = 0; c < 4; c++) {
        sl_decision_t d;
        assert_int_equal(sl_table_decide(t, survivors[c], strlen(survivors[c]), 0, T0, &d), SL_OK);
        assert_int_equal(d.remaining, 7);
    }
    assert_int_equal(sl_table_count(t), 5);
    sl_table_free(t);
}

/* After admissions with a delay, a peek reports the bucket (remaining 0) but no delay. */
static void test_peek_is_never_delayed(void **unused)
{
    sl_rule_t r;
    assert_int_equal(sl_rule_init(&r, SL_GCRA, 1, SL_NS_PER_SEC), SL_OK);
    r.burst = 0;
    r.max_delay_ns = 5 * SL_NS_PER_SEC;
    assert_int_equal(sl_rule_prepare(&r), SL_OK);
    int64_t tat = 0;
    sl_decision_t d;
    for (int i = 0; i < 3; i++) /* capacity 1, then two admissions delayed 1 s and 2 s */
        assert_int_equal(sl_decide(&r, &tat, 1, T0, &d), SL_OK);
    assert_true(d.allowed);
    assert_int_equal(d.delay_ns, 2 * SL_NS_PER_SEC);
    assert_int_equal(sl_decide(&r, &tat, 0, T0, &d), SL_OK);
    assert_true(d.allowed);
    assert_int_equal(d.delay_ns, 0);
    assert_int_equal(d.remaining, 0);
}

/* What a cap can hold: a shard's share against its smallest array and out-of-line states at their
 * smallest (a sliding_log key that made one request). */
static void test_can_hold(void **unused)
{
    sl_rule_t gcra = rule_of(SL_GCRA, 10, SL_NS_PER_SEC);
    sl_rule_t log = rule_of(SL_SLIDING_LOG, 100000, SL_NS_PER_SEC); /* up to 1.6 MB a key */
    assert_true(sl_table_can_hold(&gcra, NULL, 1000000));           /* no cap */
    sl_table_config_t one_mb = {.max_bytes = 1 << 20, .shards = 1};
    assert_true(sl_table_can_hold(&gcra, &one_mb, 1000));
    assert_true(sl_table_can_hold(&log, &one_mb, 1000));
    assert_false(sl_table_can_hold(&log, &one_mb, 100000));
    one_mb.shards = 64; /* the cap is split over the shards */
    assert_false(sl_table_can_hold(&log, &one_mb, 1000));
    /* a key grows with its admissions, under the cap: one whose entries pass it is refused its
     * next admission (SL_EFULL), and keeps what it holds */
    sl_table_t *t = NULL;
    sl_table_config_t small = {.max_bytes = 64 * 1024, .shards = 1};
    assert_int_equal(sl_table_create(&log, &small, &t), SL_OK);
    sl_decision_t d;
    int rc = SL_OK, admitted = 0;
    for (int i = 0; i < 10000 && rc == SL_OK; i++) {
        rc = sl_table_decide(t, "k", 1, 1, T0 + i, &d); /* a new entry each: other times */
        admitted += rc == SL_OK;
    }
    assert_int_equal(rc, SL_EFULL);
    assert_true(admitted > 1000);
    assert_true(sl_table_memory(t) <= 64 * 1024 + 4096);
    assert_int_equal(sl_table_decide(t, "k", 1, 0, T0 + 20000, &d), SL_OK); /* a peek needs none */
    assert_int_equal(d.remaining, 100000 - admitted);
    sl_table_free(t);
}

/* ---- refunds and settles ----------------------------------------------------------------- */

static const sl_algorithm_t all_algs[] = {SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
                                          SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA};

static void assert_same_decision(const sl_decision_t *a, const sl_decision_t *b)
{
    assert_int_equal(a->allowed, b->allowed);
    assert_int_equal(a->limit, b->limit);
    assert_int_equal(a->remaining, b->remaining);
    assert_int_equal(a->retry_after_ns, b->retry_after_ns);
    assert_int_equal(a->reset_after_ns, b->reset_after_ns);
    assert_int_equal(a->delay_ns, b->delay_ns);
}

/*
 * Decisions, refunds and settles on a table decide as the same calls on private states, absent
 * keys included (a refund there reports a fresh key; a settle past the limit stores it), and a
 * refund that leaves a state fresh drops its key.
 */
static void test_refund_settle_match_private_state(void **unused)
{
    for (size_t a = 0; a < sizeof(all_algs) / sizeof(all_algs[0]); a++) {
        sl_rule_t r = rule_of(all_algs[a], 5, 10 * SL_NS_PER_SEC);
        r.max_debt = SL_COUNT_MAX; /* debts unbounded: the table answers as the core does */
        assert_int_equal(sl_rule_prepare(&r), SL_OK);
        sl_table_t *t = table_of(&r, NULL);
        const char *keys[] = {"", "a", "a-key-that-is-much-longer-than-a-slot-holds"};
        uint64_t states[3][64] = {{0}};
        int64_t charged[3] = {T0, T0, T0};
        uint64_t rng = 11;
        for (int i = 0; i < 3000; i++) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            int k = (int)((rng >> 60) % 3);
            int op = (int)((rng >> 50) % 4);
            int64_t now = T0 + i * 41 * SL_NS_PER_MS;
            int64_t x = (int64_t)((rng >> 40) % 4), y = (int64_t)((rng >> 30) % 9);
            sl_decision_t want, got;
            if (op == 0) {
                assert_int_equal(sl_refund(&r, states[k], x, charged[k], now, &want), SL_OK);
                assert_int_equal(
                    sl_table_refund(t, keys[k], strlen(keys[k]), x, charged[k], now, &got), SL_OK);
            } else if (op == 1) {
                assert_int_equal(sl_settle(&r, states[k], x, y, charged[k], now, &want), SL_OK);
                assert_int_equal(
                    sl_table_settle(t, keys[k], strlen(keys[k]), x, y, charged[k], now, &got),
                    SL_OK);
            } else {
                assert_int_equal(sl_decide(&r, states[k], x, now, &want), SL_OK);
                assert_int_equal(sl_table_decide(t, keys[k], strlen(keys[k]), x, now, &got), SL_OK);
                if (want.allowed && x > 0)
                    charged[k] = now;
            }
            assert_same_decision(&got, &want);
            /* stored exactly when not fresh (a decide stores only on an admission) */
            uint64_t st[64];
            assert_int_equal(sl_table_get(t, keys[k], strlen(keys[k]), st), SL_OK);
            if (!sl_state_is_fresh(&r, states[k], now)) { /* the same state, whatever its past */
                unsigned char pa[256], pb[256];
                size_t n = sl_state_pack(&r, st, pa);
                assert_int_equal(sl_state_pack(&r, states[k], pb), n);
                assert_memory_equal(pa, pb, n);
            }
        }
        sl_table_free(t);
    }
}

static void test_refund_drops_fresh_key(void **unused)
{
    sl_rule_t r = rule_of(SL_SLIDING_LOG, 3, SL_NS_PER_SEC);
    sl_table_t *t = table_of(&r, NULL);
    sl_decision_t d;
    assert_true(allow(t, "k", 2, T0));
    assert_int_equal(sl_table_refund(t, "k", 1, 1, T0, T0, &d), SL_OK);
    assert_int_equal(d.remaining, 2);
    assert_int_equal(sl_table_count(t), 1);
    assert_int_equal(sl_table_refund(t, "k", 1, 1, T0, T0, &d), SL_OK);
    assert_int_equal(d.remaining, 3);
    assert_int_equal(sl_table_count(t), 0); /* fresh: dropped, as reclamation would */
    sl_table_stats_t st;
    assert_int_equal(sl_table_stats(t, &st), SL_OK);
    assert_int_equal(st.reclaimed, 1);
    /* an absent key gives nothing back; a settle past the limit stores it, in debt */
    assert_int_equal(sl_table_refund(t, "new", 3, 5, T0, T0, &d), SL_OK);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 3);
    assert_int_equal(sl_table_settle(t, "new", 3, 0, 4, T0, T0, &d), SL_OK);
    assert_false(d.allowed);
    assert_int_equal(sl_table_count(t), 1);
    assert_false(allow(t, "new", 1, T0 + SL_NS_PER_SEC - 1));
    assert_true(allow(t, "new", 1, T0 + SL_NS_PER_SEC));
    /* errors */
    assert_int_equal(sl_table_refund(t, "k", 1, -1, T0, T0, &d), SL_ECOST);
    assert_int_equal(sl_table_settle(t, "k", 1, 0, -1, T0, T0, &d), SL_ECOST);
    assert_int_equal(sl_table_settle(NULL, "k", 1, 0, 1, T0, T0, &d), SL_EINVAL);
    assert_int_equal(sl_table_settle(t, NULL, 1, 0, 1, T0, T0, &d), SL_EINVAL);
    assert_int_equal(sl_table_refund(t, "k", 1, 1, T0, T0, NULL), SL_EINVAL);
    char big[2048];
    memset(big, 'x', sizeof(big));
    assert_int_equal(sl_table_settle(t, big, sizeof(big), 0, 1, T0, T0, &d), SL_EKEY);
    sl_table_free(t);
}

/* A settle that stores a new key meets the memory cap as a decide does. */
static void test_settle_at_the_cap(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 1, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 16 * 1024};
    sl_table_t *t = table_of(&r, &cfg);
    char key[32];
    int i = 0;
    for (;; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        sl_decision_t d;
        int rc = sl_table_decide(t, key, strlen(key), 1, T0, &d);
        if (rc == SL_EFULL)
            break;
        assert_int_equal(rc, SL_OK);
    }
    sl_decision_t d;
    size_t count = sl_table_count(t);
    assert_int_equal(sl_table_settle(t, key, strlen(key), 0, 2, T0, T0, &d), SL_EFULL);
    assert_int_equal(sl_table_refund(t, key, strlen(key), 1, T0, T0, &d), SL_OK); /* absent */
    assert_int_equal(sl_table_settle(t, "k0", 2, 1, 2, T0, T0, &d), SL_OK);       /* present */
    assert_false(d.allowed);
    assert_int_equal(sl_table_count(t), count);
    sl_table_free(t);
}

/* A settle past the rule's max_debt is refused in the table as it is on a state: SL_EDEBT, the
 * key's state as it was (a peek in the reply), and an absent key is not stored. Every algorithm,
 * sliding_log's out-of-line states included. */
static void test_settle_past_max_debt(void **unused)
{
    for (sl_algorithm_t a = SL_FIXED_WINDOW; a <= SL_GCRA; a++) {
        sl_rule_t r = rule_of(a, 10, 3600 * SL_NS_PER_SEC);
        sl_table_t *t = table_of(&r, NULL);
        sl_decision_t d;
        /* the attack: a debt of 2^63 - 1 units on a key never seen, then on one in use */
        assert_int_equal(sl_table_settle(t, "victim", 6, 0, INT64_MAX, T0, T0, &d), SL_EDEBT);
        assert_int_equal(sl_table_count(t), 0);
        assert_int_equal(d.remaining, r.capacity);
        assert_true(allow(t, "used", 3, T0));
        uint64_t before[64] = {0}, after[64] = {0};
        assert_true(sl_state_size(&r) <= sizeof(before));
        assert_int_equal(sl_table_get(t, "used", 4, before), SL_OK);
        assert_int_equal(sl_table_settle(t, "used", 4, 1, INT64_MAX, T0, T0, &d), SL_EDEBT);
        assert_int_equal(sl_table_get(t, "used", 4, after), SL_OK);
        assert_memory_equal(before, after, sl_state_size(&r));
        assert_int_equal(d.remaining, r.capacity - 3);
        /* within the bound it charges: max_debt (the capacity) past what the key can admit */
        assert_int_equal(sl_table_settle(t, "used", 4, 0, r.capacity - 3 + r.max_debt, T0, T0, &d),
                         SL_OK);
        assert_false(d.allowed);
        sl_table_free(t);
    }
}

/* At the cap, a sliding_log key at its limit whose buffer is full is refused as such: a refusal
 * writes nothing and needs no room, so the cap cannot turn it into an error (which the server
 * would answer by on_store_error). An admission that needs room there gets SL_EFULL. */
static void test_refusal_needs_no_room(void **unused)
{
    (void)unused;
    sl_rule_t r = rule_of(SL_SLIDING_LOG, 10, 60 * SL_NS_PER_SEC);
    sl_budget_t *b = NULL;
    assert_int_equal(sl_budget_create(64 * 1024, &b), SL_OK);
    sl_table_config_t cfg = {.shards = 1, .budget = b, .evict_idle = true};
    sl_table_t *t = table_of(&r, &cfg);
    sl_decision_t d;
    assert_int_equal(sl_table_decide(t, "victim", 6, 5, T0, &d), SL_OK);
    assert_int_equal(sl_table_decide(t, "victim", 6, 5, T0 + 1000, &d), SL_OK); /* 2 entries */
    assert_int_equal(d.remaining, 0);
    char key[32];
    int n = 0;
    for (int rc = SL_OK; rc == SL_OK; n++) {
        snprintf(key, sizeof(key), "k%d", n);
        rc = sl_table_decide(t, key, strlen(key), 1, T0 + 3000, &d);
    }
    for (int i = 0; i < n; i++) { /* every key in use: no idle one to evict */
        snprintf(key, sizeof(key), "k%d", i);
        sl_table_decide(t, key, strlen(key), 0, T0 + 4000, &d);
    }
    assert_int_equal(sl_table_decide(t, "victim", 6, 1, T0 + 5000, &d), SL_OK);
    assert_false(d.allowed);
    assert_true(d.retry_after_ns > 0);
    assert_int_equal(sl_table_decide(t, "victim", 6, 0, T0 + 5000, &d), SL_OK);
    assert_int_equal(d.remaining, 0);
    sl_table_free(t);
    sl_budget_free(b);
}

/* ---- all or nothing ---------------------------------------------------------------------- */

static sl_multi_request_t mreq(sl_table_t *t, const char *key, int64_t cost)
{
    return (sl_multi_request_t){.table = t, .key = key, .key_len = strlen(key), .cost = cost};
}

/* Every key's state, to compare before and after. */
static void snapshot_of(sl_table_t *t, char (*keys)[32], int n, uint64_t (*out)[64])
{
    for (int i = 0; i < n; i++)
        assert_int_equal(sl_table_get(t, keys[i], strlen(keys[i]), out[i]), SL_OK);
}

/* A key twice sees its own earlier charge: api dd api dd at 150 each on 200 refuses the third
 * and charges nothing (the others report their keys as stored); at 100 each all four are
 * admitted. */
static void test_decide_all_repeated_pairs(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 200, SL_NS_PER_SEC);
    sl_table_t *t = table_of(&r, NULL);
    sl_multi_request_t q[4] = {mreq(t, "api", 150), mreq(t, "dd", 150), mreq(t, "api", 150),
                               mreq(t, "dd", 150)};
    size_t refused = 99;
    assert_int_equal(sl_table_decide_all(q, 4, T0, &refused), SL_OK);
    assert_int_equal(refused, 2);
    assert_true(q[0].decision.allowed);
    assert_int_equal(q[0].decision.remaining, 200); /* not charged: as stored */
    assert_int_equal(q[1].decision.remaining, 200);
    assert_false(q[2].decision.allowed);
    assert_int_equal(q[2].decision.remaining, 50); /* after the first one's tentative charge */
    assert_int_equal(q[3].status, SL_OK);
    assert_true(q[3].decision.allowed); /* 150 alone fits: a peek at what is stored */
    assert_int_equal(q[3].decision.remaining, 200);
    assert_int_equal(sl_table_count(t), 0);
    for (int i = 0; i < 4; i++)
        q[i].cost = 100;
    assert_int_equal(sl_table_decide_all(q, 4, T0, &refused), SL_OK);
    assert_int_equal(refused, 4);
    assert_int_equal(q[3].decision.remaining, 0);
    sl_decision_t d;
    assert_int_equal(sl_table_decide(t, "api", 3, 0, T0, &d), SL_OK);
    assert_int_equal(d.remaining, 0);
    sl_table_free(t);
}

/*
 * A refused call reports every request but the refused one alone on its key as stored: admitted
 * before it, or fitting after it: a peek (remaining as stored, no delay); refused alone after
 * it, its own refusal (an out-of-line sliding_log state, an inline one, a fresh key's cost over
 * its capacity); a max_delay rule's cost that only fits with a wait: a peek. Nothing changes.
 */
static void test_decide_all_refused_reports(void **unused)
{
    sl_rule_t rf = rule_of(SL_FIXED_WINDOW, 5, 10 * SL_NS_PER_SEC);
    sl_rule_t rl = rule_of(SL_SLIDING_LOG, 20, 10 * SL_NS_PER_SEC); /* out of line */
    sl_rule_t rg = rule_of(SL_GCRA, 2, 2 * SL_NS_PER_SEC);
    rg.burst = 1;
    rg.max_delay_ns = 3 * SL_NS_PER_SEC;
    assert_int_equal(sl_rule_prepare(&rg), SL_OK);
    sl_table_t *f = table_of(&rf, NULL), *l = table_of(&rl, NULL), *g = table_of(&rg, NULL);
    sl_decision_t d, peek_a, peek_g, alone_c;
    assert_int_equal(sl_table_decide(f, "a", 1, 2, T0, &d), SL_OK); /* 3 left */
    assert_int_equal(sl_table_decide(f, "b", 1, 5, T0, &d), SL_OK); /* none left */
    assert_int_equal(sl_table_decide(l, "c", 1, 20, T0, &d), SL_OK);
    assert_int_equal(sl_table_decide(g, "d", 1, 2, T0, &d), SL_OK); /* the burst: a wait next */
    int64_t now = T0 + SEC_HALF;
    assert_int_equal(sl_table_decide(f, "a", 1, 0, now, &peek_a), SL_OK);
    assert_int_equal(sl_table_decide(g, "d", 1, 0, now, &peek_g), SL_OK);
    assert_int_equal(sl_table_decide(l, "c", 1, 1, now, &alone_c), SL_OK);
    assert_false(alone_c.allowed);
    size_t before = sl_table_count(f) + sl_table_count(l) + sl_table_count(g);
    sl_multi_request_t q[6] = {mreq(f, "a", 2), mreq(f, "b", 1), mreq(l, "c", 1),
                               mreq(f, "e", 6), mreq(g, "d", 1), mreq(l, "new", 1)};
    size_t refused = 99;
    assert_int_equal(sl_table_decide_all(q, 6, now, &refused), SL_OK);
    assert_int_equal(refused, 1);
    assert_same_decision(&q[0].decision, &peek_a); /* admitted before the refusal: as stored */
    assert_int_equal(q[0].decision.remaining, 3);
    assert_false(q[1].decision.allowed);
    assert_true(q[1].decision.retry_after_ns > 0);
    assert_same_decision(&q[2].decision, &alone_c); /* refused alone too */
    assert_false(q[3].decision.allowed);            /* over the capacity */
    assert_int_equal(q[3].decision.retry_after_ns, -1);
    assert_same_decision(&q[4].decision, &peek_g); /* fits with a wait: not charged, no delay */
    assert_int_equal(q[4].decision.delay_ns, 0);
    assert_true(q[5].decision.allowed); /* a fresh key */
    assert_int_equal(q[5].decision.remaining, 20);
    for (int i = 0; i < 6; i++)
        assert_int_equal(q[i].status, SL_OK);
    assert_int_equal(sl_table_count(f) + sl_table_count(l) + sl_table_count(g), before);
    assert_int_equal(sl_table_decide(f, "a", 1, 0, now, &d), SL_OK);
    assert_same_decision(&d, &peek_a);
    assert_int_equal(sl_table_decide(g, "d", 1, 0, now, &d), SL_OK);
    assert_same_decision(&d, &peek_g);
    sl_table_free(f);
    sl_table_free(l);
    sl_table_free(g);
}

/*
 * Keys on many shards of two tables (one with out-of-line sliding_log states and long keys):
 * an admitted call charges exactly as the same requests decided one by one on a copy would; a
 * call whose last request is refused leaves every state byte for byte as it was.
 */
static void test_decide_all_two_tables(void **unused)
{
    sl_rule_t rl = rule_of(SL_SLIDING_LOG, 20, SL_NS_PER_SEC); /* 352 bytes: out of line */
    sl_rule_t rg = rule_of(SL_GCRA, 10, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 16, .seed = 7};
    sl_table_t *log = table_of(&rl, &cfg), *g = table_of(&rg, &cfg);
    sl_table_t *log2 = table_of(&rl, &cfg), *g2 = table_of(&rg, &cfg); /* the reference */
    char keys[32][32];
    for (int i = 0; i < 32; i++)
        snprintf(keys[i], sizeof(keys[i]), i % 3 ? "user:%d" : "a-long-tenant-key:%08d", i);
    sl_multi_request_t q[SL_MULTI_MAX];
    static uint64_t before[32][64], after[32][64]; /* zeroed past each state */
    size_t refused;
    for (int round = 0; round < 6; round++) {
        int64_t now = T0 + round * 50 * SL_NS_PER_MS;
        for (int i = 0; i < SL_MULTI_MAX; i++) {
            int k = (i * 7 + round) % 32;
            q[i] = mreq(i % 2 ? g : log, keys[k], 1);
        }
        assert_int_equal(sl_table_decide_all(q, SL_MULTI_MAX, now, &refused), SL_OK);
        assert_int_equal(refused, SL_MULTI_MAX);
        for (int i = 0; i < SL_MULTI_MAX; i++) {
            sl_decision_t d;
            int k = (i * 7 + round) % 32;
            assert_int_equal(
                sl_table_decide(i % 2 ? g2 : log2, keys[k], strlen(keys[k]), 1, now, &d), SL_OK);
            assert_same_decision(&q[i].decision, &d);
        }
    }
    /* a refusal at the end: nothing anywhere changes */
    static uint64_t g_before[32][64], g_after[32][64];
    snapshot_of(log, keys, 32, before);
    snapshot_of(g, keys, 32, g_before);
    for (int i = 0; i < 10; i++)
        q[i] = mreq(i % 2 ? g : log, keys[i + 1], 1);
    q[10] = mreq(g, keys[0], 11); /* gcra's capacity, but keys[0] was charged in round 1 */
    assert_int_equal(sl_table_decide_all(q, 11, T0 + SEC_HALF, &refused), SL_OK);
    assert_int_equal(refused, 10);
    assert_false(q[10].decision.allowed);
    assert_true(q[10].decision.retry_after_ns > 0);
    snapshot_of(log, keys, 32, after);
    snapshot_of(g, keys, 32, g_after);
    assert_memory_equal(before, after, sizeof(before));
    assert_memory_equal(g_before, g_after, sizeof(g_before));
    sl_table_free(log);
    sl_table_free(g);
    sl_table_free(log2);
    sl_table_free(g2);
}

/* Bad requests and the memory cap: an error, and nothing charged. */
static void test_decide_all_errors(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 5, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 16 * 1024};
    sl_table_t *t = table_of(&r, NULL), *capped = table_of(&r, &cfg);
    sl_multi_request_t q[SL_MULTI_MAX + 1];
    size_t refused;
    for (int i = 0; i <= SL_MULTI_MAX; i++)
        q[i] = mreq(t, "k", 1);
    assert_int_equal(sl_table_decide_all(q, SL_MULTI_MAX + 1, T0, &refused), SL_EINVAL);
    assert_int_equal(sl_table_decide_all(q, 1, T0, NULL), SL_EINVAL);
    assert_int_equal(sl_table_decide_all(NULL, 1, T0, &refused), SL_EINVAL);
    assert_int_equal(sl_table_decide_all(NULL, 0, T0, &refused), SL_OK);
    assert_int_equal(refused, 0);
    q[1].cost = -1;
    assert_int_equal(sl_table_decide_all(q, 3, T0, &refused), SL_ECOST);
    assert_int_equal(refused, 1);
    assert_int_equal(q[1].status, SL_ECOST);
    q[1] = mreq(NULL, "k", 1);
    assert_int_equal(sl_table_decide_all(q, 3, T0, &refused), SL_EINVAL);
    assert_int_equal(refused, 1);
    char big[2048];
    memset(big, 'x', sizeof(big));
    q[1] = (sl_multi_request_t){.table = t, .key = big, .key_len = sizeof(big), .cost = 1};
    assert_int_equal(sl_table_decide_all(q, 3, T0, &refused), SL_EKEY);
    assert_int_equal(sl_table_count(t), 0);

    /* fill the capped table, then one call with a key of each: SL_EFULL, t untouched */
    char key[32];
    for (int i = 0;; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        sl_decision_t d;
        if (sl_table_decide(capped, key, strlen(key), 1, T0, &d) == SL_EFULL)
            break;
    }
    q[0] = mreq(t, "k", 1);
    q[1] = mreq(capped, key, 1);
    assert_int_equal(sl_table_decide_all(q, 2, T0, &refused), SL_EFULL);
    assert_int_equal(refused, 1);
    assert_int_equal(q[1].status, SL_EFULL);
    assert_int_equal(sl_table_count(t), 0);
    q[1] = mreq(capped, "k0", 1); /* present: no room needed */
    assert_int_equal(sl_table_decide_all(q, 2, T0, &refused), SL_OK);
    assert_int_equal(refused, 2);
    assert_int_equal(sl_table_count(t), 1);
    sl_table_free(t);
    sl_table_free(capped);
}

/* Many new keys in one small shard: the call grows it as far as it needs at once. */
static void test_decide_all_grows(void **unused)
{
    sl_rule_t r = rule_of(SL_GCRA, 5, SL_NS_PER_SEC);
    sl_table_config_t cfg = {.shards = 1};
    sl_table_t *t = table_of(&r, &cfg);
    char keys[SL_MULTI_MAX][32];
    sl_multi_request_t q[SL_MULTI_MAX];
    for (int i = 0; i < SL_MULTI_MAX; i++) {
        snprintf(keys[i], sizeof(keys[i]), "new-%d", i);
        q[i] = mreq(t, keys[i], 1);
    }
    size_t refused;
    assert_int_equal(sl_table_decide_all(q, SL_MULTI_MAX, T0, &refused), SL_OK);
    assert_int_equal(refused, SL_MULTI_MAX);
    assert_int_equal(sl_table_count(t), SL_MULTI_MAX);
    for (int i = 0; i < SL_MULTI_MAX; i++) {
        sl_decision_t d;
        assert_int_equal(sl_table_decide(t, keys[i], strlen(keys[i]), 0, T0, &d), SL_OK);
        assert_int_equal(d.remaining, r.capacity - 1);
    }
    sl_table_free(t);
}

/* A key moves between tables of one algorithm with its usage: the override case (a key that
 * used 5 of 10 gets a limit of 2, then loses it again), for every algorithm, against the
 * converted state sl_state_convert() gives; one home at a time. */
static void test_adopt_carries_usage(void **unused)
{
    sl_algorithm_t algs[] = {SL_FIXED_WINDOW,    SL_SLIDING_LOG,  SL_SLIDING_WINDOW,
                             SL_SLIDING_BUCKETS, SL_TOKEN_BUCKET, SL_GCRA};
    const char *keys[] = {"u", "a-key-that-is-much-longer-than-a-slot-holds-in-any-table"};
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        for (size_t k = 0; k < 2; k++) {
            const char *key = keys[k];
            size_t len = strlen(key);
            sl_rule_t r10 = rule_of(algs[a], 10, 10 * SL_NS_PER_SEC);
            sl_rule_t r2 = rule_of(algs[a], 2, 10 * SL_NS_PER_SEC);
            sl_table_t *base = table_of(&r10, NULL), *ov = table_of(&r2, NULL);
            for (int i = 0; i < 5; i++)
                assert_true(allow(base, key, 1, T0 + i * SL_NS_PER_MS));
            int64_t now = T0 + 10 * SL_NS_PER_MS;
            sl_decision_t d;
            assert_int_equal(sl_table_decide(base, key, len, 0, now, &d), SL_OK);
            int64_t left = d.remaining;
            uint64_t before[2048 / 8], want[2048 / 8], got[2048 / 8];
            assert_true(sl_state_size(&r10) <= sizeof before);
            assert_int_equal(sl_table_get(base, key, len, before), SL_OK);
            assert_int_equal(sl_state_convert(&r10, before, &r2, want, now), SL_OK);

            assert_int_equal(sl_table_adopt(ov, key, len, &base, 1, now), 1);
            assert_int_equal(sl_table_count(base), 0); /* one home */
            assert_int_equal(sl_table_get(ov, key, len, got), SL_OK);
            assert_memory_equal(got, want, sl_state_size(&r2));
            /* over its new limit of 2: refused, not a fresh quota */
            assert_false(allow(ov, key, 1, now));
            /* already home: nothing moves */
            assert_int_equal(sl_table_adopt(ov, key, len, &base, 1, now), 0);

            /* the override goes: back with the usage it has (what it had, never less) */
            assert_int_equal(sl_table_adopt(base, key, len, &ov, 1, now), 1);
            assert_int_equal(sl_table_count(ov), 0);
            assert_int_equal(sl_table_decide(base, key, len, 0, now, &d), SL_OK);
            if (d.remaining > left)
                fail_msg("%s: %lld left after the round trip, %lld before",
                         sl_algorithm_name(algs[a]), (long long)d.remaining, (long long)left);
            /* a key no table holds: nothing */
            assert_int_equal(sl_table_adopt(ov, "nobody", 6, &base, 1, now), 0);
            assert_int_equal(sl_table_count(ov), 0);
            sl_table_free(base);
            sl_table_free(ov);
        }
    }
}

/* A live copy moves, fresh ones do not count, and every other copy goes; of two live copies
 * the one recording more usage stays. */
static void test_adopt_one_home(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, 10 * SL_NS_PER_SEC);
    sl_rule_t r5 = rule_of(SL_FIXED_WINDOW, 5, 10 * SL_NS_PER_SEC);
    sl_rule_t r3 = rule_of(SL_FIXED_WINDOW, 3, 10 * SL_NS_PER_SEC);
    sl_table_t *to = table_of(&r, NULL), *a = table_of(&r5, NULL), *b = table_of(&r3, NULL);
    sl_table_t *from[2] = {a, b};
    assert_true(allow(a, "k", 2, T0));                      /* a fresh copy at T0 + 20 s */
    assert_true(allow(b, "k", 3, T0 + 15 * SL_NS_PER_SEC)); /* live */
    int64_t now = T0 + 16 * SL_NS_PER_SEC;
    assert_int_equal(sl_table_adopt(to, "k", 1, from, 2, now), 1);
    assert_int_equal(sl_table_count(a) + sl_table_count(b), 0);
    sl_decision_t d;
    assert_int_equal(sl_table_decide(to, "k", 1, 0, now, &d), SL_OK);
    assert_int_equal(d.remaining, 7); /* b's 3 */

    assert_true(allow(a, "k", 1, now)); /* an older copy made meanwhile */
    assert_int_equal(sl_table_adopt(to, "k", 1, from, 2, now), 0);
    assert_int_equal(sl_table_count(a), 0);
    assert_int_equal(sl_table_decide(to, "k", 1, 0, now, &d), SL_OK);
    assert_int_equal(d.remaining, 7);

    assert_true(allow(b, "k", 3, now)); /* two live copies: the one with more usage stays */
    assert_true(allow(to, "k", 1, now));
    assert_int_equal(sl_table_adopt(to, "k", 1, from, 2, now), 0); /* 4 used > 3 */
    assert_int_equal(sl_table_count(b), 0);
    assert_true(allow(a, "k", 5, now));
    assert_int_equal(sl_table_adopt(to, "k", 1, from, 2, now), 1); /* 5 used > 4 */
    assert_int_equal(sl_table_count(a), 0);
    assert_int_equal(sl_table_decide(to, "k", 1, 0, now, &d), SL_OK);
    assert_int_equal(d.remaining, 5);
    sl_table_free(to);
    sl_table_free(a);
    sl_table_free(b);
}

static void test_adopt_errors(void **unused)
{
    sl_rule_t r = rule_of(SL_FIXED_WINDOW, 10, 10 * SL_NS_PER_SEC);
    sl_rule_t g = rule_of(SL_GCRA, 10, 10 * SL_NS_PER_SEC);
    sl_table_t *to = table_of(&r, NULL), *a = table_of(&r, NULL), *other = table_of(&g, NULL);
    assert_true(allow(a, "k", 1, T0));
    sl_table_t *twice[2] = {a, a};
    assert_int_equal(sl_table_adopt(to, "k", 1, twice, 2, T0), SL_EINVAL);
    assert_int_equal(sl_table_adopt(to, "k", 1, &to, 1, T0), SL_EINVAL);
    assert_int_equal(sl_table_adopt(to, "k", 1, NULL, 1, T0), SL_EINVAL);
    assert_int_equal(sl_table_adopt(to, "k", 1, &other, 1, T0), SL_EALGORITHM);
    char big[2000];
    memset(big, 'x', sizeof big);
    assert_int_equal(sl_table_adopt(to, big, sizeof big, &a, 1, T0), SL_EKEY);
    assert_int_equal(sl_table_count(a), 1); /* nothing changed */
    assert_int_equal(sl_table_count(to), 0);

    /* no room in `to`: the key stays where it was */
    sl_table_config_t cfg = {.shards = 1, .max_bytes = 1};
    sl_table_t *tiny = NULL;
    assert_int_equal(sl_table_create(&r, &cfg, &tiny), SL_OK);
    for (int i = 0; sl_table_can_hold(&r, &cfg, sl_table_count(tiny) + 1) && i < 100000; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "f%d", i);
        sl_decision_t d;
        if (sl_table_decide(tiny, k, (size_t)n, 1, T0, &d) != SL_OK)
            break;
    }
    int rc = SL_OK;
    for (int i = 0; i < 100000 && rc != SL_EFULL; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "g%d", i);
        sl_decision_t d;
        rc = sl_table_decide(tiny, k, (size_t)n, 1, T0, &d);
    }
    assert_int_equal(rc, SL_EFULL);
    assert_int_equal(sl_table_adopt(tiny, "k", 1, &a, 1, T0), SL_EFULL);
    assert_int_equal(sl_table_count(a), 1);
    sl_table_free(tiny);
    sl_table_free(to);
    sl_table_free(a);
    sl_table_free(other);
}

static void test_bad_config(void **unused)
{
    sl_rule_t r = rule_of(SL_GCRA, 1, SL_NS_PER_SEC);
    sl_table_t *t = NULL;
    sl_table_config_t cfg = {.shards = 3};
    assert_int_equal(sl_table_create(&r, &cfg, &t), SL_EINVAL);
    assert_int_equal(sl_table_create(NULL, NULL, &t), SL_EINVAL);
    sl_rule_t unprepared = {0};
    assert_int_equal(sl_table_create(&unprepared, NULL, &t), SL_EINVAL);
    /* a cap below an empty table's size: the table is made, and refuses every new key */
    sl_table_config_t tiny = {.max_bytes = 1000};
    assert_false(sl_table_can_hold(&r, &tiny, 1));
    assert_int_equal(sl_table_create(&r, &tiny, &t), SL_OK);
    sl_decision_t d;
    assert_int_equal(sl_table_decide(t, "k", 1, 1, T0, &d), SL_EFULL);
    assert_int_equal(sl_table_decide(t, "k", 1, 0, T0, &d), SL_OK); /* a peek stores nothing */
    sl_table_free(t);
    t = NULL;
    /* the cap bounds the initial size: a huge initial_keys is clipped, not allocated */
    sl_table_config_t clipped = {.max_bytes = 1 << 20, .initial_keys = 1000000};
    assert_int_equal(sl_table_create(&r, &clipped, &t), SL_OK);
    assert_true(sl_table_memory(t) <= (1 << 20) + 65536);
    assert_true(allow(t, "first", 1, T0));
    sl_table_free(t);
    sl_table_free(NULL);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "foreach-bounded") == 0)
        return foreach_bounded_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_private_state),
        cmocka_unit_test(test_absent_key_matches_fresh_state),
        cmocka_unit_test(test_key_limits),
        cmocka_unit_test(test_only_admissions_store),
        cmocka_unit_test(test_growth_keeps_every_key),
        cmocka_unit_test(test_reset_get_put),
        cmocka_unit_test(test_foreach_round_trip),
        cmocka_unit_test(test_foreach_stops),
        cmocka_unit_test(test_foreach_visitor_calls_into_tables),
        cmocka_unit_test(test_foreach_bounded_memory),
        cmocka_unit_test(test_reclaim_drops_only_fresh),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_evict_idle_keeps_hot_keys),
        cmocka_unit_test(test_evict_least_usage_first),
        cmocka_unit_test(test_no_eviction_by_default),
        cmocka_unit_test(test_budget_shared_and_balanced),
        cmocka_unit_test(test_table_evict_frees),
        cmocka_unit_test(test_batch_equals_sequential),
        cmocka_unit_test(test_put_refuses_corrupt_states),
        cmocka_unit_test(test_lookup_ends_after_removals),
        cmocka_unit_test(test_peek_is_never_delayed),
        cmocka_unit_test(test_refund_settle_match_private_state),
        cmocka_unit_test(test_refund_drops_fresh_key),
        cmocka_unit_test(test_settle_at_the_cap),
        cmocka_unit_test(test_settle_past_max_debt),
        cmocka_unit_test(test_refusal_needs_no_room),
        cmocka_unit_test(test_decide_all_repeated_pairs),
        cmocka_unit_test(test_decide_all_refused_reports),
        cmocka_unit_test(test_decide_all_two_tables),
        cmocka_unit_test(test_decide_all_errors),
        cmocka_unit_test(test_decide_all_grows),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_can_hold),
        cmocka_unit_test(test_adopt_carries_usage),
        cmocka_unit_test(test_adopt_one_home),
        cmocka_unit_test(test_adopt_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
