/*
 * zk-lock - a ZooKeeper lock around the nolock body (the Curator recipe).
 *
 * The race: nolock's, between any threads of any stockd instances.
 *
 * The fix: every contender creates an ephemeral sequential node under
 * /stockd/locks/<P>; ZooKeeper numbers them in the order it received them.
 * The lowest number holds the lock. Everyone else watches only the node
 * just before its own (not the lock as a whole, so a release wakes one
 * waiter, not the herd) and looks again when that node goes away: a queue,
 * served in order. Waiting is bounded by lock_wait_ms; then the waiter
 * deletes its node and answers busy. Release deletes our node. Ephemeral
 * means the node lives as long as our session: a stockd that dies leaves no
 * lock behind once its session times out (zk-session-ms), and no TTL has to
 * guess how long a sale takes - the client's own threads keep the session
 * alive however long the critical section is. A node we could not delete
 * because ZooKeeper was unreachable is deleted once it is back (backend/zookeeper.c).
 *
 * The price: at least four round trips to a quorum per sale (create, list,
 * delete, plus a watch per wait), each a consensus write; the fairest and
 * slowest lock here. Safe while our session lives: if ZooKeeper expires it
 * (no contact for zk-session-ms, e.g. a network partition), our node
 * vanishes while we may still be writing, and the next in line enters.
 */
#include "backend/zookeeper.h"
#include "core/log.h"
#include "core/worker.h"
#include "sale/lock.h"
#include "sale/strategy.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOCKS_ROOT "/stockd/locks"
#define ZK_DIR_MAX 32 /* LOCKS_ROOT "/<product>" */
#define ZK_PATH_MAX 160

struct zk_node {
    struct zk_session *session;
    char dir[ZK_DIR_MAX];   /* the product's queue                */
    char mark[48];          /* "lock-<token>-": in our node's name */
    char path[ZK_PATH_MAX]; /* our node, as ZooKeeper named it    */
};

static void dir_of(char out[ZK_DIR_MAX], int product)
{
    snprintf(out, ZK_DIR_MAX, LOCKS_ROOT "/%d", product);
}

/* The sequence number ZooKeeper appended (10 digits), or -1. */
static long sequence_of(const char *name)
{
    size_t n = strlen(name);
    if (n < 10)
        return -1;
    char *end;
    long seq = strtol(name + n - 10, &end, 10);
    return *end == '\0' && seq >= 0 ? seq : -1;
}

/* The persistent parents of the product's lock nodes. */
static int create_parents(zhandle_t *zh, const char *dir)
{
    const char *paths[] = {"/stockd", LOCKS_ROOT, dir};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        int rc = zoo_create(zh, paths[i], NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
        if (rc != ZOK && rc != ZNODEEXISTS)
            return rc;
    }
    return ZOK;
}

/* Deletes our node; if ZooKeeper cannot be told now, a later request on
 * the session will (a node left in the queue would block it for good). */
static int delete_node(struct zk_node *node)
{
    int rc = zoo_delete(zk_handle(node->session), node->path, -1);
    if (rc != ZOK && rc != ZNONODE)
        zk_delete_later(node->session, node->dir, node->mark);
    return rc;
}

static void put_node(struct zk_node *node)
{
    zk_session_put(node->session);
    free(node);
}

/* Lists the queue; sets *first when our node is at its head, else names the
 * node just before ours in `before`. */
static st_result find_place(struct worker *w, zhandle_t *zh, const char *dir, const char *mine,
                            int *first, char before[ZK_PATH_MAX])
{
    struct String_vector children;
    int rc = zoo_get_children(zh, dir, 0, &children);
    if (rc != ZOK)
        return zk_fail(w, rc, "list", dir);
    long my_seq = sequence_of(mine), best = -1;
    int present = 0;
    for (int i = 0; i < children.count; i++) {
        const char *name = children.data[i];
        long seq = sequence_of(name);
        if (strcmp(name, mine) == 0)
            present = 1;
        else if (seq >= 0 && seq < my_seq && seq > best) {
            best = seq;
            snprintf(before, ZK_PATH_MAX, "%s/%.120s", dir, name);
        }
    }
    deallocate_String_vector(&children);
    if (!present)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE,
                           "zookeeper: our lock node %s/%s is gone (session expired or reset)", dir,
                           mine);
    *first = best < 0;
    return ST_OK;
}

