/*
 * reply.c - decoding sluiced's replies, and the error names. Pure functions: no I/O, no
 * allocation, so they are unit-tested over hand-built hiredis replies.
 */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/common.h"
#include "proto/text.h"
#include "sluice/client.h"

#define DECISION_FIELDS 5 /* allowed, limit, remaining, retry_after_ms, reset_after_ms */
#define ACQUIRE_FIELDS  6 /* a decision's, then hold_id */

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
    case SLC_ENOHOLD:
        return "no such hold";
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

/* The fields of a decision and, last, an acquire's hold id: the replies' elements in order. */
static const char *const field[ACQUIRE_FIELDS] = {"allowed",        "limit",          "remaining",
                                                  "retry_after_ms", "reset_after_ms", "hold_id"};

/*
 * The one decoder of both shapes: an array of n integers (DECISION_FIELDS, or ACQUIRE_FIELDS
 * with the hold id last), named `what` in its messages. Fills v[0..n) and returns SLC_OK, or
 * the code and reason of the first thing wrong.
 */
static int decode_ints(const redisReply *reply, size_t n, const char *what, long long *v, char *err,
                       size_t errlen)
{
    if (reply->type == REDIS_REPLY_ERROR)
        return text_error(SLC_ESERVER, err, errlen, "%.*s", (int)reply->len, reply->str);
    if (reply->type != REDIS_REPLY_ARRAY)
        return text_error(SLC_EPROTOCOL, err, errlen,
                          "%s: expected an array of %zu integers, got %s", what, n,
                          type_name(reply->type));
    if (reply->elements != n)
        return text_error(SLC_EPROTOCOL, err, errlen, "%s: expected %zu elements, got %zu", what, n,
                          reply->elements);
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = reply->element[i];
        if (e == NULL || e->type != REDIS_REPLY_INTEGER)
            return text_error(SLC_EPROTOCOL, err, errlen, "%s: %s must be an integer, got %s", what,
                              field[i], e == NULL ? "nothing" : type_name(e->type));
        v[i] = e->integer;
    }
    if (v[0] != 0 && v[0] != 1)
        return text_error(SLC_EPROTOCOL, err, errlen, "%s: allowed must be 0 or 1, got %lld", what,
                          v[0]);
    for (size_t i = 1; i < n; i++) {
        long long min = i == 3 && v[0] == 0 ? -1 : 0; /* only a denial may say "never" */
        if (v[i] < min)
            return text_error(SLC_EPROTOCOL, err, errlen, "%s: %s must be >= %lld, got %lld", what,
                              field[i], min, v[i]);
    }
    return SLC_OK;
}

static slc_decision_t decision_of(const long long *v)
{
    return (slc_decision_t){
        .allowed = v[0] == 1,
        .limit = v[1],
        .remaining = v[2],
        .retry_after_ms = v[3],
        .reset_after_ms = v[4],
        .from_cache = false,
    };
}

int slc_decision_from_reply(const struct redisReply *reply, slc_decision_t *out, char *err,
                            size_t errlen)
{
    if (reply == NULL || out == NULL)
        return text_error(SLC_EINVAL, err, errlen, "no reply to decode");
    long long v[DECISION_FIELDS];
    int rc = decode_ints(reply, DECISION_FIELDS, "decision", v, err, errlen);
    if (rc == SLC_OK)
        *out = decision_of(v);
    return rc;
}

int slc_acquire_from_reply(const struct redisReply *reply, slc_decision_t *out, uint64_t *hold_id,
                           char *err, size_t errlen)
{
    if (reply == NULL || out == NULL || hold_id == NULL)
        return text_error(SLC_EINVAL, err, errlen, "no reply to decode");
    long long v[ACQUIRE_FIELDS];
    int rc = decode_ints(reply, ACQUIRE_FIELDS, "acquire", v, err, errlen);
    if (rc != SLC_OK)
        return rc;
    if (v[0] == 0 && v[5] != 0) /* a refusal makes no hold: an id there would be released */
        return text_error(SLC_EPROTOCOL, err, errlen,
                          "acquire: a refusal holds nothing, hold_id must be 0, got %lld", v[5]);
    *out = decision_of(v);
    *hold_id = (uint64_t)v[5];
    return SLC_OK;
}

int slc_release_from_reply(const struct redisReply *reply, char *err, size_t errlen)
{
    if (reply == NULL)
        return text_error(SLC_EINVAL, err, errlen, "no reply to decode");
    if (reply->type == REDIS_REPLY_ERROR)
        return text_error(common_is_no_hold(reply->str, reply->len) ? SLC_ENOHOLD : SLC_ESERVER,
                          err, errlen, "%.*s", (int)reply->len, reply->str);
    if (reply->type != REDIS_REPLY_STATUS || reply->len != 2 || memcmp(reply->str, "OK", 2) != 0)
        return text_error(SLC_EPROTOCOL, err, errlen, "release: expected the status OK, got %s",
                          reply->type == REDIS_REPLY_STATUS ? "another status"
                                                            : type_name(reply->type));
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    return SLC_OK;
}
