/*
 * common.h - what the blocking (client.c) and non-blocking (async.c) clients share: the default
 * clock, the error setter and the argument vectors of the decision commands.
 */
#ifndef SLUICE_CLIENT_COMMON_H
#define SLUICE_CLIENT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "sluice/client.h"

#define COMMON_ARGV_MAX  5  /* SL.ALLOW rule key COST n */
#define COMMON_INT_CHARS 24 /* an int64 in decimal, sign and NUL included */

/* The default cache clock: CLOCK_MONOTONIC in ns. arg is unused. */
int64_t common_monotonic_ns(void *arg);

/* Sets *err = code and formats the message into errstr (SLC_ERRSTR_MAX bytes). Returns code. */
int common_seterr(int *err, char *errstr, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* True when host is a non-empty string and port a TCP port. */
int common_valid_endpoint(const char *host, int port);

/* The argument vector of a decision command:
 *   SL.ALLOW rule key            (cost 1, peek 0)
 *   SL.ALLOW rule key COST n     (cost != 1, peek 0)
 *   SL.PEEK rule key             (peek 1)
 * argv/lens have COMMON_ARGV_MAX entries; costbuf holds the decimal cost. Returns argc. */
int common_decision_argv(const char *rule, const char *key, int64_t cost, int peek,
                         const char **argv, size_t *lens, char costbuf[COMMON_INT_CHARS]);

#endif /* SLUICE_CLIENT_COMMON_H */
