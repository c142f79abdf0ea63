/*
 * ruledef_err.c - the field a rule parser's error names, read back from the message: every
 * error is formatted by rd_fail() (ruledef.c) as "line L, column C: path.field: reason", or
 * names the field in quotes ("missing required field 'window'", "unknown field 'foo'").
 * sluiced's HTTP API puts it in its problem replies ("field"), where a form shows the message.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "rules/ruledef.h"

/* Length of the field path at p ([A-Za-z0-9_.[\]-]*) when ": " follows it, else 0. */
static size_t path_len(const char *p)
{
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.[]-");
    return n > 0 && p[n] == ':' && p[n + 1] == ' ' ? n : 0;
}

bool ruledef_err_field(const char *err, char *field, size_t cap)
{
    static const char *const named[] = {"missing required field '", "unknown field '"};
    unsigned line, column;
    int at = 0;
    field[0] = '\0';
    if (sscanf(err, "line %u, column %u: %n", &line, &column, &at) == 2 && at > 0)
        err += at;
    size_t n = path_len(err), used = 0;
    const char *path = err;
    if (n > 0)
        err += n + 2;
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        size_t k = strlen(named[i]);
        const char *end = strncmp(err, named[i], k) == 0 ? strchr(err + k, '\'') : NULL;
        if (end == NULL || end == err + k) /* none, or '' (an empty member name) */
            continue;
        /* the path, a dot, the quoted name */
        size_t want = n + (n > 0) + (size_t)(end - (err + k));
        if (want + 1 > cap)
            return false;
        memcpy(field, path, n);
        used = n;
        if (n > 0)
            field[used++] = '.';
        memcpy(field + used, err + k, (size_t)(end - (err + k)));
        field[want] = '\0';
        return true;
    }
    if (n == 0 || n + 1 > cap)
        return false;
    memcpy(field, path, n);
    field[n] = '\0';
    return true;
}
