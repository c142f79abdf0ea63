/*
 * grpc_front.c - sluiced's gRPC front end: Envoy's rate limit service
 * (/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) and the health check
 * (/grpc.health.v1.Health/Check), over HTTP/2 in clear text with prior knowledge (h2c), which
 * is how Envoy reaches a rate limit cluster. This file is HTTP/2 and the protocol table; the
 * calls are grpc_calls.c's, and answering a stream grpc_stream.c's.
 *
 * HTTP/2 is nghttp2's, driven by memory: process() feeds the connection's bytes to the session
 * (nghttp2_session_mem_recv) and appends what the session has to send (nghttp2_session_mem_send)
 * to the connection's output, so the server's loops, buffers and caps work as for the other
 * protocols and nghttp2 never touches a socket. A stream collects its headers and body; when the
 * client ends it, the call is answered (grpc_call()).
 *
 * Misuse closes that connection only: a bad preface or a broken frame ends the session
 * (nghttp2's GOAWAY, then the close), a header list over GRPC_HEADERS_MAX resets that stream,
 * a body over --max-request-size is answered RESOURCE_EXHAUSTED as soon as its size shows, as
 * is one that would take the bodies a connection holds past GRPC_BODIES_MAX, and nghttp2
 * refuses streams beyond GRPC_STREAMS_MAX at once. When the server stops, each connection is
 * sent a GOAWAY with no error and closes once its calls in flight are answered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/grpc_front.h"
#include "server/grpc_stream.h"
#include "engine/log.h"
#include "server/server.h"

/* ---- nghttp2's callbacks ------------------------------------------------------------------- */

static gstream_t *stream_of(grpc_conn_t *gc, int32_t id)
{
    if (gc->last != NULL && gc->last->id == id) {
        return gc->last;
    }
    gstream_t *s = nghttp2_session_get_stream_user_data(gc->session, id);
    gc->last = s != NULL ? s : gc->last;
    return s;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    grpc_conn_t *gc = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    gstream_t *s = pool_calloc(&gc->conn->loop->pool, 1, sizeof *s);
    if (s == NULL) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream */
    }
    s->pool = &gc->conn->loop->pool;
    s->gc = gc;
    s->id = frame->hd.stream_id;
    s->next = gc->streams;
    if (gc->streams != NULL) {
        gc->streams->prev = s;
    }
    gc->streams = s;
    gc->last = s;
    nghttp2_session_set_stream_user_data(session, s->id, s);
    return 0;
}

static bool header_is(const uint8_t *name, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(name, want, len) == 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    gstream_t *s = stream_of(user_data, frame->hd.stream_id);
    if (s == NULL || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0; /* trailers from the client carry nothing we read */
    }
    s->header_bytes += namelen + valuelen; /* held once the frame is in (on_frame_recv) */
    if (s->header_bytes > GRPC_HEADERS_MAX) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream */
    }
    if (header_is(name, namelen, ":path")) {
        bool fits = valuelen < sizeof s->path;
        memcpy(s->path, value, fits ? valuelen : 0);
        s->path[fits ? valuelen : 0] = '\0';
    } else if (header_is(name, namelen, ":method")) {
        s->post = header_is(value, valuelen, "POST");
    } else if (header_is(name, namelen, "content-type")) {
        static const char ct[] = "application/grpc";
        size_t n = sizeof ct - 1;
        s->grpc_ct = valuelen >= n && memcmp(value, ct, n) == 0 &&
                     (valuelen == n || value[n] == '+' || value[n] == ';');
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user_data)
{
    gstream_t *s = stream_of(user_data, id);
    if (s == NULL || s->answered) {
        return 0; /* discarded; nghttp2 still gives the window back */
    }
    size_t max = s->gc->conn->loop->srv->cfg->request_max;
    char err[GRPC_ERR_MAX];
    grpc_status_t st = GRPC_STATUS_OK;
    if (s->gc->body_bytes + len > GRPC_BODIES_MAX(max)) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        snprintf(err, sizeof err,
                 "the calls this connection is sending hold more than %zu bytes together",
                 GRPC_BODIES_MAX(max));
    } else {
        size_t before = s->body.len;
        buf_add(&s->body, data, len);
        s->gc->body_bytes += s->body.len - before;
        conn_hold(s->gc->conn, s->body.len - before, 0);
        st = grpc_body_check((const uint8_t *)s->body.data, s->body.len, max, err, sizeof err);
    }
    if (st == GRPC_STATUS_OK && s->body.len > max + GRPC_PREFIX_BYTES) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        snprintf(err, sizeof err, "the request is larger than the largest accepted, %zu bytes",
                 max);
    }
    if (st == GRPC_STATUS_OK && s->body.failed) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        snprintf(err, sizeof err, "out of memory");
    }
    if (st != GRPC_STATUS_OK) {
        s->start_ns = s->gc->conn->loop->now_ns;
        grpc_answer(s, st, err);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    bool headers = frame->hd.type == NGHTTP2_HEADERS;
    bool ends =
        (frame->hd.type == NGHTTP2_DATA || headers) && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    gstream_t *s = ends || headers ? stream_of(user_data, frame->hd.stream_id) : NULL;
    if (s != NULL && headers && !s->answered && s->header_bytes > s->held_headers) {
        /* a header block's fields count against the input cap once per frame, not per field */
        conn_hold(s->gc->conn, s->header_bytes - s->held_headers, 0);
        s->held_headers = s->header_bytes;
    }
    if (s != NULL && ends) {
        s->ended = true;
    }
    if (s != NULL && ends && !s->answered) {
        grpc_call(s);
    }
    return 0;
}

