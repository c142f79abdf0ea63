/*
 * fuzz_resp.c - libFuzzer target for the RESP2 request parser.
 *
 * Feeds arbitrary bytes (an exact-size heap copy, so ASan catches any over-read) through
 * resp_parse() as a connection would: parse, consume, repeat. Checks what must hold for any
 * input: a success consumes between 1 and len bytes, every argument lies inside the consumed
 * bytes, argc respects the capacity, and re-encoding the arguments as a multibulk request parses
 * back to the same arguments. Also feeds the input split at every tenth byte, as partial reads,
 * which must give the same requests as the whole; and one byte at a time, parsing only once the
 * buffer holds what the last partial parse said it needs (as sluiced does), which must find
 * exactly the requests (and the error) parsing after every byte finds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/resp.h"

#define CAP 64

static void check_round_trip(const resp_arg_t *argv, size_t argc)
{
    buf_t b = {0};
    resp_add_array(&b, argc);
    for (size_t i = 0; i < argc; i++)
        resp_add_bulk(&b, argv[i].ptr, argv[i].len);
    if (b.failed)
        abort();
    resp_arg_t back[CAP];
    size_t n;
    char err[RESP_ERR_MAX];
    resp_limits_t lim = {.bulk_max = SIZE_MAX / 4};
    long rc = resp_parse(b.data, b.len, &lim, back, CAP, &n, NULL, err);
    if (argc == 0 ? rc != 4 : (rc != (long)b.len || n != argc))
        abort();
    for (size_t i = 0; i < n; i++)
        if (back[i].len != argv[i].len || memcmp(back[i].ptr, argv[i].ptr, argv[i].len) != 0)
            abort();
    buf_free(&b);
}

/* Parses all of buf; returns how many requests were found before the end or an error. */
static size_t drain(char *buf, size_t len, bool check)
{
    size_t off = 0, requests = 0;
    resp_limits_t lim = {.bulk_max = 4096, .args_max = CAP};
    for (;;) {
        resp_arg_t argv[CAP];
        size_t argc;
        char err[RESP_ERR_MAX];
        long rc = resp_parse(buf + off, len - off, &lim, argv, CAP, &argc, NULL, err);
        if (rc <= 0)
            return requests;
        if ((size_t)rc > len - off || argc > CAP)
            abort();
        for (size_t i = 0; i < argc; i++)
            if (argv[i].ptr < buf + off || argv[i].ptr + argv[i].len > buf + off + (size_t)rc)
                abort();
        if (check)
            check_round_trip(argv, argc);
        off += (size_t)rc;
        requests++;
    }
}

/* The input arriving a byte at a time: requests and the final status, parsing after every byte
 * (need false) or only once `need` bytes are there (need true). */
static void trickle(const uint8_t *data, size_t size, bool skip, size_t *requests, long *last)
{
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    resp_limits_t lim = {.bulk_max = 4096, .args_max = CAP};
    size_t off = 0, need = 0;
    *requests = 0;
    *last = RESP_PARTIAL;
    for (size_t have = 1; have <= size; have++) {
        if (skip && have - off < need)
            continue;
        resp_arg_t argv[CAP];
        size_t argc;
        char err[RESP_ERR_MAX];
        long rc;
        while ((rc = resp_parse(buf + off, have - off, &lim, argv, CAP, &argc, &need, err)) > 0) {
            off += (size_t)rc;
            (*requests)++;
            need = 0;
        }
        *last = rc;
        if (rc < 0)
            break;
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t every = 0, skipping = 0;
    long every_last = 0, skipping_last = 0;
    if (size <= 4096) { /* quadratic: keep it to small inputs */
        trickle(data, size, false, &every, &every_last);
        trickle(data, size, true, &skipping, &skipping_last);
        if (every != skipping || (every_last < 0) != (skipping_last < 0))
            abort();
    }
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    size_t whole = drain(buf, size, true);
    /* the same bytes arriving in pieces: every prefix parses to a prefix of the requests */
    for (size_t cut = 0; cut < size; cut += 10) {
        memcpy(buf, data, size);
        if (drain(buf, cut, false) > whole)
            abort();
    }
    free(buf);
    return 0;
}
