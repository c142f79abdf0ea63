/*
 * sluice_module.c - sluice.so, the Redis module: sluice's algorithms as native commands inside
 * redis-server and Redis Cluster. Glue only: arguments, errors and replies come from
 * src/rules/throttle_args.c (shared with sluiced), decisions from the core (src/core/), and
 * this file moves state between a Redis key and sl_decide(). docs/module.md is the user's view.
 *
 *   SL.THROTTLE key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] [COST n]
 *   SL.PEEK     key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *   SL.SETTLE   key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *               RESERVED r ACTUAL a [AT unix_ms]
 *   CL.THROTTLE key max_burst count period_s [quantity]
 *   SL.RESET    key
 *   SL.DEBUG    SETTIME unix_ns          (only when loaded with the argument "testclock")
 *
 * A key's value is a Redis string: a 4-byte header, then the state in its packed form.
 *
 *   byte 0     STATE_MAGIC (0xF5: never the first byte of UTF-8 text or of a decimal number)
 *   byte 1     format (high nibble, value_version(): 1, except sliding_log: 2, or 3 when its
 *              packed form carries a flag of a settle or a refund) | algorithm (low nibble, 1..6)
 *   bytes 2-3  a 16-bit hash of the prepared rule's parameters, little endian
 *   bytes 4..  the state as sl_state_pack() writes it: sl_state_size(rule) bytes, except for
 *              sliding_log, whose packed form holds only the stamps in use (2-3 bytes each)
 *
 * A gcra key is 12 bytes, which Redis stores in the same 32-byte allocation as any value of up
 * to 12 bytes. The clock is read in whole microseconds, like Redis's own TIME, so sliding_log
 * stamps pack as microseconds. A decision that admits a cost writes the state, sets the key's
 * absolute expiry to the moment the state is fresh again, and replicates exactly that: SET key
 * <bytes> PXAT <ms> (or DEL when the state is fresh already). Peeks and rejections write and
 * replicate nothing. A settle writes (and replicates) the same way when it changes the state.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "module/redismodule.h"
#include "rules/throttle_args.h"
#include "sluice/sluice.h"
#include "sluice/version.h"

#define MODULE_NAME    "sluice"
#define MODULE_VERSION (SL_VERSION_MAJOR * 10000 + SL_VERSION_MINOR * 100 + SL_VERSION_PATCH)

#define STATE_MAGIC  0xF5
#define STATE_HEADER 4 /* bytes before the state */

#define ARGS_LOCAL        16   /* arguments converted on the stack; more go to the heap */
#define STATE_LOCAL       2048 /* state (and packed) bytes on the stack; larger go to the heap */
#define PARSE_CACHE_BYTES 96   /* longest argument list (after the key) the parse cache keeps */

#define NS_PER_MS INT64_C(1000000)

#define ERR_NOT_STATE                                                                              \
    "ERR the key holds a string that is not sluice state (DEL it, or use another key)"

/* The test clock: "testclock" at load time enables SL.DEBUG SETTIME. */
static bool test_clock_enabled;
static bool test_clock_set;
static int64_t test_clock_ns;

static int64_t module_now_ns(void)
{
    int64_t now_ns = test_clock_enabled && test_clock_set
                         ? test_clock_ns
                         : sl_now_ns() / 1000 * 1000; /* whole us */
    return now_ns < 0 ? 0 : now_ns > SL_NOW_MAX_NS ? SL_NOW_MAX_NS : now_ns;
}

/* A parsed request and the hash of its rule's parameters (the header's bytes 2-3). */
typedef struct request {
    throttle_req_t t;
    uint16_t hash;
} request_t;

/* ---- the state format ---------------------------------------------------------------------- */

/* FNV-1a over the parameters that decide how a state is read, folded to 16 bits. Fixed: keys
 * written by one build are read by every other (replicas, AOF, a cluster's other nodes). */
static uint16_t params_hash(const sl_rule_t *rule)
{
    int64_t fields[5] = {rule->limit, rule->window_ns, rule->burst, rule->buckets,
                         rule->max_delay_ns};
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t f = 0; f < 5; f++) {
        uint64_t v = (uint64_t)fields[f];
        for (int i = 0; i < 8; i++) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= UINT64_C(0x100000001b3);
        }
    }
    return (uint16_t)(h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48));
}

