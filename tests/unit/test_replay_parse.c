/*
 * test_replay_parse.c - the parsers of `sluice replay`: replay_parse_line() (one input line)
 * and replay_parse_args() (the command's flags), table-driven where the cases are alike.
 *
 * Every line is copied into a heap buffer of exactly its length before parsing, so an
 * over-read past the end is caught under AddressSanitizer (the lines are not NUL-terminated
 * there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/replay.h"

struct parsed {
    int rc;
    struct replay_request req;
    char key[REPLAY_KEY_MAX + 1];
    char err[REPLAY_ERR_MAX];
};

/* Parses `len` bytes of `text` from an exact-size heap copy. */
static struct parsed parse_n(const char *text, size_t len, int64_t unit_ns)
{
    struct parsed p;
    char *copy = malloc(len ? len : 1);

    memset(&p, 0, sizeof p);
    assert_non_null(copy);
    memcpy(copy, text, len);
    p.rc = replay_parse_line(copy, len, unit_ns, &p.req, p.err, sizeof p.err);
    if (p.rc == REPLAY_LINE_REQUEST) {
        assert_true(p.req.key >= copy && p.req.key + p.req.key_len <= copy + len);
        assert_true(p.req.key_len <= REPLAY_KEY_MAX);
        memcpy(p.key, p.req.key, p.req.key_len);
        p.key[p.req.key_len] = '\0';
    }
    free(copy);
    return p;
}

static struct parsed parse(const char *text)
{
    return parse_n(text, strlen(text), SL_NS_PER_MS);
}

/* ---- well-formed lines ------------------------------------------------------------------- */

static const struct {
    const char *line;
    int64_t time;
    const char *key;
    int64_t cost;
} good_lines[] = {
    {"0 user1", 0, "user1", 1},
    {"0 user1\n", 0, "user1", 1},
    {"1000 user1 2\n", 1000, "user1", 2},
    {"1500\tapi:key\t3\r\n", 1500, "api:key", 3}, /* tabs, CRLF */
    {"  42   k   2   \n", 42, "k", 2},            /* leading and trailing spaces */
    {"42 k 2 \t \r\n", 42, "k", 2},               /* trailing blanks before CRLF */
    {"7\tk\r\n", 7, "k", 1},
    {"7 k 0", 7, "k", 0},                     /* cost 0 = peek */
    {"007 k 010", 7, "k", 10},                /* leading zeros are decimal */
    {"1 #notacomment", 1, "#notacomment", 1}, /* '#' only starts a comment as first field */
    {"1 k\v\f", 1, "k", 1},
    {"9223372036854 k", INT64_C(9223372036854), "k", 1}, /* the largest ms that fits in ns */
    {"5 key 9223372036854775807", 5, "key", INT64_MAX},
    {"1 \xc3\xa9t\xc3\xa9", 1, "\xc3\xa9t\xc3\xa9", 1}, /* UTF-8 key bytes pass through */
};

static void test_good_lines(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof good_lines / sizeof good_lines[0]; i++) {
        struct parsed p = parse(good_lines[i].line);
        if (p.rc != REPLAY_LINE_REQUEST) {
            print_error("line %zu '%s': %s\n", i, good_lines[i].line, p.err);
        }
        assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
        assert_int_equal(p.req.time, good_lines[i].time);
        assert_int_equal(p.req.now_ns, good_lines[i].time * SL_NS_PER_MS);
        assert_string_equal(p.key, good_lines[i].key);
        assert_int_equal(p.req.cost, good_lines[i].cost);
    }
}

static void test_units(void **state)
{
    (void)state;
    struct parsed p = parse_n("3 k", 3, SL_NS_PER_SEC);
    assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
    assert_int_equal(p.req.time, 3);
    assert_int_equal(p.req.now_ns, 3 * SL_NS_PER_SEC);

    p = parse_n("3 k", 3, SL_NS_PER_US);
    assert_int_equal(p.req.now_ns, 3000);

    p = parse_n("9223372036854775807 k", 21, 1); /* ns: every int64 fits */
    assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
    assert_int_equal(p.req.now_ns, INT64_MAX);
}

/* The length given wins over the NUL terminator: only the first `len` bytes are a line. */
static void test_length_not_nul(void **state)
{
    (void)state;
    struct parsed p = parse_n("10 abcdef 5", 5, SL_NS_PER_MS);
    assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
    assert_string_equal(p.key, "ab");
    assert_int_equal(p.req.cost, 1);
}

