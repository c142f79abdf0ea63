/*
 * buf.h - a growable byte buffer: a connection's output, a reply being built, a command being
 * formatted. The protocols' encoders (resp.h, http.h) append to one; the server writes it.
 *
 * Zero-initialized is empty. An allocation that fails sets `failed` and makes every later append
 * do nothing, so a caller checks once (per batch, per reply) rather than after every append.
 */
#ifndef SLUICE_PROTO_BUF_H
#define SLUICE_PROTO_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct buf {
    char *data;  /* malloc'ed, len bytes used of cap */
    size_t len;  /* bytes written */
    size_t cap;  /* bytes allocated */
    bool failed; /* an allocation failed: the buffer is unusable, close the connection */
    size_t mark; /* a writer's own offset: http_begin() keeps where its status line starts */
} buf_t;

/* Frees b's bytes and empties it (failed cleared too). */
void buf_free(buf_t *b);

/* Grows b so that n more bytes fit; false, with b->failed set, if they cannot be had. Use
 * buf_reserve(). */
bool buf_grow(buf_t *b, size_t n);

/* Makes room for n more bytes (b->data + b->len .. + n); false, with b->failed set, if it
 * cannot be had. For encoders that write in place. Inline: every reply passes here. */
static inline bool buf_reserve(buf_t *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->cap - b->len >= n)
        return true;
    return buf_grow(b, n);
}

/* Drops the first n bytes (written to the socket). */
void buf_consume(buf_t *b, size_t n);

/* Appends len bytes at p, as they are. Inline: the encoders' every append passes here. */
static inline void buf_add(buf_t *b, const void *p, size_t len)
{
    if (len > 0 && buf_reserve(b, len)) {
        memcpy(b->data + b->len, p, len);
        b->len += len;
    }
}

/* Appends the NUL-terminated s, as it is (pre-encoded bytes). */
void buf_add_str(buf_t *b, const char *s);

/* Appends printf-style formatted text, as it is. */
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* SLUICE_PROTO_BUF_H */
