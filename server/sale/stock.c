/*
 * stock.c - accounting and reset across the stores.
 */
#include "sale/stock.h"

#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"

#include <stdio.h>

/* Every store, in the order /stock/{product} lists them. */
static const struct store *const stores[STORE_COUNT] = {&store_mysql, &store_redis,
                                                        &store_segments};

const struct store *store_at(size_t i)
{
    return i < STORE_COUNT ? stores[i] : NULL;
}

long long account_oversold(const struct store_account *a)
{
    long long over = a->sold - a->returned - a->initial;
    return over > 0 ? over : 0;
}

long long account_lost_updates(const struct store_account *a)
{
    long long lost = a->sold - a->returned - (a->initial - a->remaining);
    return lost > 0 ? lost : 0;
}

/* The orders' figures beside the sales' (store/orders.h). */
static void orders_json(json_t *o, const struct store_account *a)
{
    const struct {
        const char *name;
        long long value;
    } figures[] = {{"held", a->held},
                   {"paid", a->paid},
                   {"returned", a->returned},
                   {"refunds_due", a->refunds_due},
                   {"stranded", a->stranded},
                   {"returned_twice", a->returned_twice},
                   {"paid_and_returned", a->paid_and_returned}};
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
        json_object_set_new(o, figures[i].name, json_integer((json_int_t)figures[i].value));
}

json_t *account_json(const struct store_account *a)
{
    if (!a->present)
        return json_null();
    json_t *o =
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "initial", (json_int_t)a->initial, "remaining",
                  (json_int_t)a->remaining, "sold", (json_int_t)a->sold, "orders",
                  (json_int_t)a->orders, "oversold", (json_int_t)account_oversold(a),
                  "lost_updates", (json_int_t)account_lost_updates(a));
    if (a->holds)
        orders_json(o, a);
    return o;
}

st_result stock_accounting(struct worker *w, int product, json_t *reply)
{
    struct store_account a[STORE_COUNT];
    const struct store_account *first = NULL;
    for (size_t i = 0; i < STORE_COUNT; i++) {
        st_result r = stores[i]->account(w, product, &a[i]);
        if (r != ST_OK)
            return r;
        if (a[i].present && !first)
            first = &a[i];
    }
    if (!first)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %d is in no store", product);
    json_object_set_new(reply, "product", json_integer(product));
    json_object_set_new(reply, "initial", json_integer(first->initial));
    for (size_t i = 0; i < STORE_COUNT; i++) {
        json_t *o = account_json(&a[i]);
        json_object_set_new(reply, stores[i]->name, o);
        st_result r =
            a[i].present && stores[i]->describe ? stores[i]->describe(w, product, o) : ST_OK;
        if (r != ST_OK)
            return r;
    }
    return ST_OK;
}

/* The names of `product`'s lock state on `backend`, from every lock kind
 * living there; their text goes into `text`. */
static int lock_names(enum backend_id backend, int product, char text[][LOCK_NAME_MAX], int max)
{
    int n = 0;
    for (size_t i = 0; i < strategy_count(); i++) {
        const struct lock_kind *kind = strategy_at(i)->lock;
        if (!kind || kind->backend != backend)
            continue;
        for (int k = 0; kind->names[k] && n < max; k++)
            lock_state_name(text[n++], kind, k, product);
    }
    return n;
}

/* Deletes the product's lock state in every configured lock backend. */
static st_result clear_locks(struct worker *w, int product)
{
    for (int id = 0; id < BACKEND_COUNT; id++) {
        const struct backend *b = backend_at((enum backend_id)id);
        if (!b->clear || !backend_configured((enum backend_id)id))
            continue;
        char text[REDIS_DELETE_MAX][LOCK_NAME_MAX];
        const char *names[REDIS_DELETE_MAX];
        int n = lock_names((enum backend_id)id, product, text, REDIS_DELETE_MAX);
        for (int k = 0; k < n; k++)
            names[k] = text[k];
        st_result r = n ? b->clear(w, names, n) : ST_OK;
        if (r != ST_OK)
            return r;
    }
    return ST_OK;
}

st_result stock_reset(struct worker *w, int product, long long count)
{
    st_result r = ST_OK;
    long long epoch = 0;
    for (size_t i = 0; r == ST_OK && i < STORE_COUNT; i++)
        r = stores[i]->reset(w, product, count, &epoch);
    return r == ST_OK ? clear_locks(w, product) : r;
}
