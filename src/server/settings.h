/*
 * settings.h - sluiced's settings: defaults, then a YAML file (--config FILE), then command-line
 * flags, then environment variables for the two secrets when neither file nor flag gave them.
 *
 *   sluiced --config /etc/sluice/sluiced.yaml --port 7000 --bind 0.0.0.0 --bind ::1
 *
 * Flags take "--name VALUE" or "--name=VALUE". The file is a mapping with the flags' names
 * written with underscores (http_port, max_key_length, trusted_proxies, ...; see
 * server_settings_parse and examples/sluiced.yaml). A list given by flags (--bind,
 * --trusted-proxy) replaces the file's list rather than adding to it.
 *
 * Units: durations are duration strings ("250ms", "10s", "1h") or, in the file, integer
 * milliseconds; sizes are bytes with an optional k / m / g suffix (powers of 1024: "512k",
 * "2g"). Parsing is apart from I/O except for reading the --config file itself.
 *
 * Ownership: every string in a server_settings_t is malloc'ed and owned by it (or NULL); free them
 * with server_settings_free(). A config is safe to read from any thread once parsed.
 */
#ifndef SLUICE_SERVER_SETTINGS_H
#define SLUICE_SERVER_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/log.h"

#define SETTINGS_BIND_MAX    8             /* most --bind addresses */
#define SETTINGS_RULES_MAX   64            /* most --rules files */
#define SETTINGS_TRUSTED_MAX 64            /* most --trusted-proxy entries */
#define SETTINGS_HOSTS_MAX   32            /* most --http-host names */
#define SETTINGS_ERR_MAX     256           /* a server_settings_parse error message fits in this */
#define SETTINGS_THREADS_MAX 256           /* most worker threads */
#define SETTINGS_FILE_MAX    (1024 * 1024) /* largest --config file, bytes */

#define SETTINGS_DEFAULT_BIND             "127.0.0.1"
#define SETTINGS_DEFAULT_RESP_PORT        6390
#define SETTINGS_DEFAULT_HTTP_PORT        8390
#define SETTINGS_DEFAULT_GRPC_PORT        8391
#define SETTINGS_DEFAULT_STORE            "./sluice.db"
#define SETTINGS_DEFAULT_SNAPSHOT         "./sluice.snapshot"
#define SETTINGS_DEFAULT_MAX_CLIENTS      10000
#define SETTINGS_DEFAULT_MAX_INLINE       1024
#define SETTINGS_DEFAULT_METRICS_INLINE   64
#define SETTINGS_DEFAULT_KEY_MAX          1024
#define SETTINGS_DEFAULT_REQUEST_MAX      (512 * 1024)
#define SETTINGS_DEFAULT_OUTPUT_HARD      (32 * 1024 * 1024) /* Redis's pubsub class: 32mb 8mb 60 */
#define SETTINGS_DEFAULT_OUTPUT_SOFT      (8 * 1024 * 1024)
#define SETTINGS_DEFAULT_OUTPUT_SOFT_S    60
#define SETTINGS_DEFAULT_INPUT_BUFFERS    (512 * 1024 * 1024)
#define SETTINGS_DEFAULT_REPLAY_TIMEOUT_S 5
#define SETTINGS_DEFAULT_REPLAY_MEMORY    (64 * 1024 * 1024)
#define SETTINGS_DEFAULT_REPLAYS          1
#define SETTINGS_REPLAYS_MAX              4 /* libuv's thread pool has 4 threads by default */
#define SETTINGS_DEFAULT_OV_TIMEOUT_MS    200

#define SETTINGS_TLS_RESP 1u /* tls_mask: the RESP listener speaks TLS */
#define SETTINGS_TLS_HTTP 2u
#define SETTINGS_TLS_GRPC 4u

