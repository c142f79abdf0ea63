/*
 * redis_request.c - the Redis request store's entry (request_store.h): an adapter over
 * redis_store.h, where the module and Lua ways to decide live. The store is engine-wide (the
 * nodes' modes, the caches' epochs: redis_shared_t); each loop has its own redis_store_t, and
 * its table of leases for leased rules (redis_lease.h) and of counts for approximate rules
 * (redis_approx.h), which decide those rules' keys. Keys
 * under any numbers of one algorithm share one state in Redis, so there is no override handle
 * and nothing to move when a key's override changes; per rule there is only its closed start
 * (cold_start: closed, after its algorithm changed), which Redis applies to keys it does not
 * hold (redis_store.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis_approx.h"
#include "store/redis_lease.h"
#include "store/redis_store.h"
#include "store/request_store.h"

typedef struct redis_request {
    request_store_t base;
    rc_config_t rc;         /* where */
    redis_shared_t *shared; /* what every loop's store shares (modes, caches) */
    store_config_t cfg;
} redis_request_t;

/* A rule's closed start: keys first decided before until_ns, and absent from Redis, start as
 * having used their whole quota at from_ns; counted, since a lease holds it until it is given
 * back (redis_lease.h). */
struct store_rule {
    redis_rule_ref_t ref;    /* first: freed through it */
    int64_t closed_from_ns;  /* ns since the Unix epoch; 0 none */
    int64_t closed_until_ns; /* ns since the Unix epoch */
};

/* A loop's store: its decisions, its leases and its approximate counts. */
typedef struct redis_loop {
    redis_store_t *rs;
    redis_leases_t *leases;
    redis_approx_t *approx;
} redis_loop_t;

extern const request_store_ops_t redis_request_ops; /* this file's entry, at its end */

static bool redis_accepts(const char *url)
{
    return url != NULL &&
           (strncmp(url, "redis://", 8) == 0 || strncmp(url, "redis-cluster://", 16) == 0);
}

/* Redis's events, as the request store's (request_store.h). */
static void redis_event(void *arg, redis_event_t ev, const char *text)
{
    const redis_request_t *r = arg;
    static const store_event_t as[] = {[REDIS_EVENT_TIMEOUT] = STORE_EVENT_TIMEOUT,
                                       [REDIS_EVENT_ERROR] = STORE_EVENT_ERROR,
                                       [REDIS_EVENT_DOWN] = STORE_EVENT_DOWN,
                                       [REDIS_EVENT_UP] = STORE_EVENT_UP,
                                       [REDIS_EVENT_LATE_REFUND] = STORE_EVENT_LATE_REFUND,
                                       [REDIS_EVENT_LATE_REFUND_FAILED] =
                                           STORE_EVENT_LATE_REFUND_FAILED,
                                       [REDIS_EVENT_UNREPLICATED] = STORE_EVENT_UNREPLICATED};
    if (r->cfg.event != NULL) {
        r->cfg.event(r->cfg.event_arg, as[ev], text);
    }
}

static int redis_open(const char *url, const store_config_t *cfg, request_store_t **out, char *err)
{
    redis_request_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    char rerr[RC_ERR_MAX > REDIS_STORE_ERR_MAX ? RC_ERR_MAX : REDIS_STORE_ERR_MAX];
    if (rc_parse_url(url, &r->rc, rerr) != 0 ||
        redis_shared_create(&r->rc, cfg->timeout_ns, &r->shared, rerr) != 0) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "%s", rerr);
        free(r);
        return -1;
    }
    r->base.ops = &redis_request_ops;
    r->cfg = *cfg;
    redis_shared_on_event(r->shared, redis_event, r);
    *out = &r->base;
    return 0;
}

static void redis_close(request_store_t *s)
{
    redis_request_t *r = (redis_request_t *)s;
    redis_shared_free(r->shared);
    free(r);
}

/* What a probe of a Redis node found (its mode changed, it lost its data, and so a closed
 * start there): a line each, from whichever loop saw it first. */
