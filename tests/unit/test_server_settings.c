/*
 * test_server_settings.c - sluiced's settings: defaults, every flag in both forms, the YAML file,
 * precedence (defaults < file < flags, env only for secrets not given), and every error with
 * where it came from (the flag, or the file's line and column).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/settings.h"
#include "sluice/sluice.h"

static char err[SETTINGS_ERR_MAX];
static char file_path[64];

/* Parses argv (NULL-terminated, without argv[0]) over the defaults; returns the result. */
static int parse_args(server_settings_t *c, const char *const *args)
{
    char *argv[64] = {"sluiced"};
    int argc = 1;
    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    server_settings_defaults(c);
    err[0] = '\0';
    return server_settings_parse(c, argc, argv, err, sizeof(err));
}

#define PARSE_OK(c, ...)                                                                           \
    do {                                                                                           \
        const char *args_[] = {__VA_ARGS__, NULL};                                                 \
        if (parse_args(c, args_) != 0)                                                             \
            fail_msg("unexpected: %s", err);                                                       \
    } while (0)

/* Parses args that must fail; checks the message and frees. */
static void parse_err(const char *const *args, const char *want)
{
    server_settings_t c;
    int rc = parse_args(&c, args);
    server_settings_free(&c);
    if (rc != -1 || strcmp(err, want) != 0)
        fail_msg("%s: got rc %d '%s'\n want '%s'", args[0] ? args[0] : "", rc, err, want);
}

#define PARSE_ERR(want, ...)                                                                       \
    do {                                                                                           \
        const char *args_[] = {__VA_ARGS__, NULL};                                                 \
        parse_err(args_, want);                                                                    \
    } while (0)

