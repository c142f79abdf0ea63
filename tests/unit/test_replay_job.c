/*
 * test_replay_job.c - one POST /v1/replay from body to answer (server/replay_job.h), with a
 * clock the test drives: the answer of a whole log byte for byte, the stop at the deadline, at
 * the memory budget and on shutdown, each after an exact number of lines, and the errors of a
 * bad body.
 *
 * The test clock counts its calls: replay_job_run() reads it once before each line of each of
 * its two passes over the log, so a deadline of D on a log of n lines (all read in the first
 * pass) stops the second pass after D - n lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/replay_job.h"

#define MiB (1024 * 1024)

static int64_t ticks;

static int64_t tick_clock(void)
{
    return ticks++;
}

static replay_limits_t limits(int64_t deadline, size_t memory)
{
    ticks = 0;
    return (replay_limits_t){.deadline_ns = deadline, .memory_max = memory, .clock_ns = tick_clock};
}

/* Runs body within lim; the answer's JSON (status 200) or NULL, and the answer in *a. */
static json_t *run(const char *body, replay_limits_t lim, replay_answer_t *a)
{
    replay_job_run(body, strlen(body), &lim, a);
    if (a->status != 200) {
        return NULL;
    }
    json_error_t jerr;
    json_t *o = json_loadb(a->body.data, a->body.len, 0, &jerr);
    assert_non_null(o);
    assert_true(a->peak_bytes <= lim.memory_max);
    return o;
}

