/*
 * redis_store.c - see redis_store.h. One file of ~1,300 lines: its sections (the shared state,
 * the nodes' modes, pending decisions and deadlines, keys and arguments, replies, SL.ALLOWALL)
 * all work on the pending_t and redis_store_t defined here, and split apart they would need a
 * header exposing both to every part; each section is short and marked.
 */
#include "store/redis_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "core/hash.h"
#include "proto/resp.h"
#include "store/lua_scripts.h"
#include "store/overlimit_cache.h"

#define NS_PER_US        INT64_C(1000)
#define NS_PER_MS        INT64_C(1000000)
#define CACHE_SLOTS      4096 /* over-limit cache entries per loop (direct-mapped) */
#define EPOCH_STRIPES    1024 /* the caches' epochs: one per stripe of key hashes; a power of two */
#define SHARED_NODES_MAX (2 * RC_NODES_MAX) /* nodes whose mode is shared (by name) */
#define NODE_NAME_MAX    80
#define MODE_RESENDS_MAX 2 /* re-sends of one decision after "unknown command" */
#define RKEY_MAX         (1024 + 128)
#define RKEY_INLINE      160  /* Redis key bytes a pending decision holds without an allocation */
#define PENDING_KEEP     4096 /* free pending decisions kept for reuse per store */
#define CMD_KEEP         (64 * 1024) /* a command buffer grown past this is freed after use */
#define ARGS_MAX         16
#define KEY_HASH_DIGITS  8 /* the hex digits ending a Redis key */

/* What a pending request asks of Redis. */
typedef enum pending_op {
    OP_DECIDE = 0, /* a decision: SL.THROTTLE, or the script with a cost */
    OP_RESET,      /* a DEL of the key in both modes' names */
    OP_SETTLE,     /* a settle: SL.SETTLE, or the script's settle */
} pending_op_t;

/* A decision waiting for Redis, in the store's FIFO (send order = deadline order). Reused
 * through the store's free list; a Redis key longer than RKEY_INLINE is allocated apart. */
typedef struct pending {
    redis_store_t *store;
    redis_decision_fn fn;
    void *arg;
    int64_t deadline_ms;
    bool answered;         /* the deadline passed and fn was called; the reply is dropped */
    pending_op_t op;       /* what is asked */
    redis_mode_t mode;     /* the form rkey (and the command) is in */
    unsigned mode_resends; /* re-sent after "unknown command" */
    sl_rule_t rule;
    int64_t cost;                /* OP_DECIDE: units */
    int64_t reserved, actual;    /* OP_SETTLE: units */
    int64_t charged_ns;          /* OP_SETTLE: on Redis's clock, ns; -1 = when Redis runs it */
    int64_t asked_ns;            /* the caller's clock when it was asked (the cache's time) */
    uint64_t cache_hash;         /* rkey's hash: where a refusal is remembered */
    uint64_t epoch;              /* its stripe's epoch when it was sent */
    struct pending *prev, *next; /* the FIFO */
    struct pending *wait_next;   /* in a node's list of decisions waiting for its probe */
    size_t rkey_len;
    char *rkey; /* rkey_inline, or allocated */
    char rkey_inline[RKEY_INLINE];
} pending_t;

/* A node as this store sees it: its mode (shared with the other loops' stores) and the
 * decisions waiting for the answer to a probe of it. */
typedef struct node_state {
    redis_store_t *store;
    int index;            /* rc node */
    _Atomic int *mode;    /* the shared node's mode; NULL until first needed */
    _Atomic int own_mode; /* used instead when the shared table is full */
    const char *name;     /* "host:port", for the log */
    char own_name[NODE_NAME_MAX];
    bool probing;       /* a COMMAND INFO is on its way */
    pending_t *waiting; /* decisions to send when it answers, in order */
    pending_t *waiting_tail;
} node_state_t;

typedef struct shared_node {
    char name[NODE_NAME_MAX]; /* "host:port", set before the node is published */
    _Atomic int mode;         /* redis_mode_t, as last found out */
} shared_node_t;

struct redis_shared {
    uint64_t seed;           /* the caches' key hash seed */
    redis_mode_t start_mode; /* found at start: a node's mode until its own probe answers */
    pthread_mutex_t lock;    /* adding nodes; the stores' slots (redis_shared_set) */
    _Atomic size_t nnodes;   /* published nodes */
    shared_node_t nodes[SHARED_NODES_MAX];
    _Atomic uint64_t epoch[EPOCH_STRIPES]; /* bumped when a key of the stripe gets room back */
};

struct redis_store {
    uv_loop_t *loop;
    rc_client_t *client;
    redis_shared_t *shared;
    redis_mode_fn on_mode;
    void *on_mode_arg;
    int64_t timeout_ms;
    uv_timer_t timer;
    pending_t *head, *tail;
    node_state_t nodes[RC_NODES_MAX];
    olc_t cache; /* the over-limit cache, over cache_slots */
    olc_entry_t cache_slots[CACHE_SLOTS];
    redis_store_stats_t stats;
    rc_freelist_t pending; /* pending_t to reuse */
    resp_buf_t cmd;        /* the command being formatted, reused */
};

/* ---- the shared state: start-up probe, node modes, epochs ---------------------------------- */

/* The mode a reply to COMMAND INFO sl.throttle says, or 0 when it is no such reply. */
static redis_mode_t probe_mode(const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
        return 0;
    }
    return r->element[0]->type == REDIS_REPLY_ARRAY ? REDIS_MODE_MODULE : REDIS_MODE_LUA;
}

