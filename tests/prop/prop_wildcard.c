/*
 * prop_wildcard.c - value wildcards (rules/wildcard.h) against a reference matcher.
 *
 * Each case draws a pattern and a value over a small alphabet (a, b, '*', '\') so that matches,
 * near misses, escapes and stars in values all come up often, and checks:
 *
 *   reference   wildcard_match agrees with a backtracking matcher written from the definition
 *               (a '*' matches any run of bytes, '\' makes the next byte literal);
 *   has         wildcard_has is true exactly when the reference finds an unescaped '*';
 *   quote       a value quoted with stars literal matches itself and nothing else drawn; quoted
 *               with stars wild, it matches what its stars as wildcards match.
 *
 * SLUICE_SEED replays a run; SLUICE_CASES sets the number of cases (default 200000).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prop/gen.h"
#include "rules/wildcard.h"

#define LEN_MAX 14

enum { P_REFERENCE, P_HAS, P_QUOTE, P_COUNT };

/* The definition: does s[0..slen) match p[0..plen)? */
static bool ref_match(const char *p, size_t plen, const char *s, size_t slen)
{
    if (plen == 0) {
        return slen == 0;
    }
    if (p[0] == '*') {
        for (size_t k = 0; k <= slen; k++) {
            if (ref_match(p + 1, plen - 1, s + k, slen - k)) {
                return true;
            }
        }
        return false;
    }
    size_t lit = p[0] == '\\' && plen > 1 ? 1 : 0;
    return slen > 0 && s[0] == p[lit] && ref_match(p + lit + 1, plen - lit - 1, s + 1, slen - 1);
}

static bool ref_has(const char *p, size_t plen)
{
    for (size_t i = 0; i < plen; i++) {
        if (p[i] == '\\') {
            i++;
        } else if (p[i] == '*') {
            return true;
        }
    }
    return false;
}

static size_t gen_text(prng_t *r, char *out, int stars_percent)
{
    static const char alpha[] = "ab";
    size_t n = (size_t)prng_range(r, 0, LEN_MAX);
    for (size_t i = 0; i < n; i++) {
        int64_t k = prng_range(r, 0, 99);
        out[i] = k < stars_percent ? '*' : k < stars_percent + 8 ? '\\' : alpha[k % 2];
    }
    out[n] = '\0';
    return n;
}

static long failed[P_COUNT], checked[P_COUNT];

static void check(int prop, bool ok, uint64_t seed, long idx, const char *p, const char *s)
{
    checked[prop]++;
    if (!ok && failed[prop]++ < 5) {
        fprintf(stderr, "FAIL case %ld (SLUICE_SEED=0x%" PRIx64 "): pattern '%s' value '%s'\n", idx,
                seed, p, s);
    }
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_CASES", 200000);
    for (long idx = 0; idx < cases; idx++) {
        prng_t r = prop_case_prng(seed, 0, idx);
        char p[LEN_MAX + 1], s[LEN_MAX + 1], q[2 * LEN_MAX + 1];
        size_t plen = gen_text(&r, p, 25), slen = gen_text(&r, s, 10);
        wildcard_t *w = wildcard_compile(p, plen);
        if (w == NULL) {
            return 2;
        }
        check(P_REFERENCE, wildcard_match(w, s, slen) == ref_match(p, plen, s, slen), seed, idx, p,
              s);
        check(P_HAS, wildcard_has(p, plen) == ref_has(p, plen), seed, idx, p, s);
        wildcard_free(w);
        size_t qlen = wildcard_quote(s, slen, false, q);
        w = wildcard_compile(q, qlen);
        bool self = w != NULL && wildcard_match(w, s, slen);
        bool other = w != NULL && wildcard_match(w, p, plen);
        check(P_QUOTE, self && other == (plen == slen && memcmp(p, s, plen) == 0), seed, idx, q, p);
        wildcard_free(w);
        qlen = wildcard_quote(s, slen, true, q);
        w = wildcard_compile(q, qlen);
        char plain[LEN_MAX + 1];
        size_t n = 0;
        for (size_t i = 0; i < slen; i++) {
            plain[n++] = s[i] == '*' ? 'a' : s[i]; /* each star as a one-byte run */
        }
        check(P_QUOTE, w != NULL && wildcard_match(w, plain, n) == true, seed, idx, q, plain);
        wildcard_free(w);
    }
    static const char *const names[P_COUNT] = {"reference", "has", "quote"};
    static const char *const claims[P_COUNT] = {
        "the compiled matcher answers as the backtracking reference",
        "wildcard_has finds exactly the unescaped stars",
        "a quoted value matches itself (and only itself with stars literal)"};
    return prop_report(P_COUNT, names, claims, checked, failed) != 0;
}
