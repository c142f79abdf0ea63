/*
 * config_pg_conn.c - the PostgreSQL config store's connection: connecting with a deadline, and
 * with backoff and jitter while the database is unreachable; statements sent and waited for
 * with a deadline; transactions; messages (see config_pg_impl.h).
 *
 * The connection is libpq's in non-blocking mode: PQconnectStartParams/PQconnectPoll and
 * PQsendQueryParams/PQconsumeInput, each wait a poll() on the connection's socket bounded by
 * what is left of the deadline. A connection that fails (or times out) is dropped; the next call
 * connects again, at once the first time, then no sooner than the backoff (PG_BACKOFF_MIN_MS,
 * doubling to PG_BACKOFF_MAX_MS, each wait drawn between half and one and a half of it, so
 * many sluiced do not all knock at the same moment). In between, calls fail at once with the
 * reason the last attempt failed: a caller is never held by a database that is down.
 */
#include "rules/config_pg_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/sluice.h"

#define PG_PAGE_ROWS     1000    /* overrides read per statement when walking them */
#define PG_SQLSTATE_LOCK "55P03" /* lock_not_available: lock_timeout passed */

/* ---- messages ------------------------------------------------------------------------------ */

/* The first line of libpq's message (what follows is a hint: "Is the server running on that
 * host...?"), tabs as spaces, none at the ends. */
void pg_one_line(char *out, size_t cap, const char *msg)
{
    size_t n = 0;
    bool space = false;
    const char *p = msg != NULL ? msg : "";
    while (*p == '\n' || *p == ' ')
        p++;
    for (; *p != '\0' && *p != '\n' && n + 1 < cap; p++) {
        bool blank = *p == '\t' || *p == '\r' || *p == ' ';
        if (blank) {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < cap)
            out[n++] = ' ';
        space = false;
        out[n++] = *p;
    }
    out[n] = '\0';
}

/* "postgresql: <message> (<doing>)" from a result, or from the connection when res is NULL;
 * notes a lock or conflict (config_store_busy). Returns -1. */
static int fail_pg(pg_store_t *s, const PGresult *res, const char *doing, char *err)
{
    const char *msg = NULL;
    const char *state = NULL;
    if (res != NULL) {
        msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    }
    if (msg == NULL)
        msg = s->conn != NULL ? PQerrorMessage(s->conn) : "no connection";
    char line[CONFIG_STORE_ERR_MAX];
    pg_one_line(line, sizeof(line), msg);
    s->busy = state != NULL && (strcmp(state, PG_SQLSTATE_LOCK) == 0 ||
                                strncmp(state, "40", 2) == 0); /* serialization, deadlock */
    return config_fail(err, "postgresql: %s (%s)", line, doing);
}

void pg_describe_conninfo(pg_store_t *s)
{
    const char *host = NULL, *port = NULL, *db = NULL, *user = NULL;
    PQconninfoOption *opts = PQconninfoParse(s->conninfo, NULL);
    if (s->conn != NULL) {
        host = PQhost(s->conn);
        port = PQport(s->conn);
        db = PQdb(s->conn);
        user = PQuser(s->conn);
    } else {
        for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++) {
            const char **slot = strcmp(o->keyword, "host") == 0     ? &host
                                : strcmp(o->keyword, "port") == 0   ? &port
                                : strcmp(o->keyword, "dbname") == 0 ? &db
                                : strcmp(o->keyword, "user") == 0   ? &user
                                                                    : NULL;
            if (slot != NULL && o->val != NULL && o->val[0] != '\0')
                *slot = o->val;
        }
    }
    snprintf(s->where, sizeof(s->where), "postgresql://%s%s%s%s%s/%s", user ? user : "",
             user ? "@" : "", host && host[0] != '/' ? host : "", port ? ":" : "", port ? port : "",
             db ? db : "");
    PQconninfoFree(opts);
}

/* ---- waiting ------------------------------------------------------------------------------- */

#define PG_WAIT_SLICE_MS 100 /* how often a wait looks at its abort flag */

