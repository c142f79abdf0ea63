/*
 * engine.c - the engine: create/free, its workers and their loops, the config thread's poll, and
 * what it says of its request store (see engine.h; engine_impl.h lists the engine's other
 * files).
 */
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/events.h"
#include "store/request_stores.h"
#include "engine/log.h"

/* The request store says something worth a line of the log. */
static void store_note(int level, const char *text)
{
    if (level == 0) {
        log_info("%s", text);
    } else {
        log_warn("%s", text);
    }
}

/* The request store's failures and reconnections (request_store.h): counted and logged at a
 * limited rate, one line a second per kind at most. */
static void store_event(void *arg, store_event_t ev, const char *text)
{
    (void)arg;
    switch (ev) {
    case STORE_EVENT_TIMEOUT:
        event_note(EV_STORE_TIMEOUT, "%s: the rule's on_store_error decides", text);
        break;
    case STORE_EVENT_ERROR:
        event_note(EV_STORE_ERROR, "%s: the rule's on_store_error decides", text);
        break;
    case STORE_EVENT_DOWN:
        event_note(EV_STORE_DOWN, "%s", text);
        break;
    case STORE_EVENT_UP:
        event_note(EV_STORE_UP, "%s", text);
        break;
    case STORE_EVENT_LATE_REFUND:
        event_note(EV_STORE_LATE_REFUND, "%s", text);
        break;
    case STORE_EVENT_LATE_REFUND_FAILED:
        event_note(EV_STORE_LATE_REFUND_FAILED, "%s", text);
        break;
    case STORE_EVENT_UNREPLICATED:
        event_note(EV_STORE_UNREPLICATED, "%s: the rule's on_store_error decides", text);
        break;
    }
}

/* ---- the engine ---------------------------------------------------------------------------- */

/* Whether changes can be written to the store: the gauge follows, each change logged once. */
static void engine_poll_writable(engine_t *e, config_store_t *store)
{
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_writable(store, serr) != 0) {
        if (strcmp(serr, e->write_problem) != 0) {
            log_error("config store not writable: %s", serr);
            atomic_fetch_add(&e->store_errors, 1);
            snprintf(e->write_problem, sizeof e->write_problem, "%s", serr);
        }
        atomic_store(&e->store_writable, false);
    } else if (e->write_problem[0] != '\0') {
        log_info("config store writable again: changes are accepted");
        e->write_problem[0] = '\0';
        atomic_store(&e->store_writable, true);
    }
}

/* e's request store and config store, from its settings. Returns 0, or -1 with err set. */
static int open_stores(engine_t *e, char *err)
{
    store_config_t scfg = {.max_memory = e->cfg.max_memory,
                           .key_max = e->cfg.key_max,
                           .timeout_ns = e->cfg.store_timeout_ns,
                           .note = store_note,
                           .event = store_event,
                           .event_arg = e};
    char rerr[REQUEST_STORE_ERR_MAX];
    if (request_store_open(e->cfg.request_store, &scfg, &e->requests, rerr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "--store: %.480s", rerr);
        return -1;
    }
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_open(e->store_url, &e->store, serr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "config store: %s", serr);
        return -1;
    }
    return 0;
}

