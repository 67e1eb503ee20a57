/*
 * it_hardening.c - what a web page, another local user or a slow client
 * can do to a running stockd, tried as they would (docs/security.md).
 *
 * Proves:
 *   - DNS rebinding: a request whose Host is a name other than localhost
 *     and --allowed-hosts gets 403 forbidden on any endpoint and changes
 *     nothing; IP addresses, localhost and the allowed names pass, on any
 *     port (a proxy in front passes its own);
 *   - a page on another port of the same machine (Sec-Fetch-Site:
 *     same-site) cannot sell; same-origin and none (a typed address) can;
 *   - an encoded NUL in a parameter's name or value, or in the path, is a
 *     400 that sells nothing; two Hosts, two Content-Lengths, or one with
 *     Transfer-Encoding, are a 400 with `Connection: close`; the Bearer
 *     scheme is case-insensitive;
 *   - a connection that trickles its request (head or body) is closed
 *     when --idle-timeout-s is up, however often it sends; a handful of
 *     addresses cannot take every connection slot with the default
 *     per-address limit, and /health still answers;
 *   - requests that wait on purpose (hold_ms) take a bounded share of the
 *     workers: beyond it they queue, beyond the knob queue 503 overloaded,
 *     and a flood of them whose clients went leaves the other requests
 *     served at once, the abandoned ones dropped and counted;
 *     reentrant-lock's watchdog renews no more often than every 33 ms,
 *     whatever ttl_ms asks;
 *   - connections libmicrohttpd gives up on are counted in /metrics and
 *     do not each write a log line;
 *   - both nginx configs let an idle upstream connection go before stockd
 *     would close it;
 *   - a client that sends half a request and closes its connection has it
 *     closed by stockd within a second, even in a burst many times its
 *     address's limit, amid heads trickling from other addresses, and when
 *     its request waits for a worker or runs (hold_ms): no socket is left
 *     in CLOSE_WAIT, and its address is served at once.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Product ids of this file; no other test touches them. */
enum {
    PRODUCT_REBIND = 9201,
    PRODUCT_SAME_SITE = 9202,
    PRODUCT_NUL = 9203,
    PRODUCT_FRAMING = 9204,
    PRODUCT_FLOOD = 9205,
    PRODUCT_SHARE = 9206,
    PRODUCT_WATCHDOG = 9207,
    PRODUCT_HANGUP = 9208,
};

#define TOKEN "a-token-for-the-hardening-tests"

static int stop_stockd(void **state)
{
    (void)state;
    return stockd_stop();
}

static int start_with_token(void **state)
{
    (void)state;
    static const char *const args[] = {"--admin-token", TOKEN, NULL};
    return stockd_start(args);
}

/* -------------------------------------------------------- raw sockets */

/* A socket to stockd from `from` (an address of 127.0.0.0/8, NULL: any),
 * or -1. */
static int raw_connect(const char *from)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in src = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    to.sin_port = htons((uint16_t)atoi(stockd_port()));
    if (from) {
        inet_pton(AF_INET, from, &src.sin_addr);
        if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0) {
            close(fd);
            return -1;
        }
    }
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether `fd` shows its end (EOF or an error) within `ms`; bytes that
 * arrive meanwhile are read and dropped. */
static int ends_within(int fd, long ms)
{
    long long deadline = now_ms() + ms;
    for (long long left; (left = deadline - now_ms()) > 0;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return 1;
    }
    return 0;
}

/* Sends `request` whole from `from` and reads the answer until the server
 * closes or `ms` pass: its status (0: none), the answer in `out`. */
