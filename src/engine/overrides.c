/*
 * overrides.c - per-key overrides as the engine sees them: each worker's cache of what the
 * config store says about (rule, key), and the lookups behind its misses. An override's numbers
 * are handed to the request store, which may keep a handle for them (the memory store: the table
 * that holds the overridden keys' state).
 *
 * The cache is direct-mapped (OV_CACHE_SLOTS per worker), its slot chosen by the rule's name
 * and the key. An entry says "no override" or the override (its JSON too); it is fresh for the
 * override TTL and only while the worker's rule set is of the generation it was read under, so
 * a change made through this server is seen by the next decision. Rules the store held no
 * overrides for are never looked up.
 *
 * A miss is a read of the config store, which a loop never does itself: the decision waits
 * (an ov_waiter_t) while the config thread reads, and resumes on its loop when the answer comes.
 * Decisions for a (rule, key) that is already being looked up wait for the same lookup, in the
 * order they came. Without a config thread (tests, tools) a miss is read at once.
 *
 * Bounds and failures:
 *   - At most OV_WAITS_MAX lookups are in flight per worker. A decision that needs one more
 *     waits its turn in the worker's queue, in order, as it would behind a slow store; while
 *     anything waits there the worker is "saturated" and the loop stops reading the connections
 *     that add to it (conn.c), until engine_worker_when_ready's callback. Counted.
 *   - A lookup that fails, or that the store does not answer within the override timeout (the
 *     config thread stuck that long on one statement: a frozen database), is answered by the
 *     last known answer for (rule, key): the engine's memory of the overrides found
 *     (override_known.c), else the entry still in the slot, fresh or not; re-read under the
 *     rule in force. Only with nothing known does the rule's on_store_error decide. Counted and
 *     logged at a limited rate (events.h).
 *   - Once a lookup has timed out the worker asks nothing more (a stuck store would only pile
 *     lookups up): misses are decided at once by what is known, until a lookup comes back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/events.h"

/* ---- override handles ---------------------------------------------------------------------- */

void *override_table(rule_tables_t *t, const sl_rule_t *rule)
{
    void *handle = NULL;
    if (t->ops->override != NULL && t->ops->override(t->data, rule, &handle) != 0) {
        return NULL;
    }
    return handle;
}

/* The store's answer for a key (en) names the numbers its usage belongs under: the store moves
 * it there if it is elsewhere (the memory store: into the override's table). A blocked key's
 * state stays where it is, for when it is unblocked. */
static void entry_adopt(const rule_state_t *rs, const ov_entry_t *en, const void *key,
                        size_t key_len, int64_t now_ns)
{
    rule_tables_t *t = rs->t;
    if (t->ops->adopt == NULL || en->blocked) {
        return;
    }
    t->ops->adopt(t->data, en->present ? en->handle : NULL, key, key_len, now_ns);
}

/* ---- the cache ----------------------------------------------------------------------------- */

static uint64_t entry_hash(const rule_state_t *rs, const void *key, size_t key_len)
{
    uint64_t h = sl_hash64(key, key_len, rs->name_hash);
    return h != 0 ? h : 1; /* 0 marks an empty slot */
}

static ov_entry_t *cache_slot(engine_worker_t *w, uint64_t h)
{
    if (w->ov_cache == NULL) {
        w->ov_cache = calloc(OV_CACHE_SLOTS, sizeof *w->ov_cache);
        if (w->ov_cache == NULL) {
            return NULL;
        }
    }
    return &w->ov_cache[h & (OV_CACHE_SLOTS - 1)];
}

const ov_entry_t *override_cached(engine_worker_t *w, const rule_state_t *rs, const void *key,
                                  size_t key_len, int64_t now_ns)
{
    uint64_t h = entry_hash(rs, key, key_len);
    ov_entry_t *en = cache_slot(w, h);
    if (en != NULL && en->hash == h && en->generation == w->set->generation && en->rule == rs &&
        en->expires_ns > now_ns && en->key_len == key_len && memcmp(en->key, key, key_len) == 0) {
        return en;
    }
    return NULL;
}

