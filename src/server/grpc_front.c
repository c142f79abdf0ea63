/*
 * grpc_front.c - sluiced's gRPC front end: Envoy's rate limit service
 * (/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) and the health check
 * (/grpc.health.v1.Health/Check), over HTTP/2 in clear text with prior knowledge (h2c), which
 * is how Envoy reaches a rate limit cluster.
 *
 * HTTP/2 is nghttp2's, driven by memory: process() feeds the connection's bytes to the session
 * (nghttp2_session_mem_recv) and appends what the session has to send (nghttp2_session_mem_send)
 * to the connection's output, so the server's loops, buffers and caps work as for the other
 * protocols and nghttp2 never touches a socket. The messages are proto/grpc.h's and
 * proto/rls.h's. A stream collects its headers and body; when the client ends it, the call is
 * answered: a ShouldRateLimit's descriptors are decided together through engine_allowall()
 * (all or nothing), at once with the memory store, later with Redis.
 *
 * Order. HTTP/2 multiplexes: answers may leave in any order, but the session's bytes (HPACK's
 * state above all) must leave in the order the session produced them. So gRPC never holds a
 * reply slot open: an answer that comes later is submitted to the session when it comes, and
 * what the session then produces goes out behind everything it produced before (a slot taken
 * and resolved at once, which also queues the write for the end of the loop turn).
 *
 * Lifetimes. A stream's state (gstream_t) is on its connection's list from its first HEADERS
 * frame; it is freed when nghttp2 closes the stream, unless a decision is pending: then it is
 * orphaned (gc NULL) and the decision's callback frees it. A connection that closes with
 * decisions pending orphans their streams the same way.
 *
 * Misuse closes that connection only: a bad preface or a broken frame ends the session
 * (nghttp2's GOAWAY, then the close), a header list over GRPC_HEADERS_MAX resets that stream,
 * a body over --max-request-size is answered RESOURCE_EXHAUSTED as soon as its size shows, as
 * is one that would take the bodies a connection holds past GRPC_BODIES_MAX, and nghttp2
 * refuses streams beyond GRPC_STREAMS_MAX at once.
 */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/grpc.h"
#include "proto/http.h"
#include "proto/rls.h"
#include "server/grpc_front.h"
#include "server/log.h"
#include "rules/descriptor.h"

#define GRPC_STREAMS_MAX 100         /* concurrent streams a client may open (SETTINGS) */
#define GRPC_HEADERS_MAX (16 * 1024) /* bytes of one stream's header names and values */
#define GRPC_PATH_MAX    96          /* longest :path kept; longer ones are unknown methods */

#define PATH_RLS    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define PATH_HEALTH "/grpc.health.v1.Health/Check"
#define SERVICE_RLS "envoy.service.ratelimit.v3.RateLimitService"

typedef struct grpc_conn grpc_conn_t;

/* One stream: a call being received, decided or answered. */
typedef struct gstream {
    struct gstream *prev, *next; /* the connection's streams */
    grpc_conn_t *gc;             /* NULL once the stream or the connection is gone */
    pool_t *pool;                /* its loop's, which it came from */
    int32_t id;
    bool post;     /* :method POST */
    bool grpc_ct;  /* content-type application/grpc[+proto|;...] */
    bool answered; /* a response was submitted: what still arrives is discarded */
    bool pending;  /* a decision is on its way (its callback frees an orphan) */
    size_t header_bytes;
    char path[GRPC_PATH_MAX];        /* :path, NUL-terminated; "" when absent or too long */
    buf_t body;                      /* the request's body: framed messages */
    buf_t resp;                      /* the response's one framed message */
    size_t resp_off;                 /* bytes of resp handed to nghttp2 */
    int64_t start_ns;                /* the batch clock when the call was complete */
    rls_request_t req;               /* a ShouldRateLimit's request while it is decided */
    buf_t keys;                      /* its descriptors' keys, while they are decided */
    int check_of[ENGINE_CHECKS_MAX]; /* descriptor -> its check, or CHECK_NONE, CHECK_UNLIMITED */
} gstream_t;

