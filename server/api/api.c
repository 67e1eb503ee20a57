/*
 * api.c - the contract's endpoints.
 */
#include "api/api.h"

#include "api/admission.h"
#include "api/assets.h"
#include "api/exposition.h"
#include "api/keys_running.h"
#include "api/products.h"
#include "backend/health.h"
#include "backend/pool.h"
#include "core/config.h"
#include "core/later.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "core/worker.h"
#include "sale/stock.h"
#include "sale/strategy.h"
#include "store/order_stream.h"

#include <stdlib.h>
#include <string.h>

/* The /strategies document, rendered once: nothing in it changes. */
static char *strategies_text;

/* `doc` as compact JSON in a malloc'ed buffer of *len bytes (no NUL), or
 * NULL when out of memory. A reply document is a few hundred bytes: it is
 * rendered on the stack and copied once, where json_dumps() would grow it
 * by reallocs and copy it again. */
#define RENDER_ON_STACK 512

static char *render(const json_t *doc, size_t *len)
{
    const size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(9);
    char on_stack[RENDER_ON_STACK];
    *len = json_dumpb(doc, on_stack, sizeof on_stack, flags);
    char *bytes = *len ? malloc(*len) : NULL;
    if (!bytes)
        return NULL;
    if (*len <= sizeof on_stack)
        memcpy(bytes, on_stack, *len);
    else if (json_dumpb(doc, bytes, *len, flags) != *len) {
        free(bytes);
        return NULL;
    }
    return bytes;
}

void page_json(struct page *out, unsigned status, json_t *doc)
{
    out->status = status;
    out->content_type = "application/json";
    out->owned = render(doc, &out->len);
    out->body = out->owned;
    if (!out->owned)
        out->len = 0;
    json_decref(doc);
}

static json_t *settings_json(void)
{
    return json_pack(
        "{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:i}", "optimistic_attempts",
        config.optimistic_attempts, "lock_ttl_ms", config.lock_ttl_ms, "lock_wait_ms",
        config.lock_wait_ms, "threads", config.threads, "workers", config.workers, "queue_max",
        config.queue_max, "request_timeout_ms", config.request_timeout_ms, "batch_max",
        config.batch_max, "admit_rate", config.admit_rate, "admit_burst", admission_burst(),
        "sold_out_flag", config.sold_out_flag, "sold_out_recheck_ms", config.sold_out_recheck_ms);
}

int api_prepare(void)
{
    json_t *list = json_array();
    for (size_t i = 0; i < strategy_count(); i++) {
        const char *flaw = strategy_row_flaw(strategy_at(i));
        if (flaw) {
            log_error("the strategy table's row '%s' is malformed: %s",
                      strategy_at(i)->name ? strategy_at(i)->name : "(no name)", flaw);
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, strategy_json(strategy_at(i)));
    }
    json_t *doc = json_pack("{s:b, s:s, s:o, s:o}", "ok", 1, "instance", config.instance_name,
                            "strategies", list, "settings", settings_json());
    strategies_text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return strategies_text ? 0 : -1;
}

void api_release(void)
{
    free(strategies_text);
    strategies_text = NULL;
}

void api_strategies(const struct http_request *req, struct page *out)
{
    (void)req;
    *out = (struct page){.status = 200,
                         .content_type = "application/json",
                         .body = strategies_text,
                         .len = strlen(strategies_text)};
}

void api_health(const struct http_request *req, struct page *out)
{
    (void)req;
    int all_up;
    char down[256];
    json_t *doc = health_json(&all_up, down, sizeof down);
    if (!all_up) {
        json_object_set_new(doc, "error", json_string(result_word(ST_BACKEND_UNAVAILABLE)));
        json_object_set_new(doc, "message", json_sprintf("down: %s", down));
    }
    page_json(out, all_up ? 200 : result_status(ST_BACKEND_UNAVAILABLE), doc);
}

/* The smallest answer that still goes through the whole HTTP path: a few
 * dozen bytes, like a sale's, and no backend, lock or worker behind it. A
 * load driver aimed at it measures itself, not stockd: the comparison's
 * calibration row runs its plan against it for the driver's ceiling. */