/* Fills en's one allocation: the key, the rule's name, the override's JSON ("" for none). */
static bool entry_text(ov_entry_t *en, const rule_state_t *rs, const void *key, size_t key_len,
                       const char *json)
{
    size_t name_len = strlen(rs->def.name) + 1, json_len = strlen(json) + 1;
    char *text = malloc(key_len + name_len + json_len);
    if (text == NULL) {
        return false;
    }
    memcpy(text, key, key_len);
    memcpy(text + key_len, rs->def.name, name_len);
    memcpy(text + key_len + name_len, json, json_len);
    free(en->key);
    en->key = text;
    en->key_len = key_len;
    en->name = text + key_len;
    en->json = text + key_len + name_len;
    return true;
}

/*
 * Caches what the store answered for (rs, key): rc 0 with json its text (consumed), or
 * CONFIG_STORE_NOTFOUND (json NULL), read while the worker's set was of `generation`, fresh
 * for ttl_ns from now_ns. Returns the entry, or NULL when the JSON is invalid for rs or memory
 * ran out (apply on_store_error).
 */
static const ov_entry_t *cache_fill(engine_worker_t *w, rule_state_t *rs, const void *key,
                                    size_t key_len, int rc, char *json, uint64_t generation,
                                    int64_t now_ns, int64_t ttl_ns)
{
    uint64_t h = entry_hash(rs, key, key_len);
    ov_entry_t *en = cache_slot(w, h);
    if (en == NULL || !entry_text(en, rs, key, key_len, rc == 0 ? json : "")) {
        free(json);
        return NULL;
    }
    free(json);
    char *text = en->key;
    *en = (ov_entry_t){.hash = h,
                       .generation = generation,
                       .rule = rs,
                       .expires_ns = now_ns + ttl_ns,
                       .key = text,
                       .key_len = key_len,
                       .name = text + key_len,
                       .json = text + key_len + strlen(text + key_len) + 1,
                       .window_ns = rs->def.rule.window_ns};
    if (rc == CONFIG_STORE_NOTFOUND) {
        return en; /* the negative cache */
    }
    rule_override_t ov;
    char perr[RULEDEF_ERR_MAX];
    if (override_parse_json(&rs->def, key, key_len, en->json, strlen(en->json), &ov, perr) != 0) {
        en->hash = 0;
        return NULL;
    }
    en->present = true;
    en->blocked = ov.blocked;
    en->window_ns = ov.rule.window_ns;
    en->ov_rule = ov.rule;
    const request_store_ops_t *ops = rs->t->ops;
    if (!ov.blocked && ops->override != NULL && ops->override(rs->t->data, &ov.rule, &en->handle)) {
        en->hash = 0;
        override_free(&ov);
        return NULL;
    }
    override_free(&ov);
    return en;
}

/* cache_fill, and the key's usage moved to the table the answer names (unless the answer is
 * stale: generation 0, read before a change), converted at decided_ns: the time of the first
 * decision waiting for it (converted later, a state would look younger to that decision). */
static const ov_entry_t *cache_fill_adopt(engine_worker_t *w, rule_state_t *rs, const void *key,
                                          size_t key_len, int rc, char *json, uint64_t generation,
                                          int64_t now_ns, int64_t decided_ns, int64_t ttl_ns)
{
    const ov_entry_t *en = cache_fill(w, rs, key, key_len, rc, json, generation, now_ns, ttl_ns);
    if (en != NULL && generation != 0) {
        entry_adopt(rs, en, key, key_len, decided_ns);
    }
    return en;
}

/* Whether en holds an answer for (rs's name, key), fresh or not. */
static bool entry_is(const ov_entry_t *en, uint64_t h, const rule_state_t *rs, const void *key,
                     size_t key_len)
{
    return en->hash == h && en->key_len == key_len && memcmp(en->key, key, key_len) == 0 &&
           strcmp(en->name, rs->def.name) == 0;
}

/*
 * The last known answer for (rs, key), for when the store cannot say: the engine's memory of
 * the overrides found, else the worker's slot's entry for the same rule name and key, fresh or
 * not. Re-read under rs (the rule in force may have changed since) and cached for OV_STALE_NS
 * at most. NULL when nothing is known.
 */
