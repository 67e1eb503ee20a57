/*
 * keys_running.h - the Idempotency-Keys whose first request is running on
 * this instance, so that a second request with the same key is told 409
 * in_progress instead of running beside it.
 *
 * The store, not this set, is what keeps a key's sale single: it records
 * the key in the sale's own atomic step (store/keys.h), so two instances
 * that both run a key still apply one sale. This set only answers the
 * contract's "still running" honestly on one instance, where otherwise
 * the second request would queue behind the first's lock or row and come
 * back with the replay - or, on a row that waits outside its critical
 * section (hold_ms on lua), run its own script first.
 */
#ifndef STOCKD_KEYS_RUNNING_H
#define STOCKD_KEYS_RUNNING_H

#include "core/result.h"

struct worker;

/* Marks `key` running: ST_OK, or ST_IN_PROGRESS when it already is
 * (ST_BACKEND_UNAVAILABLE when out of memory), the reason in w. Every
 * ST_OK is followed by exactly one keys_running_end(key). */
st_result keys_running_begin(struct worker *w, const char *key);

/* `key`'s request has its answer. */
void keys_running_end(const char *key);

#endif
