/*
 * adaptive.c - adaptive limits (adaptive.h): AIMD and Vegas over the 16 bytes a concurrency
 * key keeps for them, in integers only (a Lua script can compute the same numbers with Lua's
 * doubles, exact below 2^53: every product here stays below 2^45).
 *
 * Both follow Netflix's concurrency-limits (AIMDLimit and VegasLimit, Java): the same rules and
 * defaults, with these changes for a limit kept in a store and shared by a fleet: integers (a
 * limit of whole units, latencies in us); one move per window of `limit` samples, from the
 * window's least latency (the Java library's WindowedLimit does the like with an average), where
 * the Java limits move on every sample; Vegas probes after exactly `probe` windows (probe *
 * limit samples; the Java library draws a random jitter to spread many limiters out, and a
 * fleet shares one key here); and a sample comes with a release only, so a hold reports once.
 */
#include <string.h>

#include "core/adaptive.h"
#include "core/core.h"

#define PCT         100
#define VEGAS_DRAIN 2 /* windows after a probe before the least latency is measured */

/* Netflix's Log10RootFunction: floor(log10(n)), at least 1. */
static int64_t log10_floor1(int64_t n)
{
    int64_t d = 0;
    for (; n >= 10; n /= 10)
        d++;
    return d > 1 ? d : 1;
}

/* AIMDLimit, once per window: a drop (or a latency above the timeout) multiplies the limit by
 * backoff; a busy window with none adds 1; else nothing. */
static int64_t aimd_update(const sl_adaptive_t *a, adaptive_vars_t *v, int64_t limit, bool busy,
                           int64_t latency_us, bool dropped)
{
    (void)v;
    (void)latency_us; /* a latency past the timeout came as a drop */
    if (dropped)
        return limit * a->backoff_pct / PCT;
    if (busy)
        return limit + 1;
    return limit;
}

/* VegasLimit with smoothing 1 (its default): the queue the latency shows, limit * (1 - noload /
 * latency) rounded up, against alpha = 3 log, beta = 6 log and threshold = log of the limit. */
static int64_t vegas_queue_step(int64_t limit, int64_t queue)
{
    int64_t lg = log10_floor1(limit);
    if (queue <= lg)
        return limit + 6 * lg; /* no queue: grow fast */
    if (queue < 3 * lg)
        return limit + lg;
    if (queue > 6 * lg)
        return limit - lg;
    return limit; /* in the sweet spot */
}

static int64_t vegas_update(const sl_adaptive_t *a, adaptive_vars_t *v, int64_t limit, bool busy,
                            int64_t latency_us, bool dropped)
{
    if (latency_us < 0) /* drops that said no latency: the Java library's didDrop */
        return dropped ? limit - log10_floor1(limit) : limit;
    int64_t rtt = latency_us > 0 ? latency_us : 1;
    int64_t probes = ((v->round & ADAPTIVE_ROUND_PROBES) >> 16) + 1;
    if (probes >= a->probe) { /* probe: halve the limit and forget the least latency */
        v->round &= ~ADAPTIVE_ROUND_PROBES;
        v->noload_us = 0;
        return limit / 2;
    }
    v->round = (v->round & ~ADAPTIVE_ROUND_PROBES) | (uint32_t)probes << 16;
    if (v->noload_us == 0) { /* measure it once the holds of the old limit are done */
        v->noload_us = probes > VEGAS_DRAIN ? (uint32_t)rtt : 0;
        return limit;
    }
    if (rtt < (int64_t)v->noload_us) {
        v->noload_us = (uint32_t)rtt;
        return limit;
    }
    if (dropped)
        return limit - log10_floor1(limit);
    if (!busy)
        return limit; /* not near the limit: no drift upwards */
    int64_t queue = (limit * (rtt - (int64_t)v->noload_us) + rtt - 1) / rtt;
    return vegas_queue_step(limit, queue);
}

const adaptive_algorithm_t adaptive_algorithms[ADAPTIVE_SLOTS] = {
    [SL_ADAPTIVE_AIMD] = {.name = "aimd",
                          .summary = "additive increase, multiplicative decrease on a drop or a "
                                     "latency past timeout",
                          .opts = ADAPTIVE_OPT_BACKOFF | ADAPTIVE_OPT_TIMEOUT,
                          .update = aimd_update},
    [SL_ADAPTIVE_VEGAS] = {.name = "vegas",
                           .summary = "TCP Vegas: the queue latency shows over the least latency",
                           .opts = ADAPTIVE_OPT_PROBE,
                           .update = vegas_update},
};

