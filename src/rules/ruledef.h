/*
 * ruledef.h - a named rule as sluiced knows it (SPEC §3): the algorithm's parameters plus what
 * the server adds (shadow mode, on_store_error, cold_start, the HTTP key template), and per-key
 * overrides.
 *
 * Rules come from three places, all parsed here and nowhere else:
 *
 *   a YAML rules file       ruledef_parse_yaml()   (sluiced --rules, sluice rules import)
 *   a JSON rule object      ruledef_parse_json()   (SL.RULE SET, PUT /v1/rules/{name}, the store)
 *   a JSON override object  override_parse_json()  (SL.OVERRIDE SET, PUT .../overrides/{key})
 *
 * and one way out: ruledef_to_json() / override_to_json(), the canonical text the config store
 * keeps. Parsing validates everything (the algorithm's parameters through sl_rule_prepare()), so
 * a ruledef_t that exists is usable. Errors name the position and the field:
 *
 *   "line 7, column 12: rules[1].limit: must be an integer > 0"
 *   "line 1, column 30: window: malformed duration '5 s'"
 *
 * JSON / YAML field names (all optional except name, algorithm, limit, window):
 *   name            [A-Za-z0-9_.:-]{1,64}  (JSON: taken from the URL / command when absent)
 *   algorithm       fixed_window | sliding_log | sliding_window | sliding_buckets |
 *                   token_bucket | gcra
 *   limit           integer > 0
 *   window          duration string ("1s", "250ms", "1m", "1h30m") or integer milliseconds
 *   burst           integer >= 0 (token_bucket >= 1)   token_bucket / gcra only
 *   buckets         integer                            sliding_buckets only
 *   max_delay       duration or integer ms             token_bucket / gcra only
 *   max_debt        integer 0 .. 2^62 - 1: units a key may owe past its limit after a settle
 *                   (default: the capacity, one window's worth, an override's own capacity
 *                   under an override; 0 = no debt: a settle past the limit is refused)
 *   key             key template (keytpl.h), e.g. "{ip}", "{header:x-api-key}"
 *   shadow          bool (default false)
 *   on_store_error  allow | deny (default allow)
 *   cold_start      open | closed (default open)
 *   mode            strict | leased | approximate (default strict); leased is refused for
 *                   sliding_log, and for a token_bucket / gcra whose capacity less one
 *                   interval is under 1 ms; approximate suits every algorithm
 *   lease_time      duration, whole milliseconds >= 1ms (mode: leased only; token_bucket /
 *                   gcra: at most the capacity less one interval); see ruledef_lease_ns()
 *   sync_interval   duration, whole milliseconds, 1ms .. 1h (mode: approximate only; default
 *                   100ms); see ruledef_sync_ns()
 *   replicas        integer 1 .. 64 (mode: strict only): an admission is answered only once
 *                   that many replicas of the key's Redis acknowledged it (Redis's WAIT, sent
 *                   after the decision on its connection); fewer within replica_wait is a store
 *                   error (on_store_error decides) and the admission is given back. A store
 *                   without replicas (memory) ignores it
 *   replica_wait    duration, whole milliseconds, 1ms .. 1s (with replicas only; default 100ms):
 *                   how long Redis waits for the replicas' acknowledgement
 *   overrides       (YAML only) list of { key: "...", <override fields> }
 *   priorities      the rule's priorities, lowest first: a list of names (or one text,
 *                   "low, normal, high"), 1..8 of [A-Za-z0-9_-]{1,32} (priorities.h)
 *   reserve         (with priorities) what each priority but the lowest keeps for itself and
 *                   those above: a mapping { critical: "20%", high: 10 } (percent of the
 *                   capacity, or units), or one text "critical: 20%, high: 10"; percents at most
 *                   100 together, all of it at most the capacity; mode strict only
 *   priority        (with priorities) key template of a GET /v1/auth request's priority, e.g.
 *                   "{header:x-priority}"
 *
 * What a rule answers for Envoy's rate limit service (descriptor.h; all optional, the last
 * four only with a descriptor):
 *   domain          text: the domain Envoy sends (with descriptor)
 *   descriptor      text: the entries, e.g. "tenant=acme, user" (with domain)
 *   limit_name      text: the limit's name in statuses and in other rules' replaces
 *   replaces        text: names of limits this one replaces when both apply, e.g. "a, b"
 *   quota_mode      bool: over its limit, the descriptor refuses a request only when every
 *                   quota descriptor of the request is over (envoyproxy/ratelimit's quota_mode)
 *   unlimited       bool: the descriptor has no limit; the rule then takes none of algorithm,
 *                   limit, window, burst, buckets, max_delay and no overrides, and admits
 *                   everything (a fixed window of RULE_UNLIMITED_LIMIT per second)
 *
 * An override replaces some of the rule's numbers for one key (a premium tenant, a blocked user):
 *   limit (integer >= 0; 0 = the key is blocked: every request denied), window, burst, buckets,
 *   max_delay. Fields it does not name are the rule's. The algorithm is always the rule's.
 *   It must name at least one field; a blocked override names only limit. One refinement: a
 *   token_bucket / gcra burst equal to the rule's limit is the default and follows the
 *   override's limit (the rule's burst is kept when it differs from the rule's limit).
 *
 * Types are strict: `limit: "10"` and `limit: 10.0` are errors, integers take no '+' sign and
 * no leading zeros (YAML 1.1 would read 010 as octal). String fields take any YAML scalar as
 * written (`name: 2024` is the name "2024"); a YAML `key: {ip}` is a mapping, so templates are
 * quoted. Null values are errors, except `rules:` / `overrides:` with nothing under them (no
 * rules / no overrides). YAML aliases, non-standard tags and several documents are refused.
 *
 * The canonical JSON and YAML always write burst for token_bucket / gcra and buckets for
 * sliding_buckets, max_delay when it is not 0, max_debt when it was given, key when there is one,
 * and shadow, on_store_error and cold_start; mode only when not strict, and lease_time,
 * sync_interval, replicas and replica_wait when they were given.
 */
