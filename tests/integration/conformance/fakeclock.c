/*
 * fakeclock.c - a clock the store conformance test (test_store_conformance.sh) sets for every
 * process it starts at once: preloaded (LD_PRELOAD) into sluiced and redis-server, it answers
 * the wall clock (CLOCK_REALTIME and its coarse variant, gettimeofday, time) from a file of 8
 * bytes, the time in ns since the Unix epoch (little-endian int64), mapped shared, so a write to
 * the file moves every process's clock at once; between writes the clock stands still. Every other
 * clock (CLOCK_MONOTONIC, which event loops and timeouts use) is the kernel's.
 *
 * Why not libfaketime: Debian's redis-server is built with jemalloc, which reads the clock
 * while libfaketime initialises and the two recurse until libfaketime gives up (its known
 * clash with jemalloc). This file allocates nothing and looks no symbol up: the real clocks are
 * system calls.
 *
 * The file is named by SLUICE_FAKECLOCK; without it (or if it cannot be mapped) the wall clock is
 * the kernel's. Built by the test with `cc -shared -fPIC`; not part of any product.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static _Atomic(const volatile int64_t *) fake_ns; /* the mapped file, or NULL */
static atomic_int fake_state;                     /* 0 not tried, 1 mapped, 2 none */

static const volatile int64_t *fake_map(void)
{
    int st = atomic_load(&fake_state);
    if (st == 1)
        return atomic_load(&fake_ns);
    if (st == 2)
        return NULL;
    const char *path = getenv("SLUICE_FAKECLOCK");
    int fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    void *p = fd >= 0 ? mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (p == MAP_FAILED) {
        atomic_store(&fake_state, 2);
        return NULL;
    }
    atomic_store(&fake_ns, (const volatile int64_t *)p); /* a racing first call maps twice */
    atomic_store(&fake_state, 1);
    return p;
}

/* The file's time; two equal reads in a row (a write in progress is read again). */
static int fake_now(struct timespec *ts)
{
    const volatile int64_t *p = fake_map();
    if (p == NULL)
        return -1;
    int64_t a = *p, b = *p;
    for (int i = 0; i < 1000 && a != b; i++) {
        a = b;
        b = *p;
    }
    ts->tv_sec = a / 1000000000;
    ts->tv_nsec = a % 1000000000;
    return 0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if ((id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) && fake_now(ts) == 0)
        return 0;
    return (int)syscall(SYS_clock_gettime, id, ts);
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    if (fake_now(&ts) != 0)
        return (int)syscall(SYS_gettimeofday, tv, tz);
    tv->tv_sec = ts.tv_sec; /* (glibc declares tv nonnull) */
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    if (fake_now(&ts) != 0)
        syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    if (out != NULL)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
