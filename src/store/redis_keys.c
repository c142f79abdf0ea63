/*
 * redis_keys.c - the Redis request store's key names, the over-limit cache's names for them, and
 * the commands' arguments (see redis_store.h for the naming).
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "core/adaptive.h"
#include "core/algorithms.h"
#include "proto/buf.h"
#include "store/lua_scripts.h"
#include "remote/overlimit_cache.h"
#include "store/redis_store_impl.h"

#define LUA_INT_MAX INT64_C(9007199254740991) /* 2^53 - 1: the scripts' largest integer */

/* ---- keys and arguments -------------------------------------------------------------------- */

/*
 * The 8 hex digits ending a Redis key: the high 32 bits of a hash of the rule's algorithm and of
 * the mode, nothing that changes with the rule's numbers (a value records those itself, and a
 * key under other numbers is converted where it is). Their seeds differ from those of the names
 * keys had when the digits also hashed the numbers, so no key of an older sluiced is read under
 * a name of this one.
 */
#define DIGITS_CACHED 32 /* algorithms whose digits are kept, per mode (there are fewer) */
_Static_assert(KEY_HASH_DIGITS == sizeof(uint64_t), "the digits are kept as one word");

static void key_digits(int64_t alg, redis_mode_t mode, char out[KEY_HASH_DIGITS])
{
    uint64_t seed =
        mode == REDIS_MODE_MODULE ? UINT64_C(0x736c756963650002) : UINT64_C(0x736c7569636c7532);
    uint64_t h = sl_hash64(&alg, sizeof alg, seed);
    for (int i = 0; i < KEY_HASH_DIGITS; i++) {
        out[i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 0xf];
    }
}

/* The digits depend on the algorithm and the mode only: each pair's are worked out once (by
 * whichever loop first needs them; they are the same whoever writes them) and kept as 8 bytes
 * beside a flag, so a decision copies them instead of hashing. */
void rs_key_digits(const sl_rule_t *r, redis_mode_t mode, char out[KEY_HASH_DIGITS])
{
    static _Atomic uint64_t kept[2][DIGITS_CACHED]; /* the digits, little-endian; 0 not yet */
    int m = mode == REDIS_MODE_MODULE;
    int64_t alg = r->algorithm;
    if (alg < 0 || alg >= DIGITS_CACHED) {
        key_digits(alg, mode, out);
        return;
    }
    uint64_t v = atomic_load_explicit(&kept[m][alg], memory_order_relaxed);
    if (v == 0) { /* hex digits are never 0 bytes, so 0 is "not yet" */
        char d[KEY_HASH_DIGITS];
        key_digits(alg, mode, d);
        memcpy(&v, d, sizeof v);
        atomic_store_explicit(&kept[m][alg], v, memory_order_relaxed);
    }
    memcpy(out, &v, KEY_HASH_DIGITS);
}

/*
 * The epoch a cached refusal is kept under: its stripe's epoch (whatever gives the key room back
 * bumps it) tagged with the rule's numbers. The Redis key does not change with the numbers, so
 * the cache names an entry by the key alone and keeps the numbers in its epoch: a request under
 * other numbers finds the entry of another epoch and drops it (olc_lookup), never answering with
 * a refusal learnt under other numbers, and its own answer replaces it.
 */
uint64_t rs_cache_epoch(uint64_t stripe_epoch, const sl_rule_t *r)
{
    int64_t n[5] = {r->limit, r->window_ns, r->burst, r->buckets, r->max_delay_ns};
    return sl_hash_mix(stripe_epoch ^ SL_HASH_P2, sl_hash64(n, sizeof n, SL_HASH_P0));
}

/* "sl:{<key>}:<rule>:<digits>" into out; returns its length or 0 if too long. */
size_t rs_key(const char *name, const sl_rule_t *r, redis_mode_t mode, const void *key,
              size_t key_len, char *out, size_t cap)
{
    size_t name_len = strlen(name);
    if (key_len + name_len + 32 > cap) {
        return 0;
    }
    size_t n = 0;
    memcpy(out + n, "sl:{", 4);
    n += 4;
    memcpy(out + n, key, key_len);
    n += key_len;
    memcpy(out + n, "}:", 2);
    n += 2;
    memcpy(out + n, name, name_len);
    n += name_len;
    out[n++] = ':';
    rs_key_digits(r, mode, out + n);
    return n + KEY_HASH_DIGITS;
}

