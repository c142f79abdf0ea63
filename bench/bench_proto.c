/*
 * bench_proto.c - what a request that arrives a few bytes at a time costs the codecs.
 *
 * sluiced parses a connection's buffered bytes after every read. A client that sends its request
 * one byte per packet (slowly, or on purpose) makes as many reads as bytes, so a parser that
 * starts again from the request's first byte on every read does work quadratic in the request's
 * size. This program delivers each case one byte per "read" (the buffer grows by one byte, then
 * the codec is called, as the server calls it) and prints the CPU time and, for HTTP, the bytes
 * the parser examined (http_reader_t.work):
 *
 *   http head      a head just under HTTP_HEAD_MAX (16 KiB, 62 header fields)
 *                    reparse: every read parsed from the request's first byte (a fresh reader
 *                             each call: what sluiced did before readers were kept per connection)
 *                    reader:  one http_reader_t for the connection (what sluiced does)
 *   resp multibulk a request of RESP_ARGS_MAX (1024) bulk arguments of 500 bytes (~516 KB, just
 *                  under what sluiced buffers by default), parsed by resp_parse() after every byte
 *                    (reparse), or only once the buffer holds what the last partial parse said it
 *                    needs (need: what sluiced does)
 *   resp inline    an inline request line just under RESP_INLINE_MAX (64 KiB), likewise
 *
 * and, for each, the same bytes parsed once whole, for scale. Each figure is the median of --reps
 * repetitions (CPU time of this thread, CLOCK_THREAD_CPUTIME_ID), the cases interleaved within a
 * repetition. Nothing is asserted: tests/unit/test_http.c checks the reader's work bound.
 *
 *   bench_proto [--reps N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/http.h"
#include "proto/resp.h"

#define REPS_MAX 64

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the inputs ------------------------------------------------------------------------------ */

