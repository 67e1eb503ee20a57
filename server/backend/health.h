/*
 * health.h - every configured backend, probed in the background.
 *
 * One thread per configured backend pings it every HEALTH_PERIOD_MS with a
 * worker of its own, and keeps the answer. GET /health reads what the
 * probes last saw and how long ago, so it answers at once even while every
 * worker is held or a backend hangs - a balancer or a compose healthcheck
 * must not mark a busy instance dead - and it never adds load to a backend
 * that is struggling.
 */
#ifndef STOCKD_HEALTH_H
#define STOCKD_HEALTH_H

#include "backend/backend.h"

#include <jansson.h>
#include <stddef.h>

#define HEALTH_PERIOD_MS 500

/* Starts the probes and waits (up to connect-timeout-ms) for each one's
 * first answer; 0 on success. */
int health_start(void);

/* Stops and joins the probes. */
void health_stop(void);

/* The /health document: {"ok", "age_ms", "backends": {name: {"state",
 * "age_ms", "message"?, ...}}} for every configured backend; *all_up says
 * whether every one answered its last probe, and `down` lists those that
 * did not ("mysql, redis"). New reference. */
json_t *health_json(int *all_up, char *down, size_t down_size);

/* Whether backend `id` answered its last probe (0 when not configured). */
int health_up(enum backend_id id);

#endif
