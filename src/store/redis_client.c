/*
 * redis_client.c - see redis_client.h.
 */
#include "store/redis_client.h"

#include "store/freelist.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>

#include "remote/uv_glue.h"

#define BACKOFF_MIN_MS     10
#define BACKOFF_MAX_MS     1000
#define REFRESH_MIN_GAP_MS 100  /* at most ten slot map reloads a second */
#define CMD_INLINE         224  /* command bytes a request holds without an allocation */
#define REQUESTS_KEEP      4096 /* free requests kept for reuse per client */

typedef struct rc_node {
    rc_client_t *client;
    char host[64];
    int port;
    redisAsyncContext *ac; /* NULL while disconnected */
    uint64_t retry_at_ms;  /* the next connect attempt, loop time */
    unsigned backoff_ms;
    bool ever_connected;
    bool down;         /* its connection was lost or could not be made, and is not made again yet */
    bool auth_refused; /* told: AUTH was refused since the node was last up */
} rc_node_t;

struct rc_client {
    uv_loop_t *loop;
    rc_config_t cfg;
    rc_connect_fn on_connect; /* told of every connection made */
    void *on_connect_arg;
    rc_state_fn on_state; /* told when a node goes down and comes back (rc_on_state) */
    void *on_state_arg;
    rc_node_t nodes[RC_NODES_MAX];
    size_t nnodes;
    int16_t slots[RC_SLOTS]; /* owner node index, -1 unknown */
    bool refreshing;
    bool closing; /* rc_free() is tearing down: no reconnects, no refreshes */
    uint64_t last_refresh_ms;
    uv_check_t flush;    /* after each loop turn's reads: write what the turn queued */
    uv_timer_t retry;    /* connects again to the nodes that are down, after their backoff */
    int closing_handles; /* rc_free: handles whose close has not completed (the last frees) */
    rc_stats_t stats;
    freelist_t requests;      /* rc_request_t to reuse */
    rc_reply_pool_t *replies; /* every connection's reply objects */
};

/* A command in flight: what to re-send on a redirect and whom to answer. Requests are reused
 * through the client's free list (at most REQUESTS_KEEP kept): a command's bytes up to CMD_INLINE
 * live in the request, longer ones in an allocation of their own. */
typedef struct rc_request {
    rc_client_t *client;
    rc_reply_fn fn;
    void *arg;
    int redirects;
    size_t len; /* bytes of the command */
    char *cmd;  /* the command as sent (RESP): inline, or allocated */
    char inline_cmd[CMD_INLINE];
} rc_request_t;

/* ---- slots ----------------------------------------------------------------------------- */

static uint16_t crc16(const char *buf, size_t len)
{
    /* CRC16-CCITT (XMODEM), as Redis Cluster's key slot */
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++) {
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

unsigned rc_key_slot(const char *key, size_t len)
{
    size_t open = 0;
    while (open < len && key[open] != '{') {
        open++;
    }
    if (open < len) {
        size_t close = open + 1;
        while (close < len && key[close] != '}') {
            close++;
        }
        if (close < len && close > open + 1) {
            return crc16(key + open + 1, close - open - 1) & (RC_SLOTS - 1);
        }
    }
    return crc16(key, len) & (RC_SLOTS - 1);
}

/* ---- URLs ------------------------------------------------------------------------------ */

/* Percent-decodes in[0..len) into out (cap bytes with the NUL). False when it does not fit or a
 * '%' is not followed by two hex digits, or it decodes to a NUL. */
static bool url_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned v = (unsigned char)in[i];
        if (v == '%') {
            if (i + 2 >= len || !isxdigit((unsigned char)in[i + 1]) ||
                !isxdigit((unsigned char)in[i + 2])) {
                return false;
            }
            char hex[3] = {in[i + 1], in[i + 2], '\0'};
            v = (unsigned)strtoul(hex, NULL, 16);
            i += 2;
        }
        if (v == 0 || o + 1 >= cap) {
            return false;
        }
        out[o++] = (char)v;
    }
    out[o] = '\0';
    return true;
}