static int raw_exchange(const char *from, const char *request, char *out, size_t size, long ms)
{
    out[0] = '\0';
    int fd = raw_connect(from);
    if (fd < 0)
        return 0;
    size_t got = 0;
    if (write(fd, request, strlen(request)) == (ssize_t)strlen(request)) {
        long long deadline = now_ms() + ms;
        for (long long left; got + 1 < size && (left = deadline - now_ms()) > 0;) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, (int)left) <= 0)
                continue;
            ssize_t n = recv(fd, out + got, size - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
    }
    out[got] = '\0';
    close(fd);
    int status = 0;
    return sscanf(out, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

/* --------------------------------------------------- DNS rebinding */

static void test_rebinding_host_is_refused(void **state)
{
    (void)state;
    reset(PRODUCT_REBIND, 5000);
    struct account before = account(PRODUCT_REBIND);
    /* A page of rebind.example, its name now pointing at 127.0.0.1: to the
     * browser it is same-origin, so Origin says nothing wrong. */
    static const char *const rebound[] = {"Host: rebind.example:8080",
                                          "Origin: http://rebind.example:8080", NULL};
    char path[96];
    struct http_reply r;
    snprintf(path, sizeof path, "/stock/reset?product=%d&count=5", PRODUCT_REBIND);
    http_call_with("POST", path, NULL, rebound, &r);
    assert_int_equal(r.status, 403);
    assert_string_equal(reply_word(&r), "forbidden");
    http_reply_free(&r);
    snprintf(path, sizeof path, "/stock/deduct/nolock?product=%d", PRODUCT_REBIND);
    http_call_with("GET", path, NULL, rebound, &r);
    assert_int_equal(r.status, 403);
    http_reply_free(&r);
    /* Reading too: the page must not learn the figures either. */
    snprintf(path, sizeof path, "/stock/%d", PRODUCT_REBIND);
    http_call_with("GET", path, NULL, rebound, &r);
    assert_int_equal(r.status, 403);
    http_reply_free(&r);
    struct account after = account(PRODUCT_REBIND);
    expect_same_account(&before, &after);

    /* stockd's own names, on any port (a proxy in front passes its own). */
    static const char *const own[][2] = {{"Host: localhost:18080", NULL},
                                         {"Host: LOCALHOST", NULL},
                                         {"Host: 127.0.0.1:1", NULL},
                                         {"Host: [::1]:8080", NULL}};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        http_call_with("GET", path, NULL, own[i], &r);
        if (r.status != 200)
            fprintf(stderr, "%s: %ld\n", own[i][0], r.status);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
}

static int start_with_allowed_hosts(void **state)
{
    (void)state;
    static const char *const args[] = {"--allowed-hosts", "stockd.lab,nginx", NULL};
    return stockd_start(args);
}

static void test_allowed_hosts_are_allowed(void **state)
{
    (void)state;
    static const char *const named[][2] = {
        {"Host: stockd.lab:8080", NULL}, {"Host: NGINX", NULL}, {"Host: localhost", NULL}};
    static const char *const others[][2] = {{"Host: stockd.lab.evil.example", NULL},
                                            {"Host: nginx.example:8080", NULL}};
    struct http_reply r;
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        http_call_with("GET", "/strategies", NULL, named[i], &r);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        http_call_with("GET", "/strategies", NULL, others[i], &r);
        assert_int_equal(r.status, 403);
        http_reply_free(&r);
    }
}

/* ------------------------------------------------------- same-site */

static void test_same_site_cannot_sell(void **state)
{
    (void)state;
    reset(PRODUCT_SAME_SITE, 100);
    struct account before = account(PRODUCT_SAME_SITE);
    /* <img src=...> on a page served from another port of 127.0.0.1. */
    static const char *const same_site[] = {"Sec-Fetch-Site: same-site", NULL};
    char path[96];
    struct http_reply r;
    snprintf(path, sizeof path, "/stock/deduct/sql?product=%d&qty=7", PRODUCT_SAME_SITE);
    http_call_with("GET", path, NULL, same_site, &r);
    assert_int_equal(r.status, 403);
    assert_string_equal(reply_word(&r), "forbidden");
    http_reply_free(&r);
    struct account after = account(PRODUCT_SAME_SITE);
    expect_same_account(&before, &after);
    /* The lab page's own requests, and an address typed in the bar. */
    static const char *const same_origin[] = {"Sec-Fetch-Site: same-origin", NULL};
    static const char *const typed[] = {"Sec-Fetch-Site: none", NULL};
    http_call_with("GET", path, NULL, same_origin, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    http_call_with("GET", path, NULL, typed, &r);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
}

/* ------------------------------------------------- request parsing */

static void test_encoded_nul_is_a_bad_request(void **state)
{
    (void)state;
    reset(PRODUCT_NUL, 100);
    struct account before = account(PRODUCT_NUL);
#define P "9203" /* PRODUCT_NUL */
    static const char *const paths[] = {
        "/stock/deduct/sql?product=" P "&qty%00x=5", /* read as qty=5 */
        "/stock/deduct/sql?product=" P "&qty=1%00junk",
        "/stock/deduct/sql%00?product=" P,
        "/stock/" P "%00abc",
        "/stock/deduct/sql?product=" P "&qty=1%0a",
    };
#undef P
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *method = strncmp(paths[i], "/stock/deduct", 13) == 0 ? "POST" : "GET";
        expect_error(method, paths[i], NULL, 400, "bad_request");
    }
    struct account after = account(PRODUCT_NUL);
    expect_same_account(&before, &after);
}

