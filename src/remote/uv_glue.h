/*
 * uv_glue.h - plugs a hiredis async context into a libuv loop: the Redis client's (sluiced's
 * Redis request store), which libsluice-client's async handle uses too.
 */
#ifndef SLUICE_STORE_UV_GLUE_H
#define SLUICE_STORE_UV_GLUE_H

#include <hiredis/async.h>
#include <uv.h>

/* Attaches ac to loop: hiredis's read/write interest becomes a uv_poll on its socket, freed
 * when hiredis cleans up. Returns REDIS_OK, or REDIS_ERR with nothing to undo. */
int uv_glue_attach(redisAsyncContext *ac, uv_loop_t *loop);

/*
 * Like uv_glue_attach, for an owner that writes hiredis's queue itself once per loop turn: once
 * connected, a queued command does not make the glue wait for write readiness (arming and
 * disarming it costs epoll_ctl calls every turn); the owner calls uv_glue_flush(), typically
 * from a uv_check, and only a write the socket did not take whole waits for readiness. A
 * command queued where no flush follows in the same turn (after the owner's check) is written
 * at the start of the next turn: an idle handle keeps the loop from sleeping on it.
 */
int uv_glue_attach_batched(redisAsyncContext *ac, uv_loop_t *loop);

/* Writes what hiredis has queued on ac (attached with uv_glue_attach_batched, connected);
 * nothing when the queue is empty or a write already waits for readiness. May free ac (a
 * failed write disconnects it, and hiredis's callbacks run). */
void uv_glue_flush(redisAsyncContext *ac);

#endif /* SLUICE_STORE_UV_GLUE_H */
