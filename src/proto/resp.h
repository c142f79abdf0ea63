/*
 * resp.h - the RESP2 codec of sluiced: requests in, replies out, no sockets.
 *
 * Parsing follows hiredis's read.h and picohttpparser: the caller owns the bytes, feeds what it
 * has, and gets back "a whole request of N bytes", "need more" or "error". Nothing is allocated:
 * arguments point into the caller's buffer. Both request forms Redis accepts are parsed:
 *
 *   multibulk   *<argc>\r\n then argc times $<len>\r\n<len bytes>\r\n   (every client library)
 *   inline      words separated by spaces, ending in \n or \r\n         (telnet, nc, tests)
 *
 * Inline words may be "double quoted" (with \n \r \t \b \a \\ \" and \xHH escapes) or 'single
 * quoted' (with \' only), as redis-cli and redis-server split them; quoted words are unescaped in
 * place, which is why the buffer is not const.
 *
 * Limits are named and checked before anything is trusted: a request that would exceed one is a
 * protocol error (the connection is closed after replying), never a large allocation.
 *
 * Replies are appended to a buf_t (buf.h, one per connection); the encoders only allocate when
 * that buffer grows.
 */
#ifndef SLUICE_PROTO_RESP_H
#define SLUICE_PROTO_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/arg.h"
#include "proto/buf.h"

#define RESP_INLINE_MAX (64 * 1024)  /* longest inline request line, bytes (Redis: 64 KiB) */
#define RESP_BULK_MAX   (512 * 1024) /* default longest bulk argument, bytes */
#define RESP_ARGS_MAX   1024         /* default most arguments in one request */
#define RESP_ERR_MAX    128          /* a resp_parse error message fits in this */

/* One argument: len bytes at ptr, inside the parsed buffer (not NUL-terminated). The same type
 * as the SL.THROTTLE parser's arguments (throttle_args.h), so a request's argv goes to it as is. */
typedef proto_arg_t resp_arg_t;

/* Limits a parse enforces; zeros mean the defaults above. */
typedef struct resp_limits {
    size_t bulk_max; /* longest bulk argument, bytes */
    size_t args_max; /* most arguments; never more than the caller's argv capacity */
} resp_limits_t;

enum resp_status {
    RESP_ERROR = -1,  /* protocol error: err holds "Protocol error: ..." */
    RESP_PARTIAL = 0, /* the buffer holds a prefix of a request: read more and call again */
};

/*
 * Parses one request from the start of buf[0..len). On success returns the number of bytes it
 * used (> 0) and sets *argc and argv[0..*argc) (argc may be 0 for an empty inline line, which
 * the caller skips). Returns RESP_PARTIAL when more bytes are needed, or RESP_ERROR with a
 * NUL-terminated message in err (RESP_ERR_MAX bytes). argv has room for argv_cap entries; more
 * arguments than min(argv_cap, limits->args_max) is an error. Never reads outside buf[0..len);
 * writes inside it only to unescape quoted inline words.
 *
 * On RESP_PARTIAL, *need (may be NULL) gets how long buf must grow before another parse can get
 * further: the end of the bulk argument being received when its length is known, else len + 1.
 * A caller that waits for that many bytes parses a request of large arguments in O(its size),
 * however it is split, instead of again for every byte.
 */
long resp_parse(char *buf, size_t len, const resp_limits_t *limits, resp_arg_t *argv,
                size_t argv_cap, size_t *argc, size_t *need, char *err);

/* Reply encoders. Each appends one RESP2 value; on allocation failure b->failed is set and the
 * call does nothing (check b->failed once per batch, not per call). */
void resp_add_simple(buf_t *b, const char *s);      /* +s\r\n (no CR/LF in s) */
void resp_add_error(buf_t *b, const char *fmt, ...) /* -msg\r\n, printf-style */
    __attribute__((format(printf, 2, 3)));
void resp_add_int(buf_t *b, int64_t v);                        /* :v\r\n */
void resp_add_bulk(buf_t *b, const void *p, size_t len);       /* $len\r\n...\r\n */
void resp_add_null(buf_t *b);                                  /* $-1\r\n */
void resp_add_array(buf_t *b, size_t n);                       /* *n\r\n, then n values */
void resp_add_int_array(buf_t *b, const int64_t *v, size_t n); /* *n then n integers */

#endif /* SLUICE_PROTO_RESP_H */
