/*
 * bench_stall.c - does deciding stall while sluiced writes a snapshot, or while override lookups
 * hit the config store? A load client over RESP that prints latency figures (asserts nothing).
 *
 *   bench_stall fill --port P --rule R --keys N [--cost C] [--probe-keys M]
 *       stores N keys "k:<i>" in rule R (SL.ALLOW R k:<i> COST C, pipelined, every reply checked)
 *       and the M probe keys "probe:<i>" (cost 1), so that probing inserts nothing later.
 *
 *   bench_stall run --port P --rule R --snapshot PATH [--server-pid PID] [--rate N]
 *                   [--probe-keys M] [--conns C] [--miss-rule O --miss-rate K]
 *                   [--window-ms T] [--reps N] [--seed S] [--slow-log FILE]
 *       sends SL.ALLOW R probe:<random> at a fixed rate (open loop) and measures each decision's
 *       latency, in three kinds of windows, interleaved, --reps times each:
 *         snapshot  while PATH.tmp exists (sluiced is writing a snapshot: it creates PATH.tmp,
 *                   writes, fsyncs and renames it over PATH); the window opens when the file
 *                   appears (checked every millisecond) and closes when it is gone;
 *         idle      T ms with no snapshot being written;
 *         override  T ms with no snapshot, while SL.ALLOW O miss:<unique> runs at K per second on
 *                   a connection of its own: each a key never seen, of a rule with overrides, so
 *                   each needs a config store lookup.
 *       Each repetition waits for a snapshot to start, measures it, then the idle and override
 *       windows (in alternating order) before the next snapshot; an idle or override window that
 *       a snapshot starts into is cut short there (and says so).
 *
 * Open loop. Request i of the probe stream is due at start + i / rate, whatever happened to the
 * requests before it: the client sends every due request at once (pipelined on its connection,
 * round robin over C connections) and never waits for a reply to send. A request's latency is
 * its reply's arrival minus the time it was due, so a server that stops answering for 5 ms shows
 * 5 ms on every request due in those 5 ms (a closed loop would send nothing meanwhile and record
 * one slow request: coordinated omission). The client spins on its CPU (no sleeping: a wake-up
 * would add its own latency) and checks that it kept up: the largest lateness of a send is
 * printed per window.
 *
 * --slow-log FILE writes a line per probe slower than 0.3 ms: repetition, phase, when it was due
 * (ms into its window) and its latency (ms); it tells one long stall from many short ones.
 *
 * Per window: requests, p50 / p99 / p99.9 / max latency, the time the snapshot file existed
 * during the window (its overlap with the write), and "others": CPU time that neither the
 * server (--server-pid) nor this client used, in % of one CPU (/proc/stat; it includes the
 * kernel's writeback of the snapshot file). The summary gives medians over the repetitions and
 * each phase's p99 over the idle p99.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#define CONNS_MAX      16
#define INFLIGHT_CAP   (1u << 18) /* requests in flight per connection (a power of two) */
#define OUT_CAP        (4u << 20) /* bytes waiting to be written per connection */
#define READ_CHUNK     (64u << 10)
#define REPS_MAX       32
#define WINDOWS_MAX    (5 * REPS_MAX + 3) /* 3 per repetition, and re-runs */
#define FILL_WINDOW    4096               /* fill: requests in flight */
#define SNAP_WAIT_S    120                /* longest wait for a snapshot to start */
#define SNAP_MAX_S     120                /* longest snapshot window */
#define SETTLE_MS      300                /* after a snapshot, before the next window */
#define QUIET_MS       300          /* a quiet stretch: others under OTHERS_MAX for this long */
#define QUIET_BUDGET_S 60           /* in all, waiting for quiet stretches */
#define OTHERS_MAX     15.0         /* % of one CPU: above it, a window is disturbed */
#define LATE_MAX_NS    NS_PER_MS    /* a send later than this: the client lost its CPU */
#define SLOW_NS        (300 * 1000) /* --slow-log: probes slower than this, ns */
#define NS_PER_MS      INT64_C(1000000)
#define NS_PER_S       INT64_C(1000000000)

enum phase { PHASE_IDLE, PHASE_SNAPSHOT, PHASE_OVERRIDE, PHASES };
static const char *phase_name[PHASES] = {"idle", "snapshot", "override"};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench_stall: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* ---- samples ----------------------------------------------------------------------------- */