#ifndef SLUICE_RULES_RULEDEF_H
#define SLUICE_RULES_RULEDEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/sluice.h"
#include "rules/descriptor.h"
#include "rules/keytpl.h"
#include "rules/priorities.h"

#define RULE_NAME_MAX             64   /* longest rule name, bytes */
#define RULEDEF_ERR_MAX           256  /* a parse error message fits in this */
#define RULES_MAX                 4096 /* most rules in one file / store */
#define OVERRIDE_KEY_MAX          1024 /* longest override key, bytes */
#define RULE_OVERRIDES_INLINE_MAX 4096 /* most inline overrides of one rule in a rules file */
#define RULE_UNLIMITED_LIMIT                                                                       \
    UINT32_MAX /* an unlimited rule's limit per second: what Envoy's                               \
                  rate limit service reports as an unlimited                                       \
                  descriptor's remaining */

typedef enum rule_on_error {
    RULE_ON_ERROR_ALLOW = 0, /* fail open: a store failure admits */
    RULE_ON_ERROR_DENY = 1,  /* fail closed: a store failure rejects */
} rule_on_error_t;

typedef enum rule_mode {
    RULE_MODE_STRICT = 0,      /* every decision at the key's store */
    RULE_MODE_LEASED = 1,      /* a node leases part of a key's quota and decides with it locally */
    RULE_MODE_APPROXIMATE = 2, /* a node decides locally from the key's count as of its last
                                  sync, and syncs what it admitted every sync_interval */
} rule_mode_t;

/* The modes' names, by rule_mode_t. */
extern const char *const rule_mode_names[3];

#define RULE_SYNC_DEFAULT_NS         (100 * SL_NS_PER_MS)   /* sync_interval when not given */
#define RULE_SYNC_MAX_NS             (3600 * SL_NS_PER_SEC) /* the longest sync_interval */
#define RULE_REPLICAS_MAX            64                     /* the most replicas a rule waits for */
#define RULE_REPLICA_WAIT_DEFAULT_NS (100 * SL_NS_PER_MS)   /* replica_wait when not given */
#define RULE_REPLICA_WAIT_MAX_NS     SL_NS_PER_SEC          /* the longest replica_wait */