int pg_wait(PGconn *c, short events, int64_t deadline_ns, int stop_fd, _Atomic bool *abort)
{
    int fd = PQsocket(c);
    if (fd < 0)
        return -1;
    for (int tries = 0; tries < 100000; tries++) {
        if (abort != NULL && atomic_load(abort))
            return 2;
        int64_t left_ns = deadline_ns - sl_now_ns();
        if (left_ns <= 0)
            return 0;
        int64_t ms = (left_ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = stop_fd, .events = POLLIN}};
        int rc = poll(p, stop_fd >= 0 ? 2 : 1,
                      (int)(abort != NULL && ms > PG_WAIT_SLICE_MS ? PG_WAIT_SLICE_MS : ms));
        if (rc > 0 && stop_fd >= 0 && p[1].revents != 0)
            return 2;
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
    return -1;
}

/* ---- connecting ---------------------------------------------------------------------------- */

int64_t pg_jittered(uint64_t *rng, int64_t backoff_ns)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return backoff_ns / 2 + (int64_t)(*rng % (uint64_t)(backoff_ns > 0 ? backoff_ns : 1));
}

int64_t pg_backoff_next(int64_t backoff_ns)
{
    int64_t max_ns = PG_BACKOFF_MAX_MS * SL_NS_PER_MS;
    return backoff_ns == 0            ? PG_BACKOFF_MIN_MS * SL_NS_PER_MS
           : backoff_ns >= max_ns / 2 ? max_ns
                                      : backoff_ns * 2;
}

/* The attempt failed with `why`: the next one waits for the backoff (or for the watch to
 * connect). Returns -1 with err. */
static int connect_failed(pg_store_t *s, const char *why, const char *doing, char *err)
{
    snprintf(s->down, sizeof(s->down), "%s", why);
    s->backoff_ns = pg_backoff_next(s->backoff_ns);
    s->retry_at_ns = sl_now_ns() + pg_jittered(&s->rng, s->backoff_ns);
    return config_fail(err, "postgresql: cannot connect to %s: %s (%s)", s->where, s->down, doing);
}

/* Runs PQconnectPoll to its end within the deadline. NULL on success, else why not (in why). */
static const char *connect_poll(PGconn *c, int stop_fd, char *why, size_t cap)
{
    int64_t deadline_ns = sl_now_ns() + PG_CONNECT_TIMEOUT_MS * SL_NS_PER_MS;
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    for (int steps = 0; steps < 10000 && st != PGRES_POLLING_OK; steps++) {
        if (st == PGRES_POLLING_FAILED)
            break;
        short events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
        int rc = pg_wait(c, events, deadline_ns, stop_fd, NULL);
        if (rc == 0 || rc == 2) {
            if (rc == 0)
                snprintf(why, cap, "no answer within %d ms", PG_CONNECT_TIMEOUT_MS);
            else
                snprintf(why, cap, "stopped");
            return why;
        }
        if (rc < 0)
            break;
        st = PQconnectPoll(c);
    }
    if (st == PGRES_POLLING_OK)
        return NULL;
    pg_one_line(why, cap, PQerrorMessage(c));
    return why;
}

/* libpq prints the server's notices (and the FATAL of a connection the server ends) on stderr
 * unless told otherwise: a connection's failure reaches sluiced as an error of the call. */
static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

