/*
 * json_fields.h - the one check every JSON request body goes through before its fields are read:
 * a field the route does not know is an error naming it, never ignored (a typo such as "cots"
 * must not silently take the default). Pure: no I/O, no allocation.
 */
#ifndef SLUICE_PROTO_JSON_FIELDS_H
#define SLUICE_PROTO_JSON_FIELDS_H

#include <jansson.h>

/* The first member of object obj whose name is none of names (NULL-terminated), or NULL when
 * every one is known (or obj is no object). The name is obj's (valid while obj is). */
const char *json_unknown_field(const json_t *obj, const char *const *names);

#endif /* SLUICE_PROTO_JSON_FIELDS_H */
