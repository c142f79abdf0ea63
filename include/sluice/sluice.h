/*
 * sluice.h - the public interface of libsluice, an embeddable rate limiter.
 *
 * long because: it is the one public header of the library, every contract in one place.
 *
 * Two layers:
 *
 *   1. Pure algorithms. sl_decide() takes a prepared rule, a caller-owned state buffer of
 *      sl_state_size(rule) bytes, a cost and an explicit time, and returns a decision. It never
 *      reads a clock, never allocates, never locks and never logs. A state of all zero bytes is a
 *      fresh key.
 *
 *   2. A thread-safe per-key table (sl_table_*) that stores one state per string key for one rule,
 *      sharded with one lock per shard, and reclaims keys whose state has returned to fresh.
 *
 * Time is int64_t nanoseconds since the Unix epoch everywhere ("_ns" in every name). Negative
 * times are treated as 0, times after SL_NOW_MAX_NS (year 2116) as SL_NOW_MAX_NS. A time earlier
 * than the latest time recorded in a key's state is treated as that time (clamped), so a clock that
 * steps back never grants extra quota (token_bucket and gcra need no clamp: at an earlier time
 * the bucket has refilled less).
 *
 * Errors: functions return SL_OK (0) or a negative SL_E* code; sl_strerror() names it. Being
 * rate limited is not an error: it is a decision with allowed == false.
 *
 * Thread safety: sl_decide() and friends are reentrant (they touch only their arguments). A
 * prepared sl_rule_t is read-only and may be shared by any number of threads. Every sl_table_*
 * function may be called concurrently on the same table, except sl_table_free().
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

/* ---- units ------------------------------------------------------------------------------- */

#define SL_NS_PER_US  INT64_C(1000)
#define SL_NS_PER_MS  INT64_C(1000000)
#define SL_NS_PER_SEC INT64_C(1000000000)

#define SL_WINDOW_MIN_NS    SL_NS_PER_MS                           /* shortest window: 1 ms */
#define SL_WINDOW_MAX_NS    (INT64_C(366) * 86400 * SL_NS_PER_SEC) /* longest window: 366 days */
#define SL_NOW_MAX_NS       (INT64_MAX / 2)    /* latest time decided on, ns (year 2116) */
#define SL_TOLERANCE_MAX_NS (INT64_MAX / 4)    /* token_bucket/gcra: T * capacity, ~73 years */
#define SL_LOG_LIMIT_MAX    (INT64_C(1) << 20) /* sliding_log: up to N entries of 16 bytes */
#define SL_BUCKETS_MAX      INT64_C(4096)      /* sliding_buckets sub-windows per window */
#define SL_BUCKETS_DEFAULT  INT64_C(10)
#define SL_KEY_MAX_DEFAULT  1024 /* bytes; sl_table_config_t.key_max when 0 */
#define SL_DEFAULT          (-1) /* sl_rule_t.burst / .buckets: use the algorithm's default */
#define SL_COUNT_MAX        (INT64_MAX / 2) /* a window's count in debt saturates here, units */
#define SL_MULTI_MAX        64 /* requests one sl_table_decide_all() call takes at most */
#define SL_HOLDS_MAX        INT64_C(4096) /* concurrency: limit (units held at once) at most */

/* ---- errors ------------------------------------------------------------------------------ */

enum sl_error {
    SL_OK = 0,
    SL_EALGORITHM = -1, /* unknown algorithm */
    SL_ELIMIT = -2,     /* limit must be > 0 (and <= SL_LOG_LIMIT_MAX for sliding_log) */
    SL_EWINDOW = -3,    /* window must be within [SL_WINDOW_MIN_NS, SL_WINDOW_MAX_NS] */
    SL_EBURST = -4,     /* burst must be >= 0; it only applies to token_bucket and gcra */
    SL_EBUCKETS = -5,   /* buckets must be in [1, SL_BUCKETS_MAX] and divide the window */
    SL_EDELAY = -6,     /* max_delay must be in [0, SL_WINDOW_MAX_NS]; token_bucket, gcra only */
    SL_ECOST = -7,      /* cost must be >= 0 */
    SL_EOVERFLOW = -8,  /* the rule's parameters overflow 64-bit nanosecond arithmetic (e.g. a
                           token_bucket/gcra T * capacity above SL_TOLERANCE_MAX_NS) */
    SL_EKEY = -9,       /* key longer than the table's key_max */
    SL_ENOMEM = -10,    /* allocation failed */
    SL_EFULL = -11,     /* table at its memory cap and no fresh key could be reclaimed */
    SL_ESTATE = -12,    /* state bytes are not a state of this rule (corrupt or foreign) */
    SL_EDURATION = -13, /* malformed duration string */
    SL_EINVAL = -14,    /* other invalid argument (NULL pointer, bad table config) */
    SL_ELEASE = -15,    /* no lease possible: sliding_log cannot lease; a lease time must be in
                           [1 ns, SL_WINDOW_MAX_NS], for token_bucket/gcra at most tolerance - T */
    SL_EDEBT = -16,     /* a settle would leave the key owing more than its rule's max_debt:
                           refused, nothing charged */
    SL_EMAXDEBT = -17,  /* max_debt must be SL_DEFAULT or within [0, SL_COUNT_MAX] */
    SL_EHOLD = -18,     /* release of a hold the key does not hold: never acquired there,
                           expired or already released; nothing changed */
    SL_EHOLDTIME = -19, /* a hold's timeout must be within [1 ms, the rule's hold timeout] */
    SL_ENOHOLDS = -20,  /* acquire or release on a rule whose algorithm holds nothing */
    SL_EADAPTIVE = -21, /* an adaptive limit needs a concurrency rule and 1 <= min_limit <= limit
                           <= max_limit <= SL_HOLDS_MAX, its options within their bounds */
};

/* Returns a static, human-readable description of an SL_E* code ("unknown error" otherwise). */
SL_API const char *sl_strerror(int code);

/* ---- rules ------------------------------------------------------------------------------- */

typedef enum sl_algorithm {
    SL_FIXED_WINDOW = 1, /* count per window aligned to multiples of W since the epoch */
    SL_SLIDING_LOG,      /* exact: each admission's time and units, window (now - W, now] */
    SL_SLIDING_WINDOW,   /* weighted estimate over the previous and current fixed window */
    SL_SLIDING_BUCKETS,  /* window split into `buckets` sub-windows; never over-admits */
    SL_TOKEN_BUCKET,     /* capacity B, refill N per W, stored as one time value */
    SL_GCRA,             /* redis-cell's CL.THROTTLE: limit = burst + 1 */
    SL_CONCURRENCY,      /* in flight: at most limit units held at once (sl_acquire()) */
} sl_algorithm_t;

/* Returns "fixed_window", "sliding_log", ... or NULL for a value outside the enum. */
SL_API const char *sl_algorithm_name(sl_algorithm_t algorithm);

/* Parses an algorithm name (exactly as sl_algorithm_name() spells it) of `len` bytes.
 * Returns SL_OK and sets *out, or SL_EALGORITHM. */
SL_API int sl_algorithm_parse(const char *name, size_t len, sl_algorithm_t *out);

