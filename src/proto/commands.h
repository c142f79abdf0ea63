/*
 * commands.h - every RESP command's description, once: sluiced's (src/server/resp_table.c pairs
 * each with its handler, and COMMAND, COMMAND COUNT, COMMAND INFO and COMMAND DOCS read them)
 * and sluice.so's (src/module/sluice_module.c registers its commands' flags, arity, summary and
 * arguments from them). A command both have is one description when its forms are the same
 * (SL.THROTTLE, CL.THROTTLE); where sluiced takes a named form too, the module's description is
 * the inline form, whose arguments are the very block sluiced's description offers.
 *
 * Arguments are described as Redis 7 describes its own (COMMAND DOCS): a name, a type (key,
 * string, integer, pure-token, block, oneof), the token before it, optional / multiple, and a
 * block's or oneof's parts, so that redis-cli's HELP and hints work for ours.
 */
#ifndef SLUICE_PROTO_COMMANDS_H
#define SLUICE_PROTO_COMMANDS_H

#include <stddef.h>

enum {
    CMD_NOAUTH = 1u << 0,   /* allowed before AUTH (sluiced) */
    CMD_WRITE = 1u << 1,    /* changes state ("write"; else "readonly") */
    CMD_ADMIN = 1u << 2,    /* changes rules or overrides (sluiced) */
    CMD_DENYOOM = 1u << 3,  /* refused while Redis is out of memory ("deny-oom", the module) */
    CMD_FAST = 1u << 4,     /* "fast" (the module) */
    CMD_READONLY = 1u << 5, /* "readonly" (the module; sluiced says it of every command not
                               CMD_WRITE) */
};

enum {
    CMD_ARG_OPTIONAL = 1u << 0,
    CMD_ARG_MULTIPLE = 1u << 1,
};

typedef struct cmd_arg {
    const char *name;           /* shown in hints; NULL ends a list */
    const char *type;           /* key, string, integer, pure-token, block or oneof */
    const char *token;          /* the word before the value ("BURST"), or NULL */
    unsigned flags;             /* CMD_ARG_* */
    const struct cmd_arg *args; /* a block's or oneof's parts, or NULL */
} cmd_arg_t;

typedef struct cmd_desc {
    const char *name;            /* lower case; a subcommand "sl.rule|set"; NULL ends a list */
    int arity;                   /* Redis's: N exactly N arguments with the name, -N at least N */
    unsigned flags;              /* CMD_* */
    const char *summary;         /* one line */
    const char *group;           /* Redis's groups: connection, server; module for SL.* */
    const cmd_arg_t *args;       /* NULL: none */
    const struct cmd_desc *subs; /* subcommands (NULL-name terminated), or NULL */
} cmd_desc_t;

/* sluiced's commands, and sluice.so's where they are the same. */
extern const cmd_desc_t desc_sl_throttle, desc_sl_allow, desc_cl_throttle, desc_sl_allowall,
    desc_sl_settle, desc_sl_acquire, desc_sl_acquireall, desc_sl_release, desc_sl_peek, desc_sl_top,
    desc_sl_reset, desc_sl_rule, desc_sl_override, desc_ping, desc_echo, desc_auth, desc_hello,
    desc_client, desc_command, desc_info, desc_select, desc_quit;

/* sluice.so's own: the inline forms of SL.PEEK and SL.SETTLE, SL.RESET of a Redis key, the
 * leases, the test clock. */
extern const cmd_desc_t desc_mod_sl_peek, desc_mod_sl_settle, desc_mod_sl_reset, desc_mod_sl_lease,
    desc_mod_sl_return, desc_mod_sl_debug, desc_mod_sl_acquire, desc_mod_sl_release;

/* The number of arguments in a NULL-name terminated list (0 for NULL). */
size_t cmd_args_count(const cmd_arg_t *args);

/* The number of subcommands of d. */
size_t cmd_subs_count(const cmd_desc_t *d);

#endif /* SLUICE_PROTO_COMMANDS_H */
