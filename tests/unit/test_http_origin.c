/*
 * test_http_origin.c - the Host and Origin headers (proto/http_origin.h): what parses and how it
 * is held (lower case, no trailing dot, IPv6 without brackets, the port), what is refused (every
 * shape a browser never sends), and when an Origin is the site a Host names (ports and scheme
 * defaults), as table rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto/http_origin.h"

static void test_host_parse(void **unused)
{
    (void)unused;
    static const struct {
        const char *in, *host;
        int port;
        int is_ip; /* 0 name, 4 or 6 */
    } rows[] = {
        {"example.com", "example.com", -1, 0},
        {"Limiter.Example.COM:8390", "limiter.example.com", 8390, 0},
        {"example.com.", "example.com", -1, 0},
        {"localhost:1", "localhost", 1, 0},
        {"127.0.0.1", "127.0.0.1", -1, 4},
        {"127.0.0.1:65535", "127.0.0.1", 65535, 4},
        {"[::1]", "::1", -1, 6},
        {"[::1]:8390", "::1", 8390, 6},
        {"[FD00::AB]:0", "fd00::ab", 0, 6},
        {"[::ffff:127.0.0.1]:80", "::ffff:127.0.0.1", 80, 4}, /* held as the IPv4 it maps */
        {"under_score.local", "under_score.local", -1, 0},
        {"1.2.3", "1.2.3", -1, 0}, /* not an address: a name, which no bind address is */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        http_authority_t a;
        int rc = http_authority_parse(rows[i].in, strlen(rows[i].in), &a);
        if (rc != 0) {
            fail_msg("'%s' does not parse", rows[i].in);
        }
        assert_string_equal(a.host, rows[i].host);
        assert_int_equal(a.host_len, strlen(rows[i].host));
        assert_int_equal(a.port, rows[i].port);
        assert_int_equal(a.is_ip, rows[i].is_ip != 0);
        if (rows[i].is_ip != 0) {
            assert_int_equal(a.ip.family, rows[i].is_ip);
        }
    }
}

static void test_host_refused(void **unused)
{
    (void)unused;
    static const char *const bad[] = {
        "",
        ":8390",
        "example.com:",
        "example.com:65536",
        "ex ample",
        "a@example.com",
        "example.com:80x",
        "example.com:-1",
        "[::1",
        "[127.0.0.1]",
        "[::1]x",
        "[::1]:",
        "[]",
        "::1",
        "[fe80::1%25eth0]",
        "example..com",
        ".example",
        ".",
        "example.com:123456",
        "exa\tmple",
        "ex/ample",
        "exa%41mple",
        "[::1]:8390:1",
        "a..",
        "-A..:80",
        "host\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http_authority_t a;
        if (http_authority_parse(bad[i], strlen(bad[i]), &a) == 0) {
            fail_msg("'%s' parsed as host '%s' port %d", bad[i], a.host, a.port);
        }
    }
    char long_name[HTTP_HOST_MAX + 2];
    memset(long_name, 'a', sizeof long_name);
    http_authority_t a;
    assert_int_equal(http_authority_parse(long_name, HTTP_HOST_MAX, &a), 0);
    assert_int_equal(http_authority_parse(long_name, HTTP_HOST_MAX + 1, &a), -1);
    /* a NUL inside is refused, not taken as the end */
    assert_int_equal(http_authority_parse("example.com\0evil", 16, &a), -1);
}

static void test_origin_parse(void **unused)
{
    (void)unused;
    http_origin_t o;
    assert_int_equal(http_origin_parse("http://127.0.0.1:8390", 21, &o), 0);
    assert_false(o.https);
    assert_string_equal(o.auth.host, "127.0.0.1");
    assert_int_equal(o.auth.port, 8390);
    assert_int_equal(http_origin_parse("HTTPS://Limiter.example.com", 27, &o), 0);
    assert_true(o.https);
    assert_string_equal(o.auth.host, "limiter.example.com");
    assert_int_equal(o.auth.port, -1);
    static const char *const bad[] = {
        "null",  "file://", "ftp://example.com",       "http://",         "http:/example.com",
        "//x.y", "x.y",     "http://example.com/path", "http://a@b.com",  "http://evil.example ",
        "",      "http",    "chrome-extension://abc",  "http://[::1]:-1", "http://example.com:",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (http_origin_parse(bad[i], strlen(bad[i]), &o) == 0) {
            fail_msg("'%s' parsed as an origin", bad[i]);
        }
    }
}

static void test_origin_matches(void **unused)
{
    (void)unused;
    static const struct {
        const char *origin, *host;
        bool same;
    } rows[] = {
        {"http://127.0.0.1:8390", "127.0.0.1:8390", true},
        {"http://127.0.0.1:9000", "127.0.0.1:8390", false}, /* another port: another site */
        {"http://localhost:8390", "127.0.0.1:8390", false}, /* names are not resolved */
        {"http://evil.example:8390", "127.0.0.1:8390", false},
        {"http://Limiter.Example.com", "limiter.example.com", true},
        {"https://limiter.example.com", "limiter.example.com", true}, /* TLS ended by a proxy */
        {"https://limiter.example.com", "limiter.example.com:443", true},
        {"http://limiter.example.com", "limiter.example.com:80", true},
        {"http://limiter.example.com", "limiter.example.com:443", false},
        {"https://limiter.example.com:8443", "limiter.example.com", false},
        {"http://[::1]:8390", "[0:0::1]:8390", true}, /* addresses by their bytes */
        {"http://[::1]:8390", "127.0.0.1:8390", false},
        {"http://127.0.0.1:8390", "[::ffff:127.0.0.1]:8390", true},
        {"http://example.com.:80", "example.com", true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        http_origin_t o;
        http_authority_t h;
        assert_int_equal(http_origin_parse(rows[i].origin, strlen(rows[i].origin), &o), 0);
        assert_int_equal(http_authority_parse(rows[i].host, strlen(rows[i].host), &h), 0);
        if (http_origin_matches(&o, &h) != rows[i].same) {
            fail_msg("Origin %s, Host %s: want %s", rows[i].origin, rows[i].host,
                     rows[i].same ? "the same site" : "another site");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_parse),
        cmocka_unit_test(test_host_refused),
        cmocka_unit_test(test_origin_parse),
        cmocka_unit_test(test_origin_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
