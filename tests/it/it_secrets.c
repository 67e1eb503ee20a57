/*
 * it_secrets.c - the private stack's backends keep other local users out.
 *
 * Proves, against the test stack's real servers:
 *   - MariaDB's root cannot log in over TCP (only through the unix socket,
 *     as the system user who installed it), and SELECT ... INTO OUTFILE
 *     writes nowhere outside secure_file_priv (a directory under the run
 *     dir), not even as that administrator;
 *   - every Redis server and Sentinel the stack starts (main, replica,
 *     Redlock, the replicated group, its Sentinels) answers NOAUTH to a
 *     client without the password, DEBUG SLEEP and FLUSHALL included, and
 *     serves one that gives it;
 *   - the password files are this user's alone (0600, in a 0700 directory,
 *     as is the whole stack directory), and stockd, given only their paths,
 *     sells through each kind of Redis connection it makes (a worker's link,
 *     a loop's pipe, the Redlock servers) and through MariaDB;
 *   - a password file stockd cannot read is a start-up error (exit 2).
 */
#include "harness.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Product ids of this file; no other test touches them. */
enum { PRODUCT_SECRETS = 9301 };

#define STOCK 100

static const char *env_must(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        fail_msg("%s is not set: run under tests/run", name);
    return v;
}

/* Runs `command` with its standard error too; its exit status (0: success). */
static int run(const char *command, char *out, size_t size)
{
    char both[1024];
    snprintf(both, sizeof both, "%s 2>&1", command);
    return command_output(both, out, size);
}

/* --------------------------------------------------------------- MariaDB */

static void test_mysql_root_cannot_log_in_over_tcp(void **state)
{
    (void)state;
    char command[512], out[1024];
    snprintf(command, sizeof command,
             "mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P%s -uroot -e 'SELECT 1'",
             env_must("STACK_MYSQL_PORT"));
    assert_int_not_equal(run(command, out, sizeof out), 0);
    if (!strstr(out, "Access denied") && !strstr(out, "is not allowed to connect"))
        fail_msg("root over TCP: expected a refusal, got: %s", out);
}

/* SELECT ... INTO OUTFILE of a fresh path under /tmp, through
 * `client`; asserts that it is refused and that no file appears. */
static void expect_no_outfile(const char *client, const char *why)
{
    char path[64], command[1024], out[1024];
    snprintf(path, sizeof path, "/tmp/stockd-outfile-%d", (int)getpid());
    unlink(path);
    snprintf(command, sizeof command, "%s -e \"SELECT 'x' INTO OUTFILE '%s'\"", client, path);
    assert_int_not_equal(run(command, out, sizeof out), 0);
    if (!strstr(out, why))
        fail_msg("INTO OUTFILE: expected '%s', got: %s", why, out);
    assert_int_not_equal(access(path, F_OK), 0);
}

static void test_outfile_is_confined(void **state)
{
    (void)state;
    char stack[PATH_MAX + 64], client[PATH_MAX + 96];
    snprintf(stack, sizeof stack, "'%s/scripts/stack.sh'", env_must("STOCKD_REPO"));
    snprintf(client, sizeof client, "%s mysql --root", stack);
    expect_no_outfile(client, "secure-file-priv");
    snprintf(client, sizeof client, "%s mysql", stack); /* stockd's account: no FILE */
    expect_no_outfile(client, "FILE privilege");
}

/* ----------------------------------------------------------------- Redis */

/* Every Redis server and Sentinel of the stack: `each` gets its port. */
static void for_each_redis(void (*each)(int port, int sentinel))
{
    static const char *const lists[] = {"STACK_REDIS_PORT", "STACK_REDIS_REPLICA_PORT",
                                        "STACK_REDLOCK_PORTS", "STACK_HA_PORTS",
                                        "STACK_SENTINEL_PORTS"};
    int count = 0;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        char ports[256];
        snprintf(ports, sizeof ports, "%s", env_must(lists[i]));
        for (char *save, *p = strtok_r(ports, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
            each(atoi(p), strcmp(lists[i], "STACK_SENTINEL_PORTS") == 0);
            count++;
        }
    }
    assert_int_equal(count, 10);
}

