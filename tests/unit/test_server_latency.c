/*
 * test_server_latency.c - the request latency histogram (sluice_request_duration_seconds):
 * every request of a batch is recorded with the batch's whole time (its reply leaves in the
 * batch's one write), not the batch's time divided among its requests; a request whose reply
 * waits in a slot (the Redis store) is recorded once, when the reply moves to the output, with
 * the time since its batch began. Driven on a connection without a socket, as the server fuzz
 * target does; times are only ever bounded from below, never asserted against the wall clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/resp.h"
#include "server/server.h"

static server_settings_t cfg;
static server_t srv;
static loop_t *loop;
static conn_t *conn;

static int setup(void **unused)
{
    (void)unused;
    server_settings_defaults(&cfg);
    srv.cfg = &cfg;
    srv.nloops = 1;
    loop = calloc(1, sizeof *loop);
    conn = calloc(1, sizeof *conn);
    assert_non_null(loop);
    assert_non_null(conn);
    loop->srv = &srv;
    srv.loops = loop;
    conn->loop = loop;
    conn->detached = true; /* no socket: replies stay in conn->out */
    return 0;
}

/* Each test starts with nothing waiting (a detached connection keeps what it was given). */
static int empty_output(void **unused)
{
    (void)unused;
    conn->out.len = 0;
    return 0;
}

static int teardown(void **unused)
{
    (void)unused;
    conn_free_spare(conn);
    buf_free(&conn->out);
    free(conn);
    free(loop);
    server_settings_free(&cfg);
    return 0;
}

static uint64_t get(const _Atomic uint64_t *v)
{
    return atomic_load(v);
}

/* The histogram bin a latency falls in (as loop_record_batch bins it). */
static size_t bin_of(int64_t ns)
{
    size_t b = 0;
    while (b < LATENCY_BUCKETS && ns > loop_latency_bounds_ns[b])
        b++;
    return b;
}

/* 16 requests answered by one batch that began 20 µs ago: each is at least 20 µs, none in the
 * bins below (the batch's average, 1.25 µs, was recorded before). */
static void test_batch_requests_take_the_batch_time(void **unused)
{
    (void)unused;
    loop_stats_t *st = &loop->stats;
    int64_t start_ns = sl_now_ns() - 20000;
    conn->in_batch = true;
    for (int i = 0; i < 16; i++)
        resp_add_simple(&conn->out, "OK");
    conn_batch_done(conn, 0, 16, start_ns);
    assert_int_equal(get(&st->latency_count), 16);
    assert_true(get(&st->latency_sum_ns) >= 16 * 20000);
    size_t lowest = bin_of(20000);
    for (size_t b = 0; b < lowest; b++)
        assert_int_equal(get(&st->latency[b]), 0);
    uint64_t total = 0;
    for (size_t b = 0; b <= LATENCY_BUCKETS; b++)
        total += get(&st->latency[b]);
    assert_int_equal(total, 16);
}

/* Two requests in a batch: the first waits in a slot, the second is answered behind it. The
 * batch records neither; the slot's resolution, 50 ms after the batch began, records both. */
static void test_deferred_replies_recorded_when_they_leave(void **unused)
{
    (void)unused;
    loop_stats_t *st = &loop->stats;
    uint64_t count0 = get(&st->latency_count), sum0 = get(&st->latency_sum_ns);
    uint64_t slow0 = get(&st->latency[LATENCY_BUCKETS]);
    int64_t start_ns = sl_now_ns() - 50000000;
    loop->now_ns = start_ns;
    conn->in_batch = true;
    reply_slot_t *slot = conn_defer(conn); /* a decision waiting on Redis */
    assert_non_null(slot);
    reply_slot_t *behind = conn_defer(conn); /* the next request's reply, already done */
    assert_non_null(behind);
    resp_add_simple(&behind->buf, "PONG");
    conn_resolve(behind);
    conn_batch_done(conn, 0, 2, start_ns);
    assert_int_equal(get(&st->latency_count), count0);
    assert_int_equal(conn_output_bytes(conn), 7); /* "+PONG\r\n" waits behind the slot */

    resp_add_int(&slot->buf, 1);
    conn_resolve(slot); /* outside any batch: Redis answered */
    assert_int_equal(get(&st->latency_count), count0 + 2);
    assert_true(get(&st->latency_sum_ns) - sum0 >= 2 * 50000000);
    assert_int_equal(get(&st->latency[LATENCY_BUCKETS]), slow0 + 2); /* above 10 ms */
    assert_null(conn->slots);
    assert_int_equal(conn_output_bytes(conn), conn->out.len);
}

/* A slot resolved within the batch that took it (the memory store answering an HTTP request)
 * is the batch's, counted once. */
static void test_slot_resolved_in_its_batch(void **unused)
{
    (void)unused;
    loop_stats_t *st = &loop->stats;
    uint64_t count0 = get(&st->latency_count);
    int64_t start_ns = sl_now_ns();
    loop->now_ns = start_ns;
    conn->in_batch = true;
    reply_slot_t *slot = conn_defer(conn);
    assert_non_null(slot);
    resp_add_simple(&slot->buf, "OK");
    conn_resolve(slot);
    assert_int_equal(get(&st->latency_count), count0);
    conn_batch_done(conn, 0, 1, start_ns);
    assert_int_equal(get(&st->latency_count), count0 + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_batch_requests_take_the_batch_time, empty_output),
        cmocka_unit_test_setup(test_deferred_replies_recorded_when_they_leave, empty_output),
        cmocka_unit_test_setup(test_slot_resolved_in_its_batch, empty_output),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
