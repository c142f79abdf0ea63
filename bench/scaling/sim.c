/*
 * bench/scaling/sim.c - what each way of sharing a rule's state costs at scale: N sluiced nodes
 * deciding one rule for U users whose request rates follow a Zipf law, the keys' state in a
 * shared store (Redis with sluice.so), simulated request by request with libsluice's own
 * algorithms (sl_decide, sl_lease, sl_lease_return, sl_settle). Prints, per mode, the store
 * commands per decision, the cores of Redis and of sluiced at a CPU ceiling (from per-operation
 * costs measured by bench/redis/run.sh, given as options), what was admitted against strict,
 * and the most any key admitted in one window. Asserts nothing (docs/scaling.md reads it).
 *
 * Keys are independent: a key's decisions never depend on another key's. So the simulator runs
 * a sample of keys, each one completely, and weighs them: every rank up to --exact, then
 * --per-stratum ranks drawn uniformly from each stratum [2^j, 2^(j+1)) of the ranks above,
 * weighted by the stratum's size over the number drawn. A key gets the same arrivals, at the
 * same nodes, in every mode: its own generator, seeded by its rank and --seed.
 *
 * The modes (one row each):
 *   strict       every decision is a store command (SL.THROTTLE); a refused key is answered
 *                by the node's over-limit cache until its retry-after, as sluiced does
 *   leased       a node asks for a lease of n units (SL.LEASE), spends them locally until the
 *                lease ends, returns the unused ones then (SL.RETURN); n = ceil(1.25 * r * L)
 *                for the node's arrival rate r of the key (an EWMA over its lease requests),
 *                at most a quarter of what the store said remained; when that is 1 or less,
 *                the decision is strict (a lease of one unit would tie up its lease time for
 *                nothing); a token_bucket or gcra lease spent before its end gives its time
 *                back with the next request (SL.RETURN of 0 units); refusals are cached as in
 *                strict
 *   approximate  a node decides from the key's remaining as of its last sync less what it
 *                admitted since (a key new to the node is decided strictly, which tells it the
 *                remaining); it
 *                sends what it admitted every --sync-interval (a charge past the limit, as
 *                SL.SETTLE does) and gets the remaining back; a node deciding on a count older
 *                than one interval asks again at its next sync
 *   routed       the balancer sends each user to one node, which decides in its memory store:
 *                no command at all
 * "(hash)" after a mode: the balancer sends each user to one node; otherwise each request goes
 * to a node drawn at random.
 *
 * Simplifications (docs/scaling.md states them): a command's round trip takes no simulated
 * time, clocks agree, no node dies, the store never fails, a sync reaches the store at its tick.
 *
 *   sim --nodes 1000 --users 100000000 --zipf 0.8 --rate 50000000 --algorithm gcra \
 *       --limit 100 --window 60s
 *   sim --help
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#define NS_PER_S     INT64_C(1000000000)
#define STATE_WORDS  256 /* 2 KiB: the largest state this tool accepts */
#define NODES_MAX    100000
#define SAMPLE_MAX   100000
#define LEASE_GROWTH 1.25 /* a lease asks for this many times the units the rate predicts */
#define RATE_KEEP    0.5  /* EWMA: the old estimate's share at each new sample */

enum mode { MODE_STRICT, MODE_LEASED, MODE_LEASED_HASH, MODE_APPROX, MODE_ROUTED, MODES };
static const char *const mode_name[MODES] = {"strict", "leased", "leased (hash)", "approximate",
                                             "routed (memory)"};
static const bool mode_hash[MODES] = {false, false, true, false, true};

typedef struct costs {
    double redis_decide_us;    /* Redis CPU per SL.THROTTLE sent alone */
    double redis_lease_us;     /* Redis CPU per SL.LEASE / SL.RETURN sent alone */
    double redis_batched_us;   /* Redis CPU per command in a pipeline (syncs) */
    double sluiced_remote_us;  /* sluiced CPU per decision sent to the store */
    double sluiced_batched_us; /* sluiced CPU per command it pipelines (syncs) */
    double sluiced_local_us;   /* sluiced CPU per decision made locally */
} costs_t;

typedef struct opts {
    int64_t nodes, users, exact, per_stratum;
    double zipf_s, rate_per_s, ceiling;
    int64_t seconds, lease_ns, sync_ns;
    uint64_t seed;
    sl_rule_t rule;
    costs_t c;
} opts_t;

