/*
 * api.h - the endpoints, one handler each, of two kinds.
 *
 * Most endpoints need a backend: their handler runs on a worker (pool.h)
 * with that worker's connections. It fills `reply` (a JSON object the HTTP
 * layer created) and returns a result: on ST_OK the HTTP layer adds
 * "ok":true; otherwise "ok":false, the contract's error word and the
 * worker's message, with the status the result maps to. So a handler never
 * builds an error document itself, and the fields it put in `reply`
 * (strategy, product, qty...) stay in it.
 *
 * Introspection endpoints (/strategies, /health, /ping, /metrics, the lab
 * page) never wait for anything: they are answered on the HTTP thread
 * itself, from bytes built once or from state other threads keep up to
 * date, so they answer at once however busy the workers are.
 */
#ifndef STOCKD_API_H
#define STOCKD_API_H

#include "api/admission.h"
#include "api/params.h"
#include "core/result.h"

#include <jansson.h>
#include <stddef.h>

struct worker;
struct deduct_request;
struct deduct_reply;

typedef st_result (*handler_fn)(struct worker *w, const struct http_request *req, json_t *reply);

/*
 * A handler that lets its request wait without holding a thread (a sale
 * that joins a queue or a loop's Redis pipe, a race) answers it after it
 * has returned, from any thread: it sets w->answers_later, keeps the reply
 * document it was given, and answers exactly once through req->later
 * (later.h) - possibly before it has even returned. What it returns is then
 * not read. A layer that lets another thread answer calls
 * req->later->hand_off() first, before that thread can reach the request:
 * an HTTP loop holds a request it took on arrival as its own, and lets go
 * of it there.
 */

/* Tried on the HTTP thread, before a worker, for a route that names one
 * (router.h), with a worker that must not block: 1 when it took the
 * request (it then answers through req->later), 0 to leave it to a worker,
 * which goes on with the reply document it began. */
typedef int (*arrival_fn)(struct worker *w, const struct http_request *req, json_t *reply);

/* What an endpoint answered on the HTTP thread sends back. */
struct page {
    unsigned status;
    const char *content_type;
    const char *body; /* lives as long as the server, or is `owned` */
    size_t len;
    char *owned; /* malloc'ed body for the HTTP layer to free, or NULL */
};

typedef void (*page_fn)(const struct http_request *req, struct page *out);

/* On a worker. */
st_result api_reset(struct worker *w, const struct http_request *req, json_t *reply);

/* A request for a worker that was answered `r` without its handler (a full
 * queue, a stop, a deadline passed in the queue): counted like the others. */
void api_refused(const struct http_request *req, st_result r);
st_result api_stock(struct worker *w, const struct http_request *req, json_t *reply);

/* On a worker; a sale whose strategy answers later is answered through
 * req->later. */
st_result api_deduct(struct worker *w, const struct http_request *req, json_t *reply);

/* On the HTTP thread first: takes a sale that only has to join a queue
 * (combine.h) or the loop's Redis pipe, and answers there its refusal by
 * admission (admission.h); anything else, errors included, is left to the
 * worker, which runs api_deduct() (and answers its errors). */
int api_deduct_on_arrival(struct worker *w, const struct http_request *req, json_t *reply);

/*
 * A deduct the sold-out flag refuses from memory, found before any reply
 * is begun: the HTTP layer answers it from bytes it built once per flag
 * (http/refusals.h), where a refusal built for each request cost more than
 * the fastest fixed answer a web server gives (docs/bench.md).
 */
struct flag_refusal {
    struct admission_ticket ticket; /* the product's slot and flag generation */
    size_t strategy;                /* its index in the strategy table        */
    int product, qty;
};

/* On the HTTP thread, before api_deduct_on_arrival(): 1 when the flag
 * refuses this deduct now, as api_deduct_on_arrival() would, *out saying
 * which; 0 otherwise (out->ticket.slot still names the product's slot,
 * or -1), with nothing counted or moved: the request goes on its way,
 * with the parameters parsed here kept in it (req->parsed) for the steps
 * that follow. */
int api_deduct_flagged(struct worker *w, const struct http_request *req, struct flag_refusal *out);

/* The reply document of that refusal, member for member what
 * api_deduct_on_arrival() builds for it (its message in w->error):
 * ST_SOLD_OUT. */
st_result api_deduct_flag_reply(struct worker *w, const struct flag_refusal *f, json_t *reply);

/* Counts that refusal, answered, as api_deduct_on_arrival() counts its own. */
void api_deduct_flag_answered(const struct flag_refusal *f, const struct http_request *req);

/* On a worker: sells `rq` (its strategy set, a row that answers at once)
 * as a deduct does - its backends checked, admission, the strategy, what
 * the sale saw in `reply`, counted - for another endpoint (a hold). */
st_result api_sell(struct worker *w, const struct deduct_request *rq,
                   const struct http_request *req, json_t *reply, struct deduct_reply *out);
extern const struct param_table api_deduct_params;

/* On the HTTP thread. */
void api_strategies(const struct http_request *req, struct page *out);
void api_health(const struct http_request *req, struct page *out);
void api_ping(const struct http_request *req, struct page *out);
void api_metrics(const struct http_request *req, struct page *out);
void api_asset(const struct http_request *req, struct page *out);
void api_lab_state(const struct http_request *req, struct page *out);

/* Builds what the HTTP-thread endpoints serve from memory (the
 * /strategies document); 0 on success. Called once before listening. */
int api_prepare(void);
void api_release(void);

/* Fills `out` with a JSON document (owned), as pages answer. */
void page_json(struct page *out, unsigned status, json_t *doc);

#endif
