/*
 * prop_sliding_window.c - the bound on sliding_window's over-admission, checked on random
 * arrival sequences (tests/prop/tool_sw_error.c measures the typical error; this asserts the
 * worst case).
 *
 * docs/algorithms.md: sliding_window is an estimate and "can admit more than N in some windows
 * (N - 1 + c at worst)". From the admission rule prev*(W - e) + (curr + c)*W <= N*W:
 *   - a window (t - W, t] spans at most the fixed window k of its last admission and window
 *     k - 1, so it holds at most curr_k + prev units, with prev <= N and curr_k <= N;
 *   - if a unit of window k - 1 is in it, prev >= 1, and since W - e >= 1 the last admission
 *     in k left curr_k <= N - 1.
 * So no window (t - W, t] ever holds more than 2N - 1 units: that is the asserted bound (it
 * implies the documented N + (N - 1 + c) for every cost c >= 0). Admissions are placed at
 * max(now, the previous admission's time), so a clock stepping back may not get around it.
 *
 * The checker itself is tested first on a hand-made admission list that breaks the bound, so
 * this test can fail.
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 40000). Exit 0 when the bound held.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#include "prop/gen.h"

#define MAX_STEPS 300

static bool self_test(void)
{
    const int64_t w = 1000;
    prop_admission_t adm[] = {{10, 2}, {500, 1}, {1009, 2}, {1009, 1}, {2500, 1}};
    worst_t x = worst_window(adm, 5, w, 2);
    /* (9, 1009] holds 2 + 1 + 2 + 1 = 6; (1500, 2500] holds 1 */
    return x.units == 6 && x.end == 1009 && x.max_c == 2 && x.over_n == 2;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 40000);
    clock_t t0 = clock();
    long failed = 0, over_cases = 0, windows = 0, over_windows = 0;
    int64_t worst_excess = 0; /* over N */
    int64_t worst_excess_limit = 0;

    printf("prop_sliding_window: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases\n", seed,
           cases);
    if (!self_test()) {
        printf("FAIL: the window checker does not see a planted breach\n");
        return 1;
    }

    for (long idx = 0; idx < cases; idx++) {
        prng_t rng = prop_case_prng(seed, (int)SL_SLIDING_WINDOW, idx);
        sl_rule_t rule = gen_rule(&rng, SL_SLIDING_WINDOW, false);
        int64_t start = PROP_START + prng_range(&rng, 0, rule.window_ns);
        int64_t q = gen_quantum(&rng, &rule);
        int nsteps = (int)prng_range(&rng, MAX_STEPS / 2, MAX_STEPS);
        uint64_t state[PROP_STATE_WORDS];
        prop_admission_t adm[MAX_STEPS];
        int nadm = 0;
        int64_t now = start, max_now = start, latest_adm = INT64_MIN;

        memset(state, 0, sizeof(state));
        for (int i = 0; i < nsteps; i++) {
            if (i > 0) {
                if (prng_chance(&rng, 4)) {
                    now = max_now - prng_range(&rng, 1, rule.window_ns);
                } else if (prng_chance(&rng, 30)) {
                    /* near the end of the current fixed window, where prev weighs least */
                    int64_t k = max_now / rule.window_ns;
                    now = (k + 1) * rule.window_ns - prng_range(&rng, 1, 3 * q);
                    if (now < max_now) {
                        now = max_now + gen_gap(&rng, &rule, q);
                    }
                } else {
                    now = max_now + gen_gap(&rng, &rule, q);
                }
            }
            if (now > max_now) {
                max_now = now;
            }
            int64_t cost = gen_cost(&rng, &rule);
            sl_decision_t d;
            int rc = sl_decide(&rule, state, cost, now, &d);
            if (rc != SL_OK) {
                printf("FAIL: case %ld step %d: sl_decide returned %d\n", idx, i, rc);
                failed++;
                break;
            }
            if (d.allowed && cost > 0) {
                latest_adm = latest_adm > now ? latest_adm : now;
                adm[nadm].t = latest_adm;
                adm[nadm].cost = cost;
                nadm++;
            }
        }

        worst_t x = worst_window(adm, nadm, rule.window_ns, rule.limit);
        windows += x.windows;
        over_windows += x.over_n;
        if (x.over_n > 0) {
            over_cases++;
        }
        if (x.units - rule.limit > worst_excess) {
            worst_excess = x.units - rule.limit;
            worst_excess_limit = rule.limit;
        }
        bool doc_bound = x.units <= rule.limit + (rule.limit - 1 + x.max_c);
        bool derived_bound = x.units <= 2 * rule.limit - 1;
        if (!doc_bound || !derived_bound) {
            failed++;
            if (failed <= 3) {
                printf("FAIL: case %ld: %" PRId64 " units in (t - W, t], t = +%" PRId64
                       " (largest cost %" PRId64 "): bound 2N - 1 = %" PRId64
                       ", documented N + N - 1 + c = %" PRId64 "\n  replay: SLUICE_SEED=0x%" PRIx64
                       ", case %ld\n  ",
                       idx, x.units, x.end - start, x.max_c, 2 * rule.limit - 1,
                       2 * rule.limit - 1 + x.max_c, seed, idx);
                print_rule(stdout, &rule);
                for (int j = 0; j < nadm; j++) {
                    if (adm[j].t > x.end - rule.window_ns && adm[j].t <= x.end) {
                        printf("    admitted %" PRId64 " at +%" PRId64 "\n", adm[j].cost,
                               adm[j].t - start);
                    }
                }
            }
        }
    }

    printf("bound     %s: %ld cases, %ld windows, %ld failed — no window (t - W, t] holds more than"
           " 2N - 1 units\n",
           failed ? "FAIL" : "ok", cases, windows, failed);
    printf("info: %ld of %ld windows (%ld cases) held more than N; worst excess %" PRId64
           " over N (with N = %" PRId64 ")\n",
           over_windows, windows, over_cases, worst_excess, worst_excess_limit);
    printf("prop_sliding_window: %s in %.1f s cpu (seed 0x%" PRIx64 ")\n",
           failed ? "FAILED" : "passed", (double)(clock() - t0) / CLOCKS_PER_SEC, seed);
    return failed ? 1 : 0;
}
