/*
 * redis_auth.h - the Redis password (--redis-password, --redis-password-file)
 * given on every connection stockd makes to a Redis server or a Sentinel.
 */
#ifndef STOCKD_REDIS_AUTH_H
#define STOCKD_REDIS_AUTH_H

#include <hiredis/hiredis.h>
#include <stddef.h>

/* Whether a password is configured. */
int redis_auth_enabled(void);

/* Gives the password on a fresh blocking connection (AUTH); 0, or -1 with
 * why (the server's error, or the connection's). Nothing to do, 0, when no
 * password is configured. */
int redis_auth(redisContext *c, char *why, size_t size);

/* Appends the AUTH to a fresh non-blocking connection's output, ahead of
 * everything else; its reply is the first to come (see redis_auth_refused).
 * 0, or -1 when hiredis is out of memory. Only with a password configured. */
int redis_auth_append(redisContext *c);

/* Whether `reply` to the AUTH refuses it (an error reply); why, then. */
const char *redis_auth_refused(const redisReply *reply);

#endif
