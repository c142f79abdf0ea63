/*
 * settings.c - sluiced's settings from defaults, a YAML file, flags and the environment (see
 * settings.h).
 *
 * Every setting is described once, in options[] below: its flag, its name in the file, how its
 * value is read and where it goes in server_settings_t, and its --help line. The file and the
 * flags go through the same value readers, so "--port 70000" and "port: 70000" fail alike, each
 * message naming where the value came from (the flag, or the file with line and column). The
 * readers are in settings_values.c.
 *
 * Flags are parsed in two passes: the first checks their syntax and finds --config, --help and
 * --version; the file is then applied; the second pass applies the flags over it, in order.
 *
 * long because: the one table of every setting, and the layering of defaults, file, environment
 * and flags with the checks across settings, belong together.
 */
#include "server/settings_impl.h"
#include "server/settings_env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/http_origin.h"
#include "rules/yamltree.h"
#include "sluice/sluice.h"
#include "sluice/version.h"

#define SIZE_VALUE_MAX       (UINT64_C(1) << 50) /* largest size setting, bytes (1 PiB) */
#define COUNT_VALUE_MAX      (UINT64_C(1) << 30) /* largest count setting */
#define REQUEST_MAX_MIN      1024                /* smallest --max-request-size, bytes */
#define POLL_INTERVAL_MIN_NS SL_NS_PER_MS        /* shortest --poll-interval */
#define REPLAY_MEMORY_MIN    (64 * 1024)         /* smallest --replay-memory, bytes */

#define F(field)   offsetof(server_settings_t, field)
#define NO_MAX     INT64_MAX
#define SIZE_MAX_V ((int64_t)SIZE_VALUE_MAX)

