#!/usr/bin/env bash
# The private local stack: MariaDB, Redis and its replica, three Redlock Redis
# servers, a replicated Redis group watched by three Sentinels, and
# ZooKeeper, run as this user's own processes on 127.0.0.1, on non-default
# ports, with all their state under one run directory. Nothing here touches
# system services, and several stacks can run side by side when they are
# given different run directories and ports.
#
#   scripts/stack.sh up                start what STACK_SERVICES names (idempotent)
#   scripts/stack.sh down              stop nginx, the instances, the stockd jmeter/compare
#                                      left running (make demo: run/stockd.pid) and every
#                                      backend this run dir's pid files name
#   scripts/stack.sh status            one line per backend (the wanted ones and any
#                                      other with a pid file); exit 1 if a wanted one is down
#   scripts/stack.sh left-running      what is still running here, and how to stop it
#   scripts/stack.sh env               export lines pointing stockd at this stack
#   scripts/stack.sh ha-env            export lines that move stockd's main Redis to the
#                                      Sentinel group (after `env`)
#   scripts/stack.sh ha-primary        the port of the group's primary, as the Sentinels say
#   scripts/stack.sh mysql [ARGS...]   mariadb client on the stockd db (--root first: as root)
#   scripts/stack.sh stop-one NAME     stop one backend, keep its data
#   scripts/stack.sh start-one NAME    start one backend and wait until it answers
#   scripts/stack.sh kill-one NAME     kill -9 one backend (a crash: its data dir is kept,
#                                      start-one brings it back)
#   scripts/stack.sh freeze-one NAME   SIGSTOP one backend (it holds its connections and
#   scripts/stack.sh thaw-one NAME     answers nothing); SIGCONT it (stop-one and down
#                                      thaw a frozen backend first)
#   scripts/stack.sh clean             down, then delete the stack's directory
#   scripts/stack.sh instances-up N    start N build/stockd instances (ports
#                                      STACK_STOCKD_PORT_BASE, +1, ...) on this stack,
#                                      behind a private nginx on STACK_NGINX_PORT
#                                      (round-robin, keep-alive, no retries); stops
#                                      instances beyond N; waits for /health
#   scripts/stack.sh instances-down    stop nginx and every instance (not the backends)
#   scripts/stack.sh scrape HOST:PORT...  point the stack's Prometheus at these stockds
#                                      (it reads the list again at once)
#   scripts/stack.sh port-of NAME      the port NAME listens on in this stack
#
#   NAME: mysql | redis | redis-replica | zk | redlock (all three) | redlock-PORT
#         | ha (both group servers) | ha-PORT | sentinel (all three) | sentinel-PORT
#         | nginx | stockd-PORT
#         | prometheus (optional: in STACK_SERVICES, or start-one; it scrapes the
#           stockds `scrape` names every second, for the comparison's figures)
#   (and, for down, status and left-running, "stockd": the one build/stockd that
#   jmeter/compare started in the run dir, pid in $STOCKD_RUN_DIR/stockd.pid)
#
# `down` also stops nginx and the instances. Each instance logs to
# stack/stockd-PORT.log; nginx to stack/nginx.log (its console) and
# stack/nginx/error.log, with its generated nginx.conf and temp files beside.
#
# The stockd Redis (not the Redlock servers) appends every write to its AOF
# without fsync, like MariaDB's innodb-flush-log-at-trx-commit=2 here: a crash
# of the process (kill-one) loses nothing it answered, a crash of the machine
# may lose the last second. redis-replica replicates it, so that the rows that
# wait for a replica (WAIT) get their acknowledgement; nothing fails it over.
#
# The replicated group (service `ha`) is separate: two Redis servers, ha-PORT,
# the first started as primary and the second as its replica, and three
# Sentinels, sentinel-PORT, that watch master `stockd` with a quorum of 2 and
# lab timings (down after 500 ms), so that a primary killed with kill-one is
# replaced within a second or two. A group server started while another one
# is primary starts as that one's replica: a returning old primary never
# serves its stale data. The group keeps no snapshot or AOF: a server that
# returns is refilled by its primary. A Sentinel's config file is its own
# (it rewrites it); it is written anew only when no other Sentinel runs, for
# the primary a running group server names (else the first).
#
# Environment (defaults):
#   STOCKD_RUN_DIR       <repo>/run        the stack lives in $STOCKD_RUN_DIR/stack
#   STACK_MYSQL_PORT     23306
#   STACK_REDIS_PORT     23379
#   STACK_REDIS_REPLICA_PORT 23380         the main Redis's replica
#   STACK_HA_PORTS       "23384 23385"     the replicated group's servers (first: primary)
#   STACK_SENTINEL_PORTS "23386 23387 23388"  its Sentinels
#   STACK_REDLOCK_PORTS  "23381 23382 23383"
#   STACK_ZK_PORT        23181
#   STACK_PROMETHEUS_PORT 23909
#   STACK_SERVICES       "mysql redis redlock zk ha"   what `up` starts (may add prometheus);
#                                      `redis` is the main Redis and its replica
#   STACK_TIMEOUT        30                seconds to wait for a backend to answer
#   STACK_SKIP_DEPS      unset             1: `up` and `instances-up` do not run deps.sh
#   STACK_STOCKD_PORT_BASE 23091           first instance's port
#   STACK_NGINX_PORT     23080             the balancer's port
#   STOCKD_BIN           <repo>/build/stockd   the instances' binary
#   STOCKD_THREADS       unset             the instances' --threads (else stockd's default)
#   The instances get `env`'s settings; other STOCKD_* variables pass through.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MYSQL_PORT="${STACK_MYSQL_PORT:-23306}"
REDIS_PORT="${STACK_REDIS_PORT:-23379}"
REDIS_REPLICA_PORT="${STACK_REDIS_REPLICA_PORT:-23380}"
HA_PORTS="${STACK_HA_PORTS-23384 23385}"
SENTINEL_PORTS="${STACK_SENTINEL_PORTS-23386 23387 23388}"
HA_MASTER_NAME=stockd
REDLOCK_PORTS="${STACK_REDLOCK_PORTS-23381 23382 23383}"
ZK_PORT="${STACK_ZK_PORT:-23181}"
PROMETHEUS_PORT="${STACK_PROMETHEUS_PORT:-23909}"
SERVICES="${STACK_SERVICES:-mysql redis redlock zk ha}"
TIMEOUT="${STACK_TIMEOUT:-30}"
STOCKD_PORT_BASE="${STACK_STOCKD_PORT_BASE:-23091}"
NGINX_PORT="${STACK_NGINX_PORT:-23080}"
MAX_INSTANCES=64

