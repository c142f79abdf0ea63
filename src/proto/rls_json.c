/*
 * rls_json.c - Envoy's rate limit service messages as protojson reads and writes them (see
 * rls_json.h). A request is read with jansson, checked field by field as protojson checks it,
 * and written as the protobuf it stands for, which rls_request_decode() then checks as it
 * checks a gRPC call's: one set of rules for both carriers.
 */
#include "proto/rls_json.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "proto/http.h"
#include "proto/text.h"

#define WHERE_MAX 64 /* "descriptors[63].entries[63]" and room to spare */

/* A field of a message: its JSON name and its proto name (protojson takes either). */
typedef struct jfield {
    const char *json, *proto;
} jfield_t;

static const jfield_t REQUEST_FIELDS[] = {
    {"domain", "domain"}, {"descriptors", "descriptors"}, {"hitsAddend", "hits_addend"}};
static const jfield_t DESCRIPTOR_FIELDS[] = {
    {"entries", "entries"}, {"limit", "limit"}, {"hitsAddend", "hits_addend"}};
static const jfield_t ENTRY_FIELDS[] = {{"key", "key"}, {"value", "value"}};
static const jfield_t LIMIT_FIELDS[] = {{"requestsPerUnit", "requests_per_unit"}, {"unit", "unit"}};

