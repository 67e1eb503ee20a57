/*
 * fuzz_request.c - libFuzzer harness for everything stockd does with a
 * request before a backend sees it: the router, the query arguments, the
 * JSON body and parse_bounded_int.
 *
 * An input reads like the start of an HTTP request (tests/fuzz/corpus/request
 * holds examples):
 *
 *     POST /stock/deduct/sql?product=1001&qty=2
 *     {"qty":2}
 *
 * The first line is the method, a space and the target; the rest is the
 * body. The target is cut into a path and query arguments the way
 * libmicrohttpd hands them over: percent-decoded, '+' a space in the query,
 * a bare "?name" with a NULL value, at most HTTP_MAX_ARGS of them.
 *
 * The request is routed, and a handler that reads parameters before any
 * backend (deduct, reset, the accounting path, the race driver) is called, so that the
 * parameters are parsed with the endpoint's own param_spec table. The link
 * wraps params_parse (-Wl,--wrap=params_parse): the wrapper runs the real
 * parser, checks what it did, then answers 400 so that the handler stops
 * before it would reach a backend.
 *
 * Every check that fails prints why and aborts, which libFuzzer records as
 * a finding. Checked:
 *  - route_find answers a handler, 404, or 405 with an Allow value; a path
 *    takes exactly the methods its Allow value names, and whether it
 *    exists does not depend on the method;
 *  - a parse that succeeds took only declared names, each once and with a
 *    value, a body only on POST and only as a JSON object of integers,
 *    gave every value as written (query and body agreeing), in its bounds,
 *    and the declared default only to what was not given;
 *  - a 400 carries a message, and a message survives into the JSON reply;
 *  - a handler that answers without reading its parameters refuses the
 *    request without a backend, and one that did read them passes their
 *    answer on; the accounting path reaches its parameters only with a
 *    product id in it;
 *  - parse_bounded_int agrees with a plain reference on every query value
 *    and path segment.
 */
#include "api/api.h"
#include "api/orders.h"
#include "api/params.h"
#include "api/race.h"
#include "core/worker.h"
#include "http/router.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One input, cut into the request the HTTP layer would build. */
struct fuzz_request {
    char *text; /* a NUL-terminated copy of the input, cut up in place */
    struct query_arg args[HTTP_MAX_ARGS];
    struct http_request req;
};

/* The request being checked, for the report of a broken invariant. */
static const struct fuzz_request *current;