static void test_ambiguous_length_is_a_bad_request(void **state)
{
    (void)state;
    reset(PRODUCT_FRAMING, 100);
    struct account before = account(PRODUCT_FRAMING);
    static const char *const heads[] = {
        "Host: rebind.example\r\nContent-Length: 9\r\n\r\n{\"qty\":5}", /* a second Host */
        "Content-Length: 9\r\nContent-Length: 9\r\n\r\n{\"qty\":5}",
        "Content-Length: 9\r\nContent-Length: 0\r\n\r\n{\"qty\":5}",
        "Content-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{\"qty\":5}\r\n0\r\n\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n9\r\n{\"qty\":5}\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char request[512], answer[2048];
        snprintf(request, sizeof request,
                 "POST /stock/deduct/sql?product=%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\n%s",
                 PRODUCT_FRAMING, heads[i]);
        int status = raw_exchange(NULL, request, answer, sizeof answer, 3000);
        if (status != 400)
            fprintf(stderr, "%s\n-> %s\n", request, answer);
        assert_int_equal(status, 400);
        assert_non_null(strstr(answer, "\"bad_request\""));
        assert_non_null(strstr(answer, "Connection: close"));
    }
    struct account after = account(PRODUCT_FRAMING);
    expect_same_account(&before, &after);
}

static void test_bearer_scheme_is_case_insensitive(void **state)
{
    (void)state;
    static const char *const spellings[][2] = {
        {"Authorization: bearer " TOKEN, NULL},
        {"Authorization: BEARER " TOKEN, NULL},
        {"Authorization: Bearer  " TOKEN, NULL},
    };
    static const char *const wrong[] = {"Authorization: bearer not-" TOKEN, NULL};
    char path[96];
    snprintf(path, sizeof path, "/stock/reset?product=%d&count=3", PRODUCT_REBIND);
    struct http_reply r;
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        http_call_with("POST", path, NULL, spellings[i], &r);
        assert_int_equal(r.status, 200);
        http_reply_free(&r);
    }
    http_call_with("POST", path, NULL, wrong, &r);
    assert_int_equal(r.status, 401);
    http_reply_free(&r);
}

/* ------------------------------------------------------ slow clients */

static int start_short_idle(void **state)
{
    (void)state;
    static const char *const args[] = {"--idle-timeout-s", "2", NULL};
    return stockd_start(args);
}

/* Sends `first`, then `each` every 400 ms until the server closes the
 * connection (or 8 s pass): how long that took, -1 when it did not. */
static long long trickle(const char *first, const char *each)
{
    int fd = raw_connect(NULL);
    if (fd < 0)
        return -1;
    long long start = now_ms();
    int ended = send(fd, first, strlen(first), MSG_NOSIGNAL) < 0;
    while (!ended && now_ms() - start < 8000) {
        ended = ends_within(fd, 400);
        if (!ended && send(fd, each, strlen(each), MSG_NOSIGNAL) < 0)
            ended = 1;
    }
    close(fd);
    return ended ? now_ms() - start : -1;
}

/* A header line, or a byte of the body, every 400 ms: libmicrohttpd's idle
 * timer (2 s here) starts again at each, so only a deadline for the whole
 * request ends it. */
static void test_trickled_request_is_cut_off(void **state)
{
    (void)state;
    long long head = trickle("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", "X-Trickle: 1\r\n");
    long long body = trickle("POST /stock/deduct/sql?product=9204 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             "Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n",
                             " ");
    fprintf(stderr, "a trickled head was cut off after %lld ms, a trickled body after %lld ms\n",
            head, body);
    assert_true(head > 0 && head < 4000);
    assert_true(body > 0 && body < 4000);
    assert_true(metric("stockd_http_dropped_total{reason=\"head_deadline\"}") >= 2);
    /* An ordinary request on a kept-alive connection still gets its answer. */
    json_t *doc = expect_ok("GET", "/strategies", NULL, 200);
    json_decref(doc);
}

