/*
 * harness.c - a sanitized stockd, HTTP over libcurl, accounting, a load
 * driver and the private stack's controls, for the integration tests.
 */
#include "harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long stockd may take to answer its first /health, and to exit after
 * SIGTERM (it drains requests in flight for up to 10 s). */
#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 20000
/* No single request of a test may take longer than this. */
#define REQUEST_TIMEOUT_S 30L
#define MAX_DRIVER_THREADS 64

static const char *env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return value && *value ? value : fallback;
}

const char *stockd_port(void)
{
    return env_or("STOCKD_TEST_PORT", "24080");
}

/* -------------------------------------------------------------- time */

void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --------------------------------------------------------------- HTTP */

/* Each thread's own easy handle: libcurl keeps its connection alive, so a
 * thread's requests reuse one TCP connection. */
static _Thread_local CURL *thread_handle;

struct buffer {
    char *data;
    size_t len;
};

static size_t on_body(char *data, size_t size, size_t count, void *userdata)
{
    struct buffer *b = userdata;
    size_t n = size * count;
    char *grown = realloc(b->data, b->len + n + 1);
    if (!grown)
        return 0; /* libcurl reports a write error */
    memcpy(grown + b->len, data, n);
    b->len += n;
    grown[b->len] = '\0';
    b->data = grown;
    return n;
}

/* Copies the value of header line `line` into `out` when its name is `name`. */
static void take_header(const char *line, size_t len, const char *name, char *out, size_t size)
{
    size_t name_len = strlen(name);
    if (len <= name_len || line[name_len] != ':' || strncasecmp(line, name, name_len) != 0)
        return;
    const char *value = line + name_len + 1;
    const char *end = line + len;
    while (value < end && (*value == ' ' || *value == '\t'))
        value++;
    while (end > value && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(out, size, "%.*s", (int)(end - value), value);
}

static size_t on_header(char *line, size_t size, size_t count, void *userdata)
{
    struct http_reply *r = userdata;
    size_t n = size * count;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* a new response (after a 100 Continue): forget the last one's */
        r->content_type[0] = r->allow[0] = r->connection[0] = r->retry_after[0] = '\0';
        r->instance[0] = r->replayed[0] = '\0';
    }
    take_header(line, n, "Content-Type", r->content_type, sizeof r->content_type);
    take_header(line, n, "Allow", r->allow, sizeof r->allow);
    take_header(line, n, "Connection", r->connection, sizeof r->connection);
    take_header(line, n, "Retry-After", r->retry_after, sizeof r->retry_after);
    take_header(line, n, "X-Stockd-Instance", r->instance, sizeof r->instance);
    take_header(line, n, "Idempotent-Replayed", r->replayed, sizeof r->replayed);
    return n;
}

void http_call(const char *method, const char *path, const char *body, struct http_reply *out)
{
    http_call_with(method, path, body, NULL, out);
}

void http_call_with(const char *method, const char *path, const char *body,
                    const char *const *extra, struct http_reply *out)
{
    memset(out, 0, sizeof *out);
    if (!thread_handle)
        thread_handle = curl_easy_init();
    CURL *h = thread_handle;
    if (!h) {
        snprintf(out->failure, sizeof out->failure, "curl_easy_init failed");
        return;
    }
    /* Reset keeps the live connection; only the options start over. */
    curl_easy_reset(h);
    char url[2048];
    snprintf(url, sizeof url, "http://127.0.0.1:%s%s", stockd_port(), path);
    struct buffer received = {NULL, 0};
    struct curl_slist *headers = curl_slist_append(NULL, "Expect:");
    if (body)
        headers = curl_slist_append(headers, "Content-Type: application/json");
    for (const char *const *line = extra; line && *line; line++)
        headers = curl_slist_append(headers, *line);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &received);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, REQUEST_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
        snprintf(out->failure, sizeof out->failure, "%s %s: %s", method, path,
                 curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
        if (received.data)
            out->json = json_loadb(received.data, received.len, 0, NULL);
        out->text = received.data;
        received.data = NULL;
    }
    free(received.data);
}