/* "[USER]:PASSWORD" (len bytes) into cfg. -1 with err (the password never in it). */
static int parse_userinfo(const char *shown, const char *info, size_t len, rc_config_t *cfg,
                          char *err)
{
    const char *colon = memchr(info, ':', len);
    if (colon == NULL) {
        snprintf(err, RC_ERR_MAX,
                 "'%s': the password goes after a ':' (redis://:PASSWORD@host:port "
                 "or redis://USER:PASSWORD@host:port)",
                 shown);
        return -1;
    }
    size_t ulen = (size_t)(colon - info);
    if (!url_decode(info, ulen, cfg->user, sizeof cfg->user)) {
        snprintf(err, RC_ERR_MAX,
                 "'%s': the user name is longer than %d bytes or badly "
                 "percent-encoded",
                 shown, RC_USER_MAX - 1);
        return -1;
    }
    if (!url_decode(colon + 1, len - ulen - 1, cfg->password, sizeof cfg->password) ||
        cfg->password[0] == '\0') {
        snprintf(err, RC_ERR_MAX,
                 "'%s': the password is empty, longer than %d bytes or badly "
                 "percent-encoded",
                 shown, RC_PASSWORD_MAX - 1);
        memset(cfg->password, 0, sizeof cfg->password);
        return -1;
    }
    return 0;
}

void rc_mask_url(const char *url, char *out, size_t cap)
{
    const char *at = strrchr(url, '@'), *scheme = strstr(url, "://");
    if (at == NULL) {
        snprintf(out, cap, "%s", url);
    } else {
        int keep = scheme != NULL && scheme < at ? (int)(scheme + 3 - url) : 0;
        snprintf(out, cap, "%.*s***@%s", keep, url, at + 1);
    }
}

int rc_parse_url(const char *url, rc_config_t *cfg, char *err)
{
    memset(cfg, 0, sizeof *cfg);
    char shown[RC_ERR_MAX / 2]; /* the URL as messages show it: its password as "***" */
    rc_mask_url(url, shown, sizeof shown);
    const char *rest;
    if (strncmp(url, "redis://", 8) == 0) {
        rest = url + 8;
    } else if (strncmp(url, "redis-cluster://", 16) == 0) {
        rest = url + 16;
        cfg->cluster = true;
    } else {
        snprintf(err, RC_ERR_MAX,
                 "'%s': expected redis://[[USER]:PASSWORD@]host:port or "
                 "redis-cluster://[[USER]:PASSWORD@]host:port,host:port,...",
                 shown);
        return -1;
    }
    const char *at = strrchr(rest, '@');
    if (at != NULL) {
        if (parse_userinfo(shown, rest, (size_t)(at - rest), cfg, err) != 0) {
            return -1;
        }
        rest = at + 1;
    }
    while (*rest != '\0') {
        const char *end = strchr(rest, ',');
        size_t len = end != NULL ? (size_t)(end - rest) : strlen(rest);
        const char *colon = memchr(rest, ':', len);
        if (colon == NULL || colon == rest || (size_t)(colon - rest) >= sizeof cfg->host[0] ||
            cfg->nseeds == RC_NODES_MAX) {
            snprintf(err, RC_ERR_MAX, "'%s': each node is host:port", shown);
            return -1;
        }
        char *pend = NULL;
        long port = strtol(colon + 1, &pend, 10);
        if (pend != rest + len || port <= 0 || port > 65535) {
            snprintf(err, RC_ERR_MAX, "'%s': bad port in '%.*s'", shown, (int)len, rest);
            return -1;
        }
        memcpy(cfg->host[cfg->nseeds], rest, (size_t)(colon - rest));
        cfg->port[cfg->nseeds++] = (int)port;
        rest += len + (end != NULL ? 1 : 0);
    }
    if (cfg->nseeds == 0 || (!cfg->cluster && cfg->nseeds != 1)) {
        snprintf(err, RC_ERR_MAX, "'%s': %s", shown,
                 cfg->cluster ? "no nodes" : "redis:// takes one host:port");
        return -1;
    }
    return 0;
}

/* ---- nodes ----------------------------------------------------------------------------- */

static void retry_arm(rc_client_t *c);

/* Whether n is one the client needs: the one server, or a cluster node owning a slot (a node
 * gone from the slot map is not waited for). */
static bool node_wanted(const rc_client_t *c, const rc_node_t *n)
{
    if (!c->cfg.cluster) {
        return true;
    }
    int idx = (int)(n - c->nodes);
    bool mapped = false; /* before the first slot map, every node is */
    for (size_t s = 0; s < RC_SLOTS; s++) {
        if (c->slots[s] == idx) {
            return true;
        }
        mapped = mapped || c->slots[s] >= 0;
    }
    return !mapped;
}

