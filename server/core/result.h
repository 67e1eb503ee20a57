/*
 * result.h - the one outcome type threaded through every call in stockd.
 *
 * A call that can fail while serving a request returns an st_result, and
 * no error is dropped. An int is a count or a yes/no answer - or, for the
 * functions that start a part of stockd (a pool, a probe, a listener) or
 * parse its configuration, 0 or -1 after saying why: stockd then does not
 * start. The HTTP layer turns a result into the contract's
 * status code and `error` word in exactly one place (result_status(),
 * result_word()), so a strategy never thinks about HTTP.
 *
 * Human-readable detail travels beside the result in the calling worker's
 * error buffer (worker_fail() in worker.h), like errno beside -1.
 */
#ifndef STOCKD_RESULT_H
#define STOCKD_RESULT_H

typedef enum {
    ST_OK = 0,              /* done: sold, reset, answered               */
    ST_SOLD_OUT,            /* not enough stock; nothing changed         */
    ST_BUSY,                /* lock not acquired in time, retries spent,
                               or a stale writer fenced out              */
    ST_BAD_REQUEST,         /* malformed product/qty/body                */
    ST_UNKNOWN_STRATEGY,    /* /stock/deduct/{name} names no strategy    */
    ST_UNKNOWN_PRODUCT,     /* the store has no such product             */
    ST_NOT_FOUND,           /* no such path                              */
    ST_METHOD_NOT_ALLOWED,  /* path exists, method does not              */
    ST_PAYLOAD_TOO_LARGE,   /* body over the configured limit            */
    ST_BACKEND_UNAVAILABLE, /* a backend is down or failed; nothing
                               changed, the worker reconnects later      */
    ST_OVERLOADED,          /* the work queue is full; nothing changed   */
    ST_TIMEOUT,             /* the request's deadline passed before it
                               could finish; nothing changed             */
    ST_SHUTTING_DOWN,       /* the server is stopping; nothing changed   */
    ST_OUTCOME_UNKNOWN,     /* a commit was sent and its reply lost: the
                               sale may have happened; the ledger knows  */
    ST_UNAUTHORIZED,        /* an admin endpoint without the admin token */
    ST_FORBIDDEN,           /* a cross-site request that changes state   */
    ST_THROTTLED,           /* admission's bucket for the product is
                               empty; nothing changed, no backend call   */
    ST_EXPIRED,             /* a payment or cancel for an order that
                               expired, was cancelled or is past its
                               deadline: a payment is then refund due    */
    ST_ALREADY_PAID,        /* another payment for a paid order: refund
                               due                                       */
    ST_PAID,                /* cancel of a paid order; nothing changed   */
    ST_UNKNOWN_ORDER,       /* a well-formed order id the store lacks    */
    ST_CREATED,             /* done, and it made something: a held order */
    ST_KEY_REUSED,          /* an Idempotency-Key sent before with another
                               strategy, product or qty; nothing changed */
    ST_IN_PROGRESS,         /* an Idempotency-Key whose first request is
                               still running; nothing changed            */
} st_result;

/* How many outcomes there are, for tables indexed by result. */
#define ST_RESULT_COUNT (ST_IN_PROGRESS + 1)

/* The HTTP status the contract gives this result. */
unsigned result_status(st_result r);

/* Whether `r` is a success (2xx): "ok":true. */
int result_ok(st_result r);

/* The contract's `error` word for a failed result ("sold_out", ...). */
const char *result_word(st_result r);

#endif
