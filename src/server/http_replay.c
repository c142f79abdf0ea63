/*
 * http_replay.c - POST /v1/replay: a traffic log replayed against a candidate rule
 * (replay_job.h), on libuv's thread pool, never on an event loop (admin token).
 *
 *   {"algorithm":..,"limit":..,"window":..[,"burst":..][,"unit":"ms"],"log":".."} ->
 *   {"complete":B[,"stopped":..],"lines_replayed":N,"admitted":N,"rejected":N,
 *    "keys":[{"key":..,"admitted":N,"rejected":N}],"series":[{"t":..,"admitted":N,"rejected":N}]}
 *
 * The loop checks what costs nothing (the method, the token, the size, the replays running:
 * server_t.replays against --replay-concurrency, 503 with Retry-After past it), copies the body
 * and queues it (uv_queue_work); the reply waits in a deferred slot (conn_defer), so the replies
 * of the connection stay in order. The work runs replay_job_run() with the deadline
 * (--replay-timeout after the request was read), the budget (--replay-memory) and the server's
 * stopping flag. Back on the loop (the after-work callback) the answer goes into the slot and is
 * resolved. A connection that closed meanwhile orphaned its slot (conn.c): conn_resolve frees
 * it, and the answer is dropped (counted). A replay counts against the cap until its work ends,
 * whether or not its client is still there. A stopping loop's uv_run returns only once its work
 * is back, and the work stops before its next line when it sees the flag.
 */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "proto/http.h"
#include "engine/events.h"
#include "server/replay_job.h"
#include "server/route.h"
#include "server/server.h"

#define REPLAY_BODY_MAX (8 * 1024 * 1024) /* largest body, bytes (--max-request-size first) */

/* One replay handed to the thread pool. */
typedef struct replay_work {
    uv_work_t req;
    server_t *srv;
    reply_slot_t *slot; /* its reply; slot->conn NULL once the connection is gone */
    replay_limits_t lim;
    replay_answer_t answer; /* written by the work */
    size_t len;             /* bytes of body */
    char body[];            /* the request's body, copied */
} replay_work_t;

static int64_t monotonic_ns(void)
{
    return (int64_t)uv_hrtime();
}

/* SLUICE_TEST_REPLAY_PAUSE (a duration: "1ms"), for the tests only: every replay sleeps that
 * long before each line, so that a test can count on one still running while it asks the
 * loops something. Read once. */
static int64_t test_pause_ns(void)
{
    static _Atomic int64_t pause_ns = -1;
    int64_t p = atomic_load(&pause_ns);
    if (p < 0) {
        const char *v = getenv("SLUICE_TEST_REPLAY_PAUSE");
        p = 0;
        if (v != NULL && sl_duration_parse(v, strlen(v), &p) != SL_OK) {
            p = 0;
        }
        atomic_store(&pause_ns, p);
    }
    return p;
}

static replay_limits_t limits_of(server_t *srv)
{
    const server_settings_t *cfg = srv->cfg;
    return (replay_limits_t){.deadline_ns = monotonic_ns() + cfg->replay_timeout_ns,
                             .memory_max = cfg->replay_memory,
                             .clock_ns = monotonic_ns,
                             .stop = &srv->stopping,
                             .budget = engine_budget(srv->engine),
                             .line_pause_ns = test_pause_ns()};
}

/* The answer as an HTTP response into out. */
static void answer_write(buf_t *out, bool keep_alive, const replay_answer_t *a)
{
    if (a->status != 200) {
        http_problem(out, a->status, keep_alive, NULL, a->err);
        return;
    }
    http_begin(out, 200);
    http_header(out, "Cache-Control", "no-store");
    http_end(out, keep_alive, "application/json", a->body.data, a->body.len);
}

/* Counts and logs a replay that stopped early (client: "ADDR:PORT", or "a client gone"). */
static void answer_note(const replay_answer_t *a, const char *client)
{
    event_id_t ev = EV_REPLAY_DEADLINE;
    switch (a->status == 200 ? a->stopped : REPLAY_COMPLETE) {
    case REPLAY_COMPLETE:
        return;
    case REPLAY_STOP_DEADLINE:
        ev = EV_REPLAY_DEADLINE;
        break;
    case REPLAY_STOP_MEMORY:
        ev = EV_REPLAY_MEMORY;
        break;
    case REPLAY_STOP_SHUTDOWN:
        ev = EV_REPLAY_SHUTDOWN;
        break;
    }
    event_note(ev, "replay from %s stopped (%s) after %zu lines of its log", client,
               replay_job_stop_name(a->stopped), a->lines);
}

