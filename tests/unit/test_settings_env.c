/*
 * test_settings_env.c - envoyproxy/ratelimit's environment variables read as sluiced's flags
 * (settings_env_read, through a table standing for the environment): each variable that gives a
 * flag gives it, each accepted at one value is accepted there and refused elsewhere with its
 * name, each refused is refused by name, the combined ones (runtime directory, store, hosts,
 * TLS, log level) as documented; then, through server_settings_parse and the real
 * environment, that a variable is over the file and under a flag. Seeded random combinations
 * check that a refusal always names a variable that was refused and changes nothing, and that a
 * flag always wins.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "prop/gen.h"
#include "server/settings.h"
#include "server/settings_env.h"

#define ENV_CAP 160

/* The environment settings_env_read sees: names and values, NULL-free. */
static struct {
    const char *name, *value;
} env_tab[ENV_CAP];
static size_t env_n;
static char err[512];

static const char *fake_get(const char *name)
{
    for (size_t i = 0; i < env_n; i++) {
        if (strcmp(env_tab[i].name, name) == 0)
            return env_tab[i].value;
    }
    return NULL;
}

static void env_clear(void)
{
    env_n = 0;
}

static void env_set(const char *name, const char *value)
{
    assert_true(env_n < ENV_CAP);
    env_tab[env_n].name = name;
    env_tab[env_n].value = value;
    env_n++;
}

/* Variables sluiced refuses whatever their value (upstream's src/settings/settings.go). */
static const char *const refused[] = {
    "DEBUG_HOST",
    "DEBUG_PORT",
    "GRPC_UDS",
    "GRPC_MAX_CONNECTION_AGE",
    "GRPC_MAX_CONNECTION_AGE_GRACE",
    "GRPC_CLIENT_TLS_SAN",
    "CONFIG_GRPC_XDS_NODE_ID",
    "CONFIG_GRPC_XDS_NODE_METADATA",
    "CONFIG_GRPC_XDS_SERVER_URL",
    "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
    "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
    "CONFIG_GRPC_XDS_SERVER_USE_TLS",
    "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
    "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
    "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
    "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
    "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
    "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
    "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
    "XDS_CLIENT_BACKOFF_JITTER",
    "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
    "USE_DOG_STATSD_MOGRIFIERS",
    "STATSD_HOST",
    "STATSD_PORT",
    "EXTRA_TAGS",
    "STATS_FLUSH_INTERVAL",
    "PROMETHEUS_ADDR",
    "PROMETHEUS_PATH",
    "PROMETHEUS_MAPPER_YAML",
    "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
    "EXPIRATION_JITTER_MAX_SECONDS",
    "NEAR_LIMIT_RATIO",
    "REDIS_POOL_SIZE",
    "REDIS_TLS_CLIENT_CERT",
    "REDIS_TLS_CLIENT_KEY",
    "REDIS_TLS_CACERT",
    "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
    "REDIS_PIPELINE_WINDOW",
    "REDIS_PIPELINE_LIMIT",
    "REDIS_CLUSTER_PIPELINE_PARALLELISM",
    "REDIS_PERSECOND_SOCKET_TYPE",
    "REDIS_PERSECOND_TYPE",
    "REDIS_PERSECOND_URL",
    "REDIS_PERSECOND_POOL_SIZE",
    "REDIS_PERSECOND_AUTH",
    "REDIS_PERSECOND_TLS",
    "REDIS_SENTINEL_AUTH",
    "REDIS_PERSECOND_SENTINEL_AUTH",
    "REDIS_PERSECOND_PIPELINE_WINDOW",
    "REDIS_PERSECOND_PIPELINE_LIMIT",
    "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
    "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
    "REDIS_TIMEOUT",
    "REDIS_PERSECOND_TIMEOUT",
    "REDIS_POOL_ON_EMPTY_BEHAVIOR",
    "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
    "REDIS_STARTUP_INITIAL_INTERVAL",
    "REDIS_STARTUP_MAX_INTERVAL",
    "REDIS_STARTUP_MAX_ELAPSED_TIME",
    "MEMCACHE_HOST_PORT",
    "MEMCACHE_MAX_IDLE_CONNS",
    "MEMCACHE_SRV",
    "MEMCACHE_SRV_REFRESH",
    "MEMCACHE_TLS",
    "MEMCACHE_TLS_CLIENT_CERT",
    "MEMCACHE_TLS_CLIENT_KEY",
    "MEMCACHE_TLS_CACERT",
    "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
    "TRACING_SERVICE_NAME",
    "TRACING_SERVICE_NAMESPACE",
    "TRACING_SERVICE_INSTANCE_ID",
    "TRACING_EXPORTER_PROTOCOL",
    "TRACING_SAMPLING_RATE",
};
#define NREFUSED (sizeof refused / sizeof refused[0])