/* The cache's name for a Redis key. */
uint64_t rs_key_hash(const redis_store_t *s, const char *rkey, size_t rkey_len)
{
    return olc_key_hash(s->shared->seed, rkey, rkey_len, NULL, 0);
}

/*
 * The key has room again (a reset, a refund): its cached refusals, in either mode's name, are
 * dropped in every loop, and answers already on their way will not be remembered (their epoch
 * is old). rkey[0..rkey_len) is its name in either mode.
 */
void rs_forget_key(redis_store_t *s, const sl_rule_t *rule, const char *rkey, size_t rkey_len)
{
    char other[RKEY_MAX];
    memcpy(other, rkey, rkey_len);
    for (redis_mode_t mode = REDIS_MODE_MODULE; mode <= REDIS_MODE_LUA; mode++) {
        rs_key_digits(rule, mode, other + rkey_len - KEY_HASH_DIGITS);
        uint64_t h = rs_key_hash(s, other, rkey_len);
        atomic_fetch_add_explicit(rs_epoch_of(s->shared, h), 1, memory_order_release);
        olc_forget(&s->cache, h);
    }
}

/* p's key and cache name in another mode's form. */
void rs_rekey(redis_store_t *s, pending_t *p, redis_mode_t mode)
{
    rs_key_digits(&p->rule, mode, p->rkey + p->rkey_len - KEY_HASH_DIGITS);
    p->mode = mode;
    p->cache_hash = rs_key_hash(s, p->rkey, p->rkey_len);
    p->epoch = atomic_load_explicit(rs_epoch_of(s->shared, p->cache_hash), memory_order_acquire);
}

static void arg_str(args_t *a, const char *s, size_t len)
{
    /* the longest command: 5 words of rule, 10 of an adaptive limit, an SL.RELEASE's ID,
     * LATENCY_US, DROPPED and CLOSED_FROM (8): 23 (a settle's: 5 + 10 + 2 + 6 + 2 = 25) */
    assert(a->argc < ARGS_MAX);
    a->argv[a->argc] = s;
    a->len[a->argc++] = len;
}

/* "00" .. "99": two digits at a time, half the divisions of one at a time. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

/* v in decimal into out (24 bytes); returns the length. Numbers below 100 (most: a command's
 * count and lengths, a cost) take no division. */
static size_t fmt_i64(char *out, int64_t v)
{
    size_t len = 0;
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        out[len++] = '-';
        u = 0 - u;
    }
    if (u < 10) {
        out[len] = (char)('0' + u);
        return len + 1;
    }
    if (u < 100) {
        memcpy(out + len, &digit_pairs[2 * u], 2);
        return len + 2;
    }
    size_t n = 3; /* digits: 3 up to 20, written from the last one back */
    for (uint64_t p = 1000; n < 20 && u >= p; p *= 10) {
        n++;
    }
    char *end = out + len + n, *q = end;
    for (; u >= 100; u /= 100) {
        q -= 2;
        memcpy(q, &digit_pairs[2 * (u % 100)], 2);
    }
    if (u >= 10) {
        memcpy(q - 2, &digit_pairs[2 * u], 2);
    } else {
        q[-1] = (char)('0' + u);
    }
    return (size_t)(end - out);
}

static void arg_i64(args_t *a, int64_t v)
{
    arg_str(a, a->num[a->argc], fmt_i64(a->num[a->argc], v));
}

/* The command as Redis reads it (a RESP array of bulk strings) into s->cmd, sized once and
 * written in place. False when out of memory. */
