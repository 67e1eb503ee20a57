/*
 * redis_connect.c - Redis connections from --bind-source (redis_connect.h).
 *
 * hiredis 0.14 binds a source address only on a non-blocking connect
 * (redisConnectBindNonBlock), so the blocking form waits for that connect
 * itself, bounded by the timeout, and hands the connected socket to a
 * blocking context (redisConnectFd).
 */
#include "backend/redis_connect.h"

#include "core/config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Marks `c` failed with `what` and errno's text, as hiredis marks its own. */
static redisContext *failed(redisContext *c, const char *what, int err)
{
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof c->errstr, "%.24s (from %.40s): %.50s", what, config.bind_source,
             strerror(err));
    return c;
}

redisContext *redis_connect(const char *host, int port, int timeout_ms)
{
    if (!config.bind_source[0])
        return redisConnectWithTimeout(
            host, port, (struct timeval){timeout_ms / 1000, (timeout_ms % 1000) * 1000});
    redisContext *pending = redisConnectBindNonBlock(host, port, config.bind_source);
    if (!pending || pending->err)
        return pending;
    struct pollfd p = {.fd = pending->fd, .events = POLLOUT};
    int ready = poll(&p, 1, timeout_ms);
    if (ready < 0)
        return failed(pending, "connect: poll", errno);
    if (ready == 0)
        return failed(pending, "connect", ETIMEDOUT);
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(pending->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        return failed(pending, "connect: getsockopt", errno);
    if (err)
        return failed(pending, "connect", err);
    int fd = dup(pending->fd);
    if (fd < 0)
        return failed(pending, "connect: dup", errno);
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        close(fd);
        return failed(pending, "connect: fcntl", errno);
    }
    redisFree(pending);
    redisContext *c = redisConnectFd(fd);
    if (!c)
        close(fd);
    return c;
}

redisContext *redis_connect_nonblock(const char *host, int port)
{
    return config.bind_source[0] ? redisConnectBindNonBlock(host, port, config.bind_source)
                                 : redisConnectNonBlock(host, port);
}
