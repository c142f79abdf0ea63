/*
 * conn_input.h - connections' input buffers and their count against --max-input-buffers
 * (conn_input.c), private to conn.c and conn_input.c.
 */
#ifndef SLUICE_SERVER_CONN_INPUT_H
#define SLUICE_SERVER_CONN_INPUT_H

#include <stddef.h>

#include "server/loop.h"

#define READ_CHUNK    (16 * 1024)      /* room offered to each read, bytes */
#define INPUT_INITIAL (2 * READ_CHUNK) /* a fresh input buffer (and a loop's spare), bytes */

/* The size class of a buffer of `bytes` (floor of log2, capped at INPUT_SIZE_CLASSES - 1). */
unsigned conn_size_class(size_t bytes);

/* A counted input buffer goes from old_cap to new_cap bytes (0: none). */
void conn_input_count(server_t *srv, size_t old_cap, size_t new_cap);

/* The size class of the largest input buffer any connection holds, or -1. */
int conn_input_top_class(server_t *srv);

/* The bytes of requests c holds that count against --max-input-buffers: its own input buffer
 * (not one lent for a read) and what its protocol holds (conn_hold). */
size_t conn_counted(const conn_t *c);

/* Gives c's input buffer up (it holds nothing worth keeping): back to the loop as its spare if
 * it has none and the buffer is of the initial size, else freed. */
void conn_input_release(conn_t *c);

/* After a read's requests were answered: a drained buffer is given up; one holding a partial
 * request (or requests waiting for a write) is kept, and counted if it was lent. */
void conn_input_settle(conn_t *c);

/* Room for input at the end of c's input buffer, at least READ_CHUNK bytes (*len set); NULL
 * when out of memory. A connection holding nothing borrows its loop's spare buffer (settled
 * once the read's requests are answered). */
char *conn_input_room(conn_t *c, size_t *len);

#endif /* SLUICE_SERVER_CONN_INPUT_H */
