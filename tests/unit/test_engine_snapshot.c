/*
 * test_engine_snapshot.c - a snapshot being written holds up no decision. The disk is made to
 * stall on command: this program defines pwrite(), which the snapshot writer calls (the
 * executable's definition takes precedence over the C library's); armed, the next call blocks
 * until the test lets it go. While the writer is stalled in the middle of a section:
 *
 *   - deciding on every key of the table being written completes (no shard lock is held while
 *     the snapshot writes);
 *   - a reset on a rule with override tables, and a new override table, complete (ov_lock is
 *     not held while they are written).
 *
 * Then the disk goes on, and the snapshot is complete. Every wait is bounded (WAIT_S): before,
 * the deciding thread waited for the disk, and the test fails at the bound instead of hanging.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "bounded.h"
#include "engine/engine_impl.h"
#include "tmpdir.h"

#define NS_PER_SEC INT64_C(1000000000)
#define WAIT_S     20

static const int64_t t0_ns = INT64_C(1700000000) * NS_PER_SEC;

/* ---- a disk that stalls on command ------------------------------------------------------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_armed;   /* the next pwrite blocks */
static bool gate_blocked; /* a pwrite is blocked */
static bool gate_open;    /* let it go on */

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    pthread_mutex_lock(&gate_mu);
    if (gate_armed) {
        gate_armed = false;
        gate_blocked = true;
        pthread_cond_broadcast(&gate_cv);
        while (!gate_open) { /* the test always opens it, failing or not */
            pthread_cond_wait(&gate_cv, &gate_mu);
        }
    }
    pthread_mutex_unlock(&gate_mu);
    return syscall(SYS_pwrite64, fd, buf, n, off);
}

static void gate_arm(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_armed = true;
    gate_blocked = gate_open = false;
    pthread_mutex_unlock(&gate_mu);
}

/* Waits (at most WAIT_S) until a pwrite is blocked. */
static bool gate_wait_blocked(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_S;
    pthread_mutex_lock(&gate_mu);
    while (!gate_blocked && pthread_cond_timedwait(&gate_cv, &gate_mu, &until) == 0) {
    }
    bool blocked = gate_blocked;
    pthread_mutex_unlock(&gate_mu);
    return blocked;
}

static void gate_release(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_armed = false;
    gate_open = true;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

/* ---- the engine ---------------------------------------------------------------------------- */

static engine_t *engine_with(const char *name, const char *json)
{
    char serr[CONFIG_STORE_ERR_MAX], err[ENGINE_ERR_MAX];
    static char path[TMPDIR_MAX + 32];
    tmpdir_file(path, sizeof path, "store", ".db");
    config_store_t *s = NULL;
    assert_int_equal(config_store_open(path, &s, serr), 0);
    assert_int_equal(config_store_put_rule(s, name, json, NULL, serr), 0);
    config_store_close(s);
    engine_settings_t ec = {
        .store_url = path, .workers = 1, .key_max = 1024, .override_ttl_ns = NS_PER_SEC};
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fail_msg("engine_create: %s", err);
    }
    return e;
}

typedef struct save_job {
    engine_t *e;
    char path[TMPDIR_MAX + 32];
    size_t keys;
    int rc;
    char err[ENGINE_ERR_MAX];
} save_job_t;

static void save_main(void *arg)
{
    save_job_t *j = arg;
    j->rc = engine_save_snapshot(j->e, j->path, t0_ns, &j->keys, j->err);
}

/* Starts a snapshot of e whose first write stalls, and waits until it does. */
static bounded_t *save_stalled(save_job_t *j, engine_t *e)
{
    j->e = e;
    tmpdir_file(j->path, sizeof j->path, "snap", ".snapshot");
    gate_arm();
    bounded_t *b = bounded_start(save_main, j);
    if (!gate_wait_blocked()) {
        gate_release();
        fail_msg("the snapshot never wrote (or its write did not stall)");
    }
    return b;
}

/* Lets the disk go on, then waits for the call in `during` and the snapshot. Returns whether the
 * call had completed while the disk was stalled. */
static bool done_while_stalled(bounded_t *during, bounded_t *save, save_job_t *j)
{
    bool in_time = bounded_wait(during, WAIT_S);
    gate_release();
    if (!in_time && !bounded_wait(during, WAIT_S)) {
        fail_msg("the call made during the snapshot never returned");
    }
    if (!bounded_wait(save, WAIT_S)) {
        fail_msg("the snapshot never finished");
    }
    if (j->rc != 0) {
        fail_msg("snapshot: %s", j->err);
    }
    return in_time;
}

