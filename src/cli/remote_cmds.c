/*
 * remote_cmds.c - `sluice check | settle | acquire | release | rules | overrides | info`: one
 * command to sluiced
 * each, over the blocking client library, printed as text or (--json) as one JSON value. Exit
 * codes are in remote.h and docs/cli.md.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote.h"
#include "sluice/client.h"

#define IMPORT_MAX (64 * 1024 * 1024) /* largest rules FILE read, bytes */

static const char options_text[] =
    "Connection options (before the command or among its arguments):\n"
    "  -h HOST          server address (default 127.0.0.1)\n"
    "  -p PORT          RESP port (default 6390)\n"
    "  -a PASSWORD      AUTH password (default: $SLUICE_PASSWORD, else\n"
    "                   $SLUICE_REQUIREPASS)\n"
    "  --user NAME      AUTH as this user: admin, for rules and overrides when the server has\n"
    "                   an admin password (-a is then the admin password)\n"
    "  --timeout MS     connect and reply timeout, ms (default 5000; 0 = none)\n"
    "  --json           print one JSON value instead of text\n"
    "\n"
    "Exit status: 0 ok; 1 denied / not found / unreadable FILE; 2 usage error; 3 the server\n"
    "replied with an error (printed on stderr); 4 cannot connect, connection lost or timed\n"
    "out; 5 unexpected reply.\n";

const char *remote_options_usage(void)
{
    return options_text;
}

static const char check_usage[] =
    "usage: sluice [OPTIONS] check RULE KEY [--cost N] [--peek] [--priority P]\n"
    "\n"
    "Ask sluiced whether a request of N units (default 1) for KEY under RULE may go\n"
    "through now, and consume them if so (SL.ALLOW). --peek only looks (SL.PEEK).\n"
    "--priority P: the request's priority, one of the rule's priorities (default: the\n"
    "lowest); the decision is that priority's view.\n"
    "Prints: allowed|denied limit=.. remaining=.. retry_after_ms=.. reset_after_ms=..\n"
    "(--json: {\"allowed\":true,\"limit\":..,\"remaining\":..,\"retry_after_ms\":..,\n"
    "\"reset_after_ms\":..}). Exit status 0 allowed, 1 denied.\n"
    "\n";

static const char settle_usage[] =
    "usage: sluice [OPTIONS] settle RULE KEY RESERVED ACTUAL [--at MS]\n"
    "\n"
    "Settle a reservation of RESERVED units of KEY under RULE (a 'check --cost RESERVED'\n"
    "that was allowed) with what it really cost, ACTUAL units (SL.SETTLE). Less gives the\n"
    "difference back; more is charged even past the limit, and KEY is then in debt (denied)\n"
    "until time has paid it back. --at MS: when the reservation was allowed, in ms since the\n"
    "Unix epoch, so that a late settle gives back only what is still counted of it (default:\n"
    "now). Prints KEY's decision after the settle, as 'check --peek' does. Exit status 0\n"
    "allowed, 1 denied (no room left, or in debt). A charge that would leave KEY owing more\n"
    "than the rule's max_debt is refused and charges nothing: sluiced's error, exit status 3.\n"
    "\n";

static const char acquire_usage[] =
    "usage: sluice [OPTIONS] acquire RULE KEY [--cost N] [--hold-timeout DURATION]\n"
    "                                [--priority P]\n"
    "\n"
    "Take N units (default 1) of KEY under RULE, an in-flight rule (one whose algorithm\n"
    "holds units), as one hold (SL.ACQUIRE), if they fit beside what KEY holds. The hold\n"
    "lives DURATION (250ms, 30s, 1m30s; at most, and by default, the rule's hold_timeout)\n"
    "unless released before. Prints the decision as 'check' does, then hold_id=ID: the id\n"
    "to give 'release' (0 when no hold was made). --priority P as for 'check'.\n"
    "Exit status 0 held, 1 refused.\n"
    "\n";

static const char release_usage[] =
    "usage: sluice [OPTIONS] release RULE KEY ID [--latency DURATION] [--dropped]\n"
    "\n"
    "Give back at once the units of KEY's hold ID under RULE, as 'acquire' printed it\n"
    "(SL.RELEASE). For a rule with an adaptive limit, --latency DURATION (12ms, 1500us; at\n"
    "most 1h) reports how long the hold's work took and --dropped that it was dropped or\n"
    "timed out; a fixed limit ignores both. Prints: released. Exit status 0 released,\n"
    "1 no such hold: KEY holds no live hold of that id (it expired, was released before,\n"
    "or was never made; nothing changed; the server's message is printed on stderr).\n"
    "\n";