static const option_t options[] = {
    {"config", NULL, OPT_PATH, F(config_path), 0, 0, 0, 0, CHECK_NONE, "FILE",
     "read settings from a YAML file first (flags override it)"},
    {"bind", "bind", OPT_LIST, F(bind), F(nbind), SETTINGS_BIND_MAX, 0, 0, CHECK_ADDRESS, "ADDR",
     "listen on this address (repeatable; default " SETTINGS_DEFAULT_BIND ")"},
    {"port", "port", OPT_INT, F(resp_port), 0, 0, 0, 65535, CHECK_NONE, "PORT",
     "RESP port (default 6390; 0 = off)"},
    {"http-port", "http_port", OPT_INT, F(http_port), 0, 0, 0, 65535, CHECK_NONE, "PORT",
     "HTTP port (default 8390; 0 = off)"},
    {"grpc-port", "grpc_port", OPT_INT, F(grpc_port), 0, 0, 0, 65535, CHECK_NONE, "PORT",
     "gRPC port: Envoy's rate limit service, h2c (default 8391; 0 = off)"},
    {"grpc-ratelimit-headers", "grpc_ratelimit_headers", OPT_BOOL, F(grpc_ratelimit_headers), 0, 0,
     0, 0, CHECK_NONE, NULL, "gRPC: ask Envoy to add RateLimit headers to its responses"},
    {"grpc-quota-mode", "grpc_quota_mode", OPT_BOOL, F(grpc_quota_mode), 0, 0, 0, 0, CHECK_NONE,
     NULL, "Envoy's rate limit service: every descriptor in quota mode (docs/envoy.md)"},
    {"tls-cert", "tls_cert", OPT_STRING, F(tls_cert), 0, 0, 0, 0, CHECK_NONE, "FILE",
     "TLS certificate chain (PEM): the listeners --tls names speak TLS"},
    {"tls-key", "tls_key", OPT_STRING, F(tls_key), 0, 0, 0, 0, CHECK_NONE, "FILE",
     "the certificate's private key (PEM)"},
    {"tls-client-ca", "tls_client_ca", OPT_STRING, F(tls_client_ca), 0, 0, 0, 0, CHECK_NONE, "FILE",
     "require client certificates signed by these CAs (PEM)"},
    {"tls", "tls", OPT_STRING, F(tls_listeners), 0, 0, 0, 0, CHECK_NONE, "LIST",
     "listeners that speak TLS: resp, http, grpc, comma-separated (default all three)"},
    {"threads", "threads", OPT_INT, F(threads), 0, 0, 1, SETTINGS_THREADS_MAX, CHECK_NONE, "N",
     "worker threads, 1..256 (default: online CPUs)"},
    {"rules", "rules", OPT_LIST, F(rules_paths), F(nrules), SETTINGS_RULES_MAX, 0, 0, CHECK_NONE,
     "FILE",
     "import a rules file, or a directory's *.yaml files, at start, on SIGHUP and when they "
     "change (they own the rules they name; repeatable; sluice's format or "
     "envoyproxy/ratelimit's)"},
    {"rules-watch", "rules_watch", OPT_DURATION, F(rules_watch_ns), 0, 0, 0, 0, CHECK_NONE, "DUR",
     "after a change in a rules file or directory, wait this long for more, then reload "
     "(default 200ms; 0: reload on SIGHUP only)"},
    {"rules-files", "rules_files", OPT_STRING, F(rules_walk), 0, 0, 0, 0, CHECK_NONE, "WHICH",
     "which files of a rules directory are read: yaml (its *.yaml and *.yml, the default), all "
     "(every file, subdirectories too, dot-files left out), all-dotfiles (dot-files too)"},
    {"rules-replace", "rules_replace", OPT_LIST, F(rules_replace_paths), F(nrules_replace),
     SETTINGS_RULES_MAX, 0, 0, CHECK_NONE, "FILE",
     "as --rules, but the files replace every rule in the store, API-made ones too"},
    {"config-store", "config_store", OPT_STRING, F(config_store), 0, 0, 0, 0, CHECK_NONE,
     "URL|PATH", "config store: SQLite path or URL (default " SETTINGS_DEFAULT_STORE ")"},
    {"store", "store", OPT_STRING, F(request_store), 0, 0, 0, 0, CHECK_NONE, "URL",
     "request store: memory, redis://host:port, redis-cluster://h:p,h:p (default memory)"},
    {"store-timeout", "store_timeout", OPT_DURATION, F(store_timeout_ns), 0, 0, 0, 0, CHECK_NONE,
     "DUR", "a decision's deadline with the Redis store (default 5ms)"},
    {"snapshot", "snapshot", OPT_STRING, F(snapshot_path), 0, 0, 0, 0, CHECK_NONE, "PATH",
     "snapshot file (default " SETTINGS_DEFAULT_SNAPSHOT "; \"\" = none)"},
    {"snapshot-interval", "snapshot_interval", OPT_DURATION, F(snapshot_interval_ns), 0, 0, 0, 0,
     CHECK_NONE, "DUR", "snapshot period (default 60s; 0 = only at shutdown)"},
    {"poll-interval", "poll_interval", OPT_DURATION, F(poll_interval_ns), 0, 0,
     POLL_INTERVAL_MIN_NS, 0, CHECK_NONE, "DUR", "config store version poll (default 1s)"},
    {"override-ttl", "override_ttl", OPT_DURATION, F(override_ttl_ns), 0, 0, 0, 0, CHECK_NONE,
     "DUR", "how long a looked-up override is cached (default 10s)"},
    {"override-timeout", "override_timeout", OPT_DURATION, F(override_timeout_ns), 0, 0, 0, 0,
     CHECK_NONE, "DUR",
     "longest a decision waits for a config store that answers no lookup (default 200ms; 0 = "
     "as long as it takes)"},
    {"stop-delay", "stop_delay", OPT_DURATION, F(stop_delay_ns), 0, 0, 0, 0, CHECK_NONE, "DUR",
     "after SIGTERM, serve this long with the health checks failing, then stop (default 0; a "
     "second signal stops at once)"},
    {"max-clients", "max_clients", OPT_COUNT, F(max_clients), 0, 0, 1, (int64_t)COUNT_VALUE_MAX,
     CHECK_NONE, "N", "most connections at once (default 10000)"},
    {"max-key-length", "max_key_length", OPT_COUNT, F(key_max), 0, 0, 1, (int64_t)COUNT_VALUE_MAX,
     CHECK_NONE, "N", "longest rate-limit key, bytes (default 1024)"},
    {"max-request-size", "max_request_size", OPT_SIZE, F(request_max), 0, 0, REQUEST_MAX_MIN,
     SIZE_MAX_V, CHECK_NONE, "BYTES", "largest request, e.g. 512k, 1m (default 512k)"},
    {"idle-timeout", "idle_timeout", OPT_DURATION, F(idle_timeout_ns), 0, 0, 0, 0, CHECK_NONE,
     "DUR", "close idle connections after this (default 300s; 0 = never)"},
    {"output-buffer-hard", "output_buffer_hard", OPT_SIZE, F(output_hard), 0, 0, 0, SIZE_MAX_V,
     CHECK_NONE, "BYTES", "close a client with more output waiting (default 32m; 0 = none)"},
    {"output-buffer-soft", "output_buffer_soft", OPT_SIZE, F(output_soft), 0, 0, 0, SIZE_MAX_V,
     CHECK_NONE, "BYTES", "close a client above this for the soft time (default 8m; 0 = none)"},
    {"output-buffer-soft-time", "output_buffer_soft_time", OPT_DURATION, F(output_soft_ns), 0, 0, 0,
     0, CHECK_NONE, "DUR", "how long output may stay above the soft limit (default 60s)"},
    {"max-input-buffers", "max_input_buffers", OPT_SIZE, F(input_buffers_max), 0, 0, 0, SIZE_MAX_V,
     CHECK_NONE, "BYTES", "cap of all clients' input buffers together (default 512m; 0 = none)"},
    {"max-memory", "max_memory", OPT_SIZE, F(max_memory), 0, 0, 0, SIZE_MAX_V, CHECK_NONE, "BYTES",
     "memory cap of every rule's keys together, >= 64k (default 0 = none)"},
    {"max-inline-rules", "max_inline_rules", OPT_COUNT, F(max_inline), 0, 0, 16, 1000000,
     CHECK_NONE, "N", "most SL.THROTTLE/CL.THROTTLE parameter sets at once (default 1024)"},
    {"max-inline-per-address", "max_inline_per_address", OPT_COUNT, F(max_inline_address), 0, 0, 1,
     1000000, CHECK_NONE, "N",
     "most of them one client address may make (default a quarter of --max-inline-rules)"},
    {"metrics-inline-rules", "metrics_inline_rules", OPT_COUNT, F(metrics_inline), 0, 0, 0, 1000000,
     CHECK_NONE, "N", "inline rules with /metrics series of their own (default 64)"},
    {"replay-timeout", "replay_timeout", OPT_DURATION, F(replay_timeout_ns), 0, 0, SL_NS_PER_MS, 0,
     CHECK_NONE, "DUR", "POST /v1/replay stops this long after it arrived (default 5s)"},
    {"replay-memory", "replay_memory", OPT_SIZE, F(replay_memory), 0, 0, REPLAY_MEMORY_MIN,
     SIZE_MAX_V, CHECK_NONE, "BYTES",
     "what one replay's key table and tallies may hold (default 64m)"},
    {"replay-concurrency", "replay_concurrency", OPT_COUNT, F(replay_concurrency), 0, 0, 1,
     SETTINGS_REPLAYS_MAX, CHECK_NONE, "N",
     "replays running at once, 1..4; more get 503 (default 1)"},
    {"requirepass", "requirepass", OPT_STRING, F(requirepass), 0, 0, 0, 0, CHECK_NONE, "PW",
     "RESP password (or env SLUICE_REQUIREPASS)"},
    {"admin-token", "admin_token", OPT_STRING, F(admin_token), 0, 0, 0, 0, CHECK_NONE, "TOKEN",
     "bearer token for rule changes over HTTP (or env SLUICE_ADMIN_TOKEN)"},
    {"admin-password", "admin_password", OPT_STRING, F(admin_password), 0, 0, 0, 0, CHECK_NONE,
     "PW", "RESP user 'admin': rules, overrides, resets (or env SLUICE_ADMIN_PASSWORD)"},
    {"insecure-admin", "insecure_admin", OPT_BOOL, F(insecure_admin), 0, 0, 0, 0, CHECK_NONE, NULL,
     "allow admin with no password/token on an address that is not loopback"},
    {"trusted-proxy", "trusted_proxies", OPT_LIST, F(trusted_proxies), F(ntrusted),
     SETTINGS_TRUSTED_MAX, 0, 0, CHECK_CIDR, "CIDR",
     "trust X-Forwarded-For from this network (repeatable)"},
    {"http-host", "http_host", OPT_LIST, F(http_hosts), F(nhttp_hosts), SETTINGS_HOSTS_MAX, 0, 0,
     CHECK_NONE, "NAME",
     "a name clients reach the HTTP port by, besides its addresses (repeatable; * = any)"},
    {"log-level", "log_level", OPT_LOG_LEVEL, F(log_level), 0, 0, 0, 0, CHECK_NONE, "LEVEL",
     "error, warn, info or debug (default info)"},
    {"help", NULL, OPT_FLAG, 0, 0, 0, 0, 0, CHECK_NONE, NULL, "print this help and exit"},
    {"version", NULL, OPT_FLAG, 0, 0, 0, 0, 0, CHECK_NONE, NULL, "print the version and exit"},
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static int tls_check(server_settings_t *c, char *err, size_t err_cap);

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* ---- applying a value ----------------------------------------------------------------------- */

static void list_clear(server_settings_t *c, const option_t *o)
{
    char **list = (char **)((char *)c + o->offset);
    size_t *n = (size_t *)((char *)c + o->count_offset);
    for (size_t i = 0; i < *n; i++) {
        free(list[i]);
        list[i] = NULL;
    }
    *n = 0;
}

/* An --http-host entry: "*", an address, or a host name as a Host header names it (no port:
 * the name is trusted on whatever port a client reaches it by). */
static int check_http_host(const source_t *s, const char *text, size_t len)
{
    char buf[48];
    http_authority_t a;
    netaddr_t ip;
    if ((len == 1 && text[0] == '*') || netaddr_parse(text, len, &ip) == NETADDR_OK ||
        (http_authority_parse(text, len, &a) == 0 && a.port < 0))
        return 0;
    return cfg_fail(s, "must be a host name (limiter.example.com), an address or *, not '%s'",
                    cfg_shown(text, buf));
}

/* Appends one list entry (text, len bytes) after checking it. */
static int list_add(server_settings_t *c, const source_t *s, const char *text, size_t len)
{
    const option_t *o = s->opt;
    char **list = (char **)((char *)c + o->offset);
    size_t *n = (size_t *)((char *)c + o->count_offset);
    if (*n == o->list_max)
        return cfg_fail(s, "more than %zu entries", o->list_max);
    if (cfg_check_text(s, text, len) != 0)
        return -1;
    if (o->offset == F(http_hosts) && check_http_host(s, text, len) != 0)
        return -1;
    char *p = cfg_dup_text(s, text, len);
    if (p == NULL)
        return -1;
    list[(*n)++] = p;
    return 0;
}

/* A list from the file: one scalar or a sequence of them. Replaces what the list held. */
static int apply_file_list(server_settings_t *c, const source_t *s)
{
    list_clear(c, s->opt);
    const yt_node_t *n = s->node;
    if (n->kind != YT_SEQ) {
        const char *t = cfg_node_text(
            s, strcmp(s->opt->metavar, "FILE") == 0   ? "a file name or a list of them"
               : strcmp(s->opt->metavar, "NAME") == 0 ? "a host name or a list of them"
                                                      : "an address or a list of them");
        return t == NULL ? -1 : list_add(c, s, t, n->len);
    }
    for (size_t i = 0; i < n->n; i++) {
        source_t item = *s;
        item.node = n->items[i];
        const char *t = cfg_node_text(&item, "a string");
        if (t == NULL || list_add(c, &item, t, item.node->len) != 0)
            return -1;
    }
    return 0;
}

/* The secrets: none may be empty. An empty password is one nobody can log in with (RESP AUTH
 * refuses it), and an empty token one any "Bearer " would match. */
static bool is_secret(const option_t *o)
{
    return o->offset == F(requirepass) || o->offset == F(admin_token) ||
           o->offset == F(admin_password);
}

/* Applies one scalar value (text, len bytes; from a flag or a file node) to its field. */
static int apply_scalar(server_settings_t *c, const source_t *s, const char *text, size_t len)
{
    const option_t *o = s->opt;
    void *field = (char *)c + o->offset;
    char buf[48];
    int64_t i64 = 0;
    uint64_t u64 = 0;
    switch (o->kind) {
    case OPT_PATH:
    case OPT_STRING: {
        if (len == 0 && is_secret(o))
            return cfg_fail(s, "must not be empty (no client could give it); leave the setting "
                               "out to have none");
        if (cfg_check_text(s, text, len) != 0)
            return -1;
        char *p = cfg_dup_text(s, text, len);
        if (p == NULL)
            return -1;
        free(*(char **)field);
        *(char **)field = p;
        return 0;
    }
    case OPT_LIST:
        return list_add(c, s, text, len);
    case OPT_INT:
        if (cfg_read_int(s, text, &i64) != 0)
            return -1;
        *(int *)field = (int)i64;
        return 0;
    case OPT_COUNT:
        if (cfg_read_int(s, text, &i64) != 0)
            return -1;
        *(size_t *)field = (size_t)i64;
        return 0;
    case OPT_SIZE:
        if (cfg_read_size(s, text, &u64) != 0)
            return -1;
        *(size_t *)field = (size_t)u64;
        return 0;
    case OPT_DURATION:
        return cfg_read_duration(s, text, (int64_t *)field);
    case OPT_LOG_LEVEL:
        for (int l = LOG_ERROR; l <= LOG_DEBUG; l++) {
            if (strcmp(text, level_names[l]) == 0) {
                *(log_level_t *)field = (log_level_t)l;
                return 0;
            }
        }
        return cfg_fail(s, "must be error, warn, info or debug, not '%s'", cfg_shown(text, buf));
    case OPT_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
            *(bool *)field = text[0] == 't';
            return 0;
        }
        return cfg_fail(s, "must be true or false, not '%s'", cfg_shown(text, buf));
    case OPT_FLAG:
        break;
    }
    return cfg_fail(s, "takes no value");
}