int engine_create(const engine_settings_t *cfg, engine_t **out, char *err)
{
    if (cfg->workers == 0 || cfg->workers > ENGINE_WORKERS_MAX) {
        snprintf(err, ENGINE_ERR_MAX, "workers must be 1..%d", ENGINE_WORKERS_MAX);
        return -1;
    }
    if (cfg->max_memory != 0 && cfg->max_memory < ENGINE_TABLE_MIN_BYTES) {
        snprintf(err, ENGINE_ERR_MAX,
                 "--max-memory must be 0 (no cap) or at least 64k: it caps the keys of every rule "
                 "together, and each rule's empty table takes some of it");
        return -1;
    }
    engine_t *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        return -1;
    }
    e->cfg = *cfg;
    /* the watches' sketch seed: unknown to clients, so they cannot aim keys at one hash */
    e->watch_seed = sl_hash64(&e, sizeof e, (uint64_t)sl_now_ns()) | 1;
    atomic_store(&e->store_up, true);
    atomic_store(&e->store_writable, true);
    e->known = ov_known_create(OV_KNOWN_MAX);
    e->store_url = strdup(cfg->store_url);
    e->cfg.store_url = e->store_url;
    pthread_mutex_init(&e->reload_lock, NULL);
    pthread_mutex_init(&e->inline_lock, NULL);
    e->workers = engine_alloc_lines(sizeof(engine_worker_t) * cfg->workers);
    if (e->cfg.max_inline == 0) {
        e->cfg.max_inline = ENGINE_INLINE_MAX;
    }
    if (e->cfg.max_inline_address == 0) {
        e->cfg.max_inline_address = e->cfg.max_inline / 4 > 0 ? e->cfg.max_inline / 4 : 1;
    }
    if (e->store_url == NULL || e->workers == NULL || e->known == NULL) {
        snprintf(err, ENGINE_ERR_MAX, "out of memory");
        engine_free(e);
        return -1;
    }
    memset(e->workers, 0, sizeof(engine_worker_t) * cfg->workers);
    for (unsigned i = 0; i < cfg->workers; i++) {
        e->workers[i].engine = e;
        e->workers[i].index = i;
        e->workers[i].ops = (freelist_t){.size = sizeof(engine_op_t), .keep = OPS_KEEP};
        e->workers[i].alls = (freelist_t){.size = ALLOWALL_KEPT_BYTES, .keep = ALLS_KEEP};
    }
    if (open_stores(e, err) != 0 || engine_reload(e, e->store, true, err) < 0) {
        engine_free(e);
        return -1;
    }
    engine_poll_writable(e, e->store); /* a read-only file is known, and logged, at start */
    *out = e;
    return 0;
}

void engine_free(engine_t *e)
{
    if (e == NULL) {
        return;
    }
    engine_stop(e);
    ruleset_free(atomic_load(&e->current));
    while (e->retired != NULL) {
        ruleset_t *next = e->retired->retired_next;
        ruleset_free(e->retired);
        e->retired = next;
    }
    inline_free_all(e);
    if (e->workers != NULL) {
        for (unsigned i = 0; i < e->cfg.workers; i++) {
            override_worker_free(&e->workers[i]);
            freelist_clear(&e->workers[i].ops);
            freelist_clear(&e->workers[i].alls);
        }
        free(e->workers);
    }
    config_store_close(e->store);
    ov_known_free(e->known);
    request_store_close(e->requests); /* after every rule's data */
    pthread_mutex_destroy(&e->reload_lock);
    pthread_mutex_destroy(&e->inline_lock);
    free(e->store_url);
    free(e);
}

config_store_t *engine_store(engine_t *e)
{
    return e->store;
}

unsigned engine_workers(engine_t *e)
{
    return e->cfg.workers;
}

size_t engine_key_max(const engine_t *e)
{
    return e->cfg.key_max;
}

bool engine_store_up(engine_t *e)
{
    return atomic_load(&e->store_up);
}

bool engine_store_writable(engine_t *e)
{
    return atomic_load(&e->store_writable) && atomic_load(&e->store_up);
}

/* The config thread's poll: a new version of the store is put in force; a store file that was
 * deleted or replaced is reported once (the rules in force stay). A failed reload is logged
 * once until it fails otherwise or succeeds, and not at all while the store is known to be
 * unreachable (its push said so, once). */
static bool keep_none(void *arg, const char *rule)
{
    (void)arg;
    (void)rule;
    return false;
}

/* The store file: still the one opened, gone, or another one put in its place (opened now:
 * returns true, its rules to be read again; the overrides remembered from the old one are
 * forgotten). Each problem is logged once. */
static bool engine_poll_file(engine_t *e, config_store_t *store)
{
    char serr[CONFIG_STORE_ERR_MAX];
    int rc = config_store_check(store, serr);
    if (rc == CONFIG_STORE_REOPENED) {
        char name[CONFIG_STORE_NAME_MAX];
        log_warn("config store: another file was put in place of %s (restored, replaced): "
                 "opened it; its rules are put in force",
                 config_store_describe(store, name));
        ov_known_prune(e->known, keep_none, NULL);
        atomic_store(&e->store_up, true);
        e->store_problem[0] = '\0';
        return true;
    }
    if (rc != 0) {
        if (strcmp(serr, e->store_problem) != 0) { /* reported once per change */
            log_error("%s", serr);
            atomic_fetch_add(&e->store_errors, 1);
            atomic_store(&e->store_up, false);
            snprintf(e->store_problem, sizeof e->store_problem, "%s", serr);
        }
    } else if (e->store_problem[0] != '\0') {
        log_info("config store file is back: changes are accepted again");
        atomic_store(&e->store_up, true);
        e->store_problem[0] = '\0';
    }
    return false;
}

