/*
 * test_request_store.c - the request-store seam (store/request_store.h):
 *   - the memory store, reached only through its table, decides exactly as a table of the same
 *     numbers does, completing every decision at once (fn is never called);
 *   - its decide_all charges every pair or none; an override's handle keeps the key's usage
 *     apart, and adopt moves it; cold_start saturates a fresh key;
 *   - an engine over the memory store gets the same decisions as the table;
 *   - a URL no store takes is refused by naming the forms the stores take;
 *   - the engine's files never name a concrete store (a word-level scan of their code).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prop/gen.h"
#include "engine/engine.h"
#include "store/redis_client.h"
#include "store/request_stores.h"
#include "tmpdir.h"

#define NS_PER_MS  INT64_C(1000000)
#define NS_PER_SEC INT64_C(1000000000)
#define STEPS      2000

static const int64_t t0_ns = INT64_C(1700000000) * NS_PER_SEC;

static request_store_t *memory_open(void)
{
    store_config_t cfg = {.key_max = 1024};
    request_store_t *s = NULL;
    char err[REQUEST_STORE_ERR_MAX];
    assert_int_equal(request_store_open("memory", &cfg, &s, err), 0);
    assert_string_equal(s->ops->name, "memory");
    return s;
}

static void never_called(void *arg, int status, const sl_decision_t *d, const char *err)
{
    (void)arg;
    (void)status;
    (void)d;
    (void)err;
    fail_msg("a store that completes at once called back");
}

static void assert_same_decision(const sl_decision_t *a, const sl_decision_t *b)
{
    assert_int_equal(a->allowed, b->allowed);
    assert_int_equal(a->remaining, b->remaining);
    assert_int_equal(a->retry_after_ns, b->retry_after_ns);
    assert_int_equal(a->reset_after_ns, b->reset_after_ns);
    assert_int_equal(a->limit, b->limit);
}

static int store_decide(request_store_t *s, store_rule_t *r, void *handle, const sl_rule_t *num,
                        const char *key, const store_request_t *req, int64_t now_ns,
                        sl_decision_t *d)
{
    store_target_t tg = {.rule = r,
                         .handle = handle,
                         .name = "r",
                         .numbers = num,
                         .key = key,
                         .key_len = strlen(key),
                         .closed = true};
    return s->ops->decide(s, NULL, &tg, req, now_ns, d, never_called, NULL);
}

static int by_units_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Seeded holds on many keys of an in-flight rule: rule_in_flight's total is their sum, and its
 * top n the n largest per-key units, most first, each naming a key that holds that much (a key
 * of more than 64 bytes named by its first 64, its length whole). */
