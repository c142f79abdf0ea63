/*
 * protocol.h - what the server asks of a protocol (RESP, HTTP): a table of functions given to
 * each listener when it is created. The server (server.c, conn.c) knows connections, loops and
 * listeners; it reads bytes into a connection's input buffer and hands the connection to its
 * listener's protocol, which parses what it can, answers it into c->out and ends the batch with
 * conn_batch_done(). The server never parses or writes a protocol's bytes itself: where it must
 * say something (a client refused at max-clients, one closed for the input-buffer cap) it asks
 * the protocol for the words.
 *
 * Per-connection state a protocol needs (HTTP's parser position, RESP's wait for a long bulk
 * argument) lives in an area the protocol sizes (state_size) at the end of the conn_t, zeroed
 * when the connection is accepted and reached with conn_state(): one allocation per
 * connection, whichever protocol. Zero bytes must be a valid start, or open() sets it up.
 *
 * Adding a protocol is a new file defining its protocol_t and one entry where main.c creates
 * the listeners (docs/dev/design.md, "adding a protocol").
 */
#ifndef SLUICE_SERVER_PROTOCOL_H
#define SLUICE_SERVER_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/buf.h"

typedef struct conn conn_t;

typedef struct protocol {
    const char *name;  /* lower case, as CLIENT LIST reports it: "resp2", "http" */
    const char *label; /* for logs: "RESP", "HTTP" */
    size_t state_size; /* bytes of per-connection state (conn_state()), 0 for none */
    const char *alpn;  /* the TLS ALPN protocol id it answers to ("h2"), NULL: none */

    /* A connection was accepted (its state is zeroed). May be NULL. */
    void (*open)(conn_t *c);
    /* The connection is being freed: release what the state holds. May be NULL. */
    void (*close)(conn_t *c);

    /* Answers every complete request in c->in[0..c->in_len): begins with conn_batch_begin(),
     * ends with conn_batch_done() (the bytes it consumed, the requests it answered). Stops early
     * while c->writing or c->closing. Counts its requests and protocol errors in c->loop->stats. */
    void (*process)(conn_t *c);

    /* The input buffer was dropped (the client is evicted for the input-buffer cap): forget
     * the request being received. May be NULL. */
    void (*input_dropped)(conn_t *c);

    /* Appends the reply to a client refused at --max-clients; the server then closes it. */
    void (*reply_full)(buf_t *out);

    /* Appends an error reply carrying `why` (a sentence, no trailing period) for a connection
     * the server closes after it. */
    void (*reply_closing)(buf_t *out, const char *why);

    /* The server is stopping: what the protocol says before the connection's last answers
     * (HTTP/2's GOAWAY), appended to c->out. May be NULL. */
    void (*stopping)(conn_t *c);

    /* True while requests it read are still being decided and will be answered outside reply
     * slots (conn_defer): a closing connection stays open until they are out (while stopping,
     * until the drain's time is up). May be NULL: never. */
    bool (*pending)(const conn_t *c);
} protocol_t;

#endif /* SLUICE_SERVER_PROTOCOL_H */