typedef struct samples {
    int64_t *v; /* latencies, ns */
    size_t n, cap;
} samples_t;

static void samples_add(samples_t *s, int64_t ns)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (s->v == NULL)
            die("out of memory");
    }
    s->v[s->n++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) of sorted samples, ms; 0 with none. */
static double quantile_ms(const samples_t *s, double q)
{
    if (s->n == 0)
        return 0;
    size_t rank = (size_t)(q * (double)s->n + 0.999999);
    rank = rank < 1 ? 1 : rank > s->n ? s->n : rank;
    return (double)s->v[rank - 1] / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- CPU accounting ---------------------------------------------------------------------- */

static long clk_tck;

/* Ticks all CPUs spent in processes (user nice system) or lost to the hypervisor (steal). Not
 * irq and softirq: the kernel's network work for this benchmark's own traffic lands there. */
static int64_t sys_busy_ticks(void)
{
    FILE *f = fopen("/proc/stat", "r");
    long long u = 0, n = 0, s = 0, idle = 0, io = 0, irq = 0, sirq = 0, st = 0;
    if (f == NULL || fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &u, &n, &s, &idle,
                            &io, &irq, &sirq, &st) != 8) {
        if (f != NULL)
            fclose(f);
        return 0;
    }
    fclose(f);
    return u + n + s + st;
}

/* utime + stime of a process (all its threads), ticks; 0 when unknown. */
static int64_t proc_ticks(int pid)
{
    if (pid <= 0)
        return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    long long ut = 0, stt = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &ut, &stt) != 2)
        return 0;
    return ut + stt;
}

static int64_t self_ticks(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t us = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                 ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    return us * clk_tck / 1000000;
}

/* ---- connections ------------------------------------------------------------------------- */

typedef struct inflight {
    int64_t due_ns; /* when the request was due to be sent */
    int16_t window; /* the window it was due in, or -1 */
    uint8_t miss;   /* a request of the override-miss stream */
} inflight_t;

typedef struct conn {
    int fd;
    redisReader *reader;
    char *out;
    size_t out_len;
    inflight_t *inflight; /* ring of INFLIGHT_CAP */
    uint32_t head, tail;  /* pop at head, push at tail */
} conn_t;

