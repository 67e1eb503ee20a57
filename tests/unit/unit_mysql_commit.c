/*
 * unit_mysql_commit.c - what a failed COMMIT answers. The contract allows
 * "nothing changed" (503 backend_unavailable, 409 busy) only when nothing
 * can have been written; a COMMIT that may have been applied somewhere is
 * 503 outcome_unknown, and the ledger is the truth. The case that made this
 * a table of its own: a Galera node that leaves the primary component while
 * replicating a COMMIT's write set fails it with ER_ERROR_DURING_COMMIT,
 * and the nodes that stay primary may have certified and applied it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errmsg.h>
#include <mysqld_error.h>

#include "backend/mysql.h"

static void test_contention_is_busy(void **state)
{
    (void)state;
    /* a lost certification or a local deadlock: rolled back */
    assert_int_equal(sql_commit_failure(ER_LOCK_DEADLOCK), ST_BUSY);
    assert_int_equal(sql_commit_failure(ER_LOCK_WAIT_TIMEOUT), ST_BUSY);
}

static void test_maybe_committed_is_unknown(void **state)
{
    (void)state;
    /* the reply lost after the COMMIT went out */
    assert_int_equal(sql_commit_failure(CR_SERVER_LOST), ST_OUTCOME_UNKNOWN);
    /* the node left the primary component while replicating it */
    assert_int_equal(sql_commit_failure(ER_ERROR_DURING_COMMIT), ST_OUTCOME_UNKNOWN);
}

static void test_refused_is_unavailable(void **state)
{
    (void)state;
    /* a node outside the primary component refuses the COMMIT before anything */
    assert_int_equal(sql_commit_failure(ER_UNKNOWN_COM_ERROR), ST_BACKEND_UNAVAILABLE);
    assert_int_equal(sql_commit_failure(CR_SERVER_GONE_ERROR), ST_BACKEND_UNAVAILABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contention_is_busy),
        cmocka_unit_test(test_maybe_committed_is_unknown),
        cmocka_unit_test(test_refused_is_unavailable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
