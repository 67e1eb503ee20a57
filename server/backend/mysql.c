/*
 * mysql.c - the MySQL backend: each worker's connection and its
 * prepared statements.
 *
 * Failure policy: a lock-wait timeout or a deadlock is contention, so it is
 * ST_BUSY and the connection stays. Any other error may leave the link or
 * the session in an unknown state, so the connection is closed: the server
 * rolls back whatever was open, and the next request reconnects. That is
 * what makes "nothing half-written" and "recovers by itself" hold. The one
 * exception is a COMMIT whose reply was lost: the server may have committed
 * before the link broke, so that is ST_OUTCOME_UNKNOWN, never "nothing
 * changed".
 *
 * On a multi-primary (Galera) cluster two more things happen. A transaction
 * that conflicts with one another node committed first loses at
 * certification: its COMMIT (or a statement, when the node's applier aborts
 * it) fails with ER_LOCK_DEADLOCK. Nothing of it was written, so that is the
 * same contention as a local deadlock - ST_BUSY, retried by the strategies
 * that retry - and never an outage. And a node dies: with --mysql-nodes a
 * worker connects to its node and, when that one refuses or is not part of
 * the cluster's primary component (ER_UNKNOWN_COM_ERROR, "WSREP has not yet
 * prepared node"), moves on to the next one; a whole list that does not
 * answer is one 503 after at most one connect timeout per node.
 *
 * A node applies the others' commits a moment after they are certified, so
 * a plain read there can miss a sale another node has already answered:
 * the lock strategies, whose lock lives elsewhere, would then write a count
 * computed from a stale read. On a cluster (--mysql-nodes) every session
 * sets wsrep_sync_wait (--mysql-sync-wait, 1 by default): each read first
 * waits until the node has applied everything certified before it.
 */
#include "backend/mysql.h"

#include "backend/backend.h"
#include "core/config.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/worker.h"

#include <assert.h>
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <stdlib.h>
#include <string.h>

/* The servers a worker may connect to: --mysql-nodes, or else the one of
 * --mysql-host and --mysql-port (config_load()). */
static const struct server_list *const nodes = &config.mysql_servers;

static const struct server_addr *node_at(int i)
{
    return &nodes->at[i % nodes->count];
}

/* One worker's connection, in its BACKEND_MYSQL slot. */
struct mysql_link {
    int node;                          /* the node it uses, or tries first next time */
    MYSQL *conn;                       /* NULL until needed or after a failure */
    long long used_ms;                 /* when a request last went through it  */
    MYSQL_STMT *statements[SQL_COUNT]; /* prepared on first use per connection */
    int connections;                   /* made so far: every one after the first is a reconnect */
};

static struct mysql_link *link_of(struct worker *w)
{
    return worker_links(w, BACKEND_MYSQL, sizeof(struct mysql_link), NULL);
}

static unsigned seconds_from_ms(int ms)
{
    return (unsigned)((ms + 999) / 1000);
}

static void disconnect(struct mysql_link *link)
{
    for (int i = 0; i < SQL_COUNT; i++) {
        if (link->statements[i])
            mysql_stmt_close(link->statements[i]);
        link->statements[i] = NULL;
    }
    if (link->conn)
        mysql_close(link->conn);
    link->conn = NULL;
}

static void drop_if_closed(struct worker *w)
{
    struct mysql_link *link = w->links[BACKEND_MYSQL];
    if (link && link->conn && idle_link_closed((int)mysql_get_socket(link->conn), link->used_ms)) {
        log_info("mysql: the server closed an idle connection; reconnecting");
        disconnect(link);
    }
}

static void close_links(struct worker *w)
{
    struct mysql_link *link = w->links[BACKEND_MYSQL];
    if (!link)
        return;
    disconnect(link);
    free(link);
    w->links[BACKEND_MYSQL] = NULL;
    mysql_thread_end();
}

