/*
 * settings_env.c - envoyproxy/ratelimit's environment variables (its src/settings/settings.go)
 * read as sluiced's flags (see settings_env.h).
 *
 * Every variable upstream reads is a row of env_vars[]: a flag it gives as it is, values that
 * are accepted because they say what sluiced does anyway, or a refusal with its reason. The few
 * that combine (the runtime directory's three parts, the Redis store's four, the two listen
 * addresses, TLS) are read by the functions below the table. A variable that is set is never
 * ignored: it gives a flag, matches what sluiced does, or stops the start naming it.
 */
#include "server/settings_env.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum env_kind {
    ENV_FLAG,    /* the value is the flag's value */
    ENV_ACCEPT,  /* accepted when it is one of `values` ('|'-separated, any case) */
    ENV_REFUSE,  /* refused whenever set */
    ENV_COMBINE, /* read with others by a function below */
} env_kind_t;

typedef struct env_var {
    const char *name;
    env_kind_t kind;
    const char *arg; /* ENV_FLAG: the flag; ENV_ACCEPT: the values */
    const char *why; /* ENV_ACCEPT, ENV_REFUSE: why another value cannot be honoured */
} env_var_t;

#define NO_POOL     "sluiced's store connection has no pool, pipeline or startup retry to tune"
#define NO_STATS    "sluiced serves its metrics at /metrics on the HTTP port, with no statsd"
#define NO_XDS      "sluiced reads rules files (RUNTIME_ROOT), not an xDS server"
#define NO_MEMCACHE "sluiced's stores are memory and Redis, not memcached"
#define NO_SECOND   "sluiced keeps every limit in one store"
#define NO_TRACING  "sluiced exports no traces"