static void report_request(void)
{
    if (!current)
        return;
    const struct http_request *r = &current->req;
    fprintf(stderr, "request: method '%s' path '%s', %u argument(s)%s:\n", r->method, r->path,
            r->nargs, r->too_many_args ? " and more" : "");
    for (unsigned i = 0; i < r->nargs; i++)
        fprintf(stderr, "  '%s' = %s%s%s\n", r->args[i].key, r->args[i].value ? "'" : "",
                r->args[i].value ? r->args[i].value : "NULL", r->args[i].value ? "'" : "");
    fprintf(stderr, "body: %zu byte(s): %.*s\n", r->body_len, (int)r->body_len, r->body);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_request: broken invariant (%s): ", #cond);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            report_request();                                                                      \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------- cutting the input */

static int hex_value(char c)
{
    return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
}

/* Decodes %XX in place (a '%' without two hex digits stays), and '+' into a
 * space when `plus_is_space`. A decoded %00 ends the C string. */
static void percent_decode(char *s, int plus_is_space)
{
    char *out = s;
    for (const char *in = s; *in;) {
        if (in[0] == '%' && isxdigit((unsigned char)in[1]) && isxdigit((unsigned char)in[2])) {
            *out++ = (char)(hex_value(in[1]) * 16 + hex_value(in[2]));
            in += 3;
        } else {
            *out++ = plus_is_space && *in == '+' ? ' ' : *in;
            in++;
        }
    }
    *out = '\0';
}

/* "a=1&b&c=" -> (a, "1"), (b, NULL), (c, ""); past HTTP_MAX_ARGS only the
 * flag is set, as the HTTP layer does. */
static void split_query(char *query, struct fuzz_request *fr)
{
    while (query && *query) {
        char *next = strchr(query, '&');
        if (next)
            *next++ = '\0';
        char *value = strchr(query, '=');
        if (value)
            *value++ = '\0';
        if (fr->req.nargs == HTTP_MAX_ARGS) {
            fr->req.too_many_args = 1;
            return;
        }
        percent_decode(query, 1);
        if (value)
            percent_decode(value, 1);
        fr->args[fr->req.nargs++] = (struct query_arg){query, value};
        query = next;
    }
}

static void cut_input(const uint8_t *data, size_t size, struct fuzz_request *fr)
{
    fr->text = malloc(size + 1);
    CHECK(fr->text, "out of memory");
    memcpy(fr->text, data, size);
    fr->text[size] = '\0';
    char *line = fr->text;
    char *newline = memchr(line, '\n', size);
    fr->req.body = newline ? newline + 1 : "";
    fr->req.body_len = newline ? size - (size_t)(newline + 1 - line) : 0;
    if (newline)
        *newline = '\0';
    char *target = strchr(line, ' ');
    if (target)
        *target++ = '\0';
    char *query = target ? strchr(target, '?') : NULL;
    if (query)
        *query++ = '\0';
    fr->req.method = line;
    fr->req.path = target ? target : "";
    fr->req.args = fr->args;
    if (target)
        percent_decode(target, 0);
    split_query(query, fr);
}

/* ---------------------------------------------------------- the reference */

/* What parse_bounded_int promises, found another way (strtoll): a whole
 * decimal integer in [min, max], digits only. */
static int reference_int(const char *text, long long min, long long max, long long *out)
{
    if (!*text || text[strspn(text, "0123456789")] != '\0')
        return -1;
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* parse_bounded_int and the reference agree on `text` for a few ranges. */
static void check_bounded_int(const char *text)
{
    static const long long ranges[][2] = {
        {0, LLONG_MAX}, {1, 1000}, {0, 1000}, {1, INT_MAX}, {0, 1000000000}, {5, 5},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        long long got = -1, want = -1;
        int rc = parse_bounded_int(text, ranges[i][0], ranges[i][1], &got);
        int want_rc = reference_int(text, ranges[i][0], ranges[i][1], &want);
        CHECK(rc == want_rc && (rc != 0 || got == want),
              "parse_bounded_int('%s', %lld, %lld) = %d (%lld), the reference says %d (%lld)", text,
              ranges[i][0], ranges[i][1], rc, got, want_rc, want);
    }
}

/* ------------------------------------------------------------- the router */

/* A method no endpoint takes: routing it gives the Allow value of a path. */
#define NO_METHOD "FUZZ"

#define ALLOW_MAX 8

/* Splits an Allow value "M1, M2, ..." into its method names; -1 when it is
 * not such a list of upper-case names. */
static int allow_split(const char *allow, char names[ALLOW_MAX][16])
{
    int n = 0;
    for (const char *p = allow; n < ALLOW_MAX; p += 2) {
        size_t len = 0;
        while (p[len] >= 'A' && p[len] <= 'Z' && len + 1 < sizeof names[0])
            len++;
        if (len == 0)
            return -1;
        memcpy(names[n], p, len);
        names[n++][len] = '\0';
        p += len;
        if (*p == '\0')
            return n;
        if (strncmp(p, ", ", 2) != 0)
            return -1;
    }
    return -1;
}

/* The Allow value of an existing path: well formed, not cut short, every
 * method it names routed on that path; returns whether it names `method`. */
static int check_allow(const char *path, const char *allow, const char *method)
{
    struct route_match m;
    char names[ALLOW_MAX][16];
    int n = allow_split(allow, names);
    CHECK(n > 0, "Allow value '%s' on %s", allow, path);
    CHECK(strlen(allow) + 1 < sizeof m.allow, "Allow value '%s' may be cut short", allow);
    int named = 0;
    for (int i = 0; i < n; i++) {
        route_find(names[i], path, &m);
        CHECK(m.result == ST_OK, "Allow '%s' names %s, which gets result %d", allow, names[i],
              m.result);
        named |= strcmp(names[i], method) == 0;
    }
    return named;
}

/* Routes the request and checks that the answer is one route_find
 * documents, and that it agrees with the path's Allow value. Returns the
 * worker's handler, or NULL for a page answered on the HTTP thread, a 404
 * or a 405. */
static handler_fn check_route(const struct http_request *req)
{
    struct route_match m, other;
    route_find(req->method, req->path, &m);
    route_find(NO_METHOD, req->path, &other);
    CHECK(other.result == ST_NOT_FOUND || other.result == ST_METHOD_NOT_ALLOWED,
          "%s gets result %d", NO_METHOD, other.result);
    CHECK((m.result == ST_NOT_FOUND) == (other.result == ST_NOT_FOUND),
          "%s gets %d on the same path, %s gets %d", NO_METHOD, other.result, req->method,
          m.result);
    int allowed =
        other.result == ST_METHOD_NOT_ALLOWED && check_allow(req->path, other.allow, req->method);
    CHECK(m.result == ST_OK || m.result == ST_NOT_FOUND || m.result == ST_METHOD_NOT_ALLOWED,
          "route_find gave result %d", m.result);
    CHECK((m.result == ST_OK) == ((m.handler != NULL) != (m.page != NULL)),
          "result %d with handler %p and page %p", m.result, (void *)(uintptr_t)m.handler,
          (void *)(uintptr_t)m.page);
    CHECK((m.result == ST_OK) == allowed, "result %d for %s, whose Allow is '%s'", m.result,
          req->method, other.allow);
    if (m.result == ST_METHOD_NOT_ALLOWED)
        CHECK(strcmp(m.allow, other.allow) == 0, "Allow '%s' for %s but '%s' for %s", m.allow,
              req->method, other.allow, NO_METHOD);
    else
        CHECK(m.allow[0] == '\0', "result %d with Allow '%s'", m.result, m.allow);
    return m.handler;
}

/* -------------------------------------------------------- the parameters */

static int spec_named(const struct param_spec *specs, unsigned n, const char *name)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* A failure's message reaches the client: the HTTP layer puts it in the
 * reply with json_string(), which refuses text that is not UTF-8. */
static void check_message(st_result r, const char *message)
{
    CHECK(r != ST_BAD_REQUEST || message[0] != '\0', "a 400 without a message");
    json_t *shown = json_string(message);
    CHECK(shown != NULL, "the message '%s' is not UTF-8, so the reply goes without it", message);
    json_decref(shown);
}

/* A text parameter's accepted value: its length in bounds, taken by its
 * check, and marked given. */
static void check_accepted_text(const struct param_spec *spec, const char *text, long long value)
{
    long long len = (long long)strlen(text);
    CHECK(len >= spec->min && len <= spec->max && spec->text(text) && value == 1,
          "accepted %s='%s' (%lld characters) as %lld", spec->name, text, len, value);
}

/* The query arguments of an accepted request, marking each given one. */
static void check_accepted_query(const struct http_request *req, const struct param_spec *specs,
                                 unsigned n, const long long *values, int *given)
{
    CHECK(!req->too_many_args, "accepted more than %d query arguments", HTTP_MAX_ARGS);
    for (unsigned a = 0; a < req->nargs; a++) {
        const struct query_arg *arg = &req->args[a];
        int i = spec_named(specs, n, arg->key);
        CHECK(i >= 0, "accepted the unknown query argument '%s'", arg->key);
        CHECK(arg->value != NULL, "accepted '%s' without a value", arg->key);
        CHECK(!given[i], "accepted '%s' twice in the query", arg->key);
        given[i] = 1;
        if (specs[i].text) {
            check_accepted_text(&specs[i], arg->value, values[i]);
            continue;
        }
        long long v;
        CHECK(reference_int(arg->value, specs[i].min, specs[i].max, &v) == 0 && v == values[i],
              "accepted %s='%s' as %lld", arg->key, arg->value, values[i]);
    }
}

/* The JSON body of an accepted request, marking each given member. */
static void check_accepted_body(const struct http_request *req, const struct param_spec *specs,
                                unsigned n, const long long *values, int *given)
{
    if (req->body_len == 0)
        return;
    CHECK(strcmp(req->method, "POST") == 0, "accepted a body on %s", req->method);
    json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, NULL);
    CHECK(json_is_object(root), "accepted a body that is not a JSON object without repeats");
    const char *name;
    json_t *member;
    json_object_foreach(root, name, member)
    {
        int i = spec_named(specs, n, name);
        CHECK(i >= 0, "accepted the unknown body member '%s'", name);
        if (specs[i].text) {
            CHECK(json_is_string(member), "accepted body member '%s' as a text", name);
            check_accepted_text(&specs[i], json_string_value(member), values[i]);
        } else
            CHECK(json_is_integer(member) && json_integer_value(member) == values[i],
                  "accepted body member '%s' as %lld", name, values[i]);
        given[i] = 1;
    }
    json_decref(root);
}

static void check_accepted(const struct http_request *req, const struct param_spec *specs,
                           unsigned n, const long long *values)
{
    int given[64] = {0};
    CHECK(n <= sizeof given / sizeof given[0], "%u parameters declared", n);
    check_accepted_query(req, specs, n, values, given);
    check_accepted_body(req, specs, n, values, given);
    for (unsigned i = 0; i < n; i++) {
        CHECK(specs[i].text || (values[i] >= specs[i].min && values[i] <= specs[i].max),
              "%s is %lld, outside %lld..%lld", specs[i].name, values[i], specs[i].min,
              specs[i].max);
        CHECK(given[i] || (specs[i].fallback != PARAM_REQUIRED && values[i] == specs[i].fallback),
              "%s was not given but is %lld", specs[i].name, values[i]);
    }
}

/* Whether the handler being called reached params_parse. */
static int parameters_read;

st_result __real_params_parse(struct worker *w, const struct http_request *req,
                              const struct param_spec *specs, unsigned nspecs, long long *values);

/* Every call of params_parse, from the handlers in api.c, comes here. */
st_result __wrap_params_parse(struct worker *w, const struct http_request *req,
                              const struct param_spec *specs, unsigned nspecs, long long *values)
{
    parameters_read = 1;
    st_result r = __real_params_parse(w, req, specs, nspecs, values);
    CHECK(r == ST_OK || r == ST_BAD_REQUEST, "params_parse gave result %d", r);
    if (r == ST_OK)
        check_accepted(req, specs, nspecs, values);
    else
        check_message(r, w->error);
    /* Stop the handler here, before any backend. */
    return worker_fail(w, ST_BAD_REQUEST, "stopped after the parameters");
}

/* ------------------------------------------------------------ the handlers */

/* The handlers that read their parameters before they need a backend. The
 * others are only routed (health, for one, pings every backend). */
static const handler_fn handlers_to_call[] = {api_deduct, api_reset,       api_stock,
                                              api_race,   api_orders_post, api_orders_get};

static int to_call(handler_fn handler)
{
    for (size_t i = 0; i < sizeof handlers_to_call / sizeof handlers_to_call[0]; i++)
        if (handlers_to_call[i] == handler)
            return 1;
    return 0;
}

static void call_handler(handler_fn handler, const struct http_request *req)
{
    static struct worker *w; /* no backend is ever reached: it stays without links */
    if (!w)
        w = worker_new();
    w->error[0] = '\0';
    parameters_read = 0;
    json_t *reply = json_object();
    st_result r = handler(w, req, reply);
    json_decref(reply);
    if (parameters_read) {
        CHECK(r == ST_BAD_REQUEST, "the handler turned the parameters' 400 into result %d", r);
    } else {
        CHECK(r != ST_OK && r != ST_BACKEND_UNAVAILABLE,
              "the handler answered %d without reading its parameters", r);
        check_message(r, w->error);
    }
    if (handler == api_stock && parameters_read) {
        long long product;
        const char *id = req->path + strlen("/stock/");
        CHECK(reference_int(id, 1, INT_MAX, &product) == 0,
              "the accounting path took '%s' for a product id", id);
    }
}

/* ---------------------------------------------------------------- libFuzzer */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_request fr = {0};
    cut_input(data, size, &fr);
    current = &fr;
    for (unsigned i = 0; i < fr.req.nargs; i++)
        if (fr.args[i].value)
            check_bounded_int(fr.args[i].value);
    const char *segment = strrchr(fr.req.path, '/');
    check_bounded_int(segment ? segment + 1 : fr.req.path);
    handler_fn handler = check_route(&fr.req);
    if (handler && to_call(handler))
        call_handler(handler, &fr.req);
    current = NULL;
    free(fr.text);
    return 0;
}
