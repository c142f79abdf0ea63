/*
 * rls.c - Envoy's rate limit service messages in sluice's terms (see rls.h). protoc-c's code
 * does the protobuf; this file checks what it decoded (the wire format lets any field be
 * missing) and converts between its units and sluice's.
 */
#include "proto/rls.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/rls.pb-c.h"
#include "sluice/sluice.h"
#include "proto/http.h"
#include "proto/text.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitDescriptor pb_descriptor_t;

/*
 * What rls_request_t.owned holds: the decoded message and the arrays, all in one arena. A
 * request's message is a tree of small allocations (each descriptor, entry and string): they
 * are carved from the arena's first block, which lives in owned_t, or from blocks chained
 * after it when a request is larger, and all freed together. So a typical call costs one
 * allocation rather than a dozen.
 */
#define ARENA_FIRST_WORDS (1024 / sizeof(max_align_t))

typedef struct arena_block {
    struct arena_block *next;
    size_t size, used; /* bytes of data[], bytes taken */
    max_align_t data[];
} arena_block_t;

typedef struct owned {
    pb_request_t *msg;
    rls_descriptor_t *descs;
    rls_entry_t *entries;
    ProtobufCAllocator alloc;             /* carves from first, then from blocks */
    arena_block_t *blocks;                /* taken when first is full, newest first */
    size_t used;                          /* bytes of first taken */
    max_align_t first[ARENA_FIRST_WORDS]; /* most requests fit here */
} owned_t;

static void *arena_alloc(void *arg, size_t size)
{
    owned_t *o = arg;
    size = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (o->blocks == NULL && sizeof o->first - o->used >= size) {
        void *p = (char *)o->first + o->used;
        o->used += size;
        return p;
    }
    arena_block_t *b = o->blocks;
    if (b == NULL || b->size - b->used < size) {
        size_t want = 2 * (b != NULL ? b->size : sizeof o->first);
        want = want > size ? want : size;
        b = malloc(sizeof *b + want);
        if (b == NULL) {
            return NULL;
        }
        *b = (arena_block_t){.next = o->blocks, .size = want};
        o->blocks = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

static void arena_free(void *arg, void *p)
{
    (void)arg; /* freed with the arena */
    (void)p;
}

/* An empty owned_t whose allocator carves from itself. */
static owned_t *owned_new(void)
{
    owned_t *o = malloc(sizeof *o);
    if (o != NULL) {
        o->msg = NULL;
        o->descs = NULL;
        o->entries = NULL;
        o->alloc = (ProtobufCAllocator){arena_alloc, arena_free, o};
        o->blocks = NULL;
        o->used = 0;
    }
    return o;
}

int64_t rls_unit_ns(rls_unit_t unit)
{
    switch (unit) {
    case RLS_UNIT_SECOND:
        return SL_NS_PER_SEC;
    case RLS_UNIT_MINUTE:
        return 60 * SL_NS_PER_SEC;
    case RLS_UNIT_HOUR:
        return 3600 * SL_NS_PER_SEC;
    case RLS_UNIT_DAY:
        return 86400 * SL_NS_PER_SEC;
    case RLS_UNIT_WEEK:
        return 7 * 86400 * SL_NS_PER_SEC;
    case RLS_UNIT_MONTH:
        return 30 * 86400 * SL_NS_PER_SEC;
    case RLS_UNIT_YEAR:
        return 365 * 86400 * SL_NS_PER_SEC;
    default:
        return 0;
    }
}

static void owned_free(owned_t *o)
{
    if (o == NULL) {
        return;
    }
    for (arena_block_t *b = o->blocks, *next; b != NULL; b = next) {
        next = b->next;
        free(b);
    }
    free(o);
}

void rls_request_free(rls_request_t *r)
{
    owned_free(r->owned);
    memset(r, 0, sizeof *r);
}

/* One descriptor's entries, checked, into ent[0..); returns GRPC_STATUS_OK or the error. */
static grpc_status_t entries_take(const pb_descriptor_t *pd, size_t i, rls_entry_t *ent, char *err,
                                  size_t cap)
{
    if (pd->n_entries == 0) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "descriptors[%zu]: has no entries", i);
    }
    for (size_t k = 0; k < pd->n_entries; k++) {
        const char *key = pd->entries[k]->key, *value = pd->entries[k]->value;
        size_t key_len = strlen(key), value_len = strlen(value);
        if (key_len == 0) {
            return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                              "descriptors[%zu].entries[%zu]: key is empty", i, k);
        }
        if (!text_is_utf8(key, key_len) || !text_is_utf8(value, value_len)) {
            return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                              "descriptors[%zu].entries[%zu]: %s is not UTF-8", i, k,
                              text_is_utf8(key, key_len) ? "value" : "key");
        }
        ent[k] = (rls_entry_t){key, key_len, value, value_len};
    }
    return GRPC_STATUS_OK;
}

