/*
 * sluice_module.c - sluice.so, the Redis module: sluice's algorithms as native commands inside
 * redis-server and Redis Cluster. Glue only: arguments, errors and replies come from
 * src/proto/throttle_args.c (shared with sluiced), decisions from the core (src/core/), and
 * this file moves state between a Redis key and sl_decide(). docs/module.md is the user's view.
 * The commands' flags, arity, summary and arguments are their descriptions in
 * src/proto/commands.c, registered at load (COMMAND INFO and COMMAND DOCS on Redis 7).
 *
 * It is long because every call into Redis goes through redismodule.h's function pointers,
 * which are static, this file's own: what calls Redis (the commands, their registration and
 * descriptions) is one file.
 *
 *   SL.THROTTLE key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms] [COST n]
 *               [CLOSED_FROM unix_ms]
 *   SL.PEEK     key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *               [CLOSED_FROM unix_ms]
 *   SL.SETTLE   key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *               RESERVED r ACTUAL a [AT unix_ms] [CLOSED_FROM unix_ms]
 *   SL.LEASE    key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *               WANT n FOR ms [CLOSED_FROM unix_ms]
 *   SL.RETURN   key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]
 *               GRANTED n UNUSED u AT unix_us UNTIL unix_us [CLOSED_FROM unix_ms]
 *   SL.ACQUIRE  key algorithm limit window_ms [COST n] [TIMEOUT ms]
 *   SL.RELEASE  key algorithm limit window_ms ID id
 *   CL.THROTTLE key max_burst count period_s [quantity]
 *   SL.RESET    key
 *   SL.DEBUG    SETTIME unix_ns          (only when loaded with the argument "testclock")
 *
 * A key's value is a Redis string: a header naming the format, the algorithm and the numbers the
 * state was written under, then the state in its packed form (src/module/value.h has the
 * format). A gcra key with small numbers is about 16 bytes. The clock is read in whole
 * microseconds, like Redis's own TIME, so sliding_log stamps pack as microseconds. A command
 * reads the state into a buffer of the size it needs (core.h): a sliding_log key costs what its
 * entries take, whatever its limit.
 *
 * A decision that admits a cost writes the state, sets the key's absolute expiry to the moment
 * the state is fresh again, and replicates exactly that: SET key <bytes> PXAT <ms> (or DEL when
 * the state is fresh already). Peeks and rejections write and replicate nothing. A settle
 * writes (and replicates) the same way when it changes the state.
 *
 * A key's numbers may change (a caller sends other limits for the same key: sluiced when an
 * override is set or a rule changed): a value written under other numbers of the same
 * algorithm is converted to the command's (sl_state_convert(): the usage carried, never less),
 * then decided on. A command that may write (SL.THROTTLE and CL.THROTTLE with a cost,
 * SL.SETTLE) then writes the converted value whatever it decides, so the usage is converted
 * once and the key expires when the new numbers say; a peek converts only what it reports.
 *
 * CLOSED_FROM is a closed start (a caller that knows keys may have lost their usage: sluiced
 * after a Redis node lost its data, or a rule changed its algorithm): a key that does not exist,
 * within one window of the rule from that time, is read as having taken the rule's whole
 * capacity then (sl_state_saturate()), and written so by a command that may write, whatever it
 * decides, as a converted value is; a peek only reports it. A key that exists is read as it is.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "module/redismodule.h"
#include "module/value.h"
#include "proto/commands.h"
#include "proto/throttle_args.h"
#include "sluice/sluice.h"
#include "sluice/version.h"

#define MODULE_NAME    "sluice"
#define MODULE_VERSION (SL_VERSION_MAJOR * 10000 + SL_VERSION_MINOR * 100 + SL_VERSION_PATCH)

#define ARGS_LOCAL        16   /* arguments converted on the stack; more go to the heap */
#define STATE_LOCAL       2048 /* state (and packed) bytes on the stack; larger go to the heap */
#define PARSE_CACHE_BYTES 96   /* longest argument list (after the key) the parse cache keeps */

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

/* A parsed request, with its rule's value header (format 4) and its formats 1-3 hash. */
typedef struct request {
    throttle_req_t t;
    uint16_t hash;                    /* value_params_hash(): what older values carry */
    size_t header_len;                /* bytes of header */
    uint8_t header[VALUE_HEADER_MAX]; /* value_header() of the rule */
} request_t;

/* ---- the state format (value.h) ------------------------------------------------------------ */

/* A buffer for a state of `bytes`: `local` (STATE_LOCAL bytes) when it fits, else the heap. */
static uint8_t *state_buffer(uint8_t *local, size_t bytes)
{
    return bytes <= STATE_LOCAL ? local : RedisModule_Alloc(bytes);
}

