/*
 * json_write.c - see json_write.h. Strings are escaped by jansson, so what is written is exactly
 * what a JSON reader gives back.
 */
#include "server/json_write.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "engine/admin.h"

void json_write_text(buf_t *b, const char *s, size_t len)
{
    char shown[TEXT_SHOW_CAP(JSON_SHOWN_MAX)];
    if (!text_is_utf8(s, len)) {
        s = text_show(shown, sizeof shown, s, len, JSON_SHOWN_MAX, 0);
        len = strlen(s);
    }
    json_t *j = json_stringn(s, len);
    char *text = j != NULL ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (text != NULL) {
        buf_add_str(b, text);
    } else {
        buf_add_str(b, "null");
    }
    free(text);
    json_decref(j);
}

void json_write_u64(buf_t *b, uint64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    buf_add(b, num, (size_t)n);
}

void json_write_key(buf_t *b, const char *key, size_t len)
{
    buf_add_str(b, "\"key\":");
    json_write_text(b, key, len);
    if (!text_is_utf8(key, len)) {
        char *hex = admin_hex(key, len);
        buf_add_str(b, ",\"key_hex\":\"");
        buf_add_str(b, hex != NULL ? hex : "");
        buf_add_str(b, "\"");
        free(hex);
    }
}
