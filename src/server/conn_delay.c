/*
 * conn_delay.c - replies held back until a due time (conn_resolve_after: /v1/auth under a
 * max_delay rule, as nginx's limit_req delays), each loop's soonest first, resolved by a timer;
 * a stopping loop resolves them all at once (conn_delays_resolve).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "server/conn.h"
#include "server/loop.h"

/* A reply held back until its due time; the loop keeps them soonest first. */
typedef struct delayed {
    struct delayed *next;
    reply_slot_t *slot;
    uint64_t due_ms; /* loop time */
} delayed_t;

static void on_delay_timer(uv_timer_t *t);

static void delays_arm(loop_t *l)
{
    if (l->delayed == NULL) {
        uv_timer_stop(&l->delay_timer);
        return;
    }
    uint64_t now = uv_now(&l->uv);
    uint64_t due = l->delayed->due_ms;
    uv_timer_start(&l->delay_timer, on_delay_timer, due > now ? due - now : 0, 0);
}

/* Resolves the held replies due by `until_ms` (UINT64_MAX: all). */
void conn_delays_resolve(loop_t *l, uint64_t until_ms)
{
    while (l->delayed != NULL && l->delayed->due_ms <= until_ms) {
        delayed_t *d = l->delayed;
        l->delayed = d->next;
        conn_resolve(d->slot);
        free(d);
    }
}

static void on_delay_timer(uv_timer_t *t)
{
    loop_t *l = t->data;
    conn_delays_resolve(l, uv_now(&l->uv));
    delays_arm(l);
}

void conn_resolve_after(reply_slot_t *slot, int64_t delay_ns)
{
    conn_t *c = slot->conn;
    delayed_t *d = c != NULL && delay_ns > 0 && !atomic_load(&c->loop->srv->stopping)
                       ? malloc(sizeof *d)
                       : NULL;
    if (d == NULL) {
        conn_resolve(slot);
        return;
    }
    loop_t *l = c->loop;
    uint64_t delay_ms = (uint64_t)((delay_ns + 999999) / 1000000); /* never sooner */
    *d = (delayed_t){.slot = slot, .due_ms = uv_now(&l->uv) + delay_ms};
    delayed_t **pp = &l->delayed;
    while (*pp != NULL && (*pp)->due_ms <= d->due_ms) {
        pp = &(*pp)->next;
    }
    d->next = *pp;
    *pp = d;
    if (l->delayed == d) {
        delays_arm(l);
    }
}
