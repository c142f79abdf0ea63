/*
 * fuzz_grpc_rls.c - libFuzzer target for a gRPC call's body from outside bytes (proto/grpc.h,
 * proto/rls.h): the unary framing, a ShouldRateLimit request decoded and checked, the same
 * bytes as limitador's CheckRateLimit and Report (rls_kuadrant_decode), and a health check. Checks:
 * no crash, no sanitizer report, no leak; the early size check never refuses a body the whole-body
 * check accepts; what decodes keeps the promises rls.h makes (non-empty UTF-8 domain and
 * keys, 1..max descriptors, costs in range); and a response built from it reads back with as many
 * statuses as descriptors. A Kuadrant method decodes exactly what ShouldRateLimit decodes, with
 * CheckRateLimit's costs 0 (a peek) and Report's the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/rls.pb-c.h"
#include "proto/grpc.h"
#include "proto/rls.h"
#include "proto/text.h"

#define MAX_BYTES 4096
#define DESCS_MAX 64

static void check_request(const rls_request_t *r)
{
    if (r->domain_len == 0 || !text_is_utf8(r->domain, r->domain_len) || r->n == 0 ||
        r->n > DESCS_MAX)
        abort();
    rls_status_t st[DESCS_MAX];
    for (size_t i = 0; i < r->n; i++) {
        const rls_descriptor_t *d = &r->descs[i];
        if (d->n_entries == 0 || d->cost > (uint64_t)INT64_MAX)
            abort();
        for (size_t k = 0; k < d->n_entries; k++) {
            if (d->entries[k].key_len == 0 ||
                !text_is_utf8(d->entries[k].value, d->entries[k].value_len))
                abort();
        }
        if (d->has_override && (d->override_per_unit == 0 || rls_unit_ns(d->override_unit) == 0))
            abort();
        char name[RLS_NAME_MAX];
        buf_t key = {0};
        rls_key(d, &key);
        bool named = rls_rule_name(r->domain, r->domain_len, d, name, sizeof name);
        if (named && strlen(name) < r->domain_len)
            abort();
        st[i] = (rls_status_t){.code = (i & 1) ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK,
                               .has_limit = named,
                               .name = named ? name : NULL,
                               .limit = d->cost,
                               .window_ns = (int64_t)d->cost,
                               .remaining = key.len,
                               .reset_ns = (int64_t)d->cost};
        if (named) { /* encode one at a time: name is this iteration's */
            buf_t one = {0};
            rls_header_t h = {"ratelimit", key.data != NULL ? key.data : "", key.len};
            rls_response_encode(&one, RLS_CODE_OK, &st[i], 1, &h, 1);
            buf_free(&one);
            st[i].has_limit = false;
            st[i].name = NULL;
        }
        buf_free(&key);
    }
    buf_t out = {0};
    rls_response_encode(&out, RLS_CODE_OVER_LIMIT, st, r->n, NULL, 0);
    if (out.failed || out.len < GRPC_PREFIX_BYTES)
        abort();
    Envoy__Service__Ratelimit__V3__RateLimitResponse *back =
        envoy__service__ratelimit__v3__rate_limit_response__unpack(
            NULL, out.len - GRPC_PREFIX_BYTES, (const uint8_t *)out.data + GRPC_PREFIX_BYTES);
    if (back == NULL || back->n_statuses != r->n)
        abort();
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(back, NULL);
    buf_free(&out);
}

/* The Kuadrant methods' decoding of msg agrees with ShouldRateLimit's: the same outcome,
 * CheckRateLimit's costs 0, Report's the same. */
static void kuadrant_check(const uint8_t *msg, size_t len)
{
    char err[GRPC_ERR_MAX];
    rls_request_t plain;
    grpc_status_t want = rls_request_decode(msg, len, DESCS_MAX, &plain, err, sizeof err);
    for (int m = RLS_KUADRANT_CHECK; m <= RLS_KUADRANT_REPORT; m++) {
        rls_request_t k;
        grpc_status_t got =
            rls_kuadrant_decode(msg, len, (rls_kuadrant_t)m, DESCS_MAX, &k, err, sizeof err);
        if (got != want || (got != GRPC_STATUS_OK && (k.owned != NULL || err[0] == '\0')))
            abort();
        for (size_t i = 0; got == GRPC_STATUS_OK && i < k.n; i++) {
            uint64_t cost = m == RLS_KUADRANT_CHECK ? 0 : plain.descs[i].cost;
            if (k.n != plain.n || k.descs[i].cost != cost)
                abort();
        }
        if (got == GRPC_STATUS_OK)
            check_request(&k);
        rls_request_free(&k);
    }
    if (want == GRPC_STATUS_OK)
        rls_request_free(&plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[GRPC_ERR_MAX];
    const uint8_t *msg;
    size_t len;
    grpc_status_t whole = grpc_unary_message(data, size, MAX_BYTES, &msg, &len, err, sizeof err);
    for (size_t cut = 0; cut <= size && cut <= GRPC_PREFIX_BYTES + 1; cut++) {
        if (grpc_body_check(data, cut, MAX_BYTES, err, sizeof err) != GRPC_STATUS_OK &&
            whole != GRPC_STATUS_RESOURCE_EXHAUSTED)
            abort();
    }
    if (whole != GRPC_STATUS_OK) {
        if (err[0] == '\0')
            abort();
        return 0;
    }
    rls_request_t r;
    if (rls_request_decode(msg, len, DESCS_MAX, &r, err, sizeof err) == GRPC_STATUS_OK) {
        check_request(&r);
        rls_request_free(&r);
    } else if (r.owned != NULL || err[0] == '\0') {
        abort();
    }
    kuadrant_check(msg, len);
    char service[64];
    (void)grpc_health_decode(msg, len, service, sizeof service, err, sizeof err);
    return 0;
}
