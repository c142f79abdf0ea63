/*
 * ruledef_impl.h - what ruledef.c shares with the two front ends, ruledef_yaml.c and
 * ruledef_json.c. Both turn their text into yamltree nodes (a YAML rule mapping, or a JSON
 * object's members with the positions they were written at); ruledef.c validates those nodes
 * once for both formats. Going out, ruledef_write.c lists a rule's fields once for both
 * writers (the canonical JSON in ruledef_json.c, rules files in ruledef_yaml.c).
 *
 * `path` names where a node sits, for messages: "rules[2]" or "rules[2].overrides[0]" in a
 * rules file, "" for a JSON object on its own (its fields are then named bare: "limit: ...").
 */
#ifndef SLUICE_RULES_RULEDEF_IMPL_H
#define SLUICE_RULES_RULEDEF_IMPL_H

#include "core/algorithms.h"
#include "rules/ruledef.h"
#include "rules/yamltree.h"

#define RD_PATH_MAX 64 /* longest path, "rules[4095].overrides[4095]" and room to spare */

#define RD_SHOWN_MAX 40                 /* bytes of user text quoted in a message */
#define RD_SHOWN_BUF (RD_SHOWN_MAX + 4) /* room for rd_shown()'s result */

/* User text made safe to quote in a message: at most RD_SHOWN_MAX bytes, printable ASCII only
 * (other bytes become '?'), "..." when cut. buf holds RD_SHOWN_BUF bytes. Returns buf. */
const char *rd_shown(const char *text, size_t len, char *buf);

/* Writes "line L, column C: path.field: message" into err (RULEDEF_ERR_MAX bytes); the position
 * is left out when at is NULL or has none, path and field when empty / NULL. Returns -1. */
int rd_fail(char *err, const yt_node_t *at, const char *path, const char *field, const char *fmt,
            ...) __attribute__((format(printf, 5, 6)));

/* rd_fail() of an algorithm's name that names none (text NULL: not text): "unknown algorithm 'x'
 * (expected fixed_window, ... or gcra)", the names from the table of algorithms. Returns -1. */
int rd_unknown_algorithm(char *err, const yt_node_t *at, const char *path, const char *field,
                         const char *text, size_t len);

/* The algorithm of a rule with no numbers of its own (unlimited: true): windows aligned as
 * envoyproxy/ratelimit's (CORE_CAP_ALIGNED), whose limit it stands in for. */
static inline sl_algorithm_t rd_unlimited_algorithm(void)
{
    return core_algorithm_id_with(CORE_CAP_ALIGNED);
}

/*
 * Builds *out (zeroed first) from a mapping node of rule fields. name_hint (may be NULL) names
 * the rule when the mapping has no name; both given must agree. `inline_overrides` allows the
 * YAML-only `overrides` list. Returns 0, or -1 with err set and nothing held by *out.
 */
int rd_rule_from_map(const yt_node_t *map, const char *path, const char *name_hint,
                     bool inline_overrides, ruledef_t *out, char *err);

/*
 * Builds an override of parent from a mapping node. key (key_len bytes) is the override's key
 * when the caller has it (JSON: from the URL or command; a "key" field must then agree); NULL
 * reads it from the mapping's required "key" field (YAML). Returns 0, or -1 with err set and
 * nothing held by *out.
 */
int rd_override_from_map(const ruledef_t *parent, const yt_node_t *map, const char *path,
                         const char *key, size_t key_len, rule_override_t *out, char *err);

/* True for the algorithms that take a burst (their rows say: core/algorithms.h). */
static inline bool rd_takes_burst(sl_algorithm_t a)
{
    const core_algorithm_t *row = core_algorithm(a);
    return row != NULL && row->burst.taken;
}

/* The field a mode problem is about. */
typedef enum rd_mode_field {
    RD_AT_MODE = 0,
    RD_AT_LEASE_TIME = 1,
    RD_AT_SYNC_INTERVAL = 2,
    RD_AT_REPLICAS = 3,
    RD_AT_REPLICA_WAIT = 4,
} rd_mode_field_t;

/* Why def's mode, lease_time and sync_interval cannot be (mode: leased where a lease is unsound
 * or could grant nothing: an algorithm whose row cannot lease, a bucket without room for one;
 * lease_time without it or past the bucket's room; sync_interval without mode: approximate): true
 * with the reason in why (cap bytes) and *at saying which field it is about; false when they are
 * fine (ruledef_lease.c). */
bool rd_mode_problem(const ruledef_t *def, bool lease_time_given, bool sync_interval_given,
                     rd_mode_field_t *at, char *why, size_t cap);

