/*
 * conn_delay.c - replies held back until a due time (conn_resolve_after: /v1/auth under a
 * max_delay rule, as nginx's limit_req delays; refused secrets, auth_guard.h), resolved by one
 * timer per loop armed for the soonest; a stopping loop resolves them all at once
 * (conn_delays_resolve).
 *
 * Each loop keeps its held replies in a binary min-heap on their due time, in an array that
 * doubles as it fills, up to CONN_HELD_MAX: holding one and resolving the soonest cost O(log n),
 * whatever the number held (a sorted list cost O(n) per reply, and a flood of refusals made the
 * loop spend its time walking it).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "server/conn.h"
#include "engine/events.h"
#include "server/loop.h"

/* A reply held back until its due time. */
typedef struct delayed {
    uint64_t due_ms; /* loop time */
    reply_slot_t *slot;
} delayed_t;

static void on_delay_timer(uv_timer_t *t);

static void delays_arm(loop_t *l)
{
    if (l->ndelayed == 0) {
        uv_timer_stop(&l->delay_timer);
        return;
    }
    uint64_t now = uv_now(&l->uv);
    uint64_t due = l->delayed[0].due_ms;
    uv_timer_start(&l->delay_timer, on_delay_timer, due > now ? due - now : 0, 0);
}

/* Moves h[i] up to its place. */
static void heap_up(delayed_t *h, size_t i)
{
    delayed_t d = h[i];
    while (i > 0 && h[(i - 1) / 2].due_ms > d.due_ms) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = d;
}

/* Moves h[i] down to its place in the heap of n. */
static void heap_down(delayed_t *h, size_t n, size_t i)
{
    delayed_t d = h[i];
    for (size_t child = 2 * i + 1; child < n; child = 2 * i + 1) {
        if (child + 1 < n && h[child + 1].due_ms < h[child].due_ms) {
            child++;
        }
        if (h[child].due_ms >= d.due_ms) {
            break;
        }
        h[i] = h[child];
        i = child;
    }
    h[i] = d;
}

/* Resolves the held replies due by `until_ms` (UINT64_MAX: all, and the heap's memory goes). */
void conn_delays_resolve(loop_t *l, uint64_t until_ms)
{
    while (l->ndelayed > 0 && l->delayed[0].due_ms <= until_ms) {
        reply_slot_t *slot = l->delayed[0].slot;
        l->delayed[0] = l->delayed[--l->ndelayed];
        if (l->ndelayed > 0) {
            heap_down(l->delayed, l->ndelayed, 0);
        }
        conn_resolve(slot);
    }
    atomic_store_explicit(&l->stats.held_replies, l->ndelayed, memory_order_relaxed);
    if (until_ms == UINT64_MAX) {
        free(l->delayed);
        l->delayed = NULL;
        l->delayed_cap = 0;
    }
}

static void on_delay_timer(uv_timer_t *t)
{
    loop_t *l = t->data;
    conn_delays_resolve(l, uv_now(&l->uv));
    delays_arm(l);
}

/* Room for one more held reply: false at CONN_HELD_MAX or out of memory. */
static bool delays_room(loop_t *l)
{
    if (l->ndelayed < l->delayed_cap) {
        return true;
    }
    size_t cap = l->delayed_cap == 0 ? 64 : 2 * l->delayed_cap;
    cap = cap < CONN_HELD_MAX ? cap : CONN_HELD_MAX;
    delayed_t *h = cap > l->delayed_cap ? realloc(l->delayed, cap * sizeof *h) : NULL;
    if (h == NULL) {
        event_note(EV_HELD_FULL,
                   "a reply to be held back was not: this loop holds %zu already (the most it "
                   "may hold: %d)%s",
                   l->ndelayed, CONN_HELD_MAX,
                   l->ndelayed < CONN_HELD_MAX ? ", and memory for more ran out" : "");
        return false;
    }
    l->delayed = h;
    l->delayed_cap = cap;
    return true;
}

bool conn_resolve_after(reply_slot_t *slot, int64_t delay_ns)
{
    conn_t *c = slot->conn;
    if (c == NULL || delay_ns <= 0 || atomic_load(&c->loop->srv->stopping)) {
        conn_resolve(slot);
        return true;
    }
    loop_t *l = c->loop;
    if (!delays_room(l)) {
        return false;
    }
    uint64_t delay_ms = (uint64_t)((delay_ns + 999999) / 1000000); /* never sooner */
    l->delayed[l->ndelayed] = (delayed_t){.due_ms = uv_now(&l->uv) + delay_ms, .slot = slot};
    heap_up(l->delayed, l->ndelayed++);
    atomic_store_explicit(&l->stats.held_replies, l->ndelayed, memory_order_relaxed);
    if (l->delayed[0].slot == slot) {
        delays_arm(l);
    }
    return true;
}
