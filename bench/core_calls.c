/*
 * core_calls.c - N decisions of one algorithm through libsluice's public API, for
 * bench/core_instructions.sh to count instructions with callgrind: sl_table_decide() on one
 * 16-byte key (mode t) or sl_decide() on a caller-owned state (mode d), limit 1000 per second,
 * one decision of cost 1 per 2 ms of synthetic time (every one admitted, the state written), as
 * bench_core's hot cases. Public API only, so that it builds against an older libsluice too.
 *
 *   core_calls ALGORITHM N t|d     prints the admissions
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

int main(int argc, char **argv)
{
    sl_algorithm_t alg;
    if (argc != 4 || sl_algorithm_parse(argv[1], strlen(argv[1]), &alg) != SL_OK) {
        fprintf(stderr, "usage: core_calls ALGORITHM N t|d\n");
        return 2;
    }
    long n = atol(argv[2]);
    int table = argv[3][0] == 't';
    sl_rule_t rule;
    sl_table_t *t = NULL;
    if (sl_rule_init(&rule, alg, 1000, SL_NS_PER_SEC) != SL_OK ||
        sl_table_create(&rule, NULL, &t) != SL_OK)
        return 1;
    void *state = calloc(1, sl_state_size(&rule));
    sl_decision_t d;
    int64_t now = INT64_C(1700000000) * SL_NS_PER_SEC;
    long admitted = 0;
    for (long i = 0; i < n; i++) {
        now += 2 * SL_NS_PER_MS;
        if (table)
            sl_table_decide(t, "hot-key:00000001", 16, 1, now, &d);
        else
            sl_decide(&rule, state, 1, now, &d);
        admitted += d.allowed;
    }
    printf("%ld\n", admitted);
    sl_table_free(t);
    free(state);
    return 0;
}
