/*
 * it_openapi.c - the real stockd answers as web/openapi.json says.
 *
 * Proves:
 *   - GET /openapi.json serves the file of the repository, byte for byte;
 *   - each described operation, sent for real, answers a status its
 *     description lists, with a JSON body its schema accepts (the page and
 *     /metrics: the media type described); every operation described is
 *     sent, so a new one needs its row here;
 *   - every other method on a described path answers 405 method_not_allowed
 *     with an Allow header listing exactly the described methods;
 *   - a Host that names another server gets the described 403 forbidden on
 *     every path.
 * That no route is left undescribed is unit_openapi's (it walks the table).
 */
#include "harness.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_SOLD = 9601,
    PRODUCT_RACED = 9602,
    PRODUCT_NONE = 9603, /* never reset: in no store */
};

/* web/openapi.json as the repository has it, and parsed. */
static char file[1 << 20];
static json_t *doc;

/* One request per described operation: the path described, what is sent,
 * and the status it must get. */
static const struct exchange {
    const char *described, *method, *path, *body;
    long status;
} exchanges[] = {
    {"/stock/reset", "POST", "/stock/reset?product=9601&count=5", NULL, 200},
    {"/stock/deduct/{strategy}", "GET", "/stock/deduct/sql?product=9601&trace=1", NULL, 200},
    {"/stock/deduct/{strategy}", "POST", "/stock/deduct/sql", "{\"product\":9601,\"qty\":5}", 409},
    {"/stock/deduct", "GET", "/stock/deduct?product=9601", NULL, 404},
    {"/stock/deduct", "POST", "/stock/deduct", NULL, 404},
    {"/stock/deduct/", "GET", "/stock/deduct/", NULL, 404},
    {"/stock/deduct/", "POST", "/stock/deduct/?qty=1", NULL, 404},
    {"/stock/{product}", "GET", "/stock/9601", NULL, 200},
    {"/stock/{product}", "GET", "/stock/9603", NULL, 404},
    {"/orders/{id}", "POST", "/orders/sql?product=9601&qty=1&ttl_ms=60000", NULL, 201},
    {"/orders/{id}", "GET", "/orders/m9601-0000000000000000", NULL, 404},
    {"/orders/{order}/pay", "POST", "/orders/m9601-0000000000000000/pay?payment=p1", NULL, 404},
    {"/orders/{order}/cancel", "POST", "/orders/m9601-0000000000000000/cancel", NULL, 404},
    {"/expiry", "GET", "/expiry", NULL, 200},
    {"/strategies", "GET", "/strategies", NULL, 200},
    {"/health", "GET", "/health", NULL, 200},
    {"/ping", "GET", "/ping", NULL, 200},
    {"/metrics", "GET", "/metrics", NULL, 200},
    {"/openapi.json", "GET", "/openapi.json", NULL, 200},
    {"/lab/state", "GET", "/lab/state", NULL, 200},
    {"/lab/race", "POST", "/lab/race",
     "{\"strategy\":\"nolock\",\"product\":9602,\"buyers\":3,\"units\":2}", 200},
    {"/lab/race", "POST", "/lab/race", "{\"strategy\":\"no-such\"}", 404},
    {"/", "GET", "/", NULL, 200},
    {"/lab/lab.css", "GET", "/lab/lab.css", NULL, 200},
    {"/lab/lab.js", "GET", "/lab/lab.js", NULL, 200},
    {"/lab/race.js", "GET", "/lab/race.js", NULL, 200},
    {"/lab/race-panel.js", "GET", "/lab/race-panel.js", NULL, 200},
    {"/lab/linearize.js", "GET", "/lab/linearize.js", NULL, 200},
};
#define EXCHANGES (sizeof exchanges / sizeof exchanges[0])

static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};

/* ------------------------------------------------------ the schemas */

/* `schema` with its $ref followed ("#/components/..."), in `doc`. */
static const json_t *resolve(const json_t *schema)
{
    const char *ref = json_string_value(json_object_get(schema, "$ref"));
    if (!ref)
        return schema;
    assert_true(strncmp(ref, "#/", 2) == 0);
    const json_t *at = doc;
    char part[128];
    for (const char *p = ref + 2; *p;) {
        size_t n = strcspn(p, "/");
        assert_true(n < sizeof part);
        memcpy(part, p, n);
        part[n] = '\0';
        at = json_object_get(at, part);
        p += n + (p[n] == '/');
    }
    assert_non_null(at);
    return resolve(at);
}

static int type_is(const char *type, const json_t *v)
{
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    return strcmp(type, "null") == 0 && json_is_null(v);
}

