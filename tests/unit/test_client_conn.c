/*
 * test_client_conn.c - libsluice-client over real sockets against a scripted fake server (a
 * thread on a loopback port that parses requests with the RESP codec, logs them and answers
 * from a script), so the client's behaviour is checked without sluiced: what goes on the wire,
 * the cache sparing round trips (the fake server's log does not grow), errors as the server
 * sent them, AUTH, timeouts and reconnecting, and the async client's ordering, deferred cache
 * answers, immediate failures and handle lifetime (ASan reports a leak or a use after free).
 *
 * Script entries are raw RESP replies, or "<close>" (close the connection without answering)
 * or "<silent>" (answer nothing). A request beyond the script gets "-ERR unscripted".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "proto/resp.h"
#include "sluice/client.h"

#define MS         INT64_C(1000000) /* ns */
#define SCRIPT_MAX 32
#define LOG_MAX    32

#define ALLOWED_9 "*5\r\n:1\r\n:10\r\n:9\r\n:0\r\n:100\r\n"
#define DENIED_1S "*5\r\n:0\r\n:10\r\n:0\r\n:1000\r\n:5000\r\n"
#define SETTLED_8 "*5\r\n:1\r\n:10\r\n:8\r\n:0\r\n:100\r\n"     /* room after a settle */
#define IN_DEBT   "*5\r\n:0\r\n:10\r\n:0\r\n:2000\r\n:9000\r\n" /* a settle past the limit */

/* ---- the fake server --------------------------------------------------------------------- */

typedef struct fake {
    int listen_fd;
    int port;
    pthread_t thread;
    pthread_mutex_t mu;
    const char *script[SCRIPT_MAX]; /* replies, in order */
    int nscript;
    int next;               /* next script entry */
    char log[LOG_MAX][256]; /* requests, arguments joined by ' ' */
    int nlog;
    int accepts; /* connections accepted */
    volatile int stop;
} fake_t;

static fake_t fake;

static const char *next_reply(int argc, const resp_arg_t *argv)
{
    pthread_mutex_lock(&fake.mu);
    if (fake.nlog < LOG_MAX) {
        char *line = fake.log[fake.nlog++];
        line[0] = '\0';
        for (int i = 0; i < argc; i++) {
            size_t used = strlen(line);
            snprintf(line + used, 256 - used, "%s%.*s", i ? " " : "", (int)argv[i].len,
                     argv[i].ptr);
        }
    }
    const char *r = fake.next < fake.nscript ? fake.script[fake.next++] : "-ERR unscripted\r\n";
    pthread_mutex_unlock(&fake.mu);
    return r;
}

/* Serves one connection until the peer closes it, a "<close>" or stop. */
static void serve(int fd)
{
    char buf[8192];
    size_t len = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (fake.stop)
            return;
        if (poll(&p, 1, 20) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n <= 0)
            return;
        len += (size_t)n;
        for (;;) {
            resp_arg_t argv[16];
            size_t argc;
            char err[RESP_ERR_MAX];
            long used = resp_parse(buf, len, NULL, argv, 16, &argc, NULL, err);
            if (used <= 0)
                break;
            const char *reply = next_reply((int)argc, argv);
            memmove(buf, buf + used, len - (size_t)used);
            len -= (size_t)used;
            if (strcmp(reply, "<close>") == 0)
                return;
            if (strcmp(reply, "<silent>") != 0 && write(fd, reply, strlen(reply)) < 0)
                return;
        }
    }
}

static void *fake_main(void *unused)
{
    while (!fake.stop) {
        struct pollfd p = {fake.listen_fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(fake.listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&fake.mu);
        fake.accepts++;
        pthread_mutex_unlock(&fake.mu);
        serve(fd);
        close(fd);
    }
    return NULL;
}

/* A socket bound to a free loopback port; listening when `listen_too`. Returns the fd. */
static int bound_socket(int *port, int listen_too)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t alen = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    if (listen_too)
        assert_int_equal(listen(fd, 8), 0);
    return fd;
}

