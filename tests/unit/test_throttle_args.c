/*
 * test_throttle_args.c - SL.SETTLE's arguments (proto/throttle_args.h), which sluice.so and
 * sluiced share: RESERVED, ACTUAL and AT among the rule's options, each error, the settle
 * options alone (throttle_parse_settle), and the charge time AT names
 * (throttle_settle_charged_ns); CLOSED_FROM on SL.THROTTLE, SL.PEEK and SL.SETTLE, its errors and
 * the closed start it names (throttle_closed_start); SL.LEASE's and SL.RETURN's options, errors,
 * reply and the lease a return names; MAX_DEBT and the error of a refused settle; the window and
 * MAX_DELAY as durations, their errors, and the label errors give an inline rule. SL.THROTTLE's and
 * CL.THROTTLE's errors are checked side by side in a real redis-server and sluiced by
 * tests/integration/test_module.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "proto/throttle_args.h"

#define MAX_ARGS 24
#define NS_MS    INT64_C(1000000)

/* Splits a space-separated command line into args (the words point into line, a copy). */
static size_t split(char *line, throttle_arg_t *args)
{
    size_t n = 0;
    for (char *w = strtok(line, " "); w != NULL && n < MAX_ARGS; w = strtok(NULL, " ")) {
        args[n].ptr = w;
        args[n++].len = strlen(w);
    }
    return n;
}

/* throttle_parse of `text` as cmd: 0 and *out, or -1 and the error in err. */
static int parse(throttle_cmd_t cmd, const char *text, throttle_req_t *out,
                 char err[THROTTLE_ERR_MAX])
{
    char line[512];
    throttle_arg_t args[MAX_ARGS];
    snprintf(line, sizeof line, "%s", text);
    size_t n = split(line, args);
    err[0] = '\0';
    return throttle_parse(cmd, args, n, out, err);
}

#define PARSE_ERR(cmd, text, want)                                                                 \
    do {                                                                                           \
        throttle_req_t r_;                                                                         \
        char e_[THROTTLE_ERR_MAX];                                                                 \
        assert_int_equal(parse(cmd, text, &r_, e_), -1);                                           \
        assert_string_equal(e_, want);                                                             \
    } while (0)

static void test_settle_options(void **unused)
{
    (void)unused;
    throttle_req_t r;
    char err[THROTTLE_ERR_MAX];
    assert_int_equal(
        parse(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 3 ACTUAL 1", &r, err), 0);
    assert_int_equal(r.rule.algorithm, SL_GCRA);
    assert_int_equal(r.rule.limit, 5);
    assert_int_equal(r.rule.window_ns, 1000 * NS_MS);
    assert_int_equal(r.cost, 0);
    assert_int_equal(r.reserved, 3);
    assert_int_equal(r.actual, 1);
    assert_int_equal(r.at_ms, -1);
    /* anywhere among the rule's options, any case, the last repeat wins; 0 is a value */
    assert_int_equal(parse(THROTTLE_SL_SETTLE,
                           "sl.settle k sliding_buckets 6 1200 actual 9 At 4000000000123 "
                           "BUCKETS 4 reserved 7 RESERVED 0",
                           &r, err),
                     0);
    assert_int_equal(r.rule.buckets, 4);
    assert_int_equal(r.reserved, 0);
    assert_int_equal(r.actual, 9);
    assert_int_equal(r.at_ms, INT64_C(4000000000123));
    /* the other commands leave the settle fields at "none" */
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 COST 2", &r, err), 0);
    assert_int_equal(r.cost, 2);
    assert_int_equal(r.reserved, 0);
    assert_int_equal(r.actual, 0);
    assert_int_equal(r.at_ms, -1);
    assert_int_equal(parse(THROTTLE_CL, "CL.THROTTLE k 1 2 3", &r, err), 0);
    assert_int_equal(r.at_ms, -1);
}

static void test_settle_errors(void **unused)
{
    (void)unused;
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5",
              "ERR wrong number of arguments for 'sl.settle' command");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000",
              "ERR SL.SETTLE needs RESERVED and ACTUAL");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 3",
              "ERR SL.SETTLE needs RESERVED and ACTUAL");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 ACTUAL 3 AT 5",
              "ERR SL.SETTLE needs RESERVED and ACTUAL");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 3 ACTUAL 1 COST 1",
              "ERR SL.SETTLE takes no COST (RESERVED and ACTUAL say what to settle)");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED x ACTUAL 1",
              "ERR reserved is not an integer or out of range");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL -1",
              "ERR actual must be >= 0");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 1 AT 1.5",
              "ERR at is not an integer or out of range");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 1 AT -2",
              "ERR at must be >= 0");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL", "ERR syntax error");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 1 ACTUAL 1 LATER 2",
              "ERR syntax error");
    /* the rule's own errors come as SL.THROTTLE's, after the settle's syntax */
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 0 1000 RESERVED 1 ACTUAL 1",
              "ERR limit must be > 0");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k fixed_window 5 1000 BURST 2 RESERVED 1 ACTUAL 1",
              "ERR invalid rule: burst must be >= 1 for token_bucket, >= 0 for gcra, and only "
              "applies to them");
    /* the settle options are SL.SETTLE's only */
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 RESERVED 1", "ERR syntax error");
    PARSE_ERR(THROTTLE_SL_PEEK, "SL.PEEK k gcra 5 1000 AT 1", "ERR syntax error");
}

