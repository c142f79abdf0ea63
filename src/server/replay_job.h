/*
 * replay_job.h - one POST /v1/replay from its body to its answer, on a budget: the JSON body
 * (a candidate rule, the log's time unit, the log) read, the log replayed on a key table of its
 * own with the code of `sluice replay` (proto/replay.h), and the answer written. No connection,
 * no loop, no global state: sluiced runs it on libuv's thread pool (http_replay.c), the fuzz
 * target and the tests call it as it is.
 *
 * Bounds. A replay stops early, and its answer says so ("complete":false, "stopped":WHY and
 * "lines_replayed":N, the counts being those of the log's first N lines), when
 *   - deadline  lim->clock_ns() reached lim->deadline_ns (looked at before each line);
 *   - memory    its key table and its tallies would hold more than lim->memory_max bytes
 *               together (the table is made with that cap; the tallies ask before they grow);
 *   - shutdown  *lim->stop was set (looked at before each line).
 * One line is one decision, so the deadline can be passed by one line's work (a sliding_log
 * charge of 2^20 units writes 8 MB of stamps) and the budget by one line's growth of the table.
 * The body itself (parsed by jansson) and the answer (at most REPLAY_KEYS_OUT keys and
 * REPLAY_BUCKETS buckets) are bounded by the request size, not by the budget.
 */
#ifndef SLUICE_SERVER_REPLAY_JOB_H
#define SLUICE_SERVER_REPLAY_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"
#include "sluice/sluice.h"

#define REPLAY_JOB_ERR_MAX 512  /* an answer's error text, bytes with the NUL */
#define REPLAY_KEYS_OUT    1000 /* keys listed in an answer, most rejected first */
#define REPLAY_BUCKETS     120  /* most buckets of an answer's series */

/* Why a replay ended. */
typedef enum replay_stop {
    REPLAY_COMPLETE,      /* every line of the log was replayed */
    REPLAY_STOP_DEADLINE, /* lim->deadline_ns */
    REPLAY_STOP_MEMORY,   /* lim->memory_max, or an allocation failed */
    REPLAY_STOP_SHUTDOWN, /* *lim->stop */
} replay_stop_t;

/* What one replay may take. */
typedef struct replay_limits {
    int64_t deadline_ns;       /* on clock_ns's clock: no line is begun at or after it */
    size_t memory_max;         /* bytes its table and tallies may hold together */
    int64_t (*clock_ns)(void); /* a monotonic clock, ns (sluiced: uv_hrtime) */
    const _Atomic bool *stop;  /* set: stop before the next line; NULL: never */
    sl_budget_t *budget;       /* what it holds counts against this too (--max-memory); NULL */
    int64_t line_pause_ns;     /* tests only: a sleep before each line (0: none), so that a
                                  replay lasts as long as a test needs it to */
} replay_limits_t;

/* What a replay answered. Free with replay_job_answer_free(). */
typedef struct replay_answer {
    int status;                   /* 200: body; 400: err says what in the body is wrong; 503:
                                     out of memory for the answer itself */
    buf_t body;                   /* 200: the JSON answer (application/json) */
    char err[REPLAY_JOB_ERR_MAX]; /* 400, 503: one line, for a problem's detail */
    replay_stop_t stopped;        /* 200: why it ended */
    size_t lines;                 /* 200: lines of the log replayed (blank ones too) */
    size_t peak_bytes;            /* the most its table and tallies held together, as counted */
} replay_answer_t;

/*
 * Replays the request body body[0..len) (need not be NUL-terminated) within lim into *out
 * (overwritten). The body: {"algorithm","limit","window"[,"burst"][,"buckets"][,"max_delay"]
 * [,"unit":"ns"|"us"|"ms"|"s"],"log":"TIME KEY [COST] lines"}. The answer (status 200):
 *   {"complete":B[,"stopped":"deadline"|"memory"|"shutdown"],"lines_replayed":N,"admitted":N,
 *    "rejected":N,"keys":[{"key":..[,"key_hex":..],"admitted":N,"rejected":N}],
 *    "series":[{"t":TIME,"admitted":N,"rejected":N}]}
 * keys most rejected first, then most admitted, then by their bytes; series in equal buckets over
 * the log's span, each named by its first TIME, up to the last bucket replayed. A malformed line is
 * a 400 naming it, found before anything is decided (unless the replay stops first). Thread-safe:
 * any number may run at once.
 */
void replay_job_run(const char *body, size_t len, const replay_limits_t *lim, replay_answer_t *out);

/* Frees what the answer holds (not a itself). */
void replay_job_answer_free(replay_answer_t *a);

/* "deadline", "memory", "shutdown"; NULL for REPLAY_COMPLETE. */
const char *replay_job_stop_name(replay_stop_t s);

#endif /* SLUICE_SERVER_REPLAY_JOB_H */
