/*
 * mysql_orders.c - orders in the mysql store: holds, payments, returns.
 */
#include "store/mysql_orders.h"

#include "backend/mysql.h"
#include "core/worker.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>

/* The most held orders one sweep returns, a product's of one strategy in
 * one transaction (its strategy's): a round short enough to end well
 * inside the lag the sweeper promises. */
#define SWEEP_BATCH 100

/* A return's step where a sale's ledger row goes: each order leaves `held`
 * for rq->give_back.state and its return is recorded - or, when one was
 * no longer held, ST_EXPIRED, and sale_commit() undoes the stock write
 * before it, so a return that lost to another writes nothing. */
static st_result claim_one(struct worker *w, const struct give_back *g, const char *order)
{
    struct sql_outcome claim;
    st_result r = sql_exec(w, SQL_RETURN_CLAIM, SQL_ARGS(SQL_S(g->state), SQL_S(order)), &claim);
    if (r == ST_OK && claim.matched != 1)
        return worker_fail(w, ST_EXPIRED, "order %s is no longer held", order);
    return r == ST_OK
               ? sql_exec(w, SQL_RETURN_RECORD, SQL_ARGS(SQL_S(g->by_what), SQL_S(order)), NULL)
               : r;
}

static st_result return_record(struct worker *w, const struct deduct_request *rq)
{
    const struct give_back *g = &rq->give_back;
    assert(rq->qty < 0 && g->state && g->by_what);
    st_result r = claim_one(w, g, g->order);
    for (int i = 0; r == ST_OK && i < g->more_count; i++)
        r = claim_one(w, g, g->more[i]);
    return r;
}

st_result mysql_ledger_record(struct worker *w, const struct deduct_request *rq)
{
    if (rq->give_back.order[0])
        return return_record(w, rq);
    if (!rq->hold.order[0])
        return sql_exec(w, SQL_INSERT_ORDER,
                        SQL_ARGS(SQL_I(rq->product), SQL_S(rq->seller), SQL_I(rq->qty)), NULL);
    assert(rq->hold.ttl_ms > 0 && rq->hold.expiry);
    return sql_exec(w, SQL_INSERT_HOLD,
                    SQL_ARGS(SQL_I(rq->product), SQL_S(rq->seller), SQL_I(rq->qty),
                             SQL_S(rq->hold.order), SQL_I(rq->hold.ttl_ms * 1000LL),
                             SQL_S(rq->hold.expiry)),
                    NULL);
}

/* What SQL_ORDER_READ saw of an order, locked until the transaction ends. */
struct order_row {
    int found;
    enum order_state state;
    int past_deadline;
    int same_payment; /* paid with the payment asked about */
};

static st_result order_read(struct worker *w, const struct order_ref *o, const char *payment,
                            struct order_row *out)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_ORDER_READ, SQL_ARGS(SQL_S(payment), SQL_S(o->id)), &row);
    *out = (struct order_row){.found = row.found && row.col[0] != 0,
                              .state = (enum order_state)row.col[0],
                              .past_deadline = row.col[1] != 0,
                              .same_payment = row.col[2] != 0};
    if (r == ST_OK && !out->found)
        return worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in mysql", o->id);
    return r;
}

/* Records `payment` as refund due for the order, once: *duplicate when it
 * was already. */
static st_result refund_due(struct worker *w, const struct order_ref *o, const char *payment,
                            int *duplicate)
{
    struct sql_outcome done;
    st_result r = sql_exec(
        w, SQL_PAYMENT_RECORD,
        SQL_ARGS(SQL_S(o->id), SQL_I(o->product), SQL_S(payment), SQL_S("refund_due")), &done);
    *duplicate = r == ST_OK && done.matched == 0;
    return r;
}

/* The payment the conditional UPDATE did not take: why not, in the same
 * transaction, the order locked. */
static st_result payment_refused(struct worker *w, const struct order_ref *o, const char *payment,
                                 int *duplicate)
{
    struct order_row row;
    st_result r = order_read(w, o, payment, &row);
    if (r != ST_OK)
        return r;
    if (row.state == ORDER_PAID && row.same_payment) {
        *duplicate = 1;
        return ST_OK;
    }
    if (row.state == ORDER_HELD && !row.past_deadline) /* the clock only goes on */
        return worker_fail(w, ST_BUSY, "order %s changed under the payment; try again", o->id);
    r = refund_due(w, o, payment, duplicate);
    if (r != ST_OK)
        return r;
    if (row.state == ORDER_PAID)
        return worker_fail(w, ST_ALREADY_PAID,
                           "order %s is paid with another payment: %s is refund due", o->id,
                           payment);
    return worker_fail(w, ST_EXPIRED, "order %s is %s: payment %s is refund due", o->id,
                       row.state == ORDER_HELD        ? "past its deadline"
                       : row.state == ORDER_CANCELLED ? "cancelled"
                                                      : "expired",
                       payment);
}

/* Commits a transaction that answered `r`: a refusal recorded its refund
 * due, so it commits too; a failure rolls back. */