static void node_news(void *arg, const char *node, unsigned news, redis_mode_t mode)
{
    const redis_request_t *r = arg;
    store_note_fn note = r->cfg.note;
    char text[REQUEST_STORE_ERR_MAX];
    if (note == NULL) {
        return;
    }
    if ((news & REDIS_NODE_MODE) && mode == REDIS_MODE_MODULE) {
        snprintf(text, sizeof text, "redis %s: sluice.so is loaded: deciding with its commands",
                 node);
        note(0, text);
    } else if (news & REDIS_NODE_MODE) {
        snprintf(text, sizeof text,
                 "redis %s: sluice.so is not loaded: deciding with the Lua "
                 "scripts",
                 node);
        note(1, text);
    }
    if (news & REDIS_NODE_CLOSED) {
        snprintf(text, sizeof text,
                 "redis %s: cold start closed on this node: %s; for one window, its keys that "
                 "are not there start as having used their whole quota (rules with cold_start: "
                 "closed), the others fresh",
                 node,
                 (news & REDIS_NODE_LOST) ? "its data was lost (another run_id: it restarted or "
                                            "failed over)"
                                          : "its keys are under the new mode's names");
        note(1, text);
    }
}

static int redis_attach(request_store_t *s, uv_loop_t *loop, store_loop_t **slot, char *err)
{
    redis_request_t *r = (redis_request_t *)s;
    char rerr[REDIS_STORE_ERR_MAX];
    redis_loop_t *rl = calloc(1, sizeof *rl);
    if (rl == NULL) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "redis store: out of memory");
        return -1;
    }
    if (redis_store_create(loop, &r->rc, r->shared, r->cfg.timeout_ns, node_news, r, &rl->rs,
                           rerr) != 0) {
        snprintf(err, REQUEST_STORE_ERR_MAX, "redis store: %s", rerr);
        free(rl);
        return -1;
    }
    if ((rl->leases = redis_leases_create(loop, rl->rs)) == NULL ||
        (rl->approx = redis_approx_create(loop, rl->rs)) == NULL) {
        redis_store_free(rl->rs);
        redis_leases_free(rl->leases);
        free(rl);
        snprintf(err, REQUEST_STORE_ERR_MAX, "redis store: out of memory");
        return -1;
    }
    redis_shared_set(r->shared, (void **)slot, rl); /* stats() reads it */
    return 0;
}

static void redis_detach(request_store_t *s, store_loop_t **slot)
{
    redis_request_t *r = (redis_request_t *)s;
    redis_loop_t *rl = (redis_loop_t *)*slot;
    if (rl != NULL) {
        redis_shared_set(r->shared, (void **)slot, NULL);
        redis_store_free(rl->rs); /* answers what is in flight, leases, returns, syncs too */
        redis_leases_free(rl->leases);
        redis_approx_free(rl->approx);
        free(rl);
    }
}

static int redis_rule_new(request_store_t *s, const sl_rule_t *numbers, store_rule_t **out)
{
    (void)s;
    (void)numbers;
    *out = calloc(1, sizeof **out);
    if (*out == NULL) {
        return -1;
    }
    atomic_init(&(*out)->ref.refs, 1);
    return 0;
}

/* The numbers changed: a closed start in force goes on. */
static void redis_rule_migrate(store_rule_t *to, store_rule_t *from, int64_t now_ns)
{
    if (from->closed_until_ns > now_ns) {
        to->closed_from_ns = from->closed_from_ns;
        to->closed_until_ns = from->closed_until_ns;
    }
}

/* Freed when the last lease under it has been given back (redis_lease.h). */
static void redis_rule_free(store_rule_t *r)
{
    redis_rule_ref_retire(&r->ref);
}

static void redis_cold_start(store_rule_t *r, int64_t from_ns, int64_t until_ns, bool renew)
{
    if (renew || r->closed_until_ns <= from_ns) {
        r->closed_from_ns = from_ns;
        r->closed_until_ns = until_ns;
    }
}

/* The rule's closed start as redis_store_decide takes it: -1 for an open rule, else the time of
 * its own closed start while it lasts at now_ns (0: none; the node's may still apply). */
static int64_t closed_of(const store_target_t *tg, int64_t now_ns)
{
    if (!tg->closed) {
        return -1;
    }
    const store_rule_t *r = tg->rule;
    return r != NULL && now_ns < r->closed_until_ns ? r->closed_from_ns : 0;
}

/* tg as a leased decision names it. */
static redis_lease_target_t lease_target(const store_target_t *tg, int64_t now_ns)
{
    return (redis_lease_target_t){.ref = &tg->rule->ref,
                                  .name = tg->name,
                                  .rule = tg->numbers,
                                  .key = tg->key,
                                  .key_len = tg->key_len,
                                  .lease_ns = tg->lease_ns,
                                  .closed_ns = closed_of(tg, now_ns)};
}

