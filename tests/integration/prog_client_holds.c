/*
 * prog_client_holds.c - libsluice-client's in-flight calls against a running sluiced (run by
 * test_client.sh).
 *
 *   prog_client_holds PORT PASSWORD
 *
 * The server must require PASSWORD and have the rule `tight` (sliding_log); the program makes
 * `jobs` (concurrency, limit 3, hold_timeout 1h). Blocking: three acquires are held and the
 * fourth refused (the limit), a refusal asked again goes to the server again (INFO counts it,
 * the client's cache hit counter stays 0), a release frees exactly its hold (one acquire fits
 * after it, the next does not), a second release of the same id is SLC_ENOHOLD with the server's
 * text and frees nothing, ids never made are SLC_ENOHOLD too, a hold of a short TIMEOUT expires
 * and frees its slot (polled, bounded; its release is then SLC_ENOHOLD), the arguments refused
 * before sending and the server's errors, and a release ends a refusal the cache keeps for
 * SL.ALLOW. Non-blocking on a libuv loop: the same, pipelined, callbacks in request order.
 * Prints one "ok" or "not ok" line per check; exits 0 when all passed.
 */
#include <time.h>

#include "prog_common.h"

#define POLL_TRIES 400 /* 50 ms apart: a hold of 100 ms has 20 s to expire, on a loaded machine */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Units held on (jobs, key) as the server reports them (limit - remaining of a peek), or -1. */
static int64_t held(slc_client_t *c, const char *key)
{
    slc_decision_t d;
    return slc_peek(c, "jobs", key, &d) == SLC_OK ? d.limit - d.remaining : -1;
}

static void blocking_limit_and_release(slc_client_t *c)
{
    slc_decision_t d;
    uint64_t id[4] = {0};
    for (int i = 0; i < 3; i++) {
        int rc = slc_acquire(c, "jobs", "k1", 1, 0, &d, &id[i]);
        CHECK(rc == SLC_OK && d.allowed && d.limit == 3 && d.remaining == 2 - i && id[i] != 0 &&
                  !d.from_cache,
              "acquire %d: held, %d left, id %" PRIu64, i + 1, 2 - i, id[i]);
    }
    CHECK(id[0] != id[1] && id[1] != id[2] && id[0] != id[2], "three different ids");
    id[3] = 99;
    int rc = slc_acquire(c, "jobs", "k1", 1, 0, &d, &id[3]);
    CHECK(rc == SLC_OK && !d.allowed && id[3] == 0 && d.retry_after_ms > 0 && !d.from_cache,
          "acquire 4: refused, no hold, retry after %" PRId64 " ms", d.retry_after_ms);
    long long before = info_field(c, "total_commands_processed");
    uint64_t again = 99;
    rc = slc_acquire(c, "jobs", "k1", 1, 0, &d, &again);
    long long after = info_field(c, "total_commands_processed");
    CHECK(rc == SLC_OK && !d.allowed && !d.from_cache && again == 0,
          "the refusal asked again is the server's again");
    CHECK(before > 0 && after == before + 2,
          "INFO total_commands_processed %lld -> %lld: the acquire and INFO reached the server",
          before, after);
    CHECK(slc_cache_hits(c) == 0, "no acquire was a cache hit (%" PRIu64 ")", slc_cache_hits(c));

    rc = slc_release(c, "jobs", "k1", id[1]);
    CHECK(rc == SLC_OK && slc_err(c) == SLC_OK, "release of hold 2 (%s)", slc_errstr(c));
    CHECK(held(c, "k1") == 2, "the release freed exactly one unit: 2 held (%" PRId64 ")",
          held(c, "k1"));
    uint64_t id5 = 0;
    rc = slc_acquire(c, "jobs", "k1", 1, 0, &d, &id5);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 0 && id5 != 0 && id5 != id[1],
          "one acquire fits after it, with a new id");
    rc = slc_acquire(c, "jobs", "k1", 1, 0, &d, &again);
    CHECK(rc == SLC_OK && !d.allowed, "and the next one does not");

    rc = slc_release(c, "jobs", "k1", id[1]);
    CHECK(rc == SLC_ENOHOLD && slc_err(c) == SLC_ENOHOLD &&
              strncmp(slc_errstr(c), "ERR no such hold:", 17) == 0,
          "a second release of hold 2: SLC_ENOHOLD (%s)", slc_errstr(c));
    CHECK(held(c, "k1") == 3, "... and it freed nothing: 3 held (%" PRId64 ")", held(c, "k1"));
    CHECK(slc_release(c, "jobs", "k1", 0) == SLC_ENOHOLD, "release of id 0: SLC_ENOHOLD");
    CHECK(slc_release(c, "jobs", "k2", id[0]) == SLC_ENOHOLD,
          "release of another key's id: SLC_ENOHOLD");
    long long sent = info_field(c, "total_commands_processed");
    rc = slc_release(c, "jobs", "k1", UINT64_MAX);
    char why[SLC_ERRSTR_MAX];
    snprintf(why, sizeof why, "%s", slc_errstr(c));
    CHECK(rc == SLC_EINVAL && info_field(c, "total_commands_processed") == sent + 1,
          "release of id 2^64-1: SLC_EINVAL, nothing sent (%s)", why);
    CHECK(held(c, "k1") == 3, "none of them freed anything: 3 held");
    for (int i = 0; i < 3; i++)
        if (i != 1)
            CHECK(slc_release(c, "jobs", "k1", id[i]) == SLC_OK, "release hold %d", i + 1);
    CHECK(slc_release(c, "jobs", "k1", id5) == SLC_OK, "release the last hold");
    CHECK(held(c, "k1") == 0, "every unit back: 0 held (%" PRId64 ")", held(c, "k1"));
}

