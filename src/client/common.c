/*
 * common.c - helpers shared by the blocking and the non-blocking client (see common.h).
 */
#include "client/common.h"

#include <inttypes.h>
#include <stdarg.h>
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

int common_decision_argv(const char *rule, const char *key, int64_t cost, int peek,
                         const char **argv, size_t *lens, char costbuf[COMMON_INT_CHARS])
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
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return argc;
}