/* tg as an approximate decision names it. */
static redis_approx_target_t approx_target(const store_target_t *tg, int64_t now_ns)
{
    return (redis_approx_target_t){.name = tg->name,
                                   .rule = tg->numbers,
                                   .key = tg->key,
                                   .key_len = tg->key_len,
                                   .sync_ns = tg->sync_ns,
                                   .closed_ns = closed_of(tg, now_ns)};
}

/* What a call through the seam returns: the answer found inside it (request_store.h: never
 * called back inside the call), else STORE_PENDING. */
static int inside_result(const redis_inside_t *in)
{
    if (!in->answered) {
        return STORE_PENDING;
    }
    bool own = in->status == SL_EDEBT || in->status == SL_EHOLD || in->status == SL_EHOLDTIME;
    return in->status == 0 ? SL_OK : own ? in->status : SL_EINVAL;
}

/* Leased: from a lease when it can (redis_lease.h); approximate: from the key's count when it
 * can (redis_approx.h); peeks and settles are strict. */
static void decide_inside(redis_loop_t *rl, const store_target_t *tg, const store_request_t *req,
                          int64_t now_ns, store_done_fn fn, void *arg)
{
    redis_store_t *rs = rl->rs;
    int64_t closed_ns = closed_of(tg, now_ns);
    redis_leases_asked(rl->leases);
    if (req->hold_op != STORE_HOLD_NONE) { /* in-flight rules are strict (no lease, no count) */
        redis_hold_req_t hr = {.release = req->hold_op == STORE_HOLD_RELEASE,
                               .cost = req->cost,
                               .hold_ns = req->hold_ns,
                               .id = req->hold_id,
                               .hold = req->hold,
                               .closed_ns = closed_ns,
                               .reserve = req->reserve,
                               .sampled = req->sampled,
                               .sample = req->sample};
        redis_store_hold(rs, tg->name, tg->numbers, tg->key, tg->key_len, &hr, now_ns, fn, arg);
    } else if (tg->lease_ns > 0 && tg->rule != NULL && !req->settle && req->cost > 0) {
        redis_lease_target_t lt = lease_target(tg, now_ns);
        redis_leases_decide(rl->leases, &lt, req->cost, now_ns, fn, arg);
    } else if (tg->sync_ns > 0 && !req->settle && req->cost > 0) {
        redis_approx_target_t at = approx_target(tg, now_ns);
        redis_approx_decide(rl->approx, &at, req->cost, now_ns, fn, arg);
    } else if (req->settle) {
        redis_store_settle(rs, tg->name, tg->numbers, tg->key, tg->key_len, req->reserved,
                           req->actual, req->charged_ns, closed_ns, now_ns, fn, arg);
    } else {
        redis_acks_t acks = {.replicas = req->cost > 0 ? tg->replicas : 0,
                             .wait_ms = tg->replica_wait_ms};
        redis_store_decide_acked(rs, tg->name, tg->numbers, tg->key, tg->key_len, req->cost,
                                 req->reserve, closed_ns, now_ns, &acks, fn, arg);
    }
}

/* An answer found at once (a cached refusal, a lease's units, a key's count, a request that
 * could not be sent) is returned; fn is called only for an answer that comes later. */
static int redis_decide(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                        const store_request_t *req, int64_t now_ns, sl_decision_t *d,
                        store_done_fn fn, void *arg)
{
    (void)s;
    redis_loop_t *rl = (redis_loop_t *)l;
    redis_inside_t in = {.fn = fn, .arg = arg, .d = d};
    redis_inside_t *before = redis_store_enter(rl->rs, &in);
    decide_inside(rl, tg, req, now_ns, fn, arg);
    redis_store_leave(rl->rs, before);
    return inside_result(&in);
}

/* From the keys' leases when every one has the units (answered at once: d[], *at = n), else
 * the one-slot script when every pair asks one cost, else STORE_ENOTSUP: pair by pair. */
