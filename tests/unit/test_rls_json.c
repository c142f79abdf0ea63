/*
 * test_rls_json.c - Envoy's rate limit messages as JSON (proto/rls_json.h), as
 * envoyproxy/ratelimit's POST /json reads and writes them with Go's protojson: a request read by
 * JSON names and proto names alike, integers as numbers or strings, units by name or number,
 * null as absent; each way a request is refused (unknown field, one field twice, wrong types,
 * out of range, and what the gRPC decoder refuses: empty domain, no descriptors, too many); and
 * the response written with camelCase names, names for codes and units, zero values left out
 * and durations as protojson writes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/rls_json.h"

#define NS INT64_C(1000000000)

static grpc_status_t read_json(const char *text, size_t descs_max, rls_request_t *r, char *err)
{
    err[0] = '\0';
    grpc_status_t st = rls_request_from_json(text, strlen(text), descs_max, r, err, GRPC_ERR_MAX);
    if (st != GRPC_STATUS_OK) {
        assert_null(r->owned);
        assert_true(err[0] != '\0');
    }
    return st;
}

static void test_request_fields(void **state)
{
    (void)state;
    rls_request_t r;
    char err[GRPC_ERR_MAX];
    assert_int_equal(
        read_json(
            "{\"domain\":\"edge\",\"hits_addend\":3,\"descriptors\":["
            "{\"entries\":[{\"key\":\"remote_address\",\"value\":\"10.0.0.1\"},{\"key\":"
            "\"path\"}]},"
            "{\"entries\":[{\"key\":\"k\",\"value\":null}],\"hitsAddend\":\"7\","
            "\"limit\":{\"requestsPerUnit\":\"5\",\"unit\":\"MINUTE\"}},"
            "{\"entries\":[{\"key\":\"k\"}],\"hits_addend\":0,"
            "\"limit\":{\"requests_per_unit\":2.0,\"unit\":4}},"
            "{\"entries\":[{\"key\":\"w\"}],\"limit\":{\"requestsPerUnit\":1,\"unit\":\"WEEK\"}}]}",
            64, &r, err),
        GRPC_STATUS_OK);
    assert_int_equal(r.domain_len, 4);
    assert_memory_equal(r.domain, "edge", 4);
    assert_int_equal(r.n, 4);
    assert_int_equal(r.descs[0].n_entries, 2);
    assert_memory_equal(r.descs[0].entries[0].value, "10.0.0.1", 8);
    assert_int_equal(r.descs[0].entries[1].value_len, 0); /* absent: "" */
    assert_int_equal(r.descs[0].cost, 3);                 /* the request's hits_addend */
    assert_false(r.descs[0].has_override);
    assert_int_equal(r.descs[1].cost, 7); /* its own, as a string */
    assert_true(r.descs[1].has_override);
    assert_int_equal(r.descs[1].override_per_unit, 5);
    assert_int_equal(r.descs[1].override_unit, RLS_UNIT_MINUTE);
    assert_int_equal(r.descs[2].cost, 0); /* its own 0 is a value, not absent */
    assert_int_equal(r.descs[2].override_per_unit, 2);
    assert_int_equal(r.descs[2].override_unit, RLS_UNIT_DAY);
    assert_int_equal(r.descs[3].override_unit, RLS_UNIT_WEEK); /* Envoy's 7, after YEAR */
    rls_request_free(&r);
    assert_null(r.owned);
}

typedef struct refused {
    const char *json;
    grpc_status_t status;
    const char *says; /* a part of the error */
} refused_t;

static const refused_t REFUSED[] = {
    {"", GRPC_STATUS_INVALID_ARGUMENT, "invalid JSON"},
    {"[1]", GRPC_STATUS_INVALID_ARGUMENT, "must be an object"},
    {"{\"domain\":\"d\",\"domain\":\"e\"}", GRPC_STATUS_INVALID_ARGUMENT, "duplicate"},
    {"{\"domain\":\"d\",\"tenant\":1}", GRPC_STATUS_INVALID_ARGUMENT, "unknown field \"tenant\""},
    {"{\"domain\":\"d\",\"hitsAddend\":1,\"hits_addend\":1}", GRPC_STATUS_INVALID_ARGUMENT,
     "given twice"},
    {"{\"domain\":7}", GRPC_STATUS_INVALID_ARGUMENT, "domain must be a string"},
    {"{\"domain\":\"\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}]}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "domain is empty"},
    {"{\"domain\":\"d\"}", GRPC_STATUS_INVALID_ARGUMENT, "0 descriptors"},
    {"{\"domain\":\"d\",\"descriptors\":{}}", GRPC_STATUS_INVALID_ARGUMENT, "must be an array"},
    {"{\"domain\":\"d\",\"descriptors\":[{}]}", GRPC_STATUS_INVALID_ARGUMENT, "has no entries"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"val\":\"v\"}]}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "descriptors[0].entries[0]: unknown field \"val\""},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"value\":\"v\"}]}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "key is empty"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\\u0000b\"}]}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "NUL"},
    {"{\"domain\":\"d\",\"hitsAddend\":4294967296,\"descriptors\":[{\"entries\":[{\"key\":\"k\"}]}"
     "]}",
     GRPC_STATUS_INVALID_ARGUMENT, "hitsAddend must be an integer from 0 to 4294967295"},
    {"{\"domain\":\"d\",\"hitsAddend\":-1}", GRPC_STATUS_INVALID_ARGUMENT, "hitsAddend"},
    {"{\"domain\":\"d\",\"hitsAddend\":1.5}", GRPC_STATUS_INVALID_ARGUMENT, "hitsAddend"},
    {"{\"domain\":\"d\",\"hitsAddend\":\"1x\"}", GRPC_STATUS_INVALID_ARGUMENT, "hitsAddend"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}],\"hitsAddend\":"
     "\"9223372036854775808\"}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "out of range"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}],\"limit\":{\"unit\":"
     "\"FORTNIGHT\",\"requestsPerUnit\":1}}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "descriptors[0].limit: unit must be"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}],\"limit\":{\"unit\":9,"
     "\"requestsPerUnit\":1}}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "unit 9 is not a time unit"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}],\"limit\":{\"unit\":"
     "\"SECOND\"}}]}",
     GRPC_STATUS_INVALID_ARGUMENT, "requests_per_unit is 0"},
    {"{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\"}]},{\"entries\":[{\"key\":"
     "\"b\"}]},{\"entries\":[{\"key\":\"c\"}]}]}",
     GRPC_STATUS_RESOURCE_EXHAUSTED, "3 descriptors: a request carries 1 to 2"},
};