static const char rules_usage[] =
    "usage: sluice [OPTIONS] rules import FILE|-    add and change the rules a rules file names\n"
    "       sluice [OPTIONS] rules import --replace FILE|-   make the rules exactly the file's\n"
    "       sluice [OPTIONS] rules export           print the rules as a YAML rules file\n"
    "       sluice [OPTIONS] rules list             print the rule names, one per line\n"
    "       sluice [OPTIONS] rules get NAME         print a rule as JSON (exit 1 if absent)\n"
    "       sluice [OPTIONS] rules set NAME JSON    create or replace a rule\n"
    "       sluice [OPTIONS] rules del NAME         delete a rule (exit 1 if absent)\n"
    "\n";

static const char overrides_usage[] =
    "usage: sluice [OPTIONS] overrides set RULE KEY JSON   give KEY its own limits under RULE\n"
    "       sluice [OPTIONS] overrides get RULE KEY        print KEY's override (exit 1 if none)\n"
    "       sluice [OPTIONS] overrides del RULE KEY        delete it (exit 1 if absent)\n"
    "       sluice [OPTIONS] overrides list RULE           print every override of RULE:\n"
    "                                                      KEY<TAB>JSON per line\n"
    "\n";

static const char info_usage[] = "usage: sluice [OPTIONS] info [SECTION]\n"
                                 "\n"
                                 "Print the server's INFO (--json: an object of sections).\n"
                                 "\n";

/* ---- plumbing ---------------------------------------------------------------------------- */

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fputs("sluice: ", stderr);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'sluice %s --help' for more information.\n", cmd);
    return REMOTE_EXIT_USAGE;
}

static int help(const char *text)
{
    fputs(text, stdout);
    fputs(options_text, stdout);
    return fflush(stdout) == 0 ? REMOTE_EXIT_OK : REMOTE_EXIT_NO;
}

/* Prints the client's error and returns its exit code. */
static int client_error(const slc_client_t *c, int rc)
{
    fprintf(stderr, "sluice: %s\n", c != NULL ? slc_errstr(c) : "out of memory");
    switch (rc) {
    case SLC_ESERVER:
        return REMOTE_EXIT_SERVER;
    case SLC_EPROTOCOL:
        return REMOTE_EXIT_PROTOCOL;
    case SLC_EINVAL:
        return REMOTE_EXIT_USAGE;
    default:
        return REMOTE_EXIT_CONNECT;
    }
}

static int unexpected(const char *what, const redisReply *r)
{
    static const char *const names[] = {"?",   "a bulk string", "an array", "an integer",
                                        "nil", "a status",      "an error"};
    int t = r->type >= 1 && r->type <= 6 ? r->type : 0;
    fprintf(stderr, "sluice: unexpected reply to %s: got %s\n", what, names[t]);
    return REMOTE_EXIT_PROTOCOL;
}

/* Connects; on failure prints why and sets *code. */
static slc_client_t *open_client(const struct remote_opts *o, int *code)
{
    slc_client_t *c = slc_connect_user(o->host, o->port, o->user, o->password, o->timeout_ms);
    if (c == NULL || slc_err(c) != SLC_OK) {
        *code = client_error(c, c != NULL ? slc_err(c) : SLC_ENOMEM);
        slc_free(c);
        return NULL;
    }
    return c;
}

static int print_json(json_t *v);

/* Prints that the thing asked for does not exist (--json: null); returns exit code 1. */
static int print_absent(const struct remote_opts *o, const char *absent)
{
    if (o->json)
        print_json(json_null());
    else
        fprintf(stderr, "sluice: %s\n", absent);
    return REMOTE_EXIT_NO;
}

/*
 * Connects, sends argv (argvlen may be NULL), returns the exit code; *reply on success. When
 * `absent` is not NULL, the server's "ERR unknown rule '...'" is a negative answer (the rule
 * asked for does not exist: exit 1, `absent` printed), not a server error.
 */