void api_ping(const struct http_request *req, struct page *out)
{
    (void)req;
    page_json(out, 200, json_pack("{s:b, s:s}", "ok", 1, "instance", config.instance_name));
}

void api_asset(const struct http_request *req, struct page *out)
{
    const struct asset *a = asset_find(req->path);
    if (!a) { /* routed by prefix: a name under /lab/ that is not a file */
        page_json(out, result_status(ST_NOT_FOUND),
                  json_pack("{s:b, s:s, s:s}", "ok", 0, "error", result_word(ST_NOT_FOUND),
                            "message", "no such file of the lab page"));
        return;
    }
    *out = (struct page){.status = 200,
                         .content_type = a->content_type,
                         .body = a->bytes,
                         .len = (size_t)(a->end - a->bytes)};
}

void api_lab_state(const struct http_request *req, struct page *out)
{
    (void)req;
    struct pool_load load;
    pool_load(&load);
    int all_up;
    char down[256];
    json_t *health = health_json(&all_up, down, sizeof down);
    json_t *doc =
        json_pack("{s:b, s:s, s:I, s:o, s:o, s:{s:i, s:i, s:i, s:i}, s:O}", "ok", 1, "instance",
                  config.instance_name, "time_ms", (json_int_t)wall_clock_ms(), "products",
                  products_json(), "strategies", exposition_strategies_json(), "load", "workers",
                  load.workers, "busy", load.busy, "queued", load.queued, "in_flight",
                  metrics_in_flight_now(), "backends", json_object_get(health, "backends"));
    json_object_set_new(doc, "stream", order_stream_json());
    json_decref(health);
    page_json(out, 200, doc);
}

