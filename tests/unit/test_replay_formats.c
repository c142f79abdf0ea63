/*
 * test_replay_formats.c - the input formats of `sluice replay` besides its plain lines: RFC 3339
 * and nginx $time_local timestamps (proto/timestamp.h), nginx's combined access log and JSON
 * lines (proto/replay_formats.h), and the flags that choose them. Table-driven; every record is
 * parsed from an exact-size heap copy, so an over-read is caught under AddressSanitizer.
 *
 * Property (seeded, SLUICE_SEED replays): for random instants from 1970 to 2116, written by
 * gmtime_r/strftime in RFC 3339 with a random offset and fraction, and in nginx's format, the
 * parsers give back the instant exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cli/replay.h"
#include "prop/gen.h"
#include "proto/replay_formats.h"
#include "proto/timestamp.h"

#define S                   INT64_C(1000000000)
#define T_2026_12_02_072618 INT64_C(1796196378) /* 2026-12-02T07:26:18Z, seconds */

/* ---- timestamps -------------------------------------------------------------------------- */

static timestamp_rc_t rfc(const char *text, int64_t *ns)
{
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, text, n);
    timestamp_rc_t rc = timestamp_rfc3339(copy, n, ns);
    free(copy);
    return rc;
}

static timestamp_rc_t ngx(const char *text, int64_t *ns)
{
    size_t n = strlen(text);
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, text, n);
    timestamp_rc_t rc = timestamp_nginx(copy, n, ns);
    free(copy);
    return rc;
}

static const struct {
    const char *text;
    timestamp_rc_t rc;
    int64_t ns;
} rfc_cases[] = {
    {"1970-01-01T00:00:00Z", TS_OK, 0},
    {"2026-12-02T07:26:18Z", TS_OK, T_2026_12_02_072618 *S},
    {"2026-12-02t07:26:18z", TS_OK, T_2026_12_02_072618 *S},
    {"2026-12-02 07:26:18Z", TS_OK, T_2026_12_02_072618 *S},
    {"2026-12-02T07:26:18.25Z", TS_OK, T_2026_12_02_072618 *S + 250000000},
    {"2026-12-02T07:26:18.000000001Z", TS_OK, T_2026_12_02_072618 *S + 1},
    {"2026-12-02T08:26:18+01:00", TS_OK, T_2026_12_02_072618 *S},
    {"2026-12-02T02:56:18-04:30", TS_OK, T_2026_12_02_072618 *S},
    {"2024-02-29T00:00:00Z", TS_OK, INT64_C(1709164800) * S}, /* a leap day */
    {"2000-02-29T00:00:00Z", TS_OK, INT64_C(951782400) * S},  /* divisible by 400 */
    {"2016-12-31T23:59:60Z", TS_OK, INT64_C(1483228800) * S}, /* a leap second */
    {"1970-01-01T01:00:00+01:00", TS_OK, 0},                  /* the epoch, east */
    {"1969-12-31T23:59:59Z", TS_ERANGE, 0},                   /* before 1970 */
    {"1970-01-01T00:00:00+00:01", TS_ERANGE, 0},              /* a minute before */
    {"2117-01-01T00:00:00Z", TS_ERANGE, 0},                   /* past SL_NOW_MAX_NS */
    {"2023-02-29T00:00:00Z", TS_EFIELD, 0},                   /* not a leap year */
    {"1900-02-29T00:00:00Z", TS_EFIELD, 0},                   /* divisible by 100 */
    {"2026-04-31T00:00:00Z", TS_EFIELD, 0},
    {"2026-13-01T00:00:00Z", TS_EFIELD, 0},
    {"2026-00-01T00:00:00Z", TS_EFIELD, 0},
    {"2026-12-00T00:00:00Z", TS_EFIELD, 0},
    {"2026-12-02T24:00:00Z", TS_EFIELD, 0},
    {"2026-12-02T07:60:00Z", TS_EFIELD, 0},
    {"2026-12-02T07:26:61Z", TS_EFIELD, 0},
    {"2026-12-02T07:26:18+24:00", TS_EFIELD, 0},
    {"2026-12-02T07:26:18+01:60", TS_EFIELD, 0},
    {"2026-12-02T07:26:18", TS_ESYNTAX, 0},             /* no offset */
    {"2026-12-02T07:26:18.Z", TS_ESYNTAX, 0},           /* no fraction digits */
    {"2026-12-02T07:26:18.0000000001Z", TS_ESYNTAX, 0}, /* finer than ns */
    {"2026-12-02T07:26:18+0100", TS_ESYNTAX, 0},
    {"2026-12-02T07:26:18Z ", TS_ESYNTAX, 0}, /* trailing bytes */
    {"2026-12-2T07:26:18Z", TS_ESYNTAX, 0},
    {"2026-12-02", TS_ESYNTAX, 0},
    {"+026-12-02T07:26:18Z", TS_ESYNTAX, 0},
    {"", TS_ESYNTAX, 0},
};

