/*
 * fuzz_server.h - the server the request fuzz targets (fuzz_server_requests.c,
 * fuzz_grpc_server.c) run their bytes against: one loop with a real engine over a SQLite store
 * in a new temporary directory, rules imported and in force. No sockets.
 */
#ifndef SLUICE_TESTS_FUZZ_SERVER_H
#define SLUICE_TESTS_FUZZ_SERVER_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/rules_import.h"
#include "server/server.h"

/*
 * Starts srv's engine with cfg (already holding the target's settings; its config store and
 * thread count are set here) and rules_yaml[0..rules_len) in force. Returns the one loop, its
 * worker attached to nothing: requests are handed to connections on it by the caller. Aborts on
 * any failure: a harness that cannot start finds nothing.
 */
static loop_t *fuzz_server_start(server_t *srv, server_settings_t *cfg, const char *rules_yaml,
                                 size_t rules_len)
{
    char dir[] = "/tmp/sluice-fuzz.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        abort();
    }
    static char store[64];
    snprintf(store, sizeof store, "%s/store.db", dir);
    cfg->threads = 1;
    free(cfg->config_store);
    cfg->config_store = store;
    engine_settings_t ec = {.store_url = store,
                            .workers = 1,
                            .key_max = cfg->key_max,
                            .override_ttl_ns = INT64_C(1000000000)};
    char err[ENGINE_ERR_MAX];
    if (engine_create(&ec, &srv->engine, err) != 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    rules_import_opts_t opts = {.mode = CONFIG_IMPORT_REPLACE};
    if (rules_import_yaml(engine_store(srv->engine), rules_yaml, rules_len, &opts, NULL, err,
                          sizeof err) != 0 ||
        engine_reload(srv->engine, engine_store(srv->engine), true, err) < 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    loop_t *loop = calloc(1, sizeof *loop);
    if (loop == NULL) {
        abort();
    }
    srv->cfg = cfg;
    srv->nloops = 1;
    srv->loops = loop;
    loop->srv = srv;
    loop->worker = engine_worker(srv->engine, 0);
    return loop;
}

#endif /* SLUICE_TESTS_FUZZ_SERVER_H */
