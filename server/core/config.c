/*
 * config.c - the option table and its three sources (defaults, environment,
 * flags). Adding a setting is one row in `options` and one field in
 * struct config; --help, the environment and the startup log follow.
 */
#include "core/config.h"

#include "core/log.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct config config;

enum option_type { OPT_TEXT, OPT_INT };

struct option_spec {
    const char *flag; /* long flag without dashes; env is STOCKD_ + upper */
    enum option_type type;
    size_t offset;
    const char *fallback; /* default, as text */
    long min, max;        /* OPT_INT bounds */
    int secret;           /* masked in the startup log */
    const char *help;
};

#define TEXT(field, flag, fallback, secret, help)                                                  \
    {                                                                                              \
        flag, OPT_TEXT, offsetof(struct config, field), fallback, 0, 0, secret, help               \
    }
#define INT(field, flag, fallback, min, max, help)                                                 \
    {                                                                                              \
        flag, OPT_INT, offsetof(struct config, field), fallback, min, max, 0, help                 \
    }

static const struct option_spec options[] = {
    TEXT(listen, "listen", "127.0.0.1", 0, "IPv4 address to listen on"),
    INT(port, "port", "8080", 1, 65535, "TCP port to listen on"),
    INT(threads, "threads", "0", 0, 1024, "HTTP loops, a thread each (0 = one per core)"),
    INT(workers, "workers", "16", 1, 1024,
        "request workers: requests run at once, each with its own backend connections"),
    INT(max_body, "max-body", "4096", 64, 1048576, "largest request body in bytes (else 413)"),
    TEXT(log_level, "log-level", "info", 0, "debug, info, warn or error"),
    TEXT(instance_name, "instance-name", "", 0,
         "this instance's name in the X-Stockd-Instance header (default: hostname:port)"),
    TEXT(admin_token, "admin-token", "", 1,
         "reset needs 'Authorization: Bearer <token>'; required to listen beyond loopback"),
    TEXT(admin_token_file, "admin-token-file", "", 0,
         "a file whose first line is the admin token (instead of --admin-token, which ps shows)"),
    INT(queue_max, "queue-max", "4096", 1, 1000000,
        "requests waiting for a worker before answering 503 overloaded"),
    INT(request_timeout_ms, "request-timeout-ms", "30000", 100, 600000,
        "a request's deadline from its arrival; past it, 503 timeout with nothing changed"),
    INT(drain_ms, "drain-ms", "10000", 0, 600000,
        "on SIGTERM/SIGINT: longest wait for requests in flight before exiting"),
    INT(max_connections, "max-connections", "8192", 16, 1000000, "open HTTP connections in all"),
    INT(max_per_ip, "max-per-ip", "0", 0, 1000000,
        "open HTTP connections from one address (0 = a sixteenth of --max-connections)"),
    INT(idle_timeout_s, "idle-timeout-s", "15", 1, 3600,
        "an HTTP connection silent this long, or this long without a whole request since it "
        "opened or its last reply, is closed"),
    TEXT(allowed_hosts, "allowed-hosts", "", 0,
         "more names the Host header may give, name,name,... (besides IP addresses and "
         "localhost): what clients and proxies call this server"),
    INT(knob_workers, "knob-workers", "0", 0, 1024,
        "workers that may run requests with hold_ms or pause_ms at once (0 = three quarters of "
        "--workers)"),
    INT(knob_queue, "knob-queue", "256", 1, 1000000,
        "requests with hold_ms or pause_ms that may wait for those workers before 503 overloaded"),
    TEXT(mysql_host, "mysql-host", "127.0.0.1", 0, "MySQL/MariaDB host"),
    INT(mysql_port, "mysql-port", "3306", 1, 65535, "MySQL/MariaDB port"),
    TEXT(mysql_user, "mysql-user", "stockd", 0, "MySQL/MariaDB user"),
    TEXT(mysql_password, "mysql-password", "stockd", 1, "MySQL/MariaDB password"),
    TEXT(mysql_password_file, "mysql-password-file", "", 0,
         "a file whose first line is the MySQL/MariaDB password (instead of --mysql-password, "
         "which ps shows)"),
    TEXT(mysql_db, "mysql-db", "stockd", 0, "MySQL/MariaDB database"),
    TEXT(mysql_nodes, "mysql-nodes", "", 0,
         "a multi-primary cluster's nodes, host:port,host:port,...: each worker uses the first "
         "that answers and moves to the next when it dies (then --mysql-host and --mysql-port "
         "are ignored)"),
    INT(mysql_sync_wait, "mysql-sync-wait", "1", 0, 15,
        "with --mysql-nodes: the sessions' wsrep_sync_wait (1: a read waits until its node has "
        "applied every commit certified before it; 0: reads may miss other nodes' latest sales)"),
    TEXT(redis_host, "redis-host", "127.0.0.1", 0, "Redis host (ignored with --redis-sentinel)"),
    INT(redis_port, "redis-port", "6379", 1, 65535, "Redis port (ignored with --redis-sentinel)"),
    TEXT(redis_password, "redis-password", "", 1,
         "the password stockd gives every Redis server and Sentinel (AUTH); none if empty"),
    TEXT(redis_password_file, "redis-password-file", "", 0,
         "a file whose first line is the Redis password (instead of --redis-password, which ps "
         "shows)"),
    TEXT(redis_sentinel, "redis-sentinel", "", 0,
         "Sentinels host:port,host:port,...: the main Redis is the primary they name, followed "
         "through failovers (then --redis-host and --redis-port are ignored)"),
    TEXT(redis_cluster, "redis-cluster", "", 0,
         "a Redis Cluster's nodes, host:port,host:port,... (a few are enough: the rest are "
         "learnt from CLUSTER SLOTS): the main Redis is the cluster, each product on the node "
         "that serves its slot (then --redis-host and --redis-port are ignored)"),
    TEXT(redis_master_name, "redis-master-name", "stockd", 0,
         "the master name the Sentinels watch the main Redis under"),
    INT(redis_wait_replicas, "redis-wait-replicas", "1", 1, 64,
        "lua-wait, redis-lock-wait: replicas that must acknowledge a write (WAIT)"),
    INT(redis_wait_timeout_ms, "redis-wait-timeout-ms", "200", 1, 60000,
        "lua-wait, redis-lock-wait: how long WAIT waits for them, milliseconds"),
    INT(segments, "segments", "3", 1, 16,
        "segmented, segmented-strict: segments a product's stock is split into, each in its own "
        "Redis Cluster slot range (so on a different primary of a cluster of that many)"),
    TEXT(redlock, "redlock", "", 0, "redlock: independent Redis servers, host:port,host:port,..."),
    TEXT(zk, "zk", "", 0, "zk-lock: ZooKeeper servers, host:port,host:port,..."),
    INT(zk_session_ms, "zk-session-ms", "10000", 1000, 600000,
        "zk-lock: ZooKeeper session timeout, milliseconds"),
    TEXT(bind_source, "bind-source", "", 0,
         "the local address every MySQL, Redis, Sentinel and Redlock connection is made from "
         "(default: the system's choice)"),
    INT(connect_timeout_ms, "connect-timeout-ms", "1000", 10, 60000,
        "backend connect timeout, milliseconds"),
    INT(io_timeout_ms, "io-timeout-ms", "10000", 100, 600000,
        "backend command timeout, milliseconds"),
    INT(optimistic_attempts, "optimistic-attempts", "64", 1, 100000,
        "cas and watch: attempts before answering busy"),
    INT(lock_ttl_ms, "lock-ttl-ms", "5000", 10, 600000,
        "lock strategies: lock TTL unless the request gives ttl_ms"),
    INT(lock_wait_ms, "lock-wait-ms", "5000", 0, 600000,
        "lock strategies: how long to wait for a lock before answering busy"),
    INT(idempotency_ttl_s, "idempotency-ttl-s", "86400", 1, 31536000,
        "how long a store keeps an Idempotency-Key and its answer, seconds"),
    INT(batch_max, "batch-max", "128", 1, 4096,
        "sql-batch, and lua sales that wait on a worker: the most sales one transaction or "
        "one shared pipeline carries"),
    INT(admit_rate, "admit-rate", "0", 0, 1000000,
        "admission: deducts per second per product this instance lets reach a strategy, "
        "past the burst; more are answered 429 throttled with Retry-After (0 = no limit)"),
    INT(admit_burst, "admit-burst", "0", 0, 1000000,
        "admission: deducts per product admitted at once from a full bucket (0 = --admit-rate)"),
    INT(sold_out_flag, "sold-out-flag", "0", 0, 1,
        "1: once this instance has seen a product sold out, answer sold_out from memory, "
        "without a backend call, until a reset"),
    INT(sold_out_recheck_ms, "sold-out-recheck-ms", "100", 1, 600000,
        "the sold-out flag: one deduct per product goes to the store this often, to see a reset "
        "made through another instance"),
    INT(stream_consumers, "stream-consumers", "1", 0, 64,
        "lua-stream: consumer threads settling the order stream into MySQL (0: another process "
        "settles it)"),
    INT(consume, "consume", "0", 0, 1,
        "1: run only the order stream's consumers (at least one), no HTTP: a process of its own"),
    INT(stream_batch, "stream-batch", "256", 1, 4096,
        "lua-stream: the most orders one consumer transaction settles"),
    INT(stream_claim_ms, "stream-claim-ms", "5000", 100, 600000,
        "lua-stream: an order pending this long is taken over from its consumer (XAUTOCLAIM)"),
    TEXT(stream_hold, "stream-hold", "", 0,
         "test knob: 'commit' or 'ack': the consumer stops before that step of its first batch, "
         "logs it and waits to be killed"),
    INT(sweep_ms, "sweep-ms", "100", 0, 600000,
        "orders: how often this instance's expiry sweepers look for held orders past their "
        "deadline, milliseconds; 0: no sweeper and no keyspace subscriber here"),
};

