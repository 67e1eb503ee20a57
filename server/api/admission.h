/*
 * admission.h - what a deduct meets before any backend: a token bucket per
 * product (429 throttled) and a sold-out flag per product (409 sold_out
 * from memory). Both are this instance's own, off unless configured
 * (--admit-rate, --sold-out-flag), and in front of every strategy.
 */
#ifndef STOCKD_ADMISSION_H
#define STOCKD_ADMISSION_H

#include "core/result.h"

#include <stdio.h>

/* Products this instance keeps a bucket and a flag for. Past them a
 * product is admitted unlimited and never flagged (counted as untracked):
 * admission protects the backends, it is not what keeps a sale safe. */
#define ADMISSION_PRODUCTS 4096

/*
 * The bucket's arithmetic, kept as one number: the theoretical arrival
 * time `*tat_ns` (GCRA), so that taking a token is one compare-and-swap.
 * The bucket is full when *tat_ns <= now; each token moves it on by
 * `interval_ns` (1e9 / rate); a request is admitted while the result is at
 * most `burst` intervals ahead of now. Returns 1 and moves *tat_ns on when
 * admitted; 0 and the whole seconds to wait before a token is there
 * (rounded up, at least 1) in *retry_after_s otherwise.
 */
int admission_take(long long *tat_ns, long long now_ns, long long interval_ns, long long burst,
                   long long *retry_after_s);

/* What admission decided for one deduct. */
struct admission_ticket {
    int slot;     /* the product's slot, or -1 when untracked or off */
    unsigned gen; /* the flag's generation when admitted             */
};

/*
 * Checks the deduct of `qty` units of `product` by strategy number
 * `strategy`: ST_OK (then *ticket goes to admission_answered()),
 * ST_THROTTLED with *retry_after_s, or ST_SOLD_OUT from the flag. Never
 * calls a backend.
 */
st_result admission_check(size_t strategy, int product, int qty, struct admission_ticket *ticket,
                          long long *retry_after_s);

/*
 * Whether the flag refuses `qty` units of `product` from memory right now,
 * with no recheck due: 1, or 0 when admission_check() has to decide (the
 * flag down, a recheck due, the product untracked). Only looks: nothing is
 * counted, claimed or moved, so a caller that gets 0 goes on to
 * admission_check() as if it had not asked. *ticket names the product's
 * slot (-1 when it has none) and the flag's generation, which moves at
 * every reset through here: what an answer prebuilt for the flag is keyed
 * by. A refusal answered on the strength of a 1 is counted by
 * admission_flag_answered().
 */
int admission_flag_refuses(int product, int qty, struct admission_ticket *ticket);

/* Counts one refusal by the flag answered without admission_check(). */
void admission_flag_answered(size_t strategy);

/* The admitted sale's answer: a sold_out (having found `remaining`, or
 * REMAINING_UNKNOWN) raises the flag, a sale clears it. */
void admission_answered(const struct admission_ticket *ticket, st_result r, int qty,
                        long long remaining);

/* This instance reset `product`: its flag goes at once. */
void admission_reset(int product);

/* Whether either part is configured. */
int admission_on(void);

/* The bucket's size: --admit-burst, or one second's worth (--admit-rate)
 * when it is 0. */
int admission_burst(void);

/* Its counters, for GET /metrics. */
void admission_render(FILE *out);

#endif
