/*
 * resp.c - RESP2 request parser and reply encoders (see resp.h for the contract).
 *
 * The parser is stateless: each call parses one request from the start of the unconsumed bytes,
 * so a request split across reads is parsed again once the rest has arrived. That costs a rescan
 * of the headers (never of bulk payloads, which are skipped by length) and keeps the parser a
 * pure function of its input, which is what the fuzz target checks.
 */
#include "proto/resp.h"

#include "proto/codec.h"
#include "proto/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT_LINE_MAX 32 /* longest "*<n>" or "$<n>" line worth waiting for, bytes */

static long fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static long fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(err, RESP_ERR_MAX, "Protocol error: ");
    vsnprintf(err + n, RESP_ERR_MAX - (size_t)n, fmt, ap);
    va_end(ap);
    return RESP_ERROR;
}

/* A printable rendering of one byte for error messages. */
static const char *byte_name(unsigned char c, char out[TEXT_BYTE_CAP])
{
    return text_byte(c, 0, out);
}

/*
 * Reads a "<integer>\r\n" line at buf[pos..len): the digits, an optional leading '-' when
 * signed. Returns the index after "\r\n", RESP_PARTIAL, or RESP_ERROR (bad is set true when the
 * line is complete but not an integer; too_long when no CRLF came within COUNT_LINE_MAX).
 */
static long read_count_slow(const char *buf, size_t len, size_t pos, bool is_signed,
                            long long *value, bool *bad, bool *too_long)
{
    *bad = *too_long = false;
    size_t end = pos;
    while (end < len && buf[end] != '\r') {
        if (end - pos > COUNT_LINE_MAX) {
            *too_long = true;
            return RESP_ERROR;
        }
        end++;
    }
    if (end + 1 >= len)
        return end - pos > COUNT_LINE_MAX ? (*too_long = true, RESP_ERROR) : RESP_PARTIAL;
    bool neg = is_signed && end > pos && buf[pos] == '-';
    size_t i = pos + neg;
    long long v = 0;
    if (buf[end + 1] != '\n' || i == end || end - i > 18) {
        *bad = true;
        return RESP_ERROR;
    }
    for (; i < end; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            *bad = true;
            return RESP_ERROR;
        }
        v = v * 10 + (buf[i] - '0');
    }
    *value = neg ? -v : v;
    return (long)(end + 2);
}

/*
 * read_count's contract. The common line, 1 to 18 digits then CRLF, all in buf, is read in one
 * pass; anything else (a partial line, an error) goes to read_count_slow, whose answers for it
 * are the reference: for the lines read here it would answer the same.
 */
static inline long read_count(const char *buf, size_t len, size_t pos, bool is_signed,
                              long long *value, bool *bad, bool *too_long)
{
    size_t i = pos + (is_signed && pos < len && buf[pos] == '-');
    size_t first = i;
    long long v = 0;
    while (i < len && i - first < 18 && buf[i] >= '0' && buf[i] <= '9') {
        v = v * 10 + (buf[i] - '0');
        i++;
    }
    if (i == first || i + 1 >= len || buf[i] != '\r' || buf[i + 1] != '\n')
        return read_count_slow(buf, len, pos, is_signed, value, bad, too_long);
    *value = first != pos ? -v : v;
    return (long)(i + 2);
}

