/*
 * client.h - libsluice-client, the C client of sluiced (the sluice rate-limit server).
 *
 * sluiced speaks RESP2, so this is a thin layer over hiredis with three things added:
 *
 *   1. Decisions as a struct. SL.ALLOW / SL.PEEK reply with a five-integer array; the client
 *      decodes it into slc_decision_t (slc_decision_from_reply() is the pure decoder).
 *
 *   2. A local over-limit cache (client-side limiting). A denied decision with
 *      retry_after_ms > 0 is remembered per (rule, key) until now + retry_after_ms; until then a
 *      call for that (rule, key) with the same or a larger cost is answered locally: denied,
 *      from_cache = true, retry_after_ms reduced by the time elapsed (rounded up), no network
 *      round trip. Smaller costs and peeks still go to the server (they may be admissible).
 *      The cache is bounded (slc_set_cache_size()), its time comes from a replaceable
 *      monotonic clock (slc_set_clock()), and it counts its hits (slc_cache_hits()).
 *      slc_reset() forgets the (rule, key), and so does a settle that gives units back. The
 *      cache is per handle: another process, or a server-side reset, can make a cached denial
 *      stale for at most its retry_after.
 *
 *   3. In-flight limits (rules of `algorithm: concurrency`): slc_acquire() takes units as one
 *      hold and returns its id, slc_release() gives that hold back (SLC_ENOHOLD when the key
 *      holds no live hold of that id). slc_acquire_from_reply() is the pure decoder of the
 *      acquire's six-integer reply. Acquires never meet the over-limit cache (a release may
 *      free a slot before a refusal's retry_after); a release forgets the (rule, key).
 *
 *   4. Options, for the calls whose name ends in _ex: a request's priority (a rule with
 *      `priorities` sheds the lower ones first) on a decision, a peek and an acquire
 *      (slc_request_opts_t), and what a release reports to an adaptive limit, the work's latency
 *      and whether it was dropped (slc_release_opts_t). The calls without _ex are the _ex calls
 *      with no options. A request that names a priority never meets the over-limit cache: it is
 *      not answered from it (a refusal of the lowest priority says nothing of a higher one) and
 *      its refusal is not remembered (it holds for that priority only).
 *
 *   5. Retry helpers: exponential backoff with full jitter (slc_backoff_ms()) and
 *      slc_retry_delay_ms(), which prefers the server's retry_after when it knows one.
 *
 * Two flavours of connection:
 *
 *   blocking      slc_client_t: each call sends one command and waits for its reply, with a
 *                 timeout. After an I/O error the next call reconnects (and re-sends AUTH).
 *   non-blocking  slc_async_t: on a libuv loop the caller owns (hiredis async + its libuv
 *                 adapter). Requests are pipelined on one connection and their callbacks run in
 *                 request order. A call that fails immediately returns an error and never calls
 *                 its callback (libuv's convention); a call that is accepted calls its callback
 *                 exactly once, from the loop, never from inside the call (a cache hit too).
 *
 * Errors: functions return SLC_OK (0) or a negative SLC_E* code, and the handle keeps the last
 * error as a code and a message (slc_err(), slc_errstr(), as hiredis's err/errstr). For
 * SLC_ESERVER the message is the server's error reply exactly as sent ("ERR unknown rule 'x'",
 * "NOAUTH Authentication required."). Being denied is not an error: it is a decision with
 * allowed == false.
 *
 * Units: every duration is in milliseconds ("_ms"), except the clock, which is nanoseconds.
 *
 * Threads: a handle is not thread-safe; use one per thread (or lock around it). The retry
 * helpers and the decoders (slc_*_from_reply()) are reentrant.
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SLC_API __attribute__((visibility("default")))
#else
#define SLC_API
#endif

struct redisReply; /* hiredis's reply (<hiredis/hiredis.h>); free with freeReplyObject() */
struct uv_loop_s;  /* libuv's uv_loop_t (<uv.h>) */

#define SLC_DEFAULT_PORT    6390       /* sluiced's RESP port */
#define SLC_ERRSTR_MAX      256        /* slc_errstr() is at most this long, NUL included */
#define SLC_CACHE_DEFAULT   1024       /* over-limit cache entries per handle unless changed */
#define SLC_CACHE_MAX       (1u << 24) /* largest slc_set_cache_size() accepted */
#define SLC_CACHE_PROBE_MAX 8          /* slots a (rule, key) may occupy in the cache (see below) */
#define SLC_LATENCY_MAX_US  INT64_C(3600000000) /* the largest latency a release reports: 1h */