/* What one key did in one mode, counted over the measured span (the second half of the run)
 * except max_window, the most admitted in any window of the whole run. */
typedef struct tally {
    double decisions, admitted, local, cmd_decide, cmd_lease, cmd_return, cmd_sync;
    int64_t max_window;
} tally_t;

/* ---- a seeded generator (splitmix64) ------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng_t;

static uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static double rng_unit(rng_t *r)
{
    return ((double)(rng_next(r) >> 11) + 1.0) / 9007199254740992.0;
}

static uint64_t rng_below(rng_t *r, uint64_t n)
{
    return rng_next(r) % n;
}

/* ---- per-node state of one key ------------------------------------------------------------- */

typedef struct node {
    int64_t deny_until_ns; /* over-limit cache: refused here before this time */
    /* leased */
    sl_lease_t lease;  /* the lease held; granted 0: none */
    int64_t left;      /* its units not spent */
    uint32_t gen;      /* bumped when a lease ends, so stale heap entries are skipped */
    int64_t seen;      /* arrivals here since the last lease request */
    int64_t asked_ns;  /* the last lease request (-1: none yet) */
    double rate_per_s; /* the key's arrival rate here, estimated */
    int64_t remaining; /* what the store said remained at its last reply */
    /* approximate */
    int64_t delta;     /* units admitted here since the last sync */
    int64_t known;     /* remaining as of the last sync; -1: never synced */
    int64_t synced_ns; /* the last sync */
    bool queued;       /* a sync is due at the next tick */
} node_t;

/* A min-heap of (time, node, gen): leases' ends, or nodes' next sync ticks. */
typedef struct event {
    int64_t at_ns;
    uint32_t node, gen;
} event_t;

typedef struct heap {
    event_t *e;
    size_t n, cap;
} heap_t;

static void heap_push(heap_t *h, event_t ev)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->e = realloc(h->e, h->cap * sizeof *h->e);
        if (h->e == NULL) {
            perror("sim");
            exit(1);
        }
    }
    size_t i = h->n++;
    while (i > 0 && h->e[(i - 1) / 2].at_ns > ev.at_ns) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = ev;
}

static event_t heap_pop(heap_t *h)
{
    event_t top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->e[c + 1].at_ns < h->e[c].at_ns)
            c++;
        if (h->e[c].at_ns >= last.at_ns)
            break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n > 0)
        h->e[i] = last;
    return top;
}

/* The admitted times of one key within the last window: the most ever held is max_window. */
typedef struct window {
    int64_t *t;
    size_t head, n, cap;
    int64_t window_ns, max;
} window_t;

static void window_admit(window_t *w, int64_t now_ns)
{
    while (w->n > 0 && w->t[w->head] <= now_ns - w->window_ns) {
        w->head = (w->head + 1) % w->cap;
        w->n--;
    }
    if (w->n == w->cap) { /* grow, unrolling the ring */
        size_t cap = w->cap ? 2 * w->cap : 256;
        int64_t *t = malloc(cap * sizeof *t);
        if (t == NULL) {
            perror("sim");
            exit(1);
        }
        for (size_t i = 0; i < w->n; i++)
            t[i] = w->t[(w->head + i) % w->cap];
        free(w->t);
        w->t = t;
        w->cap = cap;
        w->head = 0;
    }
    w->t[(w->head + w->n) % w->cap] = now_ns;
    w->n++;
    if ((int64_t)w->n > w->max)
        w->max = (int64_t)w->n;
}

/* ---- one key, one mode ---------------------------------------------------------------------- */

typedef struct sim {
    const opts_t *o;
    enum mode mode;
    uint64_t state[STATE_WORDS]; /* the key's state in the store (or the owner's memory) */
    node_t *nodes;
    heap_t heap;
    window_t win;
    int64_t measure_from_ns;
    tally_t *t;
} sim_t;

/* How long until a cost of 1 is admitted, without charging: a decision on a copy. */
static int64_t retry_after_ns(sim_t *s, int64_t now_ns)
{
    uint64_t copy[STATE_WORDS];
    memcpy(copy, s->state, s->o->rule.state_size);
    sl_decision_t d;
    sl_decide(&s->o->rule, copy, 1, now_ns, &d);
    return d.allowed ? 0 : d.retry_after_ns < 0 ? s->o->rule.window_ns : d.retry_after_ns;
}