#define OPTION_COUNT (sizeof options / sizeof options[0])

static void env_name(const struct option_spec *o, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "STOCKD_");
    for (const char *p = o->flag; *p && n + 1 < size; p++)
        buf[n++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    buf[n] = '\0';
}

/* Stores `text` into the option's field; 0 on success, else prints why. */
static int option_set(const struct option_spec *o, const char *text, const char *source, FILE *err)
{
    char *field = (char *)&config + o->offset;
    if (o->type == OPT_TEXT) {
        if (strlen(text) >= CONFIG_TEXT_MAX) {
            fprintf(err, "stockd: %s: %s is longer than %d characters\n", source, o->flag,
                    CONFIG_TEXT_MAX - 1);
            return -1;
        }
        strcpy(field, text);
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < o->min || v > o->max) {
        fprintf(err, "stockd: %s: %s must be an integer %ld..%ld, not '%s'\n", source, o->flag,
                o->min, o->max, text);
        return -1;
    }
    *(int *)(void *)field = (int)v;
    return 0;
}

static void print_help(FILE *out)
{
    fprintf(out,
            "Usage: stockd [OPTION]...\n"
            "Sells stock under concurrent load, one HTTP endpoint per concurrency strategy.\n\n"
            "Every option can also be set by the environment variable shown.\n\n");
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        char env[64], flag[64];
        env_name(&options[i], env, sizeof env);
        snprintf(flag, sizeof flag, "--%s=%s", options[i].flag,
                 options[i].type == OPT_INT ? "N" : "TEXT");
        fprintf(out, "  %-26s %s\n  %-26s   env %s, default %s\n", flag, options[i].help, "", env,
                options[i].secret      ? "(hidden)"
                : *options[i].fallback ? options[i].fallback
                                       : "(none)");
    }
    fprintf(out, "  %-26s %s\n", "--help", "print this help and exit");
}