void api_metrics(const struct http_request *req, struct page *out)
{
    (void)req;
    *out = (struct page){.status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8"};
    out->owned = exposition_metrics(&out->len);
    out->body = out->owned;
}

st_result api_reset(struct worker *w, const struct http_request *req, json_t *reply)
{
    static const struct param_spec specs[] = {
        PARAM_PRODUCT(DEFAULT_PRODUCT),
        {"count", 0, 1000000000, PARAM_REQUIRED, 0, NULL},
    };
    long long v[COUNT_OF(specs)];
    st_result r = params_parse(w, req, specs, COUNT_OF(specs), v);
    if (r != ST_OK)
        return r;
    json_object_set_new(reply, "product", json_integer(v[0]));
    json_object_set_new(reply, "count", json_integer(v[1]));
    products_watch((int)v[0]);
    r = stock_reset(w, (int)v[0], v[1]);
    if (r == ST_OK) {
        admission_reset((int)v[0]);
        log_info("reset product %lld to %lld", v[0], v[1]);
    }
    return r;
}

/* The order stream beside the stores (lua-stream): its orders accepted in
 * Redis (the redis ledger's), settled in MySQL (the mysql ledger's), and
 * the stream's own figures, which are the whole stream's, every product. */
static st_result stream_accounting(struct worker *w, json_t *reply)
{
    json_t *stream;
    st_result r = order_stream_status(w, &stream);
    if (r != ST_OK)
        return r;
    json_t *accepted = json_object_get(json_object_get(reply, "redis"), "orders");
    json_t *settled = json_object_get(json_object_get(reply, "mysql"), "orders");
    json_object_set_new(stream, "accepted", accepted ? json_incref(accepted) : json_null());
    json_object_set_new(stream, "settled", settled ? json_incref(settled) : json_null());
    json_object_set_new(reply, "stream", stream);
    return ST_OK;
}

st_result api_stock(struct worker *w, const struct http_request *req, json_t *reply)
{
    long long product;
    const char *id = req->path + strlen("/stock/");
    if (parse_bounded_int(id, 1, PRODUCT_MAX, &product) != 0)
        return worker_fail(w, ST_BAD_REQUEST, "product in the path must be an integer 1..%lld",
                           PRODUCT_MAX);
    st_result r = params_parse(w, req, NULL, 0, NULL);
    if (r != ST_OK)
        return r;
    r = stock_accounting(w, (int)product, reply);
    return r == ST_OK ? stream_accounting(w, reply) : r;
}

/* What the sale saw, added to its reply: set in place, where a document of
 * its own merged in would cost an object, its table and a copy of each
 * member per sale. */
static void sale_json(json_t *reply, const struct deduct_request *rq,
                      const struct deduct_reply *out)
{
    json_object_set_new(reply, "attempts", json_integer(out->attempts));
    if (out->remaining != REMAINING_UNKNOWN)
        json_object_set_new(reply, "remaining", json_integer(out->remaining));
    if (out->fence)
        json_object_set_new(reply, "fence", json_integer(out->fence));
    if (out->lock_lost)
        json_object_set_new(reply, "lock_lost", json_true());
    if (out->batch)
        json_object_set_new(reply, "batch", json_integer(out->batch));
    if (out->order[0])
        json_object_set_new(reply, "order", json_string(out->order));
    if (rq->hold_ms)
        json_object_set_new(reply, "hold_ms", json_integer(rq->hold_ms));
}

/* ST_BACKEND_UNAVAILABLE when a backend `s` needs is not configured. */
static st_result needs_configured(struct worker *w, const struct strategy *s)
{
    backend_set needs = strategy_needs(s);
    for (int id = 0; id < BACKEND_COUNT; id++)
        if ((needs & BACKEND_BIT(id)) && !backend_configured((enum backend_id)id))
            return worker_fail(w, ST_BACKEND_UNAVAILABLE, "%s needs %s, which is not configured",
                               s->name, backend_at((enum backend_id)id)->name);
    return ST_OK;
}

/* The {strategy} of a /stock/deduct/{strategy} path ("" when none). */
static const char *strategy_name(const char *path)
{
    const char *name = path + strlen("/stock/deduct");
    return name + (*name == '/');
}

/* Counts a deduct of `s` answered `r`. */
static void count_answer(const struct strategy *s, st_result r, long long arrived_us)
{
    metrics_deduct(strategy_index(s), r, monotonic_us() - arrived_us);
}

void api_refused(const struct http_request *req, st_result r)
{
    const struct strategy *s = strncmp(req->path, "/stock/deduct", strlen("/stock/deduct")) == 0
                                   ? strategy_find(strategy_name(req->path))
                                   : NULL;
    if (s)
        count_answer(s, r, req->arrived_us);
}

/* A deduct's parameters, each in its named place. */
enum deduct_param {
    DEDUCT_PRODUCT,
    DEDUCT_QTY,
    DEDUCT_HOLD_MS,
    DEDUCT_TTL_MS,
    DEDUCT_PAUSE_MS,
    DEDUCT_TRACE,
    DEDUCT_PARAMS /* how many */
};
static const struct param_spec deduct_params[] = {
    [DEDUCT_PRODUCT] = PARAM_PRODUCT(DEFAULT_PRODUCT),
    [DEDUCT_QTY] = PARAM_QTY,
    [DEDUCT_HOLD_MS] = PARAM_HOLD_MS,
    [DEDUCT_TTL_MS] = PARAM_TTL_MS,
    [DEDUCT_PAUSE_MS] = PARAM_PAUSE_MS,
    [DEDUCT_TRACE] = {"trace", 0, 1, 0, 0, NULL},
};
_Static_assert(COUNT_OF(deduct_params) == DEDUCT_PARAMS, "a row of deduct_params for each place");
const struct param_table api_deduct_params = {deduct_params, COUNT_OF(deduct_params)};

/* What every deduct's reply says of the sale asked for, after its strategy. */
static void sale_named(json_t *reply, int product, int qty)
{
    json_object_set_new(reply, "product", json_integer(product));
    json_object_set_new(reply, "qty", json_integer(qty));
}

/* The sale the request asks for with strategy `s`, checked, into *rq;
 * with trace=1, rq->trace is `trace`, begun. */
static st_result sale_asked(struct worker *w, const struct strategy *s,
                            const struct http_request *req, json_t *reply,
                            struct deduct_request *rq, struct sale_trace *trace)
{
    long long v[DEDUCT_PARAMS];
    st_result r = params_parse(w, req, deduct_params, DEDUCT_PARAMS, v);
    if (r == ST_OK)
        r = needs_configured(w, s);
    if (r != ST_OK)
        return r;
    *rq = (struct deduct_request){
        .strategy = s,
        .seller = s->name,
        .streams_order = s->settles == SETTLES_LATER,
        .product = (int)v[DEDUCT_PRODUCT],
        .qty = (int)v[DEDUCT_QTY],
        .hold_ms = (int)v[DEDUCT_HOLD_MS],
        .ttl_ms = v[DEDUCT_TTL_MS] ? (int)v[DEDUCT_TTL_MS] : config.lock_ttl_ms,
        .pause_ms = (int)v[DEDUCT_PAUSE_MS],
        .trace = v[DEDUCT_TRACE] ? trace : NULL,
    };
    r = params_key(w, req, rq->key);
    if (r != ST_OK)
        return r;
    if (strategy_idempotent_why(s))
        rq->key[0] = '\0'; /* the row keeps no key: it sells as if none came */
    if (rq->trace)
        trace_begin(rq->trace, req->arrived_us);
    /* The knobs' waits are the experiment, not slowness: they do not count
     * against the request's deadline. */
    if (w->deadline_ms)
        w->deadline_ms += rq->hold_ms + rq->pause_ms;
    sale_named(reply, rq->product, rq->qty);
    products_watch(rq->product);
    return ST_OK;
}

/* What every answered sale gets: what it saw in the reply, and counted. */
static void sale_answered(const struct deduct_request *rq, const struct deduct_reply *out,
                          const struct admission_ticket *ticket, st_result r, json_t *reply,
                          long long arrived_us)
{
    const struct strategy *s = rq->strategy;
    size_t i = strategy_index(s);
    if (!out->replayed) /* a replay tells of the stock when its key first came, not now */
        admission_answered(ticket, r, rq->qty, out->remaining);
    if (r == ST_OK || r == ST_SOLD_OUT || r == ST_BUSY)
        sale_json(reply, rq, out);
    if (out->replayed) /* the HTTP layer makes it the Idempotent-Replayed header */
        json_object_set_new(reply, "replayed", json_true());
    if (rq->key[0])
        keys_running_end(rq->key);
    if (rq->trace) {
        trace_mark(rq->trace, TRACE_ANSWER);
        json_object_set_new(reply, "trace",
                            trace_json(rq->trace, out->attempts, out->fence, out->batch));
    }
    count_answer(s, r, arrived_us);
    if (s->lock && out->attempts > 0)
        metrics_lock(i, out->lock_wait_us, out->lock_lost);
    if (s->contention == CONTENTION_RETRIES)
        metrics_attempts(i, out->attempts);
}

/* A sale its strategy answers later: all its answer needs, kept until then. */
struct later_sale {
    struct later base; /* what the strategy answers */
    struct deduct_request rq;
    struct deduct_reply out;
    struct admission_ticket ticket;
    struct sale_trace trace; /* rq.trace points here when one was asked for */
    json_t *reply;
    struct later *http; /* the request's, which sends the reply */
    long long arrived_us;
};

static void answer_later_sale(struct later *later, st_result r, const char *message)
{
    struct later_sale *ls = CONTAINER_OF(later, struct later_sale, base);
    sale_answered(&ls->rq, &ls->out, &ls->ticket, r, ls->reply, ls->arrived_us);
    ls->http->answer(ls->http, r, message);
    free(ls);
}

static void hand_off_later_sale(struct later *later)
{
    struct later_sale *ls = CONTAINER_OF(later, struct later_sale, base);
    ls->http->hand_off(ls->http);
}

/* Hands the sale to a strategy that answers later, with everything its
 * answer will need: the request is then answered through req->later. */
static st_result sell_later(struct worker *w, const struct deduct_request *rq,
                            const struct admission_ticket *ticket, const struct http_request *req,
                            json_t *reply)
{
    struct later_sale *ls = calloc(1, sizeof *ls);
    if (!ls) {
        if (rq->key[0])
            keys_running_end(rq->key); /* never answered: sale_answered() will not end it */
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "out of memory");
    }
    *ls =
        (struct later_sale){.base = {.answer = answer_later_sale, .hand_off = hand_off_later_sale},
                            .rq = *rq,
                            .out = {.remaining = REMAINING_UNKNOWN},
                            .ticket = *ticket,
                            .reply = reply,
                            .http = req->later,
                            .arrived_us = req->arrived_us};
    ls->rq.later = &ls->base;
    w->answers_later = 1;
    if (rq->trace) {
        ls->trace = *rq->trace;
        ls->rq.trace = &ls->trace;
    }
    strategy_run(rq->strategy, w, &ls->rq, &ls->out); /* answers through ls->base */
    return ST_OK;
}