/* RateLimitResponse.RateLimit.Unit's names, by number. */
static const char *const UNIT_NAMES[] = {"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                         "DAY",     "MONTH",  "YEAR",   "WEEK"};
static const char *const CODE_NAMES[] = {"UNKNOWN", "OK", "OVER_LIMIT"};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

static bool fail(char *err, size_t cap, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail(char *err, size_t cap, const char *where, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(err, cap, "%s%s%s", where, where[0] != '\0' ? ": " : "", what);
    return false;
}

/* ---- protobuf's wire format, written ------------------------------------------------------ */

static void pb_varint(buf_t *b, uint64_t v)
{
    uint8_t x[10];
    size_t n = 0;
    do {
        x[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    buf_add(b, x, n);
}

static void pb_len(buf_t *b, unsigned field, const void *p, size_t len)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, len);
    buf_add(b, p, len);
}

static void pb_uint(buf_t *b, unsigned field, uint64_t v)
{
    if (v != 0) { /* proto3: a zero is not written */
        pb_varint(b, (uint64_t)field << 3);
        pb_varint(b, v);
    }
}

/* ---- JSON values, as protojson reads them ------------------------------------------------- */

/*
 * The values of obj's fields f[0..n) into v[0..n): NULL when absent or null. False with err set
 * when obj is not an object, names a field f does not have, or names one field twice (by its
 * JSON and its proto name).
 */
static bool fields_take(json_t *obj, const char *where, const jfield_t *f, size_t n, json_t **v,
                        char *err, size_t cap)
{
    if (!json_is_object(obj)) {
        return fail(err, cap, where, "must be an object");
    }
    bool seen[4] = {false};
    const char *name;
    json_t *value;
    json_object_foreach(obj, name, value)
    {
        size_t i = 0;
        while (i < n && strcmp(name, f[i].json) != 0 && strcmp(name, f[i].proto) != 0) {
            i++;
        }
        if (i == n) {
            return fail(err, cap, where, "unknown field \"%.64s\"", name);
        }
        if (seen[i]) {
            return fail(err, cap, where, "field \"%s\" given twice", f[i].json);
        }
        seen[i] = true;
        v[i] = json_is_null(value) ? NULL : value;
    }
    return true;
}

/* An unsigned integer up to max: a JSON number with no fraction, or a string of decimal digits
 * (protojson writes 64-bit integers as strings). */
static bool uint_take(json_t *v, uint64_t max, const char *where, const char *name, uint64_t *out,
                      char *err, size_t cap)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        (uint64_t)json_integer_value(v) <= max) {
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    double r = json_is_real(v) ? json_real_value(v) : -1;
    if (r >= 0 && r == floor(r) && r < 18446744073709551616.0 && (uint64_t)r <= max) {
        *out = (uint64_t)r;
        return true;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    size_t len = json_is_string(v) ? json_string_length(v) : 0;
    char *end = NULL;
    unsigned long long x =
        len > 0 && len <= 20 && strspn(s, "0123456789") == len ? strtoull(s, &end, 10) : 0;
    if (end != NULL && *end == '\0' && x <= max) {
        *out = x;
        return true;
    }
    return fail(err, cap, where, "%s must be an integer from 0 to %llu", name,
                (unsigned long long)max);
}

/* A string field: its text (no NUL: the request's strings are C strings), "" when absent. */
static bool text_take(json_t *v, const char *where, const char *name, const char **s, size_t *len,
                      char *err, size_t cap)
{
    *s = "";
    *len = 0;
    if (v == NULL) {
        return true;
    }
    if (!json_is_string(v)) {
        return fail(err, cap, where, "%s must be a string", name);
    }
    *s = json_string_value(v);
    *len = json_string_length(v);
    if (memchr(*s, '\0', *len) != NULL) {
        return fail(err, cap, where, "%s holds a NUL character", name);
    }
    return true;
}

/* A unit: its name, or its number (protojson takes numbers it does not know: the request's
 * check refuses them). */
static bool unit_take(json_t *v, const char *where, uint64_t *out, char *err, size_t cap)
{
    for (size_t u = 0; json_is_string(v) && u < NFIELDS(UNIT_NAMES); u++) {
        if (strcmp(json_string_value(v), UNIT_NAMES[u]) == 0) {
            *out = u;
            return true;
        }
    }
    if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX) {
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    return fail(err, cap, where, "unit must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR");
}

/* ---- the request -------------------------------------------------------------------------- */

static bool entry_write(json_t *obj, const char *where, buf_t *out, char *err, size_t cap)
{
    json_t *v[NFIELDS(ENTRY_FIELDS)] = {0};
    const char *key, *value;
    size_t key_len, value_len;
    if (!fields_take(obj, where, ENTRY_FIELDS, NFIELDS(ENTRY_FIELDS), v, err, cap) ||
        !text_take(v[0], where, "key", &key, &key_len, err, cap) ||
        !text_take(v[1], where, "value", &value, &value_len, err, cap)) {
        return false;
    }
    buf_t e = {0};
    pb_len(&e, 1, key, key_len);
    pb_len(&e, 2, value, value_len);
    pb_len(out, 1, e.data, e.len);
    out->failed = out->failed || e.failed;
    buf_free(&e);
    return true;
}

static bool limit_write(json_t *obj, const char *where, buf_t *out, char *err, size_t cap)
{
    json_t *v[NFIELDS(LIMIT_FIELDS)] = {0};
    uint64_t per_unit = 0, unit = 0;
    if (!fields_take(obj, where, LIMIT_FIELDS, NFIELDS(LIMIT_FIELDS), v, err, cap) ||
        (v[0] != NULL &&
         !uint_take(v[0], UINT32_MAX, where, "requestsPerUnit", &per_unit, err, cap)) ||
        (v[1] != NULL && !unit_take(v[1], where, &unit, err, cap))) {
        return false;
    }
    buf_t l = {0};
    pb_uint(&l, 1, per_unit);
    pb_uint(&l, 2, unit);
    pb_len(out, 2, l.data != NULL ? l.data : "", l.len);
    out->failed = out->failed || l.failed;
    buf_free(&l);
    return true;
}

static bool descriptor_write(json_t *obj, size_t i, buf_t *out, char *err, size_t cap)
{
    char where[WHERE_MAX];
    snprintf(where, sizeof where, "descriptors[%zu]", i);
    json_t *v[NFIELDS(DESCRIPTOR_FIELDS)] = {0};
    uint64_t hits = 0;
    if (!fields_take(obj, where, DESCRIPTOR_FIELDS, NFIELDS(DESCRIPTOR_FIELDS), v, err, cap) ||
        (v[2] != NULL && !uint_take(v[2], UINT64_MAX, where, "hitsAddend", &hits, err, cap))) {
        return false;
    }
    if (v[0] != NULL && !json_is_array(v[0])) {
        return fail(err, cap, where, "entries must be an array");
    }
    buf_t d = {0};
    bool ok = true;
    for (size_t k = 0; ok && k < json_array_size(v[0]); k++) {
        char ewhere[WHERE_MAX];
        snprintf(ewhere, sizeof ewhere, "descriptors[%zu].entries[%zu]", i, k);
        ok = entry_write(json_array_get(v[0], k), ewhere, &d, err, cap);
    }
    char lwhere[WHERE_MAX];
    snprintf(lwhere, sizeof lwhere, "descriptors[%zu].limit", i);
    ok = ok && (v[1] == NULL || limit_write(v[1], lwhere, &d, err, cap));
    if (ok && v[2] != NULL) { /* a wrapper: present even when 0 */
        buf_t h = {0};
        pb_uint(&h, 1, hits);
        pb_len(&d, 3, h.data != NULL ? h.data : "", h.len);
        d.failed = d.failed || h.failed;
        buf_free(&h);
    }
    if (ok) {
        pb_len(out, 2, d.data != NULL ? d.data : "", d.len);
        out->failed = out->failed || d.failed;
    }
    buf_free(&d);
    return ok;
}

/* The request's JSON as the protobuf it stands for, into out; false with err set. */
static bool request_write(json_t *root, size_t descs_max, buf_t *out, char *err, size_t cap)
{
    json_t *v[NFIELDS(REQUEST_FIELDS)] = {0};
    const char *domain;
    size_t domain_len;
    uint64_t hits = 0;
    if (!fields_take(root, "", REQUEST_FIELDS, NFIELDS(REQUEST_FIELDS), v, err, cap) ||
        !text_take(v[0], "", "domain", &domain, &domain_len, err, cap) ||
        (v[2] != NULL && !uint_take(v[2], UINT32_MAX, "", "hitsAddend", &hits, err, cap))) {
        return false;
    }
    if (v[1] != NULL && !json_is_array(v[1])) {
        return fail(err, cap, "", "descriptors must be an array");
    }
    if (domain_len > 0) {
        pb_len(out, 1, domain, domain_len);
    }
    /* more than descs_max: rls_request_decode() refuses them, after as few as that are read */
    for (size_t i = 0; i < json_array_size(v[1]) && i <= descs_max; i++) {
        if (!descriptor_write(json_array_get(v[1], i), i, out, err, cap)) {
            return false;
        }
    }
    pb_uint(out, 3, hits);
    return true;
}

grpc_status_t rls_request_from_json(const char *body, size_t len, size_t descs_max,
                                    rls_request_t *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "invalid JSON: line %d, column %d: %s", jerr.line, jerr.column,
                          jerr.text);
    }
    buf_t pb = {0};
    bool ok = request_write(root, descs_max, &pb, err, cap);
    json_decref(root);
    grpc_status_t st = GRPC_STATUS_INVALID_ARGUMENT;
    if (ok && pb.failed) {
        st = text_error(GRPC_STATUS_RESOURCE_EXHAUSTED, err, cap, "out of memory");
    } else if (ok) {
        st = rls_request_decode((const uint8_t *)(pb.data != NULL ? pb.data : ""), pb.len,
                                descs_max, out, err, cap);
    }
    buf_free(&pb);
    return st;
}