const adaptive_algorithm_t *adaptive_row(uint64_t value)
{
    return value < ADAPTIVE_SLOTS && adaptive_algorithms[value].name != NULL
               ? &adaptive_algorithms[value]
               : NULL;
}

int adaptive_parse(const char *name, size_t len, sl_adaptive_algorithm_t *out)
{
    for (uint64_t i = 0; i < ADAPTIVE_SLOTS; i++) {
        const char *n = adaptive_algorithms[i].name;
        if (n != NULL && strlen(n) == len && memcmp(n, name, len) == 0) {
            *out = (sl_adaptive_algorithm_t)i;
            return SL_OK;
        }
    }
    return SL_EADAPTIVE;
}

/* Checks one option: 0 takes def when the row reads it (`taken`), else it must stay 0. */
static bool option_ok(int64_t *v, bool taken, int64_t def, int64_t min, int64_t max)
{
    if (!taken)
        return *v == 0;
    if (*v == 0)
        *v = def;
    return *v >= min && *v <= max;
}

int adaptive_prepare(sl_rule_t *rule, bool holds)
{
    sl_adaptive_t a = rule->adaptive;
    if (a.algorithm == SL_ADAPTIVE_NONE) {
        static const sl_adaptive_t none;
        return memcmp(&a, &none, sizeof a) == 0 ? SL_OK : SL_EADAPTIVE;
    }
    const adaptive_algorithm_t *row = adaptive_row((uint64_t)(unsigned)a.algorithm);
    if (row == NULL || !holds || a.min_limit < 1 || a.min_limit > rule->limit ||
        a.max_limit < rule->limit || a.max_limit > SL_HOLDS_MAX)
        return SL_EADAPTIVE;
    if (!option_ok(&a.backoff_pct, row->opts & ADAPTIVE_OPT_BACKOFF, SL_ADAPTIVE_BACKOFF_DEFAULT, 1,
                   PCT - 1) ||
        !option_ok(&a.timeout_ns, row->opts & ADAPTIVE_OPT_TIMEOUT, SL_ADAPTIVE_TIMEOUT_DEFAULT_NS,
                   SL_WINDOW_MIN_NS, SL_ADAPTIVE_LATENCY_MAX_NS) ||
        !option_ok(&a.probe, row->opts & ADAPTIVE_OPT_PROBE, SL_ADAPTIVE_PROBE_DEFAULT,
                   VEGAS_DRAIN + 3, 1000))
        return SL_EADAPTIVE;
    rule->adaptive = a;
    return SL_OK;
}

int64_t adaptive_slots(const sl_rule_t *rule)
{
    return rule->adaptive.algorithm != SL_ADAPTIVE_NONE ? rule->adaptive.max_limit : rule->limit;
}

static adaptive_vars_t vars_get(const unsigned char bytes[ADAPTIVE_BYTES])
{
    adaptive_vars_t v;
    memcpy(&v, bytes, sizeof v);
    return v;
}

_Static_assert(sizeof(adaptive_vars_t) == ADAPTIVE_BYTES, "adaptive layout");

int64_t adaptive_limit(const sl_rule_t *rule, const unsigned char bytes[ADAPTIVE_BYTES])
{
    if (rule->adaptive.algorithm == SL_ADAPTIVE_NONE)
        return rule->limit;
    adaptive_vars_t v = vars_get(bytes);
    return v.limit != 0 ? (int64_t)v.limit : rule->limit;
}

/* Adds a sample to the window; true when it closes the window (`limit` samples). */
static bool window_add(adaptive_vars_t *v, int64_t limit, int64_t in_flight, int64_t latency_us,
                       bool dropped)
{
    if (latency_us >= 0) {
        uint32_t lat = latency_us > 0 ? (uint32_t)latency_us : 1;
        v->low_us = v->low_us == 0 || lat < v->low_us ? lat : v->low_us;
    }
    v->round |= dropped ? ADAPTIVE_ROUND_DROPPED : 0;
    v->round |= in_flight * 2 >= limit ? ADAPTIVE_ROUND_BUSY : 0;
    uint32_t samples = (v->round & ADAPTIVE_ROUND_SAMPLES) + 1;
    v->round = (v->round & ~ADAPTIVE_ROUND_SAMPLES) | samples;
    return (int64_t)samples >= limit;
}