/* Variables accepted at the value that says what sluiced does, and one value refused. */
static const struct {
    const char *name, *ok, *bad;
} accepted[] = {
    {"LOG_FORMAT", "text", "json"},
    {"CONFIG_TYPE", "FILE", "GRPC_XDS_SOTW"},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", "false", "true"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", "true"},
    {"USE_DOG_STATSD", "false", "true"},
    {"USE_STATSD", "false", "true"},
    {"DISABLE_STATS", "false", "true"},
    {"USE_PROMETHEUS", "false", "true"},
    {"RUNTIME_WATCH_ROOT", "false", "maybe"},
    {"LOCAL_CACHE_SIZE_IN_BYTES", "0", "1048576"},
    {"CACHE_KEY_PREFIX", "", "rl_"},
    {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true", "false"},
    {"LIMIT_LIMIT_HEADER", "RateLimit-Limit", "X-Limit"},
    {"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "X-Remaining"},
    {"LIMIT_RESET_HEADER", "RateLimit-Reset", "X-Reset"},
    {"REDIS_TLS", "false", "true"},
    {"REDIS_PERSECOND", "false", "true"},
    {"SHADOW_MODE", "false", "true"},
    {"RESPONSE_DYNAMIC_METADATA", "false", "true"},
    {"MERGE_DOMAIN_CONFIG", "false", "true"},
    {"TRACING_ENABLED", "false", "true"},
};
#define NACCEPTED (sizeof accepted / sizeof accepted[0])

/* Variables that give a flag as they are. */
static const struct {
    const char *name, *value, *flag;
} flagged[] = {
    {"PORT", "8080", "http-port"},
    {"GRPC_PORT", "8081", "grpc-port"},
    {"GRPC_SERVER_TLS_CERT", "/etc/tls/cert.pem", "tls-cert"},
    {"GRPC_SERVER_TLS_KEY", "/etc/tls/key.pem", "tls-key"},
    {"GRPC_CLIENT_TLS_CACERT", "/etc/tls/ca.pem", "tls-client-ca"},
};
#define NFLAGGED (sizeof flagged / sizeof flagged[0])

/* Reads the table; on success, the flags in out[0..*n). */
static int read_env(env_flag_t *out, size_t *n)
{
    err[0] = '\0';
    return settings_env_read(fake_get, out, n, err, sizeof err);
}

/* The value the read gives flag, or NULL. */
static const char *flag_value(const env_flag_t *out, size_t n, const char *flag)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(out[i].flag, flag) == 0)
            return out[i].value;
    }
    return NULL;
}

/* True when err begins with var followed by '=' or ' ' (a variable's name, not a prefix of
 * another's). */
static bool err_names(const char *var)
{
    size_t len = strlen(var);
    return strncmp(err, var, len) == 0 && (err[len] == '=' || err[len] == ' ');
}

/* Sets one variable alone and expects its flag, said to come from `from`. */
static void expect_flag_from(const char *var, const char *value, const char *flag, const char *want,
                             const char *from)
{
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 99;
    env_clear();
    env_set(var, value);
    if (read_env(out, &n) != 0)
        fail_msg("%s=%s: %s", var, value, err);
    if (n != 1 || strcmp(out[0].flag, flag) != 0 || strcmp(out[0].value, want) != 0)
        fail_msg("%s=%s: %zu flags, first %s=%s; want %s=%s", var, value, n,
                 n > 0 ? out[0].flag : "-", n > 0 ? out[0].value : "-", flag, want);
    assert_string_equal(out[0].var, from);
    settings_env_free(out, n);
}