static void test_rfc3339(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rfc_cases / sizeof rfc_cases[0]; i++) {
        int64_t ns = -7;
        timestamp_rc_t rc = rfc(rfc_cases[i].text, &ns);
        if (rc != rfc_cases[i].rc || (rc == TS_OK && ns != rfc_cases[i].ns) ||
            (rc != TS_OK && ns != -7)) {
            fail_msg("'%s': rc %d ns %lld, want rc %d ns %lld", rfc_cases[i].text, rc,
                     (long long)ns, rfc_cases[i].rc, (long long)rfc_cases[i].ns);
        }
    }
}

static const struct {
    const char *text;
    timestamp_rc_t rc;
    int64_t ns;
} nginx_time_cases[] = {
    {"02/Dec/2026:07:26:18 +0000", TS_OK, T_2026_12_02_072618 *S},
    {"02/Dec/2026:08:26:18 +0100", TS_OK, T_2026_12_02_072618 *S},
    {"01/Jan/1970:00:00:00 +0000", TS_OK, 0},
    {"29/Feb/2024:00:00:00 +0000", TS_OK, INT64_C(1709164800) * S},
    {"29/Feb/2023:00:00:00 +0000", TS_EFIELD, 0},
    {"02/Dez/2026:07:26:18 +0000", TS_ESYNTAX, 0},
    {"02/dec/2026:07:26:18 +0000", TS_ESYNTAX, 0},
    {"02/Dec/2026:07:26:18 0000", TS_ESYNTAX, 0},
    {"02/Dec/2026:07:26:18 +00:00", TS_ESYNTAX, 0},
    {"2/Dec/2026:07:26:18 +0000", TS_ESYNTAX, 0},
    {"02/Dec/2026:07:26:18 +2400", TS_EFIELD, 0},
    {"31/Dec/1969:23:59:59 +0000", TS_ERANGE, 0},
    {"02/De", TS_ESYNTAX, 0},
};

static void test_nginx_time(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof nginx_time_cases / sizeof nginx_time_cases[0]; i++) {
        int64_t ns = -7;
        timestamp_rc_t rc = ngx(nginx_time_cases[i].text, &ns);
        if (rc != nginx_time_cases[i].rc || (rc == TS_OK && ns != nginx_time_cases[i].ns)) {
            fail_msg("'%s': rc %d ns %lld, want rc %d ns %lld", nginx_time_cases[i].text, rc,
                     (long long)ns, nginx_time_cases[i].rc, (long long)nginx_time_cases[i].ns);
        }
    }
}

/* Property: what the C library writes for an instant reads back as that instant. */
static void test_timestamps_round_trip(void **state)
{
    (void)state;
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    uint64_t seed = prop_seed();
    prng_t r = {seed};
    printf("seed %llu (SLUICE_SEED replays it)\n", (unsigned long long)seed);
    for (int i = 0; i < 20000; i++) {
        int64_t sec = prng_range(&r, 86400, INT64_C(4600000000)); /* 1970-01-02 .. 2115 */
        int64_t frac = prng_chance(&r, 50) ? prng_range(&r, 0, S - 1) : 0;
        int64_t off_min = prng_range(&r, -(23 * 60 + 59), 23 * 60 + 59);
        time_t local = (time_t)(sec + off_min * 60);
        struct tm tm;
        assert_non_null(gmtime_r(&local, &tm));
        char text[96], digits[16];
        size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(digits, sizeof digits, ".%09lld", (long long)frac);
        snprintf(text + n, sizeof text - n, "%s%c%02d:%02d", frac > 0 ? digits : "",
                 off_min < 0 ? '-' : '+', (int)(llabs(off_min) / 60), (int)(llabs(off_min) % 60));
        int64_t ns = -1;
        if (rfc(text, &ns) != TS_OK || ns != sec * S + frac) {
            fail_msg("seed %llu case %d: '%s' read as %lld, want %lld", (unsigned long long)seed, i,
                     text, (long long)ns, (long long)(sec * S + frac));
        }
        snprintf(text, sizeof text, "%02d/%s/%04d:%02d:%02d:%02d %c%02d%02d", tm.tm_mday,
                 mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 off_min < 0 ? '-' : '+', (int)(llabs(off_min) / 60), (int)(llabs(off_min) % 60));
        if (ngx(text, &ns) != TS_OK || ns != sec * S) {
            fail_msg("seed %llu case %d: '%s' read as %lld, want %lld", (unsigned long long)seed, i,
                     text, (long long)ns, (long long)(sec * S));
        }
    }
}

