/*
 * fuzz_state_unpack.c - libFuzzer target for sl_state_unpack(), which reads state bytes from
 * outside (sluice.so reads them from Redis keys any client can write).
 *
 * Input: byte 0 picks the algorithm (low 3 bits, 1..6) and byte 1 the limit (1..64); the rest is
 * the packed bytes, in an exact-size heap copy so ASan catches any over-read. Checks what must
 * hold for any input: an accepted state passes sl_state_check(); it packs within
 * sl_state_packed_max() to bytes that unpack to a state packing to the same bytes again; both
 * decide a peek alike; a decision on it keeps the state valid.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define LIMIT_MAX  64
#define STATE_MAX  (8 + 8 * LIMIT_MAX)
#define PACKED_MAX (1 + 10 + 10 * LIMIT_MAX)

static void same(const sl_decision_t *a, const sl_decision_t *b)
{
    if (a->allowed != b->allowed || a->remaining != b->remaining ||
        a->retry_after_ns != b->retry_after_ns || a->reset_after_ns != b->reset_after_ns)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    sl_algorithm_t alg = (sl_algorithm_t)(1 + (data[0] & 7) % 6);
    sl_rule_t rule;
    if (sl_rule_init(&rule, alg, 1 + data[1] % LIMIT_MAX, SL_NS_PER_SEC) != SL_OK)
        abort();
    size_t len = size - 2;
    uint8_t *in = malloc(len > 0 ? len : 1);
    memcpy(in, data + 2, len);
    uint8_t state[STATE_MAX], again[STATE_MAX], packed[PACKED_MAX], repacked[PACKED_MAX];
    if (sl_state_size(&rule) > sizeof(state) || sl_state_packed_max(&rule) > sizeof(packed))
        abort();
    int rc = sl_state_unpack(&rule, in, len, state);
    free(in);
    if (rc == SL_ESTATE)
        return 0;
    if (rc != SL_OK || sl_state_check(&rule, state) != SL_OK)
        abort();
    size_t n = sl_state_pack(&rule, state, packed);
    if (n > sl_state_packed_max(&rule) || sl_state_unpack(&rule, packed, n, again) != SL_OK)
        abort();
    if (sl_state_pack(&rule, again, repacked) != n || memcmp(packed, repacked, n) != 0)
        abort();
    const int64_t now_ns = INT64_C(1700000000) * SL_NS_PER_SEC;
    sl_decision_t a, b;
    sl_decide(&rule, state, 0, now_ns, &a);
    sl_decide(&rule, again, 0, now_ns, &b);
    same(&a, &b);
    sl_decide(&rule, state, 1, now_ns, &a);
    if (sl_state_check(&rule, state) != SL_OK)
        abort();
    return 0;
}