static int redis_decide_all(request_store_t *s, store_loop_t *l, const store_pair_t *pairs,
                            size_t n, int64_t now_ns, sl_decision_t *d, size_t *at, store_all_fn fn,
                            void *arg)
{
    (void)s;
    redis_loop_t *rl = (redis_loop_t *)l;
    redis_pair_t rp[REDIS_ALL_MAX];
    redis_lease_target_t lt[REDIS_ALL_MAX];
    if (n == 0 || n > REDIS_ALL_MAX) {
        return STORE_ENOTSUP;
    }
    bool leased = true;
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].cost != pairs[0].cost || pairs[i].tg.replicas > 0) {
            return STORE_ENOTSUP; /* a rule with replicas waits for them pair by pair */
        }
        leased = leased && pairs[i].tg.lease_ns > 0 && pairs[i].tg.rule != NULL;
        if (leased) {
            lt[i] = lease_target(&pairs[i].tg, now_ns);
        }
        rp[i] = (redis_pair_t){.name = pairs[i].tg.name,
                               .rule = pairs[i].tg.numbers,
                               .key = pairs[i].tg.key,
                               .key_len = pairs[i].tg.key_len,
                               .shadow = pairs[i].shadow,
                               .closed_ns = closed_of(&pairs[i].tg, now_ns)};
    }
    if (leased && redis_leases_take_all(rl->leases, lt, n, pairs[0].cost, d)) {
        *at = n; /* every key's lease had the units: answered at once */
        return SL_OK;
    }
    if (redis_store_decide_all(rl->rs, rp, n, pairs[0].cost, now_ns, fn, arg) != 0) {
        return STORE_ENOTSUP;
    }
    return STORE_PENDING;
}

/* The key under the rule's own numbers: an override's key (other numbers, same name) is the
 * same key in Redis. */
static int redis_reset(request_store_t *s, store_loop_t *l, const store_target_t *tg,
                       store_done_fn fn, void *arg)
{
    (void)s;
    redis_loop_t *rl = (redis_loop_t *)l;
    if (tg->rule != NULL) {
        redis_lease_target_t lt = lease_target(tg, 0);
        redis_leases_drop(rl->leases, &lt); /* nothing to give back to a key deleted */
    }
    redis_approx_target_t at = approx_target(tg, 0);
    redis_approx_drop(rl->approx, &at); /* nor to charge it */
    redis_inside_t in = {.fn = fn, .arg = arg};
    redis_inside_t *before = redis_store_enter(rl->rs, &in);
    redis_store_reset(rl->rs, tg->name, tg->numbers, tg->key, tg->key_len, fn, arg);
    redis_store_leave(rl->rs, before);
    return inside_result(&in);
}

static void redis_forget(store_loop_t *l, const store_target_t *tg)
{
    redis_store_forget(((redis_loop_t *)l)->rs, tg->name, tg->numbers, tg->key, tg->key_len);
}

static unsigned redis_stop(store_loop_t *l)
{
    redis_loop_t *rl = (redis_loop_t *)l;
    unsigned leases = redis_leases_stop(rl->leases);
    return leases + redis_approx_stop(rl->approx);
}

static const char *redis_describe(const request_store_t *s)
{
    const redis_request_t *r = (const redis_request_t *)s;
    size_t module, lua;
    redis_shared_modes(r->shared, &module, &lua);
    if (lua == 0) {
        return "redis (sluice.so module)";
    }
    return module == 0 ? "redis (Lua scripts)"
                       : "redis (sluice.so module on some nodes, Lua scripts on others)";
}

static void redis_modes(const request_store_t *s, size_t *module_nodes, size_t *lua_nodes)
{
    const redis_request_t *r = (const redis_request_t *)s;
    redis_shared_modes(r->shared, module_nodes, lua_nodes);
}

/* ---- statistics (request_store.h: store_stat_t) ------------------------------------------- */

/* Where each number is in a loop's values. */
enum {
    V_DECISIONS,
    V_CACHE_HITS,
    V_TIMEOUTS,
    V_ERRORS,
    V_NOSCRIPT,
    V_REDIRECTS,
    V_REFRESHES,
    V_RECONNECTS,
    V_LEASES_TAKEN,
    V_LEASES_RETURNED,
    V_LEASES_UNRETURNED,
    V_LEASE_UNITS,
    V_LEASE_SPENT,
    V_LEASE_HITS,
    V_ASKED,
    V_APPROX_SYNCS,
    V_APPROX_FAILURES,
    V_APPROX_UNITS,
    V_APPROX_LOCAL,
    V_APPROX_LAG_NS,
    V_NODES_DOWN,
    V_NODES_MODULE,
    V_NODES_LUA,
    V_COUNT
};
_Static_assert(V_COUNT <= STORE_STAT_VALUES_MAX, "the values fit store_stats_t");

