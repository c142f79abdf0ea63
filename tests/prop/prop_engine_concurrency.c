/*
 * prop_engine_concurrency.c - sluiced's engine under reloads: two worker threads decide on one
 * rule while the main thread replaces the rule set again and again (other rules change, and
 * overrides are set and deleted); no decision is lost or doubled, and no retired rule set is
 * freed while a worker still holds it (ASan / TSan would see it).
 *
 * Inline rules too: the workers decide on a few inline parameter sets (mostly peeks, so their
 * tables are often empty: some sets admit rarely, some never) while the main thread sweeps idle
 * inline rules out of force again and again; a rule taken out while a worker still decides on it
 * must come back with its usage, never be replaced by a second, fresh table.
 *
 * Property: every request carries the same `now` inside one fixed window, so a key admits
 * exactly min(requests, limit) whatever the interleaving: 40 for plain keys, 80 for the key
 * with an override that doubles its limit, INLINE_LIMIT per inline rule and key. Keys and the
 * order of requests come from the seed (SLUICE_SEED replays one). Run under TSan by
 * `make test-tsan`.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prop/gen.h"
#include "engine/engine.h"

#define WORKERS         2
#define KEYS            64
#define PER_WORKER_MAX  2000000 /* a bound; workers stop when the reloads are done */
#define LIMIT           40
#define RELOADS         150
#define INLINE_SETS     16 /* inline parameter sets (windows of INLINE_WINDOW_S + i seconds) */
#define INLINE_KEYS     8
#define INLINE_LIMIT    3
#define INLINE_WINDOW_S 3600
/* Sweeps after the reloads while the workers still decide. A set is taken out of force only
 * while it has no key, and every set soon has one (an admission in 32 keeps it for the hour), so
 * the sweeps do not reach RELOADS: this bounds them by count (each walks every set's table). */
#define EXTRA_SWEEPS_MAX 20000

static const int64_t now_ns = INT64_C(1700000000000000000) + INT64_C(1000000000);

typedef struct worker {
    engine_t *engine;
    unsigned index;
    uint64_t seed;
    unsigned requested[KEYS];
    unsigned admitted[KEYS];
    unsigned inl_requested[INLINE_SETS][INLINE_KEYS];
    unsigned inl_admitted[INLINE_SETS][INLINE_KEYS];
    int errors;
    atomic_bool *stop; /* set by the main thread after its last reload */
} worker_t;

static void key_name(unsigned k, char out[32])
{
    snprintf(out, 32, k == 0 ? "vip" : "user:%u", k);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    engine_worker_t *ew = engine_worker(w->engine, w->index);
    prng_t r = {w->seed};
    for (int i = 0; i < PER_WORKER_MAX && !atomic_load(w->stop); i++) {
        engine_worker_begin(ew);
        rule_state_t *rs = engine_find(ew, "steady", 6);
        if (rs == NULL) {
            w->errors++;
            continue;
        }
        unsigned k = (unsigned)prng_range(&r, 0, KEYS - 1);
        char key[32];
        key_name(k, key);
        engine_decision_t d;
        if (engine_decide(ew, rs, key, strlen(key), 1, now_ns, &d) != ENGINE_OK || d.store_error) {
            w->errors++;
            continue;
        }
        w->requested[k]++;
        w->admitted[k] += d.d.allowed;
        /* the rule that keeps changing is decided on too */
        rule_state_t *churn = engine_find(ew, "churn", 5);
        if (churn != NULL) {
            engine_decide(ew, churn, key, strlen(key), 1, now_ns, &d);
        }
        /* an inline rule: peeks mostly, now and then an admission */
        unsigned p = (unsigned)prng_range(&r, 0, INLINE_SETS - 1);
        unsigned ik = (unsigned)prng_range(&r, 0, INLINE_KEYS - 1);
        sl_rule_t params = {.algorithm = SL_FIXED_WINDOW,
                            .limit = INLINE_LIMIT,
                            .window_ns = (INLINE_WINDOW_S + p) * INT64_C(1000000000),
                            .burst = SL_DEFAULT,
                            .buckets = SL_DEFAULT,
                            .max_debt = SL_DEFAULT};
        rule_state_t *inl = NULL;
        char err[ENGINE_ERR_MAX];
        if (engine_inline_rule(ew, &params, NULL, now_ns, &inl, err) != ENGINE_OK) {
            w->errors++;
            continue;
        }
        /* the first half admits one request in 32, so their tables soon hold keys; a quarter
         * one in 4096, so they are swept (empty) again and again and an admission may race a
         * sweep; the last quarter only peeks, and is swept while workers peek at it */
        uint64_t odds = p < INLINE_SETS / 2 ? 31 : p < INLINE_SETS * 3 / 4 ? 4095 : 0;
        int64_t cost = odds > 0 && prng_range(&r, 0, odds) == 0 ? 1 : 0;
        snprintf(key, sizeof key, "i%u", ik);
        if (engine_decide(ew, inl, key, strlen(key), cost, now_ns, &d) != ENGINE_OK) {
            w->errors++;
            continue;
        }
        if (cost > 0) {
            w->inl_requested[p][ik]++;
            w->inl_admitted[p][ik] += d.d.allowed;
        }
    }
    engine_worker_end(ew);
    return NULL;
}