typedef struct server_settings {
    char *config_path;             /* --config FILE (sluiced.yaml); NULL = none */
    char *bind[SETTINGS_BIND_MAX]; /* --bind ADDR (repeatable); default "127.0.0.1" */
    size_t nbind;                  /* addresses in bind, >= 1 after parsing */
    int resp_port;                 /* --port, default 6390; 0 = RESP off */
    int http_port;                 /* --http-port, default 8390; 0 = HTTP off */
    int grpc_port;                 /* --grpc-port, default 8391; 0 = gRPC off */
    bool grpc_ratelimit_headers;   /* --grpc-ratelimit-headers: RateLimit and RateLimit-Policy in
                                      ShouldRateLimit's response_headers_to_add; default off */
    bool grpc_quota_mode;          /* --grpc-quota-mode: every descriptor in quota mode, as
                                      envoyproxy/ratelimit's QUOTA_MODE=true; default off */
    char *tls_cert;                /* --tls-cert FILE: PEM certificate chain; NULL = no TLS */
    char *tls_key;                 /* --tls-key FILE: its private key (PEM), with tls_cert */
    char *tls_client_ca;           /* --tls-client-ca FILE: require client certificates these CAs
                                      signed; NULL = none asked */
    char *tls_listeners;           /* --tls LIST: "resp,http,grpc" or part; NULL = all three */
    unsigned tls_mask;             /* derived: CONFIG_TLS_* of the listeners speaking TLS */
    int threads;                   /* --threads, default: online CPUs (sysconf), 1..256 */
    char *rules_paths[SETTINGS_RULES_MAX]; /* --rules FILE (repeatable): imported together at
                                            start and on SIGHUP, owning the rules they name */
    size_t nrules;                         /* files in rules_paths; 0 = none */
    char *rules_replace_paths[SETTINGS_RULES_MAX]; /* --rules-replace FILE (repeatable): imported
                                                    the same way, replacing every rule */
    size_t nrules_replace;                         /* files in rules_replace_paths; 0 = none */
    char *rules_walk;    /* --rules-files yaml|all|all-dotfiles: a rules directory's files read;
                            NULL = yaml */
    char *request_store; /* --store memory|redis://h:p|redis-cluster://h:p,..., default memory */
    int64_t store_timeout_ns; /* --store-timeout DUR, default 5ms: a Redis decision's deadline */
    int64_t rules_watch_ns;   /* --rules-watch DUR, default 200ms: a change's debounce; 0: no
                                 watching of the rules files */
    char *config_store;  /* --config-store URL|PATH (rules, overrides), default "./sluice.db" */
    char *snapshot_path; /* --snapshot PATH, default "./sluice.snapshot"; "" = no
                            snapshots */
    int64_t snapshot_interval_ns; /* --snapshot-interval DUR, default 60s; 0 = only at
                                     shutdown */
    int64_t poll_interval_ns;     /* --poll-interval DUR, default 1s: config store version
                                     poll; > 0 */
    int64_t override_ttl_ns;      /* --override-ttl DUR, default 10s; 0 = no caching */
    int64_t override_timeout_ns;  /* --override-timeout DUR, default 200ms: longest a decision
                                     waits for a config store answering no lookup; 0 = no
                                     limit */
    int64_t stop_delay_ns;        /* --stop-delay DUR, default 0: after SIGTERM/SIGINT the
                                     health checks fail and requests are served this long
                                     before the stop; a second signal ends the wait */
    size_t max_clients;           /* --max-clients N, default 10000; >= 1 */
    size_t key_max;               /* --max-key-length N, bytes, default 1024; >= 1 */
    size_t request_max;           /* --max-request-size BYTES, default 524288 (accepts
                                     512k, 1m); >= 1024 */
    int64_t idle_timeout_ns;      /* --idle-timeout DUR, default 300s; 0 = never */
    size_t output_hard;           /* --output-buffer-hard BYTES, default 32m: a client with
                                     more output waiting is closed at once; 0 = no limit */
    size_t output_soft;           /* --output-buffer-soft BYTES, default 8m: ... closed when
                                     above this for output_soft_ns; 0 = no limit */
    int64_t output_soft_ns;       /* --output-buffer-soft-time DUR, default 60s */
    size_t input_buffers_max;     /* --max-input-buffers BYTES, default 512m: all clients'
                                     input buffers together; 0 = no cap */
    size_t max_memory;            /* --max-memory BYTES (e.g. 2g), default 0 = no cap */
    size_t max_inline;            /* --max-inline-rules N, default 1024: inline rules at once */
    size_t max_inline_address;    /* --max-inline-per-address N: inline rules one client
                                     address may make; 0 (the default) = max_inline / 4 */
    size_t metrics_inline;        /* --metrics-inline-rules N, default 64: inline rules with
                                     /metrics series of their own; the rest share one */
    int64_t replay_timeout_ns;    /* --replay-timeout DUR, default 5s: POST /v1/replay stops
                                     this long after it arrived; >= 1ms */
    size_t replay_memory;         /* --replay-memory BYTES, default 64m: what one replay's table
                                     and tallies may hold together; >= 64k */
    size_t replay_concurrency;    /* --replay-concurrency N, default 1: replays running at
                                     once, 1..SETTINGS_REPLAYS_MAX; more are refused (503) */
    char *requirepass;            /* --requirepass PW, or env SLUICE_REQUIREPASS; NULL =
                                     none */
    char *admin_token;            /* --admin-token T, or env SLUICE_ADMIN_TOKEN; NULL =
                                     none */
    char *admin_password;         /* --admin-password PW, or env SLUICE_ADMIN_PASSWORD: the RESP
                                     user "admin"; NULL = admin commands open to every client */
    bool insecure_admin;          /* --insecure-admin: open admin allowed beyond loopback */
    char *trusted_proxies[SETTINGS_TRUSTED_MAX]; /* --trusted-proxy CIDR (repeatable), strings as
                                                  given ("10.0.0.0/8", "::1") */
    size_t ntrusted;                             /* entries in trusted_proxies */
    char *http_hosts[SETTINGS_HOSTS_MAX];        /* --http-host NAME (repeatable): names besides the
                                                  bound addresses that HTTP requests may be sent
                                                  to (their Host); "*" = any */
    size_t nhttp_hosts;                          /* entries in http_hosts */
    log_level_t log_level; /* --log-level error|warn|info|debug, default info */
} server_settings_t;