static void count(sim_t *s, int64_t now_ns, double *what)
{
    if (now_ns >= s->measure_from_ns)
        (*what)++;
}

/* A lease ends (or the next sync tick of a node comes): return its unused units. */
static void lease_end(sim_t *s, event_t ev)
{
    node_t *nd = &s->nodes[ev.node];
    if (ev.gen != nd->gen || nd->lease.granted == 0)
        return; /* this lease was spent and replaced, or ended already */
    if (nd->left > 0) {
        sl_decision_t d;
        sl_lease_return(&s->o->rule, s->state, &nd->lease, nd->left, ev.at_ns, &d);
        count(s, ev.at_ns, &s->t->cmd_return);
    }
    nd->lease.granted = 0;
    nd->left = 0;
    nd->gen++;
}

/* The first tick of node i's sync timer after now_ns: every node ticks every sync interval, at
 * a phase of its own. */
static int64_t next_tick_ns(const opts_t *o, uint32_t i, int64_t now_ns)
{
    int64_t phase = (int64_t)((i * UINT64_C(0x9e3779b97f4a7c15)) >> 11) % o->sync_ns;
    int64_t k = (now_ns - phase) / o->sync_ns + 1;
    return phase + k * o->sync_ns;
}

static void sync_tick(sim_t *s, event_t ev)
{
    node_t *nd = &s->nodes[ev.node];
    sl_decision_t d;
    sl_settle(&s->o->rule, s->state, 0, nd->delta, ev.at_ns, ev.at_ns, &d);
    count(s, ev.at_ns, &s->t->cmd_sync);
    nd->known = d.remaining;
    nd->synced_ns = ev.at_ns;
    nd->delta = 0;
    nd->queued = false;
}

static void queue_sync(sim_t *s, uint32_t i, int64_t now_ns)
{
    if (!s->nodes[i].queued) {
        s->nodes[i].queued = true;
        heap_push(&s->heap, (event_t){next_tick_ns(s->o, i, now_ns), i, 0});
    }
}