static int fake_start(void **unused)
{
    memset(&fake, 0, sizeof fake);
    pthread_mutex_init(&fake.mu, NULL);
    fake.listen_fd = bound_socket(&fake.port, 1);
    assert_int_equal(pthread_create(&fake.thread, NULL, fake_main, NULL), 0);
    return 0;
}

static int fake_stop(void **unused)
{
    fake.stop = 1;
    pthread_join(fake.thread, NULL);
    close(fake.listen_fd);
    pthread_mutex_destroy(&fake.mu);
    return 0;
}

/* Appends replies to the script. */
static void script(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    pthread_mutex_lock(&fake.mu);
    for (int i = 0; i < n; i++)
        fake.script[fake.nscript++] = va_arg(ap, const char *);
    pthread_mutex_unlock(&fake.mu);
    va_end(ap);
}

static int nlog(void)
{
    pthread_mutex_lock(&fake.mu);
    int n = fake.nlog;
    pthread_mutex_unlock(&fake.mu);
    return n;
}

static void expect_log(int i, const char *want)
{
    pthread_mutex_lock(&fake.mu);
    char got[256];
    snprintf(got, sizeof got, "%s", i < fake.nlog ? fake.log[i] : "(none)");
    pthread_mutex_unlock(&fake.mu);
    assert_string_equal(got, want);
}

typedef struct fake_clock {
    int64_t now_ns;
} fake_clock_t;

static int64_t fake_now(void *arg)
{
    return ((fake_clock_t *)arg)->now_ns;
}

static slc_client_t *connect_fake(const char *password)
{
    slc_client_t *c = slc_connect("127.0.0.1", fake.port, password, 2000);
    assert_non_null(c);
    if (slc_err(c) != SLC_OK)
        fail_msg("connect: %s", slc_errstr(c));
    return c;
}

/* ---- blocking ---------------------------------------------------------------------------- */

static void test_blocking_cache_spares_round_trips(void **unused)
{
    slc_client_t *c = connect_fake(NULL);
    fake_clock_t clk = {1000 * MS};
    slc_set_clock(c, fake_now, &clk);
    script(3, DENIED_1S, ALLOWED_9, ALLOWED_9);
    slc_decision_t d;
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK);
    assert_false(d.allowed);
    assert_false(d.from_cache);
    assert_int_equal(d.retry_after_ms, 1000);
    assert_int_equal(nlog(), 1);

    clk.now_ns += 400 * MS;
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK);
    assert_false(d.allowed);
    assert_true(d.from_cache);
    assert_int_equal(d.retry_after_ms, 600);
    assert_int_equal(d.reset_after_ms, 4600);
    assert_int_equal(d.limit, 10);
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK); /* again */
    assert_true(d.from_cache);
    assert_int_equal(nlog(), 1); /* nothing reached the server */
    assert_int_equal(slc_cache_hits(c), 2);

    assert_int_equal(slc_allow(c, "api", "u2", 1, &d), SLC_OK); /* another key: asked */
    assert_true(d.allowed);
    clk.now_ns += 600 * MS; /* the retry time: asked again */
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK);
    assert_true(d.allowed);
    assert_false(d.from_cache);
    assert_int_equal(nlog(), 3);
    assert_int_equal(slc_cache_hits(c), 2);
    slc_free(c);
}

static void test_blocking_wire_and_reset(void **unused)
{
    slc_client_t *c = connect_fake(NULL);
    script(6, ALLOWED_9, ALLOWED_9, DENIED_1S, "+OK\r\n", ALLOWED_9, DENIED_1S);
    slc_decision_t d;
    assert_int_equal(slc_allow(c, "api", "u1", 5, &d), SLC_OK);
    assert_int_equal(slc_peek(c, "api", "u 1", &d), SLC_OK);
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK);
    assert_false(d.allowed);
    assert_int_equal(slc_reset(c, "api", "u1"), SLC_OK);
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK); /* forgotten by the reset */
    assert_false(d.from_cache);
    assert_true(d.allowed);
    /* a peek is never answered from, nor remembered in, the cache */
    assert_int_equal(slc_peek(c, "api", "u9", &d), SLC_OK);
    assert_false(d.allowed);
    assert_int_equal(slc_allow(c, "api", "u9", 1, &d), SLC_ESERVER); /* unscripted: asked */
    assert_string_equal(slc_errstr(c), "ERR unscripted");
    assert_int_equal(nlog(), 7);
    expect_log(0, "SL.ALLOW api u1 COST 5");
    expect_log(1, "SL.PEEK api u 1");
    expect_log(2, "SL.ALLOW api u1");
    expect_log(3, "SL.RESET api u1");
    expect_log(4, "SL.ALLOW api u1");
    expect_log(5, "SL.PEEK api u9");
    expect_log(6, "SL.ALLOW api u9");
    assert_int_equal(slc_cache_hits(c), 0);
    slc_free(c);
}