static void conn_open(conn_t *c, int port)
{
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        die("connect to 127.0.0.1:%d: %s", port, strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    c->reader = redisReaderCreate();
    c->out = malloc(OUT_CAP);
    c->inflight = malloc(INFLIGHT_CAP * sizeof *c->inflight);
    if (c->reader == NULL || c->out == NULL || c->inflight == NULL)
        die("out of memory");
}

/* Appends one command (argv of argc strings) as RESP; records it in flight. */
static void conn_send(conn_t *c, int argc, const char **argv, inflight_t in)
{
    char buf[512];
    size_t n = (size_t)snprintf(buf, sizeof buf, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    if (c->out_len + n > OUT_CAP || c->tail - c->head == INFLIGHT_CAP)
        die("the server fell more than %u requests behind on one connection", INFLIGHT_CAP);
    memcpy(c->out + c->out_len, buf, n);
    c->out_len += n;
    c->inflight[c->tail++ & (INFLIGHT_CAP - 1)] = in;
}

static void conn_flush(conn_t *c)
{
    size_t done = 0;
    while (done < c->out_len) {
        ssize_t w = write(c->fd, c->out + done, c->out_len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            die("write: %s", strerror(errno));
        done += (size_t)w;
    }
    memmove(c->out, c->out + done, c->out_len - done);
    c->out_len -= done;
}

/* A decision's reply: an array whose first element is 1 (allowed) or 0. */
static int reply_allowed(const redisReply *r)
{
    if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER)
        return (int)r->element[0]->integer;
    return -1;
}

/* Reads what arrived; calls done(arg, in, reply, now) for each reply, in order. */
typedef void (*reply_fn)(void *arg, const inflight_t *in, const redisReply *r, int64_t now_ns);

static void conn_read(conn_t *c, reply_fn done, void *arg)
{
    static char buf[READ_CHUNK];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0)
            die("the server closed the connection (%s)", n < 0 ? strerror(errno) : "EOF");
        int64_t now = mono_ns();
        if (redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
            die("reply parser: %s", c->reader->errstr);
        void *r = NULL;
        while (redisReaderGetReply(c->reader, &r) == REDIS_OK && r != NULL) {
            if (c->head == c->tail)
                die("a reply nobody asked for");
            inflight_t in = c->inflight[c->head++ & (INFLIGHT_CAP - 1)];
            done(arg, &in, r, now);
            freeReplyObject(r);
            r = NULL;
        }
        if (r == NULL && c->reader->err != 0)
            die("reply parser: %s", c->reader->errstr);
    }
}

/* ---- options ----------------------------------------------------------------------------- */

typedef struct opts {
    int port, server_pid, conns, reps, window_ms;
    long long keys, probe_keys, cost, rate, miss_rate, seed;
    const char *rule, *miss_rule, *snapshot, *slow_log;
} opts_t;

static void parse_opts(opts_t *o, int argc, char **argv)
{
    *o = (opts_t){.conns = 4,
                  .reps = 5,
                  .window_ms = 3000,
                  .probe_keys = 10000,
                  .cost = 1,
                  .rate = 10000,
                  .miss_rate = 1000,
                  .seed = 1};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            die("%s needs a value", a);
        i++;
        if (strcmp(a, "--port") == 0)
            o->port = atoi(v);
        else if (strcmp(a, "--server-pid") == 0)
            o->server_pid = atoi(v);
        else if (strcmp(a, "--conns") == 0)
            o->conns = atoi(v);
        else if (strcmp(a, "--reps") == 0)
            o->reps = atoi(v);
        else if (strcmp(a, "--window-ms") == 0)
            o->window_ms = atoi(v);
        else if (strcmp(a, "--keys") == 0)
            o->keys = atoll(v);
        else if (strcmp(a, "--probe-keys") == 0)
            o->probe_keys = atoll(v);
        else if (strcmp(a, "--cost") == 0)
            o->cost = atoll(v);
        else if (strcmp(a, "--rate") == 0)
            o->rate = atoll(v);
        else if (strcmp(a, "--miss-rate") == 0)
            o->miss_rate = atoll(v);
        else if (strcmp(a, "--seed") == 0)
            o->seed = atoll(v);
        else if (strcmp(a, "--rule") == 0)
            o->rule = v;
        else if (strcmp(a, "--miss-rule") == 0)
            o->miss_rule = v;
        else if (strcmp(a, "--snapshot") == 0)
            o->snapshot = v;
        else if (strcmp(a, "--slow-log") == 0)
            o->slow_log = v;
        else
            die("unknown option %s", a);
    }
    if (o->port <= 0 || o->rule == NULL)
        die("--port and --rule are required");
    if (o->conns < 1 || o->conns > CONNS_MAX || o->reps < 1 || o->reps > REPS_MAX || o->rate < 1 ||
        o->probe_keys < 1 || o->window_ms < 100)
        die("--conns 1..%d, --reps 1..%d, --rate >= 1, --probe-keys >= 1, --window-ms >= 100",
            CONNS_MAX, REPS_MAX);
}

/* ---- fill -------------------------------------------------------------------------------- */

typedef struct fill_ctx {
    long long replies, refused, errors;
} fill_ctx_t;

static void fill_reply(void *arg, const inflight_t *in, const redisReply *r, int64_t now_ns)
{
    (void)in;
    (void)now_ns;
    fill_ctx_t *f = arg;
    f->replies++;
    int a = reply_allowed(r);
    if (a < 0) {
        if (f->errors++ == 0)
            fprintf(stderr, "bench_stall fill: unexpected reply (type %d): %s\n", r->type,
                    r->type == REDIS_REPLY_ERROR ? r->str : "");
    } else if (a == 0) {
        f->refused++;
    }
}

