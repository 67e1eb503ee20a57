/*
 * race.c - the race driver: a run of buyers that stockd fires at itself.
 *
 * A class projecting the lab page presses a button and wants to see the
 * race, not a total: twelve buyers on six units, each sale's trace drawn
 * on one time axis. The page cannot fire twelve requests at once with any
 * reliability, and a course has no JMeter on the projector, so stockd
 * drives the run itself.
 *
 * The handler checks the run (the strategy by name, buyers, units and the
 * knobs within bounds), claims the one run allowed at a time (409 busy:
 * two runs on one product would mix their sales), resets the product to
 * `units` on its worker, then hands the request to a runner thread and
 * lets the worker go - the buyers' own deducts need the workers. The
 * runner fires every buyer at once as a real HTTP request to stockd's own
 * port (libcurl multi, one connection each, trace=1), so each sale passes
 * the same parsing, guards, queues and strategy as any client's; it notes
 * when each was sent and answered on the monotonic clock the traces use,
 * reads the ledger with GET /stock/{product}, and answers with the whole
 * history. While stockd stops the HTTP layer refuses new runs (503), and
 * the run in flight ends quickly: its buyers are refused too.
 *
 * Bounds keep a run small and short: at most RACE_BUYERS_MAX buyers,
 * buyers x (hold_ms + pause_ms) within RACE_WAIT_MAX_MS, and each buyer
 * given up (recorded as never answered) past its request deadline.
 */
#include "api/race.h"

#include "api/products.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"
#include "sale/stock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A traced reply is a few hundred bytes; more is not a deduct's reply. */
#define BUYER_REPLY_MAX 4096

struct buyer {
    CURL *easy;
    char reply[BUYER_REPLY_MAX];
    size_t len;
    int too_long;
    long long invoke_us, complete_us; /* complete_us 0: never answered */
    long status;
    CURLcode done;
};

