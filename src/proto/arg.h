/*
 * arg.h - one argument of a request, as the codecs hand it over: len bytes at ptr, inside the
 * caller's buffer, not NUL-terminated. RESP's parser (resp_arg_t) and the SL.THROTTLE argument
 * parser (throttle_arg_t) share this one type, so arguments pass from one to the other as they
 * are.
 */
#ifndef SLUICE_PROTO_ARG_H
#define SLUICE_PROTO_ARG_H

#include <stddef.h>

typedef struct proto_arg {
    const char *ptr;
    size_t len; /* bytes */
} proto_arg_t;

#endif /* SLUICE_PROTO_ARG_H */
