/*
 * harness.h - what the integration tests share.
 *
 * The integration tests talk to a real, sanitized stockd over real HTTP,
 * backed by the private test stack (MariaDB, Redis, ...). tests/run brings
 * that stack up and exports what the harness reads:
 *
 *   STOCKD_TEST_BIN   the stockd to start        (default build/test/stockd)
 *   STOCKD_TEST_PORT  the port it listens on     (default 24080)
 *   STOCKD_RUN_DIR    stockd-<test>.log goes here (default run/test)
 *   STOCKD_REPO       where scripts/stack.sh is  (default .)
 *   STOCKD_MYSQL_*, STOCKD_REDIS_*, ... from `scripts/stack.sh env`, which
 *                     stockd reads itself: the harness passes the
 *                     environment on untouched.
 *
 * A test binary starts one stockd per cmocka group (stockd_group_setup) and
 * stops it at the end (stockd_group_teardown): SIGTERM, then the exit
 * status must be 0, which proves the shutdown was orderly and that the
 * sanitizers found nothing (AddressSanitizer makes a leaking process exit
 * non-zero).
 *
 * Every test uses its own product ids, so tests never see each other's
 * stock. Functions named expect_* or documented as asserting use cmocka
 * assertions and therefore belong on the test's own thread; drive() and
 * http_call() never assert and may run anywhere.
 */
#ifndef STOCKD_TEST_HARNESS_H
#define STOCKD_TEST_HARNESS_H

/* cmocka needs these three before it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

/* ------------------------------------------------------------- time */

/* Sleeps `ms` milliseconds (through signals). */
void sleep_ms(long ms);

/* A monotonic clock in milliseconds, for measuring how long something took. */
long long now_ms(void);

/* ------------------------------------------------------------ stockd */

/* The port of the stockd under test: $STOCKD_TEST_PORT, or 24080. */
const char *stockd_port(void);

/* Worker threads of the stockd under test: enough that the load driver's
 * requests really run at the same time. */
#define STOCKD_THREADS 8

/*
 * Starts $STOCKD_TEST_BIN --port $STOCKD_TEST_PORT --threads 8
 * --lock-wait-ms 10000, then `extra_args` (NULL-terminated, may be NULL),
 * with stdout and stderr appended to $STOCKD_RUN_DIR/stockd-<test>.log, and
 * waits (up to 10 s) until GET /health answers. 0 when it runs; -1, after
 * printing why, when it does not.
 */
int stockd_start(const char *const *extra_args);

/* Sends SIGTERM and waits for the exit. 0 when it exited with status 0 (or
 * was not running); -1, after printing the status, otherwise. */
int stockd_stop(void);

/* Whether the stockd started last is still the same, live process. */
int stockd_running(void);

/* stockd_stop() in two halves: send SIGTERM now, and later wait for the
 * exit (0 when the status was 0). */
void stockd_signal_stop(void);
int stockd_wait_stop(void);

/* Runs stockd with `args` (NULL-terminated) expecting it to refuse to
 * start: its exit status, or -1 if it started (it is then stopped). */
int stockd_exit_status(const char *const *args);

/* cmocka group fixtures: start stockd with the default arguments / stop
 * it (a non-zero exit fails the group), and release the harness's HTTP
 * state. */
int stockd_group_setup(void **state);
int stockd_group_teardown(void **state);

/* For a group whose tests start their own stockd: HTTP only. Its teardown
 * is stockd_group_teardown(). */
int http_group_setup(void **state);

/* -------------------------------------------------------------- HTTP */

/* One HTTP exchange. Free with http_reply_free(). */
struct http_reply {
    long status;           /* 0 when no HTTP answer came at all         */
    json_t *json;          /* the parsed body; NULL when it is not JSON */
    char *text;            /* the body as it came; NULL when empty      */
    char content_type[96]; /* the Content-Type header, "" when absent   */
    char allow[64];        /* the Allow header, "" when absent          */
    char connection[32];   /* the Connection header, "" when absent     */
    char retry_after[16];  /* the Retry-After header, "" when absent    */
    char instance[96];     /* the X-Stockd-Instance header              */
    char replayed[16];     /* the Idempotent-Replayed header, "" when absent */
    char failure[256];     /* why status is 0                           */
};

/*
 * Sends `method` `path` (with its query, already URL-encoded) to the stockd
 * under test, with `body` (or none when NULL) as application/json. Uses the
 * calling thread's own connection, kept alive across calls. Never asserts.
 */
void http_call(const char *method, const char *path, const char *body, struct http_reply *out);

/* http_call() with extra request headers ("Name: value", NULL-terminated). */
void http_call_with(const char *method, const char *path, const char *body,
                    const char *const *headers, struct http_reply *out);

/* The error word of a reply ("" when it has none). */
const char *reply_word(const struct http_reply *r);
void http_reply_free(struct http_reply *reply);

/* Releases the calling thread's connection (each thread that used
 * http_call() calls this before it ends). */
