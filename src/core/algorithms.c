/*
 * algorithms.c - the table of algorithms (algorithms.h): one row each, in sl_algorithm_t order.
 *
 * A row says what the rest of sluice needs to know of an algorithm without reading its code:
 * its name, the parameters it takes with their bounds and defaults, its capabilities and where
 * its functions are (`<file>_ops`, exported by src/core/<file>.c). Nothing outside this file and
 * the algorithm's own files types an algorithm's name; tests/lint/algorithms.py checks it.
 * docs/dev/design.md, "Adding an algorithm", has the recipe.
 */
#include <stdio.h>
#include <string.h>

#include "core/algorithms.h"
#include "core/core.h"

extern const algorithm_ops_t fixed_window_ops;
extern const algorithm_ops_t sliding_log_ops;
extern const algorithm_ops_t sliding_window_ops;
extern const algorithm_ops_t sliding_buckets_ops;
extern const algorithm_ops_t gcra_ops;
extern const algorithm_ops_t concurrency_ops;

/* A parameter the algorithm does not take. */
#define NOT_TAKEN                                                                                  \
    {                                                                                              \
        .taken = false                                                                             \
    }
/* The sub-windows of sliding_buckets-like algorithms. */
#define BUCKETS                                                                                    \
    {                                                                                              \
        .taken = true, .divides_window = true, .min = 1, .max = SL_BUCKETS_MAX,                    \
        .def = SL_BUCKETS_DEFAULT                                                                  \
    }
/* An admission ahead of its time (the GCRA family). */
#define MAX_DELAY                                                                                  \
    {                                                                                              \
        .taken = true, .min = 0, .max = SL_WINDOW_MAX_NS, .def = CORE_DEFAULT_NONE                 \
    }
/* A bucket's burst, at least `least`, the limit when not given. */
#define BURST(least)                                                                               \
    {                                                                                              \
        .taken = true, .min = (least), .max = INT64_MAX, .def = CORE_DEFAULT_LIMIT                 \
    }

/* Every algorithm gives units back and supports mode: approximate so far. */
#define COMMON (CORE_CAP_REFUNDABLE | CORE_CAP_APPROXIMATE)

const core_algorithm_t core_algorithms[CORE_ALGORITHM_SLOTS] = {
    [SL_FIXED_WINDOW] =
        {
            .name = "fixed_window",
            .summary = "a count per window, windows aligned to multiples of W since the epoch",
            .caps = COMMON | CORE_CAP_LEASABLE | CORE_CAP_ALIGNED,
            .limit_max = INT64_MAX,
            .burst = NOT_TAKEN,
            .buckets = NOT_TAKEN,
            .max_delay = NOT_TAKEN,
            .ops = &fixed_window_ops,
        },
    [SL_SLIDING_LOG] =
        {
            .name = "sliding_log",
            .summary = "exact: each admission's time and units, the window (now - W, now]",
            .caps = COMMON | CORE_CAP_EXACT | CORE_CAP_VARIABLE,
            .limit_max = SL_LOG_LIMIT_MAX,
            .burst = NOT_TAKEN,
            .buckets = NOT_TAKEN,
            .max_delay = NOT_TAKEN,
            .lease_refusal = "it keeps each unit's time (sliding_buckets can)",
            .ops = &sliding_log_ops,
        },
    [SL_SLIDING_WINDOW] =
        {
            .name = "sliding_window",
            .summary = "a weighted estimate over the previous and the current fixed window",
            .caps = COMMON | CORE_CAP_LEASABLE,
            .limit_max = INT64_MAX,
            .burst = NOT_TAKEN,
            .buckets = NOT_TAKEN,
            .max_delay = NOT_TAKEN,
            .ops = &sliding_window_ops,
        },
    [SL_SLIDING_BUCKETS] =
        {
            .name = "sliding_buckets",
            .summary = "the window split into sub-windows, each counted whole: never over-admits",
            .caps = COMMON | CORE_CAP_LEASABLE,
            .limit_max = INT64_MAX,
            .burst = NOT_TAKEN,
            .buckets = BUCKETS,
            .max_delay = NOT_TAKEN,
            .ops = &sliding_buckets_ops,
        },
    [SL_TOKEN_BUCKET] =
        {
            .name = "token_bucket",
            .summary = "a bucket of capacity B, refilled N per W, kept as one time",
            .caps = COMMON | CORE_CAP_TOKENS | CORE_CAP_LEASABLE,
            .limit_max = INT64_MAX,
            .burst = BURST(1),
            .buckets = NOT_TAKEN,
            .max_delay = MAX_DELAY,
            .capacity_extra = 0,
            .burst_means = "capacity",
            .ops = &gcra_ops, /* the same GCRA, its own capacity */
        },
    [SL_GCRA] =
        {
            .name = "gcra",
            .summary = "redis-cell's CL.THROTTLE: GCRA with capacity burst + 1",
            .caps = COMMON | CORE_CAP_TOKENS | CORE_CAP_LEASABLE,
            .limit_max = INT64_MAX,
            .burst = BURST(0),
            .buckets = NOT_TAKEN,
            .max_delay = MAX_DELAY,
            .capacity_extra = 1,
            .burst_means = "max burst",
            .suggested = true,
            .ops = &gcra_ops,
        },
    [SL_CONCURRENCY] =
        {
            .name = "concurrency",
            .summary = "in flight: at most N units held at once, each hold released or expired",
            .caps = CORE_CAP_HOLDS | CORE_CAP_EXACT,
            .limit_max = SL_HOLDS_MAX,
            .burst = NOT_TAKEN,
            .buckets = NOT_TAKEN,
            .max_delay = NOT_TAKEN,
            .lease_refusal = "a hold is released by its id or expires, never spent elsewhere",
            .ops = &concurrency_ops,
        },
};

