/*
 * notify.c - see notify.h. The address is read apart from the send, so that its rules (an
 * absolute path, or '@' for the abstract namespace, whose name is sent after a NUL byte and
 * without a terminator) are tested without a socket.
 */
#include "engine/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int notify_address(const char *value, struct sockaddr_un *addr, socklen_t *len, char *err)
{
    size_t n = strlen(value);
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (n == 0 || (value[0] != '/' && value[0] != '@') || (value[0] == '@' && n == 1)) {
        snprintf(err, NOTIFY_ERR_MAX, "NOTIFY_SOCKET '%.64s' is neither an absolute path nor @name",
                 value);
        return -1;
    }
    /* a path needs room for its terminating NUL; an abstract name's '@' becomes the NUL byte */
    size_t room = sizeof addr->sun_path - (value[0] == '/' ? 1 : 0);
    if (n > room) {
        snprintf(err, NOTIFY_ERR_MAX,
                 "NOTIFY_SOCKET is %zu bytes, longer than the %zu a socket address holds", n, room);
        return -1;
    }
    memcpy(addr->sun_path, value, n);
    if (value[0] == '@') {
        addr->sun_path[0] = '\0';
    }
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (value[0] == '/' ? 1 : 0));
    return 0;
}

int notify_manager(const char *state, char *err)
{
    const char *value = getenv("NOTIFY_SOCKET");
    if (value == NULL || value[0] == '\0') {
        return 0;
    }
    struct sockaddr_un addr;
    socklen_t len;
    if (notify_address(value, &addr, &len, err) != 0) {
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, NOTIFY_ERR_MAX, "socket: %s", strerror(errno));
        return -1;
    }
    size_t n = strlen(state);
    ssize_t sent = sendto(fd, state, n, MSG_NOSIGNAL, (const struct sockaddr *)&addr, len);
    int saved = errno;
    close(fd);
    if (sent != (ssize_t)n) {
        snprintf(err, NOTIFY_ERR_MAX, "sending to NOTIFY_SOCKET %.64s: %s", value,
                 sent < 0 ? strerror(saved) : "short write");
        return -1;
    }
    return 1;
}
