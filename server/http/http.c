/*
 * http.c - the HTTP loops and libmicrohttpd glue: collect the body and
 * query, guard, route, answer on the spot or queue the request, send the
 * reply; and the orderly stop.
 *
 * stockd runs config.threads loops, each a thread with a libmicrohttpd
 * daemon of its own, in libmicrohttpd's external mode: the loop waits
 * (poll) on the daemon's epoll set, its Redis pipe (redis_pipe.h), a
 * wake-up, its connections' closes (struct conn) and, while it takes new
 * connections, the listening socket; lets
 * the daemon serve what is ready, then writes the turn's
 * sales to Redis at once. The loops share one listening socket, so each
 * enforces its share of the configured connection limits.
 *
 * libmicrohttpd calls on_request() several times per request: once with the
 * headers (we allocate the request's state), once per body chunk (we
 * append, or note that the body is too large), then once with no data. On
 * that call the request is routed. Refusals (400, 413, 404, 405, 401, 403,
 * and 503 while stopping) and the introspection pages (/strategies, /health,
 * /metrics, the lab page) are answered right there on the loop: they wait
 * for nothing, so they answer at once however busy the workers are.
 *
 * The guards, in dispatch()'s order: a Host that names another server
 * (DNS rebinding), a head that says two things (two Hosts, two body
 * lengths), a body over the limit, a control character in the path or the
 * query, then per route a browser's request from another site and the
 * admin token. docs/security.md says whom each one stops.
 *
 * A sale that joins a queue is taken by its strategy on the loop. One that
 * the loop itself will answer (a `lua` sale on the loop's pipe, answered
 * when its reply arrives) is held: its connection is left as it is, and
 * libmicrohttpd asks for the answer again at each of its runs until the
 * loop has it (struct loop says why). A request that another thread will
 * answer suspends its connection first: a sale handed to a batch queue's
 * leader, and every other request that needs a backend, which is queued on
 * the worker pool (pool.h says why). Whoever answers builds the reply and
 * resumes the connection, and libmicrohttpd calls on_request() once more
 * to send it. libmicrohttpd parses HTTP and decodes the query; we never
 * touch raw bytes. Every reply names this instance in X-Stockd-Instance.
 *
 * Every loop takes new connections from one listening socket, each loop
 * its fair share (listener.h says why and how), and hands them to its
 * daemon, which has no listening socket of its own.
 *
 * Stopping, as libmicrohttpd documents it for a daemon run externally:
 * the listening socket is shut down at once, so that clients are refused
 * (it is closed only after the daemons are stopped), and each loop goes on
 * turning: every new request is answered 503 shutting_down with
 * `Connection: close`, the requests already queued or running finish and
 * send their replies, nothing is resumed by force. When none is left the
 * loops end, and only then is each daemon stopped (MHD_stop_daemon() from
 * the main thread, never while its loop runs). --drain-ms bounds all of
 * it: requests still waiting for a lock give up as 503 timeout when it
 * runs out, and a request stuck in a backend past it is abandoned by
 * exiting.
 */
#include "http/http.h"

#include "backend/backend.h"
#include "backend/pool.h"
#include "backend/redis_pipe.h"
#include "core/config.h"
#include "core/later.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/worker.h"
#include "http/listener.h"
#include "http/router.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* Set once a stop begins: every request from then on is refused. */
static atomic_int stopping;
/* Requests handed to the pool whose connection has not completed yet. */
static atomic_int outstanding;

/* Who finished with a request another thread has (`settled`): whoever
 * answers it resumes its connection; when its client went first, the loop
 * resumes it to close it, and the request is freed by the last of the two. */
enum settled {
    UNSETTLED,
    ANSWERED,
    CLIENT_WENT,
};

enum phase {
    READING, /* headers and body arriving              */
    RUNNING, /* queued or running on a worker          */
    REPLIED, /* reply built, waiting to be sent        */
    SENT,
};

/*
 * A connection of a loop's, from libmicrohttpd's notification of it to its
 * close. libmicrohttpd's idle timer starts again at every byte, so a
 * client that sends a header line now and then keeps its connection for
 * ever. The loop gives each connection --idle-timeout-s for a whole request
 * (its head and its body) instead, from its opening or its last reply:
 * those that are waiting for one sit on the loop's `waiting` list, oldest
 * first, and the loop shuts the socket of any still there when its time is
 * up (libmicrohttpd then closes the connection as it would a client's).
 * Idle keep-alive connections end the same way and as soon as before.
 *
 * A client that closes its connection is noticed at once, through the
 * loop's own epoll set (`watch`, EPOLLRDHUP on every connection's socket),
 * because libmicrohttpd 0.9.75 (Debian 12's) misses it: it watches each
 * socket edge-triggered without EPOLLRDHUP, and takes a read shorter than
 * its buffer to mean the socket is drained. Half a request and the close
 * that follows it arrive as one edge; libmicrohttpd reads the half and
 * never reads again, so it never sees the read of 0 that says the client
 * went, and the connection kept its slot (and its address's share of
 * --max-per-ip) in CLOSE_WAIT until its idle timeout. (libmicrohttpd 1.0
 * asks for EPOLLRDHUP itself.) Seeing the close, the loop shuts a socket
 * that has no whole request, or whose request it holds itself, and
 * libmicrohttpd closes it as it does any socket shut; it closes one whose
 * request another thread has at once too (struct pending, `settled`); one
 * being answered on the spot is left to send its reply, and shut when it
 * has (`client_closed`).
 */
