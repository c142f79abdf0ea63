/*
 * reply.c - decoding sluiced's replies, and the error names. Pure functions: no I/O, no
 * allocation, so they are unit-tested over hand-built hiredis replies.
 */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>

#include "proto/text.h"
#include "sluice/client.h"

#define DECISION_FIELDS 5 /* allowed, limit, remaining, retry_after_ms, reset_after_ms */

const char *slc_strerror(int code)
{
    switch (code) {
    case SLC_OK:
        return "success";
    case SLC_EIO:
        return "connection error";
    case SLC_ESERVER:
        return "server error";
    case SLC_EPROTOCOL:
        return "unexpected reply from the server";
    case SLC_ENOMEM:
        return "out of memory";
    case SLC_EINVAL:
        return "invalid argument";
    default:
        return "unknown error";
    }
}

static const char *type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "a bulk string";
    case REDIS_REPLY_ARRAY:
        return "an array";
    case REDIS_REPLY_INTEGER:
        return "an integer";
    case REDIS_REPLY_NIL:
        return "nil";
    case REDIS_REPLY_STATUS:
        return "a status";
    case REDIS_REPLY_ERROR:
        return "an error";
    default:
        return "an unknown type";
    }
}

int slc_decision_from_reply(const struct redisReply *reply, slc_decision_t *out, char *err,
                            size_t errlen)
{
    static const char *const field[DECISION_FIELDS] = {"allowed", "limit", "remaining",
                                                       "retry_after_ms", "reset_after_ms"};
    if (reply == NULL || out == NULL)
        return text_error(SLC_EINVAL, err, errlen, "no reply to decode");
    if (reply->type == REDIS_REPLY_ERROR)
        return text_error(SLC_ESERVER, err, errlen, "%.*s", (int)reply->len, reply->str);
    if (reply->type != REDIS_REPLY_ARRAY)
        return text_error(SLC_EPROTOCOL, err, errlen,
                          "decision: expected an array of %d integers, got %s", DECISION_FIELDS,
                          type_name(reply->type));
    if (reply->elements != DECISION_FIELDS)
        return text_error(SLC_EPROTOCOL, err, errlen, "decision: expected %d elements, got %zu",
                          DECISION_FIELDS, reply->elements);
    long long v[DECISION_FIELDS];
    for (int i = 0; i < DECISION_FIELDS; i++) {
        const redisReply *e = reply->element[i];
        if (e == NULL || e->type != REDIS_REPLY_INTEGER)
            return text_error(SLC_EPROTOCOL, err, errlen, "decision: %s must be an integer, got %s",
                              field[i], e == NULL ? "nothing" : type_name(e->type));
        v[i] = e->integer;
    }
    if (v[0] != 0 && v[0] != 1)
        return text_error(SLC_EPROTOCOL, err, errlen, "decision: allowed must be 0 or 1, got %lld",
                          v[0]);
    for (int i = 1; i < DECISION_FIELDS; i++) {
        long long min = i == 3 && v[0] == 0 ? -1 : 0; /* only a denial may say "never" */
        if (v[i] < min)
            return text_error(SLC_EPROTOCOL, err, errlen, "decision: %s must be >= %lld, got %lld",
                              field[i], min, v[i]);
    }
    *out = (slc_decision_t){
        .allowed = v[0] == 1,
        .limit = v[1],
        .remaining = v[2],
        .retry_after_ms = v[3],
        .reset_after_ms = v[4],
        .from_cache = false,
    };
    return SLC_OK;
}
