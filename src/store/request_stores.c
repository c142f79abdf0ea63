/*
 * request_stores.c - the list of request stores and opening one by its URL (request_stores.h).
 * A store is one file defining its request_store_ops_t, plus one entry here.
 */
#include "store/request_stores.h"

#include <stdio.h>
#include <string.h>

extern const request_store_ops_t memory_store_ops;  /* memory_store.c */
extern const request_store_ops_t redis_request_ops; /* redis_request.c */

/* The stores, in the order their URLs are tried. */
static const request_store_ops_t *const stores[] = {
    &memory_store_ops,
    &redis_request_ops,
};

#define NSTORES (sizeof stores / sizeof stores[0])

int request_store_open(const char *url, const store_config_t *cfg, request_store_t **out, char *err)
{
    for (size_t i = 0; i < NSTORES; i++) {
        if (stores[i]->accepts(url)) {
            return stores[i]->open(url, cfg, out, err);
        }
    }
    const char *at = strrchr(url, '@'), *scheme = strstr(url, "://");
    int keep = at != NULL && scheme != NULL && scheme < at ? (int)(scheme + 3 - url) : 0;
    int n = at != NULL /* a password may be before it: never shown */
                ? snprintf(err, REQUEST_STORE_ERR_MAX, "'%.*s***@%s': expected ", keep, url, at + 1)
                : snprintf(err, REQUEST_STORE_ERR_MAX, "'%s': expected ", url);
    const char *sep = "";
    for (size_t i = 0; i < NSTORES && n > 0 && n < REQUEST_STORE_ERR_MAX; i++) {
        if (stores[i]->url_form != NULL) {
            n += snprintf(err + n, REQUEST_STORE_ERR_MAX - (size_t)n, "%s%s", sep,
                          stores[i]->url_form);
            sep = " or ";
        }
    }
    return -1;
}

void request_store_close(request_store_t *s)
{
    if (s != NULL) {
        s->ops->close(s);
    }
}
