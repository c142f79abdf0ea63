/*
 * json_fields.c - a JSON body's fields against the names its route takes (json_fields.h).
 */
#include <string.h>

#include "proto/json_fields.h"

const char *json_unknown_field(const json_t *obj, const char *const *names)
{
    const char *field;
    json_t *v;
    json_object_foreach((json_t *)obj, field, v)
    {
        const char *const *n = names;
        while (*n != NULL && strcmp(*n, field) != 0)
            n++;
        if (*n == NULL)
            return field;
    }
    return NULL;
}