/* ---- records ----------------------------------------------------------------------------- */

struct parsed {
    int rc;
    struct replay_request req;
    char key[REPLAY_KEY_MAX + 1];
    char err[REPLAY_ERR_MAX];
};

static struct parsed record(const replay_input_t *in, const char *text, int64_t unit_ns)
{
    struct parsed p;
    size_t len = strlen(text);
    char *copy = malloc(len ? len : 1);
    char *keybuf = malloc(REPLAY_KEY_MAX);
    memset(&p, 0, sizeof p);
    assert_non_null(copy);
    assert_non_null(keybuf);
    memcpy(copy, text, len);
    p.rc = replay_parse_record(in, copy, len, unit_ns, &p.req, keybuf, p.err, sizeof p.err);
    if (p.rc == REPLAY_LINE_REQUEST) {
        bool in_line = p.req.key >= copy && p.req.key + p.req.key_len <= copy + len;
        bool in_buf = p.req.key >= keybuf && p.req.key + p.req.key_len <= keybuf + REPLAY_KEY_MAX;
        assert_true(in_line || in_buf);
        assert_true(p.req.key_len >= 1 && p.req.key_len <= REPLAY_KEY_MAX);
        assert_true(p.req.time == p.req.now_ns / unit_ns);
        memcpy(p.key, p.req.key, p.req.key_len);
        p.key[p.req.key_len] = '\0';
    } else if (p.rc == REPLAY_LINE_ERROR) {
        assert_true(p.err[0] != '\0' && strchr(p.err, '\n') == NULL);
    }
    free(keybuf);
    free(copy);
    return p;
}

#define LINE1                                                                                      \
    "203.0.113.7 - alice [02/Dec/2026:07:26:18 +0000] \"POST /login?next=%2F HTTP/1.1\" 401 17 "   \
    "\"https://example.com/a b\" \"Mozilla/5.0 (X11; \\\"x\\\")\""

static const struct {
    replay_nginx_field_t key;
    const char *line;
    const char *want; /* the key, or NULL: an error containing err */
    const char *err;
} nginx_cases[] = {
    {REPLAY_NGINX_ADDR, LINE1 "\n", "203.0.113.7", NULL},
    {REPLAY_NGINX_USER, LINE1, "alice", NULL},
    {REPLAY_NGINX_REQUEST, LINE1, "POST /login?next=%2F HTTP/1.1", NULL},
    {REPLAY_NGINX_METHOD, LINE1, "POST", NULL},
    {REPLAY_NGINX_PATH, LINE1, "/login", NULL},
    {REPLAY_NGINX_STATUS, LINE1, "401", NULL},
    {REPLAY_NGINX_REFERER, LINE1, "https://example.com/a b", NULL},
    {REPLAY_NGINX_AGENT, LINE1 "\r\n", "Mozilla/5.0 (X11; \\\"x\\\")", NULL},
    {REPLAY_NGINX_ADDR, LINE1 " 0.003 \"extra\"", "203.0.113.7", NULL}, /* appended fields */
    {REPLAY_NGINX_REFERER, "a - - [02/Dec/2026:07:26:18 +0000] \"GET / HTTP/1.1\" 200 1 \"\" \"-\"",
     NULL, "key (referer) is 0 bytes"},
    {REPLAY_NGINX_ADDR, "a - - [02/Dec/2026:07:26:18 +0000] \"GET / HTTP/1.1\" 200 1 \"-\"", NULL,
     "no http_user_agent field"},
    {REPLAY_NGINX_ADDR, "a - - [02/Dec/2026:07:26:18 +0000 \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"",
     NULL, "no time_local field"},
    {REPLAY_NGINX_ADDR, "a - - 02/Dec/2026:07:26:18 \"GET / HTTP/1.1\" 200 1 \"-\" \"-\" \"-\"",
     NULL, "time_local is not in []"},
    {REPLAY_NGINX_ADDR, "a - - [02/Dec/2026:07:26:18 +0000] GET 200 1 \"-\" \"-\" \"-\" \"-\"",
     NULL, "request is not in \"\""},
    {REPLAY_NGINX_ADDR, "a - - [2026-12-02T07:26:18Z] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"", NULL,
     "time_local: not nginx's"},
    {REPLAY_NGINX_ADDR, "a - - [02/Dec/2026:07:26:18 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-",
     NULL, "no http_user_agent field"},
};

