/*
 * products.c - the watched products and their sampled accounting.
 */
#include "api/products.h"

#include "core/background.h"
#include "core/worker.h"
#include "sale/stock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* The watched products, most recently added in slot next - 1; 0 = empty. */
static atomic_int watched[PRODUCTS_WATCHED];
static atomic_uint next_slot;

struct sample {
    int product;
    int read; /* every store answered                     */
    long long at_ms;
    struct store_account stores[STORE_COUNT];
};

static struct background sampler = BACKGROUND_INIT;
/* Guarded by `sampler.lock`: */
static struct sample samples[PRODUCTS_WATCHED + 1];
static int sample_count;

void products_watch(int product)
{
    if (product == DEFAULT_PRODUCT)
        return; /* always watched */
    for (int i = 0; i < PRODUCTS_WATCHED; i++)
        if (atomic_load_explicit(&watched[i], memory_order_relaxed) == product)
            return;
    unsigned slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    atomic_store_explicit(&watched[slot % PRODUCTS_WATCHED], product, memory_order_relaxed);
}

/* The products to sample now: the seed product, then the watched ones. */
static int products_now(int out[PRODUCTS_WATCHED + 1])
{
    int n = 0;
    out[n++] = DEFAULT_PRODUCT;
    for (int i = 0; i < PRODUCTS_WATCHED; i++) {
        int p = atomic_load_explicit(&watched[i], memory_order_relaxed);
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= out[k] == p;
        if (p > 0 && !seen)
            out[n++] = p;
    }
    return n;
}

static void sample_one(struct worker *w, int product, struct sample *s)
{
    *s = (struct sample){.product = product, .read = 1, .at_ms = monotonic_ms()};
    for (size_t i = 0; i < STORE_COUNT && s->read; i++)
        s->read = store_at(i)->account(w, product, &s->stores[i]) == ST_OK;
}

static void *sampler_main(void *unused)
{
    (void)unused;
    struct worker *w = worker_new();
    do {
        int products[PRODUCTS_WATCHED + 1];
        struct sample fresh[PRODUCTS_WATCHED + 1];
        int n = products_now(products);
        backends_drop_dead_links(w);
        for (int i = 0; i < n; i++)
            sample_one(w, products[i], &fresh[i]);
        pthread_mutex_lock(&sampler.lock);
        for (int i = 0; i < n; i++) /* keep the last good figures of a store that failed */
            if (fresh[i].read || i >= sample_count || samples[i].product != fresh[i].product)
                samples[i] = fresh[i];
        sample_count = n;
        pthread_mutex_unlock(&sampler.lock);
    } while (background_pause(&sampler, PRODUCTS_PERIOD_MS));
    backends_close(w);
    worker_free(w);
    return NULL;
}

int products_start(void)
{
    return background_start(&sampler, "the products sampler", sampler_main, NULL);
}

void products_stop(void)
{
    background_stop(&sampler);
}

/* A copy of the last sample, taken under the lock. */
static int snapshot(struct sample out[PRODUCTS_WATCHED + 1])
{
    pthread_mutex_lock(&sampler.lock);
    int n = sample_count;
    memcpy(out, samples, sizeof *out * (size_t)n);
    pthread_mutex_unlock(&sampler.lock);
    return n;
}

static long long initial_of(const struct store_account *a)
{
    return a->initial;
}

static long long remaining_of(const struct store_account *a)
{
    return a->remaining;
}

static long long sold_of(const struct store_account *a)
{
    return a->sold;
}

static const struct {
    const char *name, *help;
    long long (*value)(const struct store_account *a);
} gauges[] = {
    {"initial", "units the product was reset to", initial_of},
    {"remaining", "units in stock now (below zero once oversold)", remaining_of},
    {"sold", "units in the ledger: the sum of qty over every 200", sold_of},
    {"oversold", "units sold that never existed: max(0, sold - initial)", account_oversold},
    {"lost_updates", "sales whose deduction vanished: max(0, sold - (initial - remaining))",
     account_lost_updates},
};

void products_render(FILE *out)
{
    struct sample s[PRODUCTS_WATCHED + 1];
    int n = snapshot(s);
    for (size_t g = 0; g < sizeof gauges / sizeof gauges[0]; g++) {
        fprintf(out, "# HELP stockd_product_%s Watched product: %s, per store.\n", gauges[g].name,
                gauges[g].help);
        fprintf(out, "# TYPE stockd_product_%s gauge\n", gauges[g].name);
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < STORE_COUNT; k++)
                if (s[i].stores[k].present)
                    fprintf(out, "stockd_product_%s{product=\"%d\",store=\"%s\"} %lld\n",
                            gauges[g].name, s[i].product, store_at(k)->name,
                            gauges[g].value(&s[i].stores[k]));
    }
}

json_t *products_json(void)
{
    struct sample s[PRODUCTS_WATCHED + 1];
    int n = snapshot(s);
    long long now = monotonic_ms();
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack("{s:i, s:I}", "product", s[i].product, "age_ms",
                              (json_int_t)(now - s[i].at_ms));
        for (size_t k = 0; k < STORE_COUNT; k++)
            json_object_set_new(o, store_at(k)->name, account_json(&s[i].stores[k]));
        json_array_append_new(list, o);
    }
    return list;
}