#define C STORE_STAT_COUNTER
#define G STORE_STAT_GAUGE
static const store_stat_t redis_stat_list[] = {
    {"sluice_redis_decisions_total",
     "Commands sent to Redis: decisions, settles, leases and their returns.", "", "", C,
     STORE_STAT_INT, V_DECISIONS, 0, false},
    {"sluice_redis_cache_hits_total",
     "Decisions answered from the over-limit cache, without a round trip.", "", "", C,
     STORE_STAT_INT, V_CACHE_HITS, 0, false},
    {"sluice_redis_timeouts_total", "Decisions past their deadline (on_store_error).", "", "", C,
     STORE_STAT_INT, V_TIMEOUTS, 0, false},
    {"sluice_redis_errors_total", "Redis replies that were errors, or none.", "", "", C,
     STORE_STAT_INT, V_ERRORS, 0, false},
    {"sluice_redis_noscript_total", "EVALSHA answered NOSCRIPT (re-sent as EVAL).", "", "", C,
     STORE_STAT_INT, V_NOSCRIPT, 0, false},
    {"sluice_redis_redirects_total", "MOVED and ASK redirects followed.", "", "", C, STORE_STAT_INT,
     V_REDIRECTS, 0, false},
    {"sluice_redis_slot_refreshes_total", "Cluster slot map reloads.", "", "", C, STORE_STAT_INT,
     V_REFRESHES, 0, false},
    {"sluice_redis_reconnects_total", "Connections to Redis made again.", "", "", C, STORE_STAT_INT,
     V_RECONNECTS, 0, false},
    {"sluice_redis_leases_total",
     "Leases of leased rules: taken (granted units), returned (unused units given back), "
     "unreturned (unused units never given back: the node lost its data, a return failed, "
     "a reset, a stop).",
     "", "event=\"taken\"", C, STORE_STAT_INT, V_LEASES_TAKEN, 0, false},
    {"sluice_redis_leases_total", NULL, "", "event=\"returned\"", C, STORE_STAT_INT,
     V_LEASES_RETURNED, 0, false},
    {"sluice_redis_leases_total", NULL, "", "event=\"unreturned\"", C, STORE_STAT_INT,
     V_LEASES_UNRETURNED, 0, false},
    {"sluice_redis_lease_units_total",
     "Units of leases: granted by Redis, and spent here by decisions answered from them.", "",
     "use=\"granted\"", C, STORE_STAT_INT, V_LEASE_UNITS, 0, false},
    {"sluice_redis_lease_units_total", NULL, "", "use=\"spent\"", C, STORE_STAT_INT, V_LEASE_SPENT,
     0, false},
    {"sluice_redis_lease_hits_total", "Decisions answered from a lease, without a Redis command.",
     "", "", C, STORE_STAT_INT, V_LEASE_HITS, 0, false},
    {"sluice_redis_asked_total", "Decisions and settles asked of the Redis store, leased or not.",
     "", "", C, STORE_STAT_INT, V_ASKED, 0, false},
    {"sluice_redis_commands_per_decision",
     "Redis commands sent per decision or settle asked, since start.", "", "", G, STORE_STAT_RATIO,
     V_DECISIONS, V_ASKED, false},
    {"sluice_redis_approx_syncs_total",
     "Syncs of approximate rules' keys sent to Redis (one command each): sent, and failed "
     "(their units are sent again with the next).",
     "", "event=\"sent\"", C, STORE_STAT_INT, V_APPROX_SYNCS, 0, false},
    {"sluice_redis_approx_syncs_total", NULL, "", "event=\"failed\"", C, STORE_STAT_INT,
     V_APPROX_FAILURES, 0, false},
    {"sluice_redis_approx_units_total",
     "Units admitted here by approximate rules and charged to Redis by syncs.", "", "", C,
     STORE_STAT_INT, V_APPROX_UNITS, 0, false},
    {"sluice_redis_approx_local_total",
     "Decisions of approximate rules answered here from a key's count, without a command.", "", "",
     C, STORE_STAT_INT, V_APPROX_LOCAL, 0, false},
    {"sluice_redis_approx_sync_lag_seconds",
     "Age of the count each local decision of an approximate rule was made from: the time "
     "since the request that brought it was sent.",
     "_sum", "", STORE_STAT_SUMMARY, STORE_STAT_SECONDS, V_APPROX_LAG_NS, 0, false},
    {"sluice_redis_approx_sync_lag_seconds", NULL, "_count", "", STORE_STAT_SUMMARY, STORE_STAT_INT,
     V_APPROX_LOCAL, 0, false},
    {"sluice_redis_up",
     "1 while every connection to Redis is up, 0 while one is lost or cannot be made.", "", "", G,
     STORE_STAT_NONE, V_NODES_DOWN, 0, false},
    {"sluice_redis_connections_down",
     "Connections to Redis nodes (one per loop and node) lost or not made, not yet made "
     "again.",
     "", "", G, STORE_STAT_INT, V_NODES_DOWN, 0, false},
    {"sluice_redis_nodes",
     "Redis nodes deciding with the sluice.so module or with the Lua scripts.", "",
     "mode=\"module\"", G, STORE_STAT_INT, V_NODES_MODULE, 0, true},
    {"sluice_redis_nodes", NULL, "", "mode=\"lua\"", G, STORE_STAT_INT, V_NODES_LUA, 0, true},
};
#undef C
#undef G