static void stream_unlink(grpc_conn_t *gc, gstream_t *s)
{
    if (gc->last == s) {
        gc->last = NULL;
    }
    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        gc->streams = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    s->prev = s->next = NULL;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code,
                           void *user_data)
{
    grpc_conn_t *gc = user_data;
    gstream_t *s = stream_of(user_data, id);
    if (s == NULL) {
        return 0;
    }
    nghttp2_session_set_stream_user_data(session, id, NULL);
    stream_unlink(gc, s);
    if (s->pending) {
        grpc_body_drop(s);
        gc->pending--;
        s->gc = NULL; /* orphaned: the decision's callback frees it */
    } else {
        grpc_stream_free(s);
    }
    return 0;
}

/* ---- the protocol -------------------------------------------------------------------------- */

/* nghttp2's memory: from the loop's pool (a session's frames, streams and header buffers come
 * and go with every call; the pool's free lists keep them from malloc and free). */
static void *mem_malloc(size_t size, void *pool)
{
    return pool_alloc(pool, size);
}

static void mem_free(void *ptr, void *pool)
{
    pool_free(pool, ptr);
}

static void *mem_calloc(size_t n, size_t size, void *pool)
{
    return pool_calloc(pool, n, size);
}

static void *mem_realloc(void *ptr, size_t size, void *pool)
{
    return pool_realloc(pool, ptr, size);
}

static void grpc_open(conn_t *c)
{
    grpc_conn_t *gc = conn_state(c);
    gc->conn = c;
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        return;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_option *opt = NULL;
    int rc = nghttp2_option_new(&opt);
    if (rc == 0) {
        /* a closed stream is forgotten at once (no priority tree of the departed), and the
         * client is told that RFC 7540's priorities are not used */
        nghttp2_option_set_no_closed_streams(opt, 1);
        /* gRPC's rules are checked here (POST, the path, the content type); nghttp2's checks of
         * HTTP messaging (pseudo-headers, content-length, header name characters) cost ~10% of
         * a call and protect nothing this server reads */
        nghttp2_option_set_no_http_messaging(opt, 1);
        nghttp2_mem mem = {&c->loop->pool, mem_malloc, mem_free, mem_calloc, mem_realloc};
        rc = nghttp2_session_server_new3(&gc->session, cb, gc, opt, &mem);
        nghttp2_option_del(opt);
    }
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        gc->session = NULL;
        return;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GRPC_STREAMS_MAX},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_HEADERS_MAX},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    nghttp2_submit_settings(gc->session, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
}

