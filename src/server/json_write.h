/*
 * json_write.h - writing JSON answers into a buf_t piece by piece (the console's reads, replay):
 * a text as a JSON string, a count, and a key, whose bytes may be anything.
 *
 * A text that is not UTF-8 cannot be a JSON string as it is: it is written as text_show() writes
 * it (\xNN for each byte that is not printable ASCII, at most JSON_SHOWN_MAX bytes of it, then
 * "..."), and a key is then also given exactly, in hex, as "key_hex". Out of memory shows in
 * b->failed, as for every buf_t.
 */
#ifndef SLUICE_SERVER_JSON_WRITE_H
#define SLUICE_SERVER_JSON_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"

#define JSON_SHOWN_MAX 64 /* bytes of a text that is not UTF-8 shown, \xNN each */

/* Appends s[0..len) as a JSON string (quoted, escaped; not UTF-8: shown as above). */
void json_write_text(buf_t *b, const char *s, size_t len);

/* Appends v in decimal. */
void json_write_u64(buf_t *b, uint64_t v);

/* Appends "key":<key as text>, and ,"key_hex":"<its bytes in hex>" when it is not UTF-8. */
void json_write_key(buf_t *b, const char *key, size_t len);

#endif /* SLUICE_SERVER_JSON_WRITE_H */
