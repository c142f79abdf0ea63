/*
 * prop_approx_node.c - seeded property test of how nodes of the Redis request store decide an
 * approximate rule's key (src/store/approx_count.h), run as sluiced runs it: 2 to 5 nodes share
 * one key's state (Redis, a strict sl_decide / sl_settle state), each with its own arrival rate,
 * its sync timer at its own phase every sync interval S, and each request reaching the state
 * after a random delay and its answer coming back after another (at most d each way, in order
 * on each node's connection, as over one TCP connection); now and then a sync is lost on its
 * way, or its answer is; and in some cases one node cannot reach the state for a few sync
 * intervals (its strict decisions are store errors, answered as refusals, and its syncs fail).
 *
 * A node decides a key it has no fresh count of strictly (a decision on the shared state, whose
 * reply is its count; what it admitted and has not sent goes first, approx_flush_begin), else
 * locally (approx_decide), and at each tick sends what it admitted as a charge past the limit
 * (sl_settle with reserved 0, as SL.SETTLE does) when approx_sync_due says so, taking the
 * reply's remaining as its count.
 *
 * Property: approximate admits at most B more than strict would over any window, where
 *
 *     B = the sum, over the nodes but the one that admits least, of the most units a node
 *         admitted in any span of S + d and in any span of S + 2 d
 *
 * which for nodes admitting at a steady rate r is at most 2 x (nodes - 1) x r x (S + a round
 * trip): what the others admit from the count's making until it expires, a sync interval after
 * it arrives (S + d), and what they admitted before it that the shared state had not seen yet,
 * which reaches it within a sync interval and a one-way delay, or, when their syncs fail, is no
 * more than they admit until their own count expires (S + 2 d). For
 * fixed_window, sliding_window, sliding_buckets and sliding_log every admitted unit is replayed,
 * at its time, on a strict key of the same rule, and the units it refuses in each aligned window
 * (what approximate admitted over it) are at most B; for token_bucket and gcra the units admitted
 * in any span of the window's length are at most capacity + limit (a strict bucket's most) + B.
 *
 * And a node alone (one node, no loss) whose sync timer runs late, by up to three sync intervals
 * (a loaded machine's event loop), admits no more than strict would (B is 0): its count expires
 * with units it has not sent, and a strict decision then must count them.
 *
 * Environment: SLUICE_SEED (default PROP_DEFAULT_SEED), SLUICE_PROP_CASES (cases per algorithm,
 * default 1500). Exit status 0 when every property held, 1 otherwise.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

#include "prop/gen.h"
#include "store/approx_count.h"

#define NODES_MAX   5
#define EVENTS_MAX  8192
#define ADMIT_MAX   6000
#define STATE_WORDS 1024 /* 8 KiB: a sliding_log of 200 */