static int type_ok(const json_t *type, const json_t *v)
{
    if (!type)
        return 1;
    if (json_is_string(type))
        return type_is(json_string_value(type), v);
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t)
    {
        if (type_is(json_string_value(t), v))
            return 1;
    }
    return 0;
}

static int in_enum(const json_t *values, const json_t *v)
{
    size_t i;
    json_t *e;
    json_array_foreach(values, i, e)
    {
        if (json_equal(e, v))
            return 1;
    }
    return 0;
}

/* Whether `v` meets `schema` (the keywords web/openapi.json uses); when
 * not, `why` says where and how. */
static int valid(const json_t *schema, const json_t *v, const char *where, char *why, size_t n);

static int valid_members(const json_t *s, const json_t *v, const char *where, char *why, size_t n)
{
    size_t i;
    json_t *name;
    json_array_foreach(json_object_get(s, "required"), i, name)
    {
        if (!json_object_get(v, json_string_value(name))) {
            snprintf(why, n, "%s: no member %s", where, json_string_value(name));
            return 0;
        }
    }
    const json_t *props = json_object_get(s, "properties"),
                 *more = json_object_get(s, "additionalProperties");
    const char *key;
    json_t *member;
    json_object_foreach((json_t *)v, key, member)
    {
        char inner[256];
        snprintf(inner, sizeof inner, "%s.%s", where, key);
        const json_t *sub = json_object_get(props, key);
        if (!sub && json_is_false(more)) {
            snprintf(why, n, "%s: not described", inner);
            return 0;
        }
        sub = sub ? sub : json_is_object(more) ? more : NULL;
        if (sub && !valid(sub, member, inner, why, n))
            return 0;
    }
    return 1;
}

static int valid(const json_t *schema, const json_t *v, const char *where, char *why, size_t n)
{
    const json_t *s = resolve(schema);
    size_t i;
    json_t *part;
    json_array_foreach(json_object_get(s, "allOf"), i, part)
    {
        if (!valid(part, v, where, why, n))
            return 0;
    }
    const json_t *one_of = json_object_get(s, "oneOf");
    if (one_of) {
        size_t fits = 0;
        json_array_foreach(one_of, i, part) fits += (size_t)valid(part, v, where, why, n);
        if (fits != 1) {
            snprintf(why, n, "%s: fits %zu of oneOf", where, fits);
            return 0;
        }
    }
    const json_t *constant = json_object_get(s, "const"), *values = json_object_get(s, "enum");
    const json_t *min = json_object_get(s, "minimum"), *max = json_object_get(s, "maximum");
    char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    const char *wrong = !type_ok(json_object_get(s, "type"), v)                ? "not of its type"
                        : constant && !json_equal(constant, v)                 ? "not its const"
                        : values && !in_enum(values, v)                        ? "not in its enum"
                        : min && json_number_value(v) < json_number_value(min) ? "under its minimum"
                        : max && json_number_value(v) > json_number_value(max) ? "over its maximum"
                                                                               : NULL;
    if (wrong)
        snprintf(why, n, "%s: %.80s is %s", where, shown ? shown : "?", wrong);
    free(shown);
    if (wrong)
        return 0;
    if (json_is_object(v))
        return valid_members(s, v, where, why, n);
    json_t *item;
    if (json_is_array(v) && json_object_get(s, "items")) {
        json_array_foreach(v, i, item)
        {
            char inner[256];
            snprintf(inner, sizeof inner, "%s[%zu]", where, i);
            if (!valid(json_object_get(s, "items"), item, inner, why, n))
                return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------ checks */

static const json_t *path_item(const char *described)
{
    const json_t *item = json_object_get(json_object_get(doc, "paths"), described);
    if (!item)
        fail_msg("%s is not described", described);
    return item;
}

static void lower(const char *method, char *out)
{
    size_t i = 0;
    for (; method[i]; i++)
        out[i] = (char)tolower((unsigned char)method[i]);
    out[i] = '\0';
}

/* The reply must be one the operation describes for its status. */
static void expect_described(const char *described, const char *method, const json_t *op,
                             const struct http_reply *r)
{
    char status[8];
    snprintf(status, sizeof status, "%ld", r->status);
    const json_t *response = json_object_get(json_object_get(op, "responses"), status);
    if (!response)
        fail_msg("%s %s answered %ld, which it does not describe", method, described, r->status);
    const json_t *content = json_object_get(resolve(response), "content");
    const char *media;
    json_t *media_type;
    json_object_foreach((json_t *)content, media, media_type)
    {
        size_t n = strcspn(r->content_type, ";");
        if (strlen(media) != n || strncmp(r->content_type, media, n) != 0)
            fail_msg("%s %s answered %s, described %s", method, described, r->content_type, media);
        if (strcmp(media, "application/json") != 0)
            continue;
        char why[512];
        if (!r->json ||
            !valid(json_object_get(media_type, "schema"), r->json, "body", why, sizeof why)) {
            print_reply(method, described, r->status, r->json);
            fail_msg("%s %s %ld: %s", method, described, r->status, r->json ? why : "not JSON");
        }
    }
}

static void test_served_document_is_the_file(void **state)
{
    (void)state;
    struct http_reply r;
    http_call("GET", "/openapi.json", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "application/json");
    assert_non_null(r.text);
    assert_string_equal(r.text, file);
    http_reply_free(&r);
}

static void test_operations_answer_as_described(void **state)
{
    (void)state;
    for (size_t i = 0; i < EXCHANGES; i++) {
        const struct exchange *e = &exchanges[i];
        char method[8];
        lower(e->method, method);
        const json_t *op = json_object_get(path_item(e->described), method);
        if (!op)
            fail_msg("%s %s is not described", e->method, e->described);
        struct http_reply r;
        http_call(e->method, e->path, e->body, &r);
        if (r.status != e->status) {
            print_reply(e->method, e->path, r.status, r.json);
            fail_msg("%s %s: %ld, not %ld", e->method, e->path, r.status, e->status);
        }
        expect_described(e->described, e->method, op, &r);
        http_reply_free(&r);
    }
    /* Every described operation was sent above. */
    const char *described;
    json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), described, item)
    {
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            char method[8];
            lower(methods[m], method);
            if (!json_object_get(item, method))
                continue;
            size_t i = 0;
            while (i < EXCHANGES && (strcmp(exchanges[i].described, described) != 0 ||
                                     strcmp(exchanges[i].method, methods[m]) != 0))
                i++;
            if (i == EXCHANGES)
                fail_msg("%s %s is described and never sent: add it to exchanges[]", methods[m],
                         described);
        }
    }
}

