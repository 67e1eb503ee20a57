/*
 * http.c - a request's way through stockd's HTTP side: guarded and routed
 * when it is whole, then answered on the spot, answered later by its loop,
 * or handed to another thread - and who lets go of it last.
 *
 * libmicrohttpd calls on_request() several times per request: once with the
 * headers (we allocate the request's state), once per body chunk (we
 * append, or note that the body is too large), then once with no data. On
 * that call the request is routed, after the guards (guards.h, in
 * dispatch()'s order). Refusals (400, 413, 404, 405, 401, 403, and 503
 * while stopping) and the introspection pages (/strategies, /health,
 * /metrics, the lab page) are answered right there on the loop: they wait
 * for nothing, so they answer at once however busy the workers are.
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
 * to send it.
 *
 * A suspended request is shared by two threads, its loop and whoever
 * answers it, and either may be the last to touch it: its client may go
 * while a worker still runs it. `settled` decides, once, which of the two
 * happened first (enum settled), and `refs` frees it after both. Its phase
 * only moves forward (phase_move() asserts the one it leaves), so a request
 * is answered once and sent once. The loops, their start and the stop are
 * loop.c's; a request's own steps, request.c's.
 */
#include "http/http.h"

#include "backend/backend.h"
#include "backend/pool.h"
#include "core/config.h"
#include "core/later.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/worker.h"
#include "http/conns.h"
#include "http/guards.h"
#include "http/loop.h"
#include "http/refusals.h"
#include "http/request.h"
#include "http/router.h"

#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Frees a request that nothing will answer any more and whose connection
 * is done with it. */
static void pending_free(struct pending *p)
{
    if (p->submitted)
        loops_outstanding_add(-1);
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
    phase_move(p, RUNNING, REPLIED);
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
        assert(loop_of_this_thread() == l); /* another thread gets a request only by hand_off() */
        answer_held(p, r, reply, message);
        return;
    }
    int unsettled = UNSETTLED;
    if (!atomic_compare_exchange_strong(&p->settled, &unsettled, ANSWERED)) {
        json_decref(reply); /* the client went: its connection is closed */
        release(p);
        return;
    }
    phase_move(p, RUNNING, REPLIED);
    finish_reply(p, r, reply, message);
    MHD_resume_connection(p->connection);
    if (loop_of_this_thread() != l)
        loop_wake(l);
    else
        l->resumed = 1;
}

static void answer_later(struct later *later, st_result r, const char *message)
{
    struct pending *p = CONTAINER_OF(later, struct pending, later);
    answer(p, r, p->reply, message);
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
    assert(loop_of_this_thread() == p->loop);
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
    st_result r = loops_stopping() ? worker_fail(w, ST_SHUTTING_DOWN, "stockd is stopping")
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
    phase_move(p, READING, REPLIED);
    finish_reply(p, r, new_reply(), message);
    return send_reply(p);
}

/* Answers a page on this thread. */
static enum MHD_Result answer_page(struct pending *p)
{
    struct http_request req = request_of(p);
    p->route.page(&req, &p->page);
    p->result = ST_OK; /* whatever its status: no Retry-After, no close */
    phase_move(p, READING, REPLIED);
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
    phase_move(p, READING, RUNNING);
    p->submitted = 1;
    loops_outstanding_add(1);
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

/* A deduct the sold-out flag refuses, answered on the spot from the loop's
 * response for it (refusals.h): no reply document, no worker, no response
 * of its own. 1 when it was, *queued what libmicrohttpd said. */
static int refused_by_flag(struct pending *p, enum MHD_Result *queued)
{
    struct loop *l = p->loop;
    struct http_request req = request_of(p);
    struct flag_refusal f;
    if (!api_deduct_flagged(l->w, &req, &f)) {
        refusal_drop(l->refusals, &f);
        return 0;
    }
    *queued = refusal_send(&l->refusals, p, &f, l->w);
    api_deduct_flag_answered(&f, &req);
    return 1;
}

/* The request is complete: guard it, then answer it or queue it. */
static enum MHD_Result dispatch(struct pending *p)
{
    conns_arrived(p, p->connection);
    if (loops_stopping())
        return refuse(p, ST_SHUTTING_DOWN, "stockd is stopping");
    if (!guard_host_allowed(p->connection))
        return refuse(p, ST_FORBIDDEN, "the Host header names another server; see --allowed-hosts");
    if (p->bad_framing)
        return refuse(p, ST_BAD_REQUEST,
                      "more than one Host or Content-Length, or Content-Length with "
                      "Transfer-Encoding");
    if (p->too_large)
        return refuse(p, ST_PAYLOAD_TOO_LARGE, "body is over %d bytes", config.max_body);
    collect_args(p);
    if (guard_has_control(p->path, p->args, p->nargs))
        return refuse(p, ST_BAD_REQUEST, "a control character (an encoded NUL?) in the request");
    route_find(p->method, p->path, &p->route);
    if (p->route.result == ST_NOT_FOUND)
        return refuse(p, ST_NOT_FOUND, "no such path; see /strategies");
    if (p->route.result != ST_OK)
        return refuse(p, p->route.result, "%.16s is not allowed here; use %s", p->method,
                      p->route.allow);
    if ((p->route.flags & ROUTE_CHANGES_STATE) && guard_cross_site(p->connection))
        return refuse(p, ST_FORBIDDEN, "a request from another site cannot change state");
    if ((p->route.flags & ROUTE_ADMIN) && !guard_authorized(p->connection))
        return refuse(p, ST_UNAUTHORIZED, "this needs 'Authorization: Bearer <admin token>'");
    if (p->route.page)
        return answer_page(p);
    enum MHD_Result queued;
    if ((p->route.flags & ROUTE_SOLD_OUT_FLAG) && refused_by_flag(p, &queued))
        return queued;
    return run_on_worker(p);
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
        p->bad_framing = guard_ambiguous_head(c);
        p->too_large = !p->bad_framing && guard_declared_too_large(c);
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
    struct loop *l = cls;
    conns_done(&l->conns, c, code == MHD_REQUEST_TERMINATED_COMPLETED_OK);
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

/* The client of `p`'s connection went (conns.h): whether the loop is to
 * shut its socket now. One suspended for another thread is resumed to be
 * closed, when its text is its own (`closable`) and it is not answered
 * already (else its reply finds the client gone); one answered on the
 * spot is shut once its reply is sent; one the loop holds is shut now. */
static int client_went(struct pending *p)
{
    if (!p->suspended)
        return p->held;
    int unsettled = UNSETTLED;
    if (p->closable && atomic_compare_exchange_strong(&p->settled, &unsettled, CLIENT_WENT)) {
        /* Resumed, the request gets MHD_NO from on_request(): closed. */
        MHD_resume_connection(p->connection);
        p->loop->resumed = 1;
    }
    return 0;
}

int http_start(void)
{
    const struct loop_handlers handlers = {
        .request = on_request,
        .completed = on_completed,
        .client_went = client_went,
    };
    return loops_start(&handlers);
}

int http_stop(void)
{
    return loops_stop();
}