void adaptive_update(const sl_rule_t *rule, unsigned char bytes[ADAPTIVE_BYTES], int64_t in_flight,
                     const sl_sample_t *sample)
{
    const sl_adaptive_t *a = &rule->adaptive;
    const adaptive_algorithm_t *row = adaptive_row((uint64_t)(unsigned)a->algorithm);
    if (row == NULL || sample == NULL || (sample->latency_ns < 0 && !sample->dropped))
        return; /* a fixed limit, or nothing reported */
    adaptive_vars_t v = vars_get(bytes);
    int64_t limit = adaptive_limit(rule, bytes);
    /* in whole us, as the stores send it */
    int64_t latency_us = sample->latency_ns < 0 ? -1 : sample->latency_ns / 1000;
    bool late = (row->opts & ADAPTIVE_OPT_TIMEOUT) && latency_us > a->timeout_ns / 1000;
    if (window_add(&v, limit, in_flight, latency_us, sample->dropped || late)) {
        int64_t low = v.low_us != 0 ? (int64_t)v.low_us : -1;
        bool dropped = (v.round & ADAPTIVE_ROUND_DROPPED) != 0;
        bool busy = (v.round & ADAPTIVE_ROUND_BUSY) != 0;
        v.round &= ADAPTIVE_ROUND_PROBES; /* a new window */
        v.low_us = 0;
        int64_t next = row->update(a, &v, limit, busy, low, dropped);
        next = next < a->min_limit ? a->min_limit : next;
        v.limit = (uint32_t)(next > a->max_limit ? a->max_limit : next);
    }
    memcpy(bytes, &v, sizeof v);
}

bool adaptive_valid(const sl_rule_t *rule, const unsigned char bytes[ADAPTIVE_BYTES])
{
    adaptive_vars_t v = vars_get(bytes);
    const sl_adaptive_t *a = &rule->adaptive;
    if (a->algorithm == SL_ADAPTIVE_NONE)
        return v.limit == 0 && v.round == 0 && v.noload_us == 0 && v.low_us == 0;
    int64_t lat_max = SL_ADAPTIVE_LATENCY_MAX_NS / 1000;
    int64_t probes = (v.round & ADAPTIVE_ROUND_PROBES) >> 16;
    bool vegas = a->algorithm == SL_ADAPTIVE_VEGAS;
    bool limit_ok = v.limit == 0 || (v.limit >= a->min_limit && v.limit <= a->max_limit);
    bool vegas_ok =
        vegas ? v.noload_us <= lat_max && probes < a->probe : v.noload_us == 0 && probes == 0;
    return limit_ok && vegas_ok && (v.round & ADAPTIVE_ROUND_SAMPLES) <= a->max_limit &&
           v.low_us <= lat_max;
}

void adaptive_convert(const sl_rule_t *to, unsigned char bytes[ADAPTIVE_BYTES])
{
    adaptive_vars_t v = vars_get(bytes);
    const sl_adaptive_t *a = &to->adaptive;
    if (a->algorithm == SL_ADAPTIVE_NONE) {
        memset(bytes, 0, ADAPTIVE_BYTES);
        return;
    }
    if (v.limit != 0 && v.limit < a->min_limit)
        v.limit = (uint32_t)a->min_limit;
    if (v.limit > a->max_limit)
        v.limit = (uint32_t)a->max_limit;
    int64_t probes = (v.round & ADAPTIVE_ROUND_PROBES) >> 16;
    if (a->algorithm != SL_ADAPTIVE_VEGAS || probes >= a->probe) {
        v.noload_us = 0;
        v.round &= ~ADAPTIVE_ROUND_PROBES;
    }
    if ((v.round & ADAPTIVE_ROUND_SAMPLES) > a->max_limit)
        v.round = (v.round & ~ADAPTIVE_ROUND_SAMPLES) | (uint32_t)a->max_limit;
    memcpy(bytes, &v, sizeof v);
}

bool adaptive_same(const sl_rule_t *a, const sl_rule_t *b)
{
    return memcmp(&a->adaptive, &b->adaptive, sizeof a->adaptive) == 0 && a->limit == b->limit;
}