/* MAX_DEBT: every command naming a rule takes it (only a settle uses it); the refusal's text. */
static void test_max_debt(void **unused)
{
    (void)unused;
    throttle_req_t r;
    char err[THROTTLE_ERR_MAX];
    assert_int_equal(
        parse(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 0 ACTUAL 7", &r, err), 0);
    assert_int_equal(r.rule.max_debt, r.rule.capacity); /* the default: the capacity */
    assert_int_equal(parse(THROTTLE_SL_SETTLE,
                           "SL.SETTLE k gcra 5 1000 max_debt 9 RESERVED 0 MAX_DEBT 0 ACTUAL 7", &r,
                           err),
                     0);
    assert_int_equal(r.rule.max_debt, 0); /* the last one wins; 0 is a value */
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k sliding_log 5 1000 MAX_DEBT 3", &r, err), 0);
    assert_int_equal(r.rule.max_debt, 3);
    assert_int_equal(parse(THROTTLE_SL_PEEK, "SL.PEEK k fixed_window 5 1000 MAX_DEBT 3", &r, err),
                     0);
    assert_int_equal(parse(THROTTLE_CL, "CL.THROTTLE k 1 2 3", &r, err), 0);
    assert_int_equal(r.rule.max_debt, r.rule.capacity);
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 MAX_DEBT -1 RESERVED 0 ACTUAL 1",
              "ERR max_debt must be >= 0");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 MAX_DEBT x RESERVED 0 ACTUAL 1",
              "ERR max_debt is not an integer or out of range");
    PARSE_ERR(THROTTLE_SL_SETTLE,
              "SL.SETTLE k gcra 5 1000 MAX_DEBT 4611686018427387904 RESERVED 0 ACTUAL 1",
              "ERR invalid rule: max_debt must be an integer between 0 and 2^62 - 1 (units a key "
              "may owe beyond its limit)");
    PARSE_ERR(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 1000 RESERVED 0 ACTUAL 1 MAX_DEBT",
              "ERR syntax error");
    assert_int_equal(parse(THROTTLE_SL_SETTLE,
                           "SL.SETTLE k gcra 5 1000 MAX_DEBT 6 RESERVED 0 ACTUAL 7", &r, err),
                     0);
    throttle_debt_error(&r.rule, err);
    assert_string_equal(err, "ERR settle refused: the key would owe more than max_debt (6 units "
                             "past its limit); nothing was charged");
}

