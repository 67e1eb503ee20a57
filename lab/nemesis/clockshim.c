/*
 * clockshim.c - a wall clock that can be moved, per process, at run time:
 * LD_PRELOAD=build/clockshim.so CLOCKSHIM_FILE=PATH redis-server ...
 *
 * `make partition` makes one Redlock server's clock jump forward past a
 * lock's TTL (Redis expires keys by its wall clock). libfaketime cannot be
 * used for it: it resolves the real functions with dlsym(), which
 * allocates, and Debian's redis-server allocates with jemalloc, which reads
 * the clock while it starts: the process deadlocks. This shim resolves
 * nothing: it asks the kernel directly (the clock_gettime system call), and
 * adds to the wall clock (CLOCK_REALTIME, its coarse form, gettimeofday,
 * time) the offset in milliseconds that PATH holds as text ("60000"). The
 * monotonic clocks are left alone.
 *
 * PATH is mapped once, shared, and read at every call without a system
 * call, so a jump is seen at once: write the new offset into the file in
 * place, never truncating it (a page beyond its end would fault). Without
 * CLOCKSHIM_FILE the offset is 0; a PATH that cannot be mapped stops the
 * process at start with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define OFFSET_TEXT_MAX 32

static const char *offset_text; /* the mapped file, or NULL: offset 0 */

__attribute__((constructor)) static void map_offset_file(void)
{
    const char *path = getenv("CLOCKSHIM_FILE");
    if (!path || !*path)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    void *map = fd < 0 ? MAP_FAILED : mmap(NULL, OFFSET_TEXT_MAX, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        fprintf(stderr, "clockshim: cannot map CLOCKSHIM_FILE %s: %s\n", path, strerror(errno));
        _exit(111);
    }
    close(fd);
    offset_text = map;
}

static long long offset_ms(void)
{
    if (!offset_text)
        return 0;
    char text[OFFSET_TEXT_MAX + 1];
    memcpy(text, offset_text, OFFSET_TEXT_MAX);
    text[OFFSET_TEXT_MAX] = '\0';
    return strtoll(text, NULL, 10);
}

static int kernel_clock(clockid_t id, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, id, ts);
}

/* Wall-clock times are positive, before and after the shift. */
static void shifted(struct timespec *ts)
{
    long long ns = (long long)ts->tv_sec * 1000000000 + ts->tv_nsec + offset_ms() * 1000000;
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int r = kernel_clock(id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        shifted(ts);
    return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    if (r == 0)
        *tv = (struct timeval){ts.tv_sec, ts.tv_nsec / 1000};
    return r;
}

time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