static int run_absent(const struct remote_opts *o, int argc, const char **argv,
                      const size_t *argvlen, const char *absent, redisReply **reply)
{
    static const char unknown_rule[] = "ERR unknown rule '";
    int code = REMOTE_EXIT_OK;
    slc_client_t *c = open_client(o, &code);
    if (c == NULL)
        return code;
    int rc = slc_command(c, argc, argv, argvlen, reply);
    if (rc == SLC_ESERVER && absent != NULL &&
        strncmp(slc_errstr(c), unknown_rule, sizeof unknown_rule - 1) == 0)
        code = print_absent(o, absent);
    else if (rc != SLC_OK)
        code = client_error(c, rc);
    slc_free(c);
    return code;
}

static int run(const struct remote_opts *o, int argc, const char **argv, const size_t *argvlen,
               redisReply **reply)
{
    return run_absent(o, argc, argv, argvlen, NULL, reply);
}

static int finish_output(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "sluice: write error: %s\n", strerror(errno));
        return REMOTE_EXIT_NO;
    }
    return REMOTE_EXIT_OK;
}

/* Prints a JSON value and a newline; takes the reference. */
static int print_json(json_t *v)
{
    if (v == NULL) {
        fputs("sluice: out of memory\n", stderr);
        return REMOTE_EXIT_NO;
    }
    json_dumpf(v, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    fputc('\n', stdout);
    json_decref(v);
    return finish_output();
}

/* Text ending in exactly one newline (none added if it has one). */
static void print_text(const char *s, size_t len)
{
    fwrite(s, 1, len, stdout);
    if (len == 0 || s[len - 1] != '\n')
        fputc('\n', stdout);
}

/* +OK (or any status) -> "OK" / {"ok":true}. */
static int print_ok(const struct remote_opts *o, const char *what, redisReply *r)
{
    if (r->type != REDIS_REPLY_STATUS)
        return unexpected(what, r);
    if (o->json)
        return print_json(json_pack("{s:b}", "ok", 1));
    print_text(r->str, r->len);
    return finish_output();
}

/* :1 / :0 from a DEL -> exit 0 / 1. */
static int print_deleted(const struct remote_opts *o, const char *what, const char *absent,
                         redisReply *r)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return unexpected(what, r);
    if (o->json) {
        int code = print_json(json_pack("{s:b}", "deleted", r->integer != 0));
        return code != REMOTE_EXIT_OK ? code : r->integer != 0 ? REMOTE_EXIT_OK : REMOTE_EXIT_NO;
    }
    if (r->integer == 0) {
        fprintf(stderr, "sluice: %s\n", absent);
        return REMOTE_EXIT_NO;
    }
    puts("deleted");
    return finish_output();
}

/* A bulk JSON document (or nil: absent, exit 1). */
static int print_document(const struct remote_opts *o, const char *what, const char *absent,
                          redisReply *r)
{
    if (r->type == REDIS_REPLY_NIL)
        return print_absent(o, absent);
    if (r->type != REDIS_REPLY_STRING)
        return unexpected(what, r);
    if (!o->json) {
        print_text(r->str, r->len);
        return finish_output();
    }
    json_error_t e;
    json_t *doc = json_loadb(r->str, r->len, JSON_DECODE_ANY, &e);
    if (doc == NULL) {
        fprintf(stderr, "sluice: %s: the server sent invalid JSON (line %d, column %d: %s)\n", what,
                e.line, e.column, e.text);
        return REMOTE_EXIT_PROTOCOL;
    }
    return print_json(doc);
}

/* Parses a command's arguments; returns -1 to go on, or an exit code. */
static int parse(int argc, char **argv, int first, unsigned flags, const struct remote_opts *g,
                 struct remote_opts *o, struct remote_args *a, const char *cmd, const char *text)
{
    char err[REMOTE_ERR_MAX];
    *o = *g;
    if (remote_parse_args(argc, argv, first, flags, o, a, err, sizeof err) != 0)
        return usage_error(cmd, "%s", err);
    if (a->help)
        return help(text);
    return -1;
}

/* ---- check, settle ----------------------------------------------------------------------- */

/* Prints a decision (text or --json) and, when hold_id >= 0, an acquire's hold id after it; exit
 * 0 when it is allowed, 1 when denied. */