static long failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (failures++ < 5) {                                                                      \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

typedef enum kind { ARRIVE, TICK, APPLY_STRICT, REPLY_STRICT, APPLY_SYNC, REPLY_SYNC } kind_t;

typedef struct event {
    int64_t at_ns;
    uint64_t seq; /* ties: in the order scheduled */
    kind_t kind;
    int node;
    int64_t units;   /* a cost, a sync's units, or a reply's remaining */
    int64_t sent;    /* a reply: the units its sync charged, or its decision's cost */
    bool flush;      /* a sync sent ahead of a strict decision (approx_flush_begin) */
    int64_t sent_ns; /* when the request was sent */
    bool ok;         /* a reply: the request succeeded */
} event_t;

typedef struct sim {
    sl_rule_t rule;
    uint64_t state[STATE_WORDS]; /* the shared key */
    event_t heap[EVENTS_MAX];
    int nheap;
    uint64_t seq;
    approx_count_t count[NODES_MAX];
    int64_t sync_ns, delay_max_ns, end_ns;
    double rate_per_ns[NODES_MAX];
    int64_t last_ns[NODES_MAX][2]; /* the latest arrival on each node's connection, each way */
    prop_admission_t adm[ADMIT_MAX];
    int adm_node[ADMIT_MAX];
    int nadm;
    int loss_pct; /* a sync is lost on its way there, and its answer on the way back, each this
                     often (percent) */
    int64_t cut_from_ns, cut_until_ns; /* node 0 cannot reach the state then */
    int64_t tick_late_ns;              /* each tick comes up to this late */
    bool full;                         /* out of room: the case stops */
} sim_t;

static bool before(const event_t *a, const event_t *b)
{
    return a->at_ns < b->at_ns || (a->at_ns == b->at_ns && a->seq < b->seq);
}

static void push(sim_t *s, event_t ev)
{
    if (s->nheap == EVENTS_MAX) {
        s->full = true;
        return;
    }
    ev.seq = s->seq++;
    int i = s->nheap++;
    while (i > 0 && before(&ev, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = ev;
}

static event_t pop(sim_t *s)
{
    event_t top = s->heap[0], last = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->nheap) {
            break;
        }
        if (c + 1 < s->nheap && before(&s->heap[c + 1], &s->heap[c])) {
            c++;
        }
        if (!before(&s->heap[c], &last)) {
            break;
        }
        s->heap[i] = s->heap[c];
        i = c;
    }
    s->heap[i] = last;
    return top;
}

static void admit(sim_t *s, int node, int64_t t, int64_t cost)
{
    if (s->nadm == ADMIT_MAX) {
        s->full = true;
        return;
    }
    s->adm[s->nadm] = (prop_admission_t){.t = t, .cost = cost};
    s->adm_node[s->nadm++] = node;
}

/* When a message sent at t on node's connection arrives (way 0: to the state, 1: back): after
 * a random delay, and in the order sent, as over one connection. */
static int64_t arrival(prng_t *rng, sim_t *s, int node, int way, int64_t t)
{
    int64_t at = t + prng_range(rng, 0, s->delay_max_ns);
    if (at < s->last_ns[node][way]) {
        at = s->last_ns[node][way];
    }
    s->last_ns[node][way] = at;
    return at;
}

/* Whether node's connection to the shared state is down at t. */
static bool cut_off(const sim_t *s, int node, int64_t t)
{
    return node == 0 && t >= s->cut_from_ns && t < s->cut_until_ns;
}

static int64_t next_arrival(prng_t *rng, const sim_t *s, int node, int64_t t)
{
    /* exponential gaps, often bursts at one instant */
    if (prng_chance(rng, 15)) {
        return t;
    }
    double u = (double)prng_range(rng, 1, 1000000) / 1e6;
    double gap = -__builtin_log(u) / s->rate_per_ns[node];
    return t + (int64_t)gap + 1;
}

static void step(prng_t *rng, sim_t *s, event_t ev)
{
    int n = ev.node;
    approx_count_t *c = &s->count[n];
    int64_t t = ev.at_ns;
    sl_decision_t d;
    switch (ev.kind) {
    case ARRIVE: {
        int64_t cost = prng_chance(rng, 80) ? 1 : prng_range(rng, 1, s->rule.capacity);
        approx_verdict_t v = approx_decide(c, cost, t);
        if (v == APPROX_ADMIT) {
            admit(s, n, t, cost);
        } else if (v == APPROX_STRICT) {
            int64_t unsent = approx_flush_begin(c);
            if (unsent > 0) {
                push(s, (event_t){.at_ns = arrival(rng, s, n, 0, t),
                                  .kind = APPLY_SYNC,
                                  .node = n,
                                  .units = unsent,
                                  .sent_ns = t,
                                  .flush = true});
            }
            push(s, (event_t){.at_ns = arrival(rng, s, n, 0, t),
                              .kind = APPLY_STRICT,
                              .node = n,
                              .units = cost,
                              .sent_ns = t});
        }
        int64_t next = next_arrival(rng, s, n, t);
        if (next < s->end_ns) {
            push(s, (event_t){.at_ns = next, .kind = ARRIVE, .node = n});
        }
        return;
    }
    case TICK:
        if (approx_sync_due(c, s->sync_ns, t)) {
            int64_t units = approx_sync_begin(c, t);
            push(s, (event_t){.at_ns = arrival(rng, s, n, 0, t),
                              .kind = APPLY_SYNC,
                              .node = n,
                              .units = units,
                              .sent_ns = t});
        }
        if (t + s->sync_ns < s->end_ns + 4 * s->sync_ns) {
            int64_t late = prng_range(rng, 0, s->tick_late_ns);
            push(s, (event_t){.at_ns = t + s->sync_ns + late, .kind = TICK, .node = n});
        }
        return;
    case APPLY_STRICT: {
        bool cut = cut_off(s, n, t);
        if (!cut) {
            sl_decide(&s->rule, s->state, ev.units, t, &d);
            if (d.allowed) {
                admit(s, n, t, ev.units);
            }
        }
        push(s, (event_t){.at_ns = arrival(rng, s, n, 1, t),
                          .kind = REPLY_STRICT,
                          .node = n,
                          .units = cut ? 0 : d.remaining,
                          .sent = ev.units,
                          .sent_ns = ev.sent_ns,
                          .ok = !cut});
        return;
    }
    case REPLY_STRICT: /* a store error is the rule's on_store_error: deny here */
        approx_strict_end(c, ev.sent, ev.ok, ev.units, ev.sent_ns, s->sync_ns, t);
        return;
    case APPLY_SYNC: {
        /* now and then (loss_pct) a sync is lost on its way there, or its answer on the way back */
        int p = (int)prng_range(rng, 0, 99), lost = cut_off(s, n, t) ? 50 : s->loss_pct;
        if (p >= lost) {
            /* charged whatever max_debt, as sluiced's syncs are (redis_approx.c) */
            sl_rule_t unbounded = s->rule;
            unbounded.max_debt = SL_COUNT_MAX;
            sl_settle(&unbounded, s->state, 0, ev.units, t, t, &d);
        }
        push(s, (event_t){.at_ns = arrival(rng, s, n, 1, t),
                          .kind = REPLY_SYNC,
                          .node = n,
                          .units = p >= 2 * lost ? d.remaining : 0,
                          .sent = ev.units,
                          .sent_ns = ev.sent_ns,
                          .ok = p >= 2 * lost,
                          .flush = ev.flush});
        return;
    }
    case REPLY_SYNC:
        if (ev.flush) {
            approx_flush_end(c, ev.sent, ev.ok, ev.units, ev.sent_ns, s->sync_ns, t);
        } else {
            approx_sync_end(c, ev.ok, ev.units, ev.sent_ns, s->sync_ns, t);
        }
        return;
    }
}

static int cmp_adm(const void *a, const void *b)
{
    const prop_admission_t *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* The most units node admitted in any span (t - span, t]. */
static int64_t most_in_span(const sim_t *s, int node, int64_t span)
{
    int64_t most = 0, sum = 0;
    int lo = 0;
    for (int i = 0; i < s->nadm; i++) {
        if (s->adm_node[i] != node) {
            continue;
        }
        sum += s->adm[i].cost;
        for (; s->adm[lo].t <= s->adm[i].t - span; lo++) {
            sum -= s->adm_node[lo] == node ? s->adm[lo].cost : 0;
        }
        most = sum > most ? sum : most;
    }
    return most;
}

static sim_t sim; /* large: one at a time */

static void run_case(prng_t *rng, sl_algorithm_t alg, long idx)
{
    sim_t *s = &sim;
    memset(s, 0, sizeof *s);
    s->rule = gen_rule(rng, alg, false);
    s->rule.limit = prng_range(rng, 5, 200);
    if (alg == SL_TOKEN_BUCKET || alg == SL_GCRA) {
        s->rule.burst = prng_chance(rng, 50) ? SL_DEFAULT : prng_range(rng, 1, s->rule.limit);
    }
    if (sl_rule_prepare(&s->rule) != SL_OK) {
        return;
    }
    int64_t w = s->rule.window_ns;
    /* a node alone: its timer late, nothing lost (bound 0) */
    bool alone = prng_chance(rng, 20);
    int nn = alone ? 1 : (int)prng_range(rng, 2, NODES_MAX);
    s->sync_ns = prng_range(rng, w / 100 + 1, w / 2 + 1);
    s->delay_max_ns = prng_range(rng, 0, s->sync_ns / 4);
    static const int loss[] = {0, 5, 25};
    s->loss_pct = alone ? 0 : loss[prng_range(rng, 0, 2)];
    s->tick_late_ns = alone ? prng_range(rng, 0, 3 * s->sync_ns) : 0;
    if (!alone && prng_chance(rng, 30)) {
        s->cut_from_ns = PROP_START + prng_range(rng, 0, 2 * w);
        s->cut_until_ns = s->cut_from_ns + prng_range(rng, 1, 4) * s->sync_ns;
    }
    s->end_ns = PROP_START + prng_range(rng, 2, 6) * w;
    int64_t t0 = PROP_START + prng_range(rng, 0, w);
    for (int i = 0; i < nn; i++) {
        s->count[i] = APPROX_COUNT_NEW;
        /* from a unit per few intervals to a few times the limit per window */
        double per_window = (double)prng_range(rng, 1, 4 * s->rule.limit);
        s->rate_per_ns[i] = per_window / (double)w;
        push(s, (event_t){.at_ns = t0 + prng_range(rng, 0, w / 4), .kind = ARRIVE, .node = i});
        push(s, (event_t){.at_ns = t0 + prng_range(rng, 0, s->sync_ns), .kind = TICK, .node = i});
    }
    while (s->nheap > 0 && !s->full) {
        step(rng, s, pop(s));
    }
    if (s->full) {
        return; /* too busy a case: its tail is lost, so it proves nothing */
    }
    /* the bound: the busiest nodes but one, over 2 S + 2 round trips */
    int64_t bound = 0, least = INT64_MAX;
    for (int i = 0; i < nn; i++) {
        int64_t most = most_in_span(s, i, s->sync_ns + s->delay_max_ns) +
                       most_in_span(s, i, s->sync_ns + 2 * s->delay_max_ns);
        bound += most;
        least = most < least ? most : least;
    }
    bound -= least;
    qsort(s->adm, (size_t)s->nadm, sizeof s->adm[0], cmp_adm);
    int64_t worst = 0, worst_at = 0;
    if (alg == SL_TOKEN_BUCKET || alg == SL_GCRA) {
        /* a strict bucket admits at most its capacity and a window's refill in any window */
        worst_t ww = worst_window(s->adm, s->nadm, w, 0);
        worst = ww.units - s->rule.capacity - s->rule.limit;
        worst_at = ww.end;
    } else {
        /* replayed on a strict key: what it refuses is over-admission, per aligned window */
        static uint64_t strict[STATE_WORDS];
        memset(strict, 0, sizeof strict);
        int64_t sum = 0, win = INT64_MIN;
        for (int i = 0; i < s->nadm; i++) {
            sl_decision_t d;
            sl_decide(&s->rule, strict, s->adm[i].cost, s->adm[i].t, &d);
            if (s->adm[i].t / w != win) {
                win = s->adm[i].t / w;
                sum = 0;
            }
            sum += d.allowed ? 0 : s->adm[i].cost;
            if (sum > worst) {
                worst = sum;
                worst_at = s->adm[i].t;
            }
        }
    }
    if (worst > bound) {
        FAIL("%s case %ld: %" PRId64 " units over the limit in the window at %" PRId64
             ", bound %" PRId64 " (%d nodes, sync %" PRId64 " ns, delay <= %" PRId64 " ns)",
             sl_algorithm_name(alg), idx, worst, worst_at, bound, nn, s->sync_ns, s->delay_max_ns);
        print_rule(stderr, &s->rule);
    }
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 1500);
    static const sl_algorithm_t algs[] = {SL_FIXED_WINDOW, SL_SLIDING_WINDOW, SL_SLIDING_BUCKETS,
                                          SL_SLIDING_LOG,  SL_TOKEN_BUCKET,   SL_GCRA};
    for (long c = 0; c < cases; c++) {
        for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
            prng_t rng = prop_case_prng(seed, (int)algs[a], c);
            run_case(&rng, algs[a], c);
        }
    }
    printf("prop_approx_node: seed 0x%" PRIx64 ", %ld cases per algorithm: %s\n", seed, cases,
           failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
