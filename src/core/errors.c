/*
 * errors.c - names of the SL_E* codes. The texts that name algorithms are made from the table
 * of algorithms (algorithms.c) once, on first use, so that a row added names itself in them.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/algorithms.h"

#define TEXT_MAX 384 /* bytes of one text made from the table */

static char text_algorithm[TEXT_MAX], text_limit[TEXT_MAX], text_burst[TEXT_MAX],
    text_buckets[TEXT_MAX], text_delay[TEXT_MAX], text_lease[TEXT_MAX], text_holds[TEXT_MAX];
static pthread_once_t texts_once = PTHREAD_ONCE_INIT;

/* Appends printf-style text at buf + *at (cap bytes in all), cutting it short at cap. */
static void add(char *buf, size_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void add(char *buf, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *at, TEXT_MAX - *at, fmt, ap);
    va_end(ap);
    if (w > 0)
        *at = (size_t)w >= TEXT_MAX - *at ? TEXT_MAX - 1 : *at + (size_t)w;
}

/* "limit must be a positive integer (at most 1048576 for sliding_log)" */
static void make_limit(void)
{
    size_t at = 0, n = 0;
    add(text_limit, &at, "limit must be a positive integer");
    CORE_ALGORITHM_EACH(row)
    {
        if (core_algorithm_limit_bounded(row))
            add(text_limit, &at, "%sat most %lld for %s", n++ == 0 ? " (" : ", ",
                (long long)row->limit_max, row->name);
    }
    if (n > 0)
        add(text_limit, &at, ")");
}

/* "burst must be >= 1 for token_bucket, >= 0 for gcra, and only applies to them" */
static void make_burst(void)
{
    size_t at = 0, n = 0;
    add(text_burst, &at, "burst must be");
    CORE_ALGORITHM_EACH(row)
    {
        if (row->burst.taken)
            add(text_burst, &at, "%s >= %lld for %s", n++ == 0 ? "" : ",",
                (long long)row->burst.min, row->name);
    }
    add(text_burst, &at, ", and only applies to %s", n == 1 ? "it" : "them");
}

static void make_texts(void)
{
    char names[TEXT_MAX];
    size_t at = 0;
    core_algorithm_join(names, sizeof names, core_algorithm_any, ", ", " or ");
    add(text_algorithm, &at, "unknown algorithm (expected %s)", names);
    make_limit();
    make_burst();
    const core_algorithm_t *b = core_algorithm_next(NULL);
    while (b != NULL && !b->buckets.taken)
        b = core_algorithm_next(b);
    core_algorithm_join(names, sizeof names, core_algorithm_takes_buckets, ", ", " and ");
    at = 0;
    add(text_buckets, &at,
        "buckets must be between %lld and %lld, divide the window, and only "
        "applies to %s",
        (long long)(b ? b->buckets.min : 1), (long long)(b ? b->buckets.max : 1), names);
    core_algorithm_join(names, sizeof names, core_algorithm_takes_delay, ", ", " and ");
    at = 0;
    add(text_delay, &at, "max_delay must be between 0 and 366d and only applies to %s", names);
    at = 0;
    add(text_lease, &at, "no lease possible: ");
    if (core_algorithm_join(names, sizeof names, core_algorithm_no_lease, ", ", " and ") > 0)
        add(text_lease, &at, "%s cannot lease, and ", names);
    core_algorithm_join(names, sizeof names, core_algorithm_is_tokens, "/", "/");
    add(text_lease, &at,
        "a lease time must be within [1ns, 366d] (%s: at most the bucket's "
        "tolerance less one interval)",
        names);
    core_algorithm_join(names, sizeof names, core_algorithm_holds, ", ", " or ");
    at = 0;
    add(text_holds, &at, "acquire and release need a rule that holds units (algorithm %s)", names);
}

/* The text of a code that names algorithms, made once. */
static const char *made(const char *text)
{
    pthread_once(&texts_once, make_texts);
    return text;
}

const char *sl_strerror(int code)
{
    switch (code) {
    case SL_OK:
        return "success";
    case SL_EALGORITHM:
        return made(text_algorithm);
    case SL_ELIMIT:
        return made(text_limit);
    case SL_EWINDOW:
        return "window must be between 1ms and 366d";
    case SL_EBURST:
        return made(text_burst);
    case SL_EBUCKETS:
        return made(text_buckets);
    case SL_EDELAY:
        return made(text_delay);
    case SL_ECOST:
        return "cost must be a non-negative integer";
    case SL_EOVERFLOW:
        return "value out of range";
    case SL_EKEY:
        return "key too long";
    case SL_ENOMEM:
        return "out of memory";
    case SL_EFULL:
        return "table full: memory cap reached and no idle key to reclaim";
    case SL_ESTATE:
        return "state is corrupt or belongs to another rule";
    case SL_EDURATION:
        return "malformed duration (expected e.g. 250ms, 10s, 1m, 1h30m, 1d)";
    case SL_EINVAL:
        return "invalid argument";
    case SL_ELEASE:
        return made(text_lease);
    case SL_EDEBT:
        return "settle refused: it would leave the key owing more than the rule's max_debt "
               "(nothing was charged)";
    case SL_EMAXDEBT:
        return "max_debt must be an integer between 0 and 2^62 - 1 (units a key may owe beyond "
               "its limit)";
    case SL_EHOLD:
        return "unknown hold: this key holds no live hold of that id (never acquired here, "
               "expired, or already released); nothing was released";
    case SL_EHOLDTIME:
        return "a hold's timeout must be between 1ms and the rule's hold_timeout";
    case SL_ENOHOLDS:
        return made(text_holds);
    case SL_EADAPTIVE:
        return "an adaptive limit needs a rule that holds units, 1 <= min_limit <= limit <= "
               "max_limit <= 4096, and only its algorithm's options within their bounds";
    }
    return "unknown error";
}