/* The formats of an algorithm's values: the layout of its state after the header. sliding_log's
 * is 2 (its packed form; 1 was the whole ring of N stamps), or 3 when the packed form carries a
 * flag that only a settle or a refund sets (the oldest stamps dropped by a debt, or the latest
 * time kept apart): a sluice.so that reads only format 2 refuses such a value with the format
 * error instead of calling it corrupt, while sliding_log values without a flag stay readable by
 * it. The others' states never changed layout, so their keys stay readable by every sluice.so (a
 * rolling upgrade, a failover to an older node). */
#define LOG_PACKED_FLAGS 0x30 /* the flag bits of a packed sliding_log's first byte */

static unsigned value_version(unsigned algorithm, const uint8_t *packed)
{
    if (algorithm != SL_SLIDING_LOG) {
        return 1;
    }
    return (packed[0] & LOG_PACKED_FLAGS) != 0 ? 3 : 2;
}

static bool version_read(unsigned algorithm, unsigned version)
{
    return algorithm == SL_SLIDING_LOG ? version == 2 || version == 3 : version == 1;
}

static void header_write(const request_t *req, const uint8_t *packed, uint8_t *out)
{
    unsigned algorithm = (unsigned)req->t.rule.algorithm;
    out[0] = STATE_MAGIC;
    out[1] = (uint8_t)(value_version(algorithm, packed) << 4 | (algorithm & 0x0f));
    out[2] = (uint8_t)(req->hash & 0xff);
    out[3] = (uint8_t)(req->hash >> 8);
}

static bool header_is_ours(const uint8_t *p, size_t len)
{
    return len >= STATE_HEADER && p[0] == STATE_MAGIC;
}

/*
 * Reads a stored value as the state of the rule the request names. Returns NULL when p[0..len)
 * is a state of exactly this rule (its header, and sl_state_unpack() of the rest, which checks
 * it as sl_state_check() does) and has unpacked it into `state` (sl_state_size() bytes), or the
 * error text otherwise (written to err).
 */
static const char *value_read(const request_t *req, const uint8_t *p, size_t len, void *state,
                              char err[THROTTLE_ERR_MAX])
{
    const sl_rule_t *rule = &req->t.rule;
    if (!header_is_ours(p, len)) {
        return ERR_NOT_STATE;
    }
    unsigned version = p[1] >> 4, algorithm = p[1] & 0x0f;
    const char *stored = sl_algorithm_name((sl_algorithm_t)algorithm);
    if (stored == NULL) {
        snprintf(err, THROTTLE_ERR_MAX, "ERR the key holds corrupt sluice state (algorithm %u)",
                 algorithm);
        return err;
    }
    if (!version_read(algorithm, version)) {
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds %s state of format %u, this sluice.so reads %s "
                 "(SL.RESET it, or load a matching sluice.so)",
                 stored, version, algorithm == SL_SLIDING_LOG ? "formats 2 and 3" : "format 1");
        return err;
    }
    if (algorithm != (unsigned)rule->algorithm) {
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds sluice state of another rule (%s, not %s); SL.RESET it or "
                 "use another key",
                 stored, sl_algorithm_name(rule->algorithm));
        return err;
    }
    uint16_t h = (uint16_t)(p[2] | p[3] << 8);
    if (h != req->hash) {
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds sluice state of another rule (%s with other parameters); "
                 "SL.RESET it or use another key",
                 stored);
        return err;
    }
    size_t want = STATE_HEADER + sl_state_size(rule);
    if (rule->algorithm != SL_SLIDING_LOG && len != want) { /* packed as is: a fixed size */
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds corrupt sluice state (%zu bytes, %s needs %zu); SL.RESET it",
                 len, stored, want);
        return err;
    }
    if (sl_state_unpack(rule, p + STATE_HEADER, len - STATE_HEADER, state) != SL_OK ||
        version != value_version(algorithm, p + STATE_HEADER)) {
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds corrupt sluice state (%s state out of range); SL.RESET it",
                 stored);
        return err;
    }
    return NULL;
}

/*
 * The key's absolute expiry, ms: the first ms at which `state` (just written at now_ns) is
 * fresh, so the key vanishes exactly when keeping it would change nothing. That is now +
 * reset_after, rounded up, except when the core decided at a later time than now_ns (a clock
 * that stepped back is clamped to the state's latest time): then the first fresh ns is found by
 * doubling steps and a binary search (freshness never ends once reached), so the key never
 * expires before its state is fresh.
 */
