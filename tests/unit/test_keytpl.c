/*
 * test_keytpl.c - key templates: every placeholder, escapes, parse errors with offsets, and
 * building keys from requests (missing parts, IPv4/IPv6 networks, mapped addresses, overflow).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules/keytpl.h"

typedef struct headers {
    const char *names[4];
    const char *values[4];
} headers_t;

static bool lookup(void *arg, const char *name, size_t len, const char **value, size_t *vlen)
{
    headers_t *h = arg;
    for (int i = 0; i < 4 && h->names[i]; i++) {
        if (strlen(h->names[i]) == len && memcmp(h->names[i], name, len) == 0) {
            *value = h->values[i];
            *vlen = strlen(h->values[i]);
            return true;
        }
    }
    return false;
}

static headers_t hdrs = {{"x-api-key", "x-user"}, {"k-123", "alice"}};

/* A request from ip, parsed as the server parses its peer once (NULL client when ip is not an
 * address); the parsed addresses live in a small ring, enough for the requests of one test. */
static keytpl_request_t request(const char *ip, const char *method, const char *path)
{
    static netaddr_t ring[8];
    static size_t next;
    netaddr_t *a = &ring[next++ % 8];
    return (keytpl_request_t){.client = netaddr_parse(ip, strlen(ip), a) == 0 ? a : NULL,
                              .method = method,
                              .method_len = strlen(method),
                              .path = path,
                              .path_len = strlen(path),
                              .header = lookup,
                              .header_arg = &hdrs};
}

/* Parses tpl and builds it for req; returns the status, the key in out (NUL-terminated). */
static int build(const char *tpl, keytpl_request_t req, char *out, size_t cap)
{
    keytpl_t t;
    char err[KEYTPL_ERR_MAX];
    if (keytpl_parse(tpl, strlen(tpl), &t, err) != 0)
        fail_msg("parse '%s': %s", tpl, err);
    size_t len = 0;
    int rc = keytpl_build(&t, &req, out, cap - 1, &len);
    out[rc == KEYTPL_OK ? len : 0] = '\0';
    return rc;
}

#define BUILDS(tpl, req, want)                                                                     \
    do {                                                                                           \
        char out_[128];                                                                            \
        assert_int_equal(build(tpl, req, out_, sizeof(out_)), KEYTPL_OK);                          \
        assert_string_equal(out_, want);                                                           \
    } while (0)

static void test_placeholders(void **unused)
{
    keytpl_request_t r = request("203.0.113.77", "POST", "/v1/login?tenant=acme&x=1");
    BUILDS("{ip}", r, "203.0.113.77");
    BUILDS("{ip/24}", r, "203.0.113.0/24");
    BUILDS("{ip/32}", r, "203.0.113.77/32");
    BUILDS("{ip/0}", r, "0.0.0.0/0");
    BUILDS("{header:x-api-key}", r, "k-123");
    BUILDS("{header:X-User}:{path}", r, "alice:/v1/login"); /* names are case-insensitive */
    BUILDS("{method} {path}", r, "POST /v1/login");
    BUILDS("{query:tenant}", r, "acme");
    BUILDS("{query:x}", r, "1");
    BUILDS("login:{ip}", r, "login:203.0.113.77");
    BUILDS("{{literal}} {ip}", r, "{literal} 203.0.113.77");
}

static void test_ipv6(void **unused)
{
    keytpl_request_t r = request("2001:db8:abcd:12:ffff::1", "GET", "/");
    BUILDS("{ip6/64}", r, "2001:db8:abcd:12::/64");
    BUILDS("{ip6/48}", r, "2001:db8:abcd::/48");
    BUILDS("{ip}", r, "2001:db8:abcd:12:ffff::1");
    char out[128];
    assert_int_equal(build("{ip/24}", r, out, sizeof(out)), KEYTPL_EADDR); /* v6 client, v4 net */
    keytpl_request_t mapped = request("::ffff:198.51.100.9", "GET", "/");
    BUILDS("{ip/24}", mapped, "198.51.100.0/24");
    keytpl_request_t v4 = request("198.51.100.9", "GET", "/");
    assert_int_equal(build("{ip6/64}", v4, out, sizeof(out)), KEYTPL_EADDR);
    keytpl_request_t junk = request("not-an-address", "GET", "/"); /* never parsed: unknown */
    assert_int_equal(build("{ip/24}", junk, out, sizeof(out)), KEYTPL_EMISSING);
}

static void test_missing_and_too_long(void **unused)
{
    char out[128];
    keytpl_request_t r = request("", "GET", "/a?b=c");
    assert_int_equal(build("{ip}", r, out, sizeof(out)), KEYTPL_EMISSING);
    assert_int_equal(build("{header:authorization}", r, out, sizeof(out)), KEYTPL_EMISSING);
    assert_int_equal(build("{query:tenant}", r, out, sizeof(out)), KEYTPL_EMISSING);
    assert_int_equal(build("{query:b}", r, out, sizeof(out)), KEYTPL_OK);
    assert_string_equal(out, "c");
    assert_int_equal(build("{query:bb}", r, out, sizeof(out)), KEYTPL_EMISSING);
    keytpl_request_t long_path = request("1.2.3.4", "GET", "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    char small[8];
    assert_int_equal(build("{path}", long_path, small, sizeof(small)), KEYTPL_ETOOLONG);
}

static void assert_parse_error(const char *tpl, const char *want)
{
    keytpl_t t;
    char err[KEYTPL_ERR_MAX];
    if (keytpl_parse(tpl, strlen(tpl), &t, err) == 0)
        fail_msg("'%s' parsed, want error '%s'", tpl, want);
    assert_string_equal(err, want);
}

static void test_parse_errors(void **unused)
{
    assert_parse_error("", "offset 0: empty key template (every request would share one key)");
    assert_parse_error("{hostname}", "offset 0: unknown placeholder '{hostname}' (expected ip, "
                                     "ip/N, ip6/N, header:NAME, query:NAME, path or method)");
    assert_parse_error("a:{ip",
                       "offset 2: '{' without a closing '}' (write '{{' for a literal '{')");
    assert_parse_error("{ip{path}", "offset 0: '{' without a closing '}' (write '{{' for a "
                                    "literal '{')");
    assert_parse_error("ip}",
                       "offset 2: '}' without an opening '{' (write '}}' for a literal '}')");
    assert_parse_error("{ip/33}", "offset 0: prefix length must be 0..32 in '{ip/33}'");
    assert_parse_error("{ip6/129}", "offset 0: prefix length must be 0..128 in '{ip6/129}'");
    assert_parse_error("{ip/x}", "offset 0: prefix length must be 0..32 in '{ip/x}'");
    assert_parse_error("{header:}", "offset 0: '{header:}' needs a name");
    assert_parse_error("{header:a b}", "offset 9: ' ' is not allowed in a header name");
    char many[128] = "";
    for (int i = 0; i < 17; i++)
        strcat(many, "{ip}");
    assert_parse_error(many, "offset 64: more than 16 parts");
    char huge[300];
    memset(huge, 'a', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    assert_parse_error(huge, "offset 255: template longer than 255 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placeholders),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_missing_and_too_long),
        cmocka_unit_test(test_parse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
