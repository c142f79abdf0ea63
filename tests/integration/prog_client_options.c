/*
 * prog_client_options.c - libsluice-client's request options (the _ex calls) against a running
 * sluiced (run by test_client.sh).
 *
 *   prog_client_options PORT PASSWORD
 *
 * The program makes three rules: `tiers` (fixed_window, limit 10, priorities low/high/critical,
 * reserves critical 20 % and high 3 units), `pjobs` (concurrency, limit 4, priorities low/high,
 * high's reserve 2) and `adapt` (concurrency, adaptive aimd, limit 2 in 1..8, backoff 50,
 * latency_timeout 100ms). Blocking: a priority is sent (low is shed where high and critical pass,
 * the peek's remaining is the priority's view), a refusal with a priority is neither answered
 * from the over-limit cache nor remembered in it while a refusal without one still is, an
 * unknown priority is the server's error, an acquire with a priority keeps the reserve; a release
 * without a report leaves the adaptive limit, releases reporting LATENCY grow it by one after a
 * busy window, one reporting DROPPED cuts it to half, and a latency out of range is refused
 * before sending. Non-blocking: the same through the async _ex calls. Prints one "ok" or
 * "not ok" line per check; exits 0 when all passed.
 */
#include "prog_common.h"

static const slc_request_opts_t LOW = {.priority = "low"};
static const slc_request_opts_t HIGH = {.priority = "high"};
static const slc_request_opts_t CRITICAL = {.priority = "critical"};

static void make_rules(slc_client_t *c)
{
    set_rule(c, "tiers",
             "{\"algorithm\":\"fixed_window\",\"limit\":10,\"window\":\"1h\","
             "\"priorities\":[\"low\",\"high\",\"critical\"],"
             "\"reserve\":{\"critical\":\"20%\",\"high\":3}}");
    set_rule(c, "pjobs",
             "{\"algorithm\":\"concurrency\",\"limit\":4,\"hold_timeout\":\"1h\","
             "\"priorities\":[\"low\",\"high\"],\"reserve\":{\"high\":2}}");
    set_rule(c, "adapt",
             "{\"algorithm\":\"concurrency\",\"limit\":2,\"hold_timeout\":\"1h\","
             "\"adaptive\":\"aimd\",\"min_limit\":1,\"max_limit\":8,\"backoff\":50,"
             "\"latency_timeout\":\"100ms\"}");
}

/* The adaptive limit of (adapt, key) now, as a peek reports it, or -1. */
static int64_t adaptive_limit(slc_client_t *c, const char *key)
{
    slc_decision_t d;
    return slc_peek(c, "adapt", key, &d) == SLC_OK ? d.limit : -1;
}

static void blocking_priorities(slc_client_t *c)
{
    slc_decision_t d;
    int rc = slc_allow_ex(c, "tiers", "k", 5, &LOW, &d);
    CHECK(rc == SLC_OK && d.allowed && d.limit == 10 && d.remaining == 0,
          "low takes 5 of 10; low's view: 0 remaining (%" PRId64 ")", d.remaining);
    rc = slc_allow_ex(c, "tiers", "k", 1, &LOW, &d);
    CHECK(rc == SLC_OK && !d.allowed && d.retry_after_ms > 0 && !d.from_cache,
          "low is shed for the reserves above it");
    long long before = info_field(c, "total_commands_processed");
    rc = slc_allow_ex(c, "tiers", "k", 1, &LOW, &d);
    long long after = info_field(c, "total_commands_processed");
    CHECK(rc == SLC_OK && !d.allowed && !d.from_cache && after == before + 2 &&
              slc_cache_hits(c) == 0,
          "asked again, the refusal with a priority is the server's again (%lld -> %lld)", before,
          after);
    CHECK(slc_allow(c, "tiers", "k", 1, &d) == SLC_OK && !d.allowed && !d.from_cache,
          "without a priority (the lowest): refused by the server");
    CHECK(slc_allow(c, "tiers", "k", 1, &d) == SLC_OK && !d.allowed && d.from_cache &&
              slc_cache_hits(c) == 1,
          "... and then by the cache, which keeps refusals without a priority");
    rc = slc_allow_ex(c, "tiers", "k", 3, &HIGH, &d);
    CHECK(rc == SLC_OK && d.allowed && !d.from_cache && d.remaining == 0 && slc_cache_hits(c) == 1,
          "high passes beside the cached refusal: the cache is not asked (remaining %" PRId64 ")",
          d.remaining);
    rc = slc_peek_ex(c, "tiers", "k", &CRITICAL, &d);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 2,
          "critical's peek: 2 remaining (%" PRId64 ")", d.remaining);
    rc = slc_peek_ex(c, "tiers", "k", &HIGH, &d);
    CHECK(rc == SLC_OK && d.remaining == 0, "high's peek: 0 remaining (%" PRId64 ")", d.remaining);
    CHECK(slc_allow_ex(c, "tiers", "k", 2, &CRITICAL, &d) == SLC_OK && d.allowed,
          "critical takes the last 2");
    slc_decision_t untouched = {.limit = 77};
    rc = slc_allow_ex(c, "tiers", "k", 1, &(slc_request_opts_t){.priority = "urgent"}, &untouched);
    CHECK(rc == SLC_ESERVER &&
              strcmp(slc_errstr(c),
                     "ERR unknown priority 'urgent' for rule 'tiers' (it has low, high, "
                     "critical)") == 0 &&
              untouched.limit == 77,
          "an unknown priority: the server's error (%s)", slc_errstr(c));
    rc = slc_allow_ex(c, "tiers", "k2", 1, &(slc_request_opts_t){0}, &d);
    CHECK(rc == SLC_OK && d.allowed && d.remaining == 4,
          "zeroed options are none: the lowest's view (%" PRId64 ")", d.remaining);
    CHECK(slc_allow_ex(c, "tiers", "k2", 1, NULL, &d) == SLC_OK && d.remaining == 3,
          "NULL options are none");
}

