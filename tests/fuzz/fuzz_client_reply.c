/*
 * fuzz_client_reply.c - libFuzzer target for libsluice-client's reply decoders
 * (slc_decision_from_reply, slc_acquire_from_reply, slc_release_from_reply in
 * src/client/reply.c), which take what a server sent once hiredis has read it.
 *
 * The input describes a reply tree directly, not as RESP: hiredis 0.14's reader, which the
 * client uses, allocates an array's slots as its header declares them (no maxelements), so RESP
 * input would only fuzz that. Byte 0 is the top reply's type (any value, unknown ones
 * included); an array takes its element count from byte 1 (0..15), then each element is a type
 * byte and 8 bytes of integer; strings and errors take the rest of the input as their text.
 * Checked besides "does not crash": a decoder that fails leaves its outputs untouched, an
 * accepted acquire's decision is the decision decoder's over its first five elements, only a
 * status "OK" releases, and every message is NUL-terminated within its buffer.
 */
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"

#define ELEMENTS_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Field by field: the struct has padding, which assignments need not copy. */
static bool same_decision(const slc_decision_t *a, const slc_decision_t *b)
{
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->retry_after_ms == b->retry_after_ms && a->reset_after_ms == b->reset_after_ms &&
           a->from_cache == b->from_cache;
}

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
    if (rc != SLC_OK && (!same_decision(&d, &sentinel) || id != 4242))
        abort();
    if (rc == SLC_OK) {
        x->elements = 5;
        int rc5 = slc_decision_from_reply(x, &d5, err, sizeof err);
        x->elements = 6;
        if (rc5 != SLC_OK || !same_decision(&d, &d5) || d.from_cache)
            abort();
    }
    d5 = sentinel;
    if (slc_decision_from_reply(x, &d5, err, sizeof err) != SLC_OK &&
        !same_decision(&d5, &sentinel))
        abort();
    check_err(err, sizeof err);
    rc = slc_release_from_reply(x, err, sizeof err);
    check_err(err, sizeof err);
    if (rc == SLC_OK && (x->type != REDIS_REPLY_STATUS || x->len != 2 || memcmp(x->str, "OK", 2)))
        abort();
    if (rc == SLC_ENOHOLD && x->type != REDIS_REPLY_ERROR)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    redisReply top = {.type = data[0] % 8};
    redisReply items[ELEMENTS_MAX];
    redisReply *ptrs[ELEMENTS_MAX];
    char *text = NULL;
    if (top.type == REDIS_REPLY_ARRAY) {
        size_t n = size > 1 ? data[1] % ELEMENTS_MAX : 0, at = 2;
        for (size_t i = 0; i < n; i++, at += 9) {
            items[i] = (redisReply){.type = at < size ? data[at] % 8 : REDIS_REPLY_INTEGER};
            if (at + 9 <= size)
                memcpy(&items[i].integer, data + at + 1, 8);
            items[i].str = "";
            ptrs[i] = (data[0] & 0x80) && i == n - 1 ? NULL : &items[i]; /* a missing element */
        }
        top.elements = n;
        top.element = ptrs;
    } else {
        text = malloc(size); /* the rest of the input, NUL-terminated as hiredis gives it */
        if (text == NULL)
            return 0;
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        top.str = text;
        top.len = size - 1;
        if (size >= 9)
            memcpy(&top.integer, data + 1, 8);
    }
    decode_all(&top);
    free(text);
    return 0;
}
