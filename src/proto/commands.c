/*
 * commands.c - every RESP command's description (commands.h): sluiced's and sluice.so's, built
 * from shared argument lists (the inline rule, a rule and key, COST).
 */
#include "proto/commands.h"

#define PEEK_SUMMARY "Reports what a request would be told, consuming nothing"
#define SETTLE_SUMMARY                                                                             \
    "Settles a reservation with its actual cost: refunds the rest, or charges past the limit"

#define CMD_ARGS_END                                                                               \
    {                                                                                              \
        NULL, NULL, NULL, 0, NULL                                                                  \
    }
#define CMD_ARG_KEY                                                                                \
    {                                                                                              \
        "key", "key", NULL, 0, NULL                                                                \
    }
#define CMD_ARG_RULE                                                                               \
    {                                                                                              \
        "rule", "string", NULL, 0, NULL                                                            \
    }
#define CMD_ARG_COST                                                                               \
    {                                                                                              \
        "cost", "integer", "COST", CMD_ARG_OPTIONAL, NULL                                          \
    }

/* the inline rule: key algorithm limit window_ms [BURST b] [BUCKETS k] [MAX_DELAY ms]; the window
 * and MAX_DELAY are durations (1000 = 1000 ms, or 1s), strings to COMMAND DOCS */
#define CMD_INLINE_RULE                                                                            \
    CMD_ARG_KEY, {"algorithm", "string", NULL, 0, NULL}, {"limit", "integer", NULL, 0, NULL},      \
        {"window_ms", "string", NULL, 0, NULL},                                                    \
        {"burst", "integer", "BURST", CMD_ARG_OPTIONAL, NULL},                                     \
        {"buckets", "integer", "BUCKETS", CMD_ARG_OPTIONAL, NULL},                                 \
    {                                                                                              \
        "max_delay_ms", "string", "MAX_DELAY", CMD_ARG_OPTIONAL, NULL                              \
    }

static const cmd_arg_t doc_rule_key[] = {CMD_ARG_RULE, CMD_ARG_KEY, CMD_ARGS_END};
static const cmd_arg_t doc_inline[] = {CMD_INLINE_RULE, CMD_ARGS_END};
static const cmd_arg_t doc_throttle[] = {CMD_INLINE_RULE, CMD_ARG_COST, CMD_ARGS_END};
static const cmd_arg_t doc_allow[] = {
    CMD_ARG_RULE,
    CMD_ARG_KEY,
    CMD_ARG_COST,
    {"priority", "string", "PRIORITY", CMD_ARG_OPTIONAL, NULL},
    {"shadowinfo", "pure-token", "SHADOWINFO", CMD_ARG_OPTIONAL, NULL},
    CMD_ARGS_END};
static const cmd_arg_t doc_allowall[] = {
    {"pair", "block", NULL, CMD_ARG_MULTIPLE, doc_rule_key}, CMD_ARG_COST, CMD_ARGS_END};
static const cmd_arg_t doc_peek_forms[] = {{"named", "block", NULL, 0, doc_rule_key},
                                           {"inline", "block", NULL, 0, doc_inline},
                                           CMD_ARGS_END};
static const cmd_arg_t doc_peek[] = {{"form", "oneof", NULL, 0, doc_peek_forms}, CMD_ARGS_END};
static const cmd_arg_t doc_reset_forms[] = {
    {"named", "block", NULL, 0, doc_rule_key}, CMD_ARG_KEY, CMD_ARGS_END};
static const cmd_arg_t doc_reset[] = {{"form", "oneof", NULL, 0, doc_reset_forms}, CMD_ARGS_END};
static const cmd_arg_t doc_settle_named[] = {CMD_ARG_RULE,
                                             CMD_ARG_KEY,
                                             {"reserved", "integer", NULL, 0, NULL},
                                             {"actual", "integer", NULL, 0, NULL},
                                             {"unix-ms", "integer", "AT", CMD_ARG_OPTIONAL, NULL},
                                             CMD_ARGS_END};
static const cmd_arg_t doc_settle_inline[] = {CMD_INLINE_RULE,
                                              {"reserved", "integer", "RESERVED", 0, NULL},
                                              {"actual", "integer", "ACTUAL", 0, NULL},
                                              {"unix-ms", "integer", "AT", CMD_ARG_OPTIONAL, NULL},
                                              CMD_ARGS_END};