static void test_blocking_settle(void **unused)
{
    slc_client_t *c = connect_fake(NULL);
    fake_clock_t clk = {1000 * MS};
    slc_set_clock(c, fake_now, &clk);
    script(9, DENIED_1S, SETTLED_8, ALLOWED_9, DENIED_1S, IN_DEBT, IN_DEBT, ALLOWED_9,
           "-ERR unknown rule 'x'\r\n", SETTLED_8);
    slc_decision_t d;
    /* a refusal of cost 3 is cached ... */
    assert_int_equal(slc_allow(c, "api", "u1", 3, &d), SLC_OK);
    assert_false(d.allowed);
    assert_int_equal(slc_allow(c, "api", "u1", 3, &d), SLC_OK);
    assert_true(d.from_cache);
    /* ... a settle that gives units back ends it: the next allow asks the server */
    assert_int_equal(slc_settle(c, "api", "u1", 3, 1, -1, &d), SLC_OK);
    assert_true(d.allowed);
    assert_false(d.from_cache);
    assert_int_equal(d.remaining, 8);
    assert_int_equal(slc_allow(c, "api", "u1", 3, &d), SLC_OK);
    assert_true(d.allowed);
    assert_false(d.from_cache);
    assert_int_equal(slc_cache_hits(c), 1);

    /* a settle that charges more keeps a cached refusal, and is itself never answered from
     * the cache nor remembered in it */
    assert_int_equal(slc_allow(c, "api", "u2", 1, &d), SLC_OK);
    assert_false(d.allowed);
    assert_int_equal(slc_settle(c, "api", "u2", 1, 5, 1700000000000, &d), SLC_OK);
    assert_false(d.allowed);
    assert_false(d.from_cache);
    assert_int_equal(d.retry_after_ms, 2000);
    assert_int_equal(slc_allow(c, "api", "u2", 1, &d), SLC_OK);
    assert_true(d.from_cache);
    assert_int_equal(slc_settle(c, "api", "u3", 2, 2, 0, &d), SLC_OK); /* in debt */
    assert_false(d.allowed);
    assert_int_equal(slc_allow(c, "api", "u3", 1, &d), SLC_OK); /* asked: not remembered */
    assert_true(d.allowed);
    assert_int_equal(slc_cache_hits(c), 2);

    assert_int_equal(slc_settle(c, "x", "u1", 2, 1, -1, &d), SLC_ESERVER);
    assert_string_equal(slc_errstr(c), "ERR unknown rule 'x'");
    assert_true(d.allowed); /* untouched */
    /* bad arguments never reach the server */
    int before = nlog();
    assert_int_equal(slc_settle(c, "api", "u1", -1, 1, -1, &d), SLC_EINVAL);
    assert_string_equal(slc_errstr(c), "reserved must be >= 0");
    assert_int_equal(slc_settle(c, "api", "u1", 1, -1, -1, &d), SLC_EINVAL);
    assert_string_equal(slc_errstr(c), "actual must be >= 0");
    assert_int_equal(slc_settle(c, "api", "u1", 1, 1, -2, &d), SLC_EINVAL);
    assert_string_equal(slc_errstr(c), "at_ms must be >= 0 (Unix ms), or -1 for none");
    assert_int_equal(slc_settle(c, "api", NULL, 1, 1, -1, &d), SLC_EINVAL);
    assert_int_equal(slc_settle(c, "api", "u1", 1, 1, -1, NULL), SLC_EINVAL);
    assert_int_equal(slc_settle(NULL, "api", "u1", 1, 1, -1, &d), SLC_EINVAL);
    assert_int_equal(nlog(), before);
    assert_int_equal(slc_settle(c, "api", "u1", 2, 1, -1, &d), SLC_OK); /* still usable */
    assert_int_equal(slc_err(c), SLC_OK);
    assert_string_equal(slc_errstr(c), "");

    assert_int_equal(nlog(), 9);
    expect_log(0, "SL.ALLOW api u1 COST 3");
    expect_log(1, "SL.SETTLE api u1 3 1");
    expect_log(2, "SL.ALLOW api u1 COST 3");
    expect_log(4, "SL.SETTLE api u2 1 5 AT 1700000000000");
    expect_log(5, "SL.SETTLE api u3 2 2 AT 0");
    expect_log(6, "SL.ALLOW api u3");
    expect_log(7, "SL.SETTLE x u1 2 1");
    slc_free(c);
}

