/*
 * replay_cmd.c - the flags of `sluice replay` and its entry point.
 *
 * replay_parse_args() turns argv into a struct replay_config with no I/O: every flag value is
 * first collected as text (the last occurrence wins), then converted and checked in a fixed
 * order, then the rule is prepared by the library; an error from sl_rule_prepare() is mapped
 * back to the flag that caused it through flag_of_error[]. replay_main() does the I/O: opens
 * the input, prints messages, maps outcomes to exit codes (0 ok, 1 input, 2 usage).
 */
#include "replay.h"

#include "core/algorithms.h"
#include "proto/text.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_INPUT 1 /* malformed input, unreadable file, write error */
#define EXIT_USAGE 2 /* bad flags */

#define USAGE_MAX  4096 /* bytes of the usage text */
#define USAGE_WRAP 88   /* columns of its lines */
#define USAGE_OPT  24   /* column of an option's description */

static const char usage_head[] =
    "usage: sluice replay --algorithm ALG --limit N --window DURATION [--burst B]\n"
    "                     [--buckets K] [--max-delay DURATION] [--unit ms|us|ns|s]\n"
    "                     [--format plain|nginx|jsonl] [--key FIELD] [--time-field NAME]\n"
    "                     [--cost-field NAME] [--summary] [FILE|-]\n"
    "\n"
    "Replay a recorded traffic log against a candidate rule and show what it would have\n"
    "rejected. Every key starts fresh; nothing is stored.\n"
    "\n"
    "Input (FILE, or stdin when FILE is - or absent): one request per line,\n"
    "  TIME KEY [COST]\n"
    "separated by spaces or tabs. TIME is a non-negative integer in --unit, or an RFC 3339\n"
    "timestamp (2026-12-02T07:26:18.250Z); COST defaults to 1 (0 peeks: reports without\n"
    "consuming). Blank lines and lines whose first non-blank character is # are skipped.\n"
    "Keys are at most 1024 bytes. Or, with --format nginx, nginx's combined access log (one\n"
    "request per line, cost 1, the key the field --key names); with --format jsonl, one JSON\n"
    "object per line (the members --key, --time-field and --cost-field name; time an integer\n"
    "in --unit or an RFC 3339 string). TIME in the output is then in --unit since 1970.\n"
    "\n"
    "Output: one tab-separated line per request,\n"
    "  TIME KEY COST ALLOWED LIMIT REMAINING RETRY_AFTER RESET_AFTER [DELAY]\n";

static const char usage_tail[] =
    "  --unit UNIT           unit of TIME and of reported durations: ms (default), us, ns, s\n"
    "  --format FORMAT       the input: plain (default), nginx (combined log), jsonl\n"
    "  --key FIELD           nginx: the key, one of addr (default), user, request, method,\n"
    "                        path, status, referer, agent; jsonl: the key's member (key)\n"
    "  --time-field NAME     jsonl: the time's member (default time)\n"
    "  --cost-field NAME     jsonl: the cost's member (default cost; absent: cost 1)\n"
    "  --summary             then print '# summary', '# KEY admitted=N rejected=M' per key\n"
    "                        (first-seen order) and '# total admitted=N rejected=M'\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit status: 0 ok; 1 malformed input (the message names the file and line; the lines\n"
    "before it have been printed, the summary is not); 2 usage error.\n";

/* The usage being made: its text and the column its last line is at. */
typedef struct usage {
    char text[USAGE_MAX];
    size_t len, column;
} usage_t;