read -ra REDLOCK_LIST <<<"$REDLOCK_PORTS"
read -ra HA_LIST <<<"$HA_PORTS"
read -ra SENTINEL_LIST <<<"$SENTINEL_PORTS"
for p in "$MYSQL_PORT" "$REDIS_PORT" "$REDIS_REPLICA_PORT" "$ZK_PORT" "$STOCKD_PORT_BASE" "$NGINX_PORT" \
    "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}" "${HA_LIST[@]+"${HA_LIST[@]}"}" \
    "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do
    is_port "$p" || die "not a port number: '$p'"
done
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "STACK_TIMEOUT must be a number of seconds"
for s in $SERVICES; do
    case "$s" in mysql|redis|redlock|zk|ha|prometheus) ;; *) die "unknown service '$s' in STACK_SERVICES (mysql redis redlock zk ha prometheus)" ;; esac
done

RUN_DIR="${STOCKD_RUN_DIR:-$STOCKD_REPO/run}"
STACK="$RUN_DIR/stack"

# stack_dir: create the stack directory and make STACK absolute (the daemons
# change directory, so every path handed to them must be absolute).
stack_dir() {
    mkdir -p "$STACK"
    STACK="$(cd "$STACK" && pwd)"
}
# For read-only commands: absolute path without creating anything.
if [[ -d "$STACK" ]]; then STACK="$(cd "$STACK" && pwd)"; fi

MYSQL_SOCKET_NAME="mysql.sock"

# ---------------------------------------------------------------- backends

ha_names() { local p; for p in "${HA_LIST[@]+"${HA_LIST[@]}"}"; do echo "ha-$p"; done; }
sentinel_names() { local p; for p in "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do echo "sentinel-$p"; done; }

# wanted_backends: the backends STACK_SERVICES asks for.
wanted_backends() {
    local s p
    for s in $SERVICES; do
        case "$s" in
            redis) echo redis; echo redis-replica ;;
            redlock) for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do echo "redlock-$p"; done ;;
            ha) ha_names; sentinel_names ;;
            *) echo "$s" ;;
        esac
    done
}

port_of() {
    case "$1" in
        mysql) echo "$MYSQL_PORT" ;;
        redis) echo "$REDIS_PORT" ;;
        redis-replica) echo "$REDIS_REPLICA_PORT" ;;
        zk) echo "$ZK_PORT" ;;
        redlock-*) echo "${1#redlock-}" ;;
        ha-*) echo "${1#ha-}" ;;
        sentinel-*) echo "${1#sentinel-}" ;;
        stockd-*) echo "${1#stockd-}" ;;
        nginx) echo "$NGINX_PORT" ;;
        prometheus) echo "$PROMETHEUS_PORT" ;;
        stockd) compare_stockd_port ;;
    esac
}

# compare_stockd_port: the --port=N of the stockd in run/stockd.pid (8080 without one).
compare_stockd_port() {
    local pid port
    pid="$(tr -dc '0-9' 2>/dev/null <"$(pidfile_of stockd)")" || true
    port="$(tr '\0' '\n' 2>/dev/null <"/proc/${pid:-0}/cmdline" | sed -n 's/^--port=//p')" || true
    echo "${port:-8080}"
}

pidfile_of() {
    if [[ "$1" == stockd ]]; then echo "$RUN_DIR/stockd.pid"; else echo "$STACK/$1.pid"; fi
}

logfile_of() {
    case "$1" in
        mysql) echo "$STACK/mariadb.log" ;;
        zk) echo "$STACK/zookeeper.log" ;;
        *) echo "$STACK/$1.log" ;;
    esac
}

# workdir_of NAME: the backend's own directory, which is also the working
# directory of its process; that is how a pid is recognised as ours.
workdir_of() {
    case "$1" in
        mysql) echo "$STACK/mysql/data" ;;
        stockd) (cd "$RUN_DIR" 2>/dev/null && pwd -P) ;; # compare starts it there
        *) echo "$STACK/$1" ;;
    esac
}

# alive PID: the process exists and is not a zombie.
alive() {
    local st
    [[ -r "/proc/$1/stat" ]] || return 1
    st="$(cut -d' ' -f3 <"/proc/$1/stat" 2>/dev/null)" || return 1
    [[ -n "$st" && "$st" != Z ]]
}

# pid_of NAME: print the pid from the pid file when that process is alive and
# is ours (its working directory is the backend's directory); otherwise fail.
pid_of() {
    local f pid cwd
    f="$(pidfile_of "$1")"
    [[ -s "$f" ]] || return 1
    pid="$(tr -dc '0-9' <"$f")"
    [[ -n "$pid" ]] && alive "$pid" || return 1
    cwd="$(readlink "/proc/$pid/cwd" 2>/dev/null)" || return 1
    [[ "$cwd" == "$(workdir_of "$1")" ]] || return 1
    echo "$pid"
}