/* How a concurrency rule's limit adapts to what releases report (sl_adaptive_t.algorithm). */
typedef enum sl_adaptive_algorithm {
    SL_ADAPTIVE_NONE = 0,  /* the limit is fixed */
    SL_ADAPTIVE_AIMD = 1,  /* +1 when busy and fine, times backoff on a drop or a slow release */
    SL_ADAPTIVE_VEGAS = 2, /* from the queue latency shows: latency over the least seen */
} sl_adaptive_algorithm_t;

#define SL_ADAPTIVE_BACKOFF_DEFAULT    90 /* aimd: percent of the limit kept on a drop */
#define SL_ADAPTIVE_TIMEOUT_DEFAULT_NS (INT64_C(5000) * 1000000) /* aimd: slower = a drop */
#define SL_ADAPTIVE_PROBE_DEFAULT      30                        /* vegas: windows between probes */
#define SL_ADAPTIVE_LATENCY_MAX_NS     (INT64_C(3600) * SL_NS_PER_SEC) /* a sample's latency cap */

/*
 * An adaptive limit (concurrency only): the limit starts at the rule's limit and moves within
 * [min_limit, max_limit] from the samples releases report (sl_release_sample()). All zero: a
 * fixed limit. Options at 0 take their defaults.
 */
typedef struct sl_adaptive {
    sl_adaptive_algorithm_t algorithm;
    int64_t min_limit;   /* least limit, >= 1 and <= the rule's limit */
    int64_t max_limit;   /* greatest limit, >= the rule's limit, <= SL_HOLDS_MAX: the key's
                            state has room for this many holds */
    int64_t backoff_pct; /* aimd: on a drop the limit becomes limit * backoff_pct / 100,
                            rounded down; 1..99, 0 = SL_ADAPTIVE_BACKOFF_DEFAULT */
    int64_t timeout_ns;  /* aimd: a latency above this counts as a drop; 0 = 5 s */
    int64_t probe;       /* vegas: every `probe` windows (of `limit` samples each) the least
                            latency is measured afresh; 1..1000, 0 = SL_ADAPTIVE_PROBE_DEFAULT */
} sl_adaptive_t;

/* What a release reports about the work its hold stood for (sl_release_sample()). */
typedef struct sl_sample {
    int64_t latency_ns; /* how long the work took, ns; < 0: not reported */
    bool dropped;       /* the work was dropped or timed out */
} sl_sample_t;

/*
 * A rule: the parameters of one limit. Fill the public fields (or call sl_rule_init()), then
 * call sl_rule_prepare() once; afterwards the rule is read-only. Fields marked "derived" are
 * written by sl_rule_prepare() and must not be set by the caller.
 */
typedef struct sl_rule {
    sl_algorithm_t algorithm;
    int64_t limit;        /* N: units admitted per window, > 0 */
    int64_t window_ns;    /* W: window length, ns */
    int64_t burst;        /* B: token_bucket capacity (>= 1) / gcra max_burst (>= 0);
                             SL_DEFAULT = N. Other algorithms: SL_DEFAULT or 0 */
    int64_t buckets;      /* sliding_buckets sub-windows; SL_DEFAULT = SL_BUCKETS_DEFAULT.
                             Other algorithms: SL_DEFAULT or 0 */
    int64_t max_delay_ns; /* token_bucket/gcra: admit with a delay of at most this, ns; 0 = off */
    int64_t max_debt;     /* units a key may owe beyond what it can admit after a settle (its
                             debt, sl_settle()); SL_DEFAULT = the capacity, one window's worth;
                             0 = no debt: a settle past the limit is refused. A caller filling
                             the struct itself sets it, as it sets burst and buckets */

    /* derived by sl_rule_prepare(): */
    int64_t interval_ns;  /* token_bucket/gcra: emission interval T = ceil(W / N), ns */
    int64_t tolerance_ns; /* token_bucket: T * B; gcra: T * (B + 1), ns */
    int64_t bucket_ns;    /* sliding_buckets: G = W / buckets, ns */
    int64_t capacity;     /* units a fresh key admits at once: N, B or B + 1 (the reply's limit) */
    uint32_t state_size;  /* bytes of per-key state, see sl_state_size() */

    /* set by the caller, as the fields above derived ones (last, so that their offsets stay
       those of the rules made before it): */
    sl_adaptive_t adaptive; /* concurrency: a limit that adapts; all zero = fixed */
} sl_rule_t;

/* Fills *rule with the algorithm, limit and window, burst, buckets and max_debt at SL_DEFAULT,
 * max_delay 0, and prepares it. Returns what sl_rule_prepare() returns. */
SL_API int sl_rule_init(sl_rule_t *rule, sl_algorithm_t algorithm, int64_t limit,
                        int64_t window_ns);

/* Validates the public fields, applies defaults (burst, buckets, max_debt) and computes the
 * derived fields. Returns SL_OK, or the SL_E* code of the first invalid field; on error *rule is
 * left as it was. burst or max_delay_ns set (other than SL_DEFAULT / 0) on an algorithm that
 * does not use them is SL_EBURST / SL_EDELAY; buckets set on one other than sliding_buckets
 * SL_EBUCKETS; max_debt below 0 (but SL_DEFAULT) or above SL_COUNT_MAX SL_EMAXDEBT. */
SL_API int sl_rule_prepare(sl_rule_t *rule);

/* Bytes of state one key needs under a prepared rule: 8 for token_bucket and gcra, 16 for
 * fixed_window, 24 for sliding_window, 16 + 8 * (buckets + 1) for sliding_buckets, 32 + 16 * N for
 * sliding_log (room for N admissions: the most a key can need; a key that made one request
 * needs 48 bytes of it, and sluice's own table keeps each key in a buffer of the size it needs).
 * A state has no alignment requirement (it is plain bytes, copyable with memcpy). */
SL_API size_t sl_state_size(const sl_rule_t *rule);

/* True when a and b have the same numbers: algorithm, limit, window, burst, buckets, max_delay
 * and max_debt (what a prepared rule derives follows from them). A key's state then means the
 * same under both; otherwise sl_state_convert() carries its usage over (max_debt alone changes
 * what a settle may charge, not what a state means: the state is copied). False when either is
 * NULL. */
SL_API bool sl_rule_same(const sl_rule_t *a, const sl_rule_t *b);

/* ---- decisions --------------------------------------------------------------------------- */

typedef struct sl_decision {
    bool allowed;           /* true: the cost was admitted (possibly with delay_ns > 0) */
    int64_t limit;          /* the rule's capacity: N, or B (token_bucket), or B + 1 (gcra) */
    int64_t remaining;      /* units a request right now could still take, after this one */
    int64_t retry_after_ns; /* 0 when allowed; else how long until this cost is admitted if
                               nothing else arrives; -1 when it never can be (cost > capacity) */
    int64_t reset_after_ns; /* how long until the key is back to a fresh state, ns */
    int64_t delay_ns;       /* > 0 only for token_bucket/gcra with max_delay_ns: the caller
                               must wait this long before acting on the admission */
} sl_decision_t;