static int print_decision(const struct remote_opts *o, const slc_decision_t *d, int64_t hold_id)
{
    int code;
    if (o->json) {
        json_t *v = json_pack("{s:b,s:I,s:I,s:I,s:I}", "allowed", d->allowed, "limit",
                              (json_int_t)d->limit, "remaining", (json_int_t)d->remaining,
                              "retry_after_ms", (json_int_t)d->retry_after_ms, "reset_after_ms",
                              (json_int_t)d->reset_after_ms);
        if (v != NULL && hold_id >= 0 &&
            json_object_set_new(v, "hold_id", json_integer((json_int_t)hold_id)) != 0) {
            json_decref(v);
            v = NULL;
        }
        code = print_json(v);
    } else {
        printf("%s limit=%lld remaining=%lld retry_after_ms=%lld reset_after_ms=%lld",
               d->allowed ? "allowed" : "denied", (long long)d->limit, (long long)d->remaining,
               (long long)d->retry_after_ms, (long long)d->reset_after_ms);
        if (hold_id >= 0)
            printf(" hold_id=%lld", (long long)hold_id);
        putchar('\n');
        code = finish_output();
    }
    return code != REMOTE_EXIT_OK ? code : d->allowed ? REMOTE_EXIT_OK : REMOTE_EXIT_NO;
}

/* The end of check, settle and acquire: prints the decision (with hold_id when >= 0) or the
 * client's error, and closes c. */
static int decision_done(slc_client_t *c, int rc, const struct remote_opts *o,
                         const slc_decision_t *d, int64_t hold_id)
{
    int code = rc == SLC_OK ? print_decision(o, d, hold_id) : client_error(c, rc);
    slc_free(c);
    return code;
}

int remote_check_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    int code = parse(argc, argv, 1, REMOTE_FLAG_COST | REMOTE_FLAG_PEEK | REMOTE_FLAG_PRIORITY, g,
                     &o, &a, "check", check_usage);
    if (code >= 0)
        return code;
    if (a.npos != 2)
        return usage_error("check", "check: expected RULE KEY%s", a.npos < 2 ? "" : ", got more");
    if (a.peek && a.cost != 1)
        return usage_error("check", "check: %s", "--peek and --cost exclude each other");
    slc_client_t *c = open_client(&o, &code);
    if (c == NULL)
        return code;
    slc_decision_t d;
    slc_request_opts_t ro = {.priority = a.priority};
    int rc = a.peek ? slc_peek_ex(c, a.pos[0], a.pos[1], &ro, &d)
                    : slc_allow_ex(c, a.pos[0], a.pos[1], a.cost, &ro, &d);
    return decision_done(c, rc, &o, &d, -1);
}

int remote_settle_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    int code = parse(argc, argv, 1, REMOTE_FLAG_AT | REMOTE_FLAG_NUMBERS, g, &o, &a, "settle",
                     settle_usage);
    if (code >= 0)
        return code;
    int64_t reserved, actual;
    char err[REMOTE_ERR_MAX];
    if (a.npos != 4) {
        snprintf(err, sizeof err, "settle: expected RULE KEY RESERVED ACTUAL, got %d argument%s",
                 a.npos, a.npos == 1 ? "" : "s");
        return usage_error("settle", "%s", err);
    }
    if (remote_settle_numbers(&a, &reserved, &actual, err, sizeof err) != 0)
        return usage_error("settle", "%s", err);
    slc_client_t *c = open_client(&o, &code);
    if (c == NULL)
        return code;
    slc_decision_t d;
    int rc = slc_settle(c, a.pos[0], a.pos[1], reserved, actual, a.at_ms, &d);
    return decision_done(c, rc, &o, &d, -1);
}

/* ---- acquire, release -------------------------------------------------------------------- */

int remote_acquire_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    int code = parse(argc, argv, 1, REMOTE_FLAG_COST | REMOTE_FLAG_HOLD | REMOTE_FLAG_PRIORITY, g,
                     &o, &a, "acquire", acquire_usage);
    if (code >= 0)
        return code;
    if (a.npos != 2)
        return usage_error("acquire", "acquire: expected RULE KEY%s",
                           a.npos < 2 ? "" : ", got more");
    slc_client_t *c = open_client(&o, &code);
    if (c == NULL)
        return code;
    slc_decision_t d;
    uint64_t hold_id = 0;
    slc_request_opts_t ro = {.priority = a.priority};
    int rc = slc_acquire_ex(c, a.pos[0], a.pos[1], a.cost, a.hold_ms, &ro, &d, &hold_id);
    return decision_done(c, rc, &o, &d, (int64_t)hold_id);
}

