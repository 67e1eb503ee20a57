/*
 * redis_cluster.h - the main Redis as a Redis Cluster: which node serves a
 * key, learnt and kept up to date the way a cluster client does it.
 *
 * With --redis-cluster (STOCKD_REDIS_CLUSTER) set, the main Redis - the
 * redis store, the Redis locks - is a Redis Cluster, and every command goes
 * to the primary that serves its keys' slot. Debian packages no cluster
 * client for C, so this file does what one does, on hiredis:
 *
 *   the map    which node serves each of the 16384 slots, from CLUSTER
 *              SLOTS asked of the configured nodes (then of the ones it
 *              named), by one thread, at start and whenever a request
 *              meets a sign that it moved (redis_cluster_suspect());
 *   the slot   CRC16 (XMODEM) of a key's hash tag ({...}), or of the whole
 *              key when it has none, modulo 16384;
 *   redirects  a MOVED reply names the node that serves the slot now: the
 *              map takes it at once and is refreshed; an ASK reply names
 *              the node a migrating slot's key is on for this one command
 *              (redis.c sends ASKING and the command there).
 *
 * Every key of one product carries the hash tag {P} (redis.h), so a
 * product's keys, its scripts, its transactions and its locks are on one
 * node and never CROSSSLOT. The map is read without a lock: a request
 * costs one atomic load to find its node. While a slot has no primary the
 * map says so and its requests answer 503 backend_unavailable at once.
 */
#ifndef STOCKD_REDIS_CLUSTER_H
#define STOCKD_REDIS_CLUSTER_H

#include "core/config.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stddef.h>

#define REDIS_CLUSTER_SLOTS 16384

/* The most nodes the map may know (primaries, past and present). */
#define REDIS_CLUSTER_NODES_MAX 32

/* Whether the main Redis is a Redis Cluster. */
int redis_cluster_enabled(void);

/* Learns the map (at start, no configured node answering is an error,
 * logged: stockd does not start), then starts the thread that keeps it. 0
 * when no cluster is configured. */
int redis_cluster_start(void);
void redis_cluster_stop(void);

/* The slot of `key` (`len` bytes): CRC16 of its hash tag, or of the key. */
int redis_cluster_key_slot(const char *key, size_t len);

/* What a command's slot may be besides a slot's number (0 and up). */
enum slot_code {
    SLOT_NO_KEY = -1, /* the command has no key (MULTI, WAIT, SCRIPT, PING...) */
    SLOT_SPLIT = -2,  /* its keys are in different slots */
};

/* The slot of a command's keys, or a slot_code. */
int redis_cluster_command_slot(int argc, const char *const *argv);

/* The node serving `slot` now (an index for redis_cluster_node()), -1
 * while none does. */
int redis_cluster_node_of(int slot);

/* A node that serves some slot, for commands that have no key (-1: none). */
int redis_cluster_any_node(void);

/* The address of node `node`: it never changes once the index is given. */
const struct server_addr *redis_cluster_node(int node);

enum redis_redirect { REDIRECT_NONE, REDIRECT_MOVED, REDIRECT_ASK, REDIRECT_TRYAGAIN };

/* Whether `reply` redirects the command: MOVED (the map takes the new node
 * at once and a refresh is asked for) or ASK (for this command only); the
 * node it names into *node. TRYAGAIN: the command's keys are split by a
 * slot's migration, nothing ran, the same command will run once the keys
 * are together again (*node untouched). REDIRECT_NONE for any other reply,
 * and for a redirect to a node the map has no room for. */
enum redis_redirect redis_cluster_redirect(const redisReply *reply, int *node);

/* A node's link broke or a slot had no primary: asks the thread to learn
 * the map again. Never waits. */
void redis_cluster_suspect(void);

/* Adds the cluster to the main Redis's /health entry: each primary and how
 * many slots it serves, the slots none serves, the redirects met so far
 * (moved, ask, tryagain) and why the map could not be learnt, if it could not. */
void redis_cluster_describe(json_t *state);

#endif
