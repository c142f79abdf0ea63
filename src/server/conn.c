/*
 * conn.c - connections (see server.h): reading, answering through the protocol, writing,
 * deferred replies, accepting, closing, and the caps on input and output buffers.
 *
 * Input buffers. A connection owns an input buffer only while it holds part of a request (or
 * requests it could not answer yet, during backpressure); otherwise each read goes into its
 * loop's spare buffer, lent for the read and taken back when the read's requests are all
 * answered. Owned buffers, and the bytes of requests a protocol keeps outside them (gRPC's
 * bodies and header fields, conn_hold()), are counted per connection in the server's input_bytes
 * and, by size class, in input_classes (atomics: every loop adds to them). When the total passes
 * --max-input-buffers, a loop closes its own clients with the largest buffers, as long as they are
 * in the largest class held anywhere, and tells the other loops to look at theirs (evict_async); a
 * client's buffer is only ever touched by its own loop.
 *
 * Output. What waits for a client is its output buffer, the bytes of its pending uv_write
 * (libuv's write queue) and the done replies waiting in slots behind an earlier one. It is
 * checked against --output-buffer-hard after every request's reply and every deferred reply,
 * and against --output-buffer-soft once a second (the idle tick).
 *
 * TLS (tls.h). A TLS connection reads ciphertext into its loop's tls_in buffer; the session
 * decrypts it into the input buffer as above, so the protocols never know. Its replies go into
 * the output buffer as plaintext, and conn_flush() encrypts them into tls_out, which is what is
 * written. The input buffers themselves (the spare, the accounting) are conn_input.c's.
 *
 * This file is long because a connection's life (accept, read, ordered replies, write, close,
 * eviction under the input cap) turns on one set of static helpers (all_answered, conn_drop,
 * conn_close_lingering, the slots): split apart, each part would call back into the others.
 */
#include "server/conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/conn_input.h"
#include "engine/log.h"
#include "server/loop.h"
#include "server/tls.h"

#define OUT_SHRINK_SIZE    (1024 * 1024) /* an output buffer this large is freed when drained */
#define SPARE_SLOT_CAP_MAX 4096 /* a resolved slot whose buffer grew larger is freed, not kept */

typedef struct write_req {
    uv_write_t req;
    conn_t *conn;
    char *data; /* the bytes being written, owned */
} write_req_t;

/* A closing connection goes once its replies are out: none waits in a slot, and the protocol
 * has none still being decided. */
static bool all_answered(const conn_t *c)
{
    return c->slots == NULL && (c->proto->pending == NULL || !c->proto->pending(c));
}

/* The client closed its side and waits for nothing but held refusals (reply_slot_t.droppable):
 * nothing else of its is being written, decided, or waiting in a slot. */
static bool waits_only_droppable(const conn_t *c)
{
    if (!c->eof || c->writing || c->out.len > 0 || c->tls_out.len > 0 ||
        (c->proto->pending != NULL && c->proto->pending(c))) {
        return false;
    }
    for (const reply_slot_t *s = c->slots; s != NULL; s = s->next) {
        if (!s->droppable) {
            return false;
        }
    }
    return true;
}

/* ---- connections --------------------------------------------------------------------------- */

static void conn_unlink(conn_t *c)
{
    loop_t *l = c->loop;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        l->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    l->nconns--;
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (c->flush_queued) {
        for (conn_t **pp = &c->loop->flush_head; *pp != NULL; pp = &(*pp)->flush_next) {
            if (*pp == c) {
                *pp = c->flush_next;
                break;
            }
        }
    }
    /* Deferred replies still waiting are orphaned: their resolver frees them. */
    for (reply_slot_t *s = c->slots, *next; s != NULL; s = next) {
        next = s->next;
        if (s->done) {
            buf_free(&s->buf);
            free(s);
        } else {
            s->conn = NULL;
            s->next = NULL;
        }
    }
    if (c->counted) {
        atomic_fetch_sub(&c->loop->srv->clients, 1);
    }
    if (c->proto->close != NULL) {
        c->proto->close(c);
    }
    conn_unlink(c);
    conn_input_count(c->loop->srv, conn_counted(c),
                     0); /* the protocol let go of what it held above */
    conn_free_spare(c);
    free(c->in);
    buf_free(&c->out);
    tls_conn_free(c->tls);
    buf_free(&c->tls_out);
    free(c);
}

