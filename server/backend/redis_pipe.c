/*
 * redis_pipe.c - an HTTP loop's non-blocking connection to the main Redis
 * (redis_pipe.h says why and how it is used).
 *
 * A call moves through two lists: `queued` (not written yet) and `sent`
 * (written, waiting for its reply, in the order Redis will answer). A
 * SCRIPT LOAD written ahead of a script's first call on a connection sits
 * in `sent` too, as one of the pipe's own `loads`, so that replies and
 * entries always pair up one to one; so does the AUTH written first on a
 * new connection when Redis has a password (redis_auth.h), the pipe's
 * `auth`.
 */
#include "backend/redis_pipe.h"

#include "backend/backend.h"
#include "backend/redis.h"
#include "backend/redis_auth.h"
#include "backend/redis_connect.h"
#include "backend/sentinel.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/worker.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The scripts one connection has had loaded: each lua row has one. */
#define SCRIPTS_MAX 4

/* The last command the pipe formatted, and hiredis' formatting of it: a
 * loop sends the same call (one script, one product, one quantity) over and
 * over, and hiredis would format every argument anew for each. Its
 * arguments are kept, each with its NUL, to tell the next call whether it is
 * the same; one too long to keep is formatted every time. */
#define KEPT_ARGS_MAX 512

struct formatted {
    char *cmd; /* hiredis' sds, or NULL */
    int len;
    int argc; /* -1: not kept */
    char args[KEPT_ARGS_MAX];
};

struct call_list {
    struct pipe_call *head, **end;
};

struct redis_pipe {
    redisContext *ctx;          /* NULL: no connection                      */
    char host[CONFIG_TEXT_MAX]; /* the server it connects to: the main Redis, */
    int port;                   /* or under Sentinel the primary of...     */
    unsigned generation;        /* ...this generation (sentinel.h)         */
    int moved;                  /* a READONLY reply: the server is a replica */
    int connected;              /* the connect finished: written means sent */
    int writing;                /* bytes are left to write                  */
    long long connect_ms;       /* when the connect began                   */
    int connections;            /* made so far: after the first, reconnects */
    struct call_list queued, sent;
    int loaded;                          /* scripts loaded on this connection        */
    struct pipe_call loads[SCRIPTS_MAX]; /* their SCRIPT LOADs          */
    /* Each load's state. A load's pipe_call is linked into `sent` until its
     * reply comes, so a slot is written again only once it is LOAD_AGAIN:
     * answered, and to be sent anew. */
    enum { LOAD_SENT, LOAD_DONE, LOAD_AGAIN } load_state[SCRIPTS_MAX];
    struct pipe_call auth; /* the connection's AUTH       */
    struct formatted last;
};

static void list_init(struct call_list *l)
{
    l->head = NULL;
    l->end = &l->head;
}

static void list_push(struct call_list *l, struct pipe_call *call)
{
    call->next = NULL;
    *l->end = call;
    l->end = &call->next;
}

static struct pipe_call *list_pop(struct call_list *l)
{
    struct pipe_call *call = l->head;
    if (call && !(l->head = call->next))
        l->end = &l->head;
    return call;
}

/* Moves every call of `from` to `to`, which was empty. */
static void list_move(struct call_list *to, struct call_list *from)
{
    to->head = from->head;
    to->end = from->head ? from->end : &to->head;
}

/* An entry of the pipe's own (a SCRIPT LOAD, the AUTH): no caller to answer. */
static int is_load(const struct pipe_call *call)
{
    return call->done.answer == NULL;
}

struct redis_pipe *redis_pipe_new(void)
{
    struct redis_pipe *p = calloc(1, sizeof *p);
    if (p) {
        list_init(&p->queued);
        list_init(&p->sent);
    }
    return p;
}

/* Answers a caller's call: the reply (ST_OK) or why not. */
static void answer_call(struct pipe_call *call, st_result r, const redisReply *reply,
                        const char *why)
{
    call->reply = reply;
    call->done.answer(&call->done, r, why);
}

/* Answers every call of `l` with `r` and empties it (loads are dropped). */
static void fail_all(struct call_list *l, st_result r, const char *why)
{
    for (struct pipe_call *call; (call = list_pop(l)) != NULL;)
        if (!is_load(call))
            answer_call(call, r, NULL, why);
}

/* The connection broke (or gave up) while doing `what`: what was sent may
 * have run, nothing queued was sent. The queued calls wait for the next
 * flush. `detail` says how; NULL: hiredis' error, or "connection lost". */
