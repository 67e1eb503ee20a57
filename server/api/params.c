/*
 * params.c - validation of request parameters, query and JSON body alike.
 */
#include "api/params.h"

#include "core/worker.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

int parse_bounded_int(const char *text, long long min, long long max, long long *out)
{
    if (!text || !*text)
        return -1;
    long long v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v))
            return -1; /* over LLONG_MAX, so over any max */
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int spec_index(const struct param_spec *specs, unsigned n, const char *name)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0)
            return (int)i;
    return -1;
}

static st_result out_of_range(struct worker *w, const struct param_spec *spec, const char *where,
                              const char *given)
{
    return worker_fail(w, ST_BAD_REQUEST, "%s in the %s must be an integer %lld..%lld, not %s",
                       spec->name, where, spec->min, spec->max, given);
}

static st_result unknown_name(struct worker *w, const char *name, const char *where,
                              const struct param_spec *specs, unsigned n)
{
    char known[160] = "none";
    size_t len = 0;
    for (unsigned i = 0; i < n && len < sizeof known; i++)
        len +=
            (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", specs[i].name);
    return worker_fail(w, ST_BAD_REQUEST, "unknown parameter '%.40s' in the %s (known: %s)", name,
                       where, known);
}

static st_result bad_text(struct worker *w, const struct param_spec *spec, const char *where,
                          const char *given)
{
    return worker_fail(w, ST_BAD_REQUEST,
                       "%s in the %s must be a text of %lld..%lld of the characters it allows, "
                       "not %s",
                       spec->name, where, spec->min, spec->max, given);
}

/* Whether `value` is a text `spec` takes. */
static int text_fits(const struct param_spec *spec, const char *value)
{
    long long len = (long long)strlen(value);
    assert(spec->max <= PARAM_TEXT_MAX);
    return len >= spec->min && len <= spec->max && spec->text(value);
}

/* Checks one query value against its row into values[i]. */
static st_result query_value(struct worker *w, const struct param_spec *spec, const char *value,
                             long long *slot)
{
    char shown[48];
    snprintf(shown, sizeof shown, "'%.40s'", value);
    if (spec->text) {
        *slot = 1;
        return text_fits(spec, value) ? ST_OK : bad_text(w, spec, "query", shown);
    }
    if (parse_bounded_int(value, spec->min, spec->max, slot) != 0)
        return out_of_range(w, spec, "query", shown);
    return ST_OK;
}

static st_result from_query(struct worker *w, const struct http_request *req,
                            const struct param_spec *specs, unsigned n, long long *values,
                            int *given)
{
    if (req->too_many_args)
        return worker_fail(w, ST_BAD_REQUEST, "more than %d query parameters", HTTP_MAX_ARGS);
    for (unsigned a = 0; a < req->nargs; a++) {
        const struct query_arg *arg = &req->args[a];
        int i = spec_index(specs, n, arg->key);
        if (i < 0)
            return unknown_name(w, arg->key, "query", specs, n);
        if (given[i])
            return worker_fail(w, ST_BAD_REQUEST, "%s is given twice in the query", arg->key);
        if (!arg->value)
            return worker_fail(w, ST_BAD_REQUEST, "%s in the query has no value", arg->key);
        st_result r = query_value(w, &specs[i], arg->value, &values[i]);
        if (r != ST_OK)
            return r;
        given[i] = 1;
    }
    return ST_OK;
}

/* A text member of the body, which must be the query's when both give it. */
static st_result body_text(struct worker *w, const struct http_request *req,
                           const struct param_spec *spec, json_t *value, const char *shown,
                           long long *slot, int *given)
{
    char in_query[PARAM_TEXT_MAX + 1];
    if (!json_is_string(value) || !text_fits(spec, json_string_value(value)))
        return bad_text(w, spec, "body", shown);
    if (*given && params_text(req, spec, in_query) &&
        strcmp(in_query, json_string_value(value)) != 0)
        return worker_fail(w, ST_BAD_REQUEST, "%s is '%s' in the query but %s in the body",
                           spec->name, in_query, shown);
    *slot = 1;
    *given = 1;
    return ST_OK;
}

static st_result body_member(struct worker *w, const struct http_request *req,
                             const struct param_spec *spec, json_t *value, long long *slot,
                             int *given)
{
    char *shown = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
    st_result r = ST_OK;
    if (spec->text) {
        r = body_text(w, req, spec, value, shown ? shown : "that", slot, given);
        free(shown);
        return r;
    }
    long long v = json_is_integer(value) ? json_integer_value(value) : 0;
    if (!json_is_integer(value) || v < spec->min || v > spec->max)
        r = out_of_range(w, spec, "body", shown ? shown : "that");
    else if (*given && *slot != v)
        r = worker_fail(w, ST_BAD_REQUEST, "%s is %lld in the query but %lld in the body",
                        spec->name, *slot, v);
    else {
        *slot = v;
        *given = 1;
    }
    free(shown);
    return r;
}

static st_result from_body(struct worker *w, const struct http_request *req,
                           const struct param_spec *specs, unsigned n, long long *values,
                           int *given)
{
    if (req->body_len == 0)
        return ST_OK;
    if (strcmp(req->method, "POST") != 0)
        return worker_fail(w, ST_BAD_REQUEST, "a %s request takes no body; use the query string",
                           req->method);
    json_error_t error;
    json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &error);
    if (!root)
        return worker_fail(w, ST_BAD_REQUEST, "body is not valid JSON: %s at line %d column %d",
                           error.text, error.line, error.column);
    st_result r = ST_OK;
    if (!json_is_object(root))
        r = worker_fail(w, ST_BAD_REQUEST, "body must be a JSON object");
    const char *name;
    json_t *value;
    json_object_foreach(root, name, value)
    {
        if (r != ST_OK)
            break;
        int i = spec_index(specs, n, name);
        r = i < 0 ? unknown_name(w, name, "body", specs, n)
                  : body_member(w, req, &specs[i], value, &values[i], &given[i]);
    }
    json_decref(root);
    return r;
}

