/*
 * redis_store_impl.h - what the Redis request store's files share (redis_store.h is its
 * interface): the pending decisions, each loop's store and what the loops share, and the
 * functions one file lends another. Each file calls only those listed before it:
 *   redis_shared.c    the shared state: start-up probe, node modes, the caches' epochs
 *   redis_keys.c      Redis key names, the cache's names for them, command arguments
 *   redis_parse.c     replies read as decisions and leases
 *   redis_store.c     nodes, pending decisions and deadlines, replies, decide/settle/reset
 *   redis_allowall.c  SL.ALLOWALL in one step
 * Nothing outside these files includes this.
 */
#ifndef SLUICE_STORE_REDIS_STORE_IMPL_H
#define SLUICE_STORE_REDIS_STORE_IMPL_H

#include <hiredis/hiredis.h>

#include "proto/buf.h"
#include "store/freelist.h"
#include "store/lua_scripts.h"
#include "remote/overlimit_cache.h"
#include "store/redis_store.h"

#define CACHE_SLOTS      4096 /* over-limit cache entries per loop (direct-mapped) */
#define EPOCH_STRIPES    1024 /* the caches' epochs: one per stripe of key hashes; a power of two */
#define SHARED_NODES_MAX (2 * RC_NODES_MAX) /* nodes whose mode is shared (by name) */
#define NODE_NAME_MAX    80
#define MODE_RESENDS_MAX 2 /* re-sends of one decision after "unknown command" */
#define RKEY_MAX         (1024 + 128)
#define RKEY_INLINE      160  /* Redis key bytes a pending decision holds without an allocation */
#define PENDING_KEEP     4096 /* free pending decisions kept for reuse per store */
#define CMD_KEEP         (64 * 1024) /* a command buffer grown past this is freed after use */
#define ARGS_MAX         32
#define KEY_HASH_DIGITS  8  /* the hex digits ending a Redis key */
#define RUN_ID_MAX       40 /* a Redis run_id: 40 hex digits */

/* What a pending request asks of Redis. */
typedef enum pending_op {
    OP_DECIDE = 0, /* a decision: SL.THROTTLE, or the script with a cost */
    OP_RESET,      /* a DEL of the key in both modes' names */
    OP_SETTLE,     /* a settle: SL.SETTLE, or the script's settle */
    OP_LEASE,      /* a lease: SL.LEASE, or the script's lease */
    OP_RETURN,     /* a lease given back: SL.RETURN, or the script's return */
    OP_ACQUIRE,    /* a hold taken: SL.ACQUIRE, or the script's acquire */
    OP_RELEASE,    /* a hold given back: SL.RELEASE, or the script's release */
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
    int64_t cost;             /* OP_DECIDE: units */
    bool beyond;              /* OP_DECIDE, OP_ACQUIRE: a cost over the capacity, sent as a peek and
                                 answered as that cost's refusal */
    int64_t reserved, actual; /* OP_SETTLE: units */
    int64_t charged_ns;       /* OP_SETTLE: on Redis's clock, ns; -1 = when Redis runs it */
    int64_t want, lease_ns;   /* OP_LEASE: units asked for, for how long (ns) */
    sl_lease_t *lease_out;    /* OP_LEASE: the grant goes there; OP_RETURN: what goes back */
    redis_lease_node_t *node_out;  /* OP_LEASE: where it was granted */
    redis_lease_node_t lease_node; /* OP_RETURN: where it was granted */
    sl_lease_t lease;              /* OP_RETURN: the lease */
    int64_t unused;                /* OP_RETURN: units given back */
    int64_t closed_ns;             /* the rule's closed start, ns; 0 none; -1 an open rule */
    int64_t closed_ms;             /* the closed start it is sent with, ms; -1 none */
    int64_t asked_ns;              /* the caller's clock when it was asked (the cache's time) */
    int replicas;                  /* OP_DECIDE: replicas an admission waits for; 0 none */
    int64_t replica_wait_ms;       /* OP_DECIDE: their WAIT's timeout, ms */
    int wait_idx;                  /* the node the last WAIT went to */
    unsigned waits_out;            /* WAITs sent for it whose reply has not come: p is kept */
    bool holding;                  /* its admission (held) waits for the last WAIT's reply */
    bool acks_void;                /* the admission came from a node other than the WAIT's */
    bool release_due;              /* released while WAITs were out: freed at the last reply */
    sl_decision_t held;            /* the admission, while holding */
    int64_t hold_ns;               /* OP_ACQUIRE: the hold's time, ns (cost: its units) */
    uint64_t hold_id;              /* OP_ACQUIRE: the entropy (48 bits); OP_RELEASE: the id */
    bool sampled;                  /* OP_RELEASE: sample is sent (LATENCY_US, DROPPED) */
    sl_sample_t sample;            /* OP_RELEASE: what the caller reported */
    sl_hold_t *hold_out;           /* OP_ACQUIRE, OP_RELEASE: the hold made or freed goes there */
    int64_t reserve; /* OP_DECIDE, OP_ACQUIRE: units it must leave for higher priorities (RESERVE,
                        the scripts' reserve); 0 none */
    uint64_t cache_hash;         /* rkey's hash: where a refusal is remembered */
    uint64_t epoch;              /* its stripe's epoch when it was sent */
    struct pending *prev, *next; /* the FIFO */
    struct pending *wait_next;   /* in a node's list of decisions waiting for its probe */
    size_t rkey_len;
    char *rkey; /* rkey_inline, or allocated */
    char rkey_inline[RKEY_INLINE];
} pending_t;

