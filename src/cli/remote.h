/*
 * remote.h - the commands of `sluice` that talk to a running sluiced: check, settle, acquire,
 * release, rules, overrides, info. They use the blocking client library (sluice/client.h).
 *
 * Two layers, as for replay:
 *
 *   1. Pure parsing: remote_global_option() (the connection options, -h -p -a --json
 *      --timeout, accepted before the command and among its arguments), remote_parse_args()
 *      (a command's own flags and positional arguments), remote_settle_numbers() (settle's
 *      RESERVED and ACTUAL), remote_hold_id() (release's ID) and remote_info_json() (INFO's text ->
 * a JSON object of sections). No I/O; errors come back as text.
 *   2. The commands: each connects, sends one command, prints the result (text, or one JSON
 *      object/value with --json) and returns the process exit code.
 *
 * Exit codes (docs/cli.md): 0 success (check, settle, acquire: allowed); 1 a negative answer
 * (check, settle, acquire: denied; release: no such hold; get: no such rule or override; del:
 * nothing to delete) or an unreadable FILE; 2 usage error;
 * 3 the server replied with an error (printed on stderr as sent, after "sluice: "); 4 cannot
 * connect, connection lost or timed out; 5 a reply of an unexpected shape.
 */
#ifndef SLUICE_CLI_REMOTE_H
#define SLUICE_CLI_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define REMOTE_EXIT_OK       0
#define REMOTE_EXIT_NO       1 /* denied / not found / unreadable FILE */
#define REMOTE_EXIT_USAGE    2
#define REMOTE_EXIT_SERVER   3 /* the server replied with an error */
#define REMOTE_EXIT_CONNECT  4 /* cannot connect, connection lost, timeout */
#define REMOTE_EXIT_PROTOCOL 5 /* unexpected reply */

#define REMOTE_DEFAULT_HOST       "127.0.0.1"
#define REMOTE_DEFAULT_PORT       6390
#define REMOTE_DEFAULT_TIMEOUT_MS 5000
#define REMOTE_POS_MAX            4   /* most positional arguments of any command */
#define REMOTE_ERR_MAX            256 /* a buffer this size holds any parse error message */

/* The connection options, shared by every remote command. */
struct remote_opts {
    const char *host;     /* -h HOST (default 127.0.0.1) */
    int port;             /* -p PORT (default 6390) */
    const char *password; /* -a PASSWORD, else $SLUICE_PASSWORD or $SLUICE_REQUIREPASS */
    const char *user;     /* --user NAME: AUTH as this user ("admin" for rules and overrides
                             when sluiced has an admin password), else NULL */
    bool json;            /* --json: machine output */
    int timeout_ms;       /* --timeout MS: connect and per-command timeout, 0 = none */
};

/* Defaults; password from `env_password` (the environment's; NULL or "" means none). */
void remote_opts_init(struct remote_opts *o, const char *env_password);

/*
 * If argv[i] is a connection option, applies it to *o and returns how many entries it used
 * (1, or 2 with its value); returns 0 when argv[i] is not one; returns -1 with a message in
 * err for a missing or bad value ("-p: port must be an integer in 1..65535, got 'x'"). Values
 * point into argv.
 */
int remote_global_option(struct remote_opts *o, int argc, char **argv, int i, char *err,
                         size_t errlen);

/* Which of a command's own flags it accepts. */
#define REMOTE_FLAG_COST    0x1 /* --cost N */
#define REMOTE_FLAG_PEEK    0x2 /* --peek */
#define REMOTE_FLAG_REPLACE 0x4 /* --replace */
#define REMOTE_FLAG_AT      0x8 /* --at MS */
/* An argument starting with '-' and a digit is a positional (a number the command checks, so
 * that "-5" gets the command's own message), not an option. */
#define REMOTE_FLAG_NUMBERS  0x10
#define REMOTE_FLAG_HOLD     0x20 /* --hold-timeout DURATION */
#define REMOTE_FLAG_PRIORITY 0x40 /* --priority P */
#define REMOTE_FLAG_REPORT   0x80 /* --latency DURATION, --dropped (a release's report) */

/* A command's arguments after parsing. */
struct remote_args {
    const char *pos[REMOTE_POS_MAX]; /* positional arguments, pointing into argv */
    int npos;
    int64_t cost;         /* --cost (default 1, >= 0) */
    int64_t at_ms;        /* --at, ms since the Unix epoch (default -1: none) */
    int64_t hold_ms;      /* --hold-timeout, whole ms >= 1 (default 0: the rule's hold_timeout) */
    const char *priority; /* --priority, one of the rule's priorities (default NULL: none) */
    bool has_latency;     /* --latency was given */
    int64_t latency_us;   /* --latency, whole us in 0..1h */
    bool dropped;         /* --dropped */
    bool peek;            /* --peek */
    bool replace;         /* --replace */
    bool help;            /* --help */
};

/*
 * Parses argv[first..argc): connection options (into *o), the flags in `flags`, --help, and
 * positional arguments; "--" ends the options (so a key may start with '-'). Returns 0, or -1
 * with a message in err (unknown option, bad value, more than REMOTE_POS_MAX positionals).
 * The caller checks the positional count.
 */
int remote_parse_args(int argc, char **argv, int first, unsigned flags, struct remote_opts *o,
                      struct remote_args *a, char *err, size_t errlen);

/*
 * settle's numbers: a->pos[2] (RESERVED) and a->pos[3] (ACTUAL), each a whole decimal integer
 * in 0..INT64_MAX. Returns 0 with *reserved and *actual set, or -1 with a message in err
 * naming the argument ("settle: RESERVED must be a non-negative integer, got '-5'"). The
 * caller has checked that there are four positionals.
 */
int remote_settle_numbers(const struct remote_args *a, int64_t *reserved, int64_t *actual,
                          char *err, size_t errlen);

/*
 * release's ID: text, a whole decimal integer in 0..INT64_MAX (what SL.RELEASE accepts). Returns
 * 0 with *id set, or -1 with a message in err ("release: ID must be a non-negative integer, got
 * 'x'").
 */
int remote_hold_id(const char *text, uint64_t *id, char *err, size_t errlen);

/*
 * INFO's reply text ("# Section\r\nfield:value\r\n...", LF or CRLF) as a JSON object: one
 * object per section, keyed by the section name in lower case; each field a number when its
 * value is a whole decimal integer, else a string. Fields before any section header go to
 * "info"; blank lines and lines without ':' are skipped. Returns a new reference, or NULL when
 * allocation fails or a name or value is not UTF-8.
 */
json_t *remote_info_json(const char *text, size_t len);

/* The commands: argv[0] is the command name; returns the exit code. */
int remote_check_main(int argc, char **argv, const struct remote_opts *g);
int remote_settle_main(int argc, char **argv, const struct remote_opts *g);
int remote_acquire_main(int argc, char **argv, const struct remote_opts *g);
int remote_release_main(int argc, char **argv, const struct remote_opts *g);
int remote_rules_main(int argc, char **argv, const struct remote_opts *g);
int remote_overrides_main(int argc, char **argv, const struct remote_opts *g);
int remote_info_main(int argc, char **argv, const struct remote_opts *g);

/* The connection options' help text (static, ends in a newline). */
const char *remote_options_usage(void);

#endif /* SLUICE_CLI_REMOTE_H */
