/*
 * script_sale.c - how a sale that is one Redis script (lua, lua-stream)
 * travels to Redis and back.
 *
 * Sales in flight at the same moment share one trip to Redis, as a
 * multiplexing client (Lettuce, ioredis) does it. A sale read
 * by an HTTP loop goes on that loop's own pipe (redis_pipe.h): every sale
 * of one turn of the loop is written at once, and each is answered by the
 * same loop as its reply arrives, with no other thread involved. A sale
 * that waits first (hold_ms, pause_ms) runs on a pool worker and joins a
 * shared pipeline there instead (combine.h): a leader writes every waiting
 * sale's EVALSHA at once and reads the answers in order. So does every
 * sale on a Redis Cluster (redis_cluster.h), one trip per product's slot:
 * a pipe is one connection to one server. Either way each
 * script runs alone and whole inside Redis: pipelining saves round trips
 * and thread hand-offs, it changes nothing in the race.
 *
 * A sale with an Idempotency-Key runs the keyed sale script
 * (redis_stock.h). On a pipe every call carries its own script; a shared
 * pipeline carries one, so a keyed sale on a worker goes alone, as a hold
 * does.
 */
#include "sale/script_sale.h"

#include "backend/redis.h"
#include "backend/redis_cluster.h"
#include "backend/redis_pipe.h"
#include "core/later.h"
#include "core/metrics.h"
#include "core/worker.h"
#include "sale/combine.h"
#include "store/redis_stock.h"
#include "store/store.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

/* Each sale's answer: its own reply, or the pipeline's `failure`. */
static void answer_each(struct worker *w, struct combined_sale *batch, int n, redisReply **replies,
                        st_result failure, const char *why)
{
    int i = 0;
    for (struct combined_sale *s = batch; s; s = s->next, i++) {
        if (replies[i]) {
            s->result = redis_script_result(w, s->rq, replies[i], n, s->out);
            freeReplyObject(replies[i]);
        } else {
            s->result = failure;
            snprintf(w->error, sizeof w->error, "%s", why);
        }
        if (s->result != ST_OK)
            snprintf(s->message, sizeof s->message, "%s", w->error);
    }
}

void script_sale_pipeline(struct worker *w, int key, struct combined_sale *batch, int n)
{
    (void)key; /* one pipeline for every product */
    struct redis_script_args *args = calloc((size_t)n, sizeof *args);
    const char *const **argvs = calloc((size_t)n, sizeof *argvs);
    redisReply **replies = calloc((size_t)n, sizeof *replies);
    if (!args || !argvs || !replies) {
        combined_fail_all(w, batch, worker_fail(w, ST_BACKEND_UNAVAILABLE, "lua: out of memory"));
    } else {
        int i = 0;
        for (struct combined_sale *s = batch; s; s = s->next, i++) {
            redis_script_args_of(&args[i], s->rq, s->out);
            argvs[i] = args[i].argv;
        }
        /* A combiner's queue holds one row's sales: one script. */
        st_result r =
            redis_eval_sales(w, args[0].script, n, args[0].nkeys, args[0].argc, argvs, replies);
        char why[sizeof w->error];
        snprintf(why, sizeof why, "%s", w->error);
        metrics_batch(strategy_index(batch->rq->strategy), n);
        answer_each(w, batch, n, replies, r, why);
    }
    free(args);
    free(argvs);
    free(replies);
}

/* A sale on an HTTP loop's pipe. */
struct piped_sale {
    struct pipe_call call; /* the pipe answers call.done */
    struct redis_script_args args;
    struct worker *loop; /* the loop's own, which answers it */
    const struct deduct_request *rq;
    struct deduct_reply *out;
};

static void piped_sale_done(struct later *done, st_result r, const char *why)
{
    struct piped_sale *s = CONTAINER_OF(done, struct piped_sale, call.done);
    const struct pipe_call *call = &s->call;
    if (r == ST_OK) {
        r = redis_script_result(s->loop, s->rq, call->reply, call->batch, s->out);
        why = s->loop->error;
    }
    if (call->batch_index == 0)
        metrics_batch(strategy_index(s->rq->strategy), call->batch);
    s->rq->later->answer(s->rq->later, r, r == ST_OK ? NULL : why);
    free(s);
}

/* Queues the sale on the loop's pipe; it is answered through rq->later,
 * and ST_OK says only that it was handed on. */
static st_result send_on_pipe(struct worker *w, const struct deduct_request *rq,
                              struct deduct_reply *out)
{
    assert(!rq->hold_ms && !rq->pause_ms); /* a sale that waits runs on a worker */
    struct piped_sale *s = calloc(1, sizeof *s);
    if (!s) {
        rq->later->answer(rq->later, ST_BACKEND_UNAVAILABLE, "lua: out of memory");
        return ST_OK;
    }
    s->loop = w;
    s->rq = rq;
    s->out = out;
    redis_script_args_of(&s->args, rq, out);
    s->call = (struct pipe_call){.done = {.answer = piped_sale_done},
                                 .script = s->args.script,
                                 .nkeys = s->args.nkeys,
                                 .argc = s->args.argc,
                                 .argv = s->args.argv,
                                 .deadline_ms = w->deadline_ms};
    redis_pipe_call(w->redis_pipe, &s->call);
    return ST_OK;
}

/* One sale's script, alone on this worker: its own EVALSHA, answered here. */
static st_result eval_alone(struct worker *w, const struct deduct_request *rq,
                            struct deduct_reply *out)
{
    struct redis_script_args a;
    redisReply *reply = NULL;
    redis_script_args_of(&a, rq, out);
    const char *const *argvs[] = {a.argv};
    st_result r = redis_eval_sales(w, a.script, 1, a.nkeys, a.argc, argvs, &reply);
    if (reply)
        r = redis_script_result(w, rq, reply, 1, out);
    if (reply)
        freeReplyObject(reply);
    return r;
}

/* A hold or a return: its own script, on this worker, answered here
 * (rq->later is NULL): its keys are its order's, a script no shared trip
 * carries. A hold's product joins the sweepers' list first. */
static st_result order_now(struct worker *w, const struct deduct_request *rq,
                           struct deduct_reply *out)
{
    assert(!rq->later);
    critical_section_wait(rq, NULL);
    st_result r = rq->hold.order[0] ? redis_hold_indexed(w, rq) : ST_OK;
    return r == ST_OK ? eval_alone(w, rq, out) : r;
}

/* A keyed sale that waits first: its own script too (a shared trip
 * carries one script, and its arguments are the key's), answered through
 * rq->later like the sales it did not join. */
static st_result keyed_now(struct worker *w, const struct deduct_request *rq,
                           struct deduct_reply *out)
{
    critical_section_wait(rq, NULL);
    st_result r = eval_alone(w, rq, out);
    if (!rq->later)
        return r;
    rq->later->answer(rq->later, r, r == ST_OK ? NULL : w->error);
    return ST_OK;
}

st_result script_sale_deduct(const struct combiner *shared, struct worker *w,
                             const struct deduct_request *rq, struct deduct_reply *out)
{
    if (rq->hold.order[0] || rq->give_back.order[0])
        return order_now(w, rq, out);
    /* A loop's pipe is one connection to one server: on a Redis Cluster
     * the sale goes the worker's way, to its slot's node. */
    if (w->redis_pipe && !redis_cluster_enabled())
        return send_on_pipe(w, rq, out);
    if (rq->key[0])
        return keyed_now(w, rq, out);
    /* Not a critical section: the script is the only one. */
    critical_section_wait(rq, NULL);
    return combine(shared, w, rq, out);
}
