/*
 * test_notify.c - telling the service manager (engine/notify.h): $NOTIFY_SOCKET read as a path
 * or an abstract name, bad values refused with what is wrong, and the state arriving as one
 * datagram on a socket the test binds, as systemd would.
 */
#define _GNU_SOURCE /* nftw in tmpdir.h */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/notify.h"
#include "tmpdir.h"

static char err[NOTIFY_ERR_MAX];

static void test_address_path(void **unused)
{
    struct sockaddr_un a;
    socklen_t len = 0;
    assert_int_equal(notify_address("/run/systemd/notify", &a, &len, err), 0);
    assert_int_equal(a.sun_family, AF_UNIX);
    assert_string_equal(a.sun_path, "/run/systemd/notify");
    /* the family, the path and its NUL */
    assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 20);
}

static void test_address_abstract(void **unused)
{
    struct sockaddr_un a;
    socklen_t len = 0;
    assert_int_equal(notify_address("@sd-notify/7", &a, &len, err), 0);
    assert_int_equal(a.sun_path[0], '\0');
    assert_memory_equal(a.sun_path + 1, "sd-notify/7", 11);
    /* the family, the NUL in place of '@' and the name, with no terminator */
    assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 12);
}

static void test_address_errors(void **unused)
{
    struct sockaddr_un a;
    socklen_t len;
    assert_int_equal(notify_address("", &a, &len, err), -1);
    assert_string_equal(err, "NOTIFY_SOCKET '' is neither an absolute path nor @name");
    assert_int_equal(notify_address("run/notify", &a, &len, err), -1);
    assert_string_equal(err, "NOTIFY_SOCKET 'run/notify' is neither an absolute path nor @name");
    assert_int_equal(notify_address("@", &a, &len, err), -1);
    assert_string_equal(err, "NOTIFY_SOCKET '@' is neither an absolute path nor @name");

    /* a path fills sun_path with its NUL; an abstract name may fill it all */
    char longest[sizeof a.sun_path + 2];
    memset(longest, 'x', sizeof longest);
    longest[0] = '/';
    longest[sizeof a.sun_path - 1] = '\0';
    assert_int_equal(notify_address(longest, &a, &len, err), 0);
    longest[sizeof a.sun_path - 1] = 'x';
    longest[sizeof a.sun_path] = '\0';
    assert_int_equal(notify_address(longest, &a, &len, err), -1);
    assert_string_equal(err, "NOTIFY_SOCKET is 108 bytes, longer than the 107 a socket address "
                             "holds");
    longest[0] = '@';
    assert_int_equal(notify_address(longest, &a, &len, err), 0);
    longest[sizeof a.sun_path] = 'x';
    longest[sizeof a.sun_path + 1] = '\0';
    assert_int_equal(notify_address(longest, &a, &len, err), -1);
    assert_string_equal(err, "NOTIFY_SOCKET is 109 bytes, longer than the 108 a socket address "
                             "holds");
}

/* A datagram socket bound to name (a path or "@name"), with a receive timeout of 5 s. */
static int bind_listener(const char *name)
{
    struct sockaddr_un a;
    socklen_t len;
    assert_int_equal(notify_address(name, &a, &len, err), 0);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, len), 0);
    struct timeval tv = {.tv_sec = 5};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    return fd;
}

/* Sends state through notify_manager with $NOTIFY_SOCKET = name; checks fd receives it. */
static void expect_sent(int fd, const char *name, const char *state)
{
    setenv("NOTIFY_SOCKET", name, 1);
    assert_int_equal(notify_manager(state, err), 1);
    char got[64];
    ssize_t n = recv(fd, got, sizeof got - 1, 0);
    assert_int_equal(n, (ssize_t)strlen(state));
    got[n] = '\0';
    assert_string_equal(got, state);
}

static void test_manager_path(void **unused)
{
    char path[TMPDIR_MAX + 32];
    tmpdir_file(path, sizeof path, "notify", ".sock");
    int fd = bind_listener(path);
    expect_sent(fd, path, "READY=1");
    expect_sent(fd, path, "STOPPING=1");
    close(fd);
}

static void test_manager_abstract(void **unused)
{
    char name[64];
    snprintf(name, sizeof name, "@sluice-test-notify-%ld", (long)getpid());
    int fd = bind_listener(name);
    expect_sent(fd, name, "READY=1");
    close(fd);
}

static void test_manager_unset_and_errors(void **unused)
{
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(notify_manager("READY=1", err), 0);
    setenv("NOTIFY_SOCKET", "", 1);
    assert_int_equal(notify_manager("READY=1", err), 0);

    setenv("NOTIFY_SOCKET", "relative", 1);
    assert_int_equal(notify_manager("READY=1", err), -1);
    assert_string_equal(err, "NOTIFY_SOCKET 'relative' is neither an absolute path nor @name");

    /* nobody listens there */
    char path[TMPDIR_MAX + 32];
    tmpdir_file(path, sizeof path, "nobody", ".sock");
    setenv("NOTIFY_SOCKET", path, 1);
    assert_int_equal(notify_manager("READY=1", err), -1);
    char want[NOTIFY_ERR_MAX];
    snprintf(want, sizeof want, "sending to NOTIFY_SOCKET %s: No such file or directory", path);
    assert_string_equal(err, want);
    unsetenv("NOTIFY_SOCKET");
}

static int setup(void **unused)
{
    return tmpdir_create("notify");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_path),     cmocka_unit_test(test_address_abstract),
        cmocka_unit_test(test_address_errors),   cmocka_unit_test(test_manager_path),
        cmocka_unit_test(test_manager_abstract), cmocka_unit_test(test_manager_unset_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, tmpdir_remove);
}
