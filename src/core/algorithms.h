/*
 * algorithms.h - the table of algorithms: one row per algorithm, with its name, the parameters
 * it takes (their bounds and defaults), its capabilities and its functions. Everything in sluice
 * that lists, parses, validates, describes or branches on algorithms reads the rows: the error
 * texts, sl_rule_prepare(), the SL.THROTTLE arguments, rule files, the Envoy import, the CLI's
 * help, GET /v1/algorithms and the console, sluice.so's values, snapshots, the Lua scripts.
 * docs/dev/design.md ("The core", "Adding an algorithm") says why and how.
 *
 * The rows are core_algorithms[] (algorithms.c), indexed by sl_algorithm_t; a slot with no
 * algorithm has a NULL name. An algorithm's functions are in its own file (src/core/<x>.c), which
 * exports them as one algorithm_ops_t (core.h); its row points at it. Read-only, shared by every
 * thread: nothing here allocates, locks or changes.
 */
#ifndef SLUICE_CORE_ALGORITHMS_H
#define SLUICE_CORE_ALGORITHMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

/* Slots of core_algorithms[]: sl_algorithm_t values 1..15 may have a row. sluice.so's values
 * keep the algorithm in 4 bits (module/value.h), so a value past 15 would need a new format;
 * an initializer past the array's end does not compile. */
#define CORE_ALGORITHM_SLOTS 16

/* What an algorithm can do (core_algorithm_t.caps). Each claim is checked against what the
 * algorithm does by tests/prop/prop_algorithms.c. */
enum core_cap {
    /* The GCRA family: the state is one time (TAT), the emission interval T = ceil(W / N), the
     * capacity burst (+ capacity_extra) units, refilled one per T; a lease holds its time in
     * the bucket (at most tolerance - T). */
    CORE_CAP_TOKENS = 1u << 0,
    /* Decides as a true sliding window: a cost is admitted exactly when it and the units
     * admitted in (now - W, now] are at most N. */
    CORE_CAP_EXACT = 1u << 1,
    /* sl_refund() gives back units a decision took (exactly, at the decision's time). */
    CORE_CAP_REFUNDABLE = 1u << 2,
    /* sl_lease() grants units (mode: leased is sound for it); otherwise SL_ELEASE, and
     * lease_refusal says why. */
    CORE_CAP_LEASABLE = 1u << 3,
    /* A count of its remaining is safe to decide from between syncs (mode: approximate): it
     * never overstates what remains later but for the units admitted since, and a settle may
     * charge past the limit (debt). */
    CORE_CAP_APPROXIMATE = 1u << 4,
    /* Windows aligned to multiples of W since the epoch: a key that took its limit admits it
     * again at the next window's first ns, as envoyproxy/ratelimit counts (its import, and the
     * rules with no numbers of their own, use the first row that has it). */
    CORE_CAP_ALIGNED = 1u << 5,
    /* Its state's size varies with its admissions, and it has a packed form of its own
     * (sl_state_pack()); sluice.so writes it in a format of its own (module/value.h). */
    CORE_CAP_VARIABLE = 1u << 6,
    /* Holds units until released or expired (sl_acquire(), sl_release(): its ops have holds);
     * the window is the hold timeout. Its decide is an acquire no one can release. */
    CORE_CAP_HOLDS = 1u << 7,
};

/* CORE_CAP_* and their names in GET /v1/algorithms, in this order. */
#define CORE_CAP_COUNT 8
extern const char *const core_cap_names[CORE_CAP_COUNT];

/* What SL_DEFAULT in a parameter stands for (core_param_t.def). */
#define CORE_DEFAULT_LIMIT INT64_MIN  /* the rule's limit */
#define CORE_DEFAULT_NONE  SL_DEFAULT /* nothing: SL_DEFAULT stays, below every min (refused) */

/* One optional parameter (burst, buckets, max_delay) as an algorithm takes it. */
typedef struct core_param {
    bool taken;          /* false: only SL_DEFAULT or 0 are accepted, and 0 is stored */
    bool divides_window; /* the window must be a multiple of it */
    int64_t min;         /* least value accepted */
    int64_t max;         /* greatest value accepted */
    int64_t def;         /* what SL_DEFAULT stands for: a value, CORE_DEFAULT_LIMIT or _NONE */
} core_param_t;

