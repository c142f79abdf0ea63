/*
 * prop_replay_budget.c - seeded property test of a replay on a budget (server/replay_job.h):
 * whatever stops it, what it answers is what a replay without limits answers for the lines it
 * says it replayed.
 *
 * Each case draws a rule (any algorithm; now and then a sliding_log of a large limit, whose keys
 * grow by an entry a request, with a budget of a few KB), a log (keys from a pool of 1 to 1500,
 * some with long names; times that rise, or in a tenth of the logs sometimes step back; costs 0
 * to a few times the limit, blank and comment lines), a memory budget (64 KB to 4 MB, or 2 to 12
 * KB for those sliding_logs), a deadline on a clock that ticks once per
 * read (or none) and sometimes the stop flag. The answer of replay_job_run() is then checked
 * against a reference: the same rule on a table with no cap, fed the first lines_replayed lines
 * with replay_step() and a tally that never asks. (A table at its cap drops keys whose state is
 * fresh, which decide as absent keys do unless time steps back to before the drop, when the
 * table decides them at the drop's time: for the logs whose times step back the reference's
 * table is made as the replay's is, with the budget as its cap and one shard.) Claims:
 *
 *   prefix   the totals and every key listed (admitted, rejected) are the reference's, and the
 *            keys listed are min(keys, 1000) of them, most rejected first, then most admitted,
 *            then by their bytes;
 *   stop     "complete" is true exactly when lines_replayed is the log's line count; otherwise
 *            "stopped" names the cause: the flag (shutdown), the deadline (the clock's reads
 *            passed it) or memory (neither);
 *   budget   the most the table and tallies held, as counted, is within the budget;
 *   series   the series' buckets sum to the totals.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (default 400). Exit
 * status 0 when every claim held, 1 otherwise (the failing case's seed and number printed).
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/replay.h"
#include "server/replay_job.h"
#include "sluice/sluice.h"

#include "prop/gen.h"

#define LINES_MAX   600
#define KEY_LEN     64 /* longest key drawn, bytes */
#define FAILS_SHOWN 5

static int64_t ticks;

static int64_t tick_clock(void)
{
    return ticks++;
}

/* A drawn case: the rule's JSON fields, the rule itself, the log. */
typedef struct draw {
    char fields[256];
    sl_rule_t rule;
    char *log;
    size_t log_len, lines;
    bool steps_back; /* times sometimes go back */
    size_t budget;   /* the replay's memory budget */
    bool heavy;      /* a sliding_log of a large limit: a small budget */
} draw_t;

static void draw_rule(prng_t *r, draw_t *d)
{
    sl_rule_t *rule = &d->rule;
    *rule = (sl_rule_t){.algorithm = (sl_algorithm_t)prng_range(r, SL_FIXED_WINDOW, SL_GCRA),
                        .limit = prng_range(r, 1, 20),
                        .window_ns = prng_range(r, 1, 500) * 10 * SL_NS_PER_MS,
                        .burst = SL_DEFAULT,
                        .buckets = SL_DEFAULT};
    d->heavy = prng_chance(r, 10); /* a key grows by 16 bytes an admission: memory stops */
    if (d->heavy) {
        rule->algorithm = SL_SLIDING_LOG;
        rule->limit = prng_range(r, 1000, 60000);
    }
    int n =
        snprintf(d->fields, sizeof d->fields,
                 "\"algorithm\":\"%s\",\"limit\":%" PRId64 ",\"window\":\"%" PRId64 "ms\"",
                 sl_algorithm_name(rule->algorithm), rule->limit, rule->window_ns / SL_NS_PER_MS);
    if ((rule->algorithm == SL_TOKEN_BUCKET || rule->algorithm == SL_GCRA) && prng_chance(r, 50)) {
        rule->burst = prng_range(r, 1, 30);
        snprintf(d->fields + n, sizeof d->fields - (size_t)n, ",\"burst\":%" PRId64, rule->burst);
    }
    if (sl_rule_prepare(rule) != SL_OK) {
        fprintf(stderr, "draw_rule: a valid rule refused: %s\n", d->fields);
        exit(2);
    }
}

/* One key of the pool: "k<i>", or with a long tail of the same i. */
static int draw_key(prng_t *r, char *key, long pool)
{
    long i = prng_range(r, 0, pool - 1);
    if (i % 3 == 0) {
        return snprintf(key, KEY_LEN + 1, "user-%ld-%040ld", i, i);
    }
    return snprintf(key, KEY_LEN + 1, "k%ld", i);
}