#define ADDRESSES 9
#define SOCKETS_PER_ADDRESS 20

static int start_small(void **state)
{
    (void)state;
    /* The default --max-per-ip: a sixteenth of these 160. */
    static const char *const args[] = {"--max-connections", "160", NULL};
    return stockd_start(args);
}

/* Nine addresses, twenty half-sent requests each: more than the 160 slots
 * if the per-address limit let them in. */
static void test_a_few_addresses_cannot_fill_the_server(void **state)
{
    (void)state;
    static int fds[ADDRESSES * SOCKETS_PER_ADDRESS];
    static const char half[] = "GET /strategies HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    int n = 0;
    for (int a = 0; a < ADDRESSES; a++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.0.%d", a + 2);
        for (int i = 0; i < SOCKETS_PER_ADDRESS; i++) {
            int fd = raw_connect(from);
            if (fd >= 0 && send(fd, half, sizeof half - 1, MSG_NOSIGNAL) < 0) {
                close(fd);
                fd = -1;
            }
            if (fd >= 0)
                fds[n++] = fd;
        }
    }
    sleep_ms(300); /* the loops take them in */
    char answer[8192];
    long long start = now_ms();
    int status =
        raw_exchange(NULL, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                     answer, sizeof answer, 3000);
    long long took = now_ms() - start;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    fprintf(stderr, "%d sockets from %d addresses; /health answered %d after %lld ms\n", n,
            ADDRESSES, status, took);
    assert_true(status == 200 || status == 503);
    assert_true(took < 2000);
}

/* ------------------------------------------------------------- knobs */

