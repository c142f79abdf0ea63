/*
 * rulesfile.h - a rules file in either of the formats sluiced reads: sluice's own (`rules:`, a
 * list of rules; ruledef.h) or envoyproxy/ratelimit's (a top-level `domain:`; envoy_config.h),
 * told apart by their top-level field, read into sluice rules either way.
 */
#ifndef SLUICE_RULES_RULESFILE_H
#define SLUICE_RULES_RULESFILE_H

#include <stddef.h>

#include "rules/ruledef.h"

/*
 * Parses a rules file's text (len bytes) into *out. *domain gets the domain of an
 * envoyproxy/ratelimit file (malloc'ed) or NULL for a sluice file; domain may be NULL. Returns 0,
 * or -1 with "line L, column C: where: what" in err (RULEDEF_ERR_MAX bytes), *out empty and
 * *domain NULL.
 */
int rulesfile_parse(const char *text, size_t len, ruledef_list_t *out, char **domain, char *err);

#endif /* SLUICE_RULES_RULESFILE_H */
