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
    X(EV_OVERRIDE_WAIT, "sluice_override_lookup_waits_total", "", LOG_WARN,                        \
      "Decisions that waited for a free override lookup (a loop had 4096 in flight); their "       \
      "connections were not read meanwhile.")                                                      \
    X(EV_OVERRIDE_ERROR_KNOWN, "sluice_override_lookup_failures_total",                            \
      "reason=\"error\",decided_by=\"known\"", LOG_WARN,                                           \
      "Decisions whose override lookup failed (error) or was not answered within "                 \
      "--override-timeout (timeout), decided by the key's last known override (known) or, with "   \
      "none known, by the rule's on_store_error.")                                                 \
    X(EV_OVERRIDE_ERROR_FAILED, "sluice_override_lookup_failures_total",                           \
      "reason=\"error\",decided_by=\"on_store_error\"", LOG_WARN,                                  \
      "Decisions whose override lookup failed (error) or was not answered within "                 \
      "--override-timeout (timeout), decided by the key's last known override (known) or, with "   \
      "none known, by the rule's on_store_error.")                                                 \
    X(EV_OVERRIDE_TIMEOUT_KNOWN, "sluice_override_lookup_failures_total",                          \
      "reason=\"timeout\",decided_by=\"known\"", LOG_WARN,                                         \
      "Decisions whose override lookup failed (error) or was not answered within "                 \
      "--override-timeout (timeout), decided by the key's last known override (known) or, with "   \
      "none known, by the rule's on_store_error.")                                                 \
    X(EV_OVERRIDE_TIMEOUT_FAILED, "sluice_override_lookup_failures_total",                         \
      "reason=\"timeout\",decided_by=\"on_store_error\"", LOG_WARN,                                \
      "Decisions whose override lookup failed (error) or was not answered within "                 \
      "--override-timeout (timeout), decided by the key's last known override (known) or, with "   \
      "none known, by the rule's on_store_error.")                                                 \
    X(EV_OVERRIDE_KNOWN_FULL, "sluice_override_memory_full_total", "", LOG_WARN,                   \
      "Overrides found that could not be remembered for an outage (65536 already were).")          \
    X(EV_INLINE_SERVER, "sluice_inline_rule_refusals_total", "cap=\"server\"", LOG_WARN,           \
      "Inline rules (SL.THROTTLE, CL.THROTTLE parameter sets) refused, by the cap that refused "   \
      "them: --max-inline-rules (server), a connection's eighth of it (connection), "              \
      "--max-inline-per-address (address).")                                                       \
    X(EV_INLINE_CONNECTION, "sluice_inline_rule_refusals_total", "cap=\"connection\"", LOG_WARN,   \
      "Inline rules (SL.THROTTLE, CL.THROTTLE parameter sets) refused, by the cap that refused "   \
      "them: --max-inline-rules (server), a connection's eighth of it (connection), "              \
      "--max-inline-per-address (address).")                                                       \
    X(EV_INLINE_ADDRESS, "sluice_inline_rule_refusals_total", "cap=\"address\"", LOG_WARN,         \
      "Inline rules (SL.THROTTLE, CL.THROTTLE parameter sets) refused, by the cap that refused "   \
      "them: --max-inline-rules (server), a connection's eighth of it (connection), "              \
      "--max-inline-per-address (address).")                                                       \
    X(EV_STORE_TIMEOUT, "sluice_redis_failures_total", "kind=\"timeout\"", LOG_WARN,               \
      "Failures of the Redis request store, by kind: a request past --store-timeout (timeout), "   \
      "one answered by an error or not at all (error), a connection lost or not made (down).")     \
    X(EV_STORE_ERROR, "sluice_redis_failures_total", "kind=\"error\"", LOG_WARN,                   \
      "Failures of the Redis request store, by kind: a request past --store-timeout (timeout), "   \
      "one answered by an error or not at all (error), a connection lost or not made (down).")     \
    X(EV_STORE_DOWN, "sluice_redis_failures_total", "kind=\"down\"", LOG_ERROR,                    \
      "Failures of the Redis request store, by kind: a request past --store-timeout (timeout), "   \
      "one answered by an error or not at all (error), a connection lost or not made (down).")     \
    X(EV_STORE_UP, "sluice_redis_reconnected_total", "", LOG_INFO,                                 \
      "Connections to a Redis node made again after they were lost.")

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