static void state_free(uint8_t *state, const uint8_t *local)
{
    if (state != local) {
        RedisModule_Free(state);
    }
}

/* Unpacks len packed bytes at p under rule into *state, a buffer of the *bytes it needs (local,
 * or allocated); the error text (nothing allocated then), or NULL. A fixed-size state must be
 * exactly its size (its packed form is the state). */
static const char *unpack(const sl_rule_t *rule, size_t header_len, const uint8_t *p, size_t len,
                          uint8_t *local, uint8_t **state, size_t *bytes,
                          char err[THROTTLE_ERR_MAX])
{
    const char *name = sl_algorithm_name(rule->algorithm);
    size_t want = sl_state_size(rule), need = core_state_unpack_need(rule, p, len);
    if (!(core_algorithm(rule->algorithm)->caps & CORE_CAP_VARIABLE) && len != want) {
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds corrupt sluice state (%zu bytes, %s needs %zu); SL.RESET it",
                 header_len + len, name, header_len + want);
        return err;
    }
    *state = need > 0 ? state_buffer(local, need) : NULL;
    *bytes = need;
    if (need == 0 || core_state_unpack(rule, p, len, *state, need) != SL_OK) {
        if (*state != NULL) {
            state_free(*state, local);
        }
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds corrupt sluice state (%s state out of range); SL.RESET it",
                 name);
        return err;
    }
    return NULL;
}

/*
 * A value written under other numbers (v->rule, format 4 or 5; its header header_len bytes): its
 * state unpacked under them and converted to the request's rule at now_ns (the usage carried,
 * never less), into *state, a buffer of the *bytes it needs (local, or allocated). Returns NULL,
 * or the error text (nothing allocated then).
 */
static const char *convert(const request_t *req, const value_t *v, size_t header_len,
                           int64_t now_ns, uint8_t *local, uint8_t **state, size_t *bytes,
                           char err[THROTTLE_ERR_MAX])
{
    uint8_t from_local[STATE_LOCAL];
    uint8_t *from;
    size_t from_bytes;
    const char *error =
        unpack(&v->rule, header_len, v->packed, v->packed_len, from_local, &from, &from_bytes, err);
    if (error != NULL) {
        return error;
    }
    *bytes = core_state_convert_need(&v->rule, from, &req->t.rule);
    *state = state_buffer(local, *bytes);
    if (core_state_convert(&v->rule, from, &req->t.rule, *state, *bytes, now_ns) != SL_OK) {
        state_free(*state, local);
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds corrupt sluice state (%s state out of range); SL.RESET it",
                 sl_algorithm_name(v->algorithm));
        error = err;
    }
    state_free(from, from_local);
    return error;
}

/*
 * Reads a stored value as the state of the request's rule at now_ns, into *state, a buffer of
 * the *bytes it needs (local, or allocated). A value written under the request's numbers is
 * unpacked (and checked as sl_state_check() does); one written under other numbers of the same
 * algorithm, or in an older format 4 of sliding_log, is converted to them, and *converted set. A
 * value of an older format without numbers was written under the numbers its hash names: read
 * when they are the request's, an error otherwise (which numbers they were is not known).
 * Returns NULL, or the error text (written to err; nothing allocated then).
 */
