/*
 * replay_job.c - one replay, from its body to its answer (replay_job.h).
 *
 * The log is read twice: once to find its time span (and refuse a malformed line before
 * deciding anything), once to decide each request on a fresh table of the candidate rule and
 * count it, per key and in REPLAY_BUCKETS buckets of equal length over the span. Before each
 * line of either pass the stop flag and the deadline are looked at.
 *
 * Memory. The table is made with max_bytes = the budget and one shard (so the whole budget is
 * one key's to use: a sliding_log key of limit 2^20 takes 8 MB); at the cap it drops keys whose
 * state is fresh and refuses a new key only when none is (SL_EFULL). The tallies count what they
 * hold and ask before each allocation. Both ask through replay_mem_charge(): the table's bytes
 * after each decision, the tallies' before they grow. What it refuses stops the replay.
 */
#include "proto/json_fields.h"
#include "server/replay_job.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/replay.h"
#include "rules/ruledef.h"
#include "server/json_write.h"
#include "sluice/sluice.h"

typedef struct job {
    const replay_limits_t *lim;
    const char *log; /* the log's text, log_len bytes (owned by the parsed body) */
    size_t log_len;
    int64_t unit_ns;
    int64_t first, last; /* the least and greatest TIME of the log, input units */
    size_t requests;     /* request lines of the log */
    size_t lines;        /* lines replayed (blank and comment lines too) */
    int64_t latest;      /* the greatest TIME replayed */
    size_t decided;      /* requests replayed */
    replay_stop_t stopped;
    char *err; /* REPLAY_JOB_ERR_MAX bytes: set for a 400 */
    sl_table_t *table;
    replay_tally_t tally;
    int64_t width; /* a bucket's length, input units */
    uint64_t admitted[REPLAY_BUCKETS], rejected[REPLAY_BUCKETS];
    size_t charged; /* bytes the table and tallies hold, as last counted */
    size_t peak;    /* the most charged */
} job_t;

#define job_error(j, ...) snprintf((j)->err, REPLAY_JOB_ERR_MAX, __VA_ARGS__)

static const char *const stop_names[] = {
    [REPLAY_COMPLETE] = NULL,
    [REPLAY_STOP_DEADLINE] = "deadline",
    [REPLAY_STOP_MEMORY] = "memory",
    [REPLAY_STOP_SHUTDOWN] = "shutdown",
};

const char *replay_job_stop_name(replay_stop_t s)
{
    return stop_names[s];
}

/* ---- the budget ---------------------------------------------------------------------------- */

/*
 * The one place a replay's memory is counted: its table and tallies hold, or are about to hold,
 * `bytes` together (0 at the end). Returns false, and counts nothing, when that is over the
 * replay's budget or the more it needs does not fit under the server's (--max-memory).
 */
static bool replay_mem_charge(job_t *j, size_t bytes)
{
    if (bytes > j->lim->memory_max) {
        return false;
    }
    sl_budget_t *b = j->lim->budget;
    if (bytes > j->charged && b != NULL && !sl_budget_take(b, bytes - j->charged)) {
        return false;
    }
    if (bytes < j->charged && b != NULL) {
        sl_budget_give(b, j->charged - bytes);
    }
    j->charged = bytes;
    j->peak = bytes > j->peak ? bytes : j->peak;
    return true;
}

/* The tallies' ask (replay_tally_ask_fn): they would hold tally_bytes. */
static bool tally_ask(void *arg, size_t tally_bytes)
{
    job_t *j = arg;
    return replay_mem_charge(j, sl_table_memory(j->table) + tally_bytes);
}

/* Whether the replay must stop before its next line; sets j->stopped when so. */
static bool job_must_stop(job_t *j)
{
    const replay_limits_t *lim = j->lim;
    if (lim->stop != NULL && atomic_load_explicit(lim->stop, memory_order_relaxed)) {
        j->stopped = REPLAY_STOP_SHUTDOWN;
    } else if (lim->clock_ns() >= lim->deadline_ns) {
        j->stopped = REPLAY_STOP_DEADLINE;
    }
    return j->stopped != REPLAY_COMPLETE;
}

/* ---- the log ------------------------------------------------------------------------------- */

typedef bool (*line_fn)(job_t *, const struct replay_request *);

/* Calls fn for each request line of the log, counting lines in *lines; stops at a malformed
 * line (j->err), when fn returns false or when the replay must stop. True at the log's end.
 * `paced`: the pass that replays, which the tests' line_pause_ns slows. */
