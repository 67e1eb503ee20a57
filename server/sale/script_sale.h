/*
 * script_sale.h - a sale sent as one Redis script, the way lua sends it.
 */
#ifndef STOCKD_SCRIPT_SALE_H
#define STOCKD_SCRIPT_SALE_H

#include "store/store.h"

/* Sends rq's sale script: on the HTTP loop's own pipe when the worker is a
 * loop's, or else in `shared`, a combiner of the row's own whose run is
 * script_sale_pipeline() (one queue, one script). The answer goes through
 * rq->later; ST_OK says only that the sale was handed on. A hold or a
 * return is the exception: its script runs on this worker and its result
 * is the answer. */
struct combiner;
struct combined_sale;
st_result script_sale_deduct(const struct combiner *shared, struct worker *w,
                             const struct deduct_request *rq, struct deduct_reply *out);
void script_sale_pipeline(struct worker *w, int key, struct combined_sale *batch, int n);

#endif
