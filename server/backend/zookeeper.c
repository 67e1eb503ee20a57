/*
 * zookeeper.c - the shared ZooKeeper session and its event counter.
 *
 * Locking rule: `guard` is never held across a call that waits for the
 * client's completion thread (any zoo_* request, zookeeper_close), because
 * that thread takes `guard` to report events.
 */
#include "backend/zookeeper.h"

#include "backend/backend.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEFTOVER_MAX 64

struct leftover {
    char dir[64];
    char mark[48];
};

struct zk_session {
    zhandle_t *zh;
    int refs;                    /* requests using it now                          */
    int abandoned;               /* given to no new request; closed when refs reach 0 */
    long long unconnected_since; /* when a request first found it not connected, or 0 */
    int nleft;                   /* nodes to delete once connected again           */
    struct leftover left[LEFTOVER_MAX];
};

static pthread_mutex_t guard = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed; /* on CLOCK_MONOTONIC, see init_once() */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned long long events;
static struct zk_session *current;

static void init_once(void)
{
    cond_init_monotonic(&changed);
    /* The client's own messages go through forward_log(), at debug level:
     * during an outage it reports every reconnect attempt. */
    zoo_set_debug_level(log_threshold == LOG_DEBUG ? ZOO_LOG_LEVEL_INFO : ZOO_LOG_LEVEL_WARN);
}

static void forward_log(const char *message)
{
    size_t n = strlen(message);
    while (n > 0 && (message[n - 1] == '\n' || message[n - 1] == '\r'))
        n--;
    log_debug("zookeeper client: %.*s", (int)n, message);
}

/* The watcher of every session and every watch: count and wake. */
static void on_event(zhandle_t *zh, int type, int state, const char *path, void *context)
{
    (void)zh, (void)type, (void)state, (void)path, (void)context;
    pthread_mutex_lock(&guard);
    events++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&guard);
}

/* Waits on `changed` until deadline_ms; call with `guard` held. */
static void wait_changed(long long deadline_ms)
{
    struct timespec until = {(time_t)(deadline_ms / 1000), (long)(deadline_ms % 1000) * 1000000L};
    pthread_cond_timedwait(&changed, &guard, &until);
}

static int dead(zhandle_t *zh)
{
    int state = zoo_state(zh);
    return state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

static void close_session(struct zk_session *s)
{
    if (!s)
        return;
    int rc = zookeeper_close(s->zh);
    if (rc != ZOK)
        log_debug("zookeeper: closing an old session: %s", zerror(rc));
    free(s);
}

void zk_store_close(void)
{
    pthread_mutex_lock(&guard);
    struct zk_session *s = current;
    current = NULL;
    pthread_mutex_unlock(&guard);
    assert(!s || s->refs == 0); /* the workers have been joined */
    close_session(s);
}

zhandle_t *zk_handle(const struct zk_session *s)
{
    return s->zh;
}

void zk_session_put(struct zk_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&guard);
    s->refs--;
    int last = s->abandoned && s->refs == 0;
    pthread_mutex_unlock(&guard);
    if (last)
        close_session(s);
}

void zk_delete_later(struct zk_session *s, const char *dir, const char *mark)
{
    pthread_mutex_lock(&guard);
    if (s->nleft < LEFTOVER_MAX) {
        struct leftover *l = &s->left[s->nleft++];
        snprintf(l->dir, sizeof l->dir, "%s", dir);
        snprintf(l->mark, sizeof l->mark, "%s", mark);
    } else if (!s->abandoned) {
        /* Too many to track: start afresh; closing this session when its
         * last request is done deletes every node it owns. */
        log_warn("zookeeper: more than %d nodes left to delete; starting a new session",
                 LEFTOVER_MAX);
        s->abandoned = 1;
        if (current == s)
            current = NULL;
    }
    pthread_mutex_unlock(&guard);
}

/* Deletes the children of l->dir that carry l->mark; 0 if ZooKeeper could
 * not be asked. */