static void blocking_acquire_priority(slc_client_t *c)
{
    slc_decision_t d;
    uint64_t id[4] = {0};
    for (int i = 0; i < 2; i++)
        CHECK(slc_acquire_ex(c, "pjobs", "k", 1, 0, &LOW, &d, &id[i]) == SLC_OK && d.allowed &&
                  id[i] != 0,
              "low acquire %d held", i + 1);
    CHECK(slc_acquire_ex(c, "pjobs", "k", 1, 0, &LOW, &d, &id[2]) == SLC_OK && !d.allowed &&
              id[2] == 0,
          "a third low acquire is shed: high's reserve of 2");
    CHECK(slc_acquire_ex(c, "pjobs", "k", 2, 0, &HIGH, &d, &id[3]) == SLC_OK && d.allowed &&
              id[3] != 0 && d.remaining == 0,
          "high holds the reserve");
    CHECK(slc_acquire_ex(c, "tiers", "k", 1, 0, &HIGH, &d, &id[2]) == SLC_ESERVER,
          "an acquire with a priority on a rule that holds nothing: the server's error");
    for (int i = 0; i < 4; i++)
        if (id[i] != 0)
            CHECK(slc_release_ex(c, "pjobs", "k", id[i], NULL) == SLC_OK, "release hold %d", i + 1);
}

static void blocking_adaptive(slc_client_t *c)
{
    uint64_t a = 0, b = 0, x = 0;
    slc_decision_t d;
    slc_acquire(c, "adapt", "k", 1, 0, &d, &a);
    slc_acquire(c, "adapt", "k", 1, 0, &d, &b);
    CHECK(a != 0 && b != 0, "two holds of the limit 2");
    CHECK(slc_release(c, "adapt", "k", a) == SLC_OK && slc_release(c, "adapt", "k", b) == SLC_OK,
          "released without a report");
    CHECK(adaptive_limit(c, "k") == 2, "the limit stays 2 (%" PRId64 ")", adaptive_limit(c, "k"));

    slc_acquire(c, "adapt", "k", 1, 0, &d, &a);
    slc_acquire(c, "adapt", "k", 1, 0, &d, &b);
    slc_release_opts_t lat12 = {.has_latency = true, .latency_us = 12000};
    slc_release_opts_t lat1 = {.has_latency = true, .latency_us = 1000};
    CHECK(slc_release_ex(c, "adapt", "k", a, &lat12) == SLC_OK &&
              slc_release_ex(c, "adapt", "k", b, &lat12) == SLC_OK,
          "two releases report LATENCY 12ms");
    CHECK(adaptive_limit(c, "k") == 3,
          "a busy window without drops: the limit grows to 3 (%" PRId64 ")",
          adaptive_limit(c, "k"));

    slc_acquire(c, "adapt", "k", 1, 0, &d, &a);
    slc_acquire(c, "adapt", "k", 1, 0, &d, &b);
    slc_acquire(c, "adapt", "k", 1, 0, &d, &x);
    slc_release_opts_t drop = {.dropped = true};
    CHECK(slc_release_ex(c, "adapt", "k", a, &drop) == SLC_OK &&
              slc_release_ex(c, "adapt", "k", b, &lat1) == SLC_OK &&
              slc_release_ex(c, "adapt", "k", x, &lat1) == SLC_OK,
          "a window of three releases, one DROPPED");
    CHECK(adaptive_limit(c, "k") == 1, "the drop cuts the limit to 3 * 50 %% = 1 (%" PRId64 ")",
          adaptive_limit(c, "k"));

    slc_acquire(c, "adapt", "k2", 1, 0, &d, &a);
    long long sent = info_field(c, "total_commands_processed");
    slc_release_opts_t neg = {.has_latency = true, .latency_us = -1};
    slc_release_opts_t over = {.has_latency = true, .latency_us = SLC_LATENCY_MAX_US + 1};
    int rc1 = slc_release_ex(c, "adapt", "k2", a, &neg);
    int rc2 = slc_release_ex(c, "adapt", "k2", a, &over);
    char why[SLC_ERRSTR_MAX];
    snprintf(why, sizeof why, "%s", slc_errstr(c));
    CHECK(rc1 == SLC_EINVAL && rc2 == SLC_EINVAL &&
              info_field(c, "total_commands_processed") == sent + 1,
          "latencies of -1 us and past 1h: SLC_EINVAL, nothing sent (%s)", why);
    slc_release_opts_t max = {.has_latency = true, .latency_us = SLC_LATENCY_MAX_US};
    CHECK(slc_release_ex(c, "adapt", "k2", a, &max) == SLC_OK,
          "a latency of exactly 1h is accepted (%s)", slc_errstr(c));
}

