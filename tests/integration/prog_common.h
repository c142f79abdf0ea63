/*
 * prog_common.h - what prog_client.c, prog_client_holds.c and prog_client_options.c share: the
 * CHECK counter, the PORT PASSWORD arguments, connecting (blocking and on a libuv loop), INFO's
 * counters, making a rule, and the async callbacks recording into results[].
 *
 * Included by one program each (a header, not a prog_*.c: tests/CMakeLists.txt builds every
 * prog_*.c as a program of its own), so its definitions are static.
 */
#ifndef SLUICE_TESTS_PROG_COMMON_H
#define SLUICE_TESTS_PROG_COMMON_H

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "sluice/client.h"

static int failures;
static int checks;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (cond) {                                                                                \
            printf("ok %d - ", checks);                                                            \
        } else {                                                                                   \
            failures++;                                                                            \
            printf("not ok %d - (%s:%d: %s) ", checks, __FILE__, __LINE__, #cond);                 \
        }                                                                                          \
        printf(__VA_ARGS__);                                                                       \
        putchar('\n');                                                                             \
    } while (0)

static int port;
static const char *password;

/* PROG PORT PASSWORD into port and password, stdout line-buffered; exits 2 on other arguments. */
static void prog_args(int argc, char **argv, const char *prog)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT PASSWORD\n", prog);
        exit(2);
    }
    port = atoi(argv[1]);
    password = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* The summary line; the program's exit status. */
static int prog_end(void)
{
    printf("%d/%d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}

/* A blocking client with the password (TIMEOUT_MS for connecting and each call); exits 1 when
 * it cannot connect. */
static slc_client_t *connect_or_die(int timeout_ms)
{
    slc_client_t *c = slc_connect("127.0.0.1", port, password, timeout_ms);
    CHECK(slc_err(c) == SLC_OK, "connect with the password (%s)", slc_errstr(c));
    if (slc_err(c) != SLC_OK)
        exit(1);
    return c;
}

/* INFO's value of `field` as an integer, or -1 when absent. */
static long long info_field(slc_client_t *c, const char *field)
{
    const char *argv[] = {"INFO"};
    redisReply *r = NULL;
    if (slc_command(c, 1, argv, NULL, &r) != SLC_OK || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return -1;
    }
    long long v = -1;
    size_t n = strlen(field);
    for (const char *p = r->str; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        if (strncmp(p, field, n) == 0 && p[n] == ':') {
            v = strtoll(p + n + 1, NULL, 10);
            break;
        }
    }
    freeReplyObject(r);
    return v;
}

/* SL.RULE SET name json, checked. */
static void set_rule(slc_client_t *c, const char *name, const char *json)
{
    const char *argv[] = {"SL.RULE", "SET", name, json};
    redisReply *r = NULL;
    int rc = slc_command(c, 4, argv, NULL, &r);
    CHECK(rc == SLC_OK, "SL.RULE SET %s (%s)", name, slc_errstr(c));
    freeReplyObject(r);
}

/* ---- non-blocking ------------------------------------------------------------------------ */

typedef struct result {
    int status;
    slc_decision_t d;
    uint64_t id;
    char errstr[SLC_ERRSTR_MAX];
    int done;
} result_t;

/* Every callback's argument is one of results[]; order[] lists them in the order answered. */
static result_t results[16];
static int order[16];
static int norder;
static int in_call; /* set by ASYNC around the call: a callback then fails the run */

static void record(slc_async_t *ac, int status, const slc_decision_t *d, uint64_t id, void *arg)
{
    result_t *r = arg;
    if (in_call)
        failures++, printf("not ok - a callback ran inside the call\n");
    r->status = status;
    if (d != NULL)
        r->d = *d;
    r->id = id;
    snprintf(r->errstr, sizeof r->errstr, "%s", slc_async_errstr(ac));
    r->done = 1;
    order[norder++] = (int)(r - results);
}

static void on_done(slc_async_t *ac, int status, void *arg)
{
    record(ac, status, NULL, 0, arg);
}

static void on_decision(slc_async_t *ac, int status, const slc_decision_t *d, void *arg)
{
    record(ac, status, d, 0, arg);
}

/* Checks that an async call was accepted and that no callback ran inside it. */
#define ASYNC(call)                                                                                \
    do {                                                                                           \
        in_call = 1;                                                                               \
        int rc_ = (call);                                                                          \
        in_call = 0;                                                                               \
        CHECK(rc_ == SLC_OK, "%s accepted", #call);                                                \
    } while (0)

/* An async client with the password on loop; exits 1 when it cannot connect. */
static slc_async_t *async_connect_or_die(uv_loop_t *loop)
{
    slc_async_t *ac;
    int rc = slc_async_connect(loop, "127.0.0.1", port, password, &ac);
    CHECK(rc == SLC_OK, "async connect");
    if (rc != SLC_OK)
        exit(1);
    return ac;
}

/* Runs the loop until r is done (bounded: the server answers in well under a second). */
static void wait_done(uv_loop_t *loop, const result_t *r)
{
    for (int i = 0; !r->done && i < 100000; i++)
        uv_run(loop, UV_RUN_ONCE);
}

#endif
