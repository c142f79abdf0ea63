/*
 * sim.c - how an adaptive concurrency limit follows a service's capacity (bench/adaptive/sim.h
 * has the model): for each algorithm and offered load, prints the limit over time and, for each
 * phase (before and after the knee moves), the mean limit over its last third and how far it is
 * from the knee. Simulated time: the same seed prints the same figures on any machine.
 *
 *   bench_adaptive_sim [--algorithm aimd|vegas|all] [--knee K] [--knee2 K] [--load x,y,..]
 *                      [--seed n] [--quiet]
 *
 * AIMD sees the knee only through drops: its timeout is set at 1.2 base latencies, as a service
 * would set a latency objective just above its unloaded latency.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MS SL_NS_PER_MS

typedef struct phase_acc {
    int64_t from_ns, to_ns; /* the window measured: the last third of the phase */
    int64_t sum, count, lo, hi;
} phase_acc_t;

typedef struct run {
    bool quiet;
    int64_t print_every; /* observations between printed lines */
    int64_t seen;
    phase_acc_t phase[2];
} run_t;

static void observe(const sim_obs_t *o, void *arg)
{
    run_t *r = arg;
    if (!r->quiet && r->seen++ % r->print_every == 0)
        printf("  t=%6" PRId64 "ms knee=%4" PRId64 " limit=%4" PRId64 " in_flight=%4" PRId64
               " admitted=%8" PRId64 " shed=%8" PRId64 "\n",
               o->t_ns / MS, o->knee, o->limit, o->in_flight, o->admitted, o->shed);
    for (int i = 0; i < 2; i++) {
        phase_acc_t *p = &r->phase[i];
        if (o->t_ns >= p->from_ns && o->t_ns < p->to_ns) {
            p->sum += o->limit;
            p->count++;
            p->lo = p->count == 1 || o->limit < p->lo ? o->limit : p->lo;
            p->hi = p->count == 1 || o->limit > p->hi ? o->limit : p->hi;
        }
    }
}

static int simulate(sl_adaptive_algorithm_t alg, int64_t knee, int64_t knee2, double load,
                    uint64_t seed, bool quiet)
{
    sim_cfg_t c = {.knee = knee, .knee2 = knee2, .base_ns = 10 * MS, .seed = seed};
    int64_t phase_ns = 20000 * MS;
    c.move_ns = phase_ns;
    c.end_ns = 2 * phase_ns;
    c.every_ns = 50 * MS;
    int64_t cap = knee > knee2 ? knee : knee2;
    c.gap_ns = (int64_t)((double)c.base_ns / (load * (double)cap));
    c.gap_ns = c.gap_ns < 2 ? 2 : c.gap_ns;
    c.deadline_ns = alg == SL_ADAPTIVE_AIMD ? c.base_ns * 12 / 10 : 0;
    sl_rule_init(&c.rule, SL_CONCURRENCY, 20, 60 * SL_NS_PER_SEC);
    c.rule.adaptive = (sl_adaptive_t){.algorithm = alg, .min_limit = 1, .max_limit = 1000};
    if (alg == SL_ADAPTIVE_AIMD)
        c.rule.adaptive.timeout_ns = c.deadline_ns;
    if (sl_rule_prepare(&c.rule) != SL_OK)
        return -1;
    run_t r = {.quiet = quiet, .print_every = 40};
    r.phase[0] = (phase_acc_t){.from_ns = phase_ns * 2 / 3, .to_ns = phase_ns};
    r.phase[1] = (phase_acc_t){.from_ns = phase_ns + phase_ns * 2 / 3, .to_ns = 2 * phase_ns};
    printf("%s: knee %" PRId64 " -> %" PRId64 " at %" PRId64 " ms, offered %.1fx the larger "
           "knee's capacity, base latency 10 ms\n",
           alg == SL_ADAPTIVE_AIMD ? "aimd" : "vegas", knee, knee2, phase_ns / MS, load);
    if (sim_run(&c, observe, &r) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        phase_acc_t *p = &r.phase[i];
        int64_t k = i == 0 ? knee : knee2;
        double mean = p->count ? (double)p->sum / (double)p->count : 0;
        printf("  phase %d (knee %4" PRId64 "): limit over its last third mean %.1f (%+.1f%% of "
               "the knee), range %" PRId64 "..%" PRId64 "\n",
               i + 1, k, mean, 100.0 * (mean - (double)k) / (double)k, p->lo, p->hi);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *alg = "all", *loads = "1.5,3,6";
    int64_t knee = 100, knee2 = 50;
    uint64_t seed = 1;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (strcmp(argv[i], "--algorithm") == 0 && more)
            alg = argv[++i];
        else if (strcmp(argv[i], "--knee") == 0 && more)
            knee = strtoll(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--knee2") == 0 && more)
            knee2 = strtoll(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--load") == 0 && more)
            loads = argv[++i];
        else if (strcmp(argv[i], "--seed") == 0 && more)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else {
            fprintf(stderr,
                    "usage: %s [--algorithm aimd|vegas|all] [--knee K] [--knee2 K] "
                    "[--load x,y,..] [--seed n] [--quiet]\n",
                    argv[0]);
            return 2;
        }
    }
    if (knee < 1 || knee > 900 || knee2 < 1 || knee2 > 900) {
        fprintf(stderr, "knees must be within 1..900 (the limit's max is 1000)\n");
        return 2;
    }
    for (const char *l = loads; *l != '\0';) {
        char *end;
        double load = strtod(l, &end);
        if (end == l || load <= 0) {
            fprintf(stderr, "bad --load '%s'\n", loads);
            return 2;
        }
        for (int a = SL_ADAPTIVE_AIMD; a <= SL_ADAPTIVE_VEGAS; a++) {
            bool want = strcmp(alg, "all") == 0 ||
                        strcmp(alg, a == SL_ADAPTIVE_AIMD ? "aimd" : "vegas") == 0;
            if (want && simulate((sl_adaptive_algorithm_t)a, knee, knee2, load, seed, quiet) != 0) {
                fprintf(stderr, "simulation failed\n");
                return 1;
            }
        }
        l = *end == ',' ? end + 1 : end;
    }
    return 0;
}
