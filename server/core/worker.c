/*
 * worker.c - per-thread state, deadlines, and small helpers every request
 * uses (sleeping, clocks, random tokens).
 */
#include "core/worker.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

/* The drain deadline of a stop in progress, 0 while running. */
static _Atomic long long stop_deadline_ms;

struct worker *worker_new(void)
{
    struct worker *w = calloc(1, sizeof *w);
    if (!w)
        abort(); /* a few hundred bytes per thread: out of memory is fatal */
    unsigned int seed;
    if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
        seed = (unsigned int)monotonic_ms();
    w->seed = seed;
    return w;
}

void worker_free(struct worker *w)
{
    if (!w)
        return;
    for (int i = 0; i < BACKEND_COUNT; i++)
        assert(!w->links[i]); /* backends_close() first */
    free(w);
}

void *worker_links(struct worker *w, enum backend_id id, size_t size, int *fresh)
{
    int made = !w->links[id];
    if (made && (w->links[id] = calloc(1, size)) == NULL)
        abort();
    if (fresh)
        *fresh = made;
    return w->links[id];
}

/* A message quotes what the client sent, possibly cut in the middle of a
 * character: JSON would refuse it (jansson drops a string that is not
 * UTF-8), and the reply would lose its message. Bytes of a broken or
 * foreign encoding become '?'. */
static void keep_utf8(char *text)
{
    unsigned char *p = (unsigned char *)text;
    while (*p && *p < 0x80)
        p++;
    if (!*p)
        return; /* ASCII, as nearly every message is: nothing to check */
    json_t *probe = json_string(text);
    if (probe) {
        json_decref(probe);
        return;
    }
    for (; *p; p++)
        if (*p >= 0x80)
            *p = '?';
}

st_result worker_fail(struct worker *w, st_result r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
    keep_utf8(w->error);
    return r;
}

long long effective_deadline(long long own_ms)
{
    long long stop = atomic_load(&stop_deadline_ms);
    if (!own_ms)
        return stop;
    return stop && stop < own_ms ? stop : own_ms;
}

long long worker_deadline(const struct worker *w)
{
    return effective_deadline(w->deadline_ms);
}

st_result worker_check_deadline(struct worker *w)
{
    long long deadline = worker_deadline(w);
    if (!deadline || monotonic_ms() < deadline)
        return ST_OK;
    if (deadline != w->deadline_ms)
        return worker_fail(w, ST_TIMEOUT, "the server is stopping and its drain time is over");
    return worker_fail(w, ST_TIMEOUT, "the request's deadline passed (request-timeout-ms)");
}

void workers_stop_by(long long when_ms)
{
    atomic_store(&stop_deadline_ms, when_ms);
}

int idle_link_closed(int fd, long long used_ms)
{
    if (fd < 0)
        return 1;
    if (monotonic_ms() - used_ms < LINK_IDLE_MS)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) > 0 && p.revents != 0;
}

int worker_random(struct worker *w, int bound)
{
    return bound > 0 ? rand_r(&w->seed) % bound : 0;
}

void sleep_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ; /* resumed after a signal: sleep what is left */
}

long long monotonic_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

long long wall_clock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void timespec_add_ms(struct timespec *t, long long ms)
{
    long long ns = t->tv_nsec + ms % 1000 * 1000000LL;
    t->tv_sec += (time_t)(ms / 1000 + ns / 1000000000LL);
    t->tv_nsec = (long)(ns % 1000000000LL);
}

struct timespec time_in_ms(clockid_t clock, long long ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    timespec_add_ms(&t, ms);
    return t;
}

void cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

long long monotonic_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
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