static void test_blocking_errors_as_sent(void **unused)
{
    slc_client_t *c = connect_fake(NULL);
    script(5, "-ERR unknown rule 'x'\r\n", ":1\r\n", "*5\r\n:1\r\n:1\r\n:1\r\n$1\r\n0\r\n:1\r\n",
           "*2\r\n$3\r\napi\r\n$5\r\nlogin\r\n", "-WRONGTYPE no\r\n");
    slc_decision_t d = {.limit = 77};
    assert_int_equal(slc_allow(c, "x", "u1", 1, &d), SLC_ESERVER);
    assert_string_equal(slc_errstr(c), "ERR unknown rule 'x'");
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_EPROTOCOL);
    assert_int_equal(slc_err(c), SLC_EPROTOCOL);
    assert_non_null(strstr(slc_errstr(c), "got an integer"));
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_EPROTOCOL);
    assert_non_null(strstr(slc_errstr(c), "retry_after_ms must be an integer"));
    assert_int_equal(d.limit, 77);

    const char *argv[] = {"SL.RULE", "LIST"};
    redisReply *r = NULL;
    assert_int_equal(slc_command(c, 2, argv, NULL, &r), SLC_OK);
    assert_int_equal(slc_err(c), SLC_OK);
    assert_string_equal(slc_errstr(c), "");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_string_equal(r->element[1]->str, "login");
    freeReplyObject(r);
    r = (redisReply *)1;
    assert_int_equal(slc_command(c, 2, argv, NULL, &r), SLC_ESERVER);
    assert_null(r);
    assert_string_equal(slc_errstr(c), "WRONGTYPE no");

    /* bad arguments never reach the server */
    int before = nlog();
    assert_int_equal(slc_allow(c, "api", "u1", -1, &d), SLC_EINVAL);
    assert_string_equal(slc_errstr(c), "cost must be >= 0");
    assert_int_equal(slc_allow(c, NULL, "u1", 1, &d), SLC_EINVAL);
    assert_int_equal(slc_allow(c, "api", "u1", 1, NULL), SLC_EINVAL);
    assert_int_equal(slc_reset(c, "api", NULL), SLC_EINVAL);
    assert_int_equal(slc_command(c, 0, argv, NULL, &r), SLC_EINVAL);
    assert_int_equal(slc_allow(NULL, "api", "u1", 1, &d), SLC_EINVAL);
    assert_int_equal(slc_set_cache_size(c, (size_t)SLC_CACHE_MAX + 1), SLC_EINVAL);
    assert_int_equal(nlog(), before);
    slc_free(c);
}

static void test_blocking_auth(void **unused)
{
    script(2, "+OK\r\n", ALLOWED_9);
    slc_client_t *c = connect_fake("s3cret");
    slc_decision_t d;
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK);
    expect_log(0, "AUTH s3cret");
    expect_log(1, "SL.ALLOW api u1");
    slc_free(c);

    script(2, "-WRONGPASS invalid password\r\n", "-WRONGPASS invalid password\r\n");
    c = slc_connect("127.0.0.1", fake.port, "bad", 2000);
    assert_int_equal(slc_err(c), SLC_ESERVER);
    assert_string_equal(slc_errstr(c), "WRONGPASS invalid password");
    /* the next call connects again, and AUTH is refused again: nothing else is sent */
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_ESERVER);
    assert_string_equal(slc_errstr(c), "WRONGPASS invalid password");
    assert_int_equal(nlog(), 4);
    expect_log(3, "AUTH bad");
    slc_free(c);
}