static void test_memory_in_flight_top(void **unused)
{
    (void)unused;
    enum { KEYS = 60, LIMIT = 8 };
    prng_t g = {prop_seed() ^ 0x1f11};
    for (int round = 0; round < 20; round++) {
        sl_rule_t rule;
        assert_int_equal(sl_rule_init(&rule, SL_CONCURRENCY, LIMIT, 3600 * NS_PER_SEC), SL_OK);
        request_store_t *s = memory_open();
        store_rule_t *r = NULL;
        assert_int_equal(s->ops->rule_new(s, &rule, &r), 0);
        int64_t units[KEYS] = {0}, sorted[KEYS], sum = 0;
        char keys[KEYS][96];
        for (int k = 0; k < KEYS; k++) {
            int pad = prng_chance(&g, 10) ? 80 : 0; /* some keys longer than a top keeps */
            snprintf(keys[k], sizeof keys[k], "%0*d", pad > 0 ? pad : 1, k);
            for (int64_t left = prng_range(&g, 0, LIMIT); left > 0;) {
                sl_hold_t hold;
                store_request_t req = {
                    .cost = prng_range(&g, 1, left), .hold_op = STORE_HOLD_ACQUIRE, .hold = &hold};
                sl_decision_t d;
                assert_int_equal(store_decide(s, r, NULL, &rule, keys[k], &req, t0_ns, &d), SL_OK);
                assert_true(d.allowed);
                units[k] += req.cost;
                left -= req.cost;
            }
            sum += units[k];
        }
        memcpy(sorted, units, sizeof units);
        qsort(sorted, KEYS, sizeof sorted[0], by_units_desc);
        size_t holding = 0;
        while (holding < KEYS && sorted[holding] > 0)
            holding++;
        const size_t ns[] = {1, 5, 10, 100};
        for (size_t t = 0; t < 4; t++) {
            topk_item_t top[100];
            size_t got = 999;
            assert_int_equal(s->ops->rule_in_flight(r, t0_ns + NS_PER_SEC, top, ns[t], &got), sum);
            assert_int_equal(got, ns[t] < holding ? ns[t] : holding);
            for (size_t i = 0; i < got; i++) {
                assert_int_equal((int64_t)top[i].count, sorted[i]);
                assert_int_equal(top[i].error, 0);
                int k = -1;
                for (int j = 0; j < KEYS && k < 0; j++)
                    if (top[i].key_len == strlen(keys[j]) &&
                        memcmp(top[i].key, keys[j],
                               top[i].key_len < TOPK_KEY_INLINE ? top[i].key_len
                                                                : TOPK_KEY_INLINE) == 0 &&
                        (top[i].key_len <= TOPK_KEY_INLINE || units[j] == sorted[i]))
                        k = j;
                assert_true(k >= 0);
                assert_int_equal(units[k], sorted[i]);
            }
        }
        /* no top asked: the total alone, as /metrics asks */
        assert_int_equal(s->ops->rule_in_flight(r, t0_ns, NULL, 0, NULL), sum);
        s->ops->rule_free(r);
        request_store_close(s);
    }
}

/* Seeded random decisions, peeks and settles, through the table of functions and on a table of
 * the same numbers: the same answers, every one at once. */
static void test_memory_store_decides_as_a_table(void **unused)
{
    (void)unused;
    prng_t g = {prop_seed()};
    for (int alg = SL_FIXED_WINDOW; alg <= SL_GCRA; alg++) {
        sl_rule_t rule;
        int64_t window_ns = 10 * NS_PER_SEC;
        assert_int_equal(sl_rule_init(&rule, (sl_algorithm_t)alg, 20, window_ns), SL_OK);
        request_store_t *s = memory_open();
        store_rule_t *r = NULL;
        assert_int_equal(s->ops->rule_new(s, &rule, &r), 0);
        sl_table_config_t tc = {.key_max = 1024, .shards = 4};
        sl_table_t *t = NULL;
        assert_int_equal(sl_table_create(&rule, &tc, &t), SL_OK);
        int64_t now_ns = t0_ns;
        for (int i = 0; i < STEPS; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", (int)prng_range(&g, 0, 7));
            now_ns += prng_range(&g, 0, window_ns / 20);
            store_request_t req = {.cost = prng_range(&g, 0, 4)};
            sl_decision_t want, got;
            int want_st;
            if (prng_chance(&g, 15)) {
                req = (store_request_t){.settle = true,
                                        .reserved = prng_range(&g, 0, 4),
                                        .actual = prng_range(&g, 0, 4),
                                        .charged_ns = -1};
                want_st = sl_table_settle(t, key, strlen(key), req.reserved, req.actual, now_ns,
                                          now_ns, &want);
            } else {
                want_st = sl_table_decide(t, key, strlen(key), req.cost, now_ns, &want);
            }
            int st = store_decide(s, r, NULL, &rule, key, &req, now_ns, &got);
            assert_int_not_equal(st, STORE_PENDING);
            assert_int_equal(st, want_st);
            if (st == SL_OK) {
                assert_same_decision(&got, &want);
            }
        }
        sl_table_free(t);
        s->ops->rule_free(r);
        request_store_close(s);
    }
}

static sl_decision_t peek(request_store_t *s, store_rule_t *r, void *handle, const sl_rule_t *num,
                          const char *key, int64_t now_ns)
{
    store_request_t req = {.cost = 0};
    sl_decision_t d;
    assert_int_equal(store_decide(s, r, handle, num, key, &req, now_ns, &d), SL_OK);
    return d;
}

