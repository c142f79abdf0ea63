/*
 * common.h - what the blocking (client.c) and non-blocking (async.c) clients share: the default
 * clock, the error setter and the argument vectors of the decision and settle commands.
 */
#ifndef SLUICE_CLIENT_COMMON_H
#define SLUICE_CLIENT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/client.h"

#define COMMON_ARGV_MAX  9  /* SL.ACQUIRE rule key COST n TIMEOUT ms PRIORITY p, the longest */
#define COMMON_INT_CHARS 24 /* an int64 in decimal, sign and NUL included */

/* The default cache clock: CLOCK_MONOTONIC in ns. arg is unused. */
int64_t common_monotonic_ns(void *arg);

/* Sets *err = code and formats the message into errstr (SLC_ERRSTR_MAX bytes). Returns code. */
int common_seterr(int *err, char *errstr, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* True when host is a non-empty string and port a TCP port. */
int common_valid_endpoint(const char *host, int port);

/* The argument vector of a decision command:
 *   SL.ALLOW rule key [PRIORITY p]            (cost 1, peek 0)
 *   SL.ALLOW rule key COST n [PRIORITY p]     (cost != 1, peek 0)
 *   SL.PEEK rule key [PRIORITY p]             (peek 1)
 * PRIORITY when priority is not NULL. argv/lens have COMMON_ARGV_MAX entries; costbuf holds the
 * decimal cost. Returns argc. */
int common_decision_argv(const char *rule, const char *key, int64_t cost, int peek,
                         const char *priority, const char **argv, size_t *lens,
                         char costbuf[COMMON_INT_CHARS]);

/* A request's priority from its options: NULL (none, the rule's lowest) when opts is NULL. */
const char *common_priority(const slc_request_opts_t *opts);

/* The argument vector of a settle (SL.SETTLE's named form):
 *   SL.SETTLE rule key reserved actual            (at_ms < 0)
 *   SL.SETTLE rule key reserved actual AT at_ms   (at_ms >= 0)
 * argv/lens have COMMON_ARGV_MAX entries; nums holds the three decimal numbers. Returns argc. */
int common_settle_argv(const char *rule, const char *key, int64_t reserved, int64_t actual,
                       int64_t at_ms, const char **argv, size_t *lens,
                       char nums[3][COMMON_INT_CHARS]);

/* Checks a settle's numbers: reserved and actual >= 0, at_ms >= 0 or -1 (none). Returns NULL
 * when they are good, else a static message naming what is wrong. */
const char *common_settle_invalid(int64_t reserved, int64_t actual, int64_t at_ms);

/* How sluiced, sluice.so and the Lua scripts begin the error of a release of a hold the key does
 * not hold (the whole text is proto/throttle_args.h's THROTTLE_NO_HOLD after "ERR "). */
#define COMMON_NO_HOLD_PREFIX "ERR no such hold:"

/* True when the error reply text[0..len) is a release's "no such hold" (SLC_ENOHOLD). */
bool common_is_no_hold(const char *text, size_t len);

/* The argument vector of an acquire:
 *   SL.ACQUIRE rule key [COST n] [TIMEOUT ms] [PRIORITY p]
 * (COST when cost != 1, TIMEOUT when timeout_ms > 0, PRIORITY when priority is not NULL).
 * argv/lens have COMMON_ARGV_MAX entries; nums holds the decimal cost and timeout. Returns argc. */
int common_acquire_argv(const char *rule, const char *key, int64_t cost, int64_t timeout_ms,
                        const char *priority, const char **argv, size_t *lens,
                        char nums[2][COMMON_INT_CHARS]);

/* The argument vector of a release:
 *   SL.RELEASE rule key id [LATENCY <us>us] [DROPPED]
 * (LATENCY when opts has a latency, DROPPED when opts says dropped; opts may be NULL). argv/lens
 * have COMMON_ARGV_MAX entries; nums holds the id and the latency. Returns argc. */
int common_release_argv(const char *rule, const char *key, uint64_t hold_id,
                        const slc_release_opts_t *opts, const char **argv, size_t *lens,
                        char nums[2][COMMON_INT_CHARS]);

/* Checks a release's id and options: the id fits in a signed 64-bit integer, as SL.RELEASE reads
 * it (what an acquire returns does); a latency, when given, is 0 .. SLC_LATENCY_MAX_US. Returns
 * NULL when they are good, else a static message. opts may be NULL. */
const char *common_release_invalid(uint64_t hold_id, const slc_release_opts_t *opts);

/* Checks an acquire's numbers: cost >= 0, timeout_ms >= 0 (0: the rule's hold_timeout). Returns
 * NULL when they are good, else a static message naming what is wrong. */
const char *common_acquire_invalid(int64_t cost, int64_t timeout_ms);

#endif /* SLUICE_CLIENT_COMMON_H */
