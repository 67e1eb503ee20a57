/*
 * sentinel.c - discovering and following the primary the Sentinels name
 * (sentinel.h says why one thread does it for every link).
 *
 * The thread's loop: keep a subscription to +switch-master on one
 * Sentinel; discover when asked (a message about our group, a suspecting
 * link, a fresh subscription that may have missed a message), at most once
 * per SENTINEL_RETRY_MS, and again every SENTINEL_RETRY_MS while there is
 * no primary. It waits in poll() on the subscription and an eventfd that
 * sentinel_suspect() and sentinel_stop() write to, so a request for a
 * discovery is seen at once.
 *
 * Every connection the thread makes is bounded by connect-timeout-ms for
 * its connect and each reply, never io-timeout-ms: a Sentinel that hangs
 * must not keep the others from being asked.
 */
#include "backend/sentinel.h"

#include "backend/redis_auth.h"
#include "backend/redis_connect.h"
#include "core/config.h"
#include "core/log.h"
#include "core/worker.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* --redis-sentinel and --redis-master-name, parsed by config_load(). */
static const struct server_list *const sentinels = &config.sentinels;
static const char *const master_name = config.redis_master_name;

/* The primary in force. Guarded by `lock`; `generation` is also read
 * without it, to notice that it moved. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char primary_host[CONFIG_TEXT_MAX]; /* "": none */
static int primary_port;
static char no_primary[256]; /* why there is none */
static atomic_uint generation;
static int suspected; /* a link asked for a discovery */

static pthread_t thread;
static int running;
static atomic_int stopping;
static int wake_fd = -1;

int sentinel_enabled(void)
{
    return sentinels->count > 0;
}

static struct timeval timeout(void)
{
    return (struct timeval){config.connect_timeout_ms / 1000,
                            (config.connect_timeout_ms % 1000) * 1000};
}

/* A blocking connection to host:port, bounded as the top comment says;
 * NULL with why. */
static redisContext *connect_to(const char *host, int port, char *why, size_t size)
{
    redisContext *c = redis_connect(host, port, config.connect_timeout_ms);
    char refused[160] = "";
    if (c && !c->err && redisSetTimeout(c, timeout()) == REDIS_OK &&
        redis_auth(c, refused, sizeof refused) == 0)
        return c;
    snprintf(why, size, "%.64s:%d: %.150s", host, port,
             refused[0] ? refused
             : c        ? c->errstr
                        : "out of memory");
    redisFree(c);
    return NULL;
}

/* Whether host:port answers ROLE with "master"; else why not. */
static int is_master(const char *host, int port, char *why, size_t size)
{
    redisContext *c = connect_to(host, port, why, size);
    if (!c)
        return 0;
    redisReply *role = redisCommand(c, "ROLE");
    int master = role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                 role->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(role->element[0]->str, "master") == 0;
    if (!master)
        snprintf(why, size, "%.64s:%d: %.100s", host, port,
                 !role                             ? c->errstr
                 : role->type == REDIS_REPLY_ERROR ? role->str
                 : role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
                         role->element[0]->type == REDIS_REPLY_STRING
                     ? "is a replica, not the primary"
                     : "unexpected reply to ROLE");
    freeReplyObject(role);
    redisFree(c);
    return master;
}

/* Asks Sentinel `s` which primary it names, into host/port; 0, or -1 with
 * why. */
static int ask_sentinel(const struct server_addr *s, char *host, size_t host_size, int *port,
                        char *why, size_t size)
{
    redisContext *c = connect_to(s->host, s->port, why, size);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", master_name);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING;
    if (ok) {
        snprintf(host, host_size, "%s", r->element[0]->str);
        *port = atoi(r->element[1]->str);
    } else {
        snprintf(why, size, "sentinel %.64s:%d: %.100s", s->host, s->port,
                 !r                             ? c->errstr
                 : r->type == REDIS_REPLY_NIL   ? "knows no master by that name"
                 : r->type == REDIS_REPLY_ERROR ? r->str
                                                : "unexpected reply");
    }
    freeReplyObject(r);
    redisFree(c);
    return ok ? 0 : -1;
}

