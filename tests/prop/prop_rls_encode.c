/*
 * prop_rls_encode.c - the RateLimitResponse sluiced writes by hand (rls_response_encode,
 * proto/rls.h) against protobuf-c's packing of the same response (the encoder it replaced,
 * kept here as the reference).
 *
 * Each case draws an overall code, 0 to 64 statuses (with or without a limit; names empty,
 * absent or up to 200 bytes; limits and remainders on both sides of 2^32; windows that are a unit
 * and windows that are not; resets negative, zero, sub-second and years long) and 0 to 4 headers
 * (values with a NUL inside now and then), and checks:
 *
 *   bytes    the framed message is byte for byte protobuf-c's;
 *   decodes  protobuf-c reads it back with as many statuses and headers as were written;
 *   refuses  more than 64 statuses or 4 headers set the buffer's failed flag and write nothing.
 *
 * SLUICE_SEED replays a run; SLUICE_CASES sets the number of cases (default 20000).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/rls.pb-c.h"
#include "prop/gen.h"
#include "proto/grpc.h"
#include "proto/rls.h"

#define HEADERS_MAX 4

enum { P_BYTES, P_DECODES, P_REFUSES, P_COUNT };

typedef Envoy__Service__Ratelimit__V3__RateLimitResponse pb_response_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus pb_status_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit pb_limit_t;
typedef Envoy__Service__Ratelimit__V3__Duration pb_duration_t;
typedef Envoy__Service__Ratelimit__V3__HeaderValue pb_header_t;

static uint32_t u32_cap(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int unit_of(int64_t window_ns)
{
    for (int u = RLS_UNIT_SECOND; u <= RLS_UNIT_LAST; u++) {
        if (rls_unit_ns((rls_unit_t)u) == window_ns) {
            return u;
        }
    }
    return RLS_UNIT_UNKNOWN;
}

/* The reference: the response built as protobuf-c messages and packed by protobuf-c, framed. */
static void ref_encode(buf_t *out, rls_code_t overall, const rls_status_t *st, size_t n,
                       const rls_header_t *headers, size_t nh)
{
    static pb_status_t sp[RLS_STATUSES_MAX];
    static pb_status_t *spp[RLS_STATUSES_MAX];
    static pb_limit_t lim[RLS_STATUSES_MAX];
    static pb_duration_t dur[RLS_STATUSES_MAX];
    pb_response_t resp = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    resp.overall_code = (Envoy__Service__Ratelimit__V3__RateLimitResponse__Code)overall;
    resp.n_statuses = n;
    resp.statuses = spp;
    pb_header_t hv[HEADERS_MAX], *hvp[HEADERS_MAX];
    char *values[HEADERS_MAX] = {0};
    for (size_t i = 0; i < nh; i++) {
        envoy__service__ratelimit__v3__header_value__init(&hv[i]);
        values[i] = strndup(headers[i].value, headers[i].value_len);
        hv[i].key = (char *)headers[i].name;
        hv[i].value = values[i];
        hvp[i] = &hv[i];
    }
    resp.n_response_headers_to_add = nh;
    resp.response_headers_to_add = hvp;
    for (size_t i = 0; i < n; i++) {
        envoy__service__ratelimit__v3__rate_limit_response__descriptor_status__init(&sp[i]);
        spp[i] = &sp[i];
        sp[i].code = (Envoy__Service__Ratelimit__V3__RateLimitResponse__Code)st[i].code;
        sp[i].limit_remaining = u32_cap(st[i].remaining);
        if (!st[i].has_limit) {
            continue;
        }
        envoy__service__ratelimit__v3__rate_limit_response__rate_limit__init(&lim[i]);
        envoy__service__ratelimit__v3__duration__init(&dur[i]);
        lim[i].name = st[i].name != NULL ? (char *)st[i].name : "";
        lim[i].requests_per_unit = u32_cap(st[i].limit);
        lim[i].unit = (Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit__Unit)unit_of(
            st[i].window_ns);
        int64_t reset_ns = st[i].reset_ns > 0 ? st[i].reset_ns : 0;
        dur[i].seconds = reset_ns / SL_NS_PER_SEC;
        dur[i].nanos = (int32_t)(reset_ns % SL_NS_PER_SEC);
        sp[i].current_limit = &lim[i];
        sp[i].duration_until_reset = &dur[i];
    }
    size_t len = envoy__service__ratelimit__v3__rate_limit_response__get_packed_size(&resp);
    grpc_prefix(out, len);
    if (buf_reserve(out, len)) {
        out->len += envoy__service__ratelimit__v3__rate_limit_response__pack(
            &resp, (uint8_t *)out->data + out->len);
    }
    for (size_t i = 0; i < nh; i++) {
        free(values[i]);
    }
}

static uint64_t gen_count(prng_t *r)
{
    switch (prng_range(r, 0, 4)) {
    case 0:
        return 0;
    case 1:
        return (uint64_t)prng_range(r, 1, 127);
    case 2:
        return (uint64_t)prng_range(r, 128, 1 << 20);
    case 3:
        return (uint64_t)prng_range(r, (int64_t)UINT32_MAX - 2, (int64_t)UINT32_MAX + 2);
    default:
        return prng_next(r) >> prng_range(r, 0, 63);
    }
}

