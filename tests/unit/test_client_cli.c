/*
 * test_client_cli.c - the pure parts of the CLI's server commands (src/cli/remote.c):
 * connection options, a command's flags and positionals, settle's numbers, acquire's
 * --hold-timeout and release's ID, INFO text as JSON.
 * Well-formed and malformed input; no server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "remote.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_defaults_and_env(void **unused)
{
    struct remote_opts o;
    remote_opts_init(&o, NULL);
    assert_string_equal(o.host, "127.0.0.1");
    assert_int_equal(o.port, 6390);
    assert_null(o.password);
    assert_false(o.json);
    assert_int_equal(o.timeout_ms, REMOTE_DEFAULT_TIMEOUT_MS);
    remote_opts_init(&o, "");
    assert_null(o.password); /* an empty $SLUICE_PASSWORD is no password */
    remote_opts_init(&o, "pw");
    assert_string_equal(o.password, "pw");
}

static void test_global_options(void **unused)
{
    struct remote_opts o;
    remote_opts_init(&o, "from-env");
    char err[REMOTE_ERR_MAX];
    char *argv[] = {"-h", "10.0.0.1", "-p", "7000", "-a", "pw", "--json", "--timeout", "0", "x"};
    assert_int_equal(remote_global_option(&o, ARGC(argv), argv, 0, err, sizeof err), 2);
    assert_int_equal(remote_global_option(&o, ARGC(argv), argv, 2, err, sizeof err), 2);
    assert_int_equal(remote_global_option(&o, ARGC(argv), argv, 4, err, sizeof err), 2);
    assert_int_equal(remote_global_option(&o, ARGC(argv), argv, 6, err, sizeof err), 1);
    assert_int_equal(remote_global_option(&o, ARGC(argv), argv, 7, err, sizeof err), 2);
    assert_int_equal(remote_global_option(&o, ARGC(argv), argv, 9, err, sizeof err), 0);
    assert_string_equal(o.host, "10.0.0.1");
    assert_int_equal(o.port, 7000);
    assert_string_equal(o.password, "pw"); /* -a wins over the environment */
    assert_true(o.json);
    assert_int_equal(o.timeout_ms, 0);
}

static void expect_bad(char **argv, int argc, const char *want)
{
    struct remote_opts o;
    remote_opts_init(&o, NULL);
    char err[REMOTE_ERR_MAX] = "";
    assert_int_equal(remote_global_option(&o, argc, argv, 0, err, sizeof err), -1);
    assert_string_equal(err, want);
    assert_int_equal(o.port, 6390); /* unchanged */
}

static void test_global_options_malformed(void **unused)
{
    char *p0[] = {"-p", "0"}, *pbig[] = {"-p", "65536"}, *px[] = {"-p", "63x"};
    char *pspace[] = {"-p", " 80"}, *pnone[] = {"-p"}, *hempty[] = {"-h", ""};
    char *tneg[] = {"--timeout", "-1"}, *tbig[] = {"--timeout", "86400001"};
    expect_bad(p0, 2, "-p: port must be an integer in 1..65535, got '0'");
    expect_bad(pbig, 2, "-p: port must be an integer in 1..65535, got '65536'");
    expect_bad(px, 2, "-p: port must be an integer in 1..65535, got '63x'");
    expect_bad(pspace, 2, "-p: port must be an integer in 1..65535, got ' 80'");
    expect_bad(pnone, 1, "option '-p' needs a value");
    expect_bad(hempty, 2, "-h: host must not be empty");
    expect_bad(tneg, 2, "--timeout: must be milliseconds, an integer in 0..86400000, got '-1'");
    expect_bad(tbig, 2,
               "--timeout: must be milliseconds, an integer in 0..86400000, got '86400001'");
}

