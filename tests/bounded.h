/*
 * bounded.h - test helper: runs a call on a thread of its own and waits for it at most a given
 * time, so that a call that deadlocks (or waits on something that never comes) fails its test
 * instead of hanging it. The bound is a failure bound, never a measurement.
 *
 *   bounded_t *b = bounded_start(fn, arg);    fn(arg) starts on a new thread
 *   bounded_wait(b, seconds)                  true once fn returned (the thread is joined and b
 *                                             freed); false if it is still running after
 *                                             `seconds` (b stays valid: wait again, or leave it:
 *                                             the process exits with the thread)
 *   run_bounded(fn, arg, seconds)             both
 */
#ifndef SLUICE_TESTS_BOUNDED_H
#define SLUICE_TESTS_BOUNDED_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct bounded {
    void (*fn)(void *arg);
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    bool done;         /* fn returned */
} bounded_t;

static inline void *bounded_main(void *p)
{
    bounded_t *b = p;
    b->fn(b->arg);
    pthread_mutex_lock(&b->mu);
    b->done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static inline bounded_t *bounded_start(void (*fn)(void *arg), void *arg)
{
    bounded_t *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        fprintf(stderr, "bounded_start: out of memory\n");
        abort();
    }
    b->fn = fn;
    b->arg = arg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&b->mu, NULL);
    if (pthread_create(&b->thread, NULL, bounded_main, b) != 0) {
        fprintf(stderr, "bounded_start: no thread\n");
        abort();
    }
    return b;
}

static inline bool bounded_wait(bounded_t *b, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&b->mu);
    while (!b->done && pthread_cond_timedwait(&b->cv, &b->mu, &until) == 0) {
    }
    bool done = b->done;
    pthread_mutex_unlock(&b->mu);
    if (done) {
        pthread_join(b->thread, NULL);
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        free(b);
    }
    return done;
}

static inline bool run_bounded(void (*fn)(void *arg), void *arg, int seconds)
{
    return bounded_wait(bounded_start(fn, arg), seconds);
}

#endif /* SLUICE_TESTS_BOUNDED_H */