static void blocking_expiry(slc_client_t *c)
{
    slc_decision_t d;
    uint64_t id = 0, other = 0;
    int rc = slc_acquire(c, "jobs", "k3", 3, 100, &d, &id);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 0 && id != 0,
          "acquire 3 units with TIMEOUT 100: held");
    int tries = 0;
    while (held(c, "k3") != 0 && ++tries < POLL_TRIES)
        sleep_ms(50);
    CHECK(held(c, "k3") == 0, "the hold expired and freed its units (polled %d times)", tries);
    rc = slc_acquire(c, "jobs", "k3", 3, 0, &d, &other);
    CHECK(rc == SLC_OK && d.allowed && other != 0, "3 units fit again");
    rc = slc_release(c, "jobs", "k3", id);
    CHECK(rc == SLC_ENOHOLD, "the expired hold's release: SLC_ENOHOLD (%s)", slc_errstr(c));
    CHECK(held(c, "k3") == 3, "... freeing nothing: 3 held");
    CHECK(slc_release(c, "jobs", "k3", other) == SLC_OK, "release the new hold");
}

static void blocking_errors(slc_client_t *c)
{
    slc_decision_t d = {.limit = 77};
    uint64_t id = 77;
    CHECK(slc_acquire(c, "jobs", "k4", -1, 0, &d, &id) == SLC_EINVAL &&
              strcmp(slc_errstr(c), "cost must be >= 0") == 0,
          "a negative cost is refused before sending (%s)", slc_errstr(c));
    CHECK(slc_acquire(c, "jobs", "k4", 1, -5, &d, &id) == SLC_EINVAL,
          "a negative timeout is refused before sending (%s)", slc_errstr(c));
    CHECK(slc_acquire(c, "jobs", "k4", 1, 0, &d, NULL) == SLC_EINVAL, "a NULL hold_id: SLC_EINVAL");
    CHECK(slc_acquire(c, "jobs", "k4", 1, 7200000, &d, &id) == SLC_ESERVER &&
              strstr(slc_errstr(c), "timeout") != NULL,
          "a timeout past hold_timeout: the server's error (%s)", slc_errstr(c));
    CHECK(slc_acquire(c, "tight", "k4", 1, 0, &d, &id) == SLC_ESERVER &&
              strstr(slc_errstr(c), "holds nothing to acquire or release") != NULL,
          "an acquire on a rule that holds nothing: the server's error (%s)", slc_errstr(c));
    CHECK(slc_release(c, "tight", "k4", 1) == SLC_ESERVER,
          "a release on a rule that holds nothing: SLC_ESERVER, not SLC_ENOHOLD (%s)",
          slc_errstr(c));
    CHECK(slc_acquire(c, "nope", "k4", 1, 0, &d, &id) == SLC_ESERVER &&
              strcmp(slc_errstr(c), "ERR unknown rule 'nope'") == 0,
          "an unknown rule (%s)", slc_errstr(c));
    CHECK(d.limit == 77 && id == 77, "failed calls left the outputs untouched");
    CHECK(slc_acquire(c, "jobs", "k4", 0, 0, &d, &id) == SLC_OK && d.allowed && id == 0,
          "cost 0: admitted, no hold");
    CHECK(held(c, "k4") == 0, "nothing held on k4");
}

/* SL.ALLOW on an in-flight rule makes a hold nobody can release; a refusal of it is cached
 * (hits) and a release of another hold ends it. */
static void blocking_release_forgets(void)
{
    slc_client_t *c = connect_or_die(5000);
    slc_decision_t d;
    uint64_t id = 0;
    CHECK(slc_acquire(c, "jobs", "k5", 3, 0, &d, &id) == SLC_OK && d.allowed, "k5: hold all 3");
    CHECK(slc_allow(c, "jobs", "k5", 1, &d) == SLC_OK && !d.allowed && !d.from_cache,
          "k5: an allow refused by the server");
    CHECK(slc_allow(c, "jobs", "k5", 1, &d) == SLC_OK && !d.allowed && d.from_cache &&
              slc_cache_hits(c) == 1,
          "k5: ... and then by the cache");
    CHECK(slc_release(c, "jobs", "k5", id) == SLC_OK, "k5: release the hold");
    CHECK(slc_allow(c, "jobs", "k5", 1, &d) == SLC_OK && d.allowed && !d.from_cache &&
              slc_cache_hits(c) == 1,
          "k5: the next allow goes to the server and is admitted");
    slc_free(c);
}