struct conn {
    struct conn *prev, *next; /* on `waiting` while a request is due */
    int fd;
    long long since_ms;      /* when the request became due */
    struct pending *request; /* the whole request it carries, until completed */
    int client_closed;       /* its client closed its end (EPOLLRDHUP) */
};

/*
 * An HTTP loop: a thread that serves its share of the connections with
 * its own daemon, and talks to Redis through its own pipe.
 *
 * Held requests. A suspended connection leaves libmicrohttpd's epoll set
 * and a resumed one joins it again: two epoll_ctl() calls per request. A
 * request the loop answers itself needs no suspension, because no other
 * thread will touch it: the loop holds it instead. libmicrohttpd keeps a
 * connection whose request has no reply yet among its ready ones and asks
 * for the reply at every run - and so reports a zero timeout while one
 * waits. The loop does not spin on that: the answer wakes it (the pipe's
 * reply), so it waits for that, at most HELD_WAIT_MS in case something
 * else of libmicrohttpd's is due too. Unlike a suspended one, a
 * held connection counts as idle while it waits: the pipe answers within
 * --connect-timeout-ms and --io-timeout-ms (11 s by default), inside the
 * 15 s of --idle-timeout-s; set shorter, a sale still waiting is dropped
 * with its connection (and freed by its answer).
 */
struct loop {
    struct MHD_Daemon *daemon;
    struct worker *w;    /* the loop's own: never blocks, owns a Redis pipe */
    int wake;            /* an eventfd: other threads wake the loop with it */
    atomic_int woken;    /* a wake-up is written and the loop has not run since */
    int held;            /* requests held, waiting for the loop's own answer */
    int answered;        /* one was answered since libmicrohttpd last ran    */
    int resumed;         /* it resumed one itself since libmicrohttpd last ran */
    int index;           /* its place in `loops`, and in the listener's shares */
    int watch;           /* an epoll set: its connections' closes (struct conn) */
    struct conn waiting; /* connections a request is due from (struct conn) */
    pthread_t thread;
    int running;
};

#define HELD_WAIT_MS 1

/* The loop running on this thread; NULL on any other thread. */
static __thread struct loop *this_loop;

struct pending {
    struct job job;    /* first: the pool hands it back to run_request() */
    struct loop *loop; /* whose daemon holds the connection */
    struct MHD_Connection *connection;
    int fd; /* the connection's socket, to see whether its client went */
    enum phase phase;
    const char *method, *path; /* owned by libmicrohttpd for the request */
    struct route_match route;
    struct query_arg args[HTTP_MAX_ARGS];
    unsigned nargs;
    int too_many_args;
    char *body;
    size_t len;
    int too_large;         /* the body was over config.max_body: answer 413 */
    int bad_framing;       /* two Hosts, two lengths, a length and chunks: 400 */
    int knob;              /* asks to wait on purpose: the pool's knob lane */
    int submitted;         /* counted in `outstanding`                     */
    int held;              /* held by its loop, which answers it (struct loop) */
    int suspended;         /* its connection was suspended for another thread  */
    int abandoned;         /* its connection went while held: answer() frees it */
    atomic_int settled;    /* while suspended: enum settled                */
    atomic_int refs;       /* once CLIENT_WENT: the connection's, the answerer's */
    char *text;            /* method, path and query, owned once suspended */
    int closable;          /* suspended with them: may close before its answer */
    long long arrived_us;  /* the request's deadline counts from here      */
    struct later later;    /* for a handler that answers after it returns */
    json_t *reply;         /* the handler's reply document, which `later` sends */
    json_t *arrival_reply; /* begun on the HTTP thread, for the worker to go on with */
    /* the reply */
    struct page page;
    st_result result;
    long long retry_after_s; /* a throttled answer's Retry-After, from its reply */
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

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* A reply document whose first member is "ok"; finish_reply() sets it.
 * Built member by member: json_pack() would parse its format for every
 * request. */
static json_t *new_reply(void)
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
static void finish_reply(struct pending *p, st_result r, json_t *doc, const char *message)
{
    json_object_set_new(doc, "ok", json_boolean(r == ST_OK));
    if (r != ST_OK) {
        json_object_set_new(doc, "error", json_string(result_word(r)));
        if (message && *message)
            json_object_set_new(doc, "message", json_string(message));
    }
    p->result = r;
    if (r == ST_THROTTLED)
        p->retry_after_s = json_integer_value(json_object_get(doc, "retry_after"));
    page_json(&p->page, result_status(r), doc);
    p->phase = REPLIED;
    log_debug("%s %s -> %u", p->method, p->path, p->page.status);
}

static void add_headers(struct MHD_Response *response, const struct pending *p)
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
    if (p->result == ST_SHUTTING_DOWN || p->bad_framing)
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
}

static enum MHD_Result send_reply(struct pending *p)
{
    p->phase = SENT;
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

static struct http_request request_of(struct pending *p)
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
    };
}

