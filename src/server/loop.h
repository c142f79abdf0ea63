/*
 * loop.h - sluiced's event loops and connections: the types the server's files share, and the
 * functions a protocol uses to answer through a connection (conn.c) and count (loop_stats.c).
 * Starting and stopping the loops is server.h's.
 *
 * One libuv loop per thread. Every loop listens on its own sockets for every address and port
 * (SO_REUSEPORT: the kernel spreads new connections over the loops), so a connection lives on
 * one loop for its whole life and nothing about it is shared. A read hands the connection's
 * buffered bytes to its listener's protocol (protocol.h: RESP, HTTP): every complete request in
 * them is parsed and answered into one output buffer, with the clock read once for the batch, and
 * written with one write. While a write is pending the connection stops reading (backpressure).
 *
 * Memory per client is bounded: output waiting for a client (its buffer, the pending write,
 * deferred replies) above --output-buffer-hard closes it at once, above --output-buffer-soft for
 * --output-buffer-soft-time closes it then; input buffers of all clients together are capped by
 * --max-input-buffers, the clients with the largest closed first. A connection with no partial
 * request holds no input buffer: it reads into its loop's spare one.
 */
#ifndef SLUICE_SERVER_LOOP_H
#define SLUICE_SERVER_LOOP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "store/pool.h"
#include "proto/buf.h"
#include "proto/netaddr.h"
#include "rules/ruledef.h"
#include "server/settings.h"
#include "engine/engine.h"
#include "server/protocol.h"

#define SERVER_PROTOCOLS_MAX 4 /* ports (each with its protocol) per bind address */
#define SERVER_LISTEN_MAX    (SERVER_PROTOCOLS_MAX * SETTINGS_BIND_MAX)
#define LATENCY_BUCKETS      12    /* histogram bounds, loop_latency_bounds_ns, then +Inf */
#define INPUT_SIZE_CLASSES   64    /* input buffers counted by floor(log2(capacity)) */
#define CONN_HELD_MAX        65536 /* replies one loop may hold back (conn_resolve_after) */

typedef struct server server_t;
typedef struct loop loop_t;

/* A port every bind address listens on, and the protocol it speaks. */
typedef struct server_listener {
    const protocol_t *proto;
    int port;
    bool tls; /* speaks TLS (server_t.tls) */
} server_listener_t;

/*
 * A reply that comes later (a decision waiting on Redis). Replies leave in request order: while
 * a connection has deferred replies, the replies after them are written into their own slots,
 * and a slot's bytes move to the connection's output only when every slot before it is done.
 */
typedef struct reply_slot {
    struct reply_slot *next;
    conn_t *conn; /* NULL once the connection is gone: the slot is freed when resolved */
    buf_t buf;
    bool done;
    bool close_after;   /* the connection closes once this reply is out (HTTP, no keep-alive) */
    bool droppable;     /* a refusal held back (auth_guard.h): a client that closed its side, and
                           waits for nothing else, is closed without it (conn.c) */
    bool in_batch;      /* taken while a batch was answered (batch_seq says which) */
    uint64_t batch_seq; /* the connection's batch_seq when taken */
    int64_t start_ns;   /* the batch's clock when taken: where the request's latency starts */
} reply_slot_t;

struct conn {
    uv_tcp_t tcp;
    loop_t *loop;
    const protocol_t *proto; /* its listener's */
    bool authed;
    bool admin;   /* may change rules, overrides, resets (the RESP user "admin", or none set) */
    bool closing; /* close once the output is written */
    bool writing; /* a uv_write is pending */
    bool counted; /* counted in the server's client total */
    bool eof;     /* the client closed its side */
    bool
        lingering; /* output written, FIN sent, discarding input until EOF (conn_close_lingering) */
    bool detached; /* no socket (the fuzz target): replies accumulate in out, never written */
    bool flush_queued;   /* in its loop's flush list: written after this loop turn's callbacks */
    bool lookups_paused; /* not read until the loop's override lookups have room (conn.c) */
    conn_t *flush_next;
    bool in_batch;           /* a read's requests are being answered: conn_batch_done writes them */
    bool in_borrowed;        /* in is the loop's spare buffer, lent for one read (not counted) */
    bool over_soft;          /* output above --output-buffer-soft since over_soft_ns */
    int64_t over_soft_ns;    /* loop time (ns) the output went above the soft limit */
    size_t write_queue_seen; /* the pending write's bytes at the last idle tick */
    size_t slot_bytes;       /* bytes of done replies waiting in slots behind an earlier one */
    uint64_t batch_seq;      /* batches answered on this connection */
    uint64_t batch_late;     /* requests of the current batch whose replies wait in slots */
    uint64_t id;
    char name[128]; /* CLIENT SETNAME */
    char addr[64];  /* peer address, text */
    int port;       /* peer port */
    netaddr_t peer; /* peer address, parsed (family 0 when unknown) */
    int64_t created_ns;
    int64_t last_active_ns; /* loop time (ns) of the last complete request, written reply or
                               connect */
    uint64_t requests;
    engine_inline_budget_t inline_budget; /* inline rules this connection may still create */
    char *in;      /* received, not yet consumed; NULL while there is nothing */
    size_t in_len; /* bytes */
    size_t in_cap; /* bytes allocated (counted in the server's input_bytes unless borrowed) */
    size_t held;   /* bytes of requests its protocol keeps outside the input buffer (gRPC's
                      bodies and header fields; conn_hold), counted with it */
    buf_t out;
    struct tls_conn *tls; /* its TLS session (tls.h), NULL for a plain connection; then out is
                             plaintext the session encrypts into tls_out before it is written */
    buf_t tls_out;
    reply_slot_t *slots; /* deferred replies, oldest first; NULL when none */
    reply_slot_t *slots_tail;
    reply_slot_t *spare_slot; /* the last resolved slot, kept with its buffer for the next
                                 conn_defer(): no allocation per deferred reply */
    conn_t *prev;
    conn_t *next;
    _Alignas(max_align_t) unsigned char state[]; /* the protocol's, proto->state_size bytes */
};