static st_result settle(struct worker *w, st_result r)
{
    if (r == ST_OK || r == ST_ALREADY_PAID || r == ST_EXPIRED) {
        st_result c = sql_commit(w); /* leaves the refusal's message unless it fails */
        return c == ST_OK ? r : c;
    }
    sql_rollback(w);
    return r;
}

static st_result pay(struct worker *w, const struct order_ref *o, const char *payment,
                     int *duplicate)
{
    struct sql_outcome paid;
    *duplicate = 0;
    st_result r = sql_begin(w);
    if (r == ST_OK)
        r = sql_exec(w, SQL_ORDER_PAY, SQL_ARGS(SQL_S(payment), SQL_S(o->id)), &paid);
    if (r == ST_OK && paid.matched == 1)
        r = sql_exec(w, SQL_PAYMENT_RECORD,
                     SQL_ARGS(SQL_S(o->id), SQL_I(o->product), SQL_S(payment), SQL_S("captured")),
                     NULL);
    else if (r == ST_OK)
        r = payment_refused(w, o, payment, duplicate);
    return settle(w, r);
}

/* Order `o` as statement `s` words it in one text: ST_UNKNOWN_ORDER when
 * there is no such order. */
static st_result order_text(struct worker *w, enum sql_statement s, const struct order_ref *o,
                            char *text, size_t size)
{
    int found;
    st_result r = sql_exec_text(w, s, SQL_ARGS(SQL_S(o->id)), text, size, &found);
    if (r == ST_OK && !found)
        return worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in mysql", o->id);
    return r;
}

/* An order's JSON text: its dozen fields, with room to spare. */
#define ORDER_TEXT_MAX 1024

static st_result get(struct worker *w, const struct order_ref *o, json_t *reply)
{
    char text[ORDER_TEXT_MAX];
    st_result r = order_text(w, SQL_ORDER_JSON, o, text, sizeof text);
    if (r != ST_OK)
        return r;
    json_t *order = json_loads(text, 0, NULL);
    if (!json_is_object(order)) {
        json_decref(order);
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: the order %s is no JSON object",
                           o->id);
    }
    json_object_update(reply, order);
    json_decref(order);
    return ST_OK;
}

/* SQL_ORDER_FACTS's text: a state, a qty and a strategy name, with room
 * to spare. */
#define FACTS_TEXT_MAX (48 + ORDER_STRATEGY_MAX)

static st_result facts(struct worker *w, const struct order_ref *o, struct order_facts *out)
{
    _Static_assert(ORDER_STRATEGY_MAX == 32, "the %32s below");
    char text[FACTS_TEXT_MAX];
    int state;
    *out = (struct order_facts){0};
    st_result r = order_text(w, SQL_ORDER_FACTS, o, text, sizeof text);
    if (r != ST_OK)
        return r;
    if (sscanf(text, "%d %lld %32s", &state, &out->qty, out->strategy) != 3)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: the order %s reads '%.64s'", o->id,
                           text);
    out->state = (enum order_state)state;
    return ST_OK;
}

static st_result deadline(struct worker *w, const struct order_ref *o, long long *ms)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_ORDER_DEADLINE, SQL_ARGS(SQL_S(o->id)), &row);
    if (r == ST_OK && !row.found)
        return worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in mysql", o->id);
    *ms = row.col[0];
    return r;
}

st_result mysql_orders_account(struct worker *w, int product, struct store_account *a)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_ORDERS_ACCOUNT,
                           SQL_ARGS(SQL_I(sweep_lag_ms() * 1000), SQL_I(product), SQL_I(product),
                                    SQL_I(product), SQL_I(product)),
                           &row);
    if (r != ST_OK)
        return r;
    a->holds = 1;
    a->held = row.col[0];
    a->paid = row.col[1];
    a->stranded = row.col[2];
    a->paid_and_returned = row.col[3];
    a->returned = row.col[4];
    a->refunds_due = row.col[5];
    a->returned_twice = row.col[6];
    return ST_OK;
}

st_result mysql_orders_reset(struct worker *w, int product)
{
    st_result r = sql_exec(w, SQL_RESET_RETURNS, SQL_ARGS(SQL_I(product)), NULL);
    return r == ST_OK ? sql_exec(w, SQL_RESET_PAYMENTS, SQL_ARGS(SQL_I(product)), NULL) : r;
}

/* SQL_SWEEP_DUE's hundred orders, as JSON text, with room to spare. */
#define DUE_TEXT_MAX (SWEEP_BATCH * (ORDER_ID_MAX + 96) + 16)

st_result mysql_orders_due(struct worker *w, json_t **due)
{
    _Static_assert(SWEEP_BATCH == 100, "SQL_SWEEP_DUE's LIMIT");
    char text[DUE_TEXT_MAX];
    int found;
    *due = NULL;
    st_result r = sql_exec_text(w, SQL_SWEEP_DUE, NULL, 0, text, sizeof text, &found);
    if (r != ST_OK)
        return r;
    *due = found ? json_loads(text, 0, NULL) : json_array();
    if (json_is_array(*due))
        return ST_OK;
    json_decref(*due);
    *due = NULL;
    return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: the due orders are no JSON array");
}

const struct order_store mysql_order_store = {
    .letter = 'm',
    .pay = pay,
    .get = get,
    .facts = facts,
    .deadline = deadline,
};
