/*
 * redis_allowall.c - SL.ALLOWALL in one step inside Redis (redis_store_decide_all in
 * redis_store.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include "core/algorithms.h"
#include "proto/buf.h"
#include "store/lua_scripts.h"
#include "remote/overlimit_cache.h"
#include "store/redis_store_impl.h"

/* ---- SL.ALLOWALL in one step ---------------------------------------------------------------- */

/*
 * All-or-nothing over pairs whose keys share a slot, atomically: one EVAL running the module's
 * commands. KEYS are the pairs' keys; ARGV[1] the cost, then 8 values per pair: algorithm,
 * limit, window_ms, burst ('-' = none), buckets ('-'), max_delay_ms, shadow (1 = a refusal does
 * not block the others), the closed start its commands name ('-' = none: CLOSED_FROM). Peeks every
 * pair; one that cannot take the cost by the peek is decided for real (a delayed admission can
 * still admit it). The first refused ends it: what was charged so far is given back (SL.SETTLE ...
 * ACTUAL 0, at the same time: exact) and the reply is {i, then 5 integers per pair}: pair i's
 * refusal, and each other pair as it stands alone: its peek when the cost fits (a shadow rule's
 * pair: its peek), else its own refusal (a delayed admission in its place is given back at once,
 * and answered by the peek).
 * Otherwise every pair is charged: {0, 5 integers per pair}.
 */
static const char allowall_script[] =
    "local cost = ARGV[1]\n"
    "local function call(name, i, ...)\n"
    "  local b = 1 + (i - 1) * 8\n"
    "  local a = {name, KEYS[i], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]}\n"
    "  if ARGV[b + 4] ~= '-' then a[#a + 1] = 'BURST'; a[#a + 1] = ARGV[b + 4] end\n"
    "  if ARGV[b + 5] ~= '-' then a[#a + 1] = 'BUCKETS'; a[#a + 1] = ARGV[b + 5] end\n"
    "  if ARGV[b + 6] ~= '0' then a[#a + 1] = 'MAX_DELAY'; a[#a + 1] = ARGV[b + 6] end\n"
    "  for _, v in ipairs({...}) do a[#a + 1] = v end\n"
    "  if ARGV[b + 8] ~= '-' then a[#a + 1] = 'CLOSED_FROM'; a[#a + 1] = ARGV[b + 8] end\n"
    "  return redis.call(unpack(a))\n"
    "end\n"
    "local charged = {}\n"
    "for i = 1, #KEYS do\n"
    "  if ARGV[1 + (i - 1) * 8 + 7] == '0' then\n"
    "    local p = call('SL.PEEK', i)\n"
    "    if p[3] < tonumber(cost) then\n"
    "      local d = call('SL.THROTTLE', i, 'COST', cost)\n"
    "      if d[1] == 0 then\n"
    "        for j in pairs(charged) do call('SL.SETTLE', j, 'RESERVED', cost, 'ACTUAL', '0') end\n"
    "        local out = {i}\n"
    "        for k = 1, #KEYS do\n"
    "          local e = d\n"
    "          if k ~= i then\n"
    "            e = call('SL.PEEK', k)\n"
    "            local shadow = ARGV[1 + (k - 1) * 8 + 7] == '1'\n"
    "            if not shadow and tonumber(cost) > 0 and (e[1] == 0 or e[3] < tonumber(cost)) "
    "then\n"
    "              local t = call('SL.THROTTLE', k, 'COST', cost)\n"
    "              if t[1] == 0 then e = t\n"
    "              else call('SL.SETTLE', k, 'RESERVED', cost, 'ACTUAL', '0') end\n"
    "            end\n"
    "          end\n"
    "          for j = 1, 5 do out[#out + 1] = e[j] end\n"
    "        end\n"
    "        return out\n"
    "      end\n"
    "      charged[i] = d\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local out = {0}\n"
    "for i = 1, #KEYS do\n"
    "  local d = charged[i] or call('SL.THROTTLE', i, 'COST', cost)\n"
    "  for j = 1, 5 do out[#out + 1] = d[j] end\n"
    "end\n"
    "return out\n";

typedef struct all_op {
    redis_store_t *store;
    int node; /* where it was sent */
    redis_all_fn fn;
    void *arg;
    size_t n;
    int64_t cost;
} all_op_t;

