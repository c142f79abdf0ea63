/*
 * prop_conn_delay.c - replies held back (conn_resolve_after, server/conn_delay.c) against a
 * model, on seeded random sequences of holds and resolution steps. The loop's clock is never
 * advanced by running it: a step resolves what is due by a time the test names
 * (conn_delays_resolve), so nothing depends on the machine's speed.
 *
 * Each case holds 1 to 3,000 replies, one per connection without a socket, with delays of 0 to
 * 5 s (often equal ones) or 0 and below, interleaved with steps to random times. Checked after
 * every step: exactly the replies due by the step's time have been resolved, each once (its
 * connection's output holds its bytes), the others not at all; the sluice_held_replies gauge
 * is the number still held; a connection closed meanwhile (its slot orphaned) is freed when its
 * time comes. Delays of 0 or less resolve at once. Finally a stopping loop's resolve-all leaves
 * nothing held.
 *
 * SLUICE_SEED replays a run; SLUICE_CASES sets the number of cases (default 60).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prop/gen.h"
#include "server/conn.h"
#include "server/server.h"

#define HELD_MAX 3000

typedef struct tcase {
    long idx;
    int failed;
} tcase_t;

static void fail(tcase_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(tcase_t *c, const char *fmt, ...)
{
    if (c->failed++ < 5) {
        va_list ap;
        va_start(ap, fmt);
        printf("FAIL case %ld: ", c->idx);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
    }
}

typedef struct held {
    conn_t *conn;    /* NULL: orphaned (its connection "closed") */
    uint64_t due_ms; /* loop time */
    bool resolved;   /* the model: due by a step's time */
} held_t;

static server_settings_t cfg;
static server_t srv;

static conn_t *new_conn(loop_t *l)
{
    conn_t *c = calloc(1, sizeof *c);
    if (c != NULL) {
        c->loop = l;
        c->detached = true; /* no socket: replies stay in c->out */
    }
    return c;
}

/* Every reply's state against the model once the replies due by until_ms are resolved. */
static void check_step(tcase_t *c, loop_t *l, held_t *h, size_t n, uint64_t until_ms)
{
    size_t still = 0;
    for (size_t i = 0; i < n; i++) {
        bool due = h[i].due_ms <= until_ms;
        h[i].resolved = h[i].resolved || due;
        still += !h[i].resolved;
        if (h[i].conn == NULL) {
            continue;
        }
        size_t got = h[i].conn->out.len;
        if (got != (h[i].resolved ? 8u : 0u)) {
            fail(c, "reply %zu (due %llu): %zu bytes out by %llu", i,
                 (unsigned long long)h[i].due_ms, got, (unsigned long long)until_ms);
        }
    }
    if (l->ndelayed != still || atomic_load(&l->stats.held_replies) != still) {
        fail(c, "%zu held, gauge %llu, model %zu", l->ndelayed,
             (unsigned long long)atomic_load(&l->stats.held_replies), still);
    }
}

static void run_case(tcase_t *c, uint64_t seed)
{
    prng_t r = prop_case_prng(seed, 0, c->idx);
    loop_t *l = calloc(1, sizeof *l);
    held_t *h = calloc(HELD_MAX, sizeof *h);
    if (l == NULL || h == NULL || uv_loop_init(&l->uv) != 0) {
        fail(c, "no loop");
        return;
    }
    l->srv = &srv;
    uv_timer_init(&l->uv, &l->delay_timer);
    l->delay_timer.data = l;
    uint64_t now = uv_now(&l->uv), until = now;
    size_t n = 0, want = (size_t)prng_range(&r, 1, HELD_MAX);
    bool few_dues = prng_chance(&r, 50); /* many replies due at the same ms */
    while (n < want && c->failed == 0) {
        if (prng_chance(&r, 10)) { /* a step to a later time */
            until +=
                (uint64_t)(prng_chance(&r, 50) ? prng_range(&r, 0, 20) : prng_range(&r, 0, 800));
            conn_delays_resolve(l, until);
            check_step(c, l, h, n, until);
            continue;
        }
        int64_t delay_ms = few_dues ? 100 * prng_range(&r, -1, 30) : prng_range(&r, -5, 5000);
        held_t *x = &h[n];
        x->conn = new_conn(l);
        reply_slot_t *slot = x->conn != NULL ? conn_defer(x->conn) : NULL;
        if (slot == NULL) {
            fail(c, "out of memory");
            break;
        }
        buf_add(&slot->buf, "+reply\r\n", 8);
        /* never sooner than asked: rounded up to the ms, from the loop's (fixed) time */
        x->due_ms = delay_ms > 0 ? now + (uint64_t)delay_ms : 0;
        if (!conn_resolve_after(slot,
                                delay_ms * 1000000 - prng_range(&r, 0, 999999) * (delay_ms > 0))) {
            fail(c, "reply %zu not held with %zu held", n, l->ndelayed);
        }
        n++;
        if (delay_ms > 0 && prng_chance(&r, 5)) { /* its client goes (as on_conn_closed does):
                                                     the slot is orphaned, freed when due */
            slot->conn = NULL;
            conn_free_spare(x->conn);
            free(x->conn);
            x->conn = NULL;
        } else if (x->conn->out.len != (delay_ms > 0 ? 0u : 8u)) {
            fail(c, "reply %zu, delay %lld ms: %zu bytes out at once", n - 1, (long long)delay_ms,
                 x->conn->out.len);
        }
    }
    until += 1000;
    conn_delays_resolve(l, until);
    check_step(c, l, h, n, until);
    conn_delays_resolve(l, UINT64_MAX); /* the loop stops */
    if (l->ndelayed != 0 || l->delayed != NULL) {
        fail(c, "%zu held after the loop stopped", l->ndelayed);
    }
    for (size_t i = 0; i < n; i++) {
        if (h[i].conn != NULL) {
            if (h[i].conn->out.len != 8) {
                fail(c, "reply %zu: %zu bytes after the loop stopped", i, h[i].conn->out.len);
            }
            conn_free_spare(h[i].conn);
            buf_free(&h[i].conn->out);
            free(h[i].conn);
        }
    }
    uv_close((uv_handle_t *)&l->delay_timer, NULL);
    uv_run(&l->uv, UV_RUN_NOWAIT);
    uv_loop_close(&l->uv);
    free(l);
    free(h);
}

int main(void)
{
    server_settings_defaults(&cfg);
    srv.cfg = &cfg;
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_CASES", 60);
    int failed = 0;
    for (long i = 0; i < cases; i++) {
        tcase_t c = {.idx = i};
        run_case(&c, seed);
        failed += c.failed != 0;
    }
    server_settings_free(&cfg);
    printf("prop_conn_delay: seed 0x%llx, %ld cases, %d failed\n", (unsigned long long)seed, cases,
           failed);
    return failed != 0;
}