/* A refusal by the sold-out flag: what it adds to the reply, and why. */
static st_result flag_refusal(struct worker *w, int product, json_t *reply)
{
    json_object_set_new(reply, "sold_out_flag", json_true());
    return worker_fail(w, ST_SOLD_OUT, "product %d was seen sold out here, and not reset since",
                       product);
}

/* Admission (admission.h), before any backend: ST_OK, or its refusal
 * with what the reply says of it. */
static st_result admitted(struct worker *w, const struct strategy *s,
                          const struct deduct_request *rq, json_t *reply,
                          struct admission_ticket *ticket)
{
    long long retry_after_s = 0;
    st_result r = admission_check(strategy_index(s), rq->product, rq->qty, ticket, &retry_after_s);
    if (r == ST_THROTTLED) {
        json_object_set_new(reply, "retry_after", json_integer(retry_after_s));
        return worker_fail(w, r, "over --admit-rate for product %d; retry in %lld s", rq->product,
                           retry_after_s);
    }
    if (r == ST_SOLD_OUT)
        return flag_refusal(w, rq->product, reply);
    return r;
}

/* Its key marked running (keys_running.h), then admission: ST_OK, or the
 * refusal of either, with its key running no more. */
static st_result admitted_running(struct worker *w, const struct strategy *s,
                                  const struct deduct_request *rq, json_t *reply,
                                  struct admission_ticket *ticket)
{
    st_result r = rq->key[0] ? keys_running_begin(w, rq->key) : ST_OK;
    if (r != ST_OK)
        return r;
    r = admitted(w, s, rq, reply, ticket);
    if (r != ST_OK && rq->key[0])
        keys_running_end(rq->key); /* refused before it ran: nothing to keep */
    return r;
}