enum slc_error {
    SLC_OK = 0,
    SLC_EIO = -1,       /* cannot connect, connection lost, timeout; the message says which */
    SLC_ESERVER = -2,   /* the server replied with an error; the message is its text */
    SLC_EPROTOCOL = -3, /* the reply does not have the shape the command promises */
    SLC_ENOMEM = -4,    /* allocation failed */
    SLC_EINVAL = -5,    /* bad argument: NULL, negative cost, closed handle, ... */
    SLC_ENOHOLD = -6,   /* a release named no live hold of the key (expired, released before,
                           never made) and changed nothing; the message is the server's text */
};

/* Returns a static description of an SLC_E* code ("unknown error" otherwise). */
SLC_API const char *slc_strerror(int code);

/* One rate-limit decision, as SL.ALLOW / SL.PEEK / SL.SETTLE report it. */
typedef struct slc_decision {
    bool allowed;           /* admitted (maybe after retry_after_ms, see below) */
    int64_t limit;          /* the rule's capacity, units */
    int64_t remaining;      /* units a request could still take at the decision, after it */
    int64_t retry_after_ms; /* denied: wait this long before this cost can be admitted, or -1:
                               never (cost above capacity). Admitted: 0, or with a max_delay
                               rule the delay to wait before proceeding */
    int64_t reset_after_ms; /* until the key is back to a fresh quota */
    bool from_cache;        /* answered by the local over-limit cache, not the server */
} slc_decision_t;

/*
 * Decodes a reply to SL.ALLOW, SL.ALLOWALL, SL.PEEK, SL.SETTLE or SL.THROTTLE: an array of
 * exactly five integers [allowed 1|0, limit, remaining, retry_after_ms, reset_after_ms]. Pure:
 * no I/O, no allocation. Returns SLC_OK with *out filled (from_cache = false); SLC_ESERVER when the
 * reply is an error reply; SLC_EPROTOCOL for any other shape (nil, not an array, wrong element
 * count, a non-integer element, allowed not 0 or 1, limit/remaining/reset_after negative,
 * retry_after < -1). When err is not NULL a one-line reason
 * (the server's text for SLC_ESERVER) is written to err[0..errlen). *out is untouched on error.
 */
SLC_API int slc_decision_from_reply(const struct redisReply *reply, slc_decision_t *out, char *err,
                                    size_t errlen);

/*
 * Decodes a reply to SL.ACQUIRE: an array of exactly six integers, a decision's five (as
 * slc_decision_from_reply() checks them, by the same code) then hold_id: >= 0, and 0 when
 * allowed is 0 (a refusal makes no hold). hold_id is 0 for an admission that made no hold too
 * (cost 0, or a shadow rule letting a refusal through): there is nothing to release. Pure: no
 * I/O, no allocation. Returns SLC_OK with *out (from_cache = false) and *hold_id filled;
 * SLC_ESERVER for an error reply; SLC_EPROTOCOL for any other shape; SLC_EINVAL when an argument
 * is NULL. err as slc_decision_from_reply()'s. *out and *hold_id are untouched on error.
 */
SLC_API int slc_acquire_from_reply(const struct redisReply *reply, slc_decision_t *out,
                                   uint64_t *hold_id, char *err, size_t errlen);

/*
 * Decodes a reply to SL.RELEASE. Pure. Returns SLC_OK for the status OK; SLC_ENOHOLD for the
 * error "ERR no such hold: ..." (the key holds no live hold of that id); SLC_ESERVER for another
 * error reply; SLC_EPROTOCOL for any other reply; SLC_EINVAL for NULL. When err is not NULL, the
 * reason (the server's text for SLC_ENOHOLD and SLC_ESERVER; "" for SLC_OK) goes to
 * err[0..errlen).
 */
SLC_API int slc_release_from_reply(const struct redisReply *reply, char *err, size_t errlen);

/*
 * Options of a decision, a peek or an acquire (slc_allow_ex(), slc_peek_ex(), slc_acquire_ex()
 * and their async forms). Zero-initialise it ({0}) and set what you need; a NULL pointer is no
 * options.
 */
