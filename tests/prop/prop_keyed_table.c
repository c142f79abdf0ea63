/*
 * prop_keyed_table.c - seeded property test of the per-loop (rule, key) table
 * (store/keyed_table.h) against a model: a list of the (name, key) pairs present, each with a
 * value. Random finds, adds (into the slot keyed_find names, after removing its occupant, as the
 * leases and counts do to evict) and removes, over few names and keys and few slots, so slots
 * collide often. Claims:
 *   find      keyed_find finds a pair exactly when the model holds it, with the model's value
 *   one-slot  no two entries share a slot, and an entry is in the slot keyed_find names for it
 *   count     the table's count is the model's
 *   copy      an entry's name and key are the pair's
 * SLUICE_SEED replays a run; SLUICE_PROP_CASES sets how many cases.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prop/gen.h"
#include "store/keyed_table.h"

#define NAMES 3
#define KEYS  12
#define STEPS 400

typedef struct entry {
    keyed_entry_t k;
    long value;
} entry_t;

enum { P_FIND, P_ONE_SLOT, P_COUNT, P_COPY, P_N };
static const char *const names[P_N] = {"find", "one-slot", "count", "copy"};
static const char *const claims[P_N] = {
    "keyed_find finds a pair exactly when the model holds it, with its value",
    "no two entries share a slot; each is in the slot named for it",
    "the table's count is the model's",
    "an entry's name and key are its pair's",
};

static const char *const rule_names[NAMES] = {"a", "ab", "rule"};
static const char *const key_texts[KEYS] = {"",     "k",    "kk", "b", "ab", "\x01",
                                            "key1", "key2", "x",  "y", "z",  "b\x00z"};
static const size_t key_lens[KEYS] = {0, 1, 2, 1, 2, 1, 4, 4, 1, 1, 1, 3};

/* The model: value + 1 of each (name, key), 0 when absent. */
typedef struct model {
    long value[NAMES][KEYS];
    size_t count;
} model_t;

static int check(const keyed_table_t *t, const model_t *m)
{
    size_t present = 0;
    for (int n = 0; n < NAMES; n++) {
        for (int k = 0; k < KEYS; k++) {
            size_t slot;
            entry_t *e = keyed_find(t, rule_names[n], key_texts[k], key_lens[k], &slot);
            if ((e != NULL) != (m->value[n][k] != 0) ||
                (e != NULL && e->value != m->value[n][k] - 1)) {
                return P_FIND;
            }
            if (e != NULL &&
                (strcmp(keyed_name(&e->k), rule_names[n]) != 0 || e->k.key_len != key_lens[k] ||
                 memcmp(keyed_key(&e->k), key_texts[k], key_lens[k]) != 0)) {
                return P_COPY;
            }
            if (e != NULL && keyed_at(t, slot) != e) {
                return P_ONE_SLOT;
            }
        }
    }
    for (size_t i = 0; i < keyed_slots(t); i++) {
        present += keyed_at(t, i) != NULL;
    }
    if (present != m->count || t->count != m->count) {
        return present != t->count ? P_ONE_SLOT : P_COUNT;
    }
    return -1;
}

/* The model's pair whose entry e is. */
static void forget(model_t *m, const entry_t *e)
{
    for (int n = 0; n < NAMES; n++) {
        for (int k = 0; k < KEYS; k++) {
            if (strcmp(keyed_name(&e->k), rule_names[n]) == 0 && e->k.key_len == key_lens[k] &&
                memcmp(keyed_key(&e->k), key_texts[k], key_lens[k]) == 0) {
                m->value[n][k] = 0;
                m->count--;
            }
        }
    }
}

static int run_case(uint64_t seed, long idx)
{
    prng_t r = {seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(idx + 1))};
    keyed_table_t t;
    size_t slots = (size_t)1 << prng_range(&r, 0, 5);
    if (keyed_init(&t, slots, sizeof(entry_t), prng_next(&r)) != 0) {
        return P_COUNT;
    }
    model_t m = {{{0}}, 0};
    int failed = -1;
    for (int step = 0; step < STEPS && failed < 0; step++) {
        int n = (int)prng_range(&r, 0, NAMES - 1), k = (int)prng_range(&r, 0, KEYS - 1);
        size_t slot;
        entry_t *e = keyed_find(&t, rule_names[n], key_texts[k], key_lens[k], &slot);
        if (e == NULL && prng_chance(&r, 70)) { /* add, evicting the slot's occupant */
            entry_t *old = keyed_at(&t, slot);
            if (old != NULL) {
                forget(&m, old);
                keyed_remove(&t, slot);
            }
            e = keyed_add(&t, slot, rule_names[n], key_texts[k], key_lens[k]);
            e->value = step;
            m.value[n][k] = step + 1;
            m.count++;
        } else if (e != NULL && prng_chance(&r, 40)) {
            keyed_remove(&t, slot);
            m.value[n][k] = 0;
            m.count--;
        }
        failed = check(&t, &m);
    }
    for (size_t i = 0; i < keyed_slots(&t); i++) {
        if (keyed_at(&t, i) != NULL) {
            keyed_remove(&t, i);
        }
    }
    keyed_destroy(&t);
    return failed;
}

int main(void)
{
    uint64_t seed = prop_seed();
    long cases = prop_env_long("SLUICE_PROP_CASES", 2000);
    printf("prop_keyed_table: seed 0x%" PRIx64 " (SLUICE_SEED to replay), %ld cases\n", seed,
           cases);
    long failed[P_N] = {0}, checked[P_N];
    for (int p = 0; p < P_N; p++) {
        checked[p] = cases;
    }
    for (long idx = 0; idx < cases; idx++) {
        int p = run_case(seed, idx);
        if (p >= 0 && failed[p]++ == 0) {
            printf("FAIL [%s] case %ld\n", names[p], idx);
        }
    }
    return prop_report(P_N, names, claims, checked, failed) == 0 ? 0 : 1;
}
