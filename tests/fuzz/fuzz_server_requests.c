/*
 * fuzz_server_requests.c - sluiced's request handling without sockets: arbitrary bytes parsed
 * as RESP or HTTP (the first byte chooses) and every complete request dispatched to the real
 * command table and routes, over a real engine with rules and overrides in a SQLite store.
 * Commands that write the store (SL.RULE SET/DEL/IMPORT, SL.OVERRIDE SET/DEL, HTTP PUT/DELETE)
 * are skipped: they would make runs depend on each other and fsync on every input.
 * Checks: no crash, no sanitizer report, every reply well-formed enough to be non-empty.
 */
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/http_front.h"
#include "server/resp_front.h"
#include "fuzz_server.h"

/* The engine lives across inputs, and the table keeps long keys' pointers unaligned inside its
 * entries, where LeakSanitizer cannot see them: every such key would be reported as leaked.
 * Leaks in the table are covered by the ASan unit tests, which free their tables. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

static const char rules_yaml[] = "rules:\n"
                                 "  - name: api\n"
                                 "    algorithm: token_bucket\n"
                                 "    limit: 5\n"
                                 "    window: 1s\n"
                                 "    key: \"{header:x-api-key}:{ip/24}\"\n"
                                 "    overrides:\n"
                                 "      - key: gold\n"
                                 "        limit: 50\n"
                                 "      - key: banned\n"
                                 "        limit: 0\n"
                                 "  - name: log\n"
                                 "    algorithm: sliding_log\n"
                                 "    limit: 3\n"
                                 "    window: 10s\n"
                                 "    shadow: true\n"
                                 "  - name: fw\n"
                                 "    algorithm: fixed_window\n"
                                 "    limit: 2\n"
                                 "    window: 1m\n"
                                 "    key: \"{method} {path} {query:user}\"\n"
                                 "  - name: pri\n"
                                 "    algorithm: sliding_window\n"
                                 "    limit: 10\n"
                                 "    window: 1s\n"
                                 "    priorities: [low, high, critical]\n"
                                 "    reserve: {critical: 20%, high: 3}\n"
                                 "    priority: \"{header:x-priority}\"\n"
                                 "    domain: fz\n"
                                 "    descriptor: \"t\"\n"
                                 "  - name: held\n"
                                 "    algorithm: concurrency\n"
                                 "    limit: 3\n"
                                 "    hold_timeout: 10s\n"
                                 "    priorities: [low, high]\n"
                                 "    reserve: {high: 1}\n";

static server_settings_t cfg;
static server_t srv;
static loop_t *loop;
static conn_t conn;
static int64_t now_ns = INT64_C(1700000000000000000);
static resp_arg_t argv[RESP_ARGS_MAX];

static void setup(void)
{
    server_settings_defaults(&cfg);
    /* POST /v1/replay runs here, on no thread of its own: keep each input short */
    cfg.replay_timeout_ns = INT64_C(20000000);
    cfg.replay_memory = 1024 * 1024;
    loop = fuzz_server_start(&srv, &cfg, rules_yaml, sizeof rules_yaml - 1);
    conn.loop = loop;
    conn.authed = true;
    conn.admin = true;
    conn.detached = true; /* no socket: replies stay in conn.out */
    conn.inline_budget = engine_inline_budget(srv.engine);
    snprintf(conn.addr, sizeof conn.addr, "127.0.0.1");
    netaddr_parse(conn.addr, strlen(conn.addr), &conn.peer);
}

static void run_resp(char *buf, size_t len)
{
    char err[RESP_ERR_MAX];
    size_t off = 0;
    while (off < len) {
        size_t argc = 0;
        long used = resp_parse(buf + off, len - off, NULL, argv, RESP_ARGS_MAX, &argc, NULL, err);
        if (used <= 0) {
            return;
        }
        off += (size_t)used;
        if (argc == 0 || resp_command_is_admin(&argv[0])) {
            if (argc > 1 && resp_command_is_admin(&argv[0])) {
                /* reads of rules and overrides are fine */
                const resp_arg_t *sub = &argv[1];
                if (!(sub->len == 3 && strncasecmp(sub->ptr, "GET", 3) == 0) &&
                    !(sub->len == 4 && strncasecmp(sub->ptr, "LIST", 4) == 0) &&
                    !(sub->len == 6 && strncasecmp(sub->ptr, "EXPORT", 6) == 0)) {
                    continue;
                }
            } else {
                continue;
            }
        }
        size_t before = conn.out.len;
        resp_dispatch(&conn, argv, argc);
        if (conn.out.len <= before && !conn.out.failed) {
            abort(); /* every command replies */
        }
    }
}

static void run_http(char *buf, size_t len)
{
    http_limits_t limits = {.body_max = 4096};
    char err[HTTP_ERR_MAX];
    size_t off = 0;
    while (off < len) {
        http_request_t req;
        int status = 0;
        long used = http_parse(buf + off, len - off, &limits, &req, &status, err);
        if (used <= 0) {
            return;
        }
        off += (size_t)used;
        if (req.method == HTTP_PUT || req.method == HTTP_DELETE) {
            continue;
        }
        size_t before = conn.out.len;
        http_handle(&conn, &req);
        if (conn.out.len <= before && !conn.out.failed) {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (srv.engine == NULL) {
        setup();
    }
    if (size < 2) {
        return 0;
    }
    char *buf = malloc(size - 1);
    memcpy(buf, data + 1, size - 1);
    now_ns += (int64_t)(data[0] >> 1) * 1000000; /* time moves on, by up to 127 ms */
    loop->now_ns = now_ns;
    engine_worker_begin(loop->worker);
    if (data[0] & 1) {
        conn.proto = &http_protocol;
        run_http(buf, size - 1);
    } else {
        conn.proto = &resp_protocol;
        run_resp(buf, size - 1);
    }
    conn.out.len = 0;
    conn.out.failed = false;
    conn.closing = false;
    free(buf);
    return 0;
}
