/*
 * rules_import.c - see rules_import.h.
 */
#include "engine/rules_import.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text.h"
#include "rules/ruledef.h"
#include "rules/rulesfile.h"
#include "engine/log.h"

/* Every rule and override of the list through the import's check. */
static int check_list(const ruledef_list_t *list, const rules_import_opts_t *opts, char *err,
                      size_t cap)
{
    char why[RULEDEF_ERR_MAX];
    for (size_t i = 0; opts->check != NULL && i < list->n; i++) {
        const ruledef_t *def = &list->rules[i];
        if (!opts->check(opts->check_arg, &def->rule, why, sizeof why)) {
            snprintf(err, cap, "rules[%zu] '%s': %s", i, def->name, why);
            return RULES_IMPORT_EINVALID;
        }
        for (size_t j = 0; j < def->noverrides; j++) {
            if (!def->overrides[j].blocked &&
                !opts->check(opts->check_arg, &def->overrides[j].rule, why, sizeof why)) {
                snprintf(err, cap, "rules[%zu] '%s': overrides[%zu]: %s", i, def->name, j, why);
                return RULES_IMPORT_EINVALID;
            }
        }
    }
    return 0;
}

/* Imports a parsed list (which it frees), as rules_import_yaml. */
static int import_list(config_store_t *store, ruledef_list_t list, const rules_import_opts_t *opts,
                       config_import_diff_t *diff, char *err, size_t cap)
{
    if (check_list(&list, opts, err, cap) != 0) {
        ruledef_list_free(&list);
        return RULES_IMPORT_EINVALID;
    }
    size_t nov = 0;
    for (size_t i = 0; i < list.n; i++) {
        nov += list.rules[i].noverrides;
    }
    config_rule_t *rows = calloc(list.n ? list.n : 1, sizeof *rows);
    config_override_t *ovs = calloc(nov ? nov : 1, sizeof *ovs);
    int rc = rows != NULL && ovs != NULL ? 0 : RULES_IMPORT_ESTORE;
    size_t k = 0;
    for (size_t i = 0; rc == 0 && i < list.n; i++) {
        const ruledef_t *def = &list.rules[i];
        rows[i].name = list.rules[i].name;
        rows[i].json = ruledef_to_json(def);
        rc = rows[i].json != NULL ? 0 : RULES_IMPORT_ESTORE;
        for (size_t j = 0; rc == 0 && j < def->noverrides; j++, k++) {
            const rule_override_t *ov = &def->overrides[j];
            ovs[k] = (config_override_t){.rule = def->name,
                                         .key = ov->key,
                                         .key_len = ov->key_len,
                                         .json = override_to_json(def, ov)};
            rc = ovs[k].json != NULL ? 0 : RULES_IMPORT_ESTORE;
        }
    }
    char serr[CONFIG_STORE_ERR_MAX];
    if (rc != 0) {
        snprintf(err, cap, "out of memory");
    } else if (config_store_import(store, rows, list.n, ovs, nov, opts->mode, opts->origin, diff,
                                   NULL, serr) != 0) {
        snprintf(err, cap, "config store: %s", serr);
        rc = RULES_IMPORT_ESTORE;
    }
    for (size_t i = 0; rows != NULL && i < list.n; i++) {
        free(rows[i].json);
    }
    for (size_t i = 0; ovs != NULL && i < nov; i++) {
        free((char *)ovs[i].json);
    }
    free(rows);
    free(ovs);
    if (rc != 0) {
        config_import_diff_free(diff);
    }
    ruledef_list_free(&list);
    return rc;
}

/* Logs what a file says that sluice takes and does nothing with (rulesfile_parse's notes), a
 * line each, and frees it: nothing a file says is dropped in silence. */
static void notes_log(const char *where, ruledef_list_t *list)
{
    for (const char *line = list->notes, *end; line != NULL; line = end != NULL ? end + 1 : NULL) {
        end = strchr(line, '\n');
        log_info("%s: %.*s", where, (int)(end != NULL ? (size_t)(end - line) : strlen(line)), line);
    }
    free(list->notes);
    list->notes = NULL;
}

