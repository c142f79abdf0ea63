/*
 * events.c - see events.h.
 *
 * Each event has three words: its count, the earliest time its next line may be written, and
 * the lines suppressed since the last one written. Whoever moves `next_ns` forward (one
 * compare-and-swap) writes the line; everyone else only counts.
 */
#include "engine/events.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/log.h"

typedef struct counter_desc {
    const char *name; /* the /metrics counter */
    const char *help;
} counter_desc_t;

static const counter_desc_t counters[EVENT_COUNTER_COUNT] = {
#define COUNTER_DESC(id, name, help) [id] = {name, help},
    EVENT_COUNTERS(COUNTER_DESC)
#undef COUNTER_DESC
};

typedef struct event_desc {
    event_counter_t counter; /* the counter it counts in */
    const char *labels;      /* its label pairs there, "" for none */
    log_level_t level;       /* of its log line */
} event_desc_t;

static const event_desc_t descs[EVENT_COUNT] = {
#define EVENT_DESC(id, counter, labels, level) [id] = {counter, labels, level},
    EVENTS(EVENT_DESC)
#undef EVENT_DESC
};

typedef struct event_state {
    _Atomic uint64_t count;
    _Atomic int64_t next_ns;     /* CLOCK_MONOTONIC: no line for this event before it */
    _Atomic int64_t last_ns;     /* when the last line was written */
    _Atomic uint64_t suppressed; /* lines not written since the last one */
} event_state_t;

static event_state_t states[EVENT_COUNT];

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t (*_Atomic clock_fn)(void) = monotonic_ns;

void event_set_clock(int64_t (*now_ns)(void))
{
    atomic_store(&clock_fn, now_ns != NULL ? now_ns : monotonic_ns);
}

/* Whether this thread may write id's line now: it moved next_ns past now. */
static bool line_due(event_state_t *st, int64_t now_ns)
{
    int64_t next = atomic_load_explicit(&st->next_ns, memory_order_relaxed);
    while (now_ns >= next) {
        if (atomic_compare_exchange_weak_explicit(&st->next_ns, &next,
                                                  now_ns + EVENT_LOG_INTERVAL_NS,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

void event_note(event_id_t id, const char *fmt, ...)
{
    event_state_t *st = &states[id];
    atomic_fetch_add_explicit(&st->count, 1, memory_order_relaxed);
    int64_t now_ns = atomic_load_explicit(&clock_fn, memory_order_relaxed)();
    if (!line_due(st, now_ns)) {
        atomic_fetch_add_explicit(&st->suppressed, 1, memory_order_relaxed);
        return;
    }
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    uint64_t more = atomic_exchange_explicit(&st->suppressed, 0, memory_order_relaxed);
    int64_t last_ns = atomic_exchange_explicit(&st->last_ns, now_ns, memory_order_relaxed);
    if (more == 0) {
        log_msg(descs[id].level, "%s", text);
        return;
    }
    log_msg(descs[id].level, "%s (and %llu more like it in the last %.1f s)", text,
            (unsigned long long)more, (double)(now_ns - last_ns) / 1e9);
}

void event_count(event_id_t id, uint64_t n)
{
    atomic_fetch_add_explicit(&states[id].count, n, memory_order_relaxed);
}

uint64_t event_total(event_id_t id)
{
    return atomic_load_explicit(&states[id].count, memory_order_relaxed);
}

void events_render(buf_t *b)
{
    int named = -1;
    for (int i = 0; i < EVENT_COUNT; i++) {
        const event_desc_t *d = &descs[i];
        const counter_desc_t *c = &counters[d->counter];
        if (named != (int)d->counter) {
            buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", c->name, c->help, c->name);
            named = (int)d->counter;
        }
        buf_printf(b, d->labels[0] != '\0' ? "%s{%s} %llu\n" : "%s%s %llu\n", c->name, d->labels,
                   (unsigned long long)event_total((event_id_t)i));
    }
}