static void expect_noauth(int port, const char *args)
{
    char command[256], out[512];
    snprintf(command, sizeof command, "env -u REDISCLI_AUTH redis-cli -h 127.0.0.1 -p %d %s", port,
             args);
    run(command, out, sizeof out);
    if (!strstr(out, "NOAUTH"))
        fail_msg("port %d, %s without the password: expected NOAUTH, got: %s", port, args, out);
}

static void refuses_without_password(int port, int sentinel)
{
    expect_noauth(port, "PING");
    expect_noauth(port, sentinel ? "SENTINEL MASTERS" : "DEBUG SLEEP 0");
    if (!sentinel)
        expect_noauth(port, "FLUSHALL");
    char out[64];
    assert_int_equal(redis_cli_at(port, "PING", out, sizeof out), 0); /* REDISCLI_AUTH */
    if (strncmp(out, "PONG", 4) != 0)
        fail_msg("port %d with the password: expected PONG, got: %s", port, out);
}

static void test_every_redis_wants_the_password(void **state)
{
    (void)state;
    for_each_redis(refuses_without_password);
}

/* ------------------------------------------------------------ the files */

static void expect_mode(const char *path, unsigned mode)
{
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("cannot stat %s", path);
    if ((st.st_mode & 0777) != mode)
        fail_msg("%s: mode %03o, expected %03o", path, st.st_mode & 0777, mode);
}

static void expect_private_file(const char *path)
{
    expect_mode(path, 0600);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    expect_mode(dir, 0700);
}

static void test_password_files_are_private(void **state)
{
    (void)state;
    expect_private_file(env_must("STOCKD_REDIS_PASSWORD_FILE"));
    expect_private_file(env_must("STOCKD_MYSQL_PASSWORD_FILE"));
    char stack[PATH_MAX];
    snprintf(stack, sizeof stack, "%s/stack", env_must("STOCKD_RUN_DIR"));
    expect_mode(stack, 0700);
}

/* ------------------------------------------------------------- stockd */

static void test_stockd_sells_with_the_password_files(void **state)
{
    (void)state;
    /* A worker's link (watch), a loop's pipe (lua), the Redlock servers'
     * links (redlock), and MariaDB (sql): each connects with the password. */
    static const char *const strategies[] = {"watch", "lua", "redlock", "sql"};
    reset(PRODUCT_SECRETS, STOCK);
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++)
        expect_deduct(strategies[i], PRODUCT_SECRETS, "qty=1", 200, "");
    struct account a = account(PRODUCT_SECRETS);
    assert_int_equal(account_store(&a, "mysql")->sold, 2); /* sql, redlock */
    assert_int_equal(account_store(&a, "redis")->sold, 2); /* watch, lua */
}

static void test_an_unreadable_password_file_is_a_start_up_error(void **state)
{
    (void)state;
    static const char *const missing[] = {"--redis-password-file=/nonexistent/redis.password",
                                          NULL};
    assert_int_equal(stockd_exit_status(missing), 2);
}

int main(void)
{
    const struct CMUnitTest with_stockd[] = {
        cmocka_unit_test(test_mysql_root_cannot_log_in_over_tcp),
        cmocka_unit_test(test_outfile_is_confined),
        cmocka_unit_test(test_every_redis_wants_the_password),
        cmocka_unit_test(test_password_files_are_private),
        cmocka_unit_test(test_stockd_sells_with_the_password_files),
    };
    const struct CMUnitTest own_stockd[] = {
        cmocka_unit_test(test_an_unreadable_password_file_is_a_start_up_error),
    };
    int failed = cmocka_run_group_tests(with_stockd, stockd_group_setup, stockd_group_teardown);
    return failed + cmocka_run_group_tests(own_stockd, http_group_setup, stockd_group_teardown);
}