struct algorithm_ops; /* the functions (core.h) */

/* One row: one algorithm. */
typedef struct core_algorithm {
    const char *name;          /* "fixed_window": rules, commands, errors; NULL: no algorithm */
    const char *summary;       /* one line for help and the console */
    uint32_t caps;             /* CORE_CAP_* */
    int64_t limit_max;         /* greatest limit (N); INT64_MAX: no bound of its own */
    core_param_t burst;        /* CORE_CAP_TOKENS: B */
    core_param_t buckets;      /* sub-windows K */
    core_param_t max_delay;    /* ns a request may be admitted ahead of its time */
    int64_t capacity_extra;    /* CORE_CAP_TOKENS: capacity = burst + this */
    const char *burst_means;   /* what burst is to it, for help ("capacity"); NULL: none */
    const char *lease_refusal; /* not CORE_CAP_LEASABLE: why, after "<name> cannot lease: " */
    bool suggested;            /* offered first where a form must pick one (the console) */
    const struct algorithm_ops *ops; /* its file's functions */
} core_algorithm_t;

extern const core_algorithm_t core_algorithms[CORE_ALGORITHM_SLOTS];

/* The row of any integer (an sl_algorithm_t, or a number read from bytes), or NULL when no
 * algorithm has it. */
static inline const core_algorithm_t *core_algorithm_at(uint64_t value)
{
    return value < CORE_ALGORITHM_SLOTS && core_algorithms[value].name != NULL
               ? &core_algorithms[value]
               : NULL;
}

static inline const core_algorithm_t *core_algorithm(sl_algorithm_t algorithm)
{
    return core_algorithm_at((uint64_t)(unsigned)algorithm);
}

/* The row's sl_algorithm_t. */
static inline sl_algorithm_t core_algorithm_id(const core_algorithm_t *row)
{
    return (sl_algorithm_t)(row - core_algorithms);
}

/* The row after `row` in sl_algorithm_t order (the first for NULL), NULL after the last. */
const core_algorithm_t *core_algorithm_next(const core_algorithm_t *row);

#define CORE_ALGORITHM_EACH(row)                                                                   \
    for (const core_algorithm_t *row = core_algorithm_next(NULL); row != NULL;                     \
         row = core_algorithm_next(row))

/* The first row whose caps include all of `caps`, or NULL; and its sl_algorithm_t, or 0 (no
 * algorithm: sl_rule_prepare() refuses it) when there is none. */
const core_algorithm_t *core_algorithm_with(uint32_t caps);
sl_algorithm_t core_algorithm_id_with(uint32_t caps);

/* The value SL_DEFAULT stands for in parameter p of a rule with this limit (SL_DEFAULT for
 * CORE_DEFAULT_NONE). */
static inline int64_t core_param_default(const core_param_t *p, int64_t limit)
{
    return p->def == CORE_DEFAULT_LIMIT ? limit : p->def;
}

/* A filter of rows, for core_algorithm_join(). */
typedef bool (*core_algorithm_pred)(const core_algorithm_t *row);

bool core_algorithm_any(const core_algorithm_t *row);         /* every row */
bool core_algorithm_takes_burst(const core_algorithm_t *row); /* burst.taken */
bool core_algorithm_takes_buckets(const core_algorithm_t *row);
bool core_algorithm_takes_delay(const core_algorithm_t *row);   /* max_delay.taken */
bool core_algorithm_is_tokens(const core_algorithm_t *row);     /* CORE_CAP_TOKENS */
bool core_algorithm_no_lease(const core_algorithm_t *row);      /* not CORE_CAP_LEASABLE */
bool core_algorithm_limit_bounded(const core_algorithm_t *row); /* limit_max < INT64_MAX */
bool core_algorithm_holds(const core_algorithm_t *row);         /* CORE_CAP_HOLDS */

/* Writes into buf (cap bytes, NUL-terminated; cut short if it must be, to the names that fit
 * whole) the names of the rows
 * `keep` accepts, in sl_algorithm_t order, separated by sep and the last two by last ("a, b or
 * c" with ", " and " or "). Returns the number of names written. */
size_t core_algorithm_join(char *buf, size_t cap, core_algorithm_pred keep, const char *sep,
                           const char *last);

#endif /* SLUICE_CORE_ALGORITHMS_H */
