/*
 * lua_rows.c - a build tool: writes each algorithm's row (core/algorithms.h) as Lua, for the
 * build to put into that algorithm's script (src/store/lua/<name>.lua, at its line
 * "-- include: row"; lua_scripts.cmake), and the list of the algorithms, so that the scripts
 * shipped are exactly the table's and say what its rows say.
 *
 *   sluice_lua_rows DIR   writes DIR/names.txt (one name a line, in sl_algorithm_t order) and
 *                         DIR/<name>.lua per row; exit 0, or 1 with a message on stderr
 *
 * A row's Lua: ALG, the name (in messages), and NO_LEASE, why the algorithm cannot lease (nil
 * when it can: CORE_CAP_LEASABLE), as the core's own errors say it; HOLDS, whether it takes
 * acquires and releases (CORE_CAP_HOLDS).
 */
#include <stdio.h>
#include <string.h>

#include "core/algorithms.h"

/* Writes s as a Lua string literal ("...", with \ " and control bytes escaped). */
static void lua_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\%03u", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Writes DIR/<name>.lua for one row; false on an I/O error. */
static bool write_row(const char *dir, const core_algorithm_t *row)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.lua", dir, row->name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return false;
    fprintf(f, "-- the row of %s in src/core/algorithms.c, put here by the build\n", row->name);
    fputs("local ALG = ", f);
    lua_string(f, row->name);
    fputs(" -- in error messages\n", f);
    fputs("local NO_LEASE = ", f);
    if (row->caps & CORE_CAP_LEASABLE)
        fputs("nil", f);
    else
        lua_string(f, row->lease_refusal != NULL ? row->lease_refusal : "it cannot");
    fputs(" -- why it cannot lease; nil: it can\n", f);
    fprintf(f, "local HOLDS = %s -- it takes acquires and releases\n",
            (row->caps & CORE_CAP_HOLDS) ? "true" : "false");
    return fclose(f) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: sluice_lua_rows DIR\n");
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/names.txt", argv[1]);
    FILE *names = fopen(path, "w");
    bool ok = names != NULL;
    CORE_ALGORITHM_EACH(row)
    {
        ok = ok && fprintf(names, "%s\n", row->name) > 0 && write_row(argv[1], row);
    }
    if (names != NULL && fclose(names) != 0)
        ok = false;
    if (!ok) {
        fprintf(stderr, "sluice_lua_rows: cannot write into %s\n", argv[1]);
        return 1;
    }
    return 0;
}