static int delete_leftover(zhandle_t *zh, const struct leftover *l)
{
    struct String_vector children;
    int rc = zoo_get_children(zh, l->dir, 0, &children);
    if (rc != ZOK)
        return rc == ZNONODE;
    int done = 1;
    for (int i = 0; i < children.count; i++) {
        if (!strstr(children.data[i], l->mark))
            continue;
        char path[256];
        snprintf(path, sizeof path, "%s/%.180s", l->dir, children.data[i]);
        rc = zoo_delete(zh, path, -1);
        if (rc == ZOK)
            log_info("zookeeper: deleted leftover node %s", path);
        else if (rc != ZNONODE)
            done = 0;
    }
    deallocate_String_vector(&children);
    return done;
}

static void delete_leftovers(struct zk_session *s)
{
    struct leftover todo[LEFTOVER_MAX];
    pthread_mutex_lock(&guard);
    int n = s->nleft;
    memcpy(todo, s->left, sizeof todo[0] * (size_t)n);
    s->nleft = 0;
    pthread_mutex_unlock(&guard);
    for (int i = 0; i < n; i++)
        if (!delete_leftover(s->zh, &todo[i]))
            zk_delete_later(s, todo[i].dir, todo[i].mark);
}

/* Whether the current session has stayed unconnected for longer than a
 * connect timeout. The client can hang in a handshake with a ZooKeeper that
 * opened its port before it serves (it is still loading its data) until
 * two thirds of the session timeout pass; a new session connects at once. */
static int stuck(const struct zk_session *s)
{
    return s->unconnected_since &&
           monotonic_ms() - s->unconnected_since > config.connect_timeout_ms;
}

/* One try: the current session (replacing it if it is dead, abandoned or
 * stuck), connected within the wait, or NULL. Called with `guard` held;
 * returns the sessions to close (after unlocking) in retired[0] (the one it
 * replaced) and retired[1] (the one it waited on, when another request
 * replaced it meanwhile: the wait lets go of `guard`). */
static struct zk_session *try_session(struct worker *w, int patient, struct zk_session **retired)
{
    struct zk_session *old = NULL;
    if (current && (current->abandoned || dead(current->zh) || stuck(current))) {
        old = current;
        old->abandoned = 1;
        if (old->refs == 0)
            retired[0] = old;
        current = NULL;
    }
    int fresh = !current;
    if (fresh) {
        struct zk_session *s = calloc(1, sizeof *s);
        if (s)
            s->zh = zookeeper_init2(config.zk, on_event, config.zk_session_ms, NULL, NULL, 0,
                                    forward_log);
        if (!s || !s->zh) {
            worker_fail(w, ST_BACKEND_UNAVAILABLE, "zookeeper: cannot start a session with %s: %s",
                        config.zk, strerror(errno));
            free(s);
            return NULL;
        }
        if (old) { /* the nodes it could not delete are the new session's to delete */
            s->nleft = old->nleft;
            memcpy(s->left, old->left, sizeof s->left[0] * (size_t)old->nleft);
            old->nleft = 0;
        }
        current = s;
    }
    struct zk_session *s = current;
    s->refs++;
    long long deadline = monotonic_ms() + (fresh || patient ? config.connect_timeout_ms : 0);
    while (zoo_state(s->zh) != ZOO_CONNECTED_STATE && !dead(s->zh) && monotonic_ms() < deadline)
        wait_changed(deadline);
    if (zoo_state(s->zh) == ZOO_CONNECTED_STATE) {
        s->unconnected_since = 0;
        return s;
    }
    if (!s->unconnected_since)
        s->unconnected_since = monotonic_ms();
    if (dead(s->zh))
        worker_fail(w, ST_BACKEND_UNAVAILABLE, "zookeeper at %s: the session has expired",
                    config.zk);
    else
        worker_fail(w, ST_BACKEND_UNAVAILABLE, "zookeeper at %s: not connected within %d ms",
                    config.zk, fresh || patient ? config.connect_timeout_ms : 0);
    s->refs--;
    if (dead(s->zh))
        s->abandoned = 1; /* the next try replaces it */
    if (s != current && s->refs == 0) {
        assert(s->abandoned); /* only an abandoned session stops being current */
        retired[1] = s;
    }
    return NULL;
}