/* Sends a whole request and closes at once: a client that gave up. */
static void send_and_go(const char *request)
{
    int fd = raw_connect(NULL);
    if (fd < 0)
        return;
    if (send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
        fprintf(stderr, "send: %s\n", strerror(errno));
    close(fd);
}

#define FLOOD 64

static void test_knob_flood_leaves_the_workers(void **state)
{
    (void)state;
    reset(PRODUCT_FLOOD, 1000000);
    double dropped_before = metric("stockd_http_dropped_total{reason=\"client_gone\"}");
    char request[256];
    snprintf(request, sizeof request,
             "POST /stock/deduct/nolock?product=%d&hold_ms=1000 HTTP/1.1\r\nHost: "
             "127.0.0.1\r\nContent-Length: 0\r\n\r\n",
             PRODUCT_FLOOD);
    for (int i = 0; i < FLOOD; i++)
        send_and_go(request);
    sleep_ms(200); /* they are in: queued, or holding a worker */
    long long start = now_ms();
    struct account a = account(PRODUCT_FLOOD); /* a worker's request */
    long long took = now_ms() - start;
    (void)a;
    fprintf(stderr, "GET /stock/%d during a flood of %d held sales: %lld ms\n", PRODUCT_FLOOD,
            FLOOD, took);
    assert_true(took < 500);
    /* Of those whose client had gone before a worker took them, none ran. */
    assert_true(dropped_before >= 0);
    assert_int_equal(wait_metric("stockd_http_dropped_total{reason=\"client_gone\"}",
                                 dropped_before + FLOOD / 2, 10000),
                     0);
}

static int start_small_knob_share(void **state)
{
    (void)state;
    static const char *const args[] = {"--workers", "8", "--knob-workers", "2", "--knob-queue",
                                       "2",         NULL};
    return stockd_start(args);
}

#define HELD_SALES 6

static void test_knob_share_is_bounded(void **state)
{
    (void)state;
    reset(PRODUCT_SHARE, 100);
    struct background b[HELD_SALES];
    /* Two first, running before the others come: sent all at once, more
     * than two could find the lane's queue full before a worker took any
     * (on a loaded machine), and be refused. */
    for (int i = 0; i < HELD_SALES; i++) {
        start_background(&b[i], "sql", PRODUCT_SHARE, "hold_ms=600");
        if (i == 1)
            assert_int_equal(wait_metric("stockd_workers_busy", 2, 5000), 0);
    }
    /* Two hold a worker, two wait for the share: the other workers are free. */
    long long start = now_ms();
    struct account mid = account(PRODUCT_SHARE);
    assert_true(now_ms() - start < 300);
    (void)mid;
    int ok = 0, overloaded = 0;
    for (int i = 0; i < HELD_SALES; i++) {
        long status = finish_background(&b[i]);
        if (status == 200)
            ok++;
        if (status == 503 && strcmp(reply_word(&b[i].reply), "overloaded") == 0) {
            overloaded++;
            assert_string_equal(b[i].reply.retry_after, "1");
        }
        http_reply_free(&b[i].reply);
    }
    fprintf(stderr, "%d held sales: %d sold, %d overloaded\n", HELD_SALES, ok, overloaded);
    assert_int_equal(ok, 4);
    assert_int_equal(overloaded, 2);
    assert_int_equal(account(PRODUCT_SHARE).mysql.sold, 4);
}

/* Calls of EVAL and EVALSHA on the stack's Redis so far. */
static long long script_calls(void)
{
    char out[16384];
    assert_int_equal(redis_cli("INFO commandstats", out, sizeof out), 0);
    long long total = 0;
    static const char *const names[] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (size_t i = 0; i < 2; i++) {
        const char *at = strstr(out, names[i]);
        if (at)
            total += atoll(at + strlen(names[i]));
    }
    return total;
}

static void test_watchdog_has_a_floor(void **state)
{
    (void)state;
    reset(PRODUCT_WATCHDOG, 10);
    long long before = script_calls();
    /* ttl_ms 10: a renewal every 3 ms without a floor, ~100 in 300 ms. */
    expect_deduct("reentrant-lock", PRODUCT_WATCHDOG, "hold_ms=300&ttl_ms=10", 200, "");
    long long calls = script_calls() - before;
    fprintf(stderr, "one reentrant-lock sale held 300 ms with ttl_ms=10: %lld scripts\n", calls);
    assert_true(calls < 30); /* take, re-enter, release twice, ~9 renewals */
    struct account a = account(PRODUCT_WATCHDOG);
    assert_int_equal(a.mysql.sold, 1);
    assert_int_equal(a.mysql.oversold, 0);
}

/* ------------------------------------------------------------ errors */

static long log_lines(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/stockd-it_hardening.log",
             getenv("STOCKD_RUN_DIR") ? getenv("STOCKD_RUN_DIR") : "run/test");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long lines = 0;
    for (int c; (c = fgetc(f)) != EOF;)
        lines += c == '\n';
    fclose(f);
    return lines;
}

#define BROKEN 300

static void test_protocol_errors_are_counted_not_logged(void **state)
{
    (void)state;
    long lines_before = log_lines();
    double before = metric("stockd_http_dropped_total{reason=\"protocol_error\"}");
    assert_true(before >= 0);
    assert_true(lines_before > 0);
    for (int i = 0; i < BROKEN; i++) { /* a TLS hello, and no HTTP at all */
        char answer[1024];
        int status = raw_exchange(NULL, "\x16\x03\x01\x02\x05\x01 no HTTP\r\n\r\n", answer,
                                  sizeof answer, 3000);
        assert_int_equal(status, 400);
    }
    double counted = metric("stockd_http_dropped_total{reason=\"protocol_error\"}") - before;
    long grown = log_lines() - lines_before;
    fprintf(stderr, "%d broken requests: %g counted, %ld log lines\n", BROKEN, counted, grown);
    assert_true(counted >= BROKEN);
    assert_true(grown <= 2);
}

/* ------------------------------------------------------------- nginx */

/* keepalive_timeout in `file` (seconds), or -1. */
static long nginx_keepalive_s(const char *file)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/%s", getenv("STOCKD_REPO") ? getenv("STOCKD_REPO") : ".", file);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long s = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " keepalive_timeout %lds;", &s) == 1)
            break;
    fclose(f);
    return s;
}

/* stockd's default --idle-timeout-s, as its --help states it. */
static long stockd_idle_default_s(void)
{
    char command[1024], out[16384];
    snprintf(command, sizeof command, "%s --help",
             getenv("STOCKD_TEST_BIN") ? getenv("STOCKD_TEST_BIN") : "build/test/stockd");
    FILE *p = popen(command, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, sizeof out - 1, p);
    pclose(p);
    out[n] = '\0';
    const char *at = strstr(out, "STOCKD_IDLE_TIMEOUT_S, default ");
    return at ? atol(at + strlen("STOCKD_IDLE_TIMEOUT_S, default ")) : -1;
}

