/*
 * tmpdir.h - test helper: one temporary directory per test program, made by the cmocka group
 * setup (tmpdir_create) and removed with everything in it by the group teardown (tmpdir_remove),
 * and fresh file paths inside it (tmpdir_file).
 */
#ifndef SLUICE_TESTS_TMPDIR_H
#define SLUICE_TESTS_TMPDIR_H

#include <ftw.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define TMPDIR_MAX 64 /* "/tmp/sluice-<name>-XXXXXX", bytes */

static char tmpdir[TMPDIR_MAX]; /* the directory, once tmpdir_create made it */
static int tmpdir_seq;          /* the number in the next tmpdir_file path */

/* Makes the directory "/tmp/sluice-<name>-XXXXXX" with a unique suffix. Returns 0, or -1 when
 * the name is too long or mkdtemp fails. */
static inline int tmpdir_create(const char *name)
{
    int n = snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-%s-XXXXXX", name);
    if (n < 0 || (size_t)n >= sizeof(tmpdir))
        return -1;
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static inline int tmpdir_rm_entry(const char *path, const struct stat *sb, int flag,
                                  struct FTW *ftw)
{
    return remove(path);
}

/* Removes the directory and everything in it; a cmocka group teardown. Returns 0 or -1. */
static inline int tmpdir_remove(void **unused)
{
    return nftw(tmpdir, tmpdir_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes a path no earlier call returned, "<dir>/<stem>-<n><suffix>", to path[0..size). */
static inline void tmpdir_file(char *path, size_t size, const char *stem, const char *suffix)
{
    snprintf(path, size, "%s/%s-%d%s", tmpdir, stem, tmpdir_seq++, suffix);
}

#endif /* SLUICE_TESTS_TMPDIR_H */