static const ov_entry_t *cache_known(engine_worker_t *w, rule_state_t *rs, const void *key,
                                     size_t key_len, int64_t now_ns)
{
    engine_t *e = w->engine;
    uint64_t generation = w->set != NULL ? w->set->generation : 0;
    int64_t ttl_ns = e->cfg.override_ttl_ns < OV_STALE_NS ? e->cfg.override_ttl_ns : OV_STALE_NS;
    char *json = e->known != NULL ? ov_known_get(e->known, rs->def.name, key, key_len) : NULL;
    if (json != NULL) {
        return cache_fill_adopt(w, rs, key, key_len, 0, json, generation, now_ns, now_ns, ttl_ns);
    }
    uint64_t h = entry_hash(rs, key, key_len);
    ov_entry_t *en = cache_slot(w, h);
    if (en == NULL || !entry_is(en, h, rs, key, key_len)) {
        return NULL;
    }
    if (en->generation == generation && en->rule == rs) { /* only its TTL passed */
        en->expires_ns = now_ns + ttl_ns;
        return en;
    }
    if (en->present && (json = strdup(en->json)) == NULL) {
        return NULL;
    }
    int rc = en->present ? 0 : CONFIG_STORE_NOTFOUND;
    return cache_fill_adopt(w, rs, key, key_len, rc, json, generation, now_ns, now_ns, ttl_ns);
}

/* One decision decided without the store's answer: by the last known one (known), else by
 * on_store_error; timed_out: the store did not answer in time, else it failed (why). */
static void note_failure(const engine_worker_t *w, const rule_state_t *rs, bool known,
                         bool timed_out, const char *why)
{
    long long ms = (long long)(w->engine->cfg.override_timeout_ns / SL_NS_PER_MS);
    const char *by = rs->def.on_store_error == RULE_ON_ERROR_ALLOW ? "allowed" : "denied";
    if (timed_out && known) {
        event_note(EV_OVERRIDE_TIMEOUT_KNOWN,
                   "rule '%s': the config store did not answer an override lookup within "
                   "%lld ms (override-timeout): decided by the key's last known override",
                   rs->def.name, ms);
    } else if (timed_out) {
        event_note(EV_OVERRIDE_TIMEOUT_FAILED,
                   "rule '%s': the config store did not answer an override lookup within "
                   "%lld ms (override-timeout) and nothing is known of the key: %s by "
                   "on_store_error",
                   rs->def.name, ms, by);
    } else if (known) {
        event_note(EV_OVERRIDE_ERROR_KNOWN,
                   "rule '%s': override lookup failed (%s): decided by the key's last known "
                   "override",
                   rs->def.name, why);
    } else {
        event_note(EV_OVERRIDE_ERROR_FAILED,
                   "rule '%s': override lookup failed (%s) and nothing is known of the key: %s "
                   "by on_store_error",
                   rs->def.name, why, by);
    }
}

/* The decisions in list head (oldest first) after their lookup of (rs, key) failed: each goes
 * on with the last known answer, or NULL (on_store_error). */
static void resume_failed(engine_worker_t *w, rule_state_t *rs, const char *key, size_t key_len,
                          ov_waiter_t *head, bool timed_out, const char *why)
{
    const ov_entry_t *en = cache_known(w, rs, key, key_len, sl_now_ns());
    ov_entry_t copy; /* the cache slot may be reused by what the decisions start */
    if (en != NULL) {
        copy = *en;
    }
    for (ov_waiter_t *wt = head, *next; wt != NULL; wt = next) {
        next = wt->next;
        note_failure(w, rs, en != NULL, timed_out, why);
        wt->resume(wt, en != NULL ? &copy : NULL);
    }
}

/* The store's answer to a lookup made now (no config thread): cached, or on failure the last
 * known answer. */
