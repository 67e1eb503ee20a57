/*
 * mysql.h - MySQL/MariaDB access for the worker: connect lazily,
 * execute prepared statements, run transactions, map errors to results.
 * The backend itself (health, teardown, lock rows) is `backend_mysql`.
 */
#ifndef STOCKD_MYSQL_STORE_H
#define STOCKD_MYSQL_STORE_H

#include "backend/sql.h"
#include "core/result.h"

#include <stdio.h>

struct worker;

struct sql_value {
    enum { SQL_INT, SQL_TEXT } kind;
    long long num;
    const char *text;
};

#define SQL_I(x) ((struct sql_value){SQL_INT, (long long)(x), NULL})
#define SQL_S(s) ((struct sql_value){SQL_TEXT, 0, (s)})
/* SQL_ARGS(SQL_I(a), SQL_S(b)) expands to the array and its length. */
#define SQL_ARGS(...)                                                                              \
    (const struct sql_value[]){__VA_ARGS__},                                                       \
        (unsigned)(sizeof((const struct sql_value[]){__VA_ARGS__}) / sizeof(struct sql_value))

/* What one execution returned: the first row's columns (if any), whether a
 * row was there, and how many rows a write matched. */
#define SQL_COLUMNS_MAX 8
struct sql_outcome {
    long long col[SQL_COLUMNS_MAX];
    int found;
    unsigned long long matched;
    int duplicate; /* sql_insert_unique() only: the key was taken */
};

/*
 * Runs prepared statement `s` with `args`. Lock-wait timeouts and deadlocks
 * give ST_BUSY; anything else the server or the link says gives
 * ST_BACKEND_UNAVAILABLE and drops the connection, so the next call starts
 * clean. `out` may be NULL.
 */
st_result sql_exec(struct worker *w, enum sql_statement s, const struct sql_value *args,
                   unsigned nargs, struct sql_outcome *out);

/* sql_exec() for an INSERT whose duplicate key is an answer, not an error:
 * *inserted is 0 when the key was already there (how a lock table says
 * "held"). */
st_result sql_insert_unique(struct worker *w, enum sql_statement s, const struct sql_value *args,
                            unsigned nargs, int *inserted);

/* sql_exec() for a SELECT of one integer column whose every row counts
 * (a batch of ids): at most `max` of them into rows[], *n how many. */
st_result sql_exec_rows(struct worker *w, enum sql_statement s, const struct sql_value *args,
                        unsigned nargs, long long *rows, unsigned max, unsigned *n);

/* sql_exec() for a SELECT of one text column (a JSON document the server
 * renders): its first row into `text` (NUL-terminated), *found whether
 * there was one. A text longer than `size` is ST_BACKEND_UNAVAILABLE. */
st_result sql_exec_text(struct worker *w, enum sql_statement s, const struct sql_value *args,
                        unsigned nargs, char *text, size_t size, int *found);

st_result sql_begin(struct worker *w);
/* A transaction at READ COMMITTED: its locking reads lock the rows they
 * return and no gap, so a sweep claiming old rows blocks no new insert. */
st_result sql_begin_read_committed(struct worker *w);
/* ST_OUTCOME_UNKNOWN when the COMMIT was sent and its reply lost, or its
 * node left the cluster's primary component while replicating it. */
st_result sql_commit(struct worker *w);
/* What a COMMIT that failed with server or client error `err` answers:
 * ST_BUSY (contention: rolled back), ST_OUTCOME_UNKNOWN (it may have
 * committed) or ST_BACKEND_UNAVAILABLE (it did not). */
st_result sql_commit_failure(unsigned err);
/* Rolls back, dropping the connection if even that fails (the server then
 * rolls back for us). Never fails from the caller's point of view. */
void sql_rollback(struct worker *w);
/* Closes the worker's connection: what its session held (a GET_LOCK, an
 * open transaction) the server lets go of at once. For a release that could
 * not be sent or answered: a lock held by a session has no TTL to end it. */
void sql_drop_session(struct worker *w);

#endif
