/*
 * redlock.h - the independent Redis servers of the redlock strategy.
 *
 * config.redlock (--redlock, STOCKD_REDLOCK) lists them as
 * "host:port,host:port,..."; an empty list means redlock is not configured.
 * Each worker keeps one struct redis_link per server (in its
 * BACKEND_REDLOCK slot), connected on first use like its main Redis link;
 * the backend itself (health, teardown, reset) is `backend_redlock`.
 */
#ifndef STOCKD_REDLOCK_H
#define STOCKD_REDLOCK_H

#include "core/result.h"

#include <stdio.h>

struct worker;
struct redis_link;

/* How many servers are configured (0: redlock is not configured). */
int redlock_count(void);

/* The calling worker's link to server `i` (0 <= i < redlock_count()). */
struct redis_link *redlock_link(struct worker *w, int i);

#endif