/* ---- skipped lines ----------------------------------------------------------------------- */

static void test_skipped_lines(void **state)
{
    (void)state;
    static const char *const skipped[] = {
        "",
        "\n",
        "\r\n",
        "   ",
        " \t \r\n",
        "#",
        "# a comment\n",
        "#0 k 1",
        "   # indented\r\n",
        "\t#x y z w v\n",
    };
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++) {
        struct parsed p = parse(skipped[i]);
        assert_int_equal(p.rc, REPLAY_LINE_SKIP);
    }
}

/* ---- malformed lines --------------------------------------------------------------------- */

static const struct {
    const char *line;
    const char *err;
} bad_lines[] = {
    {"x k", "time must be a non-negative integer or an RFC 3339 timestamp, got 'x'"},
    {"-1 k", "time must be a non-negative integer or an RFC 3339 timestamp, got '-1'"},
    {"+1 k", "time must be a non-negative integer or an RFC 3339 timestamp, got '+1'"},
    {"1.5 k", "time must be a non-negative integer or an RFC 3339 timestamp, got '1.5'"},
    {"1e3 k", "time must be a non-negative integer or an RFC 3339 timestamp, got '1e3'"},
    {"1000", "missing key (expected TIME KEY [COST])"},
    {"1000 \r\n", "missing key (expected TIME KEY [COST])"},
    {"1 k -1", "cost must be a non-negative integer, got '-1'"},
    {"1 k x\r\n", "cost must be a non-negative integer, got 'x'"},
    {"1 k 1.5", "cost must be a non-negative integer, got '1.5'"},
    {"1 k 9223372036854775808", "cost out of range, got '9223372036854775808'"},
    {"1 k 1 extra", "too many fields (expected TIME KEY [COST]), got 'extra'"},
    {"1\tk\t1\t2\t3\n", "too many fields (expected TIME KEY [COST]), got '2'"},
    {"1 k 1 # comment", "too many fields (expected TIME KEY [COST]), got '#'"},
    {"99999999999999999999 k", "time out of range, got '99999999999999999999'"},
    {"9223372036855 k",
     "time 9223372036855 ms overflows 64-bit nanoseconds (max 9223372036854 ms)"},
    {"\x01 k", "time must be a non-negative integer or an RFC 3339 timestamp, got '\\x01'"},
    {"it's k", "time must be a non-negative integer or an RFC 3339 timestamp, got 'it\\x27s'"},
    {"0123456789012345678901234567890123456789xyz k",
     "time must be a non-negative integer or an RFC 3339 timestamp, got "
     "'0123456789012345678901234567890123456789...'"},
};

static void test_bad_lines(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_lines / sizeof bad_lines[0]; i++) {
        struct parsed p = parse(bad_lines[i].line);
        assert_int_equal(p.rc, REPLAY_LINE_ERROR);
        assert_string_equal(p.err, bad_lines[i].err);
    }
}

static void test_nul_byte(void **state)
{
    (void)state;
    struct parsed p = parse_n("1 k\0ey 2", 8, SL_NS_PER_MS);
    assert_int_equal(p.rc, REPLAY_LINE_ERROR);
    assert_string_equal(p.err, "line contains a NUL byte");
}

static void test_key_length(void **state)
{
    (void)state;
    char line[REPLAY_KEY_MAX + 16];

    memcpy(line, "5 ", 2);
    memset(line + 2, 'k', REPLAY_KEY_MAX);
    struct parsed p = parse_n(line, 2 + REPLAY_KEY_MAX, SL_NS_PER_MS);
    assert_int_equal(p.rc, REPLAY_LINE_REQUEST);
    assert_int_equal(p.req.key_len, REPLAY_KEY_MAX);

    line[2 + REPLAY_KEY_MAX] = 'k';
    p = parse_n(line, 3 + REPLAY_KEY_MAX, SL_NS_PER_MS);
    assert_int_equal(p.rc, REPLAY_LINE_ERROR);
    assert_string_equal(p.err, "key is 1025 bytes, longer than the 1024-byte maximum");
}

/* A short or absent error buffer truncates the message; nothing else changes. */
static void test_err_buffer(void **state)
{
    (void)state;
    char err[8];
    struct replay_request req;

    assert_int_equal(replay_parse_line("x k", 3, SL_NS_PER_MS, &req, err, sizeof err),
                     REPLAY_LINE_ERROR);
    assert_string_equal(err, "time mu");
    assert_int_equal(replay_parse_line("x k", 3, SL_NS_PER_MS, &req, NULL, 0), REPLAY_LINE_ERROR);
    assert_int_equal(replay_parse_line("1 k", 3, 0, &req, NULL, 0), REPLAY_LINE_ERROR);
}