/* Sets one variable alone and expects its flag, said to come from it. */
static void expect_flag(const char *var, const char *value, const char *flag, const char *want)
{
    expect_flag_from(var, value, flag, want, var);
}

/* Expects the environment as set to be refused, naming var. */
static void expect_refused(const char *var)
{
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 99;
    if (read_env(out, &n) != -1)
        fail_msg("%s: accepted, want refused", var);
    assert_int_equal(n, 0);
    if (!err_names(var))
        fail_msg("%s: message does not name it: '%s'", var, err);
}

static void test_nothing_set(void **unused)
{
    (void)unused;
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 99;
    env_clear();
    assert_int_equal(read_env(out, &n), 0);
    assert_int_equal(n, 0);
}

static void test_each_flag_row(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < NFLAGGED; i++)
        expect_flag(flagged[i].name, flagged[i].value, flagged[i].flag, flagged[i].value);
}

static void test_each_refused_row(void **unused)
{
    (void)unused;
    static const char *const values[] = {"", "0", "false", "anything"};
    for (size_t i = 0; i < NREFUSED; i++) {
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            env_clear();
            env_set(refused[i], values[v]);
            expect_refused(refused[i]);
            assert_non_null(strstr(err, "unset it to start"));
        }
    }
}

static void test_each_accepted_row(void **unused)
{
    (void)unused;
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 99;
    for (size_t i = 0; i < NACCEPTED; i++) {
        env_clear();
        env_set(accepted[i].name, accepted[i].ok);
        if (read_env(out, &n) != 0)
            fail_msg("%s=%s: %s", accepted[i].name, accepted[i].ok, err);
        assert_int_equal(n, 0); /* accepted: no flag, nothing else changes */
        env_clear();
        env_set(accepted[i].name, accepted[i].bad);
        expect_refused(accepted[i].name);
        assert_null(strstr(err, "(null)")); /* every refusal says why */
        /* the message says which value sluiced takes */
        char takes[160];
        snprintf(takes, sizeof takes, "sluiced takes %s=", accepted[i].name);
        assert_non_null(strstr(err, takes));
    }
    env_clear(); /* any case */
    env_set("USE_STATSD", "FALSE");
    assert_int_equal(read_env(out, &n), 0);
    env_clear();
    env_set("RUNTIME_WATCH_ROOT", "True");
    assert_int_equal(read_env(out, &n), 0);
}

static void test_log_level(void **unused)
{
    (void)unused;
    static const char *const map[][2] = {
        {"trace", "debug"},  {"DEBUG", "debug"}, {"info", "info"},   {"Warn", "warn"},
        {"warning", "warn"}, {"error", "error"}, {"fatal", "error"}, {"panic", "error"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        expect_flag("LOG_LEVEL", map[i][0], "log-level", map[i][1]);
    env_clear();
    env_set("LOG_LEVEL", "verbose");
    expect_refused("LOG_LEVEL");
    assert_non_null(strstr(err, "'verbose'"));
}

static void test_hosts(void **unused)
{
    (void)unused;
    expect_flag("HOST", "0.0.0.0", "bind", "0.0.0.0");
    expect_flag("GRPC_HOST", "10.0.0.1", "bind", "10.0.0.1");
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 0;
    env_clear();
    env_set("HOST", "0.0.0.0");
    env_set("GRPC_HOST", "0.0.0.0");
    assert_int_equal(read_env(out, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].var, "HOST");
    settings_env_free(out, n);
    env_clear();
    env_set("HOST", "0.0.0.0");
    env_set("GRPC_HOST", "127.0.0.1");
    expect_refused("GRPC_HOST");
}

/* Reads the environment as set and expects the rules directory `rules` read with
 * --rules-files `files`, and nothing else. */
static void expect_runtime(const char *rules, const char *files)
{
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 0;
    if (read_env(out, &n) != 0)
        fail_msg("%s: %s", rules, err);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].flag, "rules");
    assert_string_equal(out[0].var, "RUNTIME_ROOT"); /* messages name the root */
    assert_string_equal(out[0].value, rules);
    assert_string_equal(flag_value(out, n, "rules-files"), files);
    settings_env_free(out, n);
}