static void drop_connection(struct redis_pipe *p, const char *what, const char *detail)
{
    if (!detail)
        detail = p->ctx && p->ctx->err ? p->ctx->errstr : "connection lost";
    char why[256];
    snprintf(why, sizeof why, "redis %.64s:%d: %.40s: %.100s", p->host, p->port, what, detail);
    log_warn("%s", why);
    redisFree(p->ctx);
    p->ctx = NULL;
    p->writing = 0;
    p->loaded = 0;
    sentinel_suspect(p->generation);
    int sent = p->connected;
    p->connected = 0;
    if (sent) {
        char unknown[sizeof why + 48];
        snprintf(unknown, sizeof unknown, "%s (the sale was sent; its reply was lost)", why);
        fail_all(&p->sent, ST_OUTCOME_UNKNOWN, unknown);
    } else {
        fail_all(&p->sent, ST_BACKEND_UNAVAILABLE, why);
    }
}

void redis_pipe_free(struct redis_pipe *p)
{
    if (!p)
        return;
    if (p->sent.head)
        drop_connection(p, "stopping", "stockd is stopping");
    redisFree(p->ctx);
    fail_all(&p->queued, ST_SHUTTING_DOWN, "stockd is stopping");
    redisFreeSdsCommand(p->last.cmd);
    free(p);
}

void redis_pipe_call(struct redis_pipe *p, struct pipe_call *call)
{
    list_push(&p->queued, call);
}

/* Which server to connect to: the main Redis, or under Sentinel the
 * primary in force; 0, or -1 with every queued call answered while there
 * is none. */
static int choose_server(struct redis_pipe *p)
{
    p->moved = 0;
    if (!sentinel_enabled()) {
        snprintf(p->host, sizeof p->host, "%s", config.redis_host);
        p->port = config.redis_port;
        return 0;
    }
    char why[200], message[256];
    p->generation = sentinel_primary(p->host, sizeof p->host, &p->port, why, sizeof why);
    if (p->host[0])
        return 0;
    snprintf(message, sizeof message, "redis: no primary: %s", why);
    fail_all(&p->queued, ST_BACKEND_UNAVAILABLE, message);
    return -1;
}

/* Starts a non-blocking connect; 0, or -1 with every queued call answered. */
static int connect_pipe(struct redis_pipe *p)
{
    if (choose_server(p) != 0)
        return -1;
    if (p->connections++)
        metrics_reconnect(BACKEND_REDIS);
    p->ctx = redis_connect_nonblock(p->host, p->port);
    p->connect_ms = monotonic_ms();
    int authed =
        p->ctx && !p->ctx->err && (!redis_auth_enabled() || redis_auth_append(p->ctx) == 0);
    if (authed && redis_auth_enabled()) {
        p->auth = (struct pipe_call){.sent_ms = p->connect_ms};
        list_push(&p->sent, &p->auth);
    }
    if (authed)
        return 0;
    char why[256];
    snprintf(why, sizeof why, "redis %.64s:%d: connect: %.100s", p->host, p->port,
             !p->ctx       ? "out of memory"
             : p->ctx->err ? p->ctx->errstr
                           : "out of memory");
    redisFree(p->ctx);
    p->ctx = NULL;
    fail_all(&p->queued, ST_BACKEND_UNAVAILABLE, why);
    return -1;
}

/* Writes what hiredis holds; on a break, drops the connection. */
static void write_out(struct redis_pipe *p)
{
    int done = 1;
    if (p->connected && redisBufferWrite(p->ctx, &done) != REDIS_OK) {
        drop_connection(p, "write", NULL);
        return;
    }
    p->writing = !done;
}

/* Whether calls of `script` can be written now: once a SCRIPT LOAD of it
 * is on its way on this connection (written here if not) and its SHA1 is
 * known. */
static int script_ready(struct redis_pipe *p, struct redis_script *script, long long now)
{
    int i = 0;
    while (i < p->loaded && p->loads[i].script != script)
        i++;
    if (i == p->loaded || p->load_state[i] == LOAD_AGAIN) {
        assert(i < SCRIPTS_MAX); /* a pipe carries a few scripts: add room here */
        const char *argv[] = {"SCRIPT", "LOAD", script->source};
        if (redisAppendCommandArgv(p->ctx, 3, argv, NULL) != REDIS_OK)
            return 0;
        p->loads[i] = (struct pipe_call){.script = script, .sent_ms = now};
        p->load_state[i] = LOAD_SENT;
        list_push(&p->sent, &p->loads[i]);
        if (i == p->loaded)
            p->loaded++;
    }
    return atomic_load_explicit(&script->known, memory_order_acquire);
}

/* After a NOSCRIPT (SCRIPT FLUSH): every script this connection had loaded
 * is loaded again with the next write; a load still in flight is not
 * touched - its own reply says how it went. */
static void load_again(struct redis_pipe *p)
{
    for (int i = 0; i < p->loaded; i++)
        if (p->load_state[i] == LOAD_DONE)
            p->load_state[i] = LOAD_AGAIN;
}

