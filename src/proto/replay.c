/*
 * replay.c - the line parser of a traffic log and the per-key counts of a replay (replay.h).
 *
 * replay_parse_line() splits a line into at most four whitespace-separated fields and validates
 * them, so it can be fuzzed and unit-tested on its own. TIME is an integer in the input unit, or
 * an RFC 3339 timestamp (proto/timestamp.h) when it starts as one (four digits and '-').
 *
 * The tally is an insertion-ordered array of entries plus an open-addressing index of entry
 * numbers, so keys are listed in the order they were first seen. Invariants: the index is at
 * most half full; `bytes` is keys[cap] + index[nindex] + every key copy (an empty key's copy is
 * one byte). Each allocation is asked for first (tally_may_take) with the most the tally holds
 * while it is made: a new index beside the old, a realloc'ed array beside its copy.
 */
#include "proto/replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "proto/timestamp.h"

#define QUOTE_MAX 40 /* bytes of an offending field quoted in an error message */

/* ---- line parsing ------------------------------------------------------------------------ */

struct field {
    const char *p; /* first byte, inside the line */
    size_t n;      /* bytes */
};

static bool is_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Writes `f` to dst for an error message: at most QUOTE_MAX bytes, bytes that are not
 * printable ASCII as \xNN, "..." when cut short. */
static void quote(char *dst, size_t dstlen, struct field f)
{
    text_show(dst, dstlen, f.p, f.n, QUOTE_MAX, 0);
}

#define line_error(err, errlen, ...) text_error(REPLAY_LINE_ERROR, err, errlen, __VA_ARGS__)

/* Parses a non-empty run of decimal digits into *out. Returns 0, -1 (not all digits, or
 * empty) or -2 (beyond INT64_MAX). */
static int parse_count(struct field f, int64_t *out)
{
    int64_t v = 0;

    if (f.n == 0) {
        return -1;
    }
    for (size_t i = 0; i < f.n; i++) {
        if (f.p[i] < '0' || f.p[i] > '9') {
            return -1;
        }
    }
    for (size_t i = 0; i < f.n; i++) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, f.p[i] - '0', &v)) {
            return -2;
        }
    }
    *out = v;
    return 0;
}

static const char *unit_name(int64_t unit_ns)
{
    switch (unit_ns) {
    case 1:
        return "ns";
    case SL_NS_PER_US:
        return "us";
    case SL_NS_PER_MS:
        return "ms";
    case SL_NS_PER_SEC:
        return "s";
    default:
        return "units";
    }
}

/* Splits line into up to `max` fields; returns how many were found (max + 1 would not fit, so
 * a return of `max` means "max or more"). Sets *comment when the first field starts with '#'. */
static size_t split_fields(const char *line, size_t len, struct field *f, size_t max, bool *comment)
{
    size_t nf = 0;
    size_t i = 0;

    *comment = false;
    while (nf < max) {
        while (i < len && is_blank((unsigned char)line[i])) {
            i++;
        }
        if (i == len) {
            break;
        }
        if (nf == 0 && line[i] == '#') {
            *comment = true;
            return 0;
        }
        size_t start = i;
        while (i < len && !is_blank((unsigned char)line[i])) {
            i++;
        }
        f[nf].p = line + start;
        f[nf].n = i - start;
        nf++;
    }
    return nf;
}

/* An RFC 3339 TIME: now_ns the instant, time the same in whole input units (rounded down). */
static int parse_time_rfc3339(struct field f, int64_t unit_ns, struct replay_request *out,
                              char *err, size_t errlen)
{
    char q[TEXT_SHOW_CAP(QUOTE_MAX)];
    timestamp_rc_t rc = timestamp_rfc3339(f.p, f.n, &out->now_ns);

    if (rc != TS_OK) {
        quote(q, sizeof q, f);
        return line_error(err, errlen, "time: not an RFC 3339 timestamp (%s), got '%s'",
                          timestamp_error(rc), q);
    }
    out->time = out->now_ns / unit_ns;
    return REPLAY_LINE_REQUEST;
}