static void test_runtime_directory(void **unused)
{
    (void)unused;
    /* each part alone, the others at upstream's defaults; every file read, dot-files too, as
     * upstream's loader with RUNTIME_IGNOREDOTFILES at its default (false) */
    env_clear();
    env_set("RUNTIME_ROOT", "/data");
    expect_runtime("/data/config", "all-dotfiles");
    env_clear();
    env_set("RUNTIME_SUBDIRECTORY", "ratelimit");
    expect_runtime("/srv/runtime_data/current/ratelimit/config", "all-dotfiles");
    env_clear();
    env_set("RUNTIME_APPDIRECTORY", "limits");
    expect_runtime("/srv/runtime_data/current/limits", "all-dotfiles");
    env_clear();
    env_set("RUNTIME_ROOT", "/data");
    env_set("RUNTIME_SUBDIRECTORY", "ratelimit");
    env_set("RUNTIME_APPDIRECTORY", "config");
    env_set("RUNTIME_IGNOREDOTFILES", "True");
    expect_runtime("/data/ratelimit/config", "all");
    env_clear();
    env_set("RUNTIME_ROOT", "/data");
    env_set("RUNTIME_IGNOREDOTFILES", "false");
    expect_runtime("/data/config", "all-dotfiles");
    env_clear();
    env_set("RUNTIME_ROOT", "/data");
    env_set("RUNTIME_IGNOREDOTFILES", "yes");
    expect_refused("RUNTIME_IGNOREDOTFILES");
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 99;
    env_clear(); /* alone it says nothing: no rules directory */
    env_set("RUNTIME_IGNOREDOTFILES", "true");
    assert_int_equal(read_env(out, &n), 0);
    assert_int_equal(n, 0);
    static char longroot[5000];
    memset(longroot, 'a', sizeof longroot - 1);
    env_clear();
    env_set("RUNTIME_ROOT", longroot);
    expect_refused("RUNTIME_ROOT");
}

/* Sets the store's four variables (NULL: unset). */
static void set_store(const char *backend, const char *type, const char *sock, const char *url)
{
    env_clear();
    if (backend != NULL)
        env_set("BACKEND_TYPE", backend);
    if (type != NULL)
        env_set("REDIS_TYPE", type);
    if (sock != NULL)
        env_set("REDIS_SOCKET_TYPE", sock);
    if (url != NULL)
        env_set("REDIS_URL", url);
}

static void test_store(void **unused)
{
    (void)unused;
    static const struct {
        const char *backend, *type, *sock, *url, *want;
    } ok[] = {
        {"redis", "SINGLE", "tcp", "redis:6379", "redis://redis:6379"},
        {NULL, NULL, "tcp", "redis://r:1", "redis://r:1"},
        {"REDIS", "cluster", "TCP", "a:1,b:2", "redis-cluster://a:1,b:2"},
    };
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        set_store(ok[i].backend, ok[i].type, ok[i].sock, ok[i].url);
        if (read_env(out, &n) != 0)
            fail_msg("store %zu: %s", i, err);
        assert_int_equal(n, 1);
        assert_string_equal(out[0].var, "REDIS_URL");
        assert_string_equal(flag_value(out, n, "store"), ok[i].want);
        settings_env_free(out, n);
    }
    set_store("redis", NULL, NULL, NULL); /* no URL: the memory store, no flag */
    assert_int_equal(read_env(out, &n), 0);
    assert_int_equal(n, 0);
    set_store("memcache", NULL, NULL, NULL);
    expect_refused("BACKEND_TYPE");
    set_store(NULL, "single", NULL, NULL);
    expect_refused("REDIS_TYPE");
    set_store(NULL, NULL, "tcp", NULL);
    expect_refused("REDIS_SOCKET_TYPE");
    set_store(NULL, NULL, NULL, "redis:6379"); /* upstream's default socket is unix */
    expect_refused("REDIS_URL");
    set_store(NULL, NULL, "unix", "/var/run/redis.sock");
    expect_refused("REDIS_URL");
    set_store(NULL, "sentinel", "tcp", "m,a:1");
    expect_refused("REDIS_TYPE");
}