static const char *value_read(const request_t *req, const uint8_t *p, size_t len, int64_t now_ns,
                              uint8_t *local, uint8_t **state, size_t *bytes, bool *converted,
                              char err[THROTTLE_ERR_MAX])
{
    const sl_rule_t *rule = &req->t.rule;
    *converted = false;
    if (len >= req->header_len && memcmp(p, req->header, req->header_len) == 0) {
        return unpack(rule, req->header_len, p + req->header_len, len - req->header_len, local,
                      state, bytes, err); /* the same numbers: the usual case */
    }
    value_t v;
    value_status_t st = value_parse(p, len, &v);
    const char *stored = sl_algorithm_name(v.algorithm);
    switch (st) {
    case VALUE_NOT_OURS:
        return ERR_NOT_STATE;
    case VALUE_ALGORITHM:
        snprintf(err, THROTTLE_ERR_MAX, "ERR the key holds corrupt sluice state (algorithm %u)",
                 p[1] & 0x0f);
        return err;
    case VALUE_FORMAT_NEW:
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds %s state of format %u, this sluice.so reads %s "
                 "(SL.RESET it, or load a matching sluice.so)",
                 stored, v.format, value_formats_read(v.algorithm));
        return err;
    case VALUE_CORRUPT:
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds corrupt sluice state (%s state out of range); SL.RESET it",
                 stored);
        return err;
    case VALUE_OK:
        break;
    }
    if (v.algorithm != rule->algorithm) {
        snprintf(err, THROTTLE_ERR_MAX,
                 "ERR the key holds sluice state of another rule (%s, not %s); SL.RESET it or "
                 "use another key",
                 stored, sl_algorithm_name(rule->algorithm));
        return err;
    }
    if (!v.has_rule) { /* formats 1 to 3 */
        if (v.hash != req->hash) {
            snprintf(err, THROTTLE_ERR_MAX,
                     "ERR the key holds sluice state of another rule (%s with other parameters); "
                     "SL.RESET it or use another key",
                     stored);
            return err;
        }
        return unpack(rule, VALUE_OLD_HEADER, v.packed, v.packed_len, local, state, bytes, err);
    }
    *converted = true;
    return convert(req, &v, (size_t)(v.packed - p), now_ns, local, state, bytes, err);
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
        int64_t lo = at, step = SL_NS_PER_MS; /* lo: not fresh */
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
    return (mstime_t)sl_ns_to_units_ceil(at, SL_NS_PER_MS);
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
 * The last request parsed of each command, by the exact bytes of its arguments after the key: a
 * client sending the same rule again and again (the common case) skips parsing, preparing and
 * hashing, also when it interleaves commands (SL.ACQUIRE, SL.RELEASE). An SL.RELEASE that ends
 * with ID id is kept without the id's bytes, which differ every time: a hit reads the id as the
 * parser does, and one that does not read falls through to the parser for its error. Only
 * requests that parsed without error are kept.
 */
typedef struct parse_cache {
    bool valid;
    size_t len;
    uint8_t bytes[PARSE_CACHE_BYTES];
    request_t req;
} parse_cache_t;

#define PARSE_CACHE_CMDS (THROTTLE_SL_RELEASE + 1)

static parse_cache_t parse_cache[PARSE_CACHE_CMDS]; /* commands run on Redis's main thread only */

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

/* The number of arguments the cache key covers: all but an SL.RELEASE's trailing id (after ID,
 * which stays in the key), read into *hold_id; argc when there is none. */
static int cache_argc(throttle_cmd_t cmd, const throttle_arg_t *args, int argc, int64_t *hold_id)
{
    *hold_id = -1;
    if (cmd != THROTTLE_SL_RELEASE || argc < 4 || !throttle_arg_is(&args[argc - 2], "ID")) {
        return argc;
    }
    int64_t id;
    if (!throttle_arg_i64(&args[argc - 1], &id) || id < 0) {
        return 0; /* the parser replies the error */
    }
    *hold_id = id;
    return argc - 1;
}

/* Parses argv with the shared parser (or finds it in the cache). Returns 0, or -1 after
 * replying the error. */
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
    int64_t hold_id;
    int keyed = cache_argc(cmd, args, argc, &hold_id);
    size_t key_len = keyed > 2 ? cache_key(args, keyed, key) : 0;
    parse_cache_t *pc = (size_t)cmd < PARSE_CACHE_CMDS ? &parse_cache[cmd] : NULL;
    key_len = pc != NULL ? key_len : 0;
    int rc = 0;
    if (key_len > 0 && pc->valid && pc->len == key_len && memcmp(pc->bytes, key, key_len) == 0) {
        *req = pc->req;
        if (hold_id >= 0) {
            req->t.hold_id = hold_id;
        }
    } else {
        char err[THROTTLE_ERR_MAX];
        rc = throttle_parse(cmd, args, (size_t)argc, &req->t, err);
        if (rc != 0) {
            RedisModule_ReplyWithError(ctx, err);
        } else {
            req->hash = value_params_hash(&req->t.rule);
            req->header_len = value_header(&req->t.rule, req->header);
            if (key_len > 0) {
                pc->valid = true;
                pc->len = key_len;
                memcpy(pc->bytes, key, key_len);
                pc->req = *req;
            }
        }
    }
    if (args != local) {
        RedisModule_Free(args);
    }
    return rc == 0 ? 0 : -1;
}

/* Makes an empty key hold `value` (total bytes) with one string object, which the key and the
 * replicated SET share: no second copy of the bytes. Returns NULL, or an error text. */
