/*
 * loop.h - the HTTP loops: threads that each run a libmicrohttpd daemon of
 * their own, their start, and the orderly stop (loop.c says how).
 *
 * The requests themselves are http.c's: a loop's daemon calls back into it
 * through the `loop_handlers` given at the start.
 */
#ifndef STOCKD_LOOP_H
#define STOCKD_LOOP_H

#include "core/worker.h"
#include "http/conns.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

struct refusals;

/* What a loop's daemon calls: each with the loop as its `cls`. */
struct loop_handlers {
    MHD_AccessHandlerCallback request;
    MHD_RequestCompletedCallback completed;
    client_went_fn client_went;
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
    struct worker *w;          /* the loop's own: never blocks, owns a Redis pipe */
    int wake;                  /* an eventfd: other threads wake the loop with it */
    atomic_int woken;          /* a wake-up is written and the loop has not run since */
    int held;                  /* requests held, waiting for the loop's own answer */
    int answered;              /* one was answered since libmicrohttpd last ran    */
    int resumed;               /* it resumed one itself since libmicrohttpd last ran */
    int index;                 /* its place in `loops`, and in the listener's shares */
    struct conns conns;        /* its connections' deadlines and closes (conns.h) */
    struct refusals *refusals; /* the sold-out flag's answers (refusals.h) */
    pthread_t thread;
    int running;
};

/* The loop running on this thread; NULL on any other thread. */
struct loop *loop_of_this_thread(void);

/* Wakes `l`, from any thread. */
void loop_wake(struct loop *l);

/* Whether a stop has begun: every request from then on is refused. */
int loops_stopping(void);

/* Counts a request handed to the pool (+1) until its connection completes
 * (-1): the stop waits for them. */
void loops_outstanding_add(int n);

/* Starts the worker pool and config.threads loops; 0, or -1 (after
 * logging why). */
int loops_start(const struct loop_handlers *handlers);

/* The orderly stop, within config.drain_ms (http.h's http_stop()). */
int loops_stop(void);

#endif
