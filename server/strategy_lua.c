/*
 * lua - the whole sale as one Lua script inside Redis.
 *
 * The race: redis-nolock's - GET the count, SET count - qty; between the two
 * round trips another client sells from the same count.
 *
 * The fix: send the check and the write to Redis as one script (EVALSHA).
 * Redis runs a script to its end before it serves any other command, so the
 * script reads the count, refuses when it is short, and otherwise DECRBYs
 * it and records the sale in ledger:{P} (sold, orders) with no other client
 * in between: the script is the critical section, and the sale and its
 * ledger entry apply together.
 *
 * The transport: sales in flight at the same moment share one trip to
 * Redis, as a multiplexing client (Lettuce, ioredis) does it. A sale read
 * by an HTTP loop goes on that loop's own pipe (redis_pipe.h): every sale
 * of one turn of the loop is written at once, and each is answered by the
 * same loop as its reply arrives, with no other thread involved. A sale
 * that waits first (hold_ms, pause_ms) runs on a pool worker and joins a
 * shared pipeline there instead (combine.h): a leader writes every waiting
 * sale's EVALSHA at once and reads the answers in order. Either way each
 * script runs alone and whole inside Redis: pipelining saves round trips
 * and thread hand-offs, it changes nothing in the race.
 *
 * The price: nothing can wait inside a script (it would stall the whole
 * Redis), so hold_ms and pause_ms are spent before the script, outside any
 * critical section; they cost this request time and never open a race. And
 * every sale of every product on this Redis runs one after the other on its
 * single thread: a slow script slows everyone. A pipeline whose connection
 * breaks answers outcome_unknown for every sale in it that got no answer.
 */
#include "combine.h"
#include "metrics.h"
#include "redis_pipe.h"
#include "redis_sale.h"
#include "redis_store.h"
#include "sale.h"
#include "store.h"
#include "worker.h"

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

void lua_script_pipeline(struct worker *w, int key, struct combined_sale *batch, int n)
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

static const struct combiner pipeline = {.run = lua_script_pipeline, .across_products = 1};

/* A sale on an HTTP loop's pipe. */
struct piped_sale {
    struct pipe_call call; /* first: the pipe hands it back */
    struct redis_script_args args;
    struct worker *loop; /* the loop's own, which answers it */
    const struct deduct_request *rq;
    struct deduct_reply *out;
};

static void piped_sale_done(struct pipe_call *call, st_result r, const redisReply *reply,
                            const char *why)
{
    struct piped_sale *s = (struct piped_sale *)(void *)call;
    if (r == ST_OK) {
        r = redis_script_result(s->loop, s->rq, reply, call->batch, s->out);
        why = s->loop->error;
    }
    if (call->batch_index == 0)
        metrics_batch(strategy_index(s->rq->strategy), call->batch);
    s->rq->later->answer(s->rq->later, r, r == ST_OK ? NULL : why);
    free(s);
}

/* Queues the sale on the loop's pipe; it is answered through rq->later. */
static st_result send_on_pipe(struct worker *w, const struct deduct_request *rq,
                              struct deduct_reply *out)
{
    assert(!rq->hold_ms && !rq->pause_ms); /* a sale that waits runs on a worker */
    struct piped_sale *s = calloc(1, sizeof *s);
    if (!s) {
        rq->later->answer(rq->later, ST_BACKEND_UNAVAILABLE, "lua: out of memory");
        return ST_LATER;
    }
    s->loop = w;
    s->rq = rq;
    s->out = out;
    redis_script_args_of(&s->args, rq, out);
    s->call = (struct pipe_call){.done = piped_sale_done,
                                 .script = s->args.script,
                                 .nkeys = s->args.nkeys,
                                 .argc = s->args.argc,
                                 .argv = s->args.argv,
                                 .deadline_ms = w->deadline_ms};
    redis_pipe_call(w->redis_pipe, &s->call);
    return ST_LATER;
}

st_result lua_script_deduct(const struct combiner *shared, struct worker *w,
                            const struct deduct_request *rq, struct deduct_reply *out)
{
    if (w->redis_pipe)
        return send_on_pipe(w, rq, out);
    /* Not a critical section: the script is the only one. */
    critical_section_wait(rq, NULL);
    return combine(shared, w, rq, out);
}

static st_result deduct(struct worker *w, const struct deduct_request *rq, struct deduct_reply *out)
{
    return lua_script_deduct(&pipeline, w, rq, out);
}

const struct strategy strategy_lua = {
    .name = "lua",
    .store = &store_redis,
    .safe_single = 1,
    .safe_multi = 1,
    .summary = "one Lua script checks, decrements and records the sale inside Redis",
    .contention = CONTENTION_WAITS, /* in Redis's one thread */
    .failover = FAILOVER_LOSES_SALES,
    .answers_later = 1,
    .deduct = deduct,
};