void conn_free_spare(conn_t *c)
{
    if (c->spare_slot != NULL) {
        buf_free(&c->spare_slot->buf);
        free(c->spare_slot);
        c->spare_slot = NULL;
    }
}

void conn_close_now(conn_t *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    }
}

void conn_drop(conn_t *c)
{
    c->closing = true;
    if (!c->detached) { /* the fuzz target's connection has no socket */
        conn_close_now(c);
    }
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    conn_t *c = req->data;
    free(req);
    if (status < 0) {
        conn_close_now(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/*
 * Everything is written and the connection is to close. Closing a socket whose receive buffer
 * still holds unread bytes (a client still sending the rest of an oversized request) makes the
 * kernel send a reset, which can destroy our last reply in the client's buffer before it is
 * read. So, as nginx's lingering close does: send FIN (shutdown), discard what still arrives,
 * and close on the client's EOF or after LINGER_MS.
 */
static void conn_close_lingering(conn_t *c)
{
    if (c->lingering || uv_is_closing((uv_handle_t *)&c->tcp)) {
        return;
    }
    if (c->eof) {
        conn_close_now(c);
        return;
    }
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL) {
        conn_close_now(c);
        return;
    }
    req->data = c;
    c->lingering = true;
    c->last_active_ns = (int64_t)uv_now(&c->loop->uv) * 1000000;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        free(req);
        conn_close_now(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    loop_t *l = c->loop;
    buf->base = NULL;
    buf->len = 0;
    if (c->tls != NULL) { /* ciphertext: into the loop's buffer, decrypted into c->in */
        if (l->tls_in == NULL && (l->tls_in = malloc(READ_CHUNK)) == NULL) {
            return;
        }
        buf->base = l->tls_in;
        buf->len = READ_CHUNK;
        return;
    }
    size_t len = 0;
    char *room = conn_input_room(c, &len);
    if (room != NULL) {
        buf->base = room;
        buf->len = len;
    }
}

/* tls_conn_input()'s callbacks: plaintext goes where a plain read would have put it. */
static char *tls_room(void *arg, size_t *len)
{
    return conn_input_room(arg, len);
}

static void tls_added(void *arg, size_t n)
{
    ((conn_t *)arg)->in_len += n;
}

void conn_input_check(loop_t *l);

static void conn_process(conn_t *c);

/* The engine's override lookups on this loop have room again: the connections paused for them
 * are read again, and what they had buffered is answered. */
static void on_lookups_ready(void *arg)
{
    loop_t *l = arg;
    for (conn_t *c = l->conns; c != NULL; c = c->next) {
        if (!c->lookups_paused) {
            continue;
        }
        c->lookups_paused = false;
        if (c->closing || c->writing || uv_is_closing((uv_handle_t *)&c->tcp)) {
            continue; /* a closing one reads no more; a writing one starts when written */
        }
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
        if (c->in_len > 0) {
            conn_process(c);
        }
    }
}

/*
 * Back-pressure: the requests c just brought made decisions wait for a free override lookup
 * (the loop has as many in flight as it may). c is read no more until there is room again;
 * its requests already read are answered in order as their lookups come back, and what it sends
 * meanwhile waits in the kernel's buffers, as with a slow store.
 */
static void conn_pause_for_lookups(conn_t *c)
{
    engine_worker_t *w = c->loop->worker;
    if (w == NULL || c->detached || uv_is_closing((uv_handle_t *)&c->tcp) ||
        !engine_worker_saturated(w)) {
        return;
    }
    c->lookups_paused = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    engine_worker_when_ready(w, on_lookups_ready, c->loop);
}

/* Answers the requests buffered in c, then settles its input buffer and the input cap. */
static void conn_process(conn_t *c)
{
    c->proto->process(c);
    conn_input_settle(c);
    conn_input_check(c->loop);
    conn_pause_for_lookups(c);
}

/* The client closed its side (clean: EOF or TLS close_notify) or the socket failed. */
static void conn_on_eof(conn_t *c, bool clean)
{
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->closing = true;
    c->eof = true;
    if (!clean || waits_only_droppable(c)) {
        conn_close_now(c);
    } else if (!c->writing) {
        conn_flush(c); /* closes it once every answer, also those waiting on Redis, is out */
    }
}

/* Ciphertext read on a TLS connection: decrypted into c->in and answered as a plain read's
 * bytes are; the handshake's messages are sent at once. */
static void conn_tls_read(conn_t *c, const char *data, size_t n)
{
    enum tls_input r = tls_conn_input(c->tls, data, n, tls_room, tls_added, c);
    if (r == TLS_INPUT_ERROR) {
        log_debug("%s client %s:%d: TLS: %s", c->proto->label, c->addr, c->port,
                  tls_conn_error(c->tls));
        conn_input_settle(c);
        conn_close_now(c);
        return;
    }
    if (c->in_len > 0) {
        conn_process(c); /* its replies are flushed, and the handshake's with them */
    } else {
        conn_input_settle(c);
        conn_flush(c);
    }
    if (r == TLS_INPUT_CLOSED && !c->closing) {
        conn_on_eof(c, true);
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn_t *c = s->data;
    if (c->lingering) {
        c->in_len = 0; /* discarded: the connection is closing */
        conn_input_settle(c);
        if (nread < 0) {
            conn_close_now(c);
        }
        return;
    }
    if (nread <= 0 || c->closing) {
        conn_input_settle(c); /* a lent buffer goes back; what was buffered stays */
    }
    if (nread < 0) {
        /* EOF or an error: replies still being written go out first (a client may half-close
         * after sending its requests). */
        conn_on_eof(c, nread == UV_EOF);
        return;
    }
    if (nread == 0 || c->closing) {
        return;
    }
    if (c->tls != NULL) {
        conn_tls_read(c, buf->base, (size_t)nread);
        return;
    }
    c->in_len += (size_t)nread;
    conn_process(c);
}

static void on_written(uv_write_t *req, int status)
{
    write_req_t *wr = (write_req_t *)req;
    conn_t *c = wr->conn;
    free(wr->data);
    free(wr);
    c->writing = false;
    c->last_active_ns = (int64_t)uv_now(&c->loop->uv) * 1000000; /* the client is reading */
    if (status < 0) {
        conn_close_now(c);
        return;
    }
    if (c->out.len > 0) {
        conn_flush(c);
        return;
    }
    if (c->closing) {
        if (all_answered(c)) {
            conn_close_lingering(c);
        } else if (waits_only_droppable(c)) {
            conn_close_now(c);
        }
        return;
    }
    if (c->lookups_paused) {
        return; /* read again when the override lookups have room (on_lookups_ready) */
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    /* Requests that arrived while the write was pending are still buffered. */
    if (c->in_len > 0) {
        conn_process(c);
    }
}

/* The rest of w, which the socket did not take at once, goes with uv_write: the buffer moves to
 * the request and the connection stops reading until it completes (on_written). */
static void write_rest(conn_t *c, buf_t *w)
{
    write_req_t *wr = malloc(sizeof *wr);
    if (wr == NULL) {
        conn_close_now(c);
        return;
    }
    wr->conn = c;
    wr->data = w->data;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    w->data = NULL;
    w->len = 0;
    w->cap = 0;
    c->writing = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (uv_write(&wr->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
        free(wr->data);
        free(wr);
        c->writing = false;
        conn_close_now(c);
    }
}

/* A connection told to close once everything is answered and written closes now if it is. */
static void close_if_done(conn_t *c)
{
    if (c->closing && all_answered(c) && c->out.len == 0) {
        conn_close_lingering(c);
    }
}

void conn_flush(conn_t *c)
{
    if (c->detached || c->writing || uv_is_closing((uv_handle_t *)&c->tcp)) {
        return;
    }
    if (c->out.failed) {
        conn_close_now(c);
        return;
    }
    buf_t *w = &c->out; /* what goes to the socket */
    if (c->tls != NULL) {
        if (tls_conn_output(c->tls, &c->out, &c->tls_out) != 0) {
            log_debug("%s client %s:%d: TLS: %s", c->proto->label, c->addr, c->port,
                      tls_conn_error(c->tls));
            conn_close_now(c);
            return;
        }
        w = &c->tls_out;
    }
    if (w->len == 0) {
        close_if_done(c);
        return;
    }
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)w->len) {
        w->len = 0;
        if (w->cap > OUT_SHRINK_SIZE) {
            buf_free(w);
        }
        close_if_done(c);
    } else if (n < 0 && n != UV_EAGAIN) {
        conn_close_now(c);
    } else {
        if (n > 0) {
            buf_consume(w, (size_t)n);
        }
        write_rest(c, w);
    }
}

size_t conn_output_bytes(const conn_t *c)
{
    size_t queued = c->writing ? uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp) : 0;
    return c->out.len + c->tls_out.len + c->slot_bytes + queued;
}

/* Closes c at once (counted) if more output waits for it than --output-buffer-hard. */
static void conn_output_check(conn_t *c)
{
    size_t hard = c->loop->srv->cfg->output_hard;
    if (hard == 0 || c->detached || uv_is_closing((uv_handle_t *)&c->tcp)) {
        return;
    }
    size_t waiting = conn_output_bytes(c);
    if (waiting <= hard) {
        return;
    }
    atomic_fetch_add_explicit(&c->loop->stats.output_hard_closed, 1, memory_order_relaxed);
    log_info("closing client %s:%d: %zu bytes of replies waiting, over output-buffer-hard (%zu)",
             c->addr, c->port, waiting, hard);
    conn_drop(c); /* the batch answering its requests stops */
}

reply_slot_t *conn_defer(conn_t *c)
{
    reply_slot_t *s = c->spare_slot;
    if (s != NULL) { /* emptied by conn_resolve(); its buffer's room is kept */
        c->spare_slot = NULL;
        *s = (reply_slot_t){.buf = s->buf};
    } else if ((s = calloc(1, sizeof *s)) == NULL) {
        return NULL;
    }
    s->conn = c;
    s->start_ns = c->loop->now_ns;
    s->in_batch = c->in_batch;
    s->batch_seq = c->batch_seq;
    c->batch_late += c->in_batch; /* not answered in the batch unless it is resolved in it */
    if (c->slots_tail != NULL) {
        c->slots_tail->next = s;
    } else {
        c->slots = s;
    }
    c->slots_tail = s;
    return s;
}

/* Writes every connection whose replies resolved during this loop turn: one write for all the
 * answers a read from Redis brought, rather than one per answer. */
void conn_flush_queued(uv_check_t *h)
{
    loop_t *l = h->data;
    uv_idle_stop(&l->flush_idle);
    while (l->flush_head != NULL) {
        conn_t *c = l->flush_head;
        l->flush_head = c->flush_next;
        c->flush_queued = false;
        conn_flush(c);
    }
}

static void on_flush_idle(uv_idle_t *h)
{
    (void)h; /* only keeps the loop's poll from blocking; conn_flush_queued runs right after it */
}

/* Frees a slot taken off c's list, or keeps it (and its buffer's room, unless large) as the
 * next conn_defer()'s. */
static void slot_release(conn_t *c, reply_slot_t *s)
{
    if (c->spare_slot == NULL && !s->buf.failed && s->buf.cap <= SPARE_SLOT_CAP_MAX) {
        s->buf.len = 0;
        c->spare_slot = s;
        return;
    }
    buf_free(&s->buf);
    free(s);
}

void conn_resolve(reply_slot_t *slot)
{
    conn_t *c = slot->conn;
    slot->done = true;
    if (c == NULL) {
        buf_free(&slot->buf);
        free(slot);
        return;
    }
    c->slot_bytes += slot->buf.len;
    /* Move every done slot at the head to the output, in order. A request answered in the
     * batch that read it is counted by that batch; any other now (one clock read per call). */
    int64_t now_ns = 0;
    while (c->slots != NULL && c->slots->done) {
        reply_slot_t *s = c->slots;
        c->slots = s->next;
        if (c->slots == NULL) {
            c->slots_tail = NULL;
        }
        c->slot_bytes -= s->buf.len;
        if (c->in_batch && s->in_batch && s->batch_seq == c->batch_seq) {
            c->batch_late--;
        } else {
            if (now_ns == 0) {
                now_ns = sl_now_ns();
            }
            loop_record_batch(c->loop, 1, now_ns - s->start_ns);
        }
        if (s->buf.failed) {
            c->out.failed = true;
        } else if (s->buf.len > 0) {
            buf_add(&c->out, s->buf.data, s->buf.len);
        }
        if (s->close_after) {
            c->closing = true;
        }
        slot_release(c, s);
    }
    conn_output_check(c);
    /* Inside a batch, the batch's end writes everything at once; otherwise (an answer from
     * Redis, a deadline) the loop turn's end does, for every answer resolved in it. */
    if (!c->in_batch && !c->detached && !c->flush_queued &&
        !uv_is_closing((uv_handle_t *)&c->tcp)) {
        c->flush_queued = true;
        c->flush_next = c->loop->flush_head;
        c->loop->flush_head = c;
        uv_idle_start(&c->loop->flush_idle, on_flush_idle);
    }
}

void conn_in_order(conn_t *c, void (*handler)(void *arg), void *arg)
{
    if (c->slots == NULL) {
        handler(arg);
        conn_output_check(c);
        return;
    }
    reply_slot_t *s = conn_defer(c);
    if (s == NULL) {
        c->out.failed = true;
        return;
    }
    buf_t saved = c->out;
    c->out = (buf_t){0};
    handler(arg);
    buf_free(&s->buf); /* a spare slot's kept room: the handler wrote its own buffer */
    s->buf = c->out;
    c->out = saved;
    s->done = true; /* written with the slots before it, by their conn_resolve */
    c->slot_bytes += s->buf.len;
    conn_output_check(c);
}

int64_t conn_batch_begin(conn_t *c)
{
    loop_t *l = c->loop;
    l->now_ns = sl_now_ns();
    engine_worker_begin(l->worker);
    c->in_batch = true;
    return l->now_ns;
}

void conn_batch_done(conn_t *c, size_t consumed, uint64_t n, int64_t start_ns)
{
    loop_t *l = c->loop;
    c->in_batch = false;
    if (consumed > 0) {
        memmove(c->in, c->in + consumed, c->in_len - consumed);
        c->in_len -= consumed;
    }
    if (n > 0) {
        c->last_active_ns = (int64_t)uv_now(&l->uv) * 1000000;
        c->requests += n;
        atomic_fetch_add_explicit(&l->stats.batches, 1, memory_order_relaxed);
        /* Every reply of the batch leaves in the write below: each request took the batch's
         * time. Those waiting in slots are recorded when they resolve. */
        uint64_t late = c->batch_late < n ? c->batch_late : n;
        loop_record_batch(l, n - late, sl_now_ns() - start_ns);
    }
    c->batch_late = 0;
    c->batch_seq++;
    conn_flush(c);
}

/* The peer's address, as text (logs, CLIENT LIST) and parsed (trusted proxies, keys). */
static void peer_name(conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(c->addr, sizeof c->addr, "?");
        return;
    }
    netaddr_from_sockaddr((const struct sockaddr *)&ss, &c->peer);
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        uv_ip6_name(a, c->addr, sizeof c->addr);
        c->port = ntohs(a->sin6_port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, c->addr, sizeof c->addr);
        c->port = ntohs(a->sin_port);
    }
}

/* A new connection on listener `server` of loop l: allocated, linked into the loop's list and
 * accepted. Returns NULL when it could not be (closed already, if it was linked). */
static conn_t *conn_accept(loop_t *l, uv_stream_t *server)
{
    const protocol_t *proto = NULL;
    bool tls = false;
    for (size_t i = 0; i < l->nlisteners; i++) {
        if ((uv_stream_t *)&l->listeners[i] == server) {
            proto = l->listener_proto[i];
            tls = l->listener_tls[i];
        }
    }
    conn_t *c = calloc(1, sizeof *c + proto->state_size);
    if (c == NULL) {
        return NULL;
    }
    uv_tcp_init(&l->uv, &c->tcp);
    c->tcp.data = c;
    c->loop = l;
    c->proto = proto;
    c->next = l->conns;
    if (l->conns != NULL) {
        l->conns->prev = c;
    }
    l->conns = c;
    l->nconns++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close_now(c);
        return NULL;
    }
    if (tls && (c->tls = tls_conn_new(l->srv->tls, proto->alpn)) == NULL) {
        log_warn("%s: no TLS session for a new client (out of memory)", proto->label);
        conn_close_now(c);
        return NULL;
    }
    return c;
}

