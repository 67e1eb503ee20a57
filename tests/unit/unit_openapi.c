/*
 * unit_openapi.c - web/openapi.json describes the endpoint table, no more
 * and no less: the document compiled into stockd (GET /openapi.json) is
 * read back and walked against route_find() and the lab page's assets.
 *
 * A route added to router.c without its description, or a path described
 * that the table does not answer, fails here; so does a method described
 * that the route refuses (or taken that is not described), an admin route
 * without the admin token's security, and a state-changing route without
 * the cross-site 403.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api/assets.h"
#include "http/router.h"

/* Every method a path item may describe; the router knows GET and POST. */
static const char *const methods[] = {"get",     "put",  "post",  "delete",
                                      "options", "head", "patch", "trace"};
#define METHOD_COUNT (sizeof methods / sizeof methods[0])

static json_t *document(void)
{
    const struct asset *a = asset_find("/openapi.json");
    assert_non_null(a);
    json_error_t error;
    json_t *doc = json_loadb(a->bytes, (size_t)(a->end - a->bytes), JSON_REJECT_DUPLICATES, &error);
    if (!doc)
        fail_msg("web/openapi.json: %s at line %d", error.text, error.line);
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
    return doc;
}

/* The example of the parameter `name` of `item` (path-level or one of its
 * operations'), as text. */
static void example_of(const json_t *item, const char *name, char *out, size_t size)
{
    json_t *lists[METHOD_COUNT + 1] = {json_object_get(item, "parameters")};
    for (size_t m = 0; m < METHOD_COUNT; m++)
        lists[m + 1] = json_object_get(json_object_get(item, methods[m]), "parameters");
    for (size_t l = 0; l < METHOD_COUNT + 1; l++) {
        size_t i;
        json_t *p;
        json_array_foreach(lists[l], i, p)
        {
            if (strcmp(json_string_value(json_object_get(p, "name")), name) != 0)
                continue;
            json_t *ex = json_object_get(p, "example");
            if (json_is_string(ex))
                snprintf(out, size, "%s", json_string_value(ex));
            else if (json_is_integer(ex))
                snprintf(out, size, "%lld", (long long)json_integer_value(ex));
            else
                fail_msg("path parameter %s has no example", name);
            return;
        }
    }
    fail_msg("path parameter {%s} is not declared", name);
}

/* The path with each {name} replaced by its parameter's example. */
static void sample_path(const char *path, const json_t *item, char *out, size_t size)
{
    size_t len = 0;
    for (const char *at = path; *at && len < size - 1;) {
        if (*at != '{') {
            out[len++] = *at++;
            continue;
        }
        char name[64];
        size_t n = strcspn(at + 1, "}");
        assert_true(n < sizeof name && at[1 + n] == '}');
        memcpy(name, at + 1, n);
        name[n] = '\0';
        char value[64];
        example_of(item, name, value, sizeof value);
        len += (size_t)snprintf(out + len, size - len, "%s", value);
        at += n + 2;
    }
    out[len] = '\0';
}

/* The Allow header a path item's operations make: "GET", "POST", "GET, POST". */
static void allow_of(const json_t *item, char *out, size_t size)
{
    int get = json_object_get(item, "get") != NULL, post = json_object_get(item, "post") != NULL;
    snprintf(out, size, "%s%s%s", get ? "GET" : "", get && post ? ", " : "", post ? "POST" : "");
}

static int needs_admin_token(const json_t *op)
{
    size_t i;
    json_t *req;
    json_array_foreach(json_object_get(op, "security"), i, req)
    {
        if (json_object_get(req, "adminToken"))
            return 1;
    }
    return 0;
}

static const char *response_ref(const json_t *op, const char *status)
{
    json_t *r = json_object_get(json_object_get(op, "responses"), status);
    return json_string_value(json_object_get(r, "$ref"));
}

