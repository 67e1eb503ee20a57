/*
 * assets.c - the lab page's files, compiled in.
 *
 * The assembler's .incbin copies each file of web/ into the binary's
 * read-only data at build time (the Makefile makes this object depend on
 * them), so that one binary serves the whole lab: nothing is read from disk
 * at run time, nothing is fetched from the network, and the page always
 * matches the server that serves it.
 */
#include "api/assets.h"

#include <string.h>

/* Defines `symbol` and `symbol`_end around the bytes of `file`. */
#define EMBED(symbol, file)                                                                        \
    __asm__(".section .rodata\n"                                                                   \
            ".balign 16\n"                                                                         \
            ".global " #symbol "\n" #symbol ":\n"                                                  \
            ".incbin \"" file "\"\n"                                                               \
            ".global " #symbol "_end\n" #symbol "_end:\n"                                          \
            ".previous\n");                                                                        \
    extern const char symbol[], symbol##_end[]

EMBED(web_index_html, "web/index.html");
EMBED(web_lab_css, "web/lab.css");
EMBED(web_lab_js, "web/lab.js");
EMBED(web_race_js, "web/race.js");
EMBED(web_race_panel_js, "web/race-panel.js");
EMBED(web_linearize_js, "web/linearize.js");
EMBED(web_openapi_json, "web/openapi.json");

#define ASSET(path, type, symbol)                                                                  \
    {                                                                                              \
        path, type, symbol, symbol##_end                                                           \
    }

static const struct asset assets[] = {
    ASSET("/", "text/html; charset=utf-8", web_index_html),
    ASSET("/lab/lab.css", "text/css; charset=utf-8", web_lab_css),
    ASSET("/lab/lab.js", "text/javascript; charset=utf-8", web_lab_js),
    ASSET("/lab/race.js", "text/javascript; charset=utf-8", web_race_js),
    ASSET("/lab/race-panel.js", "text/javascript; charset=utf-8", web_race_panel_js),
    ASSET("/lab/linearize.js", "text/javascript; charset=utf-8", web_linearize_js),
    ASSET("/openapi.json", "application/json", web_openapi_json), /* every route, described */
};

const struct asset *asset_find(const char *path)
{
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++)
        if (strcmp(assets[i].path, path) == 0)
            return &assets[i];
    return NULL;
}

const struct asset *asset_at(size_t i)
{
    return i < sizeof assets / sizeof assets[0] ? &assets[i] : NULL;
}