/* A named rule's settle options, with the same errors. */
static void test_settle_alone(void **unused)
{
    (void)unused;
    char line[256];
    throttle_arg_t args[MAX_ARGS];
    throttle_req_t r;
    char err[THROTTLE_ERR_MAX];
    snprintf(line, sizeof line, "SL.SETTLE api u42 RESERVED 10 ACTUAL 25 AT 7");
    size_t n = split(line, args);
    assert_int_equal(throttle_parse_settle(args, n, 3, &r, err), 0);
    assert_int_equal(r.reserved, 10);
    assert_int_equal(r.actual, 25);
    assert_int_equal(r.at_ms, 7);
    snprintf(line, sizeof line, "SL.SETTLE api u42 ACTUAL 25");
    n = split(line, args);
    assert_int_equal(throttle_parse_settle(args, n, 3, &r, err), -1);
    assert_string_equal(err, "ERR SL.SETTLE needs RESERVED and ACTUAL");
    snprintf(line, sizeof line, "SL.SETTLE api u42 RESERVED 1 ACTUAL 2 COST 3");
    n = split(line, args);
    assert_int_equal(throttle_parse_settle(args, n, 3, &r, err), -1);
    assert_string_equal(err, "ERR syntax error");
    snprintf(line, sizeof line, "SL.SETTLE api u42 RESERVED -1 ACTUAL 2");
    n = split(line, args);
    assert_int_equal(throttle_parse_settle(args, n, 3, &r, err), -1);
    assert_string_equal(err, "ERR reserved must be >= 0");
}

/* AT names a millisecond: its first ns, a time no later than the reservation, never after now. */
static void test_charged_ns(void **unused)
{
    (void)unused;
    const int64_t now = INT64_C(4000000000123456789); /* in ms 4000000000123 */
    throttle_req_t r = {.at_ms = -1};
    assert_int_equal(throttle_settle_charged_ns(&r, now), now);
    r.at_ms = INT64_C(4000000000122);
    assert_int_equal(throttle_settle_charged_ns(&r, now), INT64_C(4000000000122000000));
    r.at_ms = 0;
    assert_int_equal(throttle_settle_charged_ns(&r, now), 0);
    r.at_ms = INT64_C(4000000000123); /* the current millisecond: its start */
    assert_int_equal(throttle_settle_charged_ns(&r, now), INT64_C(4000000000123000000));
    r.at_ms = INT64_MAX; /* the future: the current millisecond, and nothing overflows */
    assert_int_equal(throttle_settle_charged_ns(&r, now), INT64_C(4000000000123000000));
    r.at_ms = 5;
    assert_int_equal(throttle_settle_charged_ns(&r, 0), 0);
}

/* CLOSED_FROM: among the options of SL.THROTTLE, SL.PEEK and SL.SETTLE (the last wins), none
 * of CL.THROTTLE; its errors; and the closed start it names: from that ms, for one window of the
 * request's rule, no later than SL_NOW_MAX_NS, none when absent. */
static void test_closed_from(void **unused)
{
    (void)unused;
    throttle_req_t r;
    char err[THROTTLE_ERR_MAX];
    int64_t at = 0;
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 COST 2", &r, err), 0);
    assert_int_equal(r.closed_from_ms, -1);
    assert_false(throttle_closed_start(&r, 0, &at));
    assert_int_equal(parse(THROTTLE_SL,
                           "SL.THROTTLE k gcra 5 1000 closed_from 7 COST 2 CLOSED_FROM 4000", &r,
                           err),
                     0);
    assert_int_equal(r.closed_from_ms, 4000);
    assert_int_equal(r.cost, 2);
    assert_true(throttle_closed_start(&r, 4000 * NS_MS, &at));
    assert_int_equal(at, 4000 * NS_MS);
    assert_true(throttle_closed_start(&r, 3000 * NS_MS, &at)); /* a clock behind: still closed */
    assert_true(throttle_closed_start(&r, 5000 * NS_MS - 1, &at));
    assert_false(throttle_closed_start(&r, 5000 * NS_MS, &at)); /* one window (1000 ms) later */
    assert_int_equal(
        parse(THROTTLE_SL_PEEK, "SL.PEEK k sliding_log 5 60000 CLOSED_FROM 0", &r, err), 0);
    assert_int_equal(r.closed_from_ms, 0);
    assert_true(throttle_closed_start(&r, 59999 * NS_MS, &at));
    assert_int_equal(at, 0);
    assert_int_equal(parse(THROTTLE_SL_SETTLE,
                           "SL.SETTLE k gcra 5 1000 RESERVED 3 CLOSED_FROM 9 ACTUAL 1", &r, err),
                     0);
    assert_int_equal(r.closed_from_ms, 9);
    assert_int_equal(r.reserved, 3);
    assert_int_equal(parse(THROTTLE_CL, "CL.THROTTLE k 4 1 1 1", &r, err), 0);
    assert_int_equal(r.closed_from_ms, -1);
    /* the latest ms there is: its start is past SL_NOW_MAX_NS, so SL_NOW_MAX_NS */
    assert_int_equal(
        parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 CLOSED_FROM 9223372036854", &r, err), 0);
    assert_true(throttle_closed_start(&r, SL_NOW_MAX_NS, &at));
    assert_int_equal(at, SL_NOW_MAX_NS);
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 CLOSED_FROM -1",
              "ERR closed_from must be >= 0");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 CLOSED_FROM soon",
              "ERR closed_from is not an integer or out of range");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 CLOSED_FROM 9223372036855",
              "ERR closed_from is out of range");
    PARSE_ERR(THROTTLE_SL_PEEK, "SL.PEEK k gcra 5 1000 CLOSED_FROM", "ERR syntax error");
    PARSE_ERR(THROTTLE_CL, "CL.THROTTLE k 4 1 CLOSED_FROM 5",
              "ERR Couldn't parse as integer: CLOSED_FROM");
}