/* Sets the primary in force (host "" for none, with why); a change makes
 * a new generation. */
static void set_primary(const char *host, int port, const char *why)
{
    pthread_mutex_lock(&lock);
    int changed = strcmp(host, primary_host) != 0 || port != primary_port;
    if (changed) {
        snprintf(primary_host, sizeof primary_host, "%s", host);
        primary_port = port;
        atomic_fetch_add(&generation, 1);
    }
    snprintf(no_primary, sizeof no_primary, "%s", why);
    pthread_mutex_unlock(&lock);
    if (changed && *host)
        log_info("redis sentinel: the primary of '%s' is %s:%d", master_name, host, port);
    else if (changed)
        log_warn("redis sentinel: no primary for '%s': %s", master_name, why);
}

/* Asks the Sentinels in turn until one names a server that is the primary;
 * records what was found. 0 when there is a primary. */
static int discover(void)
{
    char why[sizeof no_primary] = "no sentinel configured";
    for (int i = 0; i < sentinels->count; i++) {
        char host[CONFIG_TEXT_MAX], reason[200];
        int port;
        if (ask_sentinel(&sentinels->at[i], host, sizeof host, &port, reason, sizeof reason) == 0 &&
            is_master(host, port, reason, sizeof reason)) {
            set_primary(host, port, "");
            return 0;
        }
        snprintf(why, sizeof why, "%s%s", i ? "no sentinel named a live primary; last: " : "",
                 reason);
    }
    set_primary("", 0, why);
    return -1;
}

/* Subscribes to +switch-master on Sentinel `i`; NULL if it does not
 * answer. */
static redisContext *subscribe(int i)
{
    char why[200];
    redisContext *c = connect_to(sentinels->at[i].host, sentinels->at[i].port, why, sizeof why);
    if (!c) {
        log_warn("redis sentinel: cannot follow %s", why);
        return NULL;
    }
    redisReply *r = redisCommand(c, "SUBSCRIBE +switch-master");
    int ok = r && r->type == REDIS_REPLY_ARRAY;
    freeReplyObject(r);
    if (!ok) {
        log_warn("redis sentinel %s:%d: SUBSCRIBE +switch-master failed", sentinels->at[i].host,
                 sentinels->at[i].port);
        redisFree(c);
        return NULL;
    }
    log_debug("redis sentinel: following %s:%d", sentinels->at[i].host, sentinels->at[i].port);
    return c;
}

/* Reads the messages that arrived; whether one is about our group (its
 * payload: "<name> <old ip> <old port> <new ip> <new port>"). -1: the
 * connection broke. */
static int read_messages(redisContext *c)
{
    if (redisBufferRead(c) != REDIS_OK)
        return -1;
    int ours = 0;
    size_t name_len = strlen(master_name);
    for (;;) {
        void *got = NULL;
        if (redisGetReplyFromReader(c, &got) != REDIS_OK)
            return -1;
        if (!got)
            return ours;
        redisReply *m = got;
        if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
            m->element[2]->type == REDIS_REPLY_STRING &&
            strncmp(m->element[2]->str, master_name, name_len) == 0 &&
            m->element[2]->str[name_len] == ' ')
            ours = 1;
        freeReplyObject(m);
    }
}

