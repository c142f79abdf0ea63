/*
 * log.h - sluiced's log: one line per event on stderr,
 *   2026-11-22T06:01:02.345Z sluiced[1234] INFO listening on 127.0.0.1:6390 (RESP)
 * Lines below the configured level are dropped. Thread-safe (one write(2) per line).
 */
#ifndef SLUICE_SERVER_LOG_H
#define SLUICE_SERVER_LOG_H

#include "server/config.h"

void log_set_level(log_level_t level);
void log_msg(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* SLUICE_SERVER_LOG_H */