static void write_file(const char *text)
{
    FILE *f = fopen(file_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **unused)
{
    (void)unused;
    snprintf(file_path, sizeof(file_path), "/tmp/sluice-test-config-%d.yaml", (int)getpid());
    unsetenv("SLUICE_REQUIREPASS");
    unsetenv("SLUICE_ADMIN_TOKEN");
    unsetenv("SLUICE_ADMIN_PASSWORD");
    return 0;
}

static int teardown(void **unused)
{
    (void)unused;
    unlink(file_path);
    unsetenv("SLUICE_REQUIREPASS");
    unsetenv("SLUICE_ADMIN_TOKEN");
    unsetenv("SLUICE_ADMIN_PASSWORD");
    return 0;
}

static void test_defaults(void **unused)
{
    (void)unused;
    server_settings_t c;
    const char *none[] = {NULL};
    assert_int_equal(parse_args(&c, none), 0);
    assert_null(c.config_path);
    assert_int_equal(c.nbind, 1);
    assert_string_equal(c.bind[0], "127.0.0.1");
    assert_int_equal(c.resp_port, 6390);
    assert_int_equal(c.http_port, 8390);
    assert_int_equal(c.grpc_port, 8391);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(c.threads, cpus < 1 ? 1 : cpus > 256 ? 256 : cpus);
    assert_int_equal(c.nrules, 0);
    assert_int_equal(c.nrules_replace, 0);
    assert_string_equal(c.config_store, "./sluice.db");
    assert_string_equal(c.snapshot_path, "./sluice.snapshot");
    assert_int_equal(c.snapshot_interval_ns, 60 * SL_NS_PER_SEC);
    assert_int_equal(c.poll_interval_ns, SL_NS_PER_SEC);
    assert_int_equal(c.override_ttl_ns, 10 * SL_NS_PER_SEC);
    assert_int_equal(c.max_clients, 10000);
    assert_int_equal(c.key_max, 1024);
    assert_int_equal(c.request_max, 524288);
    assert_int_equal(c.idle_timeout_ns, 300 * SL_NS_PER_SEC);
    assert_int_equal(c.stop_delay_ns, 0);
    assert_int_equal(c.output_hard, 32 << 20);
    assert_int_equal(c.output_soft, 8 << 20);
    assert_int_equal(c.output_soft_ns, 60 * SL_NS_PER_SEC);
    assert_int_equal(c.input_buffers_max, 512 << 20);
    assert_int_equal(c.max_memory, 0);
    assert_int_equal(c.replay_timeout_ns, 5 * SL_NS_PER_SEC);
    assert_int_equal(c.replay_memory, 64 << 20);
    assert_int_equal(c.replay_concurrency, 1);
    assert_null(c.requirepass);
    assert_null(c.admin_token);
    assert_int_equal(c.ntrusted, 0);
    assert_int_equal(c.log_level, LOG_INFO);
    server_settings_free(&c);
    assert_int_equal(c.nbind, 0);
    assert_null(c.config_store);
}

static void test_every_flag(void **unused)
{
    (void)unused;
    server_settings_t c;
    PARSE_OK(&c, "--bind", "0.0.0.0", "--bind=::1", "--port", "7000", "--http-port=0",
             "--grpc-port=9001", "--threads", "3", "--rules", "r.yaml", "--rules=edge.yaml",
             "--config-store=postgres://db/sluice", "--snapshot", "", "--snapshot-interval", "0",
             "--poll-interval=250", "--override-ttl", "1m", "--max-clients", "50",
             "--max-key-length=64", "--max-request-size", "1m", "--idle-timeout", "0",
             "--output-buffer-hard", "1m", "--output-buffer-soft=256k", "--output-buffer-soft-time",
             "5s", "--max-input-buffers", "64m", "--max-memory=2g", "--requirepass", "pw",
             "--admin-token=tok=en", "--trusted-proxy", "10.0.0.0/8", "--trusted-proxy=::1",
             "--log-level", "debug", "--replay-timeout", "250ms", "--replay-memory=1m",
             "--replay-concurrency", "2", "--stop-delay", "15s");
    assert_int_equal(c.nbind, 2);
    assert_string_equal(c.bind[0], "0.0.0.0");
    assert_string_equal(c.bind[1], "::1");
    assert_int_equal(c.resp_port, 7000);
    assert_int_equal(c.http_port, 0);
    assert_int_equal(c.grpc_port, 9001);
    assert_int_equal(c.threads, 3);
    assert_int_equal(c.nrules, 2);
    assert_string_equal(c.rules_paths[0], "r.yaml");
    assert_string_equal(c.rules_paths[1], "edge.yaml");
    assert_string_equal(c.config_store, "postgres://db/sluice");
    assert_string_equal(c.snapshot_path, "");
    assert_int_equal(c.snapshot_interval_ns, 0);
    assert_int_equal(c.poll_interval_ns, 250 * SL_NS_PER_MS); /* a bare number: ms, as in rules */
    assert_int_equal(c.override_ttl_ns, 60 * SL_NS_PER_SEC);
    assert_int_equal(c.max_clients, 50);
    assert_int_equal(c.key_max, 64);
    assert_int_equal(c.request_max, 1 << 20);
    assert_int_equal(c.idle_timeout_ns, 0);
    assert_int_equal(c.output_hard, 1 << 20);
    assert_int_equal(c.output_soft, 256 << 10);
    assert_int_equal(c.output_soft_ns, 5 * SL_NS_PER_SEC);
    assert_int_equal(c.input_buffers_max, 64 << 20);
    assert_int_equal(c.max_memory, (size_t)2 << 30);
    assert_string_equal(c.requirepass, "pw");
    assert_string_equal(c.admin_token, "tok=en"); /* only the first '=' splits */
    assert_int_equal(c.ntrusted, 2);
    assert_string_equal(c.trusted_proxies[0], "10.0.0.0/8");
    assert_string_equal(c.trusted_proxies[1], "::1");
    assert_int_equal(c.log_level, LOG_DEBUG);
    assert_int_equal(c.replay_timeout_ns, 250 * SL_NS_PER_MS);
    assert_int_equal(c.replay_memory, 1 << 20);
    assert_int_equal(c.replay_concurrency, 2);
    assert_int_equal(c.stop_delay_ns, 15 * SL_NS_PER_SEC);
    server_settings_free(&c);
}

static void test_sizes(void **unused)
{
    (void)unused;
    static const struct {
        const char *text;
        size_t bytes;
    } rows[] = {
        {"1024", 1024},          {"512k", 512 * 1024},    {"512K", 512 * 1024},
        {"4kb", 4096},           {"1m", 1 << 20},         {"3MB", 3 << 20},
        {"1g", (size_t)1 << 30}, {"1t", (size_t)1 << 40}, {"2048b", 2048},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        server_settings_t c;
        PARSE_OK(&c, "--max-memory", rows[i].text);
        assert_int_equal(c.max_memory, rows[i].bytes);
        server_settings_free(&c);
    }
}

static void test_help_and_version(void **unused)
{
    (void)unused;
    const char *help = server_settings_usage();
    assert_non_null(strstr(help, "--port PORT"));
    assert_non_null(strstr(help, "--trusted-proxy CIDR"));
    assert_non_null(strstr(help, "SLUICE_ADMIN_TOKEN"));
    server_settings_t c;
    const char *h[] = {"--help", NULL}, *h2[] = {"--port", "1", "-h", NULL};
    const char *v[] = {"--version", NULL}, *v2[] = {"-V", NULL};
    assert_int_equal(parse_args(&c, h), 1);
    server_settings_free(&c);
    assert_int_equal(parse_args(&c, h2), 1);
    server_settings_free(&c);
    assert_int_equal(parse_args(&c, v), 1);
    server_settings_free(&c);
    assert_int_equal(parse_args(&c, v2), 1);
    server_settings_free(&c);
    /* --help is answered once the flags' syntax is checked, before any value is */
    const char *hb[] = {"--threads", "0", "--help", NULL};
    assert_int_equal(parse_args(&c, hb), 1);
    server_settings_free(&c);
}

static void test_flag_errors(void **unused)
{
    (void)unused;
    PARSE_ERR("unknown option '--prot' (see --help)", "--prot", "7000");
    PARSE_ERR("unknown option '--prot' (see --help)", "--prot=7000");
    PARSE_ERR("unexpected argument 'extra' (options start with --; see --help)", "extra");
    PARSE_ERR("unexpected argument '-p' (options start with --; see --help)", "-p", "1");
    PARSE_ERR("--port: missing value (PORT)", "--port");
    PARSE_ERR("--help: takes no value", "--help=yes");
    PARSE_ERR("--port: must be an integer 0..65535", "--port", "65536");
    PARSE_ERR("--port: must be an integer 0..65535", "--port", "-1");
    PARSE_ERR("--port: must be an integer 0..65535", "--port", "+80");
    PARSE_ERR("--port: must be an integer 0..65535", "--port", "80x");
    PARSE_ERR("--port: must be an integer 0..65535", "--port", "");
    PARSE_ERR("--http-port: must be an integer 0..65535", "--http-port=99999999999999999999");
    PARSE_ERR("--rules and --rules-replace: give files to one of them, not both", "--rules", "a",
              "--rules-replace", "b");
    PARSE_ERR("--threads: must be an integer 1..256", "--threads", "0");
    PARSE_ERR("--threads: must be an integer 1..256", "--threads", "257");
    PARSE_ERR("--max-clients: must be an integer 1..1073741824", "--max-clients", "0");
    PARSE_ERR("--max-key-length: must be an integer 1..1073741824", "--max-key-length", "1k");
    PARSE_ERR("--max-request-size: must be 1024..1125899906842624 bytes", "--max-request-size",
              "1000");
    PARSE_ERR("--max-request-size: '1.5m' is not a size (bytes, or with k, m, g: 512k, 2g)",
              "--max-request-size", "1.5m");
    PARSE_ERR("--max-memory: '2x' is not a size (bytes, or with k, m, g: 512k, 2g)", "--max-memory",
              "2x");
    PARSE_ERR("--max-memory: '99999999999999g' is not a size (bytes, or with k, m, g: 512k, 2g)",
              "--max-memory", "99999999999999g");
    PARSE_ERR("--max-memory: must be 0..1125899906842624 bytes", "--max-memory", "2048t");
    PARSE_ERR("--idle-timeout: malformed duration '300x' (e.g. 250ms, 10s, 1m)", "--idle-timeout",
              "300x");
    PARSE_ERR("--idle-timeout: malformed duration '5 s' (e.g. 250ms, 10s, 1m)", "--idle-timeout",
              "5 s");
    PARSE_ERR("--override-ttl: duration '99999999999d' is out of range", "--override-ttl",
              "99999999999d");
    PARSE_ERR("--poll-interval: must be at least 1ms", "--poll-interval", "0");
    PARSE_ERR("--poll-interval: must be at least 1ms", "--poll-interval", "999us");
    PARSE_ERR("--replay-timeout: must be at least 1ms", "--replay-timeout", "0");
    PARSE_ERR("--replay-memory: must be 65536..1125899906842624 bytes", "--replay-memory", "63k");
    PARSE_ERR("--replay-concurrency: must be an integer 1..4", "--replay-concurrency", "0");
    PARSE_ERR("--replay-concurrency: must be an integer 1..4", "--replay-concurrency", "5");
    PARSE_ERR("--log-level: must be error, warn, info or debug, not 'verbose'", "--log-level",
              "verbose");
    PARSE_ERR("--bind: 'localhost' is not an IPv4 or IPv6 address (e.g. 127.0.0.1, ::1, 0.0.0.0)",
              "--bind", "localhost");
    PARSE_ERR("--bind: more than 8 entries", "--bind=::1", "--bind=::1", "--bind=::1", "--bind=::1",
              "--bind=::1", "--bind=::1", "--bind=::1", "--bind=::1", "--bind=::1");
    PARSE_ERR("--trusted-proxy: '10.0.0.0/33' is not an address or network (e.g. 10.0.0.0/8, ::1)",
              "--trusted-proxy", "10.0.0.0/33");
    PARSE_ERR("--trusted-proxy: 'fd00::/129' is not an address or network (e.g. 10.0.0.0/8, ::1)",
              "--trusted-proxy", "fd00::/129");
    PARSE_ERR("--trusted-proxy: '10.0.0.0/' is not an address or network (e.g. 10.0.0.0/8, ::1)",
              "--trusted-proxy", "10.0.0.0/");
    PARSE_ERR("--port, --http-port and --grpc-port are all 0: nothing to serve", "--port", "0",
              "--grpc-port", "0", "--http-port", "0");
    PARSE_ERR("output-buffer-soft (2097152 bytes) is above output-buffer-hard (1048576 bytes): the "
              "soft limit could never apply",
              "--output-buffer-hard", "1m", "--output-buffer-soft", "2m");
    PARSE_ERR("--output-buffer-soft-time: malformed duration '60 s' (e.g. 250ms, 10s, 1m)",
              "--output-buffer-soft-time", "60 s");
    PARSE_ERR("--max-input-buffers: '1 g' is not a size (bytes, or with k, m, g: 512k, 2g)",
              "--max-input-buffers", "1 g");
    PARSE_ERR("/nonexistent/sluiced.yaml: cannot open: No such file or directory", "--config",
              "/nonexistent/sluiced.yaml");
}

static void test_file(void **unused)
{
    (void)unused;
    write_file("# sluiced settings\n"
               "bind: [0.0.0.0, \"::\"]\n"
               "port: 7001\n"
               "http_port: 0\n"
               "threads: 2\n"
               "rules: /etc/sluice/rules.yaml\n"
               "config_store: /var/lib/sluice/sluice.db\n"
               "snapshot: \"\"\n"
               "snapshot_interval: 30s\n"
               "poll_interval: 500\n" /* integer milliseconds */
               "override_ttl: 0\n"
               "max_clients: 20\n"
               "max_key_length: 256\n"
               "max_request_size: 64k\n"
               "idle_timeout: 1h\n"
               "output_buffer_hard: 0\n" /* no hard limit: any soft limit is allowed */
               "output_buffer_soft: 1g\n"
               "output_buffer_soft_time: 1500\n"
               "stop_delay: 2500\n"
               "max_input_buffers: 0\n"
               "max_memory: 1048576\n"
               "requirepass: 12345\n" /* a plain scalar taken as written */
               "admin_token: secret\n"
               "trusted_proxies:\n  - 10.0.0.0/8\n  - 192.168.1.1\n"
               "log_level: warn\n");
    server_settings_t c;
    PARSE_OK(&c, "--config", file_path);
    assert_string_equal(c.config_path, file_path);
    assert_int_equal(c.nbind, 2);
    assert_string_equal(c.bind[1], "::");
    assert_int_equal(c.resp_port, 7001);
    assert_int_equal(c.http_port, 0);
    assert_int_equal(c.threads, 2);
    assert_int_equal(c.nrules, 1);
    assert_string_equal(c.rules_paths[0], "/etc/sluice/rules.yaml");
    assert_string_equal(c.config_store, "/var/lib/sluice/sluice.db");
    assert_string_equal(c.snapshot_path, "");
    assert_int_equal(c.snapshot_interval_ns, 30 * SL_NS_PER_SEC);
    assert_int_equal(c.poll_interval_ns, 500 * SL_NS_PER_MS);
    assert_int_equal(c.override_ttl_ns, 0);
    assert_int_equal(c.max_clients, 20);
    assert_int_equal(c.key_max, 256);
    assert_int_equal(c.request_max, 65536);
    assert_int_equal(c.idle_timeout_ns, 3600 * SL_NS_PER_SEC);
    assert_int_equal(c.output_hard, 0);
    assert_int_equal(c.output_soft, (size_t)1 << 30);
    assert_int_equal(c.output_soft_ns, 1500 * SL_NS_PER_MS);
    assert_int_equal(c.stop_delay_ns, 2500 * SL_NS_PER_MS);
    assert_int_equal(c.input_buffers_max, 0);
    assert_int_equal(c.max_memory, 1048576);
    assert_string_equal(c.requirepass, "12345");
    assert_string_equal(c.admin_token, "secret");
    assert_int_equal(c.ntrusted, 2);
    assert_string_equal(c.trusted_proxies[1], "192.168.1.1");
    assert_int_equal(c.log_level, LOG_WARN);
    server_settings_free(&c);

    /* bind as one string; an empty file and a comments-only file change nothing */
    write_file("bind: 0.0.0.0\n");
    PARSE_OK(&c, "--config", file_path);
    assert_int_equal(c.nbind, 1);
    assert_string_equal(c.bind[0], "0.0.0.0");
    server_settings_free(&c);
    write_file("# nothing\n");
    char joined[128];
    snprintf(joined, sizeof(joined), "--config=%s", file_path);
    PARSE_OK(&c, joined);
    assert_int_equal(c.resp_port, 6390);
    server_settings_free(&c);
}

/* envoyproxy/ratelimit's deployment (its RUNTIME_* variables): sluiced listens where it does,
 * 0.0.0.0 with HTTP on 8080 and gRPC on 8081, unless the file, a variable or a flag says
 * otherwise; without them, sluiced's own defaults. */
static void test_upstream_listeners(void **unused)
{
    (void)unused;
    server_settings_t c;
    setenv("RUNTIME_ROOT", "/srv/runtime_data/current", 1);
    PARSE_OK(&c, "--port", "7000");
    assert_int_equal(c.nbind, 1);
    assert_string_equal(c.bind[0], "0.0.0.0");
    assert_int_equal(c.http_port, 8080);
    assert_int_equal(c.grpc_port, 8081);
    assert_int_equal(c.resp_port, 7000);
    server_settings_free(&c);

    write_file("http_port: 7002\nbind: [10.1.1.1]\n"); /* the file over the default */
    PARSE_OK(&c, "--config", file_path);
    assert_string_equal(c.bind[0], "10.1.1.1");
    assert_int_equal(c.http_port, 7002);
    assert_int_equal(c.grpc_port, 8081);
    server_settings_free(&c);

    setenv("HOST", "127.0.0.1", 1); /* upstream's variables over it, flags over them */
    setenv("GRPC_PORT", "9001", 1);
    PARSE_OK(&c, "--http-port", "9002");
    assert_string_equal(c.bind[0], "127.0.0.1");
    assert_int_equal(c.http_port, 9002);
    assert_int_equal(c.grpc_port, 9001);
    server_settings_free(&c);
    unsetenv("HOST");
    unsetenv("GRPC_PORT");

    unsetenv("RUNTIME_ROOT");
    setenv("RUNTIME_APPDIRECTORY", "config", 1); /* any of the three */
    PARSE_OK(&c, "--port", "7000");
    assert_string_equal(c.bind[0], "0.0.0.0");
    server_settings_free(&c);
    unsetenv("RUNTIME_APPDIRECTORY");

    PARSE_OK(&c, "--port", "7000"); /* none: sluiced's own */
    assert_string_equal(c.bind[0], "127.0.0.1");
    assert_int_equal(c.http_port, 8390);
    assert_int_equal(c.grpc_port, 8391);
    server_settings_free(&c);
}

static void test_precedence(void **unused)
{
    (void)unused;
    write_file("port: 7001\nhttp_port: 7002\ngrpc_port: 7003\nbind: [10.1.1.1, "
               "10.1.1.2]\nrequirepass: filepw\n"
               "trusted_proxies: [10.0.0.0/8]\n");
    setenv("SLUICE_REQUIREPASS", "envpw", 1);
    setenv("SLUICE_ADMIN_TOKEN", "envtoken", 1);
    server_settings_t c;
    /* flags override the file wherever they sit relative to --config; a flag list replaces
     * the file's list */
    PARSE_OK(&c, "--port", "8000", "--config", file_path, "--bind", "::1");
    assert_int_equal(c.resp_port, 8000);
    assert_int_equal(c.http_port, 7002);
    assert_int_equal(c.grpc_port, 7003);
    assert_int_equal(c.nbind, 1);
    assert_string_equal(c.bind[0], "::1");
    assert_int_equal(c.ntrusted, 1);
    assert_string_equal(c.requirepass, "filepw");   /* the file beats the env */
    assert_string_equal(c.admin_token, "envtoken"); /* the env fills what is missing */
    server_settings_free(&c);

    PARSE_OK(&c, "--config", file_path, "--requirepass", "flagpw", "--port", "1", "--port", "2");
    assert_string_equal(c.requirepass, "flagpw");
    assert_int_equal(c.resp_port, 2); /* the last flag wins */
    server_settings_free(&c);

    unsetenv("SLUICE_ADMIN_TOKEN");
    PARSE_OK(&c, "--port", "1");
    assert_string_equal(c.requirepass, "envpw");
    assert_null(c.admin_token);
    server_settings_free(&c);
}

/* An empty secret is refused wherever it comes from: a server nobody could log in to, or (a
 * variable that `VAR=${UNSET}` left empty) one left open by mistake. */
static void test_empty_secrets(void **unused)
{
    (void)unused;
    PARSE_ERR("--requirepass: must not be empty (no client could give it); leave the setting out "
              "to have none",
              "--requirepass", "");
    PARSE_ERR("--admin-token: must not be empty (no client could give it); leave the setting out "
              "to have none",
              "--admin-token=");
    PARSE_ERR("--admin-password: must not be empty (no client could give it); leave the setting "
              "out to have none",
              "--admin-password", "");
    char want[SETTINGS_ERR_MAX];
    write_file("port: 7000\nadmin_token: \"\"\n");
    snprintf(want, sizeof want,
             "%s: line 2, column 14: admin_token: must not be empty (no client could give it); "
             "leave the setting out to have none",
             file_path);
    const char *args[] = {"--config", file_path, NULL};
    parse_err(args, want);
    static const char *const vars[] = {"SLUICE_REQUIREPASS", "SLUICE_ADMIN_TOKEN",
                                       "SLUICE_ADMIN_PASSWORD"};
    for (size_t i = 0; i < 3; i++) {
        setenv(vars[i], "", 1);
        snprintf(want, sizeof want, "%s is set but empty: unset it to have no secret, or give one",
                 vars[i]);
        const char *none[] = {NULL};
        parse_err(none, want);
        /* a flag or the file gives the secret: the variable is not read */
        server_settings_t c;
        const char *flag = i == 0 ? "--requirepass" : i == 1 ? "--admin-token" : "--admin-password";
        const char *given[] = {flag, "s3cret", NULL};
        assert_int_equal(parse_args(&c, given), 0);
        server_settings_free(&c);
        unsetenv(vars[i]);
    }
}

/* --http-host: names (and addresses) as a Host header names them, no port; "*"; the file's
 * list; anything else refused with the value shown. */
static void test_http_host(void **unused)
{
    (void)unused;
    server_settings_t c;
    PARSE_OK(&c, "--http-host", "limiter.example.com", "--http-host=Sluiced", "--http-host",
             "203.0.113.7", "--http-host", "::1", "--http-host", "*");
    assert_int_equal(c.nhttp_hosts, 5);
    assert_string_equal(c.http_hosts[0], "limiter.example.com");
    assert_string_equal(c.http_hosts[4], "*");
    server_settings_free(&c);
    write_file("http_host: [a.example, b.example]\n");
    PARSE_OK(&c, "--config", file_path);
    assert_int_equal(c.nhttp_hosts, 2);
    assert_string_equal(c.http_hosts[1], "b.example");
    server_settings_free(&c);
    PARSE_OK(&c, "--config", file_path, "--http-host", "c.example"); /* flags replace the file's */
    assert_int_equal(c.nhttp_hosts, 1);
    server_settings_free(&c);
    PARSE_ERR("--http-host: must be a host name (limiter.example.com), an address or *, not "
              "'limiter.example.com:8390'",
              "--http-host", "limiter.example.com:8390");
    PARSE_ERR("--http-host: must be a host name (limiter.example.com), an address or *, not "
              "'http://x'",
              "--http-host", "http://x");
    PARSE_ERR("--http-host: must be a host name (limiter.example.com), an address or *, not ''",
              "--http-host", "");
    PARSE_ERR("--http-host: must be a host name (limiter.example.com), an address or *, not "
              "'a b'",
              "--http-host", "a b");
}

static void test_file_errors(void **unused)
{
    (void)unused;
    static const struct {
        const char *text, *want;
    } rows[] = {
        {"port: 7000\nhttp_port: 8000\nprot: 1\n", "line 3, column 1: unknown setting 'prot'"},
        {"port: 1\nport: 2\n", "line 2, column 1: duplicate setting 'port'"},
        {"threads: 2\nlog_level: info\nport: 70000\n",
         "line 3, column 7: port: must be an integer 0..65535"},
        {"port: \"7000\"\n", "line 1, column 7: port: must be an integer 0..65535"},
        {"port: 7000.0\n", "line 1, column 7: port: must be an integer 0..65535"},
        {"port: -1\n", "line 1, column 7: port: must be an integer 0..65535"},
        {"threads: [1]\n", "line 1, column 10: threads: must be a scalar value, not a list"},
        {"config_store: ~\n", "line 1, column 15: config_store: must be a string, not null"},
        {"config_store: {a: 1}\n",
         "line 1, column 15: config_store: must be a string, not a mapping"},
        {"bind: [0.0.0.0, nowhere]\n",
         "line 1, column 17: bind: 'nowhere' is not an IPv4 or IPv6 address (e.g. 127.0.0.1, ::1, "
         "0.0.0.0)"},
        {"bind: [0.0.0.0, [a]]\n", "line 1, column 17: bind: must be a string, not a list"},
        {"bind: []\n", "bind: at least one address is needed"},
        {"trusted_proxies: {a: b}\n",
         "line 1, column 18: trusted_proxies: must be an address or a list of them, not a "
         "mapping"},
        {"rules: {a: 1}\n",
         "line 1, column 8: rules: must be a file name or a list of them, not a mapping"},
        {"idle_timeout: 5 minutes\n",
         "line 1, column 15: idle_timeout: malformed duration '5 minutes' (e.g. 250ms, 10s, 1m)"},
        {"idle_timeout: -5\n",
         "line 1, column 15: idle_timeout: must be a duration (10s, 250ms) or milliseconds >= 0"},
        {"max_request_size: 1\n",
         "line 1, column 19: max_request_size: must be 1024..1125899906842624 bytes"},
        {"log_level: loud\n",
         "line 1, column 12: log_level: must be error, warn, info or debug, not 'loud'"},
        {"requirepass: \"a\\0b\"\n", "line 1, column 14: requirepass: must not contain NUL bytes"},
        {"config: other.yaml\n", "line 1, column 1: unknown setting 'config'"},
        {"- port: 1\n", "line 1, column 1: expected a mapping of settings (port: 6390, ...), not a "
                        "list"},
        {"port: [\n", "line 2, column 1: did not find expected node content (while parsing a flow "
                      "node at line 2, column 1)"},
        {"port: 1\n  bad: 2\n", "line 2, column 6: mapping values are not allowed in this context"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        write_file(rows[i].text);
        char want[SETTINGS_ERR_MAX];
        if (strncmp(rows[i].want, "line", 4) == 0)
            snprintf(want, sizeof(want), "%s: %s", file_path, rows[i].want);
        else
            snprintf(want, sizeof(want), "%s", rows[i].want);
        const char *args[] = {"--config", file_path, NULL};
        parse_err(args, want);
    }
}

static void test_file_too_large(void **unused)
{
    (void)unused;
    FILE *f = fopen(file_path, "w");
    assert_non_null(f);
    for (int i = 0; i < SETTINGS_FILE_MAX / 10 + 1; i++)
        fputs("# padding\n", f);
    fclose(f);
    char want[SETTINGS_ERR_MAX];
    snprintf(want, sizeof(want), "%s: larger than 1 MiB", file_path);
    const char *args[] = {"--config", file_path, NULL};
    parse_err(args, want);
}

static void test_example_file(void **unused)
{
    (void)unused;
    char path[1024];
    const char *src = __FILE__;
    const char *cut = strstr(src, "tests/unit/");
    assert_non_null(cut);
    snprintf(path, sizeof(path), "%.*sexamples/sluiced.yaml", (int)(cut - src), src);
    server_settings_t c, d;
    PARSE_OK(&c, "--config", path);
    const char *none[] = {NULL};
    assert_int_equal(parse_args(&d, none), 0);
    /* the example shows the defaults */
    assert_int_equal(c.resp_port, d.resp_port);
    assert_int_equal(c.http_port, d.http_port);
    assert_int_equal(c.nbind, 1);
    assert_string_equal(c.bind[0], d.bind[0]);
    assert_string_equal(c.config_store, d.config_store);
    assert_string_equal(c.snapshot_path, d.snapshot_path);
    assert_int_equal(c.snapshot_interval_ns, d.snapshot_interval_ns);
    assert_int_equal(c.poll_interval_ns, d.poll_interval_ns);
    assert_int_equal(c.override_ttl_ns, d.override_ttl_ns);
    assert_int_equal(c.max_clients, d.max_clients);
    assert_int_equal(c.key_max, d.key_max);
    assert_int_equal(c.request_max, d.request_max);
    assert_int_equal(c.idle_timeout_ns, d.idle_timeout_ns);
    assert_int_equal(c.output_hard, d.output_hard);
    assert_int_equal(c.output_soft, d.output_soft);
    assert_int_equal(c.output_soft_ns, d.output_soft_ns);
    assert_int_equal(c.input_buffers_max, d.input_buffers_max);
    assert_int_equal(c.max_memory, d.max_memory);
    assert_int_equal(c.max_inline, d.max_inline);
    assert_int_equal(c.replay_timeout_ns, d.replay_timeout_ns);
    assert_int_equal(c.replay_memory, d.replay_memory);
    assert_int_equal(c.replay_concurrency, d.replay_concurrency);
    assert_int_equal(c.log_level, d.log_level);
    server_settings_free(&c);
    server_settings_free(&d);
}

/* Admin open to every client: refused beyond loopback unless --insecure-admin, warned on it. */
static void test_admin_check(void **unused)
{
    static const struct {
        const char *bind;
        bool loopback;
    } rows[] = {
        {"127.0.0.1", true}, {"127.3.2.1", true}, {"::1", true},       {"::ffff:127.0.0.1", true},
        {"0.0.0.0", false},  {"::", false},       {"10.1.2.3", false}, {"::ffff:10.0.0.1", false},
    };
    char warn[512], why[512];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        server_settings_t c;
        PARSE_OK(&c, "--bind", rows[i].bind);
        int rc = server_settings_admin_check(&c, warn, sizeof warn, why, sizeof why);
        if (rows[i].loopback) {
            assert_int_equal(rc, 0);
            assert_non_null(
                strstr(warn, "open to every client that can connect over RESP and HTTP"));
        } else {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(why, "which is not loopback"));
        }
        server_settings_free(&c);
    }
    server_settings_t c;
    PARSE_OK(&c, "--bind", "10.1.2.3", "--insecure-admin");
    assert_true(c.insecure_admin);
    assert_int_equal(server_settings_admin_check(&c, warn, sizeof warn, why, sizeof why), 0);
    assert_non_null(strstr(warn, "on 10.1.2.3 (--insecure-admin)"));
    server_settings_free(&c);
    PARSE_OK(&c, "--bind", "10.1.2.3", "--admin-password", "a", "--admin-token", "t");
    assert_int_equal(server_settings_admin_check(&c, warn, sizeof warn, why, sizeof why), 0);
    assert_string_equal(warn, "");
    server_settings_free(&c);
    PARSE_OK(&c, "--bind", "10.1.2.3", "--port", "0", "--admin-token", "t");
    assert_int_equal(server_settings_admin_check(&c, warn, sizeof warn, why, sizeof why), 0);
    server_settings_free(&c);
    setenv("SLUICE_ADMIN_PASSWORD", "fromenv", 1);
    PARSE_OK(&c, "--bind", "10.1.2.3", "--http-port", "0");
    assert_string_equal(c.admin_password, "fromenv");
    assert_int_equal(server_settings_admin_check(&c, warn, sizeof warn, why, sizeof why), 0);
    server_settings_free(&c);
    unsetenv("SLUICE_ADMIN_PASSWORD");
    PARSE_OK(&c, "--insecure-admin=false");
    assert_false(c.insecure_admin);
    server_settings_free(&c);
    PARSE_ERR("--insecure-admin: must be true or false, not 'yes'", "--insecure-admin=yes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_help_and_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_listeners, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_secrets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_example_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