const ov_entry_t *override_lookup_now(engine_worker_t *w, rule_state_t *rs, const void *key,
                                      size_t key_len, int64_t now_ns)
{
    engine_t *e = w->engine;
    char serr[CONFIG_STORE_ERR_MAX];
    char *json = NULL;
    int rc = -1;
    if (w->store != NULL || config_store_open(e->store_url, &w->store, serr) == 0) {
        rc = config_store_get_override(w->store, rs->def.name, key, key_len, &json, serr);
    } else {
        w->store = NULL;
    }
    if (rc < 0) {
        const ov_entry_t *en = cache_known(w, rs, key, key_len, now_ns);
        note_failure(w, rs, en != NULL, false, serr);
        return en;
    }
    if (e->known != NULL &&
        !ov_known_note(e->known, rs->def.name, key, key_len, rc == 0 ? json : NULL)) {
        event_note(EV_OVERRIDE_KNOWN_FULL,
                   "override memory full (%d overrides): rule '%s': an "
                   "override found is not remembered for an outage",
                   OV_KNOWN_MAX, rs->def.name);
    }
    return cache_fill_adopt(w, rs, key, key_len, rc, json, w->set->generation, now_ns, now_ns,
                            e->cfg.override_ttl_ns);
}

/* ---- lookups on the config thread ---------------------------------------------------------- */

struct ov_wait {
    config_job_t job; /* first: the config thread hands it back */
    engine_worker_t *w;
    rule_state_t *rs;    /* held */
    ov_known_t *known;   /* the engine's memory of overrides, told the answer (config thread) */
    uint64_t generation; /* the worker's set when the lookup was asked for */
    uint64_t hash;
    uint64_t asked_ns; /* uv_hrtime() when submitted */
    char *key;         /* owned */
    size_t key_len;
    int rc; /* config_store_get_override's answer */
    char *json;
    char err[CONFIG_STORE_ERR_MAX]; /* why it failed (rc < 0) */
    bool known_full;                /* the override found could not be remembered */
    ov_waiter_t *head, *tail;       /* decisions waiting, oldest first; none once timed out */
    bool cancelled;                 /* its worker detached: nothing waits any more */
    bool indexed;                   /* in the worker's index: decisions may join it */
    ov_wait_t *hnext;               /* in its index chain */
    ov_wait_t *prev, *next;         /* in the worker's lookups in flight, oldest first */
};

static void wait_done(config_job_t *job);
static void wait_drop(config_job_t *job);

static int wait_run(config_job_t *job, config_store_t *store, bool last)
{
    (void)last;
    ov_wait_t *x = (ov_wait_t *)job;
    x->rc = config_store_get_override(store, x->rs->def.name, x->key, x->key_len, &x->json, x->err);
    if (x->rc >= 0 && x->known != NULL) {
        x->known_full = !ov_known_note(x->known, x->rs->def.name, x->key, x->key_len,
                                       x->rc == 0 ? x->json : NULL);
    }
    return CONFIG_JOB_DONE;
}

static void wait_free(ov_wait_t *x)
{
    engine_rule_release(x->rs);
    free(x->json);
    free(x->key);
    free(x);
}

static ov_wait_t **index_chain(engine_worker_t *w, uint64_t h)
{
    return &w->ov_index[h & (OV_INDEX_SLOTS - 1)];
}

static ov_wait_t *index_find(engine_worker_t *w, uint64_t h, const rule_state_t *rs,
                             const void *key, size_t key_len)
{
    if (w->ov_index == NULL) {
        return NULL;
    }
    for (ov_wait_t *x = *index_chain(w, h); x != NULL; x = x->hnext) {
        if (x->hash == h && x->rs == rs && x->key_len == key_len &&
            memcmp(x->key, key, key_len) == 0) {
            return x;
        }
    }
    return NULL;
}

static void index_remove(engine_worker_t *w, ov_wait_t *x)
{
    if (!x->indexed) {
        return;
    }
    for (ov_wait_t **pp = index_chain(w, x->hash); *pp != NULL; pp = &(*pp)->hnext) {
        if (*pp == x) {
            *pp = x->hnext;
            break;
        }
    }
    x->indexed = false;
}

static void list_remove(engine_worker_t *w, ov_wait_t *x)
{
    *(x->prev != NULL ? &x->prev->next : &w->ov_first) = x->next;
    *(x->next != NULL ? &x->next->prev : &w->ov_last) = x->prev;
    x->prev = x->next = NULL;
    w->nov_waits--;
}