static const char *store_new(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleKey *key,
                             const uint8_t *value, size_t total, mstime_t expire_ms)
{
    RedisModuleString *str = RedisModule_CreateString(NULL, (const char *)value, total);
    const char *error = NULL;
    if (RedisModule_StringSet(key, str) != REDISMODULE_OK) {
        error = "ERR sluice could not write the key";
    } else {
        RedisModule_SetAbsExpire(key, expire_ms);
        RedisModule_Replicate(ctx, "SET", "sscl", keyname, str, "PXAT", (long long)expire_ms);
        RedisModule_SignalModifiedKey(ctx, keyname);
    }
    RedisModule_FreeString(NULL, str);
    return error;
}

/*
 * Writes `value` (total bytes: the request's header and the packed state) as the value of the
 * key, which holds stored_len bytes (0: empty, created by store_new()), sets its expiry and
 * replicates the result. Returns NULL, or an error text. A value that exists is rewritten in
 * place; a sliding_log that grew or shrank is resized in place (StringTruncate): Redis then
 * keeps room to grow (up to twice the bytes), which measured 20 % more memory per stamp than
 * exact-size strings (RM_StringSet) but 6-17 % less CPU per decision (docs/dev/design.md). The
 * header is written every time: it may have held other numbers.
 */
static const char *store_state(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleKey *key,
                               size_t stored_len, const uint8_t *value, size_t total,
                               mstime_t expire_ms)
{
    if (stored_len == 0) {
        return store_new(ctx, keyname, key, value, total, expire_ms);
    }
    size_t len = 0;
    if (stored_len != total && RedisModule_StringTruncate(key, total) != REDISMODULE_OK) {
        return "ERR sluice could not write the key";
    }
    char *w = RedisModule_StringDMA(key, &len, REDISMODULE_WRITE);
    if (w == NULL || len != total) {
        return "ERR sluice could not write the key";
    }
    memcpy(w, value, total);
    RedisModule_SetAbsExpire(key, expire_ms);
    RedisModule_Replicate(ctx, "SET", "sbcl", keyname, w, total, "PXAT", (long long)expire_ms);
    RedisModule_SignalModifiedKey(ctx, keyname);
    return NULL;
}

/* A key as read for a command: its type, its value's bytes (stored, stored_len; NULL and 0 when
 * empty) and the state read from them under the command's rule. */
typedef struct key_state {
    RedisModuleKey *key;
    int type;
    const uint8_t *stored;
    size_t stored_len; /* bytes */
    bool rewrite;      /* state is not the value's own (converted from other numbers, or a
                          closed start's for a key that does not exist): a command that may
                          write writes it, whatever it decides */
    uint8_t *state;    /* local, or allocated */
    size_t bytes;      /* of state's buffer: at least core_state_need(), room for the command */
    uint8_t local[STATE_LOCAL];
} key_state_t;

/* Gives ks->state room for one more operation (core_state_need()). */
static void key_room(key_state_t *ks, const sl_rule_t *rule)
{
    size_t need = core_state_need(rule, ks->state);
    if (ks->bytes >= need) {
        return;
    }
    uint8_t *to = RedisModule_Alloc(need); /* need > bytes: more than the state took */
    core_state_move(rule, ks->state, to, need);
    state_free(ks->state, ks->local);
    ks->state = to;
    ks->bytes = need;
}

/*
 * Opens argv[1] and reads its state under the request's rule at now_ns (converted when it was
 * written under other numbers; saturated when it does not exist and the request names a closed
 * start it is within). Returns NULL with ks filled (close it with key_close), or the
 * error text (ks closed already; WRONGTYPE, or a value that is not this rule's state, in err).
 */
static const char *key_open(RedisModuleCtx *ctx, RedisModuleString *keyname, const request_t *r,
                            bool may_write, int64_t now_ns, key_state_t *ks,
                            char err[THROTTLE_ERR_MAX])
{
    ks->key = RedisModule_OpenKey(
        ctx, keyname, may_write ? REDISMODULE_READ | REDISMODULE_WRITE : REDISMODULE_READ);
    ks->type = RedisModule_KeyType(ks->key);
    ks->stored = NULL;
    ks->stored_len = 0;
    ks->rewrite = false;
    ks->state = NULL;
    if (ks->type != REDISMODULE_KEYTYPE_EMPTY && ks->type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(ks->key);
        return REDISMODULE_ERRORMSG_WRONGTYPE;
    }
    const sl_rule_t *rule = &r->t.rule;
    if (ks->type == REDISMODULE_KEYTYPE_EMPTY) {
        int64_t at_ns;
        ks->bytes = core_state_min(rule);
        ks->state = state_buffer(ks->local, ks->bytes);
        core_state_init(rule, ks->state, ks->bytes);
        if (throttle_closed_start(&r->t, now_ns, &at_ns)) { /* its usage is not known */
            core_state_saturate(rule, ks->state, ks->bytes, at_ns);
            ks->rewrite = true;
        }
        key_room(ks, rule);
        return NULL;
    }
    ks->stored = (const uint8_t *)RedisModule_StringDMA(ks->key, &ks->stored_len, REDISMODULE_READ);
    const char *error = value_read(r, ks->stored, ks->stored_len, now_ns, ks->local, &ks->state,
                                   &ks->bytes, &ks->rewrite, err);
    if (error != NULL) {
        RedisModule_CloseKey(ks->key);
        return error;
    }
    key_room(ks, rule);
    return NULL;
}