/* Records the failure, drops the connection, and answers `r` (503). */
static st_result connection_failed_as(struct worker *w, st_result r, const char *what,
                                      const char *message)
{
    worker_fail(w, r, "mysql: %s: %s", what, message);
    log_warn("%s", w->error);
    disconnect(link_of(w));
    return r;
}

static st_result connection_failed(struct worker *w, const char *what, const char *message)
{
    return connection_failed_as(w, ST_BACKEND_UNAVAILABLE, what, message);
}

/* A lock-wait timeout, a deadlock, a lost certification: contention. */
static int contended(unsigned err)
{
    return err == ER_LOCK_WAIT_TIMEOUT || err == ER_LOCK_DEADLOCK;
}

static st_result classify(struct worker *w, const char *what, unsigned err, const char *message)
{
    if (contended(err))
        return worker_fail(w, ST_BUSY, "mysql: %s: %s", what, message);
    /* A cluster node outside the primary component refuses every query
     * while it accepts connections: the next connection goes elsewhere. */
    if (err == ER_UNKNOWN_COM_ERROR && nodes->count > 1)
        link_of(w)->node++;
    return connection_failed(w, what, message);
}

static st_result session_setup(struct worker *w, MYSQL *conn)
{
    char sql[96];
    unsigned wait = seconds_from_ms(config.lock_wait_ms);
    snprintf(sql, sizeof sql, "SET SESSION innodb_lock_wait_timeout = %u", wait ? wait : 1);
    if (mysql_query(conn, sql) != 0)
        return connection_failed(w, "session setup", mysql_error(conn));
    if (!config.mysql_cluster)
        return ST_OK;
    snprintf(sql, sizeof sql, "SET SESSION wsrep_sync_wait = %d", config.mysql_sync_wait);
    if (mysql_query(conn, sql) != 0)
        return connection_failed(w, "session setup", mysql_error(conn));
    return ST_OK;
}

/* Connects `conn` to one node; the session set up, or 0 with the reason. */
static int connect_node(MYSQL *conn, const struct server_addr *node)
{
    unsigned connect = seconds_from_ms(config.connect_timeout_ms);
    unsigned io = seconds_from_ms(config.io_timeout_ms);
    my_bool off = 0;
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &connect);
    mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &io);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &io);
    mysql_options(conn, MYSQL_OPT_RECONNECT, &off);
    if (config.bind_source[0] && mysql_options(conn, MYSQL_OPT_BIND, config.bind_source) != 0)
        return 0; /* the connector does not know the option: no connection from elsewhere */
    /* CLIENT_FOUND_ROWS: a write's row count means "rows matched", which is
     * what the conditional updates compare against. */
    return mysql_real_connect(conn, node->host, config.mysql_user, config.mysql_password,
                              config.mysql_db, (unsigned)node->port, NULL,
                              CLIENT_FOUND_ROWS) != NULL;
}

/* This worker's connection, connected if it was not: to its node, else to
 * each next one of --mysql-nodes in turn. */
static st_result connected(struct worker *w, MYSQL **out)
{
    struct mysql_link *link = link_of(w);
    *out = link->conn;
    link->used_ms = monotonic_ms();
    if (link->conn)
        return ST_OK;
    if (link->connections++)
        metrics_reconnect(BACKEND_MYSQL);
    int tries = nodes->count;
    char why[512] = "";
    for (int i = 0; i < tries; i++, link->node++) {
        const struct server_addr *node = node_at(link->node);
        MYSQL *conn = mysql_init(NULL);
        if (!conn)
            return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: out of memory");
        if (connect_node(conn, node)) {
            link->node %= tries;
            link->conn = conn;
            if (i)
                log_warn("mysql: connected to %s:%d, the next node that answers", node->host,
                         node->port);
            st_result r = session_setup(w, conn);
            if (r == ST_OK)
                *out = conn;
            return r;
        }
        size_t len = strlen(why);
        snprintf(why + len, sizeof why - len, "%s%s:%d: %s", i ? "; " : "", node->host, node->port,
                 mysql_error(conn));
        mysql_close(conn);
    }
    link->node %= tries;
    return connection_failed(w, nodes->count > 1 ? "no node of --mysql-nodes answers" : "connect",
                             why);
}

