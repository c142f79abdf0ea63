/*
 * bench_core.c - figures for the core: nanoseconds per decision and bytes per key of sl_decide()
 * and the per-key table, next to a lock-free flat array (the memory-latency floor).
 *
 * Subcommands, each printing the command that produced it, its figures and a machine summary:
 *
 *   hot      one 16-byte key, one thread: sl_table_decide() for gcra, token_bucket and
 *            fixed_window, sl_decide() alone on a caller-owned state for all six algorithms, and
 *            two components of the table path (the key hash, an uncontended lock/unlock pair)
 *   random   --keys distinct 16-byte keys (10 M) in one gcra table, then uniform random decisions
 *            on existing keys: single sl_table_decide() calls, sl_table_decide_batch() in batches
 *            of 16/32/64, and the floor (a flat array with the same hash, no lock) both ways
 *   threads  the same table shared by two threads pinned to cores 0 and 1, each with its own
 *            random stream, against one thread; the floor likewise for context
 *   memory   resident memory growth per key after inserting --keys keys under --alg
 *   slog     sliding_log bytes per entry, every key saturated at its limit (one request of cost 1
 *            per entry), and the bytes of one key's state for one request of cost 10^6 and for
 *            N requests of cost 1, next to the older ring of one stamp per unit
 *
 * Method. No clock is read inside a timed loop: `now` is synthetic and advances by a fixed step
 * per decision, so the figures are the library's cost, not clock_gettime()'s. Keys for timed
 * random phases are copied in advance into a request stream (uniform picks from the key array)
 * that is read sequentially, so the key itself is in cache as it would be in a server that just
 * parsed a request; the table's slot is not. Each figure is the median of --reps timed
 * repetitions after one untimed warm-up; the cases of one subcommand are interleaved within each
 * repetition and ratios are medians of per-repetition ratios, so drift on a shared host hits both
 * sides of a ratio alike. Single-thread phases run pinned to CPU 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "sluice/sluice.h"

#ifndef SLUICE_BENCH_FLAGS
#define SLUICE_BENCH_FLAGS "unknown"
#endif
#ifndef SLUICE_BENCH_BUILD_TYPE
#define SLUICE_BENCH_BUILD_TYPE "unknown"
#endif

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif
#define KEY_LEN    16u /* every benchmark key, bytes */
#define REPS_MAX   64
#define BATCH_MAX  64u                                   /* largest batch measured */
#define PREFETCH_D 16u                                   /* floor: requests hashed ahead */
#define NOW0_NS    (INT64_C(1700000000) * SL_NS_PER_SEC) /* synthetic epoch of every run */
#define HUGE_PAGE  (2u << 20)

/* ---- options ----------------------------------------------------------------------------- */

static struct {
    int reps;           /* timed repetitions per figure */
    size_t keys;        /* distinct keys (random, threads, memory, slog) */
    size_t ops;         /* decisions per timed repetition (random, threads: per thread) */
    size_t iters;       /* decisions per timed repetition (hot) */
    const char *alg;    /* memory: algorithm name */
    int64_t limit;      /* slog: first limit */
    int64_t limit2;     /* slog: second limit, for the per-stamp slope */
    bool presize;       /* memory: sl_table_config_t.initial_keys = keys */
    uint64_t seed;      /* key and stream generator seed */
    char command[1024]; /* the command line, printed with the figures */
} opt = {
    .reps = 5,
    .keys = 10000000,
    .ops = 4000000,
    .iters = 10000000,
    .alg = "gcra",
    .limit = 100,
    .limit2 = 200,
    .seed = 42,
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_core: %s: %s\n", what, rc < 0 ? sl_strerror(rc) : strerror(errno));
    exit(1);
}

static void check(int rc, const char *what)
{
    if (rc != SL_OK)
        die(what, rc);
}

/* Anonymous memory offered huge pages, as table.c does for its large arrays. */
static void *huge_alloc(size_t n)
{
    n = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap", 0);
    madvise(p, n, MADV_HUGEPAGE);
    return p;
}