static int cmd_fill(const opts_t *o)
{
    conn_t c;
    conn_open(&c, o->port);
    fill_ctx_t f = {0};
    long long total = o->keys + o->probe_keys, sent = 0;
    char key[64], cost[32];
    snprintf(cost, sizeof cost, "%lld", o->cost);
    int64_t t0 = mono_ns();
    while (f.replies < total) {
        while (sent < total && sent - f.replies < FILL_WINDOW) {
            if (sent < o->keys) {
                snprintf(key, sizeof key, "k:%lld", sent);
                const char *argv[] = {"SL.ALLOW", o->rule, key, "COST", cost};
                conn_send(&c, 5, argv, (inflight_t){.window = -1});
            } else {
                snprintf(key, sizeof key, "probe:%lld", sent - o->keys);
                const char *argv[] = {"SL.ALLOW", o->rule, key};
                conn_send(&c, 3, argv, (inflight_t){.window = -1});
            }
            sent++;
        }
        conn_flush(&c);
        struct pollfd p = {.fd = c.fd, .events = POLLIN | (c.out_len ? POLLOUT : 0)};
        if (poll(&p, 1, 10000) == 0)
            die("fill: no reply for 10 s (%lld of %lld answered)", f.replies, total);
        conn_read(&c, fill_reply, &f);
    }
    double s = (double)(mono_ns() - t0) / 1e9;
    printf("fill: %lld keys and %lld probe keys in rule %s (cost %lld each) in %.1f s (%.0f/s); "
           "%lld refused, %lld errors\n",
           o->keys, o->probe_keys, o->rule, o->cost, s, (double)total / s, f.refused, f.errors);
    return f.errors == 0 && f.refused == 0 ? 0 : 1;
}

/* ---- run --------------------------------------------------------------------------------- */

typedef struct window {
    enum phase phase;
    int rep;
    int64_t start_ns, end_ns;
    int64_t snap_ns; /* time the snapshot file existed during the window */
    bool cut;        /* an idle or override window that a snapshot started into */
    samples_t lat, miss_lat;
    long long errors, miss_errors;
    int64_t late_max_ns;            /* the latest a due request was sent */
    int64_t worst_ns, worst_due_ns; /* the largest latency, and when that request was due */
    int64_t busy0, srv0, self0;     /* CPU accounting at the start */
    double others_pct;
    bool disturbed; /* others took over OTHERS_MAX, or the client was late to send */
} window_t;

typedef struct run {
    const opts_t *o;
    conn_t conns[CONNS_MAX + 1]; /* the probes', then the misses' */
    conn_t *miss;
    window_t w[WINDOWS_MAX];
    int nw, open; /* windows; the one open, or -1 */
    int64_t next_probe_ns, probe_step_ns, next_miss_ns, miss_step_ns;
    bool misses_on;
    long long miss_seq;
    unsigned next_conn;
    uint64_t rng;
    char tmp_path[4096];
    bool snap_now;          /* the snapshot file exists (as the watcher last said) */
    int64_t snap_since_ns;  /* since when, ns */
    long long stray_errors; /* errors outside windows */
    int reruns, reruns_max; /* disturbed windows measured again, and the bound */
    int64_t quiet_waited_ns;
    FILE *slow_log; /* --slow-log, or NULL */
} run_t;

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void run_reply(void *arg, const inflight_t *in, const redisReply *r, int64_t now_ns)
{
    run_t *run = arg;
    bool ok = reply_allowed(r) >= 0;
    if (in->window < 0) {
        run->stray_errors += !ok;
        return;
    }
    window_t *w = &run->w[in->window];
    if (in->miss) {
        samples_add(&w->miss_lat, now_ns - in->due_ns);
        w->miss_errors += !ok;
    } else {
        samples_add(&w->lat, now_ns - in->due_ns);
        w->errors += !ok;
        if (run->slow_log != NULL && now_ns - in->due_ns > SLOW_NS)
            fprintf(run->slow_log, "%d %s %.3f %.3f\n", w->rep + 1, phase_name[w->phase],
                    (double)(in->due_ns - w->start_ns) / 1e6, (double)(now_ns - in->due_ns) / 1e6);
        if (now_ns - in->due_ns > w->worst_ns) {
            w->worst_ns = now_ns - in->due_ns;
            w->worst_due_ns = in->due_ns;
        }
    }
}

static void window_open(run_t *r, enum phase p, int rep, int64_t now_ns)
{
    if (r->nw == WINDOWS_MAX)
        die("too many windows");
    window_t *w = &r->w[r->nw];
    *w = (window_t){.phase = p, .rep = rep, .start_ns = now_ns};
    w->busy0 = sys_busy_ticks();
    w->srv0 = proc_ticks(r->o->server_pid);
    w->self0 = self_ticks();
    r->open = r->nw++;
    r->misses_on = p == PHASE_OVERRIDE && r->miss != NULL;
    if (r->misses_on)
        r->next_miss_ns = now_ns;
}

