/*
 * redis_replies.c - see redis_replies.h: hiredis's reader builds each reply
 * from a per-thread pool of nodes (an array's elements or a string's bytes inside the node when
 * they fit) instead of allocating every object, and frees them back into it.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store/freelist.h"
#include "store/redis_replies.h"

#define RNODE_ELEMS 6   /* array elements a reply node holds (a decision has 5 or 6) */
#define RNODE_STR   64  /* string bytes a reply node holds, NUL included */
#define RNODES_KEEP 256 /* free reply nodes kept per pool */

/* One reply object: an array's elements or a string's bytes inside it when they fit. */
typedef struct rnode {
    redisReply r; /* first: a node is its reply */
    rc_reply_pool_t *pool;
    union {
        redisReply *elems[RNODE_ELEMS];
        char str[RNODE_STR];
    } in;
} rnode_t;

struct rc_reply_pool {
    freelist_t nodes; /* rnode_t to reuse */
    size_t live;      /* nodes in replies not yet freed */
    bool orphaned;    /* rc_reply_pool_free was called: the last live node frees the pool */
};

static rnode_t *rnode_new(const redisReadTask *task, int type)
{
    rc_reply_pool_t *p = task->privdata;
    rnode_t *n = freelist_get(&p->nodes);
    if (n == NULL) {
        return NULL;
    }
    memset(&n->r, 0, sizeof n->r);
    n->r.type = type;
    n->pool = p;
    p->live++;
    return n;
}

static void rnode_put(rnode_t *n)
{
    rc_reply_pool_t *p = n->pool;
    p->live--;
    if (!p->orphaned) {
        freelist_put(&p->nodes, n);
        return;
    }
    free(n);
    if (p->live == 0) {
        free(p);
    }
}

/* n in its parent array, as hiredis's own functions do; returns n. */
static void *rnode_link(const redisReadTask *task, rnode_t *n)
{
    if (task->parent != NULL) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = &n->r;
    }
    return n;
}

static void *reply_string(const redisReadTask *task, char *str, size_t len)
{
    rnode_t *n = rnode_new(task, task->type); /* string, status or error */
    if (n == NULL) {
        return NULL;
    }
    char *buf = len < RNODE_STR ? n->in.str : malloc(len + 1);
    if (buf == NULL) {
        rnode_put(n);
        return NULL;
    }
    memcpy(buf, str, len);
    buf[len] = '\0';
    n->r.str = buf;
    n->r.len = len;
    return rnode_link(task, n);
}

static void *reply_array(const redisReadTask *task, int elements)
{
    rnode_t *n = rnode_new(task, REDIS_REPLY_ARRAY);
    if (n == NULL) {
        return NULL;
    }
    if (elements > 0) {
        size_t count = (size_t)elements;
        redisReply **v = count <= RNODE_ELEMS ? n->in.elems : calloc(count, sizeof *v);
        if (v == NULL) {
            rnode_put(n);
            return NULL;
        }
        if (v == n->in.elems) {
            memset(v, 0, count * sizeof *v); /* a reply cut short frees what was made */
        }
        n->r.element = v;
        n->r.elements = count;
    }
    return rnode_link(task, n);
}

static void *reply_integer(const redisReadTask *task, long long value)
{
    rnode_t *n = rnode_new(task, REDIS_REPLY_INTEGER);
    if (n == NULL) {
        return NULL;
    }
    n->r.integer = value;
    return rnode_link(task, n);
}

static void *reply_nil(const redisReadTask *task)
{
    rnode_t *n = rnode_new(task, REDIS_REPLY_NIL);
    return n != NULL ? rnode_link(task, n) : NULL;
}

static void reply_free(void *obj)
{
    rnode_t *n = obj;
    if (n->r.type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < n->r.elements; i++) {
            if (n->r.element[i] != NULL) {
                reply_free(n->r.element[i]);
            }
        }
        if (n->r.element != n->in.elems) {
            free(n->r.element);
        }
    } else if (n->r.str != NULL && n->r.str != n->in.str) {
        free(n->r.str);
    }
    rnode_put(n);
}

static redisReplyObjectFunctions reply_functions = {
    .createString = reply_string,
    .createArray = reply_array,
    .createInteger = reply_integer,
    .createNil = reply_nil,
    .freeObject = reply_free,
};

rc_reply_pool_t *rc_reply_pool_create(void)
{
    rc_reply_pool_t *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->nodes.size = sizeof(rnode_t);
        p->nodes.keep = RNODES_KEEP;
    }
    return p;
}

void rc_reply_pool_free(rc_reply_pool_t *p)
{
    if (p == NULL) {
        return;
    }
    freelist_clear(&p->nodes);
    p->orphaned = true;
    if (p->live == 0) {
        free(p);
    }
}

void rc_reply_pool_attach(rc_reply_pool_t *p, redisReader *r)
{
    r->fn = &reply_functions;
    r->privdata = p;
}
