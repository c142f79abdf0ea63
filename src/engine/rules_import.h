/*
 * rules_import.h - YAML rules files (sluice's or envoyproxy/ratelimit's) into the config store:
 * `sluiced --rules FILE` at start and on SIGHUP (CONFIG_IMPORT_FILE: the file owns the rules it
 * names; rules made through the API are kept), `--rules-replace` and SL.RULE IMPORT ... REPLACE
 * (the store becomes the file), and SL.RULE IMPORT (adds and changes, removes nothing). A file's
 * overrides are written after its rules. Nothing is ever removed silently: rules_import_log names
 * every rule added, changed and removed.
 */
#ifndef SLUICE_ENGINE_RULES_IMPORT_H
#define SLUICE_ENGINE_RULES_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rules/config_store.h"

#include "rules/ruledef.h"

#define RULES_IMPORT_EINVALID (-1) /* the text is not a valid rules file */
#define RULES_IMPORT_ESTORE   (-2) /* the config store failed */

/* A check of one rule's parameters (a rule's, or one of its overrides') beyond what the rules file
 * can say: false with the reason in err (cap bytes). */
typedef bool (*rules_check_fn)(void *arg, const sl_rule_t *rule, char *err, size_t cap);

/* Which files of a directory given to rules_import_files are read. */
typedef enum rules_walk {
    RULES_WALK_YAML, /* its *.yaml and *.yml files, dot-files left out, not its subdirectories */
    RULES_WALK_ALL,  /* every file whatever its name, in its subdirectories too, dot-files and
                        dot-directories left out (envoyproxy/ratelimit's runtime directory with
                        RUNTIME_IGNOREDOTFILES=true) */
    RULES_WALK_DOTFILES, /* the same, dot-files and dot-directories too (upstream's default) */
} rules_walk_t;

#define RULES_WALK_DEPTH_MAX 16                 /* directories below the one given, at most */
#define RULES_WALK_FILES_MAX 1000               /* files read from one directory tree, at most */
#define RULES_WALK_BYTES_MAX (64 * 1024 * 1024) /* their sizes together, at most */

/* How an import is made: its mode (config_store.h), the origin its rules are written with (NULL:
 * the mode's default), a check every rule and override must pass (NULL: none), and which files
 * of a directory are read. */
typedef struct rules_import_opts {
    config_import_mode_t mode;
    const char *origin;
    rules_check_fn check;
    void *check_arg;
    rules_walk_t walk;
} rules_import_opts_t;

/* Parses text (a rules file, len bytes) and imports it. Returns 0 with *diff filled (free it with
 * config_import_diff_free), or RULES_IMPORT_EINVALID / RULES_IMPORT_ESTORE with a message in err
 * (cap bytes): a parse error names line and column, a failed check the rule; nothing is written
 * then. */
int rules_import_yaml(config_store_t *store, const char *text, size_t len,
                      const rules_import_opts_t *opts, config_import_diff_t *diff, char *err,
                      size_t cap);

/* Reads the files at paths[0..n) and imports their rules together, as one file: each in either
 * format (sluice's or envoyproxy/ratelimit's, rules/rulesfile.h). A path that is a directory
 * stands for the files opts->walk says, in the order of their paths: links to files followed,
 * links to directories not (as envoyproxy/ratelimit's loader), anything but a regular file left
 * out. The directory is resolved once (realpath) and read under that name, so a swap of a
 * symbolic link on the way to it (RUNTIME_ROOT re-pointed) mid-read is not half seen. The names
 * of entries left out (RULES_WALK_YAML: other names) are logged, one line per directory and
 * import. A tree deeper than RULES_WALK_DEPTH_MAX, with more than RULES_WALK_FILES_MAX files or
 * RULES_WALK_BYTES_MAX bytes is refused. Errors name the file: one that cannot be read or
 * parsed, a rule name in two files, a domain configured by two files. Nothing is written then. */
int rules_import_files(config_store_t *store, char *const *paths, size_t n,
                       const rules_import_opts_t *opts, config_import_diff_t *diff, char *err,
                       size_t cap);

/* Reads the file at path and imports it, as above; errors name the file and say why it could
 * not be read. */
int rules_import_file(config_store_t *store, const char *path, const rules_import_opts_t *opts,
                      config_import_diff_t *diff, char *err, size_t cap);

/* Logs what an import from `source` did: every rule added, changed and removed by name, and how
 * many were kept. */
void rules_import_log(const char *source, const config_import_diff_t *d);

/* The store's rules and their overrides as a rules file: importing it with CONFIG_IMPORT_REPLACE
 * restores the store (a backup). malloc'ed text, or NULL with err. */
char *rules_export_yaml(config_store_t *store, char *err, size_t cap);

#endif /* SLUICE_ENGINE_RULES_IMPORT_H */