static void window_close(run_t *r, int64_t now_ns)
{
    window_t *w = &r->w[r->open];
    w->end_ns = now_ns;
    if (r->snap_now) /* the snapshot file's time so far, up to now */
        w->snap_ns += now_ns - (r->snap_since_ns > w->start_ns ? r->snap_since_ns : w->start_ns);
    int64_t busy = sys_busy_ticks() - w->busy0, srv = proc_ticks(r->o->server_pid) - w->srv0;
    int64_t self = self_ticks() - w->self0;
    double wall_s = (double)(now_ns - w->start_ns) / 1e9;
    w->others_pct = 100.0 * (double)(busy - srv - self) / (double)clk_tck / wall_s;
    if (w->others_pct < 0)
        w->others_pct = 0;
    w->disturbed = w->others_pct > OTHERS_MAX || w->late_max_ns > LATE_MAX_NS;
    r->open = -1;
    r->misses_on = false;
}

/*
 * The snapshot file's watcher: a thread of its own that stat()s PATH.tmp every millisecond, so
 * that a stat held up by the file system (the snapshot's fsync and rename) never delays a send.
 * It publishes the file's state and when it changed as one word: changed_ns * 2 + exists.
 */
static _Atomic int64_t watch_word;
static atomic_bool watch_stop;

static void *watch_main(void *arg)
{
    const char *path = arg;
    bool was = false;
    struct timespec ms = {.tv_nsec = NS_PER_MS};
    while (!atomic_load(&watch_stop)) {
        struct stat st;
        bool exists = stat(path, &st) == 0;
        if (exists != was) {
            atomic_store(&watch_word, mono_ns() * 2 + exists);
            was = exists;
        }
        nanosleep(&ms, NULL);
    }
    return NULL;
}

/* Takes in what the watcher saw; keeps the open window's overlap with the snapshot file. */
static void snap_check(run_t *r)
{
    int64_t word = atomic_load_explicit(&watch_word, memory_order_relaxed);
    bool exists = word & 1;
    if (exists == r->snap_now)
        return;
    int64_t at_ns = word / 2;
    if (!exists && r->open >= 0) { /* a write ended: its time in the open window */
        window_t *w = &r->w[r->open];
        w->snap_ns += at_ns - (r->snap_since_ns > w->start_ns ? r->snap_since_ns : w->start_ns);
    }
    r->snap_now = exists;
    r->snap_since_ns = at_ns;
}

/* Sends what is due, writes, reads, checks the snapshot file: one turn of the spin. */
static void turn(run_t *r)
{
    int64_t now = mono_ns();
    const opts_t *o = r->o;
    char key[64];
    while (r->next_probe_ns <= now) {
        snprintf(key, sizeof key, "probe:%llu",
                 (unsigned long long)(xorshift(&r->rng) % (uint64_t)o->probe_keys));
        const char *argv[] = {"SL.ALLOW", o->rule, key};
        inflight_t in = {.due_ns = r->next_probe_ns, .window = (int16_t)r->open};
        conn_send(&r->conns[r->next_conn++ % (unsigned)o->conns], 3, argv, in);
        if (r->open >= 0 && now - r->next_probe_ns > r->w[r->open].late_max_ns)
            r->w[r->open].late_max_ns = now - r->next_probe_ns;
        r->next_probe_ns += r->probe_step_ns;
    }
    while (r->misses_on && r->next_miss_ns <= now) {
        snprintf(key, sizeof key, "miss:%lld:%lld", o->seed, r->miss_seq++);
        const char *argv[] = {"SL.ALLOW", o->miss_rule, key};
        conn_send(r->miss, 3, argv,
                  (inflight_t){.due_ns = r->next_miss_ns, .window = (int16_t)r->open, .miss = 1});
        r->next_miss_ns += r->miss_step_ns;
    }
    int n = o->conns + (r->miss != NULL);
    struct pollfd p[CONNS_MAX + 1];
    for (int i = 0; i < n; i++) {
        conn_flush(&r->conns[i]);
        p[i] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
    }
    if (poll(p, (nfds_t)n, 0) > 0) {
        for (int i = 0; i < n; i++) {
            if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
                conn_read(&r->conns[i], run_reply, r);
        }
    }
    snap_check(r);
}