/* n's connection is down (why) or up again: told once per change, counted in stats.down; a
 * node down is tried again by the retry timer. */
static void node_state(rc_node_t *n, bool up, const char *why)
{
    rc_client_t *c = n->client;
    if (c->closing) {
        return;
    }
    if (n->down == up) { /* a change */
        n->down = !up;
        atomic_fetch_add_explicit(&c->stats.down, up ? (uint64_t)-1 : 1, memory_order_relaxed);
        if (c->on_state != NULL) {
            c->on_state(c->on_state_arg, (int)(n - c->nodes), up, why);
        }
    }
    if (!up) {
        retry_arm(c);
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    rc_node_t *n = ac->data;
    if (status != REDIS_OK) {
        n->ac = NULL; /* hiredis frees it and fails its callbacks */
        node_state(n, false, ac->errstr[0] != '\0' ? ac->errstr : "cannot connect");
        return;
    }
    if (n->client->cfg.password[0] == '\0') { /* with one, it is up once AUTH is taken */
        n->backoff_ms = 0;
        node_state(n, true, "");
    }
}

/* AUTH's reply: the node is up, or down with Redis's refusal (its connection closed; it is
 * tried again after the backoff, and each refusal is not told again while it stays down). */
static void on_auth(redisAsyncContext *ac, void *r, void *privdata)
{
    rc_node_t *n = privdata;
    redisReply *reply = r;
    if (reply == NULL || n->client->closing) {
        return; /* the connection is going: on_disconnect tells */
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        char why[RC_ERR_MAX];
        snprintf(why, sizeof why, "AUTH refused: %.*s", (int)(reply->len < 160 ? reply->len : 160),
                 reply->str);
        rc_client_t *c = n->client;
        if (n->down && !n->auth_refused && c->on_state != NULL) {
            /* down already (the connection was lost): the refusal is why it stays down, and
             * is told once */
            c->on_state(c->on_state_arg, (int)(n - c->nodes), false, why);
        }
        n->auth_refused = true;
        node_state(n, false, why);
        redisAsyncDisconnect(ac);
        return;
    }
    n->auth_refused = false;
    n->backoff_ms = 0;
    node_state(n, true, "");
}

static void refresh_slots(rc_client_t *c);

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    rc_node_t *n = ac->data;
    n->ac = NULL;
    node_state(n, false, ac->errstr[0] != '\0' ? ac->errstr : "connection lost");
    if (n->client->cfg.cluster) {
        refresh_slots(n->client);
    }
}

/* A connection to n, made now if allowed by the backoff. */
static redisAsyncContext *node_conn(rc_node_t *n)
{
    if (n->ac != NULL) {
        return n->ac;
    }
    rc_client_t *c = n->client;
    uint64_t now_ms = uv_now(c->loop);
    if (c->closing || now_ms < n->retry_at_ms) {
        return NULL;
    }
    n->backoff_ms = n->backoff_ms == 0
                        ? BACKOFF_MIN_MS
                        : (n->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : n->backoff_ms * 2);
    n->retry_at_ms = now_ms + n->backoff_ms;
    redisAsyncContext *ac = redisAsyncConnect(n->host, n->port);
    if (ac == NULL) {
        node_state(n, false, "out of memory");
        return NULL;
    }
    if (ac->err != 0 || uv_glue_attach_batched(ac, c->loop) != REDIS_OK) {
        node_state(n, false, ac->err != 0 ? ac->errstr : "cannot watch the connection");
        redisAsyncFree(ac);
        return NULL;
    }
    rc_reply_pool_attach(c->replies, ac->c.reader);
    ac->data = n;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (n->ever_connected) {
        atomic_fetch_add_explicit(&c->stats.reconnects, 1, memory_order_relaxed);
    }
    bool reconnect = n->ever_connected;
    n->ever_connected = true;
    n->ac = ac;
    if (c->cfg.password[0] != '\0' && c->cfg.user[0] != '\0') {
        redisAsyncCommand(ac, on_auth, n, "AUTH %s %s", c->cfg.user, c->cfg.password);
    } else if (c->cfg.password[0] != '\0') {
        redisAsyncCommand(ac, on_auth, n, "AUTH %s", c->cfg.password);
    }
    if (c->on_connect != NULL) {
        c->on_connect(c->on_connect_arg, (int)(n - c->nodes), reconnect);
    }
    return n->ac; /* NULL if the callback's command found the connection failing */
}

