#!/usr/bin/env bash
# The private local stack: MariaDB, Redis, three Redlock Redis servers and
# ZooKeeper, run as this user's own processes on 127.0.0.1, on non-default
# ports, with all their state under one run directory. Nothing here touches
# system services, and several stacks can run side by side when they are
# given different run directories and ports.
#
#   scripts/stack.sh up                start what STACK_SERVICES names (idempotent)
#   scripts/stack.sh down              stop every backend this run dir's pid files name
#   scripts/stack.sh status            one line per backend (the wanted ones and any
#                                      other with a pid file); exit 1 if a wanted one is down
#   scripts/stack.sh env               export lines pointing stockd at this stack
#   scripts/stack.sh mysql [ARGS...]   mariadb client on the stockd db (--root first: as root)
#   scripts/stack.sh stop-one NAME     stop one backend, keep its data
#   scripts/stack.sh start-one NAME    start one backend and wait until it answers
#   scripts/stack.sh clean             down, then delete the stack's directory
#
#   NAME: mysql | redis | zk | redlock (all three) | redlock-PORT
#
# Environment (defaults):
#   STOCKD_RUN_DIR       <repo>/run        the stack lives in $STOCKD_RUN_DIR/stack
#   STACK_MYSQL_PORT     23306
#   STACK_REDIS_PORT     23379
#   STACK_REDLOCK_PORTS  "23381 23382 23383"
#   STACK_ZK_PORT        23181
#   STACK_SERVICES       "mysql redis redlock zk"   what `up` starts
#   STACK_TIMEOUT        30                seconds to wait for a backend to answer
#   STACK_SKIP_DEPS      unset             1: `up` does not run deps.sh
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MYSQL_PORT="${STACK_MYSQL_PORT:-23306}"
REDIS_PORT="${STACK_REDIS_PORT:-23379}"
REDLOCK_PORTS="${STACK_REDLOCK_PORTS-23381 23382 23383}"
ZK_PORT="${STACK_ZK_PORT:-23181}"
SERVICES="${STACK_SERVICES:-mysql redis redlock zk}"
TIMEOUT="${STACK_TIMEOUT:-30}"

read -ra REDLOCK_LIST <<<"$REDLOCK_PORTS"
for p in "$MYSQL_PORT" "$REDIS_PORT" "$ZK_PORT" "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do
    is_port "$p" || die "not a port number: '$p'"
done
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "STACK_TIMEOUT must be a number of seconds"
for s in $SERVICES; do
    case "$s" in mysql|redis|redlock|zk) ;; *) die "unknown service '$s' in STACK_SERVICES (mysql redis redlock zk)" ;; esac
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

# wanted_backends: the backends STACK_SERVICES asks for.
wanted_backends() {
    local s p
    for s in $SERVICES; do
        case "$s" in
            redlock) for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do echo "redlock-$p"; done ;;
            *) echo "$s" ;;
        esac
    done
}

port_of() {
    case "$1" in
        mysql) echo "$MYSQL_PORT" ;;
        redis) echo "$REDIS_PORT" ;;
        zk) echo "$ZK_PORT" ;;
        redlock-*) echo "${1#redlock-}" ;;
    esac
}

pidfile_of() { echo "$STACK/$1.pid"; }

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
        redis|redlock-*)
            [[ "$(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == PONG ]] ;;
        zk)
            # ruok says imok even while not serving; srvr shows the mode only then
            tcp_ask 127.0.0.1 "$port" srvr | grep -q '^Mode: ' ;;
    esac
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
    local name="$1" port pid
    port="$(port_of "$name")"
    command -v redis-server >/dev/null || die "redis-server not found (scripts/deps.sh stack)"
    launch "$name" redis-server --port "$port" --bind 127.0.0.1 \
        --save '' --appendonly no --daemonize no \
        --dir "$(workdir_of "$name")" --logfile "$(logfile_of "$name")" \
        --pidfile "$(pidfile_of "$name")" --maxclients 4000
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid" || return 1
    [[ "$name" == redis ]] && seed_redis "$port"
    return 0
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
        die "$name: port $port on 127.0.0.1 is already taken by a process this stack did not start"
    fi
    say "$name: starting on 127.0.0.1:$port"
    local t0=$SECONDS
    case "$name" in
        mysql) start_mysql ;;
        redis|redlock-*) start_redis "$name" ;;
        zk) start_zk ;;
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
    deadline=$(( SECONDS + TIMEOUT ))
    case "$name" in
        redis|redlock-*)
            # Redis runs without persistence (--save ''), but a graceful stop
            # writes a snapshot that the next start loads: stop-one and
            # start-one keep the data, as they do for MariaDB.
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

# expand_name NAME: expand a user-given backend name (redlock = all three).
expand_name() {
    case "$1" in
        mysql|redis|zk) echo "$1" ;;
        redlock) for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do echo "redlock-$p"; done ;;
        redlock-*)
            local p
            for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do
                [[ "$1" == "redlock-$p" ]] && { echo "$1"; return 0; }
            done
            die "unknown backend '$1' (redlock ports: ${REDLOCK_LIST[*]-none})" ;;
        *) die "unknown backend '$1' (mysql redis zk redlock redlock-PORT)" ;;
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
    local f n names=() last=()
    [[ -d "$STACK" ]] || return 0
    lock_stack
    # Every backend that has a pid file here, whatever the configuration says
    # now; the database goes last so nothing loses it mid-shutdown.
    for f in "$STACK"/*.pid; do
        [[ -e "$f" ]] || continue
        n="$(basename "$f" .pid)"
        case "$n" in
            mysql) last+=("$n") ;;
            redis|zk|redlock-[0-9]*) names+=("$n") ;;
            *) say "leaving unknown pid file $f alone" ;;
        esac
    done
    for n in "${names[@]+"${names[@]}"}" "${last[@]+"${last[@]}"}"; do
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
            case "$n" in mysql|redis|zk|redlock-[0-9]*) echo "$n" ;; esac
        done
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

cmd_env() {
    local redlock="" p
    for p in "${REDLOCK_LIST[@]+"${REDLOCK_LIST[@]}"}"; do
        redlock+="${redlock:+,}127.0.0.1:$p"
    done
    printf 'export STOCKD_MYSQL_HOST=127.0.0.1\n'
    printf 'export STOCKD_MYSQL_PORT=%s\n' "$MYSQL_PORT"
    printf 'export STOCKD_MYSQL_USER=stockd\n'
    printf 'export STOCKD_MYSQL_PASSWORD=stockd\n'
    printf 'export STOCKD_MYSQL_DB=stockd\n'
    printf 'export STOCKD_REDIS_HOST=127.0.0.1\n'
    printf 'export STOCKD_REDIS_PORT=%s\n' "$REDIS_PORT"
    printf 'export STOCKD_REDLOCK=%s\n' "$redlock"
    printf 'export STOCKD_ZK=127.0.0.1:%s\n' "$ZK_PORT"
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
    mysql) cmd_mysql "$@" ;;
    stop-one|start-one)
        [[ $# -eq 1 ]] || die "usage: ${0##*/} $cmd NAME"
        targets="$(expand_name "$1")"
        lock_stack
        rc=0
        for n in $targets; do
            if [[ "$cmd" == stop-one ]]; then stop_one "$n"; else start_one "$n" || rc=1; fi
        done
        exit "$rc" ;;
    clean)
        cmd_down
        if [[ -d "$STACK" ]]; then rm -rf "$STACK"; fi ;;
    -h|--help|help|"") usage ;;
    *) echo "${0##*/}: unknown command '$cmd'" >&2; usage ;;
esac