static void engine_poll(void *arg, config_store_t *store)
{
    engine_t *e = arg;
    char err[ENGINE_ERR_MAX];
    bool reopened = engine_poll_file(e, store);
    engine_poll_writable(e, store);
    int rc = engine_reload(e, store, reopened, err);
    if (rc < 0 && strcmp(err, e->poll_problem) != 0 && (e->watch == NULL || engine_store_up(e))) {
        log_error("rules not reloaded (the rules in force stay): %s", err);
        snprintf(e->poll_problem, sizeof e->poll_problem, "%s", err);
    } else if (rc >= 0) {
        e->poll_problem[0] = '\0';
    }
    if (rc > 0) {
        log_info("rules version %lld in force", (long long)engine_version(e));
    }
    engine_collect(e);
    size_t swept = engine_inline_sweep(e, sl_now_ns());
    if (swept > 0) {
        log_debug("%zu idle inline rules taken out of force", swept);
    }
}

/* The store's push: a change was committed somewhere, or the push connected again. On the
 * push's thread: the poll runs on the config thread. */
static void store_changed(void *arg)
{
    engine_t *e = arg;
    config_thread_poll_now(e->ct);
}

/* The store became unreachable or reachable again: one line each, and the gauge. On the push's
 * thread. */
static void store_state(void *arg, bool up, const char *why)
{
    engine_t *e = arg;
    atomic_store(&e->store_up, up);
    if (up) {
        log_info("config store reachable again: the rules are read again, changes are accepted");
    } else {
        atomic_fetch_add(&e->store_errors, 1);
        log_error("config store unreachable (%s): the rules in force stay and decisions go on; "
                  "changes are refused until it is back; reconnecting",
                  why);
    }
}

int engine_start(engine_t *e, int64_t poll_interval_ns, char *err)
{
    char terr[ENGINE_ERR_MAX];
    if (config_thread_start(e->store, e->cfg.workers, poll_interval_ns, engine_poll, e, &e->ct,
                            terr, sizeof terr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "%s", terr);
        return -1;
    }
    static const config_watch_fns_t fns = {.changed = store_changed, .state = store_state};
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_watch(e->store, &fns, e, &e->watch, serr) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "%s", serr);
        engine_stop(e);
        return -1;
    }
    return 0;
}

void engine_stop(engine_t *e)
{
    config_watch_stop(e->watch); /* first: it asks the config thread for polls */
    e->watch = NULL;
    config_thread_stop(e->ct);
    e->ct = NULL;
}

void engine_submit(engine_worker_t *w, config_job_t *job)
{
    engine_t *e = w->engine;
    if (e->ct != NULL) {
        job->inbox = w->inbox;
        config_job_submit(e->ct, job);
        return;
    }
    char serr[CONFIG_STORE_ERR_MAX];
    if (w->store == NULL && config_store_open(e->store_url, &w->store, serr) != 0) {
        w->store = NULL;
    }
    job->inbox = NULL;
    job->run(job, w->store, true);
    job->done(job);
}

void engine_submit_main(engine_t *e, config_job_t *job)
{
    job->inbox = NULL;
    if (e->ct != NULL) {
        config_job_submit(e->ct, job);
        return;
    }
    job->run(job, e->store, true);
    job->done(job);
}

/* ---- workers ------------------------------------------------------------------------------- */

engine_worker_t *engine_worker(engine_t *e, unsigned index)
{
    return index < e->cfg.workers ? &e->workers[index] : NULL;
}

const ruleset_t *engine_worker_begin(engine_worker_t *w)
{
    engine_t *e = w->engine;
    inline_worker_begin(w);
    ruleset_t *p = atomic_load_explicit(&e->current, memory_order_acquire);
    if (p == w->set) {
        return p;
    }
    /* Hazard pointer: announce, then confirm the set is still current, so a reloader that
     * retires it afterwards sees our announcement. */
    for (;;) {
        atomic_store(&w->hazard, p);
        ruleset_t *again = atomic_load(&e->current);
        if (again == p) {
            break;
        }
        p = again;
    }
    w->set = p;
    return p;
}