static mstime_t expiry_ms(const sl_rule_t *rule, const void *state, int64_t now_ns,
                          int64_t reset_after_ns)
{
    int64_t at = reset_after_ns > INT64_MAX - now_ns ? INT64_MAX : now_ns + reset_after_ns;
    if (at < SL_NOW_MAX_NS && !sl_state_is_fresh(rule, state, at)) {
        int64_t lo = at, step = NS_PER_MS; /* lo: not fresh */
        for (;;) {
            at = step > SL_NOW_MAX_NS - lo ? SL_NOW_MAX_NS : lo + step;
            if (at == SL_NOW_MAX_NS || sl_state_is_fresh(rule, state, at)) {
                break;
            }
            lo = at;
            step *= 2;
        }
        while (at - lo > 1) { /* lo not fresh, at fresh (or the end of time) */
            int64_t mid = lo + (at - lo) / 2;
            if (sl_state_is_fresh(rule, state, mid)) {
                at = mid;
            } else {
                lo = mid;
            }
        }
    }
    return (mstime_t)sl_ns_to_units_ceil(at, NS_PER_MS);
}

/* ---- commands ------------------------------------------------------------------------------ */

static int reply_int_array(RedisModuleCtx *ctx, const int64_t *v, size_t n)
{
    RedisModule_ReplyWithArray(ctx, (long)n);
    for (size_t i = 0; i < n; i++) {
        RedisModule_ReplyWithLongLong(ctx, (long long)v[i]);
    }
    return REDISMODULE_OK;
}

/*
 * The last request parsed, by the exact bytes of its arguments after the key: a client sending
 * the same rule again and again (the common case) skips parsing, preparing and hashing. Only
 * requests that parsed without error are kept.
 */
typedef struct parse_cache {
    bool valid;
    throttle_cmd_t cmd;
    size_t len;
    uint8_t bytes[PARSE_CACHE_BYTES];
    request_t req;
} parse_cache_t;

static parse_cache_t parse_cache; /* commands run on Redis's main thread only */

/* Writes argv[2..argc) as (1-byte length, bytes) pairs to out; 0 when they do not fit. */
static size_t cache_key(const throttle_arg_t *args, int argc, uint8_t out[PARSE_CACHE_BYTES])
{
    size_t n = 0;
    for (int i = 2; i < argc; i++) {
        if (args[i].len > 255 || n + 1 + args[i].len > PARSE_CACHE_BYTES) {
            return 0;
        }
        out[n++] = (uint8_t)args[i].len;
        memcpy(out + n, args[i].ptr, args[i].len);
        n += args[i].len;
    }
    return n;
}

/* Parses argv with the shared parser. Returns 0, or -1 after replying the error. */
static int parse(RedisModuleCtx *ctx, throttle_cmd_t cmd, RedisModuleString **argv, int argc,
                 request_t *req)
{
    throttle_arg_t local[ARGS_LOCAL];
    throttle_arg_t *args = local;
    if (argc > ARGS_LOCAL) {
        args = RedisModule_Alloc(sizeof(*args) * (size_t)argc);
    }
    for (int i = 0; i < argc; i++) {
        args[i].ptr = RedisModule_StringPtrLen(argv[i], &args[i].len);
    }
    uint8_t key[PARSE_CACHE_BYTES];
    size_t key_len = argc > 2 ? cache_key(args, argc, key) : 0;
    int rc = 0;
    if (key_len > 0 && parse_cache.valid && parse_cache.cmd == cmd && parse_cache.len == key_len &&
        memcmp(parse_cache.bytes, key, key_len) == 0) {
        *req = parse_cache.req;
    } else {
        char err[THROTTLE_ERR_MAX];
        rc = throttle_parse(cmd, args, (size_t)argc, &req->t, err);
        if (rc != 0) {
            RedisModule_ReplyWithError(ctx, err);
        } else {
            req->hash = params_hash(&req->t.rule);
            if (key_len > 0) {
                parse_cache.valid = true;
                parse_cache.cmd = cmd;
                parse_cache.len = key_len;
                memcpy(parse_cache.bytes, key, key_len);
                parse_cache.req = *req;
            }
        }
    }
    if (args != local) {
        RedisModule_Free(args);
    }
    return rc == 0 ? 0 : -1;
}

