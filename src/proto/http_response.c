/*
 * http_response.c - HTTP/1.1 responses (see http.h): status line, headers, the IETF RateLimit
 * fields, RFC 9457 problem details, JSON strings, the Date header.
 */
#define _GNU_SOURCE /* memmem */
#include "proto/http.h"

#include "proto/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- responses ---------------------------------------------------------------------------- */

/* always inlined: its callers pass literals, whose strlen() the compiler then folds */
static inline __attribute__((always_inline)) void put_str(buf_t *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

/* v in decimal: every response writes a few, and printf's machinery is most of their cost */
static void put_int(buf_t *b, int64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        tmp[--i] = '-';
    buf_add(b, tmp + i, sizeof(tmp) - i);
}

void http_header_int(buf_t *b, const char *name, int64_t v)
{
    put_str(b, name);
    put_str(b, ": ");
    put_int(b, v);
    put_str(b, "\r\n");
}

const char *http_reason(int status)
{
    const char *s = http_status_str((enum http_status)status);
    return strcmp(s, "<unknown>") == 0 ? "Unknown" : s;
}

void http_continue(buf_t *b)
{
    put_str(b, "HTTP/1.1 100 Continue\r\n\r\n");
}

void http_begin(buf_t *b, int status)
{
    b->mark = b->len;
    put_str(b, "HTTP/1.1 ");
    put_int(b, status);
    put_str(b, " ");
    put_str(b, http_reason(status));
    put_str(b, "\r\n");
}

void http_header(buf_t *b, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t name_len = strlen(name);
    if (!buf_reserve(b, name_len + 2 + (size_t)n + 3))
        return;
    buf_add(b, name, name_len);
    buf_add(b, ": ", 2);
    char *v = b->data + b->len;
    va_start(ap, fmt);
    vsnprintf(v, (size_t)n + 1, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n; i++)
        if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
            v[i] = ' ';
    b->len += (size_t)n;
    buf_add(b, "\r\n", 2);
}

/*
 * The status of the response being built: the one at b->mark, where http_begin() wrote it.
 * Should the mark not point at a status line (a buffer reset or moved since), the head is read
 * backwards: every line of it was written by http_begin() or http_header(), so each ends in
 * CRLF and holds no other CR or LF, and walking back line by line from the end reaches its
 * status line before any earlier response's bytes. 0 if not found.
 */
static int current_status(const buf_t *b)
{
    const char *m = b->data + b->mark; /* where the last http_begin() wrote its status line */
    if (b->mark + 14 <= b->len && memcmp(m, "HTTP/1.1 ", 9) == 0)
        return (m[9] - '0') * 100 + (m[10] - '0') * 10 + (m[11] - '0');
    size_t end = b->len;
    while (end >= 2 && b->data[end - 2] == '\r' && b->data[end - 1] == '\n') {
        size_t start = end - 2;
        while (start > 0 && b->data[start - 1] != '\n')
            start--;
        const char *l = b->data + start;
        if (end - start >= 14 && memcmp(l, "HTTP/1.1 ", 9) == 0)
            return (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
        end = start;
    }
    return 0;
}

/* Writes the framing headers and the blank line; returns false if no body may follow. */
static bool end_head(buf_t *b, bool keep_alive, const char *content_type, size_t len)
{
    int status = current_status(b);
    bool bodyless = (status >= 100 && status < 200) || status == 204 || status == 304;
    if (!bodyless) {
        if (content_type != NULL)
            http_header(b, "Content-Type", "%s", content_type);
        http_header_int(b, "Content-Length", (int64_t)len);
    }
    if (!keep_alive)
        put_str(b, "Connection: close\r\n");
    put_str(b, "\r\n");
    return !bodyless;
}

void http_end(buf_t *b, bool keep_alive, const char *content_type, const void *body, size_t len)
{
    if (end_head(b, keep_alive, content_type, len))
        buf_add(b, body, len);
}

#define SF_INTEGER_MAX 999999999999999LL /* RFC 8941 §3.3.1 */

static int64_t sf_clamp(int64_t v)
{
    return v < 0 ? 0 : v > SF_INTEGER_MAX ? SF_INTEGER_MAX : v;
}

/* An RFC 8941 sf-string: printable ASCII, '"' and '\' escaped, any other byte as '?'. Plain
 * runs are appended whole: every decision's two RateLimit fields carry the policy's name. */
static void put_sf_string(buf_t *b, const char *s)
{
    buf_add(b, "\"", 1);
    const char *run = s;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            continue;
        buf_add(b, run, (size_t)(s - run));
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            buf_add(b, esc, 2);
        } else {
            buf_add(b, "?", 1);
        }
        run = s + 1;
    }
    buf_add(b, run, (size_t)(s - run));
    buf_add(b, "\"", 1);
}

static void policy_value(buf_t *b, const char *policy, int64_t limit, int64_t window_s)
{
    put_sf_string(b, policy);
    put_str(b, ";q=");
    put_int(b, sf_clamp(limit));
    put_str(b, ";w=");
    put_int(b, sf_clamp(window_s));
}

static void limit_value(buf_t *b, const char *policy, int64_t remaining, int64_t reset_s)
{
    put_sf_string(b, policy);
    put_str(b, ";r=");
    put_int(b, sf_clamp(remaining));
    put_str(b, ";t=");
    put_int(b, sf_clamp(reset_s));
}

