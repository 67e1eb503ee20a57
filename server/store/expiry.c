/*
 * expiry.c - the table of expiry mechanisms, and their threads.
 *
 * A sweeper (a row with `sweep`) runs on a thread of its own that sweeps,
 * then pauses --sweep-ms; a listener (`listen`) gets a thread to itself.
 * Each thread has a worker of its own, so its connections are its own and
 * a backend that comes back is used again, as a request's would be. A
 * failed round is logged at most every few seconds and tried again on the
 * next: the orders it did not return stay held, and stay claimable.
 */
#include "store/expiry.h"

#include "backend/backend.h"
#include "core/background.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"
#include "store/orders.h"

#include <assert.h>
#include <string.h>

extern const struct expiry expiry_mysql_sweeper, expiry_redis_zset, expiry_redis_keyspace;

/* In the order GET /expiry lists them; each store's first is its default. */
static const struct expiry *const mechanisms[] = {&expiry_mysql_sweeper, &expiry_redis_zset,
                                                  &expiry_redis_keyspace};

#define MECHANISM_COUNT (sizeof mechanisms / sizeof mechanisms[0])

static struct background expiring = BACKGROUND_INIT;

/* How a mechanism gives an order back: through its strategy (returns.h
 * above the stores), handed over at the start. */
static order_give_back_fn giving_back;

/* A failed round's warning, at most this often per mechanism. */
#define WARN_EVERY_MS 5000

const struct expiry *expiry_find(const char *name)
{
    for (size_t i = 0; i < MECHANISM_COUNT; i++)
        if (strcmp(mechanisms[i]->name, name) == 0)
            return mechanisms[i];
    return NULL;
}

const struct expiry *expiry_default(const struct store *store)
{
    for (size_t i = 0; i < MECHANISM_COUNT; i++)
        if (mechanisms[i]->store == store)
            return mechanisms[i];
    return NULL;
}

long long expiry_lag_ms(const struct expiry *e)
{
    return e->promises_lag ? sweep_lag_ms() : -1;
}

json_t *expiry_json(void)
{
    json_t *list = json_array();
    for (size_t i = 0; i < MECHANISM_COUNT; i++) {
        const struct expiry *e = mechanisms[i];
        long long lag = expiry_lag_ms(e);
        json_array_append_new(
            list,
            json_pack("{s:s, s:s, s:s, s:o, s:o, s:b}", "name", e->name, "store", e->store->name,
                      "summary", e->summary, "lag_ms", lag < 0 ? json_null() : json_integer(lag),
                      "strands_when", e->strands_when ? json_string(e->strands_when) : json_null(),
                      "default", expiry_default(e->store) == e));
    }
    return list;
}

int expiry_running(void)
{
    return !background_stopping(&expiring);
}

int expiry_pause(long long ms)
{
    return background_pause(&expiring, ms);
}

/* One mechanism's thread, with its worker. */
struct expiry_thread {
    const struct expiry *e;
    struct worker *w;
};
static struct expiry_thread threads[sizeof mechanisms / sizeof mechanisms[0]];

static void sweep_rounds(struct expiry_thread *t)
{
    long long warned_ms = 0;
    while (background_pause(&expiring, config.sweep_ms)) {
        int returned = 0;
        st_result r = t->e->sweep(t->w, t->e, &returned);
        if (r == ST_OK)
            continue;
        if (monotonic_ms() - warned_ms > WARN_EVERY_MS) {
            log_warn("%s: %s (its held orders wait for the next round)", t->e->name, t->w->error);
            warned_ms = monotonic_ms();
        }
        backends_drop_dead_links(t->w);
    }
}

static void *run(void *arg)
{
    struct expiry_thread *t = arg;
    if (t->e->sweep)
        sweep_rounds(t);
    else
        t->e->listen(t->w, t->e);
    backends_close(t->w);
    worker_free(t->w);
    return NULL;
}

st_result expiry_return_one(struct worker *w, const struct expiry *e, const char *id, int *returned)
{
    assert(giving_back); /* no mechanism runs before expiry_start() */
    struct order_ref o;
    *returned = 0;
    if (order_id_parse(id, &o) != 0)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "%s: a due order's id is malformed: %.48s",
                           e->name, id);
    return giving_back(w, &o, "expired", e->name, 0, returned);
}

st_result expiry_return_each(struct worker *w, const struct expiry *e, json_t *ids, int *returned)
{
    size_t i;
    json_t *id;
    *returned = 0;
    json_array_foreach(ids, i, id)
    {
        int one;
        st_result r =
            expiry_return_one(w, e, json_is_string(id) ? json_string_value(id) : "", &one);
        if (r != ST_OK)
            return r;
        *returned += one;
    }
    return ST_OK;
}

int expiry_start(order_give_back_fn give_back)
{
    giving_back = give_back;
    if (!config.sweep_ms)
        return 0;
    for (size_t i = 0; i < MECHANISM_COUNT; i++) {
        const struct expiry *e = mechanisms[i];
        assert(!e->sweep != !e->listen); /* one way to run, of the two */
        if (!backend_configured(e->store->backend))
            continue;
        threads[i] = (struct expiry_thread){.e = e, .w = worker_new()};
        char what[64];
        snprintf(what, sizeof what, "the expiry mechanism %s", e->name);
        if (background_start(&expiring, what, run, &threads[i]) != 0) {
            worker_free(threads[i].w);
            return -1;
        }
        if (e->sweep)
            log_info("%s returns expired holds (every %d ms)", e->name, config.sweep_ms);
        else
            log_info("%s returns expired holds on Redis's expired events", e->name);
    }
    return 0;
}

void expiry_stop(void)
{
    background_stop(&expiring);
}