#define BIG_KEYS 20000 /* 28 bytes each in the snapshot: several 64 KiB writes */

typedef struct decide_job {
    engine_t *e;
    size_t allowed;
} decide_job_t;

static void decide_all_keys(void *arg)
{
    decide_job_t *d = arg;
    engine_worker_t *w = engine_worker(d->e, 0);
    engine_worker_begin(w);
    rule_state_t *rs = engine_find(w, "big", 3);
    char key[32];
    for (int i = 0; rs != NULL && i < BIG_KEYS; i++) {
        int n = snprintf(key, sizeof key, "user:%d", i);
        engine_decision_t out;
        if (engine_decide(w, rs, key, (size_t)n, 1, t0_ns, &out) == ENGINE_OK && out.d.allowed) {
            d->allowed++;
        }
    }
    engine_worker_end(w);
}

/* While the snapshot's write of a table stalls, every key of that table (its shards, the one
 * being written among them) can be decided. */
static void test_deciding_goes_on_during_a_write(void **unused)
{
    engine_t *e = engine_with("big", "{\"algorithm\":\"gcra\",\"limit\":1000,\"window\":\"1h\"}");
    decide_job_t fill = {.e = e};
    decide_all_keys(&fill);
    assert_int_equal(fill.allowed, BIG_KEYS);

    save_job_t j = {0};
    bounded_t *save = save_stalled(&j, e);
    decide_job_t d = {.e = e};
    bool in_time = done_while_stalled(bounded_start(decide_all_keys, &d), save, &j);
    if (!in_time) {
        fail_msg("deciding waited for the snapshot's write to disk");
    }
    assert_int_equal(d.allowed, BIG_KEYS);
    assert_int_equal(j.keys, BIG_KEYS);
    engine_free(e);
}

#define OV_KEYS 5000 /* in an override table: the first 64 KiB write falls in its section */

typedef struct ov_job {
    engine_t *e;
    rule_state_t *rs;
    sl_table_t *added;
    int reset_rc;
} ov_job_t;

static void reset_and_add(void *arg)
{
    ov_job_t *o = arg;
    engine_worker_t *w = engine_worker(o->e, 0);
    o->reset_rc = engine_reset(w, o->rs, "ov:1", 4); /* takes ov_lock */
    sl_rule_t other;
    sl_rule_init(&other, SL_GCRA, 7, 60 * NS_PER_SEC);
    o->added = override_table(o->rs->t, &other); /* takes ov_lock, grows the list */
}

/* While the snapshot's write of an override table stalls, a reset on that rule (which resets
 * the key in every override table) and a new override table for it complete. */
static void test_override_tables_unlocked_during_a_write(void **unused)
{
    engine_t *e = engine_with("ov", "{\"algorithm\":\"gcra\",\"limit\":1000,\"window\":\"1h\"}");
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    rule_state_t *rs = engine_find(w, "ov", 2);
    assert_non_null(rs);
    sl_rule_t params;
    assert_int_equal(sl_rule_init(&params, SL_GCRA, 10, 3600 * NS_PER_SEC), SL_OK);
    sl_table_t *ov = override_table(rs->t, &params);
    assert_non_null(ov);
    char key[32];
    for (int i = 0; i < OV_KEYS; i++) {
        int n = snprintf(key, sizeof key, "ov:%d", i);
        sl_decision_t d;
        assert_int_equal(sl_table_decide(ov, key, (size_t)n, 1, t0_ns, &d), SL_OK);
    }

    save_job_t j = {0};
    bounded_t *save = save_stalled(&j, e);
    ov_job_t o = {.e = e, .rs = rs};
    bool in_time = done_while_stalled(bounded_start(reset_and_add, &o), save, &j);
    if (!in_time) {
        fail_msg("a reset and a new override table waited for the snapshot's write to disk");
    }
    assert_int_equal(o.reset_rc, ENGINE_OK);
    assert_non_null(o.added);
    assert_true(j.keys == OV_KEYS || j.keys == OV_KEYS - 1); /* "ov:1" reset before or after */
    engine_worker_end(w);
    engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deciding_goes_on_during_a_write),
        cmocka_unit_test(test_override_tables_unlocked_during_a_write),
    };
    if (tmpdir_create("engine-snapshot") != 0) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, tmpdir_remove);
}
