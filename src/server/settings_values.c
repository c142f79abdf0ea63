/*
 * settings_values.c - reading one setting's value for settings.c: integers, sizes ("512k"),
 * durations, addresses and networks, text; each failure a message naming where the value came
 * from (a flag, or the --config file with line and column). See settings_impl.h.
 */
#include "server/settings_impl.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

/* ---- where a value came from, for messages -------------------------------------------------- */

int cfg_fail(const source_t *s, const char *fmt, ...)
{
    int n;
    if (s->file != NULL && s->node != NULL)
        n = snprintf(s->err, s->cap, "%s: line %u, column %u: %s%s", s->file, s->node->line,
                     s->node->column, s->opt ? s->opt->key : "", s->opt ? ": " : "");
    else if (s->file != NULL)
        n = snprintf(s->err, s->cap, "%s: ", s->file);
    else
        n = snprintf(s->err, s->cap, "--%s: ", s->opt->flag);
    if (n >= 0 && (size_t)n < s->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err + n, s->cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* User text in a message: printable ASCII, at most 40 bytes. buf holds 48. */
const char *cfg_shown(const char *t, char *buf)
{
    size_t i = 0;
    for (; t[i] != '\0' && i < 40; i++)
        buf[i] = (unsigned char)t[i] >= 0x20 && (unsigned char)t[i] < 0x7F ? t[i] : '?';
    strcpy(buf + i, t[i] != '\0' ? "..." : "");
    return buf;
}

/* ---- value readers -------------------------------------------------------------------------- */

/* Decimal digits only, into *out; false when empty, not digits or beyond max. */
static bool parse_digits(const char *t, size_t len, uint64_t max, uint64_t *out)
{
    if (len == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] < '0' || t[i] > '9')
            return false;
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(t[i] - '0'), &v))
            return false;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

/* "512k", "1m", "2g", "1048576", "4kb": bytes into *out (powers of 1024). */
static bool parse_size(const char *t, size_t len, uint64_t *out)
{
    size_t digits = 0;
    while (digits < len && t[digits] >= '0' && t[digits] <= '9')
        digits++;
    size_t rest = len - digits;
    const char *unit = t + digits;
    if (rest > 0 && (unit[rest - 1] == 'b' || unit[rest - 1] == 'B'))
        rest--; /* "kb", "mb", "b" */
    uint64_t mult = 1;
    if (rest == 1) {
        switch (unit[0] | 0x20) {
        case 'k':
            mult = UINT64_C(1) << 10;
            break;
        case 'm':
            mult = UINT64_C(1) << 20;
            break;
        case 'g':
            mult = UINT64_C(1) << 30;
            break;
        case 't':
            mult = UINT64_C(1) << 40;
            break;
        default:
            return false;
        }
    } else if (rest != 0) {
        return false;
    }
    uint64_t v;
    return parse_digits(t, digits, UINT64_MAX, &v) && !__builtin_mul_overflow(v, mult, out);
}

/* The text of a file node for a setting (any scalar), or NULL with err set. */
const char *cfg_node_text(const source_t *s, const char *want)
{
    const yt_node_t *n = s->node;
    if (n->text == NULL || n->kind == YT_NULL || n->kind == YT_SEQ || n->kind == YT_MAP) {
        cfg_fail(s, "must be %s, not %s", want, yt_kind_name(n->kind));
        return NULL;
    }
    return n->text;
}

int cfg_read_int(const source_t *s, const char *text, int64_t *out)
{
    const option_t *o = s->opt;
    char want[64];
    snprintf(want, sizeof(want), "an integer %lld..%lld", (long long)o->min, (long long)o->max);
    uint64_t v;
    bool file_int = s->node == NULL || s->node->kind == YT_INT;
    if (!file_int || !parse_digits(text, strlen(text), (uint64_t)o->max, &v) || (int64_t)v < o->min)
        return cfg_fail(s, "must be %s", want);
    *out = (int64_t)v;
    return 0;
}

int cfg_read_size(const source_t *s, const char *text, uint64_t *out)
{
    const option_t *o = s->opt;
    char buf[48];
    if (!parse_size(text, strlen(text), out))
        return cfg_fail(s, "'%s' is not a size (bytes, or with k, m, g: 512k, 2g)",
                        cfg_shown(text, buf));
    if (*out < (uint64_t)o->min || *out > (uint64_t)o->max)
        return cfg_fail(s, "must be %lld..%lld bytes", (long long)o->min, (long long)o->max);
    return 0;
}

int cfg_read_duration(const source_t *s, const char *text, int64_t *out)
{
    char buf[48];
    size_t len = strlen(text);
    uint64_t ms;
    bool digits = len > 0 && strspn(text, "0123456789") == len;
    if (digits || (s->node != NULL && s->node->kind == YT_INT)) {
        /* a bare integer is milliseconds, in the file and on the command line, as in rules */
        if (!parse_digits(text, len, (uint64_t)(INT64_MAX / SL_NS_PER_MS), &ms))
            return cfg_fail(s, "must be a duration (10s, 250ms) or milliseconds >= 0");
        *out = (int64_t)ms * SL_NS_PER_MS;
    } else {
        int rc = sl_duration_parse(text, len, out);
        if (rc == SL_EOVERFLOW)
            return cfg_fail(s, "duration '%s' is out of range", cfg_shown(text, buf));
        if (rc != SL_OK)
            return cfg_fail(s, "malformed duration '%s' (e.g. 250ms, 10s, 1m)",
                            cfg_shown(text, buf));
    }
    if (*out < s->opt->min) {
        char min[32];
        snprintf(min, sizeof(min), "%lldms", (long long)(s->opt->min / SL_NS_PER_MS));
        return cfg_fail(s, "must be at least %s", min);
    }
    return 0;
}

static bool valid_address(const char *t)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, t, addr) == 1 || inet_pton(AF_INET6, t, addr) == 1;
}

/* "10.0.0.0/8", "::1", "fd00::/8" */
static bool valid_cidr(const char *t)
{
    const char *slash = strchr(t, '/');
    if (slash == NULL)
        return valid_address(t);
    char host[64];
    size_t hlen = (size_t)(slash - t);
    if (hlen >= sizeof(host))
        return false;
    memcpy(host, t, hlen);
    host[hlen] = '\0';
    unsigned char addr[16];
    uint64_t bits;
    int max = inet_pton(AF_INET, host, addr) == 1    ? 32
              : inet_pton(AF_INET6, host, addr) == 1 ? 128
                                                     : -1;
    return max > 0 && parse_digits(slash + 1, strlen(slash + 1), (uint64_t)max, &bits);
}

int cfg_check_text(const source_t *s, const char *text, size_t len)
{
    char buf[48];
    if (memchr(text, '\0', len) != NULL)
        return cfg_fail(s, "must not contain NUL bytes");
    if (s->opt->check == CHECK_ADDRESS && !valid_address(text))
        return cfg_fail(s, "'%s' is not an IPv4 or IPv6 address (e.g. 127.0.0.1, ::1, 0.0.0.0)",
                        cfg_shown(text, buf));
    if (s->opt->check == CHECK_CIDR && !valid_cidr(text))
        return cfg_fail(s, "'%s' is not an address or network (e.g. 10.0.0.0/8, ::1)",
                        cfg_shown(text, buf));
    return 0;
}

char *cfg_dup_text(const source_t *s, const char *text, size_t len)
{
    char *p = malloc(len + 1);
    if (p == NULL) {
        cfg_fail(s, "out of memory");
        return NULL;
    }
    memcpy(p, text, len + 1);
    return p;
}
