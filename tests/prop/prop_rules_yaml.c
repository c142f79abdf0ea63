/*
 * prop_rules_yaml.c - rules files written by ruledef_list_to_yaml() read back as the same rules.
 *
 * Each case makes a random list of rules (names from every character a name may hold, key
 * templates with literal text of any UTF-8 character) with random overrides whose keys are any
 * bytes: control characters, NUL, quotes and backslashes, line and paragraph separators, C1
 * controls, byte order marks, non-characters, characters outside the BMP. Then:
 *
 *   - a list whose keys are all UTF-8 is written, and reading the text gives an equal list
 *     (ruledef_equal: every field and every override, in order), and writing that list gives
 *     the same text byte for byte;
 *   - a list with one key that is not UTF-8 (a stray byte, an overlong form, a surrogate, a cut
 *     sequence) is refused: NULL, as YAML cannot carry it.
 *
 * SLUICE_SEED replays a run; SLUICE_CASES sets the number of cases (default 400).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gen.h"
#include "rules/ruledef.h"

#define CASE_RULES_MAX 5
#define OVERRIDES_MAX  6
#define TEXT_MAX       48 /* characters of random text */

static char err[RULEDEF_ERR_MAX];

/* Appends code point c as UTF-8; returns the bytes written. */
static size_t put_utf8(char *out, uint32_t c)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* A random character, mostly awkward ones; never a surrogate, never one of `except`. */
static uint32_t rnd_char(prng_t *r, const char *except)
{
    static const uint32_t odd[] = {
        0,    '\t',   '\n',   '\r',   0x1B,   '"',    '\\',   '\'', ':',     '#',     '-',
        ' ',  '&',    '*',    '!',    '|',    '>',    '%',    '@',  '`',     0x7F,    0x85,
        0xA0, 0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF, 0xFFFD, 0xE9, 0x10000, 0x1F600, 0x10FFFF};
    for (;;) {
        uint32_t c;
        switch (prng_range(r, 0, 5)) {
        case 0:
            c = odd[prng_range(r, 0, sizeof(odd) / sizeof(odd[0]) - 1)];
            break;
        case 1:
            c = (uint32_t)prng_range(r, 0, 0x1F); /* C0 controls */
            break;
        case 2:
            c = (uint32_t)prng_range(r, 0x80, 0x9F); /* C1 controls */
            break;
        case 3:
            c = (uint32_t)prng_range(r, 0xA0, 0xFFFF);
            break;
        case 4:
            c = (uint32_t)prng_range(r, 0x10000, 0x10FFFF);
            break;
        default:
            c = (uint32_t)prng_range(r, 0x20, 0x7E);
            break;
        }
        if ((c < 0xD800 || c > 0xDFFF) && (c >= 0x80 || strchr(except, (int)c) == NULL || c == 0))
            return c;
    }
}

/* Random UTF-8 text of 1..TEXT_MAX characters into out (room for TEXT_MAX * 4 bytes); returns
 * its length. NUL is allowed only when nul is. */
static size_t rnd_text(prng_t *r, char *out, const char *except, bool nul)
{
    size_t n = (size_t)prng_range(r, 1, TEXT_MAX), len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = rnd_char(r, except);
        if (c == 0 && !nul)
            c = 'x';
        len += put_utf8(out + len, c);
    }
    return len;
}

/* Replaces a random place of text (len bytes, room for 8 more) with bytes that are not UTF-8. */
static size_t spoil(prng_t *r, char *text, size_t len)
{
    static const char *const bad[] = {"\xff", "\xc0\x80",         "\xed\xa0\x80", "\xe2\x82",
                                      "\x80", "\xf4\x90\x80\x80", "\xfe"};
    const char *b = bad[prng_range(r, 0, sizeof(bad) / sizeof(bad[0]) - 1)];
    size_t at = (size_t)prng_range(r, 0, (int64_t)len), blen = strlen(b);
    if (at < len && (text[at] & 0xC0) == 0x80)
        at = len; /* not inside a character: the result must stay invalid */
    memmove(text + at + blen, text + at, len - at);
    memcpy(text + at, b, blen);
    return len + blen;
}

/* A random valid rule name ([A-Za-z0-9_.:-]{1,64}), unique by its index suffix. */
static void rnd_name(prng_t *r, int index, char *out)
{
    static const char chars[] = "abcXYZ019_.:-";
    static const char *const words[] = {"true", "null", "-1", "0x1F", "1e3", "~", ":", ".", "-"};
    size_t n = 0;
    if (prng_chance(r, 30))
        n = (size_t)sprintf(out, "%s", words[prng_range(r, 0, 8)]);
    else
        for (int i = (int)prng_range(r, 1, 40); i > 0; i--)
            out[n++] = chars[prng_range(r, 0, sizeof(chars) - 2)];
    sprintf(out + n, "%d", index);
}

/* A random rule as JSON (jansson escapes the text), parsed into out; false if the random
 * combination is one the rules refuse (a key template keytpl cannot read, say). */