void http_ratelimit_headers(buf_t *b, const char *policy, int64_t limit, int64_t window_s,
                            int64_t remaining, int64_t reset_s)
{
    put_str(b, "RateLimit-Policy: ");
    policy_value(b, policy, limit, window_s);
    put_str(b, "\r\nRateLimit: ");
    limit_value(b, policy, remaining, reset_s);
    put_str(b, "\r\n");
}

void http_ratelimit_values(buf_t *policy_out, buf_t *limit_out, const char *policy, int64_t limit,
                           int64_t window_s, int64_t remaining, int64_t reset_s)
{
    policy_value(policy_out, policy, limit, window_s);
    limit_value(limit_out, policy, remaining, reset_s);
}

void http_problem_end(buf_t *b, int status, bool keep_alive, const char *title, const char *detail)
{
    http_problem_field_end(b, status, keep_alive, title, detail, NULL);
}

void http_problem_field_end(buf_t *b, int status, bool keep_alive, const char *title,
                            const char *detail, const char *field)
{
    if (title == NULL)
        title = http_reason(status);
    char code[16];
    int code_len = snprintf(code, sizeof(code), "%d", status);
    size_t title_len = strlen(title), detail_len = detail ? strlen(detail) : 0;
    size_t len = strlen("{\"type\":\"about:blank\",\"title\":\"\",\"status\":}") +
                 http_json_escape(NULL, 0, title, title_len) + (size_t)code_len;
    if (detail != NULL)
        len += strlen(",\"detail\":\"\"") + http_json_escape(NULL, 0, detail, detail_len);
    size_t field_len = field != NULL ? strlen(field) : 0;
    if (field != NULL)
        len += strlen(",\"field\":\"\"") + http_json_escape(NULL, 0, field, field_len);
    if (!end_head(b, keep_alive, "application/problem+json", len))
        return;
    put_str(b, "{\"type\":\"about:blank\",\"title\":");
    http_json_append(b, title, title_len);
    put_str(b, ",\"status\":");
    buf_add(b, code, (size_t)code_len);
    if (detail != NULL) {
        put_str(b, ",\"detail\":");
        http_json_append(b, detail, detail_len);
    }
    if (field != NULL) {
        put_str(b, ",\"field\":");
        http_json_append(b, field, field_len);
    }
    put_str(b, "}");
}

void http_problem(buf_t *b, int status, bool keep_alive, const char *title, const char *detail)
{
    http_begin(b, status);
    http_problem_end(b, status, keep_alive, title, detail);
}

/* Appends p[0..n) to out[0..cap) at *len, keeping room for a NUL. */
static void emit(char *out, size_t cap, size_t *len, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++, (*len)++)
        if (*len + 1 < cap)
            out[*len] = p[i];
}

size_t http_json_escape(char *out, size_t cap, const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            emit(out, cap, &n, tmp, 2);
        } else if (c < 0x20 || c == 0x7f) {
            const char *named = c == '\b'   ? "\\b"
                                : c == '\f' ? "\\f"
                                : c == '\n' ? "\\n"
                                : c == '\r' ? "\\r"
                                : c == '\t' ? "\\t"
                                            : NULL;
            if (named != NULL) {
                emit(out, cap, &n, named, 2);
            } else {
                snprintf(tmp, sizeof(tmp), "\\u%04x", c);
                emit(out, cap, &n, tmp, 6);
            }
        } else if (c < 0x80) {
            emit(out, cap, &n, (const char *)&s[i], 1);
        } else {
            size_t k = text_utf8_decode((const unsigned char *)s + i, len - i, NULL);
            if (k == 0) {
                emit(out, cap, &n, "\\ufffd", 6);
                k = 1;
            } else {
                emit(out, cap, &n, s + i, k);
            }
            i += k;
            continue;
        }
        i++;
    }
    if (cap > 0)
        out[n < cap ? n : cap - 1] = '\0';
    return n;
}

void http_json_append(buf_t *b, const char *s, size_t len)
{
    size_t n = http_json_escape(NULL, 0, s, len);
    if (!buf_reserve(b, n + 3))
        return;
    b->data[b->len] = '"';
    http_json_escape(b->data + b->len + 1, n + 1, s, len);
    b->data[b->len + 1 + n] = '"';
    b->len += n + 2;
}

const char *http_date(int64_t unix_s, char out[HTTP_DATE_LEN])
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (unix_s < 0 || unix_s > 253402300799LL || gmtime_r(&t, &tm) == NULL) { /* 9999-12-31 */
        t = 0;
        gmtime_r(&t, &tm);
    }
    char tmp[64]; /* the fields are in range; the compiler cannot tell */
    snprintf(tmp, sizeof(tmp), "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
             months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    memcpy(out, tmp, HTTP_DATE_LEN - 1);
    out[HTTP_DATE_LEN - 1] = '\0';
    return out;
}

void http_head_only(buf_t *b, size_t from)
{
    if (b->data == NULL || from >= b->len)
        return;
    const char *end = memmem(b->data + from, b->len - from, "\r\n\r\n", 4);
    if (end != NULL)
        b->len = (size_t)(end + 4 - b->data);
}