static void key_close(key_state_t *ks)
{
    RedisModule_CloseKey(ks->key);
    state_free(ks->state, ks->local);
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
    size_t h = r->header_len, max = h + core_state_packed_need(rule, ks->state);
    uint8_t value_local[STATE_LOCAL];
    uint8_t *value = max <= sizeof(value_local) ? value_local : RedisModule_Alloc(max);
    memcpy(value, r->header, h); /* the value: the header, then the packed state after it */
    size_t total = h + sl_state_pack(rule, ks->state, value + h);
    const char *error = NULL;
    bool same = ks->stored_len == total && memcmp(ks->stored, value, total) == 0;
    if (!same) { /* the same bytes have the same expiry: it is where the state is fresh */
        mstime_t at = expiry_ms(rule, ks->state, now_ns, reset_after_ns);
        error = store_state(ctx, keyname, ks->key, ks->stored_len, value, total, at);
    }
    if (value != value_local) {
        RedisModule_Free(value);
    }
    return error;
}

/* SL.THROTTLE, SL.PEEK and CL.THROTTLE's step on an open key: decides. Returns an error reply
 * (nothing is written then) or NULL; *write says whether the key must be written. */
static const char *decide_step(const throttle_req_t *req, throttle_cmd_t cmd, const key_state_t *ks,
                               int64_t now_ns, sl_decision_t *d, bool *write, char *err)
{
    if (sl_decide_reserved(&req->rule, ks->state, req->cost, req->reserve, now_ns, d) != SL_OK) {
        return "ERR sluice could not decide (invalid cost)";
    }
    if (cmd != THROTTLE_CL && throttle_never_error(req, d, err)) {
        return err; /* an error writes nothing */
    }
    /* an admission writes; so does any decision of a command that may write on a value it
     * converted (so that the usage is converted once and expires by the new numbers) or a
     * closed start saturated */
    *write = req->cost > 0 && (d->allowed || ks->rewrite);
    return NULL;
}

/* SL.SETTLE's step on an open key: settles a reservation of RESERVED units admitted at AT
 * (default now) that cost ACTUAL (sl_settle()). The key is written, and the write replicated,
 * only when its state changes (or was converted from other numbers, or saturated). A charge
 * that would leave the key owing more than MAX_DEBT is an error, and writes nothing. */
static const char *settle_step(const throttle_req_t *req, const key_state_t *ks, int64_t now_ns,
                               sl_decision_t *d, bool *write, char *err)
{
    int64_t charged_ns = throttle_settle_charged_ns(req, now_ns); /* <= now_ns */
    int rc = sl_settle(&req->rule, ks->state, req->reserved, req->actual, charged_ns, now_ns, d);
    if (rc == SL_EDEBT) { /* nothing charged: an error writes nothing */
        throttle_debt_error(&req->rule, err);
        return err;
    }
    if (rc != SL_OK) {
        return "ERR sluice could not settle (invalid units)";
    }
    *write = req->reserved != req->actual || ks->rewrite;
    return NULL;
}

/* SL.LEASE's step on an open key: grants up to WANT units for FOR ms (sl_lease()). The key is
 * written when units were granted (or its state was converted, or saturated). */
static const char *lease_step(const throttle_req_t *req, const key_state_t *ks, int64_t now_ns,
                              sl_lease_t *lease, bool *write, char *err)
{
    int rc =
        sl_lease(&req->rule, ks->state, req->want, req->lease_ms * SL_NS_PER_MS, now_ns, lease);
    if (rc == SL_ELEASE) {
        throttle_lease_error(req, err);
        return err;
    }
    if (rc != SL_OK) {
        return "ERR sluice could not lease (invalid units)";
    }
    *write = lease->granted > 0 || ks->rewrite;
    return NULL;
}

/* SL.RETURN's step on an open key: gives back UNUSED units of the lease GRANTED at AT until
 * UNTIL (sl_lease_return()). key_write() writes only a state that changed. */
