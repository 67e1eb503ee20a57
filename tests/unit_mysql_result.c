/*
 * unit_mysql_result.c - a result that ends in an error is the statement's
 * error, even after its row.
 *
 * A Galera node whose applier aborts a transaction (a conflicting write set
 * from another node) while the transaction's SELECT ... FOR UPDATE ends
 * sends the row, then ER_LOCK_DEADLOCK. The transaction is rolled back, its
 * lock gone: a sale that took the row and dropped the rest of the result
 * wrote a count computed from that read, its UPDATE and INSERT running in
 * autocommit - a sale in the ledger and not in the count. The timing of a
 * real abort cannot be chosen, so the MySQL C API's calls are replaced at
 * link time (-Wl,--wrap, see the Makefile) by a server that answers every
 * statement at once and, when told, ends the locking read's result with
 * that error, as the client library sees it: the row first, then the error
 * to whoever reads on (a second fetch, or storing the whole result), and
 * nothing to mysql_stmt_free_result, which discards it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "strategy.h"
#include "worker.h"

/* ------------------------------------------------ the scripted server */

#define LOG_MAX 16

static struct {
    int abort_after_row; /* the locking read's result ends in 1213 */
    long long count;     /* the stock row's count                  */
    const char *log[LOG_MAX];
    int logged;
} server;

struct fake_stmt {
    const char *text;
    MYSQL_BIND *result;
    int fetched;  /* rows handed out so far     */
    int failed;   /* the error is this statement's */
    int ends_bad; /* its result ends in 1213      */
};

static void logged(const char *what)
{
    assert_true(server.logged < LOG_MAX);
    server.log[server.logged++] = what;
}