/*
 * Decides one request of `cost` units at `now_ns` for a key whose state is `state`
 * (sl_state_size(rule) bytes, any alignment, all zero for a new key) and updates the state
 * when the cost is admitted. cost 0 is a peek: it reports and changes nothing. A rejected
 * request never changes the state.
 *
 * Returns SL_OK with *out filled, SL_ECOST for a negative cost, SL_EINVAL for NULL arguments.
 * Never allocates, locks or reads a clock.
 */
SL_API int sl_decide(const sl_rule_t *rule, void *state, int64_t cost, int64_t now_ns,
                     sl_decision_t *out);

/*
 * Priorities: sl_decide() of a request that must leave `reserve` units of the key's limit for
 * higher priorities (the reserve above its priority, docs/algorithms.md "Priorities"). Admitted
 * only when, after charging its cost, at least `reserve` units remain (a peek's remaining >=
 * cost + reserve); it charges only its cost. Refused, nothing changes: retry_after_ns is the
 * wait until cost + reserve fit (-1 when cost + reserve exceed the capacity: never). remaining is
 * what a request of this priority could still take (the key's remaining less the reserve). A
 * delayed admission (max_delay) leaves nothing, so a request with a reserve is never delayed.
 * reserve 0 is sl_decide(). Returns SL_OK, SL_ECOST (cost or reserve < 0) or SL_EINVAL.
 */
SL_API int sl_decide_reserved(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                              int64_t now_ns, sl_decision_t *out);

/* True when `state` at `now_ns` decides exactly as a fresh (all-zero) state would, so the key
 * may be forgotten. rule and state must not be NULL. */
SL_API bool sl_state_is_fresh(const sl_rule_t *rule, const void *state, int64_t now_ns);

/*
 * Gives back `cost` units that sl_decide() admitted (with cost >= `cost`) at now_ns = `charged_ns`
 * on this state, at time `now_ns`: for a request that was refused downstream, or reserved more
 * than it used. now_ns earlier than charged_ns is treated as charged_ns. `out` is filled with
 * what a peek (cost 0) at now_ns reports afterwards. cost 0 changes nothing.
 *
 * charged_ns may also be any time before the charge, for a caller that knows only a lower bound
 * of it (a store with its own clock: when the request was sent): the refund is then still safe,
 * and exact when nothing else was admitted on the key between charged_ns and the charge; it
 * gives back less when the charge fell in a later window or bucket than charged_ns, or the
 * bucket refilled meanwhile. A charged_ns later than the charge is not safe.
 *
 * A refund never gives back more than the charge still holds in the state, so it never makes a
 * key less restrictive than if the charge had not happened (the other admissions kept):
 *
 *   Safe.  After a charge of c at t_c, other admissions (and charges past the limit) and a
 *          refund of c at t_r >= t_c (charged_ns = t_c, or earlier), the key admits at every
 *          time >= t_r at most what it would admit had the charge never happened. token_bucket
 *          and gcra also need t_r to be no earlier than the admissions in between (one clock for
 *          the key, as with any time): they give back only the part of c * T the bucket has not
 *          refilled by itself by t_r.
 *   Exact. If sl_decide(S, c, t) admitted c and wrote S', with t no earlier than the latest
 *          time S records (docs/algorithms.md), sl_refund(S', c, t, t) leaves a state that
 *          decides as S at every time >= t (and is fresh exactly when S is). It is S byte for
 *          byte for fixed_window, token_bucket and gcra when S is not fresh at t; for
 *          sliding_window when S's window is t's; for sliding_buckets when S's latest
 *          admission was at t. sliding_log gets S's entries back (the same ring positions) when
 *          none of S's entries had left the window at t, and also records t as the latest time
 *          (a clock that steps back stays clamped to it) unless S's latest time was t. A fresh
 *          S yields a state fresh at t: what recorded the old window or time cannot come back.
 *
 * Returns SL_OK, SL_ECOST (cost < 0) or SL_EINVAL (NULL arguments). O(1), except sliding_log:
 * O(log E) for E entries (admissions in the window), plus O(E) when the units given back are
 * not the newest, and sliding_buckets: O(K).
 */
SL_API int sl_refund(const sl_rule_t *rule, void *state, int64_t cost, int64_t charged_ns,
                     int64_t now_ns, sl_decision_t *out);

/*
 * Settles a reservation: `reserved` units admitted by sl_decide() at `charged_ns` turned out to
 * cost `actual` (both >= 0). actual < reserved gives back the difference as sl_refund() does;
 * actual > reserved charges the difference at now_ns even past the limit: the key goes into
 * debt and refuses every request, peeks included, until time has paid it back; equal changes
 * nothing. now_ns earlier than charged_ns is treated as charged_ns.
 *
 * The debt is bounded by rule->max_debt: a charge that would leave the key owing more is
 * refused (SL_EDEBT), the state unchanged. A key's debt is the units it has charged beyond what
 * it can admit at now_ns, in its algorithm's own terms (docs/algorithms.md): units in its window
 * (fixed_window's, sliding_log's, sliding_buckets' counted buckets) beyond N; the weighted
 * estimate beyond N (sliding_window); for token_bucket and gcra the time owed beyond the
 * bucket's tolerance, in units of T rounded up. A key that can admit its whole cost owes 0.
 *
 * `out` is what a peek at now_ns reports afterwards: in debt, allowed is false, remaining 0,
 * retry_after_ns the time until a peek is allowed again (the debt paid) and reset_after_ns the
 * time until the key is fresh. With reservations settled as they complete, the units a key
 * takes in any window exceed its limit by at most the largest single under-estimate (actual -
 * reserved) among the requests in it (docs/algorithms.md).
 *
 * Counts in debt saturate at SL_COUNT_MAX units, token_bucket/gcra's TAT at INT64_MAX ns.
 * sliding_log keeps at most N entries: a debt that meets N of them merges the oldest into the
 * next, which admits every cost >= 1 exactly when the whole log would (docs/algorithms.md).
 *
 * Returns SL_OK, SL_EDEBT (nothing charged; `out` is a peek at now_ns), SL_ECOST (reserved or
 * actual < 0) or SL_EINVAL.
 */
SL_API int sl_settle(const sl_rule_t *rule, void *state, int64_t reserved, int64_t actual,
                     int64_t charged_ns, int64_t now_ns, sl_decision_t *out);

/* ---- holds (in-flight limits) --------------------------------------------------------- */

/*
 * A concurrency rule limits how many units are in flight at once rather than how many arrive per
 * window: a key holds at most `limit` units. sl_acquire() takes units as one hold, named by an
 * id; sl_release() of that id gives them back. Every hold expires: the rule's window_ns is its
 * hold timeout (the longest a hold lives, and what an acquire that names no time gets), so a
 * holder that crashes loses its units at the expiry, never forever. sl_decide() on such a rule
 * is an acquire of the hold timeout whose hold no one can release (for callers that have no
 * release). burst, buckets and max_delay do not apply; limit is at most SL_HOLDS_MAX, and the
 * state is 48 + 16 * limit bytes (16 per hold).
 */

