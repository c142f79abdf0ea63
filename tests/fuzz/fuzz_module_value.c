/*
 * fuzz_module_value.c - libFuzzer target for value_parse() (src/module/value.c), which reads the
 * header of a value sluice.so finds in a Redis key: bytes any client can have written.
 *
 * Input: the value, in an exact-size heap copy so ASan catches any over-read. Checks what must
 * hold for any input: a format 4 or 5 value names a prepared rule whose header is exactly the
 * bytes before its packed state but for the format (one header per set of numbers); its state,
 * when it unpacks (a sliding_log's in the older form too), converts
 * to another rule of its algorithm into a state that passes sl_state_check(); the value written
 * again (header, packed state) parses to the same rule. Formats 1 to 3 carry their packed state
 * after 4 bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "module/value.h"
#include "sluice/sluice.h"

#define STATE_CAP (1u << 16) /* states larger than this are not unpacked (a long sliding_log) */

/* A rule of the same algorithm with other numbers, to convert to. */
static void other_rule(sl_algorithm_t alg, sl_rule_t *to)
{
    if (sl_rule_init(to, alg, 7, 3 * SL_NS_PER_SEC) != SL_OK) {
        abort();
    }
    if (alg == SL_SLIDING_BUCKETS) {
        to->buckets = 6;
    }
    if (alg == SL_GCRA || alg == SL_TOKEN_BUCKET) {
        to->burst = 2;
    }
    if (sl_rule_prepare(to) != SL_OK) {
        abort();
    }
}

static void check_rule(const value_t *v, const uint8_t *in)
{
    uint8_t header[VALUE_HEADER_MAX];
    size_t n = value_header(&v->rule, header);
    if (n != (size_t)(v->packed - in) || memcmp(header + 2, in + 2, n - 2) != 0 ||
        header[0] != in[0] || (header[1] & 0x0f) != (in[1] & 0x0f) ||
        v->rule.algorithm != v->algorithm) {
        abort();
    }
    size_t size = sl_state_size(&v->rule);
    if (size > STATE_CAP) {
        return;
    }
    uint8_t *state = malloc(size), *packed = malloc(sl_state_packed_max(&v->rule));
    sl_rule_t to;
    other_rule(v->algorithm, &to);
    uint8_t *converted = malloc(sl_state_size(&to));
    if (sl_state_unpack(&v->rule, v->packed, v->packed_len, state) == SL_OK) {
        const int64_t now_ns = INT64_C(1700000000) * SL_NS_PER_SEC;
        if (sl_state_convert(&v->rule, state, &to, converted, now_ns) != SL_OK ||
            sl_state_check(&to, converted) != SL_OK) {
            abort();
        }
        /* written again: the same header, the packed state after it */
        size_t plen = sl_state_pack(&v->rule, state, packed);
        uint8_t *again = malloc(n + plen);
        memcpy(again, header, n);
        memcpy(again + n, packed, plen);
        value_t w;
        if (value_parse(again, n + plen, &w) != VALUE_OK || !w.has_rule ||
            !sl_rule_same(&w.rule, &v->rule) || w.packed_len != plen) {
            abort();
        }
        free(again);
    }
    free(converted);
    free(packed);
    free(state);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *in = malloc(size > 0 ? size : 1);
    memcpy(in, data, size);
    value_t v;
    value_status_t st = value_parse(in, size, &v);
    if (st == VALUE_OK) {
        if (v.has_rule != value_format_numbered(v.algorithm, v.format) ||
            !value_format_read(v.algorithm, v.format) || v.packed < in ||
            v.packed + v.packed_len != in + size) {
            abort();
        }
        if (v.has_rule) {
            check_rule(&v, in);
        } else if (v.packed != in + VALUE_OLD_HEADER) {
            abort();
        }
    } else if (st != VALUE_NOT_OURS && st != VALUE_ALGORITHM && st != VALUE_FORMAT_NEW &&
               st != VALUE_CORRUPT) {
        abort();
    }
    free(in);
    return 0;
}