/*
 * Writes the header and the packed state `packed` (size bytes) as the value of the key, which
 * holds stored_len bytes (0: empty, created here), sets its expiry and replicates the result.
 * Returns NULL, or an error text. A sliding_log that grew or shrank is resized in place
 * (StringTruncate): Redis then keeps room to grow (up to twice the bytes), which measured 20 %
 * more memory per stamp than exact-size strings (RM_StringSet) but 6-17 % less CPU per decision
 * (docs/design.md). The header is written every time: a sliding_log's format follows its flags.
 */
static const char *store_state(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleKey *key,
                               size_t stored_len, const request_t *req, const uint8_t *packed,
                               size_t size, mstime_t expire_ms)
{
    size_t total = STATE_HEADER + size, len = 0;
    if (stored_len != total && RedisModule_StringTruncate(key, total) != REDISMODULE_OK) {
        return "ERR sluice could not write the key";
    }
    char *w = RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
    if (w == NULL || len != total) {
        return "ERR sluice could not write the key";
    }
    header_write(req, packed, (uint8_t *)w);
    memcpy(w + STATE_HEADER, packed, size);
    RedisModule_SetAbsExpire(key, expire_ms);
    RedisModule_Replicate(ctx, "SET", "sbcl", keyname, w, total, "PXAT", (long long)expire_ms);
    RedisModule_SignalModifiedKey(ctx, keyname);
    return NULL;
}

/* A key as read for a command: its type, its value's bytes (stored, stored_len; NULL and 0 when
 * empty) and the state unpacked from them. */
typedef struct key_state {
    RedisModuleKey *key;
    int type;
    const uint8_t *stored;
    size_t stored_len;
    uint8_t *state; /* sl_state_size() bytes: local, or allocated */
    uint8_t local[STATE_LOCAL];
} key_state_t;

/*
 * Opens argv[1] and reads its state under the request's rule. Returns NULL with ks filled (close
 * it with key_close), or the error text (ks closed already; WRONGTYPE, or a value that is not
 * this rule's state, in err).
 */
static const char *key_open(RedisModuleCtx *ctx, RedisModuleString *keyname, const request_t *r,
                            bool may_write, key_state_t *ks, char err[THROTTLE_ERR_MAX])
{
    ks->key = RedisModule_OpenKey(
        ctx, keyname, may_write ? REDISMODULE_READ | REDISMODULE_WRITE : REDISMODULE_READ);
    ks->type = RedisModule_KeyType(ks->key);
    ks->stored = NULL;
    ks->stored_len = 0;
    ks->state = NULL;
    if (ks->type != REDISMODULE_KEYTYPE_EMPTY && ks->type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(ks->key);
        return REDISMODULE_ERRORMSG_WRONGTYPE;
    }
    size_t size = sl_state_size(&r->t.rule);
    ks->state = size <= sizeof(ks->local) ? ks->local : RedisModule_Alloc(size);
    if (ks->type == REDISMODULE_KEYTYPE_EMPTY) {
        memset(ks->state, 0, size);
        return NULL;
    }
    ks->stored = (const uint8_t *)RedisModule_StringDMA(ks->key, &ks->stored_len, REDISMODULE_READ);
    const char *error = value_read(r, ks->stored, ks->stored_len, ks->state, err);
    if (error != NULL) {
        if (ks->state != ks->local) {
            RedisModule_Free(ks->state);
        }
        RedisModule_CloseKey(ks->key);
    }
    return error;
}

static void key_close(key_state_t *ks)
{
    RedisModule_CloseKey(ks->key);
    if (ks->state != ks->local) {
        RedisModule_Free(ks->state);
    }
}

/*
 * Makes the key hold ks->state, written at now_ns with reset_after_ns to go until it is fresh:
 * the packed state with its expiry, unless the value already holds exactly those bytes; a DEL
 * when the state is fresh (nothing, for an empty key). Each write is replicated as its effect.
 * Returns NULL, or an error text.
 */
