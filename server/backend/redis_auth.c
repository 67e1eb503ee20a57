/*
 * redis_auth.c - the Redis password on every connection.
 *
 * A Redis server with requirepass (the private stack's, so that another
 * local user cannot read, flush or DEBUG SLEEP the lab's data) answers
 * nothing but AUTH until a connection gives the password; a Sentinel with
 * one does the same. So each connection gives it before anything else: a
 * worker's links, the Redlock servers' and the Sentinel connections, which
 * block, right after connecting (redis_auth); a loop's non-blocking pipe by
 * writing the AUTH first, its reply the first to read (redis_auth_append).
 * One password serves them all, as the stack gives every server the same.
 * Without a password configured nothing is sent.
 */
#include "backend/redis_auth.h"

#include "core/config.h"

#include <stdio.h>
#include <string.h>

int redis_auth_enabled(void)
{
    return config.redis_password[0] != '\0';
}

int redis_auth(redisContext *c, char *why, size_t size)
{
    if (!redis_auth_enabled())
        return 0;
    const char *argv[] = {"AUTH", config.redis_password};
    redisReply *reply = redisCommandArgv(c, 2, argv, NULL);
    const char *refused = reply ? redis_auth_refused(reply) : c->errstr;
    if (refused)
        snprintf(why, size, "AUTH: %.150s", refused);
    freeReplyObject(reply);
    return refused ? -1 : 0;
}

int redis_auth_append(redisContext *c)
{
    const char *argv[] = {"AUTH", config.redis_password};
    return redisAppendCommandArgv(c, 2, argv, NULL) == REDIS_OK ? 0 : -1;
}

const char *redis_auth_refused(const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_ERROR)
        return reply->str;
    return reply->type == REDIS_REPLY_STATUS ? NULL : "unexpected reply to AUTH";
}