/* ---- the file ------------------------------------------------------------------------------- */

static const option_t *by_key(const char *key, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (options[i].key != NULL && strlen(options[i].key) == len &&
            memcmp(options[i].key, key, len) == 0)
            return &options[i];
    }
    return NULL;
}

/* Reads the whole file into a malloc'ed buffer. */
static char *read_file(const source_t *s, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        cfg_fail(s, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char *buf = malloc(SETTINGS_FILE_MAX + 1);
    size_t n = buf != NULL ? fread(buf, 1, SETTINGS_FILE_MAX + 1, f) : 0;
    bool bad = ferror(f) != 0;
    fclose(f);
    if (buf == NULL || bad || n > SETTINGS_FILE_MAX) {
        free(buf);
        cfg_fail(s, buf == NULL ? "out of memory" : bad ? "read error" : "larger than 1 MiB");
        return NULL;
    }
    *len = n;
    return buf;
}

/* Applies the settings of a parsed file. */
static int apply_file(server_settings_t *c, const yt_node_t *root, source_t *s)
{
    char buf[48];
    if (root == NULL)
        return 0; /* empty, or only comments */
    s->node = root;
    if (root->kind != YT_MAP)
        return cfg_fail(s, "expected a mapping of settings (port: 6390, ...), not %s",
                        yt_kind_name(root->kind));
    bool seen[NOPTIONS] = {false};
    for (size_t i = 0; i < root->n; i++) {
        const yt_node_t *k = root->items[2 * i];
        s->node = k;
        s->opt = NULL;
        const option_t *o = k->text != NULL && k->kind != YT_SEQ && k->kind != YT_MAP
                                ? by_key(k->text, k->len)
                                : NULL;
        if (o == NULL)
            return cfg_fail(s, "unknown setting '%s'", k->text ? cfg_shown(k->text, buf) : "?");
        if (seen[o - options])
            return cfg_fail(s, "duplicate setting '%s'", o->key);
        seen[o - options] = true;
        s->opt = o;
        s->node = root->items[2 * i + 1];
        if (o->kind == OPT_LIST) {
            if (apply_file_list(c, s) != 0)
                return -1;
            continue;
        }
        const char *t = cfg_node_text(s, o->kind == OPT_STRING ? "a string" : "a scalar value");
        if (t == NULL || apply_scalar(c, s, t, s->node->len) != 0)
            return -1;
    }
    return 0;
}

static int load_file(server_settings_t *c, const char *path, char *err, size_t cap)
{
    source_t s = {.file = path, .err = err, .cap = cap};
    size_t len = 0;
    char *text = read_file(&s, path, &len);
    if (text == NULL)
        return -1;
    yt_node_t *root = NULL;
    char yerr[YT_ERR_MAX];
    int rc = yt_parse(text, len, &root, yerr, sizeof(yerr));
    free(text);
    if (rc != 0)
        return cfg_fail(&s, "%s", yerr);
    rc = apply_file(c, root, &s);
    yt_free(root);
    return rc;
}

/* ---- flags ---------------------------------------------------------------------------------- */

static const option_t *by_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (strlen(options[i].flag) == len && memcmp(options[i].flag, name, len) == 0)
            return &options[i];
    }
    return NULL;
}

