/*
 * test_conn_delay.c - replies held back (conn_resolve_after, server/conn_delay.c) at their
 * edges: a loop holds at most CONN_HELD_MAX, and past that says so (the slot left to the
 * caller, the refusal counted) rather than growing; a stopping server resolves at once; a slot
 * whose connection closed is freed when its time comes; the timer resolves them, and one
 * connection's replies still leave in request order whatever their delays. Connections without
 * a socket, as the server fuzz target drives them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/resp.h"
#include "server/conn.h"
#include "engine/events.h"
#include "server/server.h"

static server_settings_t cfg;
static server_t srv;
static loop_t *loop;

static conn_t *new_conn(void)
{
    conn_t *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->loop = loop;
    c->detached = true; /* no socket: replies stay in c->out */
    return c;
}

static void free_conn(conn_t *c)
{
    conn_free_spare(c);
    buf_free(&c->out);
    free(c);
}

static int setup(void **unused)
{
    (void)unused;
    server_settings_defaults(&cfg);
    srv.cfg = &cfg;
    srv.nloops = 1;
    loop = calloc(1, sizeof *loop);
    assert_non_null(loop);
    loop->srv = &srv;
    srv.loops = loop;
    assert_int_equal(uv_loop_init(&loop->uv), 0);
    uv_timer_init(&loop->uv, &loop->delay_timer);
    loop->delay_timer.data = loop;
    return 0;
}

static int teardown(void **unused)
{
    (void)unused;
    conn_delays_resolve(loop, UINT64_MAX); /* as a stopping loop does: the heap's memory goes */
    assert_null(loop->delayed);
    uv_close((uv_handle_t *)&loop->delay_timer, NULL);
    uv_run(&loop->uv, UV_RUN_DEFAULT);
    uv_loop_close(&loop->uv);
    free(loop);
    server_settings_free(&cfg);
    return 0;
}

/* CONN_HELD_MAX held: the next is refused, left unresolved and counted; once one is resolved
 * there is room again. */
static void test_cap(void **unused)
{
    (void)unused;
    conn_t *c = new_conn();
    uint64_t full0 = event_total(EV_HELD_FULL);
    for (int i = 0; i < CONN_HELD_MAX; i++) {
        reply_slot_t *s = conn_defer(c);
        assert_non_null(s);
        resp_add_simple(&s->buf, "OK");
        assert_true(conn_resolve_after(s, INT64_C(5000000000) - i));
    }
    assert_int_equal(loop->ndelayed, CONN_HELD_MAX);
    assert_int_equal(atomic_load(&loop->stats.held_replies), CONN_HELD_MAX);
    reply_slot_t *over = conn_defer(c);
    assert_non_null(over);
    resp_add_simple(&over->buf, "NO");
    assert_false(conn_resolve_after(over, 1000000));
    assert_false(over->done);
    assert_int_equal(loop->ndelayed, CONN_HELD_MAX);
    assert_int_equal(event_total(EV_HELD_FULL), full0 + 1);
    /* everything held is due by 5 s: resolved, in order, up to the refused one, which waits
     * unresolved for its caller */
    conn_delays_resolve(loop, uv_now(&loop->uv) + 5000);
    assert_int_equal(loop->ndelayed, 0);
    assert_int_equal(atomic_load(&loop->stats.held_replies), 0);
    assert_int_equal(c->out.len, CONN_HELD_MAX * 5);
    assert_ptr_equal(c->slots, over);
    conn_resolve(over); /* the caller's answer (or its close) */
    assert_null(c->slots);
    assert_int_equal(c->out.len, CONN_HELD_MAX * 5 + 5);
    free_conn(c);
}

/* A stopping server holds nothing: resolved at once. */
static void test_stopping(void **unused)
{
    (void)unused;
    conn_t *c = new_conn();
    atomic_store(&srv.stopping, true);
    reply_slot_t *s = conn_defer(c);
    resp_add_simple(&s->buf, "OK");
    assert_true(conn_resolve_after(s, INT64_C(3000000000)));
    assert_int_equal(loop->ndelayed, 0);
    assert_int_equal(c->out.len, 5);
    atomic_store(&srv.stopping, false);
    free_conn(c);
}

/* The timer resolves held replies; a connection's replies leave in request order although the
 * later ones were due sooner; a slot whose connection closed meanwhile is freed (ASan: no leak,
 * no use after free). */
static void test_timer_and_order(void **unused)
{
    (void)unused;
    conn_t *c = new_conn(), *gone = new_conn();
    for (int i = 0; i < 3; i++) {
        reply_slot_t *s = conn_defer(c);
        resp_add_int(&s->buf, i);
        assert_true(conn_resolve_after(s, (3 - i) * INT64_C(1000000))); /* 3, 2, 1 ms */
    }
    reply_slot_t *orphan = conn_defer(gone);
    resp_add_simple(&orphan->buf, "LOST");
    assert_true(conn_resolve_after(orphan, INT64_C(2000000)));
    orphan->conn = NULL; /* its connection closed (as on_conn_closed leaves it) */
    free_conn(gone);
    assert_int_equal(loop->ndelayed, 4);
    uv_run(&loop->uv, UV_RUN_DEFAULT); /* returns once the timer has nothing left to hold */
    assert_int_equal(loop->ndelayed, 0);
    assert_int_equal(c->out.len, 12);
    assert_memory_equal(c->out.data, ":0\r\n:1\r\n:2\r\n", 12);
    free_conn(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_stopping),
        cmocka_unit_test(test_timer_and_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