/* A lookup of (rs, key) for waiter, in the worker's list and index; NULL when out of memory. */
static ov_wait_t *wait_new(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                           uint64_t h, ov_waiter_t *waiter)
{
    if (w->ov_index == NULL &&
        (w->ov_index = calloc(OV_INDEX_SLOTS, sizeof *w->ov_index)) == NULL) {
        return NULL;
    }
    ov_wait_t *x = calloc(1, sizeof *x);
    char *copy = x != NULL ? malloc(key_len + 1) : NULL;
    if (copy == NULL) {
        free(x);
        return NULL;
    }
    memcpy(copy, key, key_len);
    *x = (ov_wait_t){.job = {.run = wait_run,
                             .done = wait_done,
                             .drop = wait_drop,
                             .inbox = w->inbox,
                             .admin = false},
                     .w = w,
                     .rs = rs,
                     .known = w->engine->known,
                     .generation = w->set->generation,
                     .hash = h,
                     .asked_ns = uv_hrtime(),
                     .key = copy,
                     .key_len = key_len,
                     .head = waiter,
                     .tail = waiter,
                     .indexed = true,
                     .prev = w->ov_last};
    engine_rule_hold(rs);
    ov_wait_t **chain = index_chain(w, h);
    x->hnext = *chain;
    *chain = x;
    *(w->ov_last != NULL ? &w->ov_last->next : &w->ov_first) = x;
    w->ov_last = x;
    w->nov_waits++;
    return x;
}

/* ---- deadlines ----------------------------------------------------------------------------- */

static void on_deadline(uv_timer_t *t);

