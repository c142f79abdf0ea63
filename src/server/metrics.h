/*
 * metrics.h - the server's counters as Prometheus text (GET /metrics), and the INFO fields that
 * show the same numbers: each number is one row of one table (metrics.c), which both read.
 */
#ifndef SLUICE_SERVER_METRICS_H
#define SLUICE_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/buf.h"

struct server;

/* The INFO sections the table's rows belong to (METRICS_NONE: /metrics only). */
typedef enum metrics_section {
    METRICS_NONE = 0,
    METRICS_CLIENTS = 1,
    METRICS_STATS = 2,
    METRICS_RULES = 3,
    METRICS_PERSISTENCE = 4,
} metrics_section_t;

/* What one reading of the table keeps: the server, and the rules' totals once counted. */
typedef struct metrics_ctx {
    struct server *srv;
    bool counted;
    size_t rules, inline_rules, keys, bytes;
} metrics_ctx_t;

/* The keys of every rule (INFO keyspace), counted with the rules' other totals. */
size_t metrics_rule_keys(metrics_ctx_t *x);

/* Appends the INFO lines ("field:value\r\n") of section, in the table's order. */
void metrics_info(metrics_ctx_t *x, metrics_section_t section, buf_t *b);

/* Appends the exposition (text/plain; version=0.0.4) to b. Any thread. */
void metrics_render(struct server *srv, buf_t *b);

#endif /* SLUICE_SERVER_METRICS_H */
