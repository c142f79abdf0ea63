/*
 * fuzz_rule_json.c - libFuzzer target for JSON rules and overrides (SL.RULE SET, PUT
 * /v1/rules/{name}, SL.OVERRIDE SET): the input is parsed as a rule; on success its canonical
 * JSON must parse back to an equal rule. The same bytes are then parsed as an override of a
 * fixed token_bucket rule (and of the parsed rule), whose JSON must parse back equal. The field
 * an error names (ruledef_err_field(), what HTTP puts in "field") is text of the error. Nothing
 * may crash, leak or read out of bounds.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/ruledef.h"

/* The field err names, if any, fits and is part of err (before its quotes, when quoted). */
static void check_field(const char *err)
{
    char field[16]; /* small: names that do not fit are refused, not cut */
    memset(field, 'x', sizeof field);
    bool named = ruledef_err_field(err, field, sizeof field);
    if (memchr(field, '\0', sizeof field) == NULL || named != (field[0] != '\0'))
        abort();
    const char *dot = strrchr(field, '.');
    if (named && strstr(err, dot != NULL ? dot + 1 : field) == NULL)
        abort();
}

static void check_override(const ruledef_t *parent, const uint8_t *data, size_t size)
{
    char err[RULEDEF_ERR_MAX];
    rule_override_t ov;
    const char key[] = "tenant:\0acme"; /* any bytes */
    if (override_parse_json(parent, key, sizeof(key) - 1, (const char *)data, size, &ov, err) !=
        0) {
        if (memchr(err, '\0', sizeof(err)) == NULL || ov.key != NULL)
            abort();
        check_field(err);
        return;
    }
    char *json = override_to_json(parent, &ov);
    rule_override_t back;
    if (json == NULL ||
        override_parse_json(parent, ov.key, ov.key_len, json, strlen(json), &back, err) != 0 ||
        !override_equal(&ov, &back))
        abort();
    override_free(&back);
    override_free(&ov);
    free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[RULEDEF_ERR_MAX];
    memset(err, 'x', sizeof(err));
    ruledef_t def;
    int rc = ruledef_parse_json((const char *)data, size, size % 2 ? "hint" : NULL, &def, err);
    if (rc != 0) {
        if (memchr(err, '\0', sizeof(err)) == NULL || def.noverrides != 0)
            abort();
        check_field(err);
    } else {
        char *json = ruledef_to_json(&def);
        ruledef_t back;
        if (json == NULL || ruledef_parse_json(json, strlen(json), NULL, &back, err) != 0 ||
            !ruledef_equal(&def, &back))
            abort();
        ruledef_free(&back);
        free(json);
        check_override(&def, data, size);
        ruledef_free(&def);
    }
    static ruledef_t parent;
    static int have_parent;
    if (!have_parent) {
        const char *p = "{\"name\":\"api\",\"algorithm\":\"token_bucket\",\"limit\":100,"
                        "\"window\":\"1s\"}";
        if (ruledef_parse_json(p, strlen(p), NULL, &parent, err) != 0)
            abort();
        have_parent = 1;
    }
    check_override(&parent, data, size);
    return 0;
}