static int load_defaults_and_env(FILE *err)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        char env[64];
        env_name(&options[i], env, sizeof env);
        const char *value = getenv(env);
        if (option_set(&options[i], options[i].fallback, "default", err) != 0)
            return -1;
        if (value && option_set(&options[i], value, env, err) != 0)
            return -1;
    }
    return 0;
}

int config_servers(const char *list, const char *what, int max, struct server_list *out, FILE *err)
{
    assert(max <= CONFIG_SERVERS_MAX);
    int count = 0;
    out->count = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        if (count == max) {
            fprintf(err, "stockd: %s: at most %d servers\n", what, max);
            return -1;
        }
        if (!colon || colon == p || (size_t)(colon - p) >= CONFIG_TEXT_MAX) {
            fprintf(err, "stockd: %s: '%.*s' is not host:port\n", what, (int)len, p);
            return -1;
        }
        char port_text[8] = "";
        size_t port_len = len - (size_t)(colon + 1 - p);
        char *stop = port_text;
        long port = 0;
        if (port_len > 0 && port_len < sizeof port_text) {
            memcpy(port_text, colon + 1, port_len);
            errno = 0;
            port = strtol(port_text, &stop, 10);
        }
        if (port_len == 0 || errno || *stop || port < 1 || port > 65535) {
            fprintf(err, "stockd: %s: '%.*s' has no valid port\n", what, (int)len, p);
            return -1;
        }
        memcpy(out->at[count].host, p, (size_t)(colon - p));
        out->at[count].host[colon - p] = '\0';
        out->at[count].port = (int)port;
        count++;
        p += len + (end != NULL);
        if (end && !*p) {
            fprintf(err, "stockd: %s: the list ends with a comma\n", what);
            return -1;
        }
    }
    out->count = count;
    return 0;
}