int rules_import_yaml(config_store_t *store, const char *text, size_t len,
                      const rules_import_opts_t *opts, config_import_diff_t *diff, char *err,
                      size_t cap)
{
    ruledef_list_t list = {0};
    char perr[RULEDEF_ERR_MAX];
    if (rulesfile_parse(text, len, &list, NULL, perr) != 0) {
        snprintf(err, cap, "%s", perr);
        return RULES_IMPORT_EINVALID;
    }
    notes_log("rules imported", &list);
    return import_list(store, list, opts, diff, err, cap);
}

/* The text of the file at path (malloc'ed, *len bytes), or NULL with err. */
static char *read_file(const char *path, size_t *len_out, char *err, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, cap, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t len = 0, size = 64 * 1024;
    char *text = malloc(size);
    while (text != NULL) {
        len += fread(text + len, 1, size - len, f);
        if (len < size) {
            break;
        }
        char *grown = size < 64 * 1024 * 1024 ? realloc(text, size * 2) : NULL;
        if (grown == NULL) {
            free(text);
            text = NULL;
            break;
        }
        text = grown;
        size *= 2;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (text == NULL || failed) {
        free(text);
        snprintf(err, cap, "%s: cannot read (or larger than 64 MiB)", path);
        return NULL;
    }
    *len_out = len;
    return text;
}

/* Moves the rules of `from` to the end of `to`; false (nothing moved) when out of memory. */
static bool list_append(ruledef_list_t *to, ruledef_list_t *from)
{
    ruledef_t *grown = realloc(to->rules, (to->n + from->n + 1) * sizeof *grown);
    if (grown == NULL) {
        return false;
    }
    memcpy(grown + to->n, from->rules, from->n * sizeof *grown);
    to->rules = grown;
    to->n += from->n;
    free(from->rules);
    *from = (ruledef_list_t){0};
    return true;
}

/* The first rule of `list` from index `from` on whose name is also in list[0..from), or SIZE_MAX.
 */
static size_t name_clash(const ruledef_list_t *list, size_t from, size_t *other)
{
    for (size_t i = from; i < list->n; i++) {
        for (size_t j = 0; j < from; j++) {
            if (strcmp(list->rules[i].name, list->rules[j].name) == 0) {
                *other = j;
                return i;
            }
        }
    }
    return SIZE_MAX;
}

static int import_paths(config_store_t *store, char *const *paths, size_t n,
                        const rules_import_opts_t *opts, config_import_diff_t *diff, char *err,
                        size_t cap)
{
    ruledef_list_t all = {0};
    const char **domains = calloc(n > 0 ? n : 1, sizeof *domains);
    size_t *first = calloc(n + 1, sizeof *first); /* all.rules index each file starts at */
    int rc = domains != NULL && first != NULL ? 0 : RULES_IMPORT_ESTORE;
    if (rc != 0) {
        snprintf(err, cap, "out of memory");
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t len = 0;
        char *text = read_file(paths[i], &len, err, cap);
        ruledef_list_t list = {0};
        char perr[RULEDEF_ERR_MAX];
        char *domain = NULL;
        if (text == NULL) {
            rc = RULES_IMPORT_EINVALID;
        } else if (rulesfile_parse(text, len, &list, &domain, perr) != 0) {
            snprintf(err, cap, "%s: %s", paths[i], perr);
            rc = RULES_IMPORT_EINVALID;
        }
        free(text);
        domains[i] = domain;
        for (size_t j = 0; rc == 0 && domain != NULL && j < i; j++) {
            if (domains[j] != NULL && strcmp(domains[j], domain) == 0) {
                snprintf(err, cap, "%s: domain '%.100s' is also configured by %s", paths[i], domain,
                         paths[j]);
                rc = RULES_IMPORT_EINVALID;
            }
        }
        first[i] = all.n;
        notes_log(paths[i], &list);
        if (rc == 0 && !list_append(&all, &list)) {
            snprintf(err, cap, "out of memory");
            rc = RULES_IMPORT_ESTORE;
        }
        ruledef_list_free(&list);
        size_t other = 0, clash = rc == 0 ? name_clash(&all, first[i], &other) : SIZE_MAX;
        if (clash != SIZE_MAX) {
            size_t file = 0;
            while (file + 1 <= i && first[file + 1] <= other) {
                file++;
            }
            snprintf(err, cap, "%s: rule '%s' is also in %s", paths[i], all.rules[clash].name,
                     paths[file]);
            rc = RULES_IMPORT_EINVALID;
        }
    }
    for (size_t i = 0; domains != NULL && i < n; i++) {
        free((char *)domains[i]);
    }
    free(domains);
    free(first);
    if (rc != 0) {
        ruledef_list_free(&all);
        return rc;
    }
    return import_list(store, all, opts, diff, err, cap);
}

/* A *.yaml or *.yml name. */
static bool yaml_name(const char *name)
{
    size_t len = strlen(name);
    return (len > 5 && strcmp(name + len - 5, ".yaml") == 0) ||
           (len > 4 && strcmp(name + len - 4, ".yml") == 0);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of s to (*out)[0..*n), growing *room. False when out of memory. */
static bool push_copy(char ***out, size_t *n, size_t *room, const char *s)
{
    if (*n == *room) {
        size_t bigger = *room * 2 + 8;
        char **grown = realloc(*out, bigger * sizeof **out);
        if (grown == NULL) {
            return false;
        }
        *out = grown;
        *room = bigger;
    }
    (*out)[*n] = strdup(s);
    return (*out)[*n] != NULL && ++*n > 0;
}

/* One directory tree's walk: the files found go to out, the names left out to `skipped`. */
typedef struct walk {
    rules_walk_t how;
    const char *top; /* the directory as given, for messages */
    char ***out;
    size_t *n, *room;
    size_t start, bytes;
    char skipped[512]; /* "a.txt, b (a link to a directory), ..." */
    size_t nskipped, nshown;
    char *err;
    size_t cap;
} walk_t;

static void walk_skip(walk_t *w, const char *name, const char *why)
{
    size_t used = strlen(w->skipped);
    int len = snprintf(NULL, 0, "%s%s%s", used > 0 ? ", " : "", name, why);
    if (w->nshown == w->nskipped && len > 0 && used + (size_t)len < sizeof w->skipped) {
        char *at = w->skipped + used + (used > 0 ? 2 : 0);
        snprintf(w->skipped + used, sizeof w->skipped - used, "%s%s%s", used > 0 ? ", " : "", name,
                 why);
        for (; *at != '\0'; at++) { /* a name is anyone's: no control byte reaches the log */
            *at = (unsigned char)*at < 0x20 || *at == 0x7f ? '?' : *at;
        }
        w->nshown++;
    }
    w->nskipped++;
}

/* A file found: refused past the bounds. False with err. */
static bool walk_take(walk_t *w, const char *full, const struct stat *st)
{
    if (*w->n - w->start >= RULES_WALK_FILES_MAX) {
        snprintf(w->err, w->cap, "%s: more than %d files in it: sluiced reads at most %d", w->top,
                 RULES_WALK_FILES_MAX, RULES_WALK_FILES_MAX);
        return false;
    }
    w->bytes += (size_t)st->st_size;
    if (w->bytes > RULES_WALK_BYTES_MAX) {
        snprintf(w->err, w->cap,
                 "%s: its files hold more than %d MiB together: sluiced reads at "
                 "most that",
                 w->top, RULES_WALK_BYTES_MAX / (1024 * 1024));
        return false;
    }
    if (!push_copy(w->out, w->n, w->room, full)) {
        snprintf(w->err, w->cap, "out of memory");
        return false;
    }
    return true;
}

/* Walks dir (rel: its path below the top, "" for the top) at depth `depth`. False with err. */
static bool walk_dir(walk_t *w, const char *dir, const char *rel, int depth)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        snprintf(w->err, w->cap, "%s: cannot read: %s", dir, strerror(errno));
        return false;
    }
    bool ok = true;
    for (struct dirent *e = readdir(d); ok && e != NULL; e = readdir(d)) {
        const char *name = e->d_name;
        char full[4096], sub[1024];
        struct stat ls, st;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
            (name[0] == '.' && w->how != RULES_WALK_DOTFILES)) {
            continue; /* dot-files are left out without a word, as documented */
        }
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", name);
        if (snprintf(full, sizeof full, "%s/%s", dir, name) >= (int)sizeof full ||
            lstat(full, &ls) != 0) {
            walk_skip(w, sub, " (cannot be read)");
        } else if (S_ISDIR(ls.st_mode) && w->how != RULES_WALK_YAML) {
            if (depth + 1 > RULES_WALK_DEPTH_MAX) {
                snprintf(w->err, w->cap,
                         "%s: %s is more than %d directories deep: sluiced reads "
                         "at most that",
                         w->top, sub, RULES_WALK_DEPTH_MAX);
                ok = false;
            } else {
                ok = walk_dir(w, full, sub, depth + 1);
            }
        } else if (w->how == RULES_WALK_YAML && !yaml_name(name)) {
            walk_skip(w, sub, S_ISDIR(ls.st_mode) ? "/" : "");
        } else if (stat(full, &st) != 0) {
            walk_skip(w, sub, " (a broken link)");
        } else if (S_ISDIR(st.st_mode)) {
            walk_skip(w, sub, w->how == RULES_WALK_YAML ? "/" : " (a link to a directory)");
        } else if (!S_ISREG(st.st_mode)) {
            walk_skip(w, sub, " (not a regular file)");
        } else {
            ok = walk_take(w, full, &st);
        }
    }
    closedir(d);
    return ok;
}

