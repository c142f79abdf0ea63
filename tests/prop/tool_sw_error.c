/*
 * tool_sw_error.c - measures how far sliding_window (the weighted two-window estimate) is from
 * sliding_log (exact) on the same random traffic. A tool, not a test: it prints figures.
 *
 * For each parameter set (N, W, offered load) it generates random arrival sequences, feeds the
 * same sequence to a sliding_window key and to a sliding_log key with the same N and W, and
 * reports:
 *   - the worst over-admission of sliding_window: the most units it admitted in any window
 *     (t - W, t] minus N (sliding_log never exceeds N; tests/prop/prop_sliding_window.c asserts
 *     sliding_window never exceeds 2N - 1);
 *   - the share of windows (ending at an admission) that held more than N;
 *   - the mean difference in admitted units per sequence, sliding_window - sliding_log, and
 *     relative to sliding_log.
 *
 * Usage: tool_sw_error [seed [N [window_ms [sequences]]]]  (SLUICE_SEED also sets the seed)
 * With no N given it runs a grid of N x load.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/gen.h"

#define STEPS 2000

typedef struct figures {
    int64_t worst_units; /* most units in one window (t - W, t] */
    long windows;        /* windows looked at (one per distinct admission time) */
    long over_n;         /* of those, holding more than N */
    int64_t admitted;    /* units admitted */
} figures_t;

static void measure(const prop_admission_t *adm, int n, int64_t w, int64_t limit, figures_t *f)
{
    worst_t x = worst_window(adm, n, w, limit);
    for (int i = 0; i < n; i++)
        f->admitted += adm[i].cost;
    f->windows += x.windows;
    f->over_n += x.over_n;
    if (x.units > f->worst_units)
        f->worst_units = x.units;
}

/* Runs one arrival sequence through a key of `rule`; returns the number of admissions. */
static int run_key(const sl_rule_t *rule, const int64_t *times, const int64_t *costs, int n,
                   prop_admission_t *adm)
{
    uint64_t *state = calloc(1, sl_state_size(rule) + 8);
    int nadm = 0;
    if (state == NULL) {
        perror("calloc");
        exit(2);
    }
    for (int i = 0; i < n; i++) {
        sl_decision_t d;
        if (sl_decide(rule, state, costs[i], times[i], &d) != SL_OK) {
            fprintf(stderr, "sl_decide failed\n");
            exit(2);
        }
        if (d.allowed && costs[i] > 0) {
            adm[nadm].t = times[i];
            adm[nadm].cost = costs[i];
            nadm++;
        }
    }
    free(state);
    return nadm;
}

/*
 * Arrivals offered at `load` times the rule's rate N / W on average: uniform gaps with the right
 * mean, plus now and then a burst at one instant; costs mostly 1.
 */
static void gen_traffic(prng_t *r, int64_t limit, int64_t w, int load_pct, int64_t *times,
                        int64_t *costs, int n)
{
    int64_t mean_gap = w * 100 / (limit * load_pct);
    int64_t now = PROP_START + prng_range(r, 0, w);
    for (int i = 0; i < n; i++) {
        if (!prng_chance(r, 15)) {
            now += prng_range(r, 0, 2 * mean_gap);
        }
        times[i] = now;
        costs[i] = prng_chance(r, 85) ? 1 : prng_range(r, 1, limit < 4 ? limit : 4);
    }
}

static void run_params(uint64_t seed, int64_t limit, int64_t w, int load_pct, long sequences)
{
    sl_rule_t sw, log;
    if (sl_rule_init(&sw, SL_SLIDING_WINDOW, limit, w) != SL_OK ||
        sl_rule_init(&log, SL_SLIDING_LOG, limit, w) != SL_OK) {
        fprintf(stderr, "invalid parameters N=%" PRId64 " W=%" PRId64 "\n", limit, w);
        exit(2);
    }
    static int64_t times[STEPS], costs[STEPS];
    static prop_admission_t adm[STEPS];
    figures_t fsw = {0, 0, 0, 0}, flog = {0, 0, 0, 0};
    int64_t worst_sw = 0, worst_log = 0;
    for (long s = 0; s < sequences; s++) {
        prng_t r = prop_case_prng(seed, (int)(limit * 1000 + load_pct), s);
        gen_traffic(&r, limit, w, load_pct, times, costs, STEPS);
        figures_t a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
        measure(adm, run_key(&sw, times, costs, STEPS, adm), w, limit, &a);
        measure(adm, run_key(&log, times, costs, STEPS, adm), w, limit, &b);
        fsw.windows += a.windows;
        fsw.over_n += a.over_n;
        fsw.admitted += a.admitted;
        flog.admitted += b.admitted;
        worst_sw = a.worst_units > worst_sw ? a.worst_units : worst_sw;
        worst_log = b.worst_units > worst_log ? b.worst_units : worst_log;
    }
    double mean_diff = (double)(fsw.admitted - flog.admitted) / (double)sequences;
    double rel = flog.admitted
                     ? 100.0 * (double)(fsw.admitted - flog.admitted) / (double)flog.admitted
                     : 0.0;
    printf("N=%-4" PRId64 " W=%-6" PRId64 "ms load=%4d%%  worst window: sw %4" PRId64
           " (excess %+4" PRId64 ", bound 2N-1=%" PRId64 ") log %4" PRId64
           "  windows>N: %6.3f%%  admitted/seq: sw-log %+8.2f (%+6.2f%%)\n",
           limit, w / SL_NS_PER_MS, load_pct, worst_sw, worst_sw - limit, 2 * limit - 1, worst_log,
           fsw.windows ? 100.0 * (double)fsw.over_n / (double)fsw.windows : 0.0, mean_diff, rel);
}

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : prop_seed();
    int64_t limit = argc > 2 ? strtoll(argv[2], NULL, 10) : 0;
    int64_t w = (argc > 3 ? strtoll(argv[3], NULL, 10) : 1000) * SL_NS_PER_MS;
    long sequences = argc > 4 ? strtol(argv[4], NULL, 10) : 200;
    static const int loads[] = {50, 90, 100, 110, 150, 200, 500};
    static const int64_t limits[] = {1, 5, 20, 100};

    printf("tool_sw_error: sliding_window vs sliding_log, seed 0x%" PRIx64 ", W %" PRId64
           " ms, %ld sequences of %d arrivals per row\n",
           seed, w / SL_NS_PER_MS, sequences, STEPS);
    printf("load = offered arrivals as a share of N per W; excess = worst window minus N\n");
    size_t nlimits = limit > 0 ? 1 : sizeof(limits) / sizeof(limits[0]);
    for (size_t i = 0; i < nlimits; i++) {
        for (size_t j = 0; j < sizeof(loads) / sizeof(loads[0]); j++) {
            run_params(seed, limit > 0 ? limit : limits[i], w, loads[j], sequences);
        }
    }
    return 0;
}
