/*
 * test_keyed_table.c - the per-loop (rule, key) table under the Redis store's leases and
 * approximate counts (store/keyed_table.h):
 *   - an entry added is found by its name and key, with both copied (the caller's buffers may
 *     change), and its own fields zeroed;
 *   - a name and key that differ only where "name\0key" would blur them are two entries;
 *   - keys with NUL bytes and the empty key are keys;
 *   - two keys of one slot: the second finds the first in its slot (keyed_at), not as itself;
 *     once it is removed, the slot takes the second;
 *   - removing counts down; the table of one slot holds one entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/keyed_table.h"

typedef struct entry {
    keyed_entry_t k;
    int64_t value;
} entry_t;

static void test_add_find(void **unused)
{
    (void)unused;
    keyed_table_t t;
    assert_int_equal(keyed_init(&t, 64, sizeof(entry_t), 42), 0);
    char name[8] = "rule", key[8] = "k1";
    size_t slot;
    assert_null(keyed_find(&t, name, key, 2, &slot));
    entry_t *e = keyed_add(&t, slot, name, key, 2);
    assert_non_null(e);
    assert_int_equal(e->value, 0);
    e->value = 7;
    strcpy(name, "xxxx");
    strcpy(key, "yy");
    entry_t *f = keyed_find(&t, "rule", "k1", 2, &slot);
    assert_ptr_equal(f, e);
    assert_ptr_equal(keyed_at(&t, slot), e);
    assert_string_equal(keyed_name(&e->k), "rule");
    assert_memory_equal(keyed_key(&e->k), "k1", 2);
    assert_int_equal(t.count, 1);
    assert_null(keyed_find(&t, "rule", "k1", 1, &slot)); /* a prefix is another key */
    assert_null(keyed_find(&t, "rul", "ek1", 3, &slot)); /* the boundary is kept */
    size_t s0;
    assert_non_null(keyed_find(&t, "rule", "k1", 2, &s0));
    keyed_remove(&t, s0);
    assert_int_equal(t.count, 0);
    assert_null(keyed_find(&t, "rule", "k1", 2, &s0));
    keyed_destroy(&t);
}

static void test_binary_and_empty_keys(void **unused)
{
    (void)unused;
    keyed_table_t t;
    assert_int_equal(keyed_init(&t, 1024, sizeof(entry_t), 1), 0);
    static const char bin[] = {'a', '\0', 'b'};
    size_t s1, s2;
    assert_null(keyed_find(&t, "r", bin, 3, &s1));
    assert_non_null(keyed_add(&t, s1, "r", bin, 3));
    assert_null(keyed_find(&t, "r", "", 0, &s2));
    if (keyed_at(&t, s2) == NULL) {
        assert_non_null(keyed_add(&t, s2, "r", "", 0));
        assert_non_null(keyed_find(&t, "r", "", 0, &s2));
        keyed_remove(&t, s2);
    }
    assert_non_null(keyed_find(&t, "r", bin, 3, &s1));
    size_t sa;
    assert_null(keyed_find(&t, "r", "a", 1, &sa)); /* bin's prefix is another key */
    keyed_remove(&t, s1);
    keyed_destroy(&t);
}

static void test_one_slot(void **unused)
{
    (void)unused;
    keyed_table_t t;
    assert_int_equal(keyed_init(&t, 1, sizeof(entry_t), 9), 0);
    size_t slot;
    assert_null(keyed_find(&t, "r", "a", 1, &slot));
    entry_t *a = keyed_add(&t, slot, "r", "a", 1);
    assert_null(keyed_find(&t, "r", "b", 1, &slot));
    assert_ptr_equal(keyed_at(&t, slot), a); /* b's slot holds a */
    keyed_remove(&t, slot);
    entry_t *b = keyed_add(&t, slot, "r", "b", 1);
    assert_ptr_equal(keyed_find(&t, "r", "b", 1, &slot), b);
    assert_null(keyed_find(&t, "r", "a", 1, &slot));
    assert_int_equal(t.count, 1);
    assert_int_equal(keyed_slots(&t), 1);
    keyed_remove(&t, slot);
    keyed_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_find),
        cmocka_unit_test(test_binary_and_empty_keys),
        cmocka_unit_test(test_one_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