void http_thread_done(void);

/* A sale sent from a thread of its own, collected later. */
/* A test keeps its backgrounds static: a failed assertion leaves the test
 * function while the thread may still write its reply. */
struct background {
    pthread_t thread;
    char path[192];
    struct http_reply reply;
};

/* Sends POST /stock/deduct/{strategy}?product=P[&query] from a new thread. */
void start_background(struct background *b, const char *strategy, int product, const char *query);

/* Sends POST `path` from a new thread. */
void start_post_in_background(struct background *b, const char *path);

/* Waits for the sale; its status, with the reply kept in b->reply (the
 * caller frees it). */
long finish_background(struct background *b);

/*
 * The asserting forms: the request must get an HTTP answer whose
 * Content-Type is application/json and whose body is a JSON object, stored
 * in *json (the caller decrefs it).
 */
void http_get(const char *path, const char *body, long *status, json_t **json);
void http_post(const char *path, const char *body, long *status, json_t **json);

/* Asserts that the request is answered with `status` and "ok":true, and
 * returns the reply document (the caller decrefs it). */
json_t *expect_ok(const char *method, const char *path, const char *body, long status);

/* Asserts that the request is answered with `status`, "ok":false and the
 * contract's `error` word; a 400 must also carry a message saying what is
 * wrong. */
void expect_error(const char *method, const char *path, const char *body, long status,
                  const char *word);

/* Prints a reply (on stderr, as cmocka does), so that a failed expectation
 * shows what came back. */
void print_reply(const char *method, const char *path, long status, const json_t *doc);

/* Reads a member of `doc` that must be present, with that type. */
long long json_int_member(const json_t *doc, const char *key);
const char *json_str_member(const json_t *doc, const char *key);
int json_bool_member(const json_t *doc, const char *key);

/* ------------------------------------------------- stock and accounting */

/* One store's figures from GET /stock/{product}. */
struct store_figures {
    int present; /* the store has the product (its member is not null) */
    long long initial, remaining, sold, orders, oversold, lost_updates;
};

struct account {
    long long initial;
    struct store_figures mysql, redis, segments;
};

/* GET /stock/{product}, which must answer 200 with every field. */
struct account account(int product);

/* The figures of `store` ("mysql", "redis" or "segments", as /strategies
 * names it). */
const struct store_figures *account_store(const struct account *a, const char *store);

/* Asserts that nothing changed between two readings. */
void expect_same_account(const struct account *before, const struct account *after);

/* POST /stock/reset?product=P&count=N, which must answer 200. */
void reset(int product, long long count);

/* One sale attempt: POST /stock/deduct/{strategy}?product=P[&extra_query].
 * Returns the status and copies the error word ("" on success) into
 * `word`; asserts only that the answer is JSON. */
long deduct(const char *strategy, int product, const char *extra_query, char word[32]);

/* Asserts one sale attempt's status and error word ("" for a 200). */
void expect_deduct(const char *strategy, int product, const char *extra_query, long status,
                   const char *word);

/* GET /strategies: its "strategies" array, read once per test group and
 * owned by the harness. */
const json_t *strategy_list(void);

/* The entry of strategy_list() named `name`; NULL when it is not listed.
 * Asserts, as strategy_list() does. */
const json_t *find_strategy(const char *name);

/* Calls `check` for every entry of strategy_list(), in its order, with the
 * entry's position in the list (tests give strategy i the product base + i),
 * on the calling thread. */
void for_each_strategy(void (*check)(const json_t *strategy, int index));

/* What /strategies says of one strategy (`caveat`: whether it has one). */
struct claim {
    const char *name;
    const char *store;
    int safe_single, safe_multi, caveat;
};

/* Asserts that /strategies lists each of the `count` strategies of `claims`
 * with that store and those claims. */
void expect_claims(const struct claim *claims, size_t count);

/* How long /health may take to show a backend's new state: its probes run
 * in the background every 500 ms, and a probe of a backend that is going
 * away can take a connect timeout. */
#define HEALTH_SETTLE_MS 5000

/* GET /health until the "state" of `backend` in its "backends" is `want`,
 * for up to HEALTH_SETTLE_MS: its last status, and that state ("" when it is
 * missing) copied into `state`. Asserts only that the answer is JSON. */
long backend_health(const char *backend, const char *want, char state[16]);

/* ---------------------------------------------------------- load driver */

/* What a load run got back, by outcome. */
struct tally {
    int ok;                /* 200                                  */
    int sold_out;          /* 409 sold_out                         */
    int busy;              /* 409 busy                             */
    int shutting_down;     /* 503 shutting_down                    */
    int outcome_unknown;   /* 503 outcome_unknown                  */
    int unanswered;        /* no HTTP answer (refused, reset)      */
    int other;             /* anything else                        */
    char first_other[192]; /* what the first `other` was     */
};

