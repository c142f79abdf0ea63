/*
 * prop_concurrency_foreach.c - deciding goes on while sl_table_foreach()'s visitor runs, on the
 * very shard being visited, and the visitor sees each key once, as it was at one moment.
 *
 * Each round fills a table with random keys (short and out-of-line ones, inline and out-of-line
 * states), then runs two threads, ordered by events only:
 *
 *   visitor  sl_table_foreach(); its first call announces "visiting" and waits until the decider
 *            says it has made its decisions, then it records every (key, state) it is handed;
 *   decider  waits for "visiting", then makes DECISIONS decisions on the same table: charges on
 *            keys present, new keys (inserts, which grow and rebuild the shard), resets.
 *
 * With one shard, every decision is on the shard being visited. They used to wait for the visitor
 * (it ran under the shard's lock), so the visitor's wait can only end by its bound: the round
 * fails ("deciding did not go on"), rather than hanging. Properties checked after each round:
 *   - the decider finished while the visitor was waiting;
 *   - every filled key the decider did not reset was visited exactly once (a reset one at most
 *     once), whatever the decider did to the shard between two pieces of the walk (inserts that
 *     grow and rebuild it);
 *   - a filled key the decider did not touch was visited with its filled state, and so was the
 *     first key visited (its piece was copied before the decider started).
 *
 * Racing rounds then run the decider and sl_table_foreach() at once, unordered: passes of
 * sl_table_foreach() back to back on two threads while the decider runs (two walks at once, each
 * letting the decider, and the other walk, in between its pieces), on gcra tables of RACE_KEYS keys
 * (a shard of them is copied in many pieces, one per lock hold), the decider charging keys present
 * and adding many new ones (so shards grow, and are rebuilt between two pieces of their walk).
 * Whatever the interleaving, in every pass:
 *   - every key present throughout is visited exactly once;
 *   - each with a state it held during the round: a TAT no earlier than before it and no later
 *     than after it (charges only move a gcra key's TAT forward).
 *
 * Every wait is bounded (WAIT_S); the whole run too. SLUICE_SEED overrides the seed. Run under
 * TSan by `make test-tsan` (label "concurrency").
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen.h"

#define ROUNDS          16
#define KEYS            2000 /* filled before each round */
#define DECISIONS       3000 /* the decider's, during the visit */
#define WAIT_S          20   /* bound of every wait: a deadlock fails instead of hanging */
#define KEY_CAP         64
#define RACE_ROUNDS     12
#define RACE_KEYS       20000  /* filled before each racing round */
#define RACE_DECISIONS  200000 /* the decider's, meanwhile; half of them new keys */
#define RACE_PASSES_MAX 1000   /* sl_table_foreach passes while the decider runs, per walker */
#define RACE_WALKERS    2      /* threads walking at once */

typedef struct round {
    sl_table_t *table;
    unsigned shards;
    uint64_t seed; /* the table's hash seed: which shard a key is in */
    prng_t rng;
    char keys[KEYS][KEY_CAP];
    uint64_t *before; /* KEYS states of state_size bytes, as filled */
    size_t state_size;
    unsigned char *seen;    /* times each filled key was visited */
    unsigned char *touched; /* the decider charged (1) or reset (2) each filled key */
    bool first_wrong;       /* the first key visited had another state than the filled one */
    size_t wrong_state;     /* untouched keys visited whose state was not the filled one */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool visiting, decided, timed_out, visitor_done, decider_done;
    int foreach_rc, decide_errors;
} round_t;

static void deadline_in(struct timespec *ts, int seconds)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += seconds;
}

/* Waits under r->mu until *flag, at most `seconds`. Returns whether it came. */
static bool wait_for(round_t *r, const bool *flag, int seconds)
{
    struct timespec until;
    deadline_in(&until, seconds);
    while (!*flag && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0) {
    }
    return *flag;
}