static int node_find(rc_client_t *c, const char *host, size_t host_len, int port)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].port == port && strlen(c->nodes[i].host) == host_len &&
            memcmp(c->nodes[i].host, host, host_len) == 0) {
            return (int)i;
        }
    }
    if (c->nnodes == RC_NODES_MAX || host_len >= sizeof c->nodes[0].host) {
        return -1;
    }
    rc_node_t *n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof *n);
    n->client = c;
    memcpy(n->host, host, host_len);
    n->port = port;
    return (int)c->nnodes++;
}

/* Every node that is down and still wanted is connected to again once its backoff allows,
 * whether commands come or not, so that it is known to be back; a node no longer wanted (gone
 * from the slot map) is not down any more. */
static void on_retry(uv_timer_t *t)
{
    rc_client_t *c = t->data;
    for (size_t i = 0; i < c->nnodes; i++) {
        rc_node_t *n = &c->nodes[i];
        if (!n->down || n->ac != NULL) {
            continue;
        }
        if (!node_wanted(c, n)) {
            node_state(n, true, "");
            continue;
        }
        node_conn(n);
    }
    retry_arm(c);
}

/* Runs on_retry at the next backoff's end of a node down and not being connected to. */
static void retry_arm(rc_client_t *c)
{
    if (c->closing) {
        return;
    }
    uint64_t now_ms = uv_now(c->loop), due = UINT64_MAX;
    for (size_t i = 0; i < c->nnodes; i++) {
        const rc_node_t *n = &c->nodes[i];
        if (n->down && n->ac == NULL && n->retry_at_ms < due) {
            due = n->retry_at_ms;
        }
    }
    if (due != UINT64_MAX) {
        uv_timer_start(&c->retry, on_retry, due > now_ms ? due - now_ms : 0, 0);
    }
}

/* ---- the slot map ---------------------------------------------------------------------- */

static void on_slots(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    rc_client_t *c = privdata;
    redisReply *reply = r;
    c->refreshing = false;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        return;
    }
    for (size_t i = 0; i < reply->elements; i++) {
        redisReply *e = reply->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2) {
            continue;
        }
        redisReply *primary = e->element[2];
        if (primary->element[0]->type != REDIS_REPLY_STRING ||
            primary->element[1]->type != REDIS_REPLY_INTEGER) {
            continue;
        }
        int idx = node_find(c, primary->element[0]->str, primary->element[0]->len,
                            (int)primary->element[1]->integer);
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        for (long long s = lo; idx >= 0 && s <= hi && s < RC_SLOTS; s++) {
            if (s >= 0) {
                c->slots[s] = (int16_t)idx;
            }
        }
    }
}

/* Reloads the slot map from some reachable node (at most every REFRESH_MIN_GAP_MS). */
static void refresh_slots(rc_client_t *c)
{
    uint64_t now_ms = uv_now(c->loop);
    if (c->closing || c->refreshing || now_ms < c->last_refresh_ms + REFRESH_MIN_GAP_MS) {
        return;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        rc_node_t *n = &c->nodes[(c->stats.refreshes + i) % c->nnodes];
        redisAsyncContext *ac = node_conn(n);
        if (ac != NULL && redisAsyncCommand(ac, on_slots, c, "CLUSTER SLOTS") == REDIS_OK) {
            c->refreshing = true;
            c->last_refresh_ms = now_ms;
            atomic_fetch_add_explicit(&c->stats.refreshes, 1, memory_order_relaxed);
            return;
        }
    }
}

/* ---- commands -------------------------------------------------------------------------- */

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);

static void request_release(rc_request_t *req)
{
    if (req->cmd != req->inline_cmd) {
        free(req->cmd);
    }
    freelist_put(&req->client->requests, req);
}

/* A request for a command of len bytes (copied in), from the free list when it can be. */
static rc_request_t *request_new(rc_client_t *c, const char *cmd, size_t len)
{
    rc_request_t *req = freelist_get(&c->requests);
    if (req == NULL) {
        return NULL;
    }
    req->client = c;
    req->cmd = req->inline_cmd;
    if (len > CMD_INLINE && (req->cmd = malloc(len)) == NULL) {
        req->cmd = req->inline_cmd;
        request_release(req);
        return NULL;
    }
    memcpy(req->cmd, cmd, len);
    req->len = len;
    req->redirects = 0;
    return req;
}