typedef enum rule_cold_start {
    RULE_COLD_OPEN = 0,   /* no usable snapshot: keys start fresh */
    RULE_COLD_CLOSED = 1, /* no usable snapshot: keys start saturated for one window */
} rule_cold_start_t;

/* The numbers an override may change. Fields an override did not set hold the rule's values. */
typedef struct rule_override {
    char *key; /* malloc'ed, key_len bytes, NUL-terminated too */
    size_t key_len;
    bool blocked;    /* limit 0: every request is denied; rule is then a copy of the parent's */
    sl_rule_t rule;  /* prepared; the parent's algorithm */
    uint32_t fields; /* OVERRIDE_F_* bits: which fields the override named (for to_json) */
} rule_override_t;

enum {
    OVERRIDE_F_LIMIT = 1u << 0,
    OVERRIDE_F_WINDOW = 1u << 1,
    OVERRIDE_F_BURST = 1u << 2,
    OVERRIDE_F_BUCKETS = 1u << 3,
    OVERRIDE_F_MAX_DELAY = 1u << 4,
};

typedef struct ruledef {
    char name[RULE_NAME_MAX + 1];       /* NUL-terminated */
    sl_rule_t rule;                     /* prepared */
    bool has_key;                       /* a key template was given */
    keytpl_t key;                       /* parsed template when has_key */
    char key_text[KEYTPL_TEXT_MAX + 1]; /* the template as written, NUL-terminated */
    bool shadow;
    rule_on_error_t on_store_error;
    rule_cold_start_t cold_start;
    rule_mode_t mode;
    int64_t lease_ns;        /* lease_time as written, ns; 0 when not given (ruledef_lease_ns) */
    int64_t sync_ns;         /* sync_interval as written, ns; 0 when not given (ruledef_sync_ns) */
    int64_t replicas;        /* replicas an admission waits for; 0 none */
    int64_t replica_wait_ns; /* replica_wait as written, ns; 0 when not given
                                (ruledef_replica_wait_ns) */
    bool max_debt_given;     /* max_debt was written (rule.max_debt holds it); else rule.max_debt
                                is the capacity, and an override's the override's capacity */
    rule_descriptor_t *desc; /* the descriptor it answers for Envoy's rate limit service; NULL
                                when none (malloc'ed, freed with the rule) */
    bool unlimited;          /* a descriptor without a limit: the rule admits everything */
    bool blocked;            /* `limit: 0`: every request refused, as an override of limit 0
                                refuses its key (rule holds the numbers of a limit of 1) */
    size_t noverrides;       /* inline overrides from YAML; JSON rules have none */
    rule_override_t *overrides;
    rule_priorities_t prio; /* priorities and reserves; prio.n 0: none */
    bool has_priority_src;  /* `priority` was given: where GET /v1/auth reads a priority */
    keytpl_t priority_src;  /* parsed when has_priority_src */
    char priority_text[KEYTPL_TEXT_MAX + 1]; /* the template as written, NUL-terminated */
} ruledef_t;

/* A parsed rules file: owns its rules. Free with ruledef_list_free(). */
typedef struct ruledef_list {
    size_t n;
    ruledef_t *rules;
    char *notes; /* what the file says that sluice takes and does nothing with, to be logged:
                    lines, malloc'ed; NULL: nothing (envoy_config_notes()) */
} ruledef_list_t;

/*
 * Parses a YAML rules file's text (len bytes; `rules:` a sequence of rule mappings). Returns 0
 * and fills *out, or -1 with a message in err naming line and column (1-based) and the field.
 * Duplicate rule names and duplicate override keys within a rule are errors. On error *out is
 * empty and nothing is leaked.
 */
int ruledef_parse_yaml(const char *text, size_t len, ruledef_list_t *out, char *err);

/*
 * Parses one rule from a JSON object (len bytes). name_hint (may be NULL) names the rule when
 * the object has no "name"; when both are given they must agree. Returns 0 and fills *out (no
 * overrides), or -1 with "line L, column C: field: reason" in err.
 */
