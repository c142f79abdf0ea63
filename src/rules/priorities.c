/*
 * priorities.c - a rule's priorities and reserves (priorities.h): parsing their texts, checking
 * them against a capacity, and the reserve above a priority.
 */
#include <stdio.h>
#include <string.h>

#include "rules/priorities.h"

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* Shows a name in a message, cut short and with bytes outside the name's alphabet as '?'. */
static const char *shown(const char *s, size_t len, char *buf)
{
    size_t n = len < PRIO_NAME_MAX ? len : PRIO_NAME_MAX;
    for (size_t i = 0; i < n; i++)
        buf[i] = name_char(s[i]) ? s[i] : '?';
    strcpy(buf + n, len > n ? "..." : "");
    return buf;
}

int prio_find(const rule_priorities_t *p, const char *name, size_t len)
{
    for (unsigned i = 0; i < p->n; i++) {
        if (strlen(p->name[i]) == len && memcmp(p->name[i], name, len) == 0)
            return (int)i;
    }
    return -1;
}

int prio_add(rule_priorities_t *p, const char *name, size_t len, char *why, size_t cap)
{
    char buf[PRIO_NAME_MAX + 4];
    bool ok = len >= 1 && len <= PRIO_NAME_MAX;
    for (size_t i = 0; ok && i < len; i++)
        ok = name_char(name[i]);
    if (!ok) {
        snprintf(why, cap, "'%s' is not 1..%d characters of A-Z a-z 0-9 _ -", shown(name, len, buf),
                 PRIO_NAME_MAX);
        return -1;
    }
    if (prio_find(p, name, len) >= 0) {
        snprintf(why, cap, "'%s' is named twice", shown(name, len, buf));
        return -1;
    }
    if (p->n == PRIO_MAX) {
        snprintf(why, cap, "at most %d priorities", PRIO_MAX);
        return -1;
    }
    memcpy(p->name[p->n], name, len);
    p->name[p->n][len] = '\0';
    p->n++;
    return 0;
}

/* The next comma-separated item of text[*at..len), blanks trimmed: its start and length. */
static const char *next_item(const char *text, size_t len, size_t *at, size_t *item_len)
{
    size_t i = *at;
    while (i < len && text[i] == ' ')
        i++;
    size_t start = i;
    while (i < len && text[i] != ',')
        i++;
    size_t end = i;
    while (end > start && text[end - 1] == ' ')
        end--;
    *at = i + 1; /* past the comma, or past the end */
    *item_len = end - start;
    return text + start;
}

int prio_add_text(rule_priorities_t *p, const char *text, size_t len, char *why, size_t cap)
{
    for (size_t at = 0; at <= len;) {
        size_t n;
        const char *item = next_item(text, len, &at, &n);
        if (prio_add(p, item, n, why, cap) != 0)
            return -1;
    }
    return 0;
}

/* "20%" or "10" into *percent or *units: true, or false for anything else. */
static bool parse_amount(const char *s, size_t len, int64_t *percent, int64_t *units)
{
    bool pct = len > 0 && s[len - 1] == '%';
    size_t digits = len - pct;
    if (digits == 0 || digits > 18 || (s[0] == '0'))
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (pct && v > 100)
        return false;
    *(pct ? percent : units) = v;
    return true;
}

int prio_set_reserve(rule_priorities_t *p, const char *name, size_t len, const char *amount,
                     size_t amount_len, char *why, size_t cap)
{
    char buf[PRIO_NAME_MAX + 4];
    int i = prio_find(p, name, len);
    if (i < 0 && p->n == 0) {
        snprintf(why, cap, "'%s' is not a priority: the rule names no priorities",
                 shown(name, len, buf));
        return -1;
    }
    if (i < 0) {
        char names[PRIO_TEXT_MAX];
        prio_names_text(p, names);
        snprintf(why, cap, "'%s' is not one of the priorities (%s)", shown(name, len, buf), names);
        return -1;
    }
    if (i == 0) {
        snprintf(why, cap, "'%s' is the lowest priority: every unit is already its own",
                 p->name[0]);
        return -1;
    }
    if (p->percent[i] > 0 || p->units[i] > 0) {
        snprintf(why, cap, "'%s' has a reserve already", p->name[i]);
        return -1;
    }
    if (!parse_amount(amount, amount_len, &p->percent[i], &p->units[i])) {
        snprintf(why, cap,
                 "the reserve of '%s' must be a percent 1%%..100%% (\"20%%\") or units >= 1",
                 p->name[i]);
        return -1;
    }
    return 0;
}