int main(void)
{
    uint64_t seed = prop_seed();
    char dir[] = "/tmp/sluice-prop-engine.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char store_path[64], err[ENGINE_ERR_MAX], serr[CONFIG_STORE_ERR_MAX];
    snprintf(store_path, sizeof store_path, "%s/store.db", dir);
    config_store_t *setup = NULL;
    if (config_store_open(store_path, &setup, serr) != 0 ||
        config_store_put_rule(setup, "steady",
                              "{\"algorithm\":\"fixed_window\",\"limit\":40,\"window\":\"1h\"}",
                              NULL, serr) != 0 ||
        config_store_put_override(setup, "steady", "vip", 3, "{\"limit\":80}", NULL, serr) != 0) {
        fprintf(stderr, "setup: %s\n", serr);
        return 1;
    }
    config_store_close(setup);

    engine_settings_t ec = {.store_url = store_path,
                            .workers = WORKERS,
                            .key_max = 1024,
                            .override_ttl_ns = INT64_C(1000000)}; /* 1 ms: lookups keep happening */
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fprintf(stderr, "engine: %s\n", err);
        return 1;
    }
    static atomic_bool stop;
    worker_t w[WORKERS];
    pthread_t th[WORKERS];
    for (unsigned i = 0; i < WORKERS; i++) {
        w[i] = (worker_t){.engine = e, .index = i, .seed = seed * 31 + i, .stop = &stop};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    /* The main thread changes the store and reloads while the workers decide. */
    config_store_t *store = engine_store(e);
    int reloads = 0;
    size_t sweeps = 0, extra_rounds = 0;
    for (int i = 0; i < RELOADS; i++) {
        char json[128];
        snprintf(json, sizeof json, "{\"algorithm\":\"gcra\",\"limit\":%d,\"window\":\"1s\"}",
                 10 + i % 7);
        config_store_put_rule(store, "churn", json, NULL, serr);
        if (i % 3 == 0) {
            config_store_put_override(store, "churn", "user:1", 6, "{\"limit\":3}", NULL, serr);
        } else if (i % 3 == 1) {
            config_store_del_override(store, "churn", "user:1", 6, NULL, serr);
        }
        if (engine_reload(e, store, i % 10 == 0, err) > 0) {
            reloads++;
        }
        engine_collect(e);
        /* every inline rule looks idle: those with no key yet are taken out of force */
        sweeps += engine_inline_sweep(e, now_ns + 60 * INT64_C(1000000000));
    }
    while (!atomic_load(&stop) && sweeps < RELOADS) { /* more sweeps while the workers run */
        sweeps += engine_inline_sweep(e, now_ns + 60 * INT64_C(1000000000));
        if (++extra_rounds > EXTRA_SWEEPS_MAX) {
            break;
        }
    }
    atomic_store(&stop, true);
    for (unsigned i = 0; i < WORKERS; i++) {
        pthread_join(th[i], NULL);
    }
    engine_collect(e);

    int failures = 0;
    for (unsigned k = 0; k < KEYS; k++) {
        unsigned requested = 0, admitted = 0;
        for (unsigned i = 0; i < WORKERS; i++) {
            requested += w[i].requested[k];
            admitted += w[i].admitted[k];
        }
        unsigned limit = k == 0 ? 2 * LIMIT : LIMIT;
        unsigned want = requested < limit ? requested : limit;
        if (admitted != want) {
            fprintf(stderr, "key %u: %u requests, %u admitted, want %u\n", k, requested, admitted,
                    want);
            failures++;
        }
    }
    for (unsigned p = 0; p < INLINE_SETS; p++) {
        for (unsigned k = 0; k < INLINE_KEYS; k++) {
            unsigned requested = 0, admitted = 0;
            for (unsigned i = 0; i < WORKERS; i++) {
                requested += w[i].inl_requested[p][k];
                admitted += w[i].inl_admitted[p][k];
            }
            unsigned want = requested < INLINE_LIMIT ? requested : INLINE_LIMIT;
            if (admitted != want) {
                fprintf(stderr, "inline set %u key %u: %u requests, %u admitted, want %u\n", p, k,
                        requested, admitted, want);
                failures++;
            }
        }
    }
    for (unsigned i = 0; i < WORKERS; i++) {
        if (w[i].errors != 0) {
            fprintf(stderr, "worker %u: %d errors\n", i, w[i].errors);
            failures++;
        }
    }
    if (reloads < RELOADS / 2) {
        fprintf(stderr, "only %d reloads published\n", reloads);
        failures++;
    }
    engine_free(e);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cleanup of %s failed\n", dir);
    }
    unsigned long total = 0;
    for (unsigned i = 0; i < WORKERS; i++) {
        for (unsigned k = 0; k < KEYS; k++) {
            total += w[i].requested[k];
        }
    }
    printf("prop_engine_concurrency: seed %llu, %d reloads and %zu inline rules swept during %lu "
           "decisions, %s\n",
           (unsigned long long)seed, reloads, sweeps, total, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
