/*
 * log.h - one line per event on stderr: time, level, message.
 */
#ifndef STOCKD_LOG_H
#define STOCKD_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Events below this level are dropped. Set once at startup. */
extern enum log_level log_threshold;

/* Parses "debug", "info", "warn" or "error"; returns 0 on success. */
int log_level_parse(const char *name, enum log_level *out);

void log_event(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_event(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_event(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_event(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_event(LOG_ERROR, __VA_ARGS__)

#endif
