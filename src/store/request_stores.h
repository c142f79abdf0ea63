/*
 * request_stores.h - the list of request stores: opening the one a URL names. Apart from
 * request_store.h (what a store is), which every store includes, so that the list, which names
 * every store, is not a file the stores depend on.
 */
#ifndef SLUICE_STORE_REQUEST_STORES_H
#define SLUICE_STORE_REQUEST_STORES_H

#include "store/request_store.h"

/* Opens the store url names (NULL: memory). 0 with *out, or -1 with err: a URL no store accepts
 * gets "'<url>': expected <each store's URL form, joined by or>". */
/* Opens the store url names (NULL: memory). 0 with *out, or -1 with err. */
int request_store_open(const char *url, const store_config_t *cfg, request_store_t **out,
                       char *err);

/* NULL is a no-op. */
void request_store_close(request_store_t *s);

#endif /* SLUICE_STORE_REQUEST_STORES_H */
