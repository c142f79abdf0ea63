/*
 * test_engine_overrides.c - per-key overrides when the config store is slow, stuck or failing
 * (white-box: src/engine/overrides.c, override_known.c), over a real SQLite store and, where
 * lookups go to the config thread, a real config thread and libuv loop:
 *   - more lookups than a loop may have in flight wait their turn (back-pressure), in order,
 *     counted; none is decided by on_store_error, every blocked key stays blocked, and the loop
 *     is told once when nothing waits any more;
 *   - a store that answers nothing within the override timeout: decisions go on by the last
 *     known answer (a blocked key stays blocked) or, with none, by on_store_error, counted; no
 *     more lookups are asked until one comes back; afterwards overrides apply again;
 *   - a store that fails after a rule change: the cached blocking override still applies, re-read
 *     under the new rule; after its cache slot was taken by another key, the engine's memory of
 *     overrides still has it;
 *   - the memory of overrides is bounded, forgets what the store no longer has, and is pruned.
 * The config thread is held up by a job of the test's own (it blocks until released), so what
 * waits, and how much, is exact; only the deadline's firing takes wall time, and every wait is
 * bounded.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "engine/engine_impl.h"
#include "engine/events.h"
#include "tmpdir.h"

#define NS_PER_MS  INT64_C(1000000)
#define NS_PER_SEC INT64_C(1000000000)
#define WAIT_MAX_S 20 /* longest any wait here may take */

static char path[TMPDIR_MAX + 32];

/* A store with rule api (on_store_error: allow), keys blocked:0..nblocked-1 blocked on it, and
 * premium limited to 50. */
static void store_make(int nblocked)
{
    char serr[CONFIG_STORE_ERR_MAX];
    tmpdir_file(path, sizeof path, "store", ".db");
    config_store_t *s = NULL;
    assert_int_equal(config_store_open(path, &s, serr), 0);
    assert_int_equal(
        config_store_put_rule(s, "api",
                              "{\"algorithm\":\"fixed_window\",\"limit\":1000,\"window\":"
                              "\"1s\",\"on_store_error\":\"allow\"}",
                              NULL, serr),
        0);
    for (int i = 0; i < nblocked; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "blocked:%d", i);
        assert_int_equal(
            config_store_put_override(s, "api", key, (size_t)n, "{\"limit\":0}", NULL, serr), 0);
    }
    assert_int_equal(
        config_store_put_override(s, "api", "premium", 7, "{\"limit\":50}", NULL, serr), 0);
    config_store_close(s);
}

static engine_t *engine_make(int64_t ttl_ns, int64_t timeout_ns)
{
    char err[ENGINE_ERR_MAX];
    engine_settings_t ec = {.store_url = path,
                            .workers = 1,
                            .key_max = 1024,
                            .override_ttl_ns = ttl_ns,
                            .override_timeout_ns = timeout_ns};
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fail_msg("engine_create: %s", err);
    }
    return e;
}

/* ---- a config thread held up on purpose ---------------------------------------------------- */

typedef struct blocker {
    config_job_t job;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool running, released;
} blocker_t;

