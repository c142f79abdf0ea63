/*
 * http_rules.c - sluiced's HTTP routes for rules and overrides (admin token, but to read rules):
 *
 *   GET    /v1/rules                           every rule (no token)
 *   POST|PUT /v1/rules                         import a rules file: add and change / replace
 *   GET|PUT|DELETE /v1/rules/{name}            one rule (GET: no token)
 *   GET    /v1/rules/{name}/overrides          its overrides
 *   GET|PUT|DELETE /v1/rules/{name}/overrides/{key}
 *
 * Run by the admin module (admin.h) on the config store's thread, replied in order.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http.h"
#include "proto/text.h"
#include "proto/throttle_args.h"
#include "rules/keytpl.h"
#include "engine/admin.h"
#include "server/auth_guard.h"
#include "engine/events.h"
#include "server/route.h"
#include "server/server.h"

/* ---- rules and overrides ------------------------------------------------------------------- */

/* The refusal v calls for, into b: 401 for a wrong token, or, from a hot address, 429 with
 * Retry-After (rounded up to a second). */
static void token_refusal(buf_t *b, const guard_verdict_t *v, bool keep_alive)
{
    if (!v->hot) {
        http_begin(b, 401);
        http_header(b, "WWW-Authenticate", "Bearer realm=\"sluice\"");
        http_problem_end(b, 401, keep_alive, NULL, "invalid admin token");
        return;
    }
    long long retry_s = (long long)((v->retry_ns + 999999999) / 1000000000);
    char detail[128];
    snprintf(detail, sizeof detail,
             "too many failed admin token attempts from your address; retry in %lld s", retry_s);
    http_begin(b, 429);
    http_header(b, "Retry-After", "%lld", retry_s);
    http_problem_end(b, 429, keep_alive, NULL, detail);
}

/* Counts and logs (at a limited rate) a refused admin token, and whether it is dropped. */
static void token_note(const conn_t *c, const guard_verdict_t *v)
{
    const char *shared = v->shared ? ", counted with others: the table of addresses is full" : "";
    if (v->hot) {
        event_note(
            EV_AUTH_LOCKED_HTTP,
            "HTTP: admin token from %s:%d refused: its address is locked (failure %u without "
            "a minute's pause%s)",
            c->addr, c->port, v->failures, shared);
    } else {
        event_note(EV_AUTH_FAILED_HTTP,
                   "HTTP: wrong admin token from %s:%d (failure %u from this address without a "
                   "minute's pause%s)",
                   c->addr, c->port, v->failures, shared);
    }
    if (v->drop) {
        event_note(
            EV_AUTH_DROPPED,
            "HTTP: closing %s:%d unanswered: the replies held back for its address reach 10 s "
            "(failure %u without a minute's pause)",
            c->addr, c->port, v->failures);
    }
}

/* The reply to a refused admin token (v: auth_guard.h's verdict): at once, or, when the address
 * keeps failing, held back in a reply slot of its own that later requests wait behind (dropped
 * if the client closes its side meanwhile). When it cannot be held (the address's queue is full,
 * the loop's too, out of memory) the connection is closed at once, unanswered. */
static void token_refused(route_ctx_t *x, const guard_verdict_t *v)
{
    conn_t *c = x->c;
    token_note(c, v);
    if (v->hold_ns == 0 && !v->drop) {
        token_refusal(&c->out, v, x->req->keep_alive);
        return;
    }
    reply_slot_t *slot = v->drop ? NULL : conn_defer(c);
    if (slot == NULL) {
        conn_drop(c);
        return;
    }
    event_note(EV_AUTH_HELD,
               "HTTP: slowing down %s:%d: failure %u from its address without a minute's pause; "
               "this reply held back %lld ms",
               c->addr, c->port, v->failures, (long long)(v->hold_ns / 1000000));
    slot->close_after = !x->req->keep_alive;
    slot->droppable = true;
    token_refusal(&slot->buf, v, !slot->close_after);
    if (x->req->method == HTTP_HEAD) {
        http_head_only(&slot->buf, 0);
    }
    if (!conn_resolve_after(slot, v->hold_ns)) {
        conn_drop(c); /* first, so that nothing of it is written */
        conn_resolve(slot);
    }
}

/* The admin token's check: true when there is none or the request carries it and its address's
 * guard lets it in (auth_guard.h: from a hot address nothing is let in, the right token
 * neither); false after replying (401, 429) or closing the connection. */
bool route_admin_ok(route_ctx_t *x)
{
    const char *token = x->c->loop->srv->cfg->admin_token;
    if (token == NULL) {
        return true;
    }
    const char *v;
    size_t vlen;
    size_t n = strlen(token);
    if (!http_header_get(x->req, "authorization", &v, &vlen) || vlen < 7 ||
        strncasecmp(v, "Bearer ", 7) != 0) {
        problem(x, 401, "this endpoint needs Authorization: Bearer <admin token>");
        return false;
    }
    v += 7;
    vlen -= 7;
    unsigned char diff = (unsigned char)(vlen != n);
    for (size_t i = 0; i < vlen; i++) {
        diff |= (unsigned char)(v[i] ^ token[i < n ? i : 0]);
    }
    guard_verdict_t verdict =
        guard_attempt(guard_global(), &x->c->peer, (int64_t)uv_hrtime(), diff == 0 && n > 0);
    if (!verdict.let_in) {
        token_refused(x, &verdict);
        return false;
    }
    return true;
}

