/*
 * test_grpc.c - gRPC's bytes apart from HTTP/2 (proto/grpc.h) and Envoy's rate limit messages
 * (proto/rls.h): the 5-byte framing of a unary call with each way it can be wrong, grpc-message
 * escaping, the health messages, a ShouldRateLimit request decoded into sluice's terms and every
 * check on it, the rule and key a descriptor names, and the response read back field by field.
 * Requests are built with protoc-c's own packers, as a client's library would send them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grpc/health.pb-c.h"
#include "grpc/rls.pb-c.h"
#include "proto/grpc.h"
#include "proto/rls.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitDescriptor pb_desc_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitDescriptor__Entry pb_entry_t;

#define NS INT64_C(1000000000)

/* ---- framing ------------------------------------------------------------------------------- */

static grpc_status_t unary(const char *body, size_t len, size_t max, size_t *msg_len, char *err)
{
    const uint8_t *msg = NULL;
    err[0] = '\0';
    grpc_status_t st =
        grpc_unary_message((const uint8_t *)body, len, max, &msg, msg_len, err, GRPC_ERR_MAX);
    if (st == GRPC_STATUS_OK) {
        assert_int_equal((size_t)(msg - (const uint8_t *)body), GRPC_PREFIX_BYTES);
    }
    return st;
}

