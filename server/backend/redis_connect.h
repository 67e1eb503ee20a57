/*
 * redis_connect.h - every connection stockd makes to a Redis server or a
 * Sentinel (hiredis), made from --bind-source when it is set.
 *
 * A lab that cuts the links between addresses (nftables rules between
 * 127.0.0.N) must see each stockd's backend connections come from that
 * stockd's own address; without the option the system picks it, as before.
 */
#ifndef STOCKD_REDIS_CONNECT_H
#define STOCKD_REDIS_CONNECT_H

#include <hiredis/hiredis.h>

/* A blocking connection to host:port, the connect bounded by `timeout_ms`.
 * NULL when out of memory; else the caller checks ->err and frees it. */
redisContext *redis_connect(const char *host, int port, int timeout_ms);

/* A non-blocking connection to host:port, its connect under way. */
redisContext *redis_connect_nonblock(const char *host, int port);

#endif