st_result zk_session_get(struct worker *w, int patient, struct zk_session **out)
{
    *out = NULL;
    if (!config.zk[0])
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "zookeeper: not configured (--zk)");
    pthread_once(&once, init_once);
    /* Two tries: an expired session is only found out on reconnecting, and
     * then a fresh one is what the request needs. */
    for (int round = 0; round < 2 && !*out; round++) {
        struct zk_session *retired[2] = {NULL, NULL};
        pthread_mutex_lock(&guard);
        *out = try_session(w, patient, retired);
        int expired = !*out && current && current->abandoned;
        pthread_mutex_unlock(&guard);
        close_session(retired[0]);
        close_session(retired[1]);
        if (!*out && !expired)
            break;
    }
    if (!*out) {
        log_warn("%s", w->error);
        return ST_BACKEND_UNAVAILABLE;
    }
    delete_leftovers(*out);
    return ST_OK;
}

unsigned long long zk_events(void)
{
    pthread_mutex_lock(&guard);
    unsigned long long seen = events;
    pthread_mutex_unlock(&guard);
    return seen;
}

int zk_wait_event(unsigned long long seen, long long deadline_ms)
{
    pthread_once(&once, init_once);
    pthread_mutex_lock(&guard);
    while (events == seen && monotonic_ms() < deadline_ms)
        wait_changed(deadline_ms);
    int moved = events != seen;
    pthread_mutex_unlock(&guard);
    return moved;
}

int zk_outcome_unknown(int rc)
{
    return (rc < 0 && rc > ZAPIERROR) || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
           rc == ZSESSIONMOVED;
}

st_result zk_fail(struct worker *w, int rc, const char *what, const char *path)
{
    return worker_fail(w, ST_BACKEND_UNAVAILABLE, "zookeeper: %s %s: %s", what, path, zerror(rc));
}

/* ------------------------------------------------------------ the backend */

static int configured(void)
{
    return config.zk[0] != '\0';
}

static void describe(json_t *state)
{
    json_object_set_new(state, "servers", json_string(config.zk));
}

static st_result ping(struct worker *w)
{
    struct zk_session *s;
    st_result r = zk_session_get(w, 1, &s);
    if (r != ST_OK)
        return r;
    struct Stat stat;
    int rc = zoo_exists(zk_handle(s), "/", 0, &stat);
    zk_session_put(s);
    return rc == ZOK ? ST_OK : zk_fail(w, rc, "exists", "/");
}

/* Deletes `path`'s children, then `path` itself. */
static void delete_tree(zhandle_t *zh, const char *path)
{
    struct String_vector children;
    int rc = zoo_get_children(zh, path, 0, &children);
    if (rc == ZNONODE)
        return;
    for (int i = 0; rc == ZOK && i < children.count; i++) {
        char child[256];
        snprintf(child, sizeof child, "%s/%.180s", path, children.data[i]);
        int deleted = zoo_delete(zh, child, -1);
        if (deleted != ZOK && deleted != ZNONODE)
            log_warn("zookeeper: reset could not delete %s: %s", child, zerror(deleted));
    }
    if (rc == ZOK)
        deallocate_String_vector(&children);
    else
        log_warn("zookeeper: reset could not list %s: %s", path, zerror(rc));
    rc = zoo_delete(zh, path, -1);
    if (rc != ZOK && rc != ZNONODE)
        log_warn("zookeeper: reset could not delete %s: %s", path, zerror(rc));
}

/* Reset: delete a product's lock nodes, such as those of a stockd that died
 * and whose session has not expired yet. Best effort: a ZooKeeper that is
 * down does not fail the reset of the stores (whose sessions' nodes expire
 * with them anyway), and only a session already connected is used, so a
 * reset never waits for ZooKeeper more than once. */
static st_result clear(struct worker *w, const char *const *paths, int count)
{
    struct zk_session *s;
    if (zk_session_get(w, 0, &s) != ST_OK) {
        log_warn("zookeeper: reset left lock nodes alone: %s", w->error);
        return ST_OK;
    }
    for (int i = 0; i < count; i++)
        delete_tree(zk_handle(s), paths[i]);
    zk_session_put(s);
    return ST_OK;
}

/* No per-worker links: the session is the process's (see backend/zookeeper.h). */
const struct backend backend_zookeeper = {
    .name = "zookeeper",
    .configured = configured,
    .ping = ping,
    .clear = clear,
    .describe = describe,
};
