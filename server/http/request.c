/*
 * request.c - the steps that touch one request alone: gathering what
 * arrived, keeping its text past its connection, and its reply, from a
 * JSON document to libmicrohttpd's response with its headers.
 *
 * None of them waits or looks at another thread: each is called by
 * whichever thread has the request at that moment (http.c says which), and
 * the phase a request is in says which steps are still to come
 * (phase_move() holds it to them). libmicrohttpd parses HTTP and decodes
 * the query; we never touch raw bytes. Every reply names this instance in
 * X-Stockd-Instance.
 */
#include "http/request.h"

#include "core/config.h"
#include "core/log.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void phase_move(struct pending *p, enum phase from, enum phase to)
{
    assert(p->phase == from && to > from);
    p->phase = to;
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct pending *p = cls;
    if (p->nargs == HTTP_MAX_ARGS) {
        p->too_many_args = 1;
        return MHD_NO;
    }
    p->args[p->nargs++] = (struct query_arg){key, value};
    return MHD_YES;
}

void collect_args(struct pending *p)
{
    MHD_get_connection_values(p->connection, MHD_GET_ARGUMENT_KIND, collect_arg, p);
    const char *key =
        MHD_lookup_connection_value(p->connection, MHD_HEADER_KIND, "Idempotency-Key");
    p->has_key = key != NULL;
    if (key)
        snprintf(p->key, sizeof p->key, "%s", key);
}

/* A reply document whose first member is "ok"; finish_reply() sets it.
 * Built member by member: json_pack() would parse its format for every
 * request. */
json_t *new_reply(void)
{
    json_t *doc = json_object();
    if (doc && json_object_set_new(doc, "ok", json_false()) != 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* Completes `doc` for result `r` (ok, error word, message) and renders it
 * as the reply. Takes the reference to `doc`. */
void finish_reply(struct pending *p, st_result r, json_t *doc, const char *message)
{
    json_object_set_new(doc, "ok", json_boolean(result_ok(r)));
    if (!result_ok(r)) {
        json_object_set_new(doc, "error", json_string(result_word(r)));
        if (message && *message)
            json_object_set_new(doc, "message", json_string(message));
    }
    p->result = r;
    p->replayed = json_object_get(doc, "replayed") != NULL;
    if (p->replayed)
        json_object_del(doc, "replayed"); /* a header, not the first answer's body */
    if (r == ST_THROTTLED)
        p->retry_after_s = json_integer_value(json_object_get(doc, "retry_after"));
    page_json(&p->page, result_status(r), doc);
    log_debug("%s %s -> %u", p->method, p->path, p->page.status);
}

void add_headers(struct MHD_Response *response, const struct pending *p)
{
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, p->page.content_type);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(response, "X-Stockd-Instance", config.instance_name);
    if (p->route.allow[0])
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, p->route.allow);
    if (p->result == ST_OVERLOADED)
        MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (p->result == ST_THROTTLED) {
        char seconds[24];
        snprintf(seconds, sizeof seconds, "%lld", p->retry_after_s > 0 ? p->retry_after_s : 1);
        MHD_add_response_header(response, MHD_HTTP_HEADER_RETRY_AFTER, seconds);
    }
    if (p->replayed)
        MHD_add_response_header(response, "Idempotent-Replayed", "true");
    if (p->result == ST_SHUTTING_DOWN || p->bad_framing)
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
}

enum MHD_Result send_reply(struct pending *p)
{
    phase_move(p, REPLIED, SENT);
    if (!p->page.body)
        return MHD_NO; /* out of memory rendering it: drop the connection */
    struct MHD_Response *response;
    if (p->page.owned) {
        response =
            MHD_create_response_from_buffer(p->page.len, p->page.owned, MHD_RESPMEM_MUST_FREE);
        if (response)
            p->page.owned = NULL; /* the response owns it now */
    } else {
        response = MHD_create_response_from_buffer(p->page.len, (void *)p->page.body,
                                                   MHD_RESPMEM_PERSISTENT);
    }
    if (!response)
        return MHD_NO;
    add_headers(response, p);
    enum MHD_Result queued = MHD_queue_response(p->connection, p->page.status, response);
    MHD_destroy_response(response);
    return queued;
}

struct http_request request_of(struct pending *p)
{
    return (struct http_request){
        .method = p->method,
        .path = p->path,
        .args = p->args,
        .nargs = p->nargs,
        .too_many_args = p->too_many_args,
        .body = p->body ? p->body : "",
        .body_len = p->len,
        .arrived_us = p->arrived_us,
        .later = &p->later,
        .idempotency_key = p->has_key ? p->key : NULL,
        .parsed = &p->parsed,
    };
}

/* Copies `s` to *at and moves past it. */
static const char *keep(char **at, const char *s)
{
    size_t n = strlen(s) + 1;
    char *kept = memcpy(*at, s, n);
    *at += n;
    return kept;
}

/* Moves the request's method, path and query into memory of its own:
 * libmicrohttpd's copies go with the connection, which is closed as soon
 * as its client goes, while another thread may still run the request.
 * 0, or -1 when out of memory (the request then keeps its connection until
 * it is answered). */
int own_text(struct pending *p)
{
    size_t size = strlen(p->method) + strlen(p->path) + 2;
    for (unsigned i = 0; i < p->nargs; i++)
        size += strlen(p->args[i].key) + 1 + (p->args[i].value ? strlen(p->args[i].value) + 1 : 0);
    char *at = p->text = malloc(size);
    if (!at)
        return -1;
    p->method = keep(&at, p->method);
    p->path = keep(&at, p->path);
    for (unsigned i = 0; i < p->nargs; i++) {
        p->args[i].key = keep(&at, p->args[i].key);
        if (p->args[i].value)
            p->args[i].value = keep(&at, p->args[i].value);
    }
    return 0;
}

void append_body(struct pending *p, const char *data, size_t size)
{
    if (p->too_large)
        return;
    if (p->len + size > (size_t)config.max_body) {
        p->too_large = 1;
        free(p->body);
        p->body = NULL;
        p->len = 0;
        return;
    }
    char *grown = realloc(p->body, p->len + size + 1);
    if (!grown) {
        p->too_large = 1; /* cannot hold it: refuse it like an oversized body */
        return;
    }
    memcpy(grown + p->len, data, size);
    p->len += size;
    grown[p->len] = '\0';
    p->body = grown;
}
