/*
 * admin.c - the admin operations (see admin.h), run on the config thread.
 *
 * Every input is validated here, once for every front end, before anything is written: a rule's
 * JSON by ruledef_parse_json, an override's against its rule as the store holds it. A write that
 * finds the store locked by another process is retried (config_thread.h) rather than failing at
 * once; a write that changed the store puts the new rules in force before the reply.
 */
#include "engine/admin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "engine/log.h"
#include "engine/rules_import.h"

#define LOGGED_JSON_MAX 400 /* bytes of a rule's or override's JSON a change's log line shows */
#define LOGGED_KEY_MAX  96  /* bytes of an override's key it shows */

static void set_status(admin_req_t *r, admin_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_status(admin_req_t *r, admin_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->status = status;
}

/* After a store call that failed with serr: retry later if the store was locked (and this is
 * not the last try), else an error. */
static int store_failed(admin_req_t *r, config_store_t *store, const char *serr, bool last)
{
    if (!last && config_store_busy(store)) {
        return CONFIG_JOB_RETRY;
    }
    set_status(r, ADMIN_ESTORE, "config store: %s", serr);
    return CONFIG_JOB_DONE;
}

/* A write went through: its change is put in force now (a failed reload keeps the rules in
 * force; it is logged and counted, and the next poll tries again). */
static void put_in_force(admin_req_t *r, config_store_t *store)
{
    char err[ENGINE_ERR_MAX];
    if (engine_reload(r->engine, store, false, err) < 0) {
        log_error("rules not reloaded after a change (the rules in force stay): %s", err);
    }
}

/* Who made r, for a change's log line. */
static const char *who(const admin_req_t *r)
{
    return r->who[0] != '\0' ? r->who : "an unknown client";
}

/* The INFO line of a change that was made: what it did ("set", "deleted"), to what, by whom,
 * and the definition written (json, or NULL). Keys are outside bytes: shown escaped. */
static void log_change(const admin_req_t *r, const char *did, const char *json)
{
    char key[TEXT_SHOW_CAP(LOGGED_KEY_MAX)];
    size_t json_len = json != NULL ? strlen(json) : 0;
    const char *more = json_len > LOGGED_JSON_MAX ? "..." : "";
    int shown = json_len > LOGGED_JSON_MAX ? LOGGED_JSON_MAX : (int)json_len;
    if (r->key == NULL) {
        log_info("rule '%s' %s by %s%s%.*s%s", r->rule, did, who(r), json ? ": " : "", shown,
                 json ? json : "", more);
        return;
    }
    text_show(key, sizeof key, r->key, r->key_len, LOGGED_KEY_MAX, 0);
    log_info("override of rule '%s' for key '%s' %s by %s%s%.*s%s", r->rule, key, did, who(r),
             json ? ": " : "", shown, json ? json : "", more);
}

/* The rule as the store holds it, parsed into *def; false with the status set otherwise. */
static bool stored_rule(admin_req_t *r, config_store_t *store, ruledef_t *def, int *job_rc,
                        bool last)
{
    char *json = NULL, serr[CONFIG_STORE_ERR_MAX], perr[RULEDEF_ERR_MAX];
    int rc = config_store_get_rule(store, r->rule, &json, serr);
    if (rc == CONFIG_STORE_NOTFOUND) {
        set_status(r, ADMIN_NORULE, "unknown rule '%s'", r->rule);
        return false;
    }
    if (rc != 0) {
        *job_rc = store_failed(r, store, serr, last);
        return false;
    }
    rc = ruledef_parse_json(json, strlen(json), r->rule, def, perr);
    free(json);
    if (rc != 0) {
        set_status(r, ADMIN_ESTORE, "config store: rule '%s' is stored invalid: %s", r->rule, perr);
        return false;
    }
    return true;
}

static int rule_put(admin_req_t *r, config_store_t *store, bool last)
{
    ruledef_t def;
    char perr[RULEDEF_ERR_MAX], serr[CONFIG_STORE_ERR_MAX];
    if (ruledef_parse_json(r->body, r->body_len, r->rule, &def, perr) != 0) {
        ruledef_err_field(perr, r->field, sizeof r->field);
        set_status(r, ADMIN_EINVALID, "invalid rule: %s", perr);
        return CONFIG_JOB_DONE;
    }
    if (!engine_rule_fits(r->engine, &def.rule, perr, sizeof perr)) {
        ruledef_free(&def);
        set_status(r, ADMIN_EINVALID, "invalid rule: %s", perr);
        return CONFIG_JOB_DONE;
    }
    char *json = ruledef_to_json(&def);
    ruledef_free(&def);
    if (json == NULL) {
        set_status(r, ADMIN_ESTORE, "out of memory");
        return CONFIG_JOB_DONE;
    }
    if (config_store_put_rule(store, r->rule, json, NULL, serr) != 0) {
        free(json);
        return store_failed(r, store, serr, last);
    }
    r->text = json;
    log_change(r, "set", json);
    put_in_force(r, store);
    return CONFIG_JOB_DONE;
}

static int override_put(admin_req_t *r, config_store_t *store, bool last)
{
    ruledef_t def;
    int job_rc = CONFIG_JOB_DONE;
    if (!stored_rule(r, store, &def, &job_rc, last)) {
        return job_rc;
    }
    rule_override_t ov;
    char perr[RULEDEF_ERR_MAX], serr[CONFIG_STORE_ERR_MAX];
    int rc = override_parse_json(&def, r->key, r->key_len, r->body, r->body_len, &ov, perr);
    if (rc == 0 && !ov.blocked && !engine_rule_fits(r->engine, &ov.rule, perr, sizeof perr)) {
        override_free(&ov);
        rc = -1;
    }
    if (rc != 0) {
        ruledef_free(&def);
        ruledef_err_field(perr, r->field, sizeof r->field);
        set_status(r, ADMIN_EINVALID, "invalid override: %s", perr);
        return CONFIG_JOB_DONE;
    }
    char *json = override_to_json(&def, &ov);
    override_free(&ov);
    ruledef_free(&def);
    if (json == NULL) {
        set_status(r, ADMIN_ESTORE, "out of memory");
        return CONFIG_JOB_DONE;
    }
    if (config_store_put_override(store, r->rule, r->key, r->key_len, json, NULL, serr) != 0) {
        free(json);
        return store_failed(r, store, serr, last);
    }
    r->text = json;
    log_change(r, "set", json);
    engine_override_written(r->engine, r->rule, r->key, r->key_len, json);
    put_in_force(r, store);
    return CONFIG_JOB_DONE;
}

/* Deletes (rc of the store's delete): NOTFOUND says which; a deletion is put in force. */
static int deleted(admin_req_t *r, config_store_t *store, int rc, const char *serr, bool last,
                   const char *missing)
{
    if (rc == CONFIG_STORE_NOTFOUND) {
        set_status(r, ADMIN_NOTFOUND, "%s", missing);
        return CONFIG_JOB_DONE;
    }
    if (rc != 0) {
        return store_failed(r, store, serr, last);
    }
    log_change(r, "deleted", NULL);
    put_in_force(r, store);
    return CONFIG_JOB_DONE;
}

static int override_read(admin_req_t *r, config_store_t *store, bool last)
{
    char serr[CONFIG_STORE_ERR_MAX], missing[RULE_NAME_MAX + 64];
    ruledef_t def;
    int job_rc = CONFIG_JOB_DONE;
    if (!stored_rule(r, store, &def, &job_rc, last)) {
        return job_rc;
    }
    ruledef_free(&def);
    snprintf(missing, sizeof missing, "rule '%s' has no override for this key", r->rule);
    int rc;
    if (r->op == ADMIN_OVERRIDE_DEL) {
        rc = config_store_del_override(store, r->rule, r->key, r->key_len, NULL, serr);
        if (rc == 0) {
            engine_override_written(r->engine, r->rule, r->key, r->key_len, NULL);
        }
        return deleted(r, store, rc, serr, last, missing);
    }
    rc = config_store_get_override(store, r->rule, r->key, r->key_len, &r->text, serr);
    if (rc == CONFIG_STORE_NOTFOUND) {
        set_status(r, ADMIN_NOTFOUND, "%s", missing);
    } else if (rc != 0) {
        return store_failed(r, store, serr, last);
    }
    return CONFIG_JOB_DONE;
}

static int page_add(void *arg, const void *key, size_t key_len, const char *json)
{
    admin_req_t *r = arg;
    if (r->novs == r->limit) {
        r->more = true; /* one past the page: there is more */
        return 1;
    }
    admin_override_t *o = &r->ovs[r->novs];
    o->key = malloc(key_len + 1);
    o->json = strdup(json);
    if (o->key == NULL || o->json == NULL) {
        free(o->key);
        free(o->json);
        set_status(r, ADMIN_ESTORE, "out of memory");
        return 1;
    }
    memcpy(o->key, key, key_len);
    o->key[key_len] = '\0';
    o->key_len = key_len;
    r->novs++;
    return 0;
}

static int override_list(admin_req_t *r, config_store_t *store, bool last)
{
    ruledef_t def;
    int job_rc = CONFIG_JOB_DONE;
    if (!stored_rule(r, store, &def, &job_rc, last)) {
        return job_rc;
    }
    ruledef_free(&def);
    char serr[CONFIG_STORE_ERR_MAX];
    if ((r->ovs = calloc(r->limit, sizeof *r->ovs)) == NULL) {
        set_status(r, ADMIN_ESTORE, "out of memory");
        return CONFIG_JOB_DONE;
    }
    if (config_store_foreach_override_after(store, r->rule, r->key, r->key_len, r->limit + 1,
                                            page_add, r, serr) != 0) {
        return store_failed(r, store, serr, last);
    }
    return CONFIG_JOB_DONE;
}

static int rules_import(admin_req_t *r, config_store_t *store, bool last)
{
    config_import_mode_t mode = r->replace ? CONFIG_IMPORT_REPLACE : CONFIG_IMPORT_MERGE;
    char err[ADMIN_ERR_MAX - 32];
    rules_import_opts_t opts = {
        .mode = mode, .origin = "api", .check = engine_rule_check, .check_arg = r->engine};
    int rc = rules_import_yaml(store, r->body, r->body_len, &opts, &r->diff, err, sizeof err);
    if (rc == RULES_IMPORT_ESTORE && !last && config_store_busy(store)) {
        return CONFIG_JOB_RETRY;
    }
    if (rc == RULES_IMPORT_EINVALID) {
        set_status(r, ADMIN_EINVALID, "invalid rules: %s", err);
        return CONFIG_JOB_DONE;
    }
    if (rc != 0) {
        set_status(r, ADMIN_ESTORE, "%s", err);
        return CONFIG_JOB_DONE;
    }
    bool http = strncmp(r->who, "HTTP", 4) == 0;
    const char *source = http ? (r->replace ? "PUT /v1/rules" : "POST /v1/rules")
                              : (r->replace ? "SL.RULE IMPORT REPLACE" : "SL.RULE IMPORT");
    log_info("%s by %s", source, who(r));
    rules_import_log(source, &r->diff);
    put_in_force(r, store);
    return CONFIG_JOB_DONE;
}

/* Validation every operation shares: names and keys. */
static bool valid(admin_req_t *r)
{
    bool named =
        r->op != ADMIN_RULE_LIST && r->op != ADMIN_RULES_IMPORT && r->op != ADMIN_RULES_EXPORT;
    if (named && (r->bad_name || !ruledef_name_valid(r->rule, strlen(r->rule)))) {
        char shown[RULE_NAME_MAX + 4]; /* printable: the name goes into a reply line */
        size_t n = strlen(r->rule);
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)r->rule[i];
            shown[i] = ch >= 0x20 && ch < 0x7f && ch != '\'' ? (char)ch : '?';
        }
        snprintf(shown + n, sizeof shown - n, "%s", r->bad_name && n == RULE_NAME_MAX ? "..." : "");
        set_status(r, ADMIN_EINVALID, "invalid rule name '%s' (1-64 of A-Z a-z 0-9 _ . : -)",
                   shown);
        snprintf(r->field, sizeof r->field, "name");
        return false;
    }
    if (r->op == ADMIN_OVERRIDE_LIST && (r->limit < 1 || r->limit > ADMIN_LIST_MAX)) {
        set_status(r, ADMIN_EINVALID, "count must be 1 to %d", ADMIN_LIST_MAX);
        return false;
    }
    size_t key_max = engine_key_max(r->engine);
    if (r->key != NULL && (r->key_len > OVERRIDE_KEY_MAX || r->key_len > key_max)) {
        set_status(r, ADMIN_EINVALID, "key is longer than %zu bytes",
                   key_max < OVERRIDE_KEY_MAX ? key_max : (size_t)OVERRIDE_KEY_MAX);
        return false;
    }
    return true;
}

