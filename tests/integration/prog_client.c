/*
 * prog_client.c - libsluice-client against a running sluiced (run by test_client.sh).
 *
 *   prog_client PORT PASSWORD
 *
 * The server must have the rule `tight` (sliding_log, limit 2, window 1h) and require
 * PASSWORD. Exercises, blocking: AUTH (right and wrong), allow until denied, the over-limit
 * cache (the second denial is answered locally: the client's hit counter goes up and INFO's
 * total_commands_processed does not), peek, reset, a cost that can never be
 * admitted, an unknown rule; non-blocking on a libuv loop: pipelined allows answered in
 * order, a cached denial answered from the loop, reset, peek, close. Then settles, blocking
 * and not, on a rule `tokens` it makes (sliding_log, 1000 an hour): reserve 300 (700 left),
 * settle 300 -> 120 (880 left), settle 100 -> 1100 (in debt: denied); and a refusal cached by
 * the client that a settle giving units back ends, so that the next allow goes to the server
 * (INFO counts it, the hit counter does not) and is admitted. Prints one "ok" or "not ok" line
 * per check; exits 0 when all passed.
 */
#include "prog_common.h"

static void print_decision(const char *what, int rc, const slc_decision_t *d)
{
    fprintf(stderr,
            "# %s: rc=%d allowed=%d limit=%" PRId64 " remaining=%" PRId64 " retry_after_ms=%" PRId64
            " reset_after_ms=%" PRId64 " from_cache=%d\n",
            what, rc, d->allowed, d->limit, d->remaining, d->retry_after_ms, d->reset_after_ms,
            d->from_cache);
}

static void blocking(void)
{
    slc_client_t *bad = slc_connect("127.0.0.1", port, "wrong-password", 2000);
    CHECK(slc_err(bad) == SLC_ESERVER, "a wrong password is refused (%s)", slc_errstr(bad));
    slc_free(bad);
    slc_client_t *none = slc_connect("127.0.0.1", port, NULL, 2000);
    slc_decision_t d = {0};
    int rc = slc_allow(none, "tight", "k", 1, &d);
    CHECK(rc == SLC_ESERVER && strncmp(slc_errstr(none), "NOAUTH", 6) == 0,
          "without AUTH a decision is refused with NOAUTH (%s)", slc_errstr(none));
    slc_free(none);

    slc_client_t *c = connect_or_die(2000);

    rc = slc_allow(c, "tight", "k1", 1, &d);
    print_decision("allow 1", rc, &d);
    CHECK(rc == SLC_OK && d.allowed && d.limit == 2 && d.remaining == 1 && d.retry_after_ms == 0,
          "first allow: admitted, 1 of 2 left");
    rc = slc_allow(c, "tight", "k1", 1, &d);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 0, "second allow: admitted, 0 left");
    rc = slc_allow(c, "tight", "k1", 1, &d);
    print_decision("allow 3", rc, &d);
    CHECK(rc == SLC_OK && !d.allowed && d.retry_after_ms > 0 && !d.from_cache,
          "third allow: denied by the server with a retry time");
    int64_t retry = d.retry_after_ms;

    long long cmds_before = info_field(c, "total_commands_processed");
    rc = slc_allow(c, "tight", "k1", 1, &d);
    print_decision("allow 4", rc, &d);
    CHECK(rc == SLC_OK && !d.allowed && d.from_cache && d.retry_after_ms <= retry &&
              d.retry_after_ms > 0 && d.limit == 2,
          "fourth allow: denied from the cache");
    CHECK(slc_cache_hits(c) == 1, "the client counted one cache hit (%" PRIu64 ")",
          slc_cache_hits(c));
    long long cmds_after = info_field(c, "total_commands_processed");
    CHECK(cmds_before > 0 && cmds_after == cmds_before + 1,
          "INFO total_commands_processed %lld -> %lld: only the second INFO reached the server",
          cmds_before, cmds_after);

    rc = slc_peek(c, "tight", "k1", &d);
    print_decision("peek", rc, &d);
    CHECK(rc == SLC_OK && !d.from_cache && d.remaining == 0 && d.limit == 2,
          "peek asks the server: nothing left");
    rc = slc_reset(c, "tight", "k1");
    CHECK(rc == SLC_OK, "reset (%s)", slc_errstr(c));
    rc = slc_allow(c, "tight", "k1", 1, &d);
    CHECK(rc == SLC_OK && d.allowed && !d.from_cache && d.remaining == 1,
          "after reset: admitted by the server, 1 left");

    rc = slc_allow(c, "tight", "k2", 5, &d);
    CHECK(rc == SLC_ESERVER &&
              strcmp(slc_errstr(c),
                     "ERR cost 5 exceeds what rule 'tight' can ever admit (2 per window)") == 0,
          "a cost above the limit is the server's error (%s)", slc_errstr(c));
    uint64_t hits = slc_cache_hits(c);
    rc = slc_allow(c, "tight", "k2", 5, &d);
    CHECK(rc == SLC_ESERVER && slc_cache_hits(c) == hits, "... and not cached");

    rc = slc_allow(c, "nope", "k", 1, &d);
    CHECK(rc == SLC_ESERVER && strcmp(slc_errstr(c), "ERR unknown rule 'nope'") == 0,
          "unknown rule: the server's error as sent (%s)", slc_errstr(c));
    rc = slc_allow(c, "tight", "k3", 0, &d);
    CHECK(rc == SLC_OK && d.allowed, "cost 0 is a peek (%s)", slc_errstr(c));
    slc_free(c);
}