static void test_blocking_timeout_and_reconnect(void **unused)
{
    slc_client_t *c = slc_connect("127.0.0.1", fake.port, NULL, 200);
    assert_int_equal(slc_err(c), SLC_OK);
    script(4, "<silent>", ALLOWED_9, "<close>", ALLOWED_9);
    slc_decision_t d;
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_EIO);
    assert_non_null(strstr(slc_errstr(c), "timed out after 200 ms"));
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK); /* a new connection */
    assert_true(d.allowed);
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_EIO);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d: SL.ALLOW: ", fake.port);
    assert_memory_equal(slc_errstr(c), want, strlen(want));
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_OK);
    assert_int_equal(fake.accepts, 3);
    slc_free(c);
}

static void test_blocking_cannot_connect(void **unused)
{
    int port;
    int fd = bound_socket(&port, 0); /* bound, not listening: connections are refused */
    slc_client_t *c = slc_connect("127.0.0.1", port, NULL, 500);
    assert_int_equal(slc_err(c), SLC_EIO);
    char want[96];
    snprintf(want, sizeof want, "cannot connect to 127.0.0.1:%d: Connection refused", port);
    assert_string_equal(slc_errstr(c), want);
    slc_decision_t d;
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_EIO); /* tries again, in vain */
    assert_string_equal(slc_errstr(c), want);
    slc_free(c);
    close(fd);

    c = slc_connect("127.0.0.1", 0, NULL, 500);
    assert_int_equal(slc_err(c), SLC_EINVAL);
    assert_int_equal(slc_allow(c, "api", "u1", 1, &d), SLC_EINVAL);
    slc_free(c);
    c = slc_connect(NULL, 6390, NULL, 0);
    assert_int_equal(slc_err(c), SLC_EINVAL);
    slc_free(c);
    c = slc_connect("127.0.0.1", 6390, NULL, -5);
    assert_int_equal(slc_err(c), SLC_EINVAL);
    slc_free(c);
    slc_free(NULL);
}

/* ---- non-blocking ------------------------------------------------------------------------ */

typedef struct seen {
    int order[16]; /* the tags of the callbacks, in call order */
    int n;
    int status[16];
    slc_decision_t d[16];
    char errstr[16][SLC_ERRSTR_MAX];
    int in_call;     /* set while a call is running: a callback must never see it */
    int close_after; /* close the handle in the callback with this tag */
} seen_t;

static seen_t seen;

static void record(slc_async_t *ac, int tag, int status, const slc_decision_t *d, bool decision)
{
    assert_int_equal(seen.in_call, 0);
    assert_true(seen.n < 16);
    seen.order[seen.n] = tag;
    seen.status[seen.n] = status;
    if (d != NULL)
        seen.d[seen.n] = *d;
    if (decision)
        assert_true((status == SLC_OK) == (d != NULL));
    snprintf(seen.errstr[seen.n], SLC_ERRSTR_MAX, "%s", slc_async_errstr(ac));
    seen.n++;
    if (tag == seen.close_after)
        slc_async_close(ac);
}

static void on_decision(slc_async_t *ac, int status, const slc_decision_t *d, void *arg)
{
    record(ac, (int)(intptr_t)arg, status, d, true);
}

static void on_done(slc_async_t *ac, int status, void *arg)
{
    record(ac, (int)(intptr_t)arg, status, NULL, false);
}

#define TAG(n) ((void *)(intptr_t)(n))

/* Issues a call with in_call set, so that a synchronous callback fails the test. */
#define CALL(expr)                                                                                 \
    ({                                                                                             \
        seen.in_call = 1;                                                                          \
        int rc_ = (expr);                                                                          \
        seen.in_call = 0;                                                                          \
        rc_;                                                                                       \
    })

static void watchdog(uv_timer_t *t)
{
    fail_msg("the loop did not finish in time");
}