static int64_t gen_signed(prng_t *r)
{
    int64_t v = (int64_t)(prng_next(r) >> prng_range(r, 1, 63));
    return prng_chance(r, 10) ? -v : v;
}

static void gen_status(prng_t *r, rls_status_t *st, char *name, size_t name_cap)
{
    size_t len = prng_chance(r, 20) ? 0 : (size_t)prng_range(r, 1, (int64_t)name_cap - 1);
    for (size_t k = 0; k < len; k++) {
        name[k] = (char)prng_range(r, 'a', 'z');
    }
    name[len] = '\0';
    static const int64_t units[] = {0, 1, 60, 3600, 86400, 30 * 86400, 365 * 86400};
    int64_t window_ns =
        prng_chance(r, 70) ? units[prng_range(r, 0, 6)] * SL_NS_PER_SEC : gen_signed(r);
    *st = (rls_status_t){.code = (rls_code_t)prng_range(r, 0, 2),
                         .has_limit = prng_chance(r, 80),
                         .name = prng_chance(r, 5) ? NULL : name,
                         .limit = gen_count(r),
                         .window_ns = window_ns,
                         .remaining = gen_count(r),
                         .reset_ns = gen_signed(r)};
}

static long failed[P_COUNT], checked[P_COUNT];

static void check(int prop, bool ok, uint64_t seed, long idx, size_t n, size_t nh)
{
    checked[prop]++;
    if (!ok && failed[prop]++ < 5) {
        fprintf(stderr, "FAIL case %ld (SLUICE_SEED=0x%" PRIx64 "): %zu statuses, %zu headers\n",
                idx, seed, n, nh);
    }
}

static bool same(const buf_t *a, const buf_t *b)
{
    return !a->failed && !b->failed && a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static bool decodes(const buf_t *out, size_t n, size_t nh)
{
    pb_response_t *back = envoy__service__ratelimit__v3__rate_limit_response__unpack(
        NULL, out->len - GRPC_PREFIX_BYTES, (const uint8_t *)out->data + GRPC_PREFIX_BYTES);
    bool ok = back != NULL && back->n_statuses == n && back->n_response_headers_to_add == nh;
    if (back != NULL) {
        envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(back, NULL);
    }
    return ok;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_CASES", 20000);
    static rls_status_t st[RLS_STATUSES_MAX + 1];
    static char names[RLS_STATUSES_MAX + 1][201];
    static const char *const keys[] = {"ratelimit", "ratelimit-policy", "x-a", ""};
    for (long idx = 0; idx < cases; idx++) {
        prng_t r = prop_case_prng(seed, 0, idx);
        size_t n = (size_t)(prng_chance(&r, 30) ? prng_range(&r, 0, 3)
                                                : prng_range(&r, 0, RLS_STATUSES_MAX));
        size_t nh = (size_t)prng_range(&r, 0, HEADERS_MAX);
        for (size_t i = 0; i < n; i++) {
            gen_status(&r, &st[i], names[i], prng_chance(&r, 50) ? 12 : sizeof names[i]);
        }
        rls_header_t h[HEADERS_MAX];
        char values[HEADERS_MAX][40];
        for (size_t i = 0; i < nh; i++) {
            size_t vlen = (size_t)prng_range(&r, 0, sizeof values[i]);
            for (size_t k = 0; k < vlen; k++) {
                values[i][k] = prng_chance(&r, 3) ? '\0' : (char)prng_range(&r, ' ', '~');
            }
            h[i] = (rls_header_t){keys[prng_range(&r, 0, 3)], values[i], vlen};
        }
        rls_code_t overall = (rls_code_t)prng_range(&r, 0, 2);
        buf_t got = {0}, want = {0};
        rls_response_encode(&got, overall, st, n, h, nh);
        ref_encode(&want, overall, st, n, h, nh);
        check(P_BYTES, same(&got, &want), seed, idx, n, nh);
        check(P_DECODES, !got.failed && decodes(&got, n, nh), seed, idx, n, nh);
        buf_free(&got);
        buf_free(&want);
        if (idx % 100 == 0) { /* past the bounds: refused, nothing written */
            bool statuses = prng_chance(&r, 50);
            rls_response_encode(&got, overall, st, statuses ? RLS_STATUSES_MAX + 1 : 1, h,
                                statuses ? 0 : HEADERS_MAX + 1);
            check(P_REFUSES, got.failed && got.len == 0, seed, idx, n, nh);
            buf_free(&got);
        }
    }
    static const char *const names_p[P_COUNT] = {"bytes", "decodes", "refuses"};
    static const char *const claims[P_COUNT] = {
        "the hand-written response is byte for byte protobuf-c's",
        "protobuf-c reads it back with every status and header",
        "past 64 statuses or 4 headers nothing is written and the buffer is marked failed"};
    return prop_report(P_COUNT, names_p, claims, checked, failed) != 0;
}
