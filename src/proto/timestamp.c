/*
 * timestamp.c - RFC 3339 and nginx $time_local timestamps to ns since the epoch (timestamp.h).
 *
 * Both formats are read the same way: a cursor over the text takes fixed-width digit fields
 * and literal bytes, then the fields are checked against their ranges and turned into days
 * since the epoch with Howard Hinnant's days_from_civil (exact for every Gregorian date).
 */
#include "proto/timestamp.h"

#include <string.h>

#include "sluice/sluice.h"

#define SECONDS_PER_DAY INT64_C(86400)

/* The fields of a written time, before they are checked. */
typedef struct civil {
    int64_t year, month, day, hour, minute, second, frac_ns;
    int64_t offset_s; /* east of UTC, seconds */
} civil_t;

/* A cursor over the text: every take advances it, or sets `bad` and takes nothing more. */
typedef struct cursor {
    const char *s;
    size_t len, at;
    bool bad;
} cursor_t;

static int64_t take_digits(cursor_t *c, size_t width)
{
    int64_t v = 0;
    if (c->bad || c->len - c->at < width) {
        c->bad = true;
        return 0;
    }
    for (size_t i = 0; i < width; i++) {
        char d = c->s[c->at + i];
        if (d < '0' || d > '9') {
            c->bad = true;
            return 0;
        }
        v = v * 10 + (d - '0');
    }
    c->at += width;
    return v;
}

/* Takes one byte that is one of `set`; returns it, or 0 (and bad) when it is not. */
static char take_one_of(cursor_t *c, const char *set)
{
    if (c->bad || c->at >= c->len || c->s[c->at] == '\0' || strchr(set, c->s[c->at]) == NULL) {
        c->bad = true;
        return 0;
    }
    return c->s[c->at++];
}

static bool at_end(const cursor_t *c)
{
    return !c->bad && c->at == c->len;
}

const char *timestamp_error(timestamp_rc_t rc)
{
    switch (rc) {
    case TS_OK:
        return "ok";
    case TS_ESYNTAX:
        return "malformed";
    case TS_EFIELD:
        return "a field is out of range";
    case TS_ERANGE:
        return "before 1970 or after 2116";
    }
    return "unknown error";
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; m 1..12, d valid). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int64_t days_in_month(int64_t y, int64_t m)
{
    static const int8_t days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

/* Checks the fields and converts them. Years are four digits, so nothing here overflows. */
static timestamp_rc_t civil_to_ns(const civil_t *t, int64_t *ns_out)
{
    if (t->month < 1 || t->month > 12 || t->day < 1 || t->day > days_in_month(t->year, t->month) ||
        t->hour > 23 || t->minute > 59 || t->second > 60) {
        return TS_EFIELD;
    }
    int64_t s = days_from_civil(t->year, t->month, t->day) * SECONDS_PER_DAY + t->hour * 3600 +
                t->minute * 60 + t->second - t->offset_s;
    if (s < 0 || s > SL_NOW_MAX_NS / SL_NS_PER_SEC - 1) {
        return TS_ERANGE;
    }
    *ns_out = s * SL_NS_PER_SEC + t->frac_ns;
    return TS_OK;
}

/* An offset's hours and minutes, checked: hh 0..23, mm 0..59. */
static timestamp_rc_t offset(char sign, int64_t hh, int64_t mm, int64_t *offset_s)
{
    if (hh > 23 || mm > 59) {
        return TS_EFIELD;
    }
    *offset_s = (sign == '-' ? -1 : 1) * (hh * 3600 + mm * 60);
    return TS_OK;
}

bool timestamp_looks_rfc3339(const char *s, size_t len)
{
    cursor_t c = {.s = s, .len = len};
    take_digits(&c, 4);
    take_one_of(&c, "-");
    return !c.bad;
}

timestamp_rc_t timestamp_rfc3339(const char *s, size_t len, int64_t *ns_out)
{
    cursor_t c = {.s = s, .len = len};
    civil_t t = {0};
    t.year = take_digits(&c, 4);
    take_one_of(&c, "-");
    t.month = take_digits(&c, 2);
    take_one_of(&c, "-");
    t.day = take_digits(&c, 2);
    take_one_of(&c, "Tt ");
    t.hour = take_digits(&c, 2);
    take_one_of(&c, ":");
    t.minute = take_digits(&c, 2);
    take_one_of(&c, ":");
    t.second = take_digits(&c, 2);
    if (!c.bad && c.at < len && s[c.at] == '.') {
        c.at++;
        size_t digits = 0;
        int64_t scale = SL_NS_PER_SEC;
        while (c.at < len && s[c.at] >= '0' && s[c.at] <= '9' && digits < 9) {
            scale /= 10;
            t.frac_ns += (s[c.at++] - '0') * scale;
            digits++;
        }
        c.bad = digits == 0 || (c.at < len && s[c.at] >= '0' && s[c.at] <= '9');
    }
    char zone = take_one_of(&c, "Zz+-");
    timestamp_rc_t rc = TS_OK;
    if (zone == '+' || zone == '-') {
        int64_t hh = take_digits(&c, 2);
        take_one_of(&c, ":");
        int64_t mm = take_digits(&c, 2);
        rc = c.bad ? TS_OK : offset(zone, hh, mm, &t.offset_s);
    }
    if (!at_end(&c)) {
        return TS_ESYNTAX;
    }
    return rc != TS_OK ? rc : civil_to_ns(&t, ns_out);
}

timestamp_rc_t timestamp_nginx(const char *s, size_t len, int64_t *ns_out)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    cursor_t c = {.s = s, .len = len};
    civil_t t = {0};
    t.day = take_digits(&c, 2);
    take_one_of(&c, "/");
    if (!c.bad && len - c.at >= 3) {
        for (int64_t m = 0; m < 12 && t.month == 0; m++) {
            if (memcmp(s + c.at, months + 3 * m, 3) == 0) {
                t.month = m + 1;
            }
        }
        c.at += 3;
    }
    c.bad = c.bad || t.month == 0;
    take_one_of(&c, "/");
    t.year = take_digits(&c, 4);
    take_one_of(&c, ":");
    t.hour = take_digits(&c, 2);
    take_one_of(&c, ":");
    t.minute = take_digits(&c, 2);
    take_one_of(&c, ":");
    t.second = take_digits(&c, 2);
    take_one_of(&c, " ");
    char sign = take_one_of(&c, "+-");
    int64_t hh = take_digits(&c, 2);
    int64_t mm = take_digits(&c, 2);
    if (!at_end(&c)) {
        return TS_ESYNTAX;
    }
    timestamp_rc_t rc = offset(sign, hh, mm, &t.offset_s);
    return rc != TS_OK ? rc : civil_to_ns(&t, ns_out);
}
