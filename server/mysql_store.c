/*
 * mysql_store.c - the worker's MySQL connection and prepared statements.
 *
 * Failure policy: a lock-wait timeout, a deadlock or a duplicate key (how a
 * lock table says "taken") is contention, so it is ST_BUSY and the
 * connection stays. Any other error may leave the link or
 * the session in an unknown state, so the connection is closed: the server
 * rolls back whatever was open, and the next request reconnects. That is
 * what makes "nothing half-written" and "recovers by itself" hold.
 */
#include "mysql_store.h"

#include "config.h"
#include "log.h"
#include "worker.h"

#include <assert.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <string.h>

static unsigned seconds_from_ms(int ms)
{
    return (unsigned)((ms + 999) / 1000);
}

void mysql_store_disconnect(struct worker *w)
{
    for (int i = 0; i < SQL_COUNT; i++) {
        if (w->statements[i])
            mysql_stmt_close(w->statements[i]);
        w->statements[i] = NULL;
    }
    if (w->mysql)
        mysql_close(w->mysql);
    w->mysql = NULL;
}

void mysql_store_drop_if_closed(struct worker *w)
{
    if (w->mysql && socket_peer_closed((int)mysql_get_socket(w->mysql))) {
        log_info("mysql: the server closed an idle connection; reconnecting");
        mysql_store_disconnect(w);
    }
}

/* Records the failure, drops the connection, and says 503. */
static st_result connection_failed(struct worker *w, const char *what, unsigned err,
                                   const char *message)
{
    w->mysql_errno = err;
    worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: %s: %s", what, message);
    log_warn("%s", w->error);
    mysql_store_disconnect(w);
    return ST_BACKEND_UNAVAILABLE;
}

static st_result classify(struct worker *w, const char *what, unsigned err, const char *message)
{
    w->mysql_errno = err;
    if (err == ER_LOCK_WAIT_TIMEOUT || err == ER_LOCK_DEADLOCK || err == ER_DUP_ENTRY)
        return worker_fail(w, ST_BUSY, "mysql: %s: %s", what, message);
    return connection_failed(w, what, err, message);
}

static st_result session_setup(struct worker *w)
{
    char sql[96];
    unsigned wait = seconds_from_ms(config.lock_wait_ms);
    snprintf(sql, sizeof sql, "SET SESSION innodb_lock_wait_timeout = %u", wait ? wait : 1);
    if (mysql_query(w->mysql, sql) != 0)
        return connection_failed(w, "session setup", mysql_errno(w->mysql), mysql_error(w->mysql));
    return ST_OK;
}

static st_result connect_if_needed(struct worker *w)
{
    if (w->mysql)
        return ST_OK;
    w->mysql = mysql_init(NULL);
    if (!w->mysql)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: out of memory");
    unsigned connect = seconds_from_ms(config.connect_timeout_ms);
    unsigned io = seconds_from_ms(config.io_timeout_ms);
    my_bool off = 0;
    mysql_options(w->mysql, MYSQL_OPT_CONNECT_TIMEOUT, &connect);
    mysql_options(w->mysql, MYSQL_OPT_READ_TIMEOUT, &io);
    mysql_options(w->mysql, MYSQL_OPT_WRITE_TIMEOUT, &io);
    mysql_options(w->mysql, MYSQL_OPT_RECONNECT, &off);
    /* CLIENT_FOUND_ROWS: a write's row count means "rows matched", which is
     * what the conditional updates compare against. */
    if (!mysql_real_connect(w->mysql, config.mysql_host, config.mysql_user, config.mysql_password,
                            config.mysql_db, (unsigned)config.mysql_port, NULL, CLIENT_FOUND_ROWS))
        return connection_failed(w, "connect", mysql_errno(w->mysql), mysql_error(w->mysql));
    log_debug("mysql: connected to %s:%d", config.mysql_host, config.mysql_port);
    return session_setup(w);
}

static st_result prepared(struct worker *w, enum sql_statement s, MYSQL_STMT **out)
{
    st_result r = connect_if_needed(w);
    if (r != ST_OK)
        return r;
    if (!w->statements[s]) {
        MYSQL_STMT *stmt = mysql_stmt_init(w->mysql);
        if (!stmt)
            return connection_failed(w, "prepare", mysql_errno(w->mysql), mysql_error(w->mysql));
        const char *text = sql_text(s);
        if (mysql_stmt_prepare(stmt, text, strlen(text)) != 0) {
            st_result failed =
                connection_failed(w, text, mysql_stmt_errno(stmt), mysql_stmt_error(stmt));
            mysql_stmt_close(stmt);
            return failed;
        }
        w->statements[s] = stmt;
    }
    *out = w->statements[s];
    return ST_OK;
}