void http_reply_free(struct http_reply *reply)
{
    json_decref(reply->json);
    reply->json = NULL;
    free(reply->text);
    reply->text = NULL;
}

const char *reply_word(const struct http_reply *r)
{
    const char *error = json_string_value(json_object_get(r->json, "error"));
    return error ? error : "";
}

void http_thread_done(void)
{
    if (thread_handle)
        curl_easy_cleanup(thread_handle);
    thread_handle = NULL;
}

static void *send_in_background(void *arg)
{
    struct background *b = arg;
    http_call("POST", b->path, NULL, &b->reply);
    http_thread_done();
    return NULL;
}

void start_post_in_background(struct background *b, const char *path)
{
    snprintf(b->path, sizeof b->path, "%s", path);
    assert_int_equal(pthread_create(&b->thread, NULL, send_in_background, b), 0);
}

void start_background(struct background *b, const char *strategy, int product, const char *query)
{
    char path[sizeof b->path];
    snprintf(path, sizeof path, "/stock/deduct/%s?product=%d%s%s", strategy, product,
             query ? "&" : "", query ? query : "");
    start_post_in_background(b, path);
}

long finish_background(struct background *b)
{
    pthread_join(b->thread, NULL);
    return b->reply.status;
}

/* The asserting core of every helper below: an HTTP answer, JSON, an object. */
static void call_json(const char *method, const char *path, const char *body, long *status,
                      json_t **json)
{
    struct http_reply r;
    http_call(method, path, body, &r);
    if (r.status == 0)
        fail_msg("no HTTP answer: %s", r.failure);
    if (strcmp(r.content_type, "application/json") != 0)
        fail_msg("%s %s -> %ld with Content-Type '%s', not application/json", method, path,
                 r.status, r.content_type);
    if (!json_is_object(r.json)) {
        http_reply_free(&r);
        fail_msg("%s %s -> %ld whose body is not a JSON object", method, path, r.status);
    }
    *status = r.status;
    *json = r.json;
    free(r.text);
}

void http_get(const char *path, const char *body, long *status, json_t **json)
{
    call_json("GET", path, body, status, json);
}

void http_post(const char *path, const char *body, long *status, json_t **json)
{
    call_json("POST", path, body, status, json);
}

void print_reply(const char *method, const char *path, long status, const json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    print_error("%s %s -> %ld %s\n", method, path, status, text ? text : "");
    free(text);
}

json_t *expect_ok(const char *method, const char *path, const char *body, long status)
{
    long got;
    json_t *doc;
    call_json(method, path, body, &got, &doc);
    if (got != status || !json_is_true(json_object_get(doc, "ok"))) {
        print_reply(method, path, got, doc);
        json_decref(doc);
        fail_msg("expected %ld with \"ok\":true", status);
    }
    return doc;
}

void expect_error(const char *method, const char *path, const char *body, long status,
                  const char *word)
{
    long got;
    json_t *doc;
    call_json(method, path, body, &got, &doc);
    const char *error = json_string_value(json_object_get(doc, "error"));
    const char *message = json_string_value(json_object_get(doc, "message"));
    int as_expected = got == status && json_is_false(json_object_get(doc, "ok")) && error &&
                      strcmp(error, word) == 0 && (status != 400 || (message && *message));
    if (!as_expected)
        print_reply(method, path, got, doc);
    json_decref(doc);
    if (!as_expected)
        fail_msg("expected %ld with \"ok\":false, \"error\":\"%s\"%s", status, word,
                 status == 400 ? " and a message" : "");
}

static const json_t *member(const json_t *doc, const char *key)
{
    const json_t *value = json_object_get(doc, key);
    if (!value)
        fail_msg("the reply has no member \"%s\"", key);
    return value;
}

long long json_int_member(const json_t *doc, const char *key)
{
    const json_t *value = member(doc, key);
    if (!json_is_integer(value))
        fail_msg("\"%s\" is not an integer", key);
    return json_integer_value(value);
}

const char *json_str_member(const json_t *doc, const char *key)
{
    const json_t *value = member(doc, key);
    if (!json_is_string(value))
        fail_msg("\"%s\" is not a string", key);
    return json_string_value(value);
}