void conn_on_connection(uv_stream_t *server, int status)
{
    loop_t *l = server->data;
    conn_t *c = status < 0 ? NULL : conn_accept(l, server);
    if (c == NULL) {
        return;
    }
    server_t *srv = l->srv;
    const protocol_t *proto = c->proto;
    atomic_fetch_add_explicit(&l->stats.connections, 1, memory_order_relaxed);
    c->id = atomic_fetch_add(&srv->next_client_id, 1) + 1;
    c->created_ns = c->last_active_ns = uv_now(&l->uv) * 1000000;
    c->authed = srv->cfg->requirepass == NULL;
    c->admin = c->authed && srv->cfg->admin_password == NULL;
    c->inline_budget = engine_inline_budget(srv->engine);
    uv_tcp_nodelay(&c->tcp, 1);
    peer_name(c);
    engine_inline_budget_address(&c->inline_budget, &c->peer);
    if (proto->open != NULL) {
        proto->open(c);
    }
    size_t clients = atomic_fetch_add(&srv->clients, 1) + 1;
    c->counted = true;
    if (clients > srv->cfg->max_clients || atomic_load(&srv->stopping)) {
        atomic_fetch_add_explicit(&l->stats.rejected_clients, 1, memory_order_relaxed);
        if (c->tls != NULL) { /* nothing can be said before a handshake: just close */
            conn_close_now(c);
            return;
        }
        proto->reply_full(&c->out);
        c->closing = true;
        conn_flush(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* ---- the input buffers' cap ----------------------------------------------------------------- */

static void evicted_reply(void *arg)
{
    conn_t *c = arg;
    char why[160];
    snprintf(why, sizeof why,
             "connection closed: the input buffers of all clients exceed max-input-buffers "
             "(%zu bytes) and this client's were among the largest",
             c->loop->srv->cfg->input_buffers_max);
    c->proto->reply_closing(&c->out, why);
}

/* Closes c for the cap: its input goes at once, the error goes out (in order), then it closes. */
static void conn_evict(conn_t *c)
{
    loop_t *l = c->loop;
    size_t held = conn_counted(c);
    conn_input_release(c);
    if (c->proto->input_dropped != NULL) {
        c->proto->input_dropped(c);
    }
    if (c->closing) { /* already on its way out: nothing of its input would be read */
        return;
    }
    log_info("closing client %s:%d: its %zu-byte input buffer is among the largest and all "
             "clients' are over max-input-buffers (%zu)",
             c->addr, c->port, held, l->srv->cfg->input_buffers_max);
    atomic_fetch_add_explicit(&l->stats.evicted_clients, 1, memory_order_relaxed);
    conn_in_order(c, evicted_reply, c);
    c->closing = true;
    if (!c->writing) {
        conn_flush(c);
    }
}

/*
 * While all clients' input buffers are over --max-input-buffers, closes this loop's client with
 * the largest buffer, as long as it is in the largest size class any loop holds (within a factor
 * of two of the largest anywhere). Returns how many it closed; the cap may still be exceeded,
 * by buffers on other loops.
 */
static size_t loop_evict(loop_t *l)
{
    server_t *srv = l->srv;
    size_t cap = srv->cfg->input_buffers_max, evicted = 0;
    while (cap > 0 && atomic_load_explicit(&srv->input_bytes, memory_order_relaxed) > cap) {
        conn_t *largest = NULL;
        for (conn_t *c = l->conns; c != NULL; c = c->next) {
            if (conn_counted(c) > 0 && !uv_is_closing((uv_handle_t *)&c->tcp) &&
                (largest == NULL || conn_counted(c) > conn_counted(largest))) {
                largest = c;
            }
        }
        if (largest == NULL ||
            (int)conn_size_class(conn_counted(largest)) < conn_input_top_class(srv)) {
            break;
        }
        size_t had = conn_counted(largest);
        conn_evict(largest);
        evicted++;
        if (conn_counted(largest) >= had) {
            break; /* it let go of nothing: stop rather than pick it again */
        }
    }
    return evicted;
}

/* Asks every other loop to look for its largest input buffers. */
static void loops_tell_evict(loop_t *self)
{
    server_t *srv = self->srv;
    uv_mutex_lock(&srv->evict_mu);
    for (unsigned i = 0; i < srv->nloops; i++) {
        loop_t *l = &srv->loops[i];
        if (l != self && l->evict_open) {
            uv_async_send(&l->evict_async);
        }
    }
    uv_mutex_unlock(&srv->evict_mu);
}

/* After this loop's buffers grew (or once a second): enforces the cap. */
void conn_input_check(loop_t *l)
{
    server_t *srv = l->srv;
    size_t cap = srv->cfg->input_buffers_max;
    if (cap == 0 || atomic_load_explicit(&srv->input_bytes, memory_order_relaxed) <= cap) {
        return;
    }
    loop_evict(l);
    if (atomic_load_explicit(&srv->input_bytes, memory_order_relaxed) > cap) {
        loops_tell_evict(l); /* the largest are elsewhere */
    }
}

/* Another loop saw the cap exceeded; passes it on only after closing someone (no ping-pong). */
void conn_on_evict(uv_async_t *a)
{
    loop_t *l = a->data;
    if (loop_evict(l) > 0 && atomic_load_explicit(&l->srv->input_bytes, memory_order_relaxed) >
                                 l->srv->cfg->input_buffers_max) {
        loops_tell_evict(l);
    }
}
