/*
 * orders.c - the order endpoints: parameters checked, the order's store
 * found from its id, the store's transition called (a cancel: the return
 * through the order's strategy, sale/returns.h), its answer put in the
 * contract's words.
 */
#include "api/orders.h"

#include "api/keys_running.h"
#include "api/products.h"
#include "backend/backend.h"
#include "core/config.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/worker.h"
#include "sale/returns.h"
#include "sale/strategy.h"
#include "store/expiry.h"
#include "store/orders.h"

#include <stdio.h>
#include <string.h>

#define ORDERS_PREFIX "/orders/"

/* A mechanism's name: lowercase letters and dashes (store/expiry.h). */
static int expiry_name_ok(const char *value)
{
    return strspn(value, "abcdefghijklmnopqrstuvwxyz-") == strlen(value);
}

static const struct param_spec hold_params[] = {
    PARAM_PRODUCT(DEFAULT_PRODUCT),
    PARAM_QTY,
    {"ttl_ms", 100, 3600000, PARAM_REQUIRED, 0, NULL},
    PARAM_HOLD_MS,
    {"trace", 0, 1, 0, 0, NULL},
    {"expiry", 1, 32, 0, 0, expiry_name_ok},
};
enum { HOLD_PRODUCT, HOLD_QTY, HOLD_TTL, HOLD_HOLD_MS, HOLD_TRACE, HOLD_EXPIRY };
const struct param_table api_hold_params = {hold_params, COUNT_OF(hold_params)};

/* A cancel's return runs its strategy's body: hold_ms widens its critical
 * section, as on a sale, so that an unsafe row's return races every time. */
static const struct param_spec cancel_params[] = {PARAM_HOLD_MS};
const struct param_table api_cancel_params = {cancel_params, COUNT_OF(cancel_params)};

static const struct param_spec pay_params[] = {
    {"payment", 1, PAYMENT_ID_MAX, PARAM_REQUIRED, 0, payment_id_valid},
};

/* The mechanism the hold asks for, or its store's default. */
static st_result expiry_asked(struct worker *w, const struct strategy *s,
                              const struct http_request *req, int given, const struct expiry **out)
{
    char name[PARAM_TEXT_MAX + 1];
    if (!given) {
        *out = expiry_default(s->store);
        return *out ? ST_OK
                    : worker_fail(w, ST_BAD_REQUEST, "expiry: no mechanism returns %s's holds",
                                  s->store->name);
    }
    params_text(req, &hold_params[HOLD_EXPIRY], name);
    *out = expiry_find(name);
    if (!*out)
        return worker_fail(w, ST_BAD_REQUEST, "expiry '%s' is no mechanism; see /expiry", name);
    if ((*out)->store != s->store)
        return worker_fail(w, ST_BAD_REQUEST,
                           "expiry '%s' returns %s's holds, and %s sells from %s", name,
                           (*out)->store->name, s->name, s->store->name);
    return ST_OK;
}

/* POST /orders/{strategy}: the strategy's sale, the order written with it
 * - and its Idempotency-Key, kept with both as a sale's is (a replay:
 * the first hold's order, its deadline read again). */
static st_result hold(struct worker *w, const char *name, const struct http_request *req,
                      json_t *reply)
{
    const struct strategy *s = strategy_find(name);
    if (!s)
        return worker_fail(w, ST_UNKNOWN_STRATEGY, "no strategy named '%.40s'; see /strategies",
                           name);
    json_object_set_new(reply, "strategy", json_string(s->name));
    long long v[COUNT_OF(hold_params)];
    st_result r = params_parse(w, req, hold_params, COUNT_OF(hold_params), v);
    if (r != ST_OK)
        return r;
    if (strategy_orders_why(s))
        return worker_fail(w, ST_BAD_REQUEST, "strategy %s cannot hold orders: %s", s->name,
                           strategy_orders_why(s));
    const struct expiry *e;
    r = expiry_asked(w, s, req, (int)v[HOLD_EXPIRY], &e);
    if (r != ST_OK)
        return r;
    struct sale_trace trace;
    struct deduct_request rq = {
        .strategy = s,
        .seller = s->name,
        .product = (int)v[HOLD_PRODUCT],
        .qty = (int)v[HOLD_QTY],
        .hold_ms = (int)v[HOLD_HOLD_MS],
        .ttl_ms = config.lock_ttl_ms,
        .trace = v[HOLD_TRACE] ? &trace : NULL,
        .hold = {.ttl_ms = (int)v[HOLD_TTL], .expiry = e->name},
    };
    order_id_make(rq.hold.order, s->store, rq.product);
    r = params_key(w, req, rq.key);
    if (r != ST_OK)
        return r;
    if (strategy_idempotent_why(s))
        rq.key[0] = '\0'; /* the row keeps no key: it holds as if none came */
    if (rq.trace)
        trace_begin(rq.trace, req->arrived_us);
    if (w->deadline_ms) /* the knob's wait is the experiment, not slowness */
        w->deadline_ms += rq.hold_ms;
    json_object_set_new(reply, "product", json_integer(rq.product));
    json_object_set_new(reply, "qty", json_integer(rq.qty));
    struct deduct_reply out = {.remaining = REMAINING_UNKNOWN};
    r = api_sell(w, &rq, req, reply, &out);
    if (r != ST_OK)
        return r;
    struct order_ref o = {.store = s->store, .product = rq.product};
    /* A replay's order is the one its key's first hold made. */
    memcpy(o.id, out.replayed && out.order[0] ? out.order : rq.hold.order, sizeof o.id);
    long long deadline_ms;
    r = s->store->orders->deadline(w, &o, &deadline_ms);
    json_object_set_new(reply, "order", json_string(o.id));
    json_object_set_new(reply, "state", json_string("held"));
    json_object_set_new(reply, "expiry", json_string(e->name));
    /* Held whatever the read of its deadline says: a failed read is no
     * refusal of the sale, it only leaves the deadline for GET to tell. */
    json_object_set_new(reply, "expires_at_ms",
                        r == ST_OK ? json_integer(deadline_ms) : json_null());
    return ST_CREATED;
}

