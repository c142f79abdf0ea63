/*
 * uv_glue.c - hiredis's async context on a libuv loop (see uv_glue.h).
 *
 * Our own copy of hiredis's adapters/libuv.h, with the fix hiredis 1.0 made: libuv reports
 * POLLERR (e.g. a refused connect) as status UV_EBADF with the poll stopped, and 0.14.1's
 * adapter ignores a non-zero status, so a failed connect or a reset connection would never be
 * noticed and its callbacks never called. Ours hands the error to hiredis by running the
 * read/write handlers for the events it was waiting for; hiredis then finds the socket error
 * itself.
 *
 * Two more differences: uv_poll_start is called only when the events wanted change (libuv
 * removes the fd from epoll and adds it back on every call, even with the same events, and
 * hiredis asks for write readiness on every command), and the batched mode, where the owner
 * writes the queue once per loop turn (uv_glue_flush) instead of waiting for readiness.
 *
 * Derived from hiredis's adapters/libuv.h, which is
 *   Copyright (c) 2009-2011, Salvatore Sanfilippo <antirez at gmail dot com>
 *   Copyright (c) 2010-2011, Pieter Noordhuis <pcnoordhuis at gmail dot com>
 * and used under its BSD 3-clause licence:
 *
 *   Redistribution and use in source and binary forms, with or without modification, are
 *   permitted provided that the following conditions are met:
 *   1. Redistributions of source code must retain the above copyright notice, this list of
 *      conditions and the following disclaimer.
 *   2. Redistributions in binary form must reproduce the above copyright notice, this list of
 *      conditions and the following disclaimer in the documentation and/or other materials
 *      provided with the distribution.
 *   3. Neither the name of Redis nor the names of its contributors may be used to endorse or
 *      promote products derived from this software without specific prior written permission.
 *
 *   THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY EXPRESS
 *   OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF
 *   MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE
 *   COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
 *   EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE
 *   GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND
 *   ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING
 *   NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED
 *   OF THE POSSIBILITY OF SUCH DAMAGE.
 */
#include "remote/uv_glue.h"

#include <stdbool.h>
#include <stdlib.h>

#include <hiredis/sds.h>

typedef struct glue {
    redisAsyncContext *context; /* NULL once hiredis has cleaned up */
    uv_poll_t handle;
    uv_idle_t idle; /* batched: started while a queued command waits for uv_glue_flush */
    int events;     /* UV_READABLE | UV_WRITABLE the poll waits for */
    bool batched;   /* see uv_glue_attach_batched */
    int open;       /* handles not yet closed; the glue is freed when the last one is */
} glue_t;

static void glue_poll(uv_poll_t *handle, int status, int events);

static void glue_update(glue_t *p, int add, int del)
{
    int events = (p->events | add) & ~del;
    if (events == p->events)
        return;
    p->events = events;
    if (events != 0)
        uv_poll_start(&p->handle, events, glue_poll);
    else
        uv_poll_stop(&p->handle);
}

static void glue_poll(uv_poll_t *handle, int status, int events)
{
    glue_t *p = handle->data;
    int ev = events;
    if (status != 0) {
        ev = p->events;
        p->events = 0; /* libuv stopped the poll: whatever hiredis asks next starts it again */
    }
    if (p->context != NULL && (ev & UV_READABLE))
        redisAsyncHandleRead(p->context);
    if (p->context != NULL && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(p->context);
}

static void glue_add_read(void *privdata)
{
    glue_update(privdata, UV_READABLE, 0);
}

static void glue_del_read(void *privdata)
{
    glue_update(privdata, 0, UV_READABLE);
}

static void glue_idle(uv_idle_t *idle)
{
    glue_t *p = idle->data;
    if (p->context != NULL)
        uv_glue_flush(p->context);
    else
        uv_idle_stop(idle);
}

static void glue_add_write(void *privdata)
{
    glue_t *p = privdata;
    if (p->batched && (p->context->c.flags & REDIS_CONNECTED)) {
        /* uv_glue_flush writes it; until then the loop must not sleep */
        if (!uv_is_active((uv_handle_t *)&p->idle))
            uv_idle_start(&p->idle, glue_idle);
        return;
    }
    glue_update(p, UV_WRITABLE, 0);
}

static void glue_del_write(void *privdata)
{
    glue_update(privdata, 0, UV_WRITABLE);
}

static void glue_closed(uv_handle_t *handle)
{
    glue_t *p = handle->data;
    if (--p->open == 0)
        free(p);
}

static void glue_cleanup(void *privdata)
{
    glue_t *p = privdata;
    p->context = NULL;
    uv_close((uv_handle_t *)&p->handle, glue_closed);
    if (p->batched)
        uv_close((uv_handle_t *)&p->idle, glue_closed);
}

static int glue_attach(redisAsyncContext *ac, uv_loop_t *loop, bool batched)
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
    p->open = 1;
    if (batched) {
        uv_idle_init(loop, &p->idle);
        p->idle.data = p;
        p->open = 2;
    }
    p->batched = batched;
    p->context = ac;
    ac->ev.addRead = glue_add_read;
    ac->ev.delRead = glue_del_read;
    ac->ev.addWrite = glue_add_write;
    ac->ev.delWrite = glue_del_write;
    ac->ev.cleanup = glue_cleanup;
    ac->ev.data = p;
    return REDIS_OK;
}

int uv_glue_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    return glue_attach(ac, loop, false);
}

int uv_glue_attach_batched(redisAsyncContext *ac, uv_loop_t *loop)
{
    return glue_attach(ac, loop, true);
}

void uv_glue_flush(redisAsyncContext *ac)
{
    glue_t *p = ac->ev.data;
    if (!p->batched)
        return;
    uv_idle_stop(&p->idle);
    if (!(ac->c.flags & REDIS_CONNECTED) || (p->events & UV_WRITABLE) || ac->c.obuf == NULL ||
        sdslen(ac->c.obuf) == 0)
        return; /* connecting (readiness says when), or a write already waits for it */
    redisAsyncHandleWrite(ac); /* may free ac */
    if (p->context != NULL && sdslen(p->context->c.obuf) > 0)
        glue_update(p, UV_WRITABLE, 0); /* the socket took part: the rest when it can */
}