/* Asks the first reachable node of cfg, blocking. Returns 0 with *mode and its name, or -1. */
static int probe_blocking(const rc_config_t *cfg, int64_t timeout_ns, redis_mode_t *mode,
                          char name[NODE_NAME_MAX], char *err)
{
    struct timeval tv = {.tv_sec = (time_t)(timeout_ns / 1000000000),
                         .tv_usec = (suseconds_t)(timeout_ns % 1000000000 / 1000)};
    if (tv.tv_sec < 1) {
        tv.tv_sec = 1; /* connecting at start-up may take longer than one decision */
        tv.tv_usec = 0;
    }
    char last[REDIS_STORE_ERR_MAX] = "no nodes";
    for (size_t i = 0; i < cfg->nseeds; i++) {
        redisContext *c = redisConnectWithTimeout(cfg->host[i], cfg->port[i], tv);
        if (c == NULL || c->err != 0) {
            snprintf(last, sizeof last, "redis %s:%d: %s", cfg->host[i], cfg->port[i],
                     c != NULL ? c->errstr : "out of memory");
            redisFree(c);
            continue;
        }
        redisSetTimeout(c, tv);
        if (cfg->password != NULL) {
            redisReply *r = redisCommand(c, "AUTH %s", cfg->password);
            freeReplyObject(r);
        }
        redisReply *r = redisCommand(c, "COMMAND INFO sl.throttle");
        redis_mode_t found = probe_mode(r);
        if (r == NULL) {
            snprintf(last, sizeof last, "redis %s:%d: %s", cfg->host[i], cfg->port[i], c->errstr);
        } else if (found == 0) {
            snprintf(last, sizeof last, "redis %s:%d: COMMAND INFO: %s", cfg->host[i], cfg->port[i],
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        }
        freeReplyObject(r);
        redisFree(c);
        if (found != 0) {
            *mode = found;
            snprintf(name, NODE_NAME_MAX, "%s:%d", cfg->host[i], cfg->port[i]);
            return 0;
        }
    }
    snprintf(err, REDIS_STORE_ERR_MAX, "%s", last);
    return -1;
}

/* The shared node named name, added with the start mode if new; NULL when the table is full. */
static shared_node_t *shared_node(redis_shared_t *sh, const char *name)
{
    size_t n = atomic_load_explicit(&sh->nnodes, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(sh->nodes[i].name, name) == 0) {
            return &sh->nodes[i];
        }
    }
    pthread_mutex_lock(&sh->lock);
    shared_node_t *found = NULL;
    n = atomic_load_explicit(&sh->nnodes, memory_order_relaxed);
    for (size_t i = 0; i < n && found == NULL; i++) {
        if (strcmp(sh->nodes[i].name, name) == 0) {
            found = &sh->nodes[i];
        }
    }
    if (found == NULL && n < SHARED_NODES_MAX) {
        found = &sh->nodes[n];
        snprintf(found->name, sizeof found->name, "%s", name);
        atomic_store_explicit(&found->mode, sh->start_mode, memory_order_relaxed);
        atomic_store_explicit(&sh->nnodes, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&sh->lock);
    return found;
}

int redis_shared_create(const rc_config_t *cfg, int64_t timeout_ns, redis_shared_t **out, char *err)
{
    redis_mode_t mode;
    char name[NODE_NAME_MAX];
    if (probe_blocking(cfg, timeout_ns, &mode, name, err) != 0) {
        return -1;
    }
    redis_shared_t *sh = calloc(1, sizeof *sh);
    if (sh == NULL) {
        snprintf(err, REDIS_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    pthread_mutex_init(&sh->lock, NULL);
    sh->start_mode = mode;
    /* keys come from clients: a seed they cannot know keeps them from choosing keys that
     * share a cache entry (or an epoch stripe) with someone else's */
    sh->seed = hash_mix((uint64_t)sl_now_ns() ^ (uint64_t)(uintptr_t)sh ^ HASH_P0, HASH_P2);
    shared_node(sh, name);
    *out = sh;
    return 0;
}

void redis_shared_free(redis_shared_t *sh)
{
    if (sh == NULL) {
        return;
    }
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

void redis_shared_modes(const redis_shared_t *sh, size_t *module_nodes, size_t *lua_nodes)
{
    *module_nodes = *lua_nodes = 0;
    size_t n = atomic_load_explicit(&sh->nnodes, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&sh->nodes[i].mode, memory_order_relaxed) == REDIS_MODE_MODULE) {
            (*module_nodes)++;
        } else {
            (*lua_nodes)++;
        }
    }
}

void redis_shared_set(redis_shared_t *sh, redis_store_t **slot, redis_store_t *store)
{
    pthread_mutex_lock(&sh->lock);
    *slot = store;
    pthread_mutex_unlock(&sh->lock);
}

void redis_shared_visit(redis_shared_t *sh, redis_store_t *const *slot,
                        void (*fn)(void *arg, const redis_store_t *store), void *arg)
{
    pthread_mutex_lock(&sh->lock);
    if (*slot != NULL) {
        fn(arg, *slot);
    }
    pthread_mutex_unlock(&sh->lock);
}

static _Atomic uint64_t *epoch_of(redis_shared_t *sh, uint64_t h)
{
    return &sh->epoch[h & (EPOCH_STRIPES - 1)];
}

/* Every cache entry of every loop is dropped, and no answer already on its way is remembered. */
static void forget_all(redis_shared_t *sh)
{
    for (size_t i = 0; i < EPOCH_STRIPES; i++) {
        atomic_fetch_add_explicit(&sh->epoch[i], 1, memory_order_release);
    }
}

/* ---- nodes: their modes, probed on every connection ---------------------------------------- */

static node_state_t *node_at(redis_store_t *s, int idx)
{
    node_state_t *ns = &s->nodes[idx];
    if (ns->mode == NULL) {
        const char *host;
        int port;
        rc_node_addr(s->client, idx, &host, &port);
        snprintf(ns->own_name, sizeof ns->own_name, "%s:%d", host, port);
        shared_node_t *sn = shared_node(s->shared, ns->own_name);
        atomic_store_explicit(&ns->own_mode, s->shared->start_mode, memory_order_relaxed);
        ns->mode = sn != NULL ? &sn->mode : &ns->own_mode;
        ns->name = sn != NULL ? sn->name : ns->own_name;
        ns->store = s;
        ns->index = idx;
    }
    return ns;
}

static redis_mode_t node_mode(redis_store_t *s, int idx)
{
    return (redis_mode_t)atomic_load_explicit(node_at(s, idx)->mode, memory_order_relaxed);
}

static void send_decision(redis_store_t *s, pending_t *p, int idx, bool full_script);
static void pending_release(redis_store_t *s, pending_t *p);

/* The answer to COMMAND INFO sl.throttle on a node: its mode (logged once when it changes,
 * whichever loop sees it first), then the decisions that waited for it are sent, in order. */
static void on_probe(void *arg, redisReply *reply, const char *err)
{
    (void)err;
    node_state_t *ns = arg;
    redis_store_t *s = ns->store;
    ns->probing = false;
    redis_mode_t mode = probe_mode(reply);
    if (mode != 0 && atomic_exchange(ns->mode, mode) != (int)mode && s->on_mode != NULL) {
        s->on_mode(s->on_mode_arg, ns->name, mode);
    }
    pending_t *p = ns->waiting;
    ns->waiting = ns->waiting_tail = NULL;
    while (p != NULL) {
        pending_t *next = p->wait_next;
        p->wait_next = NULL;
        if (p->answered) {
            pending_release(s, p); /* its deadline passed meanwhile */
        } else {
            send_decision(s, p, rc_key_node(s->client, p->rkey, p->rkey_len), false);
        }
        p = next;
    }
}

/* Asks node idx whether sluice.so is loaded, unless that is under way. Returns 0, or -1 when
 * nothing could be sent. */
static int probe(redis_store_t *s, int idx)
{
    static const char cmd[] = "*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$11\r\nsl.throttle\r\n";
    node_state_t *ns = node_at(s, idx);
    if (ns->probing) {
        return 0;
    }
    ns->probing = true; /* before sending: sending may connect, which probes too */
    if (rc_command_at(s->client, idx, cmd, sizeof cmd - 1, on_probe, ns) != 0) {
        ns->probing = false;
        return -1;
    }
    return 0;
}

/* Every connection made to a node asks it first. A reconnect may be to a Redis that restarted
 * empty: every cached refusal is dropped. */
static void on_connect(void *arg, int idx, bool reconnect)
{
    redis_store_t *s = arg;
    if (reconnect) {
        forget_all(s->shared);
    }
    probe(s, idx);
}

/* ---- pending decisions and their deadlines ------------------------------------------------- */

static void unlink_pending(redis_store_t *s, pending_t *p)
{
    if (p->prev != NULL) {
        p->prev->next = p->next;
    } else {
        s->head = p->next;
    }
    if (p->next != NULL) {
        p->next->prev = p->prev;
    } else {
        s->tail = p->prev;
    }
    p->prev = p->next = NULL;
}

static void arm_timer(redis_store_t *s);

static void on_deadline(uv_timer_t *t)
{
    redis_store_t *s = t->data;
    uint64_t now_ms = uv_now(s->loop);
    while (s->head != NULL && (uint64_t)s->head->deadline_ms <= now_ms) {
        pending_t *p = s->head;
        unlink_pending(s, p);
        p->answered = true;
        atomic_fetch_add_explicit(&s->stats.timeouts, 1, memory_order_relaxed);
        p->fn(p->arg, -1, NULL, "redis: no reply within the decision timeout");
        /* p itself is released when its reply (or the connection's failure) comes */
    }
    arm_timer(s);
}

/*
 * The timer is due at the deadline of the head at the time it was armed, and is not moved when
 * that head is answered: the head can only be replaced by a later deadline (FIFO), so the timer
 * at worst fires early, finds nothing due and re-arms for the new head. Only a FIFO gone empty or
 * a timer gone idle is handled here, not every reply.
 */
static void arm_timer(redis_store_t *s)
{
    if (s->head == NULL) {
        uv_timer_stop(&s->timer);
        return;
    }
    uint64_t now_ms = uv_now(s->loop);
    uint64_t due = (uint64_t)s->head->deadline_ms;
    uv_timer_start(&s->timer, on_deadline, due > now_ms ? due - now_ms : 0, 0);
}

static void pending_release(redis_store_t *s, pending_t *p)
{
    if (p->rkey != p->rkey_inline) {
        free(p->rkey);
    }
    rc_freelist_put(&s->pending, p);
}

/* Appends p at the FIFO's tail with a deadline from now. */
static void pending_enqueue(redis_store_t *s, pending_t *p)
{
    p->deadline_ms = (int64_t)uv_now(s->loop) + s->timeout_ms;
    p->next = NULL;
    p->prev = s->tail;
    if (s->tail != NULL) {
        s->tail->next = p;
    } else {
        s->head = p;
    }
    s->tail = p;
    if (!uv_is_active((uv_handle_t *)&s->timer)) {
        arm_timer(s);
    }
}

static pending_t *pending_new(redis_store_t *s, const char *rkey, size_t rkey_len,
                              redis_decision_fn fn, void *arg)
{
    pending_t *p = rc_freelist_get(&s->pending);
    if (p == NULL) {
        return NULL;
    }
    *p = (pending_t){.store = s, .fn = fn, .arg = arg, .rkey_len = rkey_len};
    p->rkey = p->rkey_inline;
    if (rkey_len > RKEY_INLINE && (p->rkey = malloc(rkey_len)) == NULL) {
        p->rkey = p->rkey_inline;
        pending_release(s, p);
        return NULL;
    }
    memcpy(p->rkey, rkey, rkey_len);
    pending_enqueue(s, p);
    return p;
}

/* ---- keys and arguments -------------------------------------------------------------------- */

/*
 * The 8 hex digits ending a Redis key: the high 32 bits of a hash of the rule's algorithm and of
 * the mode, nothing that changes with the rule's numbers (a value records those itself, and a
 * key under other numbers is converted where it is). Their seeds differ from those of the names
 * keys had when the digits also hashed the numbers, so no key of an older sluiced is read under
 * a name of this one.
 */
static void key_digits(const sl_rule_t *r, redis_mode_t mode, char out[KEY_HASH_DIGITS])
{
    int64_t alg = r->algorithm;
    uint64_t seed =
        mode == REDIS_MODE_MODULE ? UINT64_C(0x736c756963650002) : UINT64_C(0x736c7569636c7532);
    uint64_t h = hash_bytes(&alg, sizeof alg, seed);
    for (int i = 0; i < KEY_HASH_DIGITS; i++) {
        out[i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 0xf];
    }
}

/*
 * The epoch a cached refusal is kept under: its stripe's epoch (whatever gives the key room back
 * bumps it) tagged with the rule's numbers. The Redis key does not change with the numbers, so
 * the cache names an entry by the key alone and keeps the numbers in its epoch: a request under
 * other numbers finds the entry of another epoch and drops it (olc_lookup), never answering with
 * a refusal learnt under other numbers, and its own answer replaces it.
 */
static uint64_t cache_epoch(uint64_t stripe_epoch, const sl_rule_t *r)
{
    int64_t n[5] = {r->limit, r->window_ns, r->burst, r->buckets, r->max_delay_ns};
    return hash_mix(stripe_epoch ^ HASH_P2, hash_bytes(n, sizeof n, HASH_P0));
}

/* "sl:{<key>}:<rule>:<digits>" into out; returns its length or 0 if too long. */
static size_t redis_key(const char *name, const sl_rule_t *r, redis_mode_t mode, const void *key,
                        size_t key_len, char *out, size_t cap)
{
    size_t name_len = strlen(name);
    if (key_len + name_len + 32 > cap) {
        return 0;
    }
    size_t n = 0;
    memcpy(out + n, "sl:{", 4);
    n += 4;
    memcpy(out + n, key, key_len);
    n += key_len;
    memcpy(out + n, "}:", 2);
    n += 2;
    memcpy(out + n, name, name_len);
    n += name_len;
    out[n++] = ':';
    key_digits(r, mode, out + n);
    return n + KEY_HASH_DIGITS;
}

/* The cache's name for a Redis key. */
static uint64_t key_hash(const redis_store_t *s, const char *rkey, size_t rkey_len)
{
    return olc_key_hash(s->shared->seed, rkey, rkey_len, NULL, 0);
}

/*
 * The key has room again (a reset, a refund): its cached refusals, in either mode's name, are
 * dropped in every loop, and answers already on their way will not be remembered (their epoch
 * is old). rkey[0..rkey_len) is its name in either mode.
 */
static void forget_key(redis_store_t *s, const sl_rule_t *rule, const char *rkey, size_t rkey_len)
{
    char other[RKEY_MAX];
    memcpy(other, rkey, rkey_len);
    for (redis_mode_t mode = REDIS_MODE_MODULE; mode <= REDIS_MODE_LUA; mode++) {
        key_digits(rule, mode, other + rkey_len - KEY_HASH_DIGITS);
        uint64_t h = key_hash(s, other, rkey_len);
        atomic_fetch_add_explicit(epoch_of(s->shared, h), 1, memory_order_release);
        olc_forget(&s->cache, h);
    }
}

/* p's key and cache name in another mode's form. */
static void rekey(redis_store_t *s, pending_t *p, redis_mode_t mode)
{
    key_digits(&p->rule, mode, p->rkey + p->rkey_len - KEY_HASH_DIGITS);
    p->mode = mode;
    p->cache_hash = key_hash(s, p->rkey, p->rkey_len);
    p->epoch = atomic_load_explicit(epoch_of(s->shared, p->cache_hash), memory_order_acquire);
}

typedef struct args {
    int argc;
    const char *argv[ARGS_MAX];
    size_t len[ARGS_MAX];
    char num[ARGS_MAX][24];
} args_t;

static void arg_str(args_t *a, const char *s, size_t len)
{
    a->argv[a->argc] = s;
    a->len[a->argc++] = len;
}

/* v in decimal into out (24 bytes); returns the length. */
static size_t fmt_i64(char *out, int64_t v)
{
    char digits[20];
    size_t n = 0, len = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        out[len++] = '-';
    }
    while (n > 0) {
        out[len++] = digits[--n];
    }
    return len;
}

static void arg_i64(args_t *a, int64_t v)
{
    arg_str(a, a->num[a->argc], fmt_i64(a->num[a->argc], v));
}

/* The command as Redis reads it (a RESP array of bulk strings) into s->cmd, sized once and
 * written in place. False when out of memory. */
static bool format_args(redis_store_t *s, int argc, const char *const *argv, const size_t *len)
{
    size_t total = 24; /* "*argc\r\n" */
    for (int i = 0; i < argc; i++) {
        total += len[i] + 32; /* "$len\r\n", the bytes, "\r\n" */
    }
    s->cmd.len = 0;
    s->cmd.failed = false;
    if (!resp_buf_reserve(&s->cmd, total)) {
        return false;
    }
    char *p = s->cmd.data;
    *p++ = '*';
    p += fmt_i64(p, argc);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        *p++ = '$';
        p += fmt_i64(p, (int64_t)len[i]);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], len[i]);
        p += len[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    s->cmd.len = (size_t)(p - s->cmd.data);
    return true;
}