static void on_all(void *arg, redisReply *r, const char *err)
{
    all_op_t *op = arg;
    sl_decision_t d[REDIS_ALL_MAX];
    char msg[REDIS_STORE_ERR_MAX];
    long refused = -1;
    const char *fail = err;
    int status = -1;
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        snprintf(msg, sizeof msg, "redis: %s", r->str);
        fail = msg;
        static const char gone[] = "ERR unknown redis command called from script";
        if (strncasecmp(r->str, gone, sizeof gone - 1) == 0) {
            /* the node lost the module: its first call failed, so nothing was written; learn
             * its mode for the next ones, and let the caller decide step by step */
            rs_probe(op->store, op->node);
            status = REDIS_ALL_RETRY;
        }
    } else if (r != NULL) {
        size_t want = 0;
        bool ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 6;
        for (size_t i = 0; ok && i < r->elements; i++) {
            ok = r->element[i]->type == REDIS_REPLY_INTEGER;
        }
        if (ok) {
            refused = (long)r->element[0]->integer - 1;
            want = 1 + 5 * op->n;
            ok = r->elements == want && refused < (long)op->n;
        }
        for (size_t k = 0; ok && k < (want - 1) / 5; k++) {
            redisReply sub = {
                .type = REDIS_REPLY_ARRAY, .elements = 5, .element = r->element + 1 + 5 * k};
            ok = rs_parse_decision(&sub, REDIS_MODE_MODULE, &d[k]);
        }
        fail = ok ? NULL : "redis: unexpected reply to SL.ALLOWALL";
    }
    if (fail != NULL) {
        op->fn(op->arg, status, NULL, 0, -1, fail);
    } else {
        op->fn(op->arg, 0, d, op->n, refused, NULL);
    }
    free(op);
}

int redis_store_decide_all(redis_store_t *s, const redis_pair_t *pairs, size_t n, int64_t cost,
                           int64_t now_ns, redis_all_fn fn, void *arg)
{
    if (n == 0 || n > REDIS_ALL_MAX) {
        return -1;
    }
    char rkeys[REDIS_ALL_MAX][RKEY_MAX]; /* ~74 KB of the loop thread's stack */
    char nums[REDIS_ALL_MAX][7][24];
    const char *argv[3 + REDIS_ALL_MAX * 9 + 1];
    size_t len[3 + REDIS_ALL_MAX * 9 + 1];
    char narg[24], costarg[24];
    int argc = 0;
    unsigned slot = 0;
    argv[argc] = "EVAL";
    len[argc++] = 4;
    argv[argc] = allowall_script;
    len[argc++] = sizeof allowall_script - 1;
    argv[argc] = narg;
    len[argc++] = (size_t)snprintf(narg, sizeof narg, "%zu", n);
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *r = pairs[i].rule;
        size_t k = rs_key(pairs[i].name, r, REDIS_MODE_MODULE, pairs[i].key, pairs[i].key_len,
                          rkeys[i], RKEY_MAX);
        if (k == 0 || r->window_ns % SL_NS_PER_MS != 0 || r->max_delay_ns % SL_NS_PER_MS != 0 ||
            cost > r->capacity) {
            return -1; /* the step-by-step path answers these */
        }
        unsigned sl = rc_key_slot(rkeys[i], k);
        if (i > 0 && sl != slot && rc_is_cluster(s->client)) {
            return -1; /* not one slot: no atomic script across shards */
        }
        slot = sl;
        argv[argc] = rkeys[i];
        len[argc++] = k;
    }
    argv[argc] = costarg;
    len[argc++] = (size_t)snprintf(costarg, sizeof costarg, "%lld", (long long)cost);
    int node = rc_key_node(s->client, rkeys[0], strlen(rkeys[0]));
    if (rs_node_mode(s, node) != REDIS_MODE_MODULE) {
        return -1; /* the scripts cannot call each other: the step-by-step path */
    }
    for (size_t i = 0; i < n; i++) {
        const sl_rule_t *r = pairs[i].rule;
        const core_algorithm_t *row = core_algorithm(r->algorithm);
        const char *alg = sl_algorithm_name(r->algorithm);
        argv[argc] = alg;
        len[argc++] = strlen(alg);
        int64_t v[7] = {r->limit,
                        r->window_ns / SL_NS_PER_MS,
                        row->burst.taken ? r->burst : -1,
                        row->buckets.taken ? r->buckets : -1,
                        r->max_delay_ns / SL_NS_PER_MS,
                        pairs[i].shadow ? 1 : 0,
                        rs_closed_ms(s, node, pairs[i].closed_ns, r, now_ns)};
        for (int j = 0; j < 7; j++) {
            if ((j == 2 || j == 3 || j == 6) && v[j] < 0) {
                argv[argc] = "-";
                len[argc++] = 1;
                continue;
            }
            argv[argc] = nums[i][j];
            len[argc++] = (size_t)snprintf(nums[i][j], sizeof nums[i][j], "%lld", (long long)v[j]);
        }
    }
    all_op_t *op = malloc(sizeof *op);
    if (op == NULL) {
        return -1;
    }
    *op = (all_op_t){.store = s, .node = node, .fn = fn, .arg = arg, .n = n, .cost = cost};
    atomic_fetch_add_explicit(&s->stats.decisions, 1, memory_order_relaxed);
    if (!rs_format_args(s, argc, argv, len) || rs_send_cmd(s, node, on_all, op) != 0) {
        rs_trim_cmd(s);
        free(op);
        return -1;
    }
    return 0;
}