static void test_request_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
        rls_request_t r;
        char err[GRPC_ERR_MAX];
        grpc_status_t st = read_json(REFUSED[i].json, 2, &r, err);
        if (st != REFUSED[i].status || strstr(err, REFUSED[i].says) == NULL) {
            fail_msg("%s: got %d \"%s\", want %d \"%s\"", REFUSED[i].json, st, err,
                     REFUSED[i].status, REFUSED[i].says);
        }
    }
}

static void expect_json(rls_code_t overall, const rls_status_t *st, size_t n, const rls_header_t *h,
                        size_t nh, const char *want)
{
    buf_t out = {0};
    rls_response_json(&out, overall, st, n, h, nh);
    assert_false(out.failed);
    buf_add(&out, "", 1);
    assert_string_equal(out.data, want);
    buf_free(&out);
}

static void test_response(void **state)
{
    (void)state;
    rls_status_t st[] = {
        {.code = RLS_CODE_OK,
         .has_limit = true,
         .name = "edge.remote_address",
         .limit = 10,
         .window_ns = 60 * NS,
         .remaining = 9,
         .reset_ns = 60 * NS},
        {.code = RLS_CODE_OVER_LIMIT,
         .has_limit = true,
         .name = "",
         .limit = 1,
         .window_ns = 90 * NS, /* not a unit: left out */
         .remaining = 0,       /* zero: left out */
         .reset_ns = NS + NS / 2},
        {.code = RLS_CODE_OK, .remaining = UINT32_MAX + UINT64_C(5)}, /* unlimited: capped */
        {.code = RLS_CODE_OK},
        {.code = RLS_CODE_OK, .has_limit = true, .limit = 3, .window_ns = NS, .reset_ns = 1500},
        {.code = RLS_CODE_OK, .has_limit = true, .limit = 3, .window_ns = NS, .reset_ns = 7},
        {.code = RLS_CODE_OK, .has_limit = true, .limit = 2, .window_ns = 7 * 86400 * NS},
    };
    expect_json(RLS_CODE_OVER_LIMIT, st, 4, NULL, 0,
                "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":["
                "{\"code\":\"OK\",\"currentLimit\":{\"name\":\"edge.remote_address\","
                "\"requestsPerUnit\":10,\"unit\":\"MINUTE\"},\"limitRemaining\":9,"
                "\"durationUntilReset\":\"60s\"},"
                "{\"code\":\"OVER_LIMIT\",\"currentLimit\":{\"requestsPerUnit\":1},"
                "\"durationUntilReset\":\"1.500s\"},"
                "{\"code\":\"OK\",\"limitRemaining\":4294967295},"
                "{\"code\":\"OK\"}]}");
    expect_json(RLS_CODE_OK, st + 4, 2, NULL, 0,
                "{\"overallCode\":\"OK\",\"statuses\":["
                "{\"code\":\"OK\",\"currentLimit\":{\"requestsPerUnit\":3,\"unit\":\"SECOND\"},"
                "\"durationUntilReset\":\"0.000001500s\"},"
                "{\"code\":\"OK\",\"currentLimit\":{\"requestsPerUnit\":3,\"unit\":\"SECOND\"},"
                "\"durationUntilReset\":\"0.000000007s\"}]}");
    expect_json(RLS_CODE_OK, st + 6, 1, NULL, 0,
                "{\"overallCode\":\"OK\",\"statuses\":["
                "{\"code\":\"OK\",\"currentLimit\":{\"requestsPerUnit\":2,\"unit\":\"WEEK\"},"
                "\"durationUntilReset\":\"0s\"}]}");
    rls_header_t h[] = {{"ratelimit-policy", "\"a\";q=10;w=60", 13}, {"ratelimit", "r=9", 3}};
    expect_json(RLS_CODE_OK, NULL, 0, h, 2,
                "{\"overallCode\":\"OK\",\"responseHeadersToAdd\":["
                "{\"key\":\"ratelimit-policy\",\"value\":\"\\\"a\\\";q=10;w=60\"},"
                "{\"key\":\"ratelimit\",\"value\":\"r=9\"}]}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_request_refused),
        cmocka_unit_test(test_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
