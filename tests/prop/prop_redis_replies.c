/*
 * prop_redis_replies.c - seeded property tests of the Redis store's reply objects
 * (rc_reply_pool_t in src/store/redis_client.c): hiredis's reader building its replies from the
 * pool gives the same trees as with hiredis's own functions, for every reply type the store and
 * the cluster client see, and nothing leaks or is freed twice (run under ASan).
 *
 * Each case writes a random sequence of replies as Redis sends them: integers (negative, 0,
 * 19 digits), nil bulk strings and nil arrays, status and error lines (MOVED / ASK / NOSCRIPT
 * among them), bulk strings of 0 to 300 bytes (around the node's inline size, binary bytes
 * included), arrays of 0 to 12 elements nested up to 4 deep (a decision's 5 or 6 integers, a
 * CLUSTER SLOTS-like shape). Two readers are fed the same bytes in random chunk sizes, one with
 * hiredis's functions and one with the pool; every reply must compare equal. Then, so a pool's
 * objects are reused across replies and across readers:
 *
 *   equal      the pooled tree equals hiredis's (type, integer, length, bytes, elements)
 *   partial    a reader freed in the middle of a reply (a connection lost) frees the part made
 *   error      a protocol error in the middle of an array frees the part made
 *   orphan     the pool freed while a reply is still alive: the reply is freed later, alone
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 3000). Exit status 0 when every
 * property held.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include "prop/gen.h"
#include "store/redis_client.h"

#define MAX_DEPTH   4
#define OUT_MAX     (1 << 20)
#define REPLIES_MAX 40

typedef struct out {
    char *buf;
    size_t len;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->len + n <= OUT_MAX) {
        memcpy(o->buf + o->len, s, n);
    }
    o->len += n;
}

static void put_line(out_t *o, char type, const char *text)
{
    char line[128];
    int n = snprintf(line, sizeof line, "%c%s\r\n", type, text);
    put(o, line, (size_t)n);
}

static void put_int_line(out_t *o, char type, long long v)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    put_line(o, type, text);
}

static const char *const lines[] = {
    "OK",
    "QUEUED",
    "MOVED 3999 127.0.0.1:30002",
    "ASK 3999 127.0.0.1:30003",
    "NOSCRIPT No matching script. Please use EVAL.",
    ("ERR wrong number of arguments for 'sl.throttle' command, and a message long enough not to "
     "fit inline"),
    "CLUSTERDOWN The cluster is down",
};

static void gen_reply(prng_t *r, out_t *o, int depth)
{
    int kind = (int)prng_range(r, 0, depth < MAX_DEPTH ? 7 : 5);
    switch (kind) {
    case 0: {
        long long v = prng_chance(r, 20) ? (long long)prng_next(r) : prng_range(r, -1, 100000);
        put_int_line(o, ':', v);
        break;
    }
    case 1:
        put_line(o, prng_chance(r, 50) ? '$' : '*', "-1"); /* nil */
        break;
    case 2:
        put_line(o, '+', lines[prng_range(r, 0, 1)]);
        break;
    case 3:
        put_line(o, '-', lines[prng_range(r, 2, 6)]);
        break;
    case 4:
    case 5: {
        size_t n = (size_t)(prng_chance(r, 50) ? prng_range(r, 0, 70) : prng_range(r, 0, 300));
        char bytes[300];
        for (size_t i = 0; i < n; i++) {
            bytes[i] = (char)prng_range(r, 0, 255); /* \r, \n and \0 included */
        }
        put_int_line(o, '$', (long long)n);
        put(o, bytes, n);
        put(o, "\r\n", 2);
        break;
    }
    default: {
        int n = (int)(prng_chance(r, 40) ? prng_range(r, 5, 6) : prng_range(r, 0, 12));
        put_int_line(o, '*', n);
        for (int i = 0; i < n; i++) {
            gen_reply(r, o, depth + 1);
        }
        break;
    }
    }
}

static bool same(const redisReply *a, const redisReply *b)
{
    if (a->type != b->type) {
        return false;
    }
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_NIL:
        return true;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) {
            return false;
        }
        for (size_t i = 0; i < a->elements; i++) {
            if (!same(a->element[i], b->element[i])) {
                return false;
            }
        }
        return true;
    default: /* string, status, error: bytes and a NUL after them */
        return a->len == b->len && memcmp(a->str, b->str, a->len) == 0 && b->str[b->len] == '\0';
    }
}

/* Feeds o to both readers in random chunks, comparing every reply. Returns the replies read,
 * or -1 when one differed or a reader failed. */
static int compare_all(prng_t *r, const out_t *o, redisReader *plain, redisReader *pooled)
{
    int count = 0;
    size_t at = 0;
    while (at < o->len) {
        size_t n = (size_t)prng_range(r, 1, 200);
        if (n > o->len - at) {
            n = o->len - at;
        }
        if (redisReaderFeed(plain, o->buf + at, n) != REDIS_OK ||
            redisReaderFeed(pooled, o->buf + at, n) != REDIS_OK) {
            return -1;
        }
        at += n;
        for (;;) {
            void *a = NULL, *b = NULL;
            if (redisReaderGetReply(plain, &a) != REDIS_OK ||
                redisReaderGetReply(pooled, &b) != REDIS_OK) {
                return -1;
            }
            if ((a == NULL) != (b == NULL)) {
                return -1;
            }
            if (a == NULL) {
                break;
            }
            bool ok = same(a, b);
            freeReplyObject(a);
            pooled->fn->freeObject(b);
            if (!ok) {
                return -1;
            }
            count++;
        }
    }
    return count;
}