static void test_nginx_lines(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof nginx_cases / sizeof nginx_cases[0]; i++) {
        replay_input_t in = {.format = REPLAY_FORMAT_NGINX, .nginx_key = nginx_cases[i].key};
        struct parsed p = record(&in, nginx_cases[i].line, SL_NS_PER_MS);
        if (nginx_cases[i].want != NULL) {
            if (p.rc != REPLAY_LINE_REQUEST || strcmp(p.key, nginx_cases[i].want) != 0) {
                fail_msg("case %zu: rc %d key '%s' err '%s', want '%s'", i, p.rc, p.key, p.err,
                         nginx_cases[i].want);
            }
            assert_int_equal(p.req.time, T_2026_12_02_072618 * 1000);
            assert_int_equal(p.req.cost, 1);
        } else if (p.rc != REPLAY_LINE_ERROR || strstr(p.err, nginx_cases[i].err) == NULL) {
            fail_msg("case %zu: rc %d err '%s', want an error with '%s'", i, p.rc, p.err,
                     nginx_cases[i].err);
        }
    }
    replay_input_t in = {.format = REPLAY_FORMAT_NGINX};
    assert_int_equal(record(&in, "  \r\n", SL_NS_PER_MS).rc, REPLAY_LINE_SKIP);
    char nul[] = "a - - [02/Dec/2026:07:26:18 +0000] \"G\0\" 200 1 \"-\" \"-\"";
    struct replay_request req;
    char keybuf[REPLAY_KEY_MAX], err[REPLAY_ERR_MAX];
    assert_int_equal(
        replay_parse_record(&in, nul, sizeof nul - 1, SL_NS_PER_MS, &req, keybuf, err, sizeof err),
        REPLAY_LINE_ERROR);
    assert_non_null(strstr(err, "NUL"));
}

