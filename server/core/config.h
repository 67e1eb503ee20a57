/*
 * config.h - every setting of stockd, from flags and STOCKD_* variables.
 *
 * One table in config.c describes each option once: its flag, its
 * environment variable, its bounds, its default and its help line. Defaults
 * are applied first, then the environment, then the command line, so a flag
 * always wins. Nothing else in stockd reads the environment.
 */
#ifndef STOCKD_CONFIG_H
#define STOCKD_CONFIG_H

#include <stdio.h>

#define CONFIG_TEXT_MAX 256

/* One host:port of a server list (--redlock, --redis-sentinel, --mysql-nodes,
 * --redis-cluster). */
struct server_addr {
    char host[CONFIG_TEXT_MAX];
    int port;
};

/* The most servers one list may name. */
#define CONFIG_SERVERS_MAX 9

/* A list of servers, parsed once by config_load(): the backends only read
 * it, so configuration depends on no backend. */
struct server_list {
    struct server_addr at[CONFIG_SERVERS_MAX];
    int count;
};

struct config {
    char listen[CONFIG_TEXT_MAX]; /* IPv4 address to bind                      */
    int port;
    int threads;  /* libmicrohttpd HTTP threads; 0 = one per core            */
    int workers;  /* request workers, each with its own backend connections */
    int max_body; /* bytes; larger request bodies get 413                    */
    char log_level[16];
    char instance_name[CONFIG_TEXT_MAX];    /* X-Stockd-Instance; "" = host:port */
    char admin_token[CONFIG_TEXT_MAX];      /* reset needs it when set            */
    char admin_token_file[CONFIG_TEXT_MAX]; /* read into admin_token, "" = none */

    int queue_max;                       /* requests waiting for a worker before 503 overloaded */
    int request_timeout_ms;              /* a request's deadline, from its arrival             */
    int drain_ms;                        /* a stop's hard deadline                             */
    int max_connections;                 /* open HTTP connections in all                       */
    int max_per_ip;                      /* open HTTP connections from one address             */
    int idle_timeout_s;                  /* an HTTP connection idle this long, or this long
                                            without a whole request, is closed                */
    char allowed_hosts[CONFIG_TEXT_MAX]; /* Host names besides IPs and localhost */
    int knob_workers; /* workers that may run hold_ms/pause_ms requests at once */
    int knob_queue;   /* such requests waiting for them before 503 overloaded   */

    char mysql_host[CONFIG_TEXT_MAX];
    int mysql_port;
    char mysql_user[CONFIG_TEXT_MAX];
    char mysql_password[CONFIG_TEXT_MAX];
    char mysql_password_file[CONFIG_TEXT_MAX]; /* read into mysql_password, "" = none */
    char mysql_db[CONFIG_TEXT_MAX];
    char mysql_nodes[CONFIG_TEXT_MAX]; /* a cluster's nodes, host:port,..., "" = none */
    int mysql_sync_wait;               /* on a cluster: the sessions' wsrep_sync_wait */

    char redis_host[CONFIG_TEXT_MAX];
    int redis_port;
    char redis_password[CONFIG_TEXT_MAX];      /* AUTH on every Redis connection, "" = none */
    char redis_password_file[CONFIG_TEXT_MAX]; /* read into redis_password, "" = none     */
    char redis_sentinel[CONFIG_TEXT_MAX];      /* Sentinels naming the main Redis, "" = none */
    char redis_master_name[CONFIG_TEXT_MAX];   /* the group they watch                      */
    char redis_cluster[CONFIG_TEXT_MAX];       /* a Redis Cluster's nodes, "" = none        */
    int redis_wait_replicas;                   /* the WAIT rows: acknowledgements required   */
    int redis_wait_timeout_ms;                 /* the WAIT rows: how long WAIT may take      */
    int segments;                              /* the segmented rows: segments per product   */
    char redlock[CONFIG_TEXT_MAX];             /* redlock servers: host:port,host:port */
    char zk[CONFIG_TEXT_MAX]; /* zk-lock: ZooKeeper host:port,host:port, "" = none */
    int zk_session_ms;        /* zk-lock: ZooKeeper session timeout    */

    char bind_source[CONFIG_TEXT_MAX]; /* backend connections' local address, "" = any */
    int connect_timeout_ms;            /* per backend connection attempt               */
    int io_timeout_ms;                 /* per backend command                          */

    int optimistic_attempts; /* cas and watch: tries before answering busy  */
    int lock_ttl_ms;         /* lock strategies: TTL unless ttl_ms is given */
    int lock_wait_ms;        /* lock strategies: wait before answering busy */
    int batch_max;           /* sql-batch: sales in one transaction, at most */
    int idempotency_ttl_s;   /* an Idempotency-Key's life in its store      */

    int admit_rate;          /* admission: tokens/s per product, 0 = no bucket  */
    int admit_burst;         /* admission: the bucket's size, 0 = admit_rate    */
    int sold_out_flag;       /* 1: answer sold_out from memory once seen        */
    int sold_out_recheck_ms; /* the flag: one sale per product goes by this often */

    int stream_consumers;              /* lua-stream: consumer threads in this process */
    int consume;                       /* 1: only the consumers, no HTTP               */
    int stream_batch;                  /* orders one consumer transaction settles      */
    int stream_claim_ms;               /* pending this long: its consumer died         */
    char stream_hold[CONFIG_TEXT_MAX]; /* test knob: "commit" or "ack", or ""          */

    int sweep_ms; /* orders: the expiry sweepers' round, 0 = none in this instance */

    /* The lists above, parsed (config_load()). */
    struct server_list mysql_servers;       /* --mysql-nodes, else --mysql-host:--mysql-port */
    int mysql_cluster;                      /* --mysql-nodes named the servers               */
    struct server_list sentinels;           /* --redis-sentinel                              */
    struct server_list redlock_servers;     /* --redlock                                    */
    struct server_list redis_cluster_nodes; /* --redis-cluster                          */
};

/* Parses `list`, "host:port,host:port,...", into at most `max` servers
 * (CONFIG_SERVERS_MAX at most); 0 (with out->count 0 for ""), or -1 after
 * printing why, named `what`, to `err`. */
int config_servers(const char *list, const char *what, int max, struct server_list *out, FILE *err);

/* --sweep-ms's default, which a sweeper's promised lag counts on where this
 * instance runs none (store/orders.h). */
#define SWEEP_MS_DEFAULT 100

/* The configuration in force; filled once by config_load() at startup. */
extern struct config config;

enum config_status { CONFIG_RUN, CONFIG_EXIT_OK, CONFIG_EXIT_USAGE };

/*
 * Fills `config` from defaults, the environment and argv. Prints --help to
 * `out` or a usage error to `err` when the caller should exit.
 */
enum config_status config_load(int argc, char **argv, FILE *out, FILE *err);

/* Logs the effective configuration, one line, passwords masked. */
void config_log(void);

#endif