static const char *key_write(RedisModuleCtx *ctx, RedisModuleString *keyname, key_state_t *ks,
                             const request_t *r, int64_t now_ns, int64_t reset_after_ns)
{
    const sl_rule_t *rule = &r->t.rule;
    if (sl_state_is_fresh(rule, ks->state, now_ns)) {
        if (ks->type != REDISMODULE_KEYTYPE_EMPTY) {
            RedisModule_DeleteKey(ks->key);
            RedisModule_Replicate(ctx, "DEL", "s", keyname);
            RedisModule_SignalModifiedKey(ctx, keyname);
        }
        return NULL;
    }
    size_t max = sl_state_packed_max(rule);
    uint8_t packed_local[STATE_LOCAL];
    uint8_t *packed = max <= sizeof(packed_local) ? packed_local : RedisModule_Alloc(max);
    size_t n = sl_state_pack(rule, ks->state, packed);
    const char *error = NULL;
    uint8_t header[STATE_HEADER];
    header_write(r, packed, header);
    bool same = ks->stored_len == STATE_HEADER + n &&
                memcmp(ks->stored, header, STATE_HEADER) == 0 &&
                memcmp(ks->stored + STATE_HEADER, packed, n) == 0;
    if (!same) { /* the same bytes have the same expiry: it is where the state is fresh */
        mstime_t at = expiry_ms(rule, ks->state, now_ns, reset_after_ns);
        error = store_state(ctx, keyname, ks->key, ks->stored_len, r, packed, n, at);
    }
    if (packed != packed_local) {
        RedisModule_Free(packed);
    }
    return error;
}

/* SL.THROTTLE, SL.PEEK and CL.THROTTLE: one decision on the key argv[1]. */
static int decide_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
                          throttle_cmd_t cmd)
{
    request_t r;
    if (parse(ctx, cmd, argv, argc, &r) != 0) {
        return REDISMODULE_OK;
    }
    const throttle_req_t *req = &r.t;
    int64_t now_ns = module_now_ns();
    key_state_t ks;
    char err[THROTTLE_ERR_MAX];
    const char *error = key_open(ctx, argv[1], &r, req->cost > 0, &ks, err);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    sl_decision_t d;
    if (sl_decide(&req->rule, ks.state, req->cost, now_ns, &d) != SL_OK) {
        error = "ERR sluice could not decide (invalid cost)";
    }
    if (error == NULL && cmd != THROTTLE_CL && throttle_never_error(req, &d, err)) {
        error = err; /* rejected: nothing to write */
    }
    if (error == NULL && d.allowed && req->cost > 0) {
        error = key_write(ctx, argv[1], &ks, &r, now_ns, d.reset_after_ns);
    }
    key_close(&ks);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    int64_t reply[5];
    if (cmd == THROTTLE_CL) {
        throttle_reply_cl(&d, reply);
    } else {
        throttle_reply_sl(&d, reply);
    }
    return reply_int_array(ctx, reply, 5);
}

/*
 * SL.SETTLE: settles a reservation of RESERVED units admitted at AT (default now) that cost
 * ACTUAL (sl_settle()): less gives the difference back, more charges it past the limit (debt).
 * The key is written, and the write replicated, only when its state changes. Replies with the
 * key's decision afterwards, in SL.THROTTLE's shape (a peek).
 */
static int settle_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    request_t r;
    if (parse(ctx, THROTTLE_SL_SETTLE, argv, argc, &r) != 0) {
        return REDISMODULE_OK;
    }
    const throttle_req_t *req = &r.t;
    int64_t now_ns = module_now_ns();
    key_state_t ks;
    char err[THROTTLE_ERR_MAX];
    const char *error = key_open(ctx, argv[1], &r, true, &ks, err);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    sl_decision_t d;
    int64_t charged_ns = throttle_settle_charged_ns(req, now_ns); /* <= now_ns */
    if (sl_settle(&req->rule, ks.state, req->reserved, req->actual, charged_ns, now_ns, &d) !=
        SL_OK) {
        error = "ERR sluice could not settle (invalid units)";
    } else if (req->reserved != req->actual) {
        error = key_write(ctx, argv[1], &ks, &r, now_ns, d.reset_after_ns);
    }
    key_close(&ks);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    int64_t reply[5];
    throttle_reply_sl(&d, reply);
    return reply_int_array(ctx, reply, 5);
}

static int cmd_sl_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return decide_command(ctx, argv, argc, THROTTLE_SL);
}

static int cmd_sl_peek(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return decide_command(ctx, argv, argc, THROTTLE_SL_PEEK);
}

static int cmd_cl_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return decide_command(ctx, argv, argc, THROTTLE_CL);
}