/* A hold sl_acquire() made (or sl_release() freed). */
typedef struct sl_hold {
    uint64_t id;      /* the hold's id, 1 .. 2^48 - 1; 0: no hold was made */
    int64_t until_ns; /* when it expires, ns since the epoch */
    int64_t expired;  /* holds of the key this call found expired and dropped (metrics) */
} sl_hold_t;

/*
 * Acquires `cost` units for the key whose state is `state` (sl_state_size(rule) bytes, all zero
 * for a new key) at now_ns, held for hold_ns (0: the rule's window_ns, the hold timeout).
 * Admitted when cost fits in what live holds leave of the limit; then, for cost > 0, the units
 * are one hold with a new id, expiring at now_ns + hold_ns (*hold filled). cost 0 is a peek: no
 * hold, hold->id 0. Refused, nothing changes and hold->id is 0: retry_after_ns is the time until
 * enough holds expire for the cost to fit, an upper bound (a release frees units sooner), or -1
 * for a cost above the limit. remaining is limit less the units held; reset_after_ns the time
 * until the last hold expires.
 *
 * Ids: a key's ids are a permutation of a counter under a secret of the key's own, taken from
 * `entropy` at its first acquire (pass random bits: the table uses its random seed): never
 * reused while the key lives, and not to be guessed from other ids (about 2^48 / limit tries).
 *
 * Returns SL_OK, SL_ECOST (cost < 0), SL_EHOLDTIME (hold_ns outside [1 ms, window_ns], 0
 * excepted), SL_ENOHOLDS (an algorithm without holds) or SL_EINVAL (NULL arguments). O(holds).
 */
SL_API int sl_acquire(const sl_rule_t *rule, void *state, int64_t cost, int64_t hold_ns,
                      int64_t now_ns, uint64_t entropy, sl_decision_t *out, sl_hold_t *hold);

/* sl_acquire() of a request that must leave `reserve` units for higher priorities, as
 * sl_decide_reserved() decides: shed, it makes no hold (hold->id 0). */
SL_API int sl_acquire_reserved(const sl_rule_t *rule, void *state, int64_t cost, int64_t reserve,
                               int64_t hold_ns, int64_t now_ns, uint64_t entropy,
                               sl_decision_t *out, sl_hold_t *hold);

/*
 * Releases hold `id` of the key at now_ns: its units are free at once. A hold that is not live
 * (never made on this key, expired, released before) is SL_EHOLD and changes nothing: a release
 * is idempotent per id and frees only the hold that id names. *out is a peek afterwards (allowed
 * true). *released (may be NULL) gets the id and the count of expired holds dropped.
 * Returns SL_OK, SL_EHOLD, SL_ENOHOLDS or SL_EINVAL. O(holds).
 */
SL_API int sl_release(const sl_rule_t *rule, void *state, uint64_t id, int64_t now_ns,
                      sl_decision_t *out, sl_hold_t *released);

/*
 * sl_release() that also reports how the hold's work went: when the hold is live and the rule's
 * limit adapts (rule->adaptive), the sample moves the key's limit within [min_limit,
 * max_limit], deterministically from the key's state, the sample and the units in flight. A
 * sample with neither a latency nor dropped, a NULL sample, a fixed limit or a release that
 * frees nothing (SL_EHOLD) leave the limit as it was: one hold, at most one sample. Returns what
 * sl_release() returns, or SL_EINVAL for a latency above SL_ADAPTIVE_LATENCY_MAX_NS.
 */
SL_API int sl_release_sample(const sl_rule_t *rule, void *state, uint64_t id, int64_t now_ns,
                             const sl_sample_t *sample, sl_decision_t *out, sl_hold_t *released);

/* The key's limit now: the adaptive limit of a rule whose limit adapts, else the capacity. */
SL_API int64_t sl_limit_now(const sl_rule_t *rule, const void *state);

/* Whether the rule's algorithm holds units (sl_acquire() and sl_release() apply to it). */
SL_API bool sl_rule_holds(const sl_rule_t *rule);

/* Units the key's live holds hold at now_ns (0 for a rule without holds or NULL arguments). */
SL_API int64_t sl_in_flight(const sl_rule_t *rule, const void *state, int64_t now_ns);

/* ---- leases ------------------------------------------------------------------------------ */

/* A lease: units of a key's quota granted to one holder, who admits requests with them locally
 * at times in [at_ns, until_ns) and gives back what it did not use (sl_lease_return()). */
typedef struct sl_lease {
    int64_t granted;        /* units granted, 0 .. the units asked for */
    int64_t at_ns;          /* the time of the grant (now_ns clamped as sl_decide() clamps it) */
    int64_t until_ns;       /* the lease's end: its units may be spent only before it, ns;
                               at_ns when nothing was granted */
    int64_t remaining;      /* units a request could still take after the grant */
    int64_t reset_after_ns; /* how long until the key is fresh after the grant, ns */
} sl_lease_t;

/*
 * Grants up to `want` units of the key's quota at now_ns, for at most lease_ns: as if `want`
 * requests of cost 1 arrived at now_ns (fewer when fewer would be admitted), recorded so that
 * however the holder spends them at times in [at_ns, until_ns), no window ever sees more than the
 * rule allows (docs/algorithms.md, "Leases"):
 *
 *   fixed_window, sliding_window   the lease ends no later than the end of the current window:
 *                                  the state cannot tell apart times in one window
 *   sliding_buckets                likewise, the end of the current bucket
 *   token_bucket, gcra             until_ns = now + lease_ns, and the bucket holds the lease
 *                                  time too: a lease of n costs n * T + lease_ns of TAT, as the
 *                                  holder may spend all n at its very end
 *   sliding_log                    refused (SL_ELEASE): a stamp at the grant would leave the
 *                                  window before a unit spent later, and no one time serves
 *
 * A grant of 0 changes nothing. Admission needs no delay (max_delay is not used). out->remaining
 * and out->reset_after_ns are a peek after the grant.
 *
 * Returns SL_OK, SL_ECOST (want < 0), SL_ELEASE (sliding_log; lease_ns outside [1,
 * SL_WINDOW_MAX_NS]; token_bucket/gcra with lease_ns > tolerance - T, where nothing could ever
 * be granted) or SL_EINVAL (NULL arguments). Never allocates, locks or reads a clock.
 */
SL_API int sl_lease(const sl_rule_t *rule, void *state, int64_t want, int64_t lease_ns,
                    int64_t now_ns, sl_lease_t *out);

/*
 * Gives back the `unused` units (0 <= unused <= lease->granted) of a lease sl_lease() granted on
 * this key, at now_ns (an earlier now_ns is taken as lease->at_ns); the holder spends none of
 * them after. Like sl_refund() of the unused units charged at lease->at_ns, and for token_bucket
 * and gcra also the lease time not yet run, until_ns - now_ns: so it is
 *
 *   Exact  at the grant's time: sl_lease_return(all granted, now = at_ns) leaves the state the
 *          grant found, as sl_refund() is exact (byte for byte where it says so);
 *   Safe   later, whatever else happened on the key: it never admits more than had the lease's
 *          spent units been requests at their latest possible time (until_ns, or now_ns when
 *          returned before it).
 *
 * A lease never returned (its holder died) keeps its units until they leave the window, or
 * refill: under-admission, never over-admission. `out` is a peek at now_ns afterwards.
 *
 * Returns SL_OK, SL_ECOST (unused outside [0, lease->granted]), SL_ELEASE (sliding_log), or
 * SL_EINVAL (NULL arguments, lease->until_ns before lease->at_ns or a lease longer than
 * SL_WINDOW_MAX_NS).
 */
