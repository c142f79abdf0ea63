/*
 * http_ui.c - the console's files at GET /ui/ (index.html) and /ui/<file>, from the table
 * compiled into sluiced (ui_assets.h). Every reply carries a strict Content-Security-Policy
 * (scripts and styles from /ui/ only, no inline script, requests only to this server), a
 * Referrer-Policy that sends nothing to other sites, the file's ETag (a matching If-None-Match
 * gets 304) and Cache-Control: no-cache, so a browser revalidates and sees a new sluiced's files
 * at once. A path that names no file is a 404.
 */
#include <http_parser.h>
#include <string.h>

#include "proto/http.h"
#include "server/route.h"
#include "server/ui_assets.h"

#define UI_PATH_MAX 256 /* longest file path under /ui/ looked up, bytes */

/* The policy of every /ui/ reply: nothing inline, nothing from elsewhere. */
static const char ui_csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                             "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                             "form-action 'none'; frame-ancestors 'none'";

/* The file named name (len bytes), or NULL. */
static const ui_asset_t *ui_find(const char *name, size_t len)
{
    for (size_t i = 0; i < ui_assets_count; i++) {
        if (strlen(ui_assets[i].name) == len && memcmp(ui_assets[i].name, name, len) == 0) {
            return &ui_assets[i];
        }
    }
    return NULL;
}

/* True when the request's If-None-Match names etag (or is "*"). */
static bool ui_not_modified(const http_request_t *req, const char *etag)
{
    const char *v;
    size_t vlen;
    if (!http_header_get(req, "if-none-match", &v, &vlen)) {
        return false;
    }
    size_t n = strlen(etag);
    for (size_t i = 0; i + n <= vlen; i++) {
        if (memcmp(v + i, etag, n) == 0) {
            return true;
        }
    }
    return vlen == 1 && v[0] == '*';
}

static void ui_headers(route_ctx_t *x, const ui_asset_t *a)
{
    http_header(&x->c->out, "Content-Security-Policy", "%s", ui_csp);
    http_header(&x->c->out, "X-Content-Type-Options", "nosniff");
    /* same-origin, not no-referrer: under no-referrer the Fetch standard has a page's own
     * PUT and DELETE sent with "Origin: null", which the door (http_door.c) refuses */
    http_header(&x->c->out, "Referrer-Policy", "same-origin");
    http_header(&x->c->out, "Cache-Control", "no-cache");
    http_header(&x->c->out, "ETag", "%s", a->etag);
}

void route_ui(route_ctx_t *x)
{
    if (x->req->method != HTTP_GET && x->req->method != HTTP_HEAD) {
        route_method_not_allowed(x, "GET, HEAD");
        return;
    }
    if (x->nseg == 1) { /* /ui: the pages' relative links need the slash */
        http_begin(&x->c->out, 308);
        http_header(&x->c->out, "Location", "/ui/");
        http_end(&x->c->out, x->req->keep_alive, NULL, NULL, 0);
        return;
    }
    char name[UI_PATH_MAX];
    size_t len = 0;
    for (long i = 1; i < x->nseg; i++) { /* the segments after "ui", joined by '/' */
        size_t n = x->seg[i].len;
        if (len + n + 2 > sizeof name) {
            problem(x, 404, "no such file in the console");
            return;
        }
        if (i > 1) {
            name[len++] = '/';
        }
        memcpy(name + len, x->seg[i].ptr, n);
        len += n;
    }
    const ui_asset_t *a = len == 0 ? ui_find("index.html", 10) : ui_find(name, len);
    if (a == NULL) {
        problem(x, 404, "no such file in the console");
        return;
    }
    bool same = ui_not_modified(x->req, a->etag);
    http_begin(&x->c->out, same ? 304 : 200);
    ui_headers(x, a);
    if (same) {
        http_end(&x->c->out, x->req->keep_alive, NULL, NULL, 0);
    } else {
        http_end(&x->c->out, x->req->keep_alive, a->content_type, a->data, a->len);
    }
}
