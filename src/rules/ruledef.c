/*
 * ruledef.c - rule definitions: the validation shared by the YAML and JSON front ends, names
 * and durations (see ruledef.h). The writers are in the front ends' files, over the fields
 * ruledef_write.c lists (which writes durations and the mode's names too); equality and
 * freeing are ruledef_equal.c's.
 *
 * A mapping of fields (a YAML rule, a JSON object; see ruledef_impl.h) is checked in three
 * steps: each field's value on its own, in the order written (its type, integer syntax,
 * durations, names, key templates); then the required fields; then the algorithm's parameters
 * together, through sl_rule_prepare(), whose SL_E* code is mapped back to the field it is about
 * and the position that field was written at.
 *
 * Overrides inherit the numbers they do not name from the prepared rule, with one refinement:
 * a token_bucket / gcra burst equal to the rule's limit is the default, and follows the
 * override's limit (a premium tenant with `limit: 1000` gets a burst of 1000, not the rule's
 * 100). A burst the rule set to anything else is kept. Because the canonical JSON writes burst
 * explicitly and a written burst equal to the limit means the same as no burst, the rule
 * survives a round trip through JSON with its overrides' meaning unchanged.
 *
 * This file is long because a rule's grammar and its overrides' are one: an override reads the
 * rule's fields with the same static readers, and the rule's walk reads its overrides, so split
 * in two files the halves would call each other (a loop the layers forbid).
 */
#include "core/adaptive.h"
#include "rules/ruledef_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- messages ------------------------------------------------------------------------------ */