/* Makes sure the deadline timer runs while decisions wait for lookups (after `after_ns`). */
static void timer_arm(engine_worker_t *w, int64_t after_ns)
{
    if (!w->ov_timer_on || w->engine->cfg.override_timeout_ns <= 0 ||
        uv_is_active((uv_handle_t *)&w->ov_timer)) {
        return;
    }
    uint64_t ms = (uint64_t)((after_ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS);
    uv_timer_start(&w->ov_timer, on_deadline, ms > 0 ? ms : 1, 0);
}

static void queue_drain(engine_worker_t *w);

/* The store did not answer in time: every decision waiting for a lookup goes on now by what is
 * known, and the worker asks no more until a lookup comes back. */
static void time_out_all(engine_worker_t *w)
{
    w->ov_stuck = true;
    for (ov_wait_t *x = w->ov_first; x != NULL; x = x->next) {
        ov_waiter_t *head = x->head;
        if (head == NULL) {
            continue;
        }
        x->head = x->tail = NULL;
        index_remove(w, x);
        resume_failed(w, x->rs, x->key, x->key_len, head, true, NULL);
    }
    queue_drain(w);
}

/*
 * A lookup has waited the override timeout. It times out when the config thread, too, has been
 * on one job (a statement) that long: a store that is answering, lookup after lookup, is slow
 * only by the queue, and its decisions wait their turn (the loop reads no more meanwhile); one
 * that answers nothing holds no decision past the timeout.
 */
static void on_deadline(uv_timer_t *t)
{
    engine_worker_t *w = t->data;
    const ov_wait_t *oldest = w->ov_first;
    while (oldest != NULL && oldest->head == NULL) {
        oldest = oldest->next; /* timed out already: nothing waits for it */
    }
    if (oldest == NULL) {
        return;
    }
    int64_t timeout_ns = w->engine->cfg.override_timeout_ns;
    int64_t age_ns = (int64_t)(uv_hrtime() - oldest->asked_ns);
    int64_t busy_ns = config_thread_busy_ns(w->engine->ct);
    if (age_ns >= timeout_ns && busy_ns >= timeout_ns) {
        time_out_all(w);
        return;
    }
    timer_arm(w, timeout_ns - (age_ns < busy_ns ? age_ns : busy_ns));
}

/* ---- waiting ------------------------------------------------------------------------------- */

static void queue_push(engine_worker_t *w, ov_waiter_t *waiter)
{
    waiter->next = NULL;
    *(w->ov_queue_tail != NULL ? &w->ov_queue_tail->next : &w->ov_queue) = waiter;
    w->ov_queue_tail = waiter;
    event_note(EV_OVERRIDE_WAIT,
               "override lookups at their cap (%d in flight on one loop): decisions wait for "
               "a free one, in order, and their connections are not read meanwhile",
               OV_WAITS_MAX);
}

/* What a decision goes on with when its lookup of (rs, key) failed at once: the last known
 * answer in *copy, or NULL (on_store_error); the failure noted. */
static const ov_entry_t *failed_now(engine_worker_t *w, rule_state_t *rs, const char *key,
                                    size_t key_len, bool timed_out, const char *why,
                                    ov_entry_t *copy)
{
    const ov_entry_t *en = cache_known(w, rs, key, key_len, sl_now_ns());
    note_failure(w, rs, en != NULL, timed_out, why);
    if (en == NULL) {
        return NULL;
    }
    *copy = *en;
    return copy;
}

/* Starts waiter's wait (its rs, key set): the cache if it has the answer by now; what is known
 * when the store is stuck; a lookup in flight to join; a new lookup, unless OV_WAITS_MAX are in
 * flight or (in_turn false) earlier decisions wait for one: then in the queue. Returns true when
 * the answer is known now (*known, NULL: none), and the waiter waits for nothing. */
static bool wait_start(engine_worker_t *w, ov_waiter_t *waiter, bool in_turn, ov_entry_t *copy,
                       const ov_entry_t **known)
{
    rule_state_t *rs = waiter->rs;
    const ov_entry_t *en = override_cached(w, rs, waiter->key, waiter->key_len, sl_now_ns());
    if (en != NULL) {
        *copy = *en;
        *known = copy;
        return true;
    }
    if (w->ov_stuck) {
        *known = failed_now(w, rs, waiter->key, waiter->key_len, true, NULL, copy);
        return true;
    }
    uint64_t h = entry_hash(rs, waiter->key, waiter->key_len);
    ov_wait_t *x = index_find(w, h, rs, waiter->key, waiter->key_len);
    if (x != NULL) {
        x->tail->next = waiter;
        x->tail = waiter;
        return false;
    }
    if (w->nov_waits >= OV_WAITS_MAX || (!in_turn && w->ov_queue != NULL)) {
        queue_push(w, waiter);
        return false;
    }
    if ((x = wait_new(w, rs, waiter->key, waiter->key_len, h, waiter)) == NULL) {
        *known = failed_now(w, rs, waiter->key, waiter->key_len, false, "out of memory", copy);
        return true;
    }
    config_job_submit(w->engine->ct, &x->job);
    timer_arm(w, w->engine->cfg.override_timeout_ns);
    return false;
}

/* Decisions that waited for a free lookup go on, in order, while lookups are free (all of them
 * when the store is stuck); once none waits, the loop is told. */
static void queue_drain(engine_worker_t *w)
{
    while (w->ov_queue != NULL && (w->ov_stuck || w->nov_waits < OV_WAITS_MAX)) {
        ov_waiter_t *wt = w->ov_queue;
        w->ov_queue = wt->next;
        if (w->ov_queue == NULL) {
            w->ov_queue_tail = NULL;
        }
        wt->next = NULL;
        ov_entry_t copy;
        const ov_entry_t *en;
        if (wait_start(w, wt, true, &copy, &en)) {
            wt->resume(wt, en);
        }
    }
    if (w->ov_queue == NULL && w->ov_ready != NULL) {
        void (*fn)(void *) = w->ov_ready;
        w->ov_ready = NULL;
        fn(w->ov_ready_arg);
    }
}

/* On the worker's loop: the answer is cached and every waiting decision goes on, in order;
 * then the decisions queued for a free lookup. */
static void wait_done(config_job_t *job)
{
    ov_wait_t *x = (ov_wait_t *)job;
    if (x->cancelled) {
        wait_free(x);
        return;
    }
    engine_worker_t *w = x->w;
    list_remove(w, x);
    index_remove(w, x);
    w->ov_stuck = false; /* the store answers again */
    if (x->known_full) {
        event_note(EV_OVERRIDE_KNOWN_FULL,
                   "override memory full (%d overrides): rule '%s': an override found is not "
                   "remembered for an outage",
                   OV_KNOWN_MAX, x->rs->def.name);
    }
    if (x->rc < 0) {
        if (x->head != NULL) {
            resume_failed(w, x->rs, x->key, x->key_len, x->head, false, x->err);
        }
    } else {
        int64_t now_ns = sl_now_ns();
        /* read before a change made meanwhile: good for the decisions that asked, stale for
         * later */
        uint64_t generation =
            w->set != NULL && w->set->generation == x->generation ? x->generation : 0;
        int64_t decided_ns = x->head != NULL && x->head->now_ns < now_ns ? x->head->now_ns : now_ns;
        const ov_entry_t *en =
            cache_fill_adopt(w, x->rs, x->key, x->key_len, x->rc, x->json, generation, now_ns,
                             decided_ns, w->engine->cfg.override_ttl_ns);
        x->json = NULL;
        ov_entry_t copy; /* the cache slot may be reused by what the decisions start */
        if (en != NULL) {
            copy = *en;
        }
        for (ov_waiter_t *wt = x->head, *next; wt != NULL; wt = next) {
            next = wt->next;
            wt->resume(wt, en != NULL ? &copy : NULL);
        }
    }
    wait_free(x);
    queue_drain(w);
}

static void wait_drop(config_job_t *job)
{
    wait_free((ov_wait_t *)job);
}

bool override_wait(engine_worker_t *w, rule_state_t *rs, const void *key, size_t key_len,
                   ov_waiter_t *waiter, ov_entry_t *copy, const ov_entry_t **known)
{
    waiter->next = NULL;
    waiter->rs = rs;
    waiter->key = key;
    waiter->key_len = key_len;
    return wait_start(w, waiter, false, copy, known);
}

bool engine_worker_saturated(const engine_worker_t *w)
{
    return w->ov_queue != NULL;
}

void engine_worker_when_ready(engine_worker_t *w, void (*fn)(void *arg), void *arg)
{
    w->ov_ready = fn;
    w->ov_ready_arg = arg;
}

/* ---- the worker's loop --------------------------------------------------------------------- */

void override_worker_attach(engine_worker_t *w, uv_loop_t *loop)
{
    uv_timer_init(loop, &w->ov_timer);
    w->ov_timer.data = w;
    w->ov_timer_on = true;
    w->ov_stuck = false;
}

void override_worker_detach(engine_worker_t *w)
{
    if (w->ov_timer_on) {
        uv_timer_stop(&w->ov_timer);
        uv_close((uv_handle_t *)&w->ov_timer, NULL);
        w->ov_timer_on = false;
    }
    w->ov_ready = NULL;
    w->ov_stuck = true; /* what resumes now asks nothing more */
    while (w->ov_first != NULL) {
        ov_wait_t *x = w->ov_first;
        list_remove(w, x);
        index_remove(w, x);
        x->cancelled = true; /* freed when it comes back */
        ov_waiter_t *head = x->head;
        x->head = x->tail = NULL;
        resume_failed(w, x->rs, x->key, x->key_len, head, false, "sluiced is stopping");
    }
    queue_drain(w);
}

void override_worker_free(engine_worker_t *w)
{
    if (w->ov_cache != NULL) {
        for (size_t j = 0; j < OV_CACHE_SLOTS; j++) {
            free(w->ov_cache[j].key);
        }
        free(w->ov_cache);
        w->ov_cache = NULL;
    }
    free(w->ov_index);
    w->ov_index = NULL;
    config_store_close(w->store);
    w->store = NULL;
}

void engine_override_written(engine_t *e, const char *rule, const void *key, size_t key_len,
                             const char *json)
{
    if (e->known != NULL && !ov_known_note(e->known, rule, key, key_len, json)) {
        event_note(EV_OVERRIDE_KNOWN_FULL,
                   "override of rule '%s' set but not remembered for an outage: %d overrides "
                   "already are",
                   rule, OV_KNOWN_MAX);
    }
}
