/*
 * settings_env.h - envoyproxy/ratelimit's environment variables read as sluiced's flags, so its
 * container can be swapped for sluiced with its environment unchanged (docs/envoy.md, "Its
 * settings").
 */
#ifndef SLUICE_SERVER_SETTINGS_ENV_H
#define SLUICE_SERVER_SETTINGS_ENV_H

#include <stdbool.h>
#include <stddef.h>

#define SETTINGS_ENV_MAX 16 /* most flags the variables can give */

/* One flag a variable gives: its long name (no dashes) and value (malloc'ed). */
typedef struct env_flag {
    const char *var;  /* the variable it came from, for messages */
    const char *flag; /* e.g. "http-port" */
    char *value;
} env_flag_t;

/* Reads envoyproxy/ratelimit's variables through get (getenv, or a test's table) into out[0..*n):
 * the flags they stand for, in the order sluiced applies them. A variable that is set but that
 * sluiced cannot honour is refused: -1 with err naming it and why (out freed, *n 0). 0 otherwise
 * (no variable set: *n 0). Free with settings_env_free. */
int settings_env_read(const char *(*get)(const char *name), env_flag_t *out, size_t *n, char *err,
                      size_t err_cap);

void settings_env_free(env_flag_t *out, size_t n);

/* Where envoyproxy/ratelimit listens by default, for a container swapped for sluiced. */
#define SETTINGS_ENV_UPSTREAM_BIND      "0.0.0.0"
#define SETTINGS_ENV_UPSTREAM_HTTP_PORT 8080
#define SETTINGS_ENV_UPSTREAM_GRPC_PORT 8081

/* True when the environment is envoyproxy/ratelimit's deployment (its rules directory, one of
 * RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY, is set): sluiced then listens where
 * upstream does unless told otherwise, so Envoy's cluster reaches it unchanged. */
bool settings_env_upstream(const char *(*get)(const char *name));

#endif /* SLUICE_SERVER_SETTINGS_ENV_H */