/* Validates TIME and converts it to ns. */
static int parse_time(struct field f, int64_t unit_ns, struct replay_request *out, char *err,
                      size_t errlen)
{
    char q[TEXT_SHOW_CAP(QUOTE_MAX)];
    if (timestamp_looks_rfc3339(f.p, f.n)) {
        return parse_time_rfc3339(f, unit_ns, out, err, errlen);
    }
    int rc = parse_count(f, &out->time);

    quote(q, sizeof q, f);
    if (rc == -1) {
        return line_error(err, errlen,
                          "time must be a non-negative integer or an RFC 3339 timestamp, got '%s'",
                          q);
    }
    if (rc == -2) {
        return line_error(err, errlen, "time out of range, got '%s'", q);
    }
    if (__builtin_mul_overflow(out->time, unit_ns, &out->now_ns)) {
        return line_error(err, errlen,
                          "time %" PRId64 " %s overflows 64-bit nanoseconds (max %" PRId64 " %s)",
                          out->time, unit_name(unit_ns), INT64_MAX / unit_ns, unit_name(unit_ns));
    }
    return REPLAY_LINE_REQUEST;
}

static int parse_cost(struct field f, struct replay_request *out, char *err, size_t errlen)
{
    char q[TEXT_SHOW_CAP(QUOTE_MAX)];
    int rc = parse_count(f, &out->cost);

    quote(q, sizeof q, f);
    if (rc == -1) {
        return line_error(err, errlen, "cost must be a non-negative integer, got '%s'", q);
    }
    if (rc == -2) {
        return line_error(err, errlen, "cost out of range, got '%s'", q);
    }
    return REPLAY_LINE_REQUEST;
}

int replay_parse_line(const char *line, size_t len, int64_t unit_ns, struct replay_request *out,
                      char *err, size_t errlen)
{
    struct field f[4];
    struct replay_request req = {.cost = 1};
    bool comment;
    char q[TEXT_SHOW_CAP(QUOTE_MAX)];

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (unit_ns <= 0) {
        return line_error(err, errlen, "invalid time unit");
    }
    size_t nf = split_fields(line, len, f, 4, &comment);
    if (nf == 0) {
        return REPLAY_LINE_SKIP; /* blank or comment */
    }
    if (memchr(line, '\0', len) != NULL) {
        return line_error(err, errlen, "line contains a NUL byte");
    }
    if (parse_time(f[0], unit_ns, &req, err, errlen) != REPLAY_LINE_REQUEST) {
        return REPLAY_LINE_ERROR;
    }
    if (nf < 2) {
        return line_error(err, errlen, "missing key (expected TIME KEY [COST])");
    }
    if (f[1].n > REPLAY_KEY_MAX) {
        return line_error(err, errlen, "key is %zu bytes, longer than the %d-byte maximum", f[1].n,
                          REPLAY_KEY_MAX);
    }
    req.key = f[1].p;
    req.key_len = f[1].n;
    if (nf > 2 && parse_cost(f[2], &req, err, errlen) != REPLAY_LINE_REQUEST) {
        return REPLAY_LINE_ERROR;
    }
    if (nf > 3) {
        quote(q, sizeof q, f[3]);
        return line_error(err, errlen, "too many fields (expected TIME KEY [COST]), got '%s'", q);
    }
    *out = req;
    return REPLAY_LINE_REQUEST;
}

/* ---- the summary's key table ------------------------------------------------------------- */

static uint64_t hash_key(const char *key, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037); /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= UINT64_C(1099511628211);
    }
    return h ^ (h >> 29);
}

/* Whether t may take `more` bytes beside what it holds (its owner's ask, when it has one). */
static bool tally_may_take(const replay_tally_t *t, size_t more)
{
    return t->ask == NULL || t->ask(t->ask_arg, t->bytes + more);
}