/* Reads the first line of `path` (a password file) into `out`, unless
 * `path` is empty; 0, or -1 after printing why. */
static int read_secret(const char *path, const char *flag, char *out, FILE *err)
{
    if (!path[0])
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(err, "stockd: %s: cannot read %s: %s\n", flag, path, strerror(errno));
        return -1;
    }
    char line[CONFIG_TEXT_MAX + 1];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    size_t len = ok ? strcspn(line, "\r\n") : 0;
    if (!ok || len == 0 || len >= CONFIG_TEXT_MAX) {
        fprintf(err, "stockd: %s: %s must hold a password of 1..%d characters on its first line\n",
                flag, path, CONFIG_TEXT_MAX - 1);
        return -1;
    }
    memcpy(out, line, len);
    out[len] = '\0';
    return 0;
}

/* 127.0.0.0/8: only this machine can connect. */
static int listens_on_loopback(void)
{
    return strncmp(config.listen, "127.", 4) == 0;
}

/* The most nodes --mysql-nodes may name: a Galera cluster is an odd number
 * of them, and eight is past any the lab starts. */
#define MYSQL_NODES_MAX 8

/* Parses the server lists once, for the backends to read (config.h). */
static int parse_server_lists(FILE *err)
{
    if (config_servers(config.redlock, "redlock", CONFIG_SERVERS_MAX, &config.redlock_servers,
                       err) != 0 ||
        config_servers(config.redis_sentinel, "redis-sentinel", CONFIG_SERVERS_MAX,
                       &config.sentinels, err) != 0 ||
        config_servers(config.mysql_nodes, "mysql-nodes", MYSQL_NODES_MAX, &config.mysql_servers,
                       err) != 0 ||
        config_servers(config.redis_cluster, "redis-cluster", CONFIG_SERVERS_MAX,
                       &config.redis_cluster_nodes, err) != 0)
        return -1;
    if (config.sentinels.count && config.redis_cluster_nodes.count) {
        fprintf(err, "stockd: redis-sentinel and redis-cluster both name the main Redis: give "
                     "one\n");
        return -1;
    }
    if (config.sentinels.count && !config.redis_master_name[0]) {
        fprintf(err, "stockd: redis-sentinel needs a redis-master-name\n");
        return -1;
    }
    config.mysql_cluster = config.mysql_servers.count > 0;
    if (!config.mysql_cluster) { /* the one server --mysql-host and --mysql-port name */
        snprintf(config.mysql_servers.at[0].host, sizeof config.mysql_servers.at[0].host, "%s",
                 config.mysql_host);
        config.mysql_servers.at[0].port = config.mysql_port;
        config.mysql_servers.count = 1;
    }
    return 0;
}