static void huge_free(void *p, size_t n)
{
    munmap(p, (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
}

/* ---- time, statistics, reporting --------------------------------------------------------- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread, s: with mono_s() it tells whether the thread had its CPU to
 * itself (other processes on this VM, or the host, take it away). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define SHARE_MIN 0.97 /* a repetition whose thread got less of its CPU is marked disturbed */

typedef struct series {
    double v[REPS_MAX];
    double share[REPS_MAX]; /* thread CPU time / wall time of the repetition (min over threads) */
    int n;
} series_t;

static void series_add(series_t *s, double x, double share)
{
    if (s->n < REPS_MAX) {
        s->share[s->n] = share;
        s->v[s->n++] = x;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct summary {
    double median, min, max;
} summary_t;

static summary_t summarize(const series_t *s)
{
    double v[REPS_MAX];
    memcpy(v, s->v, sizeof(double) * (size_t)s->n);
    qsort(v, (size_t)s->n, sizeof(double), cmp_double);
    double med = s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
    return (summary_t){med, v[0], v[s->n - 1]};
}

/* "<label>: 11.2 ns/decision (median of 5, min 10.9, max 12.0)", and a mark when some
 * repetitions ran with less than SHARE_MIN of a CPU. */
static summary_t report(const char *label, const series_t *s, const char *unit, int digits)
{
    summary_t m = summarize(s);
    int disturbed = 0;
    double low = 1.0;
    for (int i = 0; i < s->n; i++) {
        disturbed += s->share[i] < SHARE_MIN;
        low = s->share[i] < low ? s->share[i] : low;
    }
    printf("%s: %.*f %s (median of %d, min %.*f, max %.*f)", label, digits, m.median, unit, s->n,
           digits, m.min, digits, m.max);
    if (disturbed)
        printf(" [%d of %d reps disturbed: CPU share down to %.2f]", disturbed, s->n, low);
    printf("\n");
    return m;
}

/* Runnable tasks other than this benchmark at start: other work on a 2-CPU VM moves figures. */
static void print_load(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l1 = 0;
    int running = 0, total = 0;
    if (f != NULL && fscanf(f, "%lf %*f %*f %d/%d", &l1, &running, &total) == 3)
        printf("load: loadavg(1 min) %.2f, runnable tasks besides this one: %d\n", l1, running - 1);
    if (f != NULL)
        fclose(f);
}

static void print_command(const char *what)
{
    printf("== %s\ncommand: %s\n", what, opt.command);
    print_load();
    fflush(stdout);
}

static void read_first_line(const char *path, const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[192];
    while (fgets(line, sizeof(line), f)) {
        if (prefix == NULL || strncmp(line, prefix, strlen(prefix)) == 0) {
            char *p = prefix ? strchr(line, ':') : line;
            p = p ? p + (prefix ? 1 : 0) : line;
            while (*p == ' ' || *p == '\t')
                p++;
            p[strcspn(p, "\n")] = 0;
            snprintf(out, cap, "%s", p);
            break;
        }
    }
    fclose(f);
}

static void print_machine(void)
{
    char cpu[256], thp[256], date[64];
    struct utsname u;
    time_t t = time(NULL);
    read_first_line("/proc/cpuinfo", "model name", cpu, sizeof(cpu));
    read_first_line("/sys/kernel/mm/transparent_hugepage/enabled", NULL, thp, sizeof(thp));
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
    uname(&u);
    printf("machine: cpu \"%s\", nproc %ld, kernel %s %s, THP %s\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, thp);
    printf("build: libsluice %s, %s, build type %s, flags \"%s\"; date %s\n", SL_VERSION_STRING,
           "gcc " __VERSION__, SLUICE_BENCH_BUILD_TYPE, SLUICE_BENCH_FLAGS, date);
    fflush(stdout);
}

static bool pin_to_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

/* ---- memory readings --------------------------------------------------------------------- */

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f == NULL || fscanf(f, "%lu %lu", &size, &resident) != 2)
        die("/proc/self/statm", 0);
    fclose(f);
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* A "Key:   123 kB" line of a /proc file, in bytes; 0 when absent. */
static size_t proc_kb_field(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    size_t kb = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
            kb = strtoull(line + strlen(key) + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

/* ---- keys and random streams ------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Key i: 16 lowercase hex digits of a bijection of i, so distinct i give distinct keys (and no
 * key has a zero byte, which the floor uses as its empty marker). */
static void key_of(uint64_t i, unsigned char out[KEY_LEN])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = splitmix64(i ^ (opt.seed << 40));
    for (unsigned j = 0; j < KEY_LEN; j++)
        out[j] = (unsigned char)hex[(v >> (4 * j)) & 15];
}

typedef unsigned char key16_t[KEY_LEN];

static key16_t *make_keys(size_t n)
{
    key16_t *keys = huge_alloc(n * sizeof(key16_t));
    for (size_t i = 0; i < n; i++)
        key_of(i, keys[i]);
    return keys;
}

/* Uniform in [0, n). */
static uint64_t rand_below(uint64_t *state, uint64_t n)
{
    *state += UINT64_C(0x9e3779b97f4a7c15);
    uint64_t r = splitmix64(*state);
    return (uint64_t)(((__uint128_t)r * n) >> 64);
}

/* A request stream: `ops` keys picked uniformly from keys[0..n), copied in order. */
static key16_t *make_stream(const key16_t *keys, size_t n, size_t ops, uint64_t stream_seed)
{
    key16_t *s = huge_alloc(ops * sizeof(key16_t));
    uint64_t st = splitmix64(stream_seed ^ opt.seed);
    for (size_t i = 0; i < ops; i++)
        memcpy(s[i], keys[rand_below(&st, n)], KEY_LEN);
    return s;
}

/* ---- hot: one key, one thread ------------------------------------------------------------ */

/* The rule of every hot case: 1000 per second, offered at half that rate (one decision per
 * 2 ms of synthetic time), so every decision is admitted and writes its state. */
#define HOT_LIMIT   1000
#define HOT_WINDOW  SL_NS_PER_SEC
#define HOT_STEP_NS (2 * SL_NS_PER_MS)

typedef enum hot_kind { HOT_DECIDE, HOT_TABLE, HOT_HOLD, HOT_HASH, HOT_LOCK } hot_kind_t;

typedef struct hot_case {
    hot_kind_t kind;
    char label[64];
    sl_rule_t rule;
    void *state;       /* HOT_DECIDE: caller-owned state */
    sl_table_t *table; /* HOT_TABLE */
    int64_t now_ns;    /* synthetic time, carried across repetitions */
    uint64_t allowed, decided;
    double share; /* CPU share of the last run */
    series_t ns;
} hot_case_t;

static const unsigned char hot_key[KEY_LEN + 1] = "hot-key:00000001";
static volatile uint64_t sink;

static double hot_run(hot_case_t *c, size_t iters)
{
    sl_decision_t d;
    uint64_t ok = 0, acc = 0;
    int64_t now = c->now_ns;
    double c0 = thread_cpu_s(), t0 = mono_s();
    switch (c->kind) {
    case HOT_DECIDE:
        for (size_t i = 0; i < iters; i++) {
            now += HOT_STEP_NS;
            sl_decide(&c->rule, c->state, 1, now, &d);
            ok += d.allowed;
        }
        break;
    case HOT_TABLE:
        /* a new table (new seed, new arrays) per run: where the slot lands relative to cache
         * lines and to the stack moves this figure by a few ns, so the runs sample layouts */
        sl_table_free(c->table);
        check(sl_table_create(&c->rule, NULL, &c->table), "sl_table_create");
        c0 = thread_cpu_s();
        t0 = mono_s();
        for (size_t i = 0; i < iters; i++) {
            now += HOT_STEP_NS;
            if (sl_table_decide(c->table, hot_key, KEY_LEN, 1, now, &d) != SL_OK)
                die("sl_table_decide", SL_EINVAL);
            ok += d.allowed;
        }
        break;
    case HOT_HOLD:
        /* an in-flight rule: one acquire and its release per iteration, as a request that
         * holds a slot for its duration; figures are per pair */
        sl_table_free(c->table);
        check(sl_table_create(&c->rule, NULL, &c->table), "sl_table_create");
        c0 = thread_cpu_s();
        t0 = mono_s();
        for (size_t i = 0; i < iters; i++) {
            sl_hold_t h;
            now += HOT_STEP_NS;
            if (sl_table_acquire(c->table, hot_key, KEY_LEN, 1, 0, now, &d, &h) != SL_OK ||
                sl_table_release(c->table, hot_key, KEY_LEN, h.id, now, &d, &h) != SL_OK)
                die("sl_table_acquire/release", SL_EINVAL);
            ok += h.id != 0;
        }
        break;
    case HOT_HASH: {
        uint64_t seed = 0x1234;
        for (size_t i = 0; i < iters; i++) {
            __asm__ volatile("" : "+r"(seed)); /* recompute every time */
            acc += sl_hash64(hot_key, KEY_LEN, seed);
        }
        ok = iters;
        break;
    }
    case HOT_LOCK: {
        /* the pair table.c takes per decision, uncontended: xchg acquire + store release */
        static unsigned lock;
        for (size_t i = 0; i < iters; i++) {
            while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE) != 0)
                ;
            __asm__ volatile("" ::: "memory");
            __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
        }
        ok = iters;
        break;
    }
    }
    double el = mono_s() - t0;
    c->share = (thread_cpu_s() - c0) / el;
    sink += acc;
    c->now_ns = now;
    c->allowed += ok;
    c->decided += iters;
    return el * 1e9 / (double)iters;
}

static int cmd_hot(void)
{
    static const sl_algorithm_t all[] = {SL_GCRA,           SL_TOKEN_BUCKET,    SL_FIXED_WINDOW,
                                         SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS, SL_SLIDING_LOG};
    static const sl_algorithm_t tabled[] = {SL_GCRA, SL_TOKEN_BUCKET, SL_FIXED_WINDOW};
    hot_case_t cases[16];
    int n = 0;
    print_command("hot key: one 16-byte key, one thread, pinned to CPU 0");
    printf("rule: limit %d per 1 s, one decision of cost 1 per 2 ms of synthetic time "
           "(half the rate: every decision admitted, state written); %zu decisions per rep; "
           "table cases use a new table (new seed and arrays) every rep\n",
           HOT_LIMIT, opt.iters);

    for (size_t a = 0; a < sizeof(tabled) / sizeof(tabled[0]); a++) {
        hot_case_t *c = &cases[n++];
        *c = (hot_case_t){.kind = HOT_TABLE, .now_ns = NOW0_NS};
        check(sl_rule_init(&c->rule, tabled[a], HOT_LIMIT, HOT_WINDOW), "sl_rule_init");
        snprintf(c->label, sizeof(c->label), "hot_key %s table", sl_algorithm_name(tabled[a]));
    }
    for (size_t a = 0; a < sizeof(all) / sizeof(all[0]); a++) {
        hot_case_t *c = &cases[n++];
        *c = (hot_case_t){.kind = HOT_DECIDE, .now_ns = NOW0_NS};
        check(sl_rule_init(&c->rule, all[a], HOT_LIMIT, HOT_WINDOW), "sl_rule_init");
        c->state = aligned_alloc(64, (sl_state_size(&c->rule) + 63) / 64 * 64);
        memset(c->state, 0, sl_state_size(&c->rule));
        snprintf(c->label, sizeof(c->label), "hot_key %s sl_decide", sl_algorithm_name(all[a]));
    }
    hot_case_t *hold = &cases[n++];
    *hold = (hot_case_t){
        .kind = HOT_HOLD, .now_ns = NOW0_NS, .label = "hot_key concurrency table acquire+release"};
    check(sl_rule_init(&hold->rule, SL_CONCURRENCY, HOT_LIMIT, HOT_WINDOW), "sl_rule_init");
    cases[n++] = (hot_case_t){.kind = HOT_HASH, .label = "component sl_hash64(16 B)"};
    cases[n++] = (hot_case_t){.kind = HOT_LOCK, .label = "component lock+unlock (uncontended)"};

    for (int i = 0; i < n; i++)
        hot_run(&cases[i], opt.iters / 4); /* warm-up */
    for (int r = 0; r < opt.reps; r++)
        for (int i = 0; i < n; i++)
            series_add(&cases[i].ns, hot_run(&cases[i], opt.iters), cases[i].share);

    summary_t gcra_table = {0}, gcra_decide = {0}, hold_pair = {0};
    for (int i = 0; i < n; i++) {
        hot_case_t *c = &cases[i];
        summary_t m = report(c->label, &c->ns,
                             c->kind == HOT_HASH || c->kind == HOT_LOCK ? "ns/op"
                             : c->kind == HOT_HOLD                      ? "ns/pair"
                                                                        : "ns/decision",
                             1);
        if (c->kind == HOT_HOLD)
            hold_pair = m;
        if (c->kind == HOT_TABLE || c->kind == HOT_DECIDE || c->kind == HOT_HOLD)
            printf("    admitted %.1f%% of %" PRIu64 " decisions, state %zu bytes\n",
                   100.0 * (double)c->allowed / (double)c->decided, c->decided,
                   sl_state_size(&c->rule));
        if (c->kind == HOT_TABLE && c->rule.algorithm == SL_GCRA) {
            gcra_table = m;
            printf("    target <= 15 ns: %s (%.2fx the target); published peer: Go x/time/rate "
                   "32 ns single bucket (not measured here): %.2fx of it\n",
                   m.median <= 15.0 ? "met" : "MISSED", m.median / 15.0, m.median / 32.0);
        }
        if (c->kind == HOT_DECIDE && c->rule.algorithm == SL_GCRA)
            gcra_decide = m;
    }
    printf("gcra table overhead over sl_decide: %.1f ns/decision (medians)\n",
           gcra_table.median - gcra_decide.median);
    printf("acquire+release pair / gcra table decision: %.2fx (medians; target <= 3x: %s)\n",
           hold_pair.median / gcra_table.median,
           hold_pair.median <= 3 * gcra_table.median ? "met" : "MISSED");
    for (int i = 0; i < n; i++) {
        sl_table_free(cases[i].table);
        free(cases[i].state);
    }
    return 0;
}

/* ---- the floor: a flat open-addressing array, same hash, no lock ------------------------- */

typedef struct floor_entry {
    unsigned char key[KEY_LEN]; /* all zero = empty (benchmark keys have no zero byte) */
    int64_t state;              /* gcra TAT, ns */
} floor_entry_t;                /* 24 bytes */

typedef struct flat {
    floor_entry_t *e;
    uint32_t cap;  /* entries */
    uint64_t seed; /* hash seed */
    size_t bytes;  /* mapped bytes */
} flat_t;

static inline bool key_eq16(const unsigned char *a, const unsigned char *b)
{
    return sl_hash_r64(a) == sl_hash_r64(b) && sl_hash_r64(a + 8) == sl_hash_r64(b + 8);
}

static inline uint32_t flat_home(const flat_t *f, uint64_t h)
{
    return (uint32_t)(((h & 0xffffffffu) * (uint64_t)f->cap) >> 32);
}

static void flat_create(flat_t *f, size_t keys, double load)
{
    f->cap = (uint32_t)((double)keys / load) + 1;
    f->bytes = (size_t)f->cap * sizeof(floor_entry_t);
    f->e = huge_alloc(f->bytes); /* zero-filled */
    f->seed = splitmix64(opt.seed ^ 0xf100f) | 1;
}

static void flat_insert(flat_t *f, const unsigned char *key, int64_t state)
{
    uint32_t i = flat_home(f, sl_hash64(key, KEY_LEN, f->seed));
    while (f->e[i].key[0] != 0)
        i = i + 1 == f->cap ? 0 : i + 1;
    memcpy(f->e[i].key, key, KEY_LEN);
    f->e[i].state = state;
}

/* Decides cost 1 for a key that is present; relaxed atomics keep two threads race-free. */
static inline int flat_decide(flat_t *f, const sl_rule_t *rule, const unsigned char *key,
                              uint64_t h, int64_t now, sl_decision_t *d)
{
    uint32_t i = flat_home(f, h);
    for (;;) {
        floor_entry_t *e = &f->e[i];
        if (key_eq16(e->key, key)) {
            int64_t st = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
            int rc = sl_decide(rule, &st, 1, now, d);
            if (d->allowed)
                __atomic_store_n(&e->state, st, __ATOMIC_RELAXED);
            return rc;
        }
        if (e->key[0] == 0)
            return SL_EINVAL; /* absent: a benchmark bug */
        i = i + 1 == f->cap ? 0 : i + 1;
    }
}

/* The lookup alone: finds the key and bumps its state, no sl_decide(). The pure memory cost. */
static inline int flat_touch(flat_t *f, const unsigned char *key, uint64_t h, int64_t now)
{
    uint32_t i = flat_home(f, h);
    for (;;) {
        floor_entry_t *e = &f->e[i];
        if (key_eq16(e->key, key)) {
            int64_t st = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
            __atomic_store_n(&e->state, st > now ? st + 1 : now, __ATOMIC_RELAXED);
            return SL_OK;
        }
        if (e->key[0] == 0)
            return SL_EINVAL;
        i = i + 1 == f->cap ? 0 : i + 1;
    }
}

static inline void flat_prefetch(const flat_t *f, uint64_t h)
{
    const char *p = (const char *)&f->e[flat_home(f, h)];
    __builtin_prefetch(p, 1, 3);
    __builtin_prefetch(p + sizeof(floor_entry_t) - 1, 1, 3);
}

/*
 * The floor with table.c's locking added: 64 spinlocks, one per 64-byte line, picked by the top
 * hash bits, taken (xchg acquire) and released (store release) around each decision exactly as
 * shard_lock()/shard_unlock() do. Not a target: a diagnostic that separates what the lock costs
 * on this machine from what the table's layout costs.
 */
#define FLAT_LOCKS 64u

typedef struct flat_lock {
    unsigned v;
} __attribute__((aligned(64))) flat_lock_t;

static flat_lock_t flat_locks[FLAT_LOCKS];

static inline void flat_lock(uint64_t h)
{
    unsigned *l = &flat_locks[h >> 58].v;
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) != 0)
        while (__atomic_load_n(l, __ATOMIC_RELAXED) != 0)
            cpu_relax();
}

static inline void flat_unlock(uint64_t h)
{
    __atomic_store_n(&flat_locks[h >> 58].v, 0, __ATOMIC_RELEASE);
}

/* The same contract as sl_table_decide_batch(), with a rolling prefetch PREFETCH_D ahead;
 * `locked` adds table.c's locking around each decision. */
static size_t flat_decide_batch(flat_t *f, const sl_rule_t *rule, sl_request_t *reqs, size_t n,
                                int64_t now, bool locked)
{
    uint64_t h[PREFETCH_D];
    size_t failed = 0, ahead = n < PREFETCH_D ? n : PREFETCH_D;
    for (size_t j = 0; j < ahead; j++) {
        h[j] = sl_hash64(reqs[j].key, KEY_LEN, f->seed);
        flat_prefetch(f, h[j]);
    }
    for (size_t j = 0; j < n; j++) {
        uint64_t hj = h[j % PREFETCH_D];
        if (j + PREFETCH_D < n) {
            uint64_t hn = sl_hash64(reqs[j + PREFETCH_D].key, KEY_LEN, f->seed);
            h[j % PREFETCH_D] = hn;
            flat_prefetch(f, hn);
        }
        if (locked)
            flat_lock(hj);
        reqs[j].status = flat_decide(f, rule, reqs[j].key, hj, now, &reqs[j].decision);
        if (locked)
            flat_unlock(hj);
        failed += reqs[j].status != SL_OK;
    }
    return failed;
}

/*
 * The machine's raw latency: a dependent pointer chase through a random cyclic permutation of
 * the 64-byte lines of a huge-page array (CHASE_MIB, larger than the LLC). Every load misses and
 * no two overlap, so this is one full DRAM round trip (plus a TLB walk when the page is cold).
 */
#define CHASE_MIB   256u
#define CHASE_STEPS 1000000u

typedef struct chase {
    char *base;
    size_t bytes;
    char *at;
} chase_t;

static void chase_build(chase_t *c)
{
    c->bytes = (size_t)CHASE_MIB << 20;
    c->base = huge_alloc(c->bytes);
    size_t n = c->bytes / 64;
    uint32_t *perm = huge_alloc(n * sizeof(uint32_t));
    uint64_t st = splitmix64(opt.seed ^ 0xc4a5e);
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rand_below(&st, i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(c->base + (size_t)perm[i] * 64, &(char *){c->base + (size_t)perm[(i + 1) % n] * 64},
               sizeof(char *));
    huge_free(perm, n * sizeof(uint32_t));
    c->at = c->base;
}

/* Returns ns per dependent load. */
static double chase_run(chase_t *c, double *share)
{
    char *p = c->at;
    double c0 = thread_cpu_s(), t0 = mono_s();
    for (unsigned i = 0; i < CHASE_STEPS; i++)
        p = *(char **)(void *)p; /* each line holds the address of the next */
    double el = mono_s() - t0;
    *share = (thread_cpu_s() - c0) / el;
    c->at = p;
    sink += (uintptr_t)p; /* keeps the loop */
    return el * 1e9 / CHASE_STEPS;
}

/* ---- the big table: --keys keys in one gcra table, plus the floor ------------------------ */

/* The floor's load factor: fixed, so the reference does not move when the table's layout does.
 * 0.80 is about where the sluice table sits at 10 M keys (its load cycles between 0.7 and 0.875
 * as shards grow by 1.25x at 7/8 full). */
#define FLOOR_LOAD 0.80

/* gcra, 10000 per minute (T = 6 ms, capacity 10001). Keys are inserted at NOW0 and timed phases
 * start there too, advancing 1 ns per decision, so no key is ever fresh (growth never reclaims
 * one, every timed decision finds its key) and no key comes near its capacity (every decision
 * is admitted and writes its state). */
#define BIG_LIMIT  10000
#define BIG_WINDOW (60 * SL_NS_PER_SEC)
#define BIG_NOW_NS NOW0_NS

typedef struct big {
    size_t n;
    key16_t *keys;
    sl_rule_t rule;
    sl_table_t *table;
    flat_t flat;
    size_t mem; /* sl_table_memory() after the inserts, bytes */
} big_t;

static void big_build(big_t *b)
{
    sl_decision_t d;
    double t0 = mono_s();
    b->n = opt.keys;
    b->keys = make_keys(b->n);
    double t1 = mono_s();
    check(sl_rule_init(&b->rule, SL_GCRA, BIG_LIMIT, BIG_WINDOW), "sl_rule_init");
    size_t thp0 = proc_kb_field("/proc/self/smaps_rollup", "AnonHugePages");
    check(sl_table_create(&b->rule, NULL, &b->table), "sl_table_create");
    for (size_t i = 0; i < b->n; i++) {
        int rc = sl_table_decide(b->table, b->keys[i], KEY_LEN, 1, NOW0_NS, &d);
        if (rc != SL_OK || !d.allowed)
            die("insert", rc != SL_OK ? rc : SL_EINVAL);
    }
    double t2 = mono_s();
    size_t thp1 = proc_kb_field("/proc/self/smaps_rollup", "AnonHugePages");
    size_t count = sl_table_count(b->table), mem = sl_table_memory(b->table);
    if (count != b->n)
        die("table lost keys during inserts", SL_EINVAL);
    b->mem = mem;
    flat_create(&b->flat, b->n, FLOOR_LOAD);
    int64_t tat;
    for (size_t i = 0; i < b->n; i++) {
        check(sl_table_get(b->table, b->keys[i], KEY_LEN, &tat), "sl_table_get");
        flat_insert(&b->flat, b->keys[i], tat);
    }
    double t3 = mono_s();
    size_t thp2 = proc_kb_field("/proc/self/smaps_rollup", "AnonHugePages");
    printf("setup: %zu keys generated in %.2f s; inserted into sluice in %.2f s (%.0f ns/insert "
           "incl. growth, information); sl_table_memory %.1f MiB (%.1f B/key), on huge pages "
           "%.1f MiB (%.0f%%)\n",
           b->n, t1 - t0, t2 - t1, (t2 - t1) * 1e9 / (double)b->n, (double)mem / 1048576.0,
           (double)mem / (double)b->n, (double)(thp1 - thp0) / 1048576.0,
           100.0 * (double)(thp1 - thp0) / (double)mem);
    printf("floor: %u entries x %zu B = %.1f MiB at load %.3f (fixed), built in "
           "%.2f s, on huge pages %.1f MiB (%.0f%%)\n",
           b->flat.cap, sizeof(floor_entry_t), (double)b->flat.bytes / 1048576.0,
           (double)b->n / b->flat.cap, t3 - t2, (double)(thp2 - thp1) / 1048576.0,
           100.0 * (double)(thp2 - thp1) / (double)b->flat.bytes);
    fflush(stdout);
}

typedef enum run_kind {
    RUN_SLUICE,
    RUN_SLUICE_BATCH,
    RUN_FLAT,
    RUN_FLAT_BATCH,
    RUN_FLAT_LOCKED,
    RUN_FLAT_LOCKED_BATCH,
    RUN_FLAT_TOUCH,
} run_kind_t;

typedef struct run {
    run_kind_t kind;
    size_t batch; /* batch kinds: requests per call */
    big_t *big;
    const key16_t *stream;
    size_t ops;
    int64_t now_ns; /* advances 1 ns per decision */
    uint64_t allowed, decided;
    double share; /* CPU share of the last run */
} run_t;

/* Runs the whole stream once; returns elapsed seconds. */
static double run_stream(run_t *r)
{
    big_t *b = r->big;
    sl_decision_t d;
    sl_request_t reqs[BATCH_MAX];
    uint64_t ok = 0;
    size_t failed = 0;
    int64_t now = r->now_ns;
    double c0 = thread_cpu_s(), t0 = mono_s();
    switch (r->kind) {
    case RUN_SLUICE:
        for (size_t i = 0; i < r->ops; i++) {
            failed += sl_table_decide(b->table, r->stream[i], KEY_LEN, 1, now++, &d) != SL_OK;
            ok += d.allowed;
        }
        break;
    case RUN_FLAT:
        for (size_t i = 0; i < r->ops; i++) {
            uint64_t h = sl_hash64(r->stream[i], KEY_LEN, b->flat.seed);
            failed += flat_decide(&b->flat, &b->rule, r->stream[i], h, now++, &d) != SL_OK;
            ok += d.allowed;
        }
        break;
    case RUN_FLAT_TOUCH:
        for (size_t i = 0; i < r->ops; i++) {
            uint64_t h = sl_hash64(r->stream[i], KEY_LEN, b->flat.seed);
            failed += flat_touch(&b->flat, r->stream[i], h, now++) != SL_OK;
        }
        ok += r->ops;
        break;
    case RUN_FLAT_LOCKED:
        for (size_t i = 0; i < r->ops; i++) {
            uint64_t h = sl_hash64(r->stream[i], KEY_LEN, b->flat.seed);
            flat_lock(h);
            failed += flat_decide(&b->flat, &b->rule, r->stream[i], h, now++, &d) != SL_OK;
            flat_unlock(h);
            ok += d.allowed;
        }
        break;
    case RUN_SLUICE_BATCH:
    case RUN_FLAT_BATCH:
    case RUN_FLAT_LOCKED_BATCH:
        for (size_t base = 0; base < r->ops; base += r->batch) {
            size_t m = r->ops - base < r->batch ? r->ops - base : r->batch;
            for (size_t j = 0; j < m; j++) { /* the caller's part; the callee fills the rest */
                reqs[j].key = r->stream[base + j];
                reqs[j].key_len = KEY_LEN;
                reqs[j].cost = 1;
            }
            if (r->kind == RUN_SLUICE_BATCH)
                failed += sl_table_decide_batch(b->table, reqs, m, now);
            else if (r->kind == RUN_FLAT_BATCH)
                failed += flat_decide_batch(&b->flat, &b->rule, reqs, m, now, false);
            else
                failed += flat_decide_batch(&b->flat, &b->rule, reqs, m, now, true);
            now += (int64_t)m;
            for (size_t j = 0; j < m; j++)
                ok += reqs[j].decision.allowed;
        }
        break;
    }
    double el = mono_s() - t0;
    r->share = (thread_cpu_s() - c0) / el;
    if (failed != 0)
        die("a timed decision failed", SL_EINVAL);
    r->now_ns = now;
    r->allowed += ok;
    r->decided += r->ops;
    return el;
}

/* "10M", "1M", "250k" or the number: names figures by their key count. */
static const char *keys_label(size_t n)
{
    static char buf[32];
    if (n % 1000000 == 0)
        snprintf(buf, sizeof(buf), "%zuM", n / 1000000);
    else if (n % 1000 == 0)
        snprintf(buf, sizeof(buf), "%zuk", n / 1000);
    else
        snprintf(buf, sizeof(buf), "%zu", n);
    return buf;
}

static int cmd_random(void)
{
    static const size_t batches[] = {16, 32, 64};
    enum { NB = sizeof(batches) / sizeof(batches[0]) };
    enum { NR = 2 + 2 * NB + 3 }; /* + floor+lock single and batch 32, floor lookup only */
    big_t b = {0};
    chase_t ch;
    print_command("random keys: one thread, pinned to CPU 0");
    printf("rule: gcra %d per 60 s; keys %zu x %u B; timed phase: %zu uniform random decisions "
           "(cost 1) per rep on existing keys, same stream for every case\n",
           BIG_LIMIT, opt.keys, KEY_LEN, opt.ops);
    big_build(&b);
    key16_t *stream = make_stream(b.keys, b.n, opt.ops, 1);
    chase_build(&ch);

    /* cases: sluice single, floor single, (sluice batch, floor batch) x NB, floor+lock x 2 */
    run_t runs[NR];
    series_t ns[NR] = {0}, chase_ns = {0};
    int nr = 0;
    runs[nr++] = (run_t){.kind = RUN_SLUICE};
    runs[nr++] = (run_t){.kind = RUN_FLAT};
    for (int k = 0; k < NB; k++) {
        runs[nr++] = (run_t){.kind = RUN_SLUICE_BATCH, .batch = batches[k]};
        runs[nr++] = (run_t){.kind = RUN_FLAT_BATCH, .batch = batches[k]};
    }
    runs[nr++] = (run_t){.kind = RUN_FLAT_LOCKED};
    runs[nr++] = (run_t){.kind = RUN_FLAT_LOCKED_BATCH, .batch = 32};
    runs[nr++] = (run_t){.kind = RUN_FLAT_TOUCH};
    for (int i = 0; i < nr; i++) {
        runs[i].big = &b;
        runs[i].stream = stream;
        runs[i].ops = opt.ops;
        runs[i].now_ns = BIG_NOW_NS;
    }
    double share;
    for (int i = 0; i < nr; i++)
        run_stream(&runs[i]); /* warm-up */
    chase_run(&ch, &share);
    for (int r = 0; r < opt.reps; r++) {
        for (int i = 0; i < nr; i++) {
            double el = run_stream(&runs[i]);
            series_add(&ns[i], el * 1e9 / (double)opt.ops, runs[i].share);
        }
        double lat = chase_run(&ch, &share);
        series_add(&chase_ns, lat, share);
    }

    char label[96];
    const char *kl = keys_label(opt.keys);
    snprintf(label, sizeof(label), "random_%s gcra sluice single", kl);
    summary_t m0 = report(label, &ns[0], "ns/decision", 1);
    snprintf(label, sizeof(label), "random_%s gcra floor  single", kl);
    summary_t f0 = report(label, &ns[1], "ns/decision", 1);
    series_t ratio = {0};
    for (int r = 0; r < opt.reps; r++)
        series_add(&ratio, ns[0].v[r] / ns[1].v[r],
                   ns[0].share[r] < ns[1].share[r] ? ns[0].share[r] : ns[1].share[r]);
    snprintf(label, sizeof(label), "random_%s gcra sluice/floor single", kl);
    report(label, &ratio, "x", 2);
    printf("    target <= 80 ns: %s (%.2fx the target); floor %.1f ns\n",
           m0.median <= 80.0 ? "met" : "MISSED", m0.median / 80.0, f0.median);
    for (int k = 0; k < NB; k++) {
        int si = 2 + 2 * k, fi = si + 1;
        snprintf(label, sizeof(label), "random_%s gcra sluice batch %zu", kl, batches[k]);
        summary_t m = report(label, &ns[si], "ns/decision", 1);
        snprintf(label, sizeof(label), "random_%s gcra floor  batch %zu", kl, batches[k]);
        report(label, &ns[fi], "ns/decision", 1);
        series_t rt = {0};
        for (int r = 0; r < opt.reps; r++)
            series_add(&rt, ns[si].v[r] / ns[fi].v[r],
                       ns[si].share[r] < ns[fi].share[r] ? ns[si].share[r] : ns[fi].share[r]);
        snprintf(label, sizeof(label), "random_%s gcra sluice/floor batch %zu", kl, batches[k]);
        report(label, &rt, "x", 2);
        printf("    target <= 50 ns: %s (%.2fx the target)\n", m.median <= 50.0 ? "met" : "MISSED",
               m.median / 50.0);
    }
    printf("diagnostics (information, not targets):\n");
    snprintf(label, sizeof(label), "random_%s gcra floor+lock single", kl);
    report(label, &ns[NR - 3], "ns/decision", 1);
    snprintf(label, sizeof(label), "random_%s gcra floor+lock batch 32", kl);
    report(label, &ns[NR - 2], "ns/decision", 1);
    snprintf(label, sizeof(label), "random_%s floor lookup+write only, no sl_decide, single", kl);
    report(label, &ns[NR - 1], "ns/lookup", 1);
    snprintf(label, sizeof(label), "dependent-load latency, %u MiB huge-page array", CHASE_MIB);
    report(label, &chase_ns, "ns/load", 1);
    uint64_t ok = 0, all = 0;
    for (int i = 0; i < nr; i++) {
        ok += runs[i].allowed;
        all += runs[i].decided;
    }
    printf("admitted %.2f%% of %" PRIu64 " timed decisions; keys still stored: %zu\n",
           100.0 * (double)ok / (double)all, all, sl_table_count(b.table));
    return 0;
}

/* ---- threads: the shared table, one thread vs two ---------------------------------------- */

typedef struct worker {
    run_t run;
    int cpu;
    bool pinned;
    pthread_barrier_t *start;
    double t_start, t_end;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    w->pinned = pin_to_cpu(w->cpu);
    pthread_barrier_wait(w->start);
    w->t_start = mono_s();
    run_stream(&w->run); /* sets w->run.share */
    w->t_end = mono_s();
    return NULL;
}

/* Runs `nthreads` workers (cpus 0..n-1) over their streams; returns decisions per second and
 * the smallest CPU share any of them had. */
static double run_threads(worker_t *ws, int nthreads, double *share)
{
    pthread_t th[2];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++) {
        ws[i].start = &bar;
        ws[i].cpu = i;
        if (pthread_create(&th[i], NULL, worker_main, &ws[i]) != 0)
            die("pthread_create", 0);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    double t0 = ws[0].t_start, t1 = ws[0].t_end;
    size_t total = 0;
    *share = 1.0;
    for (int i = 0; i < nthreads; i++) {
        *share = ws[i].run.share < *share ? ws[i].run.share : *share;
        if (!ws[i].pinned)
            printf("warning: thread %d could not be pinned to CPU %d\n", i, i);
        t0 = ws[i].t_start < t0 ? ws[i].t_start : t0;
        t1 = ws[i].t_end > t1 ? ws[i].t_end : t1;
        total += ws[i].run.ops;
    }
    return (double)total / (t1 - t0);
}

static int cmd_threads(void)
{
    static const struct {
        run_kind_t kind;
        size_t batch;
        const char *label;
    } kinds[] = {
        {RUN_SLUICE, 0, "sluice single"},
        {RUN_SLUICE_BATCH, 32, "sluice batch 32"},
        {RUN_FLAT, 0, "floor  single"},
        {RUN_FLAT_LOCKED, 0, "floor+lock single"}, /* diagnostic: table.c's locking alone */
    };
    enum { NK = sizeof(kinds) / sizeof(kinds[0]) };
    big_t b = {0};
    print_command("two threads on random keys: one shared table, threads pinned to CPUs 0 and 1");
    printf("rule: gcra %d per 60 s; keys %zu x %u B; %zu decisions per thread per rep, each "
           "thread its own uniform random stream; rate = all decisions / (last end - first "
           "start)\n",
           BIG_LIMIT, opt.keys, KEY_LEN, opt.ops);
    big_build(&b);
    key16_t *streams[2] = {make_stream(b.keys, b.n, opt.ops, 1),
                           make_stream(b.keys, b.n, opt.ops, 2)};

    worker_t ws[NK][2];
    series_t one[NK] = {0}, two[NK] = {0}, ratio[NK] = {0};
    for (int k = 0; k < NK; k++)
        for (int i = 0; i < 2; i++)
            ws[k][i] = (worker_t){.run = {.kind = kinds[k].kind,
                                          .batch = kinds[k].batch,
                                          .big = &b,
                                          .stream = streams[i],
                                          .ops = opt.ops,
                                          .now_ns = BIG_NOW_NS}};
    double s1, s2;
    for (int k = 0; k < NK; k++) { /* warm-up */
        run_threads(ws[k], 1, &s1);
        run_threads(ws[k], 2, &s2);
    }
    /* A pair in which a benchmark thread lost its CPU (another process on this 2-CPU VM, or the
     * host) measured that process, not the table: it is run again, up to PAIR_TRIES times. */
    enum { PAIR_TRIES = 4 };
    int retried = 0;
    for (int r = 0; r < opt.reps; r++) {
        for (int k = 0; k < NK; k++) {
            double r1 = 0, r2 = 0;
            for (int attempt = 0; attempt < PAIR_TRIES; attempt++) {
                r1 = run_threads(ws[k], 1, &s1) / 1e6;
                r2 = run_threads(ws[k], 2, &s2) / 1e6;
                if (s1 >= SHARE_MIN && s2 >= SHARE_MIN)
                    break;
                retried += attempt + 1 < PAIR_TRIES;
            }
            series_add(&one[k], r1, s1);
            series_add(&two[k], r2, s2);
            series_add(&ratio[k], r2 / r1, s1 < s2 ? s1 : s2);
        }
    }
    printf("disturbed (1T, 2T) pairs run again: %d\n", retried);
    char label[96];
    for (int k = 0; k < NK; k++) {
        snprintf(label, sizeof(label), "threads gcra %s 1 thread ", kinds[k].label);
        report(label, &one[k], "M decisions/s", 2);
        snprintf(label, sizeof(label), "threads gcra %s 2 threads", kinds[k].label);
        report(label, &two[k], "M decisions/s", 2);
        snprintf(label, sizeof(label), "threads gcra %s 2T/1T", kinds[k].label);
        summary_t m = report(label, &ratio[k], "x", 2);
        if (kinds[k].kind == RUN_SLUICE)
            printf("    target >= 1.8x: %s (%.2fx the target)\n",
                   m.median >= 1.8 ? "met" : "MISSED", m.median / 1.8);
    }
    printf("keys still stored: %zu\n", sl_table_count(b.table));
    return 0;
}

/* ---- memory: RSS growth per key ---------------------------------------------------------- */

static int cmd_memory(void)
{
    sl_algorithm_t alg;
    sl_rule_t rule;
    sl_table_t *t;
    sl_decision_t d;
    if (sl_algorithm_parse(opt.alg, strlen(opt.alg), &alg) != SL_OK || alg == SL_SLIDING_LOG) {
        fprintf(stderr, "bench_core memory: --alg must name an algorithm other than sliding_log "
                        "(use the slog subcommand)\n");
        return 2;
    }
    print_command("memory per key");
    check(sl_rule_init(&rule, alg, BIG_LIMIT, BIG_WINDOW), "sl_rule_init");
    printf("rule: %s %d per 60 s (state %zu B); keys %zu x %u B inserted at one synthetic time "
           "(none fresh, none reclaimed); table config: %s\n",
           opt.alg, BIG_LIMIT, sl_state_size(&rule), opt.keys, KEY_LEN,
           opt.presize ? "initial_keys = keys" : "defaults (grow from small)");

    key16_t *keys = make_keys(opt.keys); /* touched before the first reading */
    size_t rss0 = rss_bytes();
    size_t thp0 = proc_kb_field("/proc/self/smaps_rollup", "AnonHugePages");
    sl_table_config_t cfg = {.initial_keys = opt.presize ? opt.keys : 0};
    check(sl_table_create(&rule, &cfg, &t), "sl_table_create");
    double t0 = mono_s();
    for (size_t i = 0; i < opt.keys; i++) {
        int rc = sl_table_decide(t, keys[i], KEY_LEN, 1, NOW0_NS, &d);
        if (rc != SL_OK || !d.allowed)
            die("insert", rc != SL_OK ? rc : SL_EINVAL);
    }
    double el = mono_s() - t0;
    size_t rss1 = rss_bytes();
    size_t thp1 = proc_kb_field("/proc/self/smaps_rollup", "AnonHugePages");
    size_t hwm1 = proc_kb_field("/proc/self/status", "VmHWM");
    size_t count = sl_table_count(t), mem = sl_table_memory(t);
    double n = (double)opt.keys;
    char label[128];

    printf("keys stored %zu; inserts took %.2f s (%.0f ns/insert, information)\n", count, el,
           el * 1e9 / n);
    snprintf(label, sizeof(label), "memory %s%s RSS growth / keys", opt.alg,
             opt.presize ? " presized" : "");
    printf("%s: %.1f B/key (%zu keys, RSS %.1f -> %.1f MiB)\n", label, (double)(rss1 - rss0) / n,
           count, rss0 / 1048576.0, rss1 / 1048576.0);
    if (alg == SL_GCRA)
        printf("    target <= 40 B/key: %s (%.2fx the target)\n",
               (double)(rss1 - rss0) / n <= 40.0 ? "met" : "MISSED",
               (double)(rss1 - rss0) / n / 40.0);
    printf("memory %s%s sl_table_memory / keys: %.1f B/key\n", opt.alg,
           opt.presize ? " presized" : "", (double)mem / n);
    printf("    peak RSS growth during inserts (VmHWM): %.1f B/key; AnonHugePages grew %.1f MiB "
           "(%.0f%% of the RSS growth)\n",
           (double)(hwm1 > rss0 ? hwm1 - rss0 : 0) / n, ((double)thp1 - (double)thp0) / 1048576.0,
           100.0 * ((double)thp1 - (double)thp0) / (double)(rss1 - rss0));
    sl_table_free(t);
    huge_free(keys, opt.keys * sizeof(key16_t));
    return 0;
}

/* ---- slog: sliding_log bytes per entry and per key ------------------------------------------- */

typedef struct slog_fill {
    int64_t limit;
    size_t rss_growth, mem;
    sl_table_t *t;
} slog_fill_t;

/* Fills a sliding_log table of `limit` per 60 s: every key admits `limit` cost-1 requests 1 us
 * apart, so each holds exactly `limit` entries. The table is kept (freeing would blur the next
 * reading). */
static void slog_fill(slog_fill_t *f, const key16_t *keys, size_t n)
{
    sl_rule_t rule;
    sl_decision_t d;
    check(sl_rule_init(&rule, SL_SLIDING_LOG, f->limit, BIG_WINDOW), "sl_rule_init");
    size_t rss0 = rss_bytes();
    check(sl_table_create(&rule, NULL, &f->t), "sl_table_create");
    for (size_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < f->limit; j++) {
            int rc = sl_table_decide(f->t, keys[i], KEY_LEN, 1, NOW0_NS + j * SL_NS_PER_US, &d);
            if (rc != SL_OK || !d.allowed)
                die("sliding_log fill", rc != SL_OK ? rc : SL_EINVAL);
        }
        check(sl_table_decide(f->t, keys[i], KEY_LEN, 1, NOW0_NS + f->limit * SL_NS_PER_US, &d),
              "sliding_log saturation check");
        if (d.allowed)
            die("a saturated key admitted one more", SL_EINVAL);
    }
    f->rss_growth = rss_bytes() - rss0;
    f->mem = sl_table_memory(f->t);
}

/* One key's state after `requests` requests of `cost` 1 ms apart under limit per 60 s: the bytes
 * it holds (its entries), the buffer it needs for the next operation, its packed form, and the
 * older ring of one stamp per unit (8 + 8 N bytes whatever it held). */
static void slog_key(int64_t limit, int64_t requests, int64_t cost)
{
    sl_rule_t rule;
    sl_decision_t d;
    check(sl_rule_init(&rule, SL_SLIDING_LOG, limit, BIG_WINDOW), "sl_rule_init");
    size_t bytes = core_state_min(&rule);
    unsigned char *state = malloc(bytes);
    if (state == NULL)
        die("malloc", SL_ENOMEM);
    core_state_init(&rule, state, bytes);
    for (int64_t i = 0; i < requests; i++) {
        size_t need = core_state_need(&rule, state);
        if (need > bytes) { /* as a table grows a key's buffer */
            unsigned char *to = malloc(need);
            if (to == NULL)
                die("malloc", SL_ENOMEM);
            core_state_move(&rule, state, to, need);
            free(state);
            state = to;
            bytes = need;
        }
        core_decide(&rule, state, cost, NOW0_NS + i * SL_NS_PER_MS, &d);
        if (!d.allowed)
            die("sliding_log key fill", SL_EINVAL);
    }
    uint32_t entries;
    memcpy(&entries, state + 4, sizeof(entries)); /* the header's count (sliding_log.c) */
    unsigned char *packed = malloc(core_state_packed_need(&rule, state));
    if (packed == NULL)
        die("malloc", SL_ENOMEM);
    printf("key: limit %" PRId64 ", %" PRId64 " request%s of cost %" PRId64 ": %u entr%s, holds "
           "%zu B, needs %zu B with room for the next, packed %zu B; older ring %zu B (held "
           "now / older: %.3gx)\n",
           limit, requests, requests == 1 ? "" : "s", cost, entries, entries == 1 ? "y" : "ies",
           32 + 16 * (size_t)entries, core_state_need(&rule, state),
           sl_state_pack(&rule, state, packed), core_state_legacy_size(&rule),
           (double)(32 + 16 * (size_t)entries) / (double)core_state_legacy_size(&rule));
    free(packed);
    free(state);
}

static int cmd_slog(void)
{
    size_t n = opt.keys;
    print_command("sliding_log bytes per key");
    slog_key(SL_LOG_LIMIT_MAX, 1, 1000000);
    slog_key(opt.limit, opt.limit, 1);
    slog_key(opt.limit2, opt.limit2, 1);
    printf("rule: sliding_log, limit L per 60 s; %zu keys x %u B in a table, each saturated with "
           "L requests of cost 1 (L entries); L = %" PRId64 " and %" PRId64
           " (the slope between them is the per-entry part)\n",
           n, KEY_LEN, opt.limit, opt.limit2);
    key16_t *keys = make_keys(n);
    slog_fill_t a = {.limit = opt.limit}, b = {.limit = opt.limit2};
    slog_fill(&a, keys, n);
    slog_fill(&b, keys, n);
    double sa = (double)n * (double)a.limit, sb = (double)n * (double)b.limit;
    char label[128];
    for (int k = 0; k < 2; k++) {
        slog_fill_t *f = k ? &b : &a;
        double s = k ? sb : sa;
        snprintf(label, sizeof(label), "sliding_log L=%" PRId64 " RSS growth / entries", f->limit);
        printf("%s: %.2f B/entry total (%.1f B/key, %.0f entries); sl_table_memory / entries "
               "%.2f B/entry\n",
               label, (double)f->rss_growth / s, (double)f->rss_growth / (double)n, s,
               (double)f->mem / s);
    }
    double per_stamp = ((double)b.rss_growth - (double)a.rss_growth) / (sb - sa);
    double per_key = (double)a.rss_growth / (double)n - per_stamp * (double)a.limit;
    printf("sliding_log per-entry part (RSS slope L=%" PRId64 "->%" PRId64 "): %.2f B/entry; "
           "per-key overhead: %.1f B/key\n",
           a.limit, b.limit, per_stamp, per_key);
    printf("    target <= 16 B/entry + per-key overhead: %s (per-entry part %.2fx of 16)\n",
           per_stamp <= 16.1 ? "met" : "MISSED", per_stamp / 16.0);
    sl_table_free(a.t);
    sl_table_free(b.t);
    return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: bench_core hot|random|threads|memory|slog [options]\n"
        "  --reps N     timed repetitions per figure (default 5)\n"
        "  --keys N     distinct keys (default 10000000; slog: use 100000)\n"
        "  --ops N      decisions per timed rep (random, threads: per thread; default 4000000)\n"
        "  --iters N    decisions per timed rep for hot (default 10000000)\n"
        "  --alg NAME   memory: algorithm (default gcra)\n"
        "  --presize    memory: create the table with initial_keys = keys\n"
        "  --limit N    slog: limit (default 100); --limit2 N: second limit (default 200)\n"
        "  --seed N     key and stream seed (default 42)\n");
}