/* Spins until `until_ns`, or until the snapshot file's existence becomes `stop_when` (pass
 * -1 for no such stop). Returns true when stopped by the file. */
static bool spin(run_t *r, int64_t until_ns, int stop_when)
{
    while (mono_ns() < until_ns) {
        turn(r);
        if (stop_when >= 0 && r->snap_now == (stop_when == 1))
            return true;
    }
    return false;
}

/* Spins (the load goes on) until other processes took under OTHERS_MAX % of a CPU for QUIET_MS,
 * or the budget of QUIET_BUDGET_S in all is spent. */
static void wait_quiet(run_t *r)
{
    while (r->quiet_waited_ns < QUIET_BUDGET_S * NS_PER_S) {
        int64_t t0 = mono_ns(), busy = sys_busy_ticks(), srv = proc_ticks(r->o->server_pid);
        int64_t self = self_ticks();
        spin(r, t0 + QUIET_MS * NS_PER_MS, -1);
        int64_t t1 = mono_ns();
        r->quiet_waited_ns += t1 - t0;
        double others = 100.0 *
                        (double)(sys_busy_ticks() - busy - (proc_ticks(r->o->server_pid) - srv) -
                                 (self_ticks() - self)) /
                        (double)clk_tck / ((double)(t1 - t0) / 1e9);
        if (others <= OTHERS_MAX)
            return;
    }
}

/* Whether to measure the window just closed again: it was disturbed and re-runs are left. */
static bool rerun(run_t *r)
{
    if (!r->w[r->nw - 1].disturbed || r->reruns >= r->reruns_max)
        return false;
    r->reruns++;
    return true;
}

/* Lets every request in flight come back (bounded). */
static void drain(run_t *r)
{
    int64_t until = mono_ns() + 30 * NS_PER_S;
    for (;;) {
        bool empty = true;
        for (int i = 0; i < r->o->conns + (r->miss != NULL); i++)
            empty = empty && r->conns[i].head == r->conns[i].tail;
        if (empty)
            return;
        if (mono_ns() > until)
            die("replies still missing 30 s after the last window");
        int64_t now = mono_ns();
        r->next_probe_ns = now + NS_PER_S; /* nothing new */
        turn(r);
    }
}

static void print_window(const run_t *r, window_t *w)
{
    qsort(w->lat.v, w->lat.n, sizeof *w->lat.v, cmp_i64);
    qsort(w->miss_lat.v, w->miss_lat.n, sizeof *w->miss_lat.v, cmp_i64);
    double secs = (double)(w->end_ns - w->start_ns) / 1e9;
    printf("  rep %d %-8s %5.2f s %7zu decisions  p50 %6.3f  p99 %6.3f  p99.9 %6.3f  max %7.3f ms"
           "  snapshot file %5.2f s (%3.0f%%)  others %3.0f%%  send late <= %.3f ms",
           w->rep + 1, phase_name[w->phase], secs, w->lat.n, quantile_ms(&w->lat, 0.5),
           quantile_ms(&w->lat, 0.99), quantile_ms(&w->lat, 0.999), quantile_ms(&w->lat, 1.0),
           (double)w->snap_ns / 1e9, 100.0 * (double)w->snap_ns / 1e9 / secs, w->others_pct,
           (double)w->late_max_ns / 1e6);
    printf("  max due at +%.3f s", (double)(w->worst_due_ns - w->start_ns) / 1e9);
    if (w->errors)
        printf("  ERRORS %lld", w->errors);
    if (w->cut)
        printf("  (cut short: a snapshot started)");
    if (w->disturbed)
        printf("  [disturbed]");
    if (w->phase == PHASE_OVERRIDE)
        printf("\n           override lookups: %zu (%.0f/s), p50 %.3f  p99 %.3f ms%s",
               w->miss_lat.n, (double)w->miss_lat.n / secs, quantile_ms(&w->miss_lat, 0.5),
               quantile_ms(&w->miss_lat, 0.99), w->miss_errors ? "  (with error replies)" : "");
    printf("\n");
    (void)r;
}

/* Whether window w counts for its phase's medians: undisturbed, unless every window of the
 * phase was disturbed (then all of them count, and the summary says so). */
