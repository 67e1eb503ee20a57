/*
 * stockd - sells stock under concurrent load, one HTTP endpoint per
 * concurrency strategy, so that anyone can measure which strategies
 * oversell and what each one costs.
 *
 * The shape of the program:
 *   main.c       configuration, signals, start and orderly stop
 *   http.c       libmicrohttpd: the HTTP loops, guards, replies, the stop
 *   listener.c   the listening socket, its new connections shared fairly
 *   redis_pipe.c a loop's own Redis connection, never waited on
 *   pool.c       the worker threads that run requests, a bounded queue
 *   router.c     the endpoint table; api.c the endpoints
 *   params.c     every parameter checked against its declared bounds
 *   strategy.c   the strategy table; strategy_*.c one strategy each
 *   sale.c       the shared sale body; lock.c a lock around it;
 *                combine.c sales sharing one trip (a transaction, a pipeline)
 *   store.h      where stock and ledger live: mysql_sale.c, redis_sale.c
 *   stock.c      accounting and reset across the stores
 *   backend.c    the backend table: mysql_store.c, redis_store.c,
 *                redlock.c, zk_store.c; sentinel.c the main Redis's
 *                primary, followed through failovers
 *   order_stream.c lua-stream's orders, settled from a Redis stream into
 *                MySQL by consumer threads (or a --consume 1 process)
 *   health.c     the backends, probed in the background
 *   metrics.c    what is counted; exposition.c /metrics and the lab's JSON;
 *                products.c the watched products, sampled
 *   worker.c     per-thread state: links, deadline, last error
 *   result.c     the one result type and its HTTP meaning
 *
 * Threads: config.threads HTTP loops (http.c), each running its own
 * libmicrohttpd daemon with its share of the port's connections
 * (listener.h); they parse requests, answer
 * what needs no backend, and send replies. A `lua` sale is sent, answered
 * and replied to by its loop alone, through the loop's own Redis pipe
 * (redis_pipe.h). Any other request's work runs start to finish on one of
 * config.workers worker threads (pool.c), which owns the backend
 * connections it uses - except a sale that only joins a queue of sales
 * sharing one trip (combine.h): it joins on the loop, and one worker
 * leads the queue. One thread per configured backend probes it for
 * /health, and under Sentinel one follows the primary (sentinel.h).
 * The main thread only waits for a signal.
 */
#include "api/api.h"
#include "api/products.h"
#include "api/race.h"
#include "backend/health.h"
#include "backend/sentinel.h"
#include "backend/zookeeper.h"
#include "core/config.h"
#include "core/log.h"
#include "http/http.h"
#include "store/order_stream.h"

#include <mysql.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* Every connection is a file descriptor: allow as many as the hard limit,
 * so that --max-connections, not the soft limit, decides. */
static void raise_file_limit(void)
{
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
}

static int start(void)
{
    if (mysql_library_init(0, NULL, NULL) != 0) {
        log_error("cannot initialise the MySQL client library");
        return -1;
    }
    if (config.consume) { /* the consumers alone, at least one */
        int consumers = config.stream_consumers > 0 ? config.stream_consumers : 1;
        return sentinel_start() != 0 || order_stream_start(consumers) != 0 ? -1 : 0;
    }
    if (api_prepare() != 0 || race_prepare() != 0 || sentinel_start() != 0 || health_start() != 0 ||
        products_start() != 0 || order_stream_start(config.stream_consumers) != 0)
        return -1;
    return http_start();
}

static void release(void)
{
    order_stream_stop();
    products_stop();
    health_stop();
    sentinel_stop();
    zk_store_close();
    api_release();
    race_release();
    mysql_library_end();
}

int main(int argc, char **argv)
{
    switch (config_load(argc, argv, stdout, stderr)) {
    case CONFIG_EXIT_OK:
        return EXIT_SUCCESS;
    case CONFIG_EXIT_USAGE:
        return 2;
    case CONFIG_RUN:
        break;
    }
    /* Block the stop signals before any thread starts, so every worker
     * inherits the mask and only sigwait() below ever sees them. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_file_limit();

    config_log();
    if (start() != 0) {
        release();
        return EXIT_FAILURE;
    }
    if (!config.consume)
        log_info("stockd %s listening on http://%s:%d with %d HTTP loops and %d workers",
                 config.instance_name, config.listen, config.port, config.threads, config.workers);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    log_info("received %s: finishing requests in flight (at most %d ms)",
             sig == SIGINT ? "SIGINT" : "SIGTERM", config.drain_ms);
    if (!config.consume && http_stop() != 0)
        _exit(EXIT_SUCCESS); /* the stop is over: what still runs is abandoned */
    release();
    log_info("stopped");
    return EXIT_SUCCESS;
}
