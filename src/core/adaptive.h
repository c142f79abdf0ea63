/*
 * adaptive.h - adaptive limits for the algorithms that hold units (concurrency): the table of
 * adaptive algorithms (one row each: name, summary, the options it takes, its update), and the
 * pure functions concurrency.c calls over the 16 bytes of a key's state that hold the limit.
 * No clock, no randomness: the next limit is a function of the bytes, the rule, the sample and
 * the units in flight, so every store that runs this code (and the Lua scripts that follow it
 * in integers) answers the same. docs/algorithms.md ("Adaptive limits") has the semantics.
 *
 * Samples are taken in windows, as TCP takes one decision per round trip: a window is as many
 * samples as the limit was when it opened (one round of the limit's worth of work), and the
 * algorithm moves the limit once per window, from the window's least latency, whether any of
 * its samples was dropped, and the units in flight at its last sample. (Moving on every sample
 * moves the limit by the samples of a whole round trip before the first of them can show the
 * effect: in the simulator, from 1 to 3 times the knee.)
 *
 * The bytes (little-endian words as the machine has them, all zero for a new key):
 *
 *   0  limit      uint32: the limit now; 0 = never moved: the rule's limit
 *   4  round      uint32: bits 0-15 the samples in the window, bits 16-29 the windows since
 *                 vegas last probed, bit 30 set when a sample of the window found at least
 *                 half the limit in flight (busy), bit 31 when one was dropped
 *   8  noload_us  uint32: vegas: the least latency seen since it last probed, us; 0 = none
 *  12  low_us     uint32: the window's least latency, us; 0 = none yet
 */
#ifndef SLUICE_CORE_ADAPTIVE_H
#define SLUICE_CORE_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/sluice.h"

#define ADAPTIVE_BYTES 16

/* An adaptive algorithm's options (the fields of sl_adaptive_t past the bounds it reads). */
enum adaptive_opt {
    ADAPTIVE_OPT_BACKOFF = 1u << 0, /* backoff_pct */
    ADAPTIVE_OPT_TIMEOUT = 1u << 1, /* timeout_ns */
    ADAPTIVE_OPT_PROBE = 1u << 2,   /* probe */
};

typedef struct adaptive_vars {
    uint32_t limit;
    uint32_t round;
    uint32_t noload_us;
    uint32_t low_us;
} adaptive_vars_t;

#define ADAPTIVE_ROUND_SAMPLES 0xffffu     /* round: samples in the window */
#define ADAPTIVE_ROUND_PROBES  0x3fff0000u /* round: windows since vegas probed, << 16 */
#define ADAPTIVE_ROUND_BUSY    0x40000000u /* round: a sample found half the limit in flight */
#define ADAPTIVE_ROUND_DROPPED 0x80000000u /* round: a sample of the window was dropped */

/* One row: one adaptive algorithm. update(adaptive, vars, limit, busy, latency_us, dropped),
 * at the end of a window, returns the next limit (before the clamp to [min_limit, max_limit]):
 * latency_us the window's least latency (< 0: its samples had none), dropped whether one of
 * them was dropped, busy whether one found at least half the limit in flight (the Java
 * library's test against growing a limit no one uses). */
typedef struct adaptive_algorithm {
    const char *name;    /* "aimd": rule files, commands, errors; NULL: no algorithm */
    const char *summary; /* one line for help */
    uint32_t opts;       /* ADAPTIVE_OPT_*: the options it reads (others must be 0) */
    int64_t (*update)(const sl_adaptive_t *a, adaptive_vars_t *v, int64_t limit, bool busy,
                      int64_t latency_us, bool dropped);
} adaptive_algorithm_t;

#define ADAPTIVE_SLOTS 3 /* sl_adaptive_algorithm_t values 0..2; 0 has no row */
extern const adaptive_algorithm_t adaptive_algorithms[ADAPTIVE_SLOTS];

/* The row of a value, or NULL (SL_ADAPTIVE_NONE, or a value no algorithm has). */
const adaptive_algorithm_t *adaptive_row(uint64_t value);

/* Parses an adaptive algorithm's name (len bytes): SL_OK and *out, or SL_EADAPTIVE. */
int adaptive_parse(const char *name, size_t len, sl_adaptive_algorithm_t *out);

/* Checks rule->adaptive against the rule (limit, holds) and fills the defaults of the options
 * its algorithm reads: SL_OK or SL_EADAPTIVE. A rule with no adaptive algorithm needs all zero. */
int adaptive_prepare(sl_rule_t *rule, bool holds);

/* The units of state a key's holds may take: max_limit when the limit adapts, else limit. */
int64_t adaptive_slots(const sl_rule_t *rule);

/* The key's limit now, from its adaptive bytes (the rule's limit when fixed or never moved). */
int64_t adaptive_limit(const sl_rule_t *rule, const unsigned char bytes[ADAPTIVE_BYTES]);

/* Moves the limit by one sample; in_flight the units live holds held with the released one. */
void adaptive_update(const sl_rule_t *rule, unsigned char bytes[ADAPTIVE_BYTES], int64_t in_flight,
                     const sl_sample_t *sample);

/* Whether the bytes are a state of the rule's adaptive limit (all zero for a fixed one). */
bool adaptive_valid(const sl_rule_t *rule, const unsigned char bytes[ADAPTIVE_BYTES]);

/* The bytes carried to rule `to` (its limit clamped into its bounds; zero when fixed). */
void adaptive_convert(const sl_rule_t *to, unsigned char bytes[ADAPTIVE_BYTES]);

/* Whether two rules' adaptive limits read the same bytes the same way. */
bool adaptive_same(const sl_rule_t *a, const sl_rule_t *b);

#endif /* SLUICE_CORE_ADAPTIVE_H */
