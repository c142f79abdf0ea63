/*
 * fuzz_rules_yaml.c - libFuzzer target for rules files: arbitrary bytes are parsed as a rules
 * file of either format (sluice's, or envoyproxy/ratelimit's; rules/rulesfile.h). Nothing may
 * crash, leak or read out of bounds; an error message is NUL-terminated; and a file that parses
 * writes back (ruledef_list_to_yaml) to a file that parses to an equal list, each rule's canonical
 * JSON parses back to an equal rule, and each override's JSON to an equal override. The one
 * exception is a file with no rules (an envoyproxy/ratelimit domain with no descriptors loads
 * empty): it writes `rules: []`, which sluice's own format refuses on purpose, naming the list.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/ruledef.h"
#include "rules/rulesfile.h"

static void check_json(const ruledef_t *def)
{
    char err[RULEDEF_ERR_MAX];
    char *json = ruledef_to_json(def);
    if (json == NULL)
        abort();
    ruledef_t back;
    if (ruledef_parse_json(json, strlen(json), def->name, &back, err) != 0)
        abort();
    ruledef_t plain = *def; /* JSON rules carry no overrides */
    plain.noverrides = 0;
    if (!ruledef_equal(&plain, &back))
        abort();
    ruledef_free(&back);
    free(json);
    for (size_t i = 0; i < def->noverrides; i++) {
        const rule_override_t *ov = &def->overrides[i];
        char *oj = override_to_json(def, ov);
        rule_override_t ob;
        if (oj == NULL ||
            override_parse_json(def, ov->key, ov->key_len, oj, strlen(oj), &ob, err) != 0 ||
            !override_equal(ov, &ob))
            abort();
        override_free(&ob);
        free(oj);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[RULEDEF_ERR_MAX];
    memset(err, 'x', sizeof(err));
    ruledef_list_t list;
    if (rulesfile_parse((const char *)data, size, &list, NULL, err) != 0) {
        if (memchr(err, '\0', sizeof(err)) == NULL || list.n != 0 || list.rules != NULL)
            abort();
        return 0;
    }
    char *yaml = ruledef_list_to_yaml(&list);
    if (yaml == NULL) /* YAML input is UTF-8, so every key can be written */
        abort();
    ruledef_list_t back;
    if (list.n == 0) {
        if (ruledef_parse_yaml(yaml, strlen(yaml), &back, err) == 0 ||
            strstr(err, "is empty") == NULL)
            abort();
        ruledef_list_free(&list);
        free(yaml);
        return 0;
    }
    if (ruledef_parse_yaml(yaml, strlen(yaml), &back, err) != 0 || back.n != list.n)
        abort();
    for (size_t i = 0; i < list.n; i++) {
        if (!ruledef_equal(&list.rules[i], &back.rules[i]))
            abort();
        check_json(&list.rules[i]);
    }
    ruledef_list_free(&back);
    ruledef_list_free(&list);
    free(yaml);
    return 0;
}