static int cmd_sl_settle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return settle_command(ctx, argv, argc);
}

/* SL.RESET key: forgets the key's usage. +OK whether or not it held any; a value that is not
 * sluice state is left alone with an error. */
static int cmd_sl_reset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc != 2) {
        return RedisModule_WrongArity(ctx);
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    const char *error = NULL;
    if (type == REDISMODULE_KEYTYPE_STRING) {
        size_t len = 0;
        const uint8_t *p = (const uint8_t *)RedisModule_StringDMA(key, &len, REDISMODULE_READ);
        if (header_is_ours(p, len)) {
            RedisModule_DeleteKey(key);
            RedisModule_Replicate(ctx, "DEL", "s", argv[1]);
            RedisModule_SignalModifiedKey(ctx, argv[1]);
        } else {
            error = ERR_NOT_STATE;
        }
    } else if (type != REDISMODULE_KEYTYPE_EMPTY) {
        error = REDISMODULE_ERRORMSG_WRONGTYPE;
    }
    RedisModule_CloseKey(key);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* SL.DEBUG SETTIME unix_ns: the time every later command decides at (tests only). */
static int cmd_sl_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (!test_clock_enabled) {
        return RedisModule_ReplyWithError(
            ctx, "ERR SL.DEBUG is disabled: load sluice.so with the argument 'testclock'");
    }
    if (argc != 3) {
        return RedisModule_WrongArity(ctx);
    }
    throttle_arg_t sub, value;
    sub.ptr = RedisModule_StringPtrLen(argv[1], &sub.len);
    value.ptr = RedisModule_StringPtrLen(argv[2], &value.len);
    if (sub.len != 7 || strncasecmp(sub.ptr, "SETTIME", 7) != 0) {
        return RedisModule_ReplyWithError(ctx, "ERR unknown SL.DEBUG subcommand (SETTIME unix_ns)");
    }
    int64_t ns = 0;
    bool ok = value.len > 0 && value.len <= 19;
    for (size_t i = 0; ok && i < value.len; i++) {
        ok = value.ptr[i] >= '0' && value.ptr[i] <= '9';
        ns = ns * 10 + (value.ptr[i] - '0');
    }
    if (!ok) {
        return RedisModule_ReplyWithError(ctx,
                                          "ERR unix_ns must be a non-negative integer (ns since "
                                          "the Unix epoch)");
    }
    test_clock_ns = ns;
    test_clock_set = true;
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* ---- loading ------------------------------------------------------------------------------- */

typedef struct command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    int firstkey, lastkey, keystep;
} command_t;

static const command_t commands[] = {
    {"sl.throttle", cmd_sl_throttle, "write deny-oom", 1, 1, 1},
    {"cl.throttle", cmd_cl_throttle, "write deny-oom", 1, 1, 1},
    {"sl.peek", cmd_sl_peek, "readonly", 1, 1, 1},
    {"sl.settle", cmd_sl_settle, "write deny-oom", 1, 1, 1},
    {"sl.reset", cmd_sl_reset, "write", 1, 1, 1},
    {"sl.debug", cmd_sl_debug, "fast", 0, 0, 0},
};

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (RedisModule_Init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) !=
        REDISMODULE_OK) {
        return REDISMODULE_ERR;
    }
    for (int i = 0; i < argc; i++) {
        size_t len = 0;
        const char *arg = RedisModule_StringPtrLen(argv[i], &len);
        if (len == 9 && strncasecmp(arg, "testclock", 9) == 0) {
            test_clock_enabled = true;
        } else {
            RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING,
                            "sluice: unknown module argument '%.*s' (known: testclock)",
                            (int)(len < 64 ? len : 64), arg);
            return REDISMODULE_ERR;
        }
    }
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const command_t *c = &commands[i];
        if (RedisModule_CreateCommand(ctx, c->name, c->fn, c->flags, c->firstkey, c->lastkey,
                                      c->keystep) != REDISMODULE_OK) {
            RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING, "sluice: cannot register %s",
                            c->name);
            return REDISMODULE_ERR;
        }
    }
    RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_NOTICE, "sluice %s loaded%s", SL_VERSION_STRING,
                    test_clock_enabled ? " with the test clock (SL.DEBUG SETTIME)" : "");
    return REDISMODULE_OK;
}
