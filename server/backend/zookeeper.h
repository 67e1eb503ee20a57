/*
 * zookeeper.h - the process's one ZooKeeper session, shared by every worker.
 *
 * The C client's handle is thread-safe, and a session is not free (a TCP
 * connection, two client threads, heartbeats), so stockd keeps one per
 * process, created on first use. The client reconnects by itself and the
 * session survives a short outage (or a ZooKeeper restart), ephemeral nodes
 * included. So a node that a request could not delete because the link
 * broke would outlive the request; it is noted as a leftover instead, and
 * deleted by the next request that finds the session connected again. A
 * session that has expired (its nodes are gone with it) is replaced by a
 * new one, and closed once no request still uses it. So a ZooKeeper that
 * goes away and comes back is used again without restarting stockd.
 *
 * Every event the client reports (session state changes, watched nodes
 * changing) bumps one counter and wakes whoever waits in zk_wait_event();
 * waiters re-check what they wait for, so a spurious wake-up costs one
 * round trip and nothing else.
 */
#ifndef STOCKD_ZK_STORE_H
#define STOCKD_ZK_STORE_H

#include "core/result.h"

#include <zookeeper/zookeeper.h>

struct worker;
struct zk_session;

/*
 * A connected session, or ST_BACKEND_UNAVAILABLE. A new session is waited
 * for up to connect_timeout_ms; an existing one that is reconnecting is
 * waited for as long only when `patient`. Give it back with zk_session_put().
 */
st_result zk_session_get(struct worker *w, int patient, struct zk_session **out);

zhandle_t *zk_handle(const struct zk_session *s);

void zk_session_put(struct zk_session *s);

/* Notes that a node under `dir` whose name contains `mark` may exist and
 * nobody else will delete it: a later request on this session will. */
void zk_delete_later(struct zk_session *s, const char *dir, const char *mark);

/* The event counter, to read before registering a watch. */
unsigned long long zk_events(void);

/* Waits until the counter moves past `seen` (returns 1) or the monotonic
 * clock reaches `deadline_ms` (returns 0). */
int zk_wait_event(unsigned long long seen, long long deadline_ms);

/* Whether a request that failed with `rc` may have been applied all the
 * same: the link or the session broke before the answer came back. */
int zk_outcome_unknown(int rc);

/* worker_fail() with ZooKeeper's error text: ST_BACKEND_UNAVAILABLE. */
st_result zk_fail(struct worker *w, int rc, const char *what, const char *path);

/* Closes the session at shutdown, once no worker runs (its ephemeral nodes
 * go with it at once instead of after the session timeout). */
void zk_store_close(void);

#endif