/* Appends the files a path stands for to *out (*n of them): itself, or, for a directory, the
 * files `how` takes (rules_import_files), found under its resolved name, in the order of their
 * paths; the names left out are logged. False with err. */
static bool expand_path(const char *path, rules_walk_t how, char ***out, size_t *n, size_t *room,
                        char *err, size_t cap)
{
    struct stat st;
    char *real = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? realpath(path, NULL) : NULL;
    if (real == NULL) { /* a file: read (or refused) as such */
        if (!push_copy(out, n, room, path)) {
            snprintf(err, cap, "out of memory");
            return false;
        }
        return true;
    }
    walk_t w = {.how = how,
                .top = path,
                .out = out,
                .n = n,
                .room = room,
                .start = *n,
                .err = err,
                .cap = cap};
    bool ok = walk_dir(&w, real, "", 0);
    free(real);
    if (ok && *n > w.start) {
        qsort(*out + w.start, *n - w.start, sizeof **out, by_name);
    }
    if (ok && w.nskipped > 0) {
        log_warn("rules: %s: %zu entries not read (%s): %s%s", path, w.nskipped,
                 how == RULES_WALK_YAML ? "only *.yaml and *.yml files are" : "only files are",
                 w.skipped, w.nshown < w.nskipped ? ", ..." : "");
    }
    return ok;
}