/* ---- the response ------------------------------------------------------------------------- */

/* The unit a window is exactly one of, or RLS_UNIT_UNKNOWN. */
static rls_unit_t unit_of(int64_t window_ns)
{
    for (int u = RLS_UNIT_SECOND; u <= RLS_UNIT_LAST; u++) {
        if (rls_unit_ns((rls_unit_t)u) == window_ns) {
            return (rls_unit_t)u;
        }
    }
    return RLS_UNIT_UNKNOWN;
}

/* google.protobuf.Duration as protojson writes it: seconds, and 3, 6 or 9 digits of fraction
 * when there is one ("60s", "1.500s"). */
static void duration_json(buf_t *b, int64_t ns)
{
    ns = ns > 0 ? ns : 0;
    long long s = (long long)(ns / SL_NS_PER_SEC);
    long frac = (long)(ns % SL_NS_PER_SEC);
    if (frac == 0) {
        buf_printf(b, "\"%llds\"", s);
    } else if (frac % 1000000 == 0) {
        buf_printf(b, "\"%lld.%03lds\"", s, frac / 1000000);
    } else if (frac % 1000 == 0) {
        buf_printf(b, "\"%lld.%06lds\"", s, frac / 1000);
    } else {
        buf_printf(b, "\"%lld.%09lds\"", s, frac);
    }
}

static void status_json(buf_t *b, const rls_status_t *st)
{
    uint64_t remaining = st->remaining > UINT32_MAX ? UINT32_MAX : st->remaining;
    buf_printf(b, "{\"code\":\"%s\"", CODE_NAMES[st->code]);
    if (st->has_limit) {
        buf_add_str(b, ",\"currentLimit\":{");
        if (st->name != NULL && st->name[0] != '\0') {
            buf_add_str(b, "\"name\":");
            http_json_append(b, st->name, strlen(st->name));
            buf_add_str(b, ",");
        }
        uint64_t per_unit = st->limit > UINT32_MAX ? UINT32_MAX : st->limit;
        buf_printf(b, "\"requestsPerUnit\":%llu", (unsigned long long)per_unit);
        rls_unit_t unit = unit_of(st->window_ns);
        if (unit != RLS_UNIT_UNKNOWN) {
            buf_printf(b, ",\"unit\":\"%s\"", UNIT_NAMES[unit]);
        }
        buf_add_str(b, "}");
    }
    if (remaining != 0) {
        buf_printf(b, ",\"limitRemaining\":%llu", (unsigned long long)remaining);
    }
    if (st->has_limit) {
        buf_add_str(b, ",\"durationUntilReset\":");
        duration_json(b, st->reset_ns);
    }
    buf_add_str(b, "}");
}

void rls_response_json(buf_t *out, rls_code_t overall, const rls_status_t *st, size_t n,
                       const rls_header_t *headers, size_t nh)
{
    if (n > RLS_STATUSES_MAX) {
        out->failed = true;
        return;
    }
    buf_printf(out, "{\"overallCode\":\"%s\"", CODE_NAMES[overall]);
    for (size_t i = 0; i < n; i++) {
        buf_add_str(out, i == 0 ? ",\"statuses\":[" : ",");
        status_json(out, &st[i]);
    }
    buf_add_str(out, n > 0 ? "]" : "");
    for (size_t i = 0; i < nh; i++) {
        buf_add_str(out, i == 0 ? ",\"responseHeadersToAdd\":[{\"key\":" : ",{\"key\":");
        http_json_append(out, headers[i].name, strlen(headers[i].name));
        buf_add_str(out, ",\"value\":");
        http_json_append(out, headers[i].value, headers[i].value_len);
        buf_add_str(out, "}");
    }
    buf_add_str(out, nh > 0 ? "]}" : "}");
}
