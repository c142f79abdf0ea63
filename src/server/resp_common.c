/*
 * resp_common.c - argument and reply helpers of sluiced's RESP commands (resp_commands.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "proto/text.h"
#include "proto/throttle_args.h"
#include "engine/admin.h"
#include "engine/log.h"
#include "server/resp_commands.h"
#include "server/resp_front.h"
#include "sluice/version.h"

bool resp_arg_is(const resp_arg_t *a, const char *word)
{
    return throttle_arg_is(a, word);
}

bool resp_arg_i64(const resp_arg_t *a, int64_t *out)
{
    return throttle_arg_i64(a, out);
}

void resp_reply_wrong_arity(conn_t *c, const resp_arg_t *name)
{
    char lower[64];
    size_t n = name->len < sizeof lower - 1 ? name->len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++) {
        lower[i] = (char)tolower((unsigned char)name->ptr[i]);
    }
    lower[n] = '\0';
    resp_add_error(&c->out, "ERR wrong number of arguments for '%s' command", lower);
}

void resp_reply_syntax(conn_t *c)
{
    resp_add_error(&c->out, "ERR syntax error");
}

/* An argument for an error message: at most 64 bytes, printable, then "..." if longer. */
const char *resp_show(const resp_arg_t *a, char buf[72])
{
    return text_show(buf, 72, a->ptr, a->len, 64, TEXT_MASK);
}
