/*
 * prop_override_outage.c - a blocking override once known is never bypassed while the config
 * store fails, whatever happens around it (white-box: src/engine/overrides.c and
 * override_known.c, over a real SQLite store, no config thread: each lookup is read at once).
 *
 * Each case is a random sequence over a pool of keys, some of which share a cache slot (so that
 * answers evict each other): overrides set (blocked, or another limit) and deleted through a
 * second connection; the store broken (its overrides table renamed away: every lookup fails) and
 * repaired; the rule's numbers changed (a new rule set: every cached answer stale); and
 * decisions, each after the cache's TTL (1 ns) has passed, so that every decision asks the store.
 *
 * Model: for each key, the store's override, and what the engine was last told of it (the
 * answer of its last lookup that worked: blocked, other numbers, none, or nothing yet).
 * Property, for every decision:
 *   - the store works: the decision is the store's override's (refused as blocked when it
 *     blocks, admitted otherwise), never by on_store_error;
 *   - the store fails: a key last known blocked is refused as blocked; a key last known not
 *     blocked is admitted (by what is known, or by on_store_error when an eviction lost a "none";
 *     the rule allows on error); a key never looked up is decided by on_store_error.
 * SLUICE_SEED replays a run, SLUICE_CASE=0:<n> one case.
 */
#define _GNU_SOURCE /* nftw's FTW_DEPTH, for tmpdir.h */
#include <sqlite3.h>

#include "prop/gen.h"
#include "engine/engine_impl.h"
#include "tmpdir.h"

#define CASES     120
#define OPS       400
#define KEYS      24 /* the pool: KEYS / 2 names and a slot-sharing twin of each */
#define NS_PER_MS INT64_C(1000000)

enum ov { OV_NONE, OV_BLOCKED, OV_LIMIT, OV_UNKNOWN };

typedef struct model {
    enum ov store[KEYS];
    enum ov known[KEYS];
    bool broken;
    int64_t limit; /* the rule's */
} model_t;

static char path[TMPDIR_MAX + 32];
static char keys[KEYS][40];

static void sql(sqlite3 *db, const char *text)
{
    char *msg = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", text, msg);
        exit(2);
    }
}

static void put_rule(config_store_t *s, int64_t limit)
{
    char json[160], serr[CONFIG_STORE_ERR_MAX];
    snprintf(json, sizeof json,
             "{\"algorithm\":\"fixed_window\",\"limit\":%lld,\"window\":\"1h\","
             "\"on_store_error\":\"allow\"}",
             (long long)limit);
    if (config_store_put_rule(s, "api", json, NULL, serr) != 0) {
        fprintf(stderr, "put rule: %s\n", serr);
        exit(2);
    }
}

/* The pool: key i and key i + KEYS/2 share a cache slot under rule api (found by trying). */
static void make_keys(const rule_state_t *rs, prng_t *r)
{
    for (int i = 0; i < KEYS / 2; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d-%llu", i, (unsigned long long)prng_next(r) % 1000);
        uint64_t want = sl_hash64(keys[i], strlen(keys[i]), rs->name_hash) & (OV_CACHE_SLOTS - 1);
        for (long n = 0;; n++) {
            int len = snprintf(keys[i + KEYS / 2], sizeof keys[0], "t%d-%ld", i, n);
            if ((sl_hash64(keys[i + KEYS / 2], (size_t)len, rs->name_hash) &
                 (OV_CACHE_SLOTS - 1)) == want) {
                break;
            }
        }
    }
}

/* One decision on key k at now_ns, checked against the model; returns the failures. */
static int decide_check(engine_worker_t *w, model_t *m, int k, int64_t now_ns, long c, int op)
{
    engine_worker_begin(w);
    rule_state_t *rs = engine_find(w, "api", 3);
    engine_decision_t d;
    if (engine_decide(w, rs, keys[k], strlen(keys[k]), 1, now_ns, &d) != ENGINE_OK) {
        fprintf(stderr, "case %ld op %d: engine_decide failed\n", c, op);
        return 1;
    }
    enum ov want = m->broken ? m->known[k] : m->store[k];
    bool ok;
    if (!m->broken) {
        ok = !d.store_error && d.blocked == (want == OV_BLOCKED) && d.d.allowed == !d.blocked;
        m->known[k] = m->store[k];
    } else if (want == OV_BLOCKED) {
        ok = d.blocked && !d.d.allowed && !d.store_error;
    } else if (want == OV_UNKNOWN) {
        ok = d.store_error && d.d.allowed;
    } else {
        ok = d.d.allowed && !d.blocked;
    }
    if (!ok) {
        fprintf(stderr,
                "case %ld op %d: key %s (store %d, last known %d, store %s): allowed %d blocked "
                "%d store_error %d\n",
                c, op, keys[k], m->store[k], m->known[k], m->broken ? "broken" : "up", d.d.allowed,
                d.blocked, d.store_error);
    }
    return ok ? 0 : 1;
}

