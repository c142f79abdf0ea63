/*
 * budget.h - the inside of sl_budget_t, for the tables that count against it (table.c) and
 * budget.c. A budget is shared by threads: `used` is read and changed with relaxed atomics.
 */
#ifndef SLUICE_CORE_BUDGET_H
#define SLUICE_CORE_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>

#include "sluice/sluice.h"

struct sl_budget {
    _Atomic size_t used; /* bytes counted now */
    size_t max;          /* bytes, > 0 */
};

#endif /* SLUICE_CORE_BUDGET_H */
