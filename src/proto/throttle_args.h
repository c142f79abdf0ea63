/*
 * throttle_args.h - the arguments, errors and replies of the inline-rule commands, shared by
 * sluiced (src/server/resp_*.c) and the Redis module (src/module/), so both answer the
 * same request with the same bytes:
 *
 *   SL.THROTTLE key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] [COST n]
 *               [CLOSED_FROM unix_ms]
 *   SL.PEEK     key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]   (module)
 *               [CLOSED_FROM unix_ms]
 *   SL.SETTLE   key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *               [MAX_DEBT n] RESERVED r ACTUAL a [AT unix_ms] [CLOSED_FROM unix_ms]
 *   SL.LEASE    key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]   (module)
 *               WANT n FOR ms [CLOSED_FROM unix_ms]
 *   SL.RETURN   key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]   (module)
 *               GRANTED n UNUSED u AT unix_us UNTIL unix_us [CLOSED_FROM unix_ms]
 *   SL.ACQUIRE  key algorithm limit window_ms [COST n] [TIMEOUT ms]                  (module)
 *   (SL.THROTTLE, SL.PEEK and SL.ACQUIRE also take [RESERVE n]: the units a request of a lower
 *   priority must leave, sl_decide_reserved())
 *   SL.RELEASE  key algorithm limit window_ms ID id [LATENCY_US us] [DROPPED 0|1]    (module)
 *   CL.THROTTLE key max_burst count period_s [quantity]                 (redis-cell's command)
 *
 * Pure: no sockets, no Redis, no allocation, no global state. Arguments come in as (ptr, len)
 * pairs, argv[0] being the command name; the result is a prepared rule and a cost, or a
 * Redis-style error text ("ERR ...", NUL-terminated) for the caller to send as it is.
 *
 * window_ms and MAX_DELAY's value are durations: a bare integer is milliseconds (1000), or
 * digits with a unit as rule files write them (250ms, 1s, 1m30s; sl_duration_parse()), of whole
 * milliseconds. CL.THROTTLE's period stays redis-cell's: an integer of seconds.
 *
 * A concurrency rule's adaptive limit is ADAPTIVE aimd|vegas MIN_LIMIT n MAX_LIMIT n, and its
 * options BACKOFF pct, LATENCY_TIMEOUT ms, PROBE n (sl_adaptive_t); SL.ACQUIRE and SL.RELEASE
 * pass them as the rule's numbers, and an SL.RELEASE reports its work with LATENCY_US and
 * DROPPED. Every command naming a rule takes MAX_DEBT n (units a key may owe past its limit after a
 * settle, sl_rule_t.max_debt; default the rule's capacity; 0 = no debt), which only SL.SETTLE
 * uses. Options repeat as sluiced always allowed (the last one wins) and their names are
 * case-insensitive. Error texts (they are part of the protocol: clients match on them):
 *
 *   ERR wrong number of arguments for 'sl.throttle' command      (argv[0] in lower case)
 *   ERR unknown algorithm 'x' (fixed_window, sliding_log, ...)
 *   ERR limit is not an integer or out of range                  (also burst, buckets, ...)
 *   ERR window_ms '1x' is not a duration: integer milliseconds (1000) or digits with a unit
 *       (250ms, 1s, 1m30s; units ns, us, ms, s, m, h, d)         (also max_delay)
 *   ERR window_ms '1500us' is not a whole number of milliseconds (also max_delay)
 *   ERR window_ms is out of range (a duration beyond int64 ns; also max_delay)
 *   ERR burst must be >= 0   (also buckets, max_delay, max_debt, cost, reserved, actual, at,
 *                            closed_from)
 *   ERR max_delay is out of range (also closed_from)   ERR syntax error   ERR limit must be > 0
 *   ERR window_ms must be > 0            ERR invalid rule: <sl_strerror() of the rule>
 *   ERR SL.PEEK takes no COST (it reports without consuming)
 *   ERR SL.SETTLE takes no COST (RESERVED and ACTUAL say what to settle)
 *   ERR SL.SETTLE needs RESERVED and ACTUAL
 *   ERR SL.LEASE takes no COST (WANT says how many units)   (SL.RETURN: UNUSED says what)
 *   ERR SL.LEASE needs WANT and FOR     ERR SL.RETURN needs GRANTED, UNUSED, AT and UNTIL
 *   ERR for must be > 0     ERR unused must be <= granted     ERR until must be >= at
 *   ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]
 *   ERR Couldn't parse as integer: x     ERR max_burst must be >= 0
 *   ERR count per period must be > 0    ERR quantity must be >= 0    ERR period must be > 0
 *   ERR cost 7 exceeds what the inline rule gcra 5 1000 can ever admit (6 per window)
 *
 * An argument quoted in an error is shown as at most 64 bytes, non-printable bytes and quotes
 * as '?', followed by "..." when longer.
 */