/* Frees a command buffer that one large command (an SL.ALLOWALL) grew past CMD_KEEP. */
static void trim_cmd(redis_store_t *s)
{
    if (s->cmd.cap > CMD_KEEP) {
        resp_buf_free(&s->cmd);
    }
}

/* Sends the formatted command s->cmd to node idx; rc_command_at's result. */
static int send_cmd(redis_store_t *s, int idx, rc_reply_fn fn, void *arg)
{
    int rc = rc_command_at(s->client, idx, s->cmd.data, s->cmd.len, fn, arg);
    trim_cmd(s);
    return rc;
}

/* <cmd> rkey algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]: the module's rule
 * arguments (those the rule uses, as sluiced names its inline rules). */
static void module_rule_args(args_t *a, const char *cmd, const char *rkey, size_t rkey_len,
                             const sl_rule_t *r)
{
    const char *alg = sl_algorithm_name(r->algorithm);
    arg_str(a, cmd, strlen(cmd));
    arg_str(a, rkey, rkey_len);
    arg_str(a, alg, strlen(alg));
    arg_i64(a, r->limit);
    arg_i64(a, r->window_ns / NS_PER_MS);
    if (r->algorithm == SL_GCRA || r->algorithm == SL_TOKEN_BUCKET) {
        arg_str(a, "BURST", 5);
        arg_i64(a, r->burst);
        if (r->max_delay_ns > 0) {
            arg_str(a, "MAX_DELAY", 9);
            arg_i64(a, r->max_delay_ns / NS_PER_MS);
        }
    }
    if (r->algorithm == SL_SLIDING_BUCKETS) {
        arg_str(a, "BUCKETS", 7);
        arg_i64(a, r->buckets);
    }
}