int prio_set_reserve_text(rule_priorities_t *p, const char *text, size_t len, char *why, size_t cap)
{
    for (size_t at = 0; at <= len;) {
        size_t n;
        const char *item = next_item(text, len, &at, &n);
        const char *colon = memchr(item, ':', n);
        if (colon == NULL) {
            snprintf(why, cap, "each reserve is 'priority: amount' (\"critical: 20%%\")");
            return -1;
        }
        size_t name_len = (size_t)(colon - item), amount_len = n - name_len - 1;
        const char *amount = colon + 1;
        while (amount_len > 0 && *amount == ' ')
            amount++, amount_len--;
        while (name_len > 0 && item[name_len - 1] == ' ')
            name_len--;
        if (prio_set_reserve(p, item, name_len, amount, amount_len, why, cap) != 0)
            return -1;
    }
    return 0;
}

int prio_check(const rule_priorities_t *p, int64_t capacity, char *why, size_t cap)
{
    int64_t percent = 0;
    for (unsigned i = 0; i < p->n; i++)
        percent += p->percent[i];
    if (percent > 100) {
        snprintf(why, cap, "the reserves sum to %lld%%, past 100%% of the limit",
                 (long long)percent);
        return -1;
    }
    int64_t units = p->n > 0 ? prio_reserve_above(p, 0, capacity) : 0;
    if (units > capacity) {
        snprintf(why, cap, "the reserves sum to %lld units, past the limit's %lld",
                 (long long)units, (long long)capacity);
        return -1;
    }
    return 0;
}

int64_t prio_reserve_above(const rule_priorities_t *p, unsigned index, int64_t capacity)
{
    int64_t percent = 0, units = 0;
    for (unsigned i = index + 1; i < p->n; i++) {
        percent += p->percent[i];
        units += p->units[i]; /* each < 10^18, at most PRIO_MAX of them */
    }
    /* capacity * percent / 100 rounded up, without overflow: capacity < 2^62, percent <= 100 */
    __int128 part = ((__int128)capacity * percent + 99) / 100;
    __int128 total = part + units;
    return total > INT64_MAX ? INT64_MAX : (int64_t)total;
}

bool prio_has_reserve(const rule_priorities_t *p)
{
    for (unsigned i = 0; i < p->n; i++) {
        if (p->percent[i] > 0 || p->units[i] > 0)
            return true;
    }
    return false;
}

size_t prio_names_text(const rule_priorities_t *p, char *buf)
{
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < p->n; i++)
        at += (size_t)snprintf(buf + at, PRIO_TEXT_MAX - at, "%s%s", i ? ", " : "", p->name[i]);
    return at;
}

size_t prio_reserve_text(const rule_priorities_t *p, char *buf)
{
    size_t at = 0;
    buf[0] = '\0';
    for (unsigned i = p->n; i-- > 0;) { /* highest first, as one reads them */
        if (p->percent[i] == 0 && p->units[i] == 0)
            continue;
        bool pct = p->percent[i] > 0;
        at += (size_t)snprintf(buf + at, PRIO_TEXT_MAX - at, "%s%s: %lld%s", at ? ", " : "",
                               p->name[i], (long long)(pct ? p->percent[i] : p->units[i]),
                               pct ? "%" : "");
    }
    return at;
}

bool prio_equal(const rule_priorities_t *a, const rule_priorities_t *b)
{
    if (a->n != b->n)
        return false;
    for (unsigned i = 0; i < a->n; i++) {
        if (strcmp(a->name[i], b->name[i]) != 0 || a->percent[i] != b->percent[i] ||
            a->units[i] != b->units[i])
            return false;
    }
    return true;
}