SL_API int sl_lease_return(const sl_rule_t *rule, void *state, const sl_lease_t *lease,
                           int64_t unused, int64_t now_ns, sl_decision_t *out);

/*
 * Checks that `state` is one sl_decide(), sl_refund() or sl_settle() can have written under
 * `rule` (counts within [0, SL_COUNT_MAX], times within range, a sliding_log's entries sorted),
 * in a buffer of sl_state_size(rule) bytes. sl_decide() trusts its state -- it is the bytes it
 * wrote -- so check any state that comes from outside (a snapshot, a network peer) before
 * deciding on it. Returns SL_OK, SL_ESTATE or SL_EINVAL. O(state size).
 */
SL_API int sl_state_check(const sl_rule_t *rule, const void *state);

/* sl_state_check() of a state in a buffer of `len` bytes: a sliding_log state records the size
 * of its buffer (which may be smaller than sl_state_size() in sluice's own table), and is
 * refused (SL_ESTATE) when that is more than len, as when it is no valid state. */
SL_API int sl_state_check_len(const sl_rule_t *rule, const void *state, size_t len);

/*
 * Carries a key's usage from one rule to another of the same algorithm (an override or a rule
 * whose numbers changed: they change the limits, not what the key has used). `from_state` is a
 * state sl_decide(), sl_refund() or sl_settle() wrote under `from`; `to_state` (sl_state_size(to)
 * bytes, not overlapping it) gets the state `to` would hold for the usage `from_state` records,
 * or where the two layouts cannot say exactly, more usage, never less: the key then admits at
 * every time >= now_ns no more than `to` would after charging those units at their times, and
 * may be in debt (a usage above the new limit). Usage the old state no longer records (units
 * that left its window, or that its bucket had refilled) stays forgotten. docs/algorithms.md
 * gives the rule of each algorithm; in short:
 *
 *   a state both rules read alike     copied byte for byte: exact (the same window for
 *                                     fixed_window and sliding_window, the same limit and window
 *                                     for sliding_log, the same window and buckets for
 *                                     sliding_buckets, the same emission interval T for
 *                                     token_bucket and gcra, whatever their burst)
 *   fixed_window, sliding_window      each window's count goes to the new window holding the
 *                                     latest instant its units can have had
 *   sliding_buckets                   likewise bucket by bucket
 *   sliding_log                       the entries inside the new window, the oldest merged into
 *                                     the next beyond the new limit's number: exact in
 *                                     admissions when the window does not grow
 *   token_bucket, gcra                the units not yet refilled, ceil((TAT - now) / T_from), as
 *                                     if taken at now_ns: safe against the whole history when T
 *                                     does not grow
 *
 * now_ns is the time of the change (clamped as sl_decide() clamps it); token_bucket and gcra,
 * which record no time to clamp to, need it no earlier than the state's admissions. A from_state
 * fresh at now_ns yields a state fresh at now_ns (all zero bytes unless copied), except from
 * sliding_log and sliding_buckets, which carry the units they still record: a longer window, or
 * coarser buckets, may count them still.
 *
 * Returns SL_OK, SL_EALGORITHM (different algorithms: the caller decides what to do, e.g. start
 * the key fresh), SL_ESTATE (from_state fails sl_state_check(from, ...); to_state untouched) or
 * SL_EINVAL (NULL arguments, a rule never prepared). Never allocates; O(state sizes).
 */
SL_API int sl_state_convert(const sl_rule_t *from, const void *from_state, const sl_rule_t *to,
                            void *to_state, int64_t now_ns);

/*
 * Writes to `state` (sl_state_size(rule) bytes) the state of a key that took the rule's whole
 * capacity at at_ns: a fresh state after sl_decide(rule, state, rule->capacity, at_ns). It is
 * what a key whose usage is unknown is taken to have used (a closed cold start: a server that
 * lost its keys' states, a rule whose algorithm changed), so that it admits no more than a key
 * that had used its whole quota at at_ns: nothing at at_ns (but what max_delay lets through),
 * then what the algorithm frees up as time passes. Deterministic: the same rule and time give
 * the same bytes. Returns SL_OK, or SL_EINVAL (NULL arguments, a rule never prepared).
 */
SL_API int sl_state_saturate(const sl_rule_t *rule, void *state, int64_t at_ns);

/*
 * A state's packed form: the same state in as few bytes as its algorithm allows, for stores that
 * keep each key's state as a value of its own (sluice.so keeps it in a Redis string). Only
 * sliding_log packs smaller: its state holds room for N entries, its packed form only the entries
 * in use, about 3-4 bytes each from a microsecond clock (format: src/core/sliding_log.c; the
 * older form of one stamp per unit, which older builds wrote, is still read). Every other
 * algorithm's packed form is its state, byte for byte.
 *
 * sl_state_packed_max() is the largest packed form under a prepared rule, bytes (0 for NULL).
 * sl_state_pack() writes the packed form of a state sl_decide() (or a refund, a settle) wrote to
 * `out` (at least sl_state_packed_max() bytes) and returns its length; the same state always
 * packs to the same bytes. sl_state_unpack() reads `len` packed bytes into `state`
 * (sl_state_size() bytes) and checks them as sl_state_check() does: SL_OK, SL_ESTATE for bytes
 * that are not a packed state of this rule (state is then unspecified), SL_EINVAL for NULL
 * arguments. O(len).
 */
SL_API size_t sl_state_packed_max(const sl_rule_t *rule);
SL_API size_t sl_state_pack(const sl_rule_t *rule, const void *state, void *out);
SL_API int sl_state_unpack(const sl_rule_t *rule, const void *packed, size_t len, void *state);

/* ---- the per-key table ------------------------------------------------------------------- */

typedef struct sl_table sl_table_t;

/*
 * A memory cap shared by several tables (and by whatever else the caller counts against it):
 * bytes in use, and the most there may be. Tables check it before they take memory and count
 * what they take and give back; sl_budget_take() and sl_budget_give() count the caller's own.
 * Lock-free: tables growing on several threads at once can pass the cap by what each takes in
 * one step (a key, or a shard's array growing by a quarter). Thread-safe.
 */
typedef struct sl_budget sl_budget_t;

/* Creates a budget of max_bytes (> 0). Returns SL_OK and sets *out, or SL_EINVAL / SL_ENOMEM.
 * Free it with sl_budget_free() once every table created with it is freed. */
SL_API int sl_budget_create(size_t max_bytes, sl_budget_t **out);

/* Frees a budget. NULL is a no-op. */
SL_API void sl_budget_free(sl_budget_t *budget);

/* Counts bytes against the budget if they fit under its cap: true when they were counted,
 * false (nothing counted) when they would pass it. */
SL_API bool sl_budget_take(sl_budget_t *budget, size_t bytes);