/* A skipped or bad line leaves *out as it was. */
static void test_out_untouched(void **state)
{
    (void)state;
    struct replay_request req = {.time = 77, .cost = 88};

    assert_int_equal(replay_parse_line("# c", 3, SL_NS_PER_MS, &req, NULL, 0), REPLAY_LINE_SKIP);
    assert_int_equal(replay_parse_line("1 k x", 5, SL_NS_PER_MS, &req, NULL, 0), REPLAY_LINE_ERROR);
    assert_int_equal(req.time, 77);
    assert_int_equal(req.cost, 88);
}

/* ---- flags ------------------------------------------------------------------------------- */

#define ARGS(...)  ((char *[]){"replay", __VA_ARGS__, NULL})
#define NARGS(...) ((int)(sizeof((char *[]){"replay", __VA_ARGS__}) / sizeof(char *)))
#define PARSE_ARGS(cfg, err, ...)                                                                  \
    replay_parse_args(NARGS(__VA_ARGS__), ARGS(__VA_ARGS__), (cfg), (err), sizeof(err))

static void test_args_ok(void **state)
{
    (void)state;
    struct replay_config cfg;
    char err[REPLAY_ERR_MAX];

    assert_int_equal(PARSE_ARGS(&cfg, err, "--algorithm", "sliding_log", "--limit", "3", "--window",
                                "10s", "traffic.log"),
                     REPLAY_ARGS_OK);
    assert_int_equal(cfg.rule.algorithm, SL_SLIDING_LOG);
    assert_int_equal(cfg.rule.limit, 3);
    assert_int_equal(cfg.rule.window_ns, 10 * SL_NS_PER_SEC);
    assert_int_equal(cfg.unit_ns, SL_NS_PER_MS);
    assert_string_equal(cfg.unit, "ms");
    assert_string_equal(cfg.path, "traffic.log");
    assert_false(cfg.summary);
    assert_false(cfg.show_delay);

    assert_int_equal(PARSE_ARGS(&cfg, err, "--summary", "--unit", "s", "--algorithm", "gcra",
                                "--limit=1", "--window", "1s", "--burst", "4", "--max-delay",
                                "250ms", "-"),
                     REPLAY_ARGS_OK);
    assert_int_equal(cfg.rule.algorithm, SL_GCRA);
    assert_int_equal(cfg.rule.burst, 4);
    assert_int_equal(cfg.rule.capacity, 5);
    assert_int_equal(cfg.rule.max_delay_ns, 250 * SL_NS_PER_MS);
    assert_int_equal(cfg.unit_ns, SL_NS_PER_SEC);
    assert_true(cfg.summary);
    assert_true(cfg.show_delay);
    assert_string_equal(cfg.path, "-");

    /* no FILE means stdin; the last of a repeated flag wins */
    assert_int_equal(PARSE_ARGS(&cfg, err, "--algorithm", "sliding_buckets", "--limit", "5",
                                "--limit", "6", "--window", "1m", "--buckets", "6"),
                     REPLAY_ARGS_OK);
    assert_int_equal(cfg.rule.limit, 6);
    assert_int_equal(cfg.rule.buckets, 6);
    assert_string_equal(cfg.path, "-");

    /* a bare integer is milliseconds, as in rules files (window: 1000) */
    assert_int_equal(PARSE_ARGS(&cfg, err, "--algorithm", "gcra", "--limit", "3", "--window",
                                "1000", "--max-delay", "0"),
                     REPLAY_ARGS_OK);
    assert_int_equal(cfg.rule.window_ns, SL_NS_PER_SEC);
    assert_int_equal(cfg.rule.max_delay_ns, 0);
    assert_int_equal(PARSE_ARGS(&cfg, err, "--unit", "ms", "--algorithm", "sliding_log", "--limit",
                                "3", "--window", "250"),
                     REPLAY_ARGS_OK);
    assert_int_equal(cfg.rule.window_ns, 250 * SL_NS_PER_MS);
}

static void test_args_help(void **state)
{
    (void)state;
    struct replay_config cfg;
    char err[REPLAY_ERR_MAX];

    assert_int_equal(PARSE_ARGS(&cfg, err, "--help"), REPLAY_ARGS_HELP);
    assert_int_equal(PARSE_ARGS(&cfg, err, "--limit", "3", "-h"), REPLAY_ARGS_HELP);
    assert_non_null(strstr(replay_usage(), "--max-delay"));
}