/* SL.THROTTLE ... COST c, or SL.SETTLE ... RESERVED r ACTUAL a [AT ms]: AT names the millisecond
 * of charged_ns (the module takes its start: no later than charged_ns). */
static void module_args(args_t *a, const pending_t *p)
{
    if (p->op == OP_SETTLE) {
        module_rule_args(a, "SL.SETTLE", p->rkey, p->rkey_len, &p->rule);
        arg_str(a, "RESERVED", 8);
        arg_i64(a, p->reserved);
        arg_str(a, "ACTUAL", 6);
        arg_i64(a, p->actual);
        if (p->charged_ns >= 0) {
            arg_str(a, "AT", 2);
            arg_i64(a, p->charged_ns / NS_PER_MS);
        }
        return;
    }
    module_rule_args(a, "SL.THROTTLE", p->rkey, p->rkey_len, &p->rule);
    arg_str(a, "COST", 4);
    arg_i64(a, p->cost);
}

/* EVALSHA sha 1 rkey limit window_us burst buckets max_delay_us, then cost, or settle reserved
 * actual charged_us|now */
static void lua_args(args_t *a, const pending_t *p, const lua_script_t *script, bool full)
{
    const sl_rule_t *r = &p->rule;
    if (full) {
        arg_str(a, "EVAL", 4);
        arg_str(a, script->text, script->len);
    } else {
        arg_str(a, "EVALSHA", 7);
        arg_str(a, script->sha1, 40);
    }
    arg_str(a, "1", 1);
    arg_str(a, p->rkey, p->rkey_len);
    arg_i64(a, r->limit);
    arg_i64(a, r->window_ns / NS_PER_US);
    arg_i64(a, r->burst);
    arg_i64(a, r->buckets);
    arg_i64(a, r->max_delay_ns / NS_PER_US);
    if (p->op == OP_SETTLE) {
        arg_str(a, "settle", 6);
        arg_i64(a, p->reserved);
        arg_i64(a, p->actual);
        if (p->charged_ns >= 0) {
            arg_i64(a, p->charged_ns / NS_PER_US);
        } else {
            arg_str(a, "now", 3);
        }
        return;
    }
    arg_i64(a, p->cost);
}