/* Gives back bytes counted with sl_budget_take(). */
SL_API void sl_budget_give(sl_budget_t *budget, size_t bytes);

/* Bytes counted now, and the cap. */
SL_API size_t sl_budget_used(const sl_budget_t *budget);
SL_API size_t sl_budget_max(const sl_budget_t *budget);

typedef struct sl_table_config {
    size_t max_bytes;    /* memory cap for slots, keys and states, bytes; 0 = no cap */
    size_t key_max;      /* longest key accepted, bytes; 0 = SL_KEY_MAX_DEFAULT */
    unsigned shards;     /* lock shards, a power of two <= 65536; 0 = 64 */
    size_t initial_keys; /* capacity to allocate up front, keys; 0 = grow from small */
    uint64_t seed;       /* hash seed; 0 = random per table (defeats hash flooding) */
    sl_budget_t *budget; /* a cap shared with other tables, besides max_bytes; NULL = none */
    bool evict_idle;     /* at the cap, evict idle keys before refusing a new one (below) */
    int64_t skew_ns;     /* threads' clock reads that race, ns; 0 = each call at its own now
                            (below) */
} sl_table_config_t;

/*
 * Creates a table of per-key state for one prepared rule. The rule is copied. cfg may be NULL
 * for all defaults. Returns SL_OK and sets *out, or SL_EINVAL (a NULL argument, a shard count
 * that is not a power of two up to 65536) / SL_ENOMEM. The caller frees the table with
 * sl_table_free(). A cap smaller than an empty table is not an error: the table is made and
 * refuses every new key (see sl_table_can_hold).
 *
 * Memory cap policy: when a new key needs room beyond max_bytes (or its budget's cap), the table
 * first drops keys whose state is fresh (nothing is lost). With evict_idle it then evicts idle
 * keys, as nginx's limit_req zone does: a key is idle when no decision, settle or refund touched
 * it since the eviction hand last passed it (a clock sweep over the shard, which unmarks the keys
 * it passes), and of the idle keys the hand sees, the one with the most units left goes, so what
 * eviction forgives is the least usage it can find. An evicted key starts fresh: it may be
 * admitted up to what it had used (counted in sl_table_stats_t.evicted). If there is still no
 * room (every key the hand passed in a lap was in use), the new key is refused with SL_EFULL
 * (keys already present keep deciding normally), and the caller chooses to fail open or closed.
 * Without evict_idle a key that still holds usage is never evicted, so a full table never
 * over-admits.
 *
 * Threads' clocks: a caller on one thread may read the clock, be preempted, and decide after a
 * caller on another thread that read it later. Its answers would then be measured from a time
 * the key's state has already passed (a reset_after longer than the rule allows, by the lag).
 * With skew_ns > 0 a decision, settle, acquire or release whose now is behind the latest time
 * its key's shard has seen (a call's now, or a reclaim's or eviction's) by at most skew_ns is
 * made at that latest time instead: a time the clock has already reached, so it admits nothing
 * the limit would not. A now further behind is taken as a clock that stepped back and decided as
 * given. 0 (the default) decides every call at its own now, as a caller replaying or testing
 * with chosen times wants. A skew assumes every time given to the table (reclaim and evict
 * included) is one the clock reached. A refund or settle dates the charge it gives back by its
 * charged_ns: a charge made at the later time and dated by the caller's own earlier now may give
 * back less than it took (never more).
 */
SL_API int sl_table_create(const sl_rule_t *rule, const sl_table_config_t *cfg, sl_table_t **out);

/* Whether a table created with cfg (NULL: defaults) can hold `keys` keys of short names in one
 * shard: the cap is split evenly over the shards, and a shard needs its smallest array plus each
 * key's state when the state lives out of line (sliding_log rings over 128 bytes). A table whose
 * cap cannot hold even one key is still created, and refuses every new key with SL_EFULL. */
SL_API bool sl_table_can_hold(const sl_rule_t *rule, const sl_table_config_t *cfg, size_t keys);

/* Frees the table and everything in it. NULL is a no-op. No other call may be in progress. */
SL_API void sl_table_free(sl_table_t *table);

/* The rule the table was created with (read-only, owned by the table). */
SL_API const sl_rule_t *sl_table_rule(const sl_table_t *table);

/*
 * Decides one request for `key` (key_len bytes, any bytes, may be empty) as sl_decide() does,
 * with the key's state held in the table. A key is stored only when a cost > 0 is admitted.
 * Returns SL_OK, SL_ECOST, SL_EKEY (key_len > key_max), SL_EFULL, SL_ENOMEM or SL_EINVAL.
 */
SL_API int sl_table_decide(sl_table_t *table, const void *key, size_t key_len, int64_t cost,
                           int64_t now_ns, sl_decision_t *out);

/* One request of a batch: the caller fills key, key_len and cost; the table fills status
 * (an SL_* code as sl_table_decide() would return) and decision. */
typedef struct sl_request {
    const void *key;
    size_t key_len;
    int64_t cost;
    int status;             /* out */
    sl_decision_t decision; /* out */
} sl_request_t;

/*
 * Decides n requests at the same now_ns, in array order (two requests for one key see each
 * other, as consecutive sl_table_decide() calls would). Hashes and prefetches ahead so memory
 * latency overlaps. Returns the number of requests whose status is not SL_OK.
 */
SL_API size_t sl_table_decide_batch(sl_table_t *table, sl_request_t *reqs, size_t n,
                                    int64_t now_ns);

/*
 * sl_refund() and sl_settle() on the key's state in the table, with the same arguments and
 * results. An absent key has nothing to give back: a refund reports a fresh key. A settle that
 * charges stores the key (so it may return SL_EFULL or SL_ENOMEM, as a decide may); a refund that
 * leaves the state fresh drops the key, as reclamation would. Returns SL_OK, SL_EDEBT, SL_ECOST,
 * SL_EKEY, SL_EFULL, SL_ENOMEM or SL_EINVAL.
 */
SL_API int sl_table_refund(sl_table_t *table, const void *key, size_t key_len, int64_t cost,
                           int64_t charged_ns, int64_t now_ns, sl_decision_t *out);
SL_API int sl_table_settle(sl_table_t *table, const void *key, size_t key_len, int64_t reserved,
                           int64_t actual, int64_t charged_ns, int64_t now_ns, sl_decision_t *out);

/*
 * sl_acquire() and sl_release() on the key's state in the table, with the same arguments and
 * results; the table's random seed is the entropy. A key is stored only when a hold is made;
 * a release on an absent key is SL_EHOLD, and a release that leaves the key with no live hold
 * drops it (a later acquire starts its ids afresh, under a new secret). Returns those codes and
 * SL_EKEY, SL_EFULL, SL_ENOMEM.
 */
SL_API int sl_table_acquire(sl_table_t *table, const void *key, size_t key_len, int64_t cost,
                            int64_t hold_ns, int64_t now_ns, sl_decision_t *out, sl_hold_t *hold);
/* sl_table_decide() and sl_table_acquire() of a request that must leave `reserve` units for
 * higher priorities: sl_decide_reserved() and sl_acquire_reserved() under the key's lock. */
