/*
 * returns.c - an order's units given back through its strategy.
 */
#include "sale/returns.h"

#include "core/config.h"
#include "core/worker.h"
#include "sale/strategy.h"

#include <assert.h>
#include <limits.h>
#include <string.h>

/* Whether `qty` units can go back through `s`: a strategy that holds
 * orders, and a qty a request carries. */
static int returnable(const struct strategy *s, long long qty)
{
    return s && !strategy_orders_why(s) && qty >= 1 && qty <= INT_MAX;
}

/* What a return needs of the order: its store's facts, its strategy found. */
struct order_seen {
    struct order_facts facts;
    const struct strategy *strategy;
};

static st_result order_look(struct worker *w, const struct order_ref *o, struct order_seen *out)
{
    st_result r = o->store->orders->facts(w, o, &out->facts);
    out->strategy = r == ST_OK ? strategy_find(out->facts.strategy) : NULL;
    if (r == ST_OK && out->facts.state == ORDER_HELD && !returnable(out->strategy, out->facts.qty))
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "order %s names no strategy that holds orders, or no qty", o->id);
    return r;
}

/* A return of `qty` units through strategy `s`: a sale of -qty whose
 * ledger step is `g` for order `o` (the first of a batch, g->more the
 * others), hold_ms spent inside its critical section. */
static struct deduct_request give_back_request(const struct strategy *s, const struct order_ref *o,
                                               long long qty, int hold_ms,
                                               const struct give_back *g)
{
    assert(qty >= 1 && qty <= INT_MAX);
    struct deduct_request rq = {
        .strategy = s,
        .seller = s->name,
        .product = o->product,
        .qty = -(int)qty,
        .hold_ms = hold_ms,
        .ttl_ms = config.lock_ttl_ms,
        .give_back = *g,
    };
    memcpy(rq.give_back.order, o->id, sizeof rq.give_back.order);
    return rq;
}

/* order_give_back(), with what its one read of the order saw left in
 * *seen: the state the order is in when it was not held, or ORDER_HELD when
 * this call returned it or lost it to another return or a payment. */
static st_result give_back_seen(struct worker *w, const struct order_ref *o, const char *state,
                                const char *by_what, int hold_ms, struct order_seen *seen,
                                int *returned)
{
    *returned = 0;
    st_result r = order_look(w, o, seen);
    if (r != ST_OK || seen->facts.state != ORDER_HELD)
        return r;
    const struct strategy *s = seen->strategy;
    assert(s->store == o->store); /* the order's id names its strategy's store */
    const struct give_back g = {.state = state, .by_what = by_what};
    struct deduct_request rq = give_back_request(s, o, seen->facts.qty, hold_ms, &g);
    struct deduct_reply out = {.remaining = REMAINING_UNKNOWN};
    r = strategy_run(s, w, &rq, &out);
    if (r == ST_EXPIRED) /* another return, or a payment, got there first */
        return ST_OK;
    *returned = r == ST_OK;
    return r;
}

st_result order_give_back(struct worker *w, const struct order_ref *o, const char *state,
                          const char *by_what, int hold_ms, int *returned)
{
    struct order_seen seen;
    return give_back_seen(w, o, state, by_what, hold_ms, &seen, returned);
}

/* The most orders one batch returns: a sweeper's due list. */
#define BATCH_MAX 100

/* A batch's orders, as the loop below narrows them. */
struct batch_left {
    struct order_ref orders[BATCH_MAX];
    int count;
    long long qty; /* their units summed */
};

/* One run of strategy `s`'s body returning every order of `left`: all of
 * them, or - one no longer held - ST_EXPIRED, with nothing written. */
static st_result give_back_together(struct worker *w, const struct strategy *s,
                                    const struct batch_left *left, const char *state,
                                    const char *by_what)
{
    const char *more[BATCH_MAX];
    assert(left->count >= 1);
    if (!returnable(s, left->qty))
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "orders of %s due: no strategy that holds orders, or no qty",
                           s ? s->name : "a strategy unknown here");
    for (int i = 1; i < left->count; i++) {
        assert(left->orders[i].product == left->orders[0].product); /* one product a batch */
        more[i - 1] = left->orders[i].id;
    }
    const struct give_back g = {
        .state = state, .by_what = by_what, .more = more, .more_count = left->count - 1};
    struct deduct_request rq = give_back_request(s, &left->orders[0], left->qty, 0, &g);
    struct deduct_reply out = {.remaining = REMAINING_UNKNOWN};
    return strategy_run(s, w, &rq, &out);
}

/* Keeps in `left` the orders a read finds still held, their units summed
 * again: those another return (a cancel, another sweeper) took since are
 * dropped, and so is one that cannot be read, its failure kept in *first. */
static void keep_still_held(struct worker *w, struct batch_left *left, st_result *first)
{
    int kept = 0;
    left->qty = 0;
    for (int i = 0; i < left->count; i++) {
        struct order_seen seen;
        st_result r = order_look(w, &left->orders[i], &seen);
        *first = *first == ST_OK ? r : *first;
        if (r != ST_OK || seen.facts.state != ORDER_HELD)
            continue;
        left->orders[kept++] = left->orders[i];
        left->qty += seen.facts.qty;
    }
    left->count = kept;
}

st_result order_give_back_batch(struct worker *w, const struct return_batch *b, const char *state,
                                const char *by_what, int *returned)
{
    const struct strategy *s = strategy_find(b->strategy);
    struct batch_left left = {.count = b->count, .qty = b->qty};
    st_result first = ST_OK; /* a read's failure, answered once the rest are back */
    assert(b->count >= 1 && b->count <= BATCH_MAX);
    memcpy(left.orders, b->orders, (size_t)b->count * sizeof left.orders[0]);
    *returned = 0;
    /* Each round either returns every order left, or finds one of them
     * no longer held: states leave `held` for good, so the read drops it,
     * and the rounds end within the batch's count. */
    for (;;) {
        st_result r = give_back_together(w, s, &left, state, by_what);
        if (r != ST_EXPIRED) {
            *returned = r == ST_OK ? left.count : 0;
            return first == ST_OK ? r : first;
        }
        int before = left.count;
        keep_still_held(w, &left, &first);
        if (left.count == 0)
            return first;
        if (left.count == before) /* the claim refused an order the read finds held */
            return worker_fail(w, ST_BUSY, "due orders of %s changed under their return", s->name);
    }
}

st_result order_cancel(struct worker *w, const struct order_ref *o, int hold_ms, int *duplicate)
{
    struct order_seen seen;
    int returned;
    *duplicate = 0;
    st_result r = give_back_seen(w, o, "cancelled", "cancel", hold_ms, &seen, &returned);
    if (r != ST_OK || returned)
        return r;
    /* Not held: the answer is the state the one read saw. Held, and
     * another return or a payment won: the state it left for, read now. */
    if (seen.facts.state == ORDER_HELD)
        r = order_look(w, o, &seen);
    if (r != ST_OK)
        return r;
    if (seen.facts.state == ORDER_CANCELLED) {
        *duplicate = 1;
        return ST_OK;
    }
    if (seen.facts.state == ORDER_PAID)
        return worker_fail(w, ST_PAID, "order %s is paid: it cannot be cancelled", o->id);
    if (seen.facts.state == ORDER_HELD) /* the return lost to nobody: impossible */
        return worker_fail(w, ST_BUSY, "order %s changed under the cancel; try again", o->id);
    return worker_fail(w, ST_EXPIRED, "order %s expired: its units are back already", o->id);
}
