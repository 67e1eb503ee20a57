/*
 * params.h - request parameters from the query string and the JSON body.
 *
 * Each endpoint declares its parameters as a table of param_spec rows
 * (name, bounds, default). params_parse() checks every value against its
 * row and fails with a message naming the parameter and what is wrong:
 * unknown names, repeats, non-integers, out-of-range values, malformed or
 * non-object JSON, and a query and body that disagree are all 400s. Nothing
 * is ever silently defaulted or clamped.
 */
#ifndef STOCKD_PARAMS_H
#define STOCKD_PARAMS_H

#include "core/later.h"
#include "core/result.h"
#include "store/store.h" /* IDEMPOTENCY_KEY_MAX */

#include <jansson.h>
#include <limits.h>
#include <stddef.h>

struct worker;
struct param_spec;

/* The most parameters an endpoint's table may have. */
#define PARAMS_MAX 16

/* What params_parse() accepted of one request against one table, kept with
 * the request: a deduct is parsed on the HTTP loop to ask the sold-out
 * flag, then by its arrival there or by its worker, and each of those
 * steps reads the values the first one parsed instead of parsing again. */
struct params_parsed {
    const struct param_spec *specs; /* the table the values are for; NULL: none yet */
    long long values[PARAMS_MAX];
};

/* A decoded query argument; value is NULL for a bare "?name". */
struct query_arg {
    const char *key;
    const char *value;
};

#define HTTP_MAX_ARGS 16

/* What the HTTP layer hands to a handler. */
struct http_request {
    const char *method;
    const char *path;
    const struct query_arg *args;
    unsigned nargs;
    int too_many_args; /* more than HTTP_MAX_ARGS were given */
    const char *body;
    size_t body_len;
    long long arrived_us; /* when its first byte came, monotonic clock */
    struct later *later;  /* for a handler that answers later (api.h) */
    /* Its Idempotency-Key header as sent, cut after IDEMPOTENCY_KEY_MAX + 1
     * characters (so that one too long still shows), or NULL when absent;
     * params_key() checks it. */
    const char *idempotency_key;
    /* Where params_parse() keeps what it accepted, or NULL: nothing kept. A
     * copy of the request with other arguments or another body must not
     * share it. */
    struct params_parsed *parsed;
};

/* Checks the request's Idempotency-Key (1..IDEMPOTENCY_KEY_MAX printable
 * ASCII characters) and copies it into `key` ("" when there is none):
 * ST_BAD_REQUEST, naming the header, otherwise. */
st_result params_key(struct worker *w, const struct http_request *req,
                     char key[IDEMPOTENCY_KEY_MAX + 1]);

/* How many rows a table has. */
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* A required parameter has this as its fallback. */
#define PARAM_REQUIRED LLONG_MIN

struct param_spec {
    const char *name;
    long long min, max;
    long long fallback; /* used when absent; PARAM_REQUIRED if it must be given */
    int waits;          /* a value other than 0 makes the request wait on purpose */
    /* A text parameter (an id, a name) has this, which says whether a
     * value is one; min and max then bound its length, its value is 1 when
     * given and the fallback (0) when not, and params_text() reads it. */
    int (*text)(const char *value);
};

/* The longest text a parameter may be. */
#define PARAM_TEXT_MAX 64

/* An endpoint's parameters, as its route names them (router.c), so that
 * the HTTP layer can ask params_ask_to_wait() without naming any. */
struct param_table {
    const struct param_spec *specs;
    unsigned count;
};

/* The bounds of the parameters several endpoints share, written once: a
 * deduct and a race take a sale's parameters alike. hold_ms and pause_ms
 * are the teaching knobs, time spent inside the critical section on
 * purpose: they wait. */
#define PRODUCT_MAX 2147483647LL
#define PARAM_PRODUCT(fallback)                                                                    \
    {                                                                                              \
        "product", 1, PRODUCT_MAX, fallback, 0, NULL                                               \
    }
#define PARAM_QTY                                                                                  \
    {                                                                                              \
        "qty", 1, 1000, 1, 0, NULL                                                                 \
    }
#define PARAM_HOLD_MS                                                                              \
    {                                                                                              \
        "hold_ms", 0, 1000, 0, 1, NULL                                                             \
    }
#define PARAM_TTL_MS                                                                               \
    {                                                                                              \
        "ttl_ms", 0, 600000, 0, 0, NULL                                                            \
    } /* 0: the server's lock_ttl_ms */
#define PARAM_PAUSE_MS                                                                             \
    {                                                                                              \
        "pause_ms", 0, 1000, 0, 1, NULL                                                            \
    }

/* Fills values[i] for specs[i] (nspecs <= PARAMS_MAX); ST_BAD_REQUEST with
 * the reason otherwise. Values accepted are kept in req->parsed, and read
 * from there when the same table asks again; a refusal is not kept: each
 * step that asks parses it anew, for its message (an error is no hot path). */
st_result params_parse(struct worker *w, const struct http_request *req,
                       const struct param_spec *specs, unsigned nspecs, long long *values);

/* The text of `spec`, a text parameter params_parse() accepted, into
 * `out` (PARAM_TEXT_MAX + 1 bytes): 1, or 0 when it was not given. */
int params_text(const struct http_request *req, const struct param_spec *spec,
                char out[PARAM_TEXT_MAX + 1]);

/* Whether `req` asks, through a parameter of `table` that waits, to wait on
 * purpose: a query value other than 0, or a body that names it (taken at
 * its word before it is parsed: a request wrongly taken to wait only goes
 * to the slower lane). NULL: the endpoint has no such parameter. */
int params_ask_to_wait(const struct param_table *table, const struct http_request *req);

/* Parses a whole decimal integer in [min, max]: digits only, no sign, no
 * spaces. Returns 0 and sets *out, or -1. */
int parse_bounded_int(const char *text, long long min, long long max, long long *out);

#endif
