/*
 * priorities.h - a rule's priorities and the reserves that shed load (docs/algorithms.md,
 * "Priorities"): the names, lowest first, and the part of the limit each priority keeps for
 * itself and those above it, in percent of the capacity or in units.
 *
 * A request of priority p is admitted only when, after its cost, at least reserve_above(p)
 * units remain: the sum of the reserves of the priorities above p (the core's check,
 * sl_decide_reserved()). The top priority's reserve_above is 0, so it may use the whole limit;
 * a request naming no priority is of the lowest. Plain data, no allocation: a rule_priorities_t
 * is copied by value with its ruledef_t.
 */
#ifndef SLUICE_RULES_PRIORITIES_H
#define SLUICE_RULES_PRIORITIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PRIO_MAX      8  /* most priorities of one rule */
#define PRIO_NAME_MAX 32 /* longest priority name, bytes: [A-Za-z0-9_-] */
#define PRIO_TEXT_MAX (PRIO_MAX * (PRIO_NAME_MAX + 24)) /* prio_*_text()'s longest result */

typedef struct rule_priorities {
    unsigned n;                             /* names, lowest first; 0: the rule has none */
    char name[PRIO_MAX][PRIO_NAME_MAX + 1]; /* NUL-terminated */
    int64_t percent[PRIO_MAX];              /* priority i's reserve in percent of the capacity */
    int64_t units[PRIO_MAX];                /* or in units (at most one of the two is > 0) */
} rule_priorities_t;

/* Appends a name (len bytes): 0, or -1 with why (cap bytes) for a bad or repeated name or one
 * past PRIO_MAX. */
int prio_add(rule_priorities_t *p, const char *name, size_t len, char *why, size_t cap);

/* Names from text "low, normal, high" (comma-separated, blanks around names ignored): 0, or -1
 * with why. */
int prio_add_text(rule_priorities_t *p, const char *text, size_t len, char *why, size_t cap);

/* The index of a name (len bytes), or -1 when the rule has no such priority. */
int prio_find(const rule_priorities_t *p, const char *name, size_t len);

/* Sets the reserve of the named priority from "20%" (1..100 percent) or "10" (units >= 1): 0,
 * or -1 with why (an unknown priority, the lowest, a repeated one, a bad amount). */
int prio_set_reserve(rule_priorities_t *p, const char *name, size_t len, const char *amount,
                     size_t amount_len, char *why, size_t cap);

/* Reserves from text "critical: 20%, high: 10" (prio_set_reserve() of each): 0 or -1 with why. */
int prio_set_reserve_text(rule_priorities_t *p, const char *text, size_t len, char *why,
                          size_t cap);

/* Whether the reserves fit a rule of this capacity: the percents at most 100 together, and all
 * of them (percents rounded up) at most the capacity. 0, or -1 with why. */
int prio_check(const rule_priorities_t *p, int64_t capacity, char *why, size_t cap);

/* The units a request of priority `index` (0 the lowest) must leave under a capacity: the
 * reserves of the priorities above it, their percents summed then rounded up. 0 for the top
 * priority and for a rule without priorities. */
int64_t prio_reserve_above(const rule_priorities_t *p, unsigned index, int64_t capacity);

/* The canonical texts: "low, normal, high, critical" and "critical: 20%, high: 10" (buf of
 * PRIO_TEXT_MAX bytes, NUL-terminated). Return the length. */
size_t prio_names_text(const rule_priorities_t *p, char *buf);
size_t prio_reserve_text(const rule_priorities_t *p, char *buf);
bool prio_has_reserve(const rule_priorities_t *p);

bool prio_equal(const rule_priorities_t *a, const rule_priorities_t *b);

#endif /* SLUICE_RULES_PRIORITIES_H */