static void test_unary_framing(void **unused)
{
    (void)unused;
    char err[GRPC_ERR_MAX];
    size_t n = 99;
    assert_int_equal(unary("\0\0\0\0\3abc", 8, 100, &n, err), GRPC_STATUS_OK);
    assert_int_equal(n, 3);
    assert_int_equal(unary("\0\0\0\0\0", 5, 100, &n, err), GRPC_STATUS_OK); /* empty message */
    assert_int_equal(n, 0);
    assert_int_equal(unary("", 0, 100, &n, err), GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err, "the request has no message");
    assert_int_equal(unary("\0\0\0", 3, 100, &n, err), GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err, "the request ends inside a message's 5-byte prefix");
    assert_int_equal(unary("\0\0\0\0\4abc", 8, 100, &n, err), GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err, "the message announces 4 bytes, the request has 3");
    assert_int_equal(unary("\0\0\0\0\2abc", 8, 100, &n, err), GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(err, "1 bytes after the message: a unary call carries one message");
    assert_int_equal(unary("\1\0\0\0\3abc", 8, 100, &n, err), GRPC_STATUS_UNIMPLEMENTED);
    assert_string_equal(err, "compressed messages are not accepted (grpc-encoding identity only)");
    assert_int_equal(unary("\2\0\0\0\3abc", 8, 100, &n, err), GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(unary("\0\0\0\0\3abc", 8, 2, &n, err), GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_string_equal(err, "message of 3 bytes is larger than the largest accepted, 2 bytes");
}

static void test_body_check(void **unused)
{
    (void)unused;
    char err[GRPC_ERR_MAX];
    const uint8_t big[] = {0, 0x10, 0, 0, 0}; /* 256 MiB announced */
    assert_int_equal(grpc_body_check(big, 4, 1024, err, sizeof err), GRPC_STATUS_OK);
    assert_int_equal(grpc_body_check(big, 5, 1024, err, sizeof err),
                     GRPC_STATUS_RESOURCE_EXHAUSTED);
    const uint8_t small[] = {1, 0, 0, 0, 9}; /* compressed: judged when whole, not early */
    assert_int_equal(grpc_body_check(small, 5, 1024, err, sizeof err), GRPC_STATUS_OK);
}

static void test_prefix_and_message(void **unused)
{
    (void)unused;
    buf_t b = {0};
    grpc_prefix(&b, 0x01020304);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "\0\1\2\3\4", 5);
    buf_free(&b);
    char out[32];
    assert_string_equal(grpc_message_encode("50% off\n", out, sizeof out), "50%25 off%0A");
    assert_string_equal(grpc_message_encode("caf\xc3\xa9", out, sizeof out), "caf%C3%A9");
    assert_string_equal(grpc_message_encode("abc%", out, 6), "abc"); /* no half escape */
    assert_string_equal(grpc_status_name(GRPC_STATUS_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
    assert_string_equal(grpc_status_name((grpc_status_t)99), "UNKNOWN");

    /* SETTINGS (empty), then GOAWAY: last stream 0, ENHANCE_YOUR_CALM (0xb), the debug text */
    grpc_h2_goaway(&b, true, 0xb, "full");
    assert_int_equal(b.len, 9 + 9 + 8 + 4);
    assert_memory_equal(b.data, "\0\0\0\4\0\0\0\0\0", 9);
    assert_memory_equal(b.data + 9, "\0\0\x0c\7\0\0\0\0\0", 9);
    assert_memory_equal(b.data + 18,
                        "\0\0\0\0\0\0\0\x0b"
                        "full",
                        12);
    buf_free(&b);
}

static void test_health(void **unused)
{
    (void)unused;
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    req.service = "envoy.service.ratelimit.v3.RateLimitService";
    uint8_t msg[128];
    size_t n = grpc__health__v1__health_check_request__pack(&req, msg);
    char service[64], err[GRPC_ERR_MAX];
    assert_int_equal(grpc_health_decode(msg, n, service, sizeof service, err, sizeof err),
                     GRPC_STATUS_OK);
    assert_string_equal(service, req.service);
    assert_int_equal(grpc_health_decode(msg, n, service, 8, err, sizeof err),
                     GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(grpc_health_decode((const uint8_t *)"", 0, service, 8, err, sizeof err),
                     GRPC_STATUS_OK);
    assert_string_equal(service, "");
    assert_int_equal(grpc_health_decode((const uint8_t *)"\x0a\x05"
                                                         "ab",
                                        4, service, 8, err, sizeof err),
                     GRPC_STATUS_INVALID_ARGUMENT); /* a string cut short */

    buf_t b = {0};
    grpc_health_encode(&b, GRPC_HEALTH_SERVING);
    assert_true(b.len > GRPC_PREFIX_BYTES);
    Grpc__Health__V1__HealthCheckResponse *resp = grpc__health__v1__health_check_response__unpack(
        NULL, b.len - GRPC_PREFIX_BYTES, (const uint8_t *)b.data + GRPC_PREFIX_BYTES);
    assert_non_null(resp);
    assert_int_equal(resp->status,
                     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    grpc__health__v1__health_check_response__free_unpacked(resp, NULL);
    buf_free(&b);
}

/* ---- requests ------------------------------------------------------------------------------ */

/* A request under construction: up to 4 descriptors of up to 3 entries. */
typedef struct req_builder {
    Envoy__Service__Ratelimit__V3__RateLimitRequest req;
    pb_desc_t desc[4];
    pb_desc_t *descp[4];
    pb_entry_t ent[4][3];
    pb_entry_t *entp[4][3];
    Envoy__Service__Ratelimit__V3__UInt64Value hits[4];
    Envoy__Service__Ratelimit__V3__RateLimitDescriptor__RateLimitOverride limit[4];
    uint8_t bytes[4096];
    size_t len;
} req_builder_t;

static void rb_init(req_builder_t *b, const char *domain, uint32_t hits_addend)
{
    memset(b, 0, sizeof *b);
    envoy__service__ratelimit__v3__rate_limit_request__init(&b->req);
    b->req.domain = (char *)domain;
    b->req.hits_addend = hits_addend;
    b->req.descriptors = b->descp;
}

/* Adds a descriptor of n (key, value) pairs given as kv[2n]. */
static pb_desc_t *rb_desc(req_builder_t *b, size_t n, const char *const *kv)
{
    size_t i = b->req.n_descriptors++;
    pb_desc_t *d = &b->desc[i];
    envoy__service__ratelimit__v3__rate_limit_descriptor__init(d);
    b->descp[i] = d;
    d->entries = b->entp[i];
    for (size_t k = 0; k < n; k++) {
        envoy__service__ratelimit__v3__rate_limit_descriptor__entry__init(&b->ent[i][k]);
        b->ent[i][k].key = (char *)kv[2 * k];
        b->ent[i][k].value = (char *)kv[2 * k + 1];
        b->entp[i][k] = &b->ent[i][k];
    }
    d->n_entries = n;
    return d;
}

static void rb_pack(req_builder_t *b)
{
    assert_true(envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&b->req) <=
                sizeof b->bytes);
    b->len = envoy__service__ratelimit__v3__rate_limit_request__pack(&b->req, b->bytes);
}

static grpc_status_t decode(req_builder_t *b, size_t max, rls_request_t *r, char *err)
{
    rb_pack(b);
    err[0] = '\0';
    return rls_request_decode(b->bytes, b->len, max, r, err, GRPC_ERR_MAX);
}

static void test_request_decode(void **unused)
{
    (void)unused;
    req_builder_t b;
    rb_init(&b, "edge", 0);
    rb_desc(&b, 1, (const char *[]){"remote_address", "10.0.0.1"});
    pb_desc_t *d1 = rb_desc(&b, 2, (const char *[]){"authenticated", "false", "path", "/a|b"});
    envoy__service__ratelimit__v3__uint64_value__init(&b.hits[1]);
    b.hits[1].value = 7;
    d1->hits_addend = &b.hits[1];
    envoy__service__ratelimit__v3__rate_limit_descriptor__rate_limit_override__init(&b.limit[1]);
    b.limit[1].requests_per_unit = 42;
    b.limit[1].unit = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__MINUTE;
    d1->limit = &b.limit[1];
    rls_request_t r;
    char err[GRPC_ERR_MAX];
    assert_int_equal(decode(&b, 64, &r, err), GRPC_STATUS_OK);
    assert_int_equal(r.domain_len, 4);
    assert_memory_equal(r.domain, "edge", 4);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.descs[0].n_entries, 1);
    assert_int_equal(r.descs[0].cost, 1); /* hits_addend 0: one hit */
    assert_false(r.descs[0].has_override);
    assert_int_equal(r.descs[1].n_entries, 2);
    assert_memory_equal(r.descs[1].entries[1].key, "path", 4);
    assert_int_equal(r.descs[1].cost, 7);
    assert_true(r.descs[1].has_override);
    assert_int_equal(r.descs[1].override_per_unit, 42);
    assert_int_equal(r.descs[1].override_unit, RLS_UNIT_MINUTE);

    char name[RLS_NAME_MAX];
    assert_true(rls_rule_name(r.domain, r.domain_len, &r.descs[0], name, sizeof name));
    assert_string_equal(name, "edge.remote_address");
    assert_true(rls_rule_name(r.domain, r.domain_len, &r.descs[1], name, sizeof name));
    assert_string_equal(name, "edge.authenticated.path");
    assert_false(rls_rule_name(r.domain, r.domain_len, &r.descs[1], name, 23)); /* no room */
    buf_t key = {0};
    rls_key(&r.descs[1], &key);
    assert_int_equal(key.len, 11);
    assert_memory_equal(key.data, "false|/a\\|b", 11);
    buf_free(&key);
    assert_true(rls_override_key(r.domain, r.domain_len, &r.descs[1], &key));
    assert_int_equal(key.len, 35);
    assert_memory_equal(key.data, "edge.authenticated.path:false|/a\\|b", 35);
    buf_free(&key);
    char longer[300];
    memset(longer, 'd', sizeof longer);
    assert_false(rls_override_key(longer, sizeof longer, &r.descs[1], &key));
    assert_int_equal(key.len, 0);
    rls_request_free(&r);
    assert_null(r.owned);

    /* the request's hits_addend is every descriptor's cost unless it has its own; 0 own: peek */
    rb_init(&b, "edge", 5);
    rb_desc(&b, 1, (const char *[]){"k", "v"});
    pb_desc_t *z = rb_desc(&b, 1, (const char *[]){"k", "w"});
    envoy__service__ratelimit__v3__uint64_value__init(&b.hits[1]);
    z->hits_addend = &b.hits[1];
    assert_int_equal(decode(&b, 64, &r, err), GRPC_STATUS_OK);
    assert_int_equal(r.descs[0].cost, 5);
    assert_int_equal(r.descs[1].cost, 0);
    rls_request_free(&r);
}

static void test_key_escaping(void **unused)
{
    (void)unused;
    /* ("a|b", "c") and ("a", "b|c") would both join to "a|b|c" unescaped */
    rls_entry_t one[2] = {{"x", 1, "a|b", 3}, {"y", 1, "c", 1}};
    rls_entry_t two[2] = {{"x", 1, "a", 1}, {"y", 1, "b|c", 3}};
    rls_entry_t three[1] = {{"x", 1, "a\\", 2}};
    rls_descriptor_t d1 = {.entries = one, .n_entries = 2};
    rls_descriptor_t d2 = {.entries = two, .n_entries = 2};
    rls_descriptor_t d3 = {.entries = three, .n_entries = 1};
    buf_t k1 = {0}, k2 = {0}, k3 = {0};
    rls_key(&d1, &k1);
    rls_key(&d2, &k2);
    rls_key(&d3, &k3);
    assert_int_equal(k1.len, 6);
    assert_memory_equal(k1.data, "a\\|b|c", 6);
    assert_int_equal(k2.len, 6);
    assert_memory_equal(k2.data, "a|b\\|c", 6);
    assert_int_equal(k3.len, 3);
    assert_memory_equal(k3.data, "a\\\\", 3);
    buf_free(&k1);
    buf_free(&k2);
    buf_free(&k3);
}

static void expect_error(req_builder_t *b, size_t max, grpc_status_t want, const char *msg)
{
    rls_request_t r;
    char err[GRPC_ERR_MAX];
    assert_int_equal(decode(b, max, &r, err), want);
    assert_string_equal(err, msg);
    assert_null(r.owned);
}

static void test_request_errors(void **unused)
{
    (void)unused;
    req_builder_t b;
    rb_init(&b, "", 0);
    rb_desc(&b, 1, (const char *[]){"k", "v"});
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT, "domain is empty");

    rb_init(&b, "edge", 0);
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT, "0 descriptors: a request carries 1 to 64");

    rb_init(&b, "edge", 0);
    for (int i = 0; i < 3; i++) {
        rb_desc(&b, 1, (const char *[]){"k", "v"});
    }
    expect_error(&b, 2, GRPC_STATUS_RESOURCE_EXHAUSTED, "3 descriptors: a request carries 1 to 2");

    rb_init(&b, "edge", 0);
    rb_desc(&b, 1, (const char *[]){"k", "v"});
    rb_desc(&b, 0, NULL);
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT, "descriptors[1]: has no entries");

    rb_init(&b, "edge", 0);
    rb_desc(&b, 2, (const char *[]){"k", "v", "", "w"});
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT, "descriptors[0].entries[1]: key is empty");

    rb_init(&b, "edge", 0);
    rb_desc(&b, 1, (const char *[]){"k", "\xc3\x28"});
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT,
                 "descriptors[0].entries[0]: value is not UTF-8");

    rb_init(&b, "edge", 0);
    pb_desc_t *d = rb_desc(&b, 1, (const char *[]){"k", "v"});
    envoy__service__ratelimit__v3__rate_limit_descriptor__rate_limit_override__init(&b.limit[0]);
    b.limit[0].requests_per_unit = 10;
    b.limit[0].unit = 9;
    d->limit = &b.limit[0];
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT,
                 "descriptors[0].limit: unit 9 is not a time unit");
    b.limit[0].unit = 0;
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT,
                 "descriptors[0].limit: unit 0 is not a time unit");
    b.limit[0].unit = 1;
    b.limit[0].requests_per_unit = 0;
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT,
                 "descriptors[0].limit: requests_per_unit is 0");

    rb_init(&b, "edge", 0);
    d = rb_desc(&b, 1, (const char *[]){"k", "v"});
    envoy__service__ratelimit__v3__uint64_value__init(&b.hits[0]);
    b.hits[0].value = UINT64_MAX;
    d->hits_addend = &b.hits[0];
    expect_error(&b, 64, GRPC_STATUS_INVALID_ARGUMENT,
                 "descriptors[0]: hits_addend 18446744073709551615 is out of range");

    /* not protobuf: a field whose length runs past the end, a wire type 7 */
    const char *bad[] = {"\x0a\x10\x61\x62", "\x0f", "\x12\x03\x0a\x05x"};
    const size_t bad_len[] = {4, 1, 5};
    for (size_t i = 0; i < 3; i++) {
        rls_request_t r;
        char err[GRPC_ERR_MAX];
        assert_int_equal(
            rls_request_decode((const uint8_t *)bad[i], bad_len[i], 64, &r, err, sizeof err),
            GRPC_STATUS_INVALID_ARGUMENT);
        assert_string_equal(err, "malformed RateLimitRequest (not valid protobuf for its fields)");
        assert_null(r.owned);
    }
}