static const char *return_step(const throttle_req_t *req, const key_state_t *ks, int64_t now_ns,
                               sl_decision_t *d, bool *write, char *err)
{
    sl_lease_t lease = throttle_return_lease(req, now_ns);
    int rc = sl_lease_return(&req->rule, ks->state, &lease, req->unused, now_ns, d);
    if (rc == SL_ELEASE) {
        throttle_lease_error(req, err);
        return err;
    }
    if (rc != SL_OK) {
        return "ERR sluice could not return the lease (invalid units)";
    }
    *write = true;
    return NULL;
}

/* SL.LEASE: a lease on the key argv[1], replied as [granted, at_us, until_us, remaining,
 * reset_after_ms]. */
static int cmd_sl_lease(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    request_t r;
    if (parse(ctx, THROTTLE_SL_LEASE, argv, argc, &r) != 0) {
        return REDISMODULE_OK;
    }
    int64_t now_ns = module_now_ns();
    key_state_t ks;
    char err[THROTTLE_ERR_MAX];
    const char *error = key_open(ctx, argv[1], &r, true, now_ns, &ks, err);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    sl_lease_t lease;
    bool write = false;
    error = lease_step(&r.t, &ks, now_ns, &lease, &write, err);
    if (error == NULL && write) {
        error = key_write(ctx, argv[1], &ks, &r, now_ns, lease.reset_after_ns);
    }
    key_close(&ks);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    int64_t reply[5];
    throttle_reply_lease(&lease, reply);
    return reply_int_array(ctx, reply, 5);
}

/* Random bits read at load: keyed with a counter, the entropy of each acquire (a key's first
 * acquire makes the secret its hold ids are made with from it). */
static uint64_t hold_seed;
static uint64_t hold_count;

/* SL.ACQUIRE's step on an open key: takes COST units as one hold of TIMEOUT (sl_acquire()). The
 * key is written when a hold was made (or its state was converted, or saturated). */
static const char *acquire_step(const throttle_req_t *req, const key_state_t *ks, int64_t now_ns,
                                sl_decision_t *d, sl_hold_t *hold, bool *write, char *err)
{
    uint64_t entropy = sl_hash_mix(hold_seed ^ (uint64_t)now_ns, ++hold_count);
    int rc = sl_acquire_reserved(&req->rule, ks->state, req->cost, req->reserve,
                                 req->hold_ms * SL_NS_PER_MS, now_ns, entropy, d, hold);
    if (rc == SL_EHOLDTIME) {
        throttle_hold_time_error(&req->rule, err);
        return err;
    }
    if (rc == SL_ENOHOLDS) {
        return THROTTLE_ERR_NO_HOLDS;
    }
    if (rc != SL_OK) {
        return "ERR sluice could not acquire (invalid cost)";
    }
    if (throttle_never_error(req, d, err)) {
        return err;
    }
    *write = hold->id != 0 || (req->cost > 0 && ks->rewrite);
    return NULL;
}

/* SL.RELEASE's step on an open key: frees hold ID (sl_release_sample(), with LATENCY_US and
 * DROPPED for an adaptive limit); a hold the key does not hold is an error and writes nothing. */
static const char *release_step(const throttle_req_t *req, const key_state_t *ks, int64_t now_ns,
                                sl_decision_t *d, bool *write)
{
    sl_sample_t sample;
    bool sampled = throttle_release_sample(req, &sample);
    int rc = sl_release_sample(&req->rule, ks->state, (uint64_t)req->hold_id, now_ns,
                               sampled ? &sample : NULL, d, NULL);
    if (rc == SL_EHOLD) {
        return "ERR " THROTTLE_NO_HOLD;
    }
    if (rc == SL_ENOHOLDS) {
        return THROTTLE_ERR_NO_HOLDS;
    }
    if (rc != SL_OK) {
        return "ERR sluice could not release";
    }
    *write = true;
    return NULL;
}

/* SL.ACQUIRE and SL.RELEASE on the key argv[1]: [allowed, limit, remaining, retry_after_ms,
 * reset_after_ms, hold_id], or +OK. A write replicates as its effect, as every command's does. */