/* Whether `argv` is the command `f` holds. */
static int same_command(const struct formatted *f, int argc, const char **argv)
{
    if (!f->cmd || f->argc != argc)
        return 0;
    const char *kept = f->args;
    for (int i = 0; i < argc; i++) {
        if (strcmp(kept, argv[i]) != 0)
            return 0;
        kept += strlen(kept) + 1;
    }
    return 1;
}

/* Has hiredis format `argv` into `f`; 0, or -1 when out of memory. */
static int format_command(struct formatted *f, int argc, const char **argv)
{
    char *cmd;
    int len = redisFormatSdsCommandArgv(&cmd, argc, argv, NULL);
    if (len < 0)
        return -1;
    redisFreeSdsCommand(f->cmd);
    f->cmd = cmd;
    f->len = len;
    f->argc = -1;
    size_t at = 0;
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]) + 1;
        if (n > sizeof f->args - at)
            return 0;
        memcpy(f->args + at, argv[i], n);
        at += n;
    }
    f->argc = argc;
    return 0;
}

/* Appends the EVALSHA of `call`; 0, or -1 when hiredis is out of memory. */
static int append_call(struct redis_pipe *p, const struct pipe_call *call)
{
    assert(call->argc <= PIPE_ARGS_MAX);
    const char *argv[REDIS_EVALSHA_HEAD + PIPE_ARGS_MAX];
    char numkeys[12];
    redis_evalsha_head(argv, call->script, call->nkeys, numkeys);
    memcpy(argv + REDIS_EVALSHA_HEAD, call->argv, sizeof *argv * (size_t)call->argc);
    int argc = REDIS_EVALSHA_HEAD + call->argc;
    if (!same_command(&p->last, argc, argv) && format_command(&p->last, argc, argv) != 0)
        return -1;
    return redisAppendFormattedCommand(p->ctx, p->last.cmd, (size_t)p->last.len) == REDIS_OK ? 0
                                                                                             : -1;
}

/* Answers `call` ST_TIMEOUT if its deadline has passed (it was never
 * sent); whether it did. */
static int answered_late(struct pipe_call *call, long long now)
{
    long long deadline = effective_deadline(call->deadline_ms);
    if (!deadline || now < deadline)
        return 0;
    answer_call(call, ST_TIMEOUT, NULL, "the deadline passed before the call was sent");
    return 1;
}

/* Whether the connection is to a server that is no longer the primary:
 * new calls wait until the calls sent there are answered, then go to the
 * new one. */
static int must_move(const struct redis_pipe *p)
{
    return p->ctx && (p->moved || (sentinel_enabled() && p->generation != sentinel_generation()));
}

void redis_pipe_flush(struct redis_pipe *p)
{
    if (!p->queued.head || (must_move(p) && p->sent.head)) {
        if (p->writing) /* only what an earlier write left, if anything */
            write_out(p);
        return;
    }
    if (must_move(p)) {
        log_info("redis %s:%d: the loop's pipe follows the primary", p->host, p->port);
        redisFree(p->ctx);
        p->ctx = NULL;
        p->connected = p->writing = p->loaded = 0;
    }
    if (!p->ctx && connect_pipe(p) != 0)
        return;
    long long now = monotonic_ms();
    struct call_list waiting;
    list_init(&waiting);
    struct pipe_call **batch = p->sent.end; /* where this write's calls begin */
    int n = 0;
    for (struct pipe_call *call; (call = list_pop(&p->queued)) != NULL;) {
        if (answered_late(call, now)) {
            continue;
        } else if (!script_ready(p, call->script, now)) {
            list_push(&waiting, call);
        } else if (append_call(p, call) != 0) {
            answer_call(call, ST_BACKEND_UNAVAILABLE, NULL, "redis: out of memory");
        } else {
            call->sent_ms = now;
            call->batch_index = n++;
            list_push(&p->sent, call);
        }
    }
    list_move(&p->queued, &waiting);
    for (struct pipe_call *call = *batch; call; call = call->next)
        call->batch = n; /* a SCRIPT LOAD among them takes no notice */
    write_out(p);
}

int redis_pipe_poll(const struct redis_pipe *p, struct pollfd *pfd)
{
    *pfd = (struct pollfd){.fd = -1};
    long long due = 0;
    if (p->ctx) {
        pfd->fd = p->ctx->fd;
        pfd->events = POLLIN | (!p->connected || p->writing ? POLLOUT : 0);
        due = p->connected ? (p->sent.head ? p->sent.head->sent_ms + config.io_timeout_ms : 0)
                           : p->connect_ms + config.connect_timeout_ms;
    }
    for (const struct pipe_call *call = p->queued.head; call; call = call->next) {
        long long deadline = effective_deadline(call->deadline_ms);
        if (deadline && (!due || deadline < due))
            due = deadline;
    }
    if (!due)
        return -1;
    long long left = due - monotonic_ms();
    return left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
}

