/*
 * priority.c - a request's priority by name, for the fronts (engine_priority(), engine.h): the
 * one place that turns a name into the index the engine's decisions take, with the errors every
 * protocol reports alike.
 */
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"

int engine_priority(const rule_state_t *rs, const char *name, size_t len, unsigned *index,
                    char *err, size_t cap)
{
    const rule_priorities_t *p = &rs->def.prio;
    if (p->n == 0) {
        snprintf(err, cap, "rule '%s' has no priorities", rs->def.name);
        return -1;
    }
    int i = prio_find(p, name, len);
    if (i < 0) {
        char names[PRIO_TEXT_MAX], shown[PRIO_NAME_MAX + 4];
        size_t n = len < PRIO_NAME_MAX ? len : PRIO_NAME_MAX;
        for (size_t k = 0; k < n; k++)
            shown[k] = name[k] > ' ' && name[k] < 0x7f ? name[k] : '?';
        strcpy(shown + n, len > n ? "..." : "");
        prio_names_text(p, names);
        snprintf(err, cap, "unknown priority '%s' for rule '%s' (it has %s)", shown, rs->def.name,
                 names);
        return -1;
    }
    *index = (unsigned)i;
    return 0;
}