static void draw_log(prng_t *r, draw_t *d)
{
    long pool = prng_chance(r, 20) ? prng_range(r, 200, 1500) : prng_range(r, 1, 40);
    size_t n = (size_t)prng_range(r, 0, LINES_MAX);
    int64_t t = prng_range(r, 0, 1000000);
    d->log = malloc(n * (KEY_LEN + 48) + 1);
    d->log_len = 0;
    d->lines = n;
    d->steps_back = prng_chance(r, 10);
    for (size_t i = 0; i < n; i++) {
        char *p = d->log + d->log_len;
        if (prng_chance(r, 3)) {
            d->log_len += (size_t)sprintf(p, prng_chance(r, 50) ? "\n" : "# a comment\n");
            continue;
        }
        t += d->steps_back && prng_chance(r, 10) ? -prng_range(r, 0, 50) : prng_range(r, 0, 40);
        t = t < 0 ? 0 : t;
        char key[KEY_LEN + 1];
        draw_key(r, key, pool);
        int64_t cost = prng_chance(r, 50) ? 1 : prng_range(r, 0, 3 * d->rule.limit);
        d->log_len += (size_t)sprintf(p, "%" PRId64 " %s %" PRId64 "\n", t, key, cost);
    }
    d->log[d->log_len] = '\0';
}

/* The reference: the first `lines` lines of the log, no limits. */
static void reference(const draw_t *d, size_t lines, replay_tally_t *t)
{
    sl_table_t *table;
    sl_table_config_t cfg = {.key_max = REPLAY_KEY_MAX};
    if (d->steps_back) {
        cfg = (sl_table_config_t){.key_max = REPLAY_KEY_MAX, .max_bytes = d->budget, .shards = 1};
    }
    if (sl_table_create(&d->rule, &cfg, &table) != SL_OK) {
        exit(2);
    }
    const char *p = d->log;
    for (size_t i = 0; i < lines; i++) {
        const char *nl = strchr(p, '\n');
        struct replay_request req;
        sl_decision_t dec;
        if (replay_parse_line(p, (size_t)(nl - p) + 1, SL_NS_PER_MS, &req, NULL, 0) ==
                REPLAY_LINE_REQUEST &&
            replay_step(table, t, &req, &dec) != SL_OK) {
            exit(2);
        }
        p = nl + 1;
    }
    sl_table_free(table);
}

/* The reference's count of key (len bytes), or NULL. */
static const replay_tally_key_t *ref_key(const replay_tally_t *t, const char *key, size_t len)
{
    for (size_t e = 0; e < t->n; e++) {
        if (t->keys[e].key_len == len && memcmp(t->keys[e].key, key, len) == 0) {
            return &t->keys[e];
        }
    }
    return NULL;
}

static long long jnum(json_t *o, const char *field)
{
    return json_integer_value(json_object_get(o, field));
}

/* Checks the listed keys against the reference; NULL or what failed. */
static const char *check_keys(json_t *keys, const replay_tally_t *ref)
{
    size_t listed = json_array_size(keys);
    if (listed != (ref->n < REPLAY_KEYS_OUT ? ref->n : REPLAY_KEYS_OUT)) {
        return "prefix: keys listed";
    }
    for (size_t i = 0; i < listed; i++) {
        json_t *k = json_array_get(keys, i);
        const char *key = json_string_value(json_object_get(k, "key"));
        const replay_tally_key_t *want = key ? ref_key(ref, key, strlen(key)) : NULL;
        if (want == NULL || (uint64_t)jnum(k, "admitted") != want->admitted ||
            (uint64_t)jnum(k, "rejected") != want->rejected) {
            return "prefix: a key's counts";
        }
        json_t *prev = i > 0 ? json_array_get(keys, i - 1) : NULL;
        const char *pk = prev ? json_string_value(json_object_get(prev, "key")) : NULL;
        if (prev != NULL &&
            (jnum(prev, "rejected") < jnum(k, "rejected") ||
             (jnum(prev, "rejected") == jnum(k, "rejected") &&
              (jnum(prev, "admitted") < jnum(k, "admitted") ||
               (jnum(prev, "admitted") == jnum(k, "admitted") && strcmp(pk, key) >= 0))))) {
            return "prefix: key order";
        }
    }
    return NULL;
}