/* Two pairs, the second of which cannot take its cost: neither is charged. */
static void test_memory_decide_all_is_all_or_nothing(void **unused)
{
    (void)unused;
    sl_rule_t rule;
    assert_int_equal(sl_rule_init(&rule, SL_FIXED_WINDOW, 5, 60 * NS_PER_SEC), SL_OK);
    request_store_t *s = memory_open();
    store_rule_t *r = NULL;
    assert_int_equal(s->ops->rule_new(s, &rule, &r), 0);
    store_pair_t pairs[2] = {
        {.tg = {.rule = r, .name = "r", .numbers = &rule, .key = "a", .key_len = 1}, .cost = 3},
        {.tg = {.rule = r, .name = "r", .numbers = &rule, .key = "b", .key_len = 1}, .cost = 3},
    };
    sl_decision_t d[2];
    size_t at = 9;
    assert_int_equal(s->ops->decide_all(s, NULL, pairs, 2, t0_ns, d, &at, NULL, NULL), SL_OK);
    assert_int_equal(at, 2); /* both charged */
    assert_int_equal(peek(s, r, NULL, &rule, "a", t0_ns).remaining, 2);
    assert_int_equal(s->ops->decide_all(s, NULL, pairs, 2, t0_ns, d, &at, NULL, NULL), SL_OK);
    assert_int_equal(at, 0); /* "a" has 2 left, not 3: the whole refused */
    assert_false(d[0].allowed);
    assert_int_equal(peek(s, r, NULL, &rule, "a", t0_ns).remaining, 2);
    assert_int_equal(peek(s, r, NULL, &rule, "b", t0_ns).remaining, 2);
    s->ops->rule_free(r);
    request_store_close(s);
}

/* An override's handle is a place of its own for the key; adopt moves the usage there. */
static void test_memory_override_handles(void **unused)
{
    (void)unused;
    sl_rule_t rule, ov;
    assert_int_equal(sl_rule_init(&rule, SL_FIXED_WINDOW, 10, 60 * NS_PER_SEC), SL_OK);
    assert_int_equal(sl_rule_init(&ov, SL_FIXED_WINDOW, 100, 60 * NS_PER_SEC), SL_OK);
    request_store_t *s = memory_open();
    store_rule_t *r = NULL;
    assert_int_equal(s->ops->rule_new(s, &rule, &r), 0);
    void *h = NULL, *again = NULL;
    assert_int_equal(s->ops->override(r, &ov, &h), 0);
    assert_non_null(h);
    assert_int_equal(s->ops->override(r, &ov, &again), 0);
    assert_ptr_equal(h, again); /* one per numbers */
    store_request_t req = {.cost = 4};
    sl_decision_t d;
    assert_int_equal(store_decide(s, r, NULL, &rule, "k", &req, t0_ns, &d), SL_OK);
    assert_int_equal(peek(s, r, h, &ov, "k", t0_ns).remaining, 100); /* apart */
    s->ops->adopt(r, h, "k", 1, t0_ns);
    assert_int_equal(peek(s, r, h, &ov, "k", t0_ns).remaining, 96); /* moved, usage kept */
    s->ops->overrides_gone(r, t0_ns);
    assert_int_equal(peek(s, r, NULL, &rule, "k", t0_ns).remaining, 6); /* back */
    s->ops->rule_free(r);
    request_store_close(s);
}

/* cold_start: a key first seen in the closed window has used its whole quota (a peek, a cost
 * and a settle alike: a settle's debt on a key never seen does not make it fresh); the window
 * goes on when the rule's numbers change (migrate); it applies only to targets marked closed. */