/* Decides one request at node i; returns whether it was admitted. */
static bool decide(sim_t *s, uint32_t i, int64_t now_ns)
{
    const sl_rule_t *rule = &s->o->rule;
    node_t *nd = &s->nodes[i];
    sl_decision_t d;
    switch (s->mode) {
    case MODE_ROUTED:
        count(s, now_ns, &s->t->local);
        sl_decide(rule, s->state, 1, now_ns, &d);
        return d.allowed;
    case MODE_STRICT:
        if (now_ns < nd->deny_until_ns) {
            count(s, now_ns, &s->t->local);
            return false;
        }
        count(s, now_ns, &s->t->cmd_decide);
        sl_decide(rule, s->state, 1, now_ns, &d);
        if (!d.allowed)
            nd->deny_until_ns =
                now_ns + (d.retry_after_ns < 0 ? rule->window_ns : d.retry_after_ns);
        return d.allowed;
    case MODE_APPROX: {
        if (nd->known < 0) { /* the key is new here: a strict decision, whose reply is a count */
            count(s, now_ns, &s->t->cmd_decide);
            sl_decide(rule, s->state, 1, now_ns, &d);
            nd->known = d.remaining;
            nd->synced_ns = now_ns;
            return d.allowed;
        }
        count(s, now_ns, &s->t->local);
        int64_t known = nd->known;
        if (now_ns - nd->synced_ns > s->o->sync_ns)
            queue_sync(s, i, now_ns); /* decide on the old count, ask again at the next tick */
        if (known - nd->delta < 1)
            return false;
        nd->delta++;
        queue_sync(s, i, now_ns);
        return true;
    }
    default: /* MODE_LEASED, MODE_LEASED_HASH */
        nd->seen++;
        if (now_ns < nd->deny_until_ns) {
            count(s, now_ns, &s->t->local);
            return false;
        }
        if (nd->lease.granted > 0 && nd->left > 0 && now_ns < nd->lease.until_ns) {
            nd->left--;
            count(s, now_ns, &s->t->local);
            return true;
        }
        if (nd->lease.granted > 0) { /* spent before its end */
            if (nd->lease.until_ns - now_ns >= rule->interval_ns && rule->interval_ns > 0) {
                /* token_bucket/gcra: the lease's time not run is worth a unit or more; give
                 * it back with the next request (one round trip, two commands) */
                sl_lease_return(rule, s->state, &nd->lease, 0, now_ns, &d);
                count(s, now_ns, &s->t->cmd_return);
            }
            nd->lease.granted = 0;
            nd->gen++;
        }
        if (nd->asked_ns >= 0 && now_ns > nd->asked_ns) {
            double sample = (double)nd->seen * (double)NS_PER_S / (double)(now_ns - nd->asked_ns);
            nd->rate_per_s =
                nd->rate_per_s > 0 ? RATE_KEEP * nd->rate_per_s + (1 - RATE_KEEP) * sample : sample;
        }
        nd->asked_ns = now_ns;
        nd->seen = 0;
        double predicted = LEASE_GROWTH * nd->rate_per_s * (double)s->o->lease_ns / NS_PER_S;
        int64_t want = (int64_t)ceil(predicted);
        int64_t cap = nd->remaining / 4;
        if (want > cap)
            want = cap;
        if (want <= 1) { /* a lease of one unit is a strict decision, without the lease time */
            count(s, now_ns, &s->t->cmd_decide);
            sl_decide(rule, s->state, 1, now_ns, &d);
            nd->remaining = d.remaining;
            if (!d.allowed)
                nd->deny_until_ns =
                    now_ns + (d.retry_after_ns < 0 ? rule->window_ns : d.retry_after_ns);
            return d.allowed;
        }
        sl_lease_t g;
        count(s, now_ns, &s->t->cmd_lease);
        if (sl_lease(rule, s->state, want, s->o->lease_ns, now_ns, &g) != SL_OK) {
            fprintf(stderr, "sim: this rule cannot be leased (%s)\n",
                    sl_algorithm_name(rule->algorithm));
            exit(2);
        }
        nd->remaining = g.remaining;
        if (g.granted == 0) {
            nd->deny_until_ns = now_ns + retry_after_ns(s, now_ns);
            return false;
        }
        nd->lease = g;
        nd->left = g.granted - 1;
        heap_push(&s->heap, (event_t){g.until_ns, i, nd->gen});
        return true;
    }
}

/* Runs one key (arrival rate lambda_per_s, rank `rank`) in mode m, adding to *t. */
static void run_key(sim_t *s, enum mode m, double lambda_per_s, uint64_t rank, tally_t *t)
{
    const opts_t *o = s->o;
    s->mode = m;
    s->t = t;
    memset(s->state, 0, sizeof s->state);
    for (int64_t i = 0; i < o->nodes; i++)
        s->nodes[i] = (node_t){.asked_ns = -1, .remaining = o->rule.capacity, .known = -1};
    s->heap.n = 0;
    s->win.n = s->win.head = 0;
    s->win.max = 0;
    rng_t r = {o->seed ^ (rank * UINT64_C(0xd1b54a32d192ed03))};
    uint32_t owner = (uint32_t)rng_below(&r, (uint64_t)o->nodes);
    int64_t end_ns = o->seconds * NS_PER_S;
    double t_ns = 0;
    for (;;) {
        t_ns += -log(rng_unit(&r)) * (double)NS_PER_S / lambda_per_s;
        uint32_t at = (uint32_t)rng_below(&r, (uint64_t)o->nodes);
        if (t_ns >= (double)end_ns)
            break;
        int64_t now = (int64_t)t_ns;
        while (s->heap.n > 0 && s->heap.e[0].at_ns <= now) {
            event_t ev = heap_pop(&s->heap);
            if (m == MODE_APPROX)
                sync_tick(s, ev);
            else
                lease_end(s, ev);
        }
        uint32_t node = mode_hash[m] ? owner : at;
        count(s, now, &t->decisions);
        if (decide(s, node, now)) {
            count(s, now, &t->admitted);
            window_admit(&s->win, now);
        }
    }
    if (s->win.max > t->max_window)
        t->max_window = s->win.max;
}

/* ---- the population ------------------------------------------------------------------------ */

/* sum_{i=1..n} i^-s: exact up to 10^6 terms, then the integral of the rest (Euler-Maclaurin's
 * first correction), good to far better than the simulation's sampling. */
