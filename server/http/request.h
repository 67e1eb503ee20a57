/*
 * request.h - one request as a loop holds it, `struct pending`: what
 * arrived (its method, path, query and body), how far it has gone (its
 * phase), and its reply, built and queued on the wire.
 *
 * Who answers it - the loop on the spot, the loop later, or another
 * thread - and how they settle between them is http.c's; this header is
 * the state they share, and the steps that touch one request alone.
 */
#ifndef STOCKD_REQUEST_H
#define STOCKD_REQUEST_H

#include "api/api.h"
#include "backend/pool.h"
#include "core/later.h"
#include "core/result.h"
#include "http/router.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>

struct loop;

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

/* A request from its head to its reply sent (http.c says who has it when). */
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
    int has_key; /* an Idempotency-Key header came, its start in `key` */
    char key[IDEMPOTENCY_KEY_MAX + 2];
    char *body;
    size_t len;
    /* its parameters as the first step that parsed them accepted them */
    struct params_parsed parsed;
    int too_large;         /* the body was over config.max_body: answer 413 */
    int bad_framing;       /* two Hosts, two lengths, a length and chunks: 400 */
    int knob;              /* asks to wait on purpose: the pool's knob lane */
    int submitted;         /* counted as outstanding (loops_outstanding_add) */
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
    int replayed;            /* the answer is an Idempotency-Key's first one, again */
};

/* Moves `p` to phase `to` from phase `from`, which it must be in: a
 * request goes READING, then RUNNING when another step answers it, REPLIED,
 * SENT, and never back. */
void phase_move(struct pending *p, enum phase from, enum phase to);

/* Collects the query's parameters into `p` (too many: too_many_args),
 * and its Idempotency-Key header, kept in `p`: a worker never reads the
 * connection. */
void collect_args(struct pending *p);

/* Appends a chunk of the body, or notes that it is over config.max_body. */
void append_body(struct pending *p, const char *data, size_t size);

/* Moves the request's method, path and query into memory of its own;
 * 0, or -1 when out of memory. */
int own_text(struct pending *p);

/* The request as the handlers see it. */
struct http_request request_of(struct pending *p);

/* A reply document whose first member is "ok"; finish_reply() sets it. */
json_t *new_reply(void);

/* Completes `doc` for result `r` (ok, error word, message) and renders it
 * as the reply. Takes the reference to `doc`. */
void finish_reply(struct pending *p, st_result r, json_t *doc, const char *message);

/* The reply's headers, for its result, on `response`. */
void add_headers(struct MHD_Response *response, const struct pending *p);

/* Has libmicrohttpd send the reply (REPLIED to SENT). */
enum MHD_Result send_reply(struct pending *p);

#endif
