/*
 * redis_replies.h - reply objects for hiredis's reader (redis_replies.c), reused from a pool
 * instead of allocated one by one; redis_client.h's connections use them.
 */
#ifndef SLUICE_STORE_REDIS_REPLIES_H
#define SLUICE_STORE_REDIS_REPLIES_H

#include <hiredis/hiredis.h>

/*
 * Reply objects for hiredis's reader, reused from a free list instead of allocated one by one
 * (with hiredis's own functions a decision's reply, an array of 5 integers, is 7 callocs and 7
 * frees). They are ordinary redisReply trees of every type (read them as usual); the reader
 * frees them through the pool. The client gives its pool to every connection it makes; exposed
 * here for tests. One pool per thread; nothing here is thread-safe.
 */
typedef struct rc_reply_pool rc_reply_pool_t;

/* Returns a new pool, or NULL when out of memory. */
rc_reply_pool_t *rc_reply_pool_create(void);

/* Frees the pool; a reply still alive (a reader freed later) is freed on its own and the pool
 * with the last one. NULL is a no-op. */
void rc_reply_pool_free(rc_reply_pool_t *p);

/* Makes reader r build its replies from p, which must outlive them (it does, see above). Call
 * before r has read anything. */
void rc_reply_pool_attach(rc_reply_pool_t *p, redisReader *r);

#endif /* SLUICE_STORE_REDIS_REPLIES_H */