/* ---- replies ------------------------------------------------------------------------------- */

static int64_t to_ns(long long v, int64_t unit_ns)
{
    return v < 0 ? -1 : (int64_t)v * unit_ns;
}

/* The module's 5 integers in ms, or the scripts' 6 in µs, as a decision. */
static bool parse_decision(const redisReply *r, redis_mode_t mode, sl_decision_t *d)
{
    size_t want = mode == REDIS_MODE_MODULE ? 5 : 6;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != want) {
        return false;
    }
    for (size_t i = 0; i < want; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER) {
            return false;
        }
    }
    long long v[6] = {0};
    for (size_t i = 0; i < want; i++) {
        v[i] = r->element[i]->integer;
    }
    int64_t unit = mode == REDIS_MODE_MODULE ? NS_PER_MS : NS_PER_US;
    *d = (sl_decision_t){.allowed = v[0] == 1,
                         .limit = v[1],
                         .remaining = v[2],
                         .retry_after_ns = to_ns(v[3], unit),
                         .reset_after_ns = to_ns(v[4], unit),
                         .delay_ns = to_ns(v[5], unit)};
    if (mode == REDIS_MODE_MODULE && d->allowed && d->retry_after_ns > 0) {
        /* the module, like sluiced, reports a delayed admission's delay as retry_after */
        d->delay_ns = d->retry_after_ns;
        d->retry_after_ns = 0;
    }
    return true;
}

/* "ERR unknown command 'SL.THROTTLE', ...": the node has no sluice.so (any more). */
static bool is_unknown_command(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncasecmp(r->str, "ERR unknown command", 19) == 0;
}

/*
 * p (unlinked) was sent as a module command to a node without the module: sent again at the tail
 * with a fresh deadline (FIFO order is deadline order), in the mode of the node its key goes to
 * now; if that node is still believed to have the module, it is asked again first.
 */
static void resend_in_mode(redis_store_t *s, pending_t *p)
{
    p->mode_resends++;
    pending_enqueue(s, p);
    int idx = rc_key_node(s->client, p->rkey, p->rkey_len);
    if (node_mode(s, idx) == p->mode) {
        probe(s, idx);
    }
    send_decision(s, p, idx, false);
}

/* A decision's answer into the over-limit cache, if nothing gave its key room back since it was
 * sent. */
static void cache_answer(redis_store_t *s, const pending_t *p, const sl_decision_t *d)
{
    uint64_t now_epoch =
        atomic_load_explicit(epoch_of(s->shared, p->cache_hash), memory_order_acquire);
    if (now_epoch != p->epoch) {
        return;
    }
    olc_answer_t a = {.allowed = d->allowed,
                      .limit = d->limit,
                      .remaining = d->remaining,
                      .retry_after_ns = d->retry_after_ns,
                      .reset_after_ns = d->reset_after_ns,
                      .max_delay_ns = p->rule.max_delay_ns};
    olc_record(&s->cache, p->cache_hash, cache_epoch(p->epoch, &p->rule), p->cost, &a, p->asked_ns);
}

static void on_reply(void *arg, redisReply *reply, const char *err)
{
    pending_t *p = arg;
    redis_store_t *s = p->store;
    if (p->answered) {
        pending_release(s, p); /* its deadline passed: the reply is dropped */
        return;
    }
    unlink_pending(s, p); /* the timer stays: see arm_timer */
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR &&
        strncmp(reply->str, "NOSCRIPT", 8) == 0 && p->op != OP_RESET) {
        atomic_fetch_add_explicit(&s->stats.noscript, 1, memory_order_relaxed);
        /* sent again as EVAL, at the tail with a fresh deadline (FIFO order is deadline order) */
        pending_enqueue(s, p);
        send_decision(s, p, rc_key_node(s->client, p->rkey, p->rkey_len), true);
        return;
    }
    if (reply != NULL && p->op != OP_RESET && p->mode == REDIS_MODE_MODULE &&
        is_unknown_command(reply) && p->mode_resends < MODE_RESENDS_MAX) {
        resend_in_mode(s, p);
        return;
    }
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    sl_decision_t d;
    if (reply == NULL) {
        atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
        pending_release(s, p);
        fn(fn_arg, -1, NULL, err);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
        char msg[REDIS_STORE_ERR_MAX];
        snprintf(msg, sizeof msg, "redis: %s", reply->str);
        pending_release(s, p);
        fn(fn_arg, -1, NULL, msg);
    } else if (p->op == OP_RESET) {
        forget_key(s, &p->rule, p->rkey, p->rkey_len); /* refusals sent before the DEL ran */
        pending_release(s, p);
        fn(fn_arg, 0, NULL, NULL);
    } else if (!parse_decision(reply, p->mode, &d)) {
        atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
        pending_release(s, p);
        fn(fn_arg, -1, NULL, "redis: unexpected reply to a decision");
    } else {
        if (p->op == OP_DECIDE) {
            cache_answer(s, p, &d);
        } else if (p->actual < p->reserved) {
            /* room given back: refusals Redis gave before the settle ran are stale too */
            forget_key(s, &p->rule, p->rkey, p->rkey_len);
        }
        pending_release(s, p);
        fn(fn_arg, 0, &d, NULL);
    }
}