static st_result statement_failed(struct worker *w, enum sql_statement s, MYSQL_STMT *stmt)
{
    return classify(w, sql_text(s), mysql_stmt_errno(stmt), mysql_stmt_error(stmt));
}

static void bind_args(MYSQL_BIND *bind, unsigned long *lengths, const struct sql_value *args,
                      unsigned nargs)
{
    memset(bind, 0, sizeof *bind * nargs);
    for (unsigned i = 0; i < nargs; i++) {
        if (args[i].kind == SQL_INT) {
            bind[i].buffer_type = MYSQL_TYPE_LONGLONG;
            bind[i].buffer = (void *)&args[i].num;
        } else {
            lengths[i] = strlen(args[i].text);
            bind[i].buffer_type = MYSQL_TYPE_STRING;
            bind[i].buffer = (void *)args[i].text;
            bind[i].buffer_length = lengths[i];
            bind[i].length = &lengths[i];
        }
    }
}

/* Fetches the first row of a result into `out`, then discards the rest. */
static st_result fetch_first_row(struct worker *w, enum sql_statement s, MYSQL_STMT *stmt,
                                 struct sql_outcome *out)
{
    unsigned ncols = mysql_stmt_field_count(stmt);
    assert(ncols <= sizeof out->col / sizeof out->col[0]);
    MYSQL_BIND bind[4];
    my_bool is_null[4];
    memset(bind, 0, sizeof bind);
    for (unsigned i = 0; i < ncols; i++) {
        bind[i].buffer_type = MYSQL_TYPE_LONGLONG;
        bind[i].buffer = &out->col[i];
        bind[i].is_null = &is_null[i];
    }
    if (mysql_stmt_bind_result(stmt, bind) != 0)
        return statement_failed(w, s, stmt);
    int rc = mysql_stmt_fetch(stmt);
    if (rc == 1)
        return statement_failed(w, s, stmt);
    out->found = rc != MYSQL_NO_DATA;
    for (unsigned i = 0; out->found && i < ncols; i++)
        if (is_null[i])
            out->col[i] = 0;
    mysql_stmt_free_result(stmt);
    return ST_OK;
}

st_result sql_exec(struct worker *w, enum sql_statement s, const struct sql_value *args,
                   unsigned nargs, struct sql_outcome *out)
{
    struct sql_outcome ignored;
    if (!out)
        out = &ignored;
    memset(out, 0, sizeof *out);
    MYSQL_STMT *stmt = NULL;
    st_result r = prepared(w, s, &stmt);
    if (r != ST_OK)
        return r;
    assert(nargs == mysql_stmt_param_count(stmt));
    MYSQL_BIND bind[8];
    unsigned long lengths[8];
    assert(nargs <= 8);
    bind_args(bind, lengths, args, nargs);
    if (mysql_stmt_bind_param(stmt, bind) != 0 || mysql_stmt_execute(stmt) != 0)
        return statement_failed(w, s, stmt);
    if (mysql_stmt_field_count(stmt) > 0)
        return fetch_first_row(w, s, stmt, out);
    out->matched = mysql_stmt_affected_rows(stmt);
    return ST_OK;
}

unsigned sql_last_errno(const struct worker *w)
{
    return w->mysql_errno;
}

static st_result plain_query(struct worker *w, const char *sql)
{
    st_result r = connect_if_needed(w);
    if (r != ST_OK)
        return r;
    if (mysql_query(w->mysql, sql) != 0)
        return classify(w, sql, mysql_errno(w->mysql), mysql_error(w->mysql));
    return ST_OK;
}

st_result sql_begin(struct worker *w)
{
    return plain_query(w, "START TRANSACTION");
}

st_result sql_commit(struct worker *w)
{
    if (!w->mysql)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: connection lost before commit");
    if (mysql_commit(w->mysql) != 0)
        return connection_failed(w, "commit", mysql_errno(w->mysql), mysql_error(w->mysql));
    return ST_OK;
}

void sql_rollback(struct worker *w)
{
    if (w->mysql && mysql_rollback(w->mysql) != 0) {
        log_warn("mysql: rollback failed (%s); dropping the connection", mysql_error(w->mysql));
        mysql_store_disconnect(w);
    }
}

st_result mysql_store_ping(struct worker *w)
{
    st_result r = connect_if_needed(w);
    if (r != ST_OK)
        return r;
    if (mysql_ping(w->mysql) != 0)
        return connection_failed(w, "ping", mysql_errno(w->mysql), mysql_error(w->mysql));
    return ST_OK;
}