int rules_import_files(config_store_t *store, char *const *paths, size_t n,
                       const rules_import_opts_t *opts, config_import_diff_t *diff, char *err,
                       size_t cap)
{
    char **files = NULL;
    size_t nfiles = 0, room = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        ok = expand_path(paths[i], opts->walk, &files, &nfiles, &room, err, cap);
    }
    int rc = ok ? import_paths(store, files, nfiles, opts, diff, err, cap) : RULES_IMPORT_EINVALID;
    for (size_t i = 0; i < nfiles; i++) {
        free(files[i]);
    }
    free(files);
    return rc;
}

int rules_import_file(config_store_t *store, const char *path, const rules_import_opts_t *opts,
                      config_import_diff_t *diff, char *err, size_t cap)
{
    char *const paths[] = {(char *)path};
    return rules_import_files(store, paths, 1, opts, diff, err, cap);
}

/* Appends one stored override to the rule being exported (config_override_fn). */
typedef struct export_ctx {
    ruledef_t *def;
    size_t cap;
    size_t binary; /* overrides left out: their keys are not UTF-8 */
    bool failed;
} export_ctx_t;

static int export_override(void *arg, const void *key, size_t key_len, const char *json)
{
    export_ctx_t *x = arg;
    ruledef_t *def = x->def;
    if (!text_is_utf8(key, key_len)) {
        x->binary++;
        return 0;
    }
    if (def->noverrides == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 8;
        rule_override_t *grown = realloc(def->overrides, cap * sizeof *grown);
        if (grown == NULL) {
            x->failed = true;
            return 1;
        }
        def->overrides = grown;
        x->cap = cap;
    }
    char perr[RULEDEF_ERR_MAX];
    if (override_parse_json(def, key, key_len, json, strlen(json), &def->overrides[def->noverrides],
                            perr) == 0) {
        def->noverrides++; /* one that no longer fits its rule is left out, as a reload does */
    }
    return 0;
}

