/*
 * grpc_stream.h - what sluiced's gRPC files share (grpc_front.c: HTTP/2 and the protocol;
 * grpc_calls.c: the calls; grpc_stream.c: answering them): a connection's and a stream's state,
 * and how a stream is answered. Private to those three files.
 *
 * Lifetimes. A stream's state (gstream_t) is on its connection's list from its first HEADERS
 * frame; it is freed when nghttp2 closes the stream, unless a decision is pending: then it is
 * orphaned (gc NULL) and the decision's callback frees it. A connection that closes with
 * decisions pending orphans their streams the same way.
 */
#ifndef SLUICE_SERVER_GRPC_STREAM_H
#define SLUICE_SERVER_GRPC_STREAM_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"
#include "proto/grpc.h"
#include "proto/rls.h"
#include "engine/engine.h"
#include "server/loop.h"
#include "server/rls_plan.h"

#define GRPC_STREAMS_MAX 100         /* concurrent streams a client may open (SETTINGS) */
#define GRPC_HEADERS_MAX (16 * 1024) /* bytes of one stream's header names and values */
#define GRPC_PATH_MAX    96          /* longest :path kept; longer ones are unknown methods */

#define PATH_RLS             "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define PATH_HEALTH          "/grpc.health.v1.Health/Check"
#define SERVICE_RLS          "envoy.service.ratelimit.v3.RateLimitService"
#define SERVICE_KUADRANT     "kuadrant.service.ratelimit.v1.RateLimitService"
#define SERVICE_UPSTREAM     "ratelimit" /* the health name envoyproxy/ratelimit registers */
#define PATH_KUADRANT_CHECK  "/kuadrant.service.ratelimit.v1.RateLimitService/CheckRateLimit"
#define PATH_KUADRANT_REPORT "/kuadrant.service.ratelimit.v1.RateLimitService/Report"

typedef struct grpc_conn grpc_conn_t;

/* The calls the gRPC port answers (grpc_calls.c's methods[]). */
typedef enum grpc_method {
    GRPC_RLS,             /* PATH_RLS: ShouldRateLimit */
    GRPC_KUADRANT_CHECK,  /* PATH_KUADRANT_CHECK: CheckRateLimit */
    GRPC_KUADRANT_REPORT, /* PATH_KUADRANT_REPORT: Report */
    GRPC_HEALTH,          /* PATH_HEALTH */
} grpc_method_t;

/* One stream: a call being received, decided or answered. */
typedef struct gstream {
    struct gstream *prev, *next; /* the connection's streams */
    grpc_conn_t *gc;             /* NULL once the stream or the connection is gone */
    pool_t *pool;                /* its loop's, which it came from */
    int32_t id;
    bool post;                /* :method POST */
    bool grpc_ct;             /* content-type application/grpc[+proto|;...] */
    bool answered;            /* a response was submitted: what still arrives is discarded */
    bool ended;               /* the client ended it: the call came whole */
    bool pending;             /* a decision is on its way (its callback frees an orphan) */
    size_t header_bytes;      /* of its header fields (GRPC_HEADERS_MAX) */
    size_t held_headers;      /* of those, counted in its connection's held bytes */
    char path[GRPC_PATH_MAX]; /* :path, NUL-terminated; "" when absent or too long */
    buf_t body;               /* the request's body: framed messages */
    buf_t resp;               /* the response's one framed message */
    size_t resp_off;          /* bytes of resp handed to nghttp2 */
    int64_t start_ns;         /* the batch clock when the call was complete */
    rls_plan_t plan;          /* a rate limit call's request while it is decided */
    grpc_method_t method;     /* the call, once it is complete (grpc_call) */
} gstream_t;

/* A gRPC connection's state (conn_state()). */
struct grpc_conn {
    conn_t *conn;
    nghttp2_session *session; /* NULL when it could not be created: the connection closes */
    gstream_t *streams;
    gstream_t *last;   /* the stream a frame was last received for: the next frame's, most
                          often (a stream's HEADERS, then its DATA), found without a lookup */
    size_t pending;    /* its streams whose decisions are on their way */
    uint64_t answered; /* calls answered during the current batch */
    size_t body_bytes; /* request bodies its streams hold, bytes (GRPC_BODIES_MAX) */
};

/* The request bodies one connection may hold at once: twice --max-request-size (one largest
 * call and others beside it), so a client cannot hold 100 streams' worth. */
#define GRPC_BODIES_MAX(max) (2 * ((max) + GRPC_PREFIX_BYTES))

/* Frees a stream's request body and lets go of its header fields, counted off its connection's
 * bytes (GRPC_BODIES_MAX, and those held against --max-input-buffers: conn_hold). */
void grpc_body_drop(gstream_t *s);

/* Appends everything the session has to send to out; false when the session failed. */
bool grpc_session_send(grpc_conn_t *gc, buf_t *out);

/* After an answer came outside a batch (from Redis, from the config thread): sends what the
 * session now has, behind all it sent before, at the end of this loop turn. */
void grpc_send_later(grpc_conn_t *gc, int64_t start_ns);

/*
 * Answers s: with status OK, the message in s->resp, then the trailers; otherwise a
 * trailers-only response carrying the status and `message` (a sentence). Counts the call.
 */
void grpc_answer(gstream_t *s, grpc_status_t status, const char *message);

/* Answers a request that is not gRPC (not a POST, or another content type) as gRPC's servers
 * do: HTTP 405 or 415. */
void grpc_answer_not_grpc(gstream_t *s);

/* Frees a stream and what it holds. */
void grpc_stream_free(gstream_t *s);

/* The client ended the stream: the call is complete; answer it (grpc_calls.c). */
void grpc_call(gstream_t *s);

#endif /* SLUICE_SERVER_GRPC_STREAM_H */
