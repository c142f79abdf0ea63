/*
 * server.h - sluiced's server: the loops' listeners, start and stop (server.c). The loops and
 * connections themselves are loop.h's.
 */
#ifndef SLUICE_SERVER_SERVER_H
#define SLUICE_SERVER_SERVER_H

#include <signal.h>
#include <stddef.h>

#include "server/loop.h"
#include "server/protocol.h"

/* What a release answers (SL.RELEASE's error, /v1/release's 503 problem) when the request store
 * did not confirm it (unreachable, or no reply within --store-timeout): the hold may still be
 * held, until the store runs the release late or the hold expires, so the caller sends it again
 * (a hold freed meanwhile then answers "no such hold"). */
#define SERVER_RELEASE_UNCONFIRMED                                                                 \
    "the request store did not confirm the release (unreachable, or past --store-timeout): the "   \
    "hold may still be held until it expires; send the release again"

/* Adds a listener: every bind address listens on port for proto (before server_start), in TLS
 * when tls (srv->tls must then be set). Returns 0, or -1 when SERVER_PROTOCOLS_MAX are already
 * set. */
int server_listen(server_t *srv, const protocol_t *proto, int port, bool tls);

/* Binds every listener of every loop (so a port in use fails start-up, not a thread), then
 * starts the loop threads. Returns 0 or -1 with err. */
int server_start(server_t *srv, char *err, size_t err_cap);

/* Stops accepting, lets every connection finish what it read and write its replies, closes
 * them, joins the threads. */
void server_stop(server_t *srv);

/* The signals sluiced stops (SIGTERM, SIGINT) or reloads (SIGHUP) on, into *set. They are the
 * main thread's alone: the loop threads block them (and so libuv's thread pool, which they
 * start), so the kernel never hands one to a thread that could take its default action while
 * the main thread stops (main.c). */
void server_signals(sigset_t *set);

#endif /* SLUICE_SERVER_SERVER_H */
