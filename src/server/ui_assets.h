/*
 * ui_assets.h - the console's files (src/server/ui/), compiled into sluiced. The table is
 * generated at build time by cmake/embed_files.cmake into the build tree's ui_assets.c; nothing
 * is read from disk at run time.
 */
#ifndef SLUICE_SERVER_UI_ASSETS_H
#define SLUICE_SERVER_UI_ASSETS_H

#include <stddef.h>

typedef struct ui_asset {
    const char *name;          /* path under ui/, "vendor/uPlot.min.js"; NUL-terminated */
    const char *content_type;  /* Content-Type to serve it with */
    const unsigned char *data; /* the file's bytes (len of them, then a 0 byte) */
    size_t len;                /* bytes */
    const char *etag;          /* quoted strong ETag: the start of its SHA-256, hex */
} ui_asset_t;

/* Every file, sorted by name (strcmp order). */
extern const ui_asset_t ui_assets[];
extern const size_t ui_assets_count; /* entries in ui_assets */

#endif /* SLUICE_SERVER_UI_ASSETS_H */
