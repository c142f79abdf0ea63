/*
 * server.c - sluiced's event loops and listeners (see server.h): starting the loops and binding
 * their sockets, the once-a-second idle tick (timeouts, the soft output limit, the input cap),
 * and stopping: close the listeners, let every connection write its answers, then end. The
 * connections themselves are in conn.c.
 */
#include "server/server.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/conn.h"
#include "engine/log.h"

#define IDLE_TICK_MS  1000
#define STOP_DRAIN_MS 3000 /* longest a stopping loop waits for its connections to finish */

/* ---- idle timeouts and stopping ------------------------------------------------------------ */

/* Closes c if its output has been above --output-buffer-soft for --output-buffer-soft-time
 * (checked once per idle tick, so up to a tick later). Returns true if it did. */
static bool conn_output_soft_check(conn_t *c, int64_t now_ns)
{
    const server_settings_t *cfg = c->loop->srv->cfg;
    size_t waiting = conn_output_bytes(c);
    if (cfg->output_soft == 0 || waiting <= cfg->output_soft) {
        c->over_soft = false;
        return false;
    }
    if (!c->over_soft) {
        c->over_soft = true;
        c->over_soft_ns = now_ns;
    }
    if (now_ns - c->over_soft_ns < cfg->output_soft_ns) {
        return false;
    }
    atomic_fetch_add_explicit(&c->loop->stats.output_soft_closed, 1, memory_order_relaxed);
    log_info("closing client %s:%d: %zu bytes of replies waiting, over output-buffer-soft (%zu) "
             "for %lld ms",
             c->addr, c->port, waiting, cfg->output_soft,
             (long long)((now_ns - c->over_soft_ns) / 1000000));
    conn_close_now(c);
    return true;
}

static void on_idle_tick(uv_timer_t *t)
{
    loop_t *l = t->data;
    int64_t timeout_ns = l->srv->cfg->idle_timeout_ns;
    int64_t now_ns = (int64_t)uv_now(&l->uv) * 1000000;
    for (conn_t *c = l->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (uv_is_closing((uv_handle_t *)&c->tcp) || conn_output_soft_check(c, now_ns)) {
            continue;
        }
        if (c->writing) { /* a write that moves on is activity; one that is stuck is not */
            size_t queued = uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
            if (queued != c->write_queue_seen) {
                c->write_queue_seen = queued;
                c->last_active_ns = now_ns;
            }
        }
        int64_t idle_ns = now_ns - c->last_active_ns;
        if ((c->lingering && idle_ns > LINGER_MS * 1000000) ||
            (timeout_ns > 0 && idle_ns > timeout_ns)) {
            conn_close_now(c);
        }
    }
    conn_input_check(l);
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h) && h->type != UV_TCP) {
        uv_close(h, NULL);
    }
}

/* Stopping, after the listeners closed: waits (bounded) until every connection is gone (its
 * answers written, including those waiting on Redis), then lets go of the loop. */
static void on_drain_tick(uv_timer_t *t)
{
    loop_t *l = t->data;
    uint64_t waited_ms = uv_now(&l->uv) - l->stop_ms;
    /* leases go back first, while the connections to Redis are up: the loop waits for their
     * answers too */
    unsigned giving_back = engine_worker_stop(l->worker);
    if ((l->conns != NULL || giving_back > 0) && waited_ms < STOP_DRAIN_MS) {
        return;
    }
    /* what is still waiting on Redis now is answered by on_store_error, and written */
    engine_worker_detach(l->worker);
    conn_flush_queued(&l->flush_check);
    for (conn_t *c = l->conns, *next; c != NULL; c = next) {
        next = c->next;
        conn_close_now(c);
    }
    uv_timer_stop(&l->idle_timer);
    uv_close((uv_handle_t *)&l->idle_timer, NULL);
    conn_delays_resolve(l, UINT64_MAX);
    uv_close((uv_handle_t *)&l->delay_timer, NULL);
    uv_close((uv_handle_t *)&l->stop_async, NULL);
    uv_mutex_lock(&l->srv->evict_mu);
    l->evict_open = false;
    uv_mutex_unlock(&l->srv->evict_mu);
    uv_close((uv_handle_t *)&l->evict_async, NULL);
    uv_close((uv_handle_t *)&l->flush_check, NULL);
    uv_close((uv_handle_t *)&l->flush_idle, NULL);
}