/* REDIS_AUTH: PASSWORD or USER:PASSWORD (split at the first ':', as upstream) in the store URL,
 * percent-encoded; refused empty or without REDIS_URL, never shown in a message. */
static void test_store_auth(void **unused)
{
    (void)unused;
    static const struct {
        const char *type, *auth, *want;
    } ok[] = {
        {"single", "s3cret", "redis://:s3cret@r:6379"},
        {"single", "alice:p@ss:w/rd %", "redis://alice:p%40ss%3Aw%2Frd%20%25@r:6379"},
        {"single", ":pw", "redis://:pw@r:6379"},
        {"cluster", "pw", "redis-cluster://:pw@r:6379"},
    };
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        set_store("redis", ok[i].type, "tcp", "r:6379");
        env_set("REDIS_AUTH", ok[i].auth);
        if (read_env(out, &n) != 0)
            fail_msg("auth %zu: %s", i, err);
        assert_int_equal(n, 1);
        assert_string_equal(flag_value(out, n, "store"), ok[i].want);
        settings_env_free(out, n);
    }
    static const char *const bad[] = {"", "alice:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_store("redis", "single", "tcp", "r:6379");
        env_set("REDIS_AUTH", bad[i]);
        expect_refused("REDIS_AUTH");
        assert_non_null(strstr(err, "password is empty"));
    }
    static char longpw[700];
    memset(longpw, '!', sizeof longpw - 1); /* 3 bytes each, encoded: too long */
    set_store("redis", "single", "tcp", "r:6379");
    env_set("REDIS_AUTH", longpw);
    expect_refused("REDIS_AUTH");
    assert_null(strstr(err, "!!")); /* the password is not in the message */
    set_store(NULL, NULL, NULL, NULL);
    env_set("REDIS_AUTH", "s3cret");
    expect_refused("REDIS_AUTH");
    assert_null(strstr(err, "s3cret"));
}

static void test_switches(void **unused)
{
    (void)unused;
    expect_flag("GRPC_SERVER_USE_TLS", "true", "tls", "grpc");
    expect_flag("LIMIT_RESPONSE_HEADERS_ENABLED", "TRUE", "grpc-ratelimit-headers", "true");
    expect_flag("QUOTA_MODE", "True", "grpc-quota-mode", "true");
    env_flag_t out[SETTINGS_ENV_MAX];
    size_t n = 99;
    env_clear();
    env_set("GRPC_SERVER_USE_TLS", "false");
    env_set("LIMIT_RESPONSE_HEADERS_ENABLED", "false");
    env_set("QUOTA_MODE", "false");
    assert_int_equal(read_env(out, &n), 0);
    assert_int_equal(n, 0);
    env_clear();
    env_set("GRPC_SERVER_USE_TLS", "yes");
    expect_refused("GRPC_SERVER_USE_TLS");
    env_clear();
    env_set("LIMIT_RESPONSE_HEADERS_ENABLED", "1");
    expect_refused("LIMIT_RESPONSE_HEADERS_ENABLED");
    env_clear();
    env_set("QUOTA_MODE", "on");
    expect_refused("QUOTA_MODE");
}

/* ---- through server_settings_parse: the real environment ---- */

static const char *const real_vars[] = {"PORT",       "GRPC_PORT",   "LOG_LEVEL",   "HOST",
                                        "USE_STATSD", "STATSD_HOST", "RUNTIME_ROOT"};
#define NREAL (sizeof real_vars / sizeof real_vars[0])

static void real_clear(void)
{
    for (size_t i = 0; i < NREAL; i++)
        unsetenv(real_vars[i]);
}