static const cmd_arg_t doc_settle_forms[] = {{"named", "block", NULL, 0, doc_settle_named},
                                             {"inline", "block", NULL, 0, doc_settle_inline},
                                             CMD_ARGS_END};
static const cmd_arg_t doc_settle[] = {{"form", "oneof", NULL, 0, doc_settle_forms}, CMD_ARGS_END};
static const cmd_arg_t doc_acquire[] = {
    CMD_ARG_RULE,
    CMD_ARG_KEY,
    CMD_ARG_COST,
    {"timeout_ms", "integer", "TIMEOUT", CMD_ARG_OPTIONAL, NULL},
    CMD_ARGS_END};
static const cmd_arg_t doc_acquireall[] = {
    {"pair", "block", NULL, CMD_ARG_MULTIPLE, doc_rule_key},
    CMD_ARG_COST,
    {"timeout_ms", "integer", "TIMEOUT", CMD_ARG_OPTIONAL, NULL},
    {"priority", "string", "PRIORITY", CMD_ARG_OPTIONAL, NULL},
    CMD_ARGS_END};
static const cmd_arg_t doc_release[] = {
    CMD_ARG_RULE,
    CMD_ARG_KEY,
    {"id", "integer", NULL, 0, NULL},
    {"latency", "string", "LATENCY", CMD_ARG_OPTIONAL, NULL},
    {"dropped", "pure-token", "DROPPED", CMD_ARG_OPTIONAL, NULL},
    CMD_ARGS_END};
static const cmd_arg_t doc_cl_throttle[] = {CMD_ARG_KEY,
                                            {"max_burst", "integer", NULL, 0, NULL},
                                            {"count", "integer", NULL, 0, NULL},
                                            {"period", "integer", NULL, 0, NULL},
                                            {"quantity", "integer", NULL, CMD_ARG_OPTIONAL, NULL},
                                            CMD_ARGS_END};