/* The {ID} of /orders/{ID}[/...], checked. */
static st_result order_asked(struct worker *w, const char *id, size_t len, json_t *reply,
                             struct order_ref *o)
{
    char text[ORDER_ID_MAX + 2];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text - 1 ? len : sizeof text - 1), id);
    if (len > ORDER_ID_MAX || order_id_parse(text, o) != 0)
        return worker_fail(w, ST_BAD_REQUEST,
                           "order in the path must be an order id like m1001-9f2c0a1b2c3d4e5f, "
                           "not '%.40s'",
                           text);
    json_object_set_new(reply, "order", json_string(o->id));
    return ST_OK;
}

/* Whether the order's store is configured, once its parameters are read. */
static st_result store_configured(struct worker *w, const struct order_ref *o)
{
    if (backend_configured(o->store->backend))
        return ST_OK;
    return worker_fail(w, ST_BACKEND_UNAVAILABLE, "order %s is in %s, which is not configured",
                       o->id, o->store->name);
}

/* What an order's transition was asked with: a payment's id, or a cancel's
 * hold_ms (the contract's knob, spent inside the return's read-then-write). */
struct transition_args {
    const char *payment;
    int hold_ms;
};

/* An order's transition: pay or cancel. */
typedef st_result (*transition_fn)(struct worker *w, const struct order_ref *o,
                                   const struct transition_args *args, int *duplicate);

static st_result pay_order(struct worker *w, const struct order_ref *o,
                           const struct transition_args *args, int *duplicate)
{
    return o->store->orders->pay(w, o, args->payment, duplicate);
}

/* A cancel gives its units back through the order's strategy (sale/returns.h). */
static st_result cancel_order(struct worker *w, const struct order_ref *o,
                              const struct transition_args *args, int *duplicate)
{
    return order_cancel(w, o, args->hold_ms, duplicate);
}

/* The transition with Idempotency-Key `key`, running here: the answer its
 * order's store kept with the key, replayed; else the transition, and its
 * answer kept after it - a 5xx, which changed nothing or may have, is not:
 * its retry runs the transition again, which the order's state makes safe. */
static st_result keyed_transition(struct worker *w, const struct order_ref *o, const char *key,
                                  const char *fingerprint, transition_fn t,
                                  const struct transition_args *args, int *duplicate, json_t *reply)
{
    const struct key_store *keys = o->store->keys;
    struct kept_answer a = {0};
    int found, kept = 1;
    st_result r = keys->find_answer(w, o->product, key, fingerprint, &a, &found);
    if (r == ST_OK && !found) {
        a.result = t(w, o, args, &a.duplicate);
        snprintf(a.message, sizeof a.message, "%s", a.result == ST_OK ? "" : w->error);
        if (result_status(a.result) >= 500)
            return a.result;
        r = keys->keep_answer(w, o->product, key, fingerprint, &a, &kept);
        if (r != ST_OK) /* the transition stands: its answer, not the key's failure */
            log_error("order %s: its Idempotency-Key was not kept: %s", o->id, w->error);
        if (r == ST_OK && !kept) /* another request with the key answered first */
            r = keys->find_answer(w, o->product, key, fingerprint, &a, &found);
        else
            found = 0, r = ST_OK;
    }
    if (r != ST_OK)
        return r;
    if (found && a.result != ST_KEY_REUSED) /* the HTTP layer makes it Idempotent-Replayed */
        json_object_set_new(reply, "replayed", json_true());
    *duplicate = a.duplicate;
    if (a.result == ST_KEY_REUSED)
        return worker_fail(w, ST_KEY_REUSED,
                           "this Idempotency-Key was sent before with another request; a new "
                           "payment or cancel needs a new key");
    return a.result == ST_OK ? ST_OK : worker_fail(w, a.result, "%s", a.message);
}