/* p (queued) failed before anything was sent: answered now, as a store error. */
static void send_failed(redis_store_t *s, pending_t *p, const char *msg)
{
    redis_decision_fn fn = p->fn;
    void *fn_arg = p->arg;
    unlink_pending(s, p);
    atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
    pending_release(s, p);
    fn(fn_arg, -1, NULL, msg);
}

/* Why rule cannot be decided in mode (the module takes milliseconds, the scripts microseconds:
 * a rule finer than that is refused, a store error, rather than rounded into another rule), or
 * NULL. */
static const char *unfit(const sl_rule_t *rule, redis_mode_t mode)
{
    int64_t unit = mode == REDIS_MODE_MODULE ? NS_PER_MS : NS_PER_US;
    if (rule->window_ns % unit == 0 && rule->max_delay_ns % unit == 0) {
        return NULL;
    }
    return mode == REDIS_MODE_MODULE
               ? "the redis store (module) needs windows and max_delay of whole milliseconds"
               : "the redis store (Lua) needs windows and max_delay of whole microseconds";
}

/*
 * Sends p (queued) to node idx in that node's mode. A node being asked its mode (a connection
 * just made: it is made here if needed) gets nothing until it has answered: p waits for the
 * answer, so that no decision is sent in a mode the node may have left.
 */
static void send_decision(redis_store_t *s, pending_t *p, int idx, bool full_script)
{
    node_state_t *ns = node_at(s, idx);
    if (!ns->probing && !rc_node_connected(s->client, idx)) {
        probe(s, idx); /* connects (unless backing off) and asks */
    }
    if (ns->probing) {
        p->wait_next = NULL;
        if (ns->waiting_tail != NULL) {
            ns->waiting_tail->wait_next = p;
        } else {
            ns->waiting = p;
        }
        ns->waiting_tail = p;
        return;
    }
    redis_mode_t mode = node_mode(s, idx);
    if (mode != p->mode) {
        rekey(s, p, mode);
    }
    const char *why = unfit(&p->rule, mode);
    if (why != NULL) {
        send_failed(s, p, why);
        return;
    }
    args_t a;
    a.argc = 0;
    if (mode == REDIS_MODE_MODULE) {
        module_args(&a, p);
    } else {
        lua_args(&a, p, lua_script_for(p->rule.algorithm), full_script);
    }
    atomic_fetch_add_explicit(&s->stats.decisions, 1, memory_order_relaxed);
    if (!format_args(s, a.argc, a.argv, a.len)) {
        send_failed(s, p, "out of memory");
    } else if (send_cmd(s, idx, on_reply, p) != 0) {
        send_failed(s, p, "redis: not connected (reconnecting)");
    }
}

/*
 * The Redis key of (name, rule, key) in the mode of the node it goes to, that node and its mode.
 * Returns NULL, or why it cannot be asked (a key too long, a rule the mode cannot take).
 */
static const char *route(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                         size_t key_len, char rkey[RKEY_MAX], size_t *rkey_len, int *idx,
                         redis_mode_t *mode)
{
    /* the key's node is found on its module form: the digits (which depend on the node's mode)
     * are not part of the slot, except with an empty client key (an empty hash tag) */
    *rkey_len = redis_key(name, rule, REDIS_MODE_MODULE, key, key_len, rkey, RKEY_MAX);
    if (*rkey_len == 0) {
        return "key too long for the redis store";
    }
    *idx = rc_key_node(s->client, rkey, *rkey_len);
    *mode = node_mode(s, *idx);
    if (*mode != REDIS_MODE_MODULE) {
        key_digits(rule, *mode, rkey + *rkey_len - KEY_HASH_DIGITS);
        if (key_len == 0) {
            *idx = rc_key_node(s->client, rkey, *rkey_len);
        }
    }
    return unfit(rule, *mode);
}

void redis_store_decide(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t cost, int64_t now_ns, redis_decision_fn fn,
                        void *arg)
{
    if (cost > rule->capacity) {
        /* never admissible, whatever the state: no round trip (the module would refuse it) */
        sl_decision_t d = {.allowed = false, .limit = rule->capacity, .retry_after_ns = -1};
        fn(arg, 0, &d, NULL);
        return;
    }
    char rkey[RKEY_MAX];
    size_t rkey_len;
    int idx;
    redis_mode_t mode;
    const char *why = route(s, name, rule, key, key_len, rkey, &rkey_len, &idx, &mode);
    if (why != NULL) {
        fn(arg, -1, NULL, why);
        return;
    }
    uint64_t h = key_hash(s, rkey, rkey_len);
    uint64_t epoch = atomic_load_explicit(epoch_of(s->shared, h), memory_order_acquire);
    olc_answer_t a;
    if (olc_lookup(&s->cache, h, cache_epoch(epoch, rule), cost, now_ns, &a)) {
        /* Redis refused as much or less, and would still: no round trip */
        atomic_fetch_add_explicit(&s->stats.cache_hits, 1, memory_order_relaxed);
        sl_decision_t d = {.allowed = false,
                           .limit = a.limit,
                           .remaining = a.remaining,
                           .retry_after_ns = a.retry_after_ns,
                           .reset_after_ns = a.reset_after_ns};
        fn(arg, 0, &d, NULL);
        return;
    }
    pending_t *p = pending_new(s, rkey, rkey_len, fn, arg);
    if (p == NULL) {
        fn(arg, -1, NULL, "out of memory");
        return;
    }
    p->rule = *rule;
    p->cost = cost;
    p->asked_ns = now_ns;
    p->mode = mode;
    p->cache_hash = h;
    p->epoch = epoch;
    send_decision(s, p, idx, false);
}

void redis_store_settle(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len, int64_t reserved, int64_t actual, int64_t charged_ns,
                        int64_t now_ns, redis_decision_fn fn, void *arg)
{
    if (reserved < 0 || actual < 0 || charged_ns < -1) {
        fn(arg, -1, NULL, "a settle needs reserved and actual >= 0, and a charge time >= 0");
        return;
    }
    char rkey[RKEY_MAX];
    size_t rkey_len;
    int idx;
    redis_mode_t mode;
    const char *why = route(s, name, rule, key, key_len, rkey, &rkey_len, &idx, &mode);
    if (why != NULL) {
        fn(arg, -1, NULL, why);
        return;
    }
    if (actual < reserved) {
        /* room given back: every loop forgets its refusals now, and again when Redis has done
         * it (a refusal it gave before the settle ran must not be remembered after) */
        forget_key(s, rule, rkey, rkey_len);
    }
    pending_t *p = pending_new(s, rkey, rkey_len, fn, arg);
    if (p == NULL) {
        fn(arg, -1, NULL, "out of memory");
        return;
    }
    p->op = OP_SETTLE;
    p->rule = *rule;
    p->reserved = reserved;
    p->actual = actual;
    p->charged_ns = charged_ns;
    p->asked_ns = now_ns;
    p->mode = mode;
    p->cache_hash = key_hash(s, rkey, rkey_len);
    p->epoch = atomic_load_explicit(epoch_of(s->shared, p->cache_hash), memory_order_acquire);
    send_decision(s, p, idx, false);
}

