/*
 * replay_formats.h - the input formats of `sluice replay` besides its own TIME KEY [COST]
 * lines: nginx's combined access log, and JSON lines. One record (line) in, one request out,
 * as replay_parse_line() (proto/replay.h) does for the plain format, which it calls.
 *
 * Pure apart from the caller's I/O: no I/O, no global state; the nginx parser never allocates,
 * the JSON parser allocates only inside jansson and frees it before returning. Input need not
 * be NUL-terminated and is never read past len bytes.
 *
 * nginx's combined format (log_format combined, nginx's default for access_log):
 *     $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
 *     "$http_referer" "$http_user_agent"
 * Anything after the user agent (fields a custom format appends) is ignored. The key is one
 * field (replay_nginx_field_t); the cost is 1; TIME is $time_local (whole seconds).
 *
 * JSON lines: one JSON object per line; the key, time and cost are members named by the
 * caller (top level). The time member is an integer in the input unit or a string holding an
 * RFC 3339 timestamp; the key member a string (its decoded UTF-8 bytes, no
 * NUL) or an integer (its decimal text); the cost member, when present, a non-negative
 * integer (absent: 1). Other members are ignored.
 *
 * In both, a blank line is skipped; in the plain format, a '#' comment too.
 */
#ifndef SLUICE_PROTO_REPLAY_FORMATS_H
#define SLUICE_PROTO_REPLAY_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/replay.h"

typedef enum replay_format {
    REPLAY_FORMAT_PLAIN, /* TIME KEY [COST] (replay_parse_line) */
    REPLAY_FORMAT_NGINX, /* nginx's combined access log */
    REPLAY_FORMAT_JSONL, /* one JSON object per line */
} replay_format_t;

/* The field of an nginx combined line that is the key. */
typedef enum replay_nginx_field {
    REPLAY_NGINX_ADDR,    /* $remote_addr (the default) */
    REPLAY_NGINX_USER,    /* $remote_user ("-" when none) */
    REPLAY_NGINX_REQUEST, /* the whole request line: "GET /path?q HTTP/1.1" */
    REPLAY_NGINX_METHOD,  /* its first word */
    REPLAY_NGINX_PATH,    /* its second word, up to a '?' */
    REPLAY_NGINX_STATUS,  /* $status */
    REPLAY_NGINX_REFERER, /* $http_referer, as logged */
    REPLAY_NGINX_AGENT,   /* $http_user_agent, as logged */
} replay_nginx_field_t;

/* The names of replay_nginx_field_t, in its order (the --key values of `sluice replay`). */
extern const char *const replay_nginx_field_names[];
#define REPLAY_NGINX_FIELDS 8

/* How records are read. Zero-initialised: the plain format. */
typedef struct replay_input {
    replay_format_t format;
    replay_nginx_field_t nginx_key; /* REPLAY_FORMAT_NGINX: the key */
    const char *json_key;           /* REPLAY_FORMAT_JSONL: member names, NUL-terminated; */
    const char *json_time;          /* NULL: "key", "time", "cost" */
    const char *json_cost;
} replay_input_t;

/*
 * Parses one record of `len` bytes (a trailing "\n" or "\r\n" allowed) in the format `in` says.
 * Returns as replay_parse_line(): REPLAY_LINE_REQUEST with *out filled, REPLAY_LINE_SKIP, or
 * REPLAY_LINE_ERROR with a one-line reason in err (naming neither file nor line). out->key
 * points into `line`, or into keybuf (REPLAY_KEY_MAX bytes, the caller's) when the key had to be
 * decoded (a JSON string with escapes, an integer); it is valid while both are.
 */
int replay_parse_record(const replay_input_t *in, const char *line, size_t len, int64_t unit_ns,
                        struct replay_request *out, char *keybuf, char *err, size_t errlen);

#endif /* SLUICE_PROTO_REPLAY_FORMATS_H */