static double harmonic(int64_t n, double s)
{
    int64_t exact = n < 1000000 ? n : 1000000;
    double h = 0;
    for (int64_t i = exact; i >= 1; i--)
        h += pow((double)i, -s);
    if (n > exact) {
        double a = (double)exact + 0.5, b = (double)n + 0.5;
        h += s == 1.0 ? log(b / a) : (pow(b, 1 - s) - pow(a, 1 - s)) / (1 - s);
    }
    return h;
}

typedef struct sample {
    uint64_t rank;
    double weight;
} sample_t;

/* Every rank up to o->exact, then o->per_stratum from each stratum [2^j, 2^(j+1)) above. */
static size_t draw_sample(const opts_t *o, sample_t *out)
{
    rng_t r = {o->seed ^ UINT64_C(0x5ca1ab1e)};
    size_t n = 0;
    for (int64_t k = 1; k <= o->exact && k <= o->users && n < SAMPLE_MAX; k++)
        out[n++] = (sample_t){(uint64_t)k, 1.0};
    for (int64_t lo = 1; lo <= o->users; lo *= 2) {
        int64_t hi = lo * 2 - 1 < o->users ? lo * 2 - 1 : o->users; /* [lo, hi] */
        if (hi <= o->exact)
            continue;
        int64_t from = lo > o->exact ? lo : o->exact + 1, size = hi - from + 1;
        int64_t take = size < o->per_stratum ? size : o->per_stratum;
        for (int64_t k = 0; k < take && n < SAMPLE_MAX; k++) {
            uint64_t rank = take == size ? (uint64_t)(from + k)
                                         : (uint64_t)from + rng_below(&r, (uint64_t)size);
            out[n++] = (sample_t){rank, (double)size / (double)take};
        }
    }
    return n;
}

