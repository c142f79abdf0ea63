/*
 * doc_check.c - checks a configuration example from the docs with sluiced's own parsers, for
 * the doc tests (doctest.py): a block that is a file, not a command, is still run through the
 * code that would read it.
 *
 *   doc_check rules FILE    a YAML rules file, sluice's or envoyproxy/ratelimit's (rulesfile_parse:
 *                           sluiced --rules, SL.RULE IMPORT)
 *   doc_check rule FILE     one rule as JSON (ruledef_parse_json: SL.RULE SET, PUT /v1/rules/x)
 *   doc_check config FILE   a sluiced config file (server_settings_parse: sluiced --config FILE)
 *
 * Exit status 0 when the parser accepts the file, 1 with its error on stderr when it does not,
 * 2 for a usage error or an unreadable file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/ruledef.h"
#include "rules/rulesfile.h"
#include "server/settings.h"

/* The whole of path in a malloc'ed buffer, NUL-terminated; NULL when unreadable. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, 2 * cap + 1);
            if (grown == NULL) {
                free(buf);
            }
            buf = grown; /* NULL ends the loop */
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

static int check_rules(const char *text, size_t len, char *err)
{
    ruledef_list_t list;
    if (rulesfile_parse(text, len, &list, NULL, err) != 0) {
        return 1;
    }
    ruledef_list_free(&list);
    return 0;
}

static int check_rule(const char *text, size_t len, char *err)
{
    ruledef_t def;
    if (ruledef_parse_json(text, len, "example", &def, err) != 0) {
        return 1;
    }
    ruledef_free(&def);
    return 0;
}

static int check_config(const char *path, char *err, size_t err_cap)
{
    server_settings_t c;
    server_settings_defaults(&c);
    char *argv[] = {"sluiced", "--config", (char *)path, NULL};
    int rc = server_settings_parse(&c, 3, argv, err, err_cap);
    server_settings_free(&c);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: doc_check rules|rule|config FILE\n", stderr);
        return 2;
    }
    size_t len = 0;
    char *text = read_file(argv[2], &len);
    if (text == NULL) {
        perror(argv[2]);
        return 2;
    }
    char err[RULEDEF_ERR_MAX > SETTINGS_ERR_MAX ? RULEDEF_ERR_MAX : SETTINGS_ERR_MAX] = "";
    int rc;
    if (strcmp(argv[1], "rules") == 0) {
        rc = check_rules(text, len, err);
    } else if (strcmp(argv[1], "rule") == 0) {
        rc = check_rule(text, len, err);
    } else if (strcmp(argv[1], "config") == 0) {
        rc = check_config(argv[2], err, sizeof err);
    } else {
        fprintf(stderr, "doc_check: unknown kind '%s' (rules, rule, config)\n", argv[1]);
        rc = 2;
    }
    if (rc == 1) {
        fprintf(stderr, "%s: %s\n", argv[2], err);
    }
    free(text);
    return rc;
}