/* Sells on this worker, the sale admitted: answered and counted. */
static st_result sell_now(struct worker *w, const struct deduct_request *rq,
                          const struct admission_ticket *ticket, const struct http_request *req,
                          json_t *reply, struct deduct_reply *out)
{
    st_result r = strategy_run(rq->strategy, w, rq, out);
    sale_answered(rq, out, ticket, r, reply, req->arrived_us);
    return r;
}

st_result api_deduct(struct worker *w, const struct http_request *req, json_t *reply)
{
    const char *name = strategy_name(req->path);
    const struct strategy *s = strategy_find(name);
    if (!s)
        return worker_fail(w, ST_UNKNOWN_STRATEGY, "no strategy named '%.40s'; see /strategies",
                           name);
    json_object_set_new(reply, "strategy", json_string(s->name));
    struct deduct_request rq;
    struct deduct_reply out = {.remaining = REMAINING_UNKNOWN};
    struct sale_trace trace;
    struct admission_ticket ticket;
    st_result r = sale_asked(w, s, req, reply, &rq, &trace);
    if (r == ST_OK)
        r = admitted_running(w, s, &rq, reply, &ticket);
    if (r != ST_OK) {
        count_answer(s, r, req->arrived_us);
        return r;
    }
    if (s->answers_later)
        return sell_later(w, &rq, &ticket, req, reply);
    return sell_now(w, &rq, &ticket, req, reply, &out);
}