/* nginx must drop an idle upstream connection before stockd closes it:
 * else a request nginx sends on it as stockd closes it fails with 502. */
static void test_nginx_lets_go_first(void **state)
{
    (void)state;
    long idle = stockd_idle_default_s();
    static const char *const configs[] = {"deploy/nginx.conf.template",
                                          "deploy/nginx.compose.conf"};
    for (size_t i = 0; i < 2; i++) {
        long keep = nginx_keepalive_s(configs[i]);
        fprintf(stderr, "%s: keepalive_timeout %ld s; stockd's idle timeout %ld s\n", configs[i],
                keep, idle);
        assert_true(keep > 0 && idle > 0);
        assert_true(keep + 2 <= idle);
    }
}

/* ------------------------------------------------ clients that hang up */

/* A low --max-per-ip, so that a burst from one address is many times it;
 * two workers for hold_ms, so that most abandoned ones wait in the queue;
 * two loops, so that each sees closes by the hundred at once. */
#define PER_IP 32
#define BURST 600
#define SPREAD 20 /* addresses the measured burst comes from, under PER_IP each */
#define TRICKLING_ADDRESSES 9
#define ABANDONED_HOLDS 16 /* from HOLDS_FROM, within its limit */
#define HOLDS_FROM "127.0.0.12"
/* How long a closed connection may outlive its client. */
#define FREED_WITHIN_MS 1000

static const char half_head[] = "GET /health HTTP/1.1\r\nHo";
static const char health[] = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

static int start_low_per_ip(void **state)
{
    (void)state;
    static const char *const args[] = {
        "--max-per-ip", "32", "--knob-workers", "2", "--threads", "2", NULL};
    return stockd_start(args);
}

/* Sends `data` from `from` and closes at once, as a client that gives up;
 * whether it was sent. */
static int send_and_close(const char *from, const char *data)
{
    int fd = raw_connect(from);
    if (fd < 0)
        return 0;
    int sent = send(fd, data, strlen(data), MSG_NOSIGNAL) == (ssize_t)strlen(data);
    close(fd);
    return sent;
}

/* stockd's sockets in CLOSE_WAIT - their client closed, stockd has not -
 * as the kernel's tables say (/proc/net/tcp, and tcp6 where there is
 * one); -1 when they cannot be read. */
static int close_waits(void)
{
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    unsigned port = (unsigned)atoi(stockd_port());
    int n = 0;
    for (size_t t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "r");
        if (!f) {
            if (t == 0)
                return -1;
            continue;
        }
        char line[512];
        while (fgets(line, sizeof line, f)) {
            unsigned local_port, st; /* "sl: local:port remote:port st ..." in hex */
            if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &local_port, &st) ==
                    2 &&
                local_port == port && st == 0x08)
                n++;
        }
        fclose(f);
    }
    return n;
}

/* Waits until stockd has no socket in CLOSE_WAIT, for up to `ms`: how
 * long that took, or -1 (after printing how many were left). */
static long long close_waits_gone_within(long ms)
{
    long long start = now_ms();
    int n;
    while ((n = close_waits()) != 0 && now_ms() - start < ms)
        sleep_ms(2);
    if (n != 0)
        fprintf(stderr, "%d sockets of stockd's in CLOSE_WAIT after %ld ms\n", n, ms);
    return n == 0 ? now_ms() - start : -1;
}

/* GET /health from `from`: asserts an answer within FREED_WITHIN_MS. */
static void expect_health_from(const char *from)
{
    char answer[8192];
    long long start = now_ms();
    int status = raw_exchange(from, health, answer, sizeof answer, FREED_WITHIN_MS);
    long long took = now_ms() - start;
    fprintf(stderr, "/health from %s: %d after %lld ms\n", from ? from : "127.0.0.1", status, took);
    assert_true(status == 200 || status == 503);
    assert_true(took < FREED_WITHIN_MS);
}