SL_API int sl_table_decide_reserved(sl_table_t *table, const void *key, size_t key_len,
                                    int64_t cost, int64_t reserve, int64_t now_ns,
                                    sl_decision_t *out);
SL_API int sl_table_acquire_reserved(sl_table_t *table, const void *key, size_t key_len,
                                     int64_t cost, int64_t reserve, int64_t hold_ns, int64_t now_ns,
                                     sl_decision_t *out, sl_hold_t *hold);
SL_API int sl_table_release(sl_table_t *table, const void *key, size_t key_len, uint64_t id,
                            int64_t now_ns, sl_decision_t *out, sl_hold_t *released);
/* sl_table_release() with a sample for an adaptive limit (sl_release_sample()). */
SL_API int sl_table_release_sample(sl_table_t *table, const void *key, size_t key_len, uint64_t id,
                                   int64_t now_ns, const sl_sample_t *sample, sl_decision_t *out,
                                   sl_hold_t *released);

/* One request of an all-or-nothing decision: the caller fills table, key, key_len and cost; the
 * call fills status and decision. */
typedef struct sl_multi_request {
    sl_table_t *table;      /* the table holding the key (any table; tables may differ) */
    const void *key;        /* key_len bytes */
    size_t key_len;         /* bytes */
    int64_t cost;           /* units, >= 0 */
    int status;             /* out: SL_OK, or the error the call returned, for its request */
    sl_decision_t decision; /* out */
    int64_t reserve; /* units it must leave for higher priorities (sl_decide_reserved()); 0 */
    bool acquire;    /* an acquire (sl_table_acquire()) instead of a decision: the table's rule
                        must hold units (else SL_ENOHOLDS) */
    int64_t hold_ns; /* acquire: how long the hold lives, within [1 ms, the rule's hold timeout];
                        0: the hold timeout */
    sl_hold_t hold;  /* out, acquire: the hold made (id 0: none: refused, a peek, or the whole
                        refused, which makes no hold) */
} sl_multi_request_t;

/*
 * Decides n <= SL_MULTI_MAX requests at now_ns, possibly on several tables and keys, all or
 * nothing: either every request is admitted and charged, or none is charged. Requests are decided
 * in array order, and a (table, key) pair that appears twice sees the earlier request's charge
 * (two requests of 150 on one key with limit 200 refuse the second, and charge nothing).
 *
 * Returns SL_OK with *refused = n when all were admitted (each decision as sl_table_decide()
 * would have given in that order), or with *refused = i, the first request refused: nothing was
 * charged. Request i holds its refusal as decided after the earlier requests' tentative charges
 * (on distinct keys: as it stands alone). Every other request holds its own cost decided alone
 * on its key as stored at now_ns, charging nothing: when that cost fits, a peek (allowed,
 * remaining and reset_after as the key has them, retry_after and delay 0); when it does not,
 * its own refusal (allowed false, its retry_after, or -1 for a cost over its capacity). The
 * whole can be admitted again, if nothing else arrives, after the longest retry_after among the
 * refused requests. Every status is then SL_OK.
 *
 * A request with `acquire` set is decided as sl_table_acquire() decides (its units one hold of
 * its own, which only its id releases); admitted with the whole, its hold is made and reported in
 * `hold`; when the whole is refused no hold is made (every `hold` id 0) and each acquire is
 * answered as a decision of its cost is above. So several holds are acquired all or none.
 *
 * Or returns an error with nothing charged: SL_EINVAL (NULL reqs or refused, n > SL_MULTI_MAX, a
 * NULL table or key with key_len > 0), SL_EKEY, SL_ECOST, SL_ENOHOLDS and SL_EHOLDTIME (an
 * acquire, as sl_table_acquire()), SL_ENOMEM, or SL_EFULL (a new key did
 * not fit under a table's memory cap). *refused is then the index of the request the error
 * concerns (n when none), whose status holds the code; the other requests' status and decision
 * mean nothing.
 *
 * Thread-safe with every other sl_table_* call: it holds the lock of every shard involved at
 * once, taken in one global order, so concurrent calls never deadlock.
 */
SL_API int sl_table_decide_all(sl_multi_request_t *reqs, size_t n, int64_t now_ns, size_t *refused);

/* Forgets `key` (a fresh quota from now on). Returns SL_OK whether or not it was present, or
 * SL_EKEY / SL_EINVAL. */
SL_API int sl_table_reset(sl_table_t *table, const void *key, size_t key_len);

/* Copies the key's state into `state` (sl_state_size() bytes, the room a state can need; the
 * table may hold it in fewer). Returns SL_OK, or SL_EKEY / SL_EINVAL; an absent key yields an
 * all-zero (fresh) state. Does not change the table. */
SL_API int sl_table_get(sl_table_t *table, const void *key, size_t key_len, void *state);

/* Stores `state` for `key`, replacing what was there (snapshot loading). The state is checked
 * with sl_state_check() first; a fresh state at now_ns removes the key instead. Returns SL_OK,
 * SL_ESTATE, SL_EKEY, SL_EFULL, SL_ENOMEM or SL_EINVAL. */
SL_API int sl_table_put(sl_table_t *table, const void *key, size_t key_len, const void *state,
                        int64_t now_ns);

/* sl_table_put() of a state in a buffer of `len` bytes, which may be smaller than
 * sl_state_size() for a sliding_log state (one sl_table_foreach() handed out, or
 * sl_state_unpack() wrote into a buffer of the size it needs): checked with
 * sl_state_check_len(). */
SL_API int sl_table_put_len(sl_table_t *table, const void *key, size_t key_len, const void *state,
                            size_t len, int64_t now_ns);

/*
 * Moves a key's usage into `to` from other tables of the same algorithm, for a key whose numbers
 * change (an override set or removed: the numbers change, what the key used does not). A key
 * lives in one table: afterwards `to` holds the live (not fresh at now_ns) state recording the
 * most usage among its own and those of from[0..nfrom), each converted to `to`'s rule with
 * sl_state_convert(), and no table of `from` holds the key. (Two live copies exist only when a
 * decision raced a change of the key's numbers; keeping the larger loses at most what those
 * decisions took.) Every shard involved is locked at once, in the order sl_table_decide_all()
 * takes them, so a concurrent decision on any of these tables sees the key in one table only.
 * Returns 1 when `to` took a state from `from`, 0 when not (it held the most, or no table held
 * a live state), or an error with nothing changed: SL_EKEY (key longer than `to` takes),
 * SL_EINVAL (NULL table, a table named twice or `to` among `from`, nfrom >= SL_MULTI_MAX),
 * SL_EALGORITHM (a table of another algorithm), SL_EFULL or SL_ENOMEM (no room in `to`).
 */
SL_API int sl_table_adopt(sl_table_t *to, const void *key, size_t key_len, sl_table_t *const *from,
                          size_t nfrom, int64_t now_ns);

/* Called by sl_table_foreach() once per stored key; return nonzero to stop. */
typedef int (*sl_table_visit_fn)(void *arg, const void *key, size_t key_len, const void *state,
                                 size_t state_size);