# answers NAME: the backend answers a real request on its port.
answers() {
    local port
    port="$(port_of "$1")"
    case "$1" in
        mysql)
            # ping succeeds as soon as the server answers, even "access denied"
            mariadb-admin --no-defaults --connect-timeout=2 --protocol=TCP \
                -h127.0.0.1 -P"$port" -uroot ping >/dev/null 2>&1 ;;
        redis|redis-replica|redlock-*|ha-*)
            [[ "$(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == PONG ]] ;;
        sentinel-*)
            # a Sentinel is of use once it names the group's primary
            [[ -n "$(sentinel_ask "$port" get-master-addr-by-name "$HA_MASTER_NAME")" ]] ;;
        zk)
            # ruok says imok even while not serving; srvr shows the mode only then
            tcp_ask 127.0.0.1 "$port" srvr | grep -q '^Mode: ' ;;
        prometheus)
            [[ "$(http_status 127.0.0.1 "$port" /-/ready)" == 200 ]] ;;
        stockd|stockd-*|nginx)
            # healthy: every backend the instance needs answers (through nginx:
            # whichever instance gets the request)
            [[ "$(http_status 127.0.0.1 "$port" /health)" == 200 ]] ;;
    esac
}

# http_status HOST PORT PATH: the status code of a GET, without curl.
http_status() {
    tcp_ask "$1" "$2" "GET $3 HTTP/1.0"$'\r\n'"Host: $1:$2"$'\r\n\r\n' |
        sed -n '1s/^HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p'
}

log_tail() {
    local log
    log="$(logfile_of "$1")"
    if [[ -s "$log" ]]; then
        echo "---- last lines of $log ----" >&2
        tail -n 40 "$log" >&2
        echo "----" >&2
    else
        echo "(no log at $log)" >&2
    fi
}

# launch NAME CMD...: run CMD detached, in the backend's directory, with its
# output in the backend's log, and record its pid. fd 9 (the stack lock) is
# closed so the daemon does not hold the lock.
launch() {
    local name="$1" dir log pid
    shift
    dir="$(workdir_of "$name")"
    log="$(logfile_of "$name")"
    mkdir -p "$dir"
    (cd "$dir" && exec setsid "$@" </dev/null >>"$log" 2>&1 9>&-) &
    pid=$!
    echo "$pid" >"$(pidfile_of "$name")"
}

# wait_ready NAME PID: poll until the backend answers; fail with its log tail.
wait_ready() {
    local name="$1" pid="$2" deadline
    deadline=$(( SECONDS + TIMEOUT ))
    while ! answers "$name"; do
        if ! alive "$pid"; then
            echo "${0##*/}: $name (pid $pid) exited during start" >&2
            log_tail "$name"
            rm -f "$(pidfile_of "$name")"
            return 1
        fi
        if (( SECONDS >= deadline )); then
            echo "${0##*/}: $name (pid $pid) did not answer on port $(port_of "$name") within ${TIMEOUT}s" >&2
            log_tail "$name"
            return 1
        fi
        sleep 0.2
    done
}

# ------------------------------------------------------------------ mysql

mysql_socket() { echo "$STACK/$MYSQL_SOCKET_NAME"; }

mysql_root() {
    mariadb --no-defaults --socket="$(mysql_socket)" -uroot "$@"
}

