/*
 * fuzz_client_reply.c - libFuzzer target for libsluice-client's reply decoders
 * (slc_decision_from_reply, slc_acquire_from_reply, slc_release_from_reply in
 * src/client/reply.c): the bytes a server sends, read by hiredis's reader as the client reads
 * them, every reply read given to all three decoders. Checked besides "does not crash": a
 * decoder that fails leaves its outputs untouched, an accepted acquire's decision is the
 * decision decoder's over its first five elements, and every message is NUL-terminated within
 * its buffer.
 */
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"

#define REPLIES_MAX 64 /* replies decoded per input: enough to reach every shape */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(const char *err, size_t cap)
{
    if (memchr(err, '\0', cap) == NULL)
        abort();
}

static void decode_all(redisReply *x)
{
    const slc_decision_t sentinel = {true, 4242, 4242, 4242, 4242, true};
    slc_decision_t d = sentinel, d5 = sentinel;
    uint64_t id = 4242;
    char err[64];
    int rc = slc_acquire_from_reply(x, &d, &id, err, sizeof err);
    check_err(err, sizeof err);
    if (rc != SLC_OK && (memcmp(&d, &sentinel, sizeof d) != 0 || id != 4242))
        abort();
    if (rc == SLC_OK) {
        x->elements = 5;
        int rc5 = slc_decision_from_reply(x, &d5, err, sizeof err);
        x->elements = 6;
        if (rc5 != SLC_OK || memcmp(&d, &d5, sizeof d) != 0 || d.from_cache)
            abort();
    }
    d5 = sentinel;
    if (slc_decision_from_reply(x, &d5, err, sizeof err) != SLC_OK &&
        memcmp(&d5, &sentinel, sizeof d5) != 0)
        abort();
    check_err(err, sizeof err);
    rc = slc_release_from_reply(x, err, sizeof err);
    check_err(err, sizeof err);
    if (rc == SLC_OK && (x->type != REDIS_REPLY_STATUS || strcmp(x->str, "OK") != 0))
        abort();
    if (rc == SLC_ENOHOLD && x->type != REDIS_REPLY_ERROR)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReader *reader = redisReaderCreate();
    if (reader == NULL)
        return 0;
    redisReaderFeed(reader, (const char *)data, size);
    for (int i = 0; i < REPLIES_MAX; i++) {
        void *reply = NULL;
        if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == NULL)
            break;
        decode_all(reply);
        freeReplyObject(reply);
    }
    redisReaderFree(reader);
    return 0;
}
