/*
 * result.c - the contract's table of outcomes, in one place.
 */
#include "core/result.h"

#include <assert.h>

static const struct {
    unsigned status;
    const char *word;
} outcomes[] = {
    [ST_OK] = {200, "ok"},
    [ST_SOLD_OUT] = {409, "sold_out"},
    [ST_BUSY] = {409, "busy"},
    [ST_BAD_REQUEST] = {400, "bad_request"},
    [ST_UNKNOWN_STRATEGY] = {404, "unknown_strategy"},
    [ST_UNKNOWN_PRODUCT] = {404, "unknown_product"},
    [ST_NOT_FOUND] = {404, "not_found"},
    [ST_METHOD_NOT_ALLOWED] = {405, "method_not_allowed"},
    [ST_PAYLOAD_TOO_LARGE] = {413, "payload_too_large"},
    [ST_BACKEND_UNAVAILABLE] = {503, "backend_unavailable"},
    [ST_OVERLOADED] = {503, "overloaded"},
    [ST_TIMEOUT] = {503, "timeout"},
    [ST_SHUTTING_DOWN] = {503, "shutting_down"},
    [ST_OUTCOME_UNKNOWN] = {503, "outcome_unknown"},
    [ST_UNAUTHORIZED] = {401, "unauthorized"},
    [ST_FORBIDDEN] = {403, "forbidden"},
    [ST_THROTTLED] = {429, "throttled"},
    [ST_EXPIRED] = {409, "expired"},
    [ST_ALREADY_PAID] = {409, "already_paid"},
    [ST_PAID] = {409, "paid"},
    [ST_UNKNOWN_ORDER] = {404, "unknown_order"},
    [ST_CREATED] = {201, "created"},
    [ST_KEY_REUSED] = {422, "key_reused"},
    [ST_IN_PROGRESS] = {409, "in_progress"},
};

_Static_assert(sizeof outcomes / sizeof outcomes[0] == ST_RESULT_COUNT, "one row per outcome");

unsigned result_status(st_result r)
{
    assert((unsigned)r < sizeof outcomes / sizeof outcomes[0]);
    return outcomes[r].status;
}

int result_ok(st_result r)
{
    return result_status(r) < 300;
}

const char *result_word(st_result r)
{
    assert((unsigned)r < sizeof outcomes / sizeof outcomes[0]);
    return outcomes[r].word;
}