start_mysql() {
    local data sock pid marker as_user=()
    # --user only means something to (and is only accepted from) root.
    if (( EUID == 0 )); then as_user=(--user=root); fi
    data="$(workdir_of mysql)"
    marker="$STACK/mysql/installed"
    sock="$(mysql_socket)"
    (( ${#sock} <= 100 )) || die "socket path too long for a unix socket (${#sock} > 100 bytes): $sock; use a shorter STOCKD_RUN_DIR"
    command -v mariadbd >/dev/null || die "mariadbd not found (scripts/deps.sh stack)"

    if [[ ! -e "$marker" ]]; then
        # A data dir without the marker is a half-done install of ours: redo it.
        rm -rf "$data"
        mkdir -p "$data"
        say "mysql: initialising $data"
        if ! mariadb-install-db --no-defaults --datadir="$data" "${as_user[@]+"${as_user[@]}"}" \
                --auth-root-authentication-method=normal --skip-test-db \
                >>"$(logfile_of mysql)" 2>&1; then
            echo "${0##*/}: mariadb-install-db failed" >&2
            log_tail mysql
            return 1
        fi
        touch "$marker"
    fi

    rm -f "$sock"
    launch mysql mariadbd --no-defaults \
        --datadir="$data" --socket="$sock" --port="$MYSQL_PORT" \
        --bind-address=127.0.0.1 "${as_user[@]+"${as_user[@]}"}" \
        --pid-file="$(pidfile_of mysql)" --log-error="$(logfile_of mysql)" \
        --skip-name-resolve --max-connections=500 --max-connect-errors=1000000 \
        --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
        --innodb-flush-log-at-trx-commit=2 --skip-log-bin \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci
    pid="$(tr -dc '0-9' <"$(pidfile_of mysql)")"
    wait_ready mysql "$pid" || return 1
    provision_mysql
}

# provision_mysql: database, user and schema; every step is idempotent.
provision_mysql() {
    local deadline
    deadline=$(( SECONDS + TIMEOUT ))
    until mysql_root -e 'SELECT 1' >/dev/null 2>&1; do
        if (( SECONDS >= deadline )); then
            echo "${0##*/}: mysql: root cannot connect on $(mysql_socket)" >&2
            log_tail mysql
            return 1
        fi
        sleep 0.2
    done
    if ! mysql_root <<'SQL'
CREATE DATABASE IF NOT EXISTS stockd;
CREATE USER IF NOT EXISTS 'stockd'@'127.0.0.1' IDENTIFIED BY 'stockd';
CREATE USER IF NOT EXISTS 'stockd'@'localhost' IDENTIFIED BY 'stockd';
ALTER USER 'stockd'@'127.0.0.1' IDENTIFIED BY 'stockd';
ALTER USER 'stockd'@'localhost' IDENTIFIED BY 'stockd';
GRANT ALL PRIVILEGES ON stockd.* TO 'stockd'@'127.0.0.1';
GRANT ALL PRIVILEGES ON stockd.* TO 'stockd'@'localhost';
SQL
    then
        echo "${0##*/}: mysql: creating the stockd database and user failed" >&2
        return 1
    fi
    local f
    for f in schema seed; do
        if ! mysql_root stockd <"$STOCKD_REPO/sql/$f.sql"; then
            echo "${0##*/}: mysql: applying sql/$f.sql failed" >&2
            return 1
        fi
    done
}

# ------------------------------------------------------------------ redis

start_redis() {
    local name="$1" port pid primary
    port="$(port_of "$name")"
    command -v redis-server >/dev/null || die "redis-server not found (scripts/deps.sh stack)"
    # The stockd Redis keeps an AOF (see the header), rewritten past 16 MB so
    # that a restart after kill-one loads it quickly.
    local aof=(--appendonly no) role=()
    if [[ "$name" == redis ]]; then
        aof=(--appendonly yes --appendfsync no --auto-aof-rewrite-min-size 16mb)
    fi
    case "$name" in
        redis-replica) role=(--replicaof 127.0.0.1 "$REDIS_PORT") ;;
        ha-*) if primary="$(ha_running_primary "$name")"; then role=(--replicaof 127.0.0.1 "$primary"); fi ;;
    esac
    # DEBUG SLEEP, from this machine only, is how the tests freeze Redis with
    # a request in flight, to make a lost reply happen on demand.
    launch "$name" redis-server --port "$port" --bind 127.0.0.1 \
        --save '' "${aof[@]}" "${role[@]+"${role[@]}"}" --daemonize no \
        --dir "$(workdir_of "$name")" --logfile "$(logfile_of "$name")" \
        --pidfile "$(pidfile_of "$name")" --maxclients 4000 --repl-diskless-sync-delay 0 \
        --enable-debug-command local
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid" || return 1
    if (( ${#role[@]} )); then wait_replica_linked "$name" || return 1; fi
    [[ "$name" == redis ]] && seed_redis "$port"
    return 0
}

# redis_role PORT: master or slave (empty when nothing answers).
redis_role() {
    timeout 3 redis-cli -h 127.0.0.1 -p "$1" role 2>/dev/null | head -n 1
}

# ha_running_primary NAME: the port of a group server other than NAME that
# runs as primary; fails when there is none.
ha_running_primary() {
    local other
    for other in $(ha_names); do
        [[ "$other" != "$1" ]] && pid_of "$other" >/dev/null || continue
        [[ "$(redis_role "$(port_of "$other")")" == master ]] && { port_of "$other"; return 0; }
    done
    return 1
}

# wait_replica_linked NAME: a replica is ready once its first sync is done.
wait_replica_linked() {
    local port deadline
    port="$(port_of "$1")"
    deadline=$(( SECONDS + TIMEOUT ))
    until timeout 3 redis-cli -h 127.0.0.1 -p "$port" info replication 2>/dev/null |
            grep -q '^master_link_status:up'; do
        if (( SECONDS >= deadline )); then
            echo "${0##*/}: $1 did not finish its sync with its primary within ${TIMEOUT}s" >&2
            log_tail "$1"
            return 1
        fi
        sleep 0.1
    done
}

# sentinel_ask PORT ARGS...: SENTINEL ARGS on one Sentinel; the reply's words.
sentinel_ask() {
    local port="$1"
    shift
    timeout 3 redis-cli -h 127.0.0.1 -p "$port" sentinel "$@" 2>/dev/null
}

# ha_primary: the group's primary port, as the first Sentinel that answers
# names it.
ha_primary() {
    local p addr
    for p in "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do
        addr="$(sentinel_ask "$p" get-master-addr-by-name "$HA_MASTER_NAME" | tr '\n' ' ')"
        [[ "$addr" =~ ^[0-9.]+\ ([0-9]+)\ $ ]] && { echo "${BASH_REMATCH[1]}"; return 0; }
    done
    return 1
}

# start_sentinel NAME: one Sentinel of the group. Its timings are a lab's:
# the primary is down after 500 ms of silence, and a failover-timeout of 1 s,
# which also means that a Sentinel starts no new failover of the group
# within 2 s of the last one.
start_sentinel() {
    local name="$1" port dir conf primary="" other pid
    command -v redis-sentinel >/dev/null || die "redis-sentinel not found (scripts/deps.sh stack)"
    port="$(port_of "$name")"
    dir="$(workdir_of "$name")"
    conf="$dir/sentinel.conf"
    mkdir -p "$dir"
    local alone=1
    for other in $(sentinel_names); do
        [[ "$other" != "$name" ]] && pid_of "$other" >/dev/null && alone=0
    done
    if [[ ! -s "$conf" ]] || (( alone )); then
        primary="$(ha_running_primary "")" || primary="${HA_LIST[0]}"
        printf '%s\n' \
            "# written by scripts/stack.sh; the Sentinel rewrites it as the group changes" \
            "port $port" "bind 127.0.0.1" "daemonize no" "dir $dir" \
            "sentinel resolve-hostnames no" \
            "sentinel monitor $HA_MASTER_NAME 127.0.0.1 $primary 2" \
            "sentinel down-after-milliseconds $HA_MASTER_NAME 500" \
            "sentinel failover-timeout $HA_MASTER_NAME 1000" \
            "sentinel parallel-syncs $HA_MASTER_NAME 1" >"$conf" || return 1
    fi
    launch "$name" redis-sentinel "$conf" --logfile "$(logfile_of "$name")" \
        --pidfile "$(pidfile_of "$name")"
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid"
}

cmd_ha_env() {
    local p list=""
    for p in "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do list+="${list:+,}127.0.0.1:$p"; done
    printf 'export STOCKD_REDIS_SENTINEL=%s\n' "$list"
    printf 'export STOCKD_REDIS_MASTER_NAME=%s\n' "$HA_MASTER_NAME"
}

# seed_redis PORT: the Redis side of sql/seed.sql - product 1001 with 5000
# units, unless the product is already there.
seed_redis() {
    redis-cli -p "$1" SET 'stock:{1001}:initial' 5000 NX >/dev/null &&
        redis-cli -p "$1" SET 'stock:{1001}' 5000 NX >/dev/null
}

# -------------------------------------------------------------- zookeeper

start_zk() {
    local dir java cp pid
    dir="$(workdir_of zk)"
    java="${JAVA:-$(command -v java || true)}"
    [[ -n "$java" && -x "$java" ]] || die "zk: java not found (scripts/deps.sh zk)"
    [[ -r /usr/share/java/zookeeper.jar ]] || die "zk: /usr/share/java/zookeeper.jar missing (scripts/deps.sh zk)"
    # The jar's manifest names its dependencies; add a logger that writes to
    # stderr, which goes to zookeeper.log.
    cp=/usr/share/java/zookeeper.jar
    [[ -r /usr/share/java/slf4j-simple.jar ]] && cp="$cp:/usr/share/java/slf4j-simple.jar"

    mkdir -p "$dir/data" || return 1
    cat >"$dir/zoo.cfg" <<EOF || return 1
# written by scripts/stack.sh: a private standalone ZooKeeper
tickTime=1000
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$dir/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
    # -XX:-UsePerfData: no /tmp/hsperfdata_USER file; the rest: start fast, stay small.
    launch zk "$java" -Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
        -Dzookeeper.admin.enableServer=false -Dzookeeper.forceSync=no \
        -Dzookeeper.jmx.log4j.disable=true \
        -Dorg.slf4j.simpleLogger.showDateTime=true \
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS" \
        -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
    pid="$(tr -dc '0-9' <"$(pidfile_of zk)")"
    wait_ready zk "$pid"
}

# ------------------------------------------------------------- prometheus

# The stockds it scrapes: a file_sd list that `scrape` rewrites; Prometheus
# notices the new file at once.
targets_file() { echo "$(workdir_of prometheus)/targets.json"; }

start_prometheus() {
    local dir pid prom
    dir="$(workdir_of prometheus)"
    prom="$(command -v prometheus || true)"
    [[ -n "$prom" ]] || die "prometheus not found (scripts/deps.sh prometheus)"
    mkdir -p "$dir/data" || return 1
    [[ -s "$(targets_file)" ]] || echo '[]' >"$(targets_file)"
    printf '%s\n' \
        "# written by scripts/stack.sh: the private stack's Prometheus, scraping" \
        "# the stockds that 'scripts/stack.sh scrape' names, every second." \
        "global:" \
        "  scrape_interval: 1s" \
        "  scrape_timeout: 1s" \
        "scrape_configs:" \
        "  - job_name: stockd" \
        "    file_sd_configs:" \
        "      - files: [\"$(targets_file)\"]" >"$dir/prometheus.yml" || return 1
    launch prometheus "$prom" --config.file="$dir/prometheus.yml" \
        --storage.tsdb.path="$dir/data" --storage.tsdb.retention.time=6h \
        --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" --log.level=warn
    pid="$(tr -dc '0-9' <"$(pidfile_of prometheus)")"
    wait_ready prometheus "$pid"
}

cmd_scrape() {
    local t list=""
    for t in "$@"; do
        [[ "$t" =~ ^[A-Za-z0-9.-]+:[0-9]+$ ]] || die "scrape: '$t' is not HOST:PORT"
        list+="${list:+, }\"$t\""
    done
    mkdir -p "$(workdir_of prometheus)"
    printf '[{"targets": [%s]}]\n' "$list" >"$(targets_file).new"
    mv -f "$(targets_file).new" "$(targets_file)"
}

# ------------------------------------------- stockd instances behind nginx

# instance_ports N: the ports of instances 1..N.
instance_ports() {
    local i
    for (( i = 0; i < $1; i++ )); do echo $(( STOCKD_PORT_BASE + i )); done
}

# running_instances: stockd-PORT for every instance pid file here, by port.
running_instances() {
    local f
    for f in "$STACK"/stockd-*.pid; do
        [[ -e "$f" ]] || continue
        f="$(basename "$f" .pid)"
        [[ "$f" =~ ^stockd-[0-9]+$ ]] && echo "$f"
    done | sort -t- -k2,2n
}

stockd_bin() {
    local bin="${STOCKD_BIN:-$STOCKD_REPO/build/stockd}"
    [[ -x "$bin" ]] || die "$bin does not exist or is not executable (make build)"
    echo "$bin"
}

# start_instance stockd-PORT: one build/stockd on 127.0.0.1:PORT with this
# stack's settings (and STOCKD_THREADS as its --threads when set).
start_instance() {
    local name="$1" port bin pid pairs=() threads=()
    port="$(port_of "$name")"
    bin="$(stockd_bin)"
    mapfile -t pairs < <(env_pairs)
    if [[ -n "${STOCKD_THREADS:-}" ]]; then threads=(--threads="$STOCKD_THREADS"); fi
    launch "$name" env "${pairs[@]}" "$bin" --listen=127.0.0.1 --port="$port" \
        "${threads[@]+"${threads[@]}"}"
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid"
}

# nginx_conf PORT...: deploy/nginx.conf.template filled for these instances.
nginx_conf() {
    local tpl dir servers="" user="" p
    tpl="$(<"$STOCKD_REPO/deploy/nginx.conf.template")" || die "deploy/nginx.conf.template missing"
    dir="$(workdir_of nginx)"
    for p in "$@"; do
        servers+="        server 127.0.0.1:$p max_fails=0;"$'\n'
    done
    servers="${servers%$'\n'}"
    # A master started by root switches its workers to `user` (default nobody,
    # who cannot write to the run directory); as anyone else `user` is ignored
    # with a warning, so it is only written for root.
    if (( EUID == 0 )); then user="user root;"; fi
    tpl="${tpl//\{\{USER\}\}/$user}"
    tpl="${tpl//\{\{DIR\}\}/$dir}"
    tpl="${tpl//\{\{PORT\}\}/$NGINX_PORT}"
    tpl="${tpl//\{\{SERVERS\}\}/$servers}"
    printf '%s\n' "$tpl"
}

start_nginx() {
    local dir conf pid nginx
    dir="$(workdir_of nginx)"
    conf="$dir/nginx.conf"
    nginx="$(command -v nginx || true)"
    [[ -z "$nginx" && -x /usr/sbin/nginx ]] && nginx=/usr/sbin/nginx
    [[ -n "$nginx" ]] || die "nginx not found (scripts/deps.sh nginx)"
    [[ -s "$conf" ]] || die "$conf missing: run instances-up N"
    mkdir -p "$dir/tmp"
    # -e: the error log from the very start, before the configuration is read
    if ! "$nginx" -t -q -p "$dir/" -e "$dir/error.log" -c "$conf" >>"$(logfile_of nginx)" 2>&1; then
        echo "${0##*/}: nginx rejects $conf" >&2
        log_tail nginx
        return 1
    fi
    launch nginx "$nginx" -p "$dir/" -e "$dir/error.log" -c "$conf"
    pid="$(tr -dc '0-9' <"$(pidfile_of nginx)")"
    wait_ready nginx "$pid"
}

cmd_instances_up() {
    local n="${1:-}" ports=() p name old want=" " rc=0 conf new
    if ! [[ "$n" =~ ^[0-9]{1,3}$ ]] || (( 10#$n < 1 || 10#$n > MAX_INSTANCES )); then
        die "usage: ${0##*/} instances-up N (N = 1..$MAX_INSTANCES)"
    fi
    n=$(( 10#$n ))
    mapfile -t ports < <(instance_ports "$n")
    (( ${ports[-1]} <= 65535 )) || die "STACK_STOCKD_PORT_BASE $STOCKD_PORT_BASE + $n instances passes port 65535"
    for p in "${ports[@]}" "$NGINX_PORT"; do
        for old in "$MYSQL_PORT" "$REDIS_PORT" "$REDIS_REPLICA_PORT" "$ZK_PORT" "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}" \
            "${HA_LIST[@]+"${HA_LIST[@]}"}" "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do
            [[ "$p" != "$old" ]] || die "port $p is both a backend's and an instance's or nginx's"
        done
    done
    for p in "${ports[@]}"; do
        [[ "$p" != "$NGINX_PORT" ]] || die "STACK_NGINX_PORT $NGINX_PORT is also an instance port (STACK_STOCKD_PORT_BASE $STOCKD_PORT_BASE, $n instances)"
        want+="stockd-$p "
    done
    if [[ "${STACK_SKIP_DEPS:-}" != 1 ]]; then "$STOCKD_REPO/scripts/deps.sh" nginx; fi
    stockd_bin >/dev/null
    lock_stack
    # Fewer instances than last time: stop the ones beyond N.
    for name in $(running_instances); do
        [[ "$want" == *" $name "* ]] || stop_one "$name"
    done
    for p in "${ports[@]}"; do
        start_one "stockd-$p" || { rc=1; echo "${0##*/}: stockd-$p FAILED to start" >&2; }
    done
    (( rc == 0 )) || exit 1
    # nginx: (re)started when its upstream list changes.
    mkdir -p "$(workdir_of nginx)"
    conf="$(workdir_of nginx)/nginx.conf"
    new="$(nginx_conf "${ports[@]}")"
    if [[ ! -s "$conf" || "$(<"$conf")" != "$new" ]]; then
        stop_one nginx
        printf '%s\n' "$new" >"$conf"
    fi
    start_one nginx || exit 1
    say "$n instance(s) behind http://127.0.0.1:$NGINX_PORT (ports ${ports[*]})"
}

cmd_instances_down() {
    local name
    [[ -d "$STACK" ]] || return 0
    lock_stack
    stop_one nginx
    for name in $(running_instances); do stop_one "$name"; done
}

# --------------------------------------------------------------- start/stop

# start_one NAME: leave a running backend alone, clean a stale pid file,
# refuse a port someone else holds, else start it and wait until it answers.
start_one() {
    local name="$1" pid port f
    port="$(port_of "$name")"
    f="$(pidfile_of "$name")"
    if pid="$(pid_of "$name")"; then
        if ! answers "$name"; then
            say "$name: pid $pid is running but not answering yet; waiting"
            wait_ready "$name" "$pid" || return 1
        fi
        say "$name: already running (pid $pid, port $port)"
        # Cheap and idempotent: also repairs a start that was interrupted
        # before the database, user or schema were in place.
        if [[ "$name" == mysql ]]; then provision_mysql || return 1; fi
        return 0
    fi
    if [[ -e "$f" ]]; then
        say "$name: removing stale pid file"
        rm -f "$f"
    fi
    if tcp_open 127.0.0.1 "$port"; then
        die "$name: port $port on 127.0.0.1 is already taken by a process this stack did not start" \
            "(another checkout's stack? stop it there with make stack-down, or set STACK_*_PORT)"
    fi
    say "$name: starting on 127.0.0.1:$port"
    local t0=$SECONDS
    case "$name" in
        mysql) start_mysql ;;
        redis|redis-replica|redlock-*|ha-*) start_redis "$name" ;;
        sentinel-*) start_sentinel "$name" ;;
        zk) start_zk ;;
        stockd-*) start_instance "$name" ;;
        nginx) start_nginx ;;
        prometheus) start_prometheus ;;
    esac || return 1
    say "$name: ready (pid $(pid_of "$name" || echo '?'), $(( SECONDS - t0 ))s)"
}

# stop_one NAME: TERM, wait, then KILL; only ever the pid in our pid file,
# and only when that process is ours.
stop_one() {
    local name="$1" pid f deadline
    f="$(pidfile_of "$name")"
    if ! pid="$(pid_of "$name")"; then
        if [[ -e "$f" ]]; then rm -f "$f"; fi
        return 0
    fi
    say "$name: stopping pid $pid"
    kill -CONT "$pid" 2>/dev/null || true  # a frozen one (freeze-one) cannot stop
    deadline=$(( SECONDS + TIMEOUT ))
    case "$name" in
        redis|redis-replica|redlock-*|ha-*)
            # A graceful stop writes a snapshot (and flushes the stockd
            # Redis's AOF) that the next start loads: stop-one and start-one
            # keep the data, as they do for MariaDB.
            timeout 5 redis-cli -h 127.0.0.1 -p "$(port_of "$name")" shutdown save >/dev/null 2>&1 || true
            while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
            if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi ;;
        *)
            kill -TERM "$pid" 2>/dev/null || true ;;
    esac
    while alive "$pid" && (( SECONDS < deadline )); do sleep 0.2; done
    if alive "$pid"; then
        say "$name: still alive after ${TIMEOUT}s, sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        while alive "$pid"; do sleep 0.1; done
    fi
    rm -f "$f"
    [[ "$name" == mysql ]] && rm -f "$(mysql_socket)"
    return 0
}