/* Parses argv (NULL-terminated, without argv[0]) over the defaults. */
static int parse(server_settings_t *c, const char *const *args)
{
    char *argv[16] = {"sluiced"};
    int argc = 1;
    for (; args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    server_settings_defaults(c);
    err[0] = '\0';
    return server_settings_parse(c, argc, argv, err, sizeof err);
}

static void test_precedence(void **unused)
{
    (void)unused;
    char path[] = "/tmp/sluice-settings-env-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "http_port: 7001\ngrpc_port: 7002\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    server_settings_t c;
    real_clear();
    setenv("PORT", "7101", 1);
    setenv("GRPC_PORT", "7102", 1);
    const char *args[] = {"--config", path, "--grpc-port", "7202", NULL};
    int rc = parse(&c, args);
    if (rc != 0)
        fail_msg("%s", err);
    assert_int_equal(c.http_port, 7101); /* the variable over the file */
    assert_int_equal(c.grpc_port, 7202); /* the flag over the variable */
    server_settings_free(&c);
    setenv("STATSD_HOST", "statsd", 1); /* a refusal stops the parse, naming it */
    rc = parse(&c, args);
    server_settings_free(&c);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "STATSD_HOST"));
    real_clear();
    /* RUNTIME_ROOT's directory is read as upstream reads it; a --rules given instead is read as
     * --rules is, and --rules-watch given changes nothing of that */
    setenv("RUNTIME_ROOT", "/data", 1);
    const char *watch[] = {"--rules-watch", "1s", NULL};
    assert_int_equal(parse(&c, watch), 0);
    assert_string_equal(c.rules_paths[0], "/data/config");
    assert_string_equal(c.rules_walk, "all-dotfiles");
    server_settings_free(&c);
    const char *rules[] = {"--rules", "/etc/sluice/rules.yaml", NULL};
    assert_int_equal(parse(&c, rules), 0);
    assert_string_equal(c.rules_paths[0], "/etc/sluice/rules.yaml");
    assert_null(c.rules_walk);
    server_settings_free(&c);
    real_clear();
    unlink(path);
}

/* ---- seeded random combinations ---- */

/* A value for a variable that gives a flag, to be refused or not by its own rule. */
typedef struct pick {
    const char *name, *value;
    bool refuse; /* sluiced must refuse this one */
} pick_t;

/* Draws a combination: some flag rows, some accepted rows at a good or bad value, sometimes a
 * refused row; returns how many (at most cap). */
static size_t draw(prng_t *r, pick_t *p, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < NFLAGGED && k < cap; i++) {
        if (prng_chance(r, 30))
            p[k++] = (pick_t){flagged[i].name, flagged[i].value, false};
    }
    for (size_t i = 0; i < NACCEPTED && k < cap; i++) {
        if (prng_chance(r, 10)) {
            bool bad = prng_chance(r, 20);
            p[k++] = (pick_t){accepted[i].name, bad ? accepted[i].bad : accepted[i].ok, bad};
        }
    }
    if (prng_chance(r, 25) && k < cap) {
        size_t i = (size_t)prng_range(r, 0, (int64_t)NREFUSED - 1);
        p[k++] = (pick_t){refused[i], "x", true};
    }
    return k;
}

static void test_random_refusals_named(void **unused)
{
    (void)unused;
    uint64_t seed = prop_seed();
    long refusals = 0, clean = 0;
    for (long c = 0; c < 3000; c++) {
        prng_t r = prop_case_prng(seed, 1, c);
        pick_t p[64];
        size_t k = draw(&r, p, 64);
        bool any_refused = false;
        env_clear();
        for (size_t i = 0; i < k; i++) {
            env_set(p[i].name, p[i].value);
            any_refused = any_refused || p[i].refuse;
        }
        env_flag_t out[SETTINGS_ENV_MAX];
        size_t n = 99;
        int rc = read_env(out, &n);
        if (any_refused) {
            bool named = false;
            for (size_t i = 0; i < k; i++)
                named = named || (p[i].refuse && err_names(p[i].name));
            if (rc != -1 || n != 0 || !named)
                fail_msg("seed %#" PRIx64 " case %ld: rc %d n %zu '%s'", seed, c, rc, n, err);
            refusals++;
            continue;
        }
        if (rc != 0)
            fail_msg("seed %#" PRIx64 " case %ld: refused '%s'", seed, c, err);
        for (size_t i = 0; i < NFLAGGED; i++) { /* every flag row set gave its flag */
            const char *want = fake_get(flagged[i].name);
            const char *got = flag_value(out, n, flagged[i].flag);
            if ((want == NULL) != (got == NULL) || (want != NULL && strcmp(want, got) != 0))
                fail_msg("seed %#" PRIx64 " case %ld: %s", seed, c, flagged[i].name);
        }
        settings_env_free(out, n);
        clean++;
    }
    assert_true(refusals > 100 && clean > 100); /* both sides were drawn */
}