static int admin_run(config_job_t *job, config_store_t *store, bool last)
{
    admin_req_t *r = (admin_req_t *)job;
    char serr[CONFIG_STORE_ERR_MAX];
    r->status = ADMIN_OK;
    r->err[0] = '\0';
    if (!valid(r)) {
        return CONFIG_JOB_DONE;
    }
    if (store == NULL) {
        set_status(r, ADMIN_ESTORE, "config store: cannot be opened");
        return CONFIG_JOB_DONE;
    }
    int rc;
    switch (r->op) {
    case ADMIN_RULE_GET:
        rc = config_store_get_rule(store, r->rule, &r->text, serr);
        if (rc == CONFIG_STORE_NOTFOUND) {
            set_status(r, ADMIN_NOTFOUND, "unknown rule '%s'", r->rule);
        } else if (rc != 0) {
            return store_failed(r, store, serr, last);
        }
        return CONFIG_JOB_DONE;
    case ADMIN_RULE_PUT:
        return rule_put(r, store, last);
    case ADMIN_RULE_DEL: {
        char missing[RULE_NAME_MAX + 32];
        snprintf(missing, sizeof missing, "unknown rule '%s'", r->rule);
        rc = config_store_del_rule(store, r->rule, NULL, serr);
        return deleted(r, store, rc, serr, last, missing);
    }
    case ADMIN_RULE_LIST:
        if (config_store_list_rules(store, &r->rows, &r->nrows, &r->version, serr) != 0) {
            return store_failed(r, store, serr, last);
        }
        return CONFIG_JOB_DONE;
    case ADMIN_RULES_IMPORT:
        return rules_import(r, store, last);
    case ADMIN_RULES_EXPORT:
        r->text = rules_export_yaml(store, r->err, sizeof r->err);
        if (r->text == NULL) {
            r->status = ADMIN_ESTORE;
        }
        return CONFIG_JOB_DONE;
    case ADMIN_OVERRIDE_PUT:
        return override_put(r, store, last);
    case ADMIN_OVERRIDE_GET:
    case ADMIN_OVERRIDE_DEL:
        return override_read(r, store, last);
    case ADMIN_OVERRIDE_LIST:
        return override_list(r, store, last);
    }
    set_status(r, ADMIN_EINVALID, "unknown operation");
    return CONFIG_JOB_DONE;
}