static int logged_starting(const char *prefix)
{
    for (int i = 0; i < server.logged; i++)
        if (strncmp(server.log[i], prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

static struct fake_stmt *fake(MYSQL_STMT *stmt)
{
    return (struct fake_stmt *)(void *)stmt;
}

MYSQL *__wrap_mysql_real_connect(MYSQL *m, const char *host, const char *user, const char *pw,
                                 const char *db, unsigned port, const char *sock,
                                 unsigned long flags)
{
    (void)host, (void)user, (void)pw, (void)db, (void)port, (void)sock, (void)flags;
    return m;
}

int __wrap_mysql_query(MYSQL *m, const char *sql)
{
    (void)m;
    if (strncmp(sql, "SET ", 4) != 0)
        logged(sql);
    return 0;
}

my_bool __wrap_mysql_commit(MYSQL *m)
{
    (void)m;
    logged("COMMIT");
    return 0;
}

my_bool __wrap_mysql_rollback(MYSQL *m)
{
    (void)m;
    logged("ROLLBACK");
    return 0;
}

MYSQL_STMT *__wrap_mysql_stmt_init(MYSQL *m)
{
    (void)m;
    return (MYSQL_STMT *)calloc(1, sizeof(struct fake_stmt));
}

int __wrap_mysql_stmt_prepare(MYSQL_STMT *stmt, const char *text, unsigned long length)
{
    (void)length;
    fake(stmt)->text = text;
    return 0;
}

my_bool __wrap_mysql_stmt_close(MYSQL_STMT *stmt)
{
    free(stmt);
    return 0;
}

unsigned long __wrap_mysql_stmt_param_count(MYSQL_STMT *stmt)
{
    unsigned long n = 0;
    for (const char *c = fake(stmt)->text; *c; c++)
        n += *c == '?';
    return n;
}

my_bool __wrap_mysql_stmt_bind_param(MYSQL_STMT *stmt, MYSQL_BIND *bind)
{
    (void)stmt, (void)bind;
    return 0;
}

static int is_select(MYSQL_STMT *stmt)
{
    return strncmp(fake(stmt)->text, "SELECT", 6) == 0;
}

int __wrap_mysql_stmt_execute(MYSQL_STMT *stmt)
{
    struct fake_stmt *f = fake(stmt);
    logged(f->text);
    f->fetched = 0;
    f->failed = 0;
    f->ends_bad = server.abort_after_row && strstr(f->text, "FOR UPDATE") != NULL;
    return 0;
}

unsigned int __wrap_mysql_stmt_field_count(MYSQL_STMT *stmt)
{
    return is_select(stmt) ? 4 : 0;
}

my_ulonglong __wrap_mysql_stmt_affected_rows(MYSQL_STMT *stmt)
{
    (void)stmt;
    return 1;
}

my_bool __wrap_mysql_stmt_bind_result(MYSQL_STMT *stmt, MYSQL_BIND *bind)
{
    fake(stmt)->result = bind;
    return 0;
}

/* Reads the whole result: the row, then its end - the error, if it ends so. */
int __wrap_mysql_stmt_store_result(MYSQL_STMT *stmt)
{
    fake(stmt)->failed = fake(stmt)->ends_bad;
    return fake(stmt)->failed;
}

/* The row (count, version, fence, epoch), then the result's end. */
int __wrap_mysql_stmt_fetch(MYSQL_STMT *stmt)
{
    struct fake_stmt *f = fake(stmt);
    if (f->fetched++ == 0) {
        long long row[4] = {server.count, 1, 0, 7};
        for (int i = 0; i < 4; i++) {
            *(long long *)f->result[i].buffer = row[i];
            *f->result[i].is_null = 0;
        }
        return 0;
    }
    if (f->ends_bad && !f->failed) { /* not stored: the error comes now */
        f->failed = 1;
        return 1;
    }
    return f->failed ? 1 : MYSQL_NO_DATA;
}

/* Discards whatever is left of the result, an error included. */
my_bool __wrap_mysql_stmt_free_result(MYSQL_STMT *stmt)
{
    (void)stmt;
    return 0;
}

unsigned int __wrap_mysql_stmt_errno(MYSQL_STMT *stmt)
{
    return fake(stmt)->failed ? ER_LOCK_DEADLOCK : 0;
}

const char *__wrap_mysql_stmt_error(MYSQL_STMT *stmt)
{
    return fake(stmt)->failed ? "Deadlock found when trying to get lock" : "";
}

/* --------------------------------------------------------------- tests */

static int reset_server(void **state)
{
    (void)state;
    memset(&server, 0, sizeof server);
    server.count = 10;
    return 0;
}

static st_result sell_one(struct deduct_reply *out)
{
    struct worker *w = worker_new();
    struct deduct_request rq = {.strategy = strategy_find("for-update"), .product = 1, .qty = 1};
    assert_non_null(rq.strategy);
    memset(out, 0, sizeof *out);
    st_result r = rq.strategy->deduct(w, &rq, out);
    backends_close(w);
    worker_free(w);
    return r;
}

static void test_a_sale_reads_locks_writes_and_commits(void **state)
{
    (void)state;
    struct deduct_reply out;
    assert_int_equal(sell_one(&out), ST_OK);
    assert_int_equal(out.remaining, 9);
    assert_int_equal(server.logged, 5);
    assert_string_equal(server.log[0], "START TRANSACTION");
    assert_non_null(strstr(server.log[1], "FOR UPDATE"));
    assert_true(logged_starting("UPDATE stock"));
    assert_true(logged_starting("INSERT INTO orders"));
    assert_string_equal(server.log[4], "COMMIT");
}

static void test_an_abort_after_the_row_is_busy_and_writes_nothing(void **state)
{
    (void)state;
    server.abort_after_row = 1;
    struct deduct_reply out;
    assert_int_equal(sell_one(&out), ST_BUSY);
    assert_false(logged_starting("UPDATE"));
    assert_false(logged_starting("INSERT"));
    assert_false(logged_starting("COMMIT"));
    assert_string_equal(server.log[server.logged - 1], "ROLLBACK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_a_sale_reads_locks_writes_and_commits, reset_server),
        cmocka_unit_test_setup(test_an_abort_after_the_row_is_busy_and_writes_nothing,
                               reset_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
