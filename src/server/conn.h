/*
 * conn.h - what the loops (server.c) ask of the connections (conn.c), private to the two:
 * accepting, closing, the per-loop list of connections to write, replies held back for a delay,
 * and the cap on all input buffers. conn.c never calls into server.c.
 */
#ifndef SLUICE_SERVER_CONN_H
#define SLUICE_SERVER_CONN_H

#include <stdint.h>

#include <uv.h>

#include "server/loop.h"

#define LINGER_MS 2000 /* longest a closing connection waits for the client's EOF */

/* A listener's connection callback (uv_listen): accepts, and gives the connection the
 * listener's protocol. */
void conn_on_connection(uv_stream_t *server, int status);

/* Closes c now, without writing what waits (its memory goes when libuv has closed it). */
void conn_close_now(conn_t *c);

/* Writes every connection whose replies resolved outside a batch during this loop turn (the
 * loop's uv_check callback). */
void conn_flush_queued(uv_check_t *h);

/* Resolves the replies held back (conn_resolve_after) due by until_ms, loop time (UINT64_MAX:
 * all). */
void conn_delays_resolve(loop_t *l, uint64_t until_ms);

/* After the loop's input buffers grew, or once a second: enforces --max-input-buffers. */
void conn_input_check(loop_t *l);

/* Another loop saw the input buffers over the cap (the loop's evict_async callback). */
void conn_on_evict(uv_async_t *a);

#endif /* SLUICE_SERVER_CONN_H */