/* Runs the loop until nothing is left (the handle freed), then closes it. */
static void run_to_end(uv_loop_t *loop)
{
    uv_timer_t dog;
    uv_timer_init(loop, &dog);
    uv_timer_start(&dog, watchdog, 10000, 0);
    uv_unref((uv_handle_t *)&dog);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&dog, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0); /* every handle of the client was closed */
}

static void test_async_pipeline_and_cache(void **unused)
{
    memset(&seen, 0, sizeof seen);
    seen.close_after = 7;
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac;
    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", fake.port, "pw", &ac), SLC_OK);
    fake_clock_t clk = {5 * MS};
    slc_async_set_clock(ac, fake_now, &clk);
    script(7, "+OK\r\n", ALLOWED_9, DENIED_1S, "-ERR unknown rule 'nope'\r\n", "+OK\r\n", ALLOWED_9,
           ALLOWED_9);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, on_decision, TAG(1))), SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u2", 2, on_decision, TAG(2))), SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "nope", "u1", 1, on_decision, TAG(3))), SLC_OK);
    /* immediate failures never call back */
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", -1, on_decision, TAG(99))), SLC_EINVAL);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, NULL, TAG(99))), SLC_EINVAL);
    assert_int_equal(CALL(slc_async_reset(ac, NULL, "u1", on_done, TAG(99))), SLC_EINVAL);
    uv_run(&loop, UV_RUN_ONCE);
    while (seen.n < 3)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(seen.order[0], 1);
    assert_int_equal(seen.order[1], 2);
    assert_int_equal(seen.order[2], 3);
    assert_int_equal(seen.status[0], SLC_OK);
    assert_true(seen.d[0].allowed);
    assert_int_equal(seen.d[0].remaining, 9);
    assert_int_equal(seen.status[1], SLC_OK);
    assert_false(seen.d[1].allowed);
    assert_int_equal(seen.status[2], SLC_ESERVER);
    assert_string_equal(seen.errstr[2], "ERR unknown rule 'nope'");

    /* u2 was denied cost 2 for 1000 ms: the same cost 300 ms later is answered locally, from
     * the loop, and an unrelated request sent after it is still answered after it */
    clk.now_ns += 300 * MS;
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u2", 2, on_decision, TAG(4))), SLC_OK);
    assert_int_equal(seen.n, 3);
    assert_int_equal(slc_async_cache_hits(ac), 1);
    assert_int_equal(CALL(slc_async_reset(ac, "api", "u2", on_done, TAG(5))), SLC_OK);
    assert_int_equal(CALL(slc_async_peek(ac, "api", "u2", on_decision, TAG(6))), SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u2", 2, on_decision, TAG(7))), SLC_OK);
    run_to_end(&loop);
    assert_int_equal(seen.n, 7);
    int want_order[] = {1, 2, 3, 4, 5, 6, 7};
    assert_memory_equal(seen.order, want_order, sizeof want_order);
    assert_true(seen.d[3].from_cache);
    assert_int_equal(seen.d[3].retry_after_ms, 700);
    assert_int_equal(seen.status[4], SLC_OK); /* reset */
    assert_int_equal(seen.status[6], SLC_OK);
    assert_false(seen.d[6].from_cache);
    assert_int_equal(nlog(), 7);
    expect_log(0, "AUTH pw");
    expect_log(2, "SL.ALLOW api u2 COST 2");
    expect_log(4, "SL.RESET api u2");
    expect_log(5, "SL.PEEK api u2");
    expect_log(6, "SL.ALLOW api u2 COST 2"); /* the reset emptied the cache */
}

/* Runs the loop until `n` callbacks have been seen. */
static void run_until_seen(uv_loop_t *loop, int n)
{
    for (int i = 0; seen.n < n && i < 10000; i++)
        uv_run(loop, UV_RUN_ONCE);
    assert_int_equal(seen.n, n);
}