/*
 * Calls fn for every stored key, a piece of a shard at a time: a piece's keys and states (about
 * a thousand keys, or 1 MiB) are copied, then fn visits the copy. fn runs with no lock held, so
 * deciding goes on meanwhile, on every shard, however long fn takes (a snapshot writing to disk),
 * and fn may call any sl_table_* function on any table, this one included (except
 * sl_table_free() of this table). A decision waits for one piece's copy at most, whatever the
 * table's size.
 *
 * Concurrent changes: each key is seen with a state it held at one moment during the call (not
 * one moment for all keys); a key stored throughout the call is visited exactly once; a key
 * added or removed during the call may or may not be visited. A piece's copy is complete before
 * fn sees any of it, so changes fn makes may be seen in later pieces.
 *
 * key and state point into the copy (state is 8-byte aligned, state_size bytes: sl_state_size()
 * bytes, or fewer for a sliding_log state, whose buffer grows with its entries; hand it on with
 * sl_table_put_len() or sl_state_check_len()) and are valid only during that call of fn. Memory:
 * one piece's copy at a time (about 1 MiB, more only for a single key whose state is larger),
 * reused from piece to piece and freed before returning.
 *
 * Returns 0 after visiting every key, the first nonzero value fn returned (return a positive
 * value to stop, to tell it from an error), SL_ENOMEM when no memory could be had for a shard's
 * copy (the shards before it were visited), or SL_EINVAL (NULL table or fn).
 */
SL_API int sl_table_foreach(sl_table_t *table, sl_table_visit_fn fn, void *arg);

/* Drops every key whose state is fresh at now_ns. Returns the number of keys dropped. Never
 * needed for correctness: tables also reclaim lazily when a shard runs out of room. */
SL_API size_t sl_table_reclaim(sl_table_t *table, int64_t now_ns);

/* Frees about `bytes` of the table's memory (for a shared budget near its cap, so that other
 * tables have room), spread over its shards: drops each shard's fresh keys, then evicts idle
 * keys as a full table with evict_idle does (one lap of the shard's hand at most), and shrinks
 * the shard's array when its keys fit in three quarters of it. Returns the bytes freed. Works
 * whatever the table's evict_idle; each shard is locked once, for a walk over it. */
SL_API size_t sl_table_evict(sl_table_t *table, int64_t now_ns, size_t bytes);

/* Counters of a table's housekeeping, for metrics (each a sum over shards, read shard by shard). */
typedef struct sl_table_stats {
    size_t keys;        /* keys stored */
    size_t bytes;       /* what sl_table_memory() returns */
    uint64_t rebuilds;  /* shard rebuilds: growth, and tidying after removals */
    uint64_t reclaimed; /* keys dropped because their state was fresh */
    uint64_t refused;   /* inserts refused with SL_EFULL at the memory cap */
    uint64_t evicted;   /* idle keys evicted at the cap, their usage forgotten (evict_idle) */
} sl_table_stats_t;

/* Fills *out. Returns SL_OK or SL_EINVAL. */
SL_API int sl_table_stats(sl_table_t *table, sl_table_stats_t *out);

/* Keys stored now (a snapshot of a moving number under concurrency). */
SL_API size_t sl_table_count(sl_table_t *table);

/* Bytes the table holds for slots, keys and out-of-line states (what max_bytes caps). */
SL_API size_t sl_table_memory(sl_table_t *table);

/* ---- the keyed hash ---------------------------------------------------------------------- */

/*
 * The table's key hash, for callers that shard or cache by key as the table does: 64 bits from
 * any bytes under a seed, in the multiply-fold construction of wyhash (64x64 -> 128-bit products
 * folded by xor; keys up to 16 bytes read with two overlapping loads, longer ones 16 bytes per
 * round). Not cryptographic. Keys from the network want a seed their senders cannot guess:
 * without one they can pick keys that collide. Inline, so a caller pays what the table pays and
 * links nothing; the value may change between versions of sluice (do not store it). Declared
 * only where the compiler has 128-bit integers and GCC's builtins (GCC, Clang on 64-bit
 * targets), which sluice itself needs; another compiler can still use the rest of this header.
 */
#if defined(__SIZEOF_INT128__) && defined(__GNUC__)

#define SL_HASH_P0 UINT64_C(0xa0761d6478bd642f) /* the hash's odd 64-bit constants */
#define SL_HASH_P1 UINT64_C(0xe7037ed1a0b428db)
#define SL_HASH_P2 UINT64_C(0x8ebc6af09c88c6e3)

/* Folds two words into one: the xor of the halves of their 128-bit product. Seeds are derived
 * with it (sl_hash_mix(value, SL_HASH_P2) spreads a value's bits over the word). */
static inline uint64_t sl_hash_mix(uint64_t a, uint64_t b)
{
    __extension__ typedef unsigned __int128 sl_u128;
    sl_u128 r = (sl_u128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* The 8 and 4 bytes at p as a number in the machine's byte order; p need not be aligned. */
static inline uint64_t sl_hash_r64(const unsigned char *p)
{
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}

static inline uint64_t sl_hash_r32(const unsigned char *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

/* The hash of len bytes at key (NULL when len is 0) under seed. */
static inline uint64_t sl_hash64(const void *key, size_t len, uint64_t seed)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t a, b;
    seed ^= SL_HASH_P0;
    if (len <= 16) {
        if (len >= 4) {
            size_t mid = (len >> 3) << 2;
            a = (sl_hash_r32(p) << 32) | sl_hash_r32(p + mid);
            b = (sl_hash_r32(p + len - 4) << 32) | sl_hash_r32(p + len - 4 - mid);
        } else if (len > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[len >> 1] << 8) | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = len;
        while (i > 16) {
            seed = sl_hash_mix(sl_hash_r64(p) ^ SL_HASH_P1, sl_hash_r64(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = sl_hash_r64(p + i - 16);
        b = sl_hash_r64(p + i - 8);
    }
    return sl_hash_mix(SL_HASH_P1 ^ len, sl_hash_mix(a ^ SL_HASH_P1, b ^ seed) ^ SL_HASH_P2);
}
#endif /* __SIZEOF_INT128__ && __GNUC__ */

/* ---- time and durations ------------------------------------------------------------------ */

/* CLOCK_REALTIME in ns since the epoch, never less than a value it returned before in this
 * process (a stepped-back clock repeats the last value until it catches up). Thread-safe. */
SL_API int64_t sl_now_ns(void);

/*
 * Parses a duration of `len` bytes: one or more <integer><unit> groups, unit one of ns, us, ms,
 * s, m, h, d ("250ms", "10s", "1m", "1h30m", "30d"). No sign, no spaces, no bare numbers.
 * Returns SL_OK and sets *ns, or SL_EDURATION (malformed) / SL_EOVERFLOW (beyond int64 ns).
 */
SL_API int sl_duration_parse(const char *text, size_t len, int64_t *ns);

/* Converts ns to a whole number of `unit_ns` units, rounding up (fail-safe for retry_after and
 * reset_after). Negative values (the -1 "never" marker) are returned unchanged as -1. */
SL_API int64_t sl_ns_to_units_ceil(int64_t ns, int64_t unit_ns);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
