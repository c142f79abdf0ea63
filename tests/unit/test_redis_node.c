/*
 * test_redis_node.c - what a probe of a Redis node tells the Redis store (white box:
 * store/redis_store_impl.h), with no Redis:
 *   - rs_probe_run_id: INFO server's run_id (40 hex digits), "" when the reply has none;
 *   - rs_node_probed: the first probe of a node records its mode and run_id and closes nothing;
 *     a later one that finds another run_id (the data lost: a restart, a failover behind the
 *     address) or another mode (the keys under other names) closes the node from its time, and
 *     says so once; a probe that learnt nothing (a lost connection, INFO refused) changes
 *     nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/redis_store_impl.h"

#define RUN_A "0123456789abcdef0123456789abcdef01234567"
#define RUN_B "fedcba9876543210fedcba9876543210fedcba98"

static redisReply text_reply(const char *text)
{
    return (redisReply){.type = REDIS_REPLY_STRING, .str = (char *)text, .len = strlen(text)};
}

static void test_run_id(void **unused)
{
    (void)unused;
    char out[RUN_ID_MAX + 1];
    redisReply r = text_reply("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"
                              "run_id:" RUN_A "\r\ntcp_port:6379\r\n");
    rs_probe_run_id(&r, out);
    assert_string_equal(out, RUN_A);
    r = text_reply("# Server\r\nredis_version:7.0.15\r\n"); /* none */
    rs_probe_run_id(&r, out);
    assert_string_equal(out, "");
    r = text_reply("# Server\r\nrun_id:abc\r\n"); /* not 40 hex digits */
    rs_probe_run_id(&r, out);
    assert_string_equal(out, "");
    r = text_reply("# Server\r\nrun_id:" RUN_A "0\r\n"); /* 41 */
    rs_probe_run_id(&r, out);
    assert_string_equal(out, "");
    r = text_reply("# Server\r\nmaster_run_id:" RUN_A "\r\n"); /* another field */
    rs_probe_run_id(&r, out);
    assert_string_equal(out, "");
    r = (redisReply){.type = REDIS_REPLY_ERROR, .str = "ERR unknown command 'INFO'", .len = 26};
    rs_probe_run_id(&r, out);
    assert_string_equal(out, "");
    rs_probe_run_id(NULL, out);
    assert_string_equal(out, "");
}

static redis_shared_t *shared_new(void)
{
    redis_shared_t *sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    pthread_mutex_init(&sh->lock, NULL);
    sh->start_mode = REDIS_MODE_MODULE;
    return sh;
}

static void test_node_probed(void **unused)
{
    (void)unused;
    redis_shared_t *sh = shared_new();
    shared_node_t *n = rs_shared_node(sh, "127.0.0.1:6379");
    assert_non_null(n);
    /* the first probe: records; a mode other than the start's is news, but closes nothing (no
     * decision was sent to the node in the start's mode before its probe answered) */
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_LUA, RUN_A, 100), REDIS_NODE_MODE);
    assert_int_equal(atomic_load(&n->closed_ns), 0);
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_LUA, RUN_A, 200), 0); /* the same Redis */
    /* nothing learnt (a connection lost before the answers): nothing changes */
    assert_int_equal(rs_node_probed(sh, n, 0, "", 300), 0);
    assert_int_equal(atomic_load(&n->closed_ns), 0);
    /* another run_id: its data is lost */
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_LUA, RUN_B, 400),
                     REDIS_NODE_LOST | REDIS_NODE_CLOSED);
    assert_int_equal(atomic_load(&n->closed_ns), 400);
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_LUA, RUN_B, 500), 0); /* told once */
    assert_int_equal(atomic_load(&n->closed_ns), 400);
    /* another mode, the same Redis (MODULE LOAD): its keys are under other names */
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_MODULE, RUN_B, 600),
                     REDIS_NODE_MODE | REDIS_NODE_CLOSED);
    assert_int_equal(atomic_load(&n->closed_ns), 600);
    assert_int_equal(atomic_load(&n->mode), REDIS_MODE_MODULE);
    /* INFO refused (a renamed command): the run_id is not known, so nothing is lost */
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_MODULE, "", 700), 0);
    assert_int_equal(rs_node_probed(sh, n, REDIS_MODE_MODULE, RUN_B, 800), 0);
    /* a node whose first probe finds the start's mode: no news at all */
    shared_node_t *m = rs_shared_node(sh, "127.0.0.1:6380");
    assert_int_equal(rs_node_probed(sh, m, REDIS_MODE_MODULE, RUN_A, 900), 0);
    assert_int_equal(rs_node_probed(sh, m, REDIS_MODE_MODULE, RUN_B, 1000),
                     REDIS_NODE_LOST | REDIS_NODE_CLOSED);
    assert_int_equal(atomic_load(&m->closed_ns), 1000);
    assert_int_equal(atomic_load(&n->closed_ns), 600); /* per node */
    pthread_mutex_destroy(&sh->lock);
    free(sh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_id),
        cmocka_unit_test(test_node_probed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
