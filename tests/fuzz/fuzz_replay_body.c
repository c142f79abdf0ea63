/*
 * fuzz_replay_body.c - libFuzzer target for the body of POST /v1/replay as sluiced reads it:
 * the input is the whole body (JSON: the candidate rule, the time unit, the log), replayed end
 * to end by replay_job_run() with a small budget (1 MiB) and a deadline of 20 ms on the real
 * monotonic clock, as the route's work does on the thread pool.
 *
 * Checked besides "does not crash, leak or read out of bounds": the status is 200, 400 or 503;
 * an error is one NUL-terminated line; a 200 is a JSON object whose "complete" is true exactly
 * when there is no "stopped", whose "stopped" is one of the three causes, whose totals are the
 * sums of its series, and whose keys are at most REPLAY_KEYS_OUT; the most the table and
 * tallies held is within the budget.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/replay_job.h"

#define BUDGET_BYTES (1024 * 1024)
#define DEADLINE_NS  INT64_C(20000000)

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long long jnum(json_t *o, const char *field)
{
    json_t *v = json_object_get(o, field);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        abort();
    }
    return json_integer_value(v);
}

static void check_answer(const replay_answer_t *a)
{
    json_t *o = json_loadb(a->body.data, a->body.len, 0, NULL);
    if (!json_is_object(o)) {
        abort();
    }
    json_t *complete = json_object_get(o, "complete");
    const char *why = json_string_value(json_object_get(o, "stopped"));
    if (!json_is_boolean(complete) || json_is_true(complete) != (why == NULL) ||
        (why != NULL && strcmp(why, "deadline") != 0 && strcmp(why, "memory") != 0 &&
         strcmp(why, "shutdown") != 0) ||
        (size_t)jnum(o, "lines_replayed") != a->lines) {
        abort();
    }
    json_t *series = json_object_get(o, "series");
    long long admitted = 0, rejected = 0;
    for (size_t i = 0; i < json_array_size(series); i++) {
        admitted += jnum(json_array_get(series, i), "admitted");
        rejected += jnum(json_array_get(series, i), "rejected");
    }
    if (!json_is_array(series) || json_array_size(series) > REPLAY_BUCKETS ||
        admitted != jnum(o, "admitted") || rejected != jnum(o, "rejected") ||
        json_array_size(json_object_get(o, "keys")) > REPLAY_KEYS_OUT) {
        abort();
    }
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    replay_limits_t lim = {.deadline_ns = monotonic_ns() + DEADLINE_NS,
                           .memory_max = BUDGET_BYTES,
                           .clock_ns = monotonic_ns};
    replay_answer_t a;
    replay_job_run((const char *)data, size, &lim, &a);
    if (a.peak_bytes > BUDGET_BYTES) {
        abort();
    }
    if (a.status == 200) {
        check_answer(&a);
    } else if ((a.status != 400 && a.status != 503) || a.err[0] == '\0' ||
               memchr(a.err, '\0', sizeof a.err) == NULL || strchr(a.err, '\n') != NULL) {
        abort();
    }
    replay_job_answer_free(&a);
    return 0;
}
