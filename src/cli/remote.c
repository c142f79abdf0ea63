/*
 * remote.c - the pure parts of the remote commands: connection options, command arguments,
 * INFO as JSON (see remote.h).
 */
#include "remote.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/sluice.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A whole decimal integer (optional '-'), no blanks, in [min, max]. */
static bool parse_int_in(const char *s, long long min, long long max, long long *out)
{
    if (*s != '-' && (*s < '0' || *s > '9'))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

void remote_opts_init(struct remote_opts *o, const char *env_password)
{
    o->host = REMOTE_DEFAULT_HOST;
    o->port = REMOTE_DEFAULT_PORT;
    o->password = env_password != NULL && env_password[0] != '\0' ? env_password : NULL;
    o->user = NULL;
    o->json = false;
    o->timeout_ms = REMOTE_DEFAULT_TIMEOUT_MS;
}

int remote_global_option(struct remote_opts *o, int argc, char **argv, int i, char *err,
                         size_t errlen)
{
    const char *opt = argv[i];
    if (strcmp(opt, "--json") == 0) {
        o->json = true;
        return 1;
    }
    bool host = strcmp(opt, "-h") == 0, port = strcmp(opt, "-p") == 0;
    bool pass = strcmp(opt, "-a") == 0, timeout = strcmp(opt, "--timeout") == 0;
    bool user = strcmp(opt, "--user") == 0;
    if (!host && !port && !pass && !timeout && !user)
        return 0;
    if (i + 1 >= argc)
        return fail(err, errlen, "option '%s' needs a value", opt);
    const char *val = argv[i + 1];
    long long v;
    if (host) {
        if (val[0] == '\0')
            return fail(err, errlen, "-h: host must not be empty");
        o->host = val;
    } else if (port) {
        if (!parse_int_in(val, 1, 65535, &v))
            return fail(err, errlen, "-p: port must be an integer in 1..65535, got '%s'", val);
        o->port = (int)v;
    } else if (pass) {
        o->password = val;
    } else if (user) {
        if (val[0] == '\0')
            return fail(err, errlen, "--user: must not be empty");
        o->user = val;
    } else {
        if (!parse_int_in(val, 0, 24 * 3600 * 1000, &v))
            return fail(err, errlen,
                        "--timeout: must be milliseconds, an integer in 0..86400000, got '%s'",
                        val);
        o->timeout_ms = (int)v;
    }
    return 2;
}

/* --hold-timeout DURATION: a duration of whole milliseconds, at least 1 ms. Returns 2 or -1. */
static int hold_timeout(int argc, char **argv, int i, struct remote_args *a, char *err,
                        size_t errlen)
{
    if (i + 1 >= argc)
        return fail(err, errlen, "option '%s' needs a value", argv[i]);
    const char *val = argv[i + 1];
    int64_t ns;
    if (sl_duration_parse(val, strlen(val), &ns) != SL_OK || ns < SL_NS_PER_MS ||
        ns % SL_NS_PER_MS != 0)
        return fail(err, errlen,
                    "--hold-timeout: must be a duration of whole milliseconds, at least 1ms "
                    "(250ms, 30s, 1m30s), got '%s'",
                    val);
    a->hold_ms = ns / SL_NS_PER_MS;
    return 2;
}

/* --latency DURATION: whole microseconds, 0 to 1h (what SL.RELEASE reads). Returns 2 or -1. */
static int latency(int argc, char **argv, int i, struct remote_args *a, char *err, size_t errlen)
{
    if (i + 1 >= argc)
        return fail(err, errlen, "option '%s' needs a value", argv[i]);
    const char *val = argv[i + 1];
    int64_t ns;
    if (sl_duration_parse(val, strlen(val), &ns) != SL_OK || ns % SL_NS_PER_US != 0 ||
        ns / SL_NS_PER_US > SLC_LATENCY_MAX_US)
        return fail(err, errlen,
                    "--latency: must be a duration of whole microseconds, at most 1h (12ms, "
                    "1500us, 2s), got '%s'",
                    val);
    a->has_latency = true;
    a->latency_us = ns / SL_NS_PER_US;
    return 2;
}

/* --priority P: a name, not empty (the server checks it is one of the rule's). Returns 2 or -1. */
static int priority(int argc, char **argv, int i, struct remote_args *a, char *err, size_t errlen)
{
    if (i + 1 >= argc)
        return fail(err, errlen, "option '%s' needs a value", argv[i]);
    if (argv[i + 1][0] == '\0')
        return fail(err, errlen, "--priority: must not be empty");
    a->priority = argv[i + 1];
    return 2;
}

/* Applies one of the command's own flags at argv[i]; returns entries used, 0 if not one. */
static int own_flag(int argc, char **argv, int i, unsigned flags, struct remote_args *a, char *err,
                    size_t errlen)
{
    const char *opt = argv[i];
    if (strcmp(opt, "--help") == 0) {
        a->help = true;
        return 1;
    }
    if ((flags & REMOTE_FLAG_REPLACE) && strcmp(opt, "--replace") == 0) {
        a->replace = true;
        return 1;
    }
    if ((flags & REMOTE_FLAG_PEEK) && strcmp(opt, "--peek") == 0) {
        a->peek = true;
        return 1;
    }
    if ((flags & REMOTE_FLAG_HOLD) && strcmp(opt, "--hold-timeout") == 0)
        return hold_timeout(argc, argv, i, a, err, errlen);
    if ((flags & REMOTE_FLAG_PRIORITY) && strcmp(opt, "--priority") == 0)
        return priority(argc, argv, i, a, err, errlen);
    if ((flags & REMOTE_FLAG_REPORT) && strcmp(opt, "--latency") == 0)
        return latency(argc, argv, i, a, err, errlen);
    if ((flags & REMOTE_FLAG_REPORT) && strcmp(opt, "--dropped") == 0) {
        a->dropped = true;
        return 1;
    }
    bool cost = (flags & REMOTE_FLAG_COST) && strcmp(opt, "--cost") == 0;
    bool at = (flags & REMOTE_FLAG_AT) && strcmp(opt, "--at") == 0;
    if (!cost && !at)
        return 0;
    long long v;
    if (i + 1 >= argc)
        return fail(err, errlen, "option '%s' needs a value", opt);
    if (!parse_int_in(argv[i + 1], 0, INT64_MAX, &v))
        return fail(err, errlen, "%s: must be a non-negative integer%s, got '%s'", opt,
                    at ? " (ms since the Unix epoch)" : "", argv[i + 1]);
    *(cost ? &a->cost : &a->at_ms) = v;
    return 2;
}

int remote_parse_args(int argc, char **argv, int first, unsigned flags, struct remote_opts *o,
                      struct remote_args *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->cost = 1;
    a->at_ms = -1;
    bool options = true;
    for (int i = first; i < argc;) {
        const char *arg = argv[i];
        if (options && strcmp(arg, "--") == 0) {
            options = false;
            i++;
            continue;
        }
        bool number =
            (flags & REMOTE_FLAG_NUMBERS) && arg[0] == '-' && arg[1] >= '0' && arg[1] <= '9';
        if (options && arg[0] == '-' && arg[1] != '\0' && !number) {
            int used = remote_global_option(o, argc, argv, i, err, errlen);
            if (used == 0)
                used = own_flag(argc, argv, i, flags, a, err, errlen);
            if (used < 0)
                return -1;
            if (used == 0)
                return fail(err, errlen, "unknown option '%s'", arg);
            i += used;
            continue;
        }
        if (a->npos == REMOTE_POS_MAX)
            return fail(err, errlen, "too many arguments, starting at '%s'", arg);
        a->pos[a->npos++] = arg;
        i++;
    }
    return 0;
}

int remote_settle_numbers(const struct remote_args *a, int64_t *reserved, int64_t *actual,
                          char *err, size_t errlen)
{
    static const char *const names[2] = {"RESERVED", "ACTUAL"};
    long long v[2];
    for (int i = 0; i < 2; i++) {
        if (!parse_int_in(a->pos[2 + i], 0, INT64_MAX, &v[i]))
            return fail(err, errlen, "settle: %s must be a non-negative integer, got '%s'",
                        names[i], a->pos[2 + i]);
    }
    *reserved = v[0];
    *actual = v[1];
    return 0;
}

int remote_hold_id(const char *text, uint64_t *id, char *err, size_t errlen)
{
    long long v;
    if (!parse_int_in(text, 0, INT64_MAX, &v))
        return fail(err, errlen, "release: ID must be a non-negative integer, got '%s'", text);
    *id = (uint64_t)v;
    return 0;
}

/* The value of an INFO field: an integer when the whole text is one, else a string. */
static json_t *info_value(const char *v, size_t len)
{
    char buf[32];
    long long n;
    if (len > 0 && len < sizeof buf) {
        memcpy(buf, v, len);
        buf[len] = '\0';
        if (parse_int_in(buf, INT64_MIN, INT64_MAX, &n) && !(buf[0] == '-' && buf[1] == '\0'))
            return json_integer(n);
    }
    return json_stringn(v, len);
}

json_t *remote_info_json(const char *text, size_t len)
{
    json_t *root = json_object();
    json_t *section = NULL;
    const char *p = text, *end = text + len;
    while (root != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl != NULL ? nl : end;
        size_t n = (size_t)(line_end - p);
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0 && p[0] == '#') {
            size_t s = 1;
            while (s < n && p[s] == ' ')
                s++;
            char *name = strndup(p + s, n - s);
            if (name == NULL)
                goto oom;
            for (char *c = name; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            section = json_object();
            if (section == NULL || json_object_set_new(root, name, section) != 0) {
                free(name);
                goto oom;
            }
            free(name);
        } else if (n > 0) {
            const char *colon = memchr(p, ':', n);
            if (colon != NULL) {
                if (section == NULL) {
                    section = json_object();
                    if (section == NULL || json_object_set_new(root, "info", section) != 0)
                        goto oom;
                }
                char *key = strndup(p, (size_t)(colon - p));
                json_t *val = info_value(colon + 1, n - (size_t)(colon - p) - 1);
                if (key == NULL || val == NULL) {
                    free(key);
                    json_decref(val);
                    goto oom;
                }
                int rc = json_object_set_new(section, key, val); /* takes val in any case */
                free(key);
                if (rc != 0)
                    goto oom;
            }
        }
        p = nl != NULL ? nl + 1 : end;
    }
    return root;
oom:
    json_decref(root);
    return NULL;
}