static int tally_grow_index(replay_tally_t *t)
{
    size_t nindex = t->nindex ? t->nindex * 2 : 64;
    if (!tally_may_take(t, nindex * sizeof(size_t))) { /* the old index is held until the end */
        return SL_EFULL;
    }
    size_t *index = calloc(nindex, sizeof *index);
    if (index == NULL) {
        return SL_ENOMEM;
    }
    for (size_t e = 0; e < t->n; e++) {
        size_t s = (size_t)t->keys[e].hash & (nindex - 1);
        while (index[s] != 0) {
            s = (s + 1) & (nindex - 1);
        }
        index[s] = e + 1;
    }
    free(t->index);
    t->bytes += (nindex - t->nindex) * sizeof(size_t);
    t->index = index;
    t->nindex = nindex;
    return SL_OK;
}

/* Makes room for one more entry in t->keys. */
static int tally_grow_keys(replay_tally_t *t)
{
    size_t cap = t->cap ? t->cap * 2 : 32;
    if (!tally_may_take(t, cap * sizeof(replay_tally_key_t))) { /* realloc may copy */
        return SL_EFULL;
    }
    replay_tally_key_t *keys = realloc(t->keys, cap * sizeof *keys);
    if (keys == NULL) {
        return SL_ENOMEM;
    }
    t->bytes += (cap - t->cap) * sizeof *keys;
    t->keys = keys;
    t->cap = cap;
    return SL_OK;
}

/* Sets *out to the entry for key, adding it when new. SL_OK, SL_ENOMEM, or SL_EFULL when the
 * tally's ask refused the room. */
static int tally_find(replay_tally_t *t, const char *key, size_t len, replay_tally_key_t **out)
{
    uint64_t h = hash_key(key, len);
    int rc = 2 * (t->n + 1) > t->nindex ? tally_grow_index(t) : SL_OK;
    if (rc != SL_OK) {
        return rc;
    }
    size_t s = (size_t)h & (t->nindex - 1);
    for (; t->index[s] != 0; s = (s + 1) & (t->nindex - 1)) {
        replay_tally_key_t *k = &t->keys[t->index[s] - 1];
        if (k->hash == h && k->key_len == len && memcmp(k->key, key, len) == 0) {
            *out = k;
            return SL_OK;
        }
    }
    if (t->n == t->cap && (rc = tally_grow_keys(t)) != SL_OK) {
        return rc;
    }
    size_t copy_len = len ? len : 1;
    if (!tally_may_take(t, copy_len)) {
        return SL_EFULL;
    }
    char *copy = malloc(copy_len);
    if (copy == NULL) {
        return SL_ENOMEM;
    }
    memcpy(copy, key, len);
    t->bytes += copy_len;
    t->keys[t->n] = (replay_tally_key_t){.key = copy, .key_len = len, .hash = h};
    t->index[s] = ++t->n;
    *out = &t->keys[t->n - 1];
    return SL_OK;
}

static int tally_add(replay_tally_t *t, const char *key, size_t len, bool allowed)
{
    replay_tally_key_t *k = NULL;
    int rc = tally_find(t, key, len, &k);

    if (rc != SL_OK) {
        return rc;
    }
    if (allowed) {
        k->admitted++;
        t->admitted++;
    } else {
        k->rejected++;
        t->rejected++;
    }
    return SL_OK;
}

void replay_tally_free(replay_tally_t *t)
{
    for (size_t e = 0; e < t->n; e++) {
        free(t->keys[e].key);
    }
    free(t->keys);
    free(t->index);
}

int replay_step(sl_table_t *table, replay_tally_t *tally, const struct replay_request *req,
                sl_decision_t *d)
{
    int rc = sl_table_decide(table, req->key, req->key_len, req->cost, req->now_ns, d);
    if (rc != SL_OK) {
        return rc;
    }
    return tally != NULL ? tally_add(tally, req->key, req->key_len, d->allowed) : SL_OK;
}