/* On the submitting loop: the change is in force here before the front end replies. */
static void admin_done(config_job_t *job)
{
    admin_req_t *r = (admin_req_t *)job;
    engine_worker_begin(r->w);
    r->done(r);
}

/* The loop has gone (sluiced is stopping): the front end cleans up without its loop. */
static void admin_drop(config_job_t *job)
{
    admin_req_t *r = (admin_req_t *)job;
    if (r->status == ADMIN_OK) {
        set_status(r, ADMIN_ESTORE, "sluiced is stopping");
    }
    r->done(r);
}

admin_req_t *admin_new(engine_t *e, admin_op_t op, const char *rule, size_t rule_len,
                       const void *key, size_t key_len, const char *body, size_t body_len)
{
    admin_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    r->engine = e;
    r->op = op;
    r->limit = ADMIN_LIST_DEFAULT;
    r->job =
        (config_job_t){.run = admin_run, .done = admin_done, .drop = admin_drop, .admin = true};
    if (rule != NULL) {
        size_t n = rule_len <= RULE_NAME_MAX ? rule_len : RULE_NAME_MAX;
        memcpy(r->rule, rule, n);
        r->rule[n] = '\0';
        r->bad_name = rule_len > RULE_NAME_MAX || memchr(rule, '\0', rule_len) != NULL;
    }
    if (key != NULL) {
        r->key = malloc(key_len + 1);
        if (r->key == NULL) {
            free(r);
            return NULL;
        }
        memcpy(r->key, key, key_len);
        r->key[key_len] = '\0';
        r->key_len = key_len;
    }
    if (body != NULL) {
        r->body = malloc(body_len + 1);
        if (r->body == NULL) {
            admin_free(r);
            return NULL;
        }
        memcpy(r->body, body, body_len);
        r->body[body_len] = '\0';
        r->body_len = body_len;
    }
    return r;
}