static bool job_lines(job_t *j, line_fn fn, size_t *lines, bool paced)
{
    size_t off = 0;
    while (off < j->log_len) {
        if (paced && j->lim->line_pause_ns > 0) {
            struct timespec pause = {j->lim->line_pause_ns / 1000000000,
                                     j->lim->line_pause_ns % 1000000000};
            nanosleep(&pause, NULL);
        }
        if (job_must_stop(j)) {
            return false;
        }
        const char *line = j->log + off;
        const char *nl = memchr(line, '\n', j->log_len - off);
        size_t len = nl != NULL ? (size_t)(nl - line) + 1 : j->log_len - off;
        struct replay_request req;
        char why[REPLAY_ERR_MAX];
        int rc = replay_parse_line(line, len, j->unit_ns, &req, why, sizeof why);
        if (rc == REPLAY_LINE_ERROR) {
            job_error(j, "log: line %zu: %s", *lines + 1, why);
            return false;
        }
        if (rc == REPLAY_LINE_REQUEST && !fn(j, &req)) {
            return false;
        }
        off += len;
        ++*lines;
    }
    return true;
}

static bool span_one(job_t *j, const struct replay_request *req)
{
    j->first = j->requests == 0 || req->time < j->first ? req->time : j->first;
    j->last = j->requests == 0 || req->time > j->last ? req->time : j->last;
    j->requests++;
    return true;
}

static bool replay_one(job_t *j, const struct replay_request *req)
{
    sl_decision_t d;
    int rc = replay_step(j->table, &j->tally, req, &d);
    if (rc == SL_EFULL || rc == SL_ENOMEM) {
        j->stopped = REPLAY_STOP_MEMORY; /* this line is not counted */
        return false;
    }
    if (rc != SL_OK) {
        job_error(j, "log: line %zu: %s", j->lines + 1, sl_strerror(rc));
        return false;
    }
    size_t b = (size_t)((req->time - j->first) / j->width);
    (d.allowed ? j->admitted : j->rejected)[b]++;
    j->latest = j->decided == 0 || req->time > j->latest ? req->time : j->latest;
    j->decided++;
    if (!replay_mem_charge(j, sl_table_memory(j->table) + j->tally.bytes)) {
        j->stopped = REPLAY_STOP_MEMORY; /* counted: the stop is before the next line */
        j->lines++;
        return false;
    }
    return true;
}

/* ---- the answer ---------------------------------------------------------------------------- */

static int by_rejected(const void *a, const void *b)
{
    const replay_tally_key_t *x = a;
    const replay_tally_key_t *y = b;
    if (x->rejected != y->rejected) {
        return x->rejected > y->rejected ? -1 : 1;
    }
    if (x->admitted != y->admitted) {
        return x->admitted > y->admitted ? -1 : 1;
    }
    int c = memcmp(x->key, y->key, x->key_len < y->key_len ? x->key_len : y->key_len);
    return c != 0 ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static void answer_head(buf_t *b, const job_t *j)
{
    buf_add_str(b, j->stopped == REPLAY_COMPLETE ? "{\"complete\":true" : "{\"complete\":false");
    if (j->stopped != REPLAY_COMPLETE) {
        buf_add_str(b, ",\"stopped\":\"");
        buf_add_str(b, stop_names[j->stopped]);
        buf_add_str(b, "\"");
    }
    buf_add_str(b, ",\"lines_replayed\":");
    json_write_u64(b, j->lines);
    buf_add_str(b, ",\"admitted\":");
    json_write_u64(b, j->tally.admitted);
    buf_add_str(b, ",\"rejected\":");
    json_write_u64(b, j->tally.rejected);
}

/* The answer into b. Sorts the tally's keys in place: it cannot be looked up after. */
static void answer_json(buf_t *b, job_t *j)
{
    replay_tally_t *t = &j->tally;
    if (t->n > 0) {
        qsort(t->keys, t->n, sizeof *t->keys, by_rejected);
    }
    answer_head(b, j);
    buf_add_str(b, ",\"keys\":[");
    for (size_t i = 0; i < t->n && i < REPLAY_KEYS_OUT; i++) {
        buf_add_str(b, i > 0 ? ",{" : "{");
        json_write_key(b, t->keys[i].key, t->keys[i].key_len);
        buf_add_str(b, ",\"admitted\":");
        json_write_u64(b, t->keys[i].admitted);
        buf_add_str(b, ",\"rejected\":");
        json_write_u64(b, t->keys[i].rejected);
        buf_add_str(b, "}");
    }
    buf_add_str(b, "],\"series\":[");
    size_t nb = j->decided == 0 ? 0 : (size_t)((j->latest - j->first) / j->width) + 1;
    for (size_t i = 0; i < nb; i++) {
        buf_add_str(b, i > 0 ? ",{\"t\":" : "{\"t\":");
        json_write_u64(b, (uint64_t)(j->first + (int64_t)i * j->width));
        buf_add_str(b, ",\"admitted\":");
        json_write_u64(b, j->admitted[i]);
        buf_add_str(b, ",\"rejected\":");
        json_write_u64(b, j->rejected[i]);
        buf_add_str(b, "}");
    }
    buf_add_str(b, "]}");
}

/* ---- the body ------------------------------------------------------------------------------ */

/* The rule of the body: its rule fields, parsed as a rule is (ruledef_parse_json). */
static bool body_rule(json_t *o, sl_rule_t *rule, job_t *j)
{
    static const char *const fields[] = {"algorithm", "limit",   "window",
                                         "burst",     "buckets", "max_delay"};
    json_t *r = json_object();
    for (size_t i = 0; r != NULL && i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(o, fields[i]);
        if (v != NULL) {
            json_object_set(r, fields[i], v);
        }
    }
    char *text = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    if (text == NULL) {
        job_error(j, "out of memory");
        return false;
    }
    ruledef_t def;
    char why[RULEDEF_ERR_MAX];
    int rc = ruledef_parse_json(text, strlen(text), "replay", &def, why);
    free(text);
    if (rc != 0) {
        const char *at = strstr(why, ": "); /* positions are in the rule's text, not the body */
        job_error(j, "%s", strncmp(why, "line ", 5) == 0 && at ? at + 2 : why);
        return false;
    }
    *rule = def.rule;
    ruledef_free(&def);
    return true;
}

/* unit and log of the body. */
static bool body_input(json_t *o, job_t *j)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {{"ns", 1}, {"us", SL_NS_PER_US}, {"ms", SL_NS_PER_MS}, {"s", SL_NS_PER_SEC}};
    json_t *unit = json_object_get(o, "unit");
    j->unit_ns = SL_NS_PER_MS;
    if (unit != NULL) {
        j->unit_ns = 0;
        for (size_t i = 0; json_is_string(unit) && i < sizeof units / sizeof units[0]; i++) {
            j->unit_ns =
                strcmp(json_string_value(unit), units[i].name) == 0 ? units[i].ns : j->unit_ns;
        }
        if (j->unit_ns == 0) {
            job_error(j, "unit: must be ns, us, ms or s");
            return false;
        }
    }
    json_t *log = json_object_get(o, "log");
    if (!json_is_string(log)) {
        job_error(j, "log: required, the traffic log's text (TIME KEY [COST] lines)");
        return false;
    }
    j->log = json_string_value(log);
    j->log_len = json_string_length(log);
    return true;
}