/* ---- responses ----------------------------------------------------------------------------- */

static void test_response_encode(void **unused)
{
    (void)unused;
    rls_status_t st[3] = {
        {.code = RLS_CODE_OK,
         .has_limit = true,
         .name = "edge.remote_address",
         .limit = 100,
         .window_ns = 60 * NS,
         .remaining = 99,
         .reset_ns = 59 * NS + 500},
        {.code = RLS_CODE_OVER_LIMIT,
         .has_limit = true,
         .name = "edge.odd",
         .limit = 5,
         .window_ns = 90 * NS,
         .remaining = UINT64_C(1) << 40,
         .reset_ns = 3 * NS},
        {.code = RLS_CODE_OK}, /* no limit applies */
    };
    buf_t b = {0};
    rls_header_t h[2] = {{"ratelimit-policy", "\"p\";q=1;w=2xyz", 11}, {"ratelimit", "", 0}};
    rls_response_encode(&b, RLS_CODE_OVER_LIMIT, st, 3, h, 2);
    assert_false(b.failed);
    size_t n = ((size_t)(uint8_t)b.data[3] << 8) | (uint8_t)b.data[4];
    assert_int_equal(b.len, GRPC_PREFIX_BYTES + n);
    Envoy__Service__Ratelimit__V3__RateLimitResponse *resp =
        envoy__service__ratelimit__v3__rate_limit_response__unpack(
            NULL, n, (const uint8_t *)b.data + GRPC_PREFIX_BYTES);
    assert_non_null(resp);
    assert_int_equal(resp->overall_code, RLS_CODE_OVER_LIMIT);
    assert_int_equal(resp->n_statuses, 3);
    const Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus *s0 =
                                                                                 resp->statuses[0],
                                                                             *s1 =
                                                                                 resp->statuses[1],
                                                                             *s2 =
                                                                                 resp->statuses[2];
    assert_int_equal(s0->code, RLS_CODE_OK);
    assert_string_equal(s0->current_limit->name, "edge.remote_address");
    assert_int_equal(s0->current_limit->requests_per_unit, 100);
    assert_int_equal(s0->current_limit->unit, RLS_UNIT_MINUTE);
    assert_int_equal(s0->limit_remaining, 99);
    assert_int_equal(s0->duration_until_reset->seconds, 59);
    assert_int_equal(s0->duration_until_reset->nanos, 500);
    assert_int_equal(s1->code, RLS_CODE_OVER_LIMIT);
    assert_int_equal(s1->current_limit->unit, RLS_UNIT_UNKNOWN); /* 90 s is no one unit */
    assert_int_equal(s1->limit_remaining, UINT32_MAX);
    assert_int_equal(s2->code, RLS_CODE_OK);
    assert_null(s2->current_limit);
    assert_null(s2->duration_until_reset);
    assert_int_equal(resp->n_response_headers_to_add, 2);
    assert_string_equal(resp->response_headers_to_add[0]->key, "ratelimit-policy");
    assert_string_equal(resp->response_headers_to_add[0]->value, "\"p\";q=1;w=2"); /* its length */
    assert_string_equal(resp->response_headers_to_add[1]->key, "ratelimit");
    assert_string_equal(resp->response_headers_to_add[1]->value, "");
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(resp, NULL);
    buf_free(&b);
    assert_int_equal(rls_unit_ns(RLS_UNIT_DAY), 86400 * NS);
    assert_int_equal(rls_unit_ns(RLS_UNIT_WEEK), 7 * 86400 * NS);
    assert_int_equal(rls_unit_ns((rls_unit_t)8), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_framing),      cmocka_unit_test(test_body_check),
        cmocka_unit_test(test_prefix_and_message), cmocka_unit_test(test_health),
        cmocka_unit_test(test_request_decode),     cmocka_unit_test(test_key_escaping),
        cmocka_unit_test(test_request_errors),     cmocka_unit_test(test_response_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
