/*
 * config_thread.h - the thread that owns sluiced's config store connection.
 *
 * Everything that touches the config store while sluiced serves runs here, never on an event
 * loop: admin reads and writes (SL.RULE, SL.OVERRIDE, /v1/rules), the lookups of per-key
 * overrides that a loop's cache missed, the poll of the store's version and the reloads it
 * starts. A loop that needs the store submits a job and goes on serving; the job runs on this
 * thread with the store handle, and its `done` callback runs back on the loop that submitted it
 * (through that loop's inbox, a uv_async). SQLite waiting for another process's write lock, a
 * slow disk or a big reload therefore stall no loop.
 *
 * Two queues. Admin jobs run one at a time in the order they were submitted: a write that finds
 * the store locked by another process (CONFIG_JOB_RETRY) is retried every few milliseconds, and
 * the admin jobs behind it wait (a read after a write on one connection sees the write), until
 * CONFIG_THREAD_WRITE_WAIT_NS have passed; then it runs a last time with `last` set and reports
 * the error. Lookup jobs (reads for deciding) never wait behind admin jobs.
 *
 * Without a thread (tests, the fuzz target) the engine runs jobs at once on the caller's thread
 * (engine.h).
 *
 * Shutdown: loops detach their inboxes before they stop; a job that finishes after its loop
 * detached is kept and handed to its `drop` callback when the thread stops (after every loop has
 * stopped), so nothing runs on a loop that is gone and nothing leaks.
 */
#ifndef SLUICE_ENGINE_CONFIG_THREAD_H
#define SLUICE_ENGINE_CONFIG_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "rules/config_store.h"

#define CONFIG_THREAD_WRITE_WAIT_NS INT64_C(5000000000) /* longest a write waits for the lock */
#define CONFIG_THREAD_RETRY_MS      10 /* between attempts of a write that found the lock taken */
#define CONFIG_THREAD_BUSY_MS       20 /* SQLite's own busy wait on this thread's handle */

typedef struct config_thread config_thread_t;
typedef struct config_job config_job_t;
typedef struct config_inbox config_inbox_t;

enum config_job_result {
    CONFIG_JOB_DONE = 0,  /* finished: its done callback runs next */
    CONFIG_JOB_RETRY = 1, /* the store is locked by someone else: run again later (admin only) */
};

/* Runs on the config thread with the store. `last` is true on the last attempt of an admin job
 * that has waited CONFIG_THREAD_WRITE_WAIT_NS: it must not return CONFIG_JOB_RETRY then. */
typedef int (*config_job_run_fn)(config_job_t *job, config_store_t *store, bool last);
/* Runs on the submitting loop (or the config thread, for jobs with no inbox) after run. */
typedef void (*config_job_fn)(config_job_t *job);

/* A job: embed it in your own struct and recover that with containerof. */
struct config_job {
    config_job_run_fn run;
    config_job_fn done;
    config_job_fn drop;    /* instead of done when the inbox's loop has gone; frees the job */
    config_inbox_t *inbox; /* where done runs; NULL: on the config thread */
    bool admin;            /* admin queue (ordered, waits on a locked store) or lookup queue */
    int64_t first_try_ns;  /* set by the thread */
    config_job_t *next;    /* queue link, owned by whoever holds the job */
};

/* A loop's mailbox for finished jobs. Owned by the config thread; a loop attaches to it. */
struct config_inbox {
    uv_async_t async;
    pthread_mutex_t lock;
    config_job_t *head, *tail; /* finished jobs waiting for this loop */
    bool attached;             /* a loop is attached: async is valid */
};

/*
 * Starts the thread with `store` (ownership moves to the thread until config_thread_stop; no
 * other thread may use it meanwhile) and `inboxes` loop inboxes. Every poll_interval_ns it calls
 * poll(poll_arg, store) on the thread (0: never). Returns 0 and *out, or -1 with err.
 */
int config_thread_start(config_store_t *store, unsigned inboxes, int64_t poll_interval_ns,
                        void (*poll)(void *arg, config_store_t *store), void *poll_arg,
                        config_thread_t **out, char *err, size_t err_cap);

/* Runs every job already submitted (a write waiting on a locked store gets its last try), stops
 * the thread, drops the jobs of detached inboxes. No loop may be attached any more. NULL: no-op. */
void config_thread_stop(config_thread_t *t);

/* How long the thread has been running the job or poll it runs now, ns (CLOCK_MONOTONIC); 0
 * when it is idle, and for a NULL thread. Any thread: a loop waiting on a lookup tells a store
 * that answers nothing (the thread stuck on one statement) from a queue that is long. */
int64_t config_thread_busy_ns(config_thread_t *t);

/* Inbox number i (< inboxes), or NULL for a NULL thread. */
config_inbox_t *config_thread_inbox(config_thread_t *t, unsigned i);

/* Attaches inbox to `loop` (on the loop's thread, before its first submit) / detaches it (on
 * the loop's thread, while the loop still runs; its async handle is closed). NULL: no-op. */
int config_inbox_attach(config_inbox_t *in, uv_loop_t *loop);
void config_inbox_detach(config_inbox_t *in);

/* Runs the poll on the config thread as soon as it is free (several calls before it runs make
 * one poll), as well as every poll interval: a store that pushes its changes calls this. Any
 * thread; a no-op once the thread is stopping. */
void config_thread_poll_now(config_thread_t *t);

/* Queues job (run, done, drop, inbox and admin set by the caller). Any thread. */
void config_job_submit(config_thread_t *t, config_job_t *job);

#endif /* SLUICE_ENGINE_CONFIG_THREAD_H */
