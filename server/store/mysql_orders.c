/*
 * mysql_orders.c - orders in the mysql store: holds, payments, returns.
 */
#include "store/mysql_orders.h"

#include "backend/mysql.h"
#include "core/worker.h"

#include <assert.h>
#include <jansson.h>

/* The most held orders one sweep claims: a transaction short enough that
 * the sales waiting on its stock rows wait little. */
#define SWEEP_BATCH 100

st_result mysql_ledger_record(struct worker *w, const struct deduct_request *rq)
{
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

/* Inside an open transaction: order row `row_id` from held to `state`, its
 * units back in the stock and the return recorded - or nothing at all when
 * it was no longer held (*returned 0). */
static st_result order_return(struct worker *w, long long row_id, const char *state,
                              const char *by_what, int *returned)
{
    struct sql_outcome claim;
    st_result r = sql_exec(w, SQL_RETURN_CLAIM, SQL_ARGS(SQL_S(state), SQL_I(row_id)), &claim);
    *returned = r == ST_OK && claim.matched == 1;
    if (r == ST_OK && *returned)
        r = sql_exec(w, SQL_RETURN_STOCK, SQL_ARGS(SQL_I(row_id)), NULL);
    if (r == ST_OK && *returned)
        r = sql_exec(w, SQL_RETURN_RECORD, SQL_ARGS(SQL_S(by_what), SQL_I(row_id)), NULL);
    return r;
}

/* What SQL_ORDER_READ saw of an order, locked until the transaction ends. */
struct order_row {
    int found;
    long long row_id;
    enum order_state state;
    int past_deadline;
    int same_payment; /* paid with the payment asked about */
};

static st_result order_read(struct worker *w, const struct order_ref *o, const char *payment,
                            struct order_row *out)
{
    struct sql_outcome row;
    st_result r = sql_exec(w, SQL_ORDER_READ, SQL_ARGS(SQL_S(payment), SQL_S(o->id)), &row);
    *out = (struct order_row){.found = row.found && row.col[1] != 0,
                              .row_id = row.col[0],
                              .state = (enum order_state)row.col[1],
                              .past_deadline = row.col[2] != 0,
                              .same_payment = row.col[3] != 0};
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

static st_result cancel(struct worker *w, const struct order_ref *o, int *duplicate)
{
    struct order_row row;
    int returned = 0;
    *duplicate = 0;
    st_result r = sql_begin(w);
    if (r == ST_OK)
        r = order_read(w, o, "", &row);
    if (r == ST_OK && row.state == ORDER_HELD)
        r = order_return(w, row.row_id, "cancelled", "cancel", &returned);
    if (r == ST_OK && row.state == ORDER_HELD) {
        assert(returned); /* the row is locked since the read */
        return sql_commit(w);
    }
    sql_rollback(w);
    if (r != ST_OK)
        return r;
    if (row.state == ORDER_CANCELLED) {
        *duplicate = 1;
        return ST_OK;
    }
    if (row.state == ORDER_PAID)
        return worker_fail(w, ST_PAID, "order %s is paid: it cannot be cancelled", o->id);
    return worker_fail(w, ST_EXPIRED, "order %s expired: its units are back already", o->id);
}

/* An order's JSON text: its dozen fields, with room to spare. */
#define ORDER_TEXT_MAX 1024

static st_result get(struct worker *w, const struct order_ref *o, json_t *reply)
{
    char text[ORDER_TEXT_MAX];
    int found;
    st_result r =
        sql_exec_text(w, SQL_ORDER_JSON, SQL_ARGS(SQL_S(o->id)), text, sizeof text, &found);
    if (r != ST_OK)
        return r;
    if (!found)
        return worker_fail(w, ST_UNKNOWN_ORDER, "no order %s in mysql", o->id);
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

st_result mysql_orders_sweep(struct worker *w, const char *by_what, int *returned)
{
    long long ids[SWEEP_BATCH];
    unsigned n = 0;
    *returned = 0;
    st_result r = sql_begin_read_committed(w);
    if (r == ST_OK)
        r = sql_exec_rows(w, SQL_SWEEP_CLAIM, NULL, 0, ids, SWEEP_BATCH, &n);
    for (unsigned i = 0; r == ST_OK && i < n; i++) {
        int one;
        r = order_return(w, ids[i], "expired", by_what, &one);
        *returned += one;
    }
    if (r == ST_OK)
        r = sql_commit(w);
    else
        sql_rollback(w);
    if (r != ST_OK)
        *returned = 0;
    return r;
}

const struct order_store mysql_order_store = {
    .letter = 'm',
    .pay = pay,
    .cancel = cancel,
    .get = get,
    .deadline = deadline,
};