int ruledef_parse_json(const char *json, size_t len, const char *name_hint, ruledef_t *out,
                       char *err);

/*
 * Parses an override of `parent` for `key` (key_len bytes, any bytes, 1..OVERRIDE_KEY_MAX) from
 * a JSON object; a "key" member, if present, must equal it. key NULL takes the key from the
 * object's required "key" member instead. Returns 0 and fills *out (which owns a copy of the
 * key), or -1 with a positioned message in err and nothing held by *out.
 */
int override_parse_json(const ruledef_t *parent, const char *key, size_t key_len, const char *json,
                        size_t len, rule_override_t *out, char *err);

/* The canonical JSON of a rule (no overrides) / of an override's named fields: one line,
 * fields in the order above, durations as strings ("1s", "250ms"). malloc'ed, NUL-terminated;
 * NULL on allocation failure. Parsing the result gives back an equal ruledef / override. */
char *ruledef_to_json(const ruledef_t *def);
char *override_to_json(const ruledef_t *parent, const rule_override_t *ov);

/* A duration as an exact string sl_duration_parse() reads back: whole seconds as d/h/m/s groups
 * ("90s" -> "1m30s", 86400 s -> "1d"), anything finer in the largest unit that divides it
 * (1500 ms -> "1500ms", 1500 us -> "1500us"), 0 -> "0s". Negative values get a '-' (which does
 * not parse back). buf holds at least 32 bytes. Returns buf. */
char *ruledef_format_duration(int64_t ns, char *buf);

/* A rules file (YAML) holding `list`, overrides included, that ruledef_parse_yaml() reads back
 * as an equal list. malloc'ed, NUL-terminated; NULL on allocation failure or when a string
 * (an override key) is not UTF-8, which YAML cannot carry. */
char *ruledef_list_to_yaml(const ruledef_list_t *list);

/* True when two rules are the same: name, prepared parameters, key template, flags and the
 * overrides, in order. / True when two overrides have the same key, named fields and rule. */
bool ruledef_equal(const ruledef_t *a, const ruledef_t *b);
bool override_equal(const rule_override_t *a, const rule_override_t *b);

/* The time a leased rule's leases last, ns: lease_time when given, else the smaller of a tenth
 * of the window and 1 s, and for token_bucket / gcra at most the capacity less one interval
 * (tolerance - T), in whole milliseconds (at least 1 ms). 0 for a strict rule. */
int64_t ruledef_lease_ns(const ruledef_t *def);

/* An approximate rule's sync interval, ns: sync_interval when given, else RULE_SYNC_DEFAULT_NS.
 * 0 for a rule of another mode. */
int64_t ruledef_sync_ns(const ruledef_t *def);

/* How long a rule's admissions wait for its replicas, ns: replica_wait when given, else
 * RULE_REPLICA_WAIT_DEFAULT_NS; 0 for a rule without replicas. */
int64_t ruledef_replica_wait_ns(const ruledef_t *def);

/* The longest lease rule's numbers allow, ns, whole milliseconds: SL_WINDOW_MAX_NS, or for
 * token_bucket / gcra the capacity less one interval (0: none, a burst of 1). */
int64_t ruledef_lease_room_ns(const sl_rule_t *rule);

/* True when a rule name is valid ([A-Za-z0-9_.:-]{1,64}). */
bool ruledef_name_valid(const char *name, size_t len);

/*
 * The field a parse error of this file names (err as ruledef_parse_yaml(), ruledef_parse_json()
 * or override_parse_json() wrote it): "limit" for "line 1, column 9: limit: must be ...",
 * "rules[1].window" for "rules[1]: missing required field 'window'", "foo" for "unknown field
 * 'foo'". Writes it NUL-terminated into field (cap bytes) and returns true, or returns false
 * (field "") when the error names no field (JSON syntax) or the name does not fit.
 */
bool ruledef_err_field(const char *err, char *field, size_t cap);

void ruledef_free(ruledef_t *def);       /* frees the overrides; def itself is the caller's */
void override_free(rule_override_t *ov); /* frees the key */
void ruledef_list_free(ruledef_list_t *list);

#endif /* SLUICE_RULES_RULEDEF_H */
