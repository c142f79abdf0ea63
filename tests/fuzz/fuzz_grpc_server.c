/*
 * fuzz_grpc_server.c - sluiced's gRPC front end without sockets: arbitrary bytes given to a
 * fresh connection of grpc_protocol (HTTP/2 through nghttp2, then the calls dispatched to a real
 * engine with rules in a SQLite store), in two reads split where the first byte says, then the
 * connection closed. Checks: no crash, no sanitizer report, no stream state left behind (the
 * connection's streams are freed on close: LeakSanitizer would see one), and an answer to
 * anything that gets past the connection preface.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_server.h"
#include "server/grpc_front.h"

static const char rules_yaml[] = "rules:\n"
                                 "  - name: edge.remote_address\n"
                                 "    algorithm: fixed_window\n"
                                 "    limit: 3\n"
                                 "    window: 1m\n"
                                 "  - name: edge.a.b\n"
                                 "    algorithm: sliding_log\n"
                                 "    limit: 2\n"
                                 "    window: 10s\n"
                                 "    shadow: true\n";

/* Keys this short are stored inside the table's entries: a longer one's copy is held where
 * LeakSanitizer cannot see it and would be reported as leaked (fuzz_server_requests.c turns
 * leak detection off for it). Here leaks matter: a stream left behind is one. */
#define KEY_MAX 19

static server_settings_t cfg;
static server_t srv;
static loop_t *loop;

static void setup(void)
{
    server_settings_defaults(&cfg);
    cfg.request_max = 4096;
    cfg.key_max = KEY_MAX;
    loop = fuzz_server_start(&srv, &cfg, rules_yaml, sizeof rules_yaml - 1);
}

/* Hands bytes to the connection as one read would. */
static void feed(conn_t *c, const uint8_t *data, size_t len)
{
    if (len == 0 || c->closing) {
        return;
    }
    char *in = realloc(c->in, c->in_len + len);
    if (in == NULL) {
        abort();
    }
    memcpy(in + c->in_len, data, len);
    c->in = in;
    c->in_len += len;
    c->proto->process(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (srv.engine == NULL) {
        setup();
    }
    if (size < 1) {
        return 0;
    }
    conn_t *c = calloc(1, sizeof *c + grpc_protocol.state_size);
    c->loop = loop;
    c->proto = &grpc_protocol;
    c->detached = true; /* no socket: what is sent stays in c->out */
    c->inline_budget = engine_inline_budget(srv.engine);
    snprintf(c->addr, sizeof c->addr, "127.0.0.1");
    grpc_protocol.open(c);
    size_t cut = size > 1 ? 1 + (size_t)data[0] % (size - 1) : 1;
    feed(c, data + 1, cut - 1);
    feed(c, data + cut, size - cut);
    /* past a preface, the server always says something (at least its SETTINGS) */
    if (size - 1 >= sizeof preface - 1 && memcmp(data + 1, preface, sizeof preface - 1) == 0 &&
        c->out.len == 0 && !c->out.failed) {
        abort();
    }
    grpc_protocol.close(c);
    free(c->in);
    buf_free(&c->out);
    free(c);
    return 0;
}