/* The protocol's per-connection state (protocol_t.state_size bytes, zeroed on accept). */
static inline void *conn_state(conn_t *c)
{
    return c->state;
}

/* Per loop counters, read by /metrics and INFO from other threads. */
typedef struct loop_stats {
    _Atomic uint64_t connections;      /* accepted, total */
    _Atomic uint64_t rejected_clients; /* refused at max_clients */
    _Atomic uint64_t commands;         /* RESP commands */
    _Atomic uint64_t http_requests;
    _Atomic uint64_t grpc_calls; /* gRPC calls answered, any status */
    _Atomic uint64_t protocol_errors;
    _Atomic uint64_t batches;
    _Atomic uint64_t latency[LATENCY_BUCKETS + 1]; /* requests per latency bin (not cumulative) */
    _Atomic uint64_t latency_sum_ns;
    _Atomic uint64_t latency_count;
    _Atomic uint64_t output_hard_closed; /* clients closed above --output-buffer-hard */
    _Atomic uint64_t output_soft_closed; /* clients closed above --output-buffer-soft too long */
    _Atomic uint64_t evicted_clients;    /* clients closed for --max-input-buffers */
    _Atomic uint64_t held_replies;       /* replies held back now (conn_resolve_after): a gauge */
} loop_stats_t;

struct loop {
    server_t *srv;
    unsigned index;
    uv_loop_t uv;
    uv_thread_t thread;
    uv_tcp_t listeners[SERVER_LISTEN_MAX];
    const protocol_t *listener_proto[SERVER_LISTEN_MAX];
    bool listener_tls[SERVER_LISTEN_MAX];
    char *tls_in; /* ciphertext read from a TLS connection, before it is decrypted */
    size_t nlisteners;
    uv_async_t stop_async;
    uv_async_t evict_async;  /* another loop saw the input buffers over the cap */
    bool evict_open;         /* evict_async may be sent to (under the server's evict_mu) */
    char *spare;             /* an input buffer lent to each read of a connection holding none */
    void *spare_job;         /* http_decide.c's last finished decision job, kept for the next */
    uv_timer_t idle_timer;   /* idle timeouts; while stopping, the drain check */
    uv_timer_t delay_timer;  /* the soonest of delayed's due times */
    struct delayed *delayed; /* replies held back (conn_resolve_after): a min-heap on due time */
    size_t ndelayed;         /* in delayed, at most CONN_HELD_MAX */
    size_t delayed_cap;      /* delayed's room */
    uint64_t stop_ms;        /* loop time the stop began */
    engine_worker_t *worker;
    conn_t *conns;
    size_t nconns;
    int64_t now_ns;          /* the clock for the current batch */
    uv_check_t flush_check;  /* writes the connections in flush_head after each poll */
    uv_idle_t flush_idle;    /* active while flush_head is not empty: the poll does not block */
    conn_t *flush_head;      /* connections whose replies resolved outside a batch */
    pool_t pool;             /* memory its connections take and give back on every request */
    struct streams *streams; /* its stats streams and their timer (http_stats.c), or NULL */
    loop_stats_t stats;
};