typedef struct slc_request_opts {
    const char *priority; /* one of the rule's `priorities` (PRIORITY p), or NULL: none, the
                             rule's lowest. A rule without priorities refuses one with an error
                             (SLC_ESERVER, "ERR ... priority ..."), as does a name it lacks */
} slc_request_opts_t;

/*
 * Options of a release (slc_release_ex(), slc_async_release_ex()): what the hold's work did, for
 * a rule with an adaptive limit (`adaptive: aimd|vegas`; a fixed limit ignores them).
 * Zero-initialise it ({0}); a NULL pointer is no options.
 */
typedef struct slc_release_opts {
    bool has_latency;   /* latency_us is set (LATENCY) */
    int64_t latency_us; /* the work's latency in microseconds, 0 .. SLC_LATENCY_MAX_US */
    bool dropped;       /* the work was dropped, timed out or failed for load (DROPPED) */
} slc_release_opts_t;

/*
 * A monotonic clock for the over-limit cache: returns now in nanoseconds (any origin, never
 * decreasing). The default reads CLOCK_MONOTONIC; tests substitute a fake one.
 */
typedef int64_t (*slc_clock_fn)(void *arg);

/* ---- blocking ---------------------------------------------------------------------------- */

typedef struct slc_client slc_client_t;

/*
 * Connects to sluiced at host:port (host an IPv4/IPv6 address or a name; port 1..65535) and,
 * when password is not NULL, authenticates with AUTH. timeout_ms (> 0) bounds the connect and
 * then every command's send and receive; 0 means no timeout. The strings are copied.
 *
 * Returns a handle, or NULL only when allocating it failed. As with hiredis, check
 * slc_err(c) before use: SLC_EIO when the connection failed, SLC_ESERVER when AUTH was refused
 * (the message is the server's), SLC_EINVAL for a bad argument. A handle in error may be kept:
 * every call first reconnects it. Free it with slc_free() in every case.
 */
SLC_API slc_client_t *slc_connect(const char *host, int port, const char *password, int timeout_ms);

/* slc_connect as a named user: AUTH user password (sluiced's users are "default", which
 * decides, and "admin", which also changes rules and overrides when sluiced has an admin
 * password). user NULL is slc_connect. */
SLC_API slc_client_t *slc_connect_user(const char *host, int port, const char *user,
                                       const char *password, int timeout_ms);

/* Closes the connection and frees the handle and its cache. NULL is a no-op. */
SLC_API void slc_free(slc_client_t *c);

/* The last error's code (SLC_OK when the last call succeeded) and message ("" when none). The
 * message stays valid until the next call on the handle. */
SLC_API int slc_err(const slc_client_t *c);
SLC_API const char *slc_errstr(const slc_client_t *c);

/*
 * SL.ALLOW rule key [COST cost]: asks whether `cost` units (>= 0; 0 peeks, 1 is the usual
 * request) of (rule, key) may go through now and, if so, consumes them. Returns SLC_OK with
 * *out filled, whether allowed or denied; or an SLC_E* code (slc_errstr() says more) and *out
 * untouched. A cached denial returns SLC_OK with out->from_cache set and sends nothing; a
 * denial of a cost > 0 with retry_after_ms > 0 from the server is remembered. rule and key are
 * NUL-terminated (any bytes but NUL).
 */
SLC_API int slc_allow(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                      slc_decision_t *out);

/* SL.PEEK rule key: the server's decision for the key now, consuming nothing. Always asks the
 * server: never answered from the cache, nor remembered in it. */
SLC_API int slc_peek(slc_client_t *c, const char *rule, const char *key, slc_decision_t *out);

/*
 * slc_allow() and slc_peek() with options (opts NULL: none): SL.ALLOW rule key [COST n]
 * [PRIORITY p], SL.PEEK rule key [PRIORITY p]. The decision is the priority's view: remaining is
 * what a request of that priority could still take. With a priority, never answered from the
 * over-limit cache, nor remembered in it. Returns as slc_allow() does.
 */
SLC_API int slc_allow_ex(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                         const slc_request_opts_t *opts, slc_decision_t *out);
SLC_API int slc_peek_ex(slc_client_t *c, const char *rule, const char *key,
                        const slc_request_opts_t *opts, slc_decision_t *out);

