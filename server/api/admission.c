/*
 * admission.c - the token bucket and the sold-out flag, per product, in
 * front of every strategy.
 *
 * A flash sale's load is mostly buyers who cannot get anything: too many
 * at once for the stock, or arriving after it is gone. Both can be
 * refused here without a backend round trip. Neither decides a sale: a
 * request they admit still goes through its strategy, so they cannot make
 * a safe strategy oversell - only refuse buyers, which the lab measures
 * (undersell, lab/admission.py).
 *
 * The table: a fixed array of ADMISSION_PRODUCTS slots, a product claimed
 * into one by compare-and-swap on first use (open addressing, a few probes)
 * and never evicted, every field an atomic: no lock on the request path.
 * A product that finds no slot is admitted unlimited and never flagged.
 *
 * The bucket (--admit-rate, --admit-burst) is one 64-bit number per
 * product, the time its bucket will next be full (GCRA, the token bucket
 * kept as a time): a take is one compare-and-swap, and Retry-After falls
 * out of the same arithmetic. A request costs one token, whatever its qty:
 * it is the round trip the bucket rations, not units.
 *
 * The flag (--sold-out-flag): a sold_out for qty units means every later
 * request for at least that many is refused too, until stock comes back -
 * and stock comes back only by a reset, which moves the product's epoch in
 * the stores. A reset through this instance clears the flag at once (a
 * generation counter keeps a sale admitted before it from raising it
 * again). A reset through another instance is invisible here, so the flag
 * lets one sale per product through every --sold-out-recheck-ms: that
 * sale is the epoch read, piggy-backed on a buyer - under the new epoch it
 * sells and clears the flag, under the old one it is refused as the flag
 * would have. The price: a remote reset is seen within one recheck period
 * (plus that sale's round trip), and the buyers of that window are
 * refused. A flag is qty-aware, so a buyer of fewer units than the refused
 * sale still reaches the store: the flag itself never undersells.
 */
#include "api/admission.h"

#include "core/config.h"
#include "core/metrics.h"
#include "core/worker.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdatomic.h>

_Static_assert((ADMISSION_PRODUCTS & (ADMISSION_PRODUCTS - 1)) == 0, "a power of two");

/* Slots tried from a product's home slot before it counts as untracked. */
#define PROBES 16

struct slot {
    atomic_int product;         /* 0 while free                              */
    atomic_llong tat_ns;        /* the bucket: when it is next full           */
    atomic_int refuse_from;     /* the flag: qty refused from memory, 0 = off */
    atomic_llong recheck_at_ns; /* the flag: when the next sale may go by it */
    atomic_uint gen;            /* moved on by every reset through here       */
};

static struct slot slots[ADMISSION_PRODUCTS];

static atomic_ullong flag_answers[METRICS_STRATEGIES], flag_rechecks[METRICS_STRATEGIES], untracked;

int admission_take(long long *tat_ns, long long now_ns, long long interval_ns, long long burst,
                   long long *retry_after_s)
{
    long long from = *tat_ns > now_ns ? *tat_ns : now_ns;
    long long next = from + interval_ns;
    long long over = next - now_ns - burst * interval_ns;
    if (over <= 0) {
        *tat_ns = next;
        return 1;
    }
    *retry_after_s = (over + 999999999LL) / 1000000000LL;
    return 0;
}

int admission_on(void)
{
    return config.admit_rate > 0 || config.sold_out_flag;
}

int admission_burst(void)
{
    return config.admit_burst ? config.admit_burst : config.admit_rate;
}

static unsigned home_of(int product)
{
    return ((unsigned)product * 2654435761u) & (ADMISSION_PRODUCTS - 1);
}

/* The product's slot, claimed on first use; NULL when none is free. */
static struct slot *slot_of(int product, int claim)
{
    for (unsigned i = 0, at = home_of(product); i < PROBES;
         i++, at = (at + 1) & (ADMISSION_PRODUCTS - 1)) {
        int seen = atomic_load_explicit(&slots[at].product, memory_order_acquire);
        if (seen == product)
            return &slots[at];
        if (seen == 0 && claim) {
            int free = 0;
            if (atomic_compare_exchange_strong(&slots[at].product, &free, product) ||
                free == product)
                return &slots[at];
        } else if (seen == 0)
            return NULL;
    }
    return NULL;
}

static long long now_ns(void)
{
    return monotonic_us() * 1000;
}

static int bucket_admits(struct slot *s, long long *retry_after_s)
{
    long long interval = 1000000000LL / config.admit_rate;
    long long burst = admission_burst();
    long long now = now_ns();
    long long seen = atomic_load_explicit(&s->tat_ns, memory_order_relaxed);
    for (;;) {
        long long tat = seen;
        if (!admission_take(&tat, now, interval, burst, retry_after_s))
            return 0;
        if (atomic_compare_exchange_weak(&s->tat_ns, &seen, tat))
            return 1;
    }
}

