/*
 * uv_glue.h - plugs a hiredis async context into a libuv loop (libsluice-client's async handle
 * and sluiced's Redis request store share it).
 */
#ifndef SLUICE_CLIENT_UV_GLUE_H
#define SLUICE_CLIENT_UV_GLUE_H

#include <hiredis/async.h>
#include <uv.h>

/* Attaches ac to loop: hiredis's read/write interest becomes a uv_poll on its socket, freed
 * when hiredis cleans up. Returns REDIS_OK, or REDIS_ERR with nothing to undo. */
int uv_glue_attach(redisAsyncContext *ac, uv_loop_t *loop);

#endif /* SLUICE_CLIENT_UV_GLUE_H */