static int hold_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, throttle_cmd_t cmd)
{
    request_t r;
    if (parse(ctx, cmd, argv, argc, &r) != 0) {
        return REDISMODULE_OK;
    }
    int64_t now_ns = module_now_ns();
    key_state_t ks;
    char err[THROTTLE_ERR_MAX];
    bool acquire = cmd == THROTTLE_SL_ACQUIRE;
    const char *error = key_open(ctx, argv[1], &r, !acquire || r.t.cost > 0, now_ns, &ks, err);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    sl_decision_t d;
    sl_hold_t hold = {0, 0, 0};
    bool write = false;
    error = acquire ? acquire_step(&r.t, &ks, now_ns, &d, &hold, &write, err)
                    : release_step(&r.t, &ks, now_ns, &d, &write);
    if (error == NULL && write) {
        error = key_write(ctx, argv[1], &ks, &r, now_ns, d.reset_after_ns);
    }
    key_close(&ks);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    if (!acquire) {
        return RedisModule_ReplyWithSimpleString(ctx, "OK");
    }
    int64_t reply[6];
    throttle_reply_sl(&d, reply);
    reply[5] = (int64_t)hold.id;
    return reply_int_array(ctx, reply, 6);
}

static int cmd_sl_acquire(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return hold_command(ctx, argv, argc, THROTTLE_SL_ACQUIRE);
}

static int cmd_sl_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return hold_command(ctx, argv, argc, THROTTLE_SL_RELEASE);
}

/*
 * SL.THROTTLE, SL.PEEK, CL.THROTTLE, SL.SETTLE and SL.RETURN: one step on the key argv[1].
 * SL.RETURN replies as SL.SETTLE does. SL.SETTLE gives
 * back (or charges past the limit) the difference between a reservation and what it cost, and
 * replies with the key's decision afterwards (a peek) in SL.THROTTLE's shape.
 */
static int key_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, throttle_cmd_t cmd)
{
    request_t r;
    if (parse(ctx, cmd, argv, argc, &r) != 0) {
        return REDISMODULE_OK;
    }
    const throttle_req_t *req = &r.t;
    int64_t now_ns = module_now_ns();
    key_state_t ks;
    char err[THROTTLE_ERR_MAX];
    bool settle = cmd == THROTTLE_SL_SETTLE || cmd == THROTTLE_SL_RETURN;
    const char *error = key_open(ctx, argv[1], &r, settle || req->cost > 0, now_ns, &ks, err);
    if (error != NULL) {
        return RedisModule_ReplyWithError(ctx, error);
    }
    sl_decision_t d;
    bool write = false;
    error = cmd == THROTTLE_SL_RETURN ? return_step(req, &ks, now_ns, &d, &write, err)
            : settle                  ? settle_step(req, &ks, now_ns, &d, &write, err)
                                      : decide_step(req, cmd, &ks, now_ns, &d, &write, err);
    if (error == NULL && write) {
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

static int cmd_sl_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return key_command(ctx, argv, argc, THROTTLE_SL);
}

static int cmd_sl_peek(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return key_command(ctx, argv, argc, THROTTLE_SL_PEEK);
}

static int cmd_cl_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return key_command(ctx, argv, argc, THROTTLE_CL);
}

static int cmd_sl_settle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return key_command(ctx, argv, argc, THROTTLE_SL_SETTLE);
}

static int cmd_sl_return(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    return key_command(ctx, argv, argc, THROTTLE_SL_RETURN);
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
        value_t v;
        if (value_parse(p, len, &v) != VALUE_NOT_OURS) {
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

/* The commands: each one's flags, arity, summary and arguments are its description
 * (proto/commands.h, shared with sluiced's where the forms are the same). */
typedef struct command {
    const cmd_desc_t *desc;
    RedisModuleCmdFunc fn;
} command_t;

static const command_t commands[] = {
    {&desc_sl_throttle, cmd_sl_throttle},   {&desc_cl_throttle, cmd_cl_throttle},
    {&desc_mod_sl_peek, cmd_sl_peek},       {&desc_mod_sl_settle, cmd_sl_settle},
    {&desc_mod_sl_lease, cmd_sl_lease},     {&desc_mod_sl_return, cmd_sl_return},
    {&desc_mod_sl_reset, cmd_sl_reset},     {&desc_mod_sl_debug, cmd_sl_debug},
    {&desc_mod_sl_acquire, cmd_sl_acquire}, {&desc_mod_sl_release, cmd_sl_release},
};

/* Redis's flags for CreateCommand ("write deny-oom") from the description's. */
static const char *command_flags(unsigned flags, char *out, size_t cap)
{
    static const struct {
        unsigned flag;
        const char *word;
    } words[] = {{CMD_WRITE, "write"},
                 {CMD_READONLY, "readonly"},
                 {CMD_DENYOOM, "deny-oom"},
                 {CMD_FAST, "fast"}};
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if ((flags & words[i].flag) != 0 && n + strlen(words[i].word) + 2 < cap) {
            n += (size_t)snprintf(out + n, cap - n, "%s%s", n > 0 ? " " : "", words[i].word);
        }
    }
    return out;
}

/* The key is the first argument when the description says so (1 1 1), else none (0 0 0). */
static int command_key(const cmd_desc_t *d)
{
    return d->args != NULL && d->args[0].name != NULL && strcmp(d->args[0].type, "key") == 0;
}

#define INFO_ARGS_MAX 96 /* Redis copies what it is given: one pool, used per command */

typedef struct arg_pool {
    RedisModuleCommandArg arg[INFO_ARGS_MAX];
    size_t used;
} arg_pool_t;

static RedisModuleCommandArgType arg_type(const char *type)
{
    static const struct {
        const char *name;
        RedisModuleCommandArgType type;
    } types[] = {{"key", REDISMODULE_ARG_TYPE_KEY},
                 {"integer", REDISMODULE_ARG_TYPE_INTEGER},
                 {"pure-token", REDISMODULE_ARG_TYPE_PURE_TOKEN},
                 {"block", REDISMODULE_ARG_TYPE_BLOCK},
                 {"oneof", REDISMODULE_ARG_TYPE_ONEOF}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(types[i].name, type) == 0) {
            return types[i].type;
        }
    }
    return REDISMODULE_ARG_TYPE_STRING;
}

