/*
 * fuzz_netaddr.c - libFuzzer target for network addresses from outside bytes (proto/netaddr.h):
 * X-Forwarded-For entries, --trusted-proxy networks. Checks: no crash, no sanitizer report, and
 * what parses formats back to text that parses to the same address (and network).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/netaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    netaddr_t a, again;
    char text[NETADDR_NET_STRLEN];
    if (netaddr_parse(s, size, &a) == NETADDR_OK) {
        if (netaddr_format(&a, text, sizeof(text)) == NULL ||
            netaddr_parse(text, strlen(text), &again) != NETADDR_OK ||
            memcmp(&a, &again, sizeof(a)) != 0)
            abort();
    }
    netaddr_net_t n, back;
    if (netaddr_net_parse(s, size, &n) == NETADDR_OK) {
        if (netaddr_net_format(&n, text, sizeof(text)) == NULL ||
            netaddr_net_parse(text, strlen(text), &back) != NETADDR_OK ||
            memcmp(&n, &back, sizeof(n)) != 0)
            abort();
        netaddr_t first = {.family = n.family};
        memcpy(first.addr, n.addr, sizeof(first.addr));
        if (!netaddr_net_contains(&n, &first))
            abort();
    }
    return 0;
}