/* The parsed body o: reads it, replays its log into j. False with j->err for a 400. */
static bool job_replay(json_t *o, job_t *j)
{
    sl_rule_t rule;
    size_t spanned = 0;
    if (!body_rule(o, &rule, j) || !body_input(o, j)) {
        return false;
    }
    if (!job_lines(j, span_one, &spanned, false)) {
        return j->err[0] == '\0'; /* stopped: answered with nothing replayed */
    }
    sl_table_config_t tcfg = {
        .key_max = REPLAY_KEY_MAX, .max_bytes = j->lim->memory_max, .shards = 1};
    if (sl_table_create(&rule, &tcfg, &j->table) != SL_OK) {
        j->stopped = REPLAY_STOP_MEMORY;
        return true;
    }
    if (!replay_mem_charge(j, sl_table_memory(j->table))) {
        j->stopped = REPLAY_STOP_MEMORY;
        return true;
    }
    j->tally.ask = tally_ask;
    j->tally.ask_arg = j;
    uint64_t span = (uint64_t)(j->last - j->first) + 1;
    j->width = (int64_t)((span + REPLAY_BUCKETS - 1) / REPLAY_BUCKETS);
    return job_lines(j, replay_one, &j->lines, true) || j->err[0] == '\0';
}

/* Makes s one line of text: control bytes become '?'. */
static void one_line(char *s)
{
    for (; *s != '\0'; s++) {
        *s = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
    }
}

void replay_job_run(const char *body, size_t len, const replay_limits_t *lim, replay_answer_t *out)
{
    *out = (replay_answer_t){.status = 400};
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(o)) {
        if (o == NULL) {
            snprintf(out->err, sizeof out->err, "invalid JSON: line %d, column %d: %s", jerr.line,
                     jerr.column, jerr.text);
            one_line(out->err); /* jansson quotes the bytes it stopped at */
        } else {
            snprintf(out->err, sizeof out->err, "the body must be a JSON object");
        }
        json_decref(o);
        return;
    }
    static const char *const fields[] = {"algorithm", "limit", "window", "burst", "buckets",
                                         "max_delay", "unit",  "log",    NULL};
    const char *unknown = json_unknown_field(o, fields);
    if (unknown != NULL) {
        snprintf(out->err, sizeof out->err, "body: unknown field '%.64s'", unknown);
        one_line(out->err);
        json_decref(o);
        return;
    }
    job_t *j = calloc(1, sizeof *j);
    if (j == NULL) {
        out->status = 503;
        snprintf(out->err, sizeof out->err, "out of memory");
        json_decref(o);
        return;
    }
    j->lim = lim;
    j->err = out->err;
    if (job_replay(o, j)) {
        answer_json(&out->body, j);
        out->status = out->body.failed ? 503 : 200;
        snprintf(out->err, sizeof out->err, "%s", out->body.failed ? "out of memory" : "");
    }
    out->stopped = j->stopped;
    out->lines = j->lines;
    out->peak_bytes = j->peak;
    replay_tally_free(&j->tally);
    sl_table_free(j->table);
    replay_mem_charge(j, 0);
    free(j);
    json_decref(o);
}

void replay_job_answer_free(replay_answer_t *a)
{
    buf_free(&a->body);
}
