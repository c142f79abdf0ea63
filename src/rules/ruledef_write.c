/*
 * ruledef_write.c - what the canonical writers write (the JSON of ruledef_json.c, the rules
 * files of ruledef_yaml.c): which fields of a rule and an override, in which order, as which
 * kind of value. Each writer turns the fields into its format's syntax; the choice of fields is
 * made here once, so the two formats cannot drift apart. Durations are written here too.
 */
#include "rules/ruledef_impl.h"

const char *const rule_mode_names[3] = {"strict", "leased", "approximate"};

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool put_tail(const ruledef_t *def, rd_field_fn fn, void *arg);

/* A writer's function and argument, for rd_adaptive_fields(). */
struct field_sink {
    rd_field_fn fn;
    void *arg;
};

static bool put_adaptive(void *arg, const char *field, rd_kind_t kind, const char *word,
                         int64_t number);

char *ruledef_format_duration(int64_t ns, char *buf)
{
    char *p = buf;
    uint64_t v = (uint64_t)ns;
    if (ns < 0) {
        *p++ = '-';
        v = 0 - v;
    }
    const uint64_t sec = (uint64_t)SL_NS_PER_SEC;
    if (v == 0) {
        strcpy(p, "0s");
    } else if (v % sec == 0) {
        static const struct {
            uint64_t s;
            char unit;
        } groups[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
        uint64_t s = v / sec;
        for (size_t i = 0; i < 4; i++) {
            if (s >= groups[i].s) {
                p += sprintf(p, "%llu%c", (unsigned long long)(s / groups[i].s), groups[i].unit);
                s %= groups[i].s;
            }
        }
    } else if (v % (uint64_t)SL_NS_PER_MS == 0) {
        sprintf(p, "%llums", (unsigned long long)(v / (uint64_t)SL_NS_PER_MS));
    } else if (v % (uint64_t)SL_NS_PER_US == 0) {
        sprintf(p, "%lluus", (unsigned long long)(v / (uint64_t)SL_NS_PER_US));
    } else {
        sprintf(p, "%lluns", (unsigned long long)v);
    }
    return buf;
}

static bool put_text(rd_field_fn fn, void *arg, const char *field, rd_kind_t kind, const char *text,
                     size_t len)
{
    return fn(arg, field, &(rd_value_t){kind, text, len, 0});
}

static bool put_int(rd_field_fn fn, void *arg, const char *field, int64_t n)
{
    char buf[24];
    int len = snprintf(buf, sizeof(buf), "%lld", (long long)n);
    return fn(arg, field, &(rd_value_t){RD_INT, buf, (size_t)len, n});
}

static bool put_duration(rd_field_fn fn, void *arg, const char *field, int64_t ns)
{
    char buf[32];
    const char *text = ruledef_format_duration(ns, buf);
    return put_text(fn, arg, field, RD_DURATION, text, strlen(text));
}

static bool put_bool(rd_field_fn fn, void *arg, const char *field, bool b)
{
    const char *text = b ? "true" : "false";
    return fn(arg, field, &(rd_value_t){RD_BOOL, text, strlen(text), b});
}

static bool put_word(rd_field_fn fn, void *arg, const char *field, const char *word)
{
    return put_text(fn, arg, field, RD_WORD, word, strlen(word));
}

/* A descriptor's fields: domain, descriptor, and limit_name, replaces and quota_mode when it
 * has them. */
static bool put_descriptor(const rule_descriptor_t *d, rd_field_fn fn, void *arg)
{
    char *entries = desc_entries_text(d);
    char *replaces = d->nreplaces > 0 ? desc_replaces_text(d) : NULL;
    bool ok = entries != NULL && (d->nreplaces == 0 || replaces != NULL) &&
              put_text(fn, arg, "domain", RD_TEXT, d->domain, strlen(d->domain)) &&
              put_text(fn, arg, "descriptor", RD_TEXT, entries, strlen(entries));
    if (ok && d->limit_name != NULL)
        ok = put_text(fn, arg, "limit_name", RD_TEXT, d->limit_name, strlen(d->limit_name));
    if (ok && replaces != NULL)
        ok = put_text(fn, arg, "replaces", RD_TEXT, replaces, strlen(replaces));
    if (ok && d->quota)
        ok = put_bool(fn, arg, "quota_mode", true);
    free(entries);
    free(replaces);
    return ok;
}

bool rd_rule_fields(const ruledef_t *def, rd_field_fn fn, void *arg)
{
    const sl_rule_t *r = &def->rule;
    const char *alg = sl_algorithm_name(r->algorithm);
    if (alg == NULL)
        return false;
    bool ok = put_text(fn, arg, "name", RD_TEXT, def->name, strlen(def->name));
    if (def->unlimited) /* no numbers: they are always the same */
        return ok && put_bool(fn, arg, "unlimited", true) && put_tail(def, fn, arg);
    ok = ok && put_word(fn, arg, "algorithm", alg) &&
         put_int(fn, arg, "limit", def->blocked ? 0 : r->limit) &&
         put_duration(fn, arg, "window", r->window_ns);
    const core_algorithm_t *row = core_algorithm(r->algorithm); /* not NULL: it has a name */
    if (ok && row->burst.taken)
        ok = put_int(fn, arg, "burst", r->burst);
    if (ok && row->buckets.taken)
        ok = put_int(fn, arg, "buckets", r->buckets);
    if (ok && r->max_delay_ns != 0)
        ok = put_duration(fn, arg, "max_delay", r->max_delay_ns);
    if (ok && def->max_debt_given)
        ok = put_int(fn, arg, "max_debt", r->max_debt);
    struct field_sink sink = {fn, arg};
    ok = ok && rd_adaptive_fields(r, put_adaptive, &sink);
    return ok && put_tail(def, fn, arg);
}

/* A rule's priorities, reserves and priority source, when it has them (as texts). */
static bool put_priorities(const ruledef_t *def, rd_field_fn fn, void *arg)
{
    char text[PRIO_TEXT_MAX];
    bool ok = true;
    if (def->prio.n > 0)
        ok = put_text(fn, arg, "priorities", RD_TEXT, text, prio_names_text(&def->prio, text));
    if (ok && prio_has_reserve(&def->prio))
        ok = put_text(fn, arg, "reserve", RD_TEXT, text, prio_reserve_text(&def->prio, text));
    if (ok && def->has_priority_src)
        ok = put_text(fn, arg, "priority", RD_TEXT, def->priority_text, strlen(def->priority_text));
    return ok;
}

/* What follows a rule's numbers: its key template, flags and descriptor. */
static bool put_tail(const ruledef_t *def, rd_field_fn fn, void *arg)
{
    bool ok = true;
    if (def->has_key)
        ok = put_text(fn, arg, "key", RD_TEXT, def->key_text, strlen(def->key_text));
    ok = ok && put_bool(fn, arg, "shadow", def->shadow) &&
         put_word(fn, arg, "on_store_error",
                  def->on_store_error == RULE_ON_ERROR_DENY ? "deny" : "allow") &&
         put_word(fn, arg, "cold_start", def->cold_start == RULE_COLD_CLOSED ? "closed" : "open");
    if (ok && def->mode != RULE_MODE_STRICT)
        ok = put_word(fn, arg, "mode", rule_mode_names[def->mode]);
    if (ok && def->lease_ns > 0)
        ok = put_duration(fn, arg, "lease_time", def->lease_ns);
    if (ok && def->sync_ns > 0)
        ok = put_duration(fn, arg, "sync_interval", def->sync_ns);
    if (ok && def->replicas > 0)
        ok = put_int(fn, arg, "replicas", def->replicas);
    if (ok && def->replica_wait_ns > 0)
        ok = put_duration(fn, arg, "replica_wait", def->replica_wait_ns);
    return ok && (def->desc == NULL || put_descriptor(def->desc, fn, arg)) &&
           put_priorities(def, fn, arg);
}

bool rd_override_fields(const rule_override_t *ov, rd_field_fn fn, void *arg)
{
    const sl_rule_t *r = &ov->rule;
    bool ok = true;
    if (ok && (ov->fields & OVERRIDE_F_LIMIT))
        ok = put_int(fn, arg, "limit", ov->blocked ? 0 : r->limit);
    if (ok && (ov->fields & OVERRIDE_F_WINDOW))
        ok = put_duration(fn, arg, "window", r->window_ns);
    if (ok && (ov->fields & OVERRIDE_F_BURST))
        ok = put_int(fn, arg, "burst", r->burst);
    if (ok && (ov->fields & OVERRIDE_F_BUCKETS))
        ok = put_int(fn, arg, "buckets", r->buckets);
    if (ok && (ov->fields & OVERRIDE_F_MAX_DELAY))
        ok = put_duration(fn, arg, "max_delay", r->max_delay_ns);
    return ok;
}

static bool put_adaptive(void *arg, const char *field, rd_kind_t kind, const char *word,
                         int64_t number)
{
    const struct field_sink *k = arg;
    switch (kind) {
    case RD_WORD:
        return put_word(k->fn, k->arg, field, word);
    case RD_DURATION:
        return put_duration(k->fn, k->arg, field, number);
    case RD_INT:
    case RD_TEXT:
    case RD_BOOL:
        break;
    }
    return put_int(k->fn, k->arg, field, number);
}