/* SL.LEASE and SL.RETURN: their options among the rule's, each error, and the lease a return
 * names (throttle_return_lease), the reply (throttle_reply_lease) and the refusal's text. */
static void test_lease_options(void **unused)
{
    (void)unused;
    throttle_req_t r;
    char err[THROTTLE_ERR_MAX];
    assert_int_equal(parse(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 FOR 250 WANT 3", &r, err), 0);
    assert_int_equal(r.want, 3);
    assert_int_equal(r.lease_ms, 250);
    assert_int_equal(r.cost, 0);
    assert_int_equal(parse(THROTTLE_SL_RETURN,
                           "SL.RETURN k gcra 5 1000 GRANTED 4 UNUSED 1 AT 7000001 UNTIL 7250001",
                           &r, err),
                     0);
    assert_int_equal(r.granted, 4);
    assert_int_equal(r.unused, 1);
    sl_lease_t lease = throttle_return_lease(&r, INT64_C(8000000000));
    assert_int_equal(lease.granted, 4);
    assert_int_equal(lease.at_ns, INT64_C(7000001000));
    assert_int_equal(lease.until_ns, INT64_C(7250001000));
    lease = throttle_return_lease(&r, INT64_C(6000000000)); /* an AT in the future is now */
    assert_int_equal(lease.at_ns, INT64_C(6000000000));
    assert_int_equal(lease.until_ns, INT64_C(7250001000));
    lease = (sl_lease_t){3, INT64_C(7000001999), INT64_C(7250001999), 2, INT64_C(1000000001)};
    int64_t reply[5];
    throttle_reply_lease(&lease, reply);
    assert_int_equal(reply[0], 3);
    assert_int_equal(reply[1], 7000001);
    assert_int_equal(reply[2], 7250001);
    assert_int_equal(reply[3], 2);
    assert_int_equal(reply[4], 1001);
    assert_int_equal(
        parse(THROTTLE_SL_LEASE, "SL.LEASE k sliding_log 5 1000 WANT 1 FOR 1", &r, err), 0);
    throttle_lease_error(&r, err);
    assert_string_equal(
        err, "ERR sliding_log cannot lease: it keeps each unit's time (sliding_buckets can)");
    assert_int_equal(parse(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT 1 FOR 1", &r, err), 0);
    throttle_lease_error(&r, err);
    assert_string_equal(err,
                        "ERR for must be at most 1000 ms for this rule (capacity - 1 intervals)");
}

static void test_lease_errors(void **unused)
{
    (void)unused;
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT 1",
              "ERR SL.LEASE needs WANT and FOR");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 FOR 1", "ERR SL.LEASE needs WANT and FOR");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT 1 FOR 0", "ERR for must be > 0");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT 1 FOR 9223372036855",
              "ERR for is out of range");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT -1 FOR 1", "ERR want must be >= 0");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT x FOR 1",
              "ERR want is not an integer or out of range");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT 1 FOR 1 COST 1",
              "ERR SL.LEASE takes no COST (WANT says how many units)");
    PARSE_ERR(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1000 WANT 1 FOR 1 RESERVED 1",
              "ERR syntax error");
    PARSE_ERR(THROTTLE_SL_RETURN, "SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 1 AT 1",
              "ERR SL.RETURN needs GRANTED, UNUSED, AT and UNTIL");
    PARSE_ERR(THROTTLE_SL_RETURN, "SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 2 AT 1 UNTIL 2",
              "ERR unused must be <= granted");
    PARSE_ERR(THROTTLE_SL_RETURN, "SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 1 AT 3 UNTIL 2",
              "ERR until must be >= at");
    PARSE_ERR(THROTTLE_SL_RETURN,
              "SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 1 AT 3 UNTIL 4611686018427388",
              "ERR until is out of range");
    PARSE_ERR(THROTTLE_SL_RETURN, "SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 1 AT 1 UNTIL 2 COST 1",
              "ERR SL.RETURN takes no COST (UNUSED says what)");
    PARSE_ERR(THROTTLE_SL_RETURN, "SL.RETURN k gcra 5 1000 GRANTED 1 UNUSED 1 AT 1 UNTIL 2 WANT 1",
              "ERR syntax error");
}

