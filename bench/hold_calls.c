/*
 * hold_calls.c - N acquire+release pairs of an in-flight rule (concurrency, limit 1000, holds of
 * the rule's 1 s timeout) through libsluice's public API, for bench/core_instructions.sh to count
 * instructions with callgrind beside core_calls.c's decisions: sl_table_acquire() and
 * sl_table_release() on one 16-byte key (mode t) or sl_acquire() and sl_release() on a
 * caller-owned state (mode d), one pair per 2 ms of synthetic time, as a request that holds a
 * slot while it runs. A separate program from core_calls.c, which builds against libsluice
 * releases without holds.
 *
 *   hold_calls N t|d     prints the pairs whose release succeeded
 */
#include <stdio.h>
#include <stdlib.h>

#include "sluice/sluice.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hold_calls N t|d\n");
        return 2;
    }
    long n = atol(argv[1]);
    int table = argv[2][0] == 't';
    sl_rule_t rule;
    sl_table_t *t = NULL;
    if (sl_rule_init(&rule, SL_CONCURRENCY, 1000, SL_NS_PER_SEC) != SL_OK ||
        sl_table_create(&rule, NULL, &t) != SL_OK)
        return 1;
    void *state = calloc(1, sl_state_size(&rule));
    sl_decision_t d;
    sl_hold_t h;
    int64_t now = INT64_C(1700000000) * SL_NS_PER_SEC;
    long released = 0;
    for (long i = 0; i < n; i++) {
        now += 2 * SL_NS_PER_MS;
        int rc;
        if (table) {
            sl_table_acquire(t, "hot-key:00000001", 16, 1, 0, now, &d, &h);
            rc = sl_table_release(t, "hot-key:00000001", 16, h.id, now, &d, NULL);
        } else {
            sl_acquire(&rule, state, 1, 0, now, (uint64_t)i | 1, &d, &h);
            rc = sl_release(&rule, state, h.id, now, &d, NULL);
        }
        released += rc == SL_OK;
    }
    printf("%ld\n", released);
    sl_table_free(t);
    free(state);
    return 0;
}