/* One described operation against the route its sample path finds. */
static void check_operation(const char *path, const char *method, const json_t *op,
                            const struct route_match *m)
{
    if (m->result != ST_OK)
        fail_msg("%s %s is described but the router answers %d (Allow: %s)", method, path,
                 m->result, m->allow);
    int admin = (m->flags & ROUTE_ADMIN) != 0;
    if (needs_admin_token(op) != admin)
        fail_msg("%s %s: the router %s the admin token, the description %s", method, path,
                 admin ? "needs" : "does not need", admin ? "does not" : "does");
    if ((json_object_get(json_object_get(op, "responses"), "401") != NULL) != admin)
        fail_msg("%s %s: a 401 is described exactly where the admin token is needed", method, path);
    const char *forbidden = response_ref(op, "403");
    const char *want = m->flags & ROUTE_CHANGES_STATE ? "#/components/responses/Forbidden"
                                                      : "#/components/responses/HostForbidden";
    if (!forbidden || strcmp(forbidden, want) != 0)
        fail_msg("%s %s: its 403 must be %s", method, path, want);
    if (!response_ref(op, "405"))
        fail_msg("%s %s: the 405 with Allow is not described", method, path);
}

/* Every path described: each method it describes is taken, every other is
 * refused with the Allow header its operations make. Marks the rows reached. */
static void test_described_paths_are_routed(void **state)
{
    (void)state;
    json_t *doc = document();
    unsigned char reached[64] = {0};
    assert_true(route_count() <= sizeof reached);
    const char *path;
    json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), path, item)
    {
        char sample[256], allow[32];
        sample_path(path, item, sample, sizeof sample);
        allow_of(item, allow, sizeof allow);
        for (size_t k = 0; k < METHOD_COUNT; k++) {
            char method[16];
            size_t n = strlen(methods[k]);
            for (size_t c = 0; c <= n; c++)
                method[c] = (char)toupper((unsigned char)methods[k][c]);
            struct route_match m;
            route_find(method, sample, &m);
            if (m.result == ST_NOT_FOUND)
                fail_msg("%s (%s) is described but no route answers it", path, sample);
            reached[m.row] = 1;
            json_t *op = json_object_get(item, methods[k]);
            if (op)
                check_operation(path, method, op, &m);
            else if (m.result != ST_METHOD_NOT_ALLOWED || strcmp(m.allow, allow) != 0)
                fail_msg("%s %s: described methods %s, the router answers %d with Allow '%s'",
                         method, path, allow, m.result, m.allow);
        }
    }
    for (size_t i = 0; i < route_count(); i++)
        if (!reached[i])
            fail_msg("row %zu of the router's table is reached by no path of web/openapi.json", i);
    json_decref(doc);
}

/* The media type of a content type, without its parameters. */
static int same_media(const char *content_type, const char *media)
{
    size_t n = strcspn(content_type, ";");
    return strlen(media) == n && strncmp(content_type, media, n) == 0;
}

/* Each asset compiled in is described, with its media type; each path
 * described as an asset is one. */
static void test_assets_are_described(void **state)
{
    (void)state;
    json_t *doc = document();
    json_t *paths = json_object_get(doc, "paths");
    for (size_t i = 0; asset_at(i); i++) {
        const struct asset *a = asset_at(i);
        json_t *content = json_object_get(
            json_object_get(json_object_get(json_object_get(json_object_get(paths, a->path), "get"),
                                            "responses"),
                            "200"),
            "content");
        if (!content)
            fail_msg("asset %s has no described 200 of GET", a->path);
        const char *media;
        json_t *value;
        size_t kinds = 0;
        json_object_foreach(content, media, value)
        {
            kinds++;
            if (!same_media(a->content_type, media))
                fail_msg("asset %s is served as %s, described as %s", a->path, a->content_type,
                         media);
        }
        assert_int_equal(kinds, 1);
    }
    const char *path;
    json_t *item;
    json_object_foreach(paths, path, item)
    {
        struct route_match m;
        route_find("GET", path, &m);
        if (m.result == ST_OK && m.page == api_asset && !asset_find(path))
            fail_msg("%s is described, routed to the assets, and no asset", path);
    }
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_described_paths_are_routed),
        cmocka_unit_test(test_assets_are_described),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