static bool counts(const run_t *r, const window_t *w, bool *all_disturbed)
{
    bool clean = false;
    for (int i = 0; i < r->nw; i++)
        clean = clean || (r->w[i].phase == w->phase && !r->w[i].disturbed && r->w[i].lat.n > 0);
    *all_disturbed = !clean;
    return w->lat.n > 0 && (!clean || !w->disturbed);
}

/*
 * The same windows' decisions pooled per phase, then their quantiles. A stall of the machine
 * that comes at a steady rate (here: a kernel thread's few milliseconds every second) weighs the
 * same in every phase pooled, whereas a median of per-window p99s weighs it more in short
 * windows (a snapshot's, under a second) than in long ones.
 */
static void print_pooled(const run_t *r)
{
    double p99[PHASES] = {0};
    printf("\npooled: every decision of those windows, per phase, ms\n");
    printf("  %-9s %8s %8s %8s %8s  %9s   %s\n", "phase", "p50", "p99", "p99.9", "max", "decisions",
           "p99 / idle p99 (target <= 2)");
    for (int p = 0; p < PHASES; p++) {
        if (p == PHASE_OVERRIDE && r->miss == NULL)
            continue;
        samples_t all = {0};
        bool all_disturbed;
        for (int i = 0; i < r->nw; i++) {
            const window_t *w = &r->w[i];
            if (w->phase != (enum phase)p || !counts(r, w, &all_disturbed))
                continue;
            for (size_t k = 0; k < w->lat.n; k++)
                samples_add(&all, w->lat.v[k]);
        }
        qsort(all.v, all.n, sizeof *all.v, cmp_i64);
        p99[p] = quantile_ms(&all, 0.99);
        printf("  %-9s %8.3f %8.3f %8.3f %8.3f  %9zu   %.2f\n", phase_name[p],
               quantile_ms(&all, 0.5), p99[p], quantile_ms(&all, 0.999), quantile_ms(&all, 1.0),
               all.n, p99[PHASE_IDLE] > 0 ? p99[p] / p99[PHASE_IDLE] : 0);
        free(all.v);
    }
}

static void print_summary(const run_t *r)
{
    double med[PHASES][4];
    int used[PHASES];
    bool all_disturbed[PHASES] = {false};
    for (int p = 0; p < PHASES; p++) {
        double v[4][WINDOWS_MAX];
        int n = 0;
        for (int i = 0; i < r->nw; i++) {
            const window_t *w = &r->w[i];
            if (w->phase != (enum phase)p || !counts(r, w, &all_disturbed[p]))
                continue;
            v[0][n] = quantile_ms(&w->lat, 0.5);
            v[1][n] = quantile_ms(&w->lat, 0.99);
            v[2][n] = quantile_ms(&w->lat, 0.999);
            v[3][n] = quantile_ms(&w->lat, 1.0);
            n++;
        }
        for (int k = 0; k < 4; k++)
            med[p][k] = median(v[k], n);
        used[p] = n;
    }
    printf("\n%d disturbed windows measured again (at most %d); %.1f s spent waiting for quiet "
           "stretches\n",
           r->reruns, r->reruns_max, (double)r->quiet_waited_ns / 1e9);
    printf("\nsummary: medians over the undisturbed windows, latency of SL.ALLOW %s "
           "probe:<random> at %lld/s (open loop), ms\n",
           r->o->rule, r->o->rate);
    printf("  %-9s %8s %8s %8s %8s  %8s   %s\n", "phase", "p50", "p99", "p99.9", "max", "windows",
           "p99 / idle p99 (target <= 2)");
    for (int p = 0; p < PHASES; p++) {
        if (p == PHASE_OVERRIDE && r->miss == NULL)
            continue;
        printf("  %-9s %8.3f %8.3f %8.3f %8.3f  %8d   %.2f%s\n", phase_name[p], med[p][0],
               med[p][1], med[p][2], med[p][3], used[p],
               med[PHASE_IDLE][1] > 0 ? med[p][1] / med[PHASE_IDLE][1] : 0,
               all_disturbed[p] ? "   (every window of this phase was disturbed)" : "");
    }
    print_pooled(r);
}