static const struct {
    int argc;
    char **argv;
    int rc;
    const char *err; /* exact, or a prefix when it ends in '*' */
} bad_args[] = {
    {NARGS("--algorithm", "sliding_log", "--window", "10s"),
     ARGS("--algorithm", "sliding_log", "--window", "10s"), REPLAY_ARGS_USAGE,
     "--limit is required"},
    {NARGS("--limit", "3", "--window", "10s"), ARGS("--limit", "3", "--window", "10s"),
     REPLAY_ARGS_USAGE, "--algorithm is required"},
    {NARGS("--algorithm", "gcra", "--limit", "3"), ARGS("--algorithm", "gcra", "--limit", "3"),
     REPLAY_ARGS_USAGE, "--window is required"},
    {NARGS("--algorithm", "leaky", "--limit", "3", "--window", "10s"),
     ARGS("--algorithm", "leaky", "--limit", "3", "--window", "10s"), REPLAY_ARGS_USAGE,
     "--algorithm: *"},
    {NARGS("--algorithm", "gcra", "--limit", "3x", "--window", "10s"),
     ARGS("--algorithm", "gcra", "--limit", "3x", "--window", "10s"), REPLAY_ARGS_USAGE,
     "--limit: must be an integer, got '3x'"},
    {NARGS("--algorithm", "gcra", "--limit", "0", "--window", "10s"),
     ARGS("--algorithm", "gcra", "--limit", "0", "--window", "10s"), REPLAY_ARGS_USAGE,
     "--limit: *"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "10x"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "10x"), REPLAY_ARGS_USAGE,
     "--window: *"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "0s"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "0s"), REPLAY_ARGS_USAGE,
     "--window: *"},
    {NARGS("--algorithm", "sliding_log", "--limit", "3", "--window", "1s", "--burst", "2"),
     ARGS("--algorithm", "sliding_log", "--limit", "3", "--window", "1s", "--burst", "2"),
     REPLAY_ARGS_USAGE, "--burst: *"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "--burst", "-1"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "--burst", "-1"),
     REPLAY_ARGS_USAGE, "--burst: *"},
    {NARGS("--algorithm", "sliding_buckets", "--limit", "3", "--window", "1s", "--buckets", "7"),
     ARGS("--algorithm", "sliding_buckets", "--limit", "3", "--window", "1s", "--buckets", "7"),
     REPLAY_ARGS_USAGE, "--buckets: *"},
    {NARGS("--algorithm", "sliding_log", "--limit", "3", "--window", "1s", "--max-delay", "1s"),
     ARGS("--algorithm", "sliding_log", "--limit", "3", "--window", "1s", "--max-delay", "1s"),
     REPLAY_ARGS_USAGE, "--max-delay: *"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "--unit", "min"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "--unit", "min"),
     REPLAY_ARGS_USAGE, "--unit: must be one of ms, us, ns, s, got 'min'"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "60", "--unit", "s"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "60", "--unit", "s"),
     REPLAY_ARGS_USAGE,
     "--window: a bare number is milliseconds, and --unit is not ms: write the unit (e.g. '60s' "
     "or '60ms'), got '60'"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "--max-delay", "5", "--unit",
           "us"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "--max-delay", "5", "--unit",
          "us"),
     REPLAY_ARGS_USAGE, "--max-delay: a bare number is milliseconds, *"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "99999999999999999"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "99999999999999999"),
     REPLAY_ARGS_USAGE, "--window: *"},
    {NARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "a.log", "b.log"),
     ARGS("--algorithm", "gcra", "--limit", "3", "--window", "1s", "a.log", "b.log"),
     REPLAY_ARGS_USAGE, "replay: expected at most one FILE, got 'a.log' and 'b.log'"},
    {NARGS("--algorithm", "gcra", "--frobnicate"), ARGS("--algorithm", "gcra", "--frobnicate"),
     REPLAY_ARGS_UNKNOWN, "replay: unknown option '--frobnicate'"},
    {NARGS("-x"), ARGS("-x"), REPLAY_ARGS_UNKNOWN, "replay: unknown option '-x'"},
    {NARGS("--algorithm", "gcra", "--limit"), ARGS("--algorithm", "gcra", "--limit"),
     REPLAY_ARGS_UNKNOWN, "replay: option '--limit' needs a value"},
    {NARGS("--summary=yes"), ARGS("--summary=yes"), REPLAY_ARGS_UNKNOWN,
     "replay: option '--summary=yes' takes no value"},
};

