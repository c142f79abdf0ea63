/*
 * fuzz_rls_json.c - libFuzzer target for POST /json's body from outside bytes (proto/rls_json.h):
 * a RateLimitRequest read from JSON. Checks: no crash, no sanitizer report, no leak; a refusal
 * says why and holds nothing; what is read keeps the promises rls.h makes (non-empty UTF-8
 * domain and keys, 1..max descriptors, costs in range, overrides of a real unit); and a response
 * written from it is JSON with as many statuses as descriptors.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/rls_json.h"
#include "proto/text.h"

#define DESCS_MAX 64

static void check_response(const rls_request_t *r)
{
    rls_status_t st[DESCS_MAX];
    for (size_t i = 0; i < r->n; i++) {
        const rls_descriptor_t *d = &r->descs[i];
        st[i] = (rls_status_t){.code = (i & 1) ? RLS_CODE_OVER_LIMIT : RLS_CODE_OK,
                               .has_limit = (i & 2) != 0,
                               .name = r->domain,
                               .limit = d->cost,
                               .window_ns = (int64_t)(d->cost % 1000000007),
                               .remaining = d->n_entries,
                               .reset_ns = (int64_t)(d->cost % 1000000007)};
    }
    rls_header_t h = {"ratelimit", r->descs[0].entries[0].value, r->descs[0].entries[0].value_len};
    buf_t out = {0};
    rls_response_json(&out, RLS_CODE_OVER_LIMIT, st, r->n, &h, 1);
    json_error_t jerr;
    json_t *back = out.failed ? NULL : json_loadb(out.data, out.len, 0, &jerr);
    if (back == NULL || json_array_size(json_object_get(back, "statuses")) != r->n)
        abort();
    json_decref(back);
    buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[GRPC_ERR_MAX] = "";
    rls_request_t r;
    if (rls_request_from_json((const char *)data, size, DESCS_MAX, &r, err, sizeof err) !=
        GRPC_STATUS_OK) {
        if (r.owned != NULL || err[0] == '\0')
            abort();
        return 0;
    }
    if (r.domain_len == 0 || !text_is_utf8(r.domain, r.domain_len) || r.n == 0 || r.n > DESCS_MAX)
        abort();
    for (size_t i = 0; i < r.n; i++) {
        const rls_descriptor_t *d = &r.descs[i];
        if (d->n_entries == 0 || d->cost > (uint64_t)INT64_MAX)
            abort();
        for (size_t k = 0; k < d->n_entries; k++) {
            if (d->entries[k].key_len == 0 ||
                !text_is_utf8(d->entries[k].value, d->entries[k].value_len))
                abort();
        }
        if (d->has_override && (d->override_per_unit == 0 || rls_unit_ns(d->override_unit) == 0))
            abort();
    }
    check_response(&r);
    rls_request_free(&r);
    return 0;
}