static redisReader *pooled_reader(rc_reply_pool_t *pool)
{
    redisReader *r = redisReaderCreate();
    if (r != NULL) {
        rc_reply_pool_attach(pool, r);
    }
    return r;
}

enum { P_EQUAL, P_PARTIAL, P_ERROR, P_ORPHAN, P_COUNT };
static const char *const names[P_COUNT] = {"equal", "partial", "error", "orphan"};

static int run_case(uint64_t seed, long idx, rc_reply_pool_t *pool, out_t *o)
{
    prng_t r = prop_case_prng(seed, 0, idx);
    o->len = 0;
    int n = (int)prng_range(&r, 1, REPLIES_MAX);
    for (int i = 0; i < n; i++) {
        gen_reply(&r, o, 0);
    }
    if (o->len > OUT_MAX) {
        return -1; /* cannot happen with these sizes */
    }
    redisReader *plain = redisReaderCreate();
    redisReader *pooled = pooled_reader(pool);
    int got = compare_all(&r, o, plain, pooled);
    redisReaderFree(plain);
    redisReaderFree(pooled);
    if (got != n) {
        return P_EQUAL;
    }

    /* partial: the bytes up to somewhere inside a long array, then the reader goes */
    o->len = 0;
    put_line(o, '*', "8");
    for (int i = 0; i < 8; i++) {
        gen_reply(&r, o, 1);
    }
    pooled = pooled_reader(pool);
    size_t cut = (size_t)prng_range(&r, 1, (int64_t)o->len - 1);
    void *reply = NULL;
    if (redisReaderFeed(pooled, o->buf, cut) != REDIS_OK ||
        redisReaderGetReply(pooled, &reply) != REDIS_OK || reply != NULL) {
        redisReaderFree(pooled);
        return P_PARTIAL;
    }
    redisReaderFree(pooled); /* frees the part made (ASan: no leak) */

    /* error: a byte that starts no reply type, inside an array */
    o->len = 0;
    put_line(o, '*', "3");
    put_int_line(o, ':', 1);
    gen_reply(&r, o, 1);
    put_line(o, '?', "bad");
    pooled = pooled_reader(pool);
    if (redisReaderFeed(pooled, o->buf, o->len) != REDIS_OK ||
        redisReaderGetReply(pooled, &reply) != REDIS_ERR) {
        redisReaderFree(pooled);
        return P_ERROR;
    }
    redisReaderFree(pooled);
    return -1;
}

/* orphan: a pool freed while one of its replies is alive */
static bool orphan_case(void)
{
    rc_reply_pool_t *pool = rc_reply_pool_create();
    redisReader *r = pool != NULL ? pooled_reader(pool) : NULL;
    if (r == NULL) {
        return false;
    }
    const char bytes[] = "*2\r\n:1\r\n$3\r\nabc\r\n*6\r\n:1\r\n:2\r\n";
    void *reply = NULL, *partial = NULL;
    bool ok = redisReaderFeed(r, bytes, sizeof bytes - 1) == REDIS_OK &&
              redisReaderGetReply(r, &reply) == REDIS_OK && reply != NULL &&
              redisReaderGetReply(r, &partial) == REDIS_OK && partial == NULL;
    rc_reply_pool_free(pool); /* one whole reply and a partial one still alive */
    if (ok) {
        redisReply *rep = reply;
        ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[1]->len == 3 &&
             strcmp(rep->element[1]->str, "abc") == 0;
        r->fn->freeObject(reply);
    }
    redisReaderFree(r); /* the partial one: the pool goes with it (ASan: no leak) */
    return ok;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 3000);
    printf("prop_redis_replies: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases\n", seed,
           cases);
    out_t o = {.buf = malloc(OUT_MAX)};
    rc_reply_pool_t *pool = rc_reply_pool_create(); /* one pool for every case: reuse */
    if (o.buf == NULL || pool == NULL) {
        printf("FAIL: out of memory\n");
        return 1;
    }
    long failed[P_COUNT] = {0};
    for (long idx = 0; idx < cases; idx++) {
        int p = run_case(seed, idx, pool, &o);
        if (p >= 0) {
            if (failed[p]++ == 0) {
                printf("FAIL [%s] case %ld\n", names[p], idx);
            }
        }
    }
    if (!orphan_case()) {
        failed[P_ORPHAN]++;
        printf("FAIL [orphan]\n");
    }
    rc_reply_pool_free(pool);
    free(o.buf);
    long total = 0;
    for (int p = 0; p < P_COUNT; p++) {
        printf("  %-8s %s (%ld failures)\n", names[p], failed[p] == 0 ? "held" : "FAILED",
               failed[p]);
        total += failed[p];
    }
    return total == 0 ? 0 : 1;
}