static void test_async_settle(void **unused)
{
    memset(&seen, 0, sizeof seen);
    seen.close_after = 12;
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac;
    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", fake.port, NULL, &ac), SLC_OK);
    fake_clock_t clk = {5 * MS};
    slc_async_set_clock(ac, fake_now, &clk);
    script(11, DENIED_1S, SETTLED_8, ALLOWED_9, SETTLED_8, DENIED_1S, ALLOWED_9, DENIED_1S, IN_DEBT,
           "-ERR unknown rule 'x'\r\n", SETTLED_8, ALLOWED_9);

    /* u1: a cached refusal; an allow sent right after a settle that gives room back (before
     * its answer) is not answered from the cache */
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, on_decision, TAG(1))), SLC_OK);
    run_until_seen(&loop, 1);
    assert_false(seen.d[0].allowed);
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u1", 2, 1, -1, on_decision, TAG(2))),
                     SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, on_decision, TAG(3))), SLC_OK);
    run_until_seen(&loop, 3);
    assert_int_equal(slc_async_cache_hits(ac), 0);
    assert_true(seen.d[1].allowed);
    assert_int_equal(seen.d[1].remaining, 8);
    assert_false(seen.d[1].from_cache);
    assert_true(seen.d[2].allowed);

    /* u2: the server refuses an allow sent while a settle was on its way (it decided it before
     * the settle ran); that refusal is not remembered, so the next allow asks again */
    assert_int_equal(
        CALL(slc_async_settle(ac, "api", "u2", 5, 1, 1700000000000, on_decision, TAG(4))), SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u2", 1, on_decision, TAG(5))), SLC_OK);
    run_until_seen(&loop, 5);
    assert_false(seen.d[4].allowed);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u2", 1, on_decision, TAG(6))), SLC_OK);
    run_until_seen(&loop, 6);
    assert_false(seen.d[5].from_cache);
    assert_true(seen.d[5].allowed);

    /* u3: a settle that charges more keeps the cached refusal */
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u3", 1, on_decision, TAG(7))), SLC_OK);
    run_until_seen(&loop, 7);
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u3", 1, 4, -1, on_decision, TAG(8))),
                     SLC_OK);
    run_until_seen(&loop, 8);
    assert_false(seen.d[7].allowed);
    assert_int_equal(seen.d[7].retry_after_ms, 2000);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u3", 1, on_decision, TAG(9))), SLC_OK);
    run_until_seen(&loop, 9);
    assert_true(seen.d[8].from_cache);
    assert_int_equal(slc_async_cache_hits(ac), 1);

    /* errors: the server's, as sent; bad arguments fail at once and never call back */
    assert_int_equal(CALL(slc_async_settle(ac, "x", "u1", 2, 1, -1, on_decision, TAG(10))), SLC_OK);
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u1", -1, 1, -1, on_decision, TAG(99))),
                     SLC_EINVAL);
    assert_string_equal(slc_async_errstr(ac), "reserved must be >= 0");
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u1", 1, -1, -1, on_decision, TAG(99))),
                     SLC_EINVAL);
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u1", 1, 1, -7, on_decision, TAG(99))),
                     SLC_EINVAL);
    assert_string_equal(slc_async_errstr(ac), "at_ms must be >= 0 (Unix ms), or -1 for none");
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u1", 1, 1, -1, NULL, TAG(99))), SLC_EINVAL);
    assert_int_equal(CALL(slc_async_settle(NULL, "api", "u1", 1, 1, -1, on_decision, TAG(99))),
                     SLC_EINVAL);
    assert_int_equal(CALL(slc_async_settle(ac, "api", "u1", 3, 3, 0, on_decision, TAG(11))),
                     SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u4", 1, on_decision, TAG(12))), SLC_OK);
    run_to_end(&loop);
    assert_int_equal(seen.n, 12);
    assert_int_equal(seen.status[9], SLC_ESERVER);
    assert_string_equal(seen.errstr[9], "ERR unknown rule 'x'");
    assert_int_equal(seen.status[10], SLC_OK);

    assert_int_equal(nlog(), 11);
    expect_log(1, "SL.SETTLE api u1 2 1");
    expect_log(2, "SL.ALLOW api u1");
    expect_log(3, "SL.SETTLE api u2 5 1 AT 1700000000000");
    expect_log(5, "SL.ALLOW api u2");
    expect_log(7, "SL.SETTLE api u3 1 4");
    expect_log(8, "SL.SETTLE x u1 2 1");
    expect_log(9, "SL.SETTLE api u1 3 3 AT 0");
    expect_log(10, "SL.ALLOW api u4");
}