/* One flag of argv: its option and value (NULL for OPT_FLAG). */
typedef struct flag {
    const option_t *opt;
    const char *value;
} flag_t;

/* Splits argv into flags (checking names and that values are there). */
static int split_flags(int argc, char **argv, flag_t *flags, size_t *nflags, char *err, size_t cap)
{
    char buf[48];
    *nflags = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const option_t *o = NULL;
        const char *value = NULL;
        if (strcmp(arg, "-h") == 0) {
            o = by_flag("help", 4);
        } else if (strcmp(arg, "-V") == 0) {
            o = by_flag("version", 7);
        } else if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0') {
            const char *eq = strchr(arg + 2, '=');
            size_t nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            o = by_flag(arg + 2, nlen);
            if (o == NULL) {
                snprintf(err, cap, "unknown option '--%.*s' (see --help)",
                         (int)(nlen < 40 ? nlen : 40), arg + 2);
                return -1;
            }
            value = eq ? eq + 1 : NULL;
        } else {
            snprintf(err, cap, "unexpected argument '%s' (options start with --; see --help)",
                     cfg_shown(arg, buf));
            return -1;
        }
        if (o->kind == OPT_FLAG && value != NULL) {
            snprintf(err, cap, "--%s: takes no value", o->flag);
            return -1;
        }
        if (o->kind == OPT_BOOL && value == NULL) {
            value = "true";
        }
        if (o->kind != OPT_FLAG && value == NULL) {
            if (i + 1 >= argc) {
                snprintf(err, cap, "--%s: missing value (%s)", o->flag, o->metavar);
                return -1;
            }
            value = argv[++i];
        }
        flags[(*nflags)++] = (flag_t){o, value};
    }
    return 0;
}

