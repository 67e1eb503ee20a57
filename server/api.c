/*
 * api.c - the contract's endpoints.
 */
#include "api.h"

#include "config.h"
#include "log.h"
#include "mysql_store.h"
#include "redis_store.h"
#include "redlock.h"
#include "stock.h"
#include "strategy.h"
#include "worker.h"
#include "zk_store.h"

#include <string.h>

#define DEFAULT_PRODUCT 1001
#define PRODUCT_MAX 2147483647LL

static st_result ping_redis(struct worker *w)
{
    return redis_link_ping(w, &w->redis);
}

/* One health probe per backend stockd can need. */
static const struct backend {
    const char *name;
    st_result (*ping)(struct worker *w);
    /* Optional: adds details to the backend's state; 0 when the backend is
     * not configured, and then it is left out. */
    int (*describe)(json_t *state);
} backends[] = {
    {"mysql", mysql_store_ping, NULL},
    {"redis", ping_redis, NULL},
    {"redlock", redlock_ping, redlock_describe},
    {"zookeeper", zk_store_ping, zk_store_describe},
};

st_result api_health(struct worker *w, const struct http_request *req, json_t *reply)
{
    (void)req;
    json_t *states = json_object();
    st_result worst = ST_OK;
    char down[256] = "";
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        json_t *details = json_object();
        if (backends[i].describe && !backends[i].describe(details)) {
            json_decref(details);
            continue;
        }
        st_result r = backends[i].ping(w);
        json_t *state = json_pack("{s:s}", "state", r == ST_OK ? "up" : "down");
        json_object_update_new(state, details);
        if (r != ST_OK) {
            json_object_set_new(state, "message", json_string(w->error));
            size_t len = strlen(down);
            snprintf(down + len, sizeof down - len, "%s%s", len ? ", " : "", backends[i].name);
            worst = ST_BACKEND_UNAVAILABLE;
        }
        json_object_set_new(states, backends[i].name, state);
    }
    json_object_set_new(reply, "backends", states);
    if (worst != ST_OK)
        return worker_fail(w, worst, "down: %s", down);
    return ST_OK;
}

static json_t *strategy_json(const struct strategy *s)
{
    json_t *o = json_pack("{s:s, s:s, s:b, s:b, s:s}", "name", s->name, "store",
                          store_name(s->store), "safe_single", s->safe_single, "safe_multi",
                          s->safe_multi, "summary", s->summary);
    if (s->caveat)
        json_object_set_new(o, "caveat", json_string(s->caveat));
    return o;
}

st_result api_strategies(struct worker *w, const struct http_request *req, json_t *reply)
{
    (void)w, (void)req;
    json_t *list = json_array();
    for (size_t i = 0; i < strategy_count(); i++)
        json_array_append_new(list, strategy_json(strategy_at(i)));
    json_object_set_new(reply, "strategies", list);
    json_object_set_new(reply, "settings",
                        json_pack("{s:i, s:i, s:i, s:i, s:i}", "optimistic_attempts",
                                  config.optimistic_attempts, "lock_ttl_ms", config.lock_ttl_ms,
                                  "lock_wait_ms", config.lock_wait_ms, "threads", config.threads,
                                  "workers", config.workers));
    return ST_OK;
}

st_result api_reset(struct worker *w, const struct http_request *req, json_t *reply)
{
    static const struct param_spec specs[] = {
        {"product", 1, PRODUCT_MAX, DEFAULT_PRODUCT},
        {"count", 0, 1000000000, PARAM_REQUIRED},
    };
    long long v[2];
    st_result r = params_parse(w, req, specs, 2, v);
    if (r != ST_OK)
        return r;
    json_object_set_new(reply, "product", json_integer(v[0]));
    json_object_set_new(reply, "count", json_integer(v[1]));
    r = stock_reset(w, (int)v[0], v[1]);
    if (r == ST_OK)
        log_info("reset product %lld to %lld", v[0], v[1]);
    return r;
}

st_result api_stock(struct worker *w, const struct http_request *req, json_t *reply)
{
    long long product;
    const char *id = req->path + strlen("/stock/");
    if (parse_bounded_int(id, 1, PRODUCT_MAX, &product) != 0)
        return worker_fail(w, ST_BAD_REQUEST, "product in the path must be an integer 1..%lld",
                           PRODUCT_MAX);
    static const struct param_spec none[] = {{"", 0, 0, 0}};
    long long unused;
    st_result r = params_parse(w, req, none, 0, &unused);
    if (r != ST_OK)
        return r;
    struct store_account mysql, redis;
    r = mysql_account(w, (int)product, &mysql);
    if (r == ST_OK)
        r = redis_account(w, (int)product, &redis);
    if (r != ST_OK)
        return r;
    if (!mysql.present && !redis.present)
        return worker_fail(w, ST_UNKNOWN_PRODUCT, "product %lld is in no store", product);
    json_object_set_new(reply, "product", json_integer(product));
    json_object_set_new(reply, "initial",
                        json_integer(mysql.present ? mysql.initial : redis.initial));
    json_object_set_new(reply, "mysql", account_json(&mysql));
    json_object_set_new(reply, "redis", account_json(&redis));
    return ST_OK;
}

static json_t *sale_json(const struct deduct_request *rq, const struct deduct_reply *out)
{
    json_t *o = json_pack("{s:i}", "attempts", out->attempts);
    if (out->remaining != REMAINING_UNKNOWN)
        json_object_set_new(o, "remaining", json_integer(out->remaining));
    if (out->fence)
        json_object_set_new(o, "fence", json_integer(out->fence));
    if (out->lock_lost)
        json_object_set_new(o, "lock_lost", json_true());
    if (rq->hold_ms)
        json_object_set_new(o, "hold_ms", json_integer(rq->hold_ms));
    return o;
}

st_result api_deduct(struct worker *w, const struct http_request *req, json_t *reply)
{
    const char *name = req->path + strlen("/stock/deduct");
    name += *name == '/';
    const struct strategy *s = strategy_find(name);
    if (!s)
        return worker_fail(w, ST_UNKNOWN_STRATEGY, "no strategy named '%.40s'; see /strategies",
                           name);
    static const struct param_spec specs[] = {
        {"product", 1, PRODUCT_MAX, DEFAULT_PRODUCT},
        {"qty", 1, 1000, 1},
        {"hold_ms", 0, 1000, 0},
        {"ttl_ms", 0, 600000, 0}, /* 0: the server's lock_ttl_ms */
        {"pause_ms", 0, 1000, 0},
    };
    long long v[5];
    json_object_set_new(reply, "strategy", json_string(s->name));
    st_result r = params_parse(w, req, specs, 5, v);
    if (r != ST_OK)
        return r;
    struct deduct_request rq = {
        .strategy = s,
        .product = (int)v[0],
        .qty = (int)v[1],
        .hold_ms = (int)v[2],
        .ttl_ms = v[3] ? (int)v[3] : config.lock_ttl_ms,
        .pause_ms = (int)v[4],
    };
    json_object_set_new(reply, "product", json_integer(rq.product));
    json_object_set_new(reply, "qty", json_integer(rq.qty));
    struct deduct_reply out = {.remaining = REMAINING_UNKNOWN};
    r = strategy_run(s, w, &rq, &out);
    if (r == ST_OK || r == ST_SOLD_OUT || r == ST_BUSY)
        json_object_update_new(reply, sale_json(&rq, &out));
    return r;
}