static void request_fail(rc_request_t *req, const char *err)
{
    atomic_fetch_add_explicit(&req->client->stats.failures, 1, memory_order_relaxed);
    rc_reply_fn fn = req->fn;
    void *arg = req->arg;
    request_release(req);
    fn(arg, NULL, err);
}

/* Sends req to node idx (after ASKING when asked). Returns 0, or -1 with err filled. */
static int request_send(rc_request_t *req, int idx, bool asking, char *err)
{
    rc_client_t *c = req->client;
    rc_node_t *n = &c->nodes[idx];
    redisAsyncContext *ac = node_conn(n);
    if (ac == NULL) {
        snprintf(err, RC_ERR_MAX, "redis %s:%d is down (%s%sreconnecting)", n->host, n->port,
                 n->auth_refused ? "AUTH refused" : "", n->auth_refused ? "; " : "");
        if (c->cfg.cluster) {
            refresh_slots(c);
        }
        return -1;
    }
    if (asking) {
        redisAsyncCommand(ac, NULL, NULL, "ASKING");
    }
    if (redisAsyncFormattedCommand(ac, on_reply, req, req->cmd, req->len) != REDIS_OK) {
        snprintf(err, RC_ERR_MAX, "redis %s:%d: cannot send", n->host, n->port);
        return -1;
    }
    atomic_fetch_add_explicit(&c->stats.commands, 1, memory_order_relaxed);
    return 0;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the slot and the node. */
static bool parse_redirect(const char *s, size_t len, long *slot, const char **host,
                           size_t *host_len, int *port)
{
    const char *sp1 = memchr(s, ' ', len);
    if (sp1 == NULL) {
        return false;
    }
    const char *sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - s));
    if (sp2 == NULL) {
        return false;
    }
    const char *colon = NULL;
    for (const char *p = s + len; p > sp2; p--) {
        if (p[-1] == ':') {
            colon = p - 1;
            break;
        }
    }
    if (colon == NULL) {
        return false;
    }
    *slot = strtol(sp1 + 1, NULL, 10);
    *host = sp2 + 1;
    *host_len = (size_t)(colon - (sp2 + 1));
    *port = (int)strtol(colon + 1, NULL, 10);
    return *slot >= 0 && *slot<RC_SLOTS && * port> 0;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    rc_request_t *req = privdata;
    rc_client_t *c = req->client;
    redisReply *reply = r;
    char err[RC_ERR_MAX];
    if (reply == NULL) {
        const rc_node_t *n = ac->data;
        snprintf(err, RC_ERR_MAX, "redis %s:%d: %s", n->host, n->port,
                 ac->errstr[0] != '\0' ? ac->errstr : "connection lost");
        if (c->cfg.cluster) {
            refresh_slots(c);
        }
        request_fail(req, err);
        return;
    }
    bool moved = reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "MOVED ", 6) == 0;
    bool ask = reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "ASK ", 4) == 0;
    if (moved || ask) {
        long slot;
        const char *host;
        size_t host_len;
        int port, idx;
        if (!parse_redirect(reply->str, reply->len, &slot, &host, &host_len, &port) ||
            (idx = node_find(c, host, host_len, port)) < 0) {
            request_fail(req, "redis: malformed redirect");
            return;
        }
        if (++req->redirects > RC_REDIRECTS_MAX) {
            request_fail(req, "redis: too many redirects");
            return;
        }
        atomic_fetch_add_explicit(&c->stats.redirects, 1, memory_order_relaxed);
        if (moved) {
            c->slots[slot] = (int16_t)idx;
            refresh_slots(c);
        }
        if (request_send(req, idx, ask, err) != 0) {
            request_fail(req, err);
        }
        return;
    }
    rc_reply_fn fn = req->fn;
    void *arg = req->arg;
    request_release(req);
    fn(arg, reply, NULL);
}

int rc_key_node(const rc_client_t *c, const char *key, size_t key_len)
{
    if (!c->cfg.cluster || key == NULL) {
        return 0;
    }
    unsigned slot = rc_key_slot(key, key_len);
    int owner = c->slots[slot];
    /* unknown: some node, always the same for a slot; a MOVED reply then says where */
    return owner >= 0 ? owner : (int)(slot % c->nnodes);
}