static void test_memory_cold_start(void **unused)
{
    (void)unused;
    sl_rule_t rule, wider;
    assert_int_equal(sl_rule_init(&rule, SL_GCRA, 10, 60 * NS_PER_SEC), SL_OK);
    assert_int_equal(sl_rule_init(&wider, SL_GCRA, 20, 60 * NS_PER_SEC), SL_OK);
    request_store_t *s = memory_open();
    assert_true(s->ops->has_snapshots && s->ops->cold_start != NULL);
    store_rule_t *r = NULL, *r2 = NULL;
    assert_int_equal(s->ops->rule_new(s, &rule, &r), 0);
    s->ops->cold_start(r, t0_ns, t0_ns + 60 * NS_PER_SEC, true);
    assert_int_equal(peek(s, r, NULL, &rule, "new", t0_ns + NS_PER_SEC).remaining, 0);
    store_request_t one = {.cost = 1};
    sl_decision_t d;
    assert_int_equal(store_decide(s, r, NULL, &rule, "new", &one, t0_ns + NS_PER_SEC, &d), SL_OK);
    assert_false(d.allowed); /* saturated at t0: nothing back yet */
    assert_int_equal(store_decide(s, r, NULL, &rule, "old", &one, t0_ns + 61 * NS_PER_SEC, &d),
                     SL_OK);
    assert_true(d.allowed); /* first seen after the window: fresh */

    /* a settle of 1 more than reserved on a key never seen: saturated first, then in debt */
    store_request_t debt = {.settle = true, .reserved = 1, .actual = 2, .charged_ns = -1};
    assert_int_equal(store_decide(s, r, NULL, &rule, "settled", &debt, t0_ns + NS_PER_SEC, &d),
                     SL_OK);
    sl_decision_t want;
    unsigned char state[64];
    assert_int_equal(sl_state_saturate(&rule, state, t0_ns), SL_OK);
    assert_int_equal(sl_settle(&rule, state, 1, 2, t0_ns + NS_PER_SEC, t0_ns + NS_PER_SEC, &want),
                     SL_OK);
    assert_same_decision(&d, &want);
    assert_false(d.allowed);

    /* the numbers change: the window goes on in the new rule's data */
    assert_int_equal(s->ops->rule_new(s, &wider, &r2), 0);
    s->ops->rule_migrate(r2, r, t0_ns + 2 * NS_PER_SEC);
    assert_int_equal(peek(s, r2, NULL, &wider, "unseen", t0_ns + 2 * NS_PER_SEC).remaining, 0);

    /* a target not marked closed (the rule's cold_start is open now) is not saturated */
    store_target_t tg = {
        .rule = r2, .name = "r", .numbers = &wider, .key = "open", .key_len = 4, .closed = false};
    assert_int_equal(
        s->ops->decide(s, NULL, &tg, &one, t0_ns + 2 * NS_PER_SEC, &d, never_called, NULL), SL_OK);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 20);
    s->ops->rule_free(r2);
    s->ops->rule_free(r);
    request_store_close(s);
}

/* The engine over the memory store answers what a table of the rule's numbers answers. */
static void test_engine_gets_the_stores_decisions(void **unused)
{
    (void)unused;
    char serr[CONFIG_STORE_ERR_MAX], err[ENGINE_ERR_MAX];
    static char path[TMPDIR_MAX + 32];
    tmpdir_file(path, sizeof path, "store", ".db");
    config_store_t *cs = NULL;
    assert_int_equal(config_store_open(path, &cs, serr), 0);
    assert_int_equal(config_store_put_rule(cs, "tb",
                                           "{\"algorithm\":\"token_bucket\",\"limit\":7,"
                                           "\"window\":\"10s\"}",
                                           NULL, serr),
                     0);
    config_store_close(cs);
    engine_settings_t ec = {.store_url = path,
                            .workers = 1,
                            .key_max = 1024,
                            .override_ttl_ns = NS_PER_SEC,
                            .request_store = "memory"};
    engine_t *e = NULL;
    assert_int_equal(engine_create(&ec, &e, err), 0);
    assert_false(engine_is_remote(e));
    assert_string_equal(engine_store_name(e), "memory");
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    rule_state_t *rs = engine_find(w, "tb", 2);
    assert_non_null(rs);
    sl_rule_t rule;
    assert_int_equal(sl_rule_init(&rule, SL_TOKEN_BUCKET, 7, 10 * NS_PER_SEC), SL_OK);
    sl_table_config_t tc = {.key_max = 1024, .shards = 4};
    sl_table_t *t = NULL;
    assert_int_equal(sl_table_create(&rule, &tc, &t), SL_OK);
    prng_t g = {prop_seed()};
    int64_t now_ns = t0_ns;
    for (int i = 0; i < STEPS; i++) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", (int)prng_range(&g, 0, 5));
        int64_t cost = prng_range(&g, 0, 3);
        now_ns += prng_range(&g, 0, NS_PER_SEC / 2);
        engine_decision_t got;
        sl_decision_t want;
        assert_int_equal(engine_decide(w, rs, key, (size_t)n, cost, now_ns, &got), ENGINE_OK);
        assert_int_equal(sl_table_decide(t, key, (size_t)n, cost, now_ns, &want), SL_OK);
        assert_same_decision(&got.d, &want);
        assert_false(got.store_error);
    }
    engine_worker_end(w);
    sl_table_free(t);
    engine_free(e);
}

