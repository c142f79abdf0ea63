/*
 * sim.h - a simulated service behind an adaptive concurrency limit, in simulated time: the
 * bench's simulator (bench/adaptive/sim.c) prints what it does, the property test
 * (tests/prop/prop_adaptive.c) asserts on it. Header-only, deterministic for a seed.
 *
 * The service: a request that starts with n requests in flight (itself included) takes base_ns
 * while n <= knee, and base_ns * n / knee past it (the knee is the service's capacity: beyond
 * it requests queue, and latency grows with the queue). The knee moves to knee2 at move_ns.
 * The clients: requests arrive one every gap_ns on average (a uniform gap in [gap/2, 3 gap/2],
 * from the seed); each acquires one unit of the rule (refused: shed, nothing to report) and
 * releases it when done, reporting its latency, and DROPPED when it took longer than
 * deadline_ns (0: never). Everything goes through the library's sl_acquire() and
 * sl_release_sample() on one key's state.
 */
#ifndef SLUICE_BENCH_ADAPTIVE_SIM_H
#define SLUICE_BENCH_ADAPTIVE_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define SIM_T0 (INT64_C(1700000000) * SL_NS_PER_SEC)

typedef struct sim_cfg {
    sl_rule_t rule;      /* a prepared concurrency rule with an adaptive limit */
    int64_t knee;        /* requests in flight the service takes before latency grows */
    int64_t knee2;       /* the knee from move_ns on */
    int64_t move_ns;     /* when the knee moves, ns after the start */
    int64_t end_ns;      /* when the run ends, ns after the start */
    int64_t base_ns;     /* latency at or below the knee */
    int64_t gap_ns;      /* mean time between arrivals */
    int64_t deadline_ns; /* a request slower than this reports DROPPED; 0: never */
    int64_t every_ns;    /* how often the observer is called */
    uint64_t seed;
} sim_cfg_t;

/* What the observer sees at each every_ns. */
typedef struct sim_obs {
    int64_t t_ns;      /* since the start */
    int64_t limit;     /* the adaptive limit now */
    int64_t in_flight; /* units held */
    int64_t knee;      /* the service's knee now */
    int64_t admitted;  /* requests admitted since the start */
    int64_t shed;      /* requests refused since the start */
} sim_obs_t;

typedef void (*sim_observer)(const sim_obs_t *obs, void *arg);

typedef struct sim_job {
    int64_t done_ns;
    int64_t latency_ns;
    uint64_t id;
} sim_job_t;

static inline uint64_t sim_rand(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Latency of a request that starts with n in flight (itself included). */
static inline int64_t sim_latency(const sim_cfg_t *c, int64_t knee, int64_t n)
{
    return n <= knee ? c->base_ns : c->base_ns * n / knee;
}

/* Inserts a job into jobs[0..*n), kept sorted by done_ns. */
static inline void sim_push(sim_job_t *jobs, int64_t *n, sim_job_t j)
{
    int64_t at = *n;
    while (at > 0 && jobs[at - 1].done_ns > j.done_ns) {
        jobs[at] = jobs[at - 1];
        at--;
    }
    jobs[at] = j;
    (*n)++;
}

/*
 * Runs the simulation, calling obs every every_ns. Returns 0, or -1 when the state or the job
 * list cannot be allocated or a library call fails (a bug the caller reports).
 */
static inline int sim_run(const sim_cfg_t *c, sim_observer obs, void *arg)
{
    const sl_rule_t *r = &c->rule;
    unsigned char *st = calloc(1, sl_state_size(r));
    sim_job_t *jobs = calloc((size_t)r->adaptive.max_limit + 1, sizeof *jobs);
    if (st == NULL || jobs == NULL) {
        free(st);
        free(jobs);
        return -1;
    }
    uint64_t rs = c->seed;
    int64_t n = 0, t = 0, next_arrival = 0, next_obs = 0, admitted = 0, shed = 0;
    int rc = 0;
    while (t < c->end_ns && rc == 0) {
        int64_t knee = t < c->move_ns ? c->knee : c->knee2;
        if (next_obs <= next_arrival && (n == 0 || next_obs <= jobs[0].done_ns)) {
            t = next_obs;
            sim_obs_t o = {t, sl_limit_now(r, st), n, knee, admitted, shed};
            obs(&o, arg);
            next_obs += c->every_ns;
        } else if (n > 0 && jobs[0].done_ns <= next_arrival) {
            sim_job_t j = jobs[0];
            memmove(jobs, jobs + 1, (size_t)(n - 1) * sizeof *jobs);
            n--;
            t = j.done_ns;
            sl_sample_t s = {j.latency_ns, c->deadline_ns > 0 && j.latency_ns > c->deadline_ns};
            sl_decision_t d;
            rc = sl_release_sample(r, st, j.id, SIM_T0 + t, &s, &d, NULL) == SL_OK ? 0 : -1;
        } else {
            t = next_arrival;
            next_arrival += c->gap_ns / 2 + (int64_t)(sim_rand(&rs) % (uint64_t)(c->gap_ns + 1));
            sl_decision_t d;
            sl_hold_t h;
            rc = sl_acquire(r, st, 1, 0, SIM_T0 + t, c->seed | 1, &d, &h) == SL_OK ? 0 : -1;
            if (rc == 0 && d.allowed) {
                int64_t lat = sim_latency(c, knee, n + 1);
                sim_push(jobs, &n, (sim_job_t){t + lat, lat, h.id});
                admitted++;
            } else {
                shed++;
            }
        }
    }
    free(st);
    free(jobs);
    return rc;
}

#endif /* SLUICE_BENCH_ADAPTIVE_SIM_H */
