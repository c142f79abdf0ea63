/*
 * fuzz_keytpl.c - libFuzzer target for key templates: the first line of the input is parsed as
 * a template (rules come from files and the admin API); the rest is used as the request's
 * client address, path and header values, and the template is built against it. Nothing may
 * crash or read out of bounds, and a built key never exceeds its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/keytpl.h"

typedef struct fuzz_req {
    const char *value;
    size_t len;
} fuzz_req_t;

static bool any_header(void *arg, const char *name, size_t name_len, const char **value,
                       size_t *value_len)
{
    fuzz_req_t *r = arg;
    if (name_len % 3 == 0)
        return false; /* some headers are missing */
    *value = r->value;
    *value_len = r->len;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    const char *nl = memchr(buf, '\n', size);
    size_t tlen = nl ? (size_t)(nl - buf) : size;
    keytpl_t t;
    char err[KEYTPL_ERR_MAX];
    if (keytpl_parse(buf, tlen, &t, err) == 0) {
        const char *rest = nl ? nl + 1 : buf + size;
        size_t rlen = (size_t)(buf + size - rest);
        size_t cut = rlen / 2;
        fuzz_req_t hv = {rest, cut};
        netaddr_t client;
        bool known = netaddr_parse(rest, cut, &client) == NETADDR_OK;
        keytpl_request_t req = {.client = known ? &client : NULL,
                                .method = "GET",
                                .method_len = 3,
                                .path = rest + cut,
                                .path_len = rlen - cut,
                                .header = any_header,
                                .header_arg = &hv};
        char out[64];
        size_t len = 0;
        if (keytpl_build(&t, &req, out, sizeof(out), &len) == KEYTPL_OK && len > sizeof(out))
            abort();
    } else if (memchr(err, '\0', KEYTPL_ERR_MAX) == NULL) {
        abort();
    }
    free(buf);
    return 0;
}