void route_method_not_allowed(route_ctx_t *x, const char *allow)
{
    char detail[64];
    snprintf(detail, sizeof detail, "use %s", allow);
    http_begin(&x->c->out, 405);
    http_header(&x->c->out, "Allow", "%s", allow);
    http_problem_end(&x->c->out, 405, x->req->keep_alive, NULL, detail);
}

/*
 * /v1/rules: the admin operations of engine/admin.h, run on the config thread. The response is
 * written into the request's reply slot when the operation is done and in force on this loop.
 */
/* A page of overrides: {"overrides":[{"key":..,"override":{..}},..],"next":"<hex>"|null}; a key
 * that is not UTF-8 text is given as "key_hex". malloc'ed, or NULL when out of memory. */
static char *overrides_json(const admin_req_t *r)
{
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < r->novs; i++) {
        const admin_override_t *o = &r->ovs[i];
        json_t *item = json_object();
        json_t *key = text_is_utf8(o->key, o->key_len) ? json_stringn(o->key, o->key_len) : NULL;
        if (key != NULL) {
            json_object_set_new(item, "key", key);
        } else {
            char *hex = admin_hex(o->key, o->key_len);
            json_object_set_new(item, "key_hex", hex != NULL ? json_string(hex) : NULL);
            free(hex);
        }
        json_object_set_new(item, "override", json_loads(o->json, 0, NULL));
        json_array_append_new(list, item);
    }
    bool failed;
    char *cursor = admin_next_cursor(r, &failed);
    json_t *next = cursor != NULL ? json_string(cursor) : json_null();
    free(cursor);
    if (failed) {
        json_decref(list);
        return NULL;
    }
    json_t *page = json_pack("{s:o,s:o}", "overrides", list, "next", next);
    char *text = page != NULL ? json_dumps(page, JSON_COMPACT) : NULL;
    json_decref(page);
    return text;
}

/* What an import did: {"added":[..],"changed":[..],"removed":[..],"kept":N}. malloc'ed, or
 * NULL when out of memory. */
static char *import_json(const config_import_diff_t *d)
{
    json_t *names[3] = {json_array(), json_array(), json_array()};
    char **lists[3] = {d->added, d->changed, d->removed};
    size_t counts[3] = {d->nadded, d->nchanged, d->nremoved};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; names[k] != NULL && i < counts[k]; i++) {
            json_array_append_new(names[k], json_string(lists[k][i]));
        }
    }
    json_t *o = json_pack("{s:o*,s:o*,s:o*,s:I}", "added", names[0], "changed", names[1], "removed",
                          names[2], "kept", (json_int_t)d->kept);
    char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

static void admin_replied(admin_req_t *r)
{
    reply_slot_t *slot = r->arg;
    buf_t *b = &slot->buf;
    bool keep_alive = !slot->close_after;
    int status = r->status == ADMIN_OK         ? 200
                 : r->status == ADMIN_EINVALID ? 400
                 : r->status == ADMIN_ESTORE   ? 503
                                               : 404;
    if (status != 200) {
        http_begin(b, status);
        http_problem_field_end(b, status, keep_alive, NULL, r->err,
                               r->field[0] != '\0' ? r->field : NULL);
    } else if (r->op == ADMIN_RULE_DEL || r->op == ADMIN_OVERRIDE_DEL) {
        http_begin(b, 204);
        http_end(b, keep_alive, NULL, NULL, 0);
    } else if (r->op == ADMIN_OVERRIDE_LIST || r->op == ADMIN_RULES_IMPORT) {
        char *body = r->op == ADMIN_OVERRIDE_LIST ? overrides_json(r) : import_json(&r->diff);
        if (body == NULL) {
            http_problem(b, 503, keep_alive, NULL, "out of memory");
        } else {
            http_begin(b, 200);
            http_end(b, keep_alive, "application/json", body, strlen(body));
            free(body);
        }
    } else if (r->op == ADMIN_RULE_LIST) {
        buf_t body = {0};
        char head[64];
        int len =
            snprintf(head, sizeof head, "{\"version\":%lld,\"rules\":[", (long long)r->version);
        buf_add(&body, head, (size_t)len);
        for (size_t i = 0; i < r->nrows; i++) {
            if (i > 0) {
                buf_add(&body, ",", 1);
            }
            buf_add(&body, r->rows[i].json, strlen(r->rows[i].json));
        }
        buf_add(&body, "]}", 2);
        http_begin(b, 200);
        http_end(b, keep_alive, "application/json", body.data, body.len);
        buf_free(&body);
    } else {
        http_begin(b, 200);
        http_end(b, keep_alive, "application/json", r->text, strlen(r->text));
    }
    conn_resolve(slot);
    admin_free(r);
}

