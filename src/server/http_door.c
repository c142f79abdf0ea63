/*
 * http_door.c - what keeps web pages out of sluiced's HTTP routes: route_door() runs before any
 * route (http_routes.c) and refuses what a browser could be made to send by a page of another
 * site (docs/security.md, "Browsers and the admin door"):
 *
 *   Host      DNS rebinding: a page whose name an attacker points at sluiced's address is, to
 *             the browser, same-origin with sluiced, and may read and change what it likes. Its
 *             requests carry that name as Host. Every route but the proxies' and the probes'
 *             takes only a Host that is an address sluiced listens on (any address when it
 *             listens on 0.0.0.0 or ::), "localhost" when it listens on loopback, or a name given
 *             with --http-host. 421, naming the setting.
 *   changes   (any method but GET, HEAD, OPTIONS) from a browser must come from a page of this
 *             server: Sec-Fetch-Site cross-site or same-site, or an Origin that is not the Host
 *             the request is sent to, is a 403. Programs send neither.
 *   bodies    of a change must be Content-Type: application/json (a rules import: a YAML type
 *             too). An HTML form can send only form encodings and text/plain, and a page's fetch
 *             without asking (CORS) only those or no type at all (a Blob or bytes), so neither
 *             can carry a change. A change without a body (DELETE) must carry X-Sluice-Client or
 *             that Content-Type, which a page of another site cannot set without asking either.
 *             415 / 403.
 *
 * sluiced answers no CORS preflight (OPTIONS gets no Access-Control-Allow-* field), so a page of
 * another site can never send what it would have to ask for. Every refusal is counted and logged
 * at a limited rate (events.h: sluice_http_refused_total{reason}).
 */
#include <http_parser.h>
#include <string.h>
#include <strings.h>

#include "proto/http_origin.h"
#include "proto/netaddr.h"
#include "proto/text.h"
#include "engine/events.h"
#include "server/route.h"

#define SHOWN_MAX 64 /* bytes of a header value a refusal quotes */

/* ---- Host ---------------------------------------------------------------------------------- */

static bool all_zero(const netaddr_t *a)
{
    static const uint8_t zero[16];
    return memcmp(a->addr, zero, a->family == 4 ? 4 : 16) == 0;
}

static bool loopback(const netaddr_t *a)
{
    static const uint8_t one[16] = {[15] = 1};
    return a->family == 4 ? a->addr[0] == 127 : memcmp(a->addr, one, 16) == 0;
}

/* Whether h is the address, or under the wildcard, of bind address b; or "localhost" and b is
 * loopback or a wildcard. */
static bool bound_host(const netaddr_t *b, const http_authority_t *h)
{
    bool wildcard = all_zero(b);
    if (!h->is_ip) {
        return h->host_len == 9 && memcmp(h->host, "localhost", 9) == 0 &&
               (wildcard || loopback(b));
    }
    if (wildcard) { /* :: takes IPv4 clients too (dual stack) */
        return b->family == 6 || h->ip.family == 4;
    }
    return b->family == h->ip.family && memcmp(b->addr, h->ip.addr, b->family == 4 ? 4 : 16) == 0;
}

/* Whether the Host h names this server: a bound address (or localhost), or an --http-host. */
static bool host_is_ours(const server_settings_t *cfg, const http_authority_t *h)
{
    for (size_t i = 0; i < cfg->nbind; i++) {
        netaddr_t b;
        if (netaddr_parse(cfg->bind[i], strlen(cfg->bind[i]), &b) == NETADDR_OK &&
            bound_host(&b, h)) {
            return true;
        }
    }
    for (size_t i = 0; i < cfg->nhttp_hosts; i++) {
        const char *name = cfg->http_hosts[i];
        size_t len = strlen(name);
        http_authority_t a = {.port = -1};
        bool ok = netaddr_parse(name, len, &a.ip) == NETADDR_OK; /* "::1" needs no brackets */
        a.is_ip = ok;
        ok = ok || http_authority_parse(name, len, &a) == 0;
        if (strcmp(name, "*") == 0 || (ok && http_authority_same_host(&a, h))) {
            return true;
        }
    }
    return false;
}

/* The request's Host, parsed into *h; false (and *present false) when it has none. */
static bool request_host(const route_ctx_t *x, http_authority_t *h, bool *present, const char **v,
                         size_t *vlen)
{
    *present = http_header_get(x->req, "host", v, vlen);
    return *present && http_authority_parse(*v, *vlen, h) == 0;
}

/* ---- refusals ------------------------------------------------------------------------------ */

/* 421 / 403 / 415 with the detail, counted under ev and logged with the peer. */
static bool refuse(route_ctx_t *x, event_id_t ev, int status, const char *why, const char *fix)
{
    char path[TEXT_SHOW_CAP(SHOWN_MAX)];
    text_show(path, sizeof path, x->req->path, x->req->path_len, SHOWN_MAX, 0);
    event_note(ev, "HTTP: refused %s %s from %s:%d: %s", http_method_str(x->req->method), path,
               x->c->addr, x->c->port, why);
    problem(x, status, "%s%s", why, fix);
    return false;
}

