/*
 * fuzz_state_unpack.c - libFuzzer target for sl_state_unpack(), which reads state bytes from
 * outside (sluice.so reads them from Redis keys any client can write).
 *
 * Input: byte 0 picks the algorithm (low 3 bits, 1..6) and byte 1 the limit (1..64); the rest is
 * the packed bytes, in an exact-size heap copy so ASan catches any over-read (sliding_log's in
 * either form: one entry per admission, or the older one stamp per unit). Checks what must hold
 * for any input: an accepted state passes sl_state_check(); it packs within
 * sl_state_packed_max() to bytes that unpack to a state packing to the same bytes again; both
 * decide a peek alike; so does the state unpacked into a buffer of the size it says it needs
 * (core_state_unpack_need(), in an exact-size heap buffer), which packs to the same bytes; a
 * decision on it keeps the state valid.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "sluice/sluice.h"

#define LIMIT_MAX  64
#define STATE_MAX  (32 + 16 * LIMIT_MAX)
#define PACKED_MAX (1 + 10 + 20 * LIMIT_MAX + 10)

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
    size_t need = core_state_unpack_need(&rule, in, len);
    uint8_t *own = need > 0 ? malloc(need) : NULL;
    int own_rc = need > 0 ? core_state_unpack(&rule, in, len, own, need) : SL_ESTATE;
    free(in);
    if ((rc == SL_OK) != (own_rc == SL_OK))
        abort();
    if (rc == SL_ESTATE) {
        free(own);
        return 0;
    }
    if (rc != SL_OK || sl_state_check(&rule, state) != SL_OK ||
        sl_state_check_len(&rule, own, need) != SL_OK || need > sl_state_size(&rule) ||
        core_state_need(&rule, own) > need)
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
    if (sl_state_pack(&rule, own, repacked) != n || memcmp(packed, repacked, n) != 0)
        abort();
    sl_decide(&rule, own, 1, now_ns, &b); /* the room core_state_need() promised */
    sl_decide(&rule, state, 1, now_ns, &a);
    same(&a, &b);
    if (sl_state_check(&rule, state) != SL_OK || sl_state_check_len(&rule, own, need) != SL_OK)
        abort();
    free(own);
    return 0;
}
