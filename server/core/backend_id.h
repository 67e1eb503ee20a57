/*
 * backend_id.h - the names of the backends, as numbers.
 *
 * The backends themselves (their connections, their table) are a layer up,
 * in backend/. Their ids live down here because a worker keeps one slot of
 * links per backend (worker.h): the worker knows how many backends there
 * are, never what any of them is.
 */
#ifndef STOCKD_BACKEND_ID_H
#define STOCKD_BACKEND_ID_H

enum backend_id { BACKEND_MYSQL, BACKEND_REDIS, BACKEND_REDLOCK, BACKEND_ZOOKEEPER, BACKEND_COUNT };

/* A set of backends, as in a strategy's `needs`. */
typedef unsigned backend_set;
#define BACKEND_BIT(id) (1u << (id))

#endif
