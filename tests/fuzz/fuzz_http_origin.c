/*
 * fuzz_http_origin.c - libFuzzer target for the Host and Origin headers (proto/http_origin.h),
 * bytes any client sends. Checks: no crash, no sanitizer report; what parses has a host that
 * parses again as itself (lower case, no trailing dot, an IPv6 literal inside brackets: one
 * written with a ':', an IPv4-mapped one too, which is held as the IPv4 it maps), a port
 * within 0..65535 or -1, and an IP literal's bytes that match; an origin matches the authority it
 * came from with its scheme's port.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http_origin.h"

static void check_again(const http_authority_t *a)
{
    char text[HTTP_HOST_MAX + 16];
    int n = a->is_ip && memchr(a->host, ':', a->host_len) != NULL
                ? snprintf(text, sizeof text, "[%s]", a->host)
                : snprintf(text, sizeof text, "%s", a->host);
    http_authority_t again;
    if (a->port < -1 || a->port > 65535 || a->host_len != strlen(a->host) ||
        http_authority_parse(text, (size_t)n, &again) != 0 || strcmp(again.host, a->host) != 0 ||
        again.is_ip != a->is_ip || !http_authority_same_host(a, &again))
        abort();
    for (size_t i = 0; i < a->host_len; i++)
        if (a->host[i] >= 'A' && a->host[i] <= 'Z')
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    http_authority_t a;
    if (http_authority_parse(s, size, &a) == 0)
        check_again(&a);
    http_origin_t o;
    if (http_origin_parse(s, size, &o) == 0) {
        check_again(&o.auth);
        http_authority_t h = o.auth;
        h.port = o.auth.port >= 0 ? o.auth.port : (o.https ? 443 : 80);
        if (!http_origin_matches(&o, &h))
            abort();
    }
    return 0;
}