/* The transition, with the request's Idempotency-Key when it has one. */
static st_result transition(struct worker *w, const struct order_ref *o,
                            const struct http_request *req, const char *fingerprint,
                            transition_fn t, const struct transition_args *args, int *duplicate,
                            json_t *reply)
{
    char key[IDEMPOTENCY_KEY_MAX + 1];
    st_result r = params_key(w, req, key);
    if (r == ST_OK)
        r = store_configured(w, o);
    if (r != ST_OK || !key[0])
        return r == ST_OK ? t(w, o, args, duplicate) : r;
    r = keys_running_begin(w, key);
    if (r != ST_OK)
        return r;
    r = keyed_transition(w, o, key, fingerprint, t, args, duplicate, reply);
    keys_running_end(key);
    return r;
}

static st_result pay(struct worker *w, const struct order_ref *o, const struct http_request *req,
                     json_t *reply)
{
    long long given;
    char payment[PARAM_TEXT_MAX + 1], fingerprint[KEY_FINGERPRINT_MAX];
    st_result r = params_parse(w, req, pay_params, COUNT_OF(pay_params), &given);
    if (r != ST_OK)
        return r;
    params_text(req, &pay_params[0], payment);
    json_object_set_new(reply, "payment", json_string(payment));
    snprintf(fingerprint, sizeof fingerprint, "pay %s %s", o->id, payment);
    int duplicate = 0;
    const struct transition_args args = {payment, 0};
    r = transition(w, o, req, fingerprint, pay_order, &args, &duplicate, reply);
    if (r == ST_OK)
        json_object_set_new(reply, "state", json_string("paid"));
    if (duplicate)
        json_object_set_new(reply, "duplicate", json_true());
    return r;
}

static st_result cancel(struct worker *w, const struct order_ref *o, const struct http_request *req,
                        json_t *reply)
{
    long long hold_ms;
    char fingerprint[KEY_FINGERPRINT_MAX];
    st_result r = params_parse(w, req, cancel_params, COUNT_OF(cancel_params), &hold_ms);
    if (r != ST_OK)
        return r;
    if (w->deadline_ms) /* the knob's wait is the experiment, not slowness */
        w->deadline_ms += hold_ms;
    snprintf(fingerprint, sizeof fingerprint, "cancel %s", o->id);
    int duplicate = 0;
    const struct transition_args args = {NULL, (int)hold_ms};
    r = transition(w, o, req, fingerprint, cancel_order, &args, &duplicate, reply);
    if (r == ST_OK)
        json_object_set_new(reply, "state", json_string("cancelled"));
    if (duplicate)
        json_object_set_new(reply, "duplicate", json_true());
    return r;
}

st_result api_orders_post(struct worker *w, const struct http_request *req, json_t *reply)
{
    const char *rest = req->path + strlen(ORDERS_PREFIX);
    const char *slash = strchr(rest, '/');
    if (!slash)
        return hold(w, rest, req, reply);
    struct order_ref o;
    st_result r = order_asked(w, rest, (size_t)(slash - rest), reply, &o);
    if (r == ST_OK && strcmp(slash, "/pay") == 0)
        return pay(w, &o, req, reply);
    if (r == ST_OK && strcmp(slash, "/cancel") == 0)
        return cancel(w, &o, req, reply);
    return r == ST_OK ? worker_fail(w, ST_NOT_FOUND, "an order takes /pay or /cancel, not '%.20s'",
                                    slash + 1)
                      : r;
}

st_result api_orders_get(struct worker *w, const struct http_request *req, json_t *reply)
{
    const char *id = req->path + strlen(ORDERS_PREFIX);
    struct order_ref o;
    st_result r = order_asked(w, id, strlen(id), reply, &o);
    if (r == ST_OK)
        r = params_parse(w, req, NULL, 0, NULL);
    if (r == ST_OK)
        r = store_configured(w, &o);
    return r == ST_OK ? o.store->orders->get(w, &o, reply) : r;
}

void api_expiry(const struct http_request *req, struct page *out)
{
    (void)req;
    page_json(out, 200,
              json_pack("{s:b, s:s, s:i, s:o}", "ok", 1, "instance", config.instance_name,
                        "sweep_ms", config.sweep_ms, "expiry", expiry_json()));
}
