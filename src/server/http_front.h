/*
 * http_front.h - sluiced's HTTP front end: the protocol the HTTP port speaks (http_protocol,
 * given to its listener by main.c), and the one-request entry point the fuzz target drives
 * without sockets. The routes live in http_routes.c, http_decide.c and http_rules.c.
 */
#ifndef SLUICE_SERVER_HTTP_FRONT_H
#define SLUICE_SERVER_HTTP_FRONT_H

#include "proto/http.h"
#include "server/server.h"

/* HTTP/1.1: requests parsed by http_parse_more(), answered by the routes. */
extern const protocol_t http_protocol;

/* One parsed request, answered into c->out (or a slot of its own while replies are deferred).
 * The caller has called engine_worker_begin() and set c->loop->now_ns. */
void http_handle(conn_t *c, http_request_t *req);

#endif /* SLUICE_SERVER_HTTP_FRONT_H */
