/*
 * unit_config.c - configuration: defaults, STOCKD_* variables, flags (which
 * win), bounds, the limits derived from others, secrets read from files, and
 * a --help that documents every variable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "core/config.h"

static enum config_status load(int argc, char **argv, char *out, size_t size)
{
    FILE *sink = fmemopen(out, size, "w");
    assert_non_null(sink);
    enum config_status s = config_load(argc, argv, sink, sink);
    fclose(sink);
    return s;
}

static void test_defaults(void **state)
{
    (void)state;
    char text[4096] = "";
    char *argv[] = {"stockd", NULL};
    assert_int_equal(load(1, argv, text, sizeof text), CONFIG_RUN);
    assert_string_equal(config.listen, "127.0.0.1");
    assert_int_equal(config.port, 8080);
    assert_true(config.threads >= 1); /* 0 means one per core */
    assert_int_equal(config.max_body, 4096);
}

static void test_env_then_flags(void **state)
{
    (void)state;
    char text[4096] = "";
    setenv("STOCKD_PORT", "9090", 1);
    setenv("STOCKD_MYSQL_HOST", "db.internal", 1);
    char *env_only[] = {"stockd", NULL};
    assert_int_equal(load(1, env_only, text, sizeof text), CONFIG_RUN);
    assert_int_equal(config.port, 9090);
    assert_string_equal(config.mysql_host, "db.internal");
    char *flagged[] = {"stockd", "--port=9191", "--threads", "3", NULL};
    assert_int_equal(load(4, flagged, text, sizeof text), CONFIG_RUN);
    assert_int_equal(config.port, 9191);
    assert_int_equal(config.threads, 3);
    unsetenv("STOCKD_PORT");
    unsetenv("STOCKD_MYSQL_HOST");
}

/* --max-per-ip and --knob-workers default to a share of another limit. */
static void test_derived_limits(void **state)
{
    (void)state;
    char text[4096] = "";
    char *defaults[] = {"stockd", NULL};
    assert_int_equal(load(1, defaults, text, sizeof text), CONFIG_RUN);
    assert_int_equal(config.max_per_ip, 8192 / 16);
    assert_int_equal(config.knob_workers, 12); /* of 16 workers */
    assert_int_equal(config.knob_queue, 256);
    char *small[] = {"stockd", "--max-connections=160", "--workers=1", NULL};
    assert_int_equal(load(3, small, text, sizeof text), CONFIG_RUN);
    assert_int_equal(config.max_per_ip, 10);
    assert_int_equal(config.knob_workers, 1);
    char *given[] = {"stockd", "--max-per-ip=3", "--workers=8", "--knob-workers=99", NULL};
    assert_int_equal(load(4, given, text, sizeof text), CONFIG_RUN);
    assert_int_equal(config.max_per_ip, 3);
    assert_int_equal(config.knob_workers, 8); /* no more than there are */
}

static void test_rejects(void **state)
{
    (void)state;
    char text[4096] = "";
    char *bad_port[] = {"stockd", "--port=70000", NULL};
    assert_int_equal(load(2, bad_port, text, sizeof text), CONFIG_EXIT_USAGE);
    assert_non_null(strstr(text, "port must be an integer 1..65535"));
    char *unknown[] = {"stockd", "--colour=red", NULL};
    assert_int_equal(load(2, unknown, text, sizeof text), CONFIG_EXIT_USAGE);
    char *stray[] = {"stockd", "extra", NULL};
    assert_int_equal(load(2, stray, text, sizeof text), CONFIG_EXIT_USAGE);
    char *no_port[] = {"stockd", "--mysql-nodes=127.0.0.1:3306,127.0.0.2", NULL};
    assert_int_equal(load(2, no_port, text, sizeof text), CONFIG_EXIT_USAGE);
    assert_non_null(strstr(text, "mysql-nodes: '127.0.0.2' is not host:port"));
    char *nodes[] = {"stockd", "--mysql-nodes=127.0.0.1:3306,127.0.0.2:3307", NULL};
    assert_int_equal(load(2, nodes, text, sizeof text), CONFIG_RUN);
    setenv("STOCKD_THREADS", "many", 1);
    char *plain[] = {"stockd", NULL};
    assert_int_equal(load(1, plain, text, sizeof text), CONFIG_EXIT_USAGE);
    assert_non_null(strstr(text, "STOCKD_THREADS"));
    unsetenv("STOCKD_THREADS");
}

/* The consumer's test knob takes its two steps, nothing else. */
static void test_stream_hold(void **state)
{
    (void)state;
    char text[4096] = "";
    char *ack[] = {"stockd", "--stream-hold=ack", "--consume=1", NULL};
    assert_int_equal(load(3, ack, text, sizeof text), CONFIG_RUN);
    assert_string_equal(config.stream_hold, "ack");
    assert_int_equal(config.consume, 1);
    char *typo[] = {"stockd", "--stream-hold=commmit", NULL};
    assert_int_equal(load(2, typo, text, sizeof text), CONFIG_EXIT_USAGE);
    assert_non_null(strstr(text, "stream-hold must be commit or ack"));
}

static void test_help(void **state)
{
    (void)state;
    char text[16384] = "";
    char *argv[] = {"stockd", "--help", NULL};
    assert_int_equal(load(2, argv, text, sizeof text), CONFIG_EXIT_OK);
    const char *documented[] = {
        "STOCKD_LISTEN",         "STOCKD_PORT",           "STOCKD_THREADS",
        "STOCKD_MYSQL_PASSWORD", "STOCKD_REDIS_PORT",     "STOCKD_LOCK_TTL_MS",
        "STOCKD_LOCK_WAIT_MS",   "--optimistic-attempts", "STOCKD_ALLOWED_HOSTS",
        "STOCKD_KNOB_WORKERS",   "STOCKD_KNOB_QUEUE"};
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
        assert_non_null(strstr(text, documented[i]));
    const char *password = strstr(text, "STOCKD_MYSQL_PASSWORD");
    assert_non_null(password);
    assert_memory_equal(password + strlen("STOCKD_MYSQL_PASSWORD"), ", default (hidden)", 18);
}

/* A *-password-file's first line is the password (no line end); an empty
 * or missing file is a usage error. */
static void test_secret_files(void **state)
{
    (void)state;
    char text[4096] = "", path[] = "/tmp/stockd-unit-secret-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret\nignored\n", 15), 15);
    close(fd);
    char flag[64];
    snprintf(flag, sizeof flag, "--redis-password-file=%s", path);
    char *ok[] = {"stockd", flag, NULL};
    assert_int_equal(load(2, ok, text, sizeof text), CONFIG_RUN);
    assert_string_equal(config.redis_password, "s3cret");
    fd = open(path, O_WRONLY | O_TRUNC);
    close(fd);
    snprintf(flag, sizeof flag, "--mysql-password-file=%s", path);
    char *empty[] = {"stockd", flag, NULL};
    assert_int_equal(load(2, empty, text, sizeof text), CONFIG_EXIT_USAGE);
    unlink(path);
    char *missing[] = {"stockd", flag, NULL};
    assert_int_equal(load(2, missing, text, sizeof text), CONFIG_EXIT_USAGE);
    assert_non_null(strstr(text, "cannot read"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),       cmocka_unit_test(test_env_then_flags),
        cmocka_unit_test(test_derived_limits), cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_help),           cmocka_unit_test(test_stream_hold),
        cmocka_unit_test(test_secret_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
