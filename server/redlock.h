/*
 * redlock.h - the independent Redis servers of the redlock strategy.
 *
 * config.redlock (--redlock, STOCKD_REDLOCK) lists them as
 * "host:port,host:port,..."; an empty list means redlock is not configured.
 * Each worker keeps one struct redis_link per server (worker->redlock[]),
 * connected on first use like its main Redis link.
 */
#ifndef STOCKD_REDLOCK_H
#define STOCKD_REDLOCK_H

#include "result.h"

#include <jansson.h>
#include <stdio.h>

struct worker;
struct redis_link;

/* The most servers --redlock may list. */
#define REDLOCK_MAX 9

/* Parses `list` into the server table; 0 on success, else prints why to
 * `err` and returns -1. Called once by config_load(), before any thread. */
int redlock_configure(const char *list, FILE *err);

/* How many servers are configured (0: redlock is not configured). */
int redlock_count(void);

/* The calling worker's link to server `i` (0 <= i < redlock_count()). */
struct redis_link *redlock_link(struct worker *w, int i);

/* Pings every server; ST_BACKEND_UNAVAILABLE naming those that do not
 * answer. ST_OK when none is configured. */
st_result redlock_ping(struct worker *w);

/* Adds "servers": ["host:port", ...] to a /health state; 0 when none is
 * configured. */
int redlock_describe(json_t *state);

/* Deletes every key of the product on every server that answers (the
 * others' keys expire by their TTL); never fails a reset. */
st_result redlock_reset(struct worker *w, int product);

#endif