void redis_store_reset(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                       size_t key_len, redis_decision_fn fn, void *arg)
{
    char rkey[RKEY_MAX];
    size_t rkey_len = redis_key(name, rule, REDIS_MODE_MODULE, key, key_len, rkey, sizeof rkey);
    if (rkey_len == 0) {
        fn(arg, -1, NULL, "key too long for the redis store");
        return;
    }
    /* Every loop's cached refusals are forgotten now, and again when the DEL is done (a
     * refusal Redis gave before it must not be remembered after). */
    forget_key(s, rule, rkey, rkey_len);
    pending_t *p = pending_new(s, rkey, rkey_len, fn, arg);
    if (p == NULL) {
        fn(arg, -1, NULL, "out of memory");
        return;
    }
    p->op = OP_RESET;
    p->rule = *rule;
    /* the state in either mode's name: a node that changes mode back finds nothing stale */
    char lua[RKEY_MAX];
    memcpy(lua, rkey, rkey_len);
    key_digits(rule, REDIS_MODE_LUA, lua + rkey_len - KEY_HASH_DIGITS);
    const char *argv[3] = {"DEL", p->rkey, lua};
    size_t len[3] = {3, rkey_len, rkey_len};
    if (!format_args(s, 3, argv, len) ||
        send_cmd(s, rc_key_node(s->client, rkey, rkey_len), on_reply, p) != 0) {
        unlink_pending(s, p);
        pending_release(s, p);
        fn(arg, -1, NULL, "redis: not connected (reconnecting)");
    }
}

void redis_store_forget(redis_store_t *s, const char *name, const sl_rule_t *rule, const void *key,
                        size_t key_len)
{
    char rkey[RKEY_MAX];
    size_t rkey_len = redis_key(name, rule, REDIS_MODE_MODULE, key, key_len, rkey, sizeof rkey);
    if (rkey_len != 0) {
        forget_key(s, rule, rkey, rkey_len);
    }
}

int redis_store_create(uv_loop_t *loop, const rc_config_t *cfg, redis_shared_t *shared,
                       int64_t timeout_ns, redis_mode_fn on_mode, void *on_mode_arg,
                       redis_store_t **out, char *err)
{
    redis_store_t *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, REDIS_STORE_ERR_MAX, "out of memory");
        return -1;
    }
    s->pending = (rc_freelist_t){.size = sizeof(pending_t), .keep = PENDING_KEEP};
    s->loop = loop;
    s->shared = shared;
    s->on_mode = on_mode;
    s->on_mode_arg = on_mode_arg;
    s->timeout_ms = timeout_ns / NS_PER_MS > 0 ? timeout_ns / NS_PER_MS : 1;
    olc_init(&s->cache, s->cache_slots, CACHE_SLOTS, 1);
    char cerr[RC_ERR_MAX];
    if (rc_create(loop, cfg, on_connect, s, &s->client, cerr) != 0) {
        snprintf(err, REDIS_STORE_ERR_MAX, "%s", cerr);
        free(s);
        return -1;
    }
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    *out = s;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    redis_store_t *s = h->data;
    rc_freelist_clear(&s->pending);
    resp_buf_free(&s->cmd);
    free(s);
}

void redis_store_free(redis_store_t *s)
{
    if (s == NULL) {
        return;
    }
    /* Answer everyone still waiting, then let the connections fail the replies (freed there;
     * a decision waiting for a probe is freed when the probe fails). */
    while (s->head != NULL) {
        pending_t *p = s->head;
        unlink_pending(s, p);
        p->answered = true;
        p->fn(p->arg, -1, NULL, "sluiced is stopping");
    }
    rc_free(s->client);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}

const redis_store_stats_t *redis_store_stats(const redis_store_t *s)
{
    return &s->stats;
}

const rc_stats_t *redis_store_client_stats(const redis_store_t *s)
{
    return rc_stats(s->client);
}

/* ---- SL.ALLOWALL in one step ---------------------------------------------------------------- */

/*
 * All-or-nothing over pairs whose keys share a slot, atomically: one EVAL running the module's
 * commands. KEYS are the pairs' keys; ARGV[1] the cost, then 7 values per pair: algorithm,
 * limit, window_ms, burst ('-' = none), buckets ('-'), max_delay_ms, shadow (1 = a refusal does
 * not block the others). Peeks every pair; one that cannot take the cost by the peek is decided
 * for real (a delayed admission can still admit it). The first refused ends it: what was charged
 * so far is given back (SL.SETTLE ... ACTUAL 0, at the same time: exact) and the reply is {i,
 * then 5 integers per pair}: pair i's refusal, the others' peeks. Otherwise every pair is
 * charged: {0, 5 integers per pair}.
 */
static const char allowall_script[] =
    "local cost = ARGV[1]\n"
    "local function call(name, i, ...)\n"
    "  local b = 1 + (i - 1) * 7\n"
    "  local a = {name, KEYS[i], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]}\n"
    "  if ARGV[b + 4] ~= '-' then a[#a + 1] = 'BURST'; a[#a + 1] = ARGV[b + 4] end\n"
    "  if ARGV[b + 5] ~= '-' then a[#a + 1] = 'BUCKETS'; a[#a + 1] = ARGV[b + 5] end\n"
    "  if ARGV[b + 6] ~= '0' then a[#a + 1] = 'MAX_DELAY'; a[#a + 1] = ARGV[b + 6] end\n"
    "  for _, v in ipairs({...}) do a[#a + 1] = v end\n"
    "  return redis.call(unpack(a))\n"
    "end\n"
    "local charged = {}\n"
    "for i = 1, #KEYS do\n"
    "  if ARGV[1 + (i - 1) * 7 + 7] == '0' then\n"
    "    local p = call('SL.PEEK', i)\n"
    "    if p[3] < tonumber(cost) then\n"
    "      local d = call('SL.THROTTLE', i, 'COST', cost)\n"
    "      if d[1] == 0 then\n"
    "        for j in pairs(charged) do call('SL.SETTLE', j, 'RESERVED', cost, 'ACTUAL', '0') end\n"
    "        local out = {i}\n"
    "        for k = 1, #KEYS do\n"
    "          local e = k == i and d or call('SL.PEEK', k)\n"
    "          for j = 1, 5 do out[#out + 1] = e[j] end\n"
    "        end\n"
    "        return out\n"
    "      end\n"
    "      charged[i] = d\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local out = {0}\n"
    "for i = 1, #KEYS do\n"
    "  local d = charged[i] or call('SL.THROTTLE', i, 'COST', cost)\n"
    "  for j = 1, 5 do out[#out + 1] = d[j] end\n"
    "end\n"
    "return out\n";

