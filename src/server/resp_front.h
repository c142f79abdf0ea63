/*
 * resp_front.h - sluiced's RESP front end: the protocol the RESP port speaks (resp_protocol,
 * given to its listener by main.c), and the one-request entry point the fuzz target drives
 * without sockets. The commands live in resp_*.c, their table in resp_table.c.
 */
#ifndef SLUICE_SERVER_RESP_FRONT_H
#define SLUICE_SERVER_RESP_FRONT_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/resp.h"
#include "server/server.h"

/* The RESP2 protocol: requests parsed by resp_parse(), answered by the command table. */
extern const protocol_t resp_protocol;

/* One parsed request, answered into c->out (or a slot of its own while replies are deferred).
 * The caller has called engine_worker_begin() and set c->loop->now_ns. */
void resp_dispatch(conn_t *c, resp_arg_t *argv, size_t argc);

/* True for commands that change rules or overrides (SL.RULE, SL.OVERRIDE, SL.RESET). */
bool resp_command_is_admin(const resp_arg_t *name);

#endif /* SLUICE_SERVER_RESP_FRONT_H */