#ifndef SLUICE_PROTO_THROTTLE_ARGS_H
#define SLUICE_PROTO_THROTTLE_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/arg.h"
#include "sluice/sluice.h"

#define THROTTLE_ERR_MAX 256 /* every error text fits in this, NUL included */

/* One argument: len bytes at ptr (not NUL-terminated). The type of resp_arg_t too (arg.h). */
typedef proto_arg_t throttle_arg_t;

typedef enum throttle_cmd {
    THROTTLE_SL,         /* SL.THROTTLE: cost from COST, default 1 */
    THROTTLE_SL_PEEK,    /* SL.PEEK: SL.THROTTLE's rule arguments, no COST, cost 0 */
    THROTTLE_CL,         /* CL.THROTTLE: gcra, cost from quantity, default 1 */
    THROTTLE_SL_SETTLE,  /* SL.SETTLE: SL.THROTTLE's rule arguments, RESERVED and ACTUAL, [AT] */
    THROTTLE_SL_LEASE,   /* SL.LEASE: SL.THROTTLE's rule arguments, WANT and FOR */
    THROTTLE_SL_RETURN,  /* SL.RETURN: SL.THROTTLE's rule arguments, GRANTED, UNUSED, AT, UNTIL */
    THROTTLE_SL_ACQUIRE, /* SL.ACQUIRE: SL.THROTTLE's rule arguments, COST, [TIMEOUT ms] */
    THROTTLE_SL_RELEASE, /* SL.RELEASE: SL.THROTTLE's rule arguments, ID id */
} throttle_cmd_t;

/* A parsed request. */
typedef struct throttle_req {
    sl_rule_t params;    /* the rule as given: burst and buckets may be SL_DEFAULT; not prepared */
    sl_rule_t rule;      /* params after sl_rule_prepare() */
    int64_t cost;        /* units, >= 0; 0 = peek (SL.PEEK, SL.SETTLE) */
    int64_t reserved;    /* SL.SETTLE: units the reservation was admitted with, >= 0; else 0 */
    int64_t actual;      /* SL.SETTLE: units it turned out to cost, >= 0; else 0 */
    int64_t at_ms;       /* SL.SETTLE: when it was admitted, ms since the Unix epoch; -1 = now */
    int64_t want;        /* SL.LEASE: units asked for, >= 0; else 0 */
    int64_t lease_ms;    /* SL.LEASE: the lease's time, ms, > 0; else 0 */
    int64_t granted;     /* SL.RETURN: units the lease was granted, >= 0; else 0 */
    int64_t unused;      /* SL.RETURN: units given back, 0 <= unused <= granted; else 0 */
    int64_t lease_at_us; /* SL.RETURN: when the lease was granted, us since the Unix epoch */
    int64_t until_us;    /* SL.RETURN: the lease's end, us since the Unix epoch, >= lease_at_us */
    int64_t closed_from_ms; /* CLOSED_FROM: a closed start, ms since the Unix epoch; -1 = none */
    int64_t hold_ms;        /* SL.ACQUIRE: TIMEOUT, the hold's time, ms; 0 = the rule's window */
    int64_t hold_id;        /* SL.RELEASE: ID, the hold's id, >= 0 */
    int64_t reserve;        /* RESERVE: units the request must leave for higher priorities
                               (sl_decide_reserved()); SL.THROTTLE, SL.PEEK, SL.ACQUIRE; 0 none */
    int64_t latency_us;     /* SL.RELEASE: LATENCY_US, the hold's work's latency, us; -1 = none */
    int64_t dropped;        /* SL.RELEASE: DROPPED 1 = the work was dropped; 0 or -1 = not */
} throttle_req_t;