enum config_status config_load(int argc, char **argv, FILE *out, FILE *err)
{
    struct option longopts[OPTION_COUNT + 2];
    for (size_t i = 0; i < OPTION_COUNT; i++)
        longopts[i] = (struct option){options[i].flag, required_argument, NULL, (int)i};
    longopts[OPTION_COUNT] = (struct option){"help", no_argument, NULL, 'h' + 1000};
    longopts[OPTION_COUNT + 1] = (struct option){0};

    memset(&config, 0, sizeof config);
    if (load_defaults_and_env(err) != 0)
        return CONFIG_EXIT_USAGE;

    optind = 1;
    opterr = 0;
    for (;;) {
        int index = getopt_long(argc, argv, "", longopts, NULL);
        if (index == -1)
            break;
        if (index == 'h' + 1000) {
            print_help(out);
            return CONFIG_EXIT_OK;
        }
        if (index < 0 || (size_t)index >= OPTION_COUNT) {
            fprintf(err, "stockd: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            return CONFIG_EXIT_USAGE;
        }
        if (option_set(&options[index], optarg, "flag", err) != 0)
            return CONFIG_EXIT_USAGE;
    }
    if (optind < argc) {
        fprintf(err, "stockd: unexpected argument '%s' (see --help)\n", argv[optind]);
        return CONFIG_EXIT_USAGE;
    }
    enum log_level level;
    if (log_level_parse(config.log_level, &level) != 0) {
        fprintf(err, "stockd: log-level must be debug, info, warn or error\n");
        return CONFIG_EXIT_USAGE;
    }
    log_threshold = level;
    if (config.stream_hold[0] && strcmp(config.stream_hold, "commit") != 0 &&
        strcmp(config.stream_hold, "ack") != 0) {
        fprintf(err, "stockd: stream-hold must be commit or ack\n");
        return CONFIG_EXIT_USAGE;
    }
    if (read_secret(config.admin_token_file, "admin-token-file", config.admin_token, err) != 0 ||
        read_secret(config.mysql_password_file, "mysql-password-file", config.mysql_password,
                    err) != 0 ||
        read_secret(config.redis_password_file, "redis-password-file", config.redis_password,
                    err) != 0)
        return CONFIG_EXIT_USAGE;
    if (parse_server_lists(err) != 0)
        return CONFIG_EXIT_USAGE;
    if (config.threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        config.threads = cores > 0 ? (int)cores : 1;
    }
    if (config.max_per_ip == 0)
        config.max_per_ip = config.max_connections / 16;
    if (config.knob_workers == 0)
        config.knob_workers = config.workers - config.workers / 4;
    if (config.knob_workers > config.workers)
        config.knob_workers = config.workers;
    if (!listens_on_loopback() && !config.admin_token[0]) {
        fprintf(err,
                "stockd: listening on %s needs an admin token (--admin-token or "
                "STOCKD_ADMIN_TOKEN): anyone who can reach it could reset the stock\n",
                config.listen);
        return CONFIG_EXIT_USAGE;
    }
    if (!config.instance_name[0]) {
        char host[64] = "stockd";
        gethostname(host, sizeof host - 1);
        snprintf(config.instance_name, sizeof config.instance_name, "%s:%d", host, config.port);
    }
    return CONFIG_RUN;
}

void config_log(void)
{
    char line[4096];
    size_t n = 0;
    for (size_t i = 0; i < OPTION_COUNT && n < sizeof line; i++) {
        const char *field = (const char *)&config + options[i].offset;
        if (options[i].secret)
            n += (size_t)snprintf(line + n, sizeof line - n, " %s=***", options[i].flag);
        else if (options[i].type == OPT_TEXT)
            n += (size_t)snprintf(line + n, sizeof line - n, " %s=%s", options[i].flag, field);
        else
            n += (size_t)snprintf(line + n, sizeof line - n, " %s=%d", options[i].flag,
                                  *(const int *)(const void *)field);
    }
    log_info("config:%s", line);
}
