/*
 * test_resp.c - the RESP2 codec: complete, partial, pipelined and malformed requests in both
 * forms, limits, and every reply encoder. Each parse input is placed right before a PROT_NONE
 * page (picohttpparser's trick), so reading one byte past the end crashes the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/resp.h"
#include "prop/gen.h"

typedef struct guarded {
    char *base; /* two pages: data, then PROT_NONE */
    size_t page;
} guarded_t;

static guarded_t guard;

static int setup(void **unused)
{
    guard.page = (size_t)sysconf(_SC_PAGESIZE);
    guard.base =
        mmap(NULL, 2 * guard.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(guard.base != MAP_FAILED);
    assert_int_equal(mprotect(guard.base + guard.page, guard.page, PROT_NONE), 0);
    return 0;
}

static int teardown(void **unused)
{
    munmap(guard.base, 2 * guard.page);
    return 0;
}

/* Copies len bytes so that they end exactly at the guard page; returns the copy. */
static char *place(const char *bytes, size_t len)
{
    assert_true(len <= guard.page);
    char *p = guard.base + guard.page - len;
    memcpy(p, bytes, len);
    return p;
}

typedef struct parsed {
    long rc;
    size_t argc;
    resp_arg_t argv[16];
    char err[RESP_ERR_MAX];
} parsed_t;

static parsed_t parse_with(const char *bytes, size_t len, const resp_limits_t *limits)
{
    parsed_t p;
    memset(&p, 0, sizeof(p));
    char *buf = place(bytes, len);
    p.rc = resp_parse(buf, len, limits, p.argv, 16, &p.argc, NULL, p.err);
    return p;
}

static parsed_t parse(const char *s)
{
    return parse_with(s, strlen(s), NULL);
}

static void assert_arg(const parsed_t *p, size_t i, const char *want, size_t want_len)
{
    assert_true(i < p->argc);
    assert_int_equal(p->argv[i].len, want_len);
    assert_memory_equal(p->argv[i].ptr, want, want_len);
}

static void test_multibulk(void **unused)
{
    const char req[] = "*3\r\n$6\r\nSL.ALLOW\r\n$3\r\napi\r\n$3\r\nu42\r\n";
    /* "$6" is wrong for SL.ALLOW (8 bytes): the byte after 6 bytes is not CR */
    parsed_t bad = parse(req);
    assert_int_equal(bad.rc, RESP_ERROR);
    assert_string_equal(bad.err, "Protocol error: bulk of 6 bytes not followed by CRLF");

    const char ok[] = "*3\r\n$8\r\nSL.ALLOW\r\n$3\r\napi\r\n$3\r\nu42\r\n";
    parsed_t p = parse(ok);
    assert_int_equal(p.rc, (long)strlen(ok));
    assert_int_equal(p.argc, 3);
    assert_arg(&p, 0, "SL.ALLOW", 8);
    assert_arg(&p, 1, "api", 3);
    assert_arg(&p, 2, "u42", 3);
}

/* Every strict prefix of a valid request is partial, never an error or a request. */
static void test_every_prefix_is_partial(void **unused)
{
    const char *reqs[] = {"*2\r\n$4\r\nPING\r\n$0\r\n\r\n", "ECHO \"a b\" 'c'\r\n",
                          "*1\r\n$12\r\n\r\n\0binary\r\nx\r\n"};
    size_t lens[] = {strlen(reqs[0]), strlen(reqs[1]), 23};
    for (size_t r = 0; r < 3; r++) {
        for (size_t n = 0; n < lens[r]; n++) {
            parsed_t p = parse_with(reqs[r], n, NULL);
            if (p.rc != RESP_PARTIAL)
                fail_msg("request %zu prefix %zu: rc %ld (%s)", r, n, p.rc, p.err);
        }
        assert_int_equal(parse_with(reqs[r], lens[r], NULL).rc, (long)lens[r]);
    }
}

static void test_binary_and_pipelined(void **unused)
{
    const char two[] = "*1\r\n$5\r\na\r\n\0b\r\n*1\r\n$4\r\nPING\r\n";
    size_t len = sizeof(two) - 1;
    parsed_t p = parse_with(two, len, NULL);
    assert_int_equal(p.rc, 15); /* just the first request */
    assert_int_equal(p.argc, 1);
    assert_arg(&p, 0, "a\r\n\0b", 5);
    parsed_t q = parse_with(two + 15, len - 15, NULL);
    assert_int_equal(q.rc, (long)(len - 15));
    assert_arg(&q, 0, "PING", 4);
}

static void test_empty_requests(void **unused)
{
    parsed_t z = parse("*0\r\n");
    assert_int_equal(z.rc, 4);
    assert_int_equal(z.argc, 0);
    parsed_t neg = parse("*-1\r\n");
    assert_int_equal(neg.rc, 5);
    assert_int_equal(neg.argc, 0);
    parsed_t blank = parse("   \r\n");
    assert_int_equal(blank.rc, 5);
    assert_int_equal(blank.argc, 0);
}

static void assert_error(const char *bytes, size_t len, const resp_limits_t *limits,
                         const char *want)
{
    parsed_t p = parse_with(bytes, len, limits);
    if (p.rc != RESP_ERROR)
        fail_msg("%.*s: rc %ld, want an error", (int)len, bytes, p.rc);
    assert_string_equal(p.err, want);
}

#define ERR(s, want) assert_error(s, strlen(s), NULL, want)

static void test_protocol_errors(void **unused)
{
    ERR("*x\r\n", "Protocol error: invalid multibulk length");
    ERR("*1x\r\n", "Protocol error: invalid multibulk length");
    ERR("*2\r\n+PING\r\n", "Protocol error: expected '$', got '+'");
    ERR("*1\r\n\x01", "Protocol error: expected '$', got \\x01");
    ERR("*1\r\n$-1\r\n", "Protocol error: invalid bulk length");
    ERR("*1\r\n$abc\r\n", "Protocol error: invalid bulk length");
    ERR("*1\r\n$3\nabc\r\n", "Protocol error: invalid bulk length");
    ERR("*1\r\n$1234567890123456789012345678901234567890",
        "Protocol error: too big bulk count string");
    ERR("*1\r\n$3\r\nabcd\r\n", "Protocol error: bulk of 3 bytes not followed by CRLF");
    ERR("*123456789012345678901234567890123456789", "Protocol error: too big mbulk count string");
    ERR("*99999999999999999999\r\n", "Protocol error: invalid multibulk length");
    ERR("SET \"a b\r\n", "Protocol error: unbalanced quotes in request");
    ERR("SET \"a\"b\r\n", "Protocol error: unbalanced quotes in request");
    ERR("SET 'a\r\n", "Protocol error: unbalanced quotes in request");
}

static void test_limits(void **unused)
{
    resp_limits_t small = {.bulk_max = 4, .args_max = 2};
    const char big[] = "*1\r\n$5\r\nhello\r\n";
    assert_error(big, strlen(big), &small,
                 "Protocol error: bulk length 5 exceeds the limit of 4 bytes");
    const char fits[] = "*1\r\n$4\r\nhell\r\n";
    assert_int_equal(parse_with(fits, strlen(fits), &small).rc, (long)strlen(fits));
    const char many[] = "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n";
    assert_error(many, strlen(many), &small,
                 "Protocol error: too many arguments (3, the limit is 2)");
    assert_error("a b c\n", 6, &small, "Protocol error: too many arguments (the limit is 2)");
    /* the caller's argv capacity (16 here) caps args_max too */
    char line[64] = "";
    for (int i = 0; i < 17; i++)
        strcat(line, "x ");
    strcat(line, "\n");
    assert_error(line, strlen(line), NULL, "Protocol error: too many arguments (the limit is 16)");
}

static void test_inline_too_big(void **unused)
{
    size_t n = RESP_INLINE_MAX + 1;
    char *buf = malloc(n);
    memset(buf, 'a', n);
    char err[RESP_ERR_MAX];
    resp_arg_t argv[4];
    size_t argc;
    assert_int_equal(resp_parse(buf, n, NULL, argv, 4, &argc, NULL, err), RESP_ERROR);
    assert_string_equal(err, "Protocol error: too big inline request");
    assert_int_equal(resp_parse(buf, n - 1, NULL, argv, 4, &argc, NULL, err), RESP_PARTIAL);
    free(buf);
}

/* A partial parse says how long the buffer must grow before parsing again can get further: the
 * end of a bulk argument whose length it read, else one more byte. Waiting for that many bytes
 * never misses a request, however the bytes are split. */
static void test_need(void **unused)
{
    char buf[] = "*2\r\n$4\r\nPING\r\n$10\r\n0123456789\r\n";
    size_t len = strlen(buf), need = 0, argc;
    resp_arg_t argv[4];
    char err[RESP_ERR_MAX];
    static const struct {
        size_t have, need;
    } rows[] = {
        {1, 2},   {4, 5},   {5, 6}, /* in the count and the first header */
        {8, 14},  {13, 14},         /* the first bulk's length is known */
        {14, 15}, {18, 19},         /* the second header */
        {19, 31}, {30, 31},         /* the second bulk */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(resp_parse(buf, rows[i].have, NULL, argv, 4, &argc, &need, err),
                         RESP_PARTIAL);
        assert_int_equal(need, rows[i].need);
    }
    assert_int_equal(resp_parse(buf, len, NULL, argv, 4, &argc, &need, err), (long)len);
    /* a bulk of 1000 bytes fed one byte at a time, parsed only when need is reached: the same
     * request, parsed about once per header byte, not once per byte */
    char big[1100];
    int head = snprintf(big, sizeof big, "*1\r\n$1000\r\n");
    memset(big + head, 'x', 1000);
    memcpy(big + head + 1000, "\r\n", 2);
    len = (size_t)head + 1002;
    size_t parses = 0;
    need = 0;
    for (size_t have = 1; have <= len; have++) {
        if (have < need)
            continue;
        parses++;
        long rc = resp_parse(big, have, NULL, argv, 4, &argc, &need, err);
        assert_int_equal(rc, have == len ? (long)len : RESP_PARTIAL);
    }
    assert_int_equal(argc, 1);
    assert_int_equal(argv[0].len, 1000);
    assert_int_equal(parses, (size_t)head + 1); /* each header byte, then the whole */
}

static void test_inline(void **unused)
{
    parsed_t p = parse("PING\r\n");
    assert_int_equal(p.rc, 6);
    assert_arg(&p, 0, "PING", 4);

    parsed_t q = parse("SL.ALLOW  api\tu42 COST 3\n");
    assert_int_equal(q.argc, 5);
    assert_arg(&q, 1, "api", 3);
    assert_arg(&q, 2, "u42", 3);
    assert_arg(&q, 4, "3", 1);

    parsed_t r = parse("ECHO \"a b\\n\\x41\\\"\" 'it\\'s' \"\"\r\n");
    assert_int_equal(r.argc, 4);
    assert_arg(&r, 1, "a b\nA\"", 6);
    assert_arg(&r, 2, "it's", 4);
    assert_arg(&r, 3, "", 0);
}

static void test_encoders(void **unused)
{
    buf_t b = {0};
    resp_add_array(&b, 5);
    resp_add_int(&b, 1);
    resp_add_int(&b, -1);
    resp_add_int(&b, INT64_MIN);
    resp_add_bulk(&b, "a\r\nb", 4);
    resp_add_null(&b);
    resp_add_simple(&b, "OK");
    resp_add_error(&b, "ERR unknown rule '%s'", "x\r\ny");
    const char want[] = "*5\r\n:1\r\n:-1\r\n:-9223372036854775808\r\n$4\r\na\r\nb\r\n$-1\r\n"
                        "+OK\r\n-ERR unknown rule 'x  y'\r\n";
    assert_false(b.failed);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    buf_consume(&b, 4);
    assert_memory_equal(b.data, ":1\r\n", 4);
    buf_consume(&b, b.len + 10);
    assert_int_equal(b.len, 0);
    /* growth well past the initial capacity keeps every byte */
    for (int i = 0; i < 10000; i++)
        resp_add_int(&b, i);
    assert_false(b.failed);
    assert_memory_equal(b.data + b.len - 7, ":9999\r\n", 7);
    buf_free(&b);
}

/* What the encoder writes, the parser reads back: bulks of every byte value. */
static void test_round_trip(void **unused)
{
    buf_t b = {0};
    char arg[256];
    for (int i = 0; i < 256; i++)
        arg[i] = (char)i;
    resp_add_array(&b, 3);
    resp_add_bulk(&b, "SET", 3);
    resp_add_bulk(&b, arg, 256);
    resp_add_bulk(&b, "", 0);
    parsed_t p = parse_with(b.data, b.len, NULL);
    assert_int_equal(p.rc, (long)b.len);
    assert_int_equal(p.argc, 3);
    assert_arg(&p, 1, arg, 256);
    assert_arg(&p, 2, "", 0);
    buf_free(&b);
}

/* An integer of d digits (1..19), at most INT64_MAX, from r: every length equally likely. */
static int64_t gen_digits(prng_t *r, int d)
{
    uint64_t v = (uint64_t)prng_range(r, 1, 9);
    for (int i = 1; i < d; i++)
        v = v * 10 + (uint64_t)prng_range(r, 0, 9);
    return (int64_t)(v > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : v);
}

/* The integer encoders write what printf writes, for integers of every length and sign, alone
 * and in an array (which reserves once for all). */
static void test_encoders_match_printf(void **unused)
{
    prng_t r = prop_case_prng(prop_seed(), 0, 1);
    buf_t b = {0}, want = {0};
    int64_t v[8];
    for (int c = 0; c < 20000; c++) {
        size_t n = (size_t)prng_range(&r, 0, 8);
        for (size_t i = 0; i < n; i++) {
            int64_t x = prng_chance(&r, 5) ? INT64_MIN : gen_digits(&r, (int)prng_range(&r, 1, 19));
            v[i] = x != INT64_MIN && prng_chance(&r, 30) ? -x : x;
        }
        b.len = want.len = 0;
        resp_add_int_array(&b, v, n);
        buf_printf(&want, "*%zu\r\n", n);
        for (size_t i = 0; i < n; i++) {
            resp_add_int(&b, v[i]);
            buf_printf(&want, ":%lld\r\n", (long long)v[i]);
        }
        for (size_t i = 0; i < n; i++)
            buf_printf(&want, ":%lld\r\n", (long long)v[i]);
        assert_false(b.failed);
        assert_int_equal(b.len, want.len);
        assert_memory_equal(b.data, want.data, b.len);
    }
    buf_free(&b);
    buf_free(&want);
}

/* A count line is read as strtoll reads it, for counts of every length: the multibulk count
 * shows in the "too many arguments" error (up to 18 digits), and 19 digits or more are refused. */
static void test_count_lines(void **unused)
{
    prng_t r = prop_case_prng(prop_seed(), 0, 2);
    char req[96], want[RESP_ERR_MAX];
    for (int c = 0; c < 20000; c++) {
        int d = (int)prng_range(&r, 1, 20);
        int64_t x = gen_digits(&r, d < 19 ? d : 19);
        int len = snprintf(req, sizeof req, "*%s%lld\r\n", d == 20 ? "1" : "", (long long)x);
        parsed_t p = parse_with(req, (size_t)len, NULL);
        size_t digits = (size_t)len - 3;
        if (digits > 18) {
            assert_int_equal(p.rc, RESP_ERROR);
            assert_string_equal(p.err, "Protocol error: invalid multibulk length");
        } else if (x > 16) {
            assert_int_equal(p.rc, RESP_ERROR);
            snprintf(want, sizeof want,
                     "Protocol error: too many arguments (%lld, the limit is 16)", (long long)x);
            assert_string_equal(p.err, want);
        } else {
            assert_int_equal(p.rc, RESP_PARTIAL); /* the arguments have not come */
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multibulk),
        cmocka_unit_test(test_every_prefix_is_partial),
        cmocka_unit_test(test_binary_and_pipelined),
        cmocka_unit_test(test_empty_requests),
        cmocka_unit_test(test_protocol_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_inline_too_big),
        cmocka_unit_test(test_need),
        cmocka_unit_test(test_inline),
        cmocka_unit_test(test_encoders),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encoders_match_printf),
        cmocka_unit_test(test_count_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