static bool check_host(route_ctx_t *x)
{
    http_authority_t h;
    bool present;
    const char *v;
    size_t vlen;
    char shown[TEXT_SHOW_CAP(SHOWN_MAX)], why[PROBLEM_MAX];
    if (request_host(x, &h, &present, &v, &vlen)) {
        if (host_is_ours(x->c->loop->srv->cfg, &h)) {
            return true;
        }
        text_show(shown, sizeof shown, h.host, h.host_len, SHOWN_MAX, 0);
        snprintf(why, sizeof why, "Host '%s' is not a name of this server", shown);
        return refuse(x, EV_HTTP_FOREIGN_HOST, 421, why,
                      ": if clients reach it by that name, add it with --http-host "
                      "(http_host in the file)");
    }
    if (!present) {
        return true; /* HTTP/1.0 programs: a browser always sends one */
    }
    text_show(shown, sizeof shown, v, vlen, SHOWN_MAX, 0);
    snprintf(why, sizeof why, "Host '%s' is not a host name or address", shown);
    return refuse(x, EV_HTTP_FOREIGN_HOST, 421, why, "");
}

/* Sec-Fetch-Site and Origin: a change from a browser comes from a page of this server. */
static bool check_origin(route_ctx_t *x)
{
    const char *v;
    size_t vlen;
    char shown[TEXT_SHOW_CAP(SHOWN_MAX)], why[PROBLEM_MAX];
    static const char fix[] = ": changes are taken from this server's own pages (the console) "
                              "and from programs, never from another site's pages";
    if (http_header_get(x->req, "sec-fetch-site", &v, &vlen) &&
        ((vlen == 10 && strncasecmp(v, "cross-site", 10) == 0) ||
         (vlen == 9 && strncasecmp(v, "same-site", 9) == 0))) {
        snprintf(why, sizeof why, "the browser says a page of another site sent this (%.*s)",
                 (int)vlen, v);
        return refuse(x, EV_HTTP_FOREIGN_ORIGIN, 403, why, fix);
    }
    if (!http_header_get(x->req, "origin", &v, &vlen)) {
        return true;
    }
    http_origin_t o;
    http_authority_t h;
    bool present;
    const char *hv;
    size_t hlen;
    if (http_origin_parse(v, vlen, &o) == 0 && request_host(x, &h, &present, &hv, &hlen) &&
        http_origin_matches(&o, &h)) {
        return true;
    }
    text_show(shown, sizeof shown, v, vlen, SHOWN_MAX, 0);
    snprintf(why, sizeof why, "Origin '%s' is not this server's", shown);
    return refuse(x, EV_HTTP_FOREIGN_ORIGIN, 403, why, fix);
}

/* ---- bodies -------------------------------------------------------------------------------- */

/* The media types a change's body may be sent as. */
static const char *const json_types[] = {"application/json", NULL};
static const char *const import_types[] = {
    "application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", NULL};

/* Whether the Content-Type's media type (before any ';', blanks around it ignored, any case) is
 * one of types. *present says whether there is a Content-Type at all. */
static bool type_is(const route_ctx_t *x, const char *const *types, bool *present, const char **v,
                    size_t *vlen)
{
    *present = http_header_get(x->req, "content-type", v, vlen);
    if (!*present) {
        return false;
    }
    const char *p = *v, *end = *v + *vlen;
    const char *semi = memchr(p, ';', *vlen);
    if (semi != NULL) {
        end = semi;
    }
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    while (end > p && (end[-1] == ' ' || end[-1] == '\t')) {
        end--;
    }
    for (size_t i = 0; types[i] != NULL; i++) {
        size_t n = strlen(types[i]);
        if ((size_t)(end - p) == n && strncasecmp(p, types[i], n) == 0) {
            return true;
        }
    }
    return false;
}

static bool check_body(route_ctx_t *x, door_kind_t kind)
{
    int m = x->req->method;
    bool present;
    const char *v;
    size_t vlen;
    char shown[TEXT_SHOW_CAP(SHOWN_MAX)], why[PROBLEM_MAX];
    bool import = kind == DOOR_IMPORT;
    if (type_is(x, import ? import_types : json_types, &present, &v, &vlen)) {
        return true;
    }
    if (m != HTTP_POST && m != HTTP_PUT && m != HTTP_PATCH) {
        if (http_header_get(x->req, "x-sluice-client", &v, &vlen) && vlen > 0) {
            return true;
        }
        snprintf(why, sizeof why,
                 "a %s must carry an X-Sluice-Client header (a name for the "
                 "log: X-Sluice-Client: deploy) or Content-Type: application/json",
                 http_method_str(m));
        return refuse(x, EV_HTTP_NOT_JSON, 403, why,
                      ", which a page of another site cannot make a browser send");
    }
    if (present) {
        text_show(shown, sizeof shown, v, vlen, SHOWN_MAX, 0);
    }
    snprintf(why, sizeof why, "the body must be sent as Content-Type: %s, not %s%s%s",
             import ? "application/yaml (or application/json)" : "application/json",
             present ? "'" : "", present ? shown : "none", present ? "'" : "");
    return refuse(x, EV_HTTP_NOT_JSON, 415, why,
                  import ? " (curl: -H 'Content-Type: application/yaml')"
                         : " (curl: -H 'Content-Type: application/json')");
}

bool route_door(route_ctx_t *x, door_kind_t kind)
{
    if (kind == DOOR_OPEN) {
        return true;
    }
    if (!check_host(x)) {
        return false;
    }
    int m = x->req->method;
    if (kind == DOOR_READ || m == HTTP_GET || m == HTTP_HEAD || m == HTTP_OPTIONS) {
        return true;
    }
    return check_origin(x) && check_body(x, kind);
}
