/*
 * grpc_stream.c - answering a gRPC stream (see grpc_stream.h): the response submitted to the
 * connection's HTTP/2 session, and what the session then has to send, in order.
 *
 * Order. HTTP/2 multiplexes: answers may leave in any order, but the session's bytes (HPACK's
 * state above all) must leave in the order the session produced them. So gRPC never holds a
 * reply slot open: an answer that comes later is submitted to the session when it comes, and
 * what the session then produces goes out behind everything it produced before (a slot taken
 * and resolved at once, which also queues the write for the end of the loop turn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/grpc_stream.h"
#include "engine/log.h"

void grpc_body_drop(gstream_t *s)
{
    if (s->gc != NULL) {
        s->gc->body_bytes -= s->body.len;
        conn_hold(s->gc->conn, 0, s->body.len + s->held_headers);
    }
    s->held_headers = 0;
    buf_free(&s->body);
}

/* ---- sending ------------------------------------------------------------------------------- */

bool grpc_session_send(grpc_conn_t *gc, buf_t *out)
{
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(gc->session, &data);
        if (n < 0) {
            return false;
        }
        if (n == 0) {
            return true;
        }
        buf_add(out, data, (size_t)n);
    }
}

void grpc_send_later(grpc_conn_t *gc, int64_t start_ns)
{
    conn_t *c = gc->conn;
    if (c->in_batch) {
        return; /* the batch's end sends it */
    }
    reply_slot_t *slot = conn_defer(c);
    if (slot == NULL) {
        c->out.failed = true;
        return;
    }
    slot->start_ns = start_ns;
    if (!grpc_session_send(gc, &slot->buf)) {
        c->closing = true;
    }
    conn_resolve(slot);
}

/* A header of literals, which outlive the frame it is sent in: nghttp2 need not copy them. */
static nghttp2_nv nv(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

/* A header whose value is gone before the frame is sent (on the stack): nghttp2 copies it. */
static nghttp2_nv nv_copied(const char *name, const char *value)
{
    return (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                        NGHTTP2_NV_FLAG_NO_COPY_NAME};
}

/* The response body, then (at its end) the trailers with grpc-status 0. */
static ssize_t resp_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    gstream_t *s = source->ptr;
    size_t n = s->resp.len - s->resp_off;
    n = n < length ? n : length;
    memcpy(buf, s->resp.data + s->resp_off, n);
    s->resp_off += n;
    if (s->resp_off == s->resp.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv trailers[] = {nv("grpc-status", "0")};
        if (nghttp2_submit_trailer(session, id, trailers, 1) != 0) {
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

void grpc_answer(gstream_t *s, grpc_status_t status, const char *message)
{
    grpc_conn_t *gc = s->gc;
    conn_t *c = gc->conn;
    s->answered = true;
    grpc_body_drop(s);
    atomic_fetch_add_explicit(&c->loop->stats.grpc_calls, 1, memory_order_relaxed);
    if (c->in_batch) {
        gc->answered++;
    }
    int rc;
    if (status == GRPC_STATUS_OK && !s->resp.failed) {
        nghttp2_nv head[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
        nghttp2_data_provider body = {.source.ptr = s, .read_callback = resp_read};
        rc = nghttp2_submit_response(gc->session, s->id, head, 2, &body);
    } else {
        if (status == GRPC_STATUS_OK) {
            status = GRPC_STATUS_RESOURCE_EXHAUSTED;
            message = "out of memory";
        }
        char code[12], text[GRPC_ERR_MAX * 3];
        snprintf(code, sizeof code, "%d", (int)status);
        grpc_message_encode(message, text, sizeof text);
        nghttp2_nv only[] = {nv(":status", "200"), nv("content-type", "application/grpc"),
                             nv_copied("grpc-status", code), nv_copied("grpc-message", text)};
        rc = nghttp2_submit_response(gc->session, s->id, only, 4, NULL);
    }
    if (rc != 0) {
        log_debug("gRPC client %s:%d: stream %d not answered: %s", c->addr, c->port, s->id,
                  nghttp2_strerror(rc));
    }
}

void grpc_stream_free(gstream_t *s)
{
    rls_plan_free(&s->plan);
    grpc_body_drop(s);
    buf_free(&s->resp);
    pool_free(s->pool, s);
}

void grpc_answer_not_grpc(gstream_t *s)
{
    nghttp2_nv only[] = {nv(":status", s->post ? "415" : "405"), nv("content-type", "text/plain")};
    s->answered = true;
    nghttp2_submit_response(s->gc->session, s->id, only, 2, NULL);
}