/* Appends printf-style text to the usage (cut short at USAGE_MAX: it never is). */
static void usage_add(usage_t *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void usage_add(usage_t *u, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(u->text + u->len, USAGE_MAX - u->len, fmt, ap);
    va_end(ap);
    if (w > 0)
        u->len = (size_t)w >= USAGE_MAX - u->len ? USAGE_MAX - 1 : u->len + (size_t)w;
}

/* Appends words (separated by single spaces) wrapped at USAGE_WRAP columns, a line broken
 * going on at column `indent`. */
static void usage_words(usage_t *u, const char *words, size_t indent)
{
    for (const char *w = words; *w != '\0';) {
        size_t n = strcspn(w, " ");
        if (u->column > indent && u->column + 1 + n > USAGE_WRAP) {
            usage_add(u, "\n%*s", (int)indent, "");
            u->column = indent;
        } else if (u->column > indent) {
            usage_add(u, " ");
            u->column++;
        }
        usage_add(u, "%.*s", (int)n, w);
        u->column += n;
        w += n + (w[n] == ' ');
    }
}

/* Appends one option's line(s): "  --flag ARG", its description from column USAGE_OPT. */
static void usage_option(usage_t *u, const char *flag, const char *description)
{
    usage_add(u, "  %-*s ", USAGE_OPT - 3, flag);
    u->column = USAGE_OPT;
    usage_words(u, description, USAGE_OPT);
    usage_add(u, "\n");
    u->column = 0;
}

/* "(N; B for token_bucket; B + 1 for gcra)" and "token_bucket capacity / gcra max burst",
 * from the rows that take a burst. */
static void usage_bursts(char *capacity, char *burst, size_t cap)
{
    size_t c = (size_t)snprintf(capacity, cap, "(N"), b = 0;
    burst[0] = '\0';
    CORE_ALGORITHM_EACH(row)
    {
        if (!row->burst.taken)
            continue;
        if (row->capacity_extra > 0)
            c += (size_t)snprintf(capacity + c, cap - c, "; B + %lld for %s",
                                  (long long)row->capacity_extra, row->name);
        else
            c += (size_t)snprintf(capacity + c, cap - c, "; B for %s", row->name);
        b += (size_t)snprintf(burst + b, cap - b, "%s%s %s", b > 0 ? " / " : "", row->name,
                              row->burst_means != NULL ? row->burst_means : "burst");
    }
    snprintf(capacity + c, cap - c, ")");
}

/* The options that name the rule, from the table of algorithms. */
static void usage_rule_options(usage_t *u)
{
    char names[256], text[1024], capacity[256], burst[256];
    core_algorithm_join(names, sizeof names, core_algorithm_any, ", ", " or ");
    usage_option(u, "--algorithm ALG", names);
    usage_option(u, "--limit N", "units admitted per window (> 0)");
    usage_option(u, "--window DURATION",
                 "window length: 250ms, 10s, 1m, 1h, 1d, 1h30m, ... (a "
                 "bare number is milliseconds, as in rules files: --unit "
                 "ms only)");
    usage_bursts(capacity, burst, sizeof capacity);
    snprintf(text, sizeof text, "%s (default N)", burst);
    usage_option(u, "--burst B", text);
    const core_algorithm_t *k = core_algorithm_next(NULL);
    while (k != NULL && !k->buckets.taken)
        k = core_algorithm_next(k);
    core_algorithm_join(names, sizeof names, core_algorithm_takes_buckets, ", ", " and ");
    snprintf(text, sizeof text, "%s sub-windows (default %lld; must divide the window)", names,
             (long long)(k != NULL ? k->buckets.def : 0));
    usage_option(u, "--buckets K", text);
    core_algorithm_join(names, sizeof names, core_algorithm_takes_delay, "/", "/");
    snprintf(text, sizeof text, "%s: admit a request that would wait at most this", names);
    usage_option(u, "--max-delay DURATION", text);
}

/* The usage text: the parts that name algorithms made from the table of algorithms (once: the
 * CLI has one thread). */
const char *replay_usage(void)
{
    static usage_t u;
    if (u.len > 0)
        return u.text;
    char capacity[256], burst[256], text[1024];
    usage_add(&u, "%s", usage_head);
    usage_bursts(capacity, burst, sizeof capacity);
    snprintf(text, sizeof text,
             "ALLOWED is 1 or 0; LIMIT is the rule's capacity %s. RETRY_AFTER, RESET_AFTER and "
             "DELAY are in --unit, rounded up; RETRY_AFTER is -1 when the cost can never be "
             "admitted. The DELAY column appears only with --max-delay: a request admitted after "
             "a wait has ALLOWED 1 and DELAY > 0.",
             capacity);
    usage_words(&u, text, 0);
    usage_add(&u, "\n\nOptions:\n");
    u.column = 0;
    usage_rule_options(&u);
    usage_add(&u, "%s", usage_tail);
    return u.text;
}

/* ---- flags as data ----------------------------------------------------------------------- */

enum flag {
    FLAG_ALGORITHM,
    FLAG_LIMIT,
    FLAG_WINDOW,
    FLAG_BURST,
    FLAG_BUCKETS,
    FLAG_MAX_DELAY,
    FLAG_UNIT,
    FLAG_SUMMARY,
    FLAG_FORMAT,
    FLAG_KEY,
    FLAG_TIME_FIELD,
    FLAG_COST_FIELD,
    FLAG_COUNT
};

#define FLAG_BASE 256 /* getopt_long value of flag f: FLAG_BASE + f, clear of short options */

/* In enum flag order: flag_name(f) is long_options[f].name. */
static const struct option long_options[] = {
    {"algorithm", required_argument, NULL, FLAG_BASE + FLAG_ALGORITHM},
    {"limit", required_argument, NULL, FLAG_BASE + FLAG_LIMIT},
    {"window", required_argument, NULL, FLAG_BASE + FLAG_WINDOW},
    {"burst", required_argument, NULL, FLAG_BASE + FLAG_BURST},
    {"buckets", required_argument, NULL, FLAG_BASE + FLAG_BUCKETS},
    {"max-delay", required_argument, NULL, FLAG_BASE + FLAG_MAX_DELAY},
    {"unit", required_argument, NULL, FLAG_BASE + FLAG_UNIT},
    {"summary", no_argument, NULL, FLAG_BASE + FLAG_SUMMARY},
    {"format", required_argument, NULL, FLAG_BASE + FLAG_FORMAT},
    {"key", required_argument, NULL, FLAG_BASE + FLAG_KEY},
    {"time-field", required_argument, NULL, FLAG_BASE + FLAG_TIME_FIELD},
    {"cost-field", required_argument, NULL, FLAG_BASE + FLAG_COST_FIELD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The flag to blame for each sl_rule_prepare() error. */
static const struct {
    int code;
    enum flag flag;
} flag_of_error[] = {
    {SL_EALGORITHM, FLAG_ALGORITHM}, {SL_ELIMIT, FLAG_LIMIT},     {SL_EWINDOW, FLAG_WINDOW},
    {SL_EBURST, FLAG_BURST},         {SL_EBUCKETS, FLAG_BUCKETS}, {SL_EDELAY, FLAG_MAX_DELAY},
};

static const struct {
    const char *name;
    int64_t ns;
} units[] = {
    {"ms", SL_NS_PER_MS},
    {"us", SL_NS_PER_US},
    {"ns", 1},
    {"s", SL_NS_PER_SEC},
};

#define usage_error(err, errlen, ...) text_error(REPLAY_ARGS_USAGE, err, errlen, __VA_ARGS__)

static const char *flag_name(enum flag f)
{
    return long_options[f].name;
}

/* A whole decimal integer, optionally signed, in int64 range. */
static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (*s != '-' && (*s < '0' || *s > '9')) {
        return false; /* no leading space or '+' */
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Parses an integer flag value into *out; negatives are reported with `negative_code`'s text
 * (burst and buckets use -1 internally as "default"). */
static int int_flag(enum flag f, const char *text, int negative_code, int64_t *out, char *err,
                    size_t errlen)
{
    if (!parse_int(text, out)) {
        return usage_error(err, errlen, "--%s: must be an integer, got '%s'", flag_name(f), text);
    }
    if (negative_code != 0 && *out < 0) {
        return usage_error(err, errlen, "--%s: %s, got '%s'", flag_name(f),
                           sl_strerror(negative_code), text);
    }
    return REPLAY_ARGS_OK;
}

/*
 * A duration flag: "250ms", "1h30m", ... or, as in rules files, a bare integer of milliseconds.
 * A bare integer is refused with another --unit (is "--unit s --window 60" a minute?).
 */
static int duration_flag(enum flag f, const char *text, int64_t unit_ns, int64_t *out, char *err,
                         size_t errlen)
{
    size_t digits = strspn(text, "0123456789");
    if (digits > 0 && text[digits] == '\0') {
        int64_t ms;
        if (unit_ns != SL_NS_PER_MS) {
            return usage_error(err, errlen,
                               "--%s: a bare number is milliseconds, and --unit is not ms: write "
                               "the unit (e.g. '%ss' or '%sms'), got '%s'",
                               flag_name(f), text, text, text);
        }
        if (!parse_int(text, &ms) || __builtin_mul_overflow(ms, SL_NS_PER_MS, out)) {
            return usage_error(err, errlen, "--%s: %s, got '%s'", flag_name(f),
                               sl_strerror(SL_EOVERFLOW), text);
        }
        return REPLAY_ARGS_OK;
    }
    int rc = sl_duration_parse(text, strlen(text), out);

    if (rc != SL_OK) {
        return usage_error(err, errlen, "--%s: %s, got '%s'", flag_name(f), sl_strerror(rc), text);
    }
    return REPLAY_ARGS_OK;
}

/* Collects flag values (last occurrence wins) and the FILE argument. */
static int collect(int argc, char **argv, const char *val[FLAG_COUNT], const char **path, char *err,
                   size_t errlen)
{
    int c;

    optind = 0; /* glibc: full reinitialisation, so repeated calls (tests) start clean */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        if (c == 'h') {
            return REPLAY_ARGS_HELP;
        }
        if (c >= FLAG_BASE && c < FLAG_BASE + FLAG_COUNT) {
            val[c - FLAG_BASE] = optarg != NULL ? optarg : "";
            continue;
        }
        const char *opt = argv[optind - 1];
        if (c == ':') {
            usage_error(err, errlen, "replay: option '%s' needs a value", opt);
        } else if (optopt >= FLAG_BASE) {
            usage_error(err, errlen, "replay: option '%s' takes no value", opt);
        } else if (optopt != 0) {
            usage_error(err, errlen, "replay: unknown option '-%c'", optopt);
        } else {
            usage_error(err, errlen, "replay: unknown option '%s'", opt);
        }
        return REPLAY_ARGS_UNKNOWN;
    }
    if (argc - optind > 1) {
        return usage_error(err, errlen, "replay: expected at most one FILE, got '%s' and '%s'",
                           argv[optind], argv[optind + 1]);
    }
    *path = optind < argc ? argv[optind] : "-";
    return REPLAY_ARGS_OK;
}

static int parse_algorithm(const char *text, sl_algorithm_t *out, char *err, size_t errlen)
{
    int rc = sl_algorithm_parse(text, strlen(text), out);

    if (rc != SL_OK) {
        return usage_error(err, errlen, "--algorithm: %s, got '%s'", sl_strerror(rc), text);
    }
    return REPLAY_ARGS_OK;
}

static int parse_unit(const char *text, struct replay_config *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(text, units[i].name) == 0) {
            cfg->unit = units[i].name;
            cfg->unit_ns = units[i].ns;
            return REPLAY_ARGS_OK;
        }
    }
    return usage_error(err, errlen, "--unit: must be one of ms, us, ns, s, got '%s'", text);
}

static const char *const format_names[] = {[REPLAY_FORMAT_PLAIN] = "plain",
                                           [REPLAY_FORMAT_NGINX] = "nginx",
                                           [REPLAY_FORMAT_JSONL] = "jsonl"};

/* --format, and the flags that name fields, each refused with a format that has no such field. */
static int parse_input(const char *val[FLAG_COUNT], replay_input_t *in, char *err, size_t errlen)
{
    const char *format = val[FLAG_FORMAT] != NULL ? val[FLAG_FORMAT] : "plain";
    size_t f = 0;
    while (f < sizeof format_names / sizeof format_names[0] && strcmp(format, format_names[f]) != 0)
        f++;
    if (f == sizeof format_names / sizeof format_names[0])
        return usage_error(err, errlen, "--format: must be one of plain, nginx, jsonl, got '%s'",
                           format);
    in->format = (replay_format_t)f;
    static const enum flag jsonl_only[] = {FLAG_TIME_FIELD, FLAG_COST_FIELD};
    for (size_t i = 0; i < sizeof jsonl_only / sizeof jsonl_only[0]; i++) {
        if (val[jsonl_only[i]] != NULL && in->format != REPLAY_FORMAT_JSONL)
            return usage_error(err, errlen, "--%s: only with --format jsonl",
                               flag_name(jsonl_only[i]));
    }
    const char *key = val[FLAG_KEY];
    if (key != NULL && in->format == REPLAY_FORMAT_PLAIN)
        return usage_error(err, errlen,
                           "--key: only with --format nginx or jsonl (a plain line's "
                           "key is its second field)");
    if (in->format == REPLAY_FORMAT_NGINX && key != NULL) {
        size_t k = 0;
        while (k < REPLAY_NGINX_FIELDS && strcmp(key, replay_nginx_field_names[k]) != 0)
            k++;
        if (k == REPLAY_NGINX_FIELDS)
            return usage_error(err, errlen,
                               "--key: an nginx field: addr, user, request, method, path, status, "
                               "referer or agent, got '%s'",
                               key);
        in->nginx_key = (replay_nginx_field_t)k;
    }
    in->json_key = in->format == REPLAY_FORMAT_JSONL ? key : NULL;
    in->json_time = val[FLAG_TIME_FIELD];
    in->json_cost = val[FLAG_COST_FIELD];
    return REPLAY_ARGS_OK;
}

/* Converts the collected values into cfg->rule (unprepared) and the options. */
static int convert(const char *val[FLAG_COUNT], struct replay_config *cfg, char *err, size_t errlen)
{
    sl_rule_t *r = &cfg->rule;
    static const enum flag required[] = {FLAG_ALGORITHM, FLAG_LIMIT, FLAG_WINDOW};
    int rc = REPLAY_ARGS_OK;

    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        if (val[required[i]] == NULL) {
            return usage_error(err, errlen, "--%s is required", flag_name(required[i]));
        }
    }
    rc = parse_algorithm(val[FLAG_ALGORITHM], &r->algorithm, err, errlen);
    if (rc == REPLAY_ARGS_OK) {
        rc = int_flag(FLAG_LIMIT, val[FLAG_LIMIT], 0, &r->limit, err, errlen);
    }
    if (rc == REPLAY_ARGS_OK && val[FLAG_UNIT] != NULL) { /* before the durations: see them */
        rc = parse_unit(val[FLAG_UNIT], cfg, err, errlen);
    }
    if (rc == REPLAY_ARGS_OK) {
        rc = duration_flag(FLAG_WINDOW, val[FLAG_WINDOW], cfg->unit_ns, &r->window_ns, err, errlen);
    }
    if (rc == REPLAY_ARGS_OK && val[FLAG_BURST] != NULL) {
        rc = int_flag(FLAG_BURST, val[FLAG_BURST], SL_EBURST, &r->burst, err, errlen);
    }
    if (rc == REPLAY_ARGS_OK && val[FLAG_BUCKETS] != NULL) {
        rc = int_flag(FLAG_BUCKETS, val[FLAG_BUCKETS], SL_EBUCKETS, &r->buckets, err, errlen);
    }
    if (rc == REPLAY_ARGS_OK && val[FLAG_MAX_DELAY] != NULL) {
        rc = duration_flag(FLAG_MAX_DELAY, val[FLAG_MAX_DELAY], cfg->unit_ns, &r->max_delay_ns, err,
                           errlen);
    }
    if (rc == REPLAY_ARGS_OK) {
        rc = parse_input(val, &cfg->input, err, errlen);
    }
    cfg->summary = val[FLAG_SUMMARY] != NULL;
    cfg->show_delay = val[FLAG_MAX_DELAY] != NULL;
    return rc;
}

