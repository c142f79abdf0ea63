/*
 * metrics.h - the server's counters as Prometheus text (GET /metrics).
 */
#ifndef SLUICE_SERVER_METRICS_H
#define SLUICE_SERVER_METRICS_H

#include "proto/buf.h"

struct server;

/* Appends the exposition (text/plain; version=0.0.4) to b. Any thread. */
void metrics_render(struct server *srv, buf_t *b);

#endif /* SLUICE_SERVER_METRICS_H */