static void on_stop(uv_async_t *a)
{
    loop_t *l = a->data;
    for (size_t i = 0; i < l->nlisteners; i++) {
        uv_close((uv_handle_t *)&l->listeners[i], NULL);
    }
    /* Everything already read has been answered or is waiting on Redis; what is left is writing
     * those answers. A connection closes once its answers are out. */
    for (conn_t *c = l->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->proto->stopping != NULL && !c->closing) {
            c->proto->stopping(c);
        }
        c->closing = true;
        if (!c->writing) {
            conn_flush(c); /* closes it, or after the write it starts completes */
        }
    }
    /* replies held back for a delay go now: stopping answers what was read */
    conn_delays_resolve(l, UINT64_MAX);
    uv_timer_stop(&l->delay_timer);
    l->stop_ms = uv_now(&l->uv);
    uv_timer_stop(&l->idle_timer);
    uv_timer_start(&l->idle_timer, on_drain_tick, 0, 5);
}

void server_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

static void loop_thread(void *arg)
{
    loop_t *l = arg;
    sigset_t main_only;
    server_signals(&main_only);
    pthread_sigmask(SIG_BLOCK, &main_only, NULL);
    uv_run(&l->uv, UV_RUN_DEFAULT);
    uv_walk(&l->uv, close_handle, NULL);
    uv_run(&l->uv, UV_RUN_DEFAULT);
    engine_worker_end(l->worker);
    free(l->spare);
    free(l->spare_job);
    free(l->tls_in);
    l->spare = NULL;
}

/* ---- listeners ----------------------------------------------------------------------------- */

/* A listening socket with SO_REUSEPORT, so every loop binds the same address and port. */
static int listen_fd(const char *host, int port, char *err, size_t err_cap)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0) {
        len = sizeof(struct sockaddr_in);
    } else if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0) {
        len = sizeof(struct sockaddr_in6);
    } else {
        snprintf(err, err_cap, "bind address '%s' is not an IPv4 or IPv6 address", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, err_cap, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (ss.ss_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 511) != 0) {
        snprintf(err, err_cap, "cannot listen on %s port %d: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Fails if the port is taken by anyone but us: a probe bind without SO_REUSEPORT. */
static int port_free(const char *host, int port, char *err, size_t err_cap)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len = sizeof(struct sockaddr_in);
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0) {
        if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0) {
            snprintf(err, err_cap, "bind address '%s' is not an IPv4 or IPv6 address", host);
            return -1;
        }
        len = sizeof(struct sockaddr_in6);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, (struct sockaddr *)&ss, len);
    int e = errno;
    close(fd);
    if (rc != 0) {
        snprintf(err, err_cap, "cannot listen on %s port %d: %s", host, port, strerror(e));
        return -1;
    }
    return 0;
}

static int loop_listen(loop_t *l, const char *host, const server_listener_t *sl, char *err,
                       size_t err_cap)
{
    int port = sl->port;
    int fd = listen_fd(host, port, err, err_cap);
    if (fd < 0) {
        return -1;
    }
    uv_tcp_t *t = &l->listeners[l->nlisteners];
    uv_tcp_init(&l->uv, t);
    t->data = l;
    int rc = uv_tcp_open(t, fd);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)t, 511, conn_on_connection);
    }
    if (rc != 0) {
        snprintf(err, err_cap, "listen on %s port %d: %s", host, port, uv_strerror(rc));
        uv_close((uv_handle_t *)t, NULL);
        return -1;
    }
    l->listener_tls[l->nlisteners] = sl->tls;
    l->listener_proto[l->nlisteners++] = sl->proto;
    return 0;
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