/* 1 when the flag answers this request sold_out; 0 when it goes on - as
 * the one recheck of its period, when the flag is up. */
static int flag_refuses(size_t strategy, struct slot *s, int qty)
{
    int from = atomic_load_explicit(&s->refuse_from, memory_order_acquire);
    if (!from || qty < from)
        return 0;
    long long now = now_ns();
    long long at = atomic_load_explicit(&s->recheck_at_ns, memory_order_relaxed);
    if (now >= at && atomic_compare_exchange_strong(&s->recheck_at_ns, &at,
                                                    now + config.sold_out_recheck_ms * 1000000LL)) {
        atomic_fetch_add_explicit(&flag_rechecks[strategy], 1, memory_order_relaxed);
        return 0;
    }
    atomic_fetch_add_explicit(&flag_answers[strategy], 1, memory_order_relaxed);
    return 1;
}

int admission_flag_refuses(int product, int qty, struct admission_ticket *ticket)
{
    *ticket = (struct admission_ticket){.slot = -1};
    struct slot *s = config.sold_out_flag ? slot_of(product, 0) : NULL;
    if (!s)
        return 0;
    ticket->slot = (int)(s - slots);
    ticket->gen = atomic_load_explicit(&s->gen, memory_order_acquire);
    int from = atomic_load_explicit(&s->refuse_from, memory_order_acquire);
    return from && qty >= from &&
           now_ns() < atomic_load_explicit(&s->recheck_at_ns, memory_order_relaxed);
}

void admission_flag_answered(size_t strategy)
{
    atomic_fetch_add_explicit(&flag_answers[strategy], 1, memory_order_relaxed);
}

st_result admission_check(size_t strategy, int product, int qty, struct admission_ticket *ticket,
                          long long *retry_after_s)
{
    *ticket = (struct admission_ticket){.slot = -1};
    if (!admission_on())
        return ST_OK;
    struct slot *s = slot_of(product, 1);
    if (!s) {
        atomic_fetch_add_explicit(&untracked, 1, memory_order_relaxed);
        return ST_OK;
    }
    ticket->slot = (int)(s - slots);
    ticket->gen = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (config.sold_out_flag && flag_refuses(strategy, s, qty))
        return ST_SOLD_OUT;
    if (config.admit_rate > 0 && !bucket_admits(s, retry_after_s))
        return ST_THROTTLED;
    return ST_OK;
}

void admission_answered(const struct admission_ticket *ticket, st_result r, int qty,
                        long long remaining)
{
    if (!config.sold_out_flag || ticket->slot < 0)
        return;
    struct slot *s = &slots[ticket->slot];
    if (r == ST_OK) {
        atomic_store_explicit(&s->refuse_from, 0, memory_order_release);
        return;
    }
    if (r != ST_SOLD_OUT)
        return;
    /* Found `remaining` units: any request for more is refused. */
    int from = remaining != REMAINING_UNKNOWN && remaining >= 0 && remaining < qty
                   ? (int)remaining + 1
                   : qty;
    atomic_store_explicit(&s->recheck_at_ns, now_ns() + config.sold_out_recheck_ms * 1000000LL,
                          memory_order_relaxed);
    /* Raised only if no reset came through here since this sale began:
     * its sold_out may be the old epoch's. */
    if (atomic_load_explicit(&s->gen, memory_order_acquire) == ticket->gen)
        atomic_store_explicit(&s->refuse_from, from, memory_order_release);
}

void admission_reset(int product)
{
    struct slot *s = admission_on() ? slot_of(product, 0) : NULL;
    if (!s)
        return;
    atomic_fetch_add_explicit(&s->gen, 1, memory_order_acq_rel);
    atomic_store_explicit(&s->refuse_from, 0, memory_order_release);
}

static void per_strategy(FILE *out, const char *name, const char *help, atomic_ullong *counts)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (size_t i = 0; i < strategy_count(); i++)
        fprintf(out, "%s{strategy=\"%s\"} %llu\n", name, strategy_at(i)->name,
                atomic_load_explicit(&counts[i], memory_order_relaxed));
}

void admission_render(FILE *out)
{
    if (!admission_on())
        return;
    per_strategy(out, "stockd_sold_out_flag_answers_total",
                 "Deducts answered sold_out from this instance's sold-out flag, no backend call.",
                 flag_answers);
    per_strategy(out, "stockd_sold_out_flag_rechecks_total",
                 "Deducts let past a raised sold-out flag to see whether stock came back.",
                 flag_rechecks);
    fprintf(out,
            "# HELP stockd_admission_untracked_total Deducts admitted without a bucket or flag: "
            "more products than admission's table holds.\n"
            "# TYPE stockd_admission_untracked_total counter\n"
            "stockd_admission_untracked_total %llu\n",
            atomic_load_explicit(&untracked, memory_order_relaxed));
}