static bool rnd_rule(prng_t *r, int index, ruledef_t *out)
{
    static const char *const algs[] = {"fixed_window",    "sliding_log",  "sliding_window",
                                       "sliding_buckets", "token_bucket", "gcra"};
    static const char *const windows[] = {"1s", "250ms", "1m30s", "1h", "7d", "1500us"};
    char name[80], tpl[TEXT_MAX * 4 + 16];
    rnd_name(r, index, name);
    int a = (int)prng_range(r, 0, 5);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "algorithm", json_string(algs[a]));
    json_object_set_new(o, "limit", json_integer(prng_range(r, 1, 5000)));
    json_object_set_new(o, "window", json_string(windows[prng_range(r, 0, 4)]));
    if (a >= 4 && prng_chance(r, 50))
        json_object_set_new(o, "burst", json_integer(prng_range(r, 0, 300)));
    if (prng_chance(r, 70)) {
        size_t len = rnd_text(r, tpl, "{}", false);
        if (prng_chance(r, 50))
            len += (size_t)sprintf(tpl + len, "{ip}");
        json_object_set_new(o, "key", json_stringn(tpl, len));
    }
    json_object_set_new(o, "shadow", json_boolean(prng_chance(r, 50)));
    json_object_set_new(o, "on_store_error", json_string(prng_chance(r, 50) ? "deny" : "allow"));
    json_object_set_new(o, "cold_start", json_string(prng_chance(r, 50) ? "closed" : "open"));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    bool ok = ruledef_parse_json(text, strlen(text), NULL, out, err) == 0;
    free(text);
    return ok;
}

/* Random overrides of def with distinct keys; *spoiled when one key was made not UTF-8. */
static void rnd_overrides(prng_t *r, ruledef_t *def, bool spoil_one, bool *spoiled)
{
    size_t n = (size_t)prng_range(r, 0, OVERRIDES_MAX);
    def->overrides = calloc(n ? n : 1, sizeof(*def->overrides));
    for (size_t i = 0; i < n; i++) {
        char key[TEXT_MAX * 4 + 16];
        size_t len = rnd_text(r, key, "", true);
        len += (size_t)sprintf(key + len, "#%zu", i); /* distinct */
        if (spoil_one && !*spoiled && prng_chance(r, 50)) {
            len = spoil(r, key, len);
            *spoiled = true;
        }
        char json[64];
        if (prng_chance(r, 20))
            snprintf(json, sizeof(json), "{\"limit\":0}");
        else if (prng_chance(r, 50))
            snprintf(json, sizeof(json), "{\"limit\":%lld}", (long long)prng_range(r, 1, 9000));
        else
            snprintf(json, sizeof(json), "{\"window\":\"%llds\"}",
                     (long long)prng_range(r, 1, 600));
        if (override_parse_json(def, key, len, json, strlen(json), &def->overrides[def->noverrides],
                                err) != 0) {
            fprintf(stderr, "override refused: %s (%s)\n", err, json);
            abort();
        }
        def->noverrides++;
    }
}

/* One case; returns 1 when the list was written and read back, 0 when it was (rightly)
 * refused, and aborts on a broken property. */
static int one_case(uint64_t seed, int c)
{
    prng_t r = {seed ^ (uint64_t)c * UINT64_C(0x9e3779b97f4a7c15)};
    bool spoil_one = prng_chance(&r, 15), spoiled = false;
    ruledef_list_t list = {.rules = calloc(CASE_RULES_MAX, sizeof(ruledef_t))};
    for (int i = (int)prng_range(&r, 1, CASE_RULES_MAX); i > 0; i--) {
        if (rnd_rule(&r, (int)list.n, &list.rules[list.n])) {
            rnd_overrides(&r, &list.rules[list.n], spoil_one, &spoiled);
            list.n++;
        }
    }
    char *yaml = ruledef_list_to_yaml(&list);
    int written = 0;
    if (spoiled) {
        if (yaml != NULL) {
            fprintf(stderr, "case %d: a key that is not UTF-8 was written:\n%s\n", c, yaml);
            abort();
        }
    } else if (list.n == 0) {
        /* written as such, though a rules file must name a rule to be read */
        if (yaml == NULL || strcmp(yaml, "rules: []\n") != 0)
            abort();
    } else {
        ruledef_list_t back;
        if (yaml == NULL || ruledef_parse_yaml(yaml, strlen(yaml), &back, err) != 0) {
            fprintf(stderr, "case %d: %s\n%s\n", c, yaml ? err : "not written", yaml);
            abort();
        }
        bool same = back.n == list.n;
        for (size_t i = 0; same && i < list.n; i++)
            same = ruledef_equal(&list.rules[i], &back.rules[i]);
        char *again = ruledef_list_to_yaml(&back);
        if (!same || again == NULL || strcmp(again, yaml) != 0) {
            fprintf(stderr, "case %d: read back %s:\n%s\n---\n%s\n", c,
                    same ? "as different text" : "as different rules", yaml, again);
            abort();
        }
        free(again);
        ruledef_list_free(&back);
        written = 1;
    }
    free(yaml);
    ruledef_list_free(&list);
    return written;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_CASES", 400);
    long written = 0;
    for (long c = 0; c < cases; c++)
        written += one_case(seed, (int)c);
    printf("prop_rules_yaml: seed 0x%" PRIx64 ": %ld cases, %ld written and read back\n", seed,
           cases, written);
    /* the generator mostly makes lists that can be written */
    return written > cases / 2 ? 0 : 1;
}