static void *follow(void *arg)
{
    (void)arg;
    redisContext *sub = NULL;
    int next = 0, wanted = 0;
    long long last = monotonic_ms();
    while (!atomic_load(&stopping)) {
        if (!sub) {
            sub = subscribe(next);
            next = (next + 1) % sentinels->count;
            wanted = 1; /* a message may have come while no one listened */
        }
        pthread_mutex_lock(&lock);
        wanted |= suspected || !primary_host[0];
        suspected = 0;
        pthread_mutex_unlock(&lock);
        long long wait = 1000;
        if (wanted) {
            long long since = monotonic_ms() - last;
            if (since >= SENTINEL_RETRY_MS) {
                discover();
                last = monotonic_ms();
                wanted = 0;
            } else {
                wait = SENTINEL_RETRY_MS - since;
            }
        }
        struct pollfd fds[2] = {{.fd = wake_fd, .events = POLLIN},
                                {.fd = sub ? sub->fd : -1, .events = POLLIN}};
        if (!sub)
            wait = SENTINEL_RETRY_MS;
        if (poll(fds, 2, (int)wait) <= 0)
            continue;
        if (fds[0].revents & POLLIN) {
            uint64_t n;
            if (read(wake_fd, &n, sizeof n) < 0)
                log_debug("redis sentinel: wake-up read failed");
        }
        if (sub && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            int ours = read_messages(sub);
            if (ours < 0) {
                log_warn("redis sentinel: lost the +switch-master subscription; following the "
                         "next sentinel");
                redisFree(sub);
                sub = NULL;
            }
            wanted |= ours > 0;
        }
    }
    redisFree(sub);
    return NULL;
}

static void wake(void)
{
    uint64_t one = 1;
    if (wake_fd >= 0 && write(wake_fd, &one, sizeof one) < 0)
        log_debug("redis sentinel: wake-up write failed");
}

int sentinel_start(void)
{
    if (!sentinel_enabled())
        return 0;
    if (discover() != 0) {
        char why[sizeof no_primary];
        sentinel_primary(NULL, 0, NULL, why, sizeof why);
        log_error("redis sentinel: no primary for master name '%s': %s", master_name, why);
        return -1;
    }
    wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    atomic_store(&stopping, 0);
    if (wake_fd < 0 || pthread_create(&thread, NULL, follow, NULL) != 0) {
        log_error("redis sentinel: cannot start the thread that follows the primary");
        return -1;
    }
    running = 1;
    return 0;
}

void sentinel_stop(void)
{
    if (running) {
        atomic_store(&stopping, 1);
        wake();
        pthread_join(thread, NULL);
        running = 0;
    }
    if (wake_fd >= 0)
        close(wake_fd);
    wake_fd = -1;
}

unsigned sentinel_generation(void)
{
    return atomic_load_explicit(&generation, memory_order_acquire);
}

unsigned sentinel_primary(char *host, size_t size, int *port, char *why, size_t why_size)
{
    pthread_mutex_lock(&lock);
    unsigned g = atomic_load(&generation);
    if (host) {
        snprintf(host, size, "%s", primary_host);
        *port = primary_port;
    }
    if (why)
        snprintf(why, why_size, "%s", no_primary);
    pthread_mutex_unlock(&lock);
    return g;
}

void sentinel_suspect(unsigned seen)
{
    if (!sentinel_enabled() || seen != sentinel_generation())
        return;
    pthread_mutex_lock(&lock);
    suspected = 1;
    pthread_mutex_unlock(&lock);
    wake();
}

void sentinel_describe(json_t *state)
{
    if (!sentinel_enabled())
        return;
    json_t *list = json_array();
    for (int i = 0; i < sentinels->count; i++)
        json_array_append_new(list,
                              json_sprintf("%s:%d", sentinels->at[i].host, sentinels->at[i].port));
    pthread_mutex_lock(&lock);
    json_object_set_new(state, "primary",
                        primary_host[0] ? json_sprintf("%s:%d", primary_host, primary_port)
                                        : json_null());
    if (!primary_host[0])
        json_object_set_new(state, "no_primary", json_string(no_primary));
    pthread_mutex_unlock(&lock);
    json_object_set_new(state, "master_name", json_string(master_name));
    json_object_set_new(state, "sentinels", list);
}