/* The sample an SL.RELEASE reports (LATENCY_US, DROPPED): true and *out when it has one. */
bool throttle_release_sample(const throttle_req_t *req, sl_sample_t *out);

/*
 * Parses argv[0..argc) of command `cmd` (argv[1], the key, is not looked at). Returns 0 with
 * *out filled and the rule prepared, or -1 with the error text in err. On error *out is
 * unspecified. SL.SETTLE's RESERVED, ACTUAL and AT go anywhere among the options, like them.
 */
int throttle_parse(throttle_cmd_t cmd, const throttle_arg_t *argv, size_t argc, throttle_req_t *out,
                   char err[THROTTLE_ERR_MAX]);

/*
 * The options of a settle in argv[first..argc) (RESERVED r ACTUAL a [AT unix_ms], in any order,
 * names case-insensitive, the last of a repeated one wins), for a command whose rule comes from
 * elsewhere (a named rule): SL.SETTLE's own errors, from the same code. Sets out->reserved,
 * out->actual and out->at_ms; returns 0, or -1 with the error text in err ("ERR syntax error"
 * for anything else among them).
 */
int throttle_parse_settle(const throttle_arg_t *argv, size_t argc, size_t first,
                          throttle_req_t *out, char err[THROTTLE_ERR_MAX]);

/* SL.SETTLE's charge time: when it was admitted (throttle_req_t.at_ms), as the core's
 * charged_ns: -1 (no AT) is now_ns; AT names a millisecond, and its first ns is a time no later
 * than a reservation admitted within it (a lower bound, which sl_refund() takes safely); an AT
 * in the future is the current millisecond's. now_ns >= 0. */
int64_t throttle_settle_charged_ns(const throttle_req_t *req, int64_t now_ns);

/*
 * CLOSED_FROM (sluice.so's SL.THROTTLE, SL.PEEK and SL.SETTLE): a closed start from that
 * millisecond. A key that does not exist is taken, for one window of the request's rule from
 * then, as having taken the rule's whole capacity then (sl_state_saturate), its usage being
 * unknown: true and *at_ns (that ms's first ns, no later than SL_NOW_MAX_NS) when the request
 * names one and now_ns is before its window's end; false otherwise (a key that does not exist is
 * fresh). Whether the key exists is the caller's to say.
 */
bool throttle_closed_start(const throttle_req_t *req, int64_t now_ns, int64_t *at_ns);

/* SL.RETURN's lease, from GRANTED, AT and UNTIL (microseconds, as SL.LEASE replied them; the
 * module's clock is whole microseconds, so they are the lease's own times), AT no later than
 * now_ns. now_ns >= 0. */
sl_lease_t throttle_return_lease(const throttle_req_t *req, int64_t now_ns);

/* The error for sl_lease() or sl_lease_return() refusing with SL_ELEASE under the request's rule
 * (sliding_log, or a FOR the rule cannot lease for), to err. */
void throttle_lease_error(const throttle_req_t *req, char err[THROTTLE_ERR_MAX]);

/* What a settle refused by its rule's max_debt (sl_settle()'s SL_EDEBT) answers, from sluiced,
 * sluice.so and the Lua scripts alike (the scripts say "ERR sluice <algorithm>: " before it):
 * the request stores find a refusal by this text in a reply. */
#define THROTTLE_DEBT_REFUSED "settle refused: the key would owe more than max_debt"

/* The error of a settle refused by the rule's max_debt, to err:
 * "ERR settle refused: the key would owe more than max_debt (6 units past its limit); nothing
 * was charged". */
void throttle_debt_error(const sl_rule_t *rule, char err[THROTTLE_ERR_MAX]);

