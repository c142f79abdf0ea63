/*
 * grpc_front.h - sluiced's gRPC front end: the protocol the gRPC port speaks (grpc_protocol,
 * given to its listener by main.c): Envoy's rate limit service and the health check over h2c.
 */
#ifndef SLUICE_SERVER_GRPC_FRONT_H
#define SLUICE_SERVER_GRPC_FRONT_H

#include "server/server.h"

/* HTTP/2 (nghttp2) with prior knowledge; calls answered through the engine. */
extern const protocol_t grpc_protocol;

#endif /* SLUICE_SERVER_GRPC_FRONT_H */
