/*
 * events.h - what sluiced refuses or fails at, counted and logged at a limited rate.
 *
 * Each event is declared once, in EVENTS below: the /metrics counter it counts in (declared once
 * in EVENT_COUNTERS, with its help text), its labels there and the level of its log line.
 * event_note() counts one occurrence and logs it, but at most one line per event per
 * EVENT_LOG_INTERVAL_NS: the lines in between are suppressed and counted, and the next line that is
 * written says how many were ("... (and 41 more like it in the last 1.2 s)"). A flood of bad
 * requests therefore costs the log one line a second per kind, and /metrics still counts every one
 * of them.
 *
 * Thread-safe and lock-free: any loop, the config thread or the main thread may note an event.
 */
#ifndef SLUICE_ENGINE_EVENTS_H
#define SLUICE_ENGINE_EVENTS_H

#include <stdint.h>

#include "proto/buf.h"
#include "engine/log.h"

#define EVENT_LOG_INTERVAL_NS INT64_C(1000000000) /* at most one line per event this often */

/*
 * The counters, each described once: C(id, metric name, help). Several events may count in one
 * counter under different labels.
 */
#define EVENT_COUNTERS(C)                                                                          \
    C(EC_CROSS_PROTOCOL, "sluice_cross_protocol_total",                                            \
      "HTTP requests sent to the RESP port (a web page posting to it); the connection is closed.") \
    C(EC_MEMORY_FULL, "sluice_memory_full_total",                                                  \
      "New keys refused under --max-memory because every key was in use: decided by their rule's " \
      "on_store_error.")                                                                           \
    C(EC_MEMORY_RELIEVED, "sluice_memory_relieved_total",                                          \
      "Times the memory store freed idle keys across the rules as it neared --max-memory.")        \
    C(EC_REPLAY_REFUSED, "sluice_replay_refused_total",                                            \
      "POST /v1/replay refused with 503: --replay-concurrency replays were running.")              \
    C(EC_REPLAY_STOPPED, "sluice_replay_stopped_total",                                            \
      "POST /v1/replay stopped before the end of its log: deadline, memory budget or shutdown.")   \
    C(EC_REPLAY_ABANDONED, "sluice_replay_abandoned_total",                                        \
      "POST /v1/replay answers dropped: the client closed before its replay ended.")               \
    C(EC_AUTH_FAILURES, "sluice_auth_failures_total",                                              \
      "Wrong secrets: RESP AUTH or HELLO AUTH with a wrong password, HTTP requests with a wrong "  \
      "admin token.")                                                                              \
    C(EC_AUTH_DELAYED, "sluice_auth_delayed_total",                                                \
      "Replies to refused secrets held back because their address failed more than 5 times "       \
      "without a minute's pause.")                                                                 \
    C(EC_AUTH_LOCKED, "sluice_auth_locked_total",                                                  \
      "Attempts at a secret refused whatever the secret, because their address failed more than "  \
      "5 times without a minute's pause: RESP AUTH or HELLO AUTH, HTTP requests with an admin "    \
      "token.")                                                                                    \
    C(EC_AUTH_DROPPED, "sluice_auth_dropped_total",                                                \
      "Connections closed unanswered after a refused secret: its reply would have waited more "    \
      "than 10 s behind the other held replies of its address.")                                   \
    C(EC_HELD_REPLIES_FULL, "sluice_held_replies_full_total",                                      \
      "Replies to hold back that were not, because their loop held 65536 already (or memory ran "  \
      "out): a /v1/auth admitted with a delay was answered at once; a refused secret's "           \
      "connection was closed unanswered.")                                                         \
    C(EC_HTTP_REFUSED, "sluice_http_refused_total",                                                \
      "HTTP requests refused to keep web pages out: a Host that is not one of this server's "      \
      "names (host), an Origin or Sec-Fetch-Site of another site (origin), a change without a "    \
      "JSON Content-Type or X-Sluice-Client (content_type).")                                      \
    C(EC_OVERRIDE_LOOKUP_WAITS, "sluice_override_lookup_waits_total",                              \
      "Decisions that waited for a free override lookup (a loop had 4096 in flight); their "       \
      "connections were not read meanwhile.")                                                      \
    C(EC_OVERRIDE_LOOKUP_FAILURES, "sluice_override_lookup_failures_total",                        \
      "Decisions whose override lookup failed (error) or was not answered within "                 \
      "--override-timeout (timeout), decided by the key's last known override (known) or, with "   \
      "none known, by the rule's on_store_error.")                                                 \
    C(EC_OVERRIDE_MEMORY_FULL, "sluice_override_memory_full_total",                                \
      "Overrides found that could not be remembered for an outage (65536 already were).")          \
    C(EC_INLINE_RULE_REFUSALS, "sluice_inline_rule_refusals_total",                                \
      "Inline rules (SL.THROTTLE, CL.THROTTLE parameter sets) refused, by the cap that refused "   \
      "them: --max-inline-rules (server), a connection's eighth of it (connection), "              \
      "--max-inline-per-address (address).")                                                       \
    C(EC_REDIS_FAILURES, "sluice_redis_failures_total",                                            \
      "Failures of the Redis request store, by kind: a request past --store-timeout (timeout), "   \
      "one answered by an error or not at all (error), a connection lost or not made (down).")     \
    C(EC_REDIS_RECONNECTED, "sluice_redis_reconnected_total",                                      \
      "Connections to a Redis node made again after they were lost.")                              \
    C(EC_SETTLE_REFUSED, "sluice_settle_refused_total",                                            \
      "Settles refused because they would leave a key owing more than its rule's max_debt; "       \
      "nothing was charged.")                                                                      \
    C(EC_RULES_RELOAD_FAILED, "sluice_rules_reload_failures_total",                                \
      "Reloads of the rules files (SIGHUP, or a change seen in a watched file or directory) "      \
      "refused: a file could not be read or is invalid; the rules in force stay.")                 \
    C(EC_STORE_LATE_CHARGES, "sluice_store_late_charges_total",                                    \
      "Decisions answered without the store (past --store-timeout) that the store admitted when "  \
      "it ran them later: given back (outcome refunded), or left charged (refund_failed).")        \
    C(EC_RELEASES_REFUSED, "sluice_releases_refused_total",                                        \
      "Releases refused: the key held no live hold of that id (expired, released before, or "      \
      "never made); nothing changed.")                                                             \
    C(EC_STORE_UNREPLICATED, "sluice_store_unreplicated_total",                                    \
      "Admissions of rules with replicas that fewer replicas acknowledged within replica_wait: "   \
      "given back, and decided by on_store_error.")                                                \
    C(EC_PRIORITY_SHED, "sluice_priority_shed_total",                                              \
      "Requests refused at a priority below their rule's top, whose cost and the reserve kept "    \
      "for higher priorities did not fit: load shed (shadow rules' too).")

