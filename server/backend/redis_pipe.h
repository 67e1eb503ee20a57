/*
 * redis_pipe.h - an HTTP loop's own connection to the main Redis, used
 * without ever waiting on it.
 *
 * A pool worker talks to Redis one round trip at a time and waits for the
 * answer (backend/redis.h). An HTTP loop must never wait: it serves every
 * connection of its share of the clients. So each loop keeps one pipe. The
 * script calls its requests make during one turn of the loop are queued,
 * and written together at the end of the turn (redis_pipe_flush); their
 * replies are read as they arrive, in order, and each goes to its call's
 * done(). The loop watches the pipe's socket beside its HTTP connections
 * (redis_pipe_poll, redis_pipe_ready) and bounds its wait by the pipe's
 * next deadline (redis_pipe_expire).
 *
 * Nothing crosses threads: a sale read on a loop is sent, answered and its
 * reply written by that loop. That is the point - a sale costs no thread
 * hand-off and no wake-up, only its share of one write and one read.
 *
 * Only script calls (EVALSHA) go through a pipe. On a fresh connection
 * each script is loaded (SCRIPT LOAD) in the same write as its first call:
 * Redis runs commands in order, so the call finds it. A script whose SHA1
 * no one has learnt yet holds its calls back until the load answers.
 *
 * Failures read as in backend/redis.c: a call never written changed nothing
 * (ST_BACKEND_UNAVAILABLE); a written call whose reply never came may have
 * run (ST_OUTCOME_UNKNOWN). The connection is dropped on any break, on a
 * reply late by io-timeout-ms, or on a connect late by connect-timeout-ms,
 * and made again by the next call.
 */
#ifndef STOCKD_REDIS_PIPE_H
#define STOCKD_REDIS_PIPE_H

#include "core/later.h"
#include "core/result.h"

#include <hiredis/hiredis.h>
#include <poll.h>

struct redis_pipe;
struct redis_script;

/* The most keys and arguments one piped script takes: a sale script's
 * (struct redis_script_args, store/redis_stock.h: the keyed stream sale's
 * eleven). */
#define PIPE_ARGS_MAX 12

/* One script call. The caller owns it (and argv, and the strings in it)
 * until done() has been called, exactly once. */
struct pipe_call {
    /* Answered on the loop's thread: ST_OK with `reply` set (freed once
     * done.answer returns), or the failure and why. */
    struct later done;
    struct redis_script *script;
    int nkeys, argc;         /* argv: the keys, then the arguments */
    const char *const *argv; /* argc of them, at most PIPE_ARGS_MAX */
    long long deadline_ms;   /* not written once it has passed; 0: none */
    /* Set by the pipe before done.answer(): */
    const redisReply *reply;
    int batch;       /* calls written in the same write                    */
    int batch_index; /* this call's place in it, from 0                    */
    /* The pipe's own: */
    long long sent_ms;
    int resent; /* sent again after NOSCRIPT */
    struct pipe_call *next;
};

/* A pipe with no connection yet: the first flush connects. NULL when out
 * of memory. */
struct redis_pipe *redis_pipe_new(void);

/* Closes the pipe; a call still queued or in flight is answered
 * ST_SHUTTING_DOWN (never written) or ST_OUTCOME_UNKNOWN (written). */
void redis_pipe_free(struct redis_pipe *p);

/* Queues `call` for the next flush. */
void redis_pipe_call(struct redis_pipe *p, struct pipe_call *call);

/* Connects if needed and writes every queued call (the end of a loop's
 * turn). */
void redis_pipe_flush(struct redis_pipe *p);

/* What to wait for on the pipe's socket, into *pfd (fd -1: nothing); the
 * milliseconds until the pipe's next deadline, -1 for none. */
int redis_pipe_poll(const struct redis_pipe *p, struct pollfd *pfd);

/* The socket is ready (`revents` from poll): finishes a connect, writes
 * what is left, reads replies and answers their calls. */
void redis_pipe_ready(struct redis_pipe *p, short revents);

/* Gives up on what waited too long: a connect, a reply, a call whose
 * deadline passed before it could be written. */
void redis_pipe_expire(struct redis_pipe *p);

#endif