static long parse_multibulk(char *buf, size_t len, size_t bulk_max, size_t args_max,
                            resp_arg_t *argv, size_t *argc, size_t *need, char *err)
{
    long long count;
    bool bad, too_long;
    long pos = read_count(buf, len, 1, true, &count, &bad, &too_long);
    if (pos == RESP_PARTIAL)
        return RESP_PARTIAL;
    if (pos == RESP_ERROR)
        return too_long ? fail(err, "too big mbulk count string")
                        : fail(err, "invalid multibulk length");
    if (count <= 0) { /* as Redis: an empty request, skipped */
        *argc = 0;
        return pos;
    }
    if ((unsigned long long)count > args_max)
        return fail(err, "too many arguments (%lld, the limit is %zu)", count, args_max);
    for (long long i = 0; i < count; i++) {
        if ((size_t)pos >= len)
            return RESP_PARTIAL;
        if (buf[pos] != '$') {
            char name[TEXT_BYTE_CAP];
            return fail(err, "expected '$', got %s", byte_name((unsigned char)buf[pos], name));
        }
        long long blen;
        long data = read_count(buf, len, (size_t)pos + 1, false, &blen, &bad, &too_long);
        if (data == RESP_PARTIAL)
            return RESP_PARTIAL;
        if (data == RESP_ERROR)
            return too_long ? fail(err, "too big bulk count string")
                            : fail(err, "invalid bulk length");
        if ((unsigned long long)blen > bulk_max)
            return fail(err, "bulk length %lld exceeds the limit of %zu bytes", blen, bulk_max);
        if ((size_t)data + (size_t)blen + 2 > len) {
            *need = (size_t)data + (size_t)blen + 2;
            return RESP_PARTIAL;
        }
        if (buf[data + blen] != '\r' || buf[data + blen + 1] != '\n')
            return fail(err, "bulk of %lld bytes not followed by CRLF", blen);
        argv[i] = (resp_arg_t){.ptr = buf + data, .len = (size_t)blen};
        pos = data + (long)blen + 2;
    }
    *argc = (size_t)count;
    return pos;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * Unescapes a quoted word starting at line[*pos] (the opening quote) in place, writing to
 * line[*out...]. Returns false for an unbalanced quote or a closing quote not followed by a
 * blank or the end of the line.
 */
static bool unquote(char *line, size_t end, size_t *pos, size_t *out)
{
    char quote = line[(*pos)++];
    while (*pos < end) {
        char c = line[(*pos)++];
        if (c == quote) {
            return *pos == end || is_blank(line[*pos]);
        }
        if (c == '\\' && *pos < end) {
            char e = line[*pos];
            if (quote == '\'') {
                if (e == '\'') {
                    c = '\'';
                    (*pos)++;
                }
            } else if (e == 'x' && *pos + 2 < end && codec_hex_digit(line[*pos + 1]) >= 0 &&
                       codec_hex_digit(line[*pos + 2]) >= 0) {
                c = (char)(codec_hex_digit(line[*pos + 1]) * 16 + codec_hex_digit(line[*pos + 2]));
                *pos += 3;
            } else {
                static const char from[] = "nrtab", to[] = "\n\r\t\a\b";
                const char *f = strchr(from, e);
                c = f != NULL && e != '\0' ? to[f - from] : e;
                (*pos)++;
            }
        }
        line[(*out)++] = c;
    }
    return false;
}

static long parse_inline(char *buf, size_t len, size_t args_max, resp_arg_t *argv, size_t *argc,
                         char *err)
{
    size_t scan = len < RESP_INLINE_MAX + 2 ? len : RESP_INLINE_MAX + 2;
    char *nl = memchr(buf, '\n', scan);
    if (nl == NULL)
        return len > RESP_INLINE_MAX ? fail(err, "too big inline request") : RESP_PARTIAL;
    size_t end = (size_t)(nl - buf), pos = 0, n = 0;
    while (pos < end) {
        while (pos < end && is_blank(buf[pos]))
            pos++;
        if (pos == end)
            break;
        if (n == args_max)
            return fail(err, "too many arguments (the limit is %zu)", args_max);
        size_t start = pos, out = pos;
        if (buf[pos] == '"' || buf[pos] == '\'') {
            if (!unquote(buf, end, &pos, &out))
                return fail(err, "unbalanced quotes in request");
        } else {
            while (pos < end && !is_blank(buf[pos]))
                pos++;
            out = pos;
        }
        argv[n++] = (resp_arg_t){.ptr = buf + start, .len = out - start};
    }
    *argc = n;
    return (long)(end + 1);
}

long resp_parse(char *buf, size_t len, const resp_limits_t *limits, resp_arg_t *argv,
                size_t argv_cap, size_t *argc, size_t *need, char *err)
{
    size_t ignored;
    if (need == NULL)
        need = &ignored;
    *need = len + 1;
    size_t bulk_max = limits && limits->bulk_max ? limits->bulk_max : RESP_BULK_MAX;
    size_t args_max = limits && limits->args_max ? limits->args_max : RESP_ARGS_MAX;
    if (args_max > argv_cap)
        args_max = argv_cap;
    *argc = 0;
    if (len == 0)
        return RESP_PARTIAL;
    if (buf[0] == '*')
        return parse_multibulk(buf, len, bulk_max, args_max, argv, argc, need, err);
    return parse_inline(buf, len, args_max, argv, argc, err);
}

/* ---- replies ----------------------------------------------------------------------------- */

/* "00" .. "99": two digits at a time, half the divisions of one at a time. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

/* 10^n for n = 0 .. 19: a number below 10^n has at most n digits. */
static const uint64_t pow10_u64[20] = {1,
                                       10,
                                       100,
                                       1000,
                                       10000,
                                       100000,
                                       1000000,
                                       10000000,
                                       100000000,
                                       1000000000,
                                       10000000000ULL,
                                       100000000000ULL,
                                       1000000000000ULL,
                                       10000000000000ULL,
                                       100000000000000ULL,
                                       1000000000000000ULL,
                                       10000000000000000ULL,
                                       100000000000000000ULL,
                                       1000000000000000000ULL,
                                       10000000000000000000ULL};

/* Writes "<prefix><v>\r\n" at p, which has room for 24 bytes (prefix, sign, 19 digits, CRLF);
 * returns the end. Small numbers, which most replies are, take no division. */
static char *put_int_at(char *p, char prefix, int64_t v)
{
    *p++ = prefix;
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        *p++ = '-';
        u = 0 - u;
    }
    if (u < 10) {
        *p++ = (char)('0' + u);
    } else if (u < 100) {
        memcpy(p, &digit_pairs[2 * u], 2);
        p += 2;
    } else {
        size_t n = 3; /* digits: 3 up to 20 */
        while (n < 20 && u >= pow10_u64[n])
            n++;
        char *end = p + n;
        for (p = end; u >= 100; u /= 100) {
            p -= 2;
            memcpy(p, &digit_pairs[2 * (u % 100)], 2);
        }
        if (u >= 10) {
            memcpy(p - 2, &digit_pairs[2 * u], 2);
        } else {
            p[-1] = (char)('0' + u);
        }
        p = end;
    }
    p[0] = '\r';
    p[1] = '\n';
    return p + 2;
}