/*
 * A node as every loop's store sees it, found by its name. mode and closed_ns are read without
 * a lock by every decision; the rest (and every write) is under the shared lock: a probe's
 * answer on any loop's connection (rs_node_probed).
 */
typedef struct shared_node {
    char name[NODE_NAME_MAX];    /* "host:port", set before the node is published */
    _Atomic int mode;            /* redis_mode_t, as last found out */
    _Atomic int64_t closed_ns;   /* its closed start: when it lost its data or changed mode, ns
                                    since the Unix epoch on this host's clock; 0 none */
    _Atomic uint64_t generation; /* bumped when it loses its data or changes mode */
    bool known;                  /* a probe has answered (or the start-up probe) */
    char run_id[RUN_ID_MAX + 1]; /* INFO server's, as last found out; "" unknown */
} shared_node_t;

/* A node as this store sees it: the shared node and the decisions waiting for the answer to a
 * probe of it. */
typedef struct node_state {
    redis_store_t *store;
    int index;           /* rc node */
    shared_node_t *node; /* the shared node, or own when the shared table is full; NULL until
                            first needed */
    shared_node_t own;
    bool probing;            /* a COMMAND INFO and an INFO server are on their way */
    redis_mode_t probe_mode; /* COMMAND INFO's answer, while INFO's is awaited (0: none) */
    pending_t *waiting;      /* decisions to send when it answers, in order */
    pending_t *waiting_tail;
} node_state_t;

struct redis_shared {
    uint64_t seed;           /* the caches' key hash seed */
    redis_mode_t start_mode; /* found at start: a node's mode until its own probe answers */
    pthread_mutex_t lock;    /* adding nodes; the stores' slots (redis_shared_set) */
    _Atomic size_t nnodes;   /* published nodes */
    shared_node_t nodes[SHARED_NODES_MAX];
    _Atomic uint64_t epoch[EPOCH_STRIPES]; /* bumped when a key of the stripe gets room back */
    redis_event_fn on_event;               /* told of failures (redis_shared_on_event) */
    void *on_event_arg;
};

struct redis_store {
    uv_loop_t *loop;
    rc_client_t *client;
    redis_shared_t *shared;
    redis_node_fn on_node;
    void *on_node_arg;
    int64_t timeout_ms;
    uv_timer_t timer;
    pending_t *head, *tail;
    node_state_t nodes[RC_NODES_MAX];
    olc_t cache; /* the over-limit cache, over cache_slots */
    olc_entry_t cache_slots[CACHE_SLOTS];
    redis_store_stats_t stats;
    freelist_t pending;     /* pending_t to reuse */
    buf_t cmd;              /* the command being formatted, reused */
    redis_inside_t *inside; /* the call through the seam under way (redis_store_enter) */
    uint64_t hold_key;      /* random at create: keys the entropy of the scripts' hold ids */
    uint64_t holds;         /* acquires sent: the entropy of each differs */
};

typedef struct args {
    int argc;
    const char *argv[ARGS_MAX];
    size_t len[ARGS_MAX];
    char num[ARGS_MAX][24];
} args_t;

/* ---- redis_shared.c ----------------------------------------------------------------------- */

/* The mode a reply to COMMAND INFO sl.throttle says, or 0 when it is no such reply. */
redis_mode_t rs_probe_mode(const redisReply *r);
/* The run_id in a reply to INFO server into out, or "" when it has none. */
void rs_probe_run_id(const redisReply *r, char out[RUN_ID_MAX + 1]);
/* What a probe of node n found, mode (0: unknown) and run_id ("" unknown), at now_ns: recorded
 * under the shared lock. Returns what changed (redis_node_news_t): the mode; the data lost (a
 * run_id other than the one recorded); and a closed start from now_ns when either happened to a
 * node probed before (the first probe of a node records only). */