int json_bool_member(const json_t *doc, const char *key)
{
    const json_t *value = member(doc, key);
    if (!json_is_boolean(value))
        fail_msg("\"%s\" is not a boolean", key);
    return json_is_true(value);
}

/* ----------------------------------------------------------- stockd */

static pid_t stockd_pid;
/* The exit status of a stockd that exited during its start. */
static int stockd_last_exit;

/* GET /strategies of the running stockd, read once per group. */
static json_t *strategies_seen;

/* The test binary's name, for the log file. */
static const char *test_name(void)
{
    return program_invocation_short_name;
}

/* In the child: log to the test's file, then become stockd. */
static void exec_stockd(const char *log_path, char *const *argv)
{
    /* If the test binary dies, stockd must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dprintf(fd, "==== %s starts", test_name());
        for (char *const *a = argv; *a; a++)
            dprintf(fd, " %s", *a);
        dprintf(fd, "\n");
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
    }
    execv(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Waits for the child for up to `timeout_ms`; 1 and its status when it
 * exited, 0 while it still runs. */
static int reaped(pid_t pid, long long timeout_ms, int *status)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t got = waitpid(pid, status, WNOHANG);
        if (got == pid)
            return 1;
        if (got < 0 && errno != EINTR)
            return 1; /* not our child any more: treat as gone */
        if (now_ms() >= deadline)
            return 0;
        sleep_ms(20);
    }
}

static void describe_exit(const char *what, int status, const char *log_path)
{
    if (WIFEXITED(status))
        print_error("stockd %s: exit status %d (see %s)\n", what, WEXITSTATUS(status), log_path);
    else if (WIFSIGNALED(status))
        print_error("stockd %s: killed by signal %d (see %s)\n", what, WTERMSIG(status), log_path);
}

static void log_path_of(char *out, size_t size)
{
    snprintf(out, size, "%s/stockd-%s.log", env_or("STOCKD_RUN_DIR", "run/test"), test_name());
}