struct server {
    server_settings_t *cfg;
    server_listener_t listen[SERVER_PROTOCOLS_MAX]; /* set with server_listen() */
    size_t nlisten;
    engine_t *engine;
    unsigned nloops;
    loop_t *loops;
    _Atomic size_t clients;
    _Atomic uint64_t next_client_id;
    _Atomic bool stopping; /* the loops are stopping: no new connection, answers drain */
    _Atomic bool draining; /* a stop was asked for (set before stopping, and with it): the
                              health checks fail while requests are still served */
    int64_t started_ns;
    /* main thread: */
    uv_loop_t *main_loop;
    _Atomic uint64_t snapshots;
    _Atomic uint64_t snapshot_errors;
    _Atomic int64_t last_snapshot_ns;
    size_t ntrusted;
    netaddr_net_t *trusted;     /* the trusted proxies' networks, [ntrusted], owned by main */
    struct tls_ctx *tls;        /* certificate and key of the TLS listeners; NULL: none */
    _Atomic size_t input_bytes; /* every connection's input buffer, bytes allocated */
    _Atomic size_t input_classes[INPUT_SIZE_CLASSES]; /* connections by input buffer size */
    uv_mutex_t evict_mu;                              /* guards the loops' evict_open */
    _Atomic size_t streams;                           /* stats streams open (http_stats.c) */
    _Atomic size_t replays; /* POST /v1/replay running, or queued (http_replay.c) */
};

/* Writes the connection's pending output (what handlers appended to c->out). */
void conn_flush(conn_t *c);

/* A slot for a reply that will come later (appended after every earlier reply). NULL when out of
 * memory. */
reply_slot_t *conn_defer(conn_t *c);

/* Frees the resolved reply slot c keeps for its next request, if any (a closing connection's
 * last step, and a test's that made c itself). */
void conn_free_spare(conn_t *c);

/* The protocol now holds `more` bytes more and `less` bytes fewer of c's requests outside its
 * input buffer (c->held): counted against --max-input-buffers with it, so the clients holding
 * the most are the ones closed at the cap, and the cap is checked after the read. */
void conn_hold(conn_t *c, size_t more, size_t less);

/* The slot's reply is in slot->buf: writes it (and any done slots after it) once every earlier
 * reply has gone. Frees the slot. Safe when the connection has gone (slot->conn NULL). */
void conn_resolve(reply_slot_t *slot);

/* Closes c at once, unanswered: nothing more is written to it (what waits in its output and its
 * slots is dropped) and the batch answering its requests stops. */
void conn_drop(conn_t *c);

/*
 * conn_resolve(slot) once delay_ns have passed (a reply held back: /v1/auth under a max_delay
 * rule, as nginx's limit_req delays; a refused secret, auth_guard.h). Returns true when the slot
 * is taken care of: held, or resolved now (delay_ns <= 0, the connection gone, the server
 * stopping; a loop that stops resolves every held reply at once). Returns false, the slot left
 * unresolved for the caller, when its loop already holds CONN_HELD_MAX replies or memory for one
 * more ran out (counted in sluice_held_replies_full_total). O(log n) in the replies held.
 */
bool conn_resolve_after(reply_slot_t *slot, int64_t delay_ns);

/* Runs one request's handler so its reply lands in order: straight into c->out, or, while
 * replies are deferred, into a slot of its own. */
void conn_in_order(conn_t *c, void (*handler)(void *arg), void *arg);

/* Begins a protocol's batch, answering what one read brought: reads the clock once for it
 * (c->loop->now_ns), lets the engine worker know, marks c in a batch. Returns the clock, ns,
 * for conn_batch_done(). */
int64_t conn_batch_begin(conn_t *c);

/* Ends a protocol's batch: drops the `consumed` bytes of c->in, counts the n requests answered
 * (last activity, the batch count, the latency histogram from start_ns: a request whose reply went
 * into the output in this batch took the batch's time; one whose reply waits in a slot is recorded
 * when the reply moves to the output) and flushes the replies. */
void conn_batch_done(conn_t *c, size_t consumed, uint64_t n, int64_t start_ns);

extern const int64_t loop_latency_bounds_ns[LATENCY_BUCKETS];

/* A loop_stats_t counter summed over the loops: SERVER_STAT(srv, commands). Any thread. */
uint64_t server_stat_sum(server_t *srv, size_t offset);
#define SERVER_STAT(srv, field) server_stat_sum((srv), offsetof(loop_stats_t, field))

/* Records n requests each answered latency_ns after it started (metrics). */
void loop_record_batch(loop_t *l, uint64_t n, int64_t latency_ns);

/* Bytes of output waiting for c: its buffer, the pending write, done replies in slots. */
size_t conn_output_bytes(const conn_t *c);

#endif /* SLUICE_SERVER_LOOP_H */