/* The values of a loop's store, under the lock that keeps it from being freed meanwhile. */
static void stats_of(void *arg, const void *loop)
{
    uint64_t *v = arg;
    const redis_loop_t *rl = loop;
    const redis_store_stats_t *s = redis_store_stats(rl->rs);
    const rc_stats_t *r = redis_store_client_stats(rl->rs);
    const redis_lease_stats_t *l = redis_leases_stats(rl->leases);
    const redis_approx_stats_t *a = redis_approx_stats(rl->approx);
#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
    v[V_DECISIONS] = LOAD(s->decisions);
    v[V_CACHE_HITS] = LOAD(s->cache_hits);
    v[V_TIMEOUTS] = LOAD(s->timeouts);
    v[V_ERRORS] = LOAD(s->errors);
    v[V_NOSCRIPT] = LOAD(s->noscript);
    v[V_REDIRECTS] = LOAD(r->redirects);
    v[V_REFRESHES] = LOAD(r->refreshes);
    v[V_RECONNECTS] = LOAD(r->reconnects);
    v[V_LEASES_TAKEN] = LOAD(l->taken);
    v[V_LEASES_RETURNED] = LOAD(l->returned);
    v[V_LEASES_UNRETURNED] = LOAD(l->unreturned);
    v[V_LEASE_UNITS] = LOAD(l->units);
    v[V_LEASE_SPENT] = LOAD(l->spent);
    v[V_LEASE_HITS] = LOAD(l->hits);
    v[V_ASKED] = LOAD(l->asked);
    v[V_APPROX_SYNCS] = LOAD(a->syncs);
    v[V_APPROX_FAILURES] = LOAD(a->failures);
    v[V_APPROX_UNITS] = LOAD(a->units);
    v[V_APPROX_LOCAL] = LOAD(a->local);
    v[V_APPROX_LAG_NS] = LOAD(a->lag_ns);
    v[V_NODES_DOWN] = LOAD(r->down);
#undef LOAD
}

static void redis_stats(request_store_t *s, store_loop_t *const *slot, uint64_t *value)
{
    redis_request_t *r = (redis_request_t *)s;
    redis_shared_visit(r->shared, (void *const *)slot, stats_of, value);
    size_t module, lua;
    redis_shared_modes(r->shared, &module, &lua);
    value[V_NODES_MODULE] = module;
    value[V_NODES_LUA] = lua;
}

const request_store_ops_t redis_request_ops = {
    .name = "redis",
    .url_form = "redis://[[USER]:PASSWORD@]host:port or "
                "redis-cluster://[[USER]:PASSWORD@]host:port,host:port,...",
    .leases = true,
    .holds = true,
    .accepts = redis_accepts,
    .open = redis_open,
    .close = redis_close,
    .stat_list = redis_stat_list,
    .nstat = sizeof redis_stat_list / sizeof redis_stat_list[0],
    .attach = redis_attach,
    .detach = redis_detach,
    .stop = redis_stop,
    .rule_new = redis_rule_new,
    .rule_migrate = redis_rule_migrate,
    .rule_free = redis_rule_free,
    .cold_start = redis_cold_start,
    .decide = redis_decide,
    .decide_all = redis_decide_all,
    .reset = redis_reset,
    .forget = redis_forget,
    .describe = redis_describe,
    .modes = redis_modes,
    .stats = redis_stats,
};

_Static_assert(STORE_ALL_RETRY == REDIS_ALL_RETRY && STORE_ALL_MAX == REDIS_ALL_MAX,
               "redis_store_decide_all's answer is passed on as it is");
