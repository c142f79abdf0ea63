/*
 * prog_sdk_cases.c - every case of tests/sdk/cases.json (the table of client cases each language
 * package runs) through libsluice-client, the reference the table describes (run by
 * test_client_cases.sh).
 *
 *   prog_sdk_cases CASES_JSON PORT HANDSHAKE_DIR
 *
 * sluiced must listen on 127.0.0.1:PORT with the table's rules_yaml. Each case gets a fresh
 * blocking handle (slc_connect) with the case's cache_size (slc_set_cache_size), a fake clock
 * (slc_set_clock; advance_ms moves it) and keys prefixed with a string fresh to this run. The
 * ops map to slc_allow_ex, slc_peek_ex, slc_settle (no AT), slc_reset, slc_acquire_ex,
 * slc_release_ex and slc_cache_hits: a step's "priority" is slc_request_opts_t's priority (none:
 * NULL options), its "latency_ms" (a number, fractions allowed) slc_release_opts_t's latency_us
 * rounded to the microsecond and "dropped" its dropped. stop_server and the restart after such a
 * case are asked of the script through HANDSHAKE_DIR: the program makes the file "stop" (or
 * "start") there and waits, at most 120 s, for "stop.done" (or "start.done").
 *
 * on_unreachable: the C client has no such option; failing open or closed is its caller's choice
 * (docs/client.md, "When sluiced cannot be reached"). For a case that sets it, the runner applies
 * that documented caller pattern (fall_back() below, the document's function word for word,
 * which test_client_cases.sh checks) to every call that returns a decision, and the case must still
 * hold: a call that fails with SLC_EIO is answered by the fallback decision, marked fallback;
 * "raise" (the default) leaves the error to the step.
 *
 * Prints one "ok" or "not ok" line per case, with the failing step; exits 0 when all passed.
 */
#define _GNU_SOURCE /* strcasestr */
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/client.h"

#define HOLDS_MAX          16
#define HANDSHAKE_MS       120000
#define CONNECT_TIMEOUT_MS 10000 /* ms: a loaded machine answers slowly, never this slowly */

enum unreachable { UNREACHABLE_RAISE, UNREACHABLE_ALLOW, UNREACHABLE_DENY };

/* The caller's side of a call: what it answers when sluiced cannot be reached. */
typedef struct caller {
    enum unreachable mode;
    int failures; /* calls in a row that met SLC_EIO: the backoff's attempt */
    uint64_t rng; /* the backoff's generator */
} caller_t;

/* One step's answer, as the table names its fields. */
typedef struct outcome {
    slc_decision_t d;
    bool fallback;    /* the caller's fallback decision, not the server's */
    uint64_t hold_id; /* acquire: 0 when no hold was made */
    int64_t count;    /* cache_hits */
} outcome_t;

typedef struct run {
    const char *handshake_dir;
    int port;
    char prefix[64];
    int stopped; /* cases that stopped the server */
} run_t;

typedef struct ctx {
    run_t *run;
    slc_client_t *c;
    caller_t caller;
    int64_t now_ns; /* the fake clock */
    bool stopped;
    struct {
        char name[32];
        uint64_t id;
    } holds[HOLDS_MAX];
    int nholds;
    char why[512]; /* what went wrong, for the "not ok" line */
} ctx_t;

static int64_t fake_clock(void *arg)
{
    return ((ctx_t *)arg)->now_ns;
}

static bool fail(ctx_t *x, const char *fmt, const char *a, const char *b)
{
    snprintf(x->why, sizeof x->why, fmt, a, b);
    return false;
}

/* ---- the documented caller pattern (docs/client.md, "When sluiced cannot be reached") ---- */

/* rc and *d: what a call returned. On SLC_EIO, *d becomes the fallback decision and SLC_OK is
 * returned: open admits (limit, remaining and times 0); closed refuses, retry_after_ms the next
 * backoff delay (at least 1 ms). Other codes pass through; one that reached sluiced resets the
 * count of failures in a row. */
static int fall_back(int rc, bool fail_open, int *failures, uint64_t *rng, slc_decision_t *d)
{
    if (rc != SLC_EIO) {
        if (rc == SLC_OK)
            *failures = 0;
        return rc;
    }
    *d = (slc_decision_t){.allowed = fail_open};
    if (!fail_open) {
        int64_t wait_ms = slc_backoff_ms((*failures)++, 50, 2000, rng);
        d->retry_after_ms = wait_ms > 0 ? wait_ms : 1;
    }
    return SLC_OK;
}

/* The case's on_unreachable as that caller: "raise" leaves rc alone; "allow" and "deny" fall
 * back open or closed. *fallback says whether *d is the fallback. */