/* Appends printf output at err[*used], clamped to RULEDEF_ERR_MAX. */
static void put(char *err, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(char *err, size_t *used, const char *fmt, ...)
{
    if (*used + 1 >= RULEDEF_ERR_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err + *used, RULEDEF_ERR_MAX - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < RULEDEF_ERR_MAX ? *used + (size_t)n : RULEDEF_ERR_MAX - 1;
}

int rd_fail(char *err, const yt_node_t *at, const char *path, const char *field, const char *fmt,
            ...)
{
    size_t used = 0;
    err[0] = '\0';
    if (at != NULL && at->line > 0)
        put(err, &used, "line %u, column %u: ", at->line, at->column);
    bool has_path = path != NULL && path[0] != '\0';
    if (has_path && field != NULL)
        put(err, &used, "%s.%s: ", path, field);
    else if (has_path || field != NULL)
        put(err, &used, "%s: ", has_path ? path : field);
    if (used + 1 < RULEDEF_ERR_MAX) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + used, RULEDEF_ERR_MAX - used, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int rd_unknown_algorithm(char *err, const yt_node_t *at, const char *path, const char *field,
                         const char *text, size_t len)
{
    char shown[RD_SHOWN_BUF], names[160];
    core_algorithm_join(names, sizeof names, core_algorithm_any, ", ", " or ");
    return rd_fail(err, at, path, field, "unknown algorithm '%s' (expected %s)",
                   text != NULL ? rd_shown(text, len, shown) : "?", names);
}

const char *rd_shown(const char *t, size_t len, char *buf)
{
    size_t n = len < RD_SHOWN_MAX ? len : RD_SHOWN_MAX;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        buf[i] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    strcpy(buf + n, len > n ? "..." : "");
    return buf;
}

/* ---- names and durations ------------------------------------------------------------------- */

bool ruledef_name_valid(const char *name, size_t len)
{
    if (name == NULL || len == 0 || len > RULE_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* ---- field values -------------------------------------------------------------------------- */

/* A string field: any scalar with text (a YAML plain scalar is taken as written). */
static int get_text(const yt_node_t *v, const char *path, const char *field, char *err)
{
    if (v->text == NULL || v->kind == YT_NULL || v->kind == YT_SEQ || v->kind == YT_MAP)
        return rd_fail(err, v, path, field, "must be a string, not %s%s", yt_kind_name(v->kind),
                       v->kind == YT_MAP ? " (quote key templates: \"{ip}\")" : "");
    return 0;
}

/* An integer >= min (min is 0 or 1) into *out. */
static int get_int(const yt_node_t *v, int64_t min, const char *path, const char *field,
                   int64_t *out, char *err)
{
    const char *want = min > 0 ? "an integer > 0" : "an integer >= 0";
    if (v->kind != YT_INT)
        return rd_fail(err, v, path, field, "must be %s, not %s", want, yt_kind_name(v->kind));
    switch (v->int_status) {
    case YT_INT_OVERFLOW:
        return rd_fail(err, v, path, field, "must be %s (out of range)", want);
    case YT_INT_PLUS:
        return rd_fail(err, v, path, field, "must be %s written without a sign", want);
    case YT_INT_LEADING_ZERO:
        return rd_fail(err, v, path, field, "must be %s written without leading zeros", want);
    case YT_INT_OK:
        break;
    }
    if (v->integer < min)
        return rd_fail(err, v, path, field, "must be %s", want);
    *out = v->integer;
    return 0;
}

/* A duration: a string ("250ms", "1h30m") or an integer of milliseconds, into *ns. */
static int get_duration(const yt_node_t *v, const char *path, const char *field, int64_t *ns,
                        char *err)
{
    char buf[RD_SHOWN_BUF];
    if (v->kind == YT_INT) {
        int64_t ms = 0;
        if (get_int(v, 0, path, field, &ms, err) != 0)
            return rd_fail(err, v, path, field, "must be a duration or milliseconds >= 0");
        if (__builtin_mul_overflow(ms, SL_NS_PER_MS, ns))
            return rd_fail(err, v, path, field, "must be at most 366d");
        return 0;
    }
    if (v->kind != YT_STRING || v->text == NULL)
        return rd_fail(err, v, path, field,
                       "must be a duration such as \"1s\" or integer milliseconds, not %s",
                       yt_kind_name(v->kind));
    int rc = sl_duration_parse(v->text, v->len, ns);
    if (rc == SL_EOVERFLOW)
        return rd_fail(err, v, path, field, "duration '%s' is out of range",
                       rd_shown(v->text, v->len, buf));
    if (rc != SL_OK)
        return rd_fail(err, v, path, field, "malformed duration '%s' (e.g. 250ms, 10s, 1h30m)",
                       rd_shown(v->text, v->len, buf));
    return 0;
}

static int get_bool(const yt_node_t *v, const char *path, const char *field, bool *out, char *err)
{
    if (v->kind != YT_BOOL)
        return rd_fail(err, v, path, field, "must be true or false, not %s", yt_kind_name(v->kind));
    *out = v->boolean;
    return 0;
}

/* One of the words (words[i] -> i; n of them, 2 or 3). */
static int get_word(const yt_node_t *v, const char *const *words, int n, const char *path,
                    const char *field, int *out, char *err)
{
    char buf[RD_SHOWN_BUF];
    if (get_text(v, path, field, err) != 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (strlen(words[i]) == v->len && memcmp(v->text, words[i], v->len) == 0) {
            *out = i;
            return 0;
        }
    }
    if (n == 2)
        return rd_fail(err, v, path, field, "must be %s or %s, not '%s'", words[0], words[1],
                       rd_shown(v->text, v->len, buf));
    return rd_fail(err, v, path, field, "must be %s, %s or %s, not '%s'", words[0], words[1],
                   words[2], rd_shown(v->text, v->len, buf));
}

/* One of two words (first -> 0, second -> 1). */
static int get_choice(const yt_node_t *v, const char *a, const char *b, const char *path,
                      const char *field, int *out, char *err)
{
    const char *const words[2] = {a, b};
    return get_word(v, words, 2, path, field, out, err);
}

/*
 * Checks the keys of a mapping against `names` (count of them): each must be one, once.
 * slots[f] gets field f's value node; order[i] the field of the i-th pair. Returns 0 or -1.
 * order needs only `count` entries: among more pairs than names, one of the first count + 1
 * is unknown or repeated, and collect() stops there.
 */
static int collect(const yt_node_t *map, const char *const *names, size_t count,
                   const yt_node_t **slots, size_t *order, const char *path, char *err)
{
    char buf[RD_SHOWN_BUF];
    for (size_t i = 0; i < map->n; i++) {
        const yt_node_t *k = map->items[2 * i];
        if (k->text == NULL || k->kind == YT_SEQ || k->kind == YT_MAP)
            return rd_fail(err, k, path, NULL, "field names must be strings, not %s",
                           yt_kind_name(k->kind));
        size_t f = 0;
        while (f < count && !(strlen(names[f]) == k->len && memcmp(names[f], k->text, k->len) == 0))
            f++;
        if (f == count)
            return rd_fail(err, k, path, NULL, "unknown field '%s'",
                           rd_shown(k->text, k->len, buf));
        if (slots[f] != NULL)
            return rd_fail(err, k, path, NULL, "duplicate field '%s'", names[f]);
        slots[f] = map->items[2 * i + 1];
        order[i] = f;
    }
    return 0;
}

/* ---- the algorithm's parameters ------------------------------------------------------------ */

/* The five numbers of a rule, in OVERRIDE_F_* bit order. */
enum { NF_LIMIT, NF_WINDOW, NF_BURST, NF_BUCKETS, NF_MAX_DELAY, NF_COUNT };
static const char *const num_names[NF_COUNT] = {"limit", "window", "burst", "buckets", "max_delay"};

/* Text of number f of r ("10", "1m30s") for a message; buf holds 32 bytes. */
static const char *num_text(int f, const sl_rule_t *r, char *buf)
{
    int64_t v[NF_COUNT] = {r->limit, r->window_ns, r->burst, r->buckets, r->max_delay_ns};
    if (f == NF_WINDOW || f == NF_MAX_DELAY)
        return ruledef_format_duration(v[f], buf);
    snprintf(buf, 32, "%lld", (long long)v[f]);
    return buf;
}

/* "only applies to token_bucket and gcra": the algorithms that take a parameter, from their
 * rows. names is room for them (n bytes). */
static void only_applies(char *why, size_t cap, core_algorithm_pred takes, char *names, size_t n)
{
    core_algorithm_join(names, n, takes, ", ", " and ");
    snprintf(why, cap, "only applies to %s", names);
}

/*
 * Reports the field sl_rule_prepare() refused r for with rc. at[f] is the node of number f when
 * it was written here; a number not written is `unset_from`'s ("the default", "the rule's") and
 * the message is placed at the mapping. Returns -1.
 */
static int prepare_fail(int rc, const sl_rule_t *tried, const yt_node_t *const *at,
                        const yt_node_t *map, const char *path, const char *unset_from, char *err)
{
    sl_rule_t resolved = *tried; /* the defaults as sl_rule_prepare() applies them */
    const sl_rule_t *r = &resolved;
    const core_algorithm_t *row = core_algorithm(r->algorithm);
    if (row == NULL)
        return rd_fail(err, map, path, NULL, "%s", sl_strerror(rc));
    if (resolved.burst == SL_DEFAULT)
        resolved.burst = row->burst.taken ? core_param_default(&row->burst, r->limit) : 0;
    if (resolved.buckets == SL_DEFAULT)
        resolved.buckets = row->buckets.taken ? core_param_default(&row->buckets, r->limit) : 0;
    char why[160], val[32], names[96];
    int f;
    switch (rc) {
    case SL_ELIMIT:
        f = NF_LIMIT;
        if (r->limit > 0)
            snprintf(why, sizeof(why), "must be at most %lld for %s", (long long)row->limit_max,
                     row->name);
        else
            snprintf(why, sizeof(why), "must be an integer > 0");
        break;
    case SL_EWINDOW:
        f = NF_WINDOW;
        snprintf(why, sizeof(why), "%s",
                 r->window_ns < SL_WINDOW_MIN_NS ? "must be at least 1ms" : "must be at most 366d");
        break;
    case SL_EBURST:
        f = NF_BURST;
        if (row->burst.taken)
            snprintf(why, sizeof(why), "must be at least %lld for %s", (long long)row->burst.min,
                     row->name);
        else
            only_applies(why, sizeof(why), core_algorithm_takes_burst, names, sizeof(names));
        break;
    case SL_EBUCKETS:
        f = NF_BUCKETS;
        if (!row->buckets.taken)
            only_applies(why, sizeof(why), core_algorithm_takes_buckets, names, sizeof(names));
        else if (r->buckets < row->buckets.min || r->buckets > row->buckets.max)
            snprintf(why, sizeof(why), "must be %lld..%lld", (long long)row->buckets.min,
                     (long long)row->buckets.max);
        else
            snprintf(why, sizeof(why), "must divide the window (%s)",
                     ruledef_format_duration(r->window_ns, val));
        break;
    case SL_EDELAY:
        f = NF_MAX_DELAY;
        if (row->max_delay.taken)
            snprintf(why, sizeof(why), "must be at most 366d");
        else
            only_applies(why, sizeof(why), core_algorithm_takes_delay, names, sizeof(names));
        break;
    case SL_EOVERFLOW:
        f = at[NF_BURST] != NULL ? NF_BURST : NF_WINDOW;
        snprintf(why, sizeof(why),
                 "window / limit * burst is out of range (above about 73 "
                 "years); lower the window or the burst");
        break;
    default:
        return rd_fail(err, map, path, NULL, "%s", sl_strerror(rc));
    }
    if (at[f] != NULL)
        return rd_fail(err, at[f], path, num_names[f], "%s", why);
    return rd_fail(err, map, path, num_names[f], "%s; %s is %s", why, num_text(f, r, val),
                   unset_from);
}

/* ---- overrides ----------------------------------------------------------------------------- */

enum { OF_KEY, OF_LIMIT, OF_WINDOW, OF_BURST, OF_BUCKETS, OF_MAX_DELAY, OF_COUNT };
static const char *const override_field_names[OF_COUNT] = {"key",   "limit",   "window",
                                                           "burst", "buckets", "max_delay"};

/* Checks an override's key (from the mapping or the caller). */
static int check_override_key(const yt_node_t *at, const char *path, size_t len, char *err)
{
    if (len == 0 || len > OVERRIDE_KEY_MAX)
        return rd_fail(err, at, path, "key", "must be 1..%d bytes, not %zu", OVERRIDE_KEY_MAX, len);
    return 0;
}

/* The override's numbers applied to the parent's; fills out->rule / blocked. */
static int override_rule(const ruledef_t *parent, const yt_node_t *map, const yt_node_t *const *at,
                         const int64_t *num, uint32_t fields, const char *path,
                         rule_override_t *out, char *err)
{
    if ((fields & OVERRIDE_F_LIMIT) && num[NF_LIMIT] == 0) {
        for (int f = NF_WINDOW; f < NF_COUNT; f++) {
            if (at[f] != NULL)
                return rd_fail(err, at[f], path, num_names[f],
                               "a blocked override (limit 0) takes no other fields");
        }
        out->blocked = true;
        out->rule = parent->rule;
        return 0;
    }
    sl_rule_t r = parent->rule;
    if (!parent->max_debt_given)
        r.max_debt = SL_DEFAULT; /* the override's own capacity */
    if (rd_takes_burst(r.algorithm) && (fields & OVERRIDE_F_LIMIT) &&
        !(fields & OVERRIDE_F_BURST)) {
        /* the burst keeps its proportion to the limit (a default burst stays the limit): an
         * override that raises the limit raises what a key may take at once too */
        __int128 scaled = ((__int128)r.burst * num[NF_LIMIT] + r.limit - 1) / r.limit;
        r.burst = scaled > INT64_MAX ? INT64_MAX : (int64_t)scaled;
    }
    int64_t *dst[NF_COUNT] = {&r.limit, &r.window_ns, &r.burst, &r.buckets, &r.max_delay_ns};
    for (int f = 0; f < NF_COUNT; f++) {
        if (fields & (1u << f))
            *dst[f] = num[f];
    }
    sl_rule_t tried = r;
    int rc = sl_rule_prepare(&r);
    if (rc != SL_OK)
        return prepare_fail(rc, &tried, at, map, path, "the rule's", err);
    out->rule = r;
    return 0;
}

int rd_override_from_map(const ruledef_t *parent, const yt_node_t *map, const char *path,
                         const char *key, size_t key_len, rule_override_t *out, char *err)
{
    char buf[RD_SHOWN_BUF];
    memset(out, 0, sizeof(*out));
    if (map->kind != YT_MAP)
        return rd_fail(err, map, path, NULL, "must be a mapping of fields, not %s",
                       yt_kind_name(map->kind));
    const yt_node_t *slots[OF_COUNT] = {0};
    size_t order[OF_COUNT];
    if (collect(map, override_field_names, OF_COUNT, slots, order, path, err) != 0)
        return -1;
    const yt_node_t *at[NF_COUNT] = {0};
    int64_t num[NF_COUNT] = {0};
    uint32_t fields = 0;
    for (size_t i = 0; i < map->n; i++) {
        size_t f = order[i];
        const yt_node_t *v = slots[f];
        const char *name = override_field_names[f];
        int rc = 0;
        if (f == OF_KEY) {
            rc = get_text(v, path, name, err);
            if (rc == 0)
                rc = check_override_key(v, path, v->len, err);
            if (rc == 0 && key != NULL && (key_len != v->len || memcmp(key, v->text, key_len) != 0))
                rc = rd_fail(err, v, path, name, "'%s' does not match the override's key",
                             rd_shown(v->text, v->len, buf));
            if (rc != 0)
                return -1;
            continue;
        }
        int n = (int)f - OF_LIMIT;
        if (n == NF_WINDOW || n == NF_MAX_DELAY)
            rc = get_duration(v, path, name, &num[n], err);
        else
            rc = get_int(v, n == NF_BUCKETS ? 1 : 0, path, name, &num[n], err);
        if (rc != 0)
            return -1;
        at[n] = v;
        fields |= 1u << n;
    }
    if (key == NULL && slots[OF_KEY] == NULL)
        return rd_fail(err, map, path, NULL, "missing required field 'key'");
    if (key != NULL && check_override_key(NULL, path, key_len, err) != 0)
        return -1;
    if (fields == 0)
        return rd_fail(err, map, path, NULL,
                       "names no field to override (limit, window, burst, buckets, max_delay)");
    if (parent->unlimited)
        return rd_fail(err, map, path, NULL,
                       "rule '%s' is unlimited: it has no numbers to override", parent->name);
    if (override_rule(parent, map, at, num, fields, path, out, err) != 0)
        return -1;
    const char *k = key != NULL ? key : slots[OF_KEY]->text;
    size_t klen = key != NULL ? key_len : slots[OF_KEY]->len;
    out->key = malloc(klen + 1);
    if (out->key == NULL)
        return rd_fail(err, NULL, path, NULL, "out of memory");
    memcpy(out->key, k, klen);
    out->key[klen] = '\0';
    out->key_len = klen;
    out->fields = fields;
    return 0;
}

/* An override key and where it came from, for finding duplicates by sorting. */
typedef struct key_ref {
    const char *key;
    size_t len;
    size_t index;
} key_ref_t;

static int key_ref_cmp(const void *pa, const void *pb)
{
    const key_ref_t *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->key, b->key, n);
    if (c != 0)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->index < b->index ? -1 : (a->index > b->index);
}

/* Among n keys, finds a repeated one: returns the larger index of the first equal pair found
 * and sets *first to the smaller; or returns n. -1 (as SIZE_MAX) on allocation failure. */
static size_t find_duplicate(const key_ref_t *keys, size_t n, size_t *first)
{
    if (n < 2)
        return n;
    key_ref_t *sorted = malloc(n * sizeof(*sorted));
    if (sorted == NULL)
        return SIZE_MAX;
    memcpy(sorted, keys, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), key_ref_cmp);
    size_t dup = n;
    for (size_t i = 1; i < n; i++) {
        if (sorted[i].len == sorted[i - 1].len &&
            memcmp(sorted[i].key, sorted[i - 1].key, sorted[i].len) == 0) {
            /* the pair with the smallest later index is the first a reader meets */
            if (dup == n || sorted[i].index < dup) {
                dup = sorted[i].index;
                *first = sorted[i - 1].index;
            }
        }
    }
    free(sorted);
    return dup;
}

/* The YAML `overrides:` list of a rule being built. */
static int inline_overrides(ruledef_t *def, const yt_node_t *list, const char *path, char *err)
{
    if (list->kind == YT_NULL)
        return 0;
    if (list->kind != YT_SEQ)
        return rd_fail(err, list, path, "overrides", "must be a list, not %s",
                       yt_kind_name(list->kind));
    if (list->n > RULE_OVERRIDES_INLINE_MAX)
        return rd_fail(err, list, path, "overrides",
                       "more than %d overrides (keep them in the "
                       "config store)",
                       RULE_OVERRIDES_INLINE_MAX);
    if (list->n == 0)
        return 0;
    def->overrides = calloc(list->n, sizeof(*def->overrides));
    key_ref_t *keys = calloc(list->n, sizeof(*keys));
    if (def->overrides == NULL || keys == NULL) {
        free(keys);
        return rd_fail(err, list, path, NULL, "out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < list->n && rc == 0; i++) {
        char sub[RD_PATH_MAX];
        snprintf(sub, sizeof(sub), "%s%soverrides[%zu]", path, path[0] ? "." : "", i);
        rc = rd_override_from_map(def, list->items[i], sub, NULL, 0, &def->overrides[i], err);
        if (rc == 0) {
            def->noverrides++;
            keys[i] = (key_ref_t){def->overrides[i].key, def->overrides[i].key_len, i};
        }
    }
    if (rc == 0) {
        size_t first = 0, dup = find_duplicate(keys, list->n, &first);
        char buf[RD_SHOWN_BUF], sub[RD_PATH_MAX];
        if (dup == SIZE_MAX) {
            rc = rd_fail(err, list, path, NULL, "out of memory");
        } else if (dup < list->n) {
            snprintf(sub, sizeof(sub), "%s%soverrides[%zu]", path, path[0] ? "." : "", dup);
            rc = rd_fail(err, yt_map_get(list->items[dup], "key"), sub, "key",
                         "duplicate override key '%s' (also overrides[%zu])",
                         rd_shown(keys[dup].key, keys[dup].len, buf), first);
        }
    }
    free(keys);
    return rc;
}

/* ---- rules --------------------------------------------------------------------------------- */

enum {
    RF_NAME,
    RF_ALGORITHM,
    RF_LIMIT,
    RF_WINDOW,
    RF_BURST,
    RF_BUCKETS,
    RF_MAX_DELAY,
    RF_MAX_DEBT,
    RF_KEY,
    RF_SHADOW,
    RF_ON_STORE_ERROR,
    RF_COLD_START,
    RF_MODE,
    RF_LEASE_TIME,
    RF_SYNC_INTERVAL,
    RF_REPLICAS,
    RF_REPLICA_WAIT,
    RF_DOMAIN,
    RF_DESCRIPTOR,
    RF_LIMIT_NAME,
    RF_REPLACES,
    RF_QUOTA_MODE,
    RF_UNLIMITED,
    RF_OVERRIDES,
    RF_HOLD_TIMEOUT,
    RF_PRIORITIES,
    RF_RESERVE,
    RF_PRIORITY,
    RF_ADAPTIVE, /* the adaptive limit's RD_ADAPTIVE_FIELDS fields, from here */
    RF_MIN_LIMIT,
    RF_MAX_LIMIT,
    RF_BACKOFF,
    RF_LATENCY_TIMEOUT,
    RF_PROBE,
    RF_COUNT
};

static const char *const rule_field_names[RF_COUNT] = {
    "name",         "algorithm",      "limit",
    "window",       "burst",          "buckets",
    "max_delay",    "max_debt",       "key",
    "shadow",       "on_store_error", "cold_start",
    "mode",         "lease_time",     "sync_interval",
    "replicas",     "replica_wait",   "domain",
    "descriptor",   "limit_name",     "replaces",
    "quota_mode",   "unlimited",      "overrides",
    "hold_timeout", "priorities",     "reserve",
    "priority",     "adaptive",       "min_limit",
    "max_limit",    "backoff",        "latency_timeout",
    "probe"};

static int parse_name(const yt_node_t *v, const char *path, const char *name_hint, ruledef_t *out,
                      char *err)
{
    char buf[RD_SHOWN_BUF];
    if (get_text(v, path, "name", err) != 0)
        return -1;
    if (!ruledef_name_valid(v->text, v->len))
        return rd_fail(err, v, path, "name", "'%s' is not 1..64 characters of A-Z a-z 0-9 _ . : -",
                       rd_shown(v->text, v->len, buf));
    char hint[RD_SHOWN_BUF];
    if (name_hint != NULL && strcmp(name_hint, v->text) != 0)
        return rd_fail(err, v, path, "name", "'%s' does not match the name '%s' in the request",
                       v->text, rd_shown(name_hint, strlen(name_hint), hint));
    memcpy(out->name, v->text, v->len + 1);
    return 0;
}

static int parse_key_template(const yt_node_t *v, const char *path, ruledef_t *out, char *err)
{
    char kerr[KEYTPL_ERR_MAX];
    if (get_text(v, path, "key", err) != 0)
        return -1;
    if (memchr(v->text, '\0', v->len) != NULL)
        return rd_fail(err, v, path, "key", "must not contain NUL bytes");
    if (keytpl_parse(v->text, v->len, &out->key, kerr) != 0)
        return rd_fail(err, v, path, "key", "%s", kerr);
    memcpy(out->key_text, v->text, v->len + 1); /* keytpl_parse bounds len below the buffer */
    out->has_key = true;
    return 0;
}

/* One of the descriptor's fields (domain, descriptor, limit_name, replaces) into out->desc. */
static int descriptor_field(const char *name, const yt_node_t *v, const char *path, ruledef_t *out,
                            char *err)
{
    char why[RULEDEF_ERR_MAX / 2];
    if (get_text(v, path, name, err) != 0)
        return -1;
    if (desc_set(&out->desc, name, v->text, v->len, why, sizeof why) != 0)
        return rd_fail(err, v, path, name, "%s", why);
    return 0;
}

/* The priorities or priority field through its parser (ruledef_prio.c), its error formatted. */
static int priority_field(int (*parse)(const yt_node_t *, ruledef_t *, rd_prio_err_t *),
                          const yt_node_t *v, const char *path, ruledef_t *out, char *err)
{
    rd_prio_err_t pe;
    return parse(v, out, &pe) == 0 ? 0 : rd_fail(err, pe.at, path, pe.field, "%s", pe.why);
}

/* Checks field f's value v on its own and stores it in out. */
static int parse_rule_field(size_t f, const yt_node_t *v, const char *path, const char *name_hint,
                            ruledef_t *out, char *err)
{
    const char *name = rule_field_names[f];
    int choice = 0;
    switch (f) {
    case RF_NAME:
        return parse_name(v, path, name_hint, out, err);
    case RF_ALGORITHM:
        if (get_text(v, path, name, err) != 0)
            return -1;
        if (sl_algorithm_parse(v->text, v->len, &out->rule.algorithm) != SL_OK)
            return rd_unknown_algorithm(err, v, path, name, v->text, v->len);
        return 0;
    case RF_LIMIT: /* 0 (every request refused) only with a descriptor: build_rule checks */
        out->blocked = v->kind == YT_INT && v->int_status == YT_INT_OK && v->integer == 0;
        return out->blocked ? 0 : get_int(v, 1, path, name, &out->rule.limit, err);
    case RF_WINDOW:
    case RF_HOLD_TIMEOUT: /* a holding algorithm's window (build_rule() checks which) */
        return get_duration(v, path, name, &out->rule.window_ns, err);
    case RF_BURST:
        return get_int(v, 0, path, name, &out->rule.burst, err);
    case RF_BUCKETS:
        return get_int(v, 1, path, name, &out->rule.buckets, err);
    case RF_MAX_DELAY:
        return get_duration(v, path, name, &out->rule.max_delay_ns, err);
    case RF_MAX_DEBT:
        if (get_int(v, 0, path, name, &out->rule.max_debt, err) != 0)
            return -1;
        if (out->rule.max_debt > SL_COUNT_MAX)
            return rd_fail(err, v, path, name,
                           "must be at most 4611686018427387903 (2^62 - 1) units past the limit");
        out->max_debt_given = true;
        return 0;
    case RF_KEY:
        return parse_key_template(v, path, out, err);
    case RF_SHADOW:
        return get_bool(v, path, name, &out->shadow, err);
    case RF_ON_STORE_ERROR:
        if (get_choice(v, "allow", "deny", path, name, &choice, err) != 0)
            return -1;
        out->on_store_error = choice ? RULE_ON_ERROR_DENY : RULE_ON_ERROR_ALLOW;
        return 0;
    case RF_COLD_START:
        if (get_choice(v, "open", "closed", path, name, &choice, err) != 0)
            return -1;
        out->cold_start = choice ? RULE_COLD_CLOSED : RULE_COLD_OPEN;
        return 0;
    case RF_MODE:
        if (get_word(v, rule_mode_names, 3, path, name, &choice, err) != 0)
            return -1;
        out->mode = (rule_mode_t)choice;
        return 0;
    case RF_LEASE_TIME:
        if (get_duration(v, path, name, &out->lease_ns, err) != 0)
            return -1;
        if (out->lease_ns < SL_NS_PER_MS || out->lease_ns % SL_NS_PER_MS != 0)
            return rd_fail(err, v, path, name, "must be whole milliseconds, at least 1ms");
        if (out->lease_ns > SL_WINDOW_MAX_NS)
            return rd_fail(err, v, path, name, "must be at most 366d");
        return 0;
    case RF_SYNC_INTERVAL:
        if (get_duration(v, path, name, &out->sync_ns, err) != 0)
            return -1;
        if (out->sync_ns < SL_NS_PER_MS || out->sync_ns % SL_NS_PER_MS != 0)
            return rd_fail(err, v, path, name, "must be whole milliseconds, at least 1ms");
        if (out->sync_ns > RULE_SYNC_MAX_NS)
            return rd_fail(err, v, path, name, "must be at most 1h");
        return 0;
    case RF_REPLICAS: /* its bounds, and replica_wait's: rd_replicas_problem */
        return get_int(v, 1, path, name, &out->replicas, err);
    case RF_REPLICA_WAIT:
        return get_duration(v, path, name, &out->replica_wait_ns, err);
    case RF_DOMAIN:
    case RF_DESCRIPTOR:
    case RF_LIMIT_NAME:
    case RF_REPLACES:
        return descriptor_field(name, v, path, out, err);
    case RF_QUOTA_MODE: /* with a descriptor: check_descriptor_fields */
        if (out->desc == NULL && (out->desc = calloc(1, sizeof *out->desc)) == NULL)
            return rd_fail(err, v, path, name, "out of memory");
        return get_bool(v, path, name, &out->desc->quota, err);
    case RF_UNLIMITED:
        return get_bool(v, path, name, &out->unlimited, err);
    case RF_PRIORITIES:
    case RF_PRIORITY:
        return priority_field(f == RF_PRIORITIES ? rd_priorities : rd_priority_source, v, path, out,
                              err);
    case RF_ADAPTIVE:
        if (get_text(v, path, name, err) != 0)
            return -1;
        if (adaptive_parse(v->text, v->len, &out->rule.adaptive.algorithm) != SL_OK)
            return rd_fail(err, v, path, name,
                           "unknown adaptive algorithm (expected aimd or vegas)");
        return 0;
    case RF_MIN_LIMIT:
        return get_int(v, 1, path, name, &out->rule.adaptive.min_limit, err);
    case RF_MAX_LIMIT:
        return get_int(v, 1, path, name, &out->rule.adaptive.max_limit, err);
    case RF_BACKOFF:
        return get_int(v, 1, path, name, &out->rule.adaptive.backoff_pct, err);
    case RF_LATENCY_TIMEOUT:
        return get_duration(v, path, name, &out->rule.adaptive.timeout_ns, err);
    case RF_PROBE:
        return get_int(v, 1, path, name, &out->rule.adaptive.probe, err);
    default:      /* reserve: once the priorities are known, whatever their order */
        return 0; /* overrides: once the rule is prepared */
    }
}

/* An unlimited rule names no numbers (they are RULE_UNLIMITED_LIMIT per second) and needs a
 * descriptor; the fields of a descriptor come together. */
static int check_descriptor_fields(const yt_node_t *const *slots, const yt_node_t *map,
                                   const char *path, ruledef_t *out, char *err)
{
    for (size_t f = RF_ALGORITHM; out->unlimited && f <= RF_OVERRIDES; f++) {
        if (slots[f] != NULL &&
            (f <= RF_MAX_DEBT || f == RF_OVERRIDES || f == RF_MODE || f == RF_LEASE_TIME ||
             f == RF_SYNC_INTERVAL || f == RF_REPLICAS || f == RF_REPLICA_WAIT))
            return rd_fail(err, slots[f], path, rule_field_names[f],
                           "an unlimited rule takes no %s: it admits everything",
                           rule_field_names[f]);
    }
    if (out->unlimited)
        sl_rule_init(&out->rule, rd_unlimited_algorithm(), RULE_UNLIMITED_LIMIT, SL_NS_PER_SEC);
    if ((slots[RF_DOMAIN] == NULL) != (slots[RF_DESCRIPTOR] == NULL)) {
        size_t given = slots[RF_DOMAIN] != NULL ? RF_DOMAIN : RF_DESCRIPTOR;
        return rd_fail(err, slots[given], path, rule_field_names[given], "needs '%s' beside it",
                       given == RF_DOMAIN ? "descriptor" : "domain");
    }
    for (size_t f = RF_LIMIT_NAME; f <= RF_UNLIMITED; f++) {
        if (slots[f] != NULL && slots[RF_DESCRIPTOR] == NULL)
            return rd_fail(err, slots[f], path, rule_field_names[f],
                           "only applies to a rule with a domain and a descriptor");
    }
    return 0;
}

static int build_rule(const yt_node_t *map, const char *path, const char *name_hint,
                      bool allow_overrides, ruledef_t *out, char *err)
{
    if (map->kind != YT_MAP)
        return rd_fail(err, map, path, NULL, "must be a mapping of fields, not %s",
                       yt_kind_name(map->kind));
    const yt_node_t *slots[RF_COUNT] = {0};
    size_t order[RF_COUNT];
    if (collect(map, rule_field_names, RF_COUNT, slots, order, path, err) != 0)
        return -1;
    if (slots[RF_OVERRIDES] != NULL && !allow_overrides)
        return rd_fail(err, slots[RF_OVERRIDES], path, "overrides",
                       "not part of a rule object here: set overrides one key at a time");
    for (size_t i = 0; i < map->n; i++) {
        if (parse_rule_field(order[i], slots[order[i]], path, name_hint, out, err) != 0)
            return -1;
    }
    if (out->blocked && out->desc == NULL) /* a key is blocked by an override of limit 0 */
        return rd_fail(err, slots[RF_LIMIT], path, "limit", "must be an integer > 0");
    if (slots[RF_NAME] == NULL) {
        if (name_hint == NULL)
            return rd_fail(err, map, path, NULL, "missing required field 'name'");
        if (!ruledef_name_valid(name_hint, strlen(name_hint)))
            return rd_fail(err, NULL, path, "name",
                           "the rule name in the request is not 1..64 characters of "
                           "A-Z a-z 0-9 _ . : -");
        memcpy(out->name, name_hint, strlen(name_hint) + 1);
    }
    if (check_descriptor_fields(slots, map, path, out, err) != 0)
        return -1;
    if (out->unlimited && slots[RF_PRIORITIES] != NULL)
        return rd_fail(err, slots[RF_PRIORITIES], path, "priorities",
                       "an unlimited rule takes no priorities: it admits everything");
    if (out->unlimited)
        return 0;
    char why[RULEDEF_ERR_MAX / 2];
    const yt_node_t *h = slots[RF_HOLD_TIMEOUT];
    int hp =
        h != NULL ? rd_hold_timeout_problem(out, slots[RF_WINDOW] != NULL, why, sizeof why) : 0;
    if (hp != 0)
        return rd_fail(err, hp == 1 ? h : slots[RF_WINDOW], path,
                       hp == 1 ? "hold_timeout" : "window", "%s", why);
    if (h != NULL)
        slots[RF_WINDOW] = h; /* required below, and where errors point */
    for (size_t f = RF_ALGORITHM; f <= RF_WINDOW; f++) {
        if (slots[f] == NULL)
            return rd_fail(err, map, path, NULL, "missing required field '%s'",
                           rule_field_names[f]);
    }
    const yt_node_t *at[NF_COUNT] = {slots[RF_LIMIT], slots[RF_WINDOW], slots[RF_BURST],
                                     slots[RF_BUCKETS], slots[RF_MAX_DELAY]};
    if (out->blocked) /* refuses every request; prepared as a limit of 1 */
        out->rule.limit = 1;
    bool given[RD_ADAPTIVE_FIELDS];
    for (int i = 0; i < RD_ADAPTIVE_FIELDS; i++)
        given[i] = slots[RF_ADAPTIVE + i] != NULL;
    int af;
    if (rd_adaptive_problem(out, given, &af, why, sizeof why) != 0)
        return rd_fail(err, slots[RF_ADAPTIVE + af] != NULL ? slots[RF_ADAPTIVE + af] : map, path,
                       rd_adaptive_field_names[af], "%s", why);
    sl_rule_t tried = out->rule;
    int rc = sl_rule_prepare(&out->rule);
    if (rc != SL_OK)
        return prepare_fail(rc, &tried, at, map, path, "the default", err);
    rd_mode_field_t field = RD_AT_MODE;
    _Static_assert(RF_LEASE_TIME == RF_MODE + RD_AT_LEASE_TIME &&
                       RF_SYNC_INTERVAL == RF_MODE + RD_AT_SYNC_INTERVAL &&
                       RF_REPLICAS == RF_MODE + RD_AT_REPLICAS &&
                       RF_REPLICA_WAIT == RF_MODE + RD_AT_REPLICA_WAIT,
                   "rd_mode_problem's fields follow mode");
    if (rd_mode_problem(out, slots[RF_LEASE_TIME] != NULL, slots[RF_SYNC_INTERVAL] != NULL, &field,
                        why, sizeof why) ||
        rd_replicas_problem(out, slots[RF_REPLICA_WAIT] != NULL, &field, why, sizeof why))
        return rd_fail(err, slots[RF_MODE + field], path, rule_field_names[RF_MODE + field], "%s",
                       why);
    rd_prio_err_t pe;
    if (rd_priorities_check(out, slots[RF_PRIORITIES], slots[RF_RESERVE], slots[RF_PRIORITY],
                            &pe) != 0)
        return rd_fail(err, pe.at, path, pe.field, "%s", pe.why);
    if (slots[RF_OVERRIDES] != NULL)
        return inline_overrides(out, slots[RF_OVERRIDES], path, err);
    return 0;
}

int rd_rule_from_map(const yt_node_t *map, const char *path, const char *name_hint,
                     bool inline_overrides, ruledef_t *out, char *err)
{
    memset(out, 0, sizeof(*out));
    out->rule.burst = SL_DEFAULT;
    out->rule.buckets = SL_DEFAULT;
    out->rule.max_debt = SL_DEFAULT;
    if (build_rule(map, path, name_hint, inline_overrides, out, err) != 0) {
        ruledef_free(out);
        return -1;
    }
    return 0;
}
