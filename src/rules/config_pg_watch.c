/*
 * config_pg_watch.c - the PostgreSQL config store's watch (config_store_watch): a thread with a
 * connection of its own that LISTENs on the channel every change NOTIFYs (PG_CHANNEL), so each
 * sluiced hears of a change the moment it is committed, and that tells whether the database can
 * be reached.
 *
 * The thread waits in poll() on its connection and on a pipe that stops it; nothing else ever
 * waits for it. Each notification (or batch of them) calls changed(). An idle connection is
 * pinged every PG_WATCH_PING_MS, with an answer due within PG_WATCH_PING_DEADLINE_MS, so a
 * database that stops answering without closing the connection (a host gone, a network cut) is
 * found within a few seconds, as one that closes it is found at once. A lost connection is made
 * again at once; when that fails the database is unreachable: state(false, why), the handle the
 * watch came from fails its calls at once instead of trying, and the thread tries again with
 * backoff and jitter (config_pg_conn.c's). When it connects again: state(true), the handle may
 * try at once, and changed(), since notifications sent meanwhile were lost.
 */
#include "rules/config_pg_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define PG_WATCH_PING_MS          1000 /* an idle connection is pinged this often */
#define PG_WATCH_PING_DEADLINE_MS 2000 /* and must answer within this */
#define PG_WATCH_LISTEN_MS        5000 /* LISTEN must be answered within this */

typedef struct pg_watch {
    config_watch_t base;               /* first: its stop */
    pthread_t thread;                  /* the watch's own */
    int wake[2];                       /* a pipe: a byte in it stops the thread */
    char *conninfo;                    /* the store's URL or keywords, copied */
    char where[CONFIG_STORE_NAME_MAX]; /* for messages */
    pg_store_t *store;                 /* whose up_epoch and watch_down the thread sets */
    config_watch_fns_t fns;
    void *arg;
    uint64_t rng; /* jitter's generator state */
} pg_watch_t;

/* ---- one statement, waited for --------------------------------------------------------------- */

/* Whether any notification came: each one is consumed. */
static bool drain_notifies(PGconn *c)
{
    bool any = false;
    PGnotify *n;
    for (int i = 0; i < 100000 && (n = PQnotifies(c)) != NULL; i++) {
        PQfreemem(n);
        any = true;
    }
    return any;
}

/* Sends sql (no values) and waits for its end within timeout_ms: 0, 1 stopped, or -1 with why.
 * Notifications that come meanwhile call changed(). */
static int run_waited(pg_watch_t *w, PGconn *c, const char *sql, int timeout_ms, char *why,
                      size_t cap)
{
    int64_t deadline_ns = sl_now_ns() + timeout_ms * SL_NS_PER_MS;
    if (!PQsendQuery(c, sql))
        goto lost;
    int rc;
    while ((rc = PQflush(c)) == 1) {
        int ready = pg_wait(c, POLLOUT | POLLIN, deadline_ns, w->wake[0], NULL);
        if (ready == 2)
            return 1;
        if (ready != 1 || !PQconsumeInput(c))
            goto lost;
    }
    bool ok = rc == 0;
    for (int results = 0; ok && results < 100; results++) {
        while (PQisBusy(c)) {
            int ready = pg_wait(c, POLLIN, deadline_ns, w->wake[0], NULL);
            if (ready == 2)
                return 1;
            if (ready == 0) {
                snprintf(why, cap, "no answer within %d ms", timeout_ms);
                return -1;
            }
            if (ready < 0 || !PQconsumeInput(c))
                goto lost;
        }
        PGresult *res = PQgetResult(c);
        if (res == NULL)
            break;
        ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
        PQclear(res);
    }
    if (drain_notifies(c))
        w->fns.changed(w->arg);
    if (ok)
        return 0;
lost:
    pg_one_line(why, cap, PQerrorMessage(c));
    if (why[0] == '\0')
        snprintf(why, cap, "the connection was lost");
    return -1;
}

/* ---- the thread ---------------------------------------------------------------------------- */

/* Listens on a connection until it is lost (-1, why) or the watch stops (0). */
static int listen_on(pg_watch_t *w, PGconn *c, char *why, size_t cap)
{
    int rc = run_waited(w, c, "LISTEN " PG_CHANNEL, PG_WATCH_LISTEN_MS, why, cap);
    if (rc != 0)
        return rc > 0 ? 0 : -1;
    for (;;) {
        int ready =
            pg_wait(c, POLLIN, sl_now_ns() + PG_WATCH_PING_MS * SL_NS_PER_MS, w->wake[0], NULL);
        if (ready == 2)
            return 0;
        if (ready == 0) { /* idle: is it still there? */
            rc = run_waited(w, c, "SELECT 1", PG_WATCH_PING_DEADLINE_MS, why, cap);
            if (rc != 0)
                return rc > 0 ? 0 : -1;
            continue;
        }
        if (ready < 0 || !PQconsumeInput(c)) {
            pg_one_line(why, cap, PQerrorMessage(c));
            return -1;
        }
        if (drain_notifies(c))
            w->fns.changed(w->arg);
    }
}