/* Undoes a server_start() that failed: closes what the loops opened, frees them. */
static void loops_abandon(server_t *srv, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        loop_t *l = &srv->loops[i];
        engine_worker_detach(l->worker);
        uv_walk(&l->uv, close_any, NULL);
        uv_run(&l->uv, UV_RUN_DEFAULT);
        uv_loop_close(&l->uv);
        pool_clear(&l->pool);
    }
    free(srv->loops);
    srv->loops = NULL;
    srv->nloops = 0;
}

/* Every listener on every bind address, for loop l. */
static int loop_listen_all(loop_t *l, char *err, size_t err_cap)
{
    const server_t *srv = l->srv;
    for (size_t b = 0; b < srv->cfg->nbind; b++) {
        for (size_t k = 0; k < srv->nlisten; k++) {
            if (loop_listen(l, srv->cfg->bind[b], &srv->listen[k], err, err_cap) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

int server_listen(server_t *srv, const protocol_t *proto, int port, bool tls)
{
    if (srv->nlisten == SERVER_PROTOCOLS_MAX) {
        return -1;
    }
    srv->listen[srv->nlisten++] = (server_listener_t){.proto = proto, .port = port, .tls = tls};
    return 0;
}

int server_start(server_t *srv, char *err, size_t err_cap)
{
    server_settings_t *cfg = srv->cfg;
    for (size_t b = 0; b < cfg->nbind; b++) {
        for (size_t k = 0; k < srv->nlisten; k++) {
            if (port_free(cfg->bind[b], srv->listen[k].port, err, err_cap) != 0) {
                return -1;
            }
        }
    }
    srv->nloops = (unsigned)cfg->threads;
    srv->loops = calloc(srv->nloops, sizeof *srv->loops);
    if (srv->loops == NULL) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    uv_mutex_init(&srv->evict_mu);
    for (unsigned i = 0; i < srv->nloops; i++) {
        loop_t *l = &srv->loops[i];
        l->srv = srv;
        l->index = i;
        l->worker = engine_worker(srv->engine, i);
        uv_loop_init(&l->uv);
        if (loop_listen_all(l, err, err_cap) != 0) {
            loops_abandon(srv, i + 1);
            return -1;
        }
        char eerr[ENGINE_ERR_MAX];
        if (engine_worker_attach(l->worker, &l->uv, eerr) != 0) {
            snprintf(err, err_cap, "%s", eerr);
            loops_abandon(srv, i + 1);
            return -1;
        }
        uv_check_init(&l->uv, &l->flush_check);
        l->flush_check.data = l;
        uv_check_start(&l->flush_check, conn_flush_queued);
        uv_unref((uv_handle_t *)&l->flush_check); /* runs while the loop has work, keeps none */
        uv_idle_init(&l->uv, &l->flush_idle);
        l->flush_idle.data = l;
        uv_async_init(&l->uv, &l->stop_async, on_stop);
        l->stop_async.data = l;
        uv_async_init(&l->uv, &l->evict_async, conn_on_evict);
        l->evict_async.data = l;
        l->evict_open = true;
        uv_timer_init(&l->uv, &l->idle_timer);
        l->idle_timer.data = l;
        uv_timer_init(&l->uv, &l->delay_timer);
        l->delay_timer.data = l;
        uv_timer_start(&l->idle_timer, on_idle_tick, IDLE_TICK_MS, IDLE_TICK_MS);
    }
    for (unsigned i = 0; i < srv->nloops; i++) {
        if (uv_thread_create(&srv->loops[i].thread, loop_thread, &srv->loops[i]) != 0) {
            snprintf(err, err_cap, "cannot start thread %u", i);
            return -1;
        }
    }
    return 0;
}

void server_stop(server_t *srv)
{
    atomic_store(&srv->draining, true);
    atomic_store(&srv->stopping, true);
    for (unsigned i = 0; i < srv->nloops; i++) {
        uv_async_send(&srv->loops[i].stop_async);
    }
    for (unsigned i = 0; i < srv->nloops; i++) {
        uv_thread_join(&srv->loops[i].thread);
        uv_loop_close(&srv->loops[i].uv);
        pool_clear(&srv->loops[i].pool);
    }
    free(srv->loops);
    srv->loops = NULL;
    uv_mutex_destroy(&srv->evict_mu);
}