bool rs_format_args(redis_store_t *s, int argc, const char *const *argv, const size_t *len)
{
    size_t total = 24; /* "*argc\r\n" */
    for (int i = 0; i < argc; i++) {
        total += len[i] + 32; /* "$len\r\n", the bytes, "\r\n" */
    }
    s->cmd.len = 0;
    s->cmd.failed = false;
    if (!buf_reserve(&s->cmd, total)) {
        return false;
    }
    char *p = s->cmd.data;
    *p++ = '*';
    p += fmt_i64(p, argc);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        *p++ = '$';
        p += fmt_i64(p, (int64_t)len[i]);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], len[i]);
        p += len[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    s->cmd.len = (size_t)(p - s->cmd.data);
    return true;
}

/* Frees a command buffer that one large command (an SL.ALLOWALL) grew past CMD_KEEP. */
void rs_trim_cmd(redis_store_t *s)
{
    if (s->cmd.cap > CMD_KEEP) {
        buf_free(&s->cmd);
    }
}

/* Sends the formatted command s->cmd to node idx; rc_command_at's result. */
int rs_send_cmd(redis_store_t *s, int idx, rc_reply_fn fn, void *arg)
{
    int rc = rc_command_at(s->client, idx, s->cmd.data, s->cmd.len, fn, arg);
    rs_trim_cmd(s);
    return rc;
}

/* <cmd> rkey algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]: the module's rule
 * arguments (those the rule uses, as sluiced names its inline rules). */
/* An adaptive limit's numbers, as throttle_args.h names them (nothing for a fixed limit). */
static void module_adaptive_args(args_t *a, const sl_rule_t *r)
{
    const sl_adaptive_t *ad = &r->adaptive;
    const adaptive_algorithm_t *row = adaptive_row((uint64_t)(unsigned)ad->algorithm);
    if (row == NULL)
        return;
    arg_str(a, "ADAPTIVE", 8);
    arg_str(a, row->name, strlen(row->name));
    arg_str(a, "MIN_LIMIT", 9);
    arg_i64(a, ad->min_limit);
    arg_str(a, "MAX_LIMIT", 9);
    arg_i64(a, ad->max_limit);
    if (row->opts & ADAPTIVE_OPT_BACKOFF) {
        arg_str(a, "BACKOFF", 7);
        arg_i64(a, ad->backoff_pct);
    }
    if (row->opts & ADAPTIVE_OPT_TIMEOUT) {
        arg_str(a, "LATENCY_TIMEOUT", 15);
        arg_i64(a, ad->timeout_ns / SL_NS_PER_MS);
    }
    if (row->opts & ADAPTIVE_OPT_PROBE) {
        arg_str(a, "PROBE", 5);
        arg_i64(a, ad->probe);
    }
}

static void module_rule_args(args_t *a, const char *cmd, const char *rkey, size_t rkey_len,
                             const sl_rule_t *r)
{
    const char *alg = sl_algorithm_name(r->algorithm);
    arg_str(a, cmd, strlen(cmd));
    arg_str(a, rkey, rkey_len);
    arg_str(a, alg, strlen(alg));
    arg_i64(a, r->limit);
    arg_i64(a, r->window_ns / SL_NS_PER_MS);
    const core_algorithm_t *row = core_algorithm(r->algorithm);
    if (row->burst.taken) {
        arg_str(a, "BURST", 5);
        arg_i64(a, r->burst);
    }
    if (row->max_delay.taken && r->max_delay_ns > 0) {
        arg_str(a, "MAX_DELAY", 9);
        arg_i64(a, r->max_delay_ns / SL_NS_PER_MS);
    }
    if (row->buckets.taken) {
        arg_str(a, "BUCKETS", 7);
        arg_i64(a, r->buckets);
    }
    module_adaptive_args(a, r);
}

/* What a release reports to an adaptive limit: LATENCY_US us (when it has one), DROPPED 1. */
static void module_sample_args(args_t *a, const pending_t *p)
{
    if (!p->sampled)
        return;
    if (p->sample.latency_ns >= 0) {
        arg_str(a, "LATENCY_US", 10);
        arg_i64(a, p->sample.latency_ns / SL_NS_PER_US);
    }
    if (p->sample.dropped) {
        arg_str(a, "DROPPED", 7);
        arg_i64(a, 1);
    }
}

/* p's command for the module, but for its closed start. */
/* RESERVE r of a decision or an acquire that must leave units for higher priorities (none for a
 * cost beyond the capacity: it is sent as a peek). */