# kill_one NAME: SIGKILL, as a crash would; its data dir and pid file stay
# (start_one cleans a stale pid file). Only ever the pid in our pid file.
kill_one() {
    local name="$1" pid
    pid="$(pid_of "$name")" || die "$name is not running"
    say "$name: kill -9 pid $pid"
    kill -KILL "$pid"
    while alive "$pid"; do sleep 0.05; done
}

# signal_one NAME SIGNAL: freeze (STOP) or thaw (CONT) our pid of NAME.
signal_one() {
    local pid
    pid="$(pid_of "$1")" || die "$1 is not running"
    say "$1: SIG$2 pid $pid"
    kill "-$2" "$pid"
}

# expand_name NAME: expand a user-given backend name (redlock = all three).
expand_name() {
    case "$1" in
        mysql|redis|redis-replica|zk|prometheus) echo "$1" ;;
        ha) ha_names ;;
        sentinel) sentinel_names ;;
        ha-*|sentinel-*)
            { ha_names; sentinel_names; } | grep -qx -- "$1" ||
                die "unknown backend '$1' (group: ${HA_LIST[*]-none}; Sentinels: ${SENTINEL_LIST[*]-none})"
            echo "$1" ;;
        redlock) for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do echo "redlock-$p"; done ;;
        redlock-*)
            local p
            for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do
                [[ "$1" == "redlock-$p" ]] && { echo "$1"; return 0; }
            done
            die "unknown backend '$1' (redlock ports: ${REDLOCK_LIST[*]-none})" ;;
        nginx) echo nginx ;;
        stockd-[0-9]*)
            if ! [[ "$1" =~ ^stockd-[0-9]+$ ]] || ! is_port "${1#stockd-}"; then
                die "unknown instance '$1'"
            fi
            echo "$1" ;;
        *) die "unknown backend '$1' (mysql redis redis-replica zk redlock redlock-PORT ha ha-PORT sentinel sentinel-PORT nginx stockd-PORT prometheus)" ;;
    esac
}