static void set_flag(round_t *r, bool *flag)
{
    pthread_mutex_lock(&r->mu);
    *flag = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int find_key(const round_t *r, const void *key, size_t len)
{
    for (int i = 0; i < KEYS; i++) {
        if (strlen(r->keys[i]) == len && memcmp(r->keys[i], key, len) == 0) {
            return i;
        }
    }
    return -1;
}

/* Whether a visited state (size bytes: a sliding_log's buffer holds its entries) is the filled
 * one (a full-size copy): their packed forms are equal (one state always packs to one form). */
static bool same_state(const round_t *r, const void *state, size_t size, const void *want)
{
    sl_rule_t rule = *sl_table_rule(r->table);
    size_t max = sl_state_packed_max(&rule);
    unsigned char *a = malloc(max), *b = malloc(max);
    bool same = a != NULL && b != NULL && sl_state_check_len(&rule, state, size) == SL_OK;
    if (same) {
        size_t na = sl_state_pack(&rule, state, a), nb = sl_state_pack(&rule, want, b);
        same = na == nb && memcmp(a, b, na) == 0;
    }
    free(a);
    free(b);
    return same;
}

static int visit(void *arg, const void *key, size_t len, const void *state, size_t size)
{
    round_t *r = arg;
    int i = find_key(r, key, len);
    const unsigned char *want =
        i < 0 ? NULL : (const unsigned char *)r->before + (size_t)i * r->state_size;
    bool filled_state = i >= 0 && same_state(r, state, size, want);
    pthread_mutex_lock(&r->mu);
    if (!r->visiting) {
        r->first_wrong = !filled_state; /* copied before the decider began */
        r->visiting = true;
        pthread_cond_broadcast(&r->cv);
        if (!wait_for(r, &r->decided, WAIT_S)) {
            r->timed_out = true;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (i < 0) {
        return 0; /* a key the decider added */
    }
    r->seen[i]++;
    r->wrong_state += !r->touched[i] && !filled_state; /* decider done: touched[] is final */
    return 0;
}

static void *visitor_main(void *arg)
{
    round_t *r = arg;
    r->foreach_rc = sl_table_foreach(r->table, visit, r);
    set_flag(r, &r->visitor_done);
    return NULL;
}

static void *decider_main(void *arg)
{
    round_t *r = arg;
    pthread_mutex_lock(&r->mu);
    bool go = wait_for(r, &r->visiting, WAIT_S);
    pthread_mutex_unlock(&r->mu);
    const int64_t now = PROP_START + SL_NS_PER_SEC;
    for (int i = 0; go && i < DECISIONS; i++) {
        uint64_t x = prng_next(&r->rng);
        char fresh[KEY_CAP];
        sl_decision_t d;
        int rc;
        if (x % 4 == 0) { /* a new key: inserts, and the shard grows */
            int n = snprintf(fresh, sizeof fresh, "new-%d-%016llx", i, (unsigned long long)x);
            rc = sl_table_decide(r->table, fresh, (size_t)n, 1, now, &d);
        } else if (x % 4 == 1) {
            const char *k = r->keys[(x >> 8) % KEYS];
            r->touched[(x >> 8) % KEYS] = 2;
            rc = sl_table_reset(r->table, k, strlen(k));
        } else {
            const char *k = r->keys[(x >> 8) % KEYS];
            r->touched[(x >> 8) % KEYS] |= 1;
            rc = sl_table_decide(r->table, k, strlen(k), 1, now, &d);
        }
        if (rc != SL_OK) {
            r->decide_errors++;
        }
    }
    set_flag(r, &r->decided);
    set_flag(r, &r->decider_done);
    return NULL;
}

/* One round; returns the number of failed properties. */
static int run_round(uint64_t seed, int n)
{
    static round_t r; /* 130 KiB of keys: not on the stack */
    memset(&r, 0, sizeof r);
    r.rng = (prng_t){seed ^ (uint64_t)n * UINT64_C(0x9e3779b97f4a7c15)};
    r.shards = n % 2 == 0 ? 1 : 8;
    sl_rule_t rule;
    /* gcra: 8-byte states in the entry; sliding_log 40: 328-byte states out of line */
    int rc = n % 4 < 2 ? sl_rule_init(&rule, SL_GCRA, 1000, 3600 * SL_NS_PER_SEC)
                       : sl_rule_init(&rule, SL_SLIDING_LOG, 40, 3600 * SL_NS_PER_SEC);
    r.seed = prng_next(&r.rng) | 1;
    sl_table_config_t cfg = {.shards = r.shards, .seed = r.seed};
    if (rc != SL_OK || sl_table_create(&rule, &cfg, &r.table) != SL_OK) {
        fprintf(stderr, "round %d: no table\n", n);
        return 1;
    }
    r.state_size = sl_state_size(&rule);
    r.before = calloc(KEYS, r.state_size);
    r.seen = calloc(KEYS, 1);
    r.touched = calloc(KEYS, 1);
    pthread_mutex_init(&r.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r.cv, &ca);
    for (int i = 0; i < KEYS; i++) {
        uint64_t x = prng_next(&r.rng);
        if (x % 3 == 0) { /* longer than an entry holds: stored out of line */
            snprintf(r.keys[i], KEY_CAP, "tenant-%04d:user-%016llx", i, (unsigned long long)x);
        } else {
            snprintf(r.keys[i], KEY_CAP, "k%d", i);
        }
        sl_decision_t d;
        int64_t cost = 1 + (int64_t)((x >> 8) % 20);
        sl_table_decide(r.table, r.keys[i], strlen(r.keys[i]), cost, PROP_START, &d);
        sl_table_get(r.table, r.keys[i], strlen(r.keys[i]),
                     (unsigned char *)r.before + (size_t)i * r.state_size);
    }

    pthread_t v, dd;
    pthread_create(&v, NULL, visitor_main, &r);
    pthread_create(&dd, NULL, decider_main, &r);
    pthread_mutex_lock(&r.mu);
    /* longer than the threads' own waits, so that they report first */
    bool both = wait_for(&r, &r.visitor_done, 3 * WAIT_S);
    both = both && wait_for(&r, &r.decider_done, 3 * WAIT_S);
    pthread_mutex_unlock(&r.mu);
    if (!both) { /* a thread is stuck: nothing more can be checked, nor freed */
        fprintf(stderr, "round %d (%u shards): a thread did not finish within %d s\n", n, r.shards,
                3 * WAIT_S);
        exit(1);
    }
    pthread_join(v, NULL);
    pthread_join(dd, NULL);

    int fails = 0;
    const char *what = rule.algorithm == SL_GCRA ? "gcra" : "sliding_log";
    if (r.timed_out) {
        fprintf(stderr,
                "round %d (%s, %u shards): deciding did not go on while the visitor ran: the "
                "decider had not finished after %d s\n",
                n, what, r.shards, WAIT_S);
        fails++;
    }
    if (r.foreach_rc != 0 || r.decide_errors != 0) {
        fprintf(stderr, "round %d: sl_table_foreach returned %d; %d decisions failed\n", n,
                r.foreach_rc, r.decide_errors);
        fails++;
    }
    size_t missing = 0, twice = 0;
    for (int i = 0; i < KEYS; i++) {
        missing += r.seen[i] == 0 && r.touched[i] != 2;
        twice += r.seen[i] > 1;
    }
    if (twice != 0 || missing != 0 || r.wrong_state != 0 || r.first_wrong) {
        fprintf(stderr,
                "round %d (%s, %u shards): %zu filled keys not reset and not visited, %zu "
                "visited twice, %zu untouched with another state than filled, first key %s\n",
                n, what, r.shards, missing, twice, r.wrong_state,
                r.first_wrong ? "with another state than filled" : "as filled");
        fails++;
    }
    sl_table_free(r.table);
    free(r.before);
    free(r.seen);
    free(r.touched);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
    return fails;
}

/* ---- racing rounds --------------------------------------------------------------------------- */

typedef struct race race_t;

/* One of the threads walking the table, with what its passes found. */
typedef struct race_walker {
    race_t *race;
    int64_t *seen_max; /* the latest TAT any of its passes saw for each filled key */
    unsigned *seen;    /* visits in the current pass */
    int passes, foreach_rc;
    size_t missing, twice, too_early; /* over all its passes */
} race_walker_t;

struct race {
    sl_table_t *table;
    prng_t rng;
    int64_t *before, *after; /* each filled key's TAT before and after the round */
    atomic_bool decided;     /* the decider is done */
    int decide_errors;
    race_walker_t walkers[RACE_WALKERS];
};

static size_t race_key(char *buf, int i)
{
    return (size_t)snprintf(buf, KEY_CAP, i % 3 ? "r%d" : "tenant-%06d:a-long-user-name", i);
}

/* The index of a filled key ("r<i>" or "tenant-<i>:..."), or -1 for another key. Cheap: a pass
 * should spend its time copying, not parsing. */
static int race_index(const void *key, size_t len)
{
    const char *p = key, *end = p + len;
    if (len > 1 && p[0] == 'r') {
        p++;
    } else if (len > 7 && memcmp(p, "tenant-", 7) == 0) {
        p += 7;
    } else {
        return -1;
    }
    int i = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        i = i * 10 + (*p - '0');
    }
    char again[KEY_CAP];
    return i < RACE_KEYS && race_key(again, i) == len && memcmp(again, key, len) == 0 ? i : -1;
}

static int race_visit(void *arg, const void *key, size_t len, const void *state, size_t size)
{
    race_walker_t *r = arg;
    int i = race_index(key, len);
    if (i < 0 || size != sizeof(int64_t)) {
        return 0; /* a key the decider added */
    }
    int64_t tat;
    memcpy(&tat, state, sizeof tat);
    r->seen[i]++;
    r->too_early += tat < r->race->before[i];
    r->seen_max[i] = tat > r->seen_max[i] ? tat : r->seen_max[i];
    return 0;
}

static void *race_decider(void *arg)
{
    race_t *r = arg;
    const int64_t now = PROP_START + SL_NS_PER_SEC;
    char key[KEY_CAP];
    for (int i = 0; i < RACE_DECISIONS; i++) {
        uint64_t x = prng_next(&r->rng);
        size_t len = x % 2 ? (size_t)snprintf(key, sizeof key, "new-%d", i)
                           : race_key(key, (int)((x >> 8) % RACE_KEYS));
        sl_decision_t d;
        if (sl_table_decide(r->table, key, len, 1, now, &d) != SL_OK) {
            r->decide_errors++;
        }
    }
    atomic_store(&r->decided, true);
    return NULL;
}

/* Passes back to back while the decider runs (one at least), each checked when it ends. */
static void *race_visitor(void *arg)
{
    race_walker_t *r = arg;
    do {
        memset(r->seen, 0, RACE_KEYS * sizeof *r->seen);
        int rc = sl_table_foreach(r->race->table, race_visit, r);
        r->foreach_rc = rc != 0 ? rc : r->foreach_rc;
        for (int i = 0; i < RACE_KEYS; i++) {
            r->missing += r->seen[i] == 0;
            r->twice += r->seen[i] > 1;
        }
        r->passes++;
    } while (!atomic_load(&r->race->decided) && r->passes < RACE_PASSES_MAX);
    return NULL;
}

static int run_race(uint64_t seed, int n)
{
    static race_t r;
    memset(&r, 0, sizeof r);
    r.rng = (prng_t){seed ^ UINT64_C(0x2545f4914f6cdd1d) * (uint64_t)(n + 1)};
    unsigned shards = n % 2 == 0 ? 1 : 4;
    sl_rule_t rule;
    sl_table_config_t cfg = {.shards = shards};
    if (sl_rule_init(&rule, SL_GCRA, 1000, 3600 * SL_NS_PER_SEC) != SL_OK ||
        sl_table_create(&rule, &cfg, &r.table) != SL_OK) {
        fprintf(stderr, "race %d: no table\n", n);
        return 1;
    }
    r.before = calloc(RACE_KEYS, sizeof(int64_t));
    r.after = calloc(RACE_KEYS, sizeof(int64_t));
    for (int w = 0; w < RACE_WALKERS; w++) {
        r.walkers[w].race = &r;
        r.walkers[w].seen_max = calloc(RACE_KEYS, sizeof(int64_t));
        r.walkers[w].seen = calloc(RACE_KEYS, sizeof(unsigned));
    }
    char key[KEY_CAP];
    for (int i = 0; i < RACE_KEYS; i++) {
        size_t len = race_key(key, i);
        sl_decision_t d;
        sl_table_decide(r.table, key, len, 1 + (int64_t)(prng_next(&r.rng) % 20), PROP_START, &d);
        sl_table_get(r.table, key, len, &r.before[i]);
    }
    sl_table_stats_t st0, st1;
    sl_table_stats(r.table, &st0);
    pthread_t dd, v[RACE_WALKERS];
    pthread_create(&dd, NULL, race_decider, &r);
    for (int w = 0; w < RACE_WALKERS; w++) {
        pthread_create(&v[w], NULL, race_visitor, &r.walkers[w]);
    }
    pthread_join(dd, NULL);
    for (int w = 0; w < RACE_WALKERS; w++) {
        pthread_join(v[w], NULL);
    }
    sl_table_stats(r.table, &st1);
    for (int i = 0; i < RACE_KEYS; i++) {
        size_t len = race_key(key, i);
        sl_table_get(r.table, key, len, &r.after[i]);
    }
    int fails = 0;
    for (int w = 0; w < RACE_WALKERS; w++) {
        race_walker_t *k = &r.walkers[w];
        size_t too_late = 0;
        for (int i = 0; i < RACE_KEYS; i++) {
            too_late += k->seen_max[i] > r.after[i];
        }
        if (k->foreach_rc != 0 || r.decide_errors != 0 || k->missing || k->twice || k->too_early ||
            too_late) {
            fprintf(stderr,
                    "race %d, walker %d (%u shards, %d passes, %llu rebuilds meanwhile): "
                    "sl_table_foreach returned %d, %d decisions failed; over the passes, of the "
                    "%d keys present throughout: %zu times one was not visited, %zu visited "
                    "twice, %zu seen with a state older than before the call, %zu newer than "
                    "after it\n",
                    n, w, shards, k->passes, (unsigned long long)(st1.rebuilds - st0.rebuilds),
                    k->foreach_rc, r.decide_errors, RACE_KEYS, k->missing, k->twice, k->too_early,
                    too_late);
            fails = 1;
        }
        free(k->seen_max);
        free(k->seen);
    }
    sl_table_free(r.table);
    free(r.before);
    free(r.after);
    return fails;
}

int main(void)
{
    uint64_t seed = prop_seed();
    printf("prop_concurrency_foreach: seed 0x%llx (SLUICE_SEED=0x%llx to replay)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    int fails = 0;
    int n = 0;
    for (; n < ROUNDS && fails == 0; n++) { /* the first failing round ends the run */
        fails += run_round(seed, n);
    }
    int k = 0;
    for (; k < RACE_ROUNDS && fails == 0; k++) {
        fails += run_race(seed, k);
    }
    printf("%d rounds and %d racing rounds run, %s\n", n, k,
           fails == 0 ? "all passed" : "the last failed");
    return fails == 0 ? 0 : 1;
}