/* SL.LEASE's reply: [granted, at_us, until_us, remaining, reset_after_ms]: at and until in us,
 * rounded down (a holder stops no later than the lease ends), reset_after rounded up to the ms. */
void throttle_reply_lease(const sl_lease_t *lease, int64_t out[5]);

/* What sluiced answers a CLOSED_FROM: its rules have a cold_start of their own. */
#define THROTTLE_ERR_CLOSED_FROM                                                                   \
    "ERR CLOSED_FROM is sluice.so's (sluiced applies its rules' cold_start itself)"

/* What a release of a hold the key does not hold answers (sluiced, sluice.so and the Lua
 * scripts alike; the request stores find it by this text in a reply). */
#define THROTTLE_NO_HOLD                                                                           \
    "no such hold: the key holds no live hold of that id (expired, released before, or never "     \
    "made); nothing changed"
/* What an acquire on a rule whose algorithm holds nothing answers. */
#define THROTTLE_ERR_NO_HOLDS "ERR SL.ACQUIRE and SL.RELEASE need an algorithm that holds units"
/* The error of an acquire's TIMEOUT outside [1 ms, the rule's window] (sl_acquire()'s
 * SL_EHOLDTIME), to err: "ERR timeout must be within 1..2000 ms (the rule's hold timeout)". */
void throttle_hold_time_error(const sl_rule_t *rule, char err[THROTTLE_ERR_MAX]);

/* True when the argument is `word`, ASCII case-insensitively. */
bool throttle_arg_is(const throttle_arg_t *a, const char *word);

/* A strict decimal integer: optional '-', digits only, no spaces or '+', within int64. Returns
 * true and sets *out, or false. */
bool throttle_arg_i64(const throttle_arg_t *a, int64_t *out);

#define THROTTLE_LABEL_MAX 160 /* an inline rule's label, bytes, NUL included */

/* An inline rule's parameters as SL.THROTTLE's arguments give them, from the prepared rule:
 * burst and buckets at their algorithm's defaults (or 0 where it takes none) and max_debt at the
 * capacity read SL_DEFAULT, so two spellings of one rule give one answer. */
sl_rule_t throttle_rule_given(const sl_rule_t *rule);

/* How errors name an inline rule (sluiced's and sluice.so's alike): as the command writes it,
 * "the inline rule gcra 5 1000 BURST 3", the options not at their defaults after the window (ms),
 * from the prepared rule. Never its internal name ("inline:gcra:5:1000:-1:-1"). */
void throttle_rule_label(const sl_rule_t *rule, char label[THROTTLE_LABEL_MAX]);

/*
 * SL.THROTTLE answers a cost that the rule can never admit (a decision rejected with
 * retry_after -1) with an error rather than a reply. Returns true and writes that error to err
 * when `d` is such a decision; false otherwise. CL.THROTTLE replies instead (redis-cell does).
 * A cost past an adaptive limit but within its max_limit is no such cost (the limit may grow):
 * the refusal is replied, its retry_after -1.
 */
bool throttle_never_error(const throttle_req_t *req, const sl_decision_t *d,
                          char err[THROTTLE_ERR_MAX]);

/* SL.THROTTLE's and SL.PEEK's reply: [allowed 1|0, limit, remaining, retry_after_ms,
 * reset_after_ms], durations rounded up; a delayed admission reports its delay as retry. */
void throttle_reply_sl(const sl_decision_t *d, int64_t out[5]);

/* CL.THROTTLE's reply, redis-cell's: [limited 0|1, limit, remaining, retry_after_s (-1 when
 * allowed), reset_after_s], seconds rounded as throttle_cell_seconds(). */
void throttle_reply_cl(const sl_decision_t *d, int64_t out[5]);

/* redis-cell's rounding of a duration to seconds: whole seconds, plus one when the rest holds
 * at least a whole millisecond. Negative (the -1 "never" marker) -> -1. */
int64_t throttle_cell_seconds(int64_t ns);

#endif /* SLUICE_PROTO_THROTTLE_ARGS_H */
