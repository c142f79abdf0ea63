/*
 * value.h - the bytes sluice.so keeps in a Redis string for one key: a header naming the
 * format, the algorithm and (from format 4 on) the numbers the state was written under, then
 * the state in its packed form (sl_state_pack()). Pure: no Redis, no allocation, no clock; the
 * module (sluice_module.c) reads and writes keys with it, and tests/fuzz/fuzz_module_value.c
 * feeds it arbitrary bytes.
 *
 *   byte 0     VALUE_MAGIC (0xF5: never the first byte of UTF-8 text or of a decimal number)
 *   byte 1     format (high nibble) | algorithm (low nibble: its sl_algorithm_t, 1..15, whose
 *              row in src/core/algorithms.c says what follows)
 *
 *   format 4 (every algorithm; what this build writes, but for one whose state's size varies:
 *   CORE_CAP_VARIABLE, sliding_log), and format 5 (what this build writes for those: sliding_log's
 *   packed form of one entry per admission; format 4 holds the older one stamp per unit, which
 *   sl_state_unpack() still reads)
 *   varint     limit
 *   varint     window: ms << 1 when a whole number of ms, else ns << 1 | 1
 *   varint     when the algorithm takes a burst (token_bucket, gcra): burst (as prepared: never
 *              the default marker)
 *   varint     when it takes max_delay (token_bucket, gcra): max_delay, as the window
 *   varint     when it takes buckets (sliding_buckets): buckets (as prepared)
 *   bytes      the packed state under that rule
 *
 *   formats 1 (an algorithm of fixed size), 2 and 3 (a variable one, sliding_log: 3 when its
 *   packed form carries a settle's flag, 2 otherwise), written by older builds and still read:
 *   bytes 2-3  a 16-bit hash of the prepared rule's limit, window, burst, buckets and max_delay
 *   bytes 4..  the packed state
 *
 * Varints are LEB128 (7 bits a byte, low first), in their shortest form: one set of numbers has
 * exactly one header, so two headers are the same numbers exactly when their bytes are equal.
 */
#ifndef SLUICE_MODULE_VALUE_H
#define SLUICE_MODULE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"

#define VALUE_MAGIC      0xF5
#define VALUE_FORMAT     4 /* the format this build writes, but for a variable state */
#define VALUE_FORMAT_LOG 5 /* the format this build writes for a variable state (sliding_log) */
#define VALUE_HEADER_MAX (2 + 5 * 10) /* magic, format | algorithm, five 64-bit varints */
#define VALUE_OLD_HEADER 4            /* formats 1 to 3: magic, format | algorithm, hash */

/* What value_parse() found. */
typedef enum value_status {
    VALUE_OK = 0,     /* a value of a known format; see value_t */
    VALUE_NOT_OURS,   /* too short, or no magic byte: not sluice state at all */
    VALUE_ALGORITHM,  /* the algorithm nibble names no algorithm */
    VALUE_FORMAT_NEW, /* a format this build does not read (a newer build's) */
    VALUE_CORRUPT,    /* format 4 or 5 with numbers that do not parse or make no valid rule */
} value_status_t;

/* A parsed value: where its state is, and the rule it was written under when it says. */
typedef struct value {
    unsigned format;          /* 1..5 */
    sl_algorithm_t algorithm; /* as the header names it */
    bool has_rule;            /* format 4 or 5: `rule` is the rule the state was written under */
    sl_rule_t rule;           /* prepared; valid when has_rule */
    uint16_t hash;            /* formats 1 to 3: value_params_hash() of the writer's rule */
    const uint8_t *packed;    /* the packed state: inside the parsed bytes */
    size_t packed_len;        /* bytes */
} value_t;

/*
 * Reads the header of len bytes at p (any bytes: a Redis string anyone may have written). On
 * VALUE_OK fills *out; the packed state is not checked here (sl_state_unpack() does that under
 * out->rule, or under the reader's rule for formats 1 to 3). VALUE_FORMAT_NEW and VALUE_CORRUPT
 * fill out->format and out->algorithm (for the error text); the other statuses leave *out
 * unspecified. Format 4 and 5 headers must be in their shortest form, the numbers a rule that
 * sl_rule_prepare() accepts and that writes the same header again (but for the format).
 */
value_status_t value_parse(const uint8_t *p, size_t len, value_t *out);

/* Writes the header of a prepared rule, in the format this build writes (value_format()), to out
 * and returns its length (at most VALUE_HEADER_MAX). The same numbers always give the same
 * bytes. */
size_t value_header(const sl_rule_t *rule, uint8_t out[VALUE_HEADER_MAX]);

/* Formats 1 to 3's hash of a prepared rule's parameters (FNV-1a over limit, window_ns, burst,
 * buckets and max_delay_ns, 8 bytes each little endian, folded to 16 bits). */
uint16_t value_params_hash(const sl_rule_t *rule);

/* The formats a build reads for an algorithm, for the error text ("formats 1 and 4"). */
const char *value_formats_read(sl_algorithm_t algorithm);

/* Whether this build reads `format` for `algorithm`. */
bool value_format_read(sl_algorithm_t algorithm, unsigned format);

/* The format this build writes for `algorithm`: VALUE_FORMAT_LOG or VALUE_FORMAT. */
unsigned value_format(sl_algorithm_t algorithm);

/* Whether `format` of `algorithm` carries the numbers its state was written under (4; 5 too for
 * a variable state). */
bool value_format_numbered(sl_algorithm_t algorithm, unsigned format);

#endif /* SLUICE_MODULE_VALUE_H */