static void test_unknown_url_names_the_forms(void **unused)
{
    (void)unused;
    store_config_t cfg = {.key_max = 1024};
    request_store_t *s = NULL;
    char err[REQUEST_STORE_ERR_MAX];
    assert_int_equal(request_store_open("memcache://x:1", &cfg, &s, err), -1);
    assert_string_equal(err, "'memcache://x:1': expected redis://[[USER]:PASSWORD@]host:port or "
                             "redis-cluster://[[USER]:PASSWORD@]host:port,host:port,...");
    /* a password in a URL no store takes is not shown either */
    assert_int_equal(request_store_open("rediss://:s3cret@x:1", &cfg, &s, err), -1);
    assert_null(strstr(err, "s3cret"));
    assert_non_null(strstr(err, "'rediss://***@x:1'"));
}

/* The Redis store's URL: [[USER]:PASSWORD@] before the nodes, percent-decoded; every error
 * shows the URL with "***" for the password. */
static void test_redis_url_password(void **unused)
{
    (void)unused;
    rc_config_t c;
    char err[RC_ERR_MAX];
    assert_int_equal(rc_parse_url("redis://h:1", &c, err), 0);
    assert_string_equal(c.password, "");
    assert_int_equal(rc_parse_url("redis://:s3cret@h:1", &c, err), 0);
    assert_string_equal(c.user, "");
    assert_string_equal(c.password, "s3cret");
    assert_string_equal(c.host[0], "h");
    assert_int_equal(c.port[0], 1);
    assert_int_equal(rc_parse_url("redis://alice:p%40ss%3Aw@rd@h:2", &c, err), 0);
    assert_string_equal(c.user, "alice");
    assert_string_equal(c.password, "p@ss:w@rd"); /* a raw '@' too: the last one ends it */
    assert_int_equal(rc_parse_url("redis-cluster://:pw@a:1,b:2", &c, err), 0);
    assert_int_equal(c.nseeds, 2);
    assert_string_equal(c.password, "pw");
    static const char *const bad[] = {
        "redis://s3cret@h:1",     /* no ':': not a password */
        "redis://alice:@h:1",     /* empty */
        "redis://:s3cret%4@h:1",  /* bad encoding */
        "redis://:s3cret%00@h:1", /* a NUL */
        "redis://:s3cret@h",      /* no port */
        "redis://:s3cret@h:x",    /* bad port */
        "redis://:s3cret@",       /* no node */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (rc_parse_url(bad[i], &c, err) != -1)
            fail_msg("%s: accepted", bad[i]);
        if (strstr(err, "s3cret") != NULL || strstr(err, "***@") == NULL)
            fail_msg("%s: '%s'", bad[i], err);
    }
}

