/*
 * resp_commands.h - what the files of sluiced's RESP commands share (private to
 * src/server/resp_*.c): the command table's row, the argument and reply helpers, and the
 * handlers the table names.
 *
 *   resp_table.c    the command table, COMMAND, the dispatcher and the request loop (the protocol)
 *   resp_limit.c    rate limiting: SL.ALLOW, SL.PEEK, SL.THROTTLE, SL.SETTLE, SL.ALLOWALL,
 *                   SL.RESET, CL.THROTTLE
 *   resp_rules.c    rules and overrides: SL.RULE, SL.OVERRIDE
 *   resp_stats.c    what the console reads: SL.TOP
 *   resp_server.c   connection and server commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO,
 *                   CLIENT, INFO
 *   resp_common.c   argument and reply helpers
 *
 * Replies and errors follow Redis's wording so client libraries and people recognise them.
 */
#ifndef SLUICE_SERVER_RESP_COMMANDS_H
#define SLUICE_SERVER_RESP_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/commands.h"
#include "proto/resp.h"
#include "server/server.h"

#define NS_PER_MS  INT64_C(1000000)
#define NS_PER_SEC INT64_C(1000000000)

typedef void (*command_fn)(conn_t *c, resp_arg_t *argv, size_t argc);

/* One row of the command table (resp_table.c): a command's description (its name, arity, CMD_*
 * flags, summary and arguments: proto/commands.h) and its handler. */
typedef struct command {
    const cmd_desc_t *desc;
    command_fn fn;
} command_t;

/* ---- resp_common.c ---------------------------------------------------------------------- */

/* True when the argument is `word`, ASCII case-insensitively. */
bool resp_arg_is(const resp_arg_t *a, const char *word);

/* A strict decimal int64 (throttle_arg_i64): true and *out set, or false. */
bool resp_arg_i64(const resp_arg_t *a, int64_t *out);

/* "ERR wrong number of arguments for '<name in lower case>' command". */
void resp_reply_wrong_arity(conn_t *c, const resp_arg_t *name);

/* "ERR syntax error". */
void resp_reply_syntax(conn_t *c);

/* An argument for an error message, in buf: at most 64 bytes, bytes other than printable ASCII
 * and the single quote as '?', then "..." if it was longer. Returns buf. */
const char *resp_show(const resp_arg_t *a, char buf[72]);

/* ---- the handlers the table names --------------------------------------------------------- */

/* resp_limit.c */
void resp_cmd_allow(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_peek(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_reset(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_allowall(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_acquireall(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_throttle(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_settle(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_acquire(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_release(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_cl_throttle(conn_t *c, resp_arg_t *argv, size_t argc);

/* resp_stats.c */
void resp_cmd_top(conn_t *c, resp_arg_t *argv, size_t argc);

/* resp_rules.c */
void resp_cmd_rule(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_override(conn_t *c, resp_arg_t *argv, size_t argc);

/* resp_server.c */
void resp_cmd_ping(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_echo(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_quit(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_select(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_auth(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_hello(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_client(conn_t *c, resp_arg_t *argv, size_t argc);
void resp_cmd_info(conn_t *c, resp_arg_t *argv, size_t argc);

#endif /* SLUICE_SERVER_RESP_COMMANDS_H */