static void test_parse_args(void **unused)
{
    struct remote_opts o;
    struct remote_args a;
    char err[REMOTE_ERR_MAX];
    remote_opts_init(&o, NULL);
    char *argv[] = {"check", "api", "--cost", "5", "-p", "7001", "u1", "--peek", "--json"};
    assert_int_equal(remote_parse_args(ARGC(argv), argv, 1, REMOTE_FLAG_COST | REMOTE_FLAG_PEEK, &o,
                                       &a, err, sizeof err),
                     0);
    assert_int_equal(a.npos, 2);
    assert_string_equal(a.pos[0], "api");
    assert_string_equal(a.pos[1], "u1");
    assert_int_equal(a.cost, 5);
    assert_true(a.peek);
    assert_false(a.help);
    assert_int_equal(o.port, 7001);
    assert_true(o.json);

    /* "--" ends the options; "-" alone is a positional (stdin) */
    char *dash[] = {"check", "--", "-rule", "--cost", "-"};
    assert_int_equal(
        remote_parse_args(ARGC(dash), dash, 1, REMOTE_FLAG_COST, &o, &a, err, sizeof err), 0);
    assert_int_equal(a.npos, 3);
    assert_string_equal(a.pos[0], "-rule");
    assert_string_equal(a.pos[1], "--cost");
    assert_string_equal(a.pos[2], "-");
    assert_int_equal(a.cost, 1);

    char *help[] = {"info", "--help"};
    assert_int_equal(remote_parse_args(2, help, 1, 0, &o, &a, err, sizeof err), 0);
    assert_true(a.help);
}

static void expect_args_error(char **argv, int argc, unsigned flags, const char *want)
{
    struct remote_opts o;
    struct remote_args a;
    char err[REMOTE_ERR_MAX] = "";
    remote_opts_init(&o, NULL);
    assert_int_equal(remote_parse_args(argc, argv, 1, flags, &o, &a, err, sizeof err), -1);
    assert_string_equal(err, want);
}

static void test_parse_args_malformed(void **unused)
{
    char *peek_not_allowed[] = {"info", "--peek"};
    expect_args_error(peek_not_allowed, 2, REMOTE_FLAG_COST, "unknown option '--peek'");
    char *cost_not_allowed[] = {"rules", "--cost", "1"};
    expect_args_error(cost_not_allowed, 3, 0, "unknown option '--cost'");
    char *neg[] = {"check", "--cost", "-3"};
    expect_args_error(neg, 3, REMOTE_FLAG_COST, "--cost: must be a non-negative integer, got '-3'");
    char *huge[] = {"check", "--cost", "99999999999999999999"};
    expect_args_error(huge, 3, REMOTE_FLAG_COST,
                      "--cost: must be a non-negative integer, got '99999999999999999999'");
    char *none[] = {"check", "--cost"};
    expect_args_error(none, 2, REMOTE_FLAG_COST, "option '--cost' needs a value");
    char *many[] = {"x", "1", "2", "3", "4", "5"};
    expect_args_error(many, 6, 0, "too many arguments, starting at '5'");
    char *badport[] = {"check", "a", "b", "-p", "x"};
    expect_args_error(badport, 5, 0, "-p: port must be an integer in 1..65535, got 'x'");
}

