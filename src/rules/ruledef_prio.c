/*
 * ruledef_prio.c - a rule's `priorities`, `reserve` and `priority` fields (ruledef.h), from the
 * nodes of either format: lists and mappings as written, or the one-line texts the canonical
 * writers use. The data and its arithmetic are priorities.c's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rules/ruledef_impl.h"

/* Records the node at fault, its field and why; returns -1. */
static int fail(rd_prio_err_t *e, const yt_node_t *at, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(rd_prio_err_t *e, const yt_node_t *at, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
    e->at = at;
    e->field = field;
    return -1;
}

int rd_priorities(const yt_node_t *v, ruledef_t *out, rd_prio_err_t *e)
{
    char why[RULEDEF_ERR_MAX / 2];
    if (v->kind == YT_STRING) {
        if (prio_add_text(&out->prio, v->text, v->len, why, sizeof why) != 0)
            return fail(e, v, "priorities", "%s", why);
        return 0;
    }
    if (v->kind != YT_SEQ || v->n == 0)
        return fail(e, v, "priorities",
                    "must be a list of names, lowest first ([low, normal, high]), not %s",
                    v->kind == YT_SEQ ? "an empty list" : yt_kind_name(v->kind));
    for (size_t i = 0; i < v->n; i++) {
        const yt_node_t *item = v->items[i];
        if (item->kind != YT_STRING)
            return fail(e, item, "priorities", "each priority is a name, not %s",
                        yt_kind_name(item->kind));
        if (prio_add(&out->prio, item->text, item->len, why, sizeof why) != 0)
            return fail(e, item, "priorities", "%s", why);
    }
    return 0;
}

int rd_priority_source(const yt_node_t *v, ruledef_t *out, rd_prio_err_t *e)
{
    char kerr[KEYTPL_ERR_MAX];
    if (v->kind != YT_STRING)
        return fail(e, v, "priority",
                    "must be a key template (\"{header:x-priority}\"), "
                    "not %s",
                    yt_kind_name(v->kind));
    if (memchr(v->text, '\0', v->len) != NULL)
        return fail(e, v, "priority", "must not contain NUL bytes");
    if (keytpl_parse(v->text, v->len, &out->priority_src, kerr) != 0)
        return fail(e, v, "priority", "%s", kerr);
    memcpy(out->priority_text, v->text, v->len + 1);
    out->has_priority_src = true;
    return 0;
}

/* One `reserve` entry: a priority's name and its amount (a string "20%", or an integer). */
static int reserve_entry(ruledef_t *out, const yt_node_t *name, const yt_node_t *amount,
                         rd_prio_err_t *e)
{
    char why[RULEDEF_ERR_MAX / 2], num[24];
    const char *text = amount->text;
    size_t len = amount->len;
    if (amount->kind == YT_INT && amount->int_status == YT_INT_OK) /* JSON numbers have no text */
        len = (size_t)snprintf(num, sizeof num, "%lld", (long long)amount->integer), text = num;
    if (name->text == NULL || (amount->kind != YT_STRING && amount->kind != YT_INT) || text == NULL)
        return fail(e, amount, "reserve",
                    "each reserve is a percent (\"20%%\") or units (10), not %s",
                    yt_kind_name(amount->kind));
    if (prio_set_reserve(&out->prio, name->text, name->len, text, len, why, sizeof why) != 0)
        return fail(e, name, "reserve", "%s", why);
    return 0;
}

static int parse_reserve(ruledef_t *out, const yt_node_t *v, rd_prio_err_t *e)
{
    char why[RULEDEF_ERR_MAX / 2];
    if (v->kind == YT_STRING) {
        if (prio_set_reserve_text(&out->prio, v->text, v->len, why, sizeof why) != 0)
            return fail(e, v, "reserve", "%s", why);
        return 0;
    }
    if (v->kind != YT_MAP)
        return fail(e, v, "reserve",
                    "must be a mapping of priorities to amounts ({critical: \"20%%\"}), not %s",
                    yt_kind_name(v->kind));
    for (size_t i = 0; i < v->n; i++) {
        if (reserve_entry(out, v->items[2 * i], v->items[2 * i + 1], e) != 0)
            return -1;
    }
    return 0;
}

int rd_priorities_check(ruledef_t *out, const yt_node_t *priorities, const yt_node_t *reserve,
                        const yt_node_t *priority, rd_prio_err_t *e)
{
    char why[RULEDEF_ERR_MAX / 2];
    const yt_node_t *lone = reserve != NULL ? reserve : priority;
    if (priorities == NULL && lone != NULL)
        return fail(e, lone, lone == reserve ? "reserve" : "priority",
                    "only applies to a rule with priorities");
    if (reserve != NULL && parse_reserve(out, reserve, e) != 0)
        return -1;
    if (prio_check(&out->prio, out->rule.capacity, why, sizeof why) != 0)
        return fail(e, reserve, "reserve", "%s", why);
    if (priorities != NULL && out->mode != RULE_MODE_STRICT)
        return fail(e, priorities, "priorities",
                    "only with mode: strict (a lease or a synced count is spent without "
                    "asking the store)");
    return 0;
}