/* Sets, changes or deletes key k's override through the second connection. */
static void change_override(config_store_t *admin, model_t *m, int k, prng_t *r)
{
    char serr[CONFIG_STORE_ERR_MAX];
    enum ov to = (enum ov)prng_range(r, OV_NONE, OV_LIMIT);
    int rc = to == OV_NONE
                 ? config_store_del_override(admin, "api", keys[k], strlen(keys[k]), NULL, serr)
                 : config_store_put_override(admin, "api", keys[k], strlen(keys[k]),
                                             to == OV_BLOCKED ? "{\"limit\":0}" : "{\"limit\":500}",
                                             NULL, serr);
    if (rc < 0) {
        fprintf(stderr, "override: %s\n", serr);
        exit(2);
    }
    m->store[k] = to;
}

static int run_case(uint64_t seed, long c)
{
    prng_t r = prop_case_prng(seed, 0, c);
    char serr[CONFIG_STORE_ERR_MAX], err[ENGINE_ERR_MAX];
    tmpdir_file(path, sizeof path, "store", ".db");
    config_store_t *admin = NULL;
    if (config_store_open(path, &admin, serr) != 0) {
        fprintf(stderr, "open: %s\n", serr);
        exit(2);
    }
    model_t m = {.limit = 1000};
    put_rule(admin, m.limit);
    /* an override from the start, so that the rule is looked up */
    config_store_put_override(admin, "api", "seed", 4, "{\"limit\":0}", NULL, serr);
    engine_settings_t ec = {.store_url = path, .workers = 1, .key_max = 1024, .override_ttl_ns = 1};
    engine_t *e = NULL;
    if (engine_create(&ec, &e, err) != 0) {
        fprintf(stderr, "engine_create: %s\n", err);
        exit(2);
    }
    engine_worker_t *w = engine_worker(e, 0);
    engine_worker_begin(w);
    make_keys(engine_find(w, "api", 3), &r);
    for (int k = 0; k < KEYS; k++) {
        m.known[k] = OV_UNKNOWN;
    }
    sqlite3 *raw = NULL;
    if (sqlite3_open(path, &raw) != SQLITE_OK) {
        exit(2);
    }
    sqlite3_busy_timeout(raw, 5000);
    int64_t now_ns = PROP_START;
    int failures = 0;
    for (int op = 0; op < OPS && failures == 0; op++) {
        now_ns += prng_range(&r, 1, 50) * NS_PER_MS;
        int what = (int)prng_range(&r, 0, 99);
        if (what < 15 && !m.broken) {
            change_override(admin, &m, (int)prng_range(&r, 0, KEYS - 1), &r);
        } else if (what < 22) {
            sql(raw, m.broken ? "ALTER TABLE overrides_gone RENAME TO overrides"
                              : "ALTER TABLE overrides RENAME TO overrides_gone");
            m.broken = !m.broken;
        } else if (what < 26) {
            m.limit = m.limit == 1000 ? 2000 : 1000;
            put_rule(admin, m.limit);
            if (engine_reload(e, engine_store(e), false, err) < 0) {
                fprintf(stderr, "reload: %s\n", err);
                exit(2);
            }
        } else {
            failures += decide_check(w, &m, (int)prng_range(&r, 0, KEYS - 1), now_ns, c, op);
        }
    }
    if (m.broken) {
        sql(raw, "ALTER TABLE overrides_gone RENAME TO overrides");
    }
    sqlite3_close(raw);
    engine_worker_end(w);
    engine_free(e);
    config_store_close(admin);
    return failures;
}

int main(void)
{
    uint64_t seed = prop_seed();
    if (tmpdir_create("prop-ov") != 0) {
        return 2;
    }
    long only = -1;
    const char *one = getenv("SLUICE_CASE");
    if (one != NULL && strncmp(one, "0:", 2) == 0) {
        only = strtol(one + 2, NULL, 10);
    }
    int failed = 0;
    for (long c = 0; c < CASES; c++) {
        if ((only < 0 || c == only) && run_case(seed, c) != 0) {
            fprintf(stderr, "replay: SLUICE_SEED=0x%llx SLUICE_CASE=0:%ld\n",
                    (unsigned long long)seed, c);
            failed++;
        }
    }
    tmpdir_remove(NULL);
    printf("prop_override_outage: %d of %d cases failed (seed 0x%llx)\n", failed, CASES,
           (unsigned long long)seed);
    return failed == 0 ? 0 : 1;
}
