/*
 * config_thread.c - the config store's own thread (see config_thread.h).
 *
 * The thread runs a libuv loop of its own: an async handle wakes it for new jobs (and to stop),
 * a timer polls the store's version, another retries an admin job that found the store locked.
 * Jobs move between threads only in lists under a mutex: submitted jobs in the thread's two
 * queues, finished jobs in the inbox of the loop that submitted them.
 */
#include "engine/config_thread.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "sluice/sluice.h"

typedef struct job_queue {
    config_job_t *head, *tail;
} job_queue_t;

struct config_thread {
    uv_loop_t loop;
    uv_thread_t thread;
    uv_async_t wake;        /* new jobs, or the stop */
    uv_async_t poll_now;    /* a poll asked for by a store that pushes its changes */
    uv_timer_t poll_timer;  /* every poll_interval_ns */
    uv_timer_t retry_timer; /* the admin head's next attempt */
    config_store_t *store;
    void (*poll)(void *arg, config_store_t *store);
    void *poll_arg;
    uint64_t poll_ms;
    pthread_mutex_t lock; /* guards admin, lookup, stopping */
    job_queue_t admin;
    job_queue_t lookup;
    bool stopping;
    bool admin_waiting;  /* the admin head returned RETRY: the retry timer runs (thread only) */
    job_queue_t dropped; /* finished jobs whose inbox had detached (thread only, then stop) */
    unsigned ninboxes;
    config_inbox_t *inboxes;
    _Atomic uint64_t busy_since; /* uv_hrtime() when the job or poll running began; 0: idle */
};

/* Runs job (or the poll, job NULL) with the thread marked busy meanwhile. */
static int timed_run(config_thread_t *t, config_job_t *job, bool last)
{
    atomic_store_explicit(&t->busy_since, uv_hrtime(), memory_order_relaxed);
    int rc = 0;
    if (job != NULL) {
        rc = job->run(job, t->store, last);
    } else {
        t->poll(t->poll_arg, t->store);
    }
    atomic_store_explicit(&t->busy_since, 0, memory_order_relaxed);
    return rc;
}

static void queue_push(job_queue_t *q, config_job_t *job)
{
    job->next = NULL;
    if (q->tail != NULL) {
        q->tail->next = job;
    } else {
        q->head = job;
    }
    q->tail = job;
}

static config_job_t *queue_take_all(job_queue_t *q)
{
    config_job_t *all = q->head;
    q->head = q->tail = NULL;
    return all;
}

/* Hands a finished job to its loop (or runs done here for a job with no inbox). */
static void deliver(config_thread_t *t, config_job_t *job)
{
    config_inbox_t *in = job->inbox;
    if (in == NULL) {
        job->done(job);
        return;
    }
    pthread_mutex_lock(&in->lock);
    if (!in->attached) {
        pthread_mutex_unlock(&in->lock);
        queue_push(&t->dropped, job);
        return;
    }
    job->next = NULL;
    if (in->tail != NULL) {
        in->tail->next = job;
    } else {
        in->head = job;
    }
    in->tail = job;
    uv_async_send(&in->async);
    pthread_mutex_unlock(&in->lock);
}

static void run_lookups(config_thread_t *t)
{
    pthread_mutex_lock(&t->lock);
    config_job_t *job = queue_take_all(&t->lookup);
    pthread_mutex_unlock(&t->lock);
    while (job != NULL) {
        config_job_t *next = job->next;
        timed_run(t, job, true);
        deliver(t, job);
        job = next;
    }
}

static void on_retry(uv_timer_t *h);