static const struct {
    const char *line;
    int64_t unit_ns;
    const char *want_key; /* NULL: an error containing err */
    int64_t time, cost;
    const char *err;
} jsonl_cases[] = {
    {"{\"time\":1500,\"key\":\"u1\"}", SL_NS_PER_MS, "u1", 1500, 1, NULL},
    {"{\"key\":\"u1\",\"time\":1500,\"cost\":3,\"other\":[1,{\"a\":2}]}\n", SL_NS_PER_MS, "u1",
     1500, 3, NULL},
    {"{\"time\":\"2026-12-02T07:26:18.25Z\",\"key\":\"u\"}", SL_NS_PER_MS, "u",
     T_2026_12_02_072618 * 1000 + 250, 1, NULL},
    {"{\"time\":\"2026-12-02T07:26:18.25Z\",\"key\":\"u\"}", SL_NS_PER_SEC, "u",
     T_2026_12_02_072618, 1, NULL},
    {"{\"time\":7,\"key\":42}", SL_NS_PER_MS, "42", 7, 1, NULL},
    {"{\"time\":7,\"key\":-42}", SL_NS_PER_MS, "-42", 7, 1, NULL},
    {"{\"time\":7,\"key\":\"\\u00e9\\t\"}", SL_NS_PER_MS, "\xc3\xa9\t", 7, 1, NULL},
    {"{\"time\":7,\"key\":\"k\",\"cost\":0}", SL_NS_PER_MS, "k", 7, 0, NULL},
    {"{\"time\":7}", SL_NS_PER_MS, NULL, 0, 0, "no member \"key\""},
    {"{\"key\":\"k\"}", SL_NS_PER_MS, NULL, 0, 0, "no member \"time\""},
    {"{\"time\":-1,\"key\":\"k\"}", SL_NS_PER_MS, NULL, 0, 0, "time: must be a non-negative"},
    {"{\"time\":1.5,\"key\":\"k\"}", SL_NS_PER_MS, NULL, 0, 0, "time: must be a non-negative"},
    {"{\"time\":\"yesterday\",\"key\":\"k\"}", SL_NS_PER_MS, NULL, 0, 0, "not an RFC 3339"},
    {"{\"time\":9223372036854775807,\"key\":\"k\"}", SL_NS_PER_MS, NULL, 0, 0, "overflows"},
    {"{\"time\":7,\"key\":\"\"}", SL_NS_PER_MS, NULL, 0, 0, "the key is 0 bytes"},
    {"{\"time\":7,\"key\":null}", SL_NS_PER_MS, NULL, 0, 0, "must be a string or an integer"},
    {"{\"time\":7,\"key\":\"k\",\"cost\":-1}", SL_NS_PER_MS, NULL, 0, 0, "non-negative integer"},
    {"{\"time\":7,\"key\":\"k\",\"cost\":\"2\"}", SL_NS_PER_MS, NULL, 0, 0, "non-negative integer"},
    {"{\"time\":7,\"key\":\"a\\u0000b\"}", SL_NS_PER_MS, NULL, 0, 0, "not JSON"},
    {"{\"time\":7,\"time\":8,\"key\":\"k\"}", SL_NS_PER_MS, NULL, 0, 0, "not JSON"},
    {"[1,2]", SL_NS_PER_MS, NULL, 0, 0, "must be a JSON object"},
    {"{\"time\":7,\"key\":\"k\"} {}", SL_NS_PER_MS, NULL, 0, 0, "not JSON"},
    {"{\"time\":7,", SL_NS_PER_MS, NULL, 0, 0, "not JSON"},
    /* found by fuzz_replay_formats: jansson's message quoted a newline of the input, and the
     * error became two lines */
    {"{\"time\":\"26-12-02T07:28:61.25Z\",\"key\":\"}\\\n}\n", SL_NS_PER_MS, NULL, 0, 0,
     "not JSON: invalid escape"},
};

static void test_jsonl_lines(void **state)
{
    (void)state;
    replay_input_t in = {.format = REPLAY_FORMAT_JSONL};
    for (size_t i = 0; i < sizeof jsonl_cases / sizeof jsonl_cases[0]; i++) {
        struct parsed p = record(&in, jsonl_cases[i].line, jsonl_cases[i].unit_ns);
        if (jsonl_cases[i].want_key != NULL) {
            if (p.rc != REPLAY_LINE_REQUEST || strcmp(p.key, jsonl_cases[i].want_key) != 0 ||
                p.req.time != jsonl_cases[i].time || p.req.cost != jsonl_cases[i].cost) {
                fail_msg("case %zu: rc %d key '%s' time %lld cost %lld err '%s'", i, p.rc, p.key,
                         (long long)p.req.time, (long long)p.req.cost, p.err);
            }
        } else if (p.rc != REPLAY_LINE_ERROR || strstr(p.err, jsonl_cases[i].err) == NULL) {
            fail_msg("case %zu: rc %d err '%s', want an error with '%s'", i, p.rc, p.err,
                     jsonl_cases[i].err);
        }
    }
    /* members named by the caller */
    replay_input_t named = {
        .format = REPLAY_FORMAT_JSONL, .json_key = "ip", .json_time = "ts", .json_cost = "n"};
    struct parsed p = record(&named, "{\"ts\":5,\"ip\":\"10.0.0.1\",\"n\":4,\"key\":\"x\"}", 1);
    assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
    assert_string_equal(p.key, "10.0.0.1");
    assert_int_equal(p.req.cost, 4);
    assert_int_equal(p.req.now_ns, 5);
    assert_int_equal(record(&named, "\n", 1).rc, REPLAY_LINE_SKIP);
    /* a key of REPLAY_KEY_MAX bytes fits; one more does not */
    char *big = malloc(REPLAY_KEY_MAX + 64);
    assert_non_null(big);
    int n = snprintf(big, 64, "{\"time\":1,\"key\":\"");
    memset(big + n, 'k', REPLAY_KEY_MAX);
    strcpy(big + n + REPLAY_KEY_MAX, "\"}");
    assert_int_equal(record(&in, big, 1).req.key_len, REPLAY_KEY_MAX);
    memset(big + n, 'k', REPLAY_KEY_MAX + 1);
    strcpy(big + n + REPLAY_KEY_MAX + 1, "\"}");
    assert_int_equal(record(&in, big, 1).rc, REPLAY_LINE_ERROR);
    free(big);
}

