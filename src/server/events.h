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
    X(EV_MEMORY_FULL, "sluice_memory_full_total", "", LOG_WARN,                                    \
      "New keys refused under --max-memory because every key was in use: decided by their "        \
      "rule's on_store_error.")                                                                    \
    X(EV_MEMORY_RELIEVED, "sluice_memory_relieved_total", "", LOG_INFO,                            \
      "Times the memory store freed idle keys across the rules as it neared --max-memory.")        \
    X(EV_REPLAY_BUSY, "sluice_replay_refused_total", "reason=\"busy\"", LOG_INFO,                  \
      "POST /v1/replay refused with 503: --replay-concurrency replays were running.")              \
    X(EV_REPLAY_DEADLINE, "sluice_replay_stopped_total", "reason=\"deadline\"", LOG_INFO,          \
      "POST /v1/replay stopped before the end of its log: deadline, memory budget or shutdown.")   \
    X(EV_REPLAY_MEMORY, "sluice_replay_stopped_total", "reason=\"memory\"", LOG_INFO,              \
      "POST /v1/replay stopped before the end of its log: deadline, memory budget or shutdown.")   \
    X(EV_REPLAY_SHUTDOWN, "sluice_replay_stopped_total", "reason=\"shutdown\"", LOG_INFO,          \
      "POST /v1/replay stopped before the end of its log: deadline, memory budget or shutdown.")   \
    X(EV_REPLAY_ABANDONED, "sluice_replay_abandoned_total", "", LOG_INFO,                          \
      "POST /v1/replay answers dropped: the client closed before its replay ended.")               \
    X(EV_AUTH_FAILED_RESP, "sluice_auth_failures_total", "protocol=\"resp\"", LOG_WARN,            \
      "Wrong secrets: RESP AUTH or HELLO AUTH with a wrong password, HTTP requests with a wrong "  \
      "admin token.")                                                                              \
    X(EV_AUTH_FAILED_HTTP, "sluice_auth_failures_total", "protocol=\"http\"", LOG_WARN,            \
      "Wrong secrets: RESP AUTH or HELLO AUTH with a wrong password, HTTP requests with a wrong "  \
      "admin token.")                                                                              \
    X(EV_AUTH_HELD, "sluice_auth_delayed_total", "", LOG_WARN,                                     \
      "Replies to refused secrets held back because their address failed more than 5 times "       \
      "without a minute's pause.")                                                                 \
    X(EV_HTTP_FOREIGN_HOST, "sluice_http_refused_total", "reason=\"host\"", LOG_WARN,              \
      "HTTP requests refused to keep web pages out: a Host that is not one of this server's "      \
      "names (host), an Origin or Sec-Fetch-Site of another site (origin), a change without a "    \
      "JSON Content-Type or X-Sluice-Client (content_type).")                                      \
    X(EV_HTTP_FOREIGN_ORIGIN, "sluice_http_refused_total", "reason=\"origin\"", LOG_WARN,          \
      "HTTP requests refused to keep web pages out: a Host that is not one of this server's "      \
      "names (host), an Origin or Sec-Fetch-Site of another site (origin), a change without a "    \
      "JSON Content-Type or X-Sluice-Client (content_type).")                                      \
    X(EV_HTTP_NOT_JSON, "sluice_http_refused_total", "reason=\"content_type\"", LOG_WARN,          \
      "HTTP requests refused to keep web pages out: a Host that is not one of this server's "      \
      "names (host), an Origin or Sec-Fetch-Site of another site (origin), a change without a "    \
      "JSON Content-Type or X-Sluice-Client (content_type).")                                      \
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
      "Connections to a Redis node made again after they were lost.")                              \
    X(EV_SETTLE_DEBT, "sluice_settle_refused_total", "reason=\"max_debt\"", LOG_INFO,              \
      "Settles refused because they would leave a key owing more than its rule's max_debt; "       \
      "nothing was charged.")                                                                      \
    X(EV_AUTH_LOCKED_RESP, "sluice_auth_locked_total", "protocol=\"resp\"", LOG_WARN,              \
      "Attempts at a secret refused whatever the secret, because their address failed more than "  \
      "5 times without a minute's pause: RESP AUTH or HELLO AUTH, HTTP requests with an admin "    \
      "token.")                                                                                    \
    X(EV_AUTH_LOCKED_HTTP, "sluice_auth_locked_total", "protocol=\"http\"", LOG_WARN,              \
      "Attempts at a secret refused whatever the secret, because their address failed more than "  \
      "5 times without a minute's pause: RESP AUTH or HELLO AUTH, HTTP requests with an admin "    \
      "token.")                                                                                    \
    X(EV_AUTH_DROPPED, "sluice_auth_dropped_total", "", LOG_WARN,                                  \
      "Connections closed unanswered after a refused secret: its reply would have waited more "    \
      "than 10 s behind the other held replies of its address.")                                   \
    X(EV_HELD_FULL, "sluice_held_replies_full_total", "", LOG_WARN,                                \
      "Replies to hold back that were not, because their loop held 65536 already (or memory ran "  \
      "out): a /v1/auth admitted with a delay was answered at once; a refused secret's "           \
      "connection was closed unanswered.")

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
