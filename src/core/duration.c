/*
 * duration.c - "250ms", "10s", "1h30m": the duration syntax of rules, flags and files.
 *
 * One or more <digits><unit> groups; units ns, us, ms, s, m, h, d. No sign, no fraction, no
 * spaces, no bare numbers (a bare number's unit would be a guess). Checked for overflow.
 */
#include <string.h>

#include "sluice/sluice.h"

static const struct {
    const char *name;
    int64_t ns;
} units[] = {
    /* longer names first so "ms" is not read as "m" + garbage */
    {"ns", 1},
    {"us", SL_NS_PER_US},
    {"ms", SL_NS_PER_MS},
    {"s", SL_NS_PER_SEC},
    {"m", 60 * SL_NS_PER_SEC},
    {"h", 3600 * SL_NS_PER_SEC},
    {"d", 86400 * SL_NS_PER_SEC},
};

/* Matches a unit at text[*pos], advancing *pos. Returns its ns, or 0 for no unit. */
static int64_t match_unit(const char *text, size_t len, size_t *pos)
{
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        size_t n = strlen(units[u].name);
        if (len - *pos >= n && memcmp(text + *pos, units[u].name, n) == 0) {
            *pos += n;
            return units[u].ns;
        }
    }
    return 0;
}

int sl_duration_parse(const char *text, size_t len, int64_t *ns)
{
    if (text == NULL || ns == NULL)
        return SL_EINVAL;
    if (len == 0)
        return SL_EDURATION;
    int64_t total = 0;
    size_t pos = 0;
    while (pos < len) {
        if (text[pos] < '0' || text[pos] > '9')
            return SL_EDURATION;
        int64_t value = 0;
        while (pos < len && text[pos] >= '0' && text[pos] <= '9') {
            if (__builtin_mul_overflow(value, 10, &value) ||
                __builtin_add_overflow(value, text[pos] - '0', &value))
                return SL_EOVERFLOW;
            pos++;
        }
        int64_t unit = match_unit(text, len, &pos);
        if (unit == 0)
            return SL_EDURATION;
        if (__builtin_mul_overflow(value, unit, &value) ||
            __builtin_add_overflow(total, value, &total))
            return SL_EOVERFLOW;
    }
    *ns = total;
    return SL_OK;
}
