/*
 * log.h - sluiced's log: one line per event on stderr,
 *   2026-11-22T06:01:02.345Z sluiced[1234] INFO listening on 127.0.0.1:6390 (RESP)
 * Lines below the configured level are dropped. Thread-safe (one write(2) per line).
 */
#ifndef SLUICE_ENGINE_LOG_H
#define SLUICE_ENGINE_LOG_H

/* The levels, most severe first: a line is written when its level <= the configured one. */
typedef enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG } log_level_t;

void log_set_level(log_level_t level);
void log_msg(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* SLUICE_ENGINE_LOG_H */
