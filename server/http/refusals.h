/*
 * refusals.h - a loop's refusals by the sold-out flag, each a response
 * built once and sent again to every buyer the flag refuses.
 */
#ifndef STOCKD_REFUSALS_H
#define STOCKD_REFUSALS_H

#include "core/worker.h"
#include "http/request.h"

#include <microhttpd.h>

/* One loop's table: made on first use, the loop's alone. */
struct refusals;

/*
 * `p`, a deduct the flag refuses (`f`, from api_deduct_flagged()), answered
 * from the loop's response for that refusal, built first with the loop's
 * worker `w` when the loop has none for it: what MHD_queue_response() gave,
 * or MHD_NO when out of memory (the connection is then dropped).
 */
enum MHD_Result refusal_send(struct refusals **table, struct pending *p,
                             const struct flag_refusal *f, struct worker *w);

/* Lets go of the response kept for `f`'s product if a reset came through
 * this instance since it was built (`f` from api_deduct_flagged(), which
 * did not refuse). */
void refusal_drop(struct refusals *table, const struct flag_refusal *f);

/* Lets go of the whole table, when its loop closes. */
void refusals_free(struct refusals *table);

#endif
