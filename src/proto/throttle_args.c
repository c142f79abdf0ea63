/*
 * throttle_args.c - SL.THROTTLE / SL.PEEK / SL.SETTLE / CL.THROTTLE arguments, errors and
 * replies (see throttle_args.h). The texts and their order are sluiced's: a request gets the same
 * first error from sluiced and from the module.
 */
#include "proto/throttle_args.h"

#include "core/adaptive.h"
#include "core/algorithms.h"
#include "proto/text.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define SHOW_MAX     64 /* bytes of an argument quoted in an error */
#define SHOW_BUF     (SHOW_MAX + 4)
#define CMD_NAME_MAX 63 /* bytes of the command name in the arity error */

static int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, THROTTLE_ERR_MAX, fmt, ap);
    va_end(ap);
    return -1;
}

bool throttle_arg_is(const throttle_arg_t *a, const char *word)
{
    size_t n = strlen(word);
    return a->len == n && strncasecmp(a->ptr, word, n) == 0;
}

bool throttle_arg_i64(const throttle_arg_t *a, int64_t *out)
{
    if (a->len == 0 || a->len > 20) {
        return false;
    }
    size_t i = 0;
    bool neg = a->ptr[0] == '-';
    if (neg) {
        i = 1;
        if (a->len == 1) {
            return false;
        }
    }
    uint64_t v = 0;
    for (; i < a->len; i++) {
        unsigned d = (unsigned)((unsigned char)a->ptr[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
        return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* An argument for an error message: at most SHOW_MAX bytes, printable, no quotes. */
static const char *show(const throttle_arg_t *a, char buf[SHOW_BUF])
{
    return text_show(buf, SHOW_BUF, a->ptr, a->len, SHOW_MAX, TEXT_MASK);
}

static int wrong_arity(const throttle_arg_t *name, char *err)
{
    char lower[CMD_NAME_MAX + 1];
    size_t n = name->len < CMD_NAME_MAX ? name->len : CMD_NAME_MAX;
    for (size_t i = 0; i < n; i++) {
        char ch = name->ptr[i];
        lower[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
    }
    lower[n] = '\0';
    return fail(err, "ERR wrong number of arguments for '%s' command", lower);
}

static int prepare(throttle_req_t *out, char *err)
{
    out->rule = out->params;
    int rc = sl_rule_prepare(&out->rule);
    if (rc != SL_OK) {
        return fail(err, "ERR invalid rule: %s", sl_strerror(rc));
    }
    return 0;
}

/* The options a command takes beyond the rule's: a name, the field its value goes to, and the
 * field's name in errors. */
typedef struct extra_option {
    const char *name;
    size_t offset; /* of an int64_t in throttle_req_t */
    const char *what;
} extra_option_t;

#define EXTRA(name, field, what)                                                                   \
    {                                                                                              \
        name, offsetof(throttle_req_t, field), what                                                \
    }

static const extra_option_t settle_options[] = {
    EXTRA("RESERVED", reserved, "reserved"),
    EXTRA("ACTUAL", actual, "actual"),
    EXTRA("AT", at_ms, "at"),
    {NULL, 0, NULL},
};
static const extra_option_t lease_options[] = {
    EXTRA("WANT", want, "want"),
    EXTRA("FOR", lease_ms, "for"),
    {NULL, 0, NULL},
};
static const extra_option_t return_options[] = {
    EXTRA("GRANTED", granted, "granted"),
    EXTRA("UNUSED", unused, "unused"),
    EXTRA("AT", lease_at_us, "at"),
    EXTRA("UNTIL", until_us, "until"),
    {NULL, 0, NULL},
};

static const extra_option_t acquire_options[] = {
    EXTRA("TIMEOUT", hold_ms, "timeout"),
    {NULL, 0, NULL},
};
static const extra_option_t release_options[] = {
    EXTRA("ID", hold_id, "id"),
    EXTRA("LATENCY_US", latency_us, "latency_us"),
    EXTRA("DROPPED", dropped, "dropped"),
    {NULL, 0, NULL},
};

static const extra_option_t *extra_options_of(throttle_cmd_t cmd)
{
    return cmd == THROTTLE_SL_SETTLE    ? settle_options
           : cmd == THROTTLE_SL_LEASE   ? lease_options
           : cmd == THROTTLE_SL_RETURN  ? return_options
           : cmd == THROTTLE_SL_ACQUIRE ? acquire_options
           : cmd == THROTTLE_SL_RELEASE ? release_options
                                        : NULL;
}

static int64_t *extra_slot(throttle_req_t *out, const extra_option_t *o)
{
    return (int64_t *)(void *)((char *)out + o->offset);
}

/* One of a command's own options, argv[i] naming it and argv[i + 1] its value (present): 1 when
 * it is one of opts and was stored in *out, 0 when it is another name, -1 with err when its
 * value is bad. */
static int extra_option(const extra_option_t *opts, const throttle_arg_t *argv, size_t i,
                        throttle_req_t *out, char *err)
{
    const extra_option_t *o = opts;
    while (o->name != NULL && !throttle_arg_is(&argv[i], o->name)) {
        o++;
    }
    if (o->name == NULL) {
        return 0;
    }
    int64_t v;
    if (!throttle_arg_i64(&argv[i + 1], &v)) {
        return fail(err, "ERR %s is not an integer or out of range", o->what);
    }
    if (v < 0) {
        return fail(err, "ERR %s must be >= 0", o->what);
    }
    *extra_slot(out, o) = v;
    return 1;
}

/* Every option of opts unset (-1 until given). */
static void extra_init(const extra_option_t *opts, throttle_req_t *out)
{
    for (const extra_option_t *o = opts; o->name != NULL; o++) {
        *extra_slot(out, o) = -1;
    }
}

static void settle_init(throttle_req_t *out)
{
    extra_init(settle_options, out);
}

static int settle_given(throttle_req_t *out, char *err)
{
    if (out->reserved < 0 || out->actual < 0) {
        return fail(err, "ERR SL.SETTLE needs RESERVED and ACTUAL");
    }
    return 0;
}

/* SL.ACQUIRE's TIMEOUT (optional, > 0) and SL.RELEASE's ID (needed). */
static int hold_given(throttle_cmd_t cmd, throttle_req_t *out, char *err)
{
    if (cmd == THROTTLE_SL_RELEASE) {
        if (out->latency_us > SL_ADAPTIVE_LATENCY_MAX_NS / SL_NS_PER_US)
            return fail(err, "ERR latency_us must be at most 3600000000 (an hour)");
        if (out->dropped > 1)
            return fail(err, "ERR dropped must be 0 or 1");
        return out->hold_id < 0 ? fail(err, "ERR SL.RELEASE needs ID") : 0;
    }
    if (out->hold_ms == 0) {
        return fail(err, "ERR timeout must be > 0");
    }
    if (out->hold_ms > INT64_MAX / SL_NS_PER_MS) {
        return fail(err, "ERR timeout is out of range");
    }
    out->hold_ms = out->hold_ms < 0 ? 0 : out->hold_ms; /* not given: the rule's */
    return 0;
}

void throttle_hold_time_error(const sl_rule_t *rule, char err[THROTTLE_ERR_MAX])
{
    fail(err, "ERR timeout must be within 1..%lld ms (the rule's hold timeout)",
         (long long)(rule->window_ns / SL_NS_PER_MS));
}

/* SL.LEASE's and SL.RETURN's options all given, and consistent. */
static int lease_given(throttle_cmd_t cmd, throttle_req_t *out, char *err)
{
    if (cmd == THROTTLE_SL_LEASE) {
        if (out->want < 0 || out->lease_ms < 0) {
            return fail(err, "ERR SL.LEASE needs WANT and FOR");
        }
        if (out->lease_ms == 0) {
            return fail(err, "ERR for must be > 0");
        }
        if (out->lease_ms > INT64_MAX / SL_NS_PER_MS) {
            return fail(err, "ERR for is out of range");
        }
        return 0;
    }
    if (out->granted < 0 || out->unused < 0 || out->lease_at_us < 0 || out->until_us < 0) {
        return fail(err, "ERR SL.RETURN needs GRANTED, UNUSED, AT and UNTIL");
    }
    if (out->unused > out->granted) {
        return fail(err, "ERR unused must be <= granted");
    }
    if (out->until_us < out->lease_at_us) {
        return fail(err, "ERR until must be >= at");
    }
    if (out->until_us > SL_NOW_MAX_NS / SL_NS_PER_US) {
        return fail(err, "ERR until is out of range");
    }
    return 0;
}

int throttle_parse_settle(const throttle_arg_t *argv, size_t argc, size_t first,
                          throttle_req_t *out, char err[THROTTLE_ERR_MAX])
{
    settle_init(out);
    for (size_t i = first; i < argc; i += 2) {
        if (i + 1 >= argc) {
            return fail(err, "ERR syntax error");
        }
        int rc = extra_option(settle_options, argv, i, out, err);
        if (rc <= 0) {
            return rc < 0 ? -1 : fail(err, "ERR syntax error");
        }
    }
    return settle_given(out, err);
}

/* What a duration argument's error says it takes, after its name and the argument shown. */
#define DURATION_FORMS                                                                             \
    "is not a duration: integer milliseconds (1000) or digits with a unit (250ms, 1s, 1m30s; "     \
    "units ns, us, ms, s, m, h, d)"

/* A duration argument named `what` in errors: a bare integer is milliseconds (negative kept, for
 * the caller's range check); otherwise sl_duration_parse()'s syntax, as rule files write it, of a
 * whole number of milliseconds (the unit the module and the request stores speak). */
static int duration_ms_arg(const throttle_arg_t *a, const char *what, int64_t *ms, char *err)
{
    if (throttle_arg_i64(a, ms))
        return 0;
    char b[SHOW_BUF];
    int64_t ns = 0;
    int rc = sl_duration_parse(a->ptr, a->len, &ns);
    if (rc == SL_EOVERFLOW)
        return fail(err, "ERR %s is out of range", what);
    if (rc != SL_OK)
        return fail(err, "ERR %s '%s' " DURATION_FORMS, what, show(a, b));
    if (ns % SL_NS_PER_MS != 0)
        return fail(err, "ERR %s '%s' is not a whole number of milliseconds", what, show(a, b));
    *ms = ns / SL_NS_PER_MS;
    return 0;
}

/* The options naming the rule and the cost, after the window: their names and how errors name
 * them. */
typedef enum rule_opt {
    OPT_BURST,
    OPT_BUCKETS,
    OPT_MAX_DELAY,
    OPT_MAX_DEBT,
    OPT_COST,
    OPT_CLOSED_FROM,
    OPT_RESERVE,
    OPT_ADAPTIVE, /* the adaptive limit's options, from here (a name, then numbers) */
    OPT_MIN_LIMIT,
    OPT_MAX_LIMIT,
    OPT_BACKOFF,
    OPT_LATENCY_TIMEOUT,
    OPT_PROBE,
    OPT_COUNT
} rule_opt_t;

static const struct {
    const char *name; /* as the command writes it, in any case */
    const char *what; /* in errors */
} rule_options[OPT_COUNT] = {
    [OPT_BURST] = {"BURST", "burst"},
    [OPT_BUCKETS] = {"BUCKETS", "buckets"},
    [OPT_MAX_DELAY] = {"MAX_DELAY", "max_delay"},
    [OPT_MAX_DEBT] = {"MAX_DEBT", "max_debt"},
    [OPT_COST] = {"COST", "cost"},
    [OPT_CLOSED_FROM] = {"CLOSED_FROM", "closed_from"},
    [OPT_RESERVE] = {"RESERVE", "reserve"},
    [OPT_ADAPTIVE] = {"ADAPTIVE", "adaptive"},
    [OPT_MIN_LIMIT] = {"MIN_LIMIT", "min_limit"},
    [OPT_MAX_LIMIT] = {"MAX_LIMIT", "max_limit"},
    [OPT_BACKOFF] = {"BACKOFF", "backoff"},
    [OPT_LATENCY_TIMEOUT] = {"LATENCY_TIMEOUT", "latency_timeout"},
    [OPT_PROBE] = {"PROBE", "probe"},
};

/* Why a command takes no COST, or NULL when it does. */
static const char *no_cost(throttle_cmd_t cmd)
{
    switch (cmd) {
    case THROTTLE_SL:
    case THROTTLE_CL:
    case THROTTLE_SL_ACQUIRE:
        return NULL;
    case THROTTLE_SL_RELEASE:
        return "ERR SL.RELEASE takes no COST (ID names the hold)";
    case THROTTLE_SL_PEEK:
        return "ERR SL.PEEK takes no COST (it reports without consuming)";
    case THROTTLE_SL_SETTLE:
        return "ERR SL.SETTLE takes no COST (RESERVED and ACTUAL say what to settle)";
    case THROTTLE_SL_LEASE:
        return "ERR SL.LEASE takes no COST (WANT says how many units)";
    case THROTTLE_SL_RETURN:
        return "ERR SL.RETURN takes no COST (UNUSED says what)";
    }
    return NULL;
}

/* Stores the value v >= 0 of option o. */
static int rule_option_set(rule_opt_t o, int64_t v, throttle_req_t *out, char *err)
{
    sl_rule_t *p = &out->params;
    if ((o == OPT_MAX_DELAY || o == OPT_CLOSED_FROM || o == OPT_LATENCY_TIMEOUT) &&
        v > INT64_MAX / SL_NS_PER_MS)
        return fail(err, "ERR %s is out of range", rule_options[o].what); /* both become ns */
    switch (o) {
    case OPT_BURST:
        p->burst = v;
        break;
    case OPT_BUCKETS:
        p->buckets = v;
        break;
    case OPT_MAX_DELAY:
        p->max_delay_ns = v * SL_NS_PER_MS;
        break;
    case OPT_MAX_DEBT:
        p->max_debt = v;
        break;
    case OPT_COST:
        out->cost = v;
        break;
    case OPT_CLOSED_FROM:
        out->closed_from_ms = v;
        break;
    case OPT_RESERVE:
        out->reserve = v;
        break;
    case OPT_ADAPTIVE:
        p->adaptive.algorithm = (sl_adaptive_algorithm_t)v;
        break;
    case OPT_MIN_LIMIT:
        p->adaptive.min_limit = v;
        break;
    case OPT_MAX_LIMIT:
        p->adaptive.max_limit = v;
        break;
    case OPT_BACKOFF:
        p->adaptive.backoff_pct = v;
        break;
    case OPT_LATENCY_TIMEOUT:
        p->adaptive.timeout_ns = v * SL_NS_PER_MS;
        break;
    case OPT_PROBE:
        p->adaptive.probe = v;
        break;
    case OPT_COUNT:
        break;
    }
    return 0;
}

/* One rule option, argv[i] naming it and argv[i + 1] its value (present): 0, or -1 with err. */
static int rule_option(throttle_cmd_t cmd, const throttle_arg_t *argv, size_t i,
                       throttle_req_t *out, char *err)
{
    rule_opt_t o = 0;
    while (o < OPT_COUNT && !throttle_arg_is(&argv[i], rule_options[o].name))
        o++;
    if (o == OPT_COUNT)
        return fail(err, "ERR syntax error");
    if (o == OPT_COST && no_cost(cmd) != NULL)
        return fail(err, "%s", no_cost(cmd));
    if (o == OPT_RESERVE && cmd != THROTTLE_SL && cmd != THROTTLE_SL_PEEK &&
        cmd != THROTTLE_SL_ACQUIRE)
        return fail(err, "ERR RESERVE applies to SL.THROTTLE, SL.PEEK and SL.ACQUIRE only");
    int64_t v;
    sl_adaptive_algorithm_t alg;
    if (o == OPT_ADAPTIVE) { /* a name */
        char b[SHOW_BUF];
        if (adaptive_parse(argv[i + 1].ptr, argv[i + 1].len, &alg) != SL_OK)
            return fail(err, "ERR unknown adaptive algorithm '%s' (aimd, vegas)",
                        show(&argv[i + 1], b));
        v = (int64_t)alg;
    } else if (o == OPT_MAX_DELAY || o == OPT_LATENCY_TIMEOUT) { /* a duration, as the window */
        if (duration_ms_arg(&argv[i + 1], rule_options[o].what, &v, err) != 0)
            return -1;
    } else if (!throttle_arg_i64(&argv[i + 1], &v)) {
        return fail(err, "ERR %s is not an integer or out of range", rule_options[o].what);
    }
    if (v < 0)
        return fail(err, "ERR %s must be >= 0", rule_options[o].what);
    return rule_option_set(o, v, out, err);
}

/* A request with nothing given yet: the defaults of cmd, its own options unset. Returns the
 * options cmd takes beyond the rule's (NULL: none). */
static const extra_option_t *sl_init(throttle_cmd_t cmd, throttle_req_t *out)
{
    out->params = (sl_rule_t){.burst = SL_DEFAULT, .buckets = SL_DEFAULT, .max_debt = SL_DEFAULT};
    out->cost = cmd == THROTTLE_SL || cmd == THROTTLE_SL_ACQUIRE ? 1 : 0;
    out->hold_ms = out->hold_id = 0;
    out->reserve = 0;
    out->reserved = out->actual = 0;
    out->at_ms = -1;
    out->closed_from_ms = -1;
    out->want = out->lease_ms = out->granted = out->unused = 0;
    out->lease_at_us = out->until_us = 0;
    const extra_option_t *extra = extra_options_of(cmd);
    if (extra != NULL)
        extra_init(extra, out);
    return extra;
}

/* key algorithm limit window: the algorithm and the limit into out->params, the window (ms) to
 * *window_ms. */
static int sl_head(const throttle_arg_t *argv, throttle_req_t *out, int64_t *window_ms, char *err)
{
    if (sl_algorithm_parse(argv[2].ptr, argv[2].len, &out->params.algorithm) != SL_OK) {
        char b[SHOW_BUF], names[THROTTLE_ERR_MAX];
        core_algorithm_join(names, sizeof names, core_algorithm_any, ", ", ", ");
        return fail(err, "ERR unknown algorithm '%s' (%s)", show(&argv[2], b), names);
    }
    if (!throttle_arg_i64(&argv[3], &out->params.limit))
        return fail(err, "ERR limit is not an integer or out of range");
    return duration_ms_arg(&argv[4], "window_ms", window_ms, err);
}

/* After the options: what the command needs given, the limit and the window, the rule. */
static int sl_finish(throttle_cmd_t cmd, int64_t window_ms, throttle_req_t *out, char *err)
{
    if (cmd == THROTTLE_SL_SETTLE && settle_given(out, err) != 0)
        return -1;
    if ((cmd == THROTTLE_SL_LEASE || cmd == THROTTLE_SL_RETURN) && lease_given(cmd, out, err) != 0)
        return -1;
    if ((cmd == THROTTLE_SL_ACQUIRE || cmd == THROTTLE_SL_RELEASE) &&
        hold_given(cmd, out, err) != 0)
        return -1;
    if (out->params.limit <= 0)
        return fail(err, "ERR limit must be > 0");
    if (window_ms <= 0 || window_ms > INT64_MAX / SL_NS_PER_MS)
        return fail(err, "ERR window_ms must be > 0");
    out->params.window_ns = window_ms * SL_NS_PER_MS;
    return prepare(out, err);
}

/* SL.THROTTLE / SL.PEEK / SL.SETTLE / SL.LEASE / SL.RETURN key algorithm limit window_ms [BURST b]
 * [BUCKETS k] [MAX_DELAY ms] [MAX_DEBT n] [COST n] [CLOSED_FROM unix_ms], and each command's own
 * options (SL.SETTLE: RESERVED r ACTUAL a [AT unix_ms]) among them. Which options an algorithm
 * takes is its row's (algorithms.h): sl_rule_prepare() refuses the others. */
static int parse_sl(throttle_cmd_t cmd, const throttle_arg_t *argv, size_t argc,
                    throttle_req_t *out, char *err)
{
    if (argc < 5)
        return wrong_arity(&argv[0], err);
    /* sluiced's named form with a COST (SL.PEEK rule key COST n) has the inline form's length */
    if (cmd == THROTTLE_SL_PEEK && argc == 5 && throttle_arg_is(&argv[3], "COST"))
        return fail(err, "%s", no_cost(cmd));
    const extra_option_t *extra = sl_init(cmd, out);
    int64_t window_ms = 0;
    if (sl_head(argv, out, &window_ms, err) != 0)
        return -1;
    for (size_t i = 5; i < argc; i += 2) {
        if (i + 1 >= argc)
            return fail(err, "ERR syntax error");
        int rc = extra != NULL ? extra_option(extra, argv, i, out, err) : 0;
        if (rc < 0 || (rc == 0 && rule_option(cmd, argv, i, out, err) != 0))
            return -1;
    }
    return sl_finish(cmd, window_ms, out, err);
}

int64_t throttle_settle_charged_ns(const throttle_req_t *req, int64_t now_ns)
{
    if (req->at_ms < 0) {
        return now_ns; /* no AT: now */
    }
    int64_t at_ns = req->at_ms > now_ns / SL_NS_PER_MS ? now_ns / SL_NS_PER_MS : req->at_ms;
    return at_ns * SL_NS_PER_MS; /* <= now_ns: no overflow */
}

sl_lease_t throttle_return_lease(const throttle_req_t *req, int64_t now_ns)
{
    sl_lease_t lease = {0};
    lease.granted = req->granted;
    lease.until_ns = req->until_us * SL_NS_PER_US; /* the parser kept it below SL_NOW_MAX_NS */
    lease.at_ns = req->lease_at_us * SL_NS_PER_US; /* <= until_ns */
    if (lease.at_ns > now_ns) {
        lease.at_ns = now_ns; /* an AT in the future is now */
    }
    return lease;
}

void throttle_lease_error(const throttle_req_t *req, char err[THROTTLE_ERR_MAX])
{
    const sl_rule_t *r = &req->rule;
    const core_algorithm_t *row = core_algorithm(r->algorithm);
    if (row != NULL && !(row->caps & CORE_CAP_LEASABLE)) {
        fail(err, "ERR %s cannot lease: %s", row->name, row->lease_refusal);
    } else if (row != NULL && (row->caps & CORE_CAP_TOKENS)) {
        fail(err, "ERR for must be at most %" PRId64 " ms for this rule (capacity - 1 intervals)",
             (r->tolerance_ns - r->interval_ns) / SL_NS_PER_MS);
    } else {
        fail(err, "ERR for is out of range (at most 366 days)");
    }
}

void throttle_debt_error(const sl_rule_t *rule, char err[THROTTLE_ERR_MAX])
{
    fail(err,
         "ERR " THROTTLE_DEBT_REFUSED " (%" PRId64 " units past its limit); nothing was charged",
         rule->max_debt);
}

void throttle_reply_lease(const sl_lease_t *lease, int64_t out[5])
{
    out[0] = lease->granted;
    out[1] = lease->at_ns / SL_NS_PER_US;
    out[2] = lease->until_ns / SL_NS_PER_US;
    out[3] = lease->remaining;
    out[4] = sl_ns_to_units_ceil(lease->reset_after_ns, SL_NS_PER_MS);
}

bool throttle_closed_start(const throttle_req_t *req, int64_t now_ns, int64_t *at_ns)
{
    if (req->closed_from_ms < 0) {
        return false;
    }
    int64_t from_ns = req->closed_from_ms * SL_NS_PER_MS; /* the parser kept it within int64 ns */
    if (from_ns > SL_NOW_MAX_NS) {
        from_ns = SL_NOW_MAX_NS;
    }
    if (now_ns >= from_ns + req->rule.window_ns) { /* no overflow: both below INT64_MAX / 2 */
        return false;
    }
    *at_ns = from_ns;
    return true;
}

/* CL.THROTTLE's algorithm: redis-cell's GCRA, the token algorithm of capacity max_burst + 1 (the
 * first such row; 0, no algorithm, when there is none). */
static sl_algorithm_t cell_algorithm(void)
{
    CORE_ALGORITHM_EACH(row)
    {
        if ((row->caps & CORE_CAP_TOKENS) && row->capacity_extra == 1)
            return core_algorithm_id(row);
    }
    return (sl_algorithm_t)0;
}

/* CL.THROTTLE key max_burst count period_s [quantity] */
static int parse_cl(const throttle_arg_t *argv, size_t argc, throttle_req_t *out, char *err)
{
    if (argc < 5) {
        return wrong_arity(&argv[0], err);
    }
    if (argc > 6) {
        return fail(err, "ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> "
                         "[<quantity>]");
    }
    int64_t v[4] = {0, 0, 0, 1}; /* max_burst, count, period_s, quantity */
    for (size_t i = 2; i < argc; i++) {
        if (!throttle_arg_i64(&argv[i], &v[i - 2])) {
            char b[SHOW_BUF];
            return fail(err, "ERR Couldn't parse as integer: %s", show(&argv[i], b));
        }
    }
    if (v[0] < 0) {
        return fail(err, "ERR max_burst must be >= 0");
    }
    if (v[1] <= 0) {
        return fail(err, "ERR count per period must be > 0");
    }
    if (v[3] < 0) {
        return fail(err, "ERR quantity must be >= 0");
    }
    if (v[2] <= 0 || v[2] > INT64_MAX / SL_NS_PER_SEC) {
        return fail(err, "ERR period must be > 0");
    }
    out->params = (sl_rule_t){.algorithm = cell_algorithm(),
                              .limit = v[1],
                              .window_ns = v[2] * SL_NS_PER_SEC,
                              .burst = v[0],
                              .buckets = SL_DEFAULT,
                              .max_debt = SL_DEFAULT};
    out->cost = v[3];
    out->reserved = out->actual = 0;
    out->want = out->lease_ms = out->granted = out->unused = 0;
    out->lease_at_us = out->until_us = 0;
    out->hold_ms = out->hold_id = 0;
    out->reserve = 0;
    out->at_ms = -1;
    out->closed_from_ms = -1;
    return prepare(out, err);
}

int throttle_parse(throttle_cmd_t cmd, const throttle_arg_t *argv, size_t argc, throttle_req_t *out,
                   char err[THROTTLE_ERR_MAX])
{
    if (argc == 0) {
        return fail(err, "ERR empty command");
    }
    switch (cmd) {
    case THROTTLE_SL:
    case THROTTLE_SL_PEEK:
    case THROTTLE_SL_SETTLE:
    case THROTTLE_SL_LEASE:
    case THROTTLE_SL_RETURN:
    case THROTTLE_SL_ACQUIRE:
    case THROTTLE_SL_RELEASE:
        return parse_sl(cmd, argv, argc, out, err);
    case THROTTLE_CL:
        return parse_cl(argv, argc, out, err);
    }
    return fail(err, "ERR unknown throttle command");
}

sl_rule_t throttle_rule_given(const sl_rule_t *rule)
{
    sl_rule_t given = *rule;
    const core_algorithm_t *row = core_algorithm(rule->algorithm);
    if (row == NULL)
        return given;
    if (row->burst.taken ? rule->burst == core_param_default(&row->burst, rule->limit)
                         : rule->burst == 0)
        given.burst = SL_DEFAULT;
    if (row->buckets.taken ? rule->buckets == core_param_default(&row->buckets, rule->limit)
                           : rule->buckets == 0)
        given.buckets = SL_DEFAULT;
    if (rule->max_debt == rule->capacity)
        given.max_debt = SL_DEFAULT;
    return given;
}

/* Appends to label (n bytes used so far, kept below THROTTLE_LABEL_MAX; cut when full). */
static void label_add(char label[THROTTLE_LABEL_MAX], size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void label_add(char label[THROTTLE_LABEL_MAX], size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(label + *n, THROTTLE_LABEL_MAX - *n, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n = *n + (size_t)w < THROTTLE_LABEL_MAX ? *n + (size_t)w : THROTTLE_LABEL_MAX - 1;
}

/* A duration as the command takes it: integer ms, or ns when finer (never for a rule the
 * parser made). */
static void label_duration(char label[THROTTLE_LABEL_MAX], size_t *n, const char *before,
                           int64_t ns)
{
    if (ns % SL_NS_PER_MS == 0)
        label_add(label, n, "%s%lld", before, (long long)(ns / SL_NS_PER_MS));
    else
        label_add(label, n, "%s%lldns", before, (long long)ns);
}

void throttle_rule_label(const sl_rule_t *rule, char label[THROTTLE_LABEL_MAX])
{
    sl_rule_t g = throttle_rule_given(rule);
    const char *alg = sl_algorithm_name(g.algorithm);
    size_t n = 0;
    label[0] = '\0';
    label_add(label, &n, "the inline rule %s %lld", alg != NULL ? alg : "?", (long long)g.limit);
    label_duration(label, &n, " ", g.window_ns);
    if (g.burst != SL_DEFAULT)
        label_add(label, &n, " BURST %lld", (long long)g.burst);
    if (g.buckets != SL_DEFAULT)
        label_add(label, &n, " BUCKETS %lld", (long long)g.buckets);
    if (g.max_delay_ns > 0)
        label_duration(label, &n, " MAX_DELAY ", g.max_delay_ns);
    if (g.max_debt != SL_DEFAULT)
        label_add(label, &n, " MAX_DEBT %lld", (long long)g.max_debt);
}

bool throttle_never_error(const throttle_req_t *req, const sl_decision_t *d,
                          char err[THROTTLE_ERR_MAX])
{
    if (d->allowed || d->retry_after_ns >= 0 || req->cost <= d->limit) {
        return false; /* within the capacity: never only for its RESERVE, a refusal */
    }
    if (req->rule.adaptive.algorithm != SL_ADAPTIVE_NONE &&
        req->cost <= req->rule.adaptive.max_limit) {
        return false; /* past the limit now, which may grow: a refusal (retry_after -1), not this */
    }
    char label[THROTTLE_LABEL_MAX];
    throttle_rule_label(&req->rule, label);
    fail(err, "ERR cost %lld exceeds what %s can ever admit (%lld per window)",
         (long long)req->cost, label, (long long)d->limit);
    return true;
}

void throttle_reply_sl(const sl_decision_t *d, int64_t out[5])
{
    int64_t retry_ns = d->allowed ? d->delay_ns : d->retry_after_ns;
    out[0] = d->allowed ? 1 : 0;
    out[1] = d->limit;
    out[2] = d->remaining;
    out[3] = sl_ns_to_units_ceil(retry_ns, SL_NS_PER_MS);
    out[4] = sl_ns_to_units_ceil(d->reset_after_ns, SL_NS_PER_MS);
}

int64_t throttle_cell_seconds(int64_t ns)
{
    if (ns < 0) {
        return -1;
    }
    return ns / SL_NS_PER_SEC + (ns % SL_NS_PER_SEC >= SL_NS_PER_MS ? 1 : 0);
}

void throttle_reply_cl(const sl_decision_t *d, int64_t out[5])
{
    out[0] = d->allowed ? 0 : 1;
    out[1] = d->limit;
    out[2] = d->remaining;
    out[3] = d->allowed ? -1 : throttle_cell_seconds(d->retry_after_ns);
    out[4] = throttle_cell_seconds(d->reset_after_ns);
}

bool throttle_release_sample(const throttle_req_t *req, sl_sample_t *out)
{
    *out = (sl_sample_t){req->latency_us >= 0 ? req->latency_us * SL_NS_PER_US : -1,
                         req->dropped == 1};
    return req->latency_us >= 0 || req->dropped == 1;
}
