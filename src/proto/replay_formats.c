/*
 * replay_formats.c - nginx combined access-log lines and JSON lines as replay requests
 * (replay_formats.h).
 *
 * An nginx line is cut into its fields by a cursor that knows the three shapes a combined
 * field has: a bare word, [bracketed] and "quoted" (nginx escapes a '"' inside as \x22, and a
 * backslash before a byte is taken to keep it inside the quotes, as other servers write it).
 * The key is a slice of the line. A JSON line is read by jansson into a tree (its depth bounded
 * by jansson's parser), its three members taken out and the tree freed; a decoded key is copied
 * into the caller's buffer.
 */
#include "proto/replay_formats.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "proto/text.h"
#include "proto/timestamp.h"

#define QUOTE_MAX 40 /* bytes of an offending field quoted in an error message */

#define record_error(err, errlen, ...) text_error(REPLAY_LINE_ERROR, err, errlen, __VA_ARGS__)

const char *const replay_nginx_field_names[REPLAY_NGINX_FIELDS] = {
    "addr", "user", "request", "method", "path", "status", "referer", "agent"};

typedef struct slice {
    const char *p;
    size_t n;
} slice_t;

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* The line without its trailing blanks (a "\n" or "\r\n" among them); *blank when all are. */
static size_t trimmed_len(const char *line, size_t len, bool *blank)
{
    while (len > 0 && is_blank(line[len - 1])) {
        len--;
    }
    *blank = len == 0;
    return len;
}

/* ---- nginx ------------------------------------------------------------------------------- */

typedef struct ncursor {
    const char *s;
    size_t len, at;
} ncursor_t;

static void skip_spaces(ncursor_t *c)
{
    while (c->at < c->len && c->s[c->at] == ' ') {
        c->at++;
    }
}

/* The next field: a word up to a space, [..] without its brackets, or ".." without its
 * quotes. False when there is none, or a bracket or quote is not closed. */
static bool next_field(ncursor_t *c, slice_t *f)
{
    skip_spaces(c);
    if (c->at >= c->len) {
        return false;
    }
    char open = c->s[c->at], close = open == '[' ? ']' : open == '"' ? '"' : ' ';
    size_t start = c->at + (close != ' ');
    size_t i = start;
    while (i < c->len && c->s[i] != close) {
        i += c->s[i] == '\\' && close == '"' && i + 1 < c->len ? 2 : 1;
    }
    if (close != ' ' && i >= c->len) {
        return false;
    }
    *f = (slice_t){c->s + start, i - start};
    c->at = i + (close != ' ');
    return true;
}

/* The request line's method, or its path without the query. */
static slice_t request_word(slice_t request, bool path)
{
    size_t sp = 0;
    while (sp < request.n && request.p[sp] != ' ') {
        sp++;
    }
    if (!path) {
        return (slice_t){request.p, sp};
    }
    size_t start = sp < request.n ? sp + 1 : sp, end = start;
    while (end < request.n && request.p[end] != ' ' && request.p[end] != '?') {
        end++;
    }
    return (slice_t){request.p + start, end - start};
}

static int nginx_record(replay_nginx_field_t key, const char *line, size_t len, int64_t unit_ns,
                        struct replay_request *out, char *err, size_t errlen)
{
    /* the fields in order: their names in messages, and the byte that opens them (0: a word) */
    static const struct {
        const char *name;
        char open;
    } fields[9] = {{"remote_addr", 0},     {"ident ('-')", 0},    {"remote_user", 0},
                   {"time_local", '['},    {"request", '"'},      {"status", 0},
                   {"body_bytes_sent", 0}, {"http_referer", '"'}, {"http_user_agent", '"'}};
    slice_t f[9];
    ncursor_t c = {.s = line, .len = len};
    if (memchr(line, '\0', len) != NULL) {
        return record_error(err, errlen, "line contains a NUL byte");
    }
    for (size_t i = 0; i < 9; i++) {
        if (!next_field(&c, &f[i])) {
            return record_error(err, errlen,
                                "not nginx's combined format: no %s field (or one not closed)",
                                fields[i].name);
        }
        char opened = f[i].p > line ? f[i].p[-1] : 0;
        if (fields[i].open != 0 && opened != fields[i].open) {
            return record_error(err, errlen, "not nginx's combined format: %s is not in %c%c",
                                fields[i].name, fields[i].open, fields[i].open == '[' ? ']' : '"');
        }
    }
    char q[TEXT_SHOW_CAP(QUOTE_MAX)];
    timestamp_rc_t rc = timestamp_nginx(f[3].p, f[3].n, &out->now_ns);
    if (rc != TS_OK) {
        text_show(q, sizeof q, f[3].p, f[3].n, QUOTE_MAX, 0);
        return record_error(err, errlen,
                            "time_local: not nginx's [02/Dec/2026:07:26:18 +0000] "
                            "(%s), got '%s'",
                            timestamp_error(rc), q);
    }
    const slice_t by_field[REPLAY_NGINX_FIELDS] = {
        [REPLAY_NGINX_ADDR] = f[0],
        [REPLAY_NGINX_USER] = f[2],
        [REPLAY_NGINX_REQUEST] = f[4],
        [REPLAY_NGINX_METHOD] = request_word(f[4], false),
        [REPLAY_NGINX_PATH] = request_word(f[4], true),
        [REPLAY_NGINX_STATUS] = f[5],
        [REPLAY_NGINX_REFERER] = f[7],
        [REPLAY_NGINX_AGENT] = f[8],
    };
    slice_t k = by_field[key];
    if (k.n == 0 || k.n > REPLAY_KEY_MAX) {
        return record_error(err, errlen, "key (%s) is %zu bytes: it must be 1 to %d",
                            replay_nginx_field_names[key], k.n, REPLAY_KEY_MAX);
    }
    out->time = out->now_ns / unit_ns;
    out->key = k.p;
    out->key_len = k.n;
    out->cost = 1;
    return REPLAY_LINE_REQUEST;
}