/* Prepares the rule, blaming the flag behind a library error. */
static int prepare(const char *val[FLAG_COUNT], struct replay_config *cfg, char *err, size_t errlen)
{
    int rc = sl_rule_prepare(&cfg->rule);

    if (rc == SL_OK) {
        return REPLAY_ARGS_OK;
    }
    for (size_t i = 0; i < sizeof flag_of_error / sizeof flag_of_error[0]; i++) {
        enum flag f = flag_of_error[i].flag;
        if (flag_of_error[i].code == rc && val[f] != NULL) {
            return usage_error(err, errlen, "--%s: %s, got '%s'", flag_name(f), sl_strerror(rc),
                               val[f]);
        }
    }
    if (rc == SL_EBUCKETS) { /* the default bucket count does not divide the window */
        return usage_error(err, errlen,
                           "--window: %s, got '%s' (with %" PRId64 " buckets; see --buckets)",
                           sl_strerror(rc), val[FLAG_WINDOW], (int64_t)SL_BUCKETS_DEFAULT);
    }
    return usage_error(err, errlen, "rule: %s (--limit %s --window %s)", sl_strerror(rc),
                       val[FLAG_LIMIT], val[FLAG_WINDOW]);
}

int replay_parse_args(int argc, char **argv, struct replay_config *cfg, char *err, size_t errlen)
{
    const char *val[FLAG_COUNT] = {NULL};
    const char *path = "-";
    int rc;

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->rule.burst = SL_DEFAULT;
    cfg->rule.buckets = SL_DEFAULT;
    cfg->rule.max_debt = SL_DEFAULT;
    cfg->unit = "ms";
    cfg->unit_ns = SL_NS_PER_MS;

    rc = collect(argc, argv, val, &path, err, errlen);
    if (rc != REPLAY_ARGS_OK) {
        return rc;
    }
    cfg->path = path;
    rc = convert(val, cfg, err, errlen);
    if (rc != REPLAY_ARGS_OK) {
        return rc;
    }
    return prepare(val, cfg, err, errlen);
}