static void print_version(void)
{
    printf("sluiced %s\n", SL_VERSION_STRING);
}

/* ---- public --------------------------------------------------------------------------------- */

static char *must_strdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL) {
        fputs("sluiced: out of memory\n", stderr);
        abort();
    }
    return p;
}

void server_settings_defaults(server_settings_t *c)
{
    memset(c, 0, sizeof(*c));
    c->bind[0] = must_strdup(SETTINGS_DEFAULT_BIND);
    c->nbind = 1;
    c->resp_port = SETTINGS_DEFAULT_RESP_PORT;
    c->http_port = SETTINGS_DEFAULT_HTTP_PORT;
    c->grpc_port = SETTINGS_DEFAULT_GRPC_PORT;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = cpus < 1 ? 1 : cpus > SETTINGS_THREADS_MAX ? SETTINGS_THREADS_MAX : (int)cpus;
    c->config_store = must_strdup(SETTINGS_DEFAULT_STORE);
    c->request_store = must_strdup("memory");
    c->store_timeout_ns = INT64_C(5000000);
    c->rules_watch_ns = INT64_C(200000000);
    c->snapshot_path = must_strdup(SETTINGS_DEFAULT_SNAPSHOT);
    c->snapshot_interval_ns = 60 * SL_NS_PER_SEC;
    c->poll_interval_ns = SL_NS_PER_SEC;
    c->override_ttl_ns = 10 * SL_NS_PER_SEC;
    c->override_timeout_ns = SETTINGS_DEFAULT_OV_TIMEOUT_MS * SL_NS_PER_MS;
    c->max_clients = SETTINGS_DEFAULT_MAX_CLIENTS;
    c->key_max = SETTINGS_DEFAULT_KEY_MAX;
    c->request_max = SETTINGS_DEFAULT_REQUEST_MAX;
    c->idle_timeout_ns = 300 * SL_NS_PER_SEC;
    c->output_hard = SETTINGS_DEFAULT_OUTPUT_HARD;
    c->output_soft = SETTINGS_DEFAULT_OUTPUT_SOFT;
    c->output_soft_ns = SETTINGS_DEFAULT_OUTPUT_SOFT_S * SL_NS_PER_SEC;
    c->input_buffers_max = SETTINGS_DEFAULT_INPUT_BUFFERS;
    c->max_memory = 0;
    c->max_inline = SETTINGS_DEFAULT_MAX_INLINE;
    c->metrics_inline = SETTINGS_DEFAULT_METRICS_INLINE;
    c->replay_timeout_ns = SETTINGS_DEFAULT_REPLAY_TIMEOUT_S * SL_NS_PER_SEC;
    c->replay_memory = SETTINGS_DEFAULT_REPLAY_MEMORY;
    c->replay_concurrency = SETTINGS_DEFAULT_REPLAYS;
    c->log_level = LOG_INFO;
}