/* The thread pool's part: the replay itself. */
static void replay_work(uv_work_t *req)
{
    replay_work_t *w = req->data;
    replay_job_run(w->body, w->len, &w->lim, &w->answer);
#ifdef __GLIBC__
    malloc_trim(0); /* the pages of the replay's many small blocks go back to the system */
#endif
}

/* Back on the loop: the answer into its slot. */
static void replay_done(uv_work_t *req, int status)
{
    replay_work_t *w = req->data;
    atomic_fetch_sub(&w->srv->replays, 1);
    if (status != 0) { /* cancelled: never done here, but then the work did not run */
        w->answer = (replay_answer_t){.status = 503, .err = "the replay did not run"};
    }
    conn_t *c = w->slot->conn;
    char client[sizeof c->addr + 8];
    snprintf(client, sizeof client, "%s:%d", c != NULL ? c->addr : "a client gone",
             c != NULL ? c->port : 0);
    answer_note(&w->answer, client);
    if (c == NULL) {
        event_note(EV_REPLAY_ABANDONED, "replay answer dropped: its client closed (%zu lines)",
                   w->answer.lines);
    } else {
        answer_write(&w->slot->buf, !w->slot->close_after, &w->answer);
    }
    conn_resolve(w->slot);
    replay_job_answer_free(&w->answer);
    free(w);
}

/* Over --replay-concurrency: 503, to try again once a running replay has surely ended. */
static void replay_busy(route_ctx_t *x, size_t running)
{
    const server_settings_t *cfg = x->c->loop->srv->cfg;
    long long after_s = (long long)((cfg->replay_timeout_ns + SL_NS_PER_SEC - 1) / SL_NS_PER_SEC);
    char detail[128];
    snprintf(detail, sizeof detail, "too many replays at once: %zu running, the most allowed",
             running);
    event_note(EV_REPLAY_BUSY, "replay from %s:%d refused: %s (--replay-concurrency)", x->c->addr,
               x->c->port, detail);
    http_begin(&x->c->out, 503);
    http_header(&x->c->out, "Retry-After", "%lld", after_s);
    http_problem_end(&x->c->out, 503, x->req->keep_alive, NULL, detail);
}

/* A connection with no loop (the fuzz target): the replay runs here, within the same limits. */
static void replay_here(route_ctx_t *x)
{
    replay_limits_t lim = limits_of(x->c->loop->srv);
    replay_answer_t a;
    replay_job_run(x->req->body, x->req->body_len, &lim, &a);
    answer_write(&x->c->out, x->req->keep_alive, &a);
    replay_job_answer_free(&a);
}

/* Hands the replay to the thread pool; its reply comes in a slot. */
static void replay_queue(route_ctx_t *x)
{
    server_t *srv = x->c->loop->srv;
    replay_work_t *w = calloc(1, sizeof *w + x->req->body_len);
    reply_slot_t *slot = w != NULL ? conn_defer(x->c) : NULL;
    if (slot == NULL) {
        free(w);
        atomic_fetch_sub(&srv->replays, 1);
        problem(x, 503, "out of memory");
        return;
    }
    slot->close_after = !x->req->keep_alive;
    w->req.data = w;
    w->srv = srv;
    w->slot = slot;
    w->lim = limits_of(srv);
    w->len = x->req->body_len;
    memcpy(w->body, x->req->body, w->len);
    int rc = uv_queue_work(&x->c->loop->uv, &w->req, replay_work, replay_done);
    if (rc != 0) { /* only for arguments libuv refuses: answered at once */
        w->answer = (replay_answer_t){.status = 503};
        snprintf(w->answer.err, sizeof w->answer.err, "%s", uv_strerror(rc));
        answer_write(&slot->buf, !slot->close_after, &w->answer);
        atomic_fetch_sub(&srv->replays, 1);
        conn_resolve(slot);
        free(w);
    }
}

void route_replay(route_ctx_t *x)
{
    if (x->req->method != HTTP_POST) {
        route_method_not_allowed(x, "POST");
        return;
    }
    if (!route_admin_ok(x)) {
        return;
    }
    if (x->req->body_len > REPLAY_BODY_MAX) {
        problem(x, 413, "the body is over %d bytes", REPLAY_BODY_MAX);
        return;
    }
    if (x->c->detached) {
        replay_here(x);
        return;
    }
    server_t *srv = x->c->loop->srv;
    size_t running = atomic_fetch_add(&srv->replays, 1);
    if (running >= srv->cfg->replay_concurrency) {
        atomic_fetch_sub(&srv->replays, 1);
        replay_busy(x, running);
        return;
    }
    replay_queue(x);
}