int remote_release_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    int code = parse(argc, argv, 1, REMOTE_FLAG_NUMBERS | REMOTE_FLAG_REPORT, g, &o, &a, "release",
                     release_usage);
    if (code >= 0)
        return code;
    char err[REMOTE_ERR_MAX];
    uint64_t id;
    if (a.npos != 3) {
        snprintf(err, sizeof err, "release: expected RULE KEY ID, got %d argument%s", a.npos,
                 a.npos == 1 ? "" : "s");
        return usage_error("release", "%s", err);
    }
    if (remote_hold_id(a.pos[2], &id, err, sizeof err) != 0)
        return usage_error("release", "%s", err);
    slc_client_t *c = open_client(&o, &code);
    if (c == NULL)
        return code;
    slc_release_opts_t ro = {
        .has_latency = a.has_latency, .latency_us = a.latency_us, .dropped = a.dropped};
    int rc = slc_release_ex(c, a.pos[0], a.pos[1], id, &ro);
    if (rc == SLC_OK || rc == SLC_ENOHOLD) {
        code = REMOTE_EXIT_OK;
        if (o.json) {
            code = print_json(json_pack("{s:b}", "released", rc == SLC_OK));
        } else if (rc == SLC_OK) {
            puts("released");
            code = finish_output();
        } else {
            fprintf(stderr, "sluice: %s\n", slc_errstr(c));
        }
        code = code != REMOTE_EXIT_OK ? code : rc == SLC_OK ? REMOTE_EXIT_OK : REMOTE_EXIT_NO;
    } else {
        code = client_error(c, rc);
    }
    slc_free(c);
    return code;
}

/* ---- rules ------------------------------------------------------------------------------- */

/* Reads all of path ("-": stdin) into a malloc'ed buffer; prints why on failure. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "sluice: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n == cap) {
            char *grown = cap < IMPORT_MAX ? realloc(buf, cap * 2) : NULL;
            if (grown == NULL) {
                fprintf(stderr, "sluice: %s: %s\n", path,
                        cap < IMPORT_MAX ? "out of memory" : "larger than 64 MiB");
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                fprintf(stderr, "sluice: %s: %s\n", path, strerror(errno));
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

static int rules_import(const struct remote_opts *o, const char *path, bool replace)
{
    size_t len;
    char *text = read_all(path, &len);
    if (text == NULL)
        return REMOTE_EXIT_NO;
    const char *argv[] = {"SL.RULE", "IMPORT", text, "REPLACE"};
    size_t lens[] = {7, 6, len, 7};
    redisReply *r = NULL;
    int code = run(o, replace ? 4 : 3, argv, lens, &r);
    free(text);
    if (code == REMOTE_EXIT_OK)
        code = print_ok(o, "SL.RULE IMPORT", r);
    freeReplyObject(r);
    return code;
}

static int rules_list(const struct remote_opts *o, redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return unexpected("SL.RULE LIST", r);
    for (size_t i = 0; i < r->elements; i++) {
        int t = r->element[i]->type;
        if (t != REDIS_REPLY_STRING && t != REDIS_REPLY_STATUS)
            return unexpected("SL.RULE LIST (an element)", r->element[i]);
    }
    if (!o->json) {
        for (size_t i = 0; i < r->elements; i++)
            print_text(r->element[i]->str, r->element[i]->len);
        return finish_output();
    }
    json_t *names = json_array();
    for (size_t i = 0; names != NULL && i < r->elements; i++) {
        if (json_array_append_new(names, json_stringn(r->element[i]->str, r->element[i]->len)) !=
            0) {
            json_decref(names);
            names = NULL;
        }
    }
    return print_json(names);
}

static int rules_export(const struct remote_opts *o, redisReply *r)
{
    if (r->type != REDIS_REPLY_STRING)
        return unexpected("SL.RULE EXPORT", r);
    if (o->json)
        return print_json(json_pack("{s:s%}", "yaml", r->str, r->len));
    fwrite(r->str, 1, r->len, stdout);
    return finish_output();
}

/* Subcommands as data: name, positionals, and the RESP command's fixed words. */
struct subcommand {
    const char *name; /* as typed */
    int npos;         /* positional arguments after it */
    const char *verb; /* SL.RULE / SL.OVERRIDE subcommand */
};

static const struct subcommand rules_subs[] = {
    {"import", 1, "IMPORT"}, {"export", 0, "EXPORT"}, {"list", 0, "LIST"},
    {"get", 1, "GET"},       {"set", 2, "SET"},       {"del", 1, "DEL"},
};

