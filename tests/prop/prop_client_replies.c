/*
 * prop_client_replies.c - seeded property tests of libsluice-client's reply decoders
 * (src/client/reply.c) over replies read by hiredis from random bytes as sluiced would send them:
 * arrays of 0 to 8 elements (mostly 5 or 6), each an integer (0, 1, -1, -2, 2^48 - 1, the int64
 * ends, any value) or now and then a bulk string, nil or a status; and lone errors ("no such
 * hold" among them), statuses and integers.
 *
 *   spec       slc_acquire_from_reply() accepts exactly the replies the contract in
 *              sluice/client.h describes (six integers, allowed 0|1, limit, remaining,
 *              reset_after >= 0, retry_after >= 0 or -1 when refused, hold_id >= 0 and 0 when
 *              refused), and slc_decision_from_reply() exactly the five-integer ones
 *   same       an accepted acquire's decision is the decision decoder's over its first five
 *              elements (one decoder, two shapes), its hold id the sixth
 *   untouched  a refused reply leaves *out and *hold_id as they were
 *   release    slc_release_from_reply(): OK for +OK only, SLC_ENOHOLD for "ERR no such hold:"
 *              errors only, SLC_ESERVER for other errors, SLC_EPROTOCOL for the rest
 *
 * Environment: SLUICE_SEED, SLUICE_PROP_CASES (default 20000). Exit status 0 when every property
 * held.
 */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "prop/gen.h"
#include "sluice/client.h"

enum { P_SPEC, P_SAME, P_UNTOUCHED, P_RELEASE, P_COUNT };

static long checked[P_COUNT], failed[P_COUNT];

static void claim(int p, bool ok, uint64_t seed, long i, const char *what)
{
    checked[p]++;
    if (!ok) {
        if (failed[p]++ < 5)
            fprintf(stderr, "seed 0x%" PRIx64 " case %ld: %s\n", seed, i, what);
    }
}

/* Field by field: the struct has padding, which assignments need not copy. */
static bool same_decision(const slc_decision_t *a, const slc_decision_t *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms && a->reset_after_ms == b->reset_after_ms &&
           a->from_cache == b->from_cache;
}

static long long gen_int(prng_t *r)
{
    static const long long edge[] = {0, 1, -1, -2, 2, (1LL << 48) - 1, INT64_MAX, INT64_MIN};
    if (prng_chance(r, 70))
        return edge[prng_range(r, 0, 7)];
    return (long long)prng_next(r);
}

/* Writes one element: mostly an integer. */
static int put_element(prng_t *r, char *p)
{
    switch (prng_chance(r, 90) ? 0 : prng_range(r, 1, 3)) {
    case 0:
        return sprintf(p, ":%lld\r\n", gen_int(r));
    case 1:
        return sprintf(p, "$1\r\n7\r\n");
    case 2:
        return sprintf(p, "$-1\r\n");
    default:
        return sprintf(p, "+OK\r\n");
    }
}

/* A well-formed acquire's or decision's reply (n 5 or 6), one field sometimes pushed to an edge. */
static size_t put_good(prng_t *r, char *buf, long n)
{
    long long allowed = prng_range(r, 0, 1);
    long long v[6] = {allowed,
                      prng_range(r, 0, 4096),
                      prng_range(r, 0, 4096),
                      allowed ? prng_range(r, 0, 5000) : prng_range(r, -1, 5000),
                      prng_range(r, 0, INT64_MAX - 1),
                      allowed ? prng_range(r, 0, (1LL << 48) - 1) : 0};
    if (prng_chance(r, 30))
        v[prng_range(r, 0, n - 1)] = gen_int(r);
    size_t len = (size_t)sprintf(buf, "*%ld\r\n", n);
    for (long i = 0; i < n; i++)
        len += (size_t)sprintf(buf + len, ":%lld\r\n", v[i]);
    return len;
}