/*
 * X(id, counter, labels, level): an event, the counter it counts in with its label pairs
 * (without braces, "" for none; the events of one counter must be adjacent) and the level of
 * its log line.
 */
#define EVENTS(X)                                                                                  \
    X(EV_CROSS_PROTOCOL, EC_CROSS_PROTOCOL, "", LOG_WARN)                                          \
    X(EV_MEMORY_FULL, EC_MEMORY_FULL, "", LOG_WARN)                                                \
    X(EV_MEMORY_RELIEVED, EC_MEMORY_RELIEVED, "", LOG_INFO)                                        \
    X(EV_REPLAY_BUSY, EC_REPLAY_REFUSED, "reason=\"busy\"", LOG_INFO)                              \
    X(EV_REPLAY_DEADLINE, EC_REPLAY_STOPPED, "reason=\"deadline\"", LOG_INFO)                      \
    X(EV_REPLAY_MEMORY, EC_REPLAY_STOPPED, "reason=\"memory\"", LOG_INFO)                          \
    X(EV_REPLAY_SHUTDOWN, EC_REPLAY_STOPPED, "reason=\"shutdown\"", LOG_INFO)                      \
    X(EV_REPLAY_ABANDONED, EC_REPLAY_ABANDONED, "", LOG_INFO)                                      \
    X(EV_AUTH_FAILED_RESP, EC_AUTH_FAILURES, "protocol=\"resp\"", LOG_WARN)                        \
    X(EV_AUTH_FAILED_HTTP, EC_AUTH_FAILURES, "protocol=\"http\"", LOG_WARN)                        \
    X(EV_AUTH_HELD, EC_AUTH_DELAYED, "", LOG_WARN)                                                 \
    X(EV_AUTH_LOCKED_RESP, EC_AUTH_LOCKED, "protocol=\"resp\"", LOG_WARN)                          \
    X(EV_AUTH_LOCKED_HTTP, EC_AUTH_LOCKED, "protocol=\"http\"", LOG_WARN)                          \
    X(EV_AUTH_DROPPED, EC_AUTH_DROPPED, "", LOG_WARN)                                              \
    X(EV_HELD_FULL, EC_HELD_REPLIES_FULL, "", LOG_WARN)                                            \
    X(EV_HTTP_FOREIGN_HOST, EC_HTTP_REFUSED, "reason=\"host\"", LOG_WARN)                          \
    X(EV_HTTP_FOREIGN_ORIGIN, EC_HTTP_REFUSED, "reason=\"origin\"", LOG_WARN)                      \
    X(EV_HTTP_NOT_JSON, EC_HTTP_REFUSED, "reason=\"content_type\"", LOG_WARN)                      \
    X(EV_OVERRIDE_WAIT, EC_OVERRIDE_LOOKUP_WAITS, "", LOG_WARN)                                    \
    X(EV_OVERRIDE_ERROR_KNOWN, EC_OVERRIDE_LOOKUP_FAILURES,                                        \
      "reason=\"error\",decided_by=\"known\"", LOG_WARN)                                           \
    X(EV_OVERRIDE_ERROR_FAILED, EC_OVERRIDE_LOOKUP_FAILURES,                                       \
      "reason=\"error\",decided_by=\"on_store_error\"", LOG_WARN)                                  \
    X(EV_OVERRIDE_TIMEOUT_KNOWN, EC_OVERRIDE_LOOKUP_FAILURES,                                      \
      "reason=\"timeout\",decided_by=\"known\"", LOG_WARN)                                         \
    X(EV_OVERRIDE_TIMEOUT_FAILED, EC_OVERRIDE_LOOKUP_FAILURES,                                     \
      "reason=\"timeout\",decided_by=\"on_store_error\"", LOG_WARN)                                \
    X(EV_OVERRIDE_KNOWN_FULL, EC_OVERRIDE_MEMORY_FULL, "", LOG_WARN)                               \
    X(EV_INLINE_SERVER, EC_INLINE_RULE_REFUSALS, "cap=\"server\"", LOG_WARN)                       \
    X(EV_INLINE_CONNECTION, EC_INLINE_RULE_REFUSALS, "cap=\"connection\"", LOG_WARN)               \
    X(EV_INLINE_ADDRESS, EC_INLINE_RULE_REFUSALS, "cap=\"address\"", LOG_WARN)                     \
    X(EV_STORE_TIMEOUT, EC_REDIS_FAILURES, "kind=\"timeout\"", LOG_WARN)                           \
    X(EV_STORE_ERROR, EC_REDIS_FAILURES, "kind=\"error\"", LOG_WARN)                               \
    X(EV_STORE_DOWN, EC_REDIS_FAILURES, "kind=\"down\"", LOG_ERROR)                                \
    X(EV_STORE_UP, EC_REDIS_RECONNECTED, "", LOG_INFO)                                             \
    X(EV_SETTLE_DEBT, EC_SETTLE_REFUSED, "reason=\"max_debt\"", LOG_INFO)                          \
    X(EV_RULES_RELOAD_FAILED, EC_RULES_RELOAD_FAILED, "", LOG_ERROR)                               \
    X(EV_STORE_LATE_REFUND, EC_STORE_LATE_CHARGES, "outcome=\"refunded\"", LOG_WARN)               \
    X(EV_STORE_LATE_REFUND_FAILED, EC_STORE_LATE_CHARGES, "outcome=\"refund_failed\"", LOG_ERROR)  \
    X(EV_RELEASE_REFUSED, EC_RELEASES_REFUSED, "", LOG_INFO)                                       \
    X(EV_STORE_UNREPLICATED, EC_STORE_UNREPLICATED, "", LOG_WARN)                                  \
    X(EV_PRIORITY_SHED, EC_PRIORITY_SHED, "", LOG_INFO)

typedef enum event_counter {
#define COUNTER_ENUM(id, name, help) id,
    EVENT_COUNTERS(COUNTER_ENUM)
#undef COUNTER_ENUM
        EVENT_COUNTER_COUNT
} event_counter_t;

typedef enum event_id {
#define EVENT_ENUM(id, counter, labels, level) id,
    EVENTS(EVENT_ENUM)
#undef EVENT_ENUM
        EVENT_COUNT
} event_id_t;

/* Counts one `id` and logs fmt at the event's level, unless a line for `id` was written less
 * than EVENT_LOG_INTERVAL_NS ago (then the line is suppressed and counted for the next). */
void event_note(event_id_t id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Counts `n` occurrences of `id` without a log line (the caller logs, or the count says it).
 */
void event_count(event_id_t id, uint64_t n);

/* Occurrences of `id` since start. */
uint64_t event_total(event_id_t id);

/* Replaces the clock event_note() reads (CLOCK_MONOTONIC, ns), for tests; NULL restores it.
 */
void event_set_clock(int64_t (*now_ns)(void));

/* Appends every event's counter in the Prometheus text format (HELP and TYPE once a name). */
void events_render(buf_t *b);

#endif /* SLUICE_ENGINE_EVENTS_H */