int stockd_start(const char *const *extra_args)
{
    char log_path[PATH_MAX];
    log_path_of(log_path, sizeof log_path);
    char threads[16];
    snprintf(threads, sizeof threads, "%d", STOCKD_THREADS);
    /* Lock waits far longer than any test's queue: a blocking strategy
     * never answers busy because the machine is slow. */
    const char *argv[32] = {
        env_or("STOCKD_TEST_BIN", "build/test/stockd"),
        "--port",
        stockd_port(),
        "--threads",
        threads,
        "--lock-wait-ms",
        "10000",
    };
    size_t n = 7;
    for (size_t i = 0; extra_args && extra_args[i] && n + 1 < sizeof argv / sizeof argv[0]; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;

    struct http_reply stale;
    http_call("GET", "/health", NULL, &stale);
    http_reply_free(&stale);
    if (stale.status != 0) {
        print_error("something already answers on port %s: stop it first\n", argv[2]);
        return -1;
    }

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        print_error("fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_stockd(log_path, (char *const *)argv);
    stockd_pid = pid;

    long long deadline = now_ms() + START_TIMEOUT_MS;
    while (now_ms() < deadline) {
        int status;
        if (reaped(pid, 0, &status)) {
            describe_exit("exited during start", status, log_path);
            stockd_last_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            stockd_pid = 0;
            return -1;
        }
        struct http_reply r;
        http_call("GET", "/health", NULL, &r);
        http_reply_free(&r);
        if (r.status != 0)
            return 0;
        sleep_ms(50);
    }
    print_error("stockd did not answer /health within %d ms (see %s)\n", START_TIMEOUT_MS,
                log_path);
    stockd_stop();
    return -1;
}

/* The stockd a stop was signalled to, until its exit is collected. */
static pid_t stopping_pid;

void stockd_signal_stop(void)
{
    stopping_pid = stockd_pid;
    stockd_pid = 0;
    if (stopping_pid > 0)
        kill(stopping_pid, SIGTERM);
}

int stockd_stop(void)
{
    stockd_signal_stop();
    return stockd_wait_stop();
}

int stockd_wait_stop(void)
{
    pid_t pid = stopping_pid;
    if (pid <= 0)
        return 0;
    stopping_pid = 0;
    char log_path[PATH_MAX];
    log_path_of(log_path, sizeof log_path);
    int status = 0;
    if (!reaped(pid, STOP_TIMEOUT_MS, &status)) {
        print_error("stockd did not exit within %d ms of SIGTERM; killing it (see %s)\n",
                    STOP_TIMEOUT_MS, log_path);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    describe_exit("after SIGTERM", status, log_path);
    return -1;
}

int stockd_exit_status(const char *const *args)
{
    if (stockd_start(args) == 0) {
        stockd_stop();
        return -1;
    }
    return stockd_last_exit;
}

int stockd_running(void)
{
    int status;
    return stockd_pid > 0 && !reaped(stockd_pid, 0, &status);
}

int http_group_setup(void **state)
{
    (void)state;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

int stockd_group_setup(void **state)
{
    return http_group_setup(state) == 0 ? stockd_start(NULL) : -1;
}

int stockd_group_teardown(void **state)
{
    (void)state;
    int rc = stockd_stop();
    json_decref(strategies_seen);
    strategies_seen = NULL;
    http_thread_done();
    curl_global_cleanup();
    return rc;
}

/* --------------------------------------------------- stock and accounting */

static struct store_figures store_figures_of(const json_t *doc, const char *store)
{
    const json_t *s = member(doc, store);
    struct store_figures f = {.present = !json_is_null(s)};
    if (!f.present)
        return f;
    f.initial = json_int_member(s, "initial");
    f.remaining = json_int_member(s, "remaining");
    f.sold = json_int_member(s, "sold");
    f.orders = json_int_member(s, "orders");
    f.oversold = json_int_member(s, "oversold");
    f.lost_updates = json_int_member(s, "lost_updates");
    return f;
}

struct account account(int product)
{
    char path[64];
    snprintf(path, sizeof path, "/stock/%d", product);
    json_t *doc = expect_ok("GET", path, NULL, 200);
    assert_int_equal(json_int_member(doc, "product"), product);
    struct account a = {
        .initial = json_int_member(doc, "initial"),
        .mysql = store_figures_of(doc, "mysql"),
        .redis = store_figures_of(doc, "redis"),
        .segments = store_figures_of(doc, "segments"),
    };
    json_decref(doc);
    return a;
}

const struct store_figures *account_store(const struct account *a, const char *store)
{
    if (strcmp(store, "mysql") == 0)
        return &a->mysql;
    if (strcmp(store, "redis") == 0)
        return &a->redis;
    if (strcmp(store, "segments") == 0)
        return &a->segments;
    fail_msg("unknown store '%s'", store);
    return NULL;
}

static void expect_same_figures(const struct store_figures *before,
                                const struct store_figures *after)
{
    assert_int_equal(after->present, before->present);
    assert_int_equal(after->initial, before->initial);
    assert_int_equal(after->remaining, before->remaining);
    assert_int_equal(after->sold, before->sold);
    assert_int_equal(after->orders, before->orders);
    assert_int_equal(after->oversold, before->oversold);
    assert_int_equal(after->lost_updates, before->lost_updates);
}

void expect_same_account(const struct account *before, const struct account *after)
{
    assert_int_equal(after->initial, before->initial);
    expect_same_figures(&before->mysql, &after->mysql);
    expect_same_figures(&before->redis, &after->redis);
    expect_same_figures(&before->segments, &after->segments);
}

void reset(int product, long long count)
{
    char path[96];
    snprintf(path, sizeof path, "/stock/reset?product=%d&count=%lld", product, count);
    json_t *doc = expect_ok("POST", path, NULL, 200);
    assert_int_equal(json_int_member(doc, "product"), product);
    assert_int_equal(json_int_member(doc, "count"), count);
    json_decref(doc);
}

static void deduct_path(char *out, size_t size, const char *strategy, int product,
                        const char *extra_query)
{
    snprintf(out, size, "/stock/deduct/%s?product=%d%s%s", strategy, product,
             extra_query && *extra_query ? "&" : "", extra_query ? extra_query : "");
}

/* Sends one sale attempt; the reply document goes to *doc. */
static long deduct_call(const char *strategy, int product, const char *extra_query, char *path,
                        size_t size, json_t **doc)
{
    deduct_path(path, size, strategy, product, extra_query);
    long status;
    http_post(path, NULL, &status, doc);
    return status;
}

static void error_word(const json_t *doc, char word[32])
{
    const char *error = json_string_value(json_object_get(doc, "error"));
    snprintf(word, 32, "%s", error ? error : "");
}

long deduct(const char *strategy, int product, const char *extra_query, char word[32])
{
    char path[512];
    json_t *doc;
    long status = deduct_call(strategy, product, extra_query, path, sizeof path, &doc);
    error_word(doc, word);
    json_decref(doc);
    return status;
}

void expect_deduct(const char *strategy, int product, const char *extra_query, long status,
                   const char *word)
{
    char path[512], got[32];
    json_t *doc;
    long code = deduct_call(strategy, product, extra_query, path, sizeof path, &doc);
    error_word(doc, got);
    if (code != status || strcmp(got, word) != 0) {
        print_error("expected %ld %s, got:\n", status, *word ? word : "ok");
        print_reply("POST", path, code, doc);
    }
    json_decref(doc);
    assert_int_equal(code, status);
    assert_string_equal(got, word);
}

const json_t *strategy_list(void)
{
    if (!strategies_seen) {
        json_t *doc = expect_ok("GET", "/strategies", NULL, 200);
        json_t *list = json_object_get(doc, "strategies");
        if (json_is_array(list))
            strategies_seen = json_incref(list);
        json_decref(doc);
        if (!strategies_seen)
            fail_msg("/strategies has no \"strategies\" array");
    }
    return strategies_seen;
}

const json_t *find_strategy(const char *name)
{
    size_t i;
    const json_t *s;
    json_array_foreach(strategy_list(), i, s)
    {
        if (strcmp(json_str_member(s, "name"), name) == 0)
            return s;
    }
    return NULL;
}

void for_each_strategy(void (*check)(const json_t *strategy, int index))
{
    size_t i;
    const json_t *s;
    json_array_foreach(strategy_list(), i, s)
    {
        check(s, (int)i);
    }
}

void expect_claims(const struct claim *claims, size_t count)
{
    for (const struct claim *c = claims; c < claims + count; c++) {
        const json_t *s = find_strategy(c->name);
        if (!s)
            print_error("/strategies does not list %s\n", c->name);
        assert_non_null(s);
        assert_string_equal(json_str_member(s, "store"), c->store);
        assert_int_equal(json_bool_member(s, "safe_single"), c->safe_single);
        assert_int_equal(json_bool_member(s, "safe_multi"), c->safe_multi);
        assert_int_equal(json_object_get(s, "caveat") != NULL, c->caveat);
    }
}

long backend_health(const char *backend, const char *want, char state[16])
{
    long status;
    long long deadline = now_ms() + HEALTH_SETTLE_MS;
    for (;;) {
        json_t *health;
        http_get("/health", NULL, &status, &health);
        const json_t *row = json_object_get(json_object_get(health, "backends"), backend);
        const json_t *st = json_object_get(row, "state");
        snprintf(state, 16, "%s", json_is_string(st) ? json_string_value(st) : "");
        json_decref(health);
        if (strcmp(state, want) == 0 || now_ms() >= deadline)
            return status;
        sleep_ms(50);
    }
}

/* ---------------------------------------------------------- load driver */

struct driver {
    char path[512];
    int requests;                 /* how many, or... */
    const atomic_int *keep_going; /* ...while this is not 0 (drive_while) */
    atomic_int next;              /* the next request number to send */
    pthread_barrier_t start;
    pthread_mutex_t lock; /* guards totals */
    struct tally totals;
};

static void count_outcome(struct tally *t, const char *path, const struct http_reply *r)
{
    const char *word = reply_word(r);
    const char *message = json_string_value(json_object_get(r->json, "message"));
    if (r->status == 200)
        t->ok++;
    else if (r->status == 409 && strcmp(word, "sold_out") == 0)
        t->sold_out++;
    else if (r->status == 409 && strcmp(word, "busy") == 0)
        t->busy++;
    else if (r->status == 503 && strcmp(word, "shutting_down") == 0)
        t->shutting_down++;
    else if (r->status == 503 && strcmp(word, "outcome_unknown") == 0)
        t->outcome_unknown++;
    else if (r->status == 0)
        t->unanswered++;
    else if (t->other++ == 0)
        snprintf(t->first_other, sizeof t->first_other, "%.80s -> %ld %.24s: %.60s", path,
                 r->status, *word ? word : "(no error word)", message ? message : "");
}

static void add_tally(struct tally *to, const struct tally *t)
{
    to->ok += t->ok;
    to->sold_out += t->sold_out;
    to->busy += t->busy;
    to->shutting_down += t->shutting_down;
    to->outcome_unknown += t->outcome_unknown;
    to->unanswered += t->unanswered;
    if (t->other && !to->other)
        memcpy(to->first_other, t->first_other, sizeof t->first_other);
    to->other += t->other;
}

/* Whether a driver thread sends one more request. */
static int another(struct driver *d, const struct tally *mine)
{
    if (d->keep_going)
        return atomic_load(d->keep_going) && mine->unanswered == 0;
    return atomic_fetch_add(&d->next, 1) < d->requests;
}

static void *drive_thread(void *arg)
{
    struct driver *d = arg;
    struct tally mine = {0};
    pthread_barrier_wait(&d->start);
    while (another(d, &mine)) {
        struct http_reply r;
        http_call("POST", d->path, NULL, &r);
        count_outcome(&mine, d->path, &r);
        http_reply_free(&r);
    }
    http_thread_done();
    pthread_mutex_lock(&d->lock);
    add_tally(&d->totals, &mine);
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

static struct tally run_driver(struct driver *d, int threads)
{
    if (threads < 1)
        threads = 1;
    if (threads > MAX_DRIVER_THREADS)
        threads = MAX_DRIVER_THREADS;
    atomic_init(&d->next, 0);
    pthread_mutex_init(&d->lock, NULL);
    pthread_barrier_init(&d->start, NULL, (unsigned)threads);
    pthread_t ids[MAX_DRIVER_THREADS];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ids[i], NULL, drive_thread, d) != 0)
            abort(); /* cannot test anything without the threads */
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    pthread_barrier_destroy(&d->start);
    pthread_mutex_destroy(&d->lock);
    return d->totals;
}

struct tally drive(const char *strategy, int product, int requests, int threads,
                   const char *extra_query)
{
    struct driver d = {.requests = requests};
    deduct_path(d.path, sizeof d.path, strategy, product, extra_query);
    return run_driver(&d, threads);
}

struct tally drive_while(const char *strategy, int product, int threads, const char *extra_query,
                         const atomic_int *keep_going)
{
    struct driver d = {.keep_going = keep_going};
    deduct_path(d.path, sizeof d.path, strategy, product, extra_query);
    return run_driver(&d, threads);
}

void print_tally(const char *what, const struct tally *t)
{
    fprintf(stderr,
            "%s: %d ok, %d sold_out, %d busy, %d shutting_down, %d outcome_unknown, "
            "%d unanswered, %d other%s%s\n",
            what, t->ok, t->sold_out, t->busy, t->shutting_down, t->outcome_unknown, t->unanswered,
            t->other, t->other ? ": " : "", t->other ? t->first_other : "");
}

/* ------------------------------------------------------------ metrics */

double metric(const char *series)
{
    struct http_reply r;
    http_call("GET", "/metrics", NULL, &r);
    double value = -1;
    size_t len = strlen(series);
    for (const char *line = r.text; line && *line;) {
        if (strncmp(line, series, len) == 0 && line[len] == ' ') {
            value = strtod(line + len + 1, NULL);
            break;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    http_reply_free(&r);
    return value;
}

int wait_metric(const char *series, double at_least, long timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    double value;
    while ((value = metric(series)) < at_least) {
        if (now_ms() >= deadline) {
            print_error("%s stayed at %g, below %g, for %ld ms\n", series, value, at_least,
                        timeout_ms);
            return -1;
        }
        sleep_ms(10);
    }
    return 0;
}

/* ----------------------------------------------------- backend control */

static int stack_command(const char *command, const char *name)
{
    char line[PATH_MAX + 64];
    snprintf(line, sizeof line, "'%s/scripts/stack.sh' %s %s", env_or("STOCKD_REPO", "."), command,
             name);
    fflush(NULL);
    int status = system(line);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    print_error("'%s' failed (status %d)\n", line, status);
    return -1;
}

int stack_stop_one(const char *name)
{
    return stack_command("stop-one", name);
}

int stack_kill_one(const char *name)
{
    return stack_command("kill-one", name);
}

/* The main Redis's rows that WAIT (lua-wait, redis-lock-wait) need its
 * replica: after a restart of the main Redis, back only once the replica
 * has linked again and acknowledged (WAIT blocks until it has), so that a
 * test never leaves the next one a Redis that answers but cannot replicate. */
static int replica_linked(void)
{
    char out[64];
    if (redis_cli("WAIT 1 10000", out, sizeof out) != 0 || atoi(out) < 1) {
        print_error("the main Redis's replica did not link again within 10 s (WAIT: %s)\n", out);
        return -1;
    }
    return 0;
}

int stack_start_one(const char *name)
{
    if (stack_command("start-one", name) != 0)
        return -1;
    return strcmp(name, "redis") == 0 ? replica_linked() : 0;
}

int stack_freeze_one(const char *name)
{
    return stack_command("freeze-one", name);
}

int stack_thaw_one(const char *name)
{
    return stack_command("thaw-one", name);
}

int command_output(const char *command, char *out, size_t size)
{
    fflush(NULL);
    FILE *p = popen(command, "r");
    if (!p) {
        print_error("cannot run '%s'\n", command);
        return -1;
    }
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    /* Read to the end, so that the command is never cut short by a closed
     * pipe; output that does not fit is a failure that says so. */
    char rest[4096];
    size_t over = 0;
    for (size_t got; (got = fread(rest, 1, sizeof rest, p)) > 0;)
        over += got;
    int status = pclose(p);
    if (over) {
        print_error("'%s' printed %zu bytes more than the %zu it was given room for\n", command,
                    over, size - 1);
        return -1;
    }
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int wait_row_locked(int product, long timeout_ms)
{
    char command[PATH_MAX + 160], out[512];
    snprintf(command, sizeof command,
             "'%s/scripts/stack.sh' mysql -N -e "
             "'SELECT count FROM stock WHERE product_id = %d FOR UPDATE NOWAIT' 2>&1",
             env_or("STOCKD_REPO", "."), product);
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        if (command_output(command, out, sizeof out) != 0 && strstr(out, "Lock wait timeout"))
            return 0; /* refused at once: another transaction holds the row */
        if (now_ms() >= deadline) {
            print_error("no transaction held product %d's row within %ld ms (last: %s)\n", product,
                        timeout_ms, out);
            return -1;
        }
        sleep_ms(10);
    }
}

int redis_cli_at(int port, const char *args, char *out, size_t size)
{
    char command[1024];
    snprintf(command, sizeof command, "redis-cli -h 127.0.0.1 -p %d %s", port, args);
    return command_output(command, out, size);
}

void redis_at(int port, const char *args, char *out, size_t size)
{
    if (redis_cli_at(port, args, out, size) != 0)
        fail_msg("redis-cli -p %d %s failed: %s", port, args, out);
}

long long redis_int_at(int port, const char *args)
{
    char out[128];
    redis_at(port, args, out, sizeof out);
    return atoll(out);
}

int stack_mysql(const char *sql, char *out, size_t size)
{
    char command[PATH_MAX + 2048];
    snprintf(command, sizeof command, "'%s/scripts/stack.sh' mysql -N -e \"%s\" 2>&1",
             env_or("STOCKD_REPO", "."), sql);
    return command_output(command, out, size);
}

int consumer_start(struct consumer_process *c, const char *const *extra_args)
{
    const char *argv[32] = {env_or("STOCKD_TEST_BIN", "build/test/stockd"), "--consume", "1"};
    size_t n = 3;
    for (size_t i = 0; extra_args && extra_args[i] && n + 1 < sizeof argv / sizeof argv[0]; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;
    snprintf(c->log_path, sizeof c->log_path, "%s/stockd-%s-consumer.log",
             env_or("STOCKD_RUN_DIR", "run/test"), test_name());
    struct stat st;
    c->log_from = stat(c->log_path, &st) == 0 ? (long)st.st_size : 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        print_error("fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_stockd(c->log_path, (char *const *)argv);
    c->pid = pid;
    return 0;
}

/* Whether the log holds `needle` past the process's start. */
static int logged(const struct consumer_process *c, const char *needle)
{
    FILE *f = fopen(c->log_path, "r");
    if (!f)
        return 0;
    int found = 0;
    char line[1024];
    if (fseek(f, c->log_from, SEEK_SET) == 0)
        while (!found && fgets(line, sizeof line, f))
            found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int consumer_wait_log(const struct consumer_process *c, const char *needle, long timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    while (!logged(c, needle)) {
        if (now_ms() >= deadline) {
            print_error("the consumer did not log '%s' within %ld ms (see %s)\n", needle,
                        timeout_ms, c->log_path);
            return -1;
        }
        sleep_ms(20);
    }
    return 0;
}

int consumer_stop(struct consumer_process *c)
{
    int status = 0;
    if (c->pid <= 0)
        return 0;
    kill(c->pid, SIGTERM);
    if (!reaped(c->pid, STOP_TIMEOUT_MS, &status)) {
        print_error("the consumer did not exit within %d ms of SIGTERM (see %s)\n", STOP_TIMEOUT_MS,
                    c->log_path);
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
    }
    c->pid = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    describe_exit("consumer", status, c->log_path);
    return -1;
}

void consumer_kill(struct consumer_process *c)
{
    if (c->pid <= 0)
        return;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
    c->pid = 0;
}

int redis_cli(const char *args, char *out, size_t size)
{
    return redis_cli_at(atoi(env_or("STOCKD_REDIS_PORT", "24379")), args, out, size);
}

int stack_ha_primary(void)
{
    char command[PATH_MAX + 64], out[64];
    snprintf(command, sizeof command, "'%s/scripts/stack.sh' ha-primary 2>/dev/null",
             env_or("STOCKD_REPO", "."));
    return command_output(command, out, sizeof out) == 0 ? atoi(out) : 0;
}

int zk_tree(const char *path, char *out, size_t size)
{
    const char *zk = env_or("STOCKD_ZK", "127.0.0.1:24181");
    char command[1024];
    snprintf(command, sizeof command,
             "/usr/share/zookeeper/bin/zkCli.sh -server '%s' ls -R '%s' 2>/dev/null"
             " | grep '^/' | sort",
             zk, path);
    return command_output(command, out, size);
}

/* ------------------------------------------------------------ lua-stream */

/* The "stream" object of GET /stock/{product}. */
void stream_figures(int product, long long *length, long long *settled, long long *accepted)
{
    char path[64];
    long status;
    json_t *doc;
    snprintf(path, sizeof path, "/stock/%d", product);
    http_get(path, NULL, &status, &doc);
    assert_int_equal(status, 200);
    const json_t *stream = json_object_get(doc, "stream");
    assert_non_null(stream);
    *length = json_int_member(stream, "length");
    *settled = json_integer_value(json_object_get(stream, "settled"));
    *accepted = json_integer_value(json_object_get(stream, "accepted"));
    json_decref(doc);
}

/* Waits until the stream is empty and `orders` of `product` are in
 * MySQL; asserts it happens within STREAM_DRAIN_MS. */
void expect_stream_drained(int product, long long orders)
{
    long long length = -1, settled = -1, accepted = -1, deadline = now_ms() + STREAM_DRAIN_MS;
    for (;;) {
        stream_figures(product, &length, &settled, &accepted);
        if ((length == 0 && settled == orders) || now_ms() >= deadline)
            break;
        sleep_ms(50);
    }
    if (length != 0 || settled != orders)
        fprintf(stderr, "product %d: stream length %lld, %lld of %lld orders settled\n", product,
                length, settled, orders);
    assert_int_equal(length, 0);
    assert_int_equal(settled, orders);
}