static const struct subcommand override_subs[] = {
    {"set", 3, "SET"},
    {"get", 2, "GET"},
    {"del", 2, "DEL"},
    {"list", 1, "LIST"},
};

static const struct subcommand *find_sub(const struct subcommand *subs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(subs[i].name, name) == 0)
            return &subs[i];
    }
    return NULL;
}

/* Parses `CMD SUB ARGS...`; returns -1 with *sub and *a set, or an exit code. */
static int parse_sub(int argc, char **argv, const struct subcommand *subs, size_t nsubs,
                     unsigned flags, const struct remote_opts *g, struct remote_opts *o,
                     struct remote_args *a, const struct subcommand **sub, const char *cmd,
                     const char *text)
{
    int code = parse(argc, argv, 1, flags, g, o, a, cmd, text);
    if (code >= 0)
        return code;
    if (a->npos == 0)
        return usage_error(cmd, "%s: missing subcommand", cmd);
    *sub = find_sub(subs, nsubs, a->pos[0]);
    if (*sub == NULL) {
        fprintf(stderr, "sluice: %s: unknown subcommand '%s'\n\n%s", cmd, a->pos[0], text);
        return REMOTE_EXIT_USAGE;
    }
    if (a->npos - 1 != (*sub)->npos) {
        fprintf(stderr, "sluice: %s %s: expected %d argument%s, got %d\n\n%s", cmd, (*sub)->name,
                (*sub)->npos, (*sub)->npos == 1 ? "" : "s", a->npos - 1, text);
        return REMOTE_EXIT_USAGE;
    }
    return -1;
}

/* Sends cmd (cmd[0] the command, cmd[1] the verb, then argc - 2 arguments) and prints its reply
 * by verb: LIST and EXPORT (SL.RULE only) by the rules printers, GET as a document, SET as OK,
 * anything else (DEL) as deleted. absent is the message for an item that does not exist.
 * Returns an exit code. */
static int run_subcommand(const struct remote_opts *o, int argc, const char **cmd,
                          const char *absent)
{
    char what[64];
    snprintf(what, sizeof what, "%s %s", cmd[0], cmd[1]);
    redisReply *r = NULL;
    /* SL.RULE GET of a rule that does not exist answers an error; like a nil, it is "none" */
    bool rule_get = strcmp(cmd[0], "SL.RULE") == 0 && strcmp(cmd[1], "GET") == 0;
    int code = run_absent(o, argc, cmd, NULL, rule_get ? absent : NULL, &r);
    if (code != REMOTE_EXIT_OK)
        return code;
    if (strcmp(cmd[1], "LIST") == 0)
        code = rules_list(o, r);
    else if (strcmp(cmd[1], "EXPORT") == 0)
        code = rules_export(o, r);
    else if (strcmp(cmd[1], "GET") == 0)
        code = print_document(o, what, absent, r);
    else if (strcmp(cmd[1], "SET") == 0)
        code = print_ok(o, what, r);
    else
        code = print_deleted(o, what, absent, r);
    freeReplyObject(r);
    return code;
}

int remote_rules_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    const struct subcommand *sub;
    int code = parse_sub(argc, argv, rules_subs, sizeof rules_subs / sizeof rules_subs[0],
                         REMOTE_FLAG_REPLACE, g, &o, &a, &sub, "rules", rules_usage);
    if (code >= 0)
        return code;
    if (a.replace && strcmp(sub->verb, "IMPORT") != 0)
        return usage_error("rules", "rules %s: --replace is for import only", sub->name);
    if (strcmp(sub->verb, "IMPORT") == 0)
        return rules_import(&o, a.pos[1], a.replace);
    const char *cmd[4] = {"SL.RULE", sub->verb, a.pos[1], a.pos[2]};
    char absent[320];
    snprintf(absent, sizeof absent, "no rule '%s'", a.npos > 1 ? a.pos[1] : "");
    return run_subcommand(&o, 2 + sub->npos, cmd, absent);
}

/* ---- overrides --------------------------------------------------------------------------- */

/* Checks one page of SL.OVERRIDE LIST: [cursor, [key, json, ...]]. */
static bool override_page_ok(const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
        r->element[1]->elements % 2 != 0)
        return false;
    for (size_t i = 0; i < r->element[1]->elements; i++) {
        if (r->element[1]->element[i]->type != REDIS_REPLY_STRING)
            return false;
    }
    return true;
}