/* Sleeps ns or until stopped (true). */
static bool sleep_or_stop(pg_watch_t *w, int64_t ns)
{
    struct pollfd p = {.fd = w->wake[0], .events = POLLIN};
    int64_t deadline_ns = sl_now_ns() + ns;
    for (int i = 0; i < 1000; i++) {
        int64_t left_ns = deadline_ns - sl_now_ns();
        if (left_ns <= 0)
            return false;
        int rc = poll(&p, 1, (int)((left_ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS));
        if (rc > 0)
            return true;
        if (rc < 0 && errno != EINTR)
            return false;
    }
    return false;
}

/* The database is unreachable (why): said once per change. */
static void went_down(pg_watch_t *w, bool *up, const char *why)
{
    if (!*up)
        return;
    *up = false;
    atomic_store(&w->store->watch_down, true);
    w->fns.state(w->arg, false, why);
}

/* Connected: reachable again if it was not, and the version is to be read again. */
static void came_up(pg_watch_t *w, bool *up)
{
    atomic_fetch_add(&w->store->up_epoch, 1);
    atomic_store(&w->store->watch_down, false);
    if (!*up) {
        *up = true;
        w->fns.state(w->arg, true, "");
    }
    w->fns.changed(w->arg);
}

static void *watch_main(void *arg)
{
    pg_watch_t *w = arg;
    bool up = true; /* the store's open reached it */
    int64_t backoff_ns = 0;
    char why[CONFIG_STORE_ERR_MAX];
    for (;;) {
        PGconn *c = pg_dial(w->conninfo, w->wake[0], why, sizeof(why));
        if (c == NULL && strcmp(why, "stopped") == 0)
            break;
        if (c == NULL) {
            char line[CONFIG_STORE_ERR_MAX + 64];
            snprintf(line, sizeof(line), "cannot connect to %.100s: %.190s", w->where, why);
            went_down(w, &up, line);
            backoff_ns = pg_backoff_next(backoff_ns);
            if (sleep_or_stop(w, pg_jittered(&w->rng, backoff_ns)))
                break;
            continue;
        }
        backoff_ns = 0;
        came_up(w, &up);
        /* until lost: the next dial is at once, and only if it fails is the store down */
        int rc = listen_on(w, c, why, sizeof(why));
        PQfinish(c);
        if (rc == 0)
            break;
    }
    return NULL;
}

static void watch_stop(config_watch_t *base)
{
    pg_watch_t *w = (pg_watch_t *)base;
    ssize_t wrote;
    do {
        wrote = write(w->wake[1], "x", 1);
    } while (wrote < 0 && errno == EINTR);
    pthread_join(w->thread, NULL);
    close(w->wake[0]);
    close(w->wake[1]);
    free(w->conninfo);
    free(w);
}

int pg_watch(config_store_t *base, const config_watch_fns_t *fns, void *arg, config_watch_t **out,
             char *err)
{
    pg_store_t *s = (pg_store_t *)base;
    pg_watch_t *w = calloc(1, sizeof(*w));
    if (w == NULL || (w->conninfo = strdup(s->conninfo)) == NULL) {
        free(w);
        return config_fail(err, "config store: out of memory (starting its watch)");
    }
    w->base.stop = watch_stop;
    snprintf(w->where, sizeof(w->where), "%s", s->where);
    w->store = s;
    w->fns = *fns;
    w->arg = arg;
    w->rng = ((uint64_t)sl_now_ns() ^ (uint64_t)(uintptr_t)w) | 1;
    if (pipe(w->wake) != 0) {
        config_fail(err, "config store: cannot start its watch: %s", strerror(errno));
        free(w->conninfo);
        free(w);
        return -1;
    }
    fcntl(w->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(w->wake[1], F_SETFD, FD_CLOEXEC);
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    if (rc != 0) {
        config_fail(err, "config store: cannot start its watch: %s", strerror(rc));
        close(w->wake[0]);
        close(w->wake[1]);
        free(w->conninfo);
        free(w);
        return -1;
    }
    *out = &w->base;
    return 0;
}
