/*
 * listener.c - the listening socket and the loops' shares of it
 * (listener.h says why).
 *
 * Each loop's count of open connections is an atomic the loop itself
 * keeps (listener_count, from libmicrohttpd's connection notices on that
 * loop); any loop reads them all to know whether it is among the fewest.
 */
#include "http/listener.h"

#include "core/log.h"
#include "core/worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* At most this many connections accepted per call, so that a loop's turn
 * stays short however many wait. */
#define ACCEPT_BURST 16
/* After running out of descriptors or memory, accepting rests this long
 * instead of spinning on a socket that stays readable. */
#define ACCEPT_REST_MS 100

static int listen_fd = -1;
static int loop_count;
static unsigned per_loop_limit;
static atomic_uint *counts; /* open connections per loop */
static atomic_int shut;
static _Atomic long long resting_until_ms;

int listener_open(const char *address, int port, int loops, unsigned limit)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, address, &addr.sin_addr) != 1) {
        log_error("listen address '%s' is not an IPv4 address", address);
        return -1;
    }
    counts = calloc((size_t)loops, sizeof *counts);
    if (!counts) {
        log_error("cannot listen: out of memory");
        return -1;
    }
    loop_count = loops;
    per_loop_limit = limit;
    atomic_store(&shut, 0);
    atomic_store(&resting_until_ms, 0);
    /* Non-blocking: a loop that loses the race for a connection must not
     * wait in accept(). */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1; /* a restart need not wait for the last run's TIME_WAITs */
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 1024) != 0) {
        log_error("cannot listen on %s:%d: %s", address, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        listener_close();
        return -1;
    }
    listen_fd = fd;
    return 0;
}

static unsigned fewest(void)
{
    unsigned least = atomic_load(&counts[0]);
    for (int i = 1; i < loop_count; i++) {
        unsigned n = atomic_load(&counts[i]);
        if (n < least)
            least = n;
    }
    return least;
}

/* Whether loop `i` may take a connection now. */
static int may_take(int i)
{
    unsigned mine = atomic_load(&counts[i]);
    long long resting = atomic_load(&resting_until_ms);
    return !atomic_load(&shut) && mine < per_loop_limit && mine <= fewest() + 1 &&
           (!resting || monotonic_ms() >= resting);
}

int listener_fd_for(int i)
{
    return may_take(i) ? listen_fd : -1;
}

/* accept() failed with `error`: whether to try again at once. */
static int accept_again(int error)
{
    if (error == EINTR || error == ECONNABORTED)
        return 1;
    if (error != EAGAIN && error != EWOULDBLOCK && !atomic_load(&shut)) {
        log_warn("http: cannot accept a connection: %s (resting %d ms)", strerror(error),
                 ACCEPT_REST_MS);
        atomic_store(&resting_until_ms, monotonic_ms() + ACCEPT_REST_MS);
    }
    return 0;
}

int listener_take(int i,
                  void (*take)(void *arg, int fd, const struct sockaddr *addr, socklen_t len),
                  void *arg)
{
    int took = 0;
    while (took < ACCEPT_BURST && may_take(i)) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (accept_again(errno))
                continue;
            break;
        }
        took++;
        take(arg, fd, (const struct sockaddr *)&addr, len);
    }
    return took && !may_take(i);
}

void listener_count(int i, int delta)
{
    if (delta > 0)
        atomic_fetch_add(&counts[i], (unsigned)delta);
    else
        atomic_fetch_sub(&counts[i], (unsigned)-delta);
}

void listener_shut(void)
{
    atomic_store(&shut, 1);
    if (listen_fd >= 0)
        shutdown(listen_fd, SHUT_RDWR);
}

void listener_close(void)
{
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
    free(counts);
    counts = NULL;
    loop_count = 0;
}