static void test_random_flag_wins(void **unused)
{
    (void)unused;
    uint64_t seed = prop_seed();
    static const char *const levels[] = {"error", "warn", "info", "debug"}; /* log_level_t order */
    for (long c = 0; c < 300; c++) {
        prng_t r = prop_case_prng(seed, 2, c);
        real_clear();
        const char *args[8] = {NULL};
        size_t na = 0;
        int env_http = (int)prng_range(&r, 10000, 29998), flag_http = env_http + 1;
        int env_grpc = (int)prng_range(&r, 30000, 59998), flag_grpc = env_grpc + 1;
        int env_lvl = (int)prng_range(&r, 0, 3), flag_lvl = (env_lvl + 1) % 4;
        bool set_http = prng_chance(&r, 70), set_grpc = prng_chance(&r, 70),
             set_lvl = prng_chance(&r, 70);
        bool fl_http = prng_chance(&r, 50), fl_grpc = prng_chance(&r, 50),
             fl_lvl = prng_chance(&r, 50);
        char eh[16], eg[16], fh[16], fg[16];
        snprintf(eh, sizeof eh, "%d", env_http);
        snprintf(eg, sizeof eg, "%d", env_grpc);
        snprintf(fh, sizeof fh, "%d", flag_http);
        snprintf(fg, sizeof fg, "%d", flag_grpc);
        if (set_http)
            setenv("PORT", eh, 1);
        if (set_grpc)
            setenv("GRPC_PORT", eg, 1);
        if (set_lvl)
            setenv("LOG_LEVEL", levels[env_lvl], 1);
        if (fl_http) {
            args[na++] = "--http-port";
            args[na++] = fh;
        }
        if (fl_grpc) {
            args[na++] = "--grpc-port";
            args[na++] = fg;
        }
        if (fl_lvl) {
            args[na++] = "--log-level";
            args[na++] = levels[flag_lvl];
        }
        server_settings_t s;
        if (parse(&s, args) != 0)
            fail_msg("seed %#" PRIx64 " case %ld: %s", seed, c, err);
        int want_http = fl_http ? flag_http : set_http ? env_http : 8390;
        int want_grpc = fl_grpc ? flag_grpc : set_grpc ? env_grpc : 8391;
        int want_lvl = fl_lvl ? flag_lvl : set_lvl ? env_lvl : (int)LOG_INFO;
        if (s.http_port != want_http || s.grpc_port != want_grpc || (int)s.log_level != want_lvl)
            fail_msg("seed %#" PRIx64 " case %ld: http %d/%d grpc %d/%d level %d/%d", seed, c,
                     s.http_port, want_http, s.grpc_port, want_grpc, (int)s.log_level, want_lvl);
        server_settings_free(&s);
    }
    real_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_set),       cmocka_unit_test(test_each_flag_row),
        cmocka_unit_test(test_each_refused_row),  cmocka_unit_test(test_each_accepted_row),
        cmocka_unit_test(test_log_level),         cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_runtime_directory), cmocka_unit_test(test_store),
        cmocka_unit_test(test_store_auth),        cmocka_unit_test(test_switches),
        cmocka_unit_test(test_precedence),        cmocka_unit_test(test_random_refusals_named),
        cmocka_unit_test(test_random_flag_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