/* Fills a secret from the environment when neither the file nor a flag gave it. A variable set
 * but empty is an error rather than "none": it is what `VAR=${UNSET}` in a unit or compose file
 * leaves, and taking it as none would start a server open to every client. */
static int secret_from_env(char **field, const char *var, char *err, size_t cap)
{
    const char *v = getenv(var);
    if (*field != NULL || v == NULL)
        return 0;
    if (v[0] == '\0') {
        snprintf(err, cap, "%s is set but empty: unset it to have no secret, or give one", var);
        return -1;
    }
    *field = strdup(v);
    if (*field == NULL) {
        snprintf(err, cap, "%s: out of memory", var);
        return -1;
    }
    return 0;
}

static const char *env_get(const char *name)
{
    return getenv(name);
}

/* envoyproxy/ratelimit's variables (settings_env.c), over the file and under the flags: each
 * as the flag it stands for; a list it gives replaces the default's or the file's. 0, or -1
 * with err naming the variable. */
static int apply_env(server_settings_t *c, const flag_t *flags, size_t nflags, char *err,
                     size_t err_cap)
{
    env_flag_t env[SETTINGS_ENV_MAX];
    size_t n = 0;
    if (settings_env_read(env_get, env, &n, err, err_cap) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const option_t *o = by_flag(env[i].flag, strlen(env[i].flag));
        bool flagged = false; /* a flag given wins over the variable */
        bool runtime = strcmp(o->flag, "rules-files") == 0; /* RUNTIME_*'s, with its --rules */
        for (size_t f = 0; f < nflags; f++)
            flagged = flagged || flags[f].opt == o ||
                      (runtime && (strcmp(flags[f].opt->flag, "rules") == 0 ||
                                   strcmp(flags[f].opt->flag, "rules-replace") == 0));
        if (flagged)
            continue;
        if (o->kind == OPT_LIST)
            list_clear(c, o);
        char why[512];
        source_t s = {.opt = o, .err = why, .cap = sizeof why};
        rc = apply_scalar(c, &s, env[i].value, strlen(env[i].value));
        if (rc != 0)
            snprintf(err, err_cap, "%s=%.64s (as %s)", env[i].var,
                     strcmp(o->flag, "store") == 0 ? "..." : env[i].value, why); /* a password */
    }
    settings_env_free(env, n);
    return rc;
}

/* Applies the flags split from the command line: --help and --version (1), then the --config
 * file (the last one wins), then the other flags over it. 0, 1, or -1 with err set. */