char *rules_export_yaml(config_store_t *store, char *err, size_t cap)
{
    config_rule_t *rows = NULL;
    size_t n = 0;
    int64_t version = 0;
    char serr[CONFIG_STORE_ERR_MAX];
    if (config_store_list_rules(store, &rows, &n, &version, serr) != 0) {
        snprintf(err, cap, "config store: %s", serr);
        return NULL;
    }
    ruledef_list_t list = {.rules = calloc(n ? n : 1, sizeof(ruledef_t))};
    char *yaml = NULL;
    bool failed = list.rules == NULL;
    size_t binary = 0;
    for (size_t i = 0; !failed && i < n; i++) {
        char perr[RULEDEF_ERR_MAX];
        ruledef_t *def = &list.rules[list.n];
        if (ruledef_parse_json(rows[i].json, strlen(rows[i].json), rows[i].name, def, perr) != 0) {
            continue;
        }
        list.n++;
        export_ctx_t x = {.def = def};
        if (config_store_foreach_override(store, def->name, 0, export_override, &x, serr) != 0) {
            snprintf(err, cap, "config store: %s", serr);
            config_rules_free(rows, n);
            ruledef_list_free(&list);
            return NULL;
        }
        failed = x.failed;
        binary += x.binary;
    }
    char *body = failed ? NULL : ruledef_list_to_yaml(&list);
    if (body != NULL && binary > 0) {
        const char *fmt = "# %zu overrides are not in this file: their keys are not UTF-8 text, "
                          "which YAML cannot hold\n%s";
        size_t len = strlen(body) + 160;
        if ((yaml = malloc(len)) != NULL) {
            snprintf(yaml, len, fmt, binary, body);
        }
        free(body);
    } else {
        yaml = body;
    }
    if (yaml == NULL) {
        snprintf(err, cap, "out of memory");
    }
    ruledef_list_free(&list);
    config_rules_free(rows, n);
    return yaml;
}

/* "a, b, c" of up to `cap` bytes (the rest counted). */
static void name_list(char *out, size_t cap, char *const *names, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out + used, cap - used, "%s%s", i > 0 ? ", " : "", names[i]);
        if (w < 0 || (size_t)w >= cap - used) {
            snprintf(out + used, cap - used, " ... (%zu in all)", n);
            return;
        }
        used += (size_t)w;
    }
}

void rules_import_log(const char *source, const config_import_diff_t *d)
{
    char names[1024];
    if (d->nadded > 0) {
        name_list(names, sizeof names, d->added, d->nadded);
        log_info("%s: added %zu rules: %s", source, d->nadded, names);
    }
    if (d->nchanged > 0) {
        name_list(names, sizeof names, d->changed, d->nchanged);
        log_info("%s: changed %zu rules: %s", source, d->nchanged, names);
    }
    if (d->nremoved > 0) {
        name_list(names, sizeof names, d->removed, d->nremoved);
        log_info("%s: removed %zu rules (and their overrides): %s", source, d->nremoved, names);
    }
    if (d->overrides_written + d->overrides_removed > 0) {
        log_info("%s: %zu overrides added or changed, %zu removed", source, d->overrides_written,
                 d->overrides_removed);
    }
    if (d->nadded + d->nchanged + d->nremoved + d->overrides_written + d->overrides_removed == 0) {
        log_info("%s: no rule changed", source);
    }
    if (d->kept > 0) {
        log_info("%s: kept %zu rules it does not name (made through the API)", source, d->kept);
    }
}