st_result api_sell(struct worker *w, const struct deduct_request *rq,
                   const struct http_request *req, json_t *reply, struct deduct_reply *out)
{
    struct admission_ticket ticket;
    st_result r = needs_configured(w, rq->strategy);
    if (r == ST_OK)
        r = admitted_running(w, rq->strategy, rq, reply, &ticket);
    if (r != ST_OK) {
        count_answer(rq->strategy, r, req->arrived_us);
        return r;
    }
    products_watch(rq->product);
    return sell_now(w, rq, &ticket, req, reply, out);
}

int api_deduct_on_arrival(struct worker *w, const struct http_request *req, json_t *reply)
{
    const struct strategy *s = strategy_find(strategy_name(req->path));
    if (!s || !s->answers_later)
        return 0; /* its strategy holds a worker: admission runs there, in api_deduct() */
    json_object_set_new(reply, "strategy", json_string(s->name));
    struct deduct_request rq;
    struct sale_trace trace;
    if (sale_asked(w, s, req, reply, &rq, &trace) != ST_OK)
        return 0; /* the worker answers the error, and counts it */
    if ((rq.hold_ms || rq.pause_ms) && !s->hold_per_batch)
        return 0; /* the sale itself waits: not on this thread */
    if (rq.key[0] && s->keeps_key != KEEPS_KEY_IN_SCRIPT)
        return 0; /* its store looks the key up first: not on this thread */
    if (rq.key[0] && keys_running_begin(w, rq.key) != ST_OK)
        return 0; /* the worker answers in_progress */
    /* Admission is lock-free (admission.c), so it runs here too: a refusal
     * from memory - the flash sale's commonest answer - is answered on the
     * spot like GET /strategies, never crossing to the worker pool. */
    struct admission_ticket ticket;
    st_result r = admitted(w, s, &rq, reply, &ticket);
    if (r == ST_OK)
        r = sell_later(w, &rq, &ticket, req, reply);
    else {
        if (rq.key[0])
            keys_running_end(rq.key); /* refused before it ran: nothing to keep */
        count_answer(s, r, req->arrived_us);
    }
    if (r != ST_OK) /* answered here: on a worker, admission would run twice */
        req->later->answer(req->later, r, w->error);
    return 1;
}

int api_deduct_flagged(struct worker *w, const struct http_request *req, struct flag_refusal *out)
{
    out->ticket.slot = -1;
    if (!config.sold_out_flag || req->idempotency_key)
        return 0; /* a key's refusal is the key's: keys_running.h */
    const struct strategy *s = strategy_find(strategy_name(req->path));
    if (!s || !s->answers_later)
        return 0; /* its strategy holds a worker: admission runs there, in api_deduct() */
    /* Parsed once: the request keeps the values (params.h) for
     * api_deduct_on_arrival() and the worker, when the flag lets it by. */
    long long v[DEDUCT_PARAMS];
    if (params_parse(w, req, deduct_params, DEDUCT_PARAMS, v) != ST_OK ||
        needs_configured(w, s) != ST_OK)
        return 0; /* the worker answers the error */
    if (v[DEDUCT_HOLD_MS] || v[DEDUCT_PAUSE_MS] || v[DEDUCT_TRACE])
        return 0; /* a hold, a pause or a trace asked for: api_deduct_on_arrival() sees to it */
    *out = (struct flag_refusal){.strategy = strategy_index(s),
                                 .product = (int)v[DEDUCT_PRODUCT],
                                 .qty = (int)v[DEDUCT_QTY]};
    return admission_flag_refuses(out->product, out->qty, &out->ticket);
}

st_result api_deduct_flag_reply(struct worker *w, const struct flag_refusal *f, json_t *reply)
{
    json_object_set_new(reply, "strategy", json_string(strategy_at(f->strategy)->name));
    sale_named(reply, f->product, f->qty);
    return flag_refusal(w, f->product, reply);
}

void api_deduct_flag_answered(const struct flag_refusal *f, const struct http_request *req)
{
    admission_flag_answered(f->strategy);
    count_answer(strategy_at(f->strategy), ST_SOLD_OUT, req->arrived_us);
    products_watch(f->product);
}