/* Writes "<prefix><v>\r\n" straight into the buffer (the hot path of every reply). */
static void put_line_int(buf_t *b, char prefix, int64_t v)
{
    if (!buf_reserve(b, 24)) /* prefix, sign, 19 digits, CRLF */
        return;
    b->len = (size_t)(put_int_at(b->data + b->len, prefix, v) - b->data);
}

void resp_add_simple(buf_t *b, const char *s)
{
    buf_add(b, "+", 1);
    buf_add(b, s, strlen(s));
    buf_add(b, "\r\n", 2);
}

void resp_add_error(buf_t *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t len = (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
    for (size_t i = 0; i < len; i++) /* an error is one line */
        if (msg[i] == '\r' || msg[i] == '\n')
            msg[i] = ' ';
    buf_add(b, "-", 1);
    buf_add(b, msg, len);
    buf_add(b, "\r\n", 2);
}

void resp_add_int(buf_t *b, int64_t v)
{
    put_line_int(b, ':', v);
}

void resp_add_bulk(buf_t *b, const void *p, size_t len)
{
    put_line_int(b, '$', (int64_t)len);
    buf_add(b, p, len);
    buf_add(b, "\r\n", 2);
}

void resp_add_null(buf_t *b)
{
    buf_add(b, "$-1\r\n", 5);
}

void resp_add_array(buf_t *b, size_t n)
{
    put_line_int(b, '*', (int64_t)n);
}

void resp_add_int_array(buf_t *b, const int64_t *v, size_t n)
{
    /* "*n\r\n" then n times ":v\r\n": at most 24 bytes each, reserved once. */
    if (!buf_reserve(b, 24 * (n + 1))) {
        return;
    }
    char *p = put_int_at(b->data + b->len, '*', (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        p = put_int_at(p, ':', v[i]);
    }
    b->len = (size_t)(p - b->data);
}