#define CHECK_NONE      (-1) /* no limit applies to the descriptor */
#define CHECK_UNLIMITED (-2) /* its limit is `unlimited` */

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

/* Frees a stream's request body, counted off its connection's. */
static void body_drop(gstream_t *s)
{
    if (s->gc != NULL) {
        s->gc->body_bytes -= s->body.len;
    }
    buf_free(&s->body);
}

/* ---- sending ------------------------------------------------------------------------------- */

/* Appends everything the session has to send to out; false when the session failed. */
static bool session_send(grpc_conn_t *gc, buf_t *out)
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

/* After an answer came outside a batch (from Redis, from the config thread): sends what the
 * session now has, behind all it sent before, at the end of this loop turn. */
static void send_later(grpc_conn_t *gc, int64_t start_ns)
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
    if (!session_send(gc, &slot->buf)) {
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

/*
 * Answers s: with status OK, the message in s->resp, then the trailers; otherwise a
 * trailers-only response carrying the status and `message` (a sentence). Counts the call.
 */
static void answer(gstream_t *s, grpc_status_t status, const char *message)
{
    grpc_conn_t *gc = s->gc;
    conn_t *c = gc->conn;
    s->answered = true;
    body_drop(s);
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

/* ---- ShouldRateLimit ----------------------------------------------------------------------- */

static void stream_free(gstream_t *s)
{
    rls_request_free(&s->req);
    buf_free(&s->keys);
    body_drop(s);
    buf_free(&s->resp);
    pool_free(s->pool, s);
}

/*
 * With --grpc-ratelimit-headers: the IETF RateLimit fields of the status with the fewest units
 * left (the first of them on a tie), as HTTP's responses carry them, for Envoy to add to its
 * client's response. Appends nothing when no status has a limit. Returns the headers added.
 */
static size_t ratelimit_headers(const rls_status_t *st, size_t n, buf_t *policy, buf_t *limit,
                                rls_header_t *out)
{
    const rls_status_t *least = NULL;
    for (size_t i = 0; i < n; i++) {
        if (st[i].has_limit && (least == NULL || st[i].remaining < least->remaining)) {
            least = &st[i];
        }
    }
    if (least == NULL) {
        return 0;
    }
    http_ratelimit_values(policy, limit, least->name, (int64_t)least->limit,
                          sl_ns_to_units_ceil(least->window_ns, SL_NS_PER_SEC),
                          (int64_t)least->remaining,
                          sl_ns_to_units_ceil(least->reset_ns, SL_NS_PER_SEC));
    out[0] = (rls_header_t){"ratelimit-policy", policy->data, policy->len};
    out[1] = (rls_header_t){"ratelimit", limit->data, limit->len};
    return 2;
}

/* The decisions are in: the response, in request order. */
static void rls_decided(void *arg, const engine_decision_t *d, size_t n, size_t refused)
{
    gstream_t *s = arg;
    if (s->pending && s->gc != NULL) {
        s->gc->pending--;
    }
    s->pending = false;
    if (s->gc == NULL) {
        stream_free(s); /* the stream or its connection is gone */
        return;
    }
    rls_status_t st[ENGINE_CHECKS_MAX];
    bool over = refused < n;
    for (size_t i = 0; i < s->req.n; i++) {
        int j = s->check_of[i];
        if (j < 0) { /* as envoyproxy/ratelimit: an unlimited descriptor has all it could want */
            st[i] = (rls_status_t){.code = RLS_CODE_OK,
                                   .remaining = j == CHECK_UNLIMITED ? UINT32_MAX : 0};
            continue;
        }
        const engine_decision_t *e = &d[j];
        if (e->rule == NULL) { /* not looked at: a cost never admissible answered the whole */
            st[i] = (rls_status_t){.code = RLS_CODE_OK};
            continue;
        }
        bool refused_it = (size_t)j == refused || e->never || !e->d.allowed;
        over = over || refused_it;
        const rule_descriptor_t *desc = e->rule->def.desc;
        st[i] = (rls_status_t){.code = refused_it ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK,
                               .has_limit = true,
                               .name = desc != NULL && desc->limit_name != NULL ? desc->limit_name
                                                                                : e->rule->def.name,
                               .limit = (uint64_t)e->d.limit,
                               .window_ns = e->window_ns,
                               .remaining = e->d.remaining > 0 ? (uint64_t)e->d.remaining : 0,
                               .reset_ns = e->d.reset_after_ns};
    }
    rls_header_t headers[2];
    buf_t policy = {0}, limit = {0};
    size_t nh = s->gc->conn->loop->srv->cfg->grpc_ratelimit_headers
                    ? ratelimit_headers(st, s->req.n, &policy, &limit, headers)
                    : 0;
    rls_response_encode(&s->resp, over ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK, st, s->req.n, headers,
                        nh);
    s->resp.failed = s->resp.failed || policy.failed || limit.failed;
    buf_free(&policy);
    buf_free(&limit);
    rls_request_free(&s->req);
    buf_free(&s->keys);
    answer(s, GRPC_STATUS_OK, NULL);
    send_later(s->gc, s->start_ns);
}

/* The one check's decision: as all or nothing of one. */
static void rls_one_decided(void *arg, int status, const engine_decision_t *d)
{
    (void)status;
    rls_decided(arg, d, 1, d->d.allowed ? 1 : 0);
}

/* The engine refused the checks before deciding (engine_allowall's error): why, in gRPC's words. */
static void rls_refused(gstream_t *s, int rc, size_t bad, size_t key_max)
{
    char err[GRPC_ERR_MAX];
    size_t desc = 0;
    for (size_t i = 0; i < s->req.n; i++) {
        if (s->check_of[i] == (int)bad) {
            desc = i;
        }
    }
    if (rc == ENGINE_EKEY) {
        snprintf(err, sizeof err, "descriptors[%zu]: its key is longer than %zu bytes", desc,
                 key_max);
        answer(s, GRPC_STATUS_INVALID_ARGUMENT, err);
    } else if (rc == ENGINE_ECOST) {
        snprintf(err, sizeof err, "descriptors[%zu]: hits_addend is out of range", desc);
        answer(s, GRPC_STATUS_INVALID_ARGUMENT, err);
    } else {
        answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
}

/*
 * A descriptor that asks for its own limit (its `limit` field) is decided by the inline
 * fixed-window rule of that limit per unit, shared by every descriptor asking the same, on a
 * key naming the descriptor (rls_override_key), as envoyproxy/ratelimit puts an override in
 * place of whatever its configuration says (its caller applies it only in a domain some rule
 * stands for, as envoyproxy/ratelimit does). NULL with err when the rule cannot be had (this
 * connection made too many, or the server holds the most it may).
 */
static rule_state_t *override_rule(gstream_t *s, const rls_descriptor_t *d, buf_t *keys, char *err,
                                   size_t cap)
{
    conn_t *c = s->gc->conn;
    sl_rule_t params;
    if (sl_rule_init(&params, SL_FIXED_WINDOW, d->override_per_unit,
                     rls_unit_ns(d->override_unit)) != SL_OK) {
        snprintf(err, cap, "its limit of %u per unit %d is not a rule", d->override_per_unit,
                 (int)d->override_unit);
        return NULL;
    }
    rule_state_t *rule;
    char eerr[ENGINE_ERR_MAX];
    if (engine_inline_rule(c->loop->worker, &params, &c->inline_budget, c->loop->now_ns, &rule,
                           eerr) != ENGINE_OK) {
        snprintf(err, cap, "its limit cannot be applied: %.160s", eerr);
        return NULL;
    }
    if (!rls_override_key(s->req.domain, s->req.domain_len, d, keys)) {
        snprintf(err, cap, "its domain and keys are longer than %d bytes", RLS_NAME_MAX - 1);
        return NULL;
    }
    return rule;
}

/* The rule in force for each descriptor (descriptors.h), NULL for none; an override in a known
 * domain is the caller's. Then, as envoyproxy/ratelimit does, a limit named in the `replaces`
 * of another descriptor's limit (unlimited ones too) no longer applies. */
static void descriptor_rules(gstream_t *s, rule_state_t **rules, bool *known)
{
    engine_worker_t *w = s->gc->conn->loop->worker;
    for (size_t i = 0; i < s->req.n; i++) {
        const rls_descriptor_t *d = &s->req.descs[i];
        rules[i] =
            engine_descriptor(w, s->req.domain, s->req.domain_len, d->entries, d->n_entries, known);
    }
    for (size_t i = 0; i < s->req.n; i++) {
        const rule_descriptor_t *mine = rules[i] != NULL ? rules[i]->def.desc : NULL;
        for (size_t j = 0; mine != NULL && mine->limit_name != NULL && j < s->req.n; j++) {
            const rule_descriptor_t *other = rules[j] != NULL ? rules[j]->def.desc : NULL;
            for (size_t k = 0; other != NULL && k < other->nreplaces; k++) {
                if (strcmp(other->replaces[k], mine->limit_name) == 0) {
                    rules[i] = NULL; /* replaced */
                    mine = NULL;
                    break;
                }
            }
        }
    }
}

/*
 * A ShouldRateLimit call: each descriptor is decided by the rule in force for it (descriptor_rules)
 * on a key of its values, or, in a domain some rule stands for, by the limit it asks for;
 * descriptors with no rule have no limit (OK, as envoyproxy/ratelimit answers an unknown
 * descriptor), nor do unlimited ones. The rest are decided together.
 */
static void rls_call(gstream_t *s, const uint8_t *msg, size_t len)
{
    conn_t *c = s->gc->conn;
    engine_worker_t *w = c->loop->worker;
    char err[GRPC_ERR_MAX];
    grpc_status_t st = rls_request_decode(msg, len, ENGINE_CHECKS_MAX, &s->req, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        answer(s, st, err);
        return;
    }
    engine_check_t checks[ENGINE_CHECKS_MAX];
    rule_state_t *found[ENGINE_CHECKS_MAX];
    bool known = false;
    descriptor_rules(s, found, &known);
    size_t key_off[ENGINE_CHECKS_MAX], n = 0;
    buf_t *keys = &s->keys;
    for (size_t i = 0; i < s->req.n; i++) {
        const rls_descriptor_t *d = &s->req.descs[i];
        char why[GRPC_ERR_MAX];
        key_off[n] = keys->len;
        rule_state_t *rule = found[i];
        if (d->has_override && known) {
            rule = override_rule(s, d, keys, why, sizeof why);
            if (rule == NULL) {
                snprintf(err, sizeof err, "descriptors[%zu]: %.200s", i, why);
                answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, err);
                return;
            }
        } else if (rule != NULL && rule->def.unlimited) {
            s->check_of[i] = CHECK_UNLIMITED;
            continue;
        } else if (rule != NULL) {
            rls_key(d, keys);
        }
        s->check_of[i] = rule != NULL ? (int)n : CHECK_NONE;
        if (rule != NULL) {
            checks[n] = (engine_check_t){
                .rule = rule, .key_len = keys->len - key_off[n], .cost = (int64_t)d->cost};
            n++;
        }
    }
    if (keys->failed) {
        answer(s, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (size_t j = 0; j < n; j++) {
        checks[j].key = keys->data != NULL ? keys->data + key_off[j] : ""; /* all keys empty */
    }
    if (n == 0) { /* no limit applies to any descriptor */
        rls_decided(s, NULL, 0, 0);
        return;
    }
    s->pending = true;
    s->gc->pending++;
    size_t bad = 0;
    /* one check: a decision of its own, without all or nothing's bookkeeping */
    int rc = n == 1 ? engine_decide_async(w, checks[0].rule, checks[0].key, checks[0].key_len,
                                          checks[0].cost, c->loop->now_ns, rls_one_decided, s)
                    : engine_allowall(w, checks, n, c->loop->now_ns, 0, rls_decided, s, &bad);
    if (rc != ENGINE_OK) {
        s->pending = false;
        s->gc->pending--;
        rls_refused(s, rc, bad, c->loop->srv->cfg->key_max);
    }
}

/* ---- calls --------------------------------------------------------------------------------- */

static void health_call(gstream_t *s, const uint8_t *msg, size_t len)
{
    char service[128], err[GRPC_ERR_MAX];
    grpc_status_t st = grpc_health_decode(msg, len, service, sizeof service, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        answer(s, st, err);
        return;
    }
    if (service[0] != '\0' && strcmp(service, SERVICE_RLS) != 0) {
        char why[GRPC_ERR_MAX];
        snprintf(why, sizeof why, "unknown service '%.100s'", service);
        answer(s, GRPC_STATUS_NOT_FOUND, why);
        return;
    }
    bool stopping = atomic_load(&s->gc->conn->loop->srv->stopping);
    grpc_health_encode(&s->resp, stopping ? GRPC_HEALTH_NOT_SERVING : GRPC_HEALTH_SERVING);
    answer(s, GRPC_STATUS_OK, NULL);
}

/* The client ended the stream: the call is complete. */
static void stream_call(gstream_t *s)
{
    conn_t *c = s->gc->conn;
    s->start_ns = c->loop->now_ns;
    bool rls = strcmp(s->path, PATH_RLS) == 0, health = strcmp(s->path, PATH_HEALTH) == 0;
    if (!s->post || !s->grpc_ct) { /* not gRPC: HTTP's answer, as gRPC's servers give */
        nghttp2_nv only[] = {nv(":status", s->post ? "415" : "405"),
                             nv("content-type", "text/plain")};
        s->answered = true;
        nghttp2_submit_response(s->gc->session, s->id, only, 2, NULL);
        return;
    }
    if (!rls && !health) {
        char why[GRPC_ERR_MAX];
        snprintf(why, sizeof why,
                 "unknown method '%s': this server serves " PATH_RLS " and " PATH_HEALTH,
                 s->path[0] != '\0' ? s->path : "(too long)");
        answer(s, GRPC_STATUS_UNIMPLEMENTED, why);
        return;
    }
    const uint8_t *msg;
    size_t len;
    char err[GRPC_ERR_MAX];
    grpc_status_t st =
        grpc_unary_message((const uint8_t *)s->body.data, s->body.len,
                           c->loop->srv->cfg->request_max, &msg, &len, err, sizeof err);
    if (st != GRPC_STATUS_OK) {
        answer(s, st, err);
    } else if (rls) {
        rls_call(s, msg, len);
    } else {
        health_call(s, msg, len);
    }
}

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
    s->header_bytes += namelen + valuelen;
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
        answer(s, st, err);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    bool ends = (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
                (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    gstream_t *s = ends ? stream_of(user_data, frame->hd.stream_id) : NULL;
    if (s != NULL && !s->answered) {
        stream_call(s);
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
        body_drop(s);
        gc->pending--;
        s->gc = NULL; /* orphaned: the decision's callback frees it */
    } else {
        stream_free(s);
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
            body_drop(s);
            s->gc = NULL; /* orphaned: the decision's callback frees it */
        } else {
            stream_free(s);
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
    if (!session_send(gc, &c->out) ||
        (!nghttp2_session_want_read(gc->session) && !nghttp2_session_want_write(gc->session))) {
        c->closing = true;
    }
    conn_batch_done(c, consumed, gc->answered, start_ns);
}

static void grpc_input_dropped(conn_t *c)
{
    (void)c; /* nghttp2 keeps what it needs itself: nothing waits in the input */
}

static void grpc_reply_full(buf_t *out)
{
    grpc_h2_goaway(out, true, NGHTTP2_ENHANCE_YOUR_CALM, "too many clients");
}

static void grpc_reply_closing(buf_t *out, const char *why)
{
    grpc_h2_goaway(out, false, NGHTTP2_ENHANCE_YOUR_CALM, why);
}

/* Stopping: GOAWAY (no error) naming the last stream this server will answer, so the client
 * sends its next calls elsewhere while the ones in flight are answered. */
static void grpc_stopping(conn_t *c)
{
    grpc_conn_t *gc = conn_state(c);
    if (gc->session == NULL) {
        return;
    }
    int32_t last = nghttp2_session_get_last_proc_stream_id(gc->session);
    static const char why[] = "the server is stopping";
    if (nghttp2_submit_goaway(gc->session, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR,
                              (const uint8_t *)why, sizeof why - 1) != 0 ||
        !session_send(gc, &c->out)) {
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