static void test_async_cannot_connect(void **unused)
{
    memset(&seen, 0, sizeof seen);
    seen.close_after = 2;
    int port;
    int fd = bound_socket(&port, 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac;
    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", port, NULL, &ac), SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, on_decision, TAG(1))), SLC_OK);
    assert_int_equal(CALL(slc_async_reset(ac, "api", "u1", on_done, TAG(2))), SLC_OK);
    run_to_end(&loop);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.status[0], SLC_EIO);
    assert_int_equal(seen.status[1], SLC_EIO);
    char want[96];
    snprintf(want, sizeof want, "cannot connect to 127.0.0.1:%d: Connection refused", port);
    assert_string_equal(seen.errstr[0], want);
    close(fd);

    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", 70000, NULL, &ac), SLC_EINVAL);
    assert_null(ac);
    assert_int_equal(slc_async_connect(&loop, "", 6390, NULL, &ac), SLC_EINVAL);
    assert_int_equal(slc_async_connect(NULL, "127.0.0.1", 6390, NULL, &ac), SLC_EINVAL);
    slc_async_close(NULL);
}

static void test_async_connection_lost(void **unused)
{
    memset(&seen, 0, sizeof seen);
    seen.close_after = -1;
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac;
    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", fake.port, NULL, &ac), SLC_OK);
    script(1, "<close>");
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, on_decision, TAG(1))), SLC_OK);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u2", 1, on_decision, TAG(2))), SLC_OK);
    while (seen.n < 2)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(seen.status[0], SLC_EIO);
    assert_int_equal(seen.status[1], SLC_EIO);
    /* the connection is gone: a new call fails at once and never calls back */
    while (slc_async_err(ac) == SLC_OK)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u3", 1, on_decision, TAG(3))), SLC_EIO);
    slc_async_close(ac);
    run_to_end(&loop);
    assert_int_equal(seen.n, 2);
}

static void test_async_close_before_connect(void **unused)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac;
    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", fake.port, NULL, &ac), SLC_OK);
    slc_async_close(ac); /* nothing sent yet */
    run_to_end(&loop);

    memset(&seen, 0, sizeof seen);
    seen.close_after = -1;
    uv_loop_init(&loop);
    assert_int_equal(slc_async_connect(&loop, "127.0.0.1", fake.port, NULL, &ac), SLC_OK);
    script(1, ALLOWED_9);
    assert_int_equal(CALL(slc_async_allow(ac, "api", "u1", 1, on_decision, TAG(1))), SLC_OK);
    slc_async_close(ac); /* an accepted request still completes */
    run_to_end(&loop);
    assert_int_equal(seen.n, 1);
    assert_int_equal(seen.status[0], SLC_OK);
    assert_true(seen.d[0].allowed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_blocking_cache_spares_round_trips, fake_start,
                                        fake_stop),
        cmocka_unit_test_setup_teardown(test_blocking_wire_and_reset, fake_start, fake_stop),
        cmocka_unit_test_setup_teardown(test_blocking_settle, fake_start, fake_stop),
        cmocka_unit_test_setup_teardown(test_blocking_errors_as_sent, fake_start, fake_stop),
        cmocka_unit_test_setup_teardown(test_blocking_auth, fake_start, fake_stop),
        cmocka_unit_test_setup_teardown(test_blocking_timeout_and_reconnect, fake_start, fake_stop),
        cmocka_unit_test(test_blocking_cannot_connect),
        cmocka_unit_test_setup_teardown(test_async_pipeline_and_cache, fake_start, fake_stop),
        cmocka_unit_test_setup_teardown(test_async_settle, fake_start, fake_stop),
        cmocka_unit_test(test_async_cannot_connect),
        cmocka_unit_test_setup_teardown(test_async_connection_lost, fake_start, fake_stop),
        cmocka_unit_test_setup_teardown(test_async_close_before_connect, fake_start, fake_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