/*
 * Sends `requests` POST /stock/deduct/{strategy}?product=P[&extra_query]
 * from `threads` threads at once, each with its own keep-alive connection,
 * and counts the outcomes. stockd runs every request on its worker pool,
 * whichever connection it came on, so up to `threads` of them run at the
 * same time. Never asserts.
 */
struct tally drive(const char *strategy, int product, int requests, int threads,
                   const char *extra_query);

/* Like drive(), but each thread sends requests until `*keep_going` turns 0
 * or the server stops answering it (a refused connection). */
struct tally drive_while(const char *strategy, int product, int threads, const char *extra_query,
                         const atomic_int *keep_going);

/* Prints a tally on one line, on stderr: "what: N ok, N sold_out, ...". */
void print_tally(const char *what, const struct tally *t);

/* ------------------------------------------------------------ metrics */

/* The value of one series of GET /metrics, given as it is written there
 * (`stockd_workers_busy`, `stockd_queue_depth`, ...); -1 when absent. */
double metric(const char *series);

/* Waits (up to `timeout_ms`) until metric(series) >= `at_least`; 0 when it
 * got there, -1 after printing the last value. */
int wait_metric(const char *series, double at_least, long timeout_ms);

/* ----------------------------------------------------- backend control */

/* scripts/stack.sh stop-one / start-one NAME ("redis", "mysql", ...):
 * 0 on success, else -1 after printing why. start-one returns once the
 * backend answers (the main Redis: once its replica has linked again), and
 * leaves a running backend alone. */
int stack_stop_one(const char *name);
/* scripts/stack.sh kill-one NAME: kill -9, a crash (start-one brings it back). */
int stack_kill_one(const char *name);
int stack_start_one(const char *name);
/* scripts/stack.sh freeze-one / thaw-one NAME: SIGSTOP, SIGCONT. */
int stack_freeze_one(const char *name);
int stack_thaw_one(const char *name);

/* The port of the replicated group's primary, as its Sentinels name it
 * (scripts/stack.sh ha-primary); 0 when none answers. */
int stack_ha_primary(void);

/* Waits (at most timeout_ms) until a transaction holds `product`'s stock
 * row in MariaDB, as a SELECT ... FOR UPDATE NOWAIT from outside finds it;
 * 0 once it does, else -1 after printing why. */
int wait_row_locked(int product, long timeout_ms);

/* Runs `command` (sh -c) and copies its standard output into `out`; 0 when
 * it exited 0. */
int command_output(const char *command, char *out, size_t size);

/* Runs `redis-cli ARGS` against the stack's main Redis and copies its
 * output into `out`; 0 when it exited 0. */
int redis_cli(const char *args, char *out, size_t size);

/* The same against the Redis server on `port`. */
int redis_cli_at(int port, const char *args, char *out, size_t size);

/* The asserting forms of redis_cli_at(), for the test's own thread: the
 * command must exit 0, or the test fails with what it printed; redis_int_at()
 * reads its reply as an integer. */
void redis_at(int port, const char *args, char *out, size_t size);
long long redis_int_at(int port, const char *args);

/* The ZooKeeper nodes under `path`, one per line, sorted, into `out`
 * (zkCli.sh ls -R); 0 on success. */
int zk_tree(const char *path, char *out, size_t size);

/* Runs `sql` with the stack's MySQL client (tab-separated, no column
 * names) and copies its output into `out`; 0 when it exited 0. */
int stack_mysql(const char *sql, char *out, size_t size);

/* ------------------------------------------------- a consumer process */

/* `stockd --consume 1`: the order stream's consumers alone, a process the
 * test can kill -9 without touching the stockd that serves HTTP. */
struct consumer_process {
    int pid;
    char log_path[4096]; /* $STOCKD_RUN_DIR/stockd-<test>-consumer.log */
    long log_from;       /* its size when this process started        */
};

/* Starts one with `extra_args` (NULL-terminated, may be NULL); 0, or -1
 * after printing why. */
int consumer_start(struct consumer_process *c, const char *const *extra_args);

/* Waits (up to `timeout_ms`) for a line holding `needle` in what this
 * process logged; 0 once it is there, -1 after printing why. */
int consumer_wait_log(const struct consumer_process *c, const char *needle, long timeout_ms);

/* SIGTERM and the exit: 0 when the status was 0. */
int consumer_stop(struct consumer_process *c);

/* kill -9, and the exit collected: the crash of a consumer. */
void consumer_kill(struct consumer_process *c);

/* lua-stream: its sales settle into MySQL in the background. */
#define STREAM_DRAIN_MS 30000
/* The "stream" object of GET /stock/{product}: entries left in the stream,
 * orders settled in MySQL, sales accepted in Redis. */
void stream_figures(int product, long long *length, long long *settled, long long *accepted);
/* Waits until the stream is empty and `orders` of `product` are in MySQL;
 * asserts it happens within STREAM_DRAIN_MS. */
void expect_stream_drained(int product, long long orders);

#endif