static int allow_or_fallback(caller_t *k, int rc, slc_decision_t *d, bool *fallback)
{
    *fallback = rc == SLC_EIO && k->mode != UNREACHABLE_RAISE;
    if (k->mode == UNREACHABLE_RAISE)
        return rc;
    return fall_back(rc, k->mode == UNREACHABLE_ALLOW, &k->failures, &k->rng, d);
}

/* ---- the script's side: stopping and starting sluiced ------------------------------------ */

static bool touch(const char *path)
{
    FILE *f = fopen(path, "w");
    return f != NULL && fclose(f) == 0;
}

/* Asks the script to "stop" or "start" sluiced and waits until it has (HANDSHAKE_MS at most). */
static bool server_ctl(const run_t *r, const char *op)
{
    char req[512], tmp[520], done[520];
    snprintf(req, sizeof req, "%s/%s", r->handshake_dir, op);
    snprintf(tmp, sizeof tmp, "%s.tmp", req);
    snprintf(done, sizeof done, "%s.done", req);
    if (!touch(tmp) || rename(tmp, req) != 0)
        return false;
    for (int i = 0; i < HANDSHAKE_MS / 20; i++) {
        if (access(done, F_OK) == 0)
            return unlink(done) == 0;
        usleep(20000);
    }
    return false;
}

/* ---- the ops ------------------------------------------------------------------------------ */

static const char *str_field(json_t *step, const char *name)
{
    const char *s = json_string_value(json_object_get(step, name));
    return s != NULL ? s : "";
}