/* Makes the rule `tokens`: 1000 an hour, exact (an hour: no count crosses its end mid-test). */
static void make_tokens_rule(slc_client_t *c)
{
    set_rule(c, "tokens", "{\"algorithm\":\"sliding_log\",\"limit\":1000,\"window\":\"1h\"}");
}

static void blocking_settle(void)
{
    slc_client_t *c = connect_or_die(2000);
    make_tokens_rule(c);
    slc_decision_t d = {0};
    int rc = slc_allow(c, "tokens", "u42", 300, &d);
    CHECK(rc == SLC_OK && d.allowed && d.limit == 1000 && d.remaining == 700,
          "reserve 300: 700 left");
    rc = slc_settle(c, "tokens", "u42", 300, 120, -1, &d);
    print_decision("settle 300 120", rc, &d);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 880 && d.retry_after_ms == 0 && !d.from_cache,
          "settle 300 -> 120: 180 back, 880 left");
    rc = slc_settle(c, "tokens", "u42", 100, 1100, -1, &d);
    print_decision("settle 100 1100", rc, &d);
    CHECK(rc == SLC_OK && !d.allowed && d.remaining == 0 && d.retry_after_ms > 0,
          "settle 100 -> 1100: in debt, denied");
    rc = slc_allow(c, "tokens", "u42", 1, &d);
    CHECK(rc == SLC_OK && !d.allowed && !d.from_cache, "in debt: an allow is denied");
    rc = slc_settle(c, "tokens", "u42", -1, 0, -1, &d);
    CHECK(rc == SLC_EINVAL, "a negative reserved is refused before sending (%s)", slc_errstr(c));
    rc = slc_settle(c, "nope", "u42", 1, 0, -1, &d);
    CHECK(rc == SLC_ESERVER && strcmp(slc_errstr(c), "ERR unknown rule 'nope'") == 0,
          "settle of an unknown rule: the server's error as sent (%s)", slc_errstr(c));

    /* the cache meets a settle: a cached refusal, then units given back */
    rc = slc_allow(c, "tokens", "m1", 1000, &d);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 0, "m1: take all 1000");
    rc = slc_allow(c, "tokens", "m1", 300, &d);
    CHECK(rc == SLC_OK && !d.allowed && !d.from_cache, "m1: 300 more denied by the server");
    uint64_t hits = slc_cache_hits(c);
    rc = slc_allow(c, "tokens", "m1", 300, &d);
    CHECK(rc == SLC_OK && !d.allowed && d.from_cache && slc_cache_hits(c) == hits + 1,
          "m1: ... and then by the cache");
    long long cmds_before = info_field(c, "total_commands_processed");
    rc = slc_settle(c, "tokens", "m1", 1000, 200, -1, &d);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 800, "m1: settle 1000 -> 200, 800 left");
    rc = slc_allow(c, "tokens", "m1", 300, &d);
    print_decision("allow after settle", rc, &d);
    CHECK(rc == SLC_OK && d.allowed && !d.from_cache && d.remaining == 500 &&
              slc_cache_hits(c) == hits + 1,
          "m1: the next allow of 300 goes to the server and is admitted, 500 left");
    long long cmds_after = info_field(c, "total_commands_processed");
    CHECK(cmds_before > 0 && cmds_after == cmds_before + 3,
          "INFO total_commands_processed %lld -> %lld: the settle, the allow and INFO", cmds_before,
          cmds_after);
    slc_free(c);
}

/* ---- non-blocking ------------------------------------------------------------------------ */

static uint64_t async_hits; /* the handle's hit counter, read before it is closed */

static void on_last(slc_async_t *ac, int status, const slc_decision_t *d, void *arg)
{
    on_decision(ac, status, d, arg);
    async_hits = slc_async_cache_hits(ac);
    slc_async_close(ac);
}

