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
static order_give_back_batch_fn giving_back_batch;

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
    size_t n = json_array_size(ids);
    st_result first = ST_OK;
    *returned = 0;
    /* From a random place in the list, round: instances sweeping at once
     * mostly take different orders, and find the others' already returned
     * (one read) rather than queue behind the same stock write to lose its
     * claim. An order that cannot be returned now (its strategy's lock
     * backend down) stays held for the next round, and holds up none of
     * the rest. */
    size_t start = n ? (size_t)worker_random(w, (int)n) : 0;
    for (size_t k = 0; k < n; k++) {
        const json_t *id = json_array_get(ids, (start + k) % n);
        int one;
        st_result r =
            expiry_return_one(w, e, json_is_string(id) ? json_string_value(id) : "", &one);
        first = first == ST_OK ? r : first;
        *returned += r == ST_OK ? one : 0;
    }
    return first;
}

/* The most due orders one sweep reads (SQL_SWEEP_DUE's LIMIT). */
#define DUE_MAX 100

/* Whether due order `d` is of `head`'s product and strategy. */
static int same_batch(const json_t *d, const json_t *head)
{
    return json_integer_value(json_object_get(d, "p")) ==
               json_integer_value(json_object_get(head, "p")) &&
           json_equal(json_object_get(d, "s"), json_object_get(head, "s"));
}

st_result expiry_return_batches(struct worker *w, const struct expiry *e, json_t *due,
                                int *returned)
{
    assert(giving_back_batch); /* no mechanism runs before expiry_start() */
    size_t n = json_array_size(due);
    char taken[DUE_MAX] = {0};
    struct order_ref refs[DUE_MAX];
    st_result first = ST_OK;
    *returned = 0;
    if (n > DUE_MAX)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "%s: more due orders than a sweep takes",
                           e->name);
    /* From a random batch on, as expiry_return_each() does, and for the
     * same reason. */
    size_t start = n ? (size_t)worker_random(w, (int)n) : 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (start + k) % n;
        if (taken[i])
            continue;
        const json_t *head = json_array_get(due, i);
        struct return_batch b = {.orders = refs,
                                 .strategy = json_string_value(json_object_get(head, "s"))};
        for (size_t m = k; m < n; m++) { /* from i, the head, on */
            size_t j = (start + m) % n;
            const json_t *d = json_array_get(due, j);
            const char *id = json_string_value(json_object_get(d, "o"));
            if (taken[j] || !same_batch(d, head) || !id || order_id_parse(id, &refs[b.count]))
                continue;
            taken[j] = 1;
            b.qty += json_integer_value(json_object_get(d, "q"));
            b.count++;
        }
        if (!b.count || !b.strategy)
            continue;
        int done = 0;
        st_result r = giving_back_batch(w, &b, "expired", e->name, &done);
        first = first == ST_OK ? r : first;
        *returned += r == ST_OK ? done : 0;
    }
    return first;
}

int expiry_start(order_give_back_fn give_back, order_give_back_batch_fn give_back_batch)
{
    giving_back = give_back;
    giving_back_batch = give_back_batch;
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