/* ---- the command ------------------------------------------------------------------------- */

int replay_main(int argc, char **argv)
{
    struct replay_config cfg;
    char err[REPLAY_ERR_MAX];
    FILE *in = stdin;
    const char *in_name = "<stdin>";

    switch (replay_parse_args(argc, argv, &cfg, err, sizeof err)) {
    case REPLAY_ARGS_HELP:
        fputs(replay_usage(), stdout);
        return fflush(stdout) == 0 ? 0 : EXIT_INPUT;
    case REPLAY_ARGS_UNKNOWN:
        fprintf(stderr, "sluice: %s\n\n%s", err, replay_usage());
        return EXIT_USAGE;
    case REPLAY_ARGS_USAGE:
        fprintf(stderr, "sluice: %s\nTry 'sluice replay --help' for more information.\n", err);
        return EXIT_USAGE;
    default:
        break;
    }
    if (strcmp(cfg.path, "-") != 0) {
        in_name = cfg.path;
        in = fopen(cfg.path, "r");
        if (in == NULL) {
            fprintf(stderr, "sluice: %s: %s\n", cfg.path, strerror(errno));
            return EXIT_INPUT;
        }
    }
    int rc = replay_run(&cfg, in, in_name, stdout, stderr);
    if (in != stdin) {
        fclose(in);
    }
    return rc == 0 ? 0 : EXIT_INPUT;
}