static void module_reserve_args(args_t *a, const pending_t *p)
{
    if (p->reserve > 0 && !p->beyond) {
        arg_str(a, "RESERVE", 7);
        arg_i64(a, p->reserve);
    }
}

static void module_op_args(args_t *a, const pending_t *p)
{
    if (p->op == OP_SETTLE) {
        module_rule_args(a, "SL.SETTLE", p->rkey, p->rkey_len, &p->rule);
        arg_str(a, "MAX_DEBT", 8);
        arg_i64(a, p->rule.max_debt);
        arg_str(a, "RESERVED", 8);
        arg_i64(a, p->reserved);
        arg_str(a, "ACTUAL", 6);
        arg_i64(a, p->actual);
        if (p->charged_ns >= 0) {
            arg_str(a, "AT", 2);
            arg_i64(a, p->charged_ns / SL_NS_PER_MS);
        }
        return;
    }
    if (p->op == OP_LEASE) {
        module_rule_args(a, "SL.LEASE", p->rkey, p->rkey_len, &p->rule);
        arg_str(a, "WANT", 4);
        arg_i64(a, p->want);
        arg_str(a, "FOR", 3);
        arg_i64(a, p->lease_ns / SL_NS_PER_MS);
        return;
    }
    if (p->op == OP_RETURN) {
        module_rule_args(a, "SL.RETURN", p->rkey, p->rkey_len, &p->rule);
        arg_str(a, "GRANTED", 7);
        arg_i64(a, p->lease.granted);
        arg_str(a, "UNUSED", 6);
        arg_i64(a, p->unused);
        arg_str(a, "AT", 2);
        arg_i64(a, p->lease.at_ns / SL_NS_PER_US);
        arg_str(a, "UNTIL", 5);
        arg_i64(a, p->lease.until_ns / SL_NS_PER_US);
        return;
    }
    if (p->op == OP_ACQUIRE) {
        module_rule_args(a, "SL.ACQUIRE", p->rkey, p->rkey_len, &p->rule);
        arg_str(a, "COST", 4);
        arg_i64(a, p->cost);
        arg_str(a, "TIMEOUT", 7);
        arg_i64(a, p->hold_ns / SL_NS_PER_MS);
        module_reserve_args(a, p);
        return;
    }
    if (p->op == OP_RELEASE) {
        module_rule_args(a, "SL.RELEASE", p->rkey, p->rkey_len, &p->rule);
        arg_str(a, "ID", 2);
        arg_i64(a, (int64_t)p->hold_id);
        module_sample_args(a, p);
        return;
    }
    module_rule_args(a, "SL.THROTTLE", p->rkey, p->rkey_len, &p->rule);
    arg_str(a, "COST", 4);
    arg_i64(a, p->cost);
    module_reserve_args(a, p);
}