typedef struct all_op {
    redis_store_t *store;
    int node; /* where it was sent */
    redis_all_fn fn;
    void *arg;
    size_t n;
    int64_t cost;
} all_op_t;

static void on_all(void *arg, redisReply *r, const char *err)
{
    all_op_t *op = arg;
    sl_decision_t d[REDIS_ALL_MAX];
    char msg[REDIS_STORE_ERR_MAX];
    long refused = -1;
    const char *fail = err;
    int status = -1;
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        snprintf(msg, sizeof msg, "redis: %s", r->str);
        fail = msg;
        static const char gone[] = "ERR unknown redis command called from script";
        if (strncasecmp(r->str, gone, sizeof gone - 1) == 0) {
            /* the node lost the module: its first call failed, so nothing was written; learn
             * its mode for the next ones, and let the caller decide step by step */
            probe(op->store, op->node);
            status = REDIS_ALL_RETRY;
        }
    } else if (r != NULL) {
        size_t want = 0;
        bool ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 6;
        for (size_t i = 0; ok && i < r->elements; i++) {
            ok = r->element[i]->type == REDIS_REPLY_INTEGER;
        }
        if (ok) {
            refused = (long)r->element[0]->integer - 1;
            want = 1 + 5 * op->n;
            ok = r->elements == want && refused < (long)op->n;
        }
        for (size_t k = 0; ok && k < (want - 1) / 5; k++) {
            redisReply sub = {
                .type = REDIS_REPLY_ARRAY, .elements = 5, .element = r->element + 1 + 5 * k};
            ok = parse_decision(&sub, REDIS_MODE_MODULE, &d[k]);
        }
        fail = ok ? NULL : "redis: unexpected reply to SL.ALLOWALL";
    }
    if (fail != NULL) {
        op->fn(op->arg, status, NULL, 0, -1, fail);
    } else {
        op->fn(op->arg, 0, d, op->n, refused, NULL);
    }
    free(op);
}

int redis_store_decide_all(redis_store_t *s, const redis_pair_t *pairs, size_t n, int64_t cost,
                           redis_all_fn fn, void *arg)
{
    if (n == 0 || n > REDIS_ALL_MAX) {
        return -1;
    }
    char rkeys[REDIS_ALL_MAX][RKEY_MAX]; /* ~74 KB of the loop thread's stack */
    char nums[REDIS_ALL_MAX][7][24];
    const char *argv[3 + REDIS_ALL_MAX * 8 + 1];
    size_t len[3 + REDIS_ALL_MAX * 8 + 1];
    char narg[24], costarg[24];
    int argc = 0;
    unsigned slot = 0;
    argv[argc] = "EVAL";
    len[argc++] = 4;
    argv[argc] = allowall_script;
    len[argc++] = sizeof allowall_script - 1;
    argv[argc] = narg;
    len[argc++] = (size_t)snprintf(narg, sizeof narg, "%zu", n);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *r = pairs[i].rule;
        size_t k = redis_key(pairs[i].name, r, REDIS_MODE_MODULE, pairs[i].key, pairs[i].key_len,
                             rkeys[i], RKEY_MAX);
        if (k == 0 || r->window_ns % NS_PER_MS != 0 || r->max_delay_ns % NS_PER_MS != 0 ||
            cost > r->capacity) {
            return -1; /* the step-by-step path answers these */
        }
        unsigned sl = rc_key_slot(rkeys[i], k);
        if (i > 0 && sl != slot && rc_is_cluster(s->client)) {
            return -1; /* not one slot: no atomic script across shards */
        }
        slot = sl;
        argv[argc] = rkeys[i];
        len[argc++] = k;
    }
    argv[argc] = costarg;
    len[argc++] = (size_t)snprintf(costarg, sizeof costarg, "%lld", (long long)cost);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *r = pairs[i].rule;
        bool burst = r->algorithm == SL_GCRA || r->algorithm == SL_TOKEN_BUCKET;
        const char *alg = sl_algorithm_name(r->algorithm);
        argv[argc] = alg;
        len[argc++] = strlen(alg);
        int64_t v[6] = {r->limit,
                        r->window_ns / NS_PER_MS,
                        burst ? r->burst : -1,
                        r->algorithm == SL_SLIDING_BUCKETS ? r->buckets : -1,
                        r->max_delay_ns / NS_PER_MS,
                        pairs[i].shadow ? 1 : 0};
        for (int j = 0; j < 6; j++) {
            if ((j == 2 || j == 3) && v[j] < 0) {
                argv[argc] = "-";
                len[argc++] = 1;
                continue;
            }
            argv[argc] = nums[i][j];
            len[argc++] = (size_t)snprintf(nums[i][j], sizeof nums[i][j], "%lld", (long long)v[j]);
        }
    }
    int node = rc_key_node(s->client, rkeys[0], strlen(rkeys[0]));
    if (node_mode(s, node) != REDIS_MODE_MODULE) {
        return -1; /* the scripts cannot call each other: the step-by-step path */
    }
    all_op_t *op = malloc(sizeof *op);
    if (op == NULL) {
        return -1;
    }
    *op = (all_op_t){.store = s, .node = node, .fn = fn, .arg = arg, .n = n, .cost = cost};
    atomic_fetch_add_explicit(&s->stats.decisions, 1, memory_order_relaxed);
    if (!format_args(s, argc, argv, len) || send_cmd(s, node, on_all, op) != 0) {
        trim_cmd(s);
        free(op);
        return -1;
    }
    return 0;
}
