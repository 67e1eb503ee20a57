/*
 * race.h - POST /lab/race: stockd races buyers against itself, for the
 * lab page and the comparison's timelines.
 */
#ifndef STOCKD_RACE_H
#define STOCKD_RACE_H

#include "api/api.h"

/* The lab product a race resets and sells when the run names none. */
#define RACE_PRODUCT 1999

/* Most buyers in one run, and the longest run the knobs may ask for:
 * buyers x (hold_ms + pause_ms), the time a lock that serialises them
 * takes. */
#define RACE_BUYERS_MAX 64
#define RACE_UNITS_MAX 1000
#define RACE_WAIT_MAX_MS 20000

/* The handler: checks the run, resets the product, and answers later,
 * from the thread that fires the buyers. */
st_result api_race(struct worker *w, const struct http_request *req, json_t *reply);
extern const struct param_table api_race_params;

/* Before the HTTP loops start (libcurl's global state), and after they
 * have stopped (the last run's thread is joined). */
int race_prepare(void);
void race_release(void);

#endif