static st_result prepared(struct worker *w, enum sql_statement s, MYSQL_STMT **out)
{
    MYSQL *conn;
    st_result r = connected(w, &conn);
    if (r != ST_OK)
        return r;
    struct mysql_link *link = link_of(w);
    if (!link->statements[s]) {
        MYSQL_STMT *stmt = mysql_stmt_init(conn);
        if (!stmt)
            return connection_failed(w, "prepare", mysql_error(conn));
        const char *text = sql_text(s);
        if (mysql_stmt_prepare(stmt, text, strlen(text)) != 0) {
            /* A cluster reports a transaction its applier aborted on the
             * next command, whatever it is: a prepare can say "deadlock". */
            char why[256];
            unsigned err = mysql_stmt_errno(stmt);
            snprintf(why, sizeof why, "%s", mysql_stmt_error(stmt));
            mysql_stmt_close(stmt);
            return classify(w, text, err, why);
        }
        link->statements[s] = stmt;
    }
    *out = link->statements[s];
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

/* Reads the whole result, then takes up to `max` rows of integers into
 * rows[] (`width` columns each), *n how many.
 *
 * Whole, because the end of a result can be an error after its row: a
 * Galera node whose applier aborts the transaction (a conflicting write
 * set from another node) while a SELECT ... FOR UPDATE finishes sends the
 * row, then ER_LOCK_DEADLOCK. Taking the row and discarding the rest
 * (mysql_stmt_free_result drops that error) left the caller writing a count
 * computed from a read whose lock was gone, in a session whose transaction
 * was rolled back: its UPDATE and INSERT then ran in autocommit, a sale in
 * the ledger and not in the count (a lost update). */
static st_result fetch_rows(struct worker *w, enum sql_statement s, MYSQL_STMT *stmt,
                            long long *rows, unsigned width, unsigned max, unsigned *n)
{
    *n = 0;
    if (mysql_stmt_store_result(stmt) != 0)
        return statement_failed(w, s, stmt);
    unsigned ncols = mysql_stmt_field_count(stmt);
    assert(ncols <= width && width <= SQL_COLUMNS_MAX);
    long long row[SQL_COLUMNS_MAX];
    MYSQL_BIND bind[SQL_COLUMNS_MAX];
    my_bool is_null[SQL_COLUMNS_MAX];
    memset(bind, 0, sizeof bind);
    for (unsigned i = 0; i < ncols; i++) {
        bind[i].buffer_type = MYSQL_TYPE_LONGLONG;
        bind[i].buffer = &row[i];
        bind[i].is_null = &is_null[i];
    }
    if (mysql_stmt_bind_result(stmt, bind) != 0)
        return statement_failed(w, s, stmt);
    int rc;
    while (*n < max && (rc = mysql_stmt_fetch(stmt)) != MYSQL_NO_DATA) {
        if (rc == 1)
            return statement_failed(w, s, stmt);
        for (unsigned i = 0; i < ncols; i++)
            rows[*n * width + i] = is_null[i] ? 0 : row[i];
        ++*n;
    }
    mysql_stmt_free_result(stmt);
    return ST_OK;
}

/* The first row of the result into `out` (fetch_rows()). */
static st_result fetch_first_row(struct worker *w, enum sql_statement s, MYSQL_STMT *stmt,
                                 struct sql_outcome *out)
{
    unsigned n;
    st_result r = fetch_rows(w, s, stmt, out->col, SQL_COLUMNS_MAX, 1, &n);
    out->found = n > 0;
    return r;
}

/* Prepares (once), binds and executes `s` into *out_stmt; *duplicate (when
 * not NULL) says a duplicate key was the answer, not a failure. */
static st_result run(struct worker *w, enum sql_statement s, const struct sql_value *args,
                     unsigned nargs, MYSQL_STMT **out_stmt, int *duplicate)
{
    MYSQL_STMT *stmt = NULL;
    st_result r = prepared(w, s, &stmt);
    if (r != ST_OK)
        return r;
    assert(nargs == mysql_stmt_param_count(stmt));
    MYSQL_BIND bind[8];
    unsigned long lengths[8];
    assert(nargs <= 8);
    bind_args(bind, lengths, args, nargs);
    *out_stmt = stmt;
    if (mysql_stmt_bind_param(stmt, bind) == 0 && mysql_stmt_execute(stmt) == 0)
        return ST_OK;
    if (duplicate && mysql_stmt_errno(stmt) == ER_DUP_ENTRY) {
        *duplicate = 1;
        return ST_OK;
    }
    return statement_failed(w, s, stmt);
}

/* Binds, executes and reads back `s`; with `accept_duplicate`, a duplicate
 * key is an answer (out->duplicate), not a failure. */
static st_result execute(struct worker *w, enum sql_statement s, const struct sql_value *args,
                         unsigned nargs, struct sql_outcome *out, int accept_duplicate)
{
    memset(out, 0, sizeof *out);
    MYSQL_STMT *stmt = NULL;
    st_result r = run(w, s, args, nargs, &stmt, accept_duplicate ? &out->duplicate : NULL);
    if (r != ST_OK || out->duplicate)
        return r;
    if (mysql_stmt_field_count(stmt) > 0)
        return fetch_first_row(w, s, stmt, out);
    out->matched = mysql_stmt_affected_rows(stmt);
    return ST_OK;
}

st_result sql_exec(struct worker *w, enum sql_statement s, const struct sql_value *args,
                   unsigned nargs, struct sql_outcome *out)
{
    struct sql_outcome ignored;
    return execute(w, s, args, nargs, out ? out : &ignored, 0);
}

st_result sql_insert_unique(struct worker *w, enum sql_statement s, const struct sql_value *args,
                            unsigned nargs, int *inserted)
{
    struct sql_outcome done;
    st_result r = execute(w, s, args, nargs, &done, 1);
    *inserted = r == ST_OK && !done.duplicate;
    return r;
}

st_result sql_exec_rows(struct worker *w, enum sql_statement s, const struct sql_value *args,
                        unsigned nargs, long long *rows, unsigned max, unsigned *n)
{
    MYSQL_STMT *stmt = NULL;
    *n = 0;
    st_result r = run(w, s, args, nargs, &stmt, NULL);
    return r == ST_OK ? fetch_rows(w, s, stmt, rows, 1, max, n) : r;
}

st_result sql_exec_text(struct worker *w, enum sql_statement s, const struct sql_value *args,
                        unsigned nargs, char *text, size_t size, int *found)
{
    MYSQL_STMT *stmt = NULL;
    *found = 0;
    assert(size > 1);
    st_result r = run(w, s, args, nargs, &stmt, NULL);
    if (r != ST_OK)
        return r;
    if (mysql_stmt_store_result(stmt) != 0)
        return statement_failed(w, s, stmt);
    assert(mysql_stmt_field_count(stmt) == 1);
    unsigned long length = 0;
    my_bool is_null = 0;
    MYSQL_BIND bind = {.buffer_type = MYSQL_TYPE_STRING,
                       .buffer = text,
                       .buffer_length = size - 1,
                       .length = &length,
                       .is_null = &is_null};
    if (mysql_stmt_bind_result(stmt, &bind) != 0)
        return statement_failed(w, s, stmt);
    int rc = mysql_stmt_fetch(stmt);
    mysql_stmt_free_result(stmt);
    if (rc == 1)
        return statement_failed(w, s, stmt);
    if (rc == MYSQL_DATA_TRUNCATED || length >= size)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: %s: a text over %zu bytes",
                           sql_text(s), size - 1);
    *found = rc != MYSQL_NO_DATA && !is_null;
    text[*found ? length : 0] = '\0';
    return ST_OK;
}