/* Every override of a rule, a page (SL.OVERRIDE LIST ... COUNT 1000) at a time. */
static int overrides_list(const struct remote_opts *o, const char *rule)
{
    char cursor[2 * 1024 + 1] = "0";
    json_t *all = o->json ? json_array() : NULL;
    int code = REMOTE_EXIT_OK;
    long pages = 0;
    do {
        const char *argv[] = {"SL.OVERRIDE", "LIST", rule, cursor, "COUNT", "1000"};
        redisReply *r = NULL;
        code = run(o, 6, argv, NULL, &r);
        if (code != REMOTE_EXIT_OK)
            break;
        if (r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "sluice: %s\n", r->str);
            code = REMOTE_EXIT_SERVER;
        } else if (!override_page_ok(r) || r->element[0]->len >= sizeof cursor) {
            code = unexpected("SL.OVERRIDE LIST", r);
        }
        for (size_t i = 0; code == REMOTE_EXIT_OK && i < r->element[1]->elements; i += 2) {
            const redisReply *k = r->element[1]->element[i], *v = r->element[1]->element[i + 1];
            if (all != NULL) {
                json_t *ov = json_loadb(v->str, v->len, 0, NULL);
                json_array_append_new(all,
                                      json_pack("{s:s%,s:o}", "key", k->str, k->len, "override",
                                                ov != NULL ? ov : json_stringn(v->str, v->len)));
            } else {
                fwrite(k->str, 1, k->len, stdout);
                fputc('\t', stdout);
                print_text(v->str, v->len);
            }
        }
        if (code == REMOTE_EXIT_OK) {
            memcpy(cursor, r->element[0]->str, r->element[0]->len);
            cursor[r->element[0]->len] = '\0';
        }
        freeReplyObject(r);
    } while (code == REMOTE_EXIT_OK && strcmp(cursor, "0") != 0 && ++pages < 100000000L);
    if (code != REMOTE_EXIT_OK) {
        json_decref(all);
        return code;
    }
    return all != NULL ? print_json(all) : finish_output();
}

int remote_overrides_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    const struct subcommand *sub;
    int code = parse_sub(argc, argv, override_subs, sizeof override_subs / sizeof override_subs[0],
                         0, g, &o, &a, &sub, "overrides", overrides_usage);
    if (code >= 0)
        return code;
    if (strcmp(sub->verb, "LIST") == 0)
        return overrides_list(&o, a.pos[1]);
    const char *cmd[5] = {"SL.OVERRIDE", sub->verb, a.pos[1], a.pos[2], a.pos[3]};
    char absent[640];
    snprintf(absent, sizeof absent, "no override for key '%s' of rule '%s'", a.pos[2], a.pos[1]);
    return run_subcommand(&o, 2 + sub->npos, cmd, absent);
}

/* ---- info -------------------------------------------------------------------------------- */

int remote_info_main(int argc, char **argv, const struct remote_opts *g)
{
    struct remote_opts o;
    struct remote_args a;
    int code = parse(argc, argv, 1, 0, g, &o, &a, "info", info_usage);
    if (code >= 0)
        return code;
    if (a.npos > 1)
        return usage_error("info", "info: expected at most one SECTION, got '%s'", a.pos[1]);
    const char *cmd[2] = {"INFO", a.pos[0]};
    redisReply *r = NULL;
    code = run(&o, 1 + a.npos, cmd, NULL, &r);
    if (code != REMOTE_EXIT_OK)
        return code;
    if (r->type != REDIS_REPLY_STRING) {
        code = unexpected("INFO", r);
    } else if (o.json) {
        json_t *info = remote_info_json(r->str, r->len);
        if (info == NULL) {
            fputs("sluice: INFO: cannot convert the reply to JSON (not UTF-8?)\n", stderr);
            code = REMOTE_EXIT_PROTOCOL;
        } else {
            code = print_json(info);
        }
    } else {
        for (size_t i = 0; i < r->len; i++) {
            if (!(r->str[i] == '\r' && i + 1 < r->len && r->str[i + 1] == '\n'))
                fputc(r->str[i], stdout);
        }
        if (r->len == 0 || r->str[r->len - 1] != '\n')
            fputc('\n', stdout);
        code = finish_output();
    }
    freeReplyObject(r);
    return code;
}