/* ---- options and output -------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: sim [options]   (every option has a default: the capacity plan's case)\n"
               "  --nodes N              sluiced nodes (1000)\n"
               "  --users U              users, ranked by popularity (100000000)\n"
               "  --zipf S               Zipf exponent of the users' request rates (0.8)\n"
               "  --rate R               requests per second, all users (50000000)\n"
               "  --algorithm A --limit N --window D [--burst B]   the rule (gcra 100 per 60s)\n"
               "  --seconds T            simulated; the second half is measured (120)\n"
               "  --lease-time D         leased: a lease's time (1s)\n"
               "  --sync-interval D      approximate: each node's sync period (100ms)\n"
               "  --exact K              ranks simulated one by one (64)\n"
               "  --per-stratum M        ranks drawn from each power-of-two stratum above (48)\n"
               "  --ceiling F            CPU share each core may use (0.5)\n"
               "  --seed X               (1)\n"
               "  costs, microseconds of CPU (defaults: docs/scaling.md's measurements):\n"
               "  --redis-decide-us --redis-lease-us --redis-batched-us\n"
               "  --sluiced-remote-us --sluiced-batched-us --sluiced-local-us\n");
}

static int64_t parse_duration(const char *flag, const char *v)
{
    int64_t ns;
    if (sl_duration_parse(v, strlen(v), &ns) != SL_OK || ns <= 0) {
        fprintf(stderr, "sim: %s: not a duration: '%s'\n", flag, v);
        exit(2);
    }
    return ns;
}

static double parse_number(const char *flag, const char *v)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(x >= 0)) {
        fprintf(stderr, "sim: %s: not a number >= 0: '%s'\n", flag, v);
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, opts_t *o)
{
    const char *alg = "gcra";
    int64_t limit = 100, window_ns = 60 * NS_PER_S, burst = SL_DEFAULT;
    *o = (opts_t){.nodes = 1000,
                  .users = 100000000,
                  .exact = 64,
                  .per_stratum = 48,
                  .zipf_s = 0.8,
                  .rate_per_s = 5e7,
                  .ceiling = 0.5,
                  .seconds = 120,
                  .lease_ns = NS_PER_S,
                  .sync_ns = NS_PER_S / 10,
                  .seed = 1,
                  .c = {.redis_decide_us = 11.70,
                        .redis_lease_us = 11.70,
                        .redis_batched_us = 3.80,
                        .sluiced_remote_us = 10.20,
                        .sluiced_batched_us = 2.38,
                        .sluiced_local_us = 0.99}};
    struct {
        const char *flag;
        double *d;
        int64_t *i;
        int64_t *ns;
    } table[] = {
        {"--nodes", NULL, &o->nodes, NULL},
        {"--users", NULL, &o->users, NULL},
        {"--zipf", &o->zipf_s, NULL, NULL},
        {"--rate", &o->rate_per_s, NULL, NULL},
        {"--limit", NULL, &limit, NULL},
        {"--burst", NULL, &burst, NULL},
        {"--window", NULL, NULL, &window_ns},
        {"--seconds", NULL, &o->seconds, NULL},
        {"--lease-time", NULL, NULL, &o->lease_ns},
        {"--sync-interval", NULL, NULL, &o->sync_ns},
        {"--exact", NULL, &o->exact, NULL},
        {"--per-stratum", NULL, &o->per_stratum, NULL},
        {"--ceiling", &o->ceiling, NULL, NULL},
        {"--redis-decide-us", &o->c.redis_decide_us, NULL, NULL},
        {"--redis-lease-us", &o->c.redis_lease_us, NULL, NULL},
        {"--redis-batched-us", &o->c.redis_batched_us, NULL, NULL},
        {"--sluiced-remote-us", &o->c.sluiced_remote_us, NULL, NULL},
        {"--sluiced-batched-us", &o->c.sluiced_batched_us, NULL, NULL},
        {"--sluiced-local-us", &o->c.sluiced_local_us, NULL, NULL},
    };
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "sim: %s needs a value (--help lists the options)\n", argv[a]);
            exit(2);
        }
        const char *flag = argv[a], *v = argv[++a];
        if (strcmp(flag, "--algorithm") == 0) {
            alg = v;
            continue;
        }
        if (strcmp(flag, "--seed") == 0) {
            o->seed = (uint64_t)parse_number(flag, v);
            continue;
        }
        size_t k = 0;
        while (k < sizeof table / sizeof *table && strcmp(table[k].flag, flag) != 0)
            k++;
        if (k == sizeof table / sizeof *table) {
            fprintf(stderr, "sim: unknown option %s (--help lists them)\n", flag);
            exit(2);
        }
        if (table[k].d != NULL)
            *table[k].d = parse_number(flag, v);
        else if (table[k].i != NULL)
            *table[k].i = (int64_t)parse_number(flag, v);
        else
            *table[k].ns = parse_duration(flag, v);
    }
    sl_algorithm_t a;
    if (sl_algorithm_parse(alg, strlen(alg), &a) != SL_OK) {
        fprintf(stderr, "sim: --algorithm: unknown '%s'\n", alg);
        exit(2);
    }
    o->rule = (sl_rule_t){.algorithm = a,
                          .limit = limit,
                          .window_ns = window_ns,
                          .burst = burst,
                          .buckets = SL_DEFAULT};
    if (sl_rule_prepare(&o->rule) != SL_OK ||
        sl_state_size(&o->rule) > sizeof(uint64_t) * STATE_WORDS) {
        fprintf(stderr, "sim: the rule is refused (%s)\n", sl_strerror(sl_rule_prepare(&o->rule)));
        exit(2);
    }
    if (o->nodes < 1 || o->nodes > NODES_MAX || o->users < 1 || o->rate_per_s <= 0 ||
        o->seconds < 2 || o->exact < 0 || o->per_stratum < 1 || o->ceiling <= 0 || o->ceiling > 1) {
        fprintf(stderr,
                "sim: --nodes 1..%d, --users >= 1, --rate > 0, --seconds >= 2, "
                "--per-stratum >= 1, --ceiling in (0, 1]\n",
                NODES_MAX);
        exit(2);
    }
}

static void tally_add(tally_t *sum, const tally_t *t, double w)
{
    sum->decisions += w * t->decisions;
    sum->admitted += w * t->admitted;
    sum->local += w * t->local;
    sum->cmd_decide += w * t->cmd_decide;
    sum->cmd_lease += w * t->cmd_lease;
    sum->cmd_return += w * t->cmd_return;
    sum->cmd_sync += w * t->cmd_sync;
    if (t->max_window > sum->max_window)
        sum->max_window = t->max_window;
}

int main(int argc, char **argv)
{
    opts_t o;
    parse(argc, argv, &o);
    bool leasable = o.rule.algorithm != SL_SLIDING_LOG;
    static sample_t sample[SAMPLE_MAX];
    size_t n = draw_sample(&o, sample);
    double h = harmonic(o.users, o.zipf_s);
    sim_t s = {.o = &o,
               .win = {.window_ns = o.rule.window_ns},
               .measure_from_ns = o.seconds * NS_PER_S / 2};
    s.nodes = calloc((size_t)o.nodes, sizeof *s.nodes);
    if (s.nodes == NULL) {
        perror("sim");
        return 1;
    }
    printf("sim: %" PRId64 " nodes, %" PRId64 " users, Zipf %.2f, %.0f requests/s; rule %s %" PRId64
           " per %.0f s (capacity %" PRId64 "); %" PRId64 " s simulated, the last %" PRId64
           " measured; lease time %.3f s, sync interval %.3f s; %zu keys sampled, seed %" PRIu64
           "\n",
           o.nodes, o.users, o.zipf_s, o.rate_per_s, sl_algorithm_name(o.rule.algorithm),
           o.rule.limit, (double)o.rule.window_ns / NS_PER_S, o.rule.capacity, o.seconds,
           o.seconds / 2, (double)o.lease_ns / NS_PER_S, (double)o.sync_ns / NS_PER_S, n, o.seed);
    printf("the busiest user asks %.0f/s; the median user (rank %" PRId64 ") %.4f/s\n",
           o.rate_per_s / h, (o.users + 1) / 2,
           o.rate_per_s * pow((double)((o.users + 1) / 2), -o.zipf_s) / h);
    tally_t sum[MODES] = {{0}};
    for (int m = 0; m < MODES; m++) {
        if ((m == MODE_LEASED || m == MODE_LEASED_HASH) && !leasable)
            continue;
        for (size_t k = 0; k < n; k++) {
            double lambda = o.rate_per_s * pow((double)sample[k].rank, -o.zipf_s) / h;
            tally_t t = {0};
            run_key(&s, (enum mode)m, lambda, sample[k].rank, &t);
            tally_add(&sum[m], &t, sample[k].weight);
        }
    }
    double span_s = (double)(o.seconds - o.seconds / 2);
    double strict_admitted = sum[MODE_STRICT].admitted;
    printf("\n%-16s %12s %12s %8s %10s %11s %12s %12s\n", "mode", "decisions/s", "admitted/s",
           "/strict", "cmds/dec", "redis cores", "sluiced cores", "worst window");
    for (int m = 0; m < MODES; m++) {
        const tally_t *t = &sum[m];
        if (t->decisions == 0) {
            printf("%-16s   (not sound for %s: refused at load)\n", mode_name[m],
                   sl_algorithm_name(o.rule.algorithm));
            continue;
        }
        double remote = t->cmd_decide + t->cmd_lease + t->cmd_return;
        double redis_us = t->cmd_decide * o.c.redis_decide_us +
                          (t->cmd_lease + t->cmd_return) * o.c.redis_lease_us +
                          t->cmd_sync * o.c.redis_batched_us;
        /* a decision that went to the store is paid at the remote cost, a return like one,
         * the rest locally; syncs at the pipelined cost */
        double sluiced_us = (t->cmd_decide + t->cmd_lease + t->cmd_return) * o.c.sluiced_remote_us +
                            (t->decisions - t->cmd_decide - t->cmd_lease) * o.c.sluiced_local_us +
                            t->cmd_sync * o.c.sluiced_batched_us;
        printf("%-16s %12.0f %12.0f %8.3f %10.5f %11.0f %12.0f %12" PRId64 "\n", mode_name[m],
               t->decisions / span_s, t->admitted / span_s,
               strict_admitted > 0 ? t->admitted / strict_admitted : 0,
               (remote + t->cmd_sync) / t->decisions, redis_us / span_s / 1e6 / o.ceiling,
               sluiced_us / span_s / 1e6 / o.ceiling, t->max_window);
    }
    printf("\n(cores: CPU seconds per second at the ceiling of %.0f %%; cmds/dec: store commands "
           "per decision, syncs included;\n worst window: the most one sampled key admitted in "
           "any window of %.0f s)\n",
           100 * o.ceiling, (double)o.rule.window_ns / NS_PER_S);
    free(s.nodes);
    free(s.heap.e);
    free(s.win.t);
    return 0;
}