struct run {
    const struct strategy *s;
    long long product, buyers, units, qty, hold_ms, ttl_ms, pause_ms;
    char base[300]; /* http://host:port of this stockd */
    json_t *reply;
    struct later *later;
    struct buyer buyer[RACE_BUYERS_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Guarded by `lock`: */
static int running;  /* a run is claimed and not answered yet */
static int joinable; /* `runner` has not been joined          */
static pthread_t runner;

static size_t keep_reply(char *data, size_t size, size_t n, void *cls)
{
    struct buyer *b = cls;
    size_t len = size * n;
    if (b->len + len > sizeof b->reply - 1) {
        b->too_long = 1;
        return 0; /* ends the transfer: libcurl reports a write error */
    }
    memcpy(b->reply + b->len, data, len);
    b->len += len;
    return len;
}

/* Each buyer's handle: one POST of a traced deduct, on a connection of
 * its own, given up past the deadline stockd itself would give it. */
static int buyer_ready(struct run *run, struct buyer *b, const char *url)
{
    b->easy = curl_easy_init();
    if (!b->easy)
        return -1;
    long timeout = config.request_timeout_ms + run->hold_ms + run->pause_ms + 1000;
    curl_easy_setopt(b->easy, CURLOPT_URL, url);
    curl_easy_setopt(b->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(b->easy, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(b->easy, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(b->easy, CURLOPT_WRITEFUNCTION, keep_reply);
    curl_easy_setopt(b->easy, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(b->easy, CURLOPT_PRIVATE, b);
    curl_easy_setopt(b->easy, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(b->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(b->easy, CURLOPT_FORBID_REUSE, 1L);
    return 0;
}

/* Notes every transfer that has ended since the last call. */
static void collect_done(CURLM *multi)
{
    long long now = monotonic_us();
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct buyer *b;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&b);
        b->done = msg->data.result;
        if (b->done == CURLE_OK) {
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &b->status);
            b->complete_us = now;
        }
    }
}

/* Sends every buyer at once and waits until each has its answer or has
 * been given up. */
static void fire(struct run *run, CURLM *multi)
{
    char url[512];
    snprintf(url, sizeof url,
             "%s/stock/deduct/%s?product=%lld&qty=%lld&hold_ms=%lld&ttl_ms=%lld&pause_ms=%lld"
             "&trace=1",
             run->base, run->s->name, run->product, run->qty, run->hold_ms, run->ttl_ms,
             run->pause_ms);
    for (long long i = 0; i < run->buyers; i++) {
        struct buyer *b = &run->buyer[i];
        if (buyer_ready(run, b, url) != 0) {
            b->done = CURLE_OUT_OF_MEMORY;
            continue;
        }
        b->invoke_us = monotonic_us();
        curl_multi_add_handle(multi, b->easy);
    }
    int active = 1;
    while (active) {
        if (curl_multi_perform(multi, &active) != CURLM_OK)
            break;
        collect_done(multi);
        if (active)
            curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
}

/* One buyer's line of the history: what it sent, when, and what came back. */
static json_t *history_entry(const struct run *run, long long id, const struct buyer *b)
{
    json_t *got = b->complete_us ? json_loadb(b->reply, b->len, 0, NULL) : NULL;
    json_t *e =
        json_pack("{s:I, s:I, s:I, s:i}", "id", (json_int_t)id, "invoke_us",
                  (json_int_t)b->invoke_us, "qty", (json_int_t)run->qty, "status", (int)b->status);
    json_object_set_new(e, "complete_us",
                        b->complete_us ? json_integer(b->complete_us) : json_null());
    json_t *error = json_object_get(got, "error");
    if (!b->complete_us)
        json_object_set_new(e, "error",
                            json_sprintf("no_answer: %s", b->too_long
                                                              ? "reply too long"
                                                              : curl_easy_strerror(b->done)));
    else
        json_object_set_new(e, "error", error ? json_incref(error) : json_null());
    json_t *remaining = json_object_get(got, "remaining");
    if (remaining)
        json_object_set(e, "remaining", remaining);
    json_t *trace = json_object_get(got, "trace");
    if (trace)
        json_object_set(e, "trace", trace);
    json_decref(got);
    return e;
}

/* The strategy's store's figures from GET /stock/{product}, or null. */
static json_t *ledger(const struct run *run)
{
    char url[384];
    snprintf(url, sizeof url, "%s/stock/%lld", run->base, run->product);
    struct buyer *page = calloc(1, sizeof *page);
    CURL *easy = page ? curl_easy_init() : NULL;
    json_t *figures = NULL;
    if (easy) {
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, keep_reply);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, page);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)config.request_timeout_ms);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        if (curl_easy_perform(easy) == CURLE_OK) {
            json_t *doc = json_loadb(page->reply, page->len, 0, NULL);
            figures = json_incref(json_object_get(doc, run->s->store->name));
            json_decref(doc);
        }
        curl_easy_cleanup(easy);
    }
    free(page);
    return figures ? figures : json_null();
}

static void *run_race(void *cls)
{
    struct run *run = cls;
    CURLM *multi = curl_multi_init();
    if (multi)
        fire(run, multi);
    json_t *history = json_array();
    for (long long i = 0; i < run->buyers; i++) {
        struct buyer *b = &run->buyer[i];
        json_array_append_new(history, history_entry(run, i, b));
        if (b->easy) {
            curl_multi_remove_handle(multi, b->easy);
            curl_easy_cleanup(b->easy);
        }
    }
    curl_multi_cleanup(multi);
    json_object_set_new(run->reply, "history", history);
    json_object_set_new(run->reply, "ledger", ledger(run));
    log_info("race: %lld buyers of %s on product %lld ran", run->buyers, run->s->name,
             run->product);

    pthread_mutex_lock(&lock);
    running = 0;
    pthread_mutex_unlock(&lock);
    st_result r = multi ? ST_OK : ST_BACKEND_UNAVAILABLE;
    run->later->answer(run->later, r, multi ? NULL : "libcurl: out of memory");
    free(run);
    return NULL;
}

/* A race's parameters besides the strategy, in the order run_asked() reads
 * them: its buyers' sale takes a deduct's bounds. */
static const struct param_spec race_params[] = {
    PARAM_PRODUCT(RACE_PRODUCT),
    {"buyers", 1, RACE_BUYERS_MAX, 12, 0, NULL},
    {"units", 1, RACE_UNITS_MAX, 6, 0, NULL},
    PARAM_QTY,
    PARAM_HOLD_MS,
    PARAM_TTL_MS,
    PARAM_PAUSE_MS,
};
const struct param_table api_race_params = {race_params, COUNT_OF(race_params)};

/* The strategy, by name, out of the body; the rest is numbers for
 * params_parse, which checks them as strictly as a deduct's. */
static st_result run_asked(struct worker *w, const struct http_request *req, struct run *run)
{
    json_error_t error;
    json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(root)) {
        json_decref(root);
        return worker_fail(w, ST_BAD_REQUEST,
                           "the body must be a JSON object naming the strategy, e.g. "
                           "{\"strategy\":\"nolock\",\"buyers\":12,\"units\":6}");
    }
    json_t *name = json_object_get(root, "strategy");
    run->s = json_is_string(name) ? strategy_find(json_string_value(name)) : NULL;
    st_result r = ST_OK;
    if (!json_is_string(name))
        r = worker_fail(w, ST_BAD_REQUEST, "strategy is required: a name from /strategies");
    else if (!run->s)
        r = worker_fail(w, ST_UNKNOWN_STRATEGY, "no strategy named '%.40s'; see /strategies",
                        json_string_value(name));
    json_object_del(root, "strategy");
    char *numbers = r == ST_OK ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (r != ST_OK)
        return r;
    if (!numbers)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "out of memory");
    struct http_request rest = *req;
    rest.body = numbers;
    rest.body_len = strlen(numbers);
    rest.parsed = NULL; /* another body: what the request's parse kept is not this one's */
    long long v[COUNT_OF(race_params)];
    r = params_parse(w, &rest, race_params, COUNT_OF(race_params), v);
    free(numbers);
    if (r != ST_OK)
        return r;
    run->product = v[0], run->buyers = v[1], run->units = v[2], run->qty = v[3];
    run->hold_ms = v[4], run->ttl_ms = v[5], run->pause_ms = v[6];
    if (run->buyers * (run->hold_ms + run->pause_ms) > RACE_WAIT_MAX_MS)
        return worker_fail(w, ST_BAD_REQUEST,
                           "buyers x (hold_ms + pause_ms) must be at most %d ms, not %lld",
                           RACE_WAIT_MAX_MS, run->buyers * (run->hold_ms + run->pause_ms));
    return ST_OK;
}