/* Runs admin jobs in order until the queue is empty or its head must wait for the lock. */
static void run_admin(config_thread_t *t)
{
    while (!t->admin_waiting) {
        pthread_mutex_lock(&t->lock);
        config_job_t *job = t->admin.head;
        bool stopping = t->stopping;
        pthread_mutex_unlock(&t->lock);
        if (job == NULL) {
            return;
        }
        int64_t now_ns = sl_now_ns();
        if (job->first_try_ns == 0) {
            job->first_try_ns = now_ns;
        }
        bool last = stopping || now_ns - job->first_try_ns >= CONFIG_THREAD_WRITE_WAIT_NS;
        if (timed_run(t, job, last) == CONFIG_JOB_RETRY && !last) {
            t->admin_waiting = true;
            uv_timer_start(&t->retry_timer, on_retry, CONFIG_THREAD_RETRY_MS, 0);
            return;
        }
        pthread_mutex_lock(&t->lock);
        t->admin.head = job->next;
        if (t->admin.head == NULL) {
            t->admin.tail = NULL;
        }
        pthread_mutex_unlock(&t->lock);
        deliver(t, job);
        run_lookups(t); /* lookups that came meanwhile do not wait for the rest of the queue */
    }
}

static void on_retry(uv_timer_t *h)
{
    config_thread_t *t = h->data;
    t->admin_waiting = false;
    run_lookups(t);
    run_admin(t);
}

static void on_poll(uv_timer_t *h)
{
    config_thread_t *t = h->data;
    timed_run(t, NULL, false);
}