/* The window and MAX_DELAY take a duration as rule files write it; a bare integer stays ms; the
 * same rule either way, on every inline command. */
static void test_durations(void **unused)
{
    (void)unused;
    throttle_req_t a, b;
    char err[THROTTLE_ERR_MAX];
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 1s", &a, err), 0);
    assert_int_equal(a.rule.window_ns, 1000 * NS_MS);
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000", &b, err), 0);
    assert_true(sl_rule_same(&a.rule, &b.rule));
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 1m30s MAX_DELAY 250ms", &a, err), 0);
    assert_int_equal(a.rule.window_ns, 90000 * NS_MS);
    assert_int_equal(a.rule.max_delay_ns, 250 * NS_MS);
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 5 90000 MAX_DELAY 250", &b, err), 0);
    assert_true(sl_rule_same(&a.rule, &b.rule));
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k sliding_log 5 1500000us", &a, err), 0);
    assert_int_equal(a.rule.window_ns, 1500 * NS_MS);
    assert_int_equal(parse(THROTTLE_SL_PEEK, "SL.PEEK k fixed_window 5 1h", &a, err), 0);
    assert_int_equal(a.rule.window_ns, INT64_C(3600000) * NS_MS);
    assert_int_equal(
        parse(THROTTLE_SL_SETTLE, "SL.SETTLE k gcra 5 2s RESERVED 3 ACTUAL 1", &a, err), 0);
    assert_int_equal(a.rule.window_ns, 2000 * NS_MS);
    assert_int_equal(parse(THROTTLE_SL_LEASE, "SL.LEASE k gcra 5 1s WANT 1 FOR 100", &a, err), 0);
    assert_int_equal(a.rule.window_ns, 1000 * NS_MS);
    /* CL.THROTTLE's period is redis-cell's: an integer of seconds, nothing else */
    PARSE_ERR(THROTTLE_CL, "CL.THROTTLE k 1 2 3s", "ERR Couldn't parse as integer: 3s");
}

static void test_duration_errors(void **unused)
{
    (void)unused;
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1x",
              "ERR window_ms '1x' is not a duration: integer milliseconds (1000) or digits with a "
              "unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1.5s",
              "ERR window_ms '1.5s' is not a duration: integer milliseconds (1000) or digits with "
              "a unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 -1s",
              "ERR window_ms '-1s' is not a duration: integer milliseconds (1000) or digits with a "
              "unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 MAX_DELAY soon",
              "ERR max_delay 'soon' is not a duration: integer milliseconds (1000) or digits with "
              "a unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1500us",
              "ERR window_ms '1500us' is not a whole number of milliseconds");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 MAX_DELAY 1ns",
              "ERR max_delay '1ns' is not a whole number of milliseconds");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 9223372037s", "ERR window_ms is out of range");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 99999999999999999999",
              "ERR window_ms is out of range");
    /* the range checks after parsing are the integer's */
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 0s", "ERR window_ms must be > 0");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 367d",
              "ERR invalid rule: window must be between 1ms and 366d");
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1000 MAX_DELAY -1", "ERR max_delay must be >= 0");
    /* the argument is shown safely: at most 64 bytes, no quotes */
    PARSE_ERR(THROTTLE_SL, "SL.THROTTLE k gcra 5 1'h",
              "ERR window_ms '1?h' is not a duration: integer milliseconds (1000) or digits with a "
              "unit (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)");
}