static const cmd_arg_t doc_name[] = {{"name", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_name_json[] = {
    {"name", "string", NULL, 0, NULL}, {"json", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_import[] = {{"yaml", "string", NULL, 0, NULL},
                                       {"replace", "pure-token", "REPLACE", CMD_ARG_OPTIONAL, NULL},
                                       CMD_ARGS_END};
static const cmd_arg_t doc_rule_key_json[] = {
    CMD_ARG_RULE, CMD_ARG_KEY, {"json", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_override_list[] = {CMD_ARG_RULE,
                                              {"cursor", "string", NULL, CMD_ARG_OPTIONAL, NULL},
                                              {"count", "integer", "COUNT", CMD_ARG_OPTIONAL, NULL},
                                              CMD_ARGS_END};
static const cmd_arg_t doc_message[] = {{"message", "string", NULL, CMD_ARG_OPTIONAL, NULL},
                                        CMD_ARGS_END};
static const cmd_arg_t doc_echo[] = {{"message", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_auth[] = {{"username", "string", NULL, CMD_ARG_OPTIONAL, NULL},
                                     {"password", "string", NULL, 0, NULL},
                                     CMD_ARGS_END};
static const cmd_arg_t doc_hello_auth[] = {
    {"username", "string", NULL, 0, NULL}, {"password", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_hello_opts[] = {
    {"protover", "integer", NULL, 0, NULL},
    {"auth", "block", "AUTH", CMD_ARG_OPTIONAL, doc_hello_auth},
    {"clientname", "string", "SETNAME", CMD_ARG_OPTIONAL, NULL},
    CMD_ARGS_END};
static const cmd_arg_t doc_hello[] = {
    {"arguments", "block", NULL, CMD_ARG_OPTIONAL, doc_hello_opts}, CMD_ARGS_END};
static const cmd_arg_t doc_setname[] = {{"connection-name", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_setinfo[] = {
    {"attr", "string", NULL, 0, NULL}, {"value", "string", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_command_names[] = {
    {"command-name", "string", NULL, CMD_ARG_OPTIONAL | CMD_ARG_MULTIPLE, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_info[] = {
    {"section", "string", NULL, CMD_ARG_OPTIONAL | CMD_ARG_MULTIPLE, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_select[] = {{"index", "integer", NULL, 0, NULL}, CMD_ARGS_END};
static const cmd_arg_t doc_top[] = {CMD_ARG_RULE,
                                    {"count", "integer", NULL, CMD_ARG_OPTIONAL, NULL},
                                    {"denied", "pure-token", "DENIED", CMD_ARG_OPTIONAL, NULL},
                                    CMD_ARGS_END};

#define CMD_SUBS_END                                                                               \
    {                                                                                              \
        NULL, 0, 0, NULL, NULL, NULL, NULL                                                         \
    }

static const cmd_desc_t doc_rule_subs[] = {
    {"sl.rule|set", 0, 0, "Creates or replaces a rule, given as JSON", "module", doc_name_json,
     NULL},
    {"sl.rule|get", 0, 0, "Returns a rule as JSON", "module", doc_name, NULL},
    {"sl.rule|del", 0, 0, "Deletes a rule and its overrides", "module", doc_name, NULL},
    {"sl.rule|list", 0, 0, "Returns the names of the rules", "module", NULL, NULL},
    {"sl.rule|import", 0, 0,
     "Adds and changes the rules of a YAML rules file (REPLACE: only those)", "module", doc_import,
     NULL},
    {"sl.rule|export", 0, 0, "Returns every rule and override as a YAML rules file", "module", NULL,
     NULL},
    CMD_SUBS_END,
};

static const cmd_desc_t doc_override_subs[] = {
    {"sl.override|set", 0, 0, "Gives a key of a rule its own numbers, given as JSON", "module",
     doc_rule_key_json, NULL},
    {"sl.override|get", 0, 0, "Returns a key's override as JSON, or nil", "module", doc_rule_key,
     NULL},
    {"sl.override|del", 0, 0, "Deletes a key's override", "module", doc_rule_key, NULL},
    {"sl.override|list", 0, 0, "Returns a page of a rule's overrides, like SCAN", "module",
     doc_override_list, NULL},
    CMD_SUBS_END,
};

static const cmd_desc_t doc_client_subs[] = {
    {"client|id", 0, 0, "Returns the connection's id", "connection", NULL, NULL},
    {"client|getname", 0, 0, "Returns the connection's name", "connection", NULL, NULL},
    {"client|setname", 0, 0, "Sets the connection's name", "connection", doc_setname, NULL},
    {"client|info", 0, 0, "Returns information about the connection", "connection", NULL, NULL},
    {"client|list", 0, 0, "Lists the connections of this connection's thread", "connection", NULL,
     NULL},
    {"client|setinfo", 0, 0, "Accepted for clients that send it; no effect", "connection",
     doc_setinfo, NULL},
    CMD_SUBS_END,
};

static const cmd_desc_t doc_command_subs[] = {
    {"command|count", 0, 0, "Returns the number of commands", "server", NULL, NULL},
    {"command|info", 0, 0, "Returns information about commands", "server", doc_command_names, NULL},
    {"command|docs", 0, 0, "Returns documentary information about commands", "server",
     doc_command_names, NULL},
    CMD_SUBS_END,
};

/* ---- sluiced's commands ------------------------------------------------------------------ */

const cmd_desc_t desc_sl_throttle = {
    .name = "sl.throttle",
    .arity = -5,
    .flags = CMD_WRITE | CMD_DENYOOM,
    .summary = "Decides a request for a key under an inline rule (no configuration needed)",
    .group = "module",
    .args = doc_throttle,
};
const cmd_desc_t desc_sl_allow = {
    .name = "sl.allow",
    .arity = -3,
    .flags = CMD_WRITE,
    .summary = "Decides a request for a key under a named rule",
    .group = "module",
    .args = doc_allow,
};
const cmd_desc_t desc_cl_throttle = {
    .name = "cl.throttle",
    .arity = -5,
    .flags = CMD_WRITE | CMD_DENYOOM,
    .summary = "Decides a request as redis-cell's CL.THROTTLE does, with its reply",
    .group = "module",
    .args = doc_cl_throttle,
};
const cmd_desc_t desc_sl_allowall = {
    .name = "sl.allowall",
    .arity = -3,
    .flags = CMD_WRITE,
    .summary = "Admits the cost for every rule/key pair, or for none",
    .group = "module",
    .args = doc_allowall,
};
const cmd_desc_t desc_sl_settle = {
    .name = "sl.settle",
    .arity = -5,
    .flags = CMD_WRITE,
    .summary = SETTLE_SUMMARY,
    .group = "module",
    .args = doc_settle,
};
const cmd_desc_t desc_sl_acquire = {
    .name = "sl.acquire",
    .arity = -3,
    .flags = CMD_WRITE,
    .summary = "Takes units of an in-flight rule's key as one hold, returning its id",
    .group = "module",
    .args = doc_acquire,
};
const cmd_desc_t desc_sl_acquireall = {
    .name = "sl.acquireall",
    .arity = -3,
    .flags = CMD_WRITE,
    .summary = "Takes a hold on every rule/key pair of in-flight rules, or on none",
    .group = "module",
    .args = doc_acquireall,
};
const cmd_desc_t desc_sl_release = {
    .name = "sl.release",
    .arity = -4,
    .flags = CMD_WRITE,
    .summary = "Gives back the units of a hold by its id",
    .group = "module",
    .args = doc_release,
};
const cmd_desc_t desc_sl_peek = {
    .name = "sl.peek",
    .arity = -3,
    .summary = PEEK_SUMMARY,
    .group = "module",
    .args = doc_peek,
};
const cmd_desc_t desc_sl_top = {
    .name = "sl.top",
    .arity = -2,
    .summary = "Returns a rule's heaviest keys of the last minute, by decisions or denials",
    .group = "module",
    .args = doc_top,
};
const cmd_desc_t desc_sl_reset = {
    .name = "sl.reset",
    .arity = -2,
    .flags = CMD_WRITE | CMD_ADMIN,
    .summary = "Forgets a key's usage (under a named rule, or under every inline rule)",
    .group = "module",
    .args = doc_reset,
};
const cmd_desc_t desc_sl_rule = {
    .name = "sl.rule",
    .arity = -2,
    .flags = CMD_WRITE | CMD_ADMIN,
    .summary = "Manages the rules",
    .group = "module",
    .subs = doc_rule_subs,
};
const cmd_desc_t desc_sl_override = {
    .name = "sl.override",
    .arity = -3,
    .flags = CMD_WRITE | CMD_ADMIN,
    .summary = "Manages the per-key overrides of a rule",
    .group = "module",
    .subs = doc_override_subs,
};
const cmd_desc_t desc_ping = {
    .name = "ping",
    .arity = -1,
    .summary = "Returns PONG, or the message",
    .group = "connection",
    .args = doc_message,
};
const cmd_desc_t desc_echo = {
    .name = "echo",
    .arity = 2,
    .summary = "Returns the message",
    .group = "connection",
    .args = doc_echo,
};
const cmd_desc_t desc_auth = {
    .name = "auth",
    .arity = -2,
    .flags = CMD_NOAUTH,
    .summary = "Authenticates the connection",
    .group = "connection",
    .args = doc_auth,
};
const cmd_desc_t desc_hello = {
    .name = "hello",
    .arity = -1,
    .flags = CMD_NOAUTH,
    .summary = "Handshakes with the server (RESP2 only)",
    .group = "connection",
    .args = doc_hello,
};
const cmd_desc_t desc_client = {
    .name = "client",
    .arity = -2,
    .summary = "Manages the connection",
    .group = "connection",
    .subs = doc_client_subs,
};
const cmd_desc_t desc_command = {
    .name = "command",
    .arity = -1,
    .summary = "Returns information about the commands",
    .group = "server",
    .subs = doc_command_subs,
};
const cmd_desc_t desc_info = {
    .name = "info",
    .arity = -1,
    .summary = "Returns information and statistics about the server",
    .group = "server",
    .args = doc_info,
};
const cmd_desc_t desc_select = {
    .name = "select",
    .arity = 2,
    .summary = "Selects database 0, the only one",
    .group = "connection",
    .args = doc_select,
};
const cmd_desc_t desc_quit = {
    .name = "quit",
    .arity = 1,
    .flags = CMD_NOAUTH,
    .summary = "Closes the connection",
    .group = "connection",
};

/* ---- sluice.so's own ---------------------------------------------------------------------- */

static const cmd_arg_t doc_peek_inline[] = {CMD_INLINE_RULE, CMD_ARGS_END};
static const cmd_arg_t doc_key[] = {CMD_ARG_KEY, CMD_ARGS_END};
static const cmd_arg_t doc_lease[] = {CMD_INLINE_RULE,
                                      {"want", "integer", "WANT", 0, NULL},
                                      {"ms", "integer", "FOR", 0, NULL},
                                      CMD_ARGS_END};
static const cmd_arg_t doc_return[] = {CMD_INLINE_RULE,
                                       {"granted", "integer", "GRANTED", 0, NULL},
                                       {"unused", "integer", "UNUSED", 0, NULL},
                                       {"at_us", "integer", "AT", 0, NULL},
                                       {"until_us", "integer", "UNTIL", 0, NULL},
                                       CMD_ARGS_END};
static const cmd_arg_t doc_debug[] = {{"settime", "pure-token", "SETTIME", 0, NULL},
                                      {"unix_ns", "integer", NULL, 0, NULL},
                                      CMD_ARGS_END};

const cmd_desc_t desc_mod_sl_peek = {
    .name = "sl.peek",
    .arity = -5,
    .flags = CMD_READONLY,
    .summary = PEEK_SUMMARY,
    .group = "module",
    .args = doc_peek_inline,
};
static const cmd_arg_t doc_mod_acquire[] = {
    CMD_INLINE_RULE,
    CMD_ARG_COST,
    {"timeout_ms", "integer", "TIMEOUT", CMD_ARG_OPTIONAL, NULL},
    CMD_ARGS_END};
static const cmd_arg_t doc_mod_release[] = {
    CMD_INLINE_RULE, {"id", "integer", "ID", 0, NULL}, CMD_ARGS_END};
const cmd_desc_t desc_mod_sl_acquire = {
    .name = "sl.acquire",
    .arity = -5,
    .flags = CMD_WRITE | CMD_DENYOOM,
    .summary = "Takes units of an in-flight rule's key as one hold, returning its id",
    .group = "module",
    .args = doc_mod_acquire,
};
const cmd_desc_t desc_mod_sl_release = {
    .name = "sl.release",
    .arity = -7,
    .flags = CMD_WRITE,
    .summary = "Gives back the units of a hold by its id",
    .group = "module",
    .args = doc_mod_release,
};
const cmd_desc_t desc_mod_sl_settle = {
    .name = "sl.settle",
    .arity = -5,
    .flags = CMD_WRITE | CMD_DENYOOM,
    .summary = SETTLE_SUMMARY,
    .group = "module",
    .args = doc_settle_inline,
};
const cmd_desc_t desc_mod_sl_reset = {
    .name = "sl.reset",
    .arity = 2,
    .flags = CMD_WRITE,
    .summary = "Forgets a key's usage",
    .group = "module",
    .args = doc_key,
};
const cmd_desc_t desc_mod_sl_lease = {
    .name = "sl.lease",
    .arity = -5,
    .flags = CMD_WRITE | CMD_DENYOOM,
    .summary = "Grants up to WANT units of a key's quota to spend elsewhere for at most FOR ms",
    .group = "module",
    .args = doc_lease,
};
const cmd_desc_t desc_mod_sl_return = {
    .name = "sl.return",
    .arity = -5,
    .flags = CMD_WRITE | CMD_DENYOOM,
    .summary = "Gives back the units a lease did not use",
    .group = "module",
    .args = doc_return,
};
const cmd_desc_t desc_mod_sl_debug = {
    .name = "sl.debug",
    .arity = 3,
    .flags = CMD_FAST,
    .summary = "Tests only: sets the time every later command decides at",
    .group = "module",
    .args = doc_debug,
};

size_t cmd_args_count(const cmd_arg_t *args)
{
    size_t n = 0;
    while (args != NULL && args[n].name != NULL) {
        n++;
    }
    return n;
}

size_t cmd_subs_count(const cmd_desc_t *d)
{
    size_t n = 0;
    while (d->subs != NULL && d->subs[n].name != NULL) {
        n++;
    }
    return n;
}