static int cmd_run(const opts_t *o)
{
    static run_t r;
    r.o = o;
    r.open = -1;
    r.rng = (uint64_t)o->seed * UINT64_C(0x9e3779b97f4a7c15) | 1;
    if (o->snapshot == NULL)
        die("--snapshot PATH is required");
    snprintf(r.tmp_path, sizeof r.tmp_path, "%s.tmp", o->snapshot);
    if (o->slow_log != NULL && (r.slow_log = fopen(o->slow_log, "w")) == NULL)
        die("%s: %s", o->slow_log, strerror(errno));
    for (int i = 0; i < o->conns; i++)
        conn_open(&r.conns[i], o->port);
    if (o->miss_rule != NULL && o->miss_rate > 0) {
        r.miss = &r.conns[o->conns];
        conn_open(r.miss, o->port);
        r.miss_step_ns = NS_PER_S / o->miss_rate;
    }
    r.probe_step_ns = NS_PER_S / o->rate;
    int64_t now = mono_ns();
    r.next_probe_ns = now;
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, watch_main, r.tmp_path) != 0)
        die("no thread for the snapshot file's watcher");
    spin(&r, now + NS_PER_S, -1); /* warm up: connections, caches */
    printf("probes: SL.ALLOW %s probe:<random of %lld> at %lld/s over %d connections; override "
           "misses: %s; windows of %d ms; %d repetitions\n",
           o->rule, o->probe_keys, o->rate, o->conns,
           r.miss ? o->miss_rule : "(none: no --miss-rule)", o->window_ms, o->reps);
    fflush(stdout);
    r.reruns_max = 2 * o->reps;
    for (int rep = 0; rep < o->reps; rep++) {
        /* the snapshot: wait for a write to start, measure while it lasts; again if disturbed */
        do {
            if (r.snap_now && !spin(&r, mono_ns() + SNAP_WAIT_S * NS_PER_S, 0))
                die("a snapshot file that never goes away: %s", r.tmp_path);
            if (!spin(&r, mono_ns() + SNAP_WAIT_S * NS_PER_S, 1))
                die("no snapshot started within %d s (is --snapshot-interval set?)", SNAP_WAIT_S);
            window_open(&r, PHASE_SNAPSHOT, rep, r.snap_since_ns);
            if (!spin(&r, mono_ns() + SNAP_MAX_S * NS_PER_S, 0))
                die("a snapshot that lasted over %d s", SNAP_MAX_S);
            window_close(&r, r.snap_since_ns);
        } while (rerun(&r));
        spin(&r, mono_ns() + SETTLE_MS * NS_PER_MS, -1);
        /* then idle and override, in alternating order, each after a quiet stretch, each cut
         * short by a snapshot (and then measured after the next one) */
        for (int k = 0; k < 2; k++) {
            enum phase p = (rep + k) % 2 == 0 ? PHASE_IDLE : PHASE_OVERRIDE;
            if (p == PHASE_OVERRIDE && r.miss == NULL)
                continue;
            bool again;
            do {
                wait_quiet(&r);
                if (r.snap_now)
                    break;
                window_open(&r, p, rep, mono_ns());
                bool cut = spin(&r, mono_ns() + o->window_ms * NS_PER_MS, 1);
                r.w[r.open].cut = cut;
                window_close(&r, mono_ns());
                again = rerun(&r);
            } while (again && !r.snap_now);
        }
    }
    drain(&r);
    atomic_store(&watch_stop, true);
    pthread_join(watcher, NULL);
    printf("\nwindows (latency = reply received - request due; snapshot file = time %s existed "
           "in the window):\n",
           r.tmp_path);
    for (int i = 0; i < r.nw; i++)
        print_window(&r, &r.w[i]);
    if (r.stray_errors)
        printf("error replies outside the windows: %lld\n", r.stray_errors);
    print_summary(&r);
    return 0;
}

int main(int argc, char **argv)
{
    clk_tck = sysconf(_SC_CLK_TCK);
    if (argc < 2 || (strcmp(argv[1], "fill") != 0 && strcmp(argv[1], "run") != 0)) {
        fprintf(stderr, "usage: bench_stall fill|run --port P --rule R ... (see the source's "
                        "header)\n");
        return 2;
    }
    opts_t o;
    parse_opts(&o, argc, argv);
    return strcmp(argv[1], "fill") == 0 ? cmd_fill(&o) : cmd_run(&o);
}
