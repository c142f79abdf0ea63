/*
 * events.h - what sluiced refuses or fails at, counted and logged at a limited rate.
 *
 * Each event is declared once, in EVENTS below: its /metrics counter (name and labels), the
 * counter's help text and the level of its log line. event_note() counts one occurrence and
 * logs it, but at most one line per event per EVENT_LOG_INTERVAL_NS: the lines in between are
 * suppressed and counted, and the next line that is written says how many were ("... (and 41
 * more like it in the last 1.2 s)"). A flood of bad requests therefore costs the log one line a
 * second per kind, and /metrics still counts every one of them.
 *
 * Thread-safe and lock-free: any loop, the config thread or the main thread may note an event.
 */
#ifndef SLUICE_SERVER_EVENTS_H
#define SLUICE_SERVER_EVENTS_H

#include <stdint.h>

#include "proto/buf.h"
#include "server/config.h"

#define EVENT_LOG_INTERVAL_NS INT64_C(1000000000) /* at most one line per event this often */

/*
 * X(id, metric name, labels, level, help). Events that share a metric name must be adjacent and
 * share the help text (it is written once, with the first); labels are Prometheus label pairs
 * without braces, or "" for none.
 */
#define EVENTS(X)                                                                                  \
    X(EV_CROSS_PROTOCOL, "sluice_cross_protocol_total", "", LOG_WARN,                              \
      "HTTP requests sent to the RESP port (a web page posting to it); the connection is closed.") \
    X(EV_SETTLE_DEBT, "sluice_settle_refused_total", "reason=\"max_debt\"", LOG_INFO,              \
      "Settles refused because they would leave a key owing more than its rule's max_debt; "       \
      "nothing was charged.")

typedef enum event_id {
#define EVENT_ENUM(id, name, labels, level, help) id,
    EVENTS(EVENT_ENUM)
#undef EVENT_ENUM
        EVENT_COUNT
} event_id_t;

/* Counts one `id` and logs fmt at the event's level, unless a line for `id` was written less
 * than EVENT_LOG_INTERVAL_NS ago (then the line is suppressed and counted for the next). */
void event_note(event_id_t id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Counts `n` occurrences of `id` without a log line (the caller logs, or the count says it). */
void event_count(event_id_t id, uint64_t n);

/* Occurrences of `id` since start. */
uint64_t event_total(event_id_t id);

/* Replaces the clock event_note() reads (CLOCK_MONOTONIC, ns), for tests; NULL restores it. */
void event_set_clock(int64_t (*now_ns)(void));

/* Appends every event's counter in the Prometheus text format (HELP and TYPE once a name). */
void events_render(buf_t *b);

#endif /* SLUICE_SERVER_EVENTS_H */
