/*
 * bench_slog.c - what one sliding_log decision costs, through the public API only, so that the
 * same source builds against an older libsluice for a side-by-side run (docs/performance.md,
 * "sliding_log").
 *
 *   bench_slog [--reps N] [--iters N]
 *
 * Cases, interleaved within each repetition on caller-owned states of sl_state_size() bytes:
 *
 *   cost 1, limit 1000 per 1 s, one request per 2 ms of synthetic time: every request admitted,
 *     about 500 in the window (bench_core hot's sliding_log case)
 *   cost 1, limit 1000 per 1 s, one request per 0.5 ms: the key at its limit, half the requests
 *     refused (each refusal a retry_after search)
 *   cost 10^6, limit 2^20 per 1 s, one request per window: every request admitted, the window
 *     holding that one request (an admission of 10^6 units)
 *
 * Each figure is the median of --reps timed repetitions (ns per decision) after an untimed
 * warm-up; after the runs it prints each case's state size and packed size.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#define NOW0_NS (INT64_C(1700000000) * SL_NS_PER_SEC)
#define CASES   3
#define REPS    15

typedef struct slog_case {
    const char *label;
    int64_t limit, cost, step_ns, iters_div; /* iters_div: fewer decisions for costly cases */
    sl_rule_t rule;
    unsigned char *state;
    int64_t now_ns;
    uint64_t allowed, decided;
    double ns[REPS];
} slog_case_t;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double run(slog_case_t *c, long iters)
{
    sl_decision_t d;
    uint64_t ok = 0;
    int64_t now = c->now_ns;
    double t0 = mono_s();
    for (long i = 0; i < iters; i++) {
        now += c->step_ns;
        sl_decide(&c->rule, c->state, c->cost, now, &d);
        ok += d.allowed;
    }
    double el = mono_s() - t0;
    c->now_ns = now;
    c->allowed += ok;
    c->decided += (uint64_t)iters;
    return el * 1e9 / (double)iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int reps = 5;
    long iters = 2000000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atol(argv[i + 1]);
    }
    if (reps < 1 || reps > REPS || iters < 1) {
        fprintf(stderr, "usage: bench_slog [--reps 1..%d] [--iters N]\n", REPS);
        return 2;
    }
    slog_case_t cases[CASES] = {
        {.label = "cost 1, limit 1000, every request admitted",
         .limit = 1000,
         .cost = 1,
         .step_ns = 2 * SL_NS_PER_MS,
         .iters_div = 1},
        {.label = "cost 1, limit 1000, at the limit (half refused)",
         .limit = 1000,
         .cost = 1,
         .step_ns = SL_NS_PER_MS / 2,
         .iters_div = 1},
        {.label = "cost 10^6, limit 2^20, one request per window",
         .limit = SL_LOG_LIMIT_MAX,
         .cost = 1000000,
         .step_ns = SL_NS_PER_SEC,
         .iters_div = 1000},
    };
    for (int i = 0; i < CASES; i++) {
        slog_case_t *c = &cases[i];
        if (sl_rule_init(&c->rule, SL_SLIDING_LOG, c->limit, SL_NS_PER_SEC) != SL_OK)
            return 1;
        c->state = calloc(1, sl_state_size(&c->rule));
        if (c->state == NULL)
            return 1;
        c->now_ns = NOW0_NS;
        run(c, iters / c->iters_div / 4 + 1); /* warm-up */
    }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < CASES; i++)
            cases[i].ns[r] = run(&cases[i], iters / cases[i].iters_div);
    printf("sliding_log sl_decide, median of %d reps (min-max), ns/decision:\n", reps);
    for (int i = 0; i < CASES; i++) {
        slog_case_t *c = &cases[i];
        double sorted[REPS];
        memcpy(sorted, c->ns, sizeof(double) * (size_t)reps);
        qsort(sorted, (size_t)reps, sizeof(double), cmp_double);
        unsigned char *packed = malloc(sl_state_packed_max(&c->rule));
        size_t n = packed != NULL ? sl_state_pack(&c->rule, c->state, packed) : 0;
        printf("  %-50s %12.1f (%.1f-%.1f)  admitted %.1f%%; state buffer %zu B, packed %zu B\n",
               c->label, sorted[reps / 2], sorted[0], sorted[reps - 1],
               100.0 * (double)c->allowed / (double)c->decided, sl_state_size(&c->rule), n);
        free(packed);
        free(c->state);
    }
    return 0;
}