/* Fills *c with the defaults above (threads: the online CPUs, clamped to 1..256). The strings
 * are malloc'ed: free with server_settings_free(). Nothing else is read (no file, no env). */
void server_settings_defaults(server_settings_t *c);

/*
 * Parses argv as main() gets it (argv[0] is the program) into *c, which holds what
 * server_settings_defaults() put there (values replaced are freed). --config FILE is
 * read first (a YAML mapping with the same names, underscores: bind (string or list), port,
 * http_port, threads, rules, rules_replace, store, snapshot, snapshot_interval, poll_interval,
 * override_ttl, override_timeout, stop_delay, max_clients, max_key_length, max_request_size,
 * idle_timeout, output_buffer_hard, output_buffer_soft, output_buffer_soft_time, max_input_buffers,
 * max_memory, max_inline_rules, max_inline_per_address, metrics_inline_rules, replay_timeout,
 * replay_memory, replay_concurrency, requirepass, admin_token, admin_password, trusted_proxies
 * (list), http_host (list), log_level); then flags override the file; then the env vars
 * SLUICE_REQUIREPASS / SLUICE_ADMIN_TOKEN / SLUICE_ADMIN_PASSWORD fill the secrets not given.
 * Durations given as flags need a unit ("300s"), except "0"; in the file an integer is
 * milliseconds. --help / --version are answered once the flags' syntax is checked, before their
 * values are. An empty bind list, both ports 0, both rules files, a soft output limit above the
 * hard one, an --http-host that is not a host name, and an empty secret (a flag, the file or a
 * variable that is set but empty: a server nobody could log in to, or one a misspelt variable left
 * open) are errors.
 *
 * Returns 0; 1 when --help (-h) or --version (-V) was printed to stdout (the caller exits 0);
 * -1 with a message in err (err_cap bytes), e.g. "--threads: must be 1..256",
 * "sluiced.yaml: line 3, column 7: port: must be an integer 0..65535",
 * "unknown option '--prot'". In every case *c owns what it holds: call server_settings_free().
 */
int server_settings_parse(server_settings_t *c, int argc, char **argv, char *err, size_t err_cap);

/* Frees the strings of *c and zeroes it. NULL is a no-op. */
void server_settings_free(server_settings_t *c);

/*
 * Whether admin (rule and override changes) is safe to serve as configured. Admin is open over
 * RESP without --admin-password and over HTTP without --admin-token. Open admin on an address
 * that is not loopback is refused (-1, err says what to set) unless --insecure-admin; open admin
 * is allowed otherwise with a warning for the log in warn (empty when admin needs a secret).
 */
int server_settings_admin_check(const server_settings_t *c, char *warn, size_t warn_cap, char *err,
                                size_t err_cap);

/* The --help text (static). */
const char *server_settings_usage(void);

/* "error", "warn", "info", "debug". */
const char *server_settings_log_level_name(log_level_t level);

#endif /* SLUICE_SERVER_SETTINGS_H */