/* Writes one reply as sluiced sends it. */
static size_t put_reply(prng_t *r, char *buf)
{
    if (prng_chance(r, 40))
        return put_good(r, buf, prng_range(r, 5, 6));
    static const char *const lone[] = {
        "+OK\r\n",
        "+QUEUED\r\n",
        ":1\r\n",
        "$-1\r\n",
        "-ERR unknown rule 'x'\r\n",
        "-ERR no such hold: the key holds no live hold of that id\r\n",
        "-ERR no such hol\r\n"};
    if (prng_chance(r, 15))
        return (size_t)sprintf(buf, "%s", lone[prng_range(r, 0, 6)]);
    long n = prng_chance(r, 80) ? prng_range(r, 5, 6) : prng_range(r, 0, 8);
    size_t len = (size_t)sprintf(buf, "*%ld\r\n", n);
    for (long i = 0; i < n; i++)
        len += (size_t)put_element(r, buf + len);
    return len;
}

/* What the contract accepts of an array of n elements (six: an acquire's, five: a decision's). */
static bool spec_ok(const redisReply *x, size_t n)
{
    if (x->type != REDIS_REPLY_ARRAY || x->elements != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (x->element[i]->type != REDIS_REPLY_INTEGER)
            return false;
    long long a = x->element[0]->integer;
    bool fields = (a == 0 || a == 1) && x->element[1]->integer >= 0 &&
                  x->element[2]->integer >= 0 && x->element[3]->integer >= (a == 0 ? -1 : 0) &&
                  x->element[4]->integer >= 0;
    return fields &&
           (n == 5 || (x->element[5]->integer >= 0 && (a == 1 || x->element[5]->integer == 0)));
}

static int release_spec(const redisReply *x)
{
    if (x->type == REDIS_REPLY_STATUS && strcmp(x->str, "OK") == 0)
        return SLC_OK;
    if (x->type == REDIS_REPLY_ERROR)
        return strncmp(x->str, "ERR no such hold:", 17) == 0 ? SLC_ENOHOLD : SLC_ESERVER;
    return SLC_EPROTOCOL;
}

static void one_case(uint64_t seed, long i)
{
    prng_t r = prop_case_prng(seed, 0, i);
    char buf[512];
    size_t len = put_reply(&r, buf);
    redisReader *reader = redisReaderCreate();
    void *v = NULL;
    redisReaderFeed(reader, buf, len);
    if (redisReaderGetReply(reader, &v) != REDIS_OK || v == NULL) {
        claim(P_SPEC, false, seed, i, "hiredis did not read the reply written");
        redisReaderFree(reader);
        return;
    }
    redisReply *x = v;
    const slc_decision_t sentinel = {true, 4242, 4242, 4242, 4242, true};
    slc_decision_t d = sentinel, d5 = sentinel;
    uint64_t id = 4242;
    int rc = slc_acquire_from_reply(x, &d, &id, NULL, 0);
    claim(P_SPEC, (rc == SLC_OK) == spec_ok(x, 6), seed, i, "acquire decoder vs the contract");
    int rc5 = slc_decision_from_reply(x, &d5, NULL, 0);
    claim(P_SPEC, (rc5 == SLC_OK) == spec_ok(x, 5), seed, i, "decision decoder vs the contract");
    if (rc == SLC_OK) {
        x->elements = 5; /* the same array seen as a decision's */
        rc5 = slc_decision_from_reply(x, &d5, NULL, 0);
        x->elements = 6;
        claim(P_SAME,
              rc5 == SLC_OK && same_decision(&d, &d5) && id == (uint64_t)x->element[5]->integer &&
                  !d.from_cache,
              seed, i, "an acquire's decision is the decision decoder's");
    } else {
        claim(P_UNTOUCHED, same_decision(&d, &sentinel) && id == 4242, seed, i,
              "a refused acquire reply changed the output");
    }
    claim(P_RELEASE, slc_release_from_reply(x, NULL, 0) == release_spec(x), seed, i,
          "release decoder vs the contract");
    freeReplyObject(x);
    redisReaderFree(reader);
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 20000);
    printf("prop_client_replies: seed 0x%" PRIx64 ", %ld cases\n", seed, cases);
    for (long i = 0; i < cases; i++)
        one_case(seed, i);
    static const char *const names[P_COUNT] = {"spec", "same", "untouched", "release"};
    static const char *const claims[P_COUNT] = {
        "the decoders accept exactly what the contract describes",
        "an acquire's decision is the decision decoder's, the hold id the sixth",
        "a refused reply leaves the outputs untouched",
        "a release's reply: OK, no such hold, another error, or a protocol error"};
    return prop_report(P_COUNT, names, claims, checked, failed) == 0 ? 0 : 1;
}