static const env_var_t env_vars[] = {
    {"HOST", ENV_COMBINE, NULL, NULL},
    {"GRPC_HOST", ENV_COMBINE, NULL, NULL},
    {"PORT", ENV_FLAG, "http-port", NULL},
    {"GRPC_PORT", ENV_FLAG, "grpc-port", NULL},
    {"DEBUG_HOST", ENV_REFUSE, NULL, "sluiced has no debug port: /rules and /metrics are on PORT"},
    {"DEBUG_PORT", ENV_REFUSE, NULL, "sluiced has no debug port: /rules and /metrics are on PORT"},
    {"GRPC_UDS", ENV_REFUSE, NULL, "sluiced's gRPC port listens on TCP only"},
    {"GRPC_MAX_CONNECTION_AGE", ENV_REFUSE, NULL,
     "sluiced closes idle connections instead (--idle-timeout)"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", ENV_REFUSE, NULL,
     "sluiced closes idle connections instead (--idle-timeout)"},
    {"GRPC_SERVER_USE_TLS", ENV_COMBINE, NULL, NULL},
    {"GRPC_SERVER_TLS_CERT", ENV_FLAG, "tls-cert", NULL},
    {"GRPC_SERVER_TLS_KEY", ENV_FLAG, "tls-key", NULL},
    {"GRPC_CLIENT_TLS_CACERT", ENV_FLAG, "tls-client-ca", NULL},
    {"GRPC_CLIENT_TLS_SAN", ENV_REFUSE, NULL,
     "sluiced checks a client certificate's CA, not its name"},
    {"LOG_LEVEL", ENV_COMBINE, NULL, NULL},
    {"LOG_FORMAT", ENV_ACCEPT, "text", "sluiced logs text lines"},
    {"CONFIG_TYPE", ENV_ACCEPT, "FILE", NO_XDS},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", ENV_ACCEPT, "false",
     "sluiced does not start when a rules file or directory it is given is missing"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", ENV_ACCEPT, "false",
     "sluiced is healthy as soon as it listens"},
    {"CONFIG_GRPC_XDS_NODE_ID", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_NODE_METADATA", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_SERVER_URL", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_SERVER_USE_TLS", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ENV_REFUSE, NULL, NO_XDS},
    {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", ENV_REFUSE, NULL, NO_XDS},
    {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", ENV_REFUSE, NULL, NO_XDS},
    {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", ENV_REFUSE, NULL, NO_XDS},
    {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", ENV_REFUSE, NULL, NO_XDS},
    {"XDS_CLIENT_BACKOFF_JITTER", ENV_REFUSE, NULL, NO_XDS},
    {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", ENV_REFUSE, NULL, NO_XDS},
    {"USE_DOG_STATSD", ENV_ACCEPT, "false", NO_STATS},
    {"USE_DOG_STATSD_MOGRIFIERS", ENV_REFUSE, NULL, NO_STATS},
    {"USE_STATSD", ENV_ACCEPT, "false", NO_STATS},
    {"STATSD_HOST", ENV_REFUSE, NULL, NO_STATS},
    {"STATSD_PORT", ENV_REFUSE, NULL, NO_STATS},
    {"EXTRA_TAGS", ENV_REFUSE, NULL, NO_STATS},
    {"STATS_FLUSH_INTERVAL", ENV_REFUSE, NULL, NO_STATS},
    {"DISABLE_STATS", ENV_ACCEPT, "false", "sluiced always counts its decisions"},
    {"USE_PROMETHEUS", ENV_ACCEPT, "false",
     "sluiced's Prometheus metrics are at /metrics on PORT, not on a port of their own"},
    {"PROMETHEUS_ADDR", ENV_REFUSE, NULL, NO_STATS},
    {"PROMETHEUS_PATH", ENV_REFUSE, NULL, NO_STATS},
    {"PROMETHEUS_MAPPER_YAML", ENV_REFUSE, NULL, NO_STATS},
    {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", ENV_REFUSE, NULL, NO_STATS},
    {"RUNTIME_ROOT", ENV_COMBINE, NULL, NULL},
    {"RUNTIME_SUBDIRECTORY", ENV_COMBINE, NULL, NULL},
    {"RUNTIME_APPDIRECTORY", ENV_COMBINE, NULL, NULL},
    {"RUNTIME_IGNOREDOTFILES", ENV_COMBINE, NULL, NULL},
    {"RUNTIME_WATCH_ROOT", ENV_ACCEPT, "true|false",
     "it is true or false: sluiced applies a swap of RUNTIME_ROOT's link and a change in the "
     "directory either way"},
    {"EXPIRATION_JITTER_MAX_SECONDS", ENV_REFUSE, NULL,
     "sluiced's keys expire with their window, without jitter"},
    {"LOCAL_CACHE_SIZE_IN_BYTES", ENV_ACCEPT, "0",
     "the Redis store keeps its own cache of keys over their limit, which has no size to set"},
    {"NEAR_LIMIT_RATIO", ENV_REFUSE, NULL, NO_STATS},
    {"CACHE_KEY_PREFIX", ENV_ACCEPT, "", "sluiced names its keys after its rules"},
    {"BACKEND_TYPE", ENV_COMBINE, NULL, NULL},
    {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", ENV_ACCEPT, "true",
     "sluiced decides a request's descriptors all or nothing: none is charged when one is over"},
    {"LIMIT_RESPONSE_HEADERS_ENABLED", ENV_COMBINE, NULL, NULL},
    {"LIMIT_LIMIT_HEADER", ENV_ACCEPT, "RateLimit-Limit",
     "sluiced's headers have the standard names"},
    {"LIMIT_REMAINING_HEADER", ENV_ACCEPT, "RateLimit-Remaining",
     "sluiced's headers have the standard names"},
    {"LIMIT_RESET_HEADER", ENV_ACCEPT, "RateLimit-Reset",
     "sluiced's headers have the standard names"},
    {"REDIS_SOCKET_TYPE", ENV_COMBINE, NULL, NULL},
    {"REDIS_TYPE", ENV_COMBINE, NULL, NULL},
    {"REDIS_URL", ENV_COMBINE, NULL, NULL},
    {"REDIS_POOL_SIZE", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_AUTH", ENV_COMBINE, NULL, NULL},
    {"REDIS_TLS", ENV_ACCEPT, "false", "sluiced's store speaks to Redis without TLS"},
    {"REDIS_TLS_CLIENT_CERT", ENV_REFUSE, NULL, "sluiced's store speaks to Redis without TLS"},
    {"REDIS_TLS_CLIENT_KEY", ENV_REFUSE, NULL, "sluiced's store speaks to Redis without TLS"},
    {"REDIS_TLS_CACERT", ENV_REFUSE, NULL, "sluiced's store speaks to Redis without TLS"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", ENV_REFUSE, NULL,
     "sluiced's store speaks to Redis without TLS"},
    {"REDIS_PIPELINE_WINDOW", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_PIPELINE_LIMIT", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_PERSECOND", ENV_ACCEPT, "false", NO_SECOND},
    {"REDIS_PERSECOND_SOCKET_TYPE", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_TYPE", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_URL", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_POOL_SIZE", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_AUTH", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_TLS", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_SENTINEL_AUTH", ENV_REFUSE, NULL,
     "sluiced's store speaks to Redis or Redis Cluster, not Sentinel"},
    {"REDIS_PERSECOND_SENTINEL_AUTH", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_PIPELINE_WINDOW", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_PIPELINE_LIMIT", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_TIMEOUT", ENV_REFUSE, NULL,
     "sluiced bounds each decision instead (--store-timeout, default 5ms)"},
    {"REDIS_PERSECOND_TIMEOUT", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", ENV_REFUSE, NULL, NO_SECOND},
    {"REDIS_STARTUP_INITIAL_INTERVAL", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_STARTUP_MAX_INTERVAL", ENV_REFUSE, NULL, NO_POOL},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", ENV_REFUSE, NULL, NO_POOL},
    {"MEMCACHE_HOST_PORT", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_MAX_IDLE_CONNS", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_SRV", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_SRV_REFRESH", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_TLS", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_TLS_CLIENT_CERT", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_TLS_CLIENT_KEY", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_TLS_CACERT", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", ENV_REFUSE, NULL, NO_MEMCACHE},
    {"SHADOW_MODE", ENV_ACCEPT, "false", "set shadow_mode on the descriptors instead"},
    {"QUOTA_MODE", ENV_COMBINE, NULL, NULL},
    {"RESPONSE_DYNAMIC_METADATA", ENV_ACCEPT, "false", "sluiced sends no dynamic metadata"},
    {"MERGE_DOMAIN_CONFIG", ENV_ACCEPT, "false", "sluiced refuses two files for one domain"},
    {"TRACING_ENABLED", ENV_ACCEPT, "false", NO_TRACING},
    {"TRACING_SERVICE_NAME", ENV_REFUSE, NULL, NO_TRACING},
    {"TRACING_SERVICE_NAMESPACE", ENV_REFUSE, NULL, NO_TRACING},
    {"TRACING_SERVICE_INSTANCE_ID", ENV_REFUSE, NULL, NO_TRACING},
    {"TRACING_EXPORTER_PROTOCOL", ENV_REFUSE, NULL, NO_TRACING},
    {"TRACING_SAMPLING_RATE", ENV_REFUSE, NULL, NO_TRACING},
};
#define NENV_VARS (sizeof env_vars / sizeof env_vars[0])

typedef struct env_read {
    const char *(*get)(const char *name);
    env_flag_t *out;
    size_t *n;
    char *err;
    size_t cap;
} env_read_t;

static int env_fail(env_read_t *r, const char *var, const char *fmt, const char *a, const char *b)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, b);
    snprintf(r->err, r->cap, "%s is set, but %s", var, msg);
    return -1;
}

/* Adds the flag var gives (value copied). */
static int env_give(env_read_t *r, const char *var, const char *flag, const char *value)
{
    if (*r->n == SETTINGS_ENV_MAX) {
        snprintf(r->err, r->cap, "%s: too many settings from the environment", var);
        return -1;
    }
    char *copy = strdup(value);
    if (copy == NULL) {
        snprintf(r->err, r->cap, "%s: out of memory", var);
        return -1;
    }
    r->out[(*r->n)++] = (env_flag_t){.var = var, .flag = flag, .value = copy};
    return 0;
}

/* True when value is one of values ('|'-separated), compared without case. */
static bool env_one_of(const char *values, const char *value)
{
    size_t len = strlen(value);
    for (const char *p = values;; p++) {
        const char *end = strchr(p, '|');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && strncasecmp(p, value, n) == 0)
            return true;
        if (end == NULL)
            return false;
        p = end;
    }
}

/* One row that is not ENV_COMBINE. */
static int env_row(env_read_t *r, const env_var_t *v, const char *value)
{
    switch (v->kind) {
    case ENV_FLAG:
        return env_give(r, v->name, v->arg, value);
    case ENV_ACCEPT:
        if (env_one_of(v->arg, value))
            return 0;
        snprintf(r->err, r->cap,
                 "%s=%.64s cannot be honoured: %s (sluiced takes %s=%s; unset it "
                 "to start)",
                 v->name, value, v->why, v->name, v->arg[0] ? v->arg : "\"\"");
        return -1;
    case ENV_REFUSE:
        return env_fail(r, v->name, "%s (unset it to start)", v->why, "");
    case ENV_COMBINE:
        break;
    }
    return 0;
}

/* LOG_LEVEL: upstream's levels (logrus, any case) as sluiced's four. */
static int env_log_level(env_read_t *r, const char *value)
{
    static const char *const map[][2] = {
        {"trace", "debug"},  {"debug", "debug"}, {"info", "info"},   {"warn", "warn"},
        {"warning", "warn"}, {"error", "error"}, {"fatal", "error"}, {"panic", "error"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcasecmp(value, map[i][0]) == 0)
            return env_give(r, "LOG_LEVEL", "log-level", map[i][1]);
    }
    return env_fail(r, "LOG_LEVEL", "'%.32s' is not one of trace, debug, info, warn, error%s",
                    value, ", fatal or panic");
}

/* HOST and GRPC_HOST: sluiced listens on one set of addresses for every port (--bind). */
static int env_hosts(env_read_t *r)
{
    const char *http = r->get("HOST"), *grpc = r->get("GRPC_HOST");
    if (http != NULL && grpc != NULL && strcmp(http, grpc) != 0)
        return env_fail(r, "GRPC_HOST",
                        "sluiced listens on one address for every port, and HOST "
                        "is %.64s%s",
                        http, "");
    const char *addr = http != NULL ? http : grpc;
    return addr == NULL ? 0 : env_give(r, http != NULL ? "HOST" : "GRPC_HOST", "bind", addr);
}

/* RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY: the rules directory, when any is set
 * (each unset part at upstream's default), every file of it read as upstream's loader reads it
 * (goruntime: every file, in subdirectories too, whatever its name), dot-files too unless
 * RUNTIME_IGNOREDOTFILES=true (upstream's default is false). */
static int env_runtime(env_read_t *r)
{
    const char *root = r->get("RUNTIME_ROOT"), *sub = r->get("RUNTIME_SUBDIRECTORY"),
               *app = r->get("RUNTIME_APPDIRECTORY"), *dots = r->get("RUNTIME_IGNOREDOTFILES");
    if (dots != NULL && !env_one_of("true|false", dots))
        return env_fail(r, "RUNTIME_IGNOREDOTFILES", "'%.16s' is neither true nor false%s", dots,
                        "");
    if (root == NULL && sub == NULL && app == NULL)
        return 0;

    char path[4096];
    int len = snprintf(path, sizeof path, "%s/%s%s%s",
                       root != NULL ? root : "/srv/runtime_data/current", sub != NULL ? sub : "",
                       sub != NULL && sub[0] != '\0' ? "/" : "", app != NULL ? app : "config");
    if (len < 0 || (size_t)len >= sizeof path)
        return env_fail(r, "RUNTIME_ROOT", "the rules directory's path is too long%s%s", "", "");
    bool no_dots = dots != NULL && strcasecmp(dots, "true") == 0;
    if (env_give(r, "RUNTIME_ROOT", "rules", path) != 0)
        return -1;
    return env_give(r, dots != NULL ? "RUNTIME_IGNOREDOTFILES" : "RUNTIME_ROOT", "rules-files",
                    no_dots ? "all" : "all-dotfiles");
}

/* Appends s[0..len) to out (used of cap bytes so far) percent-encoded: every byte but letters,
 * digits and "-._~". False when it does not fit. */
static bool env_encode(char *out, size_t cap, size_t *used, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
        if (*used + (plain ? 1 : 3) >= cap)
            return false;
        if (plain) {
            out[(*used)++] = (char)c;
        } else {
            out[(*used)++] = '%';
            out[(*used)++] = hex[c >> 4];
            out[(*used)++] = hex[c & 15];
        }
    }
    out[*used] = '\0';
    return true;
}

/* REDIS_AUTH ("PASSWORD" or "USER:PASSWORD", as upstream splits it at its first ':') as the
 * store URL's "USER:PASSWORD@" (percent-encoded) into out; "" when unset. -1 when empty or too
 * long (the value never in the message). */
static int env_auth(env_read_t *r, char *out, size_t cap)
{
    const char *auth = r->get("REDIS_AUTH");
    size_t used = 0;
    out[0] = '\0';
    if (auth == NULL)
        return 0;
    const char *colon = strchr(auth, ':');
    const char *pass = colon != NULL ? colon + 1 : auth;
    if (pass[0] == '\0')
        return env_fail(r, "REDIS_AUTH",
                        "its password is empty (it is PASSWORD or "
                        "USER:PASSWORD)%s%s",
                        "", "");
    if ((colon != NULL && !env_encode(out, cap, &used, auth, (size_t)(colon - auth))) ||
        used + 1 >= cap || (out[used++] = ':', !env_encode(out, cap, &used, pass, strlen(pass))) ||
        used + 1 >= cap)
        return env_fail(r, "REDIS_AUTH", "it is too long%s%s", "", "");
    out[used++] = '@';
    out[used] = '\0';
    return 0;
}

/* BACKEND_TYPE, REDIS_TYPE, REDIS_SOCKET_TYPE, REDIS_URL, REDIS_AUTH: --store. No REDIS_URL:
 * the memory store (upstream's default, a nutcracker socket, is nothing sluiced can reach). */
static int env_store(env_read_t *r)
{
    const char *backend = r->get("BACKEND_TYPE"), *type = r->get("REDIS_TYPE"),
               *sock = r->get("REDIS_SOCKET_TYPE"), *url = r->get("REDIS_URL");
    if (backend != NULL && strcasecmp(backend, "redis") != 0)
        return env_fail(r, "BACKEND_TYPE",
                        "'%.32s' is not a store sluiced has%s: it has memory "
                        "and Redis",
                        backend, "");
    if (url == NULL) {
        if (type != NULL || sock != NULL || r->get("REDIS_AUTH") != NULL)
            return env_fail(
                r,
                type != NULL   ? "REDIS_TYPE"
                : sock != NULL ? "REDIS_SOCKET_TYPE"
                               : "REDIS_AUTH",
                "REDIS_URL is not: give both, or neither for sluiced's memory store%s%s", "", "");
        return 0;
    }
    if (sock == NULL || strcasecmp(sock, "tcp") != 0)
        return env_fail(r, "REDIS_URL",
                        "REDIS_SOCKET_TYPE is %.16s: sluiced reaches Redis over "
                        "TCP only (set REDIS_SOCKET_TYPE=tcp%s)",
                        sock != NULL ? sock : "unset (unix)", ", with REDIS_URL host:port");
    bool cluster = type != NULL && strcasecmp(type, "cluster") == 0;
    if (type != NULL && !cluster && strcasecmp(type, "single") != 0)
        return env_fail(r, "REDIS_TYPE",
                        "'%.32s' is not a Redis sluiced reaches%s: SINGLE or "
                        "CLUSTER",
                        type, "");
    const char *scheme = cluster ? "redis-cluster://" : "redis://";
    if (strncmp(url, "redis://", 8) == 0)
        url += 8;
    char auth[3 * 512 + 2], store[4096 + sizeof auth];
    if (env_auth(r, auth, sizeof auth) != 0)
        return -1;
    int len = snprintf(store, sizeof store, "%s%s%s", scheme, auth, url);
    if (len < 0 || (size_t)len >= sizeof store)
        return env_fail(r, "REDIS_URL", "it is too long%s%s", "", "");
    return env_give(r, "REDIS_URL", "store", store);
}

/* GRPC_SERVER_USE_TLS=true: TLS on the gRPC port only (--tls grpc); its certificate and key
 * come from GRPC_SERVER_TLS_CERT and _KEY (rows of the table). LIMIT_RESPONSE_HEADERS_ENABLED=
 * true: --grpc-ratelimit-headers. QUOTA_MODE=true: --grpc-quota-mode. */
static int env_switches(env_read_t *r)
{
    const char *tls = r->get("GRPC_SERVER_USE_TLS"),
               *hdr = r->get("LIMIT_RESPONSE_HEADERS_ENABLED"), *quota = r->get("QUOTA_MODE");
    if (tls != NULL && !env_one_of("true|false", tls))
        return env_fail(r, "GRPC_SERVER_USE_TLS", "'%.16s' is neither true nor false%s", tls, "");
    if (hdr != NULL && !env_one_of("true|false", hdr))
        return env_fail(r, "LIMIT_RESPONSE_HEADERS_ENABLED", "'%.16s' is neither true nor false%s",
                        hdr, "");
    if (quota != NULL && !env_one_of("true|false", quota))
        return env_fail(r, "QUOTA_MODE", "'%.16s' is neither true nor false%s", quota, "");
    if (quota != NULL && strcasecmp(quota, "true") == 0 &&
        env_give(r, "QUOTA_MODE", "grpc-quota-mode", "true") != 0)
        return -1;
    if (tls != NULL && strcasecmp(tls, "true") == 0 &&
        env_give(r, "GRPC_SERVER_USE_TLS", "tls", "grpc") != 0)
        return -1;
    if (hdr != NULL && strcasecmp(hdr, "true") == 0)
        return env_give(r, "LIMIT_RESPONSE_HEADERS_ENABLED", "grpc-ratelimit-headers", "true");
    return 0;
}

int settings_env_read(const char *(*get)(const char *name), env_flag_t *out, size_t *n, char *err,
                      size_t err_cap)
{
    env_read_t r = {.get = get, .out = out, .n = n, .err = err, .cap = err_cap};
    *n = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < NENV_VARS; i++) {
        const char *value = get(env_vars[i].name);
        if (value != NULL && env_vars[i].kind != ENV_COMBINE)
            rc = env_row(&r, &env_vars[i], value);
    }
    const char *level = get("LOG_LEVEL");
    if (rc == 0 && level != NULL)
        rc = env_log_level(&r, level);
    if (rc == 0)
        rc = env_hosts(&r);
    if (rc == 0)
        rc = env_runtime(&r);
    if (rc == 0)
        rc = env_store(&r);
    if (rc == 0)
        rc = env_switches(&r);
    if (rc != 0) {
        settings_env_free(out, *n);
        *n = 0;
    }
    return rc;
}

bool settings_env_upstream(const char *(*get)(const char *name))
{
    return get("RUNTIME_ROOT") != NULL || get("RUNTIME_SUBDIRECTORY") != NULL ||
           get("RUNTIME_APPDIRECTORY") != NULL;
}

void settings_env_free(env_flag_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(out[i].value);
        out[i].value = NULL;
    }
}