/* p's command for a script, but for its closed start. */
static void lua_op_args(args_t *a, const pending_t *p, const lua_script_t *script, bool full)
{
    const sl_rule_t *r = &p->rule;
    if (full) {
        arg_str(a, "EVAL", 4);
        arg_str(a, script->text, script->len);
    } else {
        arg_str(a, "EVALSHA", 7);
        arg_str(a, script->sha1, 40);
    }
    arg_str(a, "1", 1);
    arg_str(a, p->rkey, p->rkey_len);
    arg_i64(a, r->limit);
    arg_i64(a, r->window_ns / SL_NS_PER_US);
    arg_i64(a, r->burst);
    arg_i64(a, r->buckets);
    arg_i64(a, r->max_delay_ns / SL_NS_PER_US);
    if (p->op == OP_SETTLE) {
        /* the scripts take units up to 2^53 - 1: the difference is what a settle does (a refund
         * of reserved - actual, or a charge of actual - reserved), so that is what is sent */
        int64_t back = p->reserved > p->actual ? p->reserved - p->actual : 0;
        int64_t more = p->actual > p->reserved ? p->actual - p->reserved : 0;
        arg_str(a, "settle", 6);
        arg_i64(a, back < LUA_INT_MAX ? back : LUA_INT_MAX);
        arg_i64(a, more < LUA_INT_MAX ? more : LUA_INT_MAX);
        if (p->charged_ns >= 0) {
            arg_i64(a, p->charged_ns / SL_NS_PER_US);
        } else {
            arg_str(a, "now", 3);
        }
        arg_str(a, "max_debt", 8); /* the scripts count to 2^53 - 1: more is no bound there */
        arg_i64(a, r->max_debt < LUA_INT_MAX ? r->max_debt : LUA_INT_MAX);
        return;
    }
    if (p->op == OP_LEASE) {
        arg_str(a, "lease", 5);
        arg_i64(a, p->want);
        arg_i64(a, p->lease_ns / SL_NS_PER_US);
        return;
    }
    if (p->op == OP_RETURN) {
        arg_str(a, "return", 6);
        arg_i64(a, p->lease.granted);
        arg_i64(a, p->unused);
        arg_i64(a, p->lease.at_ns / SL_NS_PER_US);
        arg_i64(a, p->lease.until_ns / SL_NS_PER_US);
        return;
    }
    if (p->op == OP_ACQUIRE) {
        arg_str(a, "acquire", 7);
        arg_i64(a, p->cost);
        arg_i64(a, p->hold_ns / SL_NS_PER_US);
        arg_i64(a, (int64_t)p->hold_id);
        return;
    }
    if (p->op == OP_RELEASE) {
        arg_str(a, "release", 7);
        arg_i64(a, (int64_t)p->hold_id);
        return;
    }
    arg_i64(a, p->cost);
}

/* SL.THROTTLE ... COST c, or SL.SETTLE ... RESERVED r ACTUAL a [AT ms]: AT names the millisecond
 * of charged_ns (the module takes its start: no later than charged_ns); then CLOSED_FROM ms when
 * p is sent with a closed start. */
void rs_module_args(args_t *a, const pending_t *p)
{
    module_op_args(a, p);
    if (p->closed_ms >= 0) {
        arg_str(a, "CLOSED_FROM", 11);
        arg_i64(a, p->closed_ms);
    }
}

/* An adaptive limit for a script (args.lua): adaptive alg min max backoff timeout_us probe, its
 * options resolved (0 where the algorithm reads none); and a release's sample latency_us (-1:
 * none) dropped. */
static void lua_adaptive_args(args_t *a, const pending_t *p)
{
    const sl_adaptive_t *ad = &p->rule.adaptive;
    const adaptive_algorithm_t *row = adaptive_row((uint64_t)(unsigned)ad->algorithm);
    if (row == NULL)
        return;
    arg_str(a, "adaptive", 8);
    arg_str(a, row->name, strlen(row->name));
    arg_i64(a, ad->min_limit);
    arg_i64(a, ad->max_limit);
    arg_i64(a, ad->backoff_pct);
    arg_i64(a, ad->timeout_ns / SL_NS_PER_US);
    arg_i64(a, ad->probe);
    if (p->op == OP_RELEASE && p->sampled) {
        arg_str(a, "sample", 6);
        arg_i64(a, p->sample.latency_ns >= 0 ? p->sample.latency_ns / SL_NS_PER_US : -1);
        arg_i64(a, p->sample.dropped ? 1 : 0);
    }
}

/* EVALSHA sha 1 rkey limit window_us burst buckets max_delay_us, then cost, or settle reserved
 * actual charged_us|now; then closed_from us when p is sent with a closed start (the module's
 * millisecond: the same instant in both modes) */
void rs_lua_args(args_t *a, const pending_t *p, const lua_script_t *script, bool full)
{
    lua_op_args(a, p, script, full);
    if (p->closed_ms >= 0) {
        arg_str(a, "closed_from", 11);
        arg_i64(a, p->closed_ms * (SL_NS_PER_MS / SL_NS_PER_US));
    }
    if (p->reserve > 0 && !p->beyond && (p->op == OP_DECIDE || p->op == OP_ACQUIRE)) {
        arg_str(a, "reserve", 7); /* the scripts take units up to 2^53 - 1 */
        arg_i64(a, p->reserve < LUA_INT_MAX ? p->reserve : LUA_INT_MAX);
    }
    lua_adaptive_args(a, p);
}
