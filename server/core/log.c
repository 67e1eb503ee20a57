/*
 * log.c - stderr logging. Each event is formatted into one buffer and written
 * with a single write(2), so lines from concurrent workers never interleave.
 */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name, enum log_level *out)
{
    for (unsigned i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void log_event(enum log_level level, const char *fmt, ...)
{
    if (level < log_threshold)
        return;
    char line[1024];
    struct timespec now;
    struct tm utc;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &utc);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &utc);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ", now.tv_nsec / 1000000L,
                          level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int body = vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    n = body < 0 ? n : n + (size_t)body;
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    ssize_t written = write(STDERR_FILENO, line, n);
    (void)written; /* nowhere left to report a failed log write */
}
