/*
 * uv_glue.c - hiredis's async context on a libuv loop (see uv_glue.h).
 *
 * Our own copy of hiredis's adapters/libuv.h, with the fix hiredis 1.0 made: libuv reports
 * POLLERR (e.g. a refused connect) as status UV_EBADF with the poll stopped, and 0.14.1's
 * adapter ignores a non-zero status, so a failed connect or a reset connection would never be
 * noticed and its callbacks never called. Ours hands the error to hiredis by running the
 * read/write handlers for the events it was waiting for; hiredis then finds the socket error
 * itself.
 */
#include "client/uv_glue.h"

#include <stdlib.h>

typedef struct glue {
    redisAsyncContext *context; /* NULL once hiredis has cleaned up */
    uv_poll_t handle;
    int events; /* UV_READABLE | UV_WRITABLE wanted */
} glue_t;

static void glue_poll(uv_poll_t *handle, int status, int events)
{
    glue_t *p = handle->data;
    int ev = status != 0 ? p->events : events;
    if (p->context != NULL && (ev & UV_READABLE))
        redisAsyncHandleRead(p->context);
    if (p->context != NULL && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(p->context);
}

static void glue_update(glue_t *p, int add, int del)
{
    p->events = (p->events | add) & ~del;
    if (p->events != 0)
        uv_poll_start(&p->handle, p->events, glue_poll);
    else
        uv_poll_stop(&p->handle);
}

static void glue_add_read(void *privdata)
{
    glue_update(privdata, UV_READABLE, 0);
}

static void glue_del_read(void *privdata)
{
    glue_update(privdata, 0, UV_READABLE);
}

static void glue_add_write(void *privdata)
{
    glue_update(privdata, UV_WRITABLE, 0);
}

static void glue_del_write(void *privdata)
{
    glue_update(privdata, 0, UV_WRITABLE);
}

static void glue_closed(uv_handle_t *handle)
{
    free(handle->data);
}

static void glue_cleanup(void *privdata)
{
    glue_t *p = privdata;
    p->context = NULL;
    uv_close((uv_handle_t *)&p->handle, glue_closed);
}

int uv_glue_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    if (ac->ev.data != NULL)
        return REDIS_ERR;
    glue_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return REDIS_ERR;
    if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
        free(p);
        return REDIS_ERR;
    }
    p->handle.data = p;
    p->context = ac;
    ac->ev.addRead = glue_add_read;
    ac->ev.delRead = glue_del_read;
    ac->ev.addWrite = glue_add_write;
    ac->ev.delWrite = glue_del_write;
    ac->ev.cleanup = glue_cleanup;
    ac->ev.data = p;
    return REDIS_OK;
}