/*
 * SL.SETTLE rule key reserved actual [AT at_ms]: settles a reservation of `reserved` units
 * (what an slc_allow() of that cost admitted) with what it really cost, `actual` units (both
 * >= 0). Less gives the difference back; more charges it, even past the limit, leaving the
 * key in debt (refused, peeks included, until time has paid it back). at_ms is when the
 * reservation was admitted, in ms since the Unix epoch, so that a late settle gives back only
 * what is still counted of it; -1: none (the server takes the reservation as admitted now).
 * Settle each reservation once.
 *
 * Returns SLC_OK with *out the key's decision after the settle, as SL.PEEK reports it
 * (allowed false: the key is in debt or has no room left); or an SLC_E* code (SLC_EINVAL for
 * a negative reserved or actual, or at_ms < -1, before anything is sent) and *out untouched.
 * Never answered from the cache, nor remembered in it; when actual < reserved the cache
 * forgets (rule, key) before sending, so the next slc_allow() asks the server.
 */
SLC_API int slc_settle(slc_client_t *c, const char *rule, const char *key, int64_t reserved,
                       int64_t actual, int64_t at_ms, slc_decision_t *out);

/*
 * SL.ACQUIRE rule key [COST cost] [TIMEOUT timeout_ms] on an in-flight rule (`algorithm:
 * concurrency`): takes `cost` units (>= 0) of (rule, key) as one hold, if they fit beside the
 * units the key's live holds hold. The hold lives timeout_ms (1 .. the rule's hold_timeout; 0:
 * the rule's hold_timeout) unless released before. Returns SLC_OK with *out the decision and
 * *hold_id the id to give slc_release(), whether admitted or not (refused: *hold_id 0 and
 * out->retry_after_ms the time until expiries free enough, or -1: never); or an SLC_E* code
 * (SLC_EINVAL for a negative cost or timeout_ms, before anything is sent; SLC_ESERVER for a rule
 * that is not in-flight, a timeout past hold_timeout, a cost above the limit) and *out, *hold_id
 * untouched. Never answered from the over-limit cache, nor remembered in it: a release may free
 * a slot before a refusal's retry_after.
 */
SLC_API int slc_acquire(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                        int64_t timeout_ms, slc_decision_t *out, uint64_t *hold_id);

/* slc_acquire() with options (opts NULL: none): SL.ACQUIRE ... [PRIORITY p]. Returns as
 * slc_acquire() does. */
SLC_API int slc_acquire_ex(slc_client_t *c, const char *rule, const char *key, int64_t cost,
                           int64_t timeout_ms, const slc_request_opts_t *opts, slc_decision_t *out,
                           uint64_t *hold_id);

/*
 * SL.RELEASE rule key hold_id: gives the hold's units back at once. Returns SLC_OK; SLC_ENOHOLD
 * when the key holds no live hold of that id (it expired, was released before, or was never
 * made; nothing changed, slc_errstr() is the server's text); SLC_EINVAL for a hold_id of 2^63 or
 * more (no acquire gives one), before anything is sent; or another SLC_E* code. Release
 * each hold once. The cache forgets (rule, key) before sending: the freed units may admit what
 * it refused.
 */
SLC_API int slc_release(slc_client_t *c, const char *rule, const char *key, uint64_t hold_id);

/* slc_release() with options (opts NULL: none): SL.RELEASE rule key id [LATENCY <us>us]
 * [DROPPED], the hold's work's latency and fate for an adaptive limit. SLC_EINVAL also for a
 * latency outside 0 .. SLC_LATENCY_MAX_US, before anything is sent. Returns as slc_release(). */
SLC_API int slc_release_ex(slc_client_t *c, const char *rule, const char *key, uint64_t hold_id,
                           const slc_release_opts_t *opts);

/* SL.RESET rule key: the key is back to a fresh quota; the cache forgets it. Returns SLC_OK or
 * an SLC_E* code. */
SLC_API int slc_reset(slc_client_t *c, const char *rule, const char *key);

/*
 * Sends any command (argv[0..argc), each argvlen[i] bytes, or strlen() when argvlen is NULL)
 * and returns its reply in *reply, which the caller frees with freeReplyObject(). An error
 * reply is not returned: it gives SLC_ESERVER with the server's text in slc_errstr() and
 * *reply = NULL. For SL.RULE, SL.OVERRIDE, INFO and the like.
 */
