/*
 * notify.h - telling the service manager what sluiced is doing: systemd's readiness protocol
 * (sd_notify(3)), spoken directly rather than through libsystemd.
 *
 * A manager that starts sluiced as Type=notify sets $NOTIFY_SOCKET to an AF_UNIX datagram
 * socket: an absolute path, or "@name" for a name in the abstract namespace. sluiced sends it
 * "READY=1" once it listens on every port and "STOPPING=1" when a signal stops it. Without
 * $NOTIFY_SOCKET nothing is sent.
 */
#ifndef SLUICE_ENGINE_NOTIFY_H
#define SLUICE_ENGINE_NOTIFY_H

#include <sys/socket.h>
#include <sys/un.h>

#define NOTIFY_ERR_MAX 192 /* bytes of a message from notify_address / notify_manager */

/* Reads value, the text of $NOTIFY_SOCKET, into *addr and *len (the length to give sendto(2)).
 * Returns 0, or -1 with err (NOTIFY_ERR_MAX bytes) saying why: empty, neither an absolute path
 * nor "@name", or longer than a socket address holds. Pure: no I/O. */
int notify_address(const char *value, struct sockaddr_un *addr, socklen_t *len, char *err);

/* Sends state (e.g. "READY=1") as one datagram to the socket $NOTIFY_SOCKET names. Returns 1
 * when it was sent, 0 when $NOTIFY_SOCKET is unset or empty (nothing to do), -1 with err
 * (NOTIFY_ERR_MAX bytes) when the variable is malformed or the send failed. Blocks for at most
 * one local datagram; for the main thread. */
int notify_manager(const char *state, char *err);

#endif /* SLUICE_ENGINE_NOTIFY_H */