static void nonblocking(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac = async_connect_or_die(&loop);
    ASYNC(slc_async_allow(ac, "tight", "a1", 1, on_decision, &results[0]));
    ASYNC(slc_async_allow(ac, "tight", "a1", 1, on_decision, &results[1]));
    ASYNC(slc_async_allow(ac, "tight", "a1", 1, on_decision, &results[2]));
    while (!results[2].done)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK(results[0].status == SLC_OK && results[0].d.allowed && results[0].d.remaining == 1,
          "pipelined 1: admitted, 1 left");
    CHECK(results[1].status == SLC_OK && results[1].d.allowed && results[1].d.remaining == 0,
          "pipelined 2: admitted, 0 left");
    CHECK(results[2].status == SLC_OK && !results[2].d.allowed && results[2].d.retry_after_ms > 0,
          "pipelined 3: denied");
    CHECK(order[0] == 0 && order[1] == 1 && order[2] == 2, "callbacks in request order");

    ASYNC(slc_async_allow(ac, "tight", "a1", 1, on_decision, &results[3]));
    CHECK(!results[3].done, "a cached answer waits for the loop");
    ASYNC(slc_async_reset(ac, "tight", "a1", on_done, &results[4]));
    ASYNC(slc_async_peek(ac, "tight", "a1", on_decision, &results[5]));
    ASYNC(slc_async_allow(ac, "tight", "a1", 2, on_last, &results[6]));
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(results[3].status == SLC_OK && results[3].d.from_cache && !results[3].d.allowed,
          "async: the fourth allow is denied from the cache");
    CHECK(async_hits == 1, "async: one cache hit counted (%" PRIu64 ")", async_hits);
    CHECK(results[4].status == SLC_OK, "async reset");
    CHECK(results[5].status == SLC_OK && results[5].d.remaining == 2,
          "async peek after reset: 2 left");
    CHECK(results[6].status == SLC_OK && results[6].d.allowed && results[6].d.remaining == 0,
          "async allow cost 2 after reset: admitted");
    CHECK(norder == 7 && order[3] == 3 && order[6] == 6, "every callback once, in order");
    CHECK(uv_loop_close(&loop) == 0, "the client closed all its handles");
}

static void on_close_after(slc_async_t *ac, int status, const slc_decision_t *d, void *arg)
{
    on_decision(ac, status, d, arg);
    slc_async_close(ac);
}

static void nonblocking_settle(void)
{
    memset(results, 0, sizeof results);
    norder = 0;
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac = async_connect_or_die(&loop);
    /* the worked example, pipelined */
    ASYNC(slc_async_allow(ac, "tokens", "a42", 300, on_decision, &results[0]));
    ASYNC(slc_async_settle(ac, "tokens", "a42", 300, 120, -1, on_decision, &results[1]));
    ASYNC(slc_async_settle(ac, "tokens", "a42", 100, 1100, -1, on_decision, &results[2]));
    wait_done(&loop, &results[2]);
    CHECK(results[0].status == SLC_OK && results[0].d.allowed && results[0].d.remaining == 700,
          "async: reserve 300, 700 left");
    CHECK(results[1].status == SLC_OK && results[1].d.allowed && results[1].d.remaining == 880,
          "async: settle 300 -> 120, 880 left");
    CHECK(results[2].status == SLC_OK && !results[2].d.allowed && results[2].d.remaining == 0 &&
              results[2].d.retry_after_ms > 0,
          "async: settle 100 -> 1100, in debt: denied");

    /* a cached refusal, then a settle that gives units back */
    memset(results, 0, sizeof results);
    ASYNC(slc_async_allow(ac, "tokens", "am", 1000, on_decision, &results[0]));
    ASYNC(slc_async_allow(ac, "tokens", "am", 300, on_decision, &results[1]));
    wait_done(&loop, &results[1]);
    CHECK(results[1].status == SLC_OK && !results[1].d.allowed && !results[1].d.from_cache,
          "async am: 300 more denied by the server");
    ASYNC(slc_async_allow(ac, "tokens", "am", 300, on_decision, &results[2]));
    wait_done(&loop, &results[2]);
    CHECK(results[2].d.from_cache && slc_async_cache_hits(ac) == 1,
          "async am: ... and then by the cache");
    ASYNC(slc_async_settle(ac, "tokens", "am", 1000, 200, -1, on_decision, &results[3]));
    ASYNC(slc_async_allow(ac, "tokens", "am", 300, on_close_after, &results[4]));
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(results[3].status == SLC_OK && results[3].d.allowed && results[3].d.remaining == 800,
          "async am: settle 1000 -> 200, 800 left");
    CHECK(results[4].status == SLC_OK && results[4].d.allowed && !results[4].d.from_cache &&
              results[4].d.remaining == 500,
          "async am: the allow sent after the settle goes to the server and is admitted");
    CHECK(uv_loop_close(&loop) == 0, "the client closed all its handles");
}

int main(int argc, char **argv)
{
    prog_args(argc, argv, "prog_client");
    blocking();
    nonblocking();
    blocking_settle();
    nonblocking_settle();
    return prog_end();
}
