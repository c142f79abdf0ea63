/*
 * value.c - the format of sluice.so's values (see value.h).
 */
#include "module/value.h"

#include <string.h>

#include "core/algorithms.h"
#include "core/varint.h"

/* The algorithm nibble of byte 1 holds every algorithm a row may have. */
_Static_assert(CORE_ALGORITHM_SLOTS <= 16, "an algorithm beyond 15 needs a new value format");

/* The flag bits of the first byte of the packed form of a CORE_CAP_VARIABLE algorithm's state
 * as formats 2 and 3 hold it (sliding_log's, src/core/sliding_log.c, the one such algorithm
 * when older builds wrote them): set only by a settle or a refund, and what made such a value
 * format 3 rather than 2. */
#define LOG_PACKED_FLAGS 0x30

#define SHORTEST true /* varints in their shortest form: one set of numbers has one header */

/* The row of an algorithm this build knows (value_parse() has checked the nibble). */
static const core_algorithm_t *row_of(sl_algorithm_t a)
{
    return core_algorithm(a);
}

/* Whether the algorithm's values have formats of their own: those of a state whose size varies
 * (CORE_CAP_VARIABLE), packed in a form of its own. */
static bool variable(sl_algorithm_t a)
{
    const core_algorithm_t *row = row_of(a);
    return row != NULL && (row->caps & CORE_CAP_VARIABLE);
}

/* A duration as the header writes it: ms << 1, or ns << 1 | 1 (ns in [0, SL_WINDOW_MAX_NS]). */
static uint64_t duration_code(int64_t ns)
{
    return ns % SL_NS_PER_MS == 0 ? (uint64_t)(ns / SL_NS_PER_MS) << 1 : (uint64_t)ns << 1 | 1;
}

/* The ns of a duration code; false when it is beyond any rule's range. */
static bool duration_ns(uint64_t code, int64_t *ns)
{
    uint64_t v = code >> 1;
    if (code & 1) {
        if (v > (uint64_t)SL_WINDOW_MAX_NS || v % SL_NS_PER_MS == 0) {
            return false; /* out of range, or not the shortest code (ms would do) */
        }
        *ns = (int64_t)v;
        return true;
    }
    if (v > (uint64_t)(SL_WINDOW_MAX_NS / SL_NS_PER_MS)) {
        return false;
    }
    *ns = (int64_t)v * SL_NS_PER_MS;
    return true;
}

size_t value_header(const sl_rule_t *rule, uint8_t out[VALUE_HEADER_MAX])
{
    uint8_t *p = out;
    *p++ = VALUE_MAGIC;
    *p++ = (uint8_t)(value_format(rule->algorithm) << 4 | ((unsigned)rule->algorithm & 0x0f));
    p = varint_put(p, (uint64_t)rule->limit);
    p = varint_put(p, duration_code(rule->window_ns));
    const core_algorithm_t *row = row_of(rule->algorithm);
    if (row->burst.taken) {
        p = varint_put(p, (uint64_t)rule->burst);
    }
    if (row->max_delay.taken) {
        p = varint_put(p, duration_code(rule->max_delay_ns));
    }
    if (row->buckets.taken) {
        p = varint_put(p, (uint64_t)rule->buckets);
    }
    return (size_t)(p - out);
}