lock_stack() {
    stack_dir
    exec 9>"$STACK/stack.lock"
    flock 9
}

# ----------------------------------------------------------------- commands

cmd_up() {
    local need_zk=0 n rc=0
    [[ " $SERVICES " == *" zk "* ]] && need_zk=1
    if [[ "${STACK_SKIP_DEPS:-}" != 1 ]]; then
        "$STOCKD_REPO/scripts/deps.sh" stack
        if (( need_zk )); then "$STOCKD_REPO/scripts/deps.sh" zk; fi
    fi
    lock_stack
    for n in $(wanted_backends); do
        start_one "$n" || { rc=1; echo "${0##*/}: $n FAILED to start" >&2; }
    done
    (( rc == 0 )) || exit 1
    cmd_status
}

cmd_down() {
    local f n first=() names=() last=()
    [[ -d "$STACK" ]] || return 0
    lock_stack
    # Every backend that has a pid file here, whatever the configuration says
    # now; the database goes last so nothing loses it mid-shutdown.
    for f in "$STACK"/*.pid; do
        [[ -e "$f" ]] || continue
        n="$(basename "$f" .pid)"
        case "$n" in
            mysql) last+=("$n") ;;
            redis|redis-replica|zk|redlock-[0-9]*|ha-[0-9]*|prometheus) names+=("$n") ;;
            # the Sentinels before the group, so that no failover starts
            nginx|stockd-[0-9]*|sentinel-[0-9]*) first+=("$n") ;;
            *) say "leaving unknown pid file $f alone" ;;
        esac
    done
    if [[ -e "$(pidfile_of stockd)" ]]; then first+=(stockd); fi
    # nginx first, then the instances (they sort after it), then the backends
    for n in "${first[@]+"${first[@]}"}" "${names[@]+"${names[@]}"}" "${last[@]+"${last[@]}"}"; do
        stop_one "$n"
    done
}

# shown_backends: the wanted ones, plus any other with a pid file here.
shown_backends() {
    local n f
    {
        wanted_backends
        for f in "$STACK"/*.pid; do
            [[ -e "$f" ]] || continue
            n="$(basename "$f" .pid)"
            case "$n" in mysql|redis|redis-replica|zk|redlock-[0-9]*|ha-[0-9]*|sentinel-[0-9]*|nginx|stockd-[0-9]*|prometheus) echo "$n" ;; esac
        done
        if [[ -e "$(pidfile_of stockd)" ]]; then echo stockd; fi
    } | awk '!seen[$0]++'
}

cmd_status() {
    local n pid port state rc=0 wanted
    wanted=" $(wanted_backends | tr '\n' ' ') "
    for n in $(shown_backends); do
        port="$(port_of "$n")"
        if pid="$(pid_of "$n")"; then
            if answers "$n"; then state=running; else state="not-answering"; fi
        else
            pid="-"; state=stopped
        fi
        if [[ "$state" != running && "$wanted" == *" $n "* ]]; then rc=1; fi
        printf '%-14s %-14s port %-5s pid %s\n' "$n" "$state" "$port" "$pid"
    done
    return "$rc"
}

# env_pairs: NAME=VALUE lines pointing stockd at this stack.
env_pairs() {
    local redlock="" p
    for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do
        redlock+="${redlock:+,}127.0.0.1:$p"
    done
    printf 'STOCKD_MYSQL_HOST=127.0.0.1\n'
    printf 'STOCKD_MYSQL_PORT=%s\n' "$MYSQL_PORT"
    printf 'STOCKD_MYSQL_USER=stockd\n'
    printf 'STOCKD_MYSQL_PASSWORD=stockd\n'
    printf 'STOCKD_MYSQL_DB=stockd\n'
    printf 'STOCKD_REDIS_HOST=127.0.0.1\n'
    printf 'STOCKD_REDIS_PORT=%s\n' "$REDIS_PORT"
    printf 'STOCKD_REDLOCK=%s\n' "$redlock"
    printf 'STOCKD_ZK=127.0.0.1:%s\n' "$ZK_PORT"
}

# cmd_left_running: the end of `make demo`: what keeps running after it, by
# name, port and pid, and the one command that stops it all.
cmd_left_running() {
    local n pid lines=()
    [[ -d "$STACK" ]] || return 0
    for n in $(shown_backends); do
        pid="$(pid_of "$n")" || continue
        lines+=("$(printf '  %-14s 127.0.0.1:%-5s pid %s' "$n" "$(port_of "$n")" "$pid")")
    done
    (( ${#lines[@]} )) || return 0
    echo "Still running, as your own processes under $RUN_DIR:"
    printf '%s\n' "${lines[@]}"
    echo "Stop them all with: make stack-down"
}

cmd_env() {
    env_pairs | sed 's/^/export /'
}

cmd_mysql() {
    if [[ "${1:-}" == --root ]]; then
        shift
        exec mariadb --no-defaults --socket="$(mysql_socket)" -uroot "$@"
    fi
    MYSQL_PWD=stockd exec mariadb --no-defaults --protocol=TCP -h127.0.0.1 \
        -P"$MYSQL_PORT" -ustockd stockd "$@"
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    ha-env) cmd_ha_env ;;
    ha-primary) ha_primary || die "no Sentinel names the primary of '$HA_MASTER_NAME'" ;;
    left-running) cmd_left_running ;;
    mysql) cmd_mysql "$@" ;;
    stop-one|start-one|kill-one|freeze-one|thaw-one)
        [[ $# -eq 1 ]] || die "usage: ${0##*/} $cmd NAME"
        targets="$(expand_name "$1")"
        lock_stack
        rc=0
        for n in $targets; do
            case "$cmd" in
                stop-one) stop_one "$n" ;;
                start-one) start_one "$n" || rc=1 ;;
                kill-one) kill_one "$n" ;;
                freeze-one) signal_one "$n" STOP ;;
                thaw-one) signal_one "$n" CONT ;;
            esac
        done
        exit "$rc" ;;
    instances-up)
        [[ $# -eq 1 ]] || die "usage: ${0##*/} instances-up N"
        cmd_instances_up "$1" ;;
    instances-down) cmd_instances_down ;;
    scrape) cmd_scrape "$@" ;;
    port-of)
        [[ $# -eq 1 ]] || die "usage: ${0##*/} port-of NAME"
        port_of "$(expand_name "$1" | head -n 1)" ;;
    clean)
        cmd_down
        if [[ -d "$STACK" ]]; then rm -rf "$STACK"; fi ;;
    -h|--help|help|"") usage ;;
    *) echo "${0##*/}: unknown command '$cmd'" >&2; usage ;;
esac