static int blocker_run(config_job_t *job, config_store_t *store, bool last)
{
    (void)store;
    (void)last;
    blocker_t *b = (blocker_t *)job;
    pthread_mutex_lock(&b->lock);
    b->running = true;
    pthread_cond_broadcast(&b->cond);
    while (!b->released) {
        pthread_cond_wait(&b->cond, &b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return CONFIG_JOB_DONE;
}

static void blocker_done(config_job_t *job)
{
    (void)job;
}

/* Holds the config thread until blocker_release: returns once it is held. */
static void blocker_hold(engine_t *e, blocker_t *b)
{
    *b = (blocker_t){.job = {.run = blocker_run, .done = blocker_done, .drop = blocker_done}};
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    engine_submit_main(e, &b->job);
    pthread_mutex_lock(&b->lock);
    while (!b->running) {
        pthread_cond_wait(&b->cond, &b->lock);
    }
    pthread_mutex_unlock(&b->lock);
}

static void blocker_release(blocker_t *b)
{
    pthread_mutex_lock(&b->lock);
    b->released = true;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

/* ---- decisions on a loop ------------------------------------------------------------------- */

typedef struct answer {
    bool done;
    engine_decision_t d;
} answer_t;

static void answered(void *arg, int status, const engine_decision_t *d)
{
    answer_t *a = arg;
    assert_int_equal(status, ENGINE_OK);
    a->done = true;
    a->d = *d;
}

static void ask(engine_worker_t *w, const char *key, answer_t *a)
{
    rule_state_t *rs = engine_find(w, "api", 3);
    assert_non_null(rs);
    *a = (answer_t){0};
    assert_int_equal(engine_decide_async(w, rs, key, strlen(key), 1, sl_now_ns(), answered, a),
                     ENGINE_OK);
}

/* Runs the loop until every one of n answers is in (at most WAIT_MAX_S). */
static void run_until(uv_loop_t *loop, answer_t *a, size_t n)
{
    int64_t end = sl_now_ns() + WAIT_MAX_S * NS_PER_SEC;
    for (size_t i = 0; i < n; i++) {
        while (!a[i].done && sl_now_ns() < end) {
            uv_run(loop, UV_RUN_ONCE);
        }
        if (!a[i].done) {
            fail_msg("answer %zu of %zu never came", i, n);
        }
    }
}

typedef struct fixture {
    uv_loop_t loop;
    engine_t *e;
    engine_worker_t *w;
} fixture_t;

static void fixture_start(fixture_t *f, int64_t ttl_ns, int64_t timeout_ns)
{
    char err[ENGINE_ERR_MAX];
    uv_loop_init(&f->loop);
    f->e = engine_make(ttl_ns, timeout_ns);
    assert_int_equal(engine_start(f->e, 0, err), 0);
    f->w = engine_worker(f->e, 0);
    assert_int_equal(engine_worker_attach(f->w, &f->loop, err), 0);
    engine_worker_begin(f->w);
}

static void fixture_stop(fixture_t *f)
{
    engine_worker_detach(f->w);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* the handles close */
    engine_worker_end(f->w);
    engine_free(f->e);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static int ready_calls;
static void on_ready(void *arg)
{
    (void)arg;
    ready_calls++;
}

/* ---- back-pressure ------------------------------------------------------------------------- */

/* The probe that let blocked keys through: 200 blocked keys first asked among many more
 * distinct keys than a loop may look up at once. The lookups beyond OV_WAITS_MAX wait their
 * turn (counted, exactly), none is decided by on_store_error, and every blocked key is refused
 * as blocked. */
static void test_lookups_over_cap_wait(void **unused)
{
    enum { NBLOCKED = 200, N = OV_WAITS_MAX + 1000 };
    store_make(NBLOCKED);
    fixture_t f;
    fixture_start(&f, 10 * NS_PER_SEC, 0);
    static answer_t a[N];
    blocker_t b;
    blocker_hold(f.e, &b);
    uint64_t waits_before = event_total(EV_OVERRIDE_WAIT);
    for (int i = 0; i < N; i++) {
        char key[32];
        /* a blocked key every 25 requests, some of them beyond the cap */
        if (i % 25 == 0 && i / 25 < NBLOCKED) {
            snprintf(key, sizeof key, "blocked:%d", (i / 25 + NBLOCKED / 2) % NBLOCKED);
        } else {
            snprintf(key, sizeof key, "k%d", i);
        }
        ask(f.w, key, &a[i]);
    }
    assert_int_equal(f.w->nov_waits, OV_WAITS_MAX);
    assert_true(engine_worker_saturated(f.w));
    assert_int_equal(event_total(EV_OVERRIDE_WAIT) - waits_before, N - OV_WAITS_MAX);
    ready_calls = 0;
    engine_worker_when_ready(f.w, on_ready, NULL);
    for (int i = 0; i < N; i++) {
        assert_false(a[i].done); /* nothing decided without its override */
    }
    blocker_release(&b);
    run_until(&f.loop, a, N);
    int blocked = 0;
    for (int i = 0; i < N; i++) {
        assert_false(a[i].d.store_error);
        if (i % 25 == 0 && i / 25 < NBLOCKED) {
            assert_true(a[i].d.blocked);
            assert_false(a[i].d.d.allowed);
            blocked++;
        } else {
            assert_true(a[i].d.d.allowed);
        }
    }
    assert_int_equal(blocked, NBLOCKED);
    assert_false(engine_worker_saturated(f.w));
    assert_int_equal(ready_calls, 1);
    fixture_stop(&f);
}

/* ---- a store that answers nothing ---------------------------------------------------------- */

/* Lookups the store does not answer within the timeout: a key whose override was found before
 * (the cache's entry has expired: a TTL of 1 ns) is decided by it, a key never looked up by
 * on_store_error; both counted as timeouts. Until a lookup comes back nothing more is asked: a
 * miss is answered at once. Once the store answers again, an override never asked before
 * applies. */
static void test_stuck_store_times_out(void **unused)
{
    store_make(4);
    fixture_t f;
    /* the first lookups with all the time they may need (a loaded machine is slow), then a
     * deadline the held store will pass */
    fixture_start(&f, 1, (int64_t)WAIT_MAX_S * NS_PER_SEC);
    answer_t a[6];
    ask(f.w, "blocked:0", &a[0]); /* found, remembered */
    ask(f.w, "premium", &a[1]);
    run_until(&f.loop, a, 2);
    assert_true(a[0].d.blocked);
    assert_int_equal(a[1].d.d.limit, 50);
    f.e->cfg.override_timeout_ns = 50 * NS_PER_MS;
    uint64_t known = event_total(EV_OVERRIDE_TIMEOUT_KNOWN);
    uint64_t failed = event_total(EV_OVERRIDE_TIMEOUT_FAILED);
    blocker_t b;
    blocker_hold(f.e, &b);
    ask(f.w, "blocked:0", &a[0]);
    ask(f.w, "premium", &a[1]);
    ask(f.w, "stranger", &a[2]);
    assert_false(a[0].done || a[1].done || a[2].done); /* each waits for its lookup */
    run_until(&f.loop, a, 3);                          /* the deadline answers them */
    assert_true(a[0].d.blocked);
    assert_false(a[0].d.d.allowed);
    assert_false(a[0].d.store_error);
    assert_int_equal(a[1].d.d.limit, 50);
    assert_true(a[2].d.store_error);
    assert_true(a[2].d.d.allowed); /* on_store_error: allow */
    assert_int_equal(event_total(EV_OVERRIDE_TIMEOUT_KNOWN) - known, 2);
    assert_int_equal(event_total(EV_OVERRIDE_TIMEOUT_FAILED) - failed, 1);
    /* stuck: the next miss is decided at once, without a lookup */
    size_t in_flight = f.w->nov_waits;
    ask(f.w, "blocked:1", &a[3]);
    assert_true(a[3].done);
    assert_true(a[3].d.store_error); /* never looked up: nothing known */
    assert_int_equal(f.w->nov_waits, in_flight);
    assert_int_equal(event_total(EV_OVERRIDE_TIMEOUT_FAILED) - failed, 2);
    blocker_release(&b);
    int64_t end = sl_now_ns() + WAIT_MAX_S * NS_PER_SEC;
    while (f.w->nov_waits > 0 && sl_now_ns() < end) { /* the late answers come back */
        uv_run(&f.loop, UV_RUN_ONCE);
    }
    assert_int_equal(f.w->nov_waits, 0);
    assert_false(f.w->ov_stuck);
    ask(f.w, "blocked:2", &a[4]); /* never asked before: the store's answer applies */
    run_until(&f.loop, &a[4], 1);
    assert_true(a[4].d.blocked);
    assert_false(a[4].d.store_error);
    fixture_stop(&f);
}

/* ---- a store that fails -------------------------------------------------------------------- */

/* Runs sql on the store file through a connection of its own. */
static void store_sql(const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail_msg("%s: %s", sql, msg);
    }
    sqlite3_close(db);
}

static engine_decision_t decide_now(engine_worker_t *w, const char *key)
{
    engine_worker_begin(w);
    rule_state_t *rs = engine_find(w, "api", 3);
    engine_decision_t d;
    assert_int_equal(engine_decide(w, rs, key, strlen(key), 1, sl_now_ns(), &d), ENGINE_OK);
    return d;
}

/* A key other than key whose override entry takes key's cache slot under rule api. */
static void collider(engine_worker_t *w, const char *key, char *out, size_t cap)
{
    rule_state_t *rs = engine_find(w, "api", 3);
    uint64_t want = sl_hash64(key, strlen(key), rs->name_hash) & (OV_CACHE_SLOTS - 1);
    for (int i = 0; i < 1000000; i++) {
        int n = snprintf(out, cap, "c%d", i);
        if ((sl_hash64(out, (size_t)n, rs->name_hash) & (OV_CACHE_SLOTS - 1)) == want) {
            return;
        }
    }
    fail_msg("no key shares a slot with %s", key);
}

/* The store fails (its overrides table gone) after a rule change: the blocking override cached
 * before the change still applies, read again under the new rule; a premium key keeps its
 * limit; a key whose slot another key took is known from the engine's memory of overrides; a
 * key never looked up gets on_store_error. Counted as errors. */
static void test_failing_store_after_rule_change(void **unused)
{
    store_make(2);
    engine_t *e = engine_make(10 * NS_PER_SEC, 0);
    engine_worker_t *w = engine_worker(e, 0);
    assert_true(decide_now(w, "blocked:0").blocked);
    assert_true(decide_now(w, "blocked:1").blocked);
    assert_int_equal(decide_now(w, "premium").d.limit, 50);
    char other[32];
    collider(w, "blocked:1", other, sizeof other);
    assert_false(decide_now(w, other).store_error); /* none: its entry evicts blocked:1's */
    char serr[CONFIG_STORE_ERR_MAX], err[ENGINE_ERR_MAX];
    assert_int_equal(config_store_put_rule(engine_store(e), "api",
                                           "{\"algorithm\":\"fixed_window\",\"limit\":5,\"window\":"
                                           "\"1s\",\"on_store_error\":\"allow\"}",
                                           NULL, serr),
                     0);
    assert_int_equal(engine_reload(e, engine_store(e), false, err), 1);
    store_sql("ALTER TABLE overrides RENAME TO overrides_gone");
    uint64_t known = event_total(EV_OVERRIDE_ERROR_KNOWN);
    uint64_t failed = event_total(EV_OVERRIDE_ERROR_FAILED);
    engine_decision_t d = decide_now(w, "blocked:0");
    assert_true(d.blocked);
    assert_false(d.d.allowed);
    d = decide_now(w, "blocked:1");
    assert_true(d.blocked);
    assert_false(d.d.allowed);
    d = decide_now(w, "premium");
    assert_false(d.store_error);
    assert_int_equal(d.d.limit, 50);
    d = decide_now(w, "stranger");
    assert_true(d.store_error);
    assert_true(d.d.allowed);
    assert_int_equal(d.d.limit, 5); /* the rule in force's numbers */
    /* the answer standing in is cached (for a second at most): no lookup, nothing counted */
    assert_true(decide_now(w, "blocked:0").blocked);
    assert_int_equal(event_total(EV_OVERRIDE_ERROR_KNOWN) - known, 3);
    assert_int_equal(event_total(EV_OVERRIDE_ERROR_FAILED) - failed, 1);
    store_sql("ALTER TABLE overrides_gone RENAME TO overrides");
    engine_worker_end(w);
    engine_free(e);
}

/* ---- the memory of overrides --------------------------------------------------------------- */

static bool keep_only_api(void *arg, const char *rule)
{
    (void)arg;
    return strcmp(rule, "api") == 0;
}

/* At most its bound; an answer of "none" forgets; a changed override replaces the old one even
 * when full; pruning drops the rules no longer overridden; what it gives is a copy. */
static void test_known_memory(void **unused)
{
    ov_known_t *k = ov_known_create(2);
    assert_true(ov_known_note(k, "api", "a", 1, "{\"limit\":0}"));
    assert_true(ov_known_note(k, "web", "a", 1, "{\"limit\":1}"));
    assert_false(ov_known_note(k, "api", "b", 1, "{\"limit\":2}")); /* full */
    assert_int_equal(ov_known_count(k), 2);
    assert_null(ov_known_get(k, "api", "b", 1));
    assert_true(ov_known_note(k, "api", "a", 1, "{\"limit\":3}")); /* changed: replaced */
    char *json = ov_known_get(k, "api", "a", 1);
    assert_string_equal(json, "{\"limit\":3}");
    free(json);
    assert_true(ov_known_note(k, "api", "a", 1, NULL)); /* none any more */
    assert_null(ov_known_get(k, "api", "a", 1));
    assert_true(ov_known_note(k, "api", "b", 1, "{\"limit\":2}"));
    ov_known_prune(k, keep_only_api, NULL);
    assert_int_equal(ov_known_count(k), 1);
    assert_null(ov_known_get(k, "web", "a", 1));
    assert_true(ov_known_note(k, "api", "\0x", 2, "{\"limit\":4}")); /* keys are bytes */
    assert_null(ov_known_get(k, "api", "\0y", 2));
    json = ov_known_get(k, "api", "\0x", 2);
    assert_string_equal(json, "{\"limit\":4}");
    free(json);
    ov_known_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups_over_cap_wait),
        cmocka_unit_test(test_stuck_store_times_out),
        cmocka_unit_test(test_failing_store_after_rule_change),
        cmocka_unit_test(test_known_memory),
    };
    if (tmpdir_create("engine-ov") != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, tmpdir_remove);
}