/* The plain format reads RFC 3339 TIME too; an error names the format it looked like. */
static void test_plain_rfc3339(void **state)
{
    (void)state;
    replay_input_t in = {0};
    struct parsed p = record(&in, "2026-12-02T07:26:18.999Z k 2\n", SL_NS_PER_SEC);
    assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
    assert_int_equal(p.req.time, T_2026_12_02_072618); /* rounded down to the unit */
    assert_int_equal(p.req.now_ns, T_2026_12_02_072618 * S + 999000000);
    assert_int_equal(p.req.cost, 2);
    p = record(&in, "2026-02-30T00:00:00Z k", SL_NS_PER_MS);
    assert_int_equal(p.rc, REPLAY_LINE_ERROR);
    assert_non_null(strstr(p.err, "not an RFC 3339 timestamp"));
    p = record(&in, "soon k", SL_NS_PER_MS);
    assert_non_null(strstr(p.err, "time must be a non-negative integer or an RFC 3339 timestamp"));
}

/* ---- flags ------------------------------------------------------------------------------- */

static int args(struct replay_config *cfg, char *err, size_t errlen, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, errlen);
    argv[argc++] = (char *)"replay";
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;) {
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;
    return replay_parse_args(argc, argv, cfg, err, errlen);
}

#define RULE "--algorithm", "fixed_window", "--limit", "3", "--window", "1s"

static void test_args(void **state)
{
    (void)state;
    struct replay_config cfg;
    char err[REPLAY_ERR_MAX];
    assert_int_equal(args(&cfg, err, sizeof err, RULE, NULL), REPLAY_ARGS_OK);
    assert_int_equal(cfg.input.format, REPLAY_FORMAT_PLAIN);
    assert_int_equal(args(&cfg, err, sizeof err, RULE, "--format", "nginx", "--key", "path", NULL),
                     REPLAY_ARGS_OK);
    assert_int_equal(cfg.input.format, REPLAY_FORMAT_NGINX);
    assert_int_equal(cfg.input.nginx_key, REPLAY_NGINX_PATH);
    assert_int_equal(args(&cfg, err, sizeof err, RULE, "--format", "jsonl", "--key", "ip",
                          "--time-field", "ts", "--cost-field", "n", NULL),
                     REPLAY_ARGS_OK);
    assert_string_equal(cfg.input.json_key, "ip");
    assert_string_equal(cfg.input.json_time, "ts");
    assert_string_equal(cfg.input.json_cost, "n");
    static const struct {
        const char *a, *b, *c, *d, *err;
    } bad[] = {
        {"--format", "csv", NULL, NULL, "--format: must be one of plain, nginx, jsonl, got 'csv'"},
        {"--key", "addr", NULL, NULL, "--key: only with --format nginx or jsonl"},
        {"--format", "nginx", "--key", "ip", "--key: an nginx field: addr, user"},
        {"--format", "nginx", "--time-field", "t", "--time-field: only with --format jsonl"},
        {"--cost-field", "n", NULL, NULL, "--cost-field: only with --format jsonl"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = args(&cfg, err, sizeof err, RULE, bad[i].a, bad[i].b, bad[i].c, bad[i].d, NULL);
        if (rc != REPLAY_ARGS_USAGE || strstr(err, bad[i].err) == NULL) {
            fail_msg("case %zu: rc %d err '%s', want '%s'", i, rc, err, bad[i].err);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_nginx_time),
        cmocka_unit_test(test_timestamps_round_trip),
        cmocka_unit_test(test_nginx_lines),
        cmocka_unit_test(test_jsonl_lines),
        cmocka_unit_test(test_plain_rfc3339),
        cmocka_unit_test(test_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