static int apply_flags(server_settings_t *c, const flag_t *flags, size_t nflags, char *err,
                       size_t err_cap)
{
    for (size_t i = 0; i < nflags; i++) {
        if (strcmp(flags[i].opt->flag, "help") == 0) {
            fputs(server_settings_usage(), stdout);
            return 1;
        }
        if (strcmp(flags[i].opt->flag, "version") == 0) {
            print_version();
            return 1;
        }
    }
    const char *file = NULL;
    for (size_t i = 0; i < nflags; i++) {
        if (flags[i].opt->kind == OPT_PATH)
            file = flags[i].value;
    }
    int rc = 0;
    if (settings_env_upstream(env_get)) { /* upstream's listeners are the defaults here */
        free(c->bind[0]);
        c->bind[0] = must_strdup(SETTINGS_ENV_UPSTREAM_BIND);
        c->http_port = SETTINGS_ENV_UPSTREAM_HTTP_PORT;
        c->grpc_port = SETTINGS_ENV_UPSTREAM_GRPC_PORT;
    }
    if (file != NULL) {
        source_t s = {.opt = &options[0], .err = err, .cap = err_cap};
        rc = apply_scalar(c, &s, file, strlen(file));
        if (rc == 0)
            rc = load_file(c, file, err, err_cap);
    }
    if (rc == 0)
        rc = apply_env(c, flags, nflags, err, err_cap);
    bool cleared[NOPTIONS] = {false};
    for (size_t i = 0; rc == 0 && i < nflags; i++) {
        const option_t *o = flags[i].opt;
        if (o->kind == OPT_PATH || o->kind == OPT_FLAG)
            continue;
        if (o->kind == OPT_LIST && !cleared[o - options]) {
            list_clear(c, o); /* flags replace the file's / the default list */
            cleared[o - options] = true;
        }
        source_t s = {.opt = o, .err = err, .cap = err_cap};
        rc = apply_scalar(c, &s, flags[i].value, strlen(flags[i].value));
    }
    return rc;
}

/* The checks across settings once all are read. 0, or -1 with err set. */
static int check_together(const server_settings_t *c, char *err, size_t err_cap)
{
    if (c->nbind == 0) {
        snprintf(err, err_cap, "bind: at least one address is needed");
        return -1;
    }
    if (c->nrules > 0 && c->nrules_replace > 0) {
        snprintf(err, err_cap, "--rules and --rules-replace: give files to one of them, not both");
        return -1;
    }
    if (c->rules_walk != NULL && strcmp(c->rules_walk, "yaml") != 0 &&
        strcmp(c->rules_walk, "all") != 0 && strcmp(c->rules_walk, "all-dotfiles") != 0) {
        snprintf(err, err_cap, "rules-files: '%.32s' is not yaml, all or all-dotfiles",
                 c->rules_walk);
        return -1;
    }
    if (c->output_hard > 0 && c->output_soft > c->output_hard) {
        snprintf(err, err_cap,
                 "output-buffer-soft (%zu bytes) is above output-buffer-hard (%zu bytes): the "
                 "soft limit could never apply",
                 c->output_soft, c->output_hard);
        return -1;
    }
    if (c->resp_port == 0 && c->http_port == 0 && c->grpc_port == 0) {
        snprintf(err, err_cap, "--port, --http-port and --grpc-port are all 0: nothing to serve");
        return -1;
    }
    return 0;
}

int server_settings_parse(server_settings_t *c, int argc, char **argv, char *err, size_t err_cap)
{
    err[0] = '\0';
    flag_t *flags = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*flags));
    size_t nflags = 0;
    if (flags == NULL) {
        snprintf(err, err_cap, "out of memory");
        return -1;
    }
    int rc = split_flags(argc, argv, flags, &nflags, err, err_cap);
    if (rc == 0)
        rc = apply_flags(c, flags, nflags, err, err_cap);
    free(flags);
    if (rc == 0)
        rc = secret_from_env(&c->requirepass, "SLUICE_REQUIREPASS", err, err_cap);
    if (rc == 0)
        rc = secret_from_env(&c->admin_token, "SLUICE_ADMIN_TOKEN", err, err_cap);
    if (rc == 0)
        rc = secret_from_env(&c->admin_password, "SLUICE_ADMIN_PASSWORD", err, err_cap);
    if (rc == 0 && c->nbind > 0)
        rc = tls_check(c, err, err_cap);
    if (rc == 0)
        rc = check_together(c, err, err_cap);
    return rc;
}

/* The TLS settings: a certificate and a key together, or neither (then no --tls and no
 * --tls-client-ca); --tls's names. Sets c->tls_mask. */