void admin_set_who(admin_req_t *req, const char *protocol, const char *addr, int port,
                   const char *client, size_t client_len, const char *user)
{
    int n = snprintf(req->who, sizeof req->who, "%s %s:%d, %s", protocol, addr, port, user);
    if (client != NULL && client_len > 0 && n > 0 && (size_t)n < sizeof req->who) {
        char name[TEXT_SHOW_CAP(64)];
        text_show(name, sizeof name, client, client_len, 64, 0);
        size_t room = sizeof req->who - (size_t)n;
        snprintf(req->who + n, room, ", client '%.*s'", (int)(room > 12 ? room - 12 : 0), name);
    }
}

void admin_submit(engine_worker_t *w, admin_req_t *req)
{
    req->w = w;
    engine_submit(w, &req->job);
}

void admin_free(admin_req_t *req)
{
    if (req == NULL) {
        return;
    }
    free(req->key);
    free(req->body);
    free(req->text);
    config_rules_free(req->rows, req->nrows);
    for (size_t i = 0; i < req->novs; i++) {
        free(req->ovs[i].key);
        free(req->ovs[i].json);
    }
    free(req->ovs);
    config_import_diff_free(&req->diff);
    free(req);
}

char *admin_hex(const void *bytes, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *hex = malloc(2 * n + 1);
    if (hex == NULL) {
        return NULL;
    }
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[p[i] >> 4];
        hex[2 * i + 1] = digits[p[i] & 15];
    }
    hex[2 * n] = '\0';
    return hex;
}

char *admin_next_cursor(const admin_req_t *req, bool *failed)
{
    *failed = false;
    if (!req->more || req->novs == 0) {
        return NULL;
    }
    const admin_override_t *last = &req->ovs[req->novs - 1];
    char *hex = admin_hex(last->key, last->key_len);
    *failed = hex == NULL;
    return hex;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

bool admin_cursor_parse(const char *text, size_t len, unsigned char *key, size_t *key_len)
{
    if (len == 0 || len % 2 != 0 || len / 2 > OVERRIDE_KEY_MAX) {
        return false;
    }
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        key[i] = (unsigned char)(hi << 4 | lo);
    }
    *key_len = len / 2;
    return true;
}