/* One descriptor, checked: its entries (from ent), cost and override. */
static grpc_status_t descriptor_take(const pb_request_t *m, size_t i, rls_descriptor_t *d,
                                     rls_entry_t *ent, char *err, size_t cap)
{
    const pb_descriptor_t *pd = m->descriptors[i];
    grpc_status_t st = entries_take(pd, i, ent, err, cap);
    if (st != GRPC_STATUS_OK) {
        return st;
    }
    d->entries = ent;
    d->n_entries = pd->n_entries;
    d->cost = m->hits_addend > 0 ? m->hits_addend : 1;
    if (pd->hits_addend != NULL) {
        d->cost = pd->hits_addend->value;
    }
    if (d->cost > (uint64_t)INT64_MAX) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "descriptors[%zu]: hits_addend %llu is out of range", i,
                          (unsigned long long)d->cost);
    }
    if (pd->limit != NULL) {
        int unit = (int)pd->limit->unit;
        if (pd->limit->requests_per_unit == 0 || rls_unit_ns((rls_unit_t)unit) == 0) {
            return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                              pd->limit->requests_per_unit == 0
                                  ? "descriptors[%zu].limit: requests_per_unit is 0"
                                  : "descriptors[%zu].limit: unit %d is not a time unit",
                              i, unit);
        }
        d->has_override = true;
        d->override_per_unit = pd->limit->requests_per_unit;
        d->override_unit = (rls_unit_t)unit;
    }
    return GRPC_STATUS_OK;
}

static grpc_status_t request_check(owned_t *o, size_t descs_max, rls_request_t *out, char *err,
                                   size_t cap)
{
    const pb_request_t *m = o->msg;
    size_t domain_len = strlen(m->domain);
    if (domain_len == 0 || !text_is_utf8(m->domain, domain_len)) {
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          domain_len == 0 ? "domain is empty" : "domain is not UTF-8");
    }
    if (m->n_descriptors == 0 || m->n_descriptors > descs_max) {
        return text_error(
            m->n_descriptors == 0 ? GRPC_STATUS_INVALID_ARGUMENT : GRPC_STATUS_RESOURCE_EXHAUSTED,
            err, cap, "%zu descriptors: a request carries 1 to %zu", m->n_descriptors, descs_max);
    }
    size_t entries = 0;
    for (size_t i = 0; i < m->n_descriptors; i++) {
        entries += m->descriptors[i]->n_entries;
    }
    o->descs = arena_alloc(o, m->n_descriptors * sizeof *o->descs);
    o->entries = arena_alloc(o, (entries > 0 ? entries : 1) * sizeof *o->entries);
    if (o->descs == NULL || o->entries == NULL) {
        return text_error(GRPC_STATUS_RESOURCE_EXHAUSTED, err, cap, "out of memory");
    }
    memset(o->descs, 0, m->n_descriptors * sizeof *o->descs);
    memset(o->entries, 0, (entries > 0 ? entries : 1) * sizeof *o->entries);
    for (size_t i = 0, used = 0; i < m->n_descriptors; i++) {
        grpc_status_t st = descriptor_take(m, i, &o->descs[i], o->entries + used, err, cap);
        if (st != GRPC_STATUS_OK) {
            return st;
        }
        used += m->descriptors[i]->n_entries;
    }
    *out = (rls_request_t){m->domain, domain_len, o->descs, m->n_descriptors, o};
    return GRPC_STATUS_OK;
}

grpc_status_t rls_request_decode(const uint8_t *msg, size_t len, size_t descs_max,
                                 rls_request_t *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    owned_t *o = owned_new();
    if (o == NULL) {
        return text_error(GRPC_STATUS_RESOURCE_EXHAUSTED, err, cap, "out of memory");
    }
    o->msg = envoy__service__ratelimit__v3__rate_limit_request__unpack(&o->alloc, len, msg);
    if (o->msg == NULL) {
        owned_free(o);
        return text_error(GRPC_STATUS_INVALID_ARGUMENT, err, cap,
                          "malformed RateLimitRequest (not valid protobuf for its fields)");
    }
    grpc_status_t st = request_check(o, descs_max, out, err, cap);
    if (st != GRPC_STATUS_OK) {
        owned_free(o);
        memset(out, 0, sizeof *out);
    }
    return st;
}