int rc_command_at(rc_client_t *c, int node, const char *cmd, size_t len, rc_reply_fn fn, void *arg)
{
    if (node < 0 || (size_t)node >= c->nnodes) {
        return -1;
    }
    rc_request_t *req = request_new(c, cmd, len);
    if (req == NULL) {
        return -1;
    }
    req->fn = fn;
    req->arg = arg;
    char err[RC_ERR_MAX];
    if (request_send(req, node, false, err) != 0) {
        request_release(req);
        atomic_fetch_add_explicit(&c->stats.failures, 1, memory_order_relaxed);
        return -1;
    }
    return 0;
}

int rc_command(rc_client_t *c, const char *key, size_t key_len, const char *cmd, size_t len,
               rc_reply_fn fn, void *arg)
{
    return rc_command_at(c, rc_key_node(c, key, key_len), cmd, len, fn, arg);
}

bool rc_node_connected(const rc_client_t *c, int node)
{
    return c->nodes[node].ac != NULL;
}

void rc_node_addr(const rc_client_t *c, int node, const char **host, int *port)
{
    *host = c->nodes[node].host;
    *port = c->nodes[node].port;
}

/*
 * Commands queued during one loop turn (every read of the turn is a batch of decisions) are
 * written right after the turn's I/O callbacks, in one write per node, instead of waiting for
 * the next poll to report the socket writable: a loop turn less of latency per decision. The
 * connections are attached batched (uv_glue_attach_batched), so they wait for write readiness
 * only when the socket did not take a whole write: no epoll_ctl per turn.
 */
static void on_flush(uv_check_t *h)
{
    rc_client_t *c = h->data;
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].ac != NULL) {
            uv_glue_flush(c->nodes[i].ac);
        }
    }
}

int rc_create(uv_loop_t *loop, const rc_config_t *cfg, rc_connect_fn connected, void *arg,
              rc_client_t **out, char *err)
{
    rc_client_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, RC_ERR_MAX, "out of memory");
        return -1;
    }
    c->replies = rc_reply_pool_create();
    if (c->replies == NULL) {
        free(c);
        snprintf(err, RC_ERR_MAX, "out of memory");
        return -1;
    }
    c->requests = (freelist_t){.size = sizeof(rc_request_t), .keep = REQUESTS_KEEP};
    c->loop = loop;
    c->cfg = *cfg;
    c->on_connect = connected;
    c->on_connect_arg = arg;
    for (size_t i = 0; i < RC_SLOTS; i++) {
        c->slots[i] = -1;
    }
    for (size_t i = 0; i < cfg->nseeds; i++) {
        node_find(c, cfg->host[i], strlen(cfg->host[i]), cfg->port[i]);
    }
    uv_check_init(loop, &c->flush);
    c->flush.data = c;
    uv_check_start(&c->flush, on_flush);
    uv_timer_init(loop, &c->retry);
    c->retry.data = c;
    *out = c; /* before the first connection, which `connected` is told of */
    if (cfg->cluster) {
        refresh_slots(c);
    }
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    rc_client_t *c = h->data;
    if (--c->closing_handles > 0) {
        return;
    }
    freelist_clear(&c->requests);
    rc_reply_pool_free(c->replies);
    free(c);
}

void rc_free(rc_client_t *c)
{
    if (c == NULL) {
        return;
    }
    c->closing = true;
    uv_check_stop(&c->flush);
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].ac != NULL) {
            redisAsyncContext *ac = c->nodes[i].ac;
            c->nodes[i].ac = NULL;
            ac->data = &c->nodes[i];
            redisAsyncFree(ac); /* fails pending callbacks with a NULL reply */
        }
    }
    uv_timer_stop(&c->retry);
    c->closing_handles = 2;
    uv_close((uv_handle_t *)&c->flush, on_handle_closed);
    uv_close((uv_handle_t *)&c->retry, on_handle_closed); /* the last frees c */
}

bool rc_auth_refused(const rc_client_t *c, int node)
{
    return node >= 0 && (size_t)node < c->nnodes && c->nodes[node].auth_refused;
}

void rc_on_state(rc_client_t *c, rc_state_fn fn, void *arg)
{
    c->on_state = fn;
    c->on_state_arg = arg;
}

const rc_stats_t *rc_stats(const rc_client_t *c)
{
    return &c->stats;
}

bool rc_is_cluster(const rc_client_t *c)
{
    return c->cfg.cluster;
}