/* The first exchange of each described path: its methods not described
 * answer 405 with the described Allow; a rebinding Host answers 403. */
static void test_refusals_are_described(void **state)
{
    (void)state;
    const char *const rebound[] = {"Host: stockd.attacker.example", NULL};
    for (size_t i = 0; i < EXCHANGES; i++) {
        const struct exchange *e = &exchanges[i];
        if (i > 0 && strcmp(exchanges[i - 1].described, e->described) == 0)
            continue;
        const json_t *item = path_item(e->described);
        int get = json_object_get(item, "get") != NULL,
            post = json_object_get(item, "post") != NULL;
        char allow[16];
        snprintf(allow, sizeof allow, "%s%s%s", get ? "GET" : "", get && post ? ", " : "",
                 post ? "POST" : "");
        const json_t *op = json_object_get(item, get ? "get" : "post");
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            char method[8];
            lower(methods[m], method);
            if (json_object_get(item, method))
                continue;
            struct http_reply r;
            http_call(methods[m], e->path, NULL, &r);
            if (r.status != 405 || strcmp(r.allow, allow) != 0)
                fail_msg("%s %s: %ld with Allow '%s', not 405 with '%s'", methods[m], e->path,
                         r.status, r.allow, allow);
            expect_described(e->described, methods[m], op, &r);
            http_reply_free(&r);
        }
        struct http_reply r;
        http_call_with(e->method, e->path, e->body, rebound, &r);
        assert_int_equal(r.status, 403);
        assert_string_equal(reply_word(&r), "forbidden");
        expect_described(e->described, e->method, json_object_get(item, get ? "get" : "post"), &r);
        http_reply_free(&r);
    }
}

static int setup(void **state)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/web/openapi.json",
             getenv("STOCKD_REPO") ? getenv("STOCKD_REPO") : ".");
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(file, 1, sizeof file - 1, f) : 0;
    if (f)
        fclose(f);
    file[len] = '\0';
    json_error_t error;
    doc = json_loads(file, JSON_REJECT_DUPLICATES, &error);
    if (!doc) {
        fprintf(stderr, "%s: %s at line %d\n", path, error.text, error.line);
        return -1;
    }
    return stockd_group_setup(state);
}

static int teardown(void **state)
{
    json_decref(doc);
    return stockd_group_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_served_document_is_the_file),
        cmocka_unit_test(test_operations_answer_as_described),
        cmocka_unit_test(test_refusals_are_described),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
