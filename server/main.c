/*
 * stockd - sells stock under concurrent load, one HTTP endpoint per
 * concurrency strategy, so that anyone can measure which strategies
 * oversell and what each one costs.
 *
 * The shape of the program:
 *   main.c       configuration, signals, start and orderly stop
 *   http.c       libmicrohttpd: HTTP threads, body and query, replies
 *   pool.c       the worker threads that run requests
 *   router.c     the endpoint table; api.c the endpoints
 *   params.c     every parameter checked against its declared bounds
 *   strategy.c   the strategy table; strategy_*.c one strategy each
 *   sale.c       the shared sale bodies; lock.c a lock around them
 *   stock.c      accounting and reset across the stores
 *   worker.c     per-thread connections: mysql_store.c, redis_store.c
 *   result.c     the one result type and its HTTP meaning
 *
 * Threads: libmicrohttpd runs config.threads HTTP threads, each with its
 * own epoll loop; they parse requests and send replies. A request's work
 * runs start to finish on one of config.workers worker threads (pool.c),
 * which owns the backend connections it uses. The main thread only waits
 * for a signal.
 */
#include "config.h"
#include "http.h"
#include "log.h"
#include "zk_store.h"

#include <mysql.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

/* How long a stop waits for requests in flight. */
#define DRAIN_MS 10000

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

    if (mysql_library_init(0, NULL, NULL) != 0) {
        log_error("cannot initialise the MySQL client library");
        return EXIT_FAILURE;
    }
    config_log();
    struct MHD_Daemon *daemon = http_start();
    if (!daemon) {
        mysql_library_end();
        return EXIT_FAILURE;
    }
    log_info("stockd listening on http://%s:%d with %d HTTP threads and %d workers", config.listen,
             config.port, config.threads, config.workers);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    log_info("received %s: finishing requests in flight", sig == SIGINT ? "SIGINT" : "SIGTERM");
    http_stop(daemon, DRAIN_MS);
    zk_store_close();
    mysql_library_end();
    log_info("stopped");
    return EXIT_SUCCESS;
}