unsigned rs_node_probed(redis_shared_t *sh, shared_node_t *n, redis_mode_t mode, const char *run_id,
                        int64_t now_ns);
/* The shared node named name, added with the start mode if new; NULL when the table is full. */
shared_node_t *rs_shared_node(redis_shared_t *sh, const char *name);
/* The epoch of the stripe of key hash h. */
_Atomic uint64_t *rs_epoch_of(redis_shared_t *sh, uint64_t h);
/* Every cache entry of every loop is dropped, and no answer already on its way is remembered. */
void rs_forget_all(redis_shared_t *sh);
/* Tells the shared's receiver of ev, with fmt's line. */
void rs_event(const redis_shared_t *sh, redis_event_t ev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- redis_keys.c ------------------------------------------------------------------------- */

/* The 8 hex digits ending a Redis key for r's algorithm in mode. */
void rs_key_digits(const sl_rule_t *r, redis_mode_t mode, char out[KEY_HASH_DIGITS]);
/* The epoch a cached refusal is kept under: the stripe's, tagged with the rule's numbers. */
uint64_t rs_cache_epoch(uint64_t stripe_epoch, const sl_rule_t *r);
/* "sl:{<key>}:<rule>:<digits>" into out; returns its length or 0 if too long. */
size_t rs_key(const char *name, const sl_rule_t *r, redis_mode_t mode, const void *key,
              size_t key_len, char *out, size_t cap);
/* The cache's name for a Redis key. */
uint64_t rs_key_hash(const redis_store_t *s, const char *rkey, size_t rkey_len);
/* The key has room again: its cached refusals, in either mode's name, are dropped everywhere. */
void rs_forget_key(redis_store_t *s, const sl_rule_t *rule, const char *rkey, size_t rkey_len);
/* p's key and cache name in another mode's form. */
void rs_rekey(redis_store_t *s, pending_t *p, redis_mode_t mode);
/* The command as Redis reads it into s->cmd. False when out of memory. */
bool rs_format_args(redis_store_t *s, int argc, const char *const *argv, const size_t *len);
/* Frees a command buffer that one large command grew past CMD_KEEP. */
void rs_trim_cmd(redis_store_t *s);
/* Sends the formatted command s->cmd to node idx; rc_command_at's result. */
int rs_send_cmd(redis_store_t *s, int idx, rc_reply_fn fn, void *arg);
/* p's command for the module: SL.THROTTLE ... COST c, or SL.SETTLE ... */
void rs_module_args(args_t *a, const pending_t *p);
/* p's command for a script: EVALSHA (EVAL when full) ... */
void rs_lua_args(args_t *a, const pending_t *p, const lua_script_t *script, bool full);

/* ---- redis_parse.c ------------------------------------------------------------------------ */

/* A reply's five integers (the module's, in ms) or six (a script's, in us) as a decision. */
bool rs_parse_decision(const redisReply *r, redis_mode_t mode, sl_decision_t *d);
/* A reply to a lease, [granted, at_us, until_us, remaining, reset_after], into *lease and a
 * peek after it into *d; false when it is no such reply. */
bool rs_parse_lease(const redisReply *r, redis_mode_t mode, const sl_rule_t *rule,
                    sl_lease_t *lease, sl_decision_t *d);
/* A reply to an acquire, [allowed, limit, remaining, retry_after, reset_after, hold_id] (times in
 * ms from the module, us from the script), into *d and the hold's id into *id. */
bool rs_parse_acquire(const redisReply *r, redis_mode_t mode, sl_decision_t *d, uint64_t *id);
/* "ERR unknown command 'SL.THROTTLE', ...": the node has no sluice.so (any more). */
bool rs_is_unknown_command(const redisReply *r);

/* ---- redis_store.c ------------------------------------------------------------------------ */

/* Asks node idx its mode (COMMAND INFO sl.throttle); 0, or -1 when nothing could be sent. */
int rs_probe(redis_store_t *s, int idx);
/* The mode node idx decides in, as last found out. */
redis_mode_t rs_node_mode(redis_store_t *s, int idx);
/* The closed start a request on node idx under rule is sent with, whole ms rounded up, or -1
 * (none): the latest of the rule's (rule_closed_ns: -1 an open rule, 0 none) and the node's
 * whose window (the rule's) now_ns is in. */
int64_t rs_closed_ms(redis_store_t *s, int idx, int64_t rule_closed_ns, const sl_rule_t *rule,
                     int64_t now_ns);

#endif /* SLUICE_STORE_REDIS_STORE_IMPL_H */