/* The label errors give an inline rule: its command's words, options only when not defaults. */
static void test_rule_label(void **unused)
{
    (void)unused;
    static const struct {
        const char *cmd, *label;
    } rows[] = {
        {"SL.THROTTLE k gcra 5 1000", "the inline rule gcra 5 1000"},
        {"SL.THROTTLE k gcra 5 1s", "the inline rule gcra 5 1000"},
        {"SL.THROTTLE k gcra 5 1000 BURST 5", "the inline rule gcra 5 1000"}, /* the default */
        {"SL.THROTTLE k gcra 5 1000 BURST 3 MAX_DELAY 150",
         "the inline rule gcra 5 1000 BURST 3 MAX_DELAY 150"},
        {"SL.THROTTLE k token_bucket 5 1000 BURST 3",
         "the inline rule token_bucket 5 1000 BURST 3"},
        {"SL.THROTTLE k sliding_buckets 3 1000 BUCKETS 5",
         "the inline rule sliding_buckets 3 1000 BUCKETS 5"},
        {"SL.THROTTLE k sliding_log 5 1m MAX_DEBT 2",
         "the inline rule sliding_log 5 60000 MAX_DEBT 2"},
        {"CL.THROTTLE k 4 1 1", "the inline rule gcra 1 1000 BURST 4"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        throttle_req_t r;
        char err[THROTTLE_ERR_MAX], label[THROTTLE_LABEL_MAX];
        throttle_cmd_t cmd = rows[i].cmd[0] == 'C' ? THROTTLE_CL : THROTTLE_SL;
        assert_int_equal(parse(cmd, rows[i].cmd, &r, err), 0);
        throttle_rule_label(&r.rule, label);
        assert_string_equal(label, rows[i].label);
    }
    /* the never error names it so, not as "inline:gcra:4:1000:-1:-1" */
    throttle_req_t r;
    char err[THROTTLE_ERR_MAX];
    assert_int_equal(parse(THROTTLE_SL, "SL.THROTTLE k gcra 4 1s COST 9", &r, err), 0);
    sl_decision_t d = {.allowed = false, .limit = 5, .retry_after_ns = -1};
    assert_true(throttle_never_error(&r, &d, err));
    assert_string_equal(
        err, "ERR cost 9 exceeds what the inline rule gcra 4 1000 can ever admit (5 per window)");
    /* the longest numbers: the label and the error fit their buffers */
    assert_int_equal(parse(THROTTLE_SL,
                           "SL.THROTTLE k sliding_buckets 9223372036854775807 4096s BUCKETS 4096 "
                           "MAX_DEBT 4611686018427387903 COST 9223372036854775807",
                           &r, err),
                     0);
    char label[THROTTLE_LABEL_MAX];
    throttle_rule_label(&r.rule, label);
    assert_true(strlen(label) < THROTTLE_LABEL_MAX);
    assert_true(throttle_never_error(&r, &d, err));
    assert_true(strlen(err) < THROTTLE_ERR_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settle_options), cmocka_unit_test(test_settle_errors),
        cmocka_unit_test(test_settle_alone),   cmocka_unit_test(test_charged_ns),
        cmocka_unit_test(test_closed_from),    cmocka_unit_test(test_lease_options),
        cmocka_unit_test(test_lease_errors),   cmocka_unit_test(test_max_debt),
        cmocka_unit_test(test_durations),      cmocka_unit_test(test_duration_errors),
        cmocka_unit_test(test_rule_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