/* args as Redis's list (ending with zeros) from the pool, or NULL when it is full. */
static RedisModuleCommandArg *info_args(arg_pool_t *pool, const cmd_arg_t *args)
{
    size_t n = cmd_args_count(args);
    if (pool->used + n + 1 > INFO_ARGS_MAX) {
        return NULL;
    }
    RedisModuleCommandArg *out = &pool->arg[pool->used];
    pool->used += n + 1;
    memset(out, 0, (n + 1) * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        const cmd_arg_t *a = &args[i];
        out[i] = (RedisModuleCommandArg){
            .name = a->name,
            .type = arg_type(a->type),
            .key_spec_index = strcmp(a->type, "key") == 0 ? 0 : -1,
            .token = a->token,
            .flags = ((a->flags & CMD_ARG_OPTIONAL) ? REDISMODULE_CMD_ARG_OPTIONAL : 0) |
                     ((a->flags & CMD_ARG_MULTIPLE) ? REDISMODULE_CMD_ARG_MULTIPLE : 0)};
        if (a->args != NULL && (out[i].subargs = info_args(pool, a->args)) == NULL) {
            return NULL;
        }
    }
    return out;
}

/* Tells Redis 7 the command's summary, arity and arguments (COMMAND DOCS and COMMAND INFO);
 * nothing on an older Redis. Returns REDISMODULE_OK, or REDISMODULE_ERR when Redis refused. */
static int command_describe(RedisModuleCtx *ctx, const cmd_desc_t *d)
{
    if (RedisModule_GetCommand == NULL || RedisModule_SetCommandInfo == NULL) {
        return REDISMODULE_OK;
    }
    static arg_pool_t pool; /* OnLoad runs on Redis's main thread, once */
    pool.used = 0;
    RedisModuleCommandInfo info = {.version = &RedisModule_CommandInfoVersion1,
                                   .summary = d->summary,
                                   .since = SL_VERSION_STRING,
                                   .arity = d->arity,
                                   .args = info_args(&pool, d->args)};
    RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, d->name);
    if (cmd == NULL || (d->args != NULL && info.args == NULL)) {
        return REDISMODULE_ERR;
    }
    return RedisModule_SetCommandInfo(cmd, &info);
}

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
    FILE *urandom = fopen("/dev/urandom", "rb");
    if (urandom == NULL || fread(&hold_seed, sizeof hold_seed, 1, urandom) != 1) {
        hold_seed = sl_hash_mix((uint64_t)sl_now_ns(), (uint64_t)(uintptr_t)&hold_seed);
    }
    if (urandom != NULL) {
        fclose(urandom);
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const cmd_desc_t *d = commands[i].desc;
        char flags[64];
        int key = command_key(d);
        if (RedisModule_CreateCommand(ctx, d->name, commands[i].fn,
                                      command_flags(d->flags, flags, sizeof flags), key, key,
                                      key) != REDISMODULE_OK ||
            command_describe(ctx, d) != REDISMODULE_OK) {
            RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_WARNING, "sluice: cannot register %s",
                            d->name);
            return REDISMODULE_ERR;
        }
    }
    RedisModule_Log(ctx, REDISMODULE_LOGLEVEL_NOTICE, "sluice %s loaded%s", SL_VERSION_STRING,
                    test_clock_enabled ? " with the test clock (SL.DEBUG SETTIME)" : "");
    return REDISMODULE_OK;
}
