/*
 * rules_import.h - a YAML rules file into the config store: `sluiced --rules FILE` at start and
 * on SIGHUP, and SL.RULE IMPORT. The file replaces the store's rule set (rules not in it are
 * deleted with their overrides) and its inline overrides are written after the rules.
 */
#ifndef SLUICE_SERVER_RULES_IMPORT_H
#define SLUICE_SERVER_RULES_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rules/config_store.h"

#define RULES_IMPORT_EINVALID (-1) /* the text is not a valid rules file */
#define RULES_IMPORT_ESTORE   (-2) /* the config store failed */

/* Parses text (a rules file, len bytes) and imports it. Returns 0 with *nrules set, or
 * RULES_IMPORT_EINVALID / RULES_IMPORT_ESTORE with a message in err (cap bytes): a parse error
 * names line and column; nothing is written then. */
int rules_import_yaml(config_store_t *store, const char *text, size_t len, size_t *nrules,
                      char *err, size_t cap);

/* Reads the file at path and imports it, as above; errors name the file. */
int rules_import_file(config_store_t *store, const char *path, size_t *nrules, char *err,
                      size_t cap);

/* The store's rules as a rules file (no overrides). malloc'ed text, or NULL with err. */
char *rules_export_yaml(config_store_t *store, char *err, size_t cap);

#endif /* SLUICE_SERVER_RULES_IMPORT_H */