/* ---- non-blocking ------------------------------------------------------------------------ */

static void nonblocking(slc_client_t *c)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    slc_async_t *ac = async_connect_or_die(&loop);
    result_t *r = results;
    CHECK(slc_async_allow_ex(ac, "tiers", "a", 5, &LOW, on_decision, &r[0]) == SLC_OK &&
              slc_async_allow_ex(ac, "tiers", "a", 1, &LOW, on_decision, &r[1]) == SLC_OK &&
              slc_async_allow_ex(ac, "tiers", "a", 1, &LOW, on_decision, &r[2]) == SLC_OK &&
              slc_async_allow_ex(ac, "tiers", "a", 3, &HIGH, on_decision, &r[3]) == SLC_OK &&
              slc_async_peek_ex(ac, "tiers", "a", &CRITICAL, on_decision, &r[4]) == SLC_OK,
          "async allows and a peek with priorities accepted");
    wait_done(&loop, &r[4]);
    CHECK(r[0].status == SLC_OK && r[0].d.allowed && r[0].d.remaining == 0, "async: low takes 5");
    CHECK(r[1].status == SLC_OK && !r[1].d.allowed && !r[2].d.allowed && !r[2].d.from_cache &&
              slc_async_cache_hits(ac) == 0,
          "async: low is shed, twice by the server");
    CHECK(r[3].status == SLC_OK && r[3].d.allowed, "async: high passes");
    CHECK(r[4].status == SLC_OK && r[4].d.remaining == 2, "async: critical's peek, 2 remaining");

    CHECK(slc_async_acquire_ex(ac, "pjobs", "a", 2, 0, &LOW, record, &r[5]) == SLC_OK &&
              slc_async_acquire_ex(ac, "pjobs", "a", 1, 0, &LOW, record, &r[6]) == SLC_OK &&
              slc_async_acquire_ex(ac, "pjobs", "a", 2, 0, &HIGH, record, &r[7]) == SLC_OK,
          "async acquires with priorities accepted");
    wait_done(&loop, &r[7]);
    CHECK(r[5].d.allowed && r[5].id != 0 && !r[6].d.allowed && r[6].id == 0 && r[7].d.allowed &&
              r[7].id != 0,
          "async: low holds 2, a third low unit is shed, high holds the reserve");

    slc_release_opts_t lat = {.has_latency = true, .latency_us = 5000};
    CHECK(slc_async_acquire(ac, "adapt", "a", 1, 0, record, &r[8]) == SLC_OK &&
              slc_async_acquire(ac, "adapt", "a", 1, 0, record, &r[9]) == SLC_OK,
          "async: two adaptive holds");
    wait_done(&loop, &r[9]);
    CHECK(slc_async_release_ex(ac, "adapt", "a", r[8].id, &lat, on_done, &r[10]) == SLC_OK &&
              slc_async_release_ex(ac, "adapt", "a", r[9].id, &lat, on_done, &r[11]) == SLC_OK,
          "async: two releases with LATENCY 5ms");
    wait_done(&loop, &r[11]);
    CHECK(r[10].status == SLC_OK && r[11].status == SLC_OK && adaptive_limit(c, "a") == 3,
          "async: the limit grows to 3 (%" PRId64 ")", adaptive_limit(c, "a"));
    slc_release_opts_t neg = {.has_latency = true, .latency_us = -1};
    CHECK(slc_async_release_ex(ac, "adapt", "a", 1, &neg, on_done, &r[12]) == SLC_EINVAL &&
              !r[12].done,
          "async: a negative latency is refused in the call, no callback");
    slc_async_close(ac);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0, "the client closed all its handles");
}

int main(int argc, char **argv)
{
    prog_args(argc, argv, "prog_client_options");
    slc_client_t *c = connect_or_die(5000);
    make_rules(c);
    blocking_priorities(c);
    blocking_acquire_priority(c);
    blocking_adaptive(c);
    nonblocking(c);
    /* the adaptive rule stays, with its keys: test_client.sh checks that sluiced stops cleanly,
     * its final snapshot holding them */
    slc_free(c);
    return prog_end();
}