PGconn *pg_dial(const char *conninfo, int stop_fd, char *why, size_t cap)
{
    /* ours first: the URL's own settings override them (keepalives find a host that vanished
     * without a word); the encoding last: always UTF-8 */
    const char *keys[] = {"fallback_application_name",
                          "keepalives_idle",
                          "keepalives_interval",
                          "keepalives_count",
                          "dbname",
                          "client_encoding",
                          NULL};
    const char *vals[] = {"sluiced", "5", "2", "2", conninfo, "UTF8", NULL};
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    if (c == NULL) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    const char *failed = NULL;
    if (PQstatus(c) == CONNECTION_BAD) {
        pg_one_line(why, cap, PQerrorMessage(c));
        failed = why;
    } else {
        failed = connect_poll(c, stop_fd, why, cap);
    }
    if (failed == NULL)
        PQsetNoticeProcessor(c, quiet, NULL);
    if (failed == NULL && PQsetnonblocking(c, 1) != 0) {
        pg_one_line(why, cap, PQerrorMessage(c));
        failed = why;
    }
    if (failed != NULL) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Sets the connection's statement and lock timeouts. */
static int set_timeouts(pg_store_t *s, const char *doing, char *err)
{
    char stmt_ms[16], lock_ms[16];
    snprintf(stmt_ms, sizeof(stmt_ms), "%d", PG_STATEMENT_TIMEOUT_MS);
    snprintf(lock_ms, sizeof(lock_ms), "%d", s->lock_timeout_ms);
    pg_param_t p[] = {PG_TEXT(stmt_ms), PG_TEXT(lock_ms)};
    return pg_run(s,
                  "SELECT set_config('statement_timeout', $1, false),"
                  " set_config('lock_timeout', $2, false)",
                  2, p, NULL, doing, err);
}

/* Whether to fail at once rather than try: the watch finds the database unreachable, or the
 * last attempt failed and its backoff has not passed (unless the watch connected since). */
static bool wait_for_backoff(pg_store_t *s)
{
    if (atomic_load(&s->watch_down))
        return true;
    return s->down[0] != '\0' && sl_now_ns() < s->retry_at_ns &&
           atomic_load(&s->up_epoch) == s->failed_epoch;
}

int pg_connect(pg_store_t *s, const char *doing, char *err)
{
    if (s->conn != NULL && !atomic_load(&s->watch_down))
        return 0;
    pg_disconnect(s);
    if (wait_for_backoff(s))
        return config_fail(err, "postgresql: cannot connect to %s: %s (%s)", s->where,
                           s->down[0] != '\0' ? s->down : "the database is unreachable", doing);
    s->failed_epoch = atomic_load(&s->up_epoch);
    char why[CONFIG_STORE_ERR_MAX];
    PGconn *c = pg_dial(s->conninfo, -1, why, sizeof(why));
    if (c == NULL)
        return connect_failed(s, why, doing, err);
    s->conn = c;
    s->in_tx = false;
    if (set_timeouts(s, doing, err) != 0) {
        pg_disconnect(s);
        return -1;
    }
    s->down[0] = '\0';
    s->backoff_ns = 0;
    return 0;
}

void pg_disconnect(pg_store_t *s)
{
    PQfinish(s->conn);
    s->conn = NULL;
    s->in_tx = false;
}

/* ---- statements ---------------------------------------------------------------------------- */

/* Sends the statement and flushes it within the deadline. 0, or -1 (the connection's error). */
static int send_query(PGconn *c, const char *sql, int n, const pg_param_t *params,
                      int64_t deadline_ns, _Atomic bool *abort)
{
    const char *values[8];
    int lengths[8], formats[8];
    if (n > 8)
        return -1;
    for (int i = 0; i < n; i++) {
        values[i] = params[i].value;
        lengths[i] = params[i].len;
        formats[i] = params[i].binary ? 1 : 0;
    }
    if (!PQsendQueryParams(c, sql, n, NULL, values, lengths, formats, 1))
        return -1;
    int rc;
    while ((rc = PQflush(c)) == 1) {
        if (pg_wait(c, POLLOUT | POLLIN, deadline_ns, -1, abort) != 1 || !PQconsumeInput(c))
            return -1;
    }
    return rc == 0 ? 0 : -1;
}

/* Waits for the statement's results; returns the last (NULL with *timed_out, or a connection
 * error). */
static PGresult *read_results(PGconn *c, int64_t deadline_ns, _Atomic bool *abort, bool *timed_out)
{
    PGresult *last = NULL;
    for (int results = 0; results < 1000; results++) {
        while (PQisBusy(c)) {
            int rc = pg_wait(c, POLLIN, deadline_ns, -1, abort);
            if (rc == 0 || rc == 2)
                *timed_out = true;
            if (rc != 1 || !PQconsumeInput(c)) {
                PQclear(last);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(c);
        if (r == NULL)
            break;
        PQclear(last);
        last = r;
    }
    return last;
}

/* One attempt: the result on success; NULL with err, *lost set when the connection is gone. */
static PGresult *exec_once(pg_store_t *s, const char *sql, int n, const pg_param_t *params,
                           const char *doing, char *err, bool *lost)
{
    /* a little longer than the server's statement_timeout, which should answer first */
    int64_t deadline_ns = sl_now_ns() + (PG_STATEMENT_TIMEOUT_MS + 1000) * SL_NS_PER_MS;
    bool timed_out = false;
    PGresult *res = NULL;
    if (send_query(s->conn, sql, n, params, deadline_ns, &s->watch_down) == 0)
        res = read_results(s->conn, deadline_ns, &s->watch_down, &timed_out);
    ExecStatusType st = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return res;
    *lost = timed_out || PQstatus(s->conn) == CONNECTION_BAD;
    if (timed_out && atomic_load(&s->watch_down))
        config_fail(err, "postgresql: %s became unreachable while waiting for an answer (%s)",
                    s->where, doing);
    else if (timed_out)
        config_fail(err, "postgresql: %s gave no answer within %d ms (%s)", s->where,
                    PG_STATEMENT_TIMEOUT_MS + 1000, doing);
    else
        fail_pg(s, res, doing, err);
    PQclear(res);
    if (*lost)
        pg_disconnect(s); /* a late answer must never be taken for the next statement's */
    return NULL;
}

PGresult *pg_exec(pg_store_t *s, const char *sql, int n, const pg_param_t *params, bool retry,
                  const char *doing, char *err)
{
    s->busy = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (pg_connect(s, doing, err) != 0)
            return NULL;
        bool lost = false, had_tx = s->in_tx;
        PGresult *res = exec_once(s, sql, n, params, doing, err, &lost);
        if (res != NULL || !lost || !retry || had_tx)
            return res;
        s->down[0] = '\0'; /* it was up a moment ago: try at once */
    }
    return NULL;
}

int pg_run(pg_store_t *s, const char *sql, int n, const pg_param_t *params, long *rows,
           const char *doing, char *err)
{
    PGresult *res = pg_exec(s, sql, n, params, false, doing, err);
    if (res == NULL)
        return -1;
    if (rows != NULL)
        *rows = strtol(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return 0;
}

int64_t pg_int8(const PGresult *res, int row, int col)
{
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, col);
    if (PQgetlength(res, row, col) != 8)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* ---- transactions -------------------------------------------------------------------------- */

int pg_tx_begin(pg_store_t *s, bool write, int64_t *version, const char *doing, char *err)
{
    PGresult *res = pg_exec(s, "BEGIN", 0, NULL, true, doing, err);
    if (res == NULL)
        return -1;
    PQclear(res);
    s->in_tx = true;
    if (!write)
        return 0;
    res = pg_exec(s, "SELECT version FROM sluice_meta WHERE id = 1 FOR UPDATE", 0, NULL, false,
                  doing, err);
    if (res == NULL || PQntuples(res) != 1) {
        if (res != NULL)
            config_fail(err, "postgresql: sluice_meta has no version row (%s)", doing);
        PQclear(res);
        pg_tx_rollback(s);
        return -1;
    }
    if (version != NULL)
        *version = pg_int8(res, 0, 0);
    PQclear(res);
    return 0;
}

void pg_tx_rollback(pg_store_t *s)
{
    if (s->conn == NULL || !s->in_tx)
        return;
    bool busy = s->busy; /* the failure's, not the rollback's */
    char ignored[CONFIG_STORE_ERR_MAX];
    pg_run(s, "ROLLBACK", 0, NULL, NULL, "rolling back", ignored);
    s->in_tx = false;
    s->busy = busy;
}

/* COMMIT; the transaction is over either way. */
static int tx_commit(pg_store_t *s, const char *doing, char *err)
{
    int rc = pg_run(s, "COMMIT", 0, NULL, NULL, doing, err);
    s->in_tx = false;
    return rc;
}

int pg_tx_finish(pg_store_t *s, bool changed, int64_t locked_version, int64_t *version,
                 const char *doing, char *err)
{
    int64_t v = locked_version;
    if (changed) {
        PGresult *res = pg_exec(s,
                                "UPDATE sluice_meta SET version = version + 1 WHERE id = 1 "
                                "RETURNING version",
                                0, NULL, false, doing, err);
        if (res == NULL || PQntuples(res) != 1) {
            PQclear(res);
            pg_tx_rollback(s);
            return -1;
        }
        v = pg_int8(res, 0, 0);
        PQclear(res);
        char text[24];
        snprintf(text, sizeof(text), "%lld", (long long)v);
        pg_param_t p[] = {PG_TEXT(PG_CHANNEL), PG_TEXT(text)};
        if (pg_run(s, "SELECT pg_notify($1, $2)", 2, p, NULL, doing, err) != 0) {
            pg_tx_rollback(s);
            return -1;
        }
    }
    if (tx_commit(s, doing, err) != 0)
        return -1;
    if (version != NULL)
        *version = v;
    return 0;
}

/* ---- what an import and a single change share ---------------------------------------------- */

int pg_delete_rule(pg_store_t *s, const char *name, bool *found, const char *doing, char *err)
{
    long rows = 0;
    pg_param_t p[] = {PG_TEXT(name)};
    if (pg_run(s, "DELETE FROM sluice_rules WHERE name = $1", 1, p, &rows, doing, err) != 0)
        return -1;
    *found = rows > 0;
    if (!*found)
        return 0;
    return pg_run(s, "DELETE FROM sluice_overrides WHERE rule = $1", 1, p, NULL, doing, err);
}

/* Calls fn for each row of one page; *stopped when fn asked to stop. Keeps the last key in
 * *last (malloc'ed). Returns the rows, or -1 when out of memory. */
static int page_rows(const PGresult *res, config_override_fn fn, void *arg, bool *stopped,
                     char **last, size_t *last_len)
{
    int rows = PQntuples(res);
    for (int i = 0; i < rows && !*stopped; i++) {
        const char *key = PQgetvalue(res, i, 0);
        size_t key_len = (size_t)PQgetlength(res, i, 0);
        *stopped = fn(arg, key, key_len, PQgetvalue(res, i, 1)) != 0;
    }
    if (rows == 0)
        return 0;
    size_t len = (size_t)PQgetlength(res, rows - 1, 0);
    char *copy = realloc(*last, len ? len : 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, PQgetvalue(res, rows - 1, 0), len);
    *last = copy;
    *last_len = len;
    return rows;
}

int pg_foreach_override(pg_store_t *s, const char *rule, const void *after, size_t after_len,
                        size_t limit, config_override_fn fn, void *arg, const char *doing,
                        char *err)
{
    char *last = NULL;
    size_t last_len = after_len, seen = 0;
    bool from = after != NULL, stopped = false;
    if (from && (last = malloc(after_len ? after_len : 1)) == NULL)
        return config_fail(err, "postgresql: out of memory (%s)", doing);
    if (from)
        memcpy(last, after, after_len);
    int rc = 0;
    for (int pages = 0; rc == 0 && !stopped && pages < INT32_MAX; pages++) {
        size_t want = limit != 0 && limit - seen < PG_PAGE_ROWS ? limit - seen : PG_PAGE_ROWS;
        char lim[24];
        snprintf(lim, sizeof(lim), "%zu", want);
        pg_param_t p[] = {PG_TEXT(rule), PG_TEXT(lim), PG_BYTES(last, last_len)};
        PGresult *res = pg_exec(
            s,
            from ? "SELECT key, json FROM sluice_overrides WHERE rule = $1 AND key > $3 "
                   "ORDER BY key LIMIT $2"
                 : "SELECT key, json FROM sluice_overrides WHERE rule = $1 ORDER BY key LIMIT $2",
            from ? 3 : 2, p, !s->in_tx, doing, err);
        if (res == NULL) {
            rc = -1;
            break;
        }
        int rows = page_rows(res, fn, arg, &stopped, &last, &last_len);
        PQclear(res);
        if (rows < 0)
            rc = config_fail(err, "postgresql: out of memory (%s)", doing);
        seen += rows > 0 ? (size_t)rows : 0;
        if ((size_t)rows < want || (limit != 0 && seen >= limit))
            break;
        from = true;
    }
    free(last);
    return rc;
}