static long long num(json_t *o, const char *field)
{
    json_t *v = json_object_get(o, field);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static const char *str(json_t *o, const char *field)
{
    json_t *v = json_object_get(o, field);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A body: rule fields (JSON members, no braces) and a log. malloc'ed. */
static char *body_of(const char *rule, const char *log)
{
    json_t *l = json_string(log);
    char *quoted = json_dumps(l, JSON_ENCODE_ANY);
    size_t n = strlen(rule) + strlen(quoted) + 16;
    char *b = malloc(n);
    snprintf(b, n, "{%s,\"log\":%s}", rule, quoted);
    free(quoted);
    json_decref(l);
    return b;
}

/* ---- whole logs ---------------------------------------------------------------------------- */

static void test_complete_answer(void **unused)
{
    (void)unused;
    replay_answer_t a;
    json_t *o = run("{\"algorithm\":\"fixed_window\",\"limit\":2,\"window\":\"2s\",\"unit\":\"s\","
                    "\"log\":\"0 u1\\n0 u1\\n0 u1\\n# a comment\\n1 u1\\n\\n2 u2\\n\"}",
                    limits(INT64_MAX, 64 * MiB), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_COMPLETE);
    assert_int_equal(a.lines, 7);
    char *text = strndup(a.body.data, a.body.len); /* a buf_t is not NUL-terminated */
    assert_string_equal(
        text, "{\"complete\":true,\"lines_replayed\":7,\"admitted\":3,\"rejected\":2,\"keys\":["
              "{\"key\":\"u1\",\"admitted\":2,\"rejected\":2},{\"key\":\"u2\",\"admitted\":1,"
              "\"rejected\":0}],\"series\":[{\"t\":0,\"admitted\":2,\"rejected\":1},{\"t\":1,"
              "\"admitted\":0,\"rejected\":1},{\"t\":2,\"admitted\":1,\"rejected\":0}]}");
    free(text);
    json_decref(o);
    replay_job_answer_free(&a);
}

/* Keys come back exactly, whatever characters they hold (the body is JSON, so the log is UTF-8
 * text); keys of equal counts are listed in the order of their bytes. */
static void test_key_text(void **unused)
{
    (void)unused;
    replay_answer_t a;
    json_t *o = run("{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\","
                    "\"log\":\"1 caf\\u00e9\\n2 a\\u0001\\n3 <b>\\\"\\n\"}",
                    limits(INT64_MAX, 64 * MiB), &a);
    assert_non_null(o);
    json_t *keys = json_object_get(o, "keys");
    assert_int_equal(json_array_size(keys), 3);
    assert_string_equal(str(json_array_get(keys, 0), "key"), "<b>\"");
    assert_string_equal(str(json_array_get(keys, 1), "key"), "a\x01");
    assert_string_equal(str(json_array_get(keys, 2), "key"), "caf\xc3\xa9");
    json_decref(o);
    replay_job_answer_free(&a);
}

/* ---- stops --------------------------------------------------------------------------------- */

/* The deadline: ten request lines, read once in the first pass (ticks 0..9); the second pass
 * begins line i at tick 10 + i. */
static void test_deadline_rows(void **unused)
{
    (void)unused;
    static const struct {
        int64_t deadline;
        replay_stop_t stopped;
        size_t lines;
        long long admitted, rejected;
    } rows[] = {
        {5, REPLAY_STOP_DEADLINE, 0, 0, 0},  /* in the first pass: nothing decided */
        {10, REPLAY_STOP_DEADLINE, 0, 0, 0}, /* before the second pass's first line */
        {13, REPLAY_STOP_DEADLINE, 3, 2, 1}, /* a a a */
        {16, REPLAY_STOP_DEADLINE, 6, 4, 2}, /* a a a b b b */
        {20, REPLAY_COMPLETE, 10, 6, 4},     {INT64_MAX, REPLAY_COMPLETE, 10, 6, 4},
    };
    const char *body = "{\"algorithm\":\"fixed_window\",\"limit\":2,\"window\":\"1h\","
                       "\"log\":\"1 a\\n2 a\\n3 a\\n4 b\\n5 b\\n6 b\\n7 c\\n8 c\\n9 c\\n10 c\"}";
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        replay_answer_t a;
        json_t *o = run(body, limits(rows[i].deadline, 64 * MiB), &a);
        assert_non_null(o);
        assert_int_equal(a.stopped, rows[i].stopped);
        assert_int_equal(a.lines, rows[i].lines);
        assert_int_equal(num(o, "lines_replayed"), (long long)rows[i].lines);
        assert_int_equal(num(o, "admitted"), rows[i].admitted);
        assert_int_equal(num(o, "rejected"), rows[i].rejected);
        assert_int_equal(json_is_true(json_object_get(o, "complete")),
                         rows[i].stopped == REPLAY_COMPLETE);
        const char *why = str(o, "stopped");
        if (rows[i].stopped == REPLAY_COMPLETE) {
            assert_null(why);
        } else {
            assert_string_equal(why, "deadline");
        }
        /* the series ends with the last bucket replayed */
        size_t buckets = json_array_size(json_object_get(o, "series"));
        assert_int_equal(buckets, rows[i].lines);
        json_decref(o);
        replay_job_answer_free(&a);
    }
}

/* Shutdown: the flag set stops the replay before its first line. */
static void test_shutdown(void **unused)
{
    (void)unused;
    _Atomic bool stop = true;
    replay_limits_t lim = limits(INT64_MAX, 64 * MiB);
    lim.stop = &stop;
    replay_answer_t a;
    json_t *o = run(
        "{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\",\"log\":\"1 a\\n2 b\\n\"}", lim, &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_STOP_SHUTDOWN);
    assert_string_equal(str(o, "stopped"), "shutdown");
    assert_int_equal(num(o, "lines_replayed"), 0);
    json_decref(o);
    replay_job_answer_free(&a);
}

/* The probe that held a loop for a minute: one key charged 2^20 units a line on a sliding log
 * of limit 2^20 (8 MB of stamps a line). Whatever the log's length, the answer comes after as
 * many lines as the deadline allows. */
static void test_probe_deadline(void **unused)
{
    (void)unused;
    size_t n = 40000, cap = n * 24;
    char *log = malloc(cap), *p = log;
    for (size_t i = 0; i < n; i++) {
        p += snprintf(p, cap - (size_t)(p - log), "%zu k 1048576\n", i);
    }
    char *body = body_of("\"algorithm\":\"sliding_log\",\"limit\":1048576,\"window\":\"1ms\"", log);
    replay_answer_t a;
    json_t *o = run(body, limits((int64_t)n + 25, 64 * MiB), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_STOP_DEADLINE);
    assert_int_equal(num(o, "lines_replayed"), 25);
    assert_int_equal(num(o, "admitted"), 25);
    json_decref(o);
    replay_job_answer_free(&a);
    free(body);
    free(log);
}

/* The probe that once took 8 MB a key: 200 keys of a sliding_log of limit 2^20, each charged
 * 2^20 units at once. A key holds a request's cost in one entry, so the whole log is replayed in
 * a few KB. A key grows with its requests instead: one key asked 20,000 times (each at a time
 * of its own) takes 16 bytes a request, and a budget of 64 KiB stops it where its entries pass
 * it, the peak within the budget. */
static void test_memory_sliding_log(void **unused)
{
    (void)unused;
    char *log = malloc(20000 * 24), *p = log;
    for (int i = 0; i < 200; i++) {
        p += sprintf(p, "%d k%d 1048576\n", i, i);
    }
    char *body = body_of("\"algorithm\":\"sliding_log\",\"limit\":1048576,\"window\":\"1h\"", log);
    replay_answer_t a;
    json_t *o = run(body, limits(INT64_MAX, 64 * 1024), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_COMPLETE);
    assert_int_equal(num(o, "admitted"), 200);
    assert_true(a.peak_bytes < 64 * 1024);
    json_decref(o);
    replay_job_answer_free(&a);
    free(body);

    p = log;
    for (int i = 0; i < 20000; i++) {
        p += sprintf(p, "%d k\n", i);
    }
    body = body_of(
        "\"algorithm\":\"sliding_log\",\"limit\":1048576,\"window\":\"1h\",\"unit\":\"us\"", log);
    o = run(body, limits(INT64_MAX, 64 * 1024), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_STOP_MEMORY);
    assert_string_equal(str(o, "stopped"), "memory");
    long long lines = num(o, "lines_replayed");
    assert_true(lines > 1000 && lines * 16 < 64 * 1024); /* 16 bytes an entry, and the table */
    assert_int_equal(num(o, "admitted"), lines);
    assert_true(a.peak_bytes <= 64 * 1024);
    json_decref(o);
    replay_job_answer_free(&a);
    free(body);
    free(log);
}

/* What a replay holds counts against the server's budget (--max-memory) too: with less room there
 * than its own budget it stops for memory where the server's budget runs out, and gives all of it
 * back when it ends. */
static void test_memory_server_budget(void **unused)
{
    (void)unused;
    size_t n = 20000;
    char *log = malloc(n * 24), *p = log;
    for (size_t i = 0; i < n; i++) {
        p += sprintf(p, "%zu k%zu\n", i, i);
    }
    char *body = body_of("\"algorithm\":\"gcra\",\"limit\":10,\"window\":\"1h\"", log);
    sl_budget_t *server = NULL;
    assert_int_equal(sl_budget_create(4 * MiB, &server), SL_OK);
    assert_true(sl_budget_take(server, 3 * MiB)); /* the keys of the rules in force */
    replay_limits_t lim = limits(INT64_MAX, 64 * MiB);
    lim.budget = server;
    replay_answer_t a;
    json_t *o = run(body, lim, &a);
    assert_non_null(o);
    assert_string_equal(str(o, "stopped"), "memory");
    assert_true(num(o, "lines_replayed") > 0);
    assert_true(num(o, "lines_replayed") < (long long)n);
    assert_true(a.peak_bytes <= 1 * MiB);
    assert_int_equal(sl_budget_used(server), 3 * MiB); /* all given back */
    json_decref(o);
    replay_job_answer_free(&a);
    /* with room, the same log is replayed whole */
    sl_budget_give(server, 3 * MiB);
    o = run(body, lim, &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_COMPLETE);
    assert_int_equal(sl_budget_used(server), 0);
    json_decref(o);
    replay_job_answer_free(&a);
    sl_budget_free(server);
    free(body);
    free(log);
}

/* The budget bounds memory, not keys: keys whose state is fresh again make room, so a log of
 * many more keys than fit at once is replayed whole; the same keys in a window none leaves
 * stop the replay. */
static void test_memory_fresh_keys(void **unused)
{
    (void)unused;
    size_t n = 4000, cap = n * 64;
    char *log = malloc(cap), *p = log;
    for (size_t i = 0; i < n; i++) {
        p += snprintf(p, cap - (size_t)(p - log), "%zu key-%06zu-of-a-long-name 100\n", i * 10, i);
    }
    static const struct {
        const char *rule;
        replay_stop_t stopped;
    } rows[] = {
        {"\"algorithm\":\"sliding_log\",\"limit\":100,\"window\":\"5ms\"", REPLAY_COMPLETE},
        {"\"algorithm\":\"sliding_log\",\"limit\":100,\"window\":\"1h\"", REPLAY_STOP_MEMORY},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *body = body_of(rows[i].rule, log);
        replay_answer_t a;
        json_t *o = run(body, limits(INT64_MAX, 512 * 1024), &a);
        assert_non_null(o);
        assert_int_equal(a.stopped, rows[i].stopped);
        if (rows[i].stopped == REPLAY_COMPLETE) {
            assert_int_equal(num(o, "lines_replayed"), (long long)n);
            assert_int_equal(num(o, "admitted"), (long long)n);
        } else {
            assert_true(num(o, "lines_replayed") > 0 && num(o, "lines_replayed") < (long long)n);
        }
        json_decref(o);
        replay_job_answer_free(&a);
        free(body);
    }
    free(log);
}

/* The tallies count too: keys of 1 KB on a rule whose state is small (gcra) fill the budget
 * with the tally's copies of the keys and the table's; a budget twice as large replays more. */
static void test_memory_tallies(void **unused)
{
    (void)unused;
    size_t n = 2000, cap = n * 1100;
    char *log = malloc(cap), *p = log;
    for (size_t i = 0; i < n; i++) {
        p += snprintf(p, cap - (size_t)(p - log), "%zu %01020zu\n", i, i);
    }
    char *body = body_of("\"algorithm\":\"gcra\",\"limit\":5,\"window\":\"1h\"", log);
    long long lines[2];
    size_t budgets[2] = {256 * 1024, 512 * 1024};
    for (int i = 0; i < 2; i++) {
        replay_answer_t a;
        json_t *o = run(body, limits(INT64_MAX, budgets[i]), &a);
        assert_non_null(o);
        assert_int_equal(a.stopped, REPLAY_STOP_MEMORY);
        lines[i] = num(o, "lines_replayed");
        /* each key is held twice (table and tally): fewer than budget / 2 KB of them fit */
        assert_true(lines[i] > 0 && lines[i] < (long long)(budgets[i] / 2048));
        json_decref(o);
        replay_job_answer_free(&a);
    }
    assert_true(lines[1] > lines[0]);
    free(body);
    free(log);
}

/* The table can grow while the tallies do not (keys the tallies know from peeks, which the
 * table does not keep): the budget is then checked after the line, which is replayed and
 * counted, and the replay stops before the next. Here the budget is one byte short of what the
 * log holds after its fourth line (a fifth, a peek, would take nothing more). */
static void test_memory_after_line(void **unused)
{
    (void)unused;
    char *body = body_of("\"algorithm\":\"sliding_log\",\"limit\":16384,\"window\":\"1h\"",
                         "0 a 0\n0 b 0\n0 a 16384\n0 b 16384\n0 a 0\n");
    replay_answer_t a;
    json_t *o = run(body, limits(INT64_MAX, 64 * MiB), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_COMPLETE);
    size_t whole = a.peak_bytes;
    json_decref(o);
    replay_job_answer_free(&a);
    o = run(body, limits(INT64_MAX, whole - 1), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_STOP_MEMORY);
    assert_int_equal(num(o, "lines_replayed"), 4);
    assert_int_equal(num(o, "admitted"), 4);
    json_decref(o);
    replay_job_answer_free(&a);
    free(body);
}

/* ---- bad bodies ---------------------------------------------------------------------------- */

static void test_errors(void **unused)
{
    (void)unused;
    static const struct {
        const char *body;
        const char *err;
    } rows[] = {
        {"{", "invalid JSON: line 1, column 1: string or '}' expected near end of file"},
        {"[1]", "the body must be a JSON object"},
        /* jansson quotes the bytes where it stopped, here a new line: the fuzz target's find */
        {"{\"log\":\"0 a\\\n\"}", "invalid JSON: line 2, column 0: invalid escape near '\"0 a\\?'"},
        {"{\"algorithm\":\"gcra\",\"limit\":0,\"window\":\"1s\",\"log\":\"\"}",
         "limit: must be an integer > 0"},
        {"{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\",\"unit\":\"h\",\"log\":\"\"}",
         "unit: must be ns, us, ms or s"},
        {"{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\"}",
         "log: required, the traffic log's text (TIME KEY [COST] lines)"},
        {"{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\",\"log\":\"1 a\\n\\n2 b two\\n\"}",
         "log: line 3: cost must be a non-negative integer, got 'two'"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        replay_answer_t a;
        assert_null(run(rows[i].body, limits(INT64_MAX, 64 * MiB), &a));
        assert_int_equal(a.status, 400);
        assert_string_equal(a.err, rows[i].err);
        assert_int_equal(a.body.len, 0);
        replay_job_answer_free(&a);
    }
}

/* A malformed line is refused before anything is decided, wherever it is; unless the deadline
 * came first (the first pass did not reach it). */
static void test_bad_line_late(void **unused)
{
    (void)unused;
    const char *body = "{\"algorithm\":\"gcra\",\"limit\":1,\"window\":\"1s\","
                       "\"log\":\"1 a\\n2 a\\n3 a\\n4\\n\"}";
    replay_answer_t a;
    assert_null(run(body, limits(INT64_MAX, 64 * MiB), &a));
    assert_int_equal(a.status, 400);
    assert_string_equal(a.err, "log: line 4: missing key (expected TIME KEY [COST])");
    replay_job_answer_free(&a);
    json_t *o = run(body, limits(2, 64 * MiB), &a);
    assert_non_null(o);
    assert_int_equal(a.stopped, REPLAY_STOP_DEADLINE);
    json_decref(o);
    replay_job_answer_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_answer),   cmocka_unit_test(test_key_text),
        cmocka_unit_test(test_deadline_rows),     cmocka_unit_test(test_shutdown),
        cmocka_unit_test(test_probe_deadline),    cmocka_unit_test(test_memory_sliding_log),
        cmocka_unit_test(test_memory_fresh_keys), cmocka_unit_test(test_memory_tallies),
        cmocka_unit_test(test_memory_after_line), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bad_line_late),     cmocka_unit_test(test_memory_server_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