const char *const core_cap_names[CORE_CAP_COUNT] = {
    "tokens", "exact", "refundable", "leasable", "approximate", "aligned", "variable", "holds",
};

const core_algorithm_t *core_algorithm_next(const core_algorithm_t *row)
{
    size_t i = row == NULL ? 0 : (size_t)(row - core_algorithms) + 1;
    for (; i < CORE_ALGORITHM_SLOTS; i++) {
        if (core_algorithms[i].name != NULL)
            return &core_algorithms[i];
    }
    return NULL;
}

const core_algorithm_t *core_algorithm_with(uint32_t caps)
{
    CORE_ALGORITHM_EACH(row)
    {
        if ((row->caps & caps) == caps)
            return row;
    }
    return NULL;
}

sl_algorithm_t core_algorithm_id_with(uint32_t caps)
{
    const core_algorithm_t *row = core_algorithm_with(caps);
    return row != NULL ? core_algorithm_id(row) : (sl_algorithm_t)0;
}

const char *sl_algorithm_name(sl_algorithm_t algorithm)
{
    const core_algorithm_t *row = core_algorithm(algorithm);
    return row == NULL ? NULL : row->name;
}

int sl_algorithm_parse(const char *name, size_t len, sl_algorithm_t *out)
{
    if (name == NULL || out == NULL)
        return SL_EINVAL;
    CORE_ALGORITHM_EACH(row)
    {
        if (strlen(row->name) == len && memcmp(row->name, name, len) == 0) {
            *out = core_algorithm_id(row);
            return SL_OK;
        }
    }
    return SL_EALGORITHM;
}

bool core_algorithm_any(const core_algorithm_t *row)
{
    (void)row;
    return true;
}

bool core_algorithm_takes_burst(const core_algorithm_t *row)
{
    return row->burst.taken;
}

bool core_algorithm_takes_buckets(const core_algorithm_t *row)
{
    return row->buckets.taken;
}

bool core_algorithm_takes_delay(const core_algorithm_t *row)
{
    return row->max_delay.taken;
}

bool core_algorithm_is_tokens(const core_algorithm_t *row)
{
    return (row->caps & CORE_CAP_TOKENS) != 0;
}

bool core_algorithm_no_lease(const core_algorithm_t *row)
{
    return (row->caps & CORE_CAP_LEASABLE) == 0;
}

bool core_algorithm_limit_bounded(const core_algorithm_t *row)
{
    return row->limit_max < INT64_MAX;
}

bool core_algorithm_holds(const core_algorithm_t *row)
{
    return (row->caps & CORE_CAP_HOLDS) != 0;
}

size_t core_algorithm_join(char *buf, size_t cap, core_algorithm_pred keep, const char *sep,
                           const char *last)
{
    size_t total = 0, n = 0, at = 0;
    CORE_ALGORITHM_EACH(row) total += keep(row);
    if (cap == 0)
        return 0;
    buf[0] = '\0';
    CORE_ALGORITHM_EACH(row)
    {
        if (!keep(row))
            continue;
        const char *before = n == 0 ? "" : n + 1 == total ? last : sep;
        int w = snprintf(buf + at, cap - at, "%s%s", before, row->name);
        if (w < 0 || (size_t)w >= cap - at) {
            buf[at] = '\0'; /* cut short: the names that fit, whole */
            return n;
        }
        at += (size_t)w;
        n++;
    }
    return n;
}