static void on_poll_now(uv_async_t *h)
{
    config_thread_t *t = h->data;
    pthread_mutex_lock(&t->lock);
    bool stopping = t->stopping;
    pthread_mutex_unlock(&t->lock);
    if (!stopping && t->poll != NULL) {
        timed_run(t, NULL, false);
    }
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

static void on_wake(uv_async_t *h)
{
    config_thread_t *t = h->data;
    run_lookups(t);
    run_admin(t);
    pthread_mutex_lock(&t->lock);
    bool stopping = t->stopping;
    pthread_mutex_unlock(&t->lock);
    if (stopping) {
        /* every job submitted before the stop has run: run_admin gave a waiting write its last
         * try (the retry timer is cancelled with the handles) */
        t->admin_waiting = false;
        run_admin(t);
        run_lookups(t);
        uv_walk(&t->loop, close_handle, NULL);
    }
}

static void thread_main(void *arg)
{
    config_thread_t *t = arg;
    uv_run(&t->loop, UV_RUN_DEFAULT);
}

int config_thread_start(config_store_t *store, unsigned inboxes, int64_t poll_interval_ns,
                        void (*poll)(void *arg, config_store_t *store), void *poll_arg,
                        config_thread_t **out, char *err, size_t err_cap)
{
    config_thread_t *t = calloc(1, sizeof *t);
    config_inbox_t *in = calloc(inboxes ? inboxes : 1, sizeof *in);
    if (t == NULL || in == NULL) {
        free(t);
        free(in);
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    t->store = store;
    t->poll = poll;
    t->poll_arg = poll_arg;
    t->poll_ms =
        poll_interval_ns > 0 ? (uint64_t)((poll_interval_ns + SL_NS_PER_MS - 1) / SL_NS_PER_MS) : 0;
    t->ninboxes = inboxes;
    t->inboxes = in;
    for (unsigned i = 0; i < inboxes; i++) {
        pthread_mutex_init(&in[i].lock, NULL);
    }
    pthread_mutex_init(&t->lock, NULL);
    config_store_set_busy_timeout(store, CONFIG_THREAD_BUSY_MS);
    uv_loop_init(&t->loop);
    uv_async_init(&t->loop, &t->wake, on_wake);
    t->wake.data = t;
    uv_async_init(&t->loop, &t->poll_now, on_poll_now);
    t->poll_now.data = t;
    uv_timer_init(&t->loop, &t->retry_timer);
    t->retry_timer.data = t;
    uv_timer_init(&t->loop, &t->poll_timer);
    t->poll_timer.data = t;
    if (t->poll_ms > 0 && poll != NULL) {
        uv_timer_start(&t->poll_timer, on_poll, t->poll_ms, t->poll_ms);
    }
    if (uv_thread_create(&t->thread, thread_main, t) != 0) {
        snprintf(err, err_cap, "cannot start the config store thread");
        uv_walk(&t->loop, close_handle, NULL);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        uv_loop_close(&t->loop);
        for (unsigned i = 0; i < inboxes; i++) {
            pthread_mutex_destroy(&in[i].lock);
        }
        pthread_mutex_destroy(&t->lock);
        free(in);
        free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void config_thread_stop(config_thread_t *t)
{
    if (t == NULL) {
        return;
    }
    pthread_mutex_lock(&t->lock);
    t->stopping = true;
    pthread_mutex_unlock(&t->lock);
    uv_async_send(&t->wake);
    uv_thread_join(&t->thread);
    uv_loop_close(&t->loop);
    /* every loop has stopped: what they did not take is dropped here */
    for (unsigned i = 0; i < t->ninboxes; i++) {
        config_inbox_t *in = &t->inboxes[i];
        for (config_job_t *job = in->head, *next; job != NULL; job = next) {
            next = job->next;
            queue_push(&t->dropped, job);
        }
        in->head = in->tail = NULL;
        pthread_mutex_destroy(&in->lock);
    }
    for (config_job_t *job = queue_take_all(&t->dropped), *next; job != NULL; job = next) {
        next = job->next;
        job->drop(job);
    }
    pthread_mutex_destroy(&t->lock);
    free(t->inboxes);
    free(t);
}

int64_t config_thread_busy_ns(config_thread_t *t)
{
    if (t == NULL) {
        return 0;
    }
    uint64_t since = atomic_load_explicit(&t->busy_since, memory_order_relaxed);
    uint64_t now = uv_hrtime();
    return since != 0 && now > since ? (int64_t)(now - since) : 0;
}

config_inbox_t *config_thread_inbox(config_thread_t *t, unsigned i)
{
    return t != NULL && i < t->ninboxes ? &t->inboxes[i] : NULL;
}

/* On the loop: every finished job in the inbox gets its done callback, in order. */
static void on_inbox(uv_async_t *h)
{
    config_inbox_t *in = h->data;
    pthread_mutex_lock(&in->lock);
    config_job_t *job = in->head;
    in->head = in->tail = NULL;
    pthread_mutex_unlock(&in->lock);
    while (job != NULL) {
        config_job_t *next = job->next;
        job->done(job);
        job = next;
    }
}

int config_inbox_attach(config_inbox_t *in, uv_loop_t *loop)
{
    if (in == NULL) {
        return 0;
    }
    int rc = uv_async_init(loop, &in->async, on_inbox);
    if (rc != 0) {
        return rc;
    }
    in->async.data = in;
    pthread_mutex_lock(&in->lock);
    in->attached = true;
    pthread_mutex_unlock(&in->lock);
    return 0;
}

void config_inbox_detach(config_inbox_t *in)
{
    if (in == NULL) {
        return;
    }
    pthread_mutex_lock(&in->lock);
    bool was = in->attached;
    in->attached = false;
    pthread_mutex_unlock(&in->lock);
    if (!was) {
        return;
    }
    on_inbox(&in->async); /* what already came is answered while the loop still runs */
    uv_close((uv_handle_t *)&in->async, NULL);
}

void config_thread_poll_now(config_thread_t *t)
{
    pthread_mutex_lock(&t->lock);
    if (!t->stopping) {
        uv_async_send(&t->poll_now); /* under the lock: the handle is closed only after stopping */
    }
    pthread_mutex_unlock(&t->lock);
}

void config_job_submit(config_thread_t *t, config_job_t *job)
{
    job->first_try_ns = 0;
    pthread_mutex_lock(&t->lock);
    queue_push(job->admin ? &t->admin : &t->lookup, job);
    pthread_mutex_unlock(&t->lock);
    uv_async_send(&t->wake);
}