static void grpc_close(conn_t *c)
{
    grpc_conn_t *gc = conn_state(c);
    for (gstream_t *s = gc->streams, *next; s != NULL; s = next) {
        next = s->next;
        if (s->pending) {
            grpc_body_drop(s);
            s->gc = NULL; /* orphaned: the decision's callback frees it */
        } else {
            grpc_stream_free(s);
        }
    }
    gc->streams = NULL;
    gc->pending = 0;
    gc->last = NULL;
    if (gc->session != NULL) {
        nghttp2_session_del(gc->session);
        gc->session = NULL;
    }
}

static void grpc_process(conn_t *c)
{
    loop_t *l = c->loop;
    grpc_conn_t *gc = conn_state(c);
    int64_t start_ns = conn_batch_begin(c);
    gc->answered = 0;
    size_t consumed = c->in_len;
    if (gc->session == NULL) {
        grpc_h2_goaway(&c->out, true, NGHTTP2_INTERNAL_ERROR, "out of memory");
        c->closing = true;
        conn_batch_done(c, consumed, 0, start_ns);
        return;
    }
    ssize_t rv = nghttp2_session_mem_recv(gc->session, (const uint8_t *)c->in, c->in_len);
    if (rv < 0) {
        log_debug("gRPC client %s:%d: %s: closing the connection", c->addr, c->port,
                  nghttp2_strerror((int)rv));
        atomic_fetch_add_explicit(&l->stats.protocol_errors, 1, memory_order_relaxed);
        c->closing = true;
    }
    if (!grpc_session_send(gc, &c->out) ||
        (!nghttp2_session_want_read(gc->session) && !nghttp2_session_want_write(gc->session))) {
        c->closing = true;
    }
    conn_batch_done(c, consumed, gc->answered, start_ns);
}

/* Evicted for the input-buffer cap: the bodies and header fields its streams hold go too (the
 * connection closes; a stream completed later is not answered). */
static void grpc_input_dropped(conn_t *c)
{
    grpc_conn_t *gc = conn_state(c);
    for (gstream_t *s = gc->streams; s != NULL; s = s->next) {
        grpc_body_drop(s);
        s->answered = true;
    }
}

static void grpc_reply_full(buf_t *out)
{
    grpc_h2_goaway(out, true, NGHTTP2_ENHANCE_YOUR_CALM, "too many clients");
}

static void grpc_reply_closing(buf_t *out, const char *why)
{
    grpc_h2_goaway(out, false, NGHTTP2_ENHANCE_YOUR_CALM, why);
}

/*
 * Stopping: GOAWAY (no error) naming the last stream this server answers, so the client sends
 * its next calls elsewhere while the ones in flight are answered. A closing connection reads no
 * more, so a call whose body has not all come is not answered: the last stream named is below
 * the first such, and the client may send those calls again elsewhere (HTTP/2 says streams
 * above the last were not processed).
 */
static void grpc_stopping(conn_t *c)
{
    grpc_conn_t *gc = conn_state(c);
    if (gc->session == NULL) {
        return;
    }
    int32_t last = nghttp2_session_get_last_proc_stream_id(gc->session);
    for (const gstream_t *s = gc->streams; s != NULL; s = s->next) {
        if (!s->ended && !s->answered && s->id <= last) {
            last = s->id - 2 > 0 ? s->id - 2 : 0; /* client streams are odd */
        }
    }
    static const char why[] = "the server is stopping";
    if (nghttp2_submit_goaway(gc->session, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR,
                              (const uint8_t *)why, sizeof why - 1) != 0 ||
        !grpc_session_send(gc, &c->out)) {
        c->closing = true;
    }
}

static bool grpc_pending(const conn_t *c)
{
    const grpc_conn_t *gc = conn_state((conn_t *)c);
    return gc->pending > 0;
}

const protocol_t grpc_protocol = {
    .name = "grpc",
    .label = "gRPC",
    .alpn = "h2",
    .state_size = sizeof(grpc_conn_t),
    .open = grpc_open,
    .close = grpc_close,
    .process = grpc_process,
    .input_dropped = grpc_input_dropped,
    .reply_full = grpc_reply_full,
    .reply_closing = grpc_reply_closing,
    .stopping = grpc_stopping,
    .pending = grpc_pending,
};
