/*
 * minimal_gcra.c - the floor for a Redis module rate limiter, for bench/redis/run.sh: the
 * least a module can do per GCRA decision and still be a correct replicated rate limiter.
 *
 *   MIN.GCRA key max_burst count period_ms [cost]  -> [limited, limit, remaining, retry, reset]
 *
 * It opens the key, reads an 8-byte TAT, does redis-cell's arithmetic in ns, writes the TAT
 * with an absolute expiry and replicates the effect (SET .. PXAT), exactly the Redis-side work
 * sluice.so does, without argument checks beyond the numbers, state validation, other
 * algorithms or error texts. The gap between this and sluice.so is what sluice's own code
 * costs; the gap between this and INCR is what any such module costs.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "module/redismodule.h"

static int64_t parse_i64(RedisModuleString *s, int *ok)
{
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    int64_t v = 0;
    *ok = len > 0 && len < 19;
    for (size_t i = 0; *ok && i < len; i++) {
        *ok = p[i] >= '0' && p[i] <= '9';
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static int min_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 5 && argc != 6) {
        return RedisModule_WrongArity(ctx);
    }
    int ok1, ok2, ok3, ok4 = 1;
    int64_t burst = parse_i64(argv[2], &ok1), count = parse_i64(argv[3], &ok2),
            period_ms = parse_i64(argv[4], &ok3), cost = argc == 6 ? parse_i64(argv[5], &ok4) : 1;
    if (!ok1 || !ok2 || !ok3 || !ok4 || count == 0 || period_ms == 0) {
        return RedisModule_ReplyWithError(ctx, "ERR bad arguments");
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t t = period_ms * 1000000 / count, tau = t * (burst + 1);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    int64_t tat = now;
    size_t len = 0;
    if (type == REDISMODULE_KEYTYPE_STRING) {
        const char *p = RedisModule_StringDMA(key, &len, REDISMODULE_READ);
        if (len == 8) {
            memcpy(&tat, p, 8);
            if (tat < now) {
                tat = now;
            }
        }
    }
    int64_t new_tat = tat + t * cost, allow_at = new_tat - tau;
    int limited = now < allow_at;
    int64_t reply_tat = limited ? tat : new_tat;
    if (!limited && cost > 0) {
        if (len != 8) { /* new, or not ours: an 8-byte string from now on */
            RedisModule_StringTruncate(key, 8);
        }
        char *w = RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
        memcpy(w, &new_tat, 8);
        long long at_ms = (long long)((new_tat + 999999) / 1000000);
        RedisModule_SetAbsExpire(key, at_ms);
        RedisModule_Replicate(ctx, "SET", "sbcl", argv[1], w, (size_t)8, "PXAT", at_ms);
    }
    RedisModule_CloseKey(key);
    int64_t ttl = reply_tat - now, remaining = t > 0 ? (tau - ttl) / t : 0;
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, limited);
    RedisModule_ReplyWithLongLong(ctx, burst + 1);
    RedisModule_ReplyWithLongLong(ctx, remaining < 0 ? 0 : remaining);
    RedisModule_ReplyWithLongLong(ctx, limited ? (allow_at - now) / 1000000000 + 1 : -1);
    RedisModule_ReplyWithLongLong(ctx, ttl / 1000000000 + 1);
    return REDISMODULE_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc)
{
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "mingcra", 1, REDISMODULE_APIVER_1) != REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    return RedisModule_CreateCommand(ctx, "min.gcra", min_gcra, "write deny-oom", 1, 1, 1);
}