static int64_t int_field(json_t *step, const char *name, int64_t absent)
{
    json_t *v = json_object_get(step, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : absent;
}

/* The step's request options: its "priority" in *o, and o itself; NULL when it names none. */
static const slc_request_opts_t *request_opts(json_t *step, slc_request_opts_t *o)
{
    *o = (slc_request_opts_t){.priority = json_string_value(json_object_get(step, "priority"))};
    return o->priority != NULL ? o : NULL;
}

/* The step's key with the run's prefix, in buf. */
static const char *step_key(ctx_t *x, json_t *step, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", x->run->prefix, str_field(step, "key"));
    return buf;
}

/* A step's op: returns an SLC_* code and fills *o (the caller pattern applied). */
typedef int (*op_fn)(ctx_t *x, json_t *step, outcome_t *o);

static int op_allow(ctx_t *x, json_t *step, outcome_t *o)
{
    char key[256];
    slc_request_opts_t ro;
    int rc = slc_allow_ex(x->c, str_field(step, "rule"), step_key(x, step, key, sizeof key),
                          int_field(step, "cost", 1), request_opts(step, &ro), &o->d);
    return allow_or_fallback(&x->caller, rc, &o->d, &o->fallback);
}

static int op_peek(ctx_t *x, json_t *step, outcome_t *o)
{
    char key[256];
    slc_request_opts_t ro;
    int rc = slc_peek_ex(x->c, str_field(step, "rule"), step_key(x, step, key, sizeof key),
                         request_opts(step, &ro), &o->d);
    return allow_or_fallback(&x->caller, rc, &o->d, &o->fallback);
}

static int op_settle(ctx_t *x, json_t *step, outcome_t *o)
{
    char key[256];
    int rc = slc_settle(x->c, str_field(step, "rule"), step_key(x, step, key, sizeof key),
                        int_field(step, "reserved", 0), int_field(step, "actual", 0), -1, &o->d);
    return allow_or_fallback(&x->caller, rc, &o->d, &o->fallback);
}

static int op_reset(ctx_t *x, json_t *step, outcome_t *o)
{
    char key[256];
    (void)o;
    return slc_reset(x->c, str_field(step, "rule"), step_key(x, step, key, sizeof key));
}

static int op_acquire(ctx_t *x, json_t *step, outcome_t *o)
{
    char key[256];
    slc_request_opts_t ro;
    int rc = slc_acquire_ex(x->c, str_field(step, "rule"), step_key(x, step, key, sizeof key),
                            int_field(step, "cost", 1), int_field(step, "timeout_ms", 0),
                            request_opts(step, &ro), &o->d, &o->hold_id);
    const char *save = json_string_value(json_object_get(step, "save"));
    if (rc == SLC_OK && save != NULL && x->nholds < HOLDS_MAX) {
        snprintf(x->holds[x->nholds].name, sizeof x->holds[0].name, "%s", save);
        x->holds[x->nholds++].id = o->hold_id;
    }
    return allow_or_fallback(&x->caller, rc, &o->d, &o->fallback);
}

/* The hold a release names: a saved name's id, or the integer itself (0 when neither). */
static uint64_t hold_of(const ctx_t *x, json_t *hold)
{
    if (json_is_integer(hold))
        return (uint64_t)json_integer_value(hold);
    for (int i = x->nholds - 1; i >= 0; i--)
        if (json_is_string(hold) && strcmp(x->holds[i].name, json_string_value(hold)) == 0)
            return x->holds[i].id;
    return 0;
}

static int op_release(ctx_t *x, json_t *step, outcome_t *o)
{
    char key[256];
    (void)o;
    json_t *latency = json_object_get(step, "latency_ms");
    double us = json_number_value(latency) * 1000; /* rounded half away from zero */
    slc_release_opts_t ro = {.has_latency = json_is_number(latency),
                             .latency_us = (int64_t)(us < 0 ? us - 0.5 : us + 0.5),
                             .dropped = json_is_true(json_object_get(step, "dropped"))};
    return slc_release_ex(x->c, str_field(step, "rule"), step_key(x, step, key, sizeof key),
                          hold_of(x, json_object_get(step, "hold")),
                          ro.has_latency || ro.dropped ? &ro : NULL);
}

static int op_advance_ms(ctx_t *x, json_t *step, outcome_t *o)
{
    (void)o;
    x->now_ns += int_field(step, "ms", 0) * 1000000;
    return SLC_OK;
}

static int op_stop_server(ctx_t *x, json_t *step, outcome_t *o)
{
    (void)step, (void)o;
    x->stopped = true;
    x->run->stopped++;
    if (server_ctl(x->run, "stop"))
        return SLC_OK;
    fprintf(stderr, "stop_server: the script did not stop sluiced within %d ms\n", HANDSHAKE_MS);
    return SLC_EINVAL;
}

static int op_cache_hits(ctx_t *x, json_t *step, outcome_t *o)
{
    (void)step;
    o->count = (int64_t)slc_cache_hits(x->c);
    return SLC_OK;
}

static const struct op {
    const char *name;
    op_fn run;
} OPS[] = {
    {"allow", op_allow},           {"peek", op_peek},
    {"settle", op_settle},         {"reset", op_reset},
    {"acquire", op_acquire},       {"release", op_release},
    {"advance_ms", op_advance_ms}, {"stop_server", op_stop_server},
    {"cache_hits", op_cache_hits},
};

/* ---- expectations ------------------------------------------------------------------------- */

enum field {
    F_ALLOWED,
    F_LIMIT,
    F_REMAINING,
    F_RETRY,
    F_RESET,
    F_CACHE,
    F_FALLBACK,
    F_HOLD,
    F_COUNT
};

static const struct {
    const char *name;
    enum field id;
} FIELDS[] = {
    {"allowed", F_ALLOWED},      {"limit", F_LIMIT},
    {"remaining", F_REMAINING},  {"retry_after_ms", F_RETRY},
    {"reset_after_ms", F_RESET}, {"from_cache", F_CACHE},
    {"fallback", F_FALLBACK},    {"hold", F_HOLD},
    {"count", F_COUNT},
};

static int64_t field_value(const outcome_t *o, enum field f)
{
    switch (f) {
    case F_ALLOWED:
        return o->d.allowed;
    case F_LIMIT:
        return o->d.limit;
    case F_REMAINING:
        return o->d.remaining;
    case F_RETRY:
        return o->d.retry_after_ms;
    case F_RESET:
        return o->d.reset_after_ms;
    case F_CACHE:
        return o->d.from_cache;
    case F_FALLBACK:
        return o->fallback;
    case F_HOLD:
        return o->hold_id != 0;
    case F_COUNT:
        return o->count;
    }
    return INT64_MIN;
}

/* Whether got matches want: a number or a boolean exactly, {"gt": n} / {"lt": n} compared. */
static bool value_matches(int64_t got, json_t *want)
{
    if (json_is_boolean(want))
        return got == json_is_true(want);
    if (json_is_integer(want))
        return got == json_integer_value(want);
    json_t *gt = json_object_get(want, "gt"), *lt = json_object_get(want, "lt");
    if (gt == NULL && lt == NULL)
        return false;
    return (gt == NULL || got > json_integer_value(gt)) &&
           (lt == NULL || got < json_integer_value(lt));
}

static bool field_matches(ctx_t *x, const outcome_t *o, const char *name, json_t *want)
{
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
        if (strcmp(FIELDS[i].name, name) != 0)
            continue;
        int64_t got = field_value(o, FIELDS[i].id);
        if (value_matches(got, want))
            return true;
        char g[160];
        char *w = json_dumps(want, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(g, sizeof g, "%" PRId64 ", expected %s", got, w != NULL ? w : "?");
        free(w);
        return fail(x, "%s is %s", name, g);
    }
    return fail(x, "unknown field %s%s", name, "");
}

/* Whether the step's answer (rc, *o) is what its "expect" asks. */
static bool step_holds(ctx_t *x, json_t *expect, int rc, const outcome_t *o)
{
    json_t *err = json_object_get(expect, "error");
    if (err != NULL) {
        if (rc == SLC_OK)
            return fail(x, "did not fail (expected an error containing \"%s\")%s",
                        json_string_value(err), "");
        if (strcasestr(slc_errstr(x->c), json_string_value(err)) == NULL)
            return fail(x, "error \"%s\" lacks \"%s\"", slc_errstr(x->c), json_string_value(err));
        return true;
    }
    if (rc != SLC_OK)
        return fail(x, "failed: %s%s", slc_errstr(x->c), "");
    const char *name;
    json_t *want;
    json_object_foreach(expect, name, want)
    {
        if (!field_matches(x, o, name, want))
            return false;
    }
    return true;
}

/* ---- cases -------------------------------------------------------------------------------- */

static op_fn find_op(const char *name)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (strcmp(OPS[i].name, name) == 0)
            return OPS[i].run;
    return NULL;
}

