/*
 * test_text.c - byte-level text (proto/text.h): the UTF-8 validator on the edges RFC 3629 draws
 * (overlong forms, surrogates, above U+10FFFF, truncated and stray bytes), and the safe display
 * of outside bytes in error messages in both styles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto/text.h"

/* text_utf8_decode of the first character of s (n bytes); the code point in *cp. */
static size_t decode(const char *s, size_t n, uint32_t *cp)
{
    *cp = 0xdeadbeef;
    return text_utf8_decode((const unsigned char *)s, n, cp);
}

static void test_utf8_valid(void **unused)
{
    (void)unused;
    uint32_t cp;
    assert_int_equal(decode("A", 1, &cp), 1);
    assert_int_equal(cp, 0x41);
    assert_int_equal(decode("\x00", 1, &cp), 1); /* NUL is a character */
    assert_int_equal(cp, 0);
    assert_int_equal(decode("\xc2\x80", 2, &cp), 2); /* the smallest two-byte form */
    assert_int_equal(cp, 0x80);
    assert_int_equal(decode("\xdf\xbf", 2, &cp), 2);
    assert_int_equal(cp, 0x7ff);
    assert_int_equal(decode("\xe0\xa0\x80", 3, &cp), 3); /* the smallest three-byte form */
    assert_int_equal(cp, 0x800);
    assert_int_equal(decode("\xed\x9f\xbf", 3, &cp), 3); /* just below the surrogates */
    assert_int_equal(cp, 0xd7ff);
    assert_int_equal(decode("\xee\x80\x80", 3, &cp), 3); /* just above them */
    assert_int_equal(cp, 0xe000);
    assert_int_equal(decode("\xef\xbf\xbf", 3, &cp), 3);
    assert_int_equal(cp, 0xffff);
    assert_int_equal(decode("\xf0\x90\x80\x80", 4, &cp), 4); /* the smallest four-byte form */
    assert_int_equal(cp, 0x10000);
    assert_int_equal(decode("\xf4\x8f\xbf\xbf", 4, &cp), 4); /* U+10FFFF, the last */
    assert_int_equal(cp, 0x10ffff);
    assert_int_equal(decode("\xe2\x82\xac"
                            "rest",
                            7, &cp),
                     3); /* only the first character */
    assert_int_equal(cp, 0x20ac);
    assert_int_equal(text_utf8_decode((const unsigned char *)"\xc3\xa9", 2, NULL), 2);
}

static void test_utf8_invalid(void **unused)
{
    (void)unused;
    uint32_t cp;
    /* overlong forms of '/', U+007F, U+07FF and U+FFFF */
    assert_int_equal(decode("\xc0\xaf", 2, &cp), 0);
    assert_int_equal(decode("\xc1\xbf", 2, &cp), 0);
    assert_int_equal(decode("\xe0\x9f\xbf", 3, &cp), 0);
    assert_int_equal(decode("\xf0\x8f\xbf\xbf", 4, &cp), 0);
    /* surrogates U+D800 and U+DFFF */
    assert_int_equal(decode("\xed\xa0\x80", 3, &cp), 0);
    assert_int_equal(decode("\xed\xbf\xbf", 3, &cp), 0);
    /* above U+10FFFF */
    assert_int_equal(decode("\xf4\x90\x80\x80", 4, &cp), 0);
    assert_int_equal(decode("\xf5\x80\x80\x80", 4, &cp), 0);
    assert_int_equal(decode("\xff", 1, &cp), 0);
    /* truncated: cut short by n, or a continuation byte missing */
    assert_int_equal(decode("\xe2\x82\xac", 2, &cp), 0);
    assert_int_equal(decode("\xf0\x90\x80\x80", 3, &cp), 0);
    assert_int_equal(decode("\xc3", 1, &cp), 0);
    assert_int_equal(decode("\xe2\x82"
                            "A",
                            3, &cp),
                     0);
    /* a stray continuation byte */
    assert_int_equal(decode("\x80", 1, &cp), 0);
    assert_int_equal(decode("\xbf", 1, &cp), 0);
}

static void test_is_utf8(void **unused)
{
    (void)unused;
    assert_true(text_is_utf8("", 0));
    assert_true(text_is_utf8("plain", 5));
    assert_true(text_is_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80", 10));
    assert_false(text_is_utf8("caf\xc3", 4)); /* truncated at the end */
    assert_false(text_is_utf8("a\xed\xa0\x80z", 5));
    assert_false(text_is_utf8("a\xc0\x80", 3)); /* an overlong NUL */
}

#define SHOWS(s, len, max, flags, want)                                                            \
    do {                                                                                           \
        char out_[TEXT_SHOW_CAP(64)];                                                              \
        assert_string_equal(text_show(out_, sizeof(out_), s, len, max, flags), want);              \
    } while (0)

static void test_show_masked(void **unused)
{
    (void)unused;
    SHOWS("abc", 3, 64, TEXT_MASK, "abc");
    SHOWS("it's", 4, 64, TEXT_MASK, "it?s");                  /* the quote around it stays unique */
    SHOWS("a\r\nb\x7f\xc3\xa9", 7, 64, TEXT_MASK, "a??b???"); /* each byte one '?' */
    SHOWS("back\\slash", 10, 64, TEXT_MASK, "back\\slash");
    SHOWS("", 0, 64, TEXT_MASK, "");
    SHOWS("abcdef", 6, 4, TEXT_MASK, "abcd...");
    SHOWS("abcd", 4, 4, TEXT_MASK, "abcd"); /* exactly max: no dots */
}

static void test_show_hex(void **unused)
{
    (void)unused;
    SHOWS("abc", 3, 40, 0, "abc");
    SHOWS("it's", 4, 40, 0, "it\\x27s");
    SHOWS("a\\b", 3, 40, 0, "a\\x5cb"); /* so that the text reads back exactly */
    SHOWS("\x00\x1f\x7f\xff", 4, 40, 0, "\\x00\\x1f\\x7f\\xff");
    SHOWS("abcdef", 6, 3, 0, "abc...");
    /* a rendering that does not fit ends the text, never half-written */
    char small[6];
    assert_string_equal(text_show(small, sizeof(small), "ab\x01", 3, 40, 0), "ab");
    assert_string_equal(text_show(small, sizeof(small), "abcdefgh", 8, 40, 0), "abcde");
    char one[1];
    assert_string_equal(text_show(one, sizeof(one), "abc", 3, 40, 0), "");
}

static void test_byte(void **unused)
{
    (void)unused;
    char b[TEXT_BYTE_CAP];
    assert_string_equal(text_byte('x', 0, b), "'x'");
    assert_string_equal(text_byte(' ', 0, b), "' '");
    assert_string_equal(text_byte(1, 0, b), "\\x01");
    assert_string_equal(text_byte(0xff, 0, b), "\\xff");
    assert_string_equal(text_byte('x', TEXT_BYTE_0X | TEXT_BYTE_SPACE, b), "'x'");
    assert_string_equal(text_byte(' ', TEXT_BYTE_0X | TEXT_BYTE_SPACE, b), "0x20");
    assert_string_equal(text_byte(0x7f, TEXT_BYTE_0X, b), "0x7f");
    assert_string_equal(text_byte(-1, 0, b), "EOF");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_valid), cmocka_unit_test(test_utf8_invalid),
        cmocka_unit_test(test_is_utf8),    cmocka_unit_test(test_show_masked),
        cmocka_unit_test(test_show_hex),   cmocka_unit_test(test_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