SLC_API int slc_command(slc_client_t *c, int argc, const char **argv, const size_t *argvlen,
                        struct redisReply **reply);

/*
 * Sets the over-limit cache's size in entries (0 disables it; at most SLC_CACHE_MAX), dropping
 * whatever it held. An entry may occupy one of SLC_CACHE_PROBE_MAX slots; when they are all
 * taken by live entries the one that expires first is dropped (with size <= SLC_CACHE_PROBE_MAX
 * that is the earliest expiry of the whole cache). Returns SLC_OK, SLC_EINVAL or SLC_ENOMEM.
 */
SLC_API int slc_set_cache_size(slc_client_t *c, size_t entries);

/* Replaces the cache's clock (NULL restores CLOCK_MONOTONIC), dropping what the cache held. */
SLC_API void slc_set_clock(slc_client_t *c, slc_clock_fn clock, void *arg);

/* Calls answered by the cache since the handle was made. */
SLC_API uint64_t slc_cache_hits(const slc_client_t *c);

/* ---- non-blocking, on a libuv loop ------------------------------------------------------- */

typedef struct slc_async slc_async_t;

/*
 * A request's outcome. status is SLC_OK with *d filled, or an SLC_E* code with d = NULL (the
 * message is in slc_async_errstr() during the callback). arg is what the call was given. The
 * callback may issue further requests and may call slc_async_close().
 */
typedef void (*slc_decision_cb)(slc_async_t *ac, int status, const slc_decision_t *d, void *arg);
typedef void (*slc_done_cb)(slc_async_t *ac, int status, void *arg);

/*
 * Starts connecting to host:port on `loop` (a host name is resolved here, synchronously),
 * which the caller owns and runs. With a password, AUTH is the first request on the
 * connection; if refused, every later request fails with the server's NOAUTH error. Requests
 * may be issued at once; they are sent when the connection is up. There is no connect timeout
 * beyond the operating system's.
 *
 * Returns SLC_OK and *out, or SLC_EINVAL (bad argument), SLC_EIO (e.g. no socket; *out is
 * NULL, no handle to free), SLC_ENOMEM. Close the handle with slc_async_close().
 */
SLC_API int slc_async_connect(struct uv_loop_s *loop, const char *host, int port,
                              const char *password, slc_async_t **out);

/* slc_async_connect as a named user (AUTH user password first); user NULL is slc_async_connect. */
SLC_API int slc_async_connect_user(struct uv_loop_s *loop, const char *host, int port,
                                   const char *user, const char *password, slc_async_t **out);

/*
 * Closes the handle: requests already accepted still complete (their replies are awaited),
 * then the connection is closed and the handle is freed while the loop runs; do not use it
 * after this call. Safe inside a callback. NULL is a no-op.
 */
SLC_API void slc_async_close(slc_async_t *ac);

/* The last error on the handle: code and message (see slc_err()). */
SLC_API int slc_async_err(const slc_async_t *ac);
SLC_API const char *slc_async_errstr(const slc_async_t *ac);

/* slc_allow(), slc_peek(), slc_reset() without waiting: cb(ac, status, ..., arg) is called once
 * from the loop. Return SLC_OK (the callback will be called) or an SLC_E* code (it will not:
 * SLC_EINVAL for a bad argument or a closing handle, SLC_EIO when the connection is gone,
 * SLC_ENOMEM). */
SLC_API int slc_async_allow(slc_async_t *ac, const char *rule, const char *key, int64_t cost,
                            slc_decision_cb cb, void *arg);
SLC_API int slc_async_peek(slc_async_t *ac, const char *rule, const char *key, slc_decision_cb cb,
                           void *arg);
SLC_API int slc_async_reset(slc_async_t *ac, const char *rule, const char *key, slc_done_cb cb,
                            void *arg);

/* slc_async_allow() and slc_async_peek() with options, as slc_allow_ex() and slc_peek_ex(). */
SLC_API int slc_async_allow_ex(slc_async_t *ac, const char *rule, const char *key, int64_t cost,
                               const slc_request_opts_t *opts, slc_decision_cb cb, void *arg);
SLC_API int slc_async_peek_ex(slc_async_t *ac, const char *rule, const char *key,
                              const slc_request_opts_t *opts, slc_decision_cb cb, void *arg);

