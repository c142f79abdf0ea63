/*
 * test_netaddr.c - network addresses (proto/netaddr.h): parsing text and socket addresses,
 * IPv4-mapped IPv6 held as IPv4, networks and prefix masks, formatting, and bad input refused
 * with the error that names what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "proto/netaddr.h"

static netaddr_net_t cidr(const char *s)
{
    netaddr_net_t c;
    if (netaddr_net_parse(s, strlen(s), &c) != 0)
        fail_msg("cidr %s does not parse", s);
    return c;
}

static netaddr_t ip(const char *s)
{
    netaddr_t a;
    if (netaddr_parse(s, strlen(s), &a) != 0)
        fail_msg("address %s does not parse", s);
    return a;
}

static void test_cidr(void **unused)
{
    netaddr_net_t c = cidr("10.0.0.0/8");
    assert_int_equal(c.family, 4);
    assert_int_equal(c.prefix, 8);
    netaddr_t a = ip("10.255.1.2"), b = ip("11.0.0.0");
    assert_true(netaddr_net_contains(&c, &a));
    assert_false(netaddr_net_contains(&c, &b));

    c = cidr("192.168.1.77/26"); /* host bits are cleared: 192.168.1.64/26 */
    assert_int_equal(c.addr[3], 64);
    a = ip("192.168.1.64");
    b = ip("192.168.1.127");
    netaddr_t d = ip("192.168.1.128"), e = ip("192.168.1.63");
    assert_true(netaddr_net_contains(&c, &a));
    assert_true(netaddr_net_contains(&c, &b));
    assert_false(netaddr_net_contains(&c, &d));
    assert_false(netaddr_net_contains(&c, &e));

    c = cidr("127.0.0.1"); /* a bare address is /32 */
    assert_int_equal(c.prefix, 32);
    a = ip("127.0.0.1");
    b = ip("127.0.0.2");
    assert_true(netaddr_net_contains(&c, &a));
    assert_false(netaddr_net_contains(&c, &b));

    c = cidr("0.0.0.0/0");
    assert_true(netaddr_net_contains(&c, &b));
    a = ip("::1");
    assert_false(netaddr_net_contains(&c, &a)); /* families never mix */

    c = cidr("::1/128");
    assert_int_equal(c.family, 6);
    assert_true(netaddr_net_contains(&c, &a));
    c = cidr("fd00::/8");
    a = ip("fdab::1");
    b = ip("fe80::1");
    assert_true(netaddr_net_contains(&c, &a));
    assert_false(netaddr_net_contains(&c, &b));
    c = cidr("2001:db8::/33");
    a = ip("2001:db8:7fff::1");
    b = ip("2001:db8:8000::1");
    assert_true(netaddr_net_contains(&c, &a));
    assert_false(netaddr_net_contains(&c, &b));

    /* IPv4-mapped IPv6 is IPv4, as an address and as a network */
    a = ip("::ffff:10.1.2.3");
    assert_int_equal(a.family, 4);
    c = cidr("10.0.0.0/8");
    assert_true(netaddr_net_contains(&c, &a));
    c = cidr("::ffff:10.0.0.0/104");
    assert_int_equal(c.family, 4);
    assert_int_equal(c.prefix, 8);
    a = ip("10.9.9.9");
    assert_true(netaddr_net_contains(&c, &a));

    const char *bad[] = {
        "",        "10.0.0.0/",         "10.0.0.0/33",  "10.0.0.0/-1", "10.0.0/8", "10.0.0.0/8x",
        "::1/129", "::ffff:1.2.3.4/95", "1.2.3.4/0008", "localhost",   "1.2.3.4 ", "fe80::1%eth0",
        "/8",      "01.2.3.4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        netaddr_net_t out;
        if (netaddr_net_parse(bad[i], strlen(bad[i]), &out) >= 0)
            fail_msg("\"%s\" parsed as a CIDR", bad[i]);
    }
    netaddr_t out;
    assert_int_equal(netaddr_parse("1.2.3.4\0", 8, &out), NETADDR_ESYNTAX); /* an embedded NUL */
}

static void test_ip_sockaddr_and_format(void **unused)
{
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:192.0.2.7", &in6.sin6_addr);
    netaddr_t a;
    assert_int_equal(netaddr_from_sockaddr((struct sockaddr *)&in6, &a), 0);
    assert_int_equal(a.family, 4);
    char text[NETADDR_STRLEN];
    assert_string_equal(netaddr_format(&a, text, sizeof(text)), "192.0.2.7");
    inet_pton(AF_INET6, "2001:db8::42", &in6.sin6_addr);
    assert_int_equal(netaddr_from_sockaddr((struct sockaddr *)&in6, &a), 0);
    assert_string_equal(netaddr_format(&a, text, sizeof(text)), "2001:db8::42");
    assert_null(netaddr_format(&a, text, 5)); /* too small */
    struct sockaddr_in in = {.sin_family = AF_INET};
    inet_pton(AF_INET, "198.51.100.1", &in.sin_addr);
    assert_int_equal(netaddr_from_sockaddr((struct sockaddr *)&in, &a), 0);
    assert_string_equal(netaddr_format(&a, text, sizeof(text)), "198.51.100.1");
    struct sockaddr unix_sa = {.sa_family = AF_UNIX};
    assert_int_equal(netaddr_from_sockaddr(&unix_sa, &a), NETADDR_EFAMILY);
}

