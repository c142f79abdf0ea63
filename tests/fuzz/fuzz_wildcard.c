/*
 * fuzz_wildcard.c - libFuzzer target for value wildcards (rules/wildcard.h): the input is a
 * pattern and a value split at the first NUL (the pattern alone when there is none). Any bytes
 * compile; a match must agree with a backtracking reference (kept to short inputs, where the
 * reference is cheap), and must not read outside either buffer (ASan).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/wildcard.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nul = memchr(data, '\0', size);
    size_t plen = nul != NULL ? (size_t)(nul - (const char *)data) : size;
    char *p = malloc(plen + 1), *s = malloc(size - plen + 1);
    if (p == NULL || s == NULL) {
        free(p);
        free(s);
        return 0;
    }
    memcpy(p, data, plen);
    size_t slen = nul != NULL ? size - plen - 1 : 0;
    memcpy(s, data + plen + (nul != NULL), slen);
    wildcard_t *w = wildcard_compile(p, plen);
    if (w != NULL) {
        bool got = wildcard_match(w, s, slen);
        size_t stars = 0;
        for (size_t i = 0; i < plen; i++) {
            stars += p[i] == '*';
        }
        if (plen + slen <= 24 && stars <= 4 && got != ref_match(p, plen, s, slen)) {
            abort();
        }
        wildcard_free(w);
    }
    free(p);
    free(s);
    return 0;
}