static unsigned long long arg_num(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != 0 || end == s) {
        fprintf(stderr, "bench_core: not a number: %s\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    size_t len = 0;
    for (int i = 0; i < argc && len < sizeof(opt.command) - 1; i++)
        len += (size_t)snprintf(opt.command + len, sizeof(opt.command) - len, "%s%s", i ? " " : "",
                                argv[i]);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (strcmp(a, "--presize") == 0)
            opt.presize = true;
        else if (strcmp(a, "--reps") == 0 && has)
            opt.reps = (int)arg_num(argv[++i]);
        else if (strcmp(a, "--keys") == 0 && has)
            opt.keys = arg_num(argv[++i]);
        else if (strcmp(a, "--ops") == 0 && has)
            opt.ops = arg_num(argv[++i]);
        else if (strcmp(a, "--iters") == 0 && has)
            opt.iters = arg_num(argv[++i]);
        else if (strcmp(a, "--alg") == 0 && has)
            opt.alg = argv[++i];
        else if (strcmp(a, "--limit") == 0 && has)
            opt.limit = (int64_t)arg_num(argv[++i]);
        else if (strcmp(a, "--limit2") == 0 && has)
            opt.limit2 = (int64_t)arg_num(argv[++i]);
        else if (strcmp(a, "--seed") == 0 && has)
            opt.seed = arg_num(argv[++i]);
        else {
            usage();
            return 2;
        }
    }
    if (opt.reps < 1 || opt.reps > REPS_MAX || opt.keys < 1 || opt.keys > UINT32_MAX / 2 ||
        opt.ops < 1 || opt.iters < 4 || opt.limit < 1 || opt.limit2 <= opt.limit) {
        fprintf(stderr, "bench_core: option out of range\n");
        return 2;
    }

    const char *cmd = argv[1];
    int (*fn)(void) = strcmp(cmd, "hot") == 0       ? cmd_hot
                      : strcmp(cmd, "random") == 0  ? cmd_random
                      : strcmp(cmd, "threads") == 0 ? cmd_threads
                      : strcmp(cmd, "memory") == 0  ? cmd_memory
                      : strcmp(cmd, "slog") == 0    ? cmd_slog
                                                    : NULL;
    if (fn == NULL) {
        usage();
        return 2;
    }
    if (fn != cmd_threads && !pin_to_cpu(0))
        printf("warning: could not pin to CPU 0\n");
    int rc = fn();
    print_machine();
    return rc;
}