/* slc_settle() without waiting: cb(ac, status, d, arg) is called once from the loop with the
 * key's decision after the settle; returns as slc_async_allow() does. When actual < reserved
 * the cache forgets (rule, key) when the settle is sent, and again when it is answered (before
 * cb runs): no answer to a request sent before the settle, or while it was on its way, is
 * remembered, since the server may have decided it before the settle ran. */
SLC_API int slc_async_settle(slc_async_t *ac, const char *rule, const char *key, int64_t reserved,
                             int64_t actual, int64_t at_ms, slc_decision_cb cb, void *arg);

/* An acquire's outcome: status and d as slc_decision_cb's, hold_id the hold to release (0: none
 * made, and 0 when status is not SLC_OK). */
typedef void (*slc_acquire_cb)(slc_async_t *ac, int status, const slc_decision_t *d,
                               uint64_t hold_id, void *arg);

/* slc_acquire() without waiting: cb(ac, status, d, hold_id, arg) is called once from the loop;
 * returns as slc_async_allow() does (SLC_EINVAL also for a negative cost or timeout_ms). Never
 * answered from the cache, nor remembered in it. */
SLC_API int slc_async_acquire(slc_async_t *ac, const char *rule, const char *key, int64_t cost,
                              int64_t timeout_ms, slc_acquire_cb cb, void *arg);

/* slc_async_acquire() with options, as slc_acquire_ex(). */
SLC_API int slc_async_acquire_ex(slc_async_t *ac, const char *rule, const char *key, int64_t cost,
                                 int64_t timeout_ms, const slc_request_opts_t *opts,
                                 slc_acquire_cb cb, void *arg);

/* slc_release() without waiting: cb(ac, status, arg) is called once from the loop with SLC_OK,
 * SLC_ENOHOLD (no live hold of that id; slc_async_errstr() is the server's text during cb) or
 * another SLC_E* code; returns as slc_async_allow() does (SLC_EINVAL also for a hold_id of 2^63
 * or more). The cache forgets (rule, key) when the release is sent and again when it is
 * answered, as slc_async_settle() giving units back does. */
SLC_API int slc_async_release(slc_async_t *ac, const char *rule, const char *key, uint64_t hold_id,
                              slc_done_cb cb, void *arg);

/* slc_async_release() with options, as slc_release_ex(). */
SLC_API int slc_async_release_ex(slc_async_t *ac, const char *rule, const char *key,
                                 uint64_t hold_id, const slc_release_opts_t *opts, slc_done_cb cb,
                                 void *arg);

/* The cache of an async handle: as slc_set_cache_size(), slc_set_clock(), slc_cache_hits(). */
SLC_API int slc_async_set_cache_size(slc_async_t *ac, size_t entries);
SLC_API void slc_async_set_clock(slc_async_t *ac, slc_clock_fn clock, void *arg);
SLC_API uint64_t slc_async_cache_hits(const slc_async_t *ac);

/* ---- retrying ---------------------------------------------------------------------------- */

/*
 * Exponential backoff with full jitter (AWS's "Exponential Backoff And Jitter"): a delay drawn
 * uniformly from [0, min(cap_ms, base_ms * 2^attempt)], both ends included. attempt counts from
 * 0; negative base_ms, cap_ms or attempt count as 0. Never overflows: a large attempt just
 * reaches the cap. *rng_state is the generator's state (any value, 0 included, seeds it; it is
 * advanced on every call); the same state gives the same sequence. Returns the delay in ms.
 */
SLC_API int64_t slc_backoff_ms(int attempt, int64_t base_ms, int64_t cap_ms, uint64_t *rng_state);

/*
 * How long to wait before attempt number `attempt` (from 0) of a request that got decision
 * `d` (NULL when the request failed, e.g. SLC_EIO):
 *   - d admitted: its retry_after_ms (0, or a max_delay rule's delay);
 *   - d denied with retry_after_ms > 0: exactly that (the server knows when the cost fits; it
 *     is not capped, as retrying sooner is pointless);
 *   - d denied with retry_after_ms == -1: -1, do not retry (the cost can never be admitted);
 *   - otherwise (d NULL, or a reply without a retry time): slc_backoff_ms(attempt, base_ms,
 *     cap_ms, rng_state).
 */
SLC_API int64_t slc_retry_delay_ms(const slc_decision_t *d, int attempt, int64_t base_ms,
                                   int64_t cap_ms, uint64_t *rng_state);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CLIENT_H */