static int by_value(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* BURST half heads from SPREAD addresses, each client shutting its
 * sending side as close() does but keeping the socket to see stockd close
 * its own: how long each took, median and max into `out`. */
static void time_freeing(long long out[2])
{
    static struct pollfd fds[BURST];
    static long long sent_at[BURST], took[BURST];
    int n = 0, left = 0;
    for (int i = 0; i < BURST; i++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.1.%d", 1 + i % SPREAD);
        int fd = raw_connect(from);
        if (fd < 0)
            continue;
        if (send(fd, half_head, sizeof half_head - 1, MSG_NOSIGNAL) < 0 ||
            shutdown(fd, SHUT_WR) != 0) {
            close(fd);
            continue;
        }
        sent_at[n] = now_ms();
        fds[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
        left++;
    }
    long long deadline = now_ms() + 5000;
    while (left && now_ms() < deadline) {
        if (poll(fds, (nfds_t)n, 100) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            char buf[256];
            ssize_t got = fds[i].revents ? recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT) : 1;
            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                took[--left] = now_ms() - sent_at[i];
                close(fds[i].fd);
                fds[i].fd = -1; /* poll() leaves it out from now on */
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    fprintf(stderr, "%d of %d half heads closed by stockd within 5 s\n", n - left, n);
    assert_int_equal(n, BURST);
    assert_int_equal(left, 0);
    qsort(took, (size_t)n, sizeof *took, by_value);
    out[0] = took[n / 2];
    out[1] = took[n - 1];
}

/* The attack: BURST connections from one address, each sending
 * half a head and closing. None may be left half-closed a second later,
 * and that address is served at once. */
static void test_half_sent_requests_are_freed(void **state)
{
    (void)state;
    int sent = 0;
    for (int i = 0; i < BURST; i++)
        sent += send_and_close(NULL, half_head);
    long long freed = close_waits_gone_within(FREED_WITHIN_MS);
    fprintf(stderr,
            "%d half heads sent from 127.0.0.1 and closed; none half-closed after %lld ms\n", sent,
            freed);
    assert_true(sent > PER_IP);
    assert_true(freed >= 0);
    expect_health_from(NULL);
    long long t[2];
    time_freeing(t);
    fprintf(stderr, "each half head freed after its client's close: median %lld ms, max %lld ms\n",
            t[0], t[1]);
    assert_true(t[1] < FREED_WITHIN_MS);
}

/* Whether `fd` ends (EOF or an error) within `ms` with nothing read: its
 * connection was closed before any answer. */
static int ends_unanswered(int fd, long ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[256];
    ssize_t n = poll(&p, 1, (int)ms) == 1 ? recv(fd, buf, sizeof buf, MSG_DONTWAIT) : 1;
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

/* ABANDONED_HOLDS hold_ms sales (from another address) whose clients go
 * while two of them run (holding for a second) and the rest wait for those
 * in the knob lane: their clients shut their sending side, as close()
 * does, but stay to see that stockd closes each connection before any
 * answer, not when the sale is over. Then the same burst as above, amid
 * heads trickling from TRICKLING_ADDRESSES others (each at its limit) and
 * those abandoned sales still in the pool. */
static void test_hangups_amid_tricklers_and_holds(void **state)
{
    (void)state;
    reset(PRODUCT_HANGUP, 1000000);
    double dropped_before = metric("stockd_http_dropped_total{reason=\"client_gone\"}");
    char hold[256];
    snprintf(hold, sizeof hold,
             "POST /stock/deduct/nolock?product=%d&hold_ms=1000 HTTP/1.1\r\nHost: "
             "127.0.0.1\r\nContent-Length: 0\r\n\r\n",
             PRODUCT_HANGUP);
    int holds[ABANDONED_HOLDS];
    for (int i = 0; i < ABANDONED_HOLDS; i++) {
        holds[i] = raw_connect(HOLDS_FROM);
        assert_true(holds[i] >= 0);
        assert_int_equal(send(holds[i], hold, strlen(hold), MSG_NOSIGNAL), (ssize_t)strlen(hold));
    }
    assert_int_equal(wait_metric("stockd_workers_busy", 2, 500), 0);
    /* Nothing else comes meanwhile: no other event wakes stockd to close them. */
    long long start = now_ms();
    for (int i = 0; i < ABANDONED_HOLDS; i++)
        assert_int_equal(shutdown(holds[i], SHUT_WR), 0);
    int unanswered = 0;
    for (int i = 0; i < ABANDONED_HOLDS; i++) {
        unanswered += ends_unanswered(holds[i], FREED_WITHIN_MS - (now_ms() - start));
        close(holds[i]);
    }
    long long holds_took = now_ms() - start;
    static int trickling[TRICKLING_ADDRESSES * PER_IP];
    static const char head[] = "GET /strategies HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    int n = 0;
    for (int a = 0; a < TRICKLING_ADDRESSES; a++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.0.%d", a + 2);
        for (int i = 0; i < PER_IP; i++) {
            int fd = raw_connect(from);
            if (fd >= 0 && send(fd, head, sizeof head - 1, MSG_NOSIGNAL) == sizeof head - 1)
                trickling[n++] = fd;
            else if (fd >= 0)
                close(fd);
        }
    }
    int sent = 0;
    for (int i = 0; i < BURST; i++)
        sent += send_and_close(NULL, half_head);
    long long freed = close_waits_gone_within(FREED_WITHIN_MS);
    fprintf(stderr,
            "%d abandoned hold_ms sales: %d closed unanswered within %lld ms; then %d heads "
            "trickling from %d addresses, %d half heads: none half-closed after %lld ms\n",
            ABANDONED_HOLDS, unanswered, holds_took, n, TRICKLING_ADDRESSES, sent, freed);
    assert_true(freed >= 0);
    assert_int_equal(unanswered, ABANDONED_HOLDS);
    expect_health_from(NULL);
    expect_health_from("127.0.0.11");
    /* The tricklers give up all at once: freed as fast, and nothing stalls. */
    for (int i = 0; i < n; i++)
        close(trickling[i]);
    long long tricklers_freed = close_waits_gone_within(FREED_WITHIN_MS);
    fprintf(stderr, "%d trickling heads closed by their clients: none half-closed after %lld ms\n",
            n, tricklers_freed);
    assert_true(tricklers_freed >= 0);
    expect_health_from("127.0.0.2");
    /* Those still queued never ran: dropped as their clients' once a worker came. */
    assert_int_equal(wait_metric("stockd_http_dropped_total{reason=\"client_gone\"}",
                                 dropped_before + ABANDONED_HOLDS - 2, 10000),
                     0);
}

int main(void)
{
    const struct CMUnitTest shared[] = {
        cmocka_unit_test(test_rebinding_host_is_refused),
        cmocka_unit_test(test_same_site_cannot_sell),
        cmocka_unit_test(test_encoded_nul_is_a_bad_request),
        cmocka_unit_test(test_ambiguous_length_is_a_bad_request),
        cmocka_unit_test(test_knob_flood_leaves_the_workers),
        cmocka_unit_test(test_watchdog_has_a_floor),
        cmocka_unit_test(test_protocol_errors_are_counted_not_logged),
        cmocka_unit_test(test_nginx_lets_go_first),
    };
    const struct CMUnitTest own[] = {
        cmocka_unit_test_setup_teardown(test_allowed_hosts_are_allowed, start_with_allowed_hosts,
                                        stop_stockd),
        cmocka_unit_test_setup_teardown(test_bearer_scheme_is_case_insensitive, start_with_token,
                                        stop_stockd),
        cmocka_unit_test_setup_teardown(test_trickled_request_is_cut_off, start_short_idle,
                                        stop_stockd),
        cmocka_unit_test_setup_teardown(test_a_few_addresses_cannot_fill_the_server, start_small,
                                        stop_stockd),
        cmocka_unit_test_setup_teardown(test_knob_share_is_bounded, start_small_knob_share,
                                        stop_stockd),
        cmocka_unit_test_setup_teardown(test_half_sent_requests_are_freed, start_low_per_ip,
                                        stop_stockd),
        cmocka_unit_test_setup_teardown(test_hangups_amid_tricklers_and_holds, start_low_per_ip,
                                        stop_stockd),
    };
    int failed = cmocka_run_group_tests_name("hostile clients, default stockd", shared,
                                             stockd_group_setup, stockd_group_teardown);
    failed += cmocka_run_group_tests_name("hostile clients, stockd set up for each", own,
                                          http_group_setup, stockd_group_teardown);
    return failed;
}
