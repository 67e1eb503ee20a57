/*
 * stockd - sells stock under concurrent load, one HTTP endpoint per
 * concurrency strategy, so that anyone can measure which strategies
 * oversell and what each one costs.
 *
 * The shape of the program: six layers, a folder each, every include
 * naming its layer and going down only (tests/checks/layers-check holds this map
 * against the tree: every file is named here, each name is a file).
 *
 *   main.c             configuration, signals, start and orderly stop
 *   http/              the HTTP side
 *     http.c           a request's way: guarded, routed, answered on the
 *                      spot, by its loop later or by another thread
 *     request.c        one request's state, what arrived, its reply sent
 *     guards.c         the checks a request passes before it is routed
 *     refusals.c       the sold-out flag's refusals: a response per product,
 *                      built once per loop and sent to every buyer refused
 *     conns.c          a loop's connections: request deadlines, closes seen
 *     loop.c           the HTTP loops: their daemons, turns, start and stop
 *     listener.c       the listening socket, its new connections shared fairly
 *     router.c         the endpoint table: which handler, where it runs
 *   api/               the endpoints, knowing nothing of HTTP's wire
 *     api.c            the contract's endpoints
 *     orders.c         the order endpoints: hold, pay, cancel, get, /expiry
 *     params.c         every parameter checked against its declared bounds
 *     race.c           the race driver: a run of buyers stockd fires at itself
 *     exposition.c     /metrics and the lab page's JSON
 *     admission.c      the token bucket and the sold-out flag, per product,
 *                      in front of every strategy
 *     keys_running.c   the Idempotency-Keys whose request runs here: 409
 *                      in_progress for a second one
 *     products.c       the watched products, sampled
 *     assets.c         the lab page's files, compiled in
 *   sale/              selling, whatever the store
 *     strategy.c       the strategy table; strategies/ one file per strategy,
 *                      each a row of strategies/table.h
 *     sale.c           the shared sale body (read, wait, write)
 *     lock.c           a lock around that body; set_nx_lock.c the SET NX PX
 *                      lease two rows take
 *     combine.c        sales sharing one trip (a transaction, a pipeline);
 *                      script_sale.c a sale that is one Redis script, sent
 *     stock.c          accounting and reset across the stores and locks
 *     returns.c        an order's units given back through its strategy
 *   store/             where stock and ledger live (store.h)
 *     mysql_stock.c    the MySQL store; redis_stock.c the Redis store;
 *                      redis_segments.c the Redis store split into
 *                      segments, one per shard (segmented)
 *     store.c          the steps every store shares: the knobs' wait, the
 *                      count check, a key's fingerprint and replay
 *     mysql_keys.c     Idempotency-Keys in the mysql store, kept in the
 *                      sale's transaction; redis_keys.c the redis store's,
 *                      kept in the sale's MULTI (lua's: its script)
 *     order_stream.c   lua-stream's orders, settled from a Redis stream into
 *                      MySQL by consumer threads (or a --consume 1 process)
 *     orders.c         held orders: ids, payment ids, the transitions a
 *                      store implements; mysql_orders.c the mysql store's,
 *                      redis_orders.c the redis store's
 *     expiry.c         the expiry mechanisms' table and threads, a file
 *                      each: mysql_sweeper.c, redis_zset.c,
 *                      redis_keyspace.c
 *   backend/           the servers stockd talks to (backend.h)
 *     backend.c        the backend table
 *     mysql.c          MySQL connections and statements; sql.c their texts
 *     redis.c          Redis links and commands; redis_auth.c the password;
 *                      redis_connect.c the connect (from --bind-source);
 *                      redis_pipe.c a loop's own Redis connection, never
 *                      waited on; sentinel.c the main Redis's primary,
 *                      followed through failovers; redis_cluster.c the
 *                      main Redis as a Redis Cluster: the slot map;
 *                      redis_route.c a round trip routed over its nodes
 *     redlock.c        the independent Redis servers of redlock
 *     zookeeper.c      the shared ZooKeeper session
 *     pool.c           the worker threads that own the connections
 *     health.c         the backends, probed in the background
 *   core/              what every layer uses, knowing none of them
 *     result.c         the one result type and its HTTP meaning
 *     worker.c         per-thread state: links, deadline, last error;
 *                      backend_id.h the slots' names
 *     background.c     a concern's threads beside the requests (probes,
 *                      sampler, map keeper, consumers): start, pause, stop
 *     later.h          an answer given after its call returned: one
 *                      callback type for every layer
 *     config.c         the options, and the server lists parsed
 *     log.c            logging; metrics.c what is counted; trace.c a
 *                      sale's trace
 *
 * Threads: config.threads HTTP loops (loop.c), each running its own
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
#include "backend/redis_cluster.h"
#include "backend/sentinel.h"
#include "backend/zookeeper.h"
#include "core/config.h"
#include "core/log.h"
#include "http/http.h"
#include "sale/returns.h"
#include "store/expiry.h"
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
        return sentinel_start() != 0 || redis_cluster_start() != 0 ||
                       order_stream_start(consumers) != 0
                   ? -1
                   : 0;
    }
    if (api_prepare() != 0 || race_prepare() != 0 || sentinel_start() != 0 ||
        redis_cluster_start() != 0 || health_start() != 0 || products_start() != 0 ||
        order_stream_start(config.stream_consumers) != 0 ||
        expiry_start(order_give_back, order_give_back_batch) != 0)
        return -1;
    return http_start();
}

static void release(void)
{
    expiry_stop();
    order_stream_stop();
    products_stop();
    health_stop();
    sentinel_stop();
    redis_cluster_stop();
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