/* Blanks s's comments and string and character literals, in place. */
static void blank(char *s)
{
    long n = (long)strlen(s);
    for (long i = 0; i < n; i++) {
        if (s[i] == '/' && s[i + 1] == '*') {
            char *end = strstr(s + i + 2, "*/");
            long stop = end != NULL ? end - s + 2 : n;
            memset(s + i, ' ', (size_t)(stop - i));
            i = stop - 1;
        } else if (s[i] == '/' && s[i + 1] == '/') {
            while (i < n && s[i] != '\n') {
                s[i++] = ' ';
            }
        } else if (s[i] == '"' || s[i] == '\'') {
            char q = s[i];
            long j = i + 1;
            while (j < n && s[j] != q) {
                j += s[j] == '\\' ? 2 : 1;
            }
            j = j < n ? j : n;
            memset(s + i + 1, ' ', (size_t)(j - i - 1));
            i = j;
        }
    }
}

/* The file's code: its text with comments and literals blanked. */
static char *code_of(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    s[n] = '\0';
    blank(s);
    return s;
}

/* A word naming a concrete store: the Redis store's or the memory store's own names. */
static const char *concrete_word(const char *code)
{
    static const char *const names[] = {"redis", "memory_store", "mem_", "sl_table_", "olc_"};
    static char word[128];
    for (const char *p = code; *p != '\0';) {
        if (!isalpha((unsigned char)*p) && *p != '_') {
            p++;
            continue;
        }
        size_t len = 0;
        while ((isalnum((unsigned char)p[len]) || p[len] == '_') && len < sizeof word - 1) {
            word[len] = (char)tolower((unsigned char)p[len]);
            len++;
        }
        word[len] = '\0';
        p += len;
        while (isalnum((unsigned char)*p) || *p == '_') {
            p++;
        }
        if (strcmp(word, "sl_table_stats_t") == 0) {
            continue; /* the core's record of a store's figures (request_store.h's rule_stats) */
        }
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strstr(word, names[i]) == word || (i == 0 && strstr(word, names[i]) != NULL)) {
                return word;
            }
        }
    }
    return NULL;
}

static void test_concrete_word_is_found(void **unused)
{
    (void)unused;
    assert_string_equal(concrete_word("x = w->redis;"), "redis");
    assert_string_equal(concrete_word("sl_table_decide(t)"), "sl_table_decide");
    assert_string_equal(concrete_word("e->cfg.redis_timeout_ns"), "redis_timeout_ns");
    char code[] = "s->ops->decide(s, l); /* redis */ x = \"redis\"; // redis";
    blank(code);
    assert_null(concrete_word(code));
    assert_null(concrete_word("sl_table_stats_t st;"));
}

/* The engine's files reach the request store only through its table. */
static void test_engine_names_no_concrete_store(void **unused)
{
    (void)unused;
    static const char *const files[] = {"engine.c",          "ruleset.c",     "engine_decide.c",
                                        "engine_snapshot.c", "allowall.c",    "overrides.c",
                                        "inline_rules.c",    "engine_impl.h", "override_known.c"};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", __FILE__); /* .../tests/unit/test_request_store.c */
    char *cut = strstr(dir, "/tests/unit/");
    assert_non_null(cut);
    *cut = '\0';
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/src/engine/%s", dir, files[i]);
        char *code = code_of(path);
        const char *word = concrete_word(code);
        if (word != NULL) {
            fail_msg("src/engine/%s names a concrete request store: '%s'", files[i], word);
        }
        free(code);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_store_decides_as_a_table),
        cmocka_unit_test(test_memory_decide_all_is_all_or_nothing),
        cmocka_unit_test(test_memory_in_flight_top),
        cmocka_unit_test(test_memory_override_handles),
        cmocka_unit_test(test_memory_cold_start),
        cmocka_unit_test(test_engine_gets_the_stores_decisions),
        cmocka_unit_test(test_unknown_url_names_the_forms),
        cmocka_unit_test(test_redis_url_password),
        cmocka_unit_test(test_concrete_word_is_found),
        cmocka_unit_test(test_engine_names_no_concrete_store),
    };
    if (tmpdir_create("request-store") != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, tmpdir_remove);
}
