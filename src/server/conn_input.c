/*
 * conn_input.c - connections' input buffers (see conn.c's header): where a read's bytes go
 * (the connection's own buffer, or its loop's spare one lent for the read), and their count
 * against --max-input-buffers, per connection and by size class. conn.c closes the largest
 * holders when the cap is passed.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "server/conn_input.h"
#include "server/loop.h"

unsigned conn_size_class(size_t bytes)
{
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)bytes);
    return k < INPUT_SIZE_CLASSES ? k : INPUT_SIZE_CLASSES - 1;
}

/* A counted input buffer goes from old_cap to new_cap bytes (0: none). */
void conn_input_count(server_t *srv, size_t old_cap, size_t new_cap)
{
    if (new_cap > old_cap) {
        atomic_fetch_add_explicit(&srv->input_bytes, new_cap - old_cap, memory_order_relaxed);
    } else {
        atomic_fetch_sub_explicit(&srv->input_bytes, old_cap - new_cap, memory_order_relaxed);
    }
    if (old_cap > 0) {
        atomic_fetch_sub_explicit(&srv->input_classes[conn_size_class(old_cap)], 1,
                                  memory_order_relaxed);
    }
    if (new_cap > 0) {
        atomic_fetch_add_explicit(&srv->input_classes[conn_size_class(new_cap)], 1,
                                  memory_order_relaxed);
    }
}

/* The size class of the largest input buffer any connection holds, or -1. */
int conn_input_top_class(server_t *srv)
{
    for (int k = INPUT_SIZE_CLASSES - 1; k >= 0; k--) {
        if (atomic_load_explicit(&srv->input_classes[k], memory_order_relaxed) > 0) {
            return k;
        }
    }
    return -1;
}

/* The bytes of requests c holds that count against --max-input-buffers: its own input buffer
 * (not one lent for a read) and what its protocol holds (conn_hold). */
size_t conn_counted(const conn_t *c)
{
    return (c->in != NULL && !c->in_borrowed ? c->in_cap : 0) + c->held;
}

/* Gives c's input buffer up (it holds nothing worth keeping): back to the loop as its spare if
 * it has none and the buffer is of the initial size, else freed. */
void conn_input_release(conn_t *c)
{
    loop_t *l = c->loop;
    if (c->in == NULL) {
        return;
    }
    size_t before = conn_counted(c);
    if (l->spare == NULL && c->in_cap == INPUT_INITIAL) {
        l->spare = c->in;
    } else {
        free(c->in);
    }
    c->in = NULL;
    c->in_len = 0;
    c->in_cap = 0;
    c->in_borrowed = false;
    conn_input_count(l->srv, before, conn_counted(c));
}

void conn_hold(conn_t *c, size_t more, size_t less)
{
    size_t before = conn_counted(c);
    c->held = c->held + more - less;
    conn_input_count(c->loop->srv, before, conn_counted(c));
}

/* After a read's requests were answered: a drained buffer is given up; one holding a partial
 * request (or requests waiting for a write) is kept, and counted if it was lent. */
void conn_input_settle(conn_t *c)
{
    if (c->in == NULL) {
        return;
    }
    if (c->in_len == 0) {
        conn_input_release(c);
    } else if (c->in_borrowed) {
        size_t before = conn_counted(c);
        c->in_borrowed = false;
        conn_input_count(c->loop->srv, before, conn_counted(c));
    }
}

/* Room for input at the end of c's input buffer, at least READ_CHUNK bytes (*len set); NULL
 * when out of memory. A connection holding nothing borrows its loop's spare buffer (settled
 * once the read's requests are answered). */
char *conn_input_room(conn_t *c, size_t *len)
{
    loop_t *l = c->loop;
    if (c->in == NULL) { /* nothing buffered: read into the loop's spare (on_read settles it) */
        if (l->spare == NULL && (l->spare = malloc(INPUT_INITIAL)) == NULL) {
            return NULL;
        }
        c->in = l->spare;
        c->in_cap = INPUT_INITIAL;
        c->in_borrowed = true;
        l->spare = NULL;
    } else if (c->in_cap - c->in_len < READ_CHUNK) {
        /* settled after every read, so a buffer still here is the connection's own */
        size_t cap = c->in_cap * 2;
        while (cap - c->in_len < READ_CHUNK) {
            cap *= 2;
        }
        char *p = realloc(c->in, cap);
        if (p == NULL) {
            return NULL;
        }
        size_t before = conn_counted(c);
        c->in = p;
        c->in_cap = cap;
        conn_input_count(l->srv, before, conn_counted(c));
    }
    *len = c->in_cap - c->in_len;
    return c->in + c->in_len;
}