static size_t http_head(char *out, size_t cap)
{
    size_t len = (size_t)snprintf(out, cap, "GET /v1/auth/api HTTP/1.1\r\nHost: h\r\n");
    char pad[251];
    memset(pad, 'v', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    for (int i = 0; i < 61; i++)
        len += (size_t)snprintf(out + len, cap - len, "X-Pad-%02d: %s\r\n", i, pad);
    len += (size_t)snprintf(out + len, cap - len, "\r\n");
    return len;
}

static size_t resp_multibulk(char *out, size_t cap)
{
    size_t len = (size_t)snprintf(out, cap, "*%d\r\n", RESP_ARGS_MAX);
    for (int i = 0; i < RESP_ARGS_MAX; i++) {
        len += (size_t)snprintf(out + len, cap - len, "$500\r\n");
        memset(out + len, 'a' + i % 26, 500);
        len += 500;
        len += (size_t)snprintf(out + len, cap - len, "\r\n");
    }
    return len;
}

static size_t resp_inline(char *out, size_t cap)
{
    size_t len = RESP_INLINE_MAX - 16;
    memcpy(out, "ECHO ", 5);
    memset(out + 5, 'x', len - 7);
    memcpy(out + len - 2, "\r\n", 2);
    (void)cap;
    return len;
}

/* ---- one delivery ------------------------------------------------------------------------------
 */

enum how { WHOLE, REPARSE, READER, NEED };

/* Parses buf[0..len) delivered one byte per read (or whole); returns the bytes examined (HTTP) or
 * 0, and exits if the request does not come out whole at the last byte. */
static uint64_t http_run(char *buf, size_t len, enum how how)
{
    http_reader_t rd;
    http_reader_init(&rd);
    http_request_t req;
    int status;
    char err[HTTP_ERR_MAX];
    uint64_t work = 0;
    for (size_t n = how == WHOLE ? len : 1; n <= len; n++) {
        if (how == REPARSE) {
            work += rd.work;
            http_reader_init(&rd);
        }
        long rc = http_parse_more(&rd, buf, n, NULL, &req, &status, err);
        if (rc != (n == len ? (long)len : HTTP_PARSE_PARTIAL)) {
            fprintf(stderr, "bench_proto: http at %zu: rc %ld, %d %s\n", n, rc, status, err);
            exit(1);
        }
    }
    return work + rd.work;
}

static void resp_run(char *buf, size_t len, enum how how)
{
    static resp_arg_t argv[RESP_ARGS_MAX];
    resp_limits_t limits = {.bulk_max = RESP_BULK_MAX, .args_max = RESP_ARGS_MAX};
    char err[RESP_ERR_MAX];
    size_t need = 0;
    for (size_t n = how == WHOLE ? len : 1; n <= len; n++) {
        size_t argc = 0;
        if (how == NEED && n < need) {
            continue;
        }
        long rc = resp_parse(buf, n, &limits, argv, RESP_ARGS_MAX, &argc, &need, err);
        if (rc != (n == len ? (long)len : RESP_PARTIAL)) {
            fprintf(stderr, "bench_proto: resp at %zu: rc %ld %s\n", n, rc, err);
            exit(1);
        }
    }
}

/* ---- main
 * ---------------------------------------------------------------------------------------- */

enum {
    C_HTTP_WHOLE,
    C_HTTP_REPARSE,
    C_HTTP_READER,
    C_MB_WHOLE,
    C_MB_BYTES,
    C_MB_NEED,
    C_IL_WHOLE,
    C_IL_BYTES,
    NCASES
};

static const char *const names[NCASES] = {
    "http head, whole",
    "http head, 1 byte per read, reparse",
    "http head, 1 byte per read, reader",
    "resp multibulk, whole",
    "resp multibulk, 1 byte per read, reparse",
    "resp multibulk, 1 byte per read, need",
    "resp inline, whole",
    "resp inline, 1 byte per read",
};

int main(int argc, char **argv)
{
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_proto [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > REPS_MAX) {
        fprintf(stderr, "bench_proto: --reps must be 1..%d\n", REPS_MAX);
        return 2;
    }
    static char head[HTTP_HEAD_MAX], mb[RESP_ARGS_MAX * 520], il[RESP_INLINE_MAX];
    size_t head_len = http_head(head, sizeof(head));
    size_t mb_len = resp_multibulk(mb, sizeof(mb));
    size_t il_len = resp_inline(il, sizeof(il));
    size_t lens[NCASES] = {head_len, head_len, head_len, mb_len, mb_len, mb_len, il_len, il_len};
    double ms[NCASES][REPS_MAX];
    uint64_t work[NCASES] = {0};

    printf("$ bench_proto --reps %d\n", reps);
    for (int r = 0; r < reps; r++) {
        for (int c = 0; c < NCASES; c++) {
            double t0 = thread_cpu_ms();
            switch (c) {
            case C_HTTP_WHOLE:
                work[c] = http_run(head, head_len, WHOLE);
                break;
            case C_HTTP_REPARSE:
                work[c] = http_run(head, head_len, REPARSE);
                break;
            case C_HTTP_READER:
                work[c] = http_run(head, head_len, READER);
                break;
            case C_MB_WHOLE:
                resp_run(mb, mb_len, WHOLE);
                break;
            case C_MB_BYTES:
                resp_run(mb, mb_len, REPARSE);
                break;
            case C_MB_NEED:
                resp_run(mb, mb_len, NEED);
                break;
            case C_IL_WHOLE:
                resp_run(il, il_len, WHOLE);
                break;
            default:
                resp_run(il, il_len, REPARSE);
                break;
            }
            ms[c][r] = thread_cpu_ms() - t0;
        }
    }
    for (int c = 0; c < NCASES; c++) {
        printf("%-40s %7zu bytes: %10.3f ms CPU (median of %d)", names[c], lens[c],
               median(ms[c], reps), reps);
        if (work[c] > 0)
            printf(", %llu bytes examined (%.1f per byte)", (unsigned long long)work[c],
                   (double)work[c] / (double)lens[c]);
        printf("\n");
    }
    return 0;
}
