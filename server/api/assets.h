/*
 * assets.h - the files of the live lab page (web/ in the repository),
 * compiled into the binary.
 */
#ifndef STOCKD_ASSETS_H
#define STOCKD_ASSETS_H

#include <stddef.h>

struct asset {
    const char *path;         /* as requested: "/", "/lab/lab.js" */
    const char *content_type; /* with its charset                  */
    const char *bytes, *end;  /* the file, compiled in             */
};

/* The asset served at `path`, or NULL. */
const struct asset *asset_find(const char *path);

/* The i-th asset, or NULL past the last: for the test that keeps
 * web/openapi.json describing each of them. */
const struct asset *asset_at(size_t i);

#endif