/* Each kind of bad input gets its own error. */
static void test_errors_are_specific(void **unused)
{
    (void)unused;
    netaddr_t a;
    netaddr_net_t n;
    assert_int_equal(netaddr_parse("", 0, &a), NETADDR_EEMPTY);
    assert_int_equal(netaddr_parse("10.1", 4, &a), NETADDR_ESYNTAX); /* no short forms */
    assert_int_equal(netaddr_parse("1.2.3.256", 9, &a), NETADDR_ESYNTAX);
    assert_int_equal(netaddr_parse("[::1]", 5, &a), NETADDR_ESYNTAX);
    char longer[80];
    memset(longer, '1', sizeof(longer));
    assert_int_equal(netaddr_parse(longer, sizeof(longer), &a), NETADDR_ESYNTAX);
    assert_int_equal(netaddr_net_parse("", 0, &n), NETADDR_EEMPTY);
    assert_int_equal(netaddr_net_parse("/8", 2, &n), NETADDR_EEMPTY);
    assert_int_equal(netaddr_net_parse("x/8", 3, &n), NETADDR_ESYNTAX);
    assert_int_equal(netaddr_net_parse("10.0.0.0/33", 11, &n), NETADDR_EPREFIX);
    assert_int_equal(netaddr_net_parse("10.0.0.0/", 9, &n), NETADDR_EPREFIX);
    assert_int_equal(netaddr_net_parse("::1/129", 7, &n), NETADDR_EPREFIX);
    assert_int_equal(netaddr_net_parse("::ffff:1.2.3.4/95", 17, &n), NETADDR_EPREFIX);
    assert_int_equal(netaddr_net_parse("1.2.3.4/0008", 12, &n), NETADDR_EPREFIX);
    assert_string_equal(netaddr_strerror(NETADDR_ESYNTAX), "not an IPv4 or IPv6 address");
    assert_string_equal(netaddr_strerror(NETADDR_EPREFIX),
                        "prefix length out of range for the address");
    assert_string_equal(netaddr_strerror(NETADDR_EFAMILY), "address of the wrong family");
    assert_string_equal(netaddr_strerror(NETADDR_EEMPTY), "empty address");
}

/* Masking keeps the first prefix bits, clears the rest, and refuses the other family. */
static void test_mask_and_format(void **unused)
{
    (void)unused;
    netaddr_t a = ip("203.0.113.77");
    netaddr_net_t n;
    char text[NETADDR_NET_STRLEN];
    assert_int_equal(netaddr_mask(&a, 4, 24, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "203.0.113.0/24");
    assert_int_equal(netaddr_mask(&a, 4, 27, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "203.0.113.64/27");
    assert_int_equal(netaddr_mask(&a, 4, 0, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "0.0.0.0/0");
    assert_int_equal(netaddr_mask(&a, 4, 32, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "203.0.113.77/32");
    assert_int_equal(netaddr_mask(&a, 4, 33, &n), NETADDR_EPREFIX);
    assert_int_equal(netaddr_mask(&a, 6, 64, &n), NETADDR_EFAMILY);
    assert_true(netaddr_net_contains(
        &(netaddr_net_t){.family = 4, .prefix = 24, .addr = {203, 0, 113, 0}}, &a));

    netaddr_t b = ip("2001:db8:abcd:12:ffff::1");
    assert_int_equal(netaddr_mask(&b, 6, 64, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "2001:db8:abcd:12::/64");
    assert_int_equal(netaddr_mask(&b, 6, 52, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "2001:db8:abcd::/52");
    assert_int_equal(netaddr_mask(&b, 4, 24, &n), NETADDR_EFAMILY);
    assert_int_equal(netaddr_mask(&b, 6, 129, &n), NETADDR_EPREFIX);
    assert_null(netaddr_net_format(&n, text, 6)); /* too small */

    /* a mapped address masks as the IPv4 address it is */
    netaddr_t m = ip("::ffff:198.51.100.9");
    assert_int_equal(netaddr_mask(&m, 4, 24, &n), NETADDR_OK);
    assert_string_equal(netaddr_net_format(&n, text, sizeof(text)), "198.51.100.0/24");
    char at[NETADDR_STRLEN];
    assert_string_equal(netaddr_format(&m, at, sizeof(at)), "198.51.100.9");
}

static void test_prefix_parse(void **unused)
{
    (void)unused;
    assert_int_equal(netaddr_prefix_parse("24", 2, 32), 24);
    assert_int_equal(netaddr_prefix_parse("0", 1, 32), 0);
    assert_int_equal(netaddr_prefix_parse("128", 3, 128), 128);
    assert_int_equal(netaddr_prefix_parse("33", 2, 32), -1);
    assert_int_equal(netaddr_prefix_parse("", 0, 32), -1);
    assert_int_equal(netaddr_prefix_parse("0008", 4, 128), -1); /* at most three digits */
    assert_int_equal(netaddr_prefix_parse("-1", 2, 32), -1);
    assert_int_equal(netaddr_prefix_parse("2x", 2, 32), -1);
}

static void test_in_any(void **unused)
{
    (void)unused;
    netaddr_net_t nets[] = {cidr("10.0.0.0/8"), cidr("fd00::/8")};
    netaddr_t a = ip("10.2.3.4"), b = ip("fd12::1"), c = ip("192.0.2.1");
    assert_true(netaddr_in_any(nets, 2, &a));
    assert_true(netaddr_in_any(nets, 2, &b));
    assert_false(netaddr_in_any(nets, 2, &c));
    assert_false(netaddr_in_any(NULL, 0, &a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cidr),
        cmocka_unit_test(test_ip_sockaddr_and_format),
        cmocka_unit_test(test_errors_are_specific),
        cmocka_unit_test(test_mask_and_format),
        cmocka_unit_test(test_prefix_parse),
        cmocka_unit_test(test_in_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