static bool run_step(ctx_t *x, json_t *step)
{
    const char *name = str_field(step, "op");
    op_fn op = find_op(name);
    if (op == NULL)
        return fail(x, "unknown op %s%s", name, "");
    outcome_t o = {0};
    int rc = op(x, step, &o);
    return step_holds(x, json_object_get(step, "expect"), rc, &o); /* NULL: nothing asked */
}

/* The case's options on the handle and the caller: false (and x->why) for a bad one. */
static bool apply_options(ctx_t *x, json_t *options)
{
    static const char *const modes[] = {"raise", "allow", "deny"};
    json_t *size = json_object_get(options, "cache_size");
    if (size != NULL && slc_set_cache_size(x->c, (size_t)json_integer_value(size)) != SLC_OK)
        return fail(x, "cache_size: %s%s", slc_errstr(x->c), "");
    const char *mode = json_string_value(json_object_get(options, "on_unreachable"));
    for (int i = 0; mode != NULL && i < 3; i++)
        if (strcmp(mode, modes[i]) == 0) {
            x->caller.mode = (enum unreachable)i;
            return true;
        }
    return mode == NULL ? true : fail(x, "on_unreachable %s%s", mode, "");
}

/* Runs one case on a fresh handle; false with x->why (and the step in *failed) when it fails. */
static bool run_case(ctx_t *x, json_t *cas, size_t *failed)
{
    x->c = slc_connect("127.0.0.1", x->run->port, NULL, CONNECT_TIMEOUT_MS);
    if (x->c == NULL || slc_err(x->c) != SLC_OK)
        return fail(x, "connect: %s%s", x->c ? slc_errstr(x->c) : "no memory", "");
    slc_set_clock(x->c, fake_clock, x);
    if (!apply_options(x, json_object_get(cas, "options")))
        return false;
    json_t *steps = json_object_get(cas, "steps");
    for (*failed = 0; *failed < json_array_size(steps); ++*failed)
        if (!run_step(x, json_array_get(steps, *failed)))
            return false;
    return true;
}

static bool case_ok(run_t *r, json_t *cas, int n)
{
    ctx_t *x = calloc(1, sizeof *x);
    size_t failed = 0;
    if (x == NULL)
        return false;
    *x = (ctx_t){.run = r, .now_ns = 1000000000000, .caller.rng = 20261202u + (uint64_t)n};
    bool ok = run_case(x, cas, &failed);
    const char *name = json_string_value(json_object_get(cas, "name"));
    if (ok)
        printf("ok %d - %s\n", n, name);
    else
        printf("not ok %d - %s: step %zu: %s\n", n, name, failed + 1, x->why);
    slc_free(x->c);
    if (x->stopped && !server_ctl(r, "start")) {
        printf("not ok %d - %s: sluiced was not started again\n", n, name);
        ok = false;
    }
    free(x);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CASES_JSON PORT HANDSHAKE_DIR\n", argv[0]);
        return 2;
    }
    json_error_t jerr;
    json_t *table = json_load_file(argv[1], 0, &jerr);
    json_t *cases = json_object_get(table, "cases");
    if (!json_is_array(cases) || json_array_size(cases) == 0) {
        fprintf(stderr, "%s: no cases (%s, line %d)\n", argv[1], jerr.text, jerr.line);
        return 2;
    }
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    run_t r = {.handshake_dir = argv[3], .port = atoi(argv[2])};
    snprintf(r.prefix, sizeof r.prefix, "c%ld.%ld.%ld.", (long)getpid(), (long)t.tv_sec,
             (long)t.tv_nsec);
    int failures = 0;
    size_t i;
    json_t *cas;
    json_array_foreach(cases, i, cas)
    {
        failures += !case_ok(&r, cas, (int)i + 1);
    }
    printf("# %zu cases, %d failed, %d stopped sluiced\n", json_array_size(cases), failures,
           r.stopped);
    json_decref(table);
    return failures == 0 ? 0 : 1;
}