/* The rule of a format 4 or 5 header's numbers, read from *p up to end. */
static bool numbers_read(sl_algorithm_t alg, const uint8_t **p, const uint8_t *end, sl_rule_t *r)
{
    uint64_t limit, window, burst = 0, delay = 0, buckets = 0;
    const core_algorithm_t *row = row_of(alg);
    if (!varint_get(p, end, &limit, SHORTEST) || !varint_get(p, end, &window, SHORTEST) ||
        limit > INT64_MAX) {
        return false;
    }
    if (row->burst.taken && (!varint_get(p, end, &burst, SHORTEST) || burst > INT64_MAX)) {
        return false;
    }
    if (row->max_delay.taken && !varint_get(p, end, &delay, SHORTEST)) {
        return false;
    }
    if (row->buckets.taken && (!varint_get(p, end, &buckets, SHORTEST) || buckets > INT64_MAX)) {
        return false;
    }
    *r = (sl_rule_t){.algorithm = alg,
                     .limit = (int64_t)limit,
                     .burst = row->burst.taken ? (int64_t)burst : SL_DEFAULT,
                     .buckets = row->buckets.taken ? (int64_t)buckets : SL_DEFAULT,
                     .max_debt = SL_DEFAULT}; /* not recorded: it means nothing to the state */
    return duration_ns(window, &r->window_ns) && duration_ns(delay, &r->max_delay_ns) &&
           sl_rule_prepare(r) == SL_OK;
}

value_status_t value_parse(const uint8_t *p, size_t len, value_t *out)
{
    if (len < 2 || p[0] != VALUE_MAGIC) {
        return VALUE_NOT_OURS;
    }
    unsigned format = p[1] >> 4, algorithm = p[1] & 0x0f;
    if (core_algorithm_at(algorithm) == NULL) {
        return len < VALUE_OLD_HEADER ? VALUE_NOT_OURS : VALUE_ALGORITHM;
    }
    *out = (value_t){.format = format, .algorithm = (sl_algorithm_t)algorithm};
    if (!value_format_numbered(out->algorithm, format)) {
        if (len < VALUE_OLD_HEADER) {
            return VALUE_NOT_OURS;
        }
        if (!value_format_read(out->algorithm, format)) {
            return VALUE_FORMAT_NEW;
        }
        out->hash = (uint16_t)(p[2] | p[3] << 8);
        out->packed = p + VALUE_OLD_HEADER;
        out->packed_len = len - VALUE_OLD_HEADER;
        /* a variable state: format 3 exactly when the packed form carries a settle's flag */
        if (variable(out->algorithm) &&
            (out->packed_len == 0 || ((p[4] & LOG_PACKED_FLAGS) != 0) != (format == 3))) {
            return VALUE_CORRUPT;
        }
        return VALUE_OK;
    }
    const uint8_t *at = p + 2, *end = p + len;
    uint8_t again[VALUE_HEADER_MAX];
    if (!numbers_read(out->algorithm, &at, end, &out->rule) ||
        value_header(&out->rule, again) != (size_t)(at - p) ||
        memcmp(again + 2, p + 2, (size_t)(at - p) - 2) != 0) {
        return VALUE_CORRUPT; /* numbers that are no rule (or not its only header) */
    }
    out->has_rule = true;
    out->packed = at;
    out->packed_len = (size_t)(end - at);
    return VALUE_OK;
}

uint16_t value_params_hash(const sl_rule_t *rule)
{
    int64_t fields[5] = {rule->limit, rule->window_ns, rule->burst, rule->buckets,
                         rule->max_delay_ns};
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t f = 0; f < 5; f++) {
        uint64_t v = (uint64_t)fields[f];
        for (int i = 0; i < 8; i++) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= UINT64_C(0x100000001b3);
        }
    }
    return (uint16_t)(h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48));
}

bool value_format_read(sl_algorithm_t algorithm, unsigned format)
{
    if (value_format_numbered(algorithm, format)) {
        return true;
    }
    return variable(algorithm) ? format == 2 || format == 3 : format == 1;
}

const char *value_formats_read(sl_algorithm_t algorithm)
{
    return variable(algorithm) ? "formats 2 to 5" : "formats 1 and 4";
}

unsigned value_format(sl_algorithm_t algorithm)
{
    return variable(algorithm) ? VALUE_FORMAT_LOG : VALUE_FORMAT;
}

bool value_format_numbered(sl_algorithm_t algorithm, unsigned format)
{
    return format == VALUE_FORMAT || format == value_format(algorithm);
}