grpc_status_t rls_kuadrant_decode(const uint8_t *msg, size_t len, rls_kuadrant_t method,
                                  size_t descs_max, rls_request_t *out, char *err, size_t cap)
{
    grpc_status_t st = rls_request_decode(msg, len, descs_max, out, err, cap);
    bool peek = false;
    switch (method) {
    case RLS_KUADRANT_CHECK:
        peek = true;
        break;
    case RLS_KUADRANT_REPORT:
        break;
    }
    for (size_t i = 0; st == GRPC_STATUS_OK && peek && i < out->n; i++) {
        out->descs[i].cost = 0;
    }
    return st;
}

/* ---- rules and keys ------------------------------------------------------------------------ */

bool rls_rule_name(const char *domain, size_t domain_len, const rls_descriptor_t *d, char *out,
                   size_t cap)
{
    size_t n = domain_len;
    for (size_t k = 0; k < d->n_entries; k++) {
        n += 1 + d->entries[k].key_len;
    }
    if (n >= cap) {
        return false;
    }
    memcpy(out, domain, domain_len);
    size_t o = domain_len;
    for (size_t k = 0; k < d->n_entries; k++) {
        out[o++] = '.';
        memcpy(out + o, d->entries[k].key, d->entries[k].key_len);
        o += d->entries[k].key_len;
    }
    out[o] = '\0';
    return true;
}

void rls_key(const rls_descriptor_t *d, buf_t *out)
{
    for (size_t k = 0; k < d->n_entries; k++) {
        if (k > 0) {
            buf_add(out, "|", 1);
        }
        const char *v = d->entries[k].value;
        size_t start = 0;
        for (size_t i = 0; i < d->entries[k].value_len; i++) {
            if (v[i] == '|' || v[i] == '\\') {
                buf_add(out, v + start, i - start);
                buf_add(out, "\\", 1);
                start = i;
            }
        }
        buf_add(out, v + start, d->entries[k].value_len - start);
    }
}

bool rls_override_key(const char *domain, size_t domain_len, const rls_descriptor_t *d, buf_t *out)
{
    char name[RLS_NAME_MAX];
    if (!rls_rule_name(domain, domain_len, d, name, sizeof name)) {
        return false;
    }
    buf_add_str(out, name);
    buf_add(out, ":", 1);
    rls_key(d, out);
    return true;
}

/* ---- the response -------------------------------------------------------------------------- */

