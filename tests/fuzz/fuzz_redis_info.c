/*
 * fuzz_redis_info.c - libFuzzer target for the Redis store's reading of a node's INFO server
 * reply (rs_probe_run_id in src/store/redis_shared.c): the run_id that tells a Redis that lost
 * its data from the one it was. The input is the reply's text, NUL-terminated as hiredis gives
 * it, in an exact-size copy so that reading past it is caught by ASan. Checked besides "does not
 * crash": the run_id found is "" or 40 hex digits that the input holds after "\r\nrun_id:".
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis_store_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    redisReply r = {.type = REDIS_REPLY_STRING, .str = text, .len = size};
    char out[RUN_ID_MAX + 1];
    memset(out, 'X', sizeof out);
    rs_probe_run_id(&r, out);
    size_t n = strnlen(out, sizeof out);
    if (n == sizeof out || (n != 0 && n != RUN_ID_MAX) ||
        strspn(out, "0123456789abcdefABCDEF") != n) {
        abort();
    }
    if (n != 0) {
        char field[RUN_ID_MAX + 16] = "\r\nrun_id:";
        memcpy(field + 9, out, n + 1);
        if (strstr(text, field) == NULL) {
            abort();
        }
    }
    free(text);
    return 0;
}
