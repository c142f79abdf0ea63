/*
 * admin.h - reading and changing rules and overrides: the operations behind SL.RULE,
 * SL.OVERRIDE and /v1/rules, described once, validated and run on the config thread.
 *
 * A front end makes a request (admin_new), fills what its operation needs, submits it
 * (admin_submit) and writes its reply in the done callback, which runs on its loop after the
 * change is in force there (the next command on that connection sees it; other loops see it at
 * their next batch). A request owns copies of what it was given and what it found; admin_free
 * frees it. Nothing here touches a connection.
 */
#ifndef SLUICE_ENGINE_ADMIN_H
#define SLUICE_ENGINE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rules/config_store.h"
#include "rules/ruledef.h"
#include "engine/config_thread.h"
#include "engine/engine.h"

#define ADMIN_ERR_MAX   512
#define ADMIN_FIELD_MAX 96  /* the longest field name an error names, bytes */
#define ADMIN_WHO_MAX   256 /* who asked for a change, as its log line says it, bytes */

typedef enum admin_op {
    ADMIN_RULE_GET,      /* rule -> text: its JSON */
    ADMIN_RULE_PUT,      /* rule, body (JSON) -> text: the canonical JSON written */
    ADMIN_RULE_DEL,      /* rule */
    ADMIN_RULE_LIST,     /* -> rows (name, JSON) and version */
    ADMIN_RULES_IMPORT,  /* body (YAML), replace -> diff */
    ADMIN_RULES_EXPORT,  /* -> text: a rules file */
    ADMIN_OVERRIDE_GET,  /* rule, key -> text: its JSON */
    ADMIN_OVERRIDE_PUT,  /* rule, key, body (JSON) -> text: the canonical JSON written */
    ADMIN_OVERRIDE_DEL,  /* rule, key */
    ADMIN_OVERRIDE_LIST, /* rule, key = the key to list after (NULL: from the first), limit
                            -> ovs (at most limit, by key), more */
} admin_op_t;

#define ADMIN_LIST_DEFAULT 100  /* overrides per page when none is asked for */
#define ADMIN_LIST_MAX     1000 /* most overrides per page */

/* One override of a page. */
typedef struct admin_override {
    char *key; /* malloc'ed, key_len bytes (and a NUL) */
    size_t key_len;
    char *json; /* malloc'ed */
} admin_override_t;

typedef enum admin_status {
    ADMIN_OK = 0,
    ADMIN_NOTFOUND = 1, /* no such rule (rule operations) or override; err says which */
    ADMIN_EINVALID = 2, /* the input is invalid; err says what and where */
    ADMIN_ESTORE = 3,   /* the config store failed; err says how (the rules in force stay) */
    ADMIN_NORULE = 4,   /* an override operation on a rule the store does not hold */
} admin_status_t;

typedef struct admin_req admin_req_t;

struct admin_req {
    config_job_t job; /* first */
    engine_t *engine;
    engine_worker_t *w; /* the submitting loop's worker */
    admin_op_t op;
    char rule[RULE_NAME_MAX + 1];
    bool bad_name; /* the name given was longer than RULE_NAME_MAX (rule holds its start) */
    bool replace;  /* IMPORT: the store's rules become the file's (else: add and change) */
    char *key;     /* override key, owned (may hold any bytes) */
    size_t key_len;
    char *body; /* JSON or YAML, owned, NUL-terminated */
    size_t body_len;
    /* results */
    admin_status_t status;
    char err[ADMIN_ERR_MAX];
    char field[ADMIN_FIELD_MAX]; /* EINVALID of RULE_PUT / OVERRIDE_PUT: the field err is about
                                    ("limit", "name"), or "" (NUL-terminated) */
    char *text;                  /* GET, PUT, EXPORT */
    config_rule_t *rows;         /* LIST */
    size_t nrows;
    int64_t version;           /* LIST: the version the rows belong to */
    config_import_diff_t diff; /* IMPORT: what it did */
    size_t limit;              /* OVERRIDE_LIST: most to return, 1..ADMIN_LIST_MAX */
    admin_override_t *ovs;     /* OVERRIDE_LIST: the page, sorted by key */
    size_t novs;
    bool more;               /* OVERRIDE_LIST: more may follow the last one */
    char who[ADMIN_WHO_MAX]; /* where the request came from, for the log line of a change
                                (admin_set_who); "" = unknown */
    /* the front end's */
    void (*done)(admin_req_t *req); /* on the submitting loop */
    void *arg;
};

/* A request for op on rule (rule_len bytes; NULL for LIST, IMPORT, EXPORT), key (key_len bytes,
 * NULL for rule operations) and body (body_len bytes, NULL when the operation takes none). Names
 * and keys are validated when it runs. NULL when out of memory. */
admin_req_t *admin_new(engine_t *e, admin_op_t op, const char *rule, size_t rule_len,
                       const void *key, size_t key_len, const char *body, size_t body_len);

/*
 * Says where req comes from, for the INFO line that every change (a rule or an override set or
 * deleted, an import) writes when it is made: "RESP 127.0.0.1:50412, user admin, client
 * 'deploy'". protocol: "RESP", "HTTP"; addr and port: the peer's; user: what it authenticated
 * as ("user admin", "user default", "admin token", "no token"); client: the name the client gave
 * (client_len bytes, any bytes: shown escaped; NULL or empty for none).
 */
void admin_set_who(admin_req_t *req, const char *protocol, const char *addr, int port,
                   const char *client, size_t client_len, const char *user);

/* Runs req on the config thread; req->done(req) runs on w's loop afterwards. */
void admin_submit(engine_worker_t *w, admin_req_t *req);

void admin_free(admin_req_t *req);

/* Bytes as lower-case hex: a malloc'ed, NUL-terminated string, NULL when out of memory. */
char *admin_hex(const void *bytes, size_t n);

/* The cursor of the page after an OVERRIDE_LIST request's (the last key, in hex; malloc'ed), or
 * NULL when the list is done. *failed is set when memory ran out. */
char *admin_next_cursor(const admin_req_t *req, bool *failed);

/* Reads a cursor (len bytes of hex) into key (OVERRIDE_KEY_MAX bytes); false when it is not one. */
bool admin_cursor_parse(const char *text, size_t len, unsigned char *key, size_t *key_len);

#endif /* SLUICE_ENGINE_ADMIN_H */