static uint32_t u32_cap(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

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

/*
 * The response is written here rather than by protobuf-c, whose packing walks its descriptors
 * field by field and costs about 1,800 instructions a status (docs/dev/benchmarks.md): the bytes
 * are those protobuf-c writes (prop_rls_encode compares them on random responses): fields in
 * number order; a scalar, enum or string only when it is not 0 or empty; a submessage whenever
 * it is set, even empty. Every field number here is below 16, so every tag is one byte.
 */
enum { WT_VARINT = 0, WT_LEN = 2 };

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) {
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) {
        *p++ = (uint8_t)(v | 0x80);
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A varint field's bytes: none for 0. */
static size_t uint_len(uint64_t v)
{
    return v != 0 ? 1 + varint_len(v) : 0;
}

static uint8_t *put_uint(uint8_t *p, unsigned field, uint64_t v)
{
    if (v == 0) {
        return p;
    }
    *p++ = (uint8_t)(field << 3 | WT_VARINT);
    return put_varint(p, v);
}

/* A length-delimited field of len bytes (a submessage's, or a string's: always written). */
static size_t len_len(size_t len)
{
    return 1 + varint_len(len) + len;
}

static uint8_t *put_len(uint8_t *p, unsigned field, size_t len)
{
    *p++ = (uint8_t)(field << 3 | WT_LEN);
    return put_varint(p, len);
}

static uint8_t *put_str(uint8_t *p, unsigned field, const char *s, size_t len)
{
    if (len == 0) {
        return p;
    }
    p = put_len(p, field, len);
    memcpy(p, s, len);
    return p + len;
}

/* One status's fields, with the lengths of its two submessages. */
typedef struct status_wire {
    uint32_t rpu, unit, remaining;
    uint64_t seconds;
    uint32_t nanos;
    size_t name_len, limit_len, dur_len, len;
} status_wire_t;

static void status_measure(const rls_status_t *st, status_wire_t *w)
{
    int64_t reset_ns = st->reset_ns > 0 ? st->reset_ns : 0;
    *w = (status_wire_t){.remaining = u32_cap(st->remaining)};
    w->len = uint_len((uint32_t)st->code) + uint_len(w->remaining);
    if (!st->has_limit) {
        return; /* remaining alone: an unlimited descriptor's is the most there is */
    }
    w->rpu = u32_cap(st->limit);
    w->unit = (uint32_t)unit_of(st->window_ns);
    w->name_len = st->name != NULL ? strlen(st->name) : 0;
    w->limit_len =
        uint_len(w->rpu) + uint_len(w->unit) + (w->name_len > 0 ? len_len(w->name_len) : 0);
    w->seconds = (uint64_t)(reset_ns / SL_NS_PER_SEC);
    w->nanos = (uint32_t)(reset_ns % SL_NS_PER_SEC);
    w->dur_len = uint_len(w->seconds) + uint_len(w->nanos);
    w->len += len_len(w->limit_len) + len_len(w->dur_len);
}

static uint8_t *status_put(uint8_t *p, const rls_status_t *st, const status_wire_t *w)
{
    p = put_len(p, 2, w->len); /* RateLimitResponse.statuses */
    p = put_uint(p, 1, (uint32_t)st->code);
    if (st->has_limit) {
        p = put_len(p, 2, w->limit_len);
        p = put_uint(p, 1, w->rpu);
        p = put_uint(p, 2, w->unit);
        p = put_str(p, 3, st->name, w->name_len);
    }
    p = put_uint(p, 3, w->remaining);
    if (st->has_limit) {
        p = put_len(p, 4, w->dur_len);
        p = put_uint(p, 1, w->seconds);
        p = put_uint(p, 2, w->nanos);
    }
    return p;
}

void rls_response_encode(buf_t *out, rls_code_t overall, const rls_status_t *st, size_t n,
                         const rls_header_t *headers, size_t nh)
{
    enum { HEADERS_MAX = 4 };
    if (n > RLS_STATUSES_MAX || nh > HEADERS_MAX) {
        out->failed = true;
        return;
    }
    status_wire_t w[RLS_STATUSES_MAX];
    size_t len = uint_len((uint32_t)overall), hlen[HEADERS_MAX], vlen[HEADERS_MAX];
    for (size_t i = 0; i < n; i++) {
        status_measure(&st[i], &w[i]);
        len += len_len(w[i].len);
    }
    for (size_t i = 0; i < nh; i++) { /* a value ends at a NUL, as a C string does */
        vlen[i] = strnlen(headers[i].value, headers[i].value_len);
        size_t klen = strlen(headers[i].name);
        hlen[i] = (klen > 0 ? len_len(klen) : 0) + (vlen[i] > 0 ? len_len(vlen[i]) : 0);
        len += len_len(hlen[i]);
    }
    grpc_prefix(out, len);
    if (!buf_reserve(out, len)) {
        return;
    }
    uint8_t *p = (uint8_t *)out->data + out->len;
    p = put_uint(p, 1, (uint32_t)overall);
    for (size_t i = 0; i < n; i++) {
        p = status_put(p, &st[i], &w[i]);
    }
    for (size_t i = 0; i < nh; i++) { /* response_headers_to_add */
        p = put_len(p, 3, hlen[i]);
        p = put_str(p, 1, headers[i].name, strlen(headers[i].name));
        p = put_str(p, 2, headers[i].value, vlen[i]);
    }
    out->len += len;
}

/*
 * rls_ratelimit_headers (rls.h): the IETF RateLimit fields of the status with the fewest units
 * left (the first of them on a tie), as HTTP's responses carry them, for Envoy to add to its
 * client's response. Appends nothing when no status has a limit. Returns the headers added.
 */
size_t rls_ratelimit_headers(const rls_status_t *st, size_t n, buf_t *policy, buf_t *limit,
                             rls_header_t *out)
{
    const rls_status_t *least = NULL;
    for (size_t i = 0; i < n; i++) {
        if (st[i].has_limit && (least == NULL || st[i].remaining < least->remaining)) {
            least = &st[i];
        }
    }
    if (least == NULL) {
        return 0;
    }
    http_ratelimit_values(
        policy, limit, least->policy != NULL ? least->policy : least->name, (int64_t)least->limit,
        sl_ns_to_units_ceil(least->window_ns, SL_NS_PER_SEC), (int64_t)least->remaining,
        sl_ns_to_units_ceil(least->reset_ns, SL_NS_PER_SEC));
    out[0] = (rls_header_t){"ratelimit-policy", policy->data, policy->len};
    out[1] = (rls_header_t){"ratelimit", limit->data, limit->len};
    return 2;
}
