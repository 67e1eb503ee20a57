/*
 * http.c - libmicrohttpd glue: collect the body and query, route, reply.
 *
 * libmicrohttpd calls on_request() several times per request: once with the
 * headers (we allocate the request's state), then once per body chunk (we
 * append, or note the body is too large), then once more with no data (we
 * answer). It parses HTTP and decodes the query; we never touch raw bytes.
 * Every reply is a JSON object with Content-Type application/json.
 */
#include "http.h"

#include "config.h"
#include "log.h"
#include "router.h"
#include "worker.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Requests between their first header callback and their completion. */
static atomic_int in_flight;

struct pending {
    char *body;
    size_t len;
    int too_large; /* the body was over config.max_body: answer 413 */
    int answered;  /* a reply is already queued                       */
};

struct query_collector {
    struct query_arg args[HTTP_MAX_ARGS];
    unsigned n;
    int overflow;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct query_collector *q = cls;
    if (q->n == HTTP_MAX_ARGS) {
        q->overflow = 1;
        return MHD_NO;
    }
    q->args[q->n++] = (struct query_arg){key, value};
    return MHD_YES;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *doc,
                                 const char *allow)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!text)
        return MHD_NO;
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!response) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow && *allow)
        MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result queued = MHD_queue_response(c, status, response);
    MHD_destroy_response(response);
    return queued;
}

/* Adds ok/error/message to `doc` for result `r` and sends it. */
static enum MHD_Result send_result(struct MHD_Connection *c, const char *method, const char *path,
                                   st_result r, json_t *doc, const char *allow, const char *message)
{
    json_object_set_new(doc, "ok", json_boolean(r == ST_OK)); /* stays first */
    if (r != ST_OK) {
        json_object_set_new(doc, "error", json_string(result_word(r)));
        if (message && *message)
            json_object_set_new(doc, "message", json_string(message));
    }
    unsigned status = result_status(r);
    log_debug("%s %s -> %u", method, path, status);
    return send_json(c, status, doc, allow);
}

/* A reply document whose first member is "ok", as in the contract's
 * examples; send_result() sets its value. */
static json_t *new_reply(void)
{
    return json_pack("{s:b}", "ok", 0);
}

static enum MHD_Result answer(struct MHD_Connection *c, const char *method, const char *path,
                              struct pending *p)
{
    struct worker *w = worker_self();
    w->error[0] = '\0';
    worker_drop_dead_links(w);
    if (p->too_large) {
        snprintf(w->error, sizeof w->error, "body is over %d bytes", config.max_body);
        return send_result(c, method, path, ST_PAYLOAD_TOO_LARGE, new_reply(), NULL, w->error);
    }
    struct route_match route;
    route_find(method, path, &route);
    if (route.result != ST_OK) {
        if (route.result == ST_NOT_FOUND)
            snprintf(w->error, sizeof w->error, "no such path; see /strategies");
        else
            snprintf(w->error, sizeof w->error, "%.16s is not allowed here; use %s", method,
                     route.allow);
        return send_result(c, method, path, route.result, new_reply(), route.allow, w->error);
    }
    struct query_collector q = {.n = 0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &q);
    struct http_request req = {
        .method = method,
        .path = path,
        .args = q.args,
        .nargs = q.n,
        .too_many_args = q.overflow,
        .body = p->body ? p->body : "",
        .body_len = p->len,
    };
    json_t *reply = new_reply();
    st_result r = route.handler(w, &req, reply);
    return send_result(c, method, path, r, reply, NULL, w->error);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state)
{
    (void)cls, (void)version;
    struct pending *p = *state;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p)
            return MHD_NO;
        *state = p;
        atomic_fetch_add(&in_flight, 1);
        if (declared_too_large(c)) {
            p->too_large = p->answered = 1;
            return answer(c, method, url, p);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        append_body(p, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (p->answered)
        return MHD_YES;
    p->answered = 1;
    return answer(c, method, url, p);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code)
{
    (void)cls, (void)c, (void)code;
    struct pending *p = *state;
    if (!p)
        return;
    free(p->body);
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
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)config.port, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_error, NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)config.threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!d)
        log_error("cannot listen on %s:%d (in use, or not allowed)", config.listen, config.port);
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
    MHD_stop_daemon(daemon);
}