/* Claims the one run at a time, joining the thread of the last one. */
static st_result claim(struct worker *w)
{
    pthread_mutex_lock(&lock);
    int busy = running;
    if (!busy) {
        running = 1;
        if (joinable)
            pthread_join(runner, NULL);
        joinable = 0;
    }
    pthread_mutex_unlock(&lock);
    return busy ? worker_fail(w, ST_BUSY, "a race is running; one at a time") : ST_OK;
}

static void unclaim(void)
{
    pthread_mutex_lock(&lock);
    running = 0;
    pthread_mutex_unlock(&lock);
}

/* Starts the runner with `run`; on failure the run is the caller's. */
static st_result start_runner(struct worker *w, struct run *run)
{
    pthread_mutex_lock(&lock);
    int rc = pthread_create(&runner, NULL, run_race, run);
    joinable = rc == 0;
    pthread_mutex_unlock(&lock);
    return rc == 0 ? ST_OK
                   : worker_fail(w, ST_BACKEND_UNAVAILABLE, "cannot start the race: error %d", rc);
}

static void describe(const struct run *run, json_t *reply)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "strategy", run->s->name,
                          "product", (json_int_t)run->product, "initial", (json_int_t)run->units,
                          "buyers", (json_int_t)run->buyers, "qty", (json_int_t)run->qty, "hold_ms",
                          (json_int_t)run->hold_ms, "ttl_ms", (json_int_t)run->ttl_ms, "pause_ms",
                          (json_int_t)run->pause_ms);
    json_object_update_new(reply, o);
}

st_result api_race(struct worker *w, const struct http_request *req, json_t *reply)
{
    struct run *run = calloc(1, sizeof *run);
    if (!run)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "out of memory");
    st_result r = run_asked(w, req, run);
    if (r == ST_OK)
        r = claim(w);
    if (r != ST_OK) {
        free(run);
        return r;
    }
    products_watch((int)run->product);
    r = stock_reset(w, (int)run->product, run->units);
    if (r == ST_OK) {
        const char *host = strcmp(config.listen, "0.0.0.0") == 0 ? "127.0.0.1" : config.listen;
        snprintf(run->base, sizeof run->base, "http://%s:%d", host, config.port);
        describe(run, reply);
        run->reply = reply;
        run->later = req->later;
        req->later->hand_off(req->later);
        r = start_runner(w, run);
    }
    if (r != ST_OK) {
        unclaim();
        free(run);
        return r;
    }
    w->answers_later = 1; /* the run's thread answers it: `req` may be gone already */
    return ST_OK;
}

int race_prepare(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        log_error("cannot initialise libcurl");
        return -1;
    }
    return 0;
}

void race_release(void)
{
    pthread_mutex_lock(&lock);
    if (joinable)
        pthread_join(runner, NULL);
    joinable = 0;
    pthread_mutex_unlock(&lock);
    curl_global_cleanup();
}
