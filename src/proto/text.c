/*
 * text.c - UTF-8 validation and safe display of outside bytes (see text.h).
 */
#include "proto/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

size_t text_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t len;
    if (c < 0x80) {
        if (cp != NULL)
            *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80; /* no overlong forms */
        hi = c == 0xf4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
    } else {
        return 0; /* a continuation byte, 0xc0/0xc1 (overlong), or 0xf5 and above */
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    uint32_t v = c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (cp != NULL)
        *cp = v;
    return len;
}

bool text_is_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0, len; i < n; i += len) {
        if (u[i] < 0x80) { /* ASCII, most text: one byte, no decoding */
            len = 1;
        } else if ((len = text_utf8_decode(u + i, n - i, NULL)) == 0) {
            return false;
        }
    }
    return true;
}

/* True for the bytes text_show keeps as they are. */
static bool shown_as_is(unsigned char c, unsigned flags)
{
    if (c < 0x20 || c > 0x7e || c == '\'')
        return false;
    return c != '\\' || (flags & TEXT_MASK);
}

const char *text_show(char *out, size_t cap, const char *s, size_t len, size_t max, unsigned flags)
{
    size_t o = 0, n = len < max ? len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char unit[5];
        size_t w = 1;
        if (shown_as_is(c, flags))
            unit[0] = (char)c;
        else if (flags & TEXT_MASK)
            unit[0] = '?';
        else
            w = (size_t)snprintf(unit, sizeof(unit), "\\x%02x", c);
        if (o + w + 1 > cap)
            break;
        memcpy(out + o, unit, w);
        o += w;
    }
    if (len > max && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

const char *text_byte(int c, unsigned flags, char out[TEXT_BYTE_CAP])
{
    int first = flags & TEXT_BYTE_SPACE ? 0x21 : 0x20;
    if (c < 0)
        snprintf(out, TEXT_BYTE_CAP, "EOF");
    else if (c >= first && c < 0x7f)
        snprintf(out, TEXT_BYTE_CAP, "'%c'", c);
    else
        snprintf(out, TEXT_BYTE_CAP, flags & TEXT_BYTE_0X ? "0x%02x" : "\\x%02x",
                 (unsigned)c & 0xffu);
    return out;
}

int text_error(int code, char *err, size_t cap, const char *fmt, ...)
{
    if (err != NULL && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}