/* Wakes `l` - once until its next turn: when a wake-up is already on its
 * way, the loop will run after this call anyway. */
static void loop_wake(struct loop *l)
{
    uint64_t one = 1;
    if (!atomic_exchange(&l->woken, 1) && write(l->wake, &one, sizeof one) < 0)
        log_warn("http: cannot wake a loop: %s", strerror(errno));
}

/* Frees a request that nothing will answer any more and whose connection
 * is done with it. */
static void pending_free(struct pending *p)
{
    if (p->submitted)
        atomic_fetch_sub(&outstanding, 1);
    metrics_in_flight(-1);
    json_decref(p->arrival_reply); /* the pool refused it: nobody went on with it */
    free(p->text);
    free(p->body);
    free(p->page.owned);
    free(p);
}

/* Lets go of a request whose client went while another thread had it: the
 * connection's side (on_completed) and the answerer's each once. */
static void release(struct pending *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1)
        pending_free(p);
}

/* A held request's answer, on its loop: libmicrohttpd asks for the reply
 * at its next run and sends it - unless the connection went meanwhile. */
static void answer_held(struct pending *p, st_result r, json_t *reply, const char *message)
{
    if (p->abandoned) {
        json_decref(reply);
        pending_free(p);
        return;
    }
    p->held = 0;
    p->loop->held--;
    p->loop->answered = 1;
    finish_reply(p, r, reply, message);
}

/*
 * Builds the reply and has libmicrohttpd send it: from the worker that ran
 * the request, from whichever thread answered it later, or from the loop
 * itself.
 *
 * From another thread, the loop is woken as well. libmicrohttpd (0.9.75)
 * looks for resumed connections before it drains its epoll set, the
 * wake-up of the resume included: a resume that lands in between would
 * wait for the loop's next event. Our own wake-up is read only by the
 * loop's poll(), before the next MHD_run(), which then finds the resume.
 */
static void answer(struct pending *p, st_result r, json_t *reply, const char *message)
{
    struct loop *l = p->loop;
    if (p->held) {
        assert(this_loop == l); /* another thread gets a request only by hand_off() */
        answer_held(p, r, reply, message);
        return;
    }
    int unsettled = UNSETTLED;
    if (!atomic_compare_exchange_strong(&p->settled, &unsettled, ANSWERED)) {
        json_decref(reply); /* the client went: its connection is closed */
        release(p);
        return;
    }
    finish_reply(p, r, reply, message);
    MHD_resume_connection(p->connection);
    if (this_loop != l)
        loop_wake(l);
    else
        l->resumed = 1;
}