/* Waits until our node heads the queue, or lock_wait_ms has passed. */
static st_result wait_for_turn(struct worker *w, struct held_lock *held, struct zk_node *node)
{
    const char *dir = node->dir;
    zhandle_t *zh = zk_handle(node->session);
    const char *mine = strrchr(node->path, '/') + 1;
    long long deadline = lock_wait_deadline(w);
    for (int attempt = 1;; attempt++) {
        held->attempts = attempt;
        /* Read the counter before the watch is set, so that an event
         * between setting it and waiting is not missed. */
        unsigned long long seen = zk_events();
        int first = 0;
        char before[ZK_PATH_MAX];
        st_result r = find_place(w, zh, dir, mine, &first, before);
        if (r != ST_OK || first)
            return r;
        /* getData, not exists: on a node already gone it leaves no watch. */
        char data[64];
        int len = sizeof data;
        struct Stat stat;
        int rc = zoo_get(zh, before, 1, data, &len, &stat);
        if (rc == ZNONODE)
            continue;
        if (rc != ZOK)
            return zk_fail(w, rc, "watch", before);
        if (monotonic_ms() >= deadline || !zk_wait_event(seen, deadline))
            return lock_wait_expired(w, "zookeeper lock");
    }
}

static st_result acquire(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    struct zk_node *node = calloc(1, sizeof *node);
    if (!node)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "zk-lock: out of memory");
    held->attempts = 1;
    st_result r = zk_session_get(w, 1, &node->session);
    if (r != ST_OK) {
        free(node);
        return r;
    }
    zhandle_t *zh = zk_handle(node->session);
    char prefix[ZK_PATH_MAX];
    dir_of(node->dir, rq->product);
    /* The token in the name tells whose node it is, even when the answer
     * to the create is lost. */
    snprintf(node->mark, sizeof node->mark, "lock-%s-", held->token);
    snprintf(prefix, sizeof prefix, "%s/%s", node->dir, node->mark);
    int len = (int)strlen(held->token), rc = ZNONODE;
    for (int round = 0; round < 2 && rc == ZNONODE; round++) {
        if (round == 1 && (rc = create_parents(zh, node->dir)) != ZOK)
            break;
        rc = zoo_create(zh, prefix, held->token, len, &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_EPHEMERAL_SEQUENTIAL, node->path, sizeof node->path);
    }
    if (rc != ZOK) {
        r = zk_fail(w, rc, "create", prefix);
        if (zk_outcome_unknown(rc)) /* it may have been made all the same */
            zk_delete_later(node->session, node->dir, node->mark);
        put_node(node);
        return r;
    }
    r = wait_for_turn(w, held, node);
    if (r != ST_OK) {
        delete_node(node);
        put_node(node);
        return r;
    }
    held->state = node;
    return ST_OK;
}

static st_result release(struct worker *w, const struct deduct_request *rq, struct held_lock *held,
                         int *lost)
{
    (void)rq;
    struct zk_node *node = held->state;
    held->state = NULL;
    int rc = delete_node(node);
    /* ZNONODE: the node went before we deleted it - the session expired,
     * or a reset removed it - so someone else may have held the lock too. */
    *lost = rc != ZOK;
    st_result r = rc == ZOK || rc == ZNONODE ? ST_OK : zk_fail(w, rc, "delete", node->path);
    put_node(node);
    return r;
}

/* The product turned out not to exist: delete its queue's parent node, so
 * that unknown products leave nothing behind. Someone else still queued
 * there keeps it (ZNOTEMPTY), and the last one out deletes it. */
static void forget(struct worker *w, const struct deduct_request *rq, struct held_lock *held)
{
    (void)held;
    struct zk_session *s;
    if (zk_session_get(w, 0, &s) != ST_OK)
        return;
    char dir[ZK_DIR_MAX];
    dir_of(dir, rq->product);
    int rc = zoo_delete(zk_handle(s), dir, -1);
    if (rc != ZOK && rc != ZNONODE && rc != ZNOTEMPTY)
        log_warn("zk-lock: could not delete %s: %s", dir, zerror(rc));
    zk_session_put(s);
}

static const struct lock_kind zk_sequential = {
    .name = "zookeeper lock",
    .backend = BACKEND_ZOOKEEPER,
    .tokens = 1,
    .names = {LOCKS_ROOT "/%d"},
    .acquire = acquire,
    .release = release,
    .forget = forget,
};

const struct strategy strategy_zk_lock = {
    .name = "zk-lock",
    .store = &store_mysql,
    .safe_single = 1,
    .safe_multi = 1,
    .caveat = "while the ZooKeeper session lives (it expires after zk-session-ms without contact)",
    .summary = "ZooKeeper ephemeral sequential node, watch on the predecessor only (Curator "
               "recipe) around the nolock body",
    .contention = CONTENTION_WAITS,
    .lock = &zk_sequential,
};