/* ---- JSON lines -------------------------------------------------------------------------- */

/* An integer member >= 0 into *out; -1 for anything else. */
static int json_count(const json_t *v, int64_t *out)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    return -1;
}

static int json_time(const json_t *v, const char *name, int64_t unit_ns, struct replay_request *out,
                     char *err, size_t errlen)
{
    char q[TEXT_SHOW_CAP(QUOTE_MAX)];
    if (json_count(v, &out->time) == 0) {
        if (__builtin_mul_overflow(out->time, unit_ns, &out->now_ns)) {
            return record_error(err, errlen, "%s: %" PRId64 " overflows 64-bit nanoseconds", name,
                                out->time);
        }
        return REPLAY_LINE_REQUEST;
    }
    if (!json_is_string(v)) {
        return record_error(err, errlen, "%s: must be a non-negative integer or an RFC 3339 string",
                            name);
    }
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    timestamp_rc_t rc = timestamp_rfc3339(s, n, &out->now_ns);
    if (rc != TS_OK) {
        text_show(q, sizeof q, s, n, QUOTE_MAX, 0);
        return record_error(err, errlen, "%s: not an RFC 3339 timestamp (%s), got '%s'", name,
                            timestamp_error(rc), q);
    }
    out->time = out->now_ns / unit_ns;
    return REPLAY_LINE_REQUEST;
}

static int json_key(const json_t *v, const char *name, struct replay_request *out, char *keybuf,
                    char *err, size_t errlen)
{
    size_t n;
    if (json_is_integer(v)) {
        n = (size_t)snprintf(keybuf, REPLAY_KEY_MAX, "%" JSON_INTEGER_FORMAT,
                             json_integer_value(v));
    } else if (json_is_string(v)) {
        n = json_string_length(v);
        if (n == 0 || n > REPLAY_KEY_MAX) {
            return record_error(err, errlen, "%s: the key is %zu bytes: it must be 1 to %d", name,
                                n, REPLAY_KEY_MAX);
        }
        memcpy(keybuf, json_string_value(v), n);
    } else {
        return record_error(err, errlen, "%s: the key must be a string or an integer", name);
    }
    out->key = keybuf;
    out->key_len = n;
    return REPLAY_LINE_REQUEST;
}

static int jsonl_record(const replay_input_t *in, const char *line, size_t len, int64_t unit_ns,
                        struct replay_request *out, char *keybuf, char *err, size_t errlen)
{
    const char *kname = in->json_key != NULL ? in->json_key : "key";
    const char *tname = in->json_time != NULL ? in->json_time : "time";
    const char *cname = in->json_cost != NULL ? in->json_cost : "cost";
    json_error_t jerr;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (o == NULL) { /* jansson's text quotes the input, which may hold a newline: shown safe */
        char text[TEXT_SHOW_CAP(sizeof jerr.text)];
        text_show(text, sizeof text, jerr.text, strnlen(jerr.text, sizeof jerr.text),
                  sizeof jerr.text, 0);
        return record_error(err, errlen, "not JSON: %s (column %d)", text, jerr.column);
    }
    int rc = REPLAY_LINE_ERROR;
    const json_t *t = json_object_get(o, tname), *k = json_object_get(o, kname);
    const json_t *cost = json_object_get(o, cname);
    if (!json_is_object(o)) {
        record_error(err, errlen, "a line must be a JSON object");
    } else if (t == NULL || k == NULL) {
        record_error(err, errlen, "no member \"%s\" (the %s)", t == NULL ? tname : kname,
                     t == NULL ? "time" : "key");
    } else if (cost != NULL && json_count(cost, &out->cost) != 0) {
        record_error(err, errlen, "%s: the cost must be a non-negative integer", cname);
    } else if (json_time(t, tname, unit_ns, out, err, errlen) == REPLAY_LINE_REQUEST) {
        rc = json_key(k, kname, out, keybuf, err, errlen);
    }
    json_decref(o);
    return rc;
}

int replay_parse_record(const replay_input_t *in, const char *line, size_t len, int64_t unit_ns,
                        struct replay_request *out, char *keybuf, char *err, size_t errlen)
{
    bool blank;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (in->format == REPLAY_FORMAT_PLAIN) {
        return replay_parse_line(line, len, unit_ns, out, err, errlen);
    }
    if (unit_ns <= 0) {
        return record_error(err, errlen, "invalid time unit");
    }
    len = trimmed_len(line, len, &blank);
    if (blank) {
        return REPLAY_LINE_SKIP;
    }
    struct replay_request req = {.cost = 1};
    int rc = REPLAY_LINE_ERROR;
    switch (in->format) {
    case REPLAY_FORMAT_PLAIN: /* above */
        break;
    case REPLAY_FORMAT_NGINX:
        rc = nginx_record(in->nginx_key, line, len, unit_ns, &req, err, errlen);
        break;
    case REPLAY_FORMAT_JSONL:
        rc = jsonl_record(in, line, len, unit_ns, &req, keybuf, err, errlen);
        break;
    }
    if (rc == REPLAY_LINE_REQUEST) {
        *out = req;
    }
    return rc;
}