static void test_args_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_args / sizeof bad_args[0]; i++) {
        struct replay_config cfg;
        char err[REPLAY_ERR_MAX];
        int rc = replay_parse_args(bad_args[i].argc, bad_args[i].argv, &cfg, err, sizeof err);
        size_t n = strlen(bad_args[i].err);

        if (rc != bad_args[i].rc) {
            print_error("case %zu: rc %d, err '%s'\n", i, rc, err);
        }
        assert_int_equal(rc, bad_args[i].rc);
        if (n > 0 && bad_args[i].err[n - 1] == '*') {
            if (strncmp(err, bad_args[i].err, n - 1) != 0) {
                print_error("case %zu: '%s' does not start with '%.*s'\n", i, err, (int)(n - 1),
                            bad_args[i].err);
                fail();
            }
            assert_true(strlen(err) > n); /* the library's reason follows */
        } else {
            assert_string_equal(err, bad_args[i].err);
        }
    }
}

/* ---- the tally's budget ------------------------------------------------------------------ */

static size_t tally_allowed; /* bytes ask_upto lets a tally hold */
static size_t tally_asked;   /* the most it was asked for */

static bool ask_upto(void *arg, size_t bytes)
{
    (void)arg;
    tally_asked = bytes > tally_asked ? bytes : tally_asked;
    return bytes <= tally_allowed;
}

/* What a tally holds by its invariant: keys[cap], index[nindex] and the key copies. */
static size_t tally_held(const replay_tally_t *t)
{
    size_t n = t->cap * sizeof(replay_tally_key_t) + t->nindex * sizeof(size_t);
    for (size_t e = 0; e < t->n; e++) {
        n += t->keys[e].key_len;
    }
    return n;
}

/* New keys until the tally is refused room: it then says SL_EFULL, has counted exactly the
 * requests before, and never held more than it was allowed; without an ask it counts alike. */
static void test_tally_budget(void **state)
{
    (void)state;
    static const size_t budgets[] = {1024, 4096, 16384, 65536, SIZE_MAX};
    sl_rule_t rule = {.algorithm = SL_GCRA,
                      .limit = 1000,
                      .window_ns = SL_NS_PER_SEC,
                      .burst = SL_DEFAULT,
                      .buckets = SL_DEFAULT};
    assert_int_equal(sl_rule_prepare(&rule), SL_OK);
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        sl_table_t *table;
        assert_int_equal(sl_table_create(&rule, NULL, &table), SL_OK);
        replay_tally_t t = {0};
        if (budgets[b] != SIZE_MAX) {
            t.ask = ask_upto;
        }
        tally_allowed = budgets[b];
        tally_asked = 0;
        int rc = SL_OK;
        size_t counted = 0;
        for (int i = 0; i < 3000 && rc == SL_OK; i++) {
            char key[32];
            int n = snprintf(key, sizeof key, "key-%d", i % 2 == 0 ? i : i - 1); /* each twice */
            struct replay_request req = {
                .time = i, .now_ns = i * SL_NS_PER_MS, .key = key, .key_len = (size_t)n, .cost = 1};
            sl_decision_t d;
            rc = replay_step(table, &t, &req, &d);
            counted += rc == SL_OK;
            assert_int_equal(t.bytes, tally_held(&t));
            assert_true(t.ask == NULL || t.bytes <= budgets[b]);
        }
        assert_int_equal(t.admitted + t.rejected, counted);
        assert_int_equal(t.n, (counted + 1) / 2);
        if (t.ask != NULL) {
            assert_int_equal(rc, SL_EFULL);
            assert_true(tally_asked > budgets[b]);
        } else {
            assert_int_equal(rc, SL_OK);
            assert_int_equal(counted, 3000);
        }
        replay_tally_free(&t);
        sl_table_free(table);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_lines),     cmocka_unit_test(test_units),
        cmocka_unit_test(test_length_not_nul), cmocka_unit_test(test_skipped_lines),
        cmocka_unit_test(test_bad_lines),      cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_key_length),     cmocka_unit_test(test_err_buffer),
        cmocka_unit_test(test_out_untouched),  cmocka_unit_test(test_args_ok),
        cmocka_unit_test(test_args_help),      cmocka_unit_test(test_args_bad),
        cmocka_unit_test(test_tally_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
