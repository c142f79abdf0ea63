/*
 * budget.c - a memory cap shared by tables and their caller (sl_budget_t, sluice.h): a count
 * of bytes in use and the most there may be. Tables read and add to `used` directly (core.h);
 * nothing here locks.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/budget.h"
#include "core/core.h"

int sl_budget_create(size_t max_bytes, sl_budget_t **out)
{
    if (out == NULL || max_bytes == 0)
        return SL_EINVAL;
    sl_budget_t *b = malloc(sizeof(*b));
    if (b == NULL)
        return SL_ENOMEM;
    atomic_init(&b->used, 0);
    b->max = max_bytes;
    *out = b;
    return SL_OK;
}

void sl_budget_free(sl_budget_t *budget)
{
    free(budget);
}

bool sl_budget_take(sl_budget_t *budget, size_t bytes)
{
    if (budget == NULL)
        return false;
    size_t used = atomic_load_explicit(&budget->used, memory_order_relaxed);
    do {
        if (used > budget->max || bytes > budget->max - used)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&budget->used, &used, used + bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

void sl_budget_give(sl_budget_t *budget, size_t bytes)
{
    if (budget != NULL)
        atomic_fetch_sub_explicit(&budget->used, bytes, memory_order_relaxed);
}

size_t sl_budget_used(const sl_budget_t *budget)
{
    return budget == NULL ? 0 : atomic_load_explicit(&budget->used, memory_order_relaxed);
}

size_t sl_budget_max(const sl_budget_t *budget)
{
    return budget == NULL ? 0 : budget->max;
}