/* Whether the non-blocking connect has finished; drops it if it failed. */
static int finish_connect(struct redis_pipe *p)
{
    int error = 0;
    socklen_t len = sizeof error;
    if (getsockopt(p->ctx->fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0)
        error = errno;
    if (error) {
        drop_connection(p, "connect", strerror(error));
        fail_all(&p->queued, ST_BACKEND_UNAVAILABLE, "redis: cannot connect");
        return 0;
    }
    p->connected = 1;
    log_debug("redis: the loop's pipe is connected to %s:%d", p->host, p->port);
    return 1;
}

/* One reply for the oldest entry of `sent`. */
static void answer_oldest(struct redis_pipe *p, redisReply *reply)
{
    struct pipe_call *call = list_pop(&p->sent);
    const char *refused;
    if (call == &p->auth && (refused = redis_auth_refused(reply)) != NULL) {
        /* Redis refused the password: nothing sent after it ran. */
        p->connected = 0;
        drop_connection(p, "AUTH", refused);
    } else if (call == &p->auth) {
        log_debug("redis: the loop's pipe gave its password");
    } else if (is_load(call)) {
        int slot = (int)(call - p->loads);
        assert(slot >= 0 && slot < p->loaded && p->load_state[slot] == LOAD_SENT);
        if (reply->type == REDIS_REPLY_STRING && reply->len == 40) {
            redis_script_learn(call->script, reply->str);
            p->load_state[slot] = LOAD_DONE;
        } else {
            /* Load again with the next write; what waits for the SHA1 to be
             * learnt gives up now instead of at its deadline. */
            log_warn("redis: SCRIPT LOAD on the loop's pipe gave no SHA1: %s",
                     reply->type == REDIS_REPLY_ERROR ? reply->str : "an unexpected reply");
            p->load_state[slot] = LOAD_AGAIN;
            if (!atomic_load_explicit(&call->script->known, memory_order_acquire))
                fail_all(&p->queued, ST_BACKEND_UNAVAILABLE, "redis: SCRIPT LOAD failed");
        }
    } else if (redis_is_readonly(reply)) {
        /* A demoted primary refused the call: nothing ran. Go on to the
         * primary once what was sent here is answered. */
        if (!p->moved)
            sentinel_suspect(p->generation);
        p->moved = 1;
        answer_call(call, ST_OK, reply, NULL);
    } else if (redis_is_noscript(reply)) {
        /* Flushed under us (SCRIPT FLUSH): nothing ran. Load it again with
         * the next write and send the call once more - once. */
        load_again(p);
        if (call->resent) {
            answer_call(call, ST_BACKEND_UNAVAILABLE, NULL,
                        "redis: the script is not loaded, even after SCRIPT LOAD; nothing ran");
        } else {
            call->resent = 1;
            list_push(&p->queued, call);
        }
    } else {
        answer_call(call, ST_OK, reply, NULL);
    }
    freeReplyObject(reply);
}

/* Reads what arrived and answers each call it completes. */
static void read_replies(struct redis_pipe *p)
{
    if (redisBufferRead(p->ctx) != REDIS_OK) {
        drop_connection(p, "read", NULL);
        return;
    }
    void *reply;
    while (p->ctx) {
        if (redisGetReplyFromReader(p->ctx, &reply) != REDIS_OK) {
            drop_connection(p, "read", NULL);
            return;
        }
        if (!reply)
            return;
        if (!p->sent.head) {
            freeReplyObject(reply);
            drop_connection(p, "read", "a reply nothing asked for");
            return;
        }
        answer_oldest(p, reply);
    }
}

void redis_pipe_ready(struct redis_pipe *p, short revents)
{
    if (!p->ctx)
        return;
    if (!p->connected && !finish_connect(p))
        return;
    if (revents & POLLOUT)
        write_out(p);
    if (p->ctx && (revents & (POLLIN | POLLHUP | POLLERR)))
        read_replies(p);
}

void redis_pipe_expire(struct redis_pipe *p)
{
    long long now = monotonic_ms();
    if (p->ctx && !p->connected && now - p->connect_ms >= config.connect_timeout_ms) {
        drop_connection(p, "connect", "timed out");
        fail_all(&p->queued, ST_BACKEND_UNAVAILABLE, "redis: connect timed out");
    } else if (p->ctx && p->sent.head && now - p->sent.head->sent_ms >= config.io_timeout_ms) {
        drop_connection(p, "read", "no reply within io-timeout-ms");
    }
    struct call_list keep;
    list_init(&keep);
    for (struct pipe_call *call; (call = list_pop(&p->queued)) != NULL;)
        if (!answered_late(call, now))
            list_push(&keep, call);
    list_move(&p->queued, &keep);
}
