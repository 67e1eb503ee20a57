/*
 * http.c - libmicrohttpd glue: collect the body and query, route, queue the
 * request on the worker pool, send the JSON reply.
 *
 * libmicrohttpd calls on_request() several times per request: once with the
 * headers (we allocate the request's state), once per body chunk (we
 * append, or note that the body is too large), then once with no data. On
 * that call a request that needs a handler is routed, its connection is
 * suspended and it is queued on the worker pool (pool.h says why); the
 * worker builds the reply and resumes the connection, and libmicrohttpd
 * calls on_request() once more to send it. Requests that need no handler
 * (413, 404, 405) are answered on the spot. libmicrohttpd parses HTTP and
 * decodes the query; we never touch raw bytes. Every reply is a JSON object
 * whose first member is "ok", with Content-Type application/json.
 */
#include "http.h"

#include "config.h"
#include "log.h"
#include "pool.h"
#include "router.h"
#include "worker.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Requests between their first header callback and their completion. */
static atomic_int in_flight;

enum phase {
    READING, /* headers and body arriving            */
    RUNNING, /* queued or running on a worker          */
    REPLIED, /* reply built, waiting to be sent       */
    SENT,
};

struct pending {
    struct job job; /* first: the pool hands it back to run_request() */
    struct MHD_Connection *connection;
    enum phase phase;
    const char *method, *path; /* owned by libmicrohttpd for the request */
    handler_fn handler;
    struct query_arg args[HTTP_MAX_ARGS];
    unsigned nargs;
    int too_many_args;
    char *body;
    size_t len;
    int too_large; /* the body was over config.max_body: answer 413 */
    /* the reply */
    unsigned status;
    char *text;
    char allow[32];
};

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

/* A reply document whose first member is "ok"; finish_reply() sets it. */
static json_t *new_reply(void)
{
    return json_pack("{s:b}", "ok", 0);
}

/* Completes `doc` for result `r` (ok, error word, message) and renders it
 * into p->text with its status. Takes the reference to `doc`. */
static void finish_reply(struct pending *p, st_result r, json_t *doc, const char *message)
{
    json_object_set_new(doc, "ok", json_boolean(r == ST_OK));
    if (r != ST_OK) {
        json_object_set_new(doc, "error", json_string(result_word(r)));
        if (message && *message)
            json_object_set_new(doc, "message", json_string(message));
    }
    p->status = result_status(r);
    p->text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    p->phase = REPLIED;
    log_debug("%s %s -> %u", p->method, p->path, p->status);
}

static enum MHD_Result send_reply(struct pending *p)
{
    p->phase = SENT;
    if (!p->text)
        return MHD_NO; /* out of memory rendering it: drop the connection */
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(p->text), p->text, MHD_RESPMEM_MUST_FREE);
    if (!response)
        return MHD_NO;
    p->text = NULL; /* the response owns it now */
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (p->allow[0])
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, p->allow);
    enum MHD_Result queued = MHD_queue_response(p->connection, p->status, response);
    MHD_destroy_response(response);
    return queued;
}

/* On a worker: run the handler with this thread's backend connections. */
static void run_request(struct job *job)
{
    struct pending *p = (struct pending *)(void *)((char *)job - offsetof(struct pending, job));
    struct worker *w = worker_self();
    w->error[0] = '\0';
    worker_drop_dead_links(w);
    struct http_request req = {
        .method = p->method,
        .path = p->path,
        .args = p->args,
        .nargs = p->nargs,
        .too_many_args = p->too_many_args,
        .body = p->body ? p->body : "",
        .body_len = p->len,
    };
    json_t *reply = new_reply();
    st_result r = p->handler(w, &req, reply);
    finish_reply(p, r, reply, w->error);
    MHD_resume_connection(p->connection);
}

/* Refuses on the spot (413, 404, 405): no backend, no worker needed. */
static enum MHD_Result refuse(struct pending *p, st_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result refuse(struct pending *p, st_result r, const char *fmt, ...)
{
    char message[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    finish_reply(p, r, new_reply(), message);
    return send_reply(p);
}

/* The request is complete: answer it, or route it to a worker. */
static enum MHD_Result dispatch(struct pending *p)
{
    if (p->too_large)
        return refuse(p, ST_PAYLOAD_TOO_LARGE, "body is over %d bytes", config.max_body);
    struct route_match route;
    route_find(p->method, p->path, &route);
    if (route.result == ST_NOT_FOUND)
        return refuse(p, ST_NOT_FOUND, "no such path; see /strategies");
    if (route.result != ST_OK) {
        snprintf(p->allow, sizeof p->allow, "%s", route.allow);
        return refuse(p, route.result, "%.16s is not allowed here; use %s", p->method, route.allow);
    }
    p->handler = route.handler;
    MHD_get_connection_values(p->connection, MHD_GET_ARGUMENT_KIND, collect_arg, p);
    p->phase = RUNNING;
    MHD_suspend_connection(p->connection);
    pool_submit(&p->job);
    return MHD_YES;
}

/* Over the limit by its Content-Length: answer 413 before reading it. */
static int declared_too_large(struct MHD_Connection *c)
{
    const char *length =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    long long n;
    return length && (parse_bounded_int(length, 0, 1LL << 60, &n) != 0 || n > config.max_body);
}

static void append_body(struct pending *p, const char *data, size_t size)
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

static struct pending *pending_new(struct MHD_Connection *c, const char *method, const char *url)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->job.run = run_request;
    p->connection = c;
    p->method = method;
    p->path = url;
    atomic_fetch_add(&in_flight, 1);
    return p;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state)
{
    (void)cls, (void)version;
    struct pending *p = *state;
    if (!p) {
        p = *state = pending_new(c, method, url);
        if (!p)
            return MHD_NO;
        if (!declared_too_large(c))
            return MHD_YES;
        p->too_large = 1;
        return dispatch(p);
    }
    if (*upload_data_size) {
        append_body(p, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    switch (p->phase) {
    case READING:
        return dispatch(p);
    case REPLIED:
        return send_reply(p);
    case RUNNING:
    case SENT:
        break;
    }
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)c, (void)code;
    struct pending *p = *state;
    if (!p)
        return;
    free(p->body);
    free(p->text);
    free(p);
    *state = NULL;
    atomic_fetch_sub(&in_flight, 1);
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    log_warn("http: %s", line);
}

struct MHD_Daemon *http_start(void)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)config.port)};
    if (inet_pton(AF_INET, config.listen, &addr.sin_addr) != 1) {
        log_error("listen address '%s' is not an IPv4 address", config.listen);
        return NULL;
    }
    if (pool_start(config.workers) != 0)
        return NULL;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)config.port, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_error, NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)config.threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!d) {
        log_error("cannot listen on %s:%d (in use, or not allowed)", config.listen, config.port);
        pool_stop();
    }
    return d;
}

void http_stop(struct MHD_Daemon *daemon, int drain_ms)
{
    MHD_socket listener = MHD_quiesce_daemon(daemon);
    if (listener != MHD_INVALID_SOCKET)
        close(listener);
    long long deadline = monotonic_ms() + drain_ms;
    while (atomic_load(&in_flight) > 0 && monotonic_ms() < deadline)
        sleep_ms(5);
    if (atomic_load(&in_flight) > 0)
        log_warn("stopping with %d requests still in flight", atomic_load(&in_flight));
    /* Workers finish whatever is queued and resume those connections
     * before libmicrohttpd closes them all. */
    pool_stop();
    MHD_stop_daemon(daemon);
}