static st_result plain_query(struct worker *w, const char *sql)
{
    MYSQL *conn;
    st_result r = connected(w, &conn);
    if (r != ST_OK)
        return r;
    if (mysql_query(conn, sql) != 0)
        return classify(w, sql, mysql_errno(conn), mysql_error(conn));
    return ST_OK;
}

st_result sql_begin(struct worker *w)
{
    return plain_query(w, "START TRANSACTION");
}

st_result sql_begin_read_committed(struct worker *w)
{
    st_result r = plain_query(w, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
    return r == ST_OK ? sql_begin(w) : r;
}

st_result sql_commit_failure(unsigned err)
{
    /* A lost certification (or a deadlock): rolled back, nothing written. */
    if (contended(err))
        return ST_BUSY;
    /* Sent, and the reply lost (or late): the server may have committed. */
    if (err == CR_SERVER_LOST)
        return ST_OUTCOME_UNKNOWN;
    /* A Galera node that leaves the primary component while its write set is
     * being replicated fails the COMMIT with ER_ERROR_DURING_COMMIT ("Not
     * connected to Primary Component"): the write set may have reached the
     * nodes that stay primary, and be certified and applied there: a node
     * cut from the other two under load (`make partition`, docs/cluster.md)
     * answered a COMMIT so whose sale was then in the majority's ledger. So
     * it is an unknown outcome, never "nothing changed". */
    if (err == ER_ERROR_DURING_COMMIT)
        return ST_OUTCOME_UNKNOWN;
    return ST_BACKEND_UNAVAILABLE;
}

st_result sql_commit(struct worker *w)
{
    MYSQL *conn = link_of(w)->conn;
    if (!conn)
        return worker_fail(w, ST_BACKEND_UNAVAILABLE, "mysql: connection lost before commit");
    if (mysql_commit(conn) == 0)
        return ST_OK;
    st_result r = sql_commit_failure(mysql_errno(conn));
    if (r == ST_BUSY)
        return worker_fail(w, ST_BUSY, "mysql: commit: %s", mysql_error(conn));
    return connection_failed_as(w, r, "commit", mysql_error(conn));
}

void sql_rollback(struct worker *w)
{
    struct mysql_link *link = link_of(w);
    /* A deadlock here is a transaction already rolled back (a cluster's
     * applier aborted it): the session is clean. */
    if (link->conn && mysql_rollback(link->conn) != 0 && !contended(mysql_errno(link->conn))) {
        log_warn("mysql: rollback failed (%s); dropping the connection", mysql_error(link->conn));
        disconnect(link);
    }
}

void sql_drop_session(struct worker *w)
{
    struct mysql_link *link = link_of(w);
    if (link->conn) {
        log_warn("mysql: dropping the connection to end its session");
        disconnect(link);
    }
}

static st_result ping(struct worker *w)
{
    MYSQL *conn;
    st_result r = connected(w, &conn);
    if (r != ST_OK)
        return r;
    if (mysql_ping(conn) != 0)
        return connection_failed(w, "ping", mysql_error(conn));
    return ST_OK;
}

/* Deletes lock-table rows by name (the mysql-lock strategy's). */
static st_result clear(struct worker *w, const char *const *names, int count)
{
    st_result r = ST_OK;
    for (int i = 0; r == ST_OK && i < count; i++)
        r = sql_exec(w, SQL_LOCK_ROW_CLEAR, SQL_ARGS(SQL_S(names[i])), NULL);
    return r;
}

const struct backend backend_mysql = {
    .name = "mysql",
    .ping = ping,
    .drop_if_closed = drop_if_closed,
    .close = close_links,
    .clear = clear,
};
