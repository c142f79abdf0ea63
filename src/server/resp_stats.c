/*
 * resp_stats.c - what the console reads over RESP:
 *
 *   SL.TOP rule [N] [DENIED]   the rule's heaviest keys of the last minute, by decisions (or by
 *                              denials, shadow denials included): an array of [key, count,
 *                              error] triples, most first; N 1..100, default 10
 *
 * A read: no admin needed. Keys longer than TOPK_KEY_INLINE bytes are counted whole and shown by
 * their first TOPK_KEY_INLINE bytes.
 */
#include <stdlib.h>

#include "server/resp_commands.h"
#include "engine/watch.h"

#define TOP_DEFAULT 10

/* Parses [N] [DENIED] from argv[2..argc). false when it replied an error. */
static bool parse_top(conn_t *c, resp_arg_t *argv, size_t argc, int64_t *n, bool *denied)
{
    size_t i = 2;
    if (i < argc && !resp_arg_is(&argv[i], "denied")) {
        if (!resp_arg_i64(&argv[i], n) || *n < 1 || *n > WATCH_TOP_MAX) {
            resp_add_error(&c->out, "ERR count must be an integer from 1 to %d", WATCH_TOP_MAX);
            return false;
        }
        i++;
    }
    if (i < argc && resp_arg_is(&argv[i], "denied")) {
        *denied = true;
        i++;
    }
    if (i < argc) {
        resp_reply_syntax(c);
        return false;
    }
    return true;
}

void resp_cmd_top(conn_t *c, resp_arg_t *argv, size_t argc)
{
    int64_t n = TOP_DEFAULT;
    bool denied = false;
    if (argc > 4) {
        resp_reply_wrong_arity(c, &argv[0]);
        return;
    }
    if (!parse_top(c, argv, argc, &n, &denied)) {
        return;
    }
    rule_state_t *rs = engine_find(c->loop->worker, argv[1].ptr, argv[1].len);
    if (rs == NULL) {
        char b[72];
        resp_add_error(&c->out, "ERR unknown rule '%s'", resp_show(&argv[1], b));
        return;
    }
    topk_item_t items[WATCH_TOP_MAX];
    uint64_t total;
    long got = engine_top(rs, denied, c->loop->now_ns, (size_t)n, items, &total);
    if (got < 0) {
        resp_add_error(&c->out, "ERR out of memory");
        return;
    }
    resp_add_array(&c->out, (size_t)got);
    for (long i = 0; i < got; i++) {
        size_t len = items[i].key_len < TOPK_KEY_INLINE ? items[i].key_len : TOPK_KEY_INLINE;
        resp_add_array(&c->out, 3);
        resp_add_bulk(&c->out, items[i].key, len);
        resp_add_int(&c->out, (int64_t)items[i].count);
        resp_add_int(&c->out, (int64_t)items[i].error);
    }
}