/* ---- non-blocking ------------------------------------------------------------------------ */

static void nonblocking(slc_client_t *peek)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac = async_connect_or_die(&loop);
    for (int i = 0; i < 4; i++)
        ASYNC(slc_async_acquire(ac, "jobs", "a1", 1, 0, record, &results[i]));
    wait_done(&loop, &results[3]);
    for (int i = 0; i < 3; i++)
        CHECK(results[i].status == SLC_OK && results[i].d.allowed &&
                  results[i].d.remaining == 2 - i && results[i].id != 0,
              "async acquire %d: held, %d left", i + 1, 2 - i);
    CHECK(results[3].status == SLC_OK && !results[3].d.allowed && results[3].id == 0 &&
              !results[3].d.from_cache,
          "async acquire 4: refused by the server");
    CHECK(norder == 4 && order[0] == 0 && order[3] == 3, "callbacks in request order");

    ASYNC(slc_async_release(ac, "jobs", "a1", results[0].id, on_done, &results[4]));
    ASYNC(slc_async_release(ac, "jobs", "a1", results[0].id, on_done, &results[5]));
    ASYNC(slc_async_acquire(ac, "jobs", "a1", 1, 0, record, &results[6]));
    ASYNC(slc_async_acquire(ac, "jobs", "a1", 1, 0, record, &results[7]));
    wait_done(&loop, &results[7]);
    CHECK(results[4].status == SLC_OK, "async release of hold 1");
    CHECK(results[5].status == SLC_ENOHOLD &&
              strncmp(results[5].errstr, "ERR no such hold:", 17) == 0,
          "async second release: SLC_ENOHOLD (%s)", results[5].errstr);
    CHECK(results[6].status == SLC_OK && results[6].d.allowed && results[6].d.remaining == 0,
          "async: one acquire fits after the release");
    CHECK(results[7].status == SLC_OK && !results[7].d.allowed,
          "async: the next does not (the second release freed nothing)");

    /* a short hold expires */
    ASYNC(slc_async_acquire(ac, "jobs", "a2", 3, 100, record, &results[8]));
    wait_done(&loop, &results[8]);
    CHECK(results[8].status == SLC_OK && results[8].d.allowed && results[8].id != 0,
          "async acquire 3 units with TIMEOUT 100");
    int tries = 0;
    while (held(peek, "a2") != 0 && ++tries < POLL_TRIES)
        sleep_ms(50);
    CHECK(held(peek, "a2") == 0, "the async hold expired (polled %d times)", tries);
    ASYNC(slc_async_release(ac, "jobs", "a2", results[8].id, on_done, &results[9]));
    wait_done(&loop, &results[9]);
    CHECK(results[9].status == SLC_ENOHOLD, "its release: SLC_ENOHOLD");

    /* a release ends a refusal the cache keeps */
    ASYNC(slc_async_acquire(ac, "jobs", "a3", 3, 0, record, &results[10]));
    ASYNC(slc_async_allow(ac, "jobs", "a3", 1, on_decision, &results[11]));
    wait_done(&loop, &results[11]);
    CHECK(slc_async_cache_hits(ac) == 0, "no acquire was a cache hit (%" PRIu64 ")",
          slc_async_cache_hits(ac));
    ASYNC(slc_async_allow(ac, "jobs", "a3", 1, on_decision, &results[12]));
    wait_done(&loop, &results[12]);
    CHECK(results[12].d.from_cache && slc_async_cache_hits(ac) == 1,
          "a3: an allow refused by the cache");
    ASYNC(slc_async_release(ac, "jobs", "a3", results[10].id, on_done, &results[13]));
    ASYNC(slc_async_allow(ac, "jobs", "a3", 1, on_decision, &results[14]));
    wait_done(&loop, &results[14]);
    CHECK(results[13].status == SLC_OK && results[14].status == SLC_OK && results[14].d.allowed &&
              !results[14].d.from_cache,
          "a3: after the release the allow goes to the server and is admitted");
    CHECK(slc_async_acquire(ac, "jobs", "a3", -1, 0, record, &results[15]) == SLC_EINVAL &&
              !results[15].done,
          "async: a negative cost is refused in the call, no callback");
    CHECK(slc_async_release(ac, "jobs", "a3", UINT64_MAX, on_done, &results[15]) == SLC_EINVAL &&
              !results[15].done,
          "async: a hold id of 2^64-1 is refused in the call, no callback");
    slc_async_close(ac);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0, "the client closed all its handles");
}

int main(int argc, char **argv)
{
    prog_args(argc, argv, "prog_client_holds");
    slc_client_t *c = connect_or_die(5000);
    set_rule(c, "jobs", "{\"algorithm\":\"concurrency\",\"limit\":3,\"hold_timeout\":\"1h\"}");
    blocking_limit_and_release(c);
    blocking_expiry(c);
    blocking_errors(c);
    blocking_release_forgets();
    nonblocking(c);
    slc_free(c);
    return prog_end();
}