static void test_settle_args(void **unused)
{
    struct remote_opts o;
    struct remote_args a;
    char err[REMOTE_ERR_MAX];
    remote_opts_init(&o, NULL);
    unsigned flags = REMOTE_FLAG_AT | REMOTE_FLAG_NUMBERS;
    char *argv[] = {"settle", "tok", "u42", "300", "--at", "1700000000000", "120", "--json"};
    assert_int_equal(remote_parse_args(ARGC(argv), argv, 1, flags, &o, &a, err, sizeof err), 0);
    assert_int_equal(a.npos, 4);
    assert_int_equal(a.at_ms, 1700000000000);
    assert_true(o.json);
    int64_t reserved = -9, actual = -9;
    assert_int_equal(remote_settle_numbers(&a, &reserved, &actual, err, sizeof err), 0);
    assert_int_equal(reserved, 300);
    assert_int_equal(actual, 120);

    /* without --at: none (-1); "-5" is a positional the command checks, "--at" still an option */
    char *neg[] = {"settle", "tok", "u42", "-5", "0"};
    assert_int_equal(remote_parse_args(ARGC(neg), neg, 1, flags, &o, &a, err, sizeof err), 0);
    assert_int_equal(a.at_ms, -1);
    assert_int_equal(a.npos, 4);
    assert_string_equal(a.pos[2], "-5");
    assert_int_equal(remote_settle_numbers(&a, &reserved, &actual, err, sizeof err), -1);
    assert_string_equal(err, "settle: RESERVED must be a non-negative integer, got '-5'");
    assert_int_equal(reserved, 300); /* untouched */
    /* without the flag, "-5" is an unknown option, as before */
    expect_args_error(neg, ARGC(neg), REMOTE_FLAG_AT, "unknown option '-5'");

    const char *bad[][2] = {{"0", "x"}, {"0", "1.5"},  {"0", " 1"},
                            {"0", ""},  {"0", "-0x1"}, {"0", "9223372036854775808"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *v[] = {"settle", "tok", "k", (char *)bad[i][0], (char *)bad[i][1]};
        assert_int_equal(remote_parse_args(ARGC(v), v, 1, flags, &o, &a, err, sizeof err), 0);
        assert_int_equal(remote_settle_numbers(&a, &reserved, &actual, err, sizeof err), -1);
        char want[REMOTE_ERR_MAX];
        snprintf(want, sizeof want, "settle: ACTUAL must be a non-negative integer, got '%s'",
                 bad[i][1]);
        assert_string_equal(err, want);
    }
    char *max[] = {"settle", "tok", "k", "9223372036854775807", "0"};
    assert_int_equal(remote_parse_args(ARGC(max), max, 1, flags, &o, &a, err, sizeof err), 0);
    assert_int_equal(remote_settle_numbers(&a, &reserved, &actual, err, sizeof err), 0);
    assert_int_equal(reserved, INT64_MAX);
    assert_int_equal(actual, 0);
}

static void test_settle_args_malformed(void **unused)
{
    unsigned flags = REMOTE_FLAG_AT | REMOTE_FLAG_NUMBERS;
    char *at_neg[] = {"settle", "--at", "-1"};
    expect_args_error(at_neg, 3, flags,
                      "--at: must be a non-negative integer (ms since the Unix epoch), got '-1'");
    char *at_word[] = {"settle", "--at", "soon"};
    expect_args_error(at_word, 3, flags,
                      "--at: must be a non-negative integer (ms since the Unix epoch), got 'soon'");
    char *at_none[] = {"settle", "a", "--at"};
    expect_args_error(at_none, 3, flags, "option '--at' needs a value");
    char *at_check[] = {"check", "--at", "5"};
    expect_args_error(at_check, 3, REMOTE_FLAG_COST, "unknown option '--at'");
    char *extra[] = {"settle", "tok", "k", "1", "2", "3"};
    expect_args_error(extra, 6, flags, "too many arguments, starting at '3'");
    char *cost[] = {"settle", "tok", "k", "1", "2", "--cost", "3"};
    expect_args_error(cost, 7, flags, "unknown option '--cost'");
}

static void test_priority_report_args(void **unused)
{
    struct remote_opts o;
    struct remote_args a;
    char err[REMOTE_ERR_MAX];
    remote_opts_init(&o, NULL);
    unsigned check = REMOTE_FLAG_COST | REMOTE_FLAG_PEEK | REMOTE_FLAG_PRIORITY;
    char *none[] = {"check", "api", "u1"};
    assert_int_equal(remote_parse_args(ARGC(none), none, 1, check, &o, &a, err, sizeof err), 0);
    assert_null(a.priority);
    assert_false(a.has_latency);
    assert_false(a.dropped);
    char *prio[] = {"check", "api", "u1", "--priority", "high", "--cost", "2"};
    assert_int_equal(remote_parse_args(ARGC(prio), prio, 1, check, &o, &a, err, sizeof err), 0);
    assert_string_equal(a.priority, "high");
    assert_int_equal(a.cost, 2);
    assert_int_equal(a.npos, 2);

    unsigned release = REMOTE_FLAG_NUMBERS | REMOTE_FLAG_REPORT;
    const char *ok[][2] = {{"12ms", "12000"},
                           {"1500us", "1500"},
                           {"0us", "0"},
                           {"1h", "3600000000"},
                           {"1s5us", "1000005"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *v[] = {"release", "jobs", "u1", "7", "--latency", (char *)ok[i][0]};
        assert_int_equal(remote_parse_args(ARGC(v), v, 1, release, &o, &a, err, sizeof err), 0);
        assert_true(a.has_latency);
        assert_int_equal(a.latency_us, atoll(ok[i][1]));
        assert_false(a.dropped);
        assert_int_equal(a.npos, 3);
    }
    char *drop[] = {"release", "jobs", "u1", "7", "--dropped"};
    assert_int_equal(remote_parse_args(ARGC(drop), drop, 1, release, &o, &a, err, sizeof err), 0);
    assert_true(a.dropped);
    assert_false(a.has_latency);

    char *empty[] = {"check", "api", "u1", "--priority", ""};
    expect_args_error(empty, 5, check, "--priority: must not be empty");
    char *missing[] = {"check", "api", "u1", "--priority"};
    expect_args_error(missing, 4, check, "option '--priority' needs a value");
    char *on_release[] = {"release", "jobs", "u1", "7", "--priority", "high"};
    expect_args_error(on_release, 6, release, "unknown option '--priority'");
    char *on_check[] = {"check", "api", "u1", "--dropped"};
    expect_args_error(on_check, 4, check, "unknown option '--dropped'");
    const char *bad[] = {"12", "1ns", "1h1us", "-5ms", "fast", "", "1500ns"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *v[] = {"release", "jobs", "u1", "7", "--latency", (char *)bad[i]};
        char want[REMOTE_ERR_MAX];
        snprintf(want, sizeof want,
                 "--latency: must be a duration of whole microseconds, at most 1h (12ms, 1500us, "
                 "2s), got '%s'",
                 bad[i]);
        expect_args_error(v, 6, release, want);
    }
    char *lat_none[] = {"release", "jobs", "u1", "7", "--latency"};
    expect_args_error(lat_none, 5, release, "option '--latency' needs a value");
}

static void test_acquire_release_args(void **unused)
{
    struct remote_opts o;
    struct remote_args a;
    char err[REMOTE_ERR_MAX];
    remote_opts_init(&o, NULL);
    unsigned flags = REMOTE_FLAG_COST | REMOTE_FLAG_HOLD;
    char *none[] = {"acquire", "jobs", "u1"};
    assert_int_equal(remote_parse_args(ARGC(none), none, 1, flags, &o, &a, err, sizeof err), 0);
    assert_int_equal(a.hold_ms, 0); /* the rule's hold_timeout */
    assert_int_equal(a.cost, 1);
    const char *ok[][2] = {{"250ms", "250"}, {"30s", "30000"},  {"1m30s", "90000"}, {"1ms", "1"},
                           {"1000us", "1"},  {"2h", "7200000"}, {"1s500ms", "1500"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *v[] = {"acquire", "jobs", "u1", "--hold-timeout", (char *)ok[i][0], "--cost", "3"};
        assert_int_equal(remote_parse_args(ARGC(v), v, 1, flags, &o, &a, err, sizeof err), 0);
        assert_int_equal(a.hold_ms, atoll(ok[i][1]));
        assert_int_equal(a.cost, 3);
        assert_int_equal(a.npos, 2);
    }
    /* the connection's --timeout is still the connection's, beside the hold's */
    char *both[] = {"acquire", "jobs", "u1", "--timeout", "700", "--hold-timeout", "5s"};
    assert_int_equal(remote_parse_args(ARGC(both), both, 1, flags, &o, &a, err, sizeof err), 0);
    assert_int_equal(o.timeout_ms, 700);
    assert_int_equal(a.hold_ms, 5000);

    uint64_t id = 42;
    assert_int_equal(remote_hold_id("0", &id, err, sizeof err), 0);
    assert_true(id == 0);
    assert_int_equal(remote_hold_id("281474976710654", &id, err, sizeof err), 0);
    assert_true(id == 281474976710654ULL);
    assert_int_equal(remote_hold_id("9223372036854775807", &id, err, sizeof err), 0);
    assert_true(id == INT64_MAX);
}

static void test_acquire_release_args_malformed(void **unused)
{
    unsigned flags = REMOTE_FLAG_COST | REMOTE_FLAG_HOLD;
    const char *bad[] = {"", "30", "1500us", "0ms", "-1s", "1.5s", "1 s", "99999999999h", "soon"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *v[] = {"acquire", "jobs", "u1", "--hold-timeout", (char *)bad[i]};
        char want[REMOTE_ERR_MAX];
        snprintf(want, sizeof want,
                 "--hold-timeout: must be a duration of whole milliseconds, at least 1ms (250ms, "
                 "30s, 1m30s), got '%s'",
                 bad[i]);
        expect_args_error(v, ARGC(v), flags, want);
    }
    char *missing[] = {"acquire", "jobs", "u1", "--hold-timeout"};
    expect_args_error(missing, ARGC(missing), flags, "option '--hold-timeout' needs a value");
    char *not_check[] = {"check", "jobs", "u1", "--hold-timeout", "1s"};
    expect_args_error(not_check, ARGC(not_check), REMOTE_FLAG_COST | REMOTE_FLAG_PEEK,
                      "unknown option '--hold-timeout'");

    char err[REMOTE_ERR_MAX];
    const char *ids[] = {
        "-1", "", "x", "1.0", " 1", "+1", "0x10", "9223372036854775808", "18446744073709551615"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint64_t id = 42;
        assert_int_equal(remote_hold_id(ids[i], &id, err, sizeof err), -1);
        assert_true(id == 42); /* untouched */
        char want[REMOTE_ERR_MAX];
        snprintf(want, sizeof want, "release: ID must be a non-negative integer, got '%s'", ids[i]);
        assert_string_equal(err, want);
    }
}

static void test_info_json(void **unused)
{
    const char text[] = "# Server\r\nsluice_version:0.1.0\r\ntcp_port:6390\r\n\r\n"
                        "# Stats\r\ntotal_commands_processed:12\r\nneg:-5\r\nminus:-\r\n"
                        "ratio:0.5\r\nempty:\r\nurl:http://x:1\r\n\r\n"
                        "# Rules Section\nrules:2\nno colon here\n";
    json_t *v = remote_info_json(text, sizeof text - 1);
    assert_non_null(v);
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(
        s,
        "{\"server\":{\"sluice_version\":\"0.1.0\",\"tcp_port\":6390},"
        "\"stats\":{\"total_commands_processed\":12,\"neg\":-5,\"minus\":\"-\",\"ratio\":\"0.5\","
        "\"empty\":\"\",\"url\":\"http://x:1\"},\"rules section\":{\"rules\":2}}");
    free(s);
    json_decref(v);
}

static void test_info_json_edges(void **unused)
{
    json_t *v = remote_info_json("", 0);
    assert_non_null(v);
    assert_int_equal(json_object_size(v), 0);
    json_decref(v);
    /* fields before any header; no final newline; a value too long for an integer */
    const char text[] = "a:1\nbig:123456789012345678901234567890";
    v = remote_info_json(text, sizeof text - 1);
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(s, "{\"info\":{\"a\":1,\"big\":\"123456789012345678901234567890\"}}");
    free(s);
    json_decref(v);
    /* not UTF-8: refused rather than printed as invalid JSON */
    const char bad[] = "# S\nk:\xff\xfe\n";
    assert_null(remote_info_json(bad, sizeof bad - 1));
    /* only the given length is read */
    v = remote_info_json("x:1\ny:2", 3);
    s = json_dumps(v, JSON_COMPACT);
    assert_string_equal(s, "{\"info\":{\"x\":1}}");
    free(s);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_env),
        cmocka_unit_test(test_global_options),
        cmocka_unit_test(test_global_options_malformed),
        cmocka_unit_test(test_parse_args),
        cmocka_unit_test(test_parse_args_malformed),
        cmocka_unit_test(test_info_json),
        cmocka_unit_test(test_info_json_edges),
        cmocka_unit_test(test_settle_args),
        cmocka_unit_test(test_settle_args_malformed),
        cmocka_unit_test(test_acquire_release_args),
        cmocka_unit_test(test_acquire_release_args_malformed),
        cmocka_unit_test(test_priority_report_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