static void admin_start(route_ctx_t *x, admin_op_t op, const http_segment_t *rule,
                        const http_segment_t *key, size_t limit)
{
    bool body = op == ADMIN_RULE_PUT || op == ADMIN_OVERRIDE_PUT || op == ADMIN_RULES_IMPORT;
    admin_req_t *r = admin_new(x->c->loop->srv->engine, op, rule ? rule->ptr : NULL,
                               rule ? rule->len : 0, key ? key->ptr : NULL, key ? key->len : 0,
                               body ? x->req->body : NULL, body ? x->req->body_len : 0);
    reply_slot_t *slot = r != NULL ? conn_defer(x->c) : NULL;
    if (slot == NULL) {
        admin_free(r);
        problem(x, 503, "out of memory");
        return;
    }
    slot->close_after = !x->req->keep_alive;
    r->arg = slot;
    r->done = admin_replied;
    r->limit = limit;
    r->replace = op == ADMIN_RULES_IMPORT && x->req->method == HTTP_PUT;
    const char *client = NULL;
    size_t client_len = 0;
    http_header_get(x->req, "x-sluice-client", &client, &client_len);
    admin_set_who(r, "HTTP", x->c->addr, x->c->port, client, client_len,
                  x->c->loop->srv->cfg->admin_token != NULL ? "admin token" : "no token");
    admin_submit(x->c->loop->worker, r);
}

/* GET, PUT and DELETE of one document (a rule, or one key's override). */
static void route_document(route_ctx_t *x, admin_op_t get, admin_op_t put, admin_op_t del,
                           const http_segment_t *key)
{
    switch (x->req->method) {
    case HTTP_GET:
        admin_start(x, get, &x->seg[2], key, ADMIN_LIST_DEFAULT);
        break;
    case HTTP_PUT:
        admin_start(x, put, &x->seg[2], key, ADMIN_LIST_DEFAULT);
        break;
    case HTTP_DELETE:
        admin_start(x, del, &x->seg[2], key, ADMIN_LIST_DEFAULT);
        break;
    default:
        route_method_not_allowed(x, "GET, PUT, DELETE");
    }
}

/* GET /v1/rules/{name}/overrides[?after=<hex key>][&limit=N]: a page of the rule's overrides. */
static void route_override_list(route_ctx_t *x)
{
    if (x->req->method != HTTP_GET) {
        route_method_not_allowed(x, "GET");
        return;
    }
    char after[2 * OVERRIDE_KEY_MAX + 1], limit[24];
    unsigned char key[OVERRIDE_KEY_MAX];
    size_t after_len = 0, limit_len = 0;
    size_t key_len = 0;
    bool has_after = http_query_get(x->req, "after", after, sizeof after, &after_len);
    if (has_after && !admin_cursor_parse(after, after_len, key, &key_len)) {
        problem(x, 400, "after: must be a cursor from an earlier page (hex)");
        return;
    }
    long long n = ADMIN_LIST_DEFAULT;
    if (http_query_get(x->req, "limit", limit, sizeof limit, &limit_len)) {
        char *end = NULL;
        n = strtoll(limit, &end, 10);
        if (limit_len == 0 || *end != '\0' || n < 1 || n > ADMIN_LIST_MAX) {
            problem(x, 400, "limit: must be 1 to %d", ADMIN_LIST_MAX);
            return;
        }
    }
    http_segment_t cursor = {.ptr = (const char *)key, .len = key_len};
    admin_start(x, ADMIN_OVERRIDE_LIST, &x->seg[2], has_after ? &cursor : NULL, (size_t)n);
}

void route_rules(route_ctx_t *x)
{
    /* reading rules is open (the console shows them); overrides name keys, which may be
     * secrets (API keys), so they and every change need the token (docs/dev/design.md) */
    bool rule_read = x->req->method == HTTP_GET && (x->nseg == 2 || x->nseg == 3);
    if (!rule_read && !route_admin_ok(x)) {
        return;
    }
    if (x->nseg == 2) {
        int m = x->req->method;
        if (m != HTTP_GET && m != HTTP_POST && m != HTTP_PUT) {
            route_method_not_allowed(x, "GET, POST, PUT");
            return;
        }
        admin_start(x, m == HTTP_GET ? ADMIN_RULE_LIST : ADMIN_RULES_IMPORT, NULL, NULL,
                    ADMIN_LIST_DEFAULT);
    } else if (x->nseg == 3) {
        route_document(x, ADMIN_RULE_GET, ADMIN_RULE_PUT, ADMIN_RULE_DEL, NULL);
    } else if (x->nseg == 4 && seg_is(x, 3, "overrides")) {
        route_override_list(x);
    } else if (x->nseg == 5 && seg_is(x, 3, "overrides")) {
        route_document(x, ADMIN_OVERRIDE_GET, ADMIN_OVERRIDE_PUT, ADMIN_OVERRIDE_DEL, &x->seg[4]);
    } else {
        problem(x, 404, "no such resource");
    }
}