static void answer_later(struct later *later, st_result r, const char *message)
{
    struct pending *p = CONTAINER_OF(later, struct pending, later);
    answer(p, r, p->reply, message);
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
static int own_text(struct pending *p)
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

static void suspend(struct pending *p)
{
    p->suspended = 1;
    p->closable = own_text(p) == 0;
    MHD_suspend_connection(p->connection);
}

/* A handler lets another thread answer: the loop lets go of the request,
 * suspending its connection for whoever answers to resume. */
static void hand_off(struct later *later)
{
    struct pending *p = CONTAINER_OF(later, struct pending, later);
    if (!p->held)
        return; /* a worker's: suspended already */
    assert(this_loop == p->loop);
    p->held = 0;
    p->loop->held--;
    suspend(p);
}

/* `w` takes up request `p`, whose handler fills `reply`: no error yet, the
 * request's deadline, and nobody to answer it later yet. */
static void worker_takes(struct worker *w, struct pending *p, json_t *reply)
{
    p->reply = reply;
    w->answers_later = 0;
    w->error[0] = '\0';
    w->deadline_ms = p->arrived_us / 1000 + config.request_timeout_ms;
}

/* Whether the client of a suspended request has closed its connection (or
 * reset it): then nobody is left to read the answer. A client that only
 * shut its sending side looks the same, and HTTP clients do not do that. */
static int client_gone(struct pending *p)
{
    if (atomic_load(&p->settled) == CLIENT_WENT)
        return 1; /* closed already: its descriptor may be another's now */
    char byte;
    ssize_t n = recv(p->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* On a worker: run the handler with this thread's backend connections,
 * unless the server is stopping, the request's deadline has passed while
 * it waited in the queue, or its client has gone meanwhile (dropped, and
 * counted: a burst of abandoned requests must not keep the workers). */
static void run_request(struct job *job, struct worker *w)
{
    struct pending *p = CONTAINER_OF(job, struct pending, job);
    json_t *reply = p->arrival_reply ? p->arrival_reply : new_reply();
    p->arrival_reply = NULL;
    if (client_gone(p)) {
        metrics_http(HTTP_CLIENT_GONE);
        pool_job_answering();
        answer(p, ST_TIMEOUT, reply, "the client closed its connection before the request started");
        return;
    }
    worker_takes(w, p, reply);
    struct http_request req = request_of(p);
    st_result r = atomic_load(&stopping) ? worker_fail(w, ST_SHUTTING_DOWN, "stockd is stopping")
                                         : worker_check_deadline(w);
    if (r == ST_OK) {
        backends_drop_dead_links(w);
        r = p->route.handler(w, &req, reply);
    } else {
        api_refused(&req, r);
    }
    w->deadline_ms = 0;
    if (w->answers_later)
        return; /* `p` may be answered, sent and freed already */
    pool_job_answering();
    answer(p, r, reply, w->error);
}

/* Refuses on the spot, with no backend and no worker. */
static enum MHD_Result refuse(struct pending *p, st_result r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result refuse(struct pending *p, st_result r, const char *fmt, ...)
{
    char message[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    finish_reply(p, r, new_reply(), message);
    return send_reply(p);
}

/* ----------------------------------------------------- request deadlines */

static struct conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static void conn_unwait(struct conn *k)
{
    if (!k->prev)
        return;
    k->prev->next = k->next;
    k->next->prev = k->prev;
    k->prev = k->next = NULL;
}

/* A request is due from `k` from now on: last on the list. */
static void conn_wait(struct loop *l, struct conn *k)
{
    conn_unwait(k);
    k->since_ms = monotonic_ms();
    k->prev = l->waiting.prev;
    k->next = &l->waiting;
    l->waiting.prev->next = k;
    l->waiting.prev = k;
}

/* A whole request, `p`, arrived on its connection. */
static void conn_arrived(struct pending *p)
{
    struct conn *k = conn_of(p->connection);
    if (!k)
        return;
    conn_unwait(k);
    k->request = p;
}

/* The connection is done with its request; `next`: it stays open for
 * another, unless its client has closed it meanwhile. */
static void conn_done(struct loop *l, struct MHD_Connection *c, int next)
{
    struct conn *k = conn_of(c);
    if (!k)
        return;
    k->request = NULL;
    if (next && k->client_closed)
        shutdown(k->fd, SHUT_RDWR); /* its reply is sent: nobody sends another */
    else if (next)
        conn_wait(l, k);
}

/* The client of `k` closed its end (struct conn says what is done). Once:
 * shutting the socket wakes the set again (edge-triggered or not), and
 * taking that for another close would shut it for ever, never idle. */
static void conn_client_closed(struct conn *k)
{
    struct pending *p = k->request;
    if (k->client_closed)
        return;
    k->client_closed = 1;
    int unsettled = UNSETTLED;
    if (p && p->suspended) {
        /* Resumed, the request gets MHD_NO from on_request(): closed. */
        if (p->closable && atomic_compare_exchange_strong(&p->settled, &unsettled, CLIENT_WENT)) {
            MHD_resume_connection(p->connection);
            p->loop->resumed = 1;
        }
        return; /* else it is answered: its reply finds the client gone */
    }
    if (p && !p->held)
        return; /* answered on the spot: shut once the reply is sent */
    conn_unwait(k);
    shutdown(k->fd, SHUT_RDWR);
}

/* Takes the closes the loop's epoll set reports. Each event's connection
 * is still open: a closed one leaves the set first (on_connection). */
static void conns_closed(struct loop *l)
{
    struct epoll_event events[64];
    int n;
    do {
        n = epoll_wait(l->watch, events, 64, 0);
        for (int i = 0; i < n; i++)
            conn_client_closed(events[i].data.ptr);
    } while (n == 64);
    if (n < 0 && errno != EINTR)
        log_warn("http: epoll_wait: %s", strerror(errno));
}

/* Shuts the sockets whose request is overdue; libmicrohttpd sees them end
 * and closes their connections. */
static void conns_expire(struct loop *l)
{
    long long due = monotonic_ms() - (long long)config.idle_timeout_s * 1000;
    for (struct conn *k; (k = l->waiting.next) != &l->waiting && k->since_ms <= due;) {
        conn_unwait(k);
        shutdown(k->fd, SHUT_RDWR);
        metrics_http(HTTP_HEAD_DEADLINE);
    }
}

/* Whether a browser says the request comes from another site: a
 * Sec-Fetch-Site other than same-origin or none (a typed address), or an
 * Origin other than this server's own (the scheme and the Host the request
 * was sent to). */
static int cross_site(struct MHD_Connection *c)
{
    const char *site = header(c, "Sec-Fetch-Site");
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
        return 1; /* cross-site, and same-site: another port or subdomain */
    const char *origin = header(c, "Origin"), *host = header(c, MHD_HTTP_HEADER_HOST);
    if (!origin)
        return 0;
    const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                             : NULL;
    return !rest || !host || strcmp(rest, host) != 0;
}

/* Whether `given` is the admin token, comparing every byte whatever the
 * guess, so that the time taken says nothing about how close it was. */
static int token_matches(const char *given)
{
    const char *token = config.admin_token;
    size_t n = strlen(token), m = strlen(given);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(token[i] ^ (i < m ? given[i] : 0));
    return diff == 0;
}

/* The scheme's name is case-insensitive (RFC 9110, 11.1). */
static int authorized(struct MHD_Connection *c)
{
    if (!config.admin_token[0])
        return 1;
    const char *auth = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return 0;
    auth += 7;
    while (*auth == ' ')
        auth++;
    return token_matches(auth);
}

/* Whether `name` (of `len` bytes) is one of --allowed-hosts. */
static int allowed_name(const char *name, size_t len)
{
    for (const char *at = config.allowed_hosts; *at;) {
        size_t n = strcspn(at, ",");
        if (n == len && strncasecmp(at, name, len) == 0)
            return 1;
        at += n + (at[n] == ',');
    }
    return 0;
}

/*
 * Whether the Host header names this server. A page of any site whose name
 * its owner points at 127.0.0.1 once it has loaded (DNS rebinding) is, to
 * the browser, of that same site: Origin and Sec-Fetch-Site say nothing
 * wrong, but Host carries the page's name. So a Host must be an IP address
 * (a name was never involved), `localhost`, or one of --allowed-hosts; its
 * port is not checked, because a proxy in front passes on its own (the
 * stack's nginx, docker-compose's). A request with no Host at all comes
 * from no browser.
 */
static int host_allowed(struct MHD_Connection *c)
{
    const char *host = header(c, MHD_HTTP_HEADER_HOST);
    if (!host)
        return 1;
    char name[256];
    size_t len;
    if (host[0] == '[') { /* an IPv6 address, [::1]:8080 */
        len = strcspn(host + 1, "]");
        if (host[1 + len] != ']' || len >= sizeof name)
            return 0;
        memcpy(name, host + 1, len);
        name[len] = '\0';
        struct in6_addr a6;
        return inet_pton(AF_INET6, name, &a6) == 1;
    }
    len = strcspn(host, ":");
    if (len >= sizeof name)
        return 0;
    memcpy(name, host, len);
    name[len] = '\0';
    struct in_addr a4;
    return inet_pton(AF_INET, name, &a4) == 1 || strcasecmp(name, "localhost") == 0 ||
           allowed_name(name, len);
}

/* Whether `s` holds a control character. The query and the path are
 * decoded by unescape() below, which makes an encoded NUL one too. */
static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* Whether the path or any query parameter holds a control character. */
static int request_has_control(const struct pending *p)
{
    if (has_control(p->path))
        return 1;
    for (unsigned i = 0; i < p->nargs; i++)
        if (has_control(p->args[i].key) || (p->args[i].value && has_control(p->args[i].value)))
            return 1;
    return 0;
}

/*
 * libmicrohttpd's decoding of the path and the query, %HH, except that a
 * NUL it decodes becomes DEL: as a NUL it would cut the text short without
 * a word (`qty=1%00junk` read as 1), as DEL it is refused with a 400.
 */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls, (void)c;
    size_t n = MHD_http_unescape(s);
    for (char *nul; (nul = memchr(s, '\0', n)) != NULL;)
        *nul = 0x7f;
    return n;
}

/* Answers a page on this thread. */
static enum MHD_Result answer_page(struct pending *p)
{
    struct http_request req = request_of(p);
    p->route.page(&req, &p->page);
    p->result = ST_OK; /* whatever its status: no Retry-After, no close */
    return send_reply(p);
}

/* A route's on_arrival, on this thread: whether it took the request; if
 * not, the pool runs it with the reply begun here. */
static int try_on_arrival(struct pending *p)
{
    struct worker *w = p->loop->w;
    json_t *reply = new_reply();
    worker_takes(w, p, reply);
    struct http_request req = request_of(p);
    int taken = p->route.on_arrival(w, &req, reply);
    w->deadline_ms = 0;
    if (!taken) /* else `p` is the handler's to answer: hands off */
        p->arrival_reply = reply;
    return taken;
}

/* Whether the route's handler took the request on arrival; it is held
 * while the handler has it, until answered or handed off. */
static int taken_on_arrival(struct pending *p)
{
    p->held = 1;
    p->loop->held++;
    if (try_on_arrival(p))
        return 1;
    p->held = 0;
    p->loop->held--;
    return 0;
}

/* Queues the request on the pool, unless its route's handler took it on
 * arrival; a full queue or a stopping pool answers at once (the
 * connection is resumed to send it). The connection is suspended before
 * anything can answer it from another thread. */
static enum MHD_Result run_on_worker(struct pending *p)
{
    p->phase = RUNNING;
    p->submitted = 1;
    atomic_fetch_add(&outstanding, 1);
    if (p->route.on_arrival && taken_on_arrival(p)) /* answered already, here: send it */
        return !p->suspended && p->phase == REPLIED ? send_reply(p) : MHD_YES;
    suspend(p);
    struct http_request asked = request_of(p);
    p->knob = params_ask_to_wait(p->route.params, &asked);
    st_result r = p->knob ? pool_submit_knob(&p->job) : pool_submit(&p->job);
    if (r != ST_OK) {
        struct http_request req = request_of(p);
        api_refused(&req, r);
        answer(p, r, new_reply(),
               p->knob && r == ST_OVERLOADED
                   ? "the workers for requests that wait on purpose are busy and their queue "
                     "is full"
                   : pool_refusal(r));
    }
    return MHD_YES;
}

/* The request is complete: guard it, then answer it or queue it. */
static enum MHD_Result dispatch(struct pending *p)
{
    conn_arrived(p);
    if (atomic_load(&stopping))
        return refuse(p, ST_SHUTTING_DOWN, "stockd is stopping");
    if (!host_allowed(p->connection))
        return refuse(p, ST_FORBIDDEN, "the Host header names another server; see --allowed-hosts");
    if (p->bad_framing)
        return refuse(p, ST_BAD_REQUEST,
                      "more than one Host or Content-Length, or Content-Length with "
                      "Transfer-Encoding");
    if (p->too_large)
        return refuse(p, ST_PAYLOAD_TOO_LARGE, "body is over %d bytes", config.max_body);
    MHD_get_connection_values(p->connection, MHD_GET_ARGUMENT_KIND, collect_arg, p);
    if (request_has_control(p))
        return refuse(p, ST_BAD_REQUEST, "a control character (an encoded NUL?) in the request");
    route_find(p->method, p->path, &p->route);
    if (p->route.result == ST_NOT_FOUND)
        return refuse(p, ST_NOT_FOUND, "no such path; see /strategies");
    if (p->route.result != ST_OK)
        return refuse(p, p->route.result, "%.16s is not allowed here; use %s", p->method,
                      p->route.allow);
    if ((p->route.flags & ROUTE_CHANGES_STATE) && cross_site(p->connection))
        return refuse(p, ST_FORBIDDEN, "a request from another site cannot change state");
    if ((p->route.flags & ROUTE_ADMIN) && !authorized(p->connection))
        return refuse(p, ST_UNAUTHORIZED, "this needs 'Authorization: Bearer <admin token>'");
    return p->route.page ? answer_page(p) : run_on_worker(p);
}

/* Over the limit by its Content-Length: answer 413 before reading it. */
static int declared_too_large(struct MHD_Connection *c)
{
    const char *length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
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

static struct pending *pending_new(struct loop *loop, struct MHD_Connection *c, const char *method,
                                   const char *url)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->loop = loop;
    p->job.run = run_request;
    p->later.answer = answer_later;
    p->later.hand_off = hand_off;
    p->connection = c;
    p->fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
    p->method = method;
    atomic_init(&p->refs, 2);
    p->path = url;
    p->arrived_us = monotonic_us();
    metrics_in_flight(1);
    return p;
}

/* The headers a request may carry once, and how many times it did. */
struct head_count {
    int host, length, encoding;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind, (void)value;
    struct head_count *n = cls;
    n->host += strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0;
    n->length += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
    n->encoding += strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0;
    return MHD_YES;
}

/*
 * Whether the request says where it goes or how long its body is in two
 * ways: two Host headers (RFC 9112 says 400), two Content-Length headers
 * (even equal), or one with Transfer-Encoding. libmicrohttpd picks one; a
 * proxy in front may have picked the other - checked another Host, read
 * the rest of the body as a second request (request smuggling). Refused
 * before the body is read, and the connection closed after the answer.
 */
static int ambiguous_head(struct MHD_Connection *c)
{
    struct head_count n = {0, 0, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &n);
    return n.host > 1 || n.length > 1 || (n.length && n.encoding);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state)
{
    (void)version;
    struct pending *p = *state;
    if (p && atomic_load(&p->settled) == CLIENT_WENT)
        return MHD_NO; /* resumed to be closed: its client went */
    if (!p) {
        p = *state = pending_new(cls, c, method, url);
        if (!p)
            return MHD_NO;
        p->bad_framing = ambiguous_head(c);
        p->too_large = !p->bad_framing && declared_too_large(c);
        return p->bad_framing || p->too_large ? dispatch(p) : MHD_YES;
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
    /* On a kept-alive connection, the next request is due. */
    conn_done(cls, c, code == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    struct pending *p = *state;
    if (!p)
        return;
    *state = NULL;
    if (atomic_load(&p->settled) == CLIENT_WENT) {
        release(p); /* the answerer frees it, if it is still at it */
        return;
    }
    if (p->held) { /* the client went before its answer: answer_held() frees it */
        p->abandoned = 1;
        p->loop->held--;
        return;
    }
    pending_free(p);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct loop *l = cls;
    int started = code == MHD_CONNECTION_NOTIFY_STARTED;
    listener_count(l->index, started ? 1 : -1);
    if (started) {
        struct conn *k = calloc(1, sizeof *k);
        *socket_context = k;
        if (!k)
            return; /* it goes without a request deadline: only its idle timer */
        k->fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)->connect_fd;
        conn_wait(l, k);
        /* Edge-triggered: each close is reported once, and one that came
         * before this is reported at the next wait. */
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLET, .data.ptr = k};
        if (epoll_ctl(l->watch, EPOLL_CTL_ADD, k->fd, &ev) != 0)
            log_warn("http: cannot watch a connection for its close: %s", strerror(errno));
    } else if (*socket_context) {
        struct conn *k = *socket_context;
        /* Before its descriptor is closed: no event of it may come after. */
        if (epoll_ctl(l->watch, EPOLL_CTL_DEL, k->fd, NULL) != 0 && errno != ENOENT)
            log_warn("http: cannot stop watching a connection: %s", strerror(errno));
        conn_unwait(k);
        free(k);
    }
}

/*
 * libmicrohttpd's complaints are about one connection each - a request it
 * cannot parse, a client gone in the middle of one - and anyone can cause
 * as many as they like: each is counted (stockd_http_dropped_total), and
 * at most one line per LOG_EVERY_MS says how many there were, and the last.
 */
#define LOG_EVERY_MS 10000

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static _Atomic long long logged_ms = -LOG_EVERY_MS;
    static atomic_ullong unlogged;
    metrics_http(HTTP_PROTOCOL_ERROR);
    unsigned long long before = atomic_fetch_add(&unlogged, 1);
    long long now = monotonic_ms(), last = atomic_load(&logged_ms);
    if (now - last < LOG_EVERY_MS || !atomic_compare_exchange_strong(&logged_ms, &last, now))
        return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    atomic_fetch_sub(&unlogged, before + 1);
    if (before)
        log_warn("http: %llu more connection errors since the last line; now: %s", before, line);
    else
        log_warn("http: %s", line);
}

/* ------------------------------------------------------------ the loops */

static struct loop *loops;
static int loop_count;
/* When the stop gives up on what still runs (monotonic ms), once stopping. */
static _Atomic long long drain_deadline_ms;

/* How long a loop may wait: until libmicrohttpd's next timeout (briefly
 * while it only asks for held requests) or the pipe's (`pipe_ms`, -1:
 * none), and briefly while stopping, to see the drain end; not at all
 * after resuming a connection itself: libmicrohttpd (without MHD_USE_ITC)
 * is woken by nothing when a connection is resumed, and would take it up
 * at the loop's next event only. */
static int loop_wait_ms(const struct loop *l, int pipe_ms)
{
    MHD_UNSIGNED_LONG_LONG mhd;
    int ms = MHD_get_timeout(l->daemon, &mhd) == MHD_YES ? (mhd > 1000 ? 1000 : (int)mhd) : 1000;
    if (ms == 0 && l->held && !l->answered)
        ms = HELD_WAIT_MS;
    if (l->resumed)
        ms = 0;
    if (pipe_ms >= 0 && pipe_ms < ms)
        ms = pipe_ms;
    return atomic_load(&stopping) && ms > 10 ? 10 : ms;
}

/* Whether the loop is done: stopping, and nothing of the drain left (or
 * no time left for it). */
static int loop_done(void)
{
    return atomic_load(&stopping) &&
           (atomic_load(&outstanding) == 0 || monotonic_ms() >= atomic_load(&drain_deadline_ms));
}

/* A new connection, accepted for loop `arg`: its daemon owns the socket
 * from now on (and closes it when over its limits). */
static void take_connection(void *arg, int fd, const struct sockaddr *addr, socklen_t len)
{
    struct loop *l = arg;
    if (MHD_add_connection(l->daemon, fd, addr, len) != MHD_YES)
        log_debug("http: a new connection was refused: %s", strerror(errno));
}

/* Takes this loop's share of the new connections; when that makes it
 * stop taking them, the others are woken to look again. */
static void take_connections(struct loop *l)
{
    if (!listener_take(l->index, take_connection, l))
        return;
    for (int i = 0; i < loop_count; i++)
        if (&loops[i] != l)
            loop_wake(&loops[i]);
}

/* One turn: wait for the HTTP connections (libmicrohttpd's epoll set), the
 * pipe and the wake-up; let libmicrohttpd serve what is ready (handlers
 * queue their sales on the pipe); then write the turn's sales at once. */
static void loop_turn(struct loop *l, int epoll_fd)
{
    struct redis_pipe *pipe = l->w->redis_pipe;
    struct pollfd fds[5] = {{.fd = epoll_fd, .events = POLLIN},
                            {.fd = l->wake, .events = POLLIN},
                            {.fd = -1},
                            {.fd = listener_fd_for(l->index), .events = POLLIN},
                            {.fd = l->watch, .events = POLLIN}};
    int pipe_ms = redis_pipe_poll(pipe, &fds[2]);
    if (poll(fds, 5, loop_wait_ms(l, pipe_ms)) < 0 && errno != EINTR)
        log_warn("http: poll: %s", strerror(errno));
    uint64_t wakes;
    if (fds[1].revents && read(l->wake, &wakes, sizeof wakes) < 0 && errno != EAGAIN)
        log_warn("http: wake-up: %s", strerror(errno));
    /* Before MHD_run(): a resume that finds the flag still set is one this
     * run will see; one after this store writes a wake-up of its own. */
    atomic_store(&l->woken, 0);
    if (fds[2].revents)
        redis_pipe_ready(pipe, fds[2].revents);
    if (fds[3].revents)
        take_connections(l);
    l->answered = 0; /* this run sends what is answered by now */
    l->resumed = 0;
    MHD_run(l->daemon);
    /* After the run: a whole request that came with its client's close is
     * served (or queued, and dropped) as before; half of one is shut. */
    if (fds[4].revents)
        conns_closed(l);
    conns_expire(l);
    redis_pipe_flush(pipe);
    redis_pipe_expire(pipe);
}

static void *loop_main(void *arg)
{
    struct loop *l = arg;
    this_loop = l;
    int epoll_fd = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd;
    while (!loop_done())
        loop_turn(l, epoll_fd);
    MHD_run(l->daemon); /* the last replies, refusals included */
    return NULL;
}

/* A limit shared by the loops: each takes its part, rounded up. */
static unsigned loop_share(int limit)
{
    return (unsigned)((limit + loop_count - 1) / loop_count);
}

/* Each loop's memory for a connection's request line, headers and reply
 * headers (a body arrives in chunks through on_request). libmicrohttpd
 * zeroes it for every request, so the less of it the more connections
 * stay in the cache, down to what a request needs. 8 KiB leaves a request
 * about 7 KiB of request line and headers, as nginx's 8 KiB header
 * buffers do; more gets libmicrohttpd's own 431. */
#define CONNECTION_MEMORY (8 * 1024)

/*
 * A loop's daemon, run by the loop itself (no thread of libmicrohttpd's),
 * with no listening socket: the loop hands it the connections it takes
 * (listener.h), and it tells the listener of each one opened and closed.
 * libmicrohttpd waits with epoll. A sale answered on its loop
 * costs no hand-off and no wake-up, where HTTP threads handing each sale
 * to a worker-led pipeline pay both per sale. Holding it instead of suspending it (struct loop)
 * saves its two epoll_ctl() calls and a recv() that finds nothing. (libmicrohttpd's poll mode,
 * which has no epoll_ctl(), exists only with its own threads; its select mode stops at descriptor
 * 1024.)
 */
static struct MHD_Daemon *loop_daemon(struct loop *l)
{
    unsigned flags =
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, l, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, l, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        l, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONNECTION_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)config.idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, loop_share(config.max_connections),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, loop_share(config.max_per_ip), MHD_OPTION_END);
}

static int loop_open(struct loop *l)
{
    l->w = worker_new();
    l->w->must_not_block = 1;
    l->w->redis_pipe = redis_pipe_new();
    l->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->watch = epoll_create1(EPOLL_CLOEXEC);
    if (!l->w->redis_pipe || l->wake < 0 || l->watch < 0)
        return -1;
    l->daemon = loop_daemon(l);
    return l->daemon ? 0 : -1;
}

/* Frees a loop whose thread has ended (or never started). */
static void loop_close(struct loop *l)
{
    if (l->daemon)
        MHD_stop_daemon(l->daemon);
    if (l->w) {
        redis_pipe_free(l->w->redis_pipe);
        l->w->redis_pipe = NULL;
        backends_close(l->w);
        worker_free(l->w);
    }
    if (l->wake >= 0)
        close(l->wake);
    if (l->watch >= 0)
        close(l->watch);
}

/* Wakes every loop and waits for its thread to end. */
static void loops_join(void)
{
    for (int i = 0; i < loop_count; i++)
        if (loops[i].running)
            loop_wake(&loops[i]);
    for (int i = 0; i < loop_count; i++)
        if (loops[i].running)
            pthread_join(loops[i].thread, NULL);
}

static void loops_close(void)
{
    for (int i = 0; i < loop_count; i++)
        loop_close(&loops[i]);
    free(loops);
    loops = NULL;
    loop_count = 0;
    listener_close();
}

/* The stop begins, to be over by `deadline` (monotonic ms): every new
 * request is refused, and clients are refused from now on. */
static void stop_by(long long deadline)
{
    atomic_store(&drain_deadline_ms, deadline);
    atomic_store(&stopping, 1);
    listener_shut();
}

/* Stops whatever http_start() had started when it failed. */
static int start_failed(void)
{
    stop_by(monotonic_ms());
    loops_join();
    loops_close();
    pool_stop();
    atomic_store(&stopping, 0);
    return -1;
}

int http_start(void)
{
    loop_count = config.threads;
    if (listener_open(config.listen, config.port, loop_count, loop_share(config.max_connections)) !=
        0) {
        loop_count = 0;
        return -1;
    }
    pool_limit_knobs(config.knob_workers, config.knob_queue);
    if (pool_start(config.workers, config.queue_max) != 0) {
        loop_count = 0;
        listener_close();
        return -1;
    }
    loops = calloc((size_t)loop_count, sizeof *loops);
    if (!loops) {
        loop_count = 0;
        return start_failed();
    }
    for (int i = 0; i < loop_count; i++) {
        loops[i] = (struct loop){.index = i, .wake = -1, .watch = -1};
        loops[i].waiting.prev = loops[i].waiting.next = &loops[i].waiting;
    }
    for (int i = 0; i < loop_count; i++) {
        if (loop_open(&loops[i]) != 0) {
            log_error("cannot start HTTP loop %d", i);
            return start_failed();
        }
    }
    for (int i = 0; i < loop_count; i++) {
        if (pthread_create(&loops[i].thread, NULL, loop_main, &loops[i]) != 0) {
            log_error("cannot start the thread of HTTP loop %d", i);
            return start_failed();
        }
        loops[i].running = 1;
    }
    return 0;
}

int http_stop(void)
{
    long long deadline = monotonic_ms() + config.drain_ms;
    stop_by(deadline);
    pool_close();
    workers_stop_by(deadline);
    loops_join();
    int left = atomic_load(&outstanding);
    if (left > 0) {
        log_error("drain-ms (%d) is over with %d requests still running; exiting without them",
                  config.drain_ms, left);
        return -1; /* their connections are suspended: the daemons cannot stop */
    }
    loops_close();
    pool_stop();
    return 0;
}