/* The claims over one answer; NULL or what failed. */
static const char *check(const draw_t *d, const replay_limits_t *lim, const replay_answer_t *a,
                         json_t *o, const replay_tally_t *ref)
{
    if (a->status != 200 || o == NULL) {
        return "the answer is not a 200 with JSON";
    }
    bool complete = json_is_true(json_object_get(o, "complete"));
    const char *why = json_string_value(json_object_get(o, "stopped"));
    if ((size_t)jnum(o, "lines_replayed") != a->lines || complete != (a->lines == d->lines) ||
        complete != (why == NULL)) {
        return "stop: complete, stopped and lines_replayed disagree";
    }
    bool flag = lim->stop != NULL && atomic_load(lim->stop);
    const char *cause = flag                                         ? "shutdown"
                        : ticks > 0 && ticks - 1 >= lim->deadline_ns ? "deadline"
                                                                     : "memory";
    if (!complete && strcmp(why, cause) != 0) {
        return "stop: the cause named";
    }
    if (a->peak_bytes > lim->memory_max) {
        return "budget: held more than the budget";
    }
    if ((uint64_t)jnum(o, "admitted") != ref->admitted ||
        (uint64_t)jnum(o, "rejected") != ref->rejected) {
        return "prefix: totals";
    }
    long long sa = 0, sr = 0;
    json_t *series = json_object_get(o, "series");
    for (size_t i = 0; i < json_array_size(series); i++) {
        sa += jnum(json_array_get(series, i), "admitted");
        sr += jnum(json_array_get(series, i), "rejected");
    }
    if (json_array_size(series) > REPLAY_BUCKETS || sa != jnum(o, "admitted") ||
        sr != jnum(o, "rejected")) {
        return "series: buckets and totals";
    }
    return check_keys(json_object_get(o, "keys"), ref);
}

/* One case; returns the stop it ended with, or -1 when a claim failed. */
static int run_case(uint64_t seed, long idx)
{
    prng_t r = prop_case_prng(seed, 0, idx);
    draw_t d;
    draw_rule(&r, &d);
    draw_log(&r, &d);
    json_t *logj = json_stringn(d.log, d.log_len);
    char *logtext = json_dumps(logj, JSON_ENCODE_ANY);
    size_t blen = strlen(d.fields) + strlen(logtext) + 16;
    char *body = malloc(blen);
    snprintf(body, blen, "{%s,\"log\":%s}", d.fields, logtext);
    _Atomic bool stop = prng_chance(&r, 5);
    replay_limits_t lim = {
        .deadline_ns =
            prng_chance(&r, 40) ? prng_range(&r, 0, 2 * (int64_t)d.lines + 4) : INT64_MAX,
        .memory_max = d.budget = d.heavy ? (size_t)prng_range(&r, 2 * 1024, 12 * 1024)
                                         : (size_t)prng_range(&r, 64 * 1024, 4 * 1024 * 1024),
        .clock_ns = tick_clock,
        .stop = prng_chance(&r, 50) ? &stop : NULL};
    ticks = 0;
    replay_answer_t a;
    replay_job_run(body, strlen(body), &lim, &a);
    json_t *o = a.status == 200 ? json_loadb(a.body.data, a.body.len, 0, NULL) : NULL;
    replay_tally_t ref = {0};
    reference(&d, a.lines, &ref);
    const char *failed = check(&d, &lim, &a, o, &ref);
    if (failed != NULL) {
        fprintf(stderr,
                "FAIL case %ld (SLUICE_SEED=%#" PRIx64 "): %s; rule {%s}, %zu lines, "
                "budget %zu, deadline %" PRId64 ", replayed %zu: %.*s\n",
                idx, seed, failed, d.fields, d.lines, lim.memory_max, lim.deadline_ns, a.lines,
                a.status == 200 ? (int)(a.body.len < 300 ? a.body.len : 300) : 300,
                a.status == 200 ? a.body.data : a.err);
    }
    int stopped = failed != NULL ? -1 : (int)a.stopped;
    replay_tally_free(&ref);
    json_decref(o);
    replay_job_answer_free(&a);
    free(body);
    free(logtext);
    json_decref(logj);
    free(d.log);
    return stopped;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 400);
    long fails = 0, by_stop[4] = {0};
    for (long i = 0; i < cases; i++) {
        int s = run_case(seed, i);
        if (s < 0 && ++fails >= FAILS_SHOWN) {
            break;
        }
        by_stop[s < 0 ? 0 : s] += s >= 0;
    }
    printf("replay on a budget: %ld cases, seed %#" PRIx64 ": complete %ld, deadline %ld, "
           "memory %ld, shutdown %ld; %ld failed\n",
           cases, seed, by_stop[REPLAY_COMPLETE], by_stop[REPLAY_STOP_DEADLINE],
           by_stop[REPLAY_STOP_MEMORY], by_stop[REPLAY_STOP_SHUTDOWN], fails);
    /* every way to end must have been met, or the claims were not all exercised */
    bool all = by_stop[0] > 0 && by_stop[1] > 0 && by_stop[2] > 0 && by_stop[3] > 0;
    if (!all && fails == 0) {
        printf("FAIL: some way to end was never drawn\n");
    }
    return fails == 0 && all ? 0 : 1;
}