/* hold_timeout, given on a rule: the window of an algorithm that holds units (CORE_CAP_HOLDS)
 * under its own name. 0 when it may be; 1 (about hold_timeout: another algorithm) or 2 (about
 * window: both given) with why written. */
int rd_hold_timeout_problem(const ruledef_t *def, bool window_given, char *why, size_t cap);

/* Why def's replicas and replica_wait cannot be (replicas past RULE_REPLICAS_MAX, or with a mode
 * other than strict: a lease or a count is granted once for many local decisions; replica_wait
 * without replicas, or not whole milliseconds 1ms .. 1s):
 * true with the reason in why (cap bytes) and *at the field; false when fine (ruledef_lease.c). */
bool rd_replicas_problem(const ruledef_t *def, bool replica_wait_given, rd_mode_field_t *at,
                         char *why, size_t cap);

/* ---- priorities (ruledef_prio.c) ---------------------------------------------------------- */

/* Where a priorities field is wrong: the node, its field's name and why (rd_fail() formats it
 * in ruledef.c). */
typedef struct rd_prio_err {
    const yt_node_t *at;
    const char *field;
    char why[RULEDEF_ERR_MAX / 2];
} rd_prio_err_t;

/* The `priorities` field (a sequence of names, or one text) and the `priority` field (a key
 * template) into out: 0, or -1 with *e. */
int rd_priorities(const yt_node_t *v, ruledef_t *out, rd_prio_err_t *e);
int rd_priority_source(const yt_node_t *v, ruledef_t *out, rd_prio_err_t *e);

/* Once the rule is prepared: the `reserve` field (a mapping, or one text; NULL: none) over the
 * priorities, and that the reserves fit its capacity and mode, and that reserve and priority
 * come with priorities. 0, or -1 with *e. */
int rd_priorities_check(ruledef_t *out, const yt_node_t *priorities, const yt_node_t *reserve,
                        const yt_node_t *priority, rd_prio_err_t *e);

/* ---- writing (ruledef_write.c) ---------------------------------------------------------- */

/* How a field's value is written: user text (a YAML double-quoted scalar, a JSON string), a word
 * of ours ("gcra", "deny": plain in YAML, a JSON string), an integer, a duration ("1m30s": plain,
 * a JSON string) or a boolean (plain, a JSON boolean). */
typedef enum rd_kind { RD_TEXT, RD_WORD, RD_INT, RD_DURATION, RD_BOOL } rd_kind_t;

typedef struct rd_value {
    rd_kind_t kind;
    const char *text; /* the value as written in YAML (for RD_TEXT the user's bytes) */
    size_t len;       /* bytes at text */
    int64_t num;      /* RD_INT: the number; RD_BOOL: 0 or 1 */
} rd_value_t;

/* Receives one field of a rule or override being written; returns false to stop (a failure). */
typedef bool (*rd_field_fn)(void *arg, const char *field, const rd_value_t *value);

/* Calls fn for each field the canonical writers write, in their order: a rule's fields
 * (overrides left out), or the fields an override named (its key left out). Returns false
 * when fn did (or the algorithm has no name), true otherwise. */
bool rd_rule_fields(const ruledef_t *def, rd_field_fn fn, void *arg);
bool rd_override_fields(const rule_override_t *ov, rd_field_fn fn, void *arg);

/* ---- adaptive limits (ruledef_adaptive.c) ---- */

/* The adaptive limit's fields, in the order rule_field_names[] lists them from "adaptive". */
#define RD_ADAPTIVE_FIELDS 6
extern const char *const rd_adaptive_field_names[RD_ADAPTIVE_FIELDS];

/* Why def's adaptive fields (given[i]: field i was written) cannot be, once each was parsed on
 * its own: 1 with the reason in why (cap bytes) and *field the index of the field it is about;
 * 0 when they are fine (sl_rule_prepare() then accepts them). */
int rd_adaptive_problem(const ruledef_t *def, const bool given[RD_ADAPTIVE_FIELDS], int *field,
                        char *why, size_t cap);

/* Writes the adaptive limit's fields (none for a fixed limit) through put(arg, field, kind, word,
 * number): RD_WORD with word, RD_INT or RD_DURATION (ns) with number. False when put fails. */
typedef bool (*rd_adaptive_put_fn)(void *arg, const char *field, rd_kind_t kind, const char *word,
                                   int64_t number);
bool rd_adaptive_fields(const sl_rule_t *r, rd_adaptive_put_fn put, void *arg);

#endif /* SLUICE_RULES_RULEDEF_IMPL_H */