/* params_parse() without its keeping. */
static st_result parse_fresh(struct worker *w, const struct http_request *req,
                             const struct param_spec *specs, unsigned nspecs, long long *values)
{
    int given[PARAMS_MAX] = {0};
    if (nspecs > PARAMS_MAX)
        return worker_fail(w, ST_BAD_REQUEST, "too many parameters declared");
    st_result r = from_query(w, req, specs, nspecs, values, given);
    if (r == ST_OK)
        r = from_body(w, req, specs, nspecs, values, given);
    for (unsigned i = 0; r == ST_OK && i < nspecs; i++) {
        if (given[i])
            continue;
        if (specs[i].fallback == PARAM_REQUIRED)
            return worker_fail(w, ST_BAD_REQUEST, "%s is required", specs[i].name);
        values[i] = specs[i].fallback;
    }
    return r;
}

st_result params_parse(struct worker *w, const struct http_request *req,
                       const struct param_spec *specs, unsigned nspecs, long long *values)
{
    struct params_parsed *kept = req->parsed;
    if (kept && specs && kept->specs == specs) {
        assert(nspecs <= PARAMS_MAX);
        memcpy(values, kept->values, nspecs * sizeof *values);
        return ST_OK;
    }
    st_result r = parse_fresh(w, req, specs, nspecs, values);
    if (r == ST_OK && kept && specs) {
        kept->specs = specs;
        memcpy(kept->values, values, nspecs * sizeof *values);
    }
    return r;
}

int params_text(const struct http_request *req, const struct param_spec *spec,
                char out[PARAM_TEXT_MAX + 1])
{
    assert(spec->text);
    for (unsigned a = 0; a < req->nargs; a++)
        if (strcmp(req->args[a].key, spec->name) == 0 && req->args[a].value) {
            snprintf(out, PARAM_TEXT_MAX + 1, "%s", req->args[a].value);
            return 1;
        }
    if (!req->body_len)
        return 0;
    json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, NULL);
    const char *text = json_string_value(json_object_get(root, spec->name));
    if (text)
        snprintf(out, PARAM_TEXT_MAX + 1, "%s", text);
    json_decref(root);
    return text != NULL;
}

int params_ask_to_wait(const struct param_table *table, const struct http_request *req)
{
    for (unsigned i = 0; table && i < table->count; i++) {
        const struct param_spec *spec = &table->specs[i];
        if (!spec->waits)
            continue;
        for (unsigned a = 0; a < req->nargs; a++)
            if (strcmp(req->args[a].key, spec->name) == 0 && req->args[a].value &&
                *req->args[a].value && strcmp(req->args[a].value, "0") != 0)
                return 1;
        if (req->body && memmem(req->body, req->body_len, spec->name, strlen(spec->name)))
            return 1;
    }
    return 0;
}

st_result params_key(struct worker *w, const struct http_request *req,
                     char key[IDEMPOTENCY_KEY_MAX + 1])
{
    key[0] = '\0';
    const char *sent = req->idempotency_key;
    if (!sent)
        return ST_OK;
    size_t len = strlen(sent);
    if (len == 0 || len > IDEMPOTENCY_KEY_MAX)
        return worker_fail(w, ST_BAD_REQUEST, "Idempotency-Key must be 1..%d characters, not %zu%s",
                           IDEMPOTENCY_KEY_MAX, len, len > IDEMPOTENCY_KEY_MAX ? " or more" : "");
    for (size_t i = 0; i < len; i++)
        if (sent[i] < 0x21 || sent[i] > 0x7e)
            return worker_fail(w, ST_BAD_REQUEST,
                               "Idempotency-Key must be printable ASCII (0x21..0x7e); byte %zu is "
                               "0x%02x",
                               i, (unsigned char)sent[i]);
    memcpy(key, sent, len + 1);
    return ST_OK;
}