void engine_worker_end(engine_worker_t *w)
{
    w->set = NULL;
    atomic_store(&w->hazard, NULL);
    inline_worker_end(w);
}

void engine_foreach_rule(engine_t *e, engine_rule_fn fn, void *arg)
{
    /* Every rule is held, and fn runs with no lock: a snapshot or /metrics never delays a
     * reload or a new inline rule. */
    pthread_mutex_lock(&e->reload_lock);
    ruleset_t *set = atomic_load(&e->current);
    size_t n = set != NULL ? set->n : 0;
    rule_state_t **named = n > 0 ? malloc(n * sizeof *named) : NULL;
    n = named != NULL ? n : 0;
    for (size_t i = 0; i < n; i++) {
        named[i] = set->rules[i];
        atomic_fetch_add(&named[i]->refs, 1);
    }
    pthread_mutex_unlock(&e->reload_lock);
    rule_state_t **inl = NULL;
    size_t ninl = inline_hold_all(e, &inl);
    for (size_t i = 0; i < n + ninl; i++) {
        rule_state_t *rs = i < n ? named[i] : inl[i - n];
        fn(arg, rs);
        engine_state_release(rs);
    }
    free(named);
    free(inl);
}

/* ---- the loops ----------------------------------------------------------------------------- */

int engine_worker_attach(engine_worker_t *w, uv_loop_t *loop, char *err)
{
    engine_t *e = w->engine;
    w->attached = true;
    override_worker_attach(w, loop);
    w->inbox = config_thread_inbox(e->ct, w->index);
    if (config_inbox_attach(w->inbox, loop) != 0) {
        snprintf(err, ENGINE_ERR_MAX, "cannot attach to the config store thread");
        w->inbox = NULL;
        return -1;
    }
    return e->requests->ops->attach(e->requests, loop, &w->requests, err);
}

void engine_worker_detach(engine_worker_t *w)
{
    config_inbox_detach(w->inbox); /* lookups already answered go on first */
    w->inbox = NULL;
    override_worker_detach(w);
    w->engine->requests->ops->detach(w->engine->requests, &w->requests);
    w->attached = false;
    freelist_clear(&w->ops);
    freelist_clear(&w->alls);
}

unsigned engine_worker_stop(engine_worker_t *w)
{
    request_store_t *s = w->engine->requests;
    return s->ops->stop != NULL && w->requests != NULL ? s->ops->stop(w->requests) : 0;
}

/* ---- the request store --------------------------------------------------------------------- */

bool engine_is_remote(const engine_t *e)
{
    return !e->requests->ops->completes_at_once;
}

const char *engine_store_name(const engine_t *e)
{
    return e->requests->ops->describe(e->requests);
}

void engine_store_modes(const engine_t *e, size_t *module_nodes, size_t *lua_nodes)
{
    *module_nodes = *lua_nodes = 0;
    if (e->requests->ops->modes != NULL) {
        e->requests->ops->modes(e->requests, module_nodes, lua_nodes);
    }
}

size_t engine_relieve(engine_t *e, int64_t now_ns)
{
    if (e->requests->ops->relieve == NULL) {
        return 0;
    }
    size_t freed = e->requests->ops->relieve(e->requests, now_ns);
    if (freed > 0) {
        event_note(EV_MEMORY_RELIEVED,
                   "near --max-memory: %zu bytes of idle keys evicted across the rules", freed);
    }
    return freed;
}

sl_budget_t *engine_budget(const engine_t *e)
{
    return e->requests->ops->budget != NULL ? e->requests->ops->budget(e->requests) : NULL;
}

void engine_memory(const engine_t *e, size_t *used, size_t *max)
{
    sl_budget_t *b = engine_budget(e);
    *used = sl_budget_used(b);
    *max = sl_budget_max(b);
}

void engine_worker_stats(const engine_worker_t *w, engine_store_stats_t *out)
{
    request_store_t *s = w->engine->requests;
    *out = (engine_store_stats_t){.list = s->ops->stat_list, .n = s->ops->nstat};
    if (s->ops->stats != NULL) {
        s->ops->stats(s, &w->requests, out->value);
    }
}