static int tls_check(server_settings_t *c, char *err, size_t err_cap)
{
    c->tls_mask = 0;
    if ((c->tls_cert == NULL) != (c->tls_key == NULL)) {
        snprintf(err, err_cap, "--tls-cert and --tls-key go together: %s is missing",
                 c->tls_cert == NULL ? "--tls-cert" : "--tls-key");
        return -1;
    }
    if (c->tls_cert == NULL) {
        if (c->tls_listeners != NULL || c->tls_client_ca != NULL) {
            snprintf(err, err_cap, "%s needs --tls-cert and --tls-key",
                     c->tls_listeners != NULL ? "--tls" : "--tls-client-ca");
            return -1;
        }
        return 0;
    }
    if (c->tls_listeners == NULL) {
        c->tls_mask = SETTINGS_TLS_RESP | SETTINGS_TLS_HTTP | SETTINGS_TLS_GRPC;
        return 0;
    }
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {
        {"resp", SETTINGS_TLS_RESP}, {"http", SETTINGS_TLS_HTTP}, {"grpc", SETTINGS_TLS_GRPC}};
    for (const char *p = c->tls_listeners;;) {
        size_t n = strcspn(p, ",");
        size_t k = 0;
        while (k < 3 && !(strlen(names[k].name) == n && strncmp(p, names[k].name, n) == 0))
            k++;
        if (k == 3) {
            snprintf(err, err_cap, "--tls: '%.*s' is not a listener (resp, http or grpc)", (int)n,
                     p);
            return -1;
        }
        c->tls_mask |= names[k].bit;
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    return 0;
}

/* True for an address only this host can reach: 127.0.0.0/8, ::1, ::ffff:127.x.x.x. */
static bool is_loopback(const char *addr)
{
    unsigned char a[16];
    if (inet_pton(AF_INET, addr, a) == 1)
        return a[0] == 127;
    if (inet_pton(AF_INET6, addr, a) != 1)
        return false;
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char one[16] = {[15] = 1};
    return memcmp(a, one, 16) == 0 || (memcmp(a, v4mapped, 12) == 0 && a[12] == 127);
}

int server_settings_admin_check(const server_settings_t *c, char *warn, size_t warn_cap, char *err,
                                size_t err_cap)
{
    const char *outside = NULL;
    for (size_t i = 0; i < c->nbind && outside == NULL; i++) {
        if (!is_loopback(c->bind[i]))
            outside = c->bind[i];
    }
    bool resp_open = c->resp_port > 0 && c->admin_password == NULL;
    bool http_open = c->http_port > 0 && c->admin_token == NULL;
    warn[0] = '\0';
    if (!resp_open && !http_open)
        return 0;
    const char *how = resp_open && http_open ? "over RESP and HTTP"
                      : resp_open            ? "over RESP"
                                             : "over HTTP";
    const char *fix = resp_open && http_open ? "--admin-password and --admin-token"
                      : resp_open            ? "--admin-password (or SLUICE_ADMIN_PASSWORD)"
                                             : "--admin-token (or SLUICE_ADMIN_TOKEN)";
    if (outside != NULL && !c->insecure_admin) {
        snprintf(err, err_cap,
                 "listening on %s, which is not loopback, with rule changes open to every client "
                 "%s: set %s, or pass --insecure-admin to allow it",
                 outside, how, fix);
        return -1;
    }
    if (outside != NULL)
        snprintf(warn, warn_cap,
                 "rule and override changes are open to every client that can connect %s, on %s "
                 "(--insecure-admin); set %s to require a secret",
                 how, outside, fix);
    else
        snprintf(warn, warn_cap,
                 "rule and override changes are open to every client that can connect %s; set %s "
                 "to require a secret",
                 how, fix);
    return 0;
}

void server_settings_free(server_settings_t *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->nbind; i++)
        free(c->bind[i]);
    for (size_t i = 0; i < c->ntrusted; i++)
        free(c->trusted_proxies[i]);
    for (size_t i = 0; i < c->nhttp_hosts; i++)
        free(c->http_hosts[i]);
    free(c->config_path);
    for (size_t i = 0; i < c->nrules; i++)
        free(c->rules_paths[i]);
    for (size_t i = 0; i < c->nrules_replace; i++)
        free(c->rules_replace_paths[i]);
    free(c->config_store);
    free(c->request_store);
    free(c->rules_walk);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->tls_client_ca);
    free(c->tls_listeners);
    free(c->snapshot_path);
    free(c->requirepass);
    free(c->admin_token);
    free(c->admin_password);
    memset(c, 0, sizeof(*c));
}

const char *server_settings_log_level_name(log_level_t level)
{
    return level >= LOG_ERROR && level <= LOG_DEBUG ? level_names[level] : "?";
}

const char *server_settings_usage(void)
{
    static char text[8192]; /* every option's line, with room for more */
    if (text[0] != '\0')
        return text;
    size_t n = (size_t)snprintf(text, sizeof(text),
                                "Usage: sluiced [OPTIONS]\n"
                                "sluice rate-limit server: RESP on port 6390, HTTP on port 8390.\n"
                                "\nOptions (--name VALUE or --name=VALUE):\n");
    for (size_t i = 0; i < NOPTIONS && n < sizeof(text); i++) {
        char left[64];
        snprintf(left, sizeof(left), "--%s%s%s", options[i].flag, options[i].metavar ? " " : "",
                 options[i].metavar ? options[i].metavar : "");
        n += (size_t)snprintf(text + n, sizeof(text) - n, "  %-30s %s\n", left, options[i].help);
    }
    if (n < sizeof(text))
        snprintf(text + n, sizeof(text) - n,
                 "\nDurations: 250ms, 10s, 1m, 1h30m (0 = off where noted). Sizes: bytes or "
                 "512k, 1m, 2g.\nThe file (--config) uses the same names with underscores "
                 "(http_port, trusted_proxies: [..]).\nEnvironment: SLUICE_REQUIREPASS, "
                 "SLUICE_ADMIN_TOKEN, SLUICE_ADMIN_PASSWORD (used when no flag or file setting "
                 "gives them).\n");
    return text;
}
