/*
 * worker.c - per-thread state, created on first use and torn down by the
 * thread-specific key's destructor when libmicrohttpd joins its threads.
 */
#include "worker.h"

#include "config.h"
#include "mysql_store.h"

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

static pthread_key_t worker_key;
static pthread_once_t worker_key_once = PTHREAD_ONCE_INIT;

static void worker_destroy(void *p)
{
    struct worker *w = p;
    mysql_store_disconnect(w);
    redis_link_close(&w->redis);
    redis_link_close(&w->subscriber);
    for (int i = 0; i < REDLOCK_MAX; i++)
        redis_link_close(&w->redlock[i]);
    mysql_thread_end();
    free(w);
}

static void worker_key_create(void)
{
    if (pthread_key_create(&worker_key, worker_destroy) != 0)
        abort(); /* cannot run without per-thread state */
}

struct worker *worker_self(void)
{
    pthread_once(&worker_key_once, worker_key_create);
    struct worker *w = pthread_getspecific(worker_key);
    if (w)
        return w;
    w = calloc(1, sizeof *w);
    if (!w)
        abort(); /* a few hundred bytes per thread: out of memory is fatal */
    unsigned int seed;
    if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
        seed = (unsigned int)monotonic_ms();
    w->seed = seed;
    w->redis.host = config.redis_host;
    w->redis.port = config.redis_port;
    w->subscriber.host = config.redis_host;
    w->subscriber.port = config.redis_port;
    pthread_setspecific(worker_key, w);
    return w;
}

void worker_release_self(void)
{
    pthread_once(&worker_key_once, worker_key_create);
    struct worker *w = pthread_getspecific(worker_key);
    if (!w)
        return;
    pthread_setspecific(worker_key, NULL);
    worker_destroy(w);
}

st_result worker_fail(struct worker *w, st_result r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
    return r;
}

void worker_drop_dead_links(struct worker *w)
{
    mysql_store_drop_if_closed(w);
    redis_link_drop_if_closed(&w->redis);
    redis_link_drop_if_closed(&w->subscriber); /* idle: unsubscribed between requests */
    for (int i = 0; i < REDLOCK_MAX; i++)
        redis_link_drop_if_closed(&w->redlock[i]);
}

int socket_peer_closed(int fd)
{
    if (fd < 0)
        return 1;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) > 0 && p.revents != 0;
}

int worker_random(struct worker *w, int bound)
{
    return bound > 0 ? rand_r(&w->seed) % bound : 0;
}

void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&t, &t) != 0)
        ; /* resumed after a signal: sleep what is left */
}

long long monotonic_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void random_token(char *out, size_t bytes)
{
    unsigned char raw[64];
    if (bytes > sizeof raw)
        bytes = sizeof raw;
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(raw + got, bytes - got, 0);
        if (n <= 0)
            abort(); /* the kernel's random source does not fail on Linux >= 3.17 */
        got += (size_t)n;
    }
    for (size_t i = 0; i < bytes; i++)
        sprintf(out + 2 * i, "%02x", raw[i]);
}
