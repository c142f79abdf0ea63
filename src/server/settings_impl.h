/*
 * settings_impl.h - what settings.c (the settings: options[], the file, the flags) shares with
 * settings_values.c (reading one value, and messages that say where it came from).
 */
#ifndef SLUICE_SERVER_SETTINGS_IMPL_H
#define SLUICE_SERVER_SETTINGS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "rules/yamltree.h"
#include "server/settings.h"

typedef enum opt_kind {
    OPT_FLAG,      /* no value: --help, --version */
    OPT_PATH,      /* --config: read before everything else */
    OPT_STRING,    /* char * */
    OPT_LIST,      /* char *[] and its count */
    OPT_INT,       /* int within [min, max] */
    OPT_COUNT,     /* size_t within [min, max] */
    OPT_SIZE,      /* size_t bytes with k/m/g/t suffixes, within [min, max] */
    OPT_DURATION,  /* int64_t ns, >= min */
    OPT_LOG_LEVEL, /* log_level_t */
    OPT_BOOL,      /* bool: a flag with no value is true; in the file true / false */
} opt_kind_t;

typedef enum opt_check {
    CHECK_NONE,
    CHECK_ADDRESS, /* an IPv4 or IPv6 literal */
    CHECK_CIDR,    /* an address with an optional /prefix */
} opt_check_t;

typedef struct option {
    const char *flag; /* without the dashes */
    const char *key;  /* in the file; NULL = flag only */
    opt_kind_t kind;
    size_t offset;       /* of the field in server_settings_t */
    size_t count_offset; /* OPT_LIST: of its count */
    size_t list_max;     /* OPT_LIST: capacity */
    int64_t min, max;    /* OPT_INT, OPT_COUNT, OPT_SIZE: bounds; OPT_DURATION: min */
    opt_check_t check;
    const char *metavar;
    const char *help;
} option_t;

/* Where a value came from, for messages: a flag, or a node of the --config file. */
typedef struct source {
    const char *file;      /* the --config path, or NULL for a flag */
    const yt_node_t *node; /* the file's node (position) */
    const option_t *opt;   /* the setting; NULL for the file's shape */
    char *err;
    size_t cap;
} source_t;

/* Writes "--flag: message", "FILE: line L, column C: key: message" or "FILE: message" into
 * s->err (s->cap bytes). Returns -1. */
int cfg_fail(const source_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* User text in a message: printable ASCII, at most 40 bytes. buf holds 48. Returns buf. */
const char *cfg_shown(const char *t, char *buf);

/* The text of s's file node (any scalar), or NULL with the message naming `want`. */
const char *cfg_node_text(const source_t *s, const char *want);

/* The value text of s's setting read as its kind (bounds from s->opt) into *out; 0, or -1
 * with the message. A bare integer duration is milliseconds. */
int cfg_read_int(const source_t *s, const char *text, int64_t *out);
int cfg_read_size(const source_t *s, const char *text, uint64_t *out);
int cfg_read_duration(const source_t *s, const char *text, int64_t *out);

/* Checks string text (len bytes): no NUL, and an address or network where s->opt says. */
int cfg_check_text(const source_t *s, const char *text, size_t len);

/* A malloc'ed copy of text (len bytes and its NUL), or NULL with "out of memory". */
char *cfg_dup_text(const source_t *s, const char *text, size_t len);

#endif /* SLUICE_SERVER_SETTINGS_IMPL_H */
