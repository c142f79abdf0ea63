/*
 * common.c - helpers shared by the blocking and the non-blocking client (see common.h).
 */
#include "client/common.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t common_monotonic_ns(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

int common_seterr(int *err, char *errstr, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, SLC_ERRSTR_MAX, fmt, ap);
    va_end(ap);
    *err = code;
    return code;
}

int common_valid_endpoint(const char *host, int port)
{
    return host != NULL && host[0] != '\0' && port > 0 && port <= 65535;
}

const char *common_priority(const slc_request_opts_t *opts)
{
    return opts != NULL ? opts->priority : NULL;
}

int common_decision_argv(const char *rule, const char *key, int64_t cost, int peek,
                         const char *priority, const char **argv, size_t *lens,
                         char costbuf[COMMON_INT_CHARS])
{
    int argc = 0;
    argv[argc++] = peek ? "SL.PEEK" : "SL.ALLOW";
    argv[argc++] = rule;
    argv[argc++] = key;
    if (!peek && cost != 1) {
        snprintf(costbuf, COMMON_INT_CHARS, "%" PRId64, cost);
        argv[argc++] = "COST";
        argv[argc++] = costbuf;
    }
    if (priority != NULL) {
        argv[argc++] = "PRIORITY";
        argv[argc++] = priority;
    }
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return argc;
}

int common_settle_argv(const char *rule, const char *key, int64_t reserved, int64_t actual,
                       int64_t at_ms, const char **argv, size_t *lens,
                       char nums[3][COMMON_INT_CHARS])
{
    int argc = 0;
    argv[argc++] = "SL.SETTLE";
    argv[argc++] = rule;
    argv[argc++] = key;
    snprintf(nums[0], COMMON_INT_CHARS, "%" PRId64, reserved);
    argv[argc++] = nums[0];
    snprintf(nums[1], COMMON_INT_CHARS, "%" PRId64, actual);
    argv[argc++] = nums[1];
    if (at_ms >= 0) {
        snprintf(nums[2], COMMON_INT_CHARS, "%" PRId64, at_ms);
        argv[argc++] = "AT";
        argv[argc++] = nums[2];
    }
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return argc;
}

const char *common_settle_invalid(int64_t reserved, int64_t actual, int64_t at_ms)
{
    if (reserved < 0)
        return "reserved must be >= 0";
    if (actual < 0)
        return "actual must be >= 0";
    if (at_ms < -1)
        return "at_ms must be >= 0 (Unix ms), or -1 for none";
    return NULL;
}

bool common_is_no_hold(const char *text, size_t len)
{
    static const char prefix[] = COMMON_NO_HOLD_PREFIX;
    return text != NULL && len >= sizeof prefix - 1 && memcmp(text, prefix, sizeof prefix - 1) == 0;
}

int common_acquire_argv(const char *rule, const char *key, int64_t cost, int64_t timeout_ms,
                        const char *priority, const char **argv, size_t *lens,
                        char nums[2][COMMON_INT_CHARS])
{
    int argc = 0;
    argv[argc++] = "SL.ACQUIRE";
    argv[argc++] = rule;
    argv[argc++] = key;
    if (cost != 1) {
        snprintf(nums[0], COMMON_INT_CHARS, "%" PRId64, cost);
        argv[argc++] = "COST";
        argv[argc++] = nums[0];
    }
    if (timeout_ms > 0) {
        snprintf(nums[1], COMMON_INT_CHARS, "%" PRId64, timeout_ms);
        argv[argc++] = "TIMEOUT";
        argv[argc++] = nums[1];
    }
    if (priority != NULL) {
        argv[argc++] = "PRIORITY";
        argv[argc++] = priority;
    }
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return argc;
}

int common_release_argv(const char *rule, const char *key, uint64_t hold_id,
                        const slc_release_opts_t *opts, const char **argv, size_t *lens,
                        char nums[2][COMMON_INT_CHARS])
{
    int argc = 0;
    argv[argc++] = "SL.RELEASE";
    argv[argc++] = rule;
    argv[argc++] = key;
    snprintf(nums[0], COMMON_INT_CHARS, "%" PRIu64, hold_id);
    argv[argc++] = nums[0];
    if (opts != NULL && opts->has_latency) {
        snprintf(nums[1], COMMON_INT_CHARS, "%" PRId64 "us", opts->latency_us);
        argv[argc++] = "LATENCY";
        argv[argc++] = nums[1];
    }
    if (opts != NULL && opts->dropped)
        argv[argc++] = "DROPPED";
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return argc;
}

const char *common_release_invalid(uint64_t hold_id, const slc_release_opts_t *opts)
{
    if (hold_id > (uint64_t)INT64_MAX)
        return "hold_id must be below 2^63 (an id slc_acquire() gave)";
    if (opts != NULL && opts->has_latency &&
        (opts->latency_us < 0 || opts->latency_us > SLC_LATENCY_MAX_US))
        return "latency_us must be 0 .. 3600000000 (1h)";
    return NULL;
}

const char *common_acquire_invalid(int64_t cost, int64_t timeout_ms)
{
    if (cost < 0)
        return "cost must be >= 0";
    if (timeout_ms < 0)
        return "timeout_ms must be >= 1, or 0 for the rule's hold_timeout";
    return NULL;
}
