#!/usr/bin/env bash
# The private local stack: MariaDB, Redis and its replica, three Redlock Redis
# servers, a replicated Redis group watched by three Sentinels, and
# ZooKeeper, run as this user's own processes on 127.0.0.1, on non-default
# ports, with all their state under one run directory. Nothing here touches
# system services, and several stacks can run side by side when they are
# given different run directories and ports.
#
# Each backend is one row of the table under "the backends" below (its
# ports, the service that starts it, how it starts, answers and stops),
# with its start and probe functions in scripts/backends.sh; the verbs
# read the table and name no backend.
#
#   scripts/stack.sh up                start what STACK_SERVICES names (idempotent)
#   scripts/stack.sh down              stop nginx, the instances, the stockd jmeter/compare
#                                      left running (make demo: run/stockd.pid) and every
#                                      backend this run dir's pid files name
#   scripts/stack.sh status            one line per backend (the wanted ones and any
#                                      other with a pid file); exit 1 if a wanted one is down
#   scripts/stack.sh left-running      what is still running here, and how to stop it
#   scripts/stack.sh env               export lines pointing stockd at this stack (its
#                                      password files, and REDISCLI_AUTH for redis-cli)
#   scripts/stack.sh ha-env            export lines that move stockd's main Redis to the
#                                      Sentinel group (after `env`)
#   scripts/stack.sh rcluster-env      the export line that moves stockd's main Redis to the
#                                      Redis Cluster (after `env`)
#   scripts/stack.sh ha-primary        the port of the group's primary, as the Sentinels say
#   scripts/stack.sh mysql [ARGS...]   mariadb client on the stockd db (--root first: as
#                                      the administrator, through the unix socket)
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
#         | cluster (all three Galera nodes) | cluster-PORT
#         | rcluster (all six Redis Cluster nodes) | rcluster-PORT
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
# STACK_DURABLE=1 starts both stores flushing every commit instead
# (innodb-flush-log-at-trx-commit=1, appendfsync always): what a shop that must
# not lose a sale runs (make bench switches them while they run: docs/bench.md).
#
# The replicated group (service `ha`) is separate: two Redis servers, ha-PORT,
# the first started as primary and the second as its replica, and three
# Sentinels, sentinel-PORT, that watch master `stockd` with a quorum of 2 and
# lab timings (down after 1 s), so that a primary killed with kill-one is
# replaced within two seconds or so. A group server started while another one
# is primary starts as that one's replica: a returning old primary never
# serves its stale data. The group keeps no snapshot or AOF: a server that
# returns is refilled by its primary. A Sentinel's config file is its own
# (it rewrites it); it is written anew only when no other Sentinel runs, for
# the primary a running group server names (else the first).
#
# The Galera cluster (service `cluster`, opt-in: not in the default
# STACK_SERVICES; ~130 MiB and ~12 s per joining node) is three MariaDB
# nodes with galera-4, cluster-PORT, each its own datadir, run as the mysql
# user (rsync SST refuses root). A node started while another runs joins it;
# the first one of a stopped cluster bootstraps it, and that is always the
# node with the newest committed transaction (after a crash of all of them,
# each is asked with --wsrep-recover), so a restart loses nothing any node
# committed. Node PORT also takes PORT+1 (group communication), PORT+2 (IST)
# and PORT+3 (SST). The schema and seed are applied once, on the bootstrap.
#
# The Redis Cluster (service `rcluster`, opt-in like `cluster`) is six
# redis-server nodes with cluster-enabled, rcluster-PORT, each its bus on
# PORT+1 and its nodes.conf and AOF in its own directory. The last node to
# answer creates the cluster (redis-cli --cluster create, one replica per
# primary: three shards) when no node serves a slot yet; a node that comes
# back rejoins as what nodes.conf says. Lab timings: a primary is failed over
# after cluster-node-timeout (2 s); a slot without a primary stops only its
# own keys (cluster-require-full-coverage no).
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
#   STACK_CLUSTER_PORTS  "23320 23324 23328"  the Galera nodes' client ports (+1..+3 taken)
#   STACK_CLUSTER_FLUSH  2                 the nodes' innodb_flush_log_at_trx_commit (1 or 2)
#   STACK_DURABLE        unset             1: MariaDB and the stockd Redis flush every commit
#   STACK_CLUSTER_HOSTS  unset             the nodes' own loopback addresses, one per port
#                                      (client, gcomm, IST and SST all there; a network
#                                      partition cuts between them): else 127.0.0.1
#   STACK_RCLUSTER_PORTS "23340 23342 23344 23346 23348 23350"  the Redis Cluster's nodes
#                                      (+1 each: the cluster bus)
#   STACK_RCLUSTER_NODE_TIMEOUT 2000   its cluster-node-timeout, milliseconds
#   STACK_PROMETHEUS_PORT 23909
#   STACK_SERVICES       "mysql redis redlock zk ha"   what `up` starts (may add prometheus,
#                                      cluster, rcluster);
#                                      `redis` is the main Redis and its replica
#   STACK_TIMEOUT        30                seconds to wait for a backend to answer
#   STACK_SKIP_DEPS      unset             1: `up` and `instances-up` do not run deps.sh
#   STACK_STOCKD_PORT_BASE 23091           first instance's port
#   STACK_NGINX_PORT     23080             the balancer's port
#   STOCKD_BIN           <repo>/build/stockd   the instances' binary
#   STOCKD_THREADS       unset             the instances' --threads (else stockd's default)
#   STACK_INSTANCES_MYSQL unset            cluster: instance i uses cluster node i (then the
#                                      others, in turn, when it dies) instead of `mysql`
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
CLUSTER_PORTS="${STACK_CLUSTER_PORTS-23320 23324 23328}"
CLUSTER_FLUSH="${STACK_CLUSTER_FLUSH:-2}"
DURABLE="${STACK_DURABLE:-0}"
CLUSTER_HOSTS="${STACK_CLUSTER_HOSTS:-}"
RCLUSTER_PORTS="${STACK_RCLUSTER_PORTS-23340 23342 23344 23346 23348 23350}"
RCLUSTER_NODE_TIMEOUT="${STACK_RCLUSTER_NODE_TIMEOUT:-2000}"
PROMETHEUS_PORT="${STACK_PROMETHEUS_PORT:-23909}"
SERVICES="${STACK_SERVICES:-mysql redis redlock zk ha}"
TIMEOUT="${STACK_TIMEOUT:-30}"
STOCKD_PORT_BASE="${STACK_STOCKD_PORT_BASE:-23091}"
NGINX_PORT="${STACK_NGINX_PORT:-23080}"
MAX_INSTANCES=64
read -ra REDLOCK_LIST <<<"$REDLOCK_PORTS"
read -ra HA_LIST <<<"$HA_PORTS"
read -ra SENTINEL_LIST <<<"$SENTINEL_PORTS"
read -ra CLUSTER_LIST <<<"$CLUSTER_PORTS"
read -ra CLUSTER_HOST_LIST <<<"$CLUSTER_HOSTS"
read -ra RCLUSTER_LIST <<<"$RCLUSTER_PORTS"

# ------------------------------------------------------------ the backends
#
# Every process the stack runs is one row of this table; the verbs below
# (up, down, status, start-one, stop-one, kill-one, freeze-one, ...) read
# it, and know no backend by name. A new backend is one row and, in
# scripts/backends.sh, its start function.
#
#   NAME     the backend's name; NAME-PORT stands for one backend per port
#            of PORTS (redlock-23381, ...), and NAME alone for all of them
#   PORTS    its port, or its ports; '*' any port (instances-up picks them)
#   SERVICE  the STACK_SERVICES word whose `up` starts it ('-': on demand)
#   START    the function that starts one (scripts/backends.sh; NAME PORT):
#            launch it, then wait_ready
#   PROBE    the function that tells whether it answers (NAME PORT)
#   STOP     what stop-one does: term (SIGTERM), or save (Redis: SHUTDOWN
#            SAVE, so that start-one finds its data again, then SIGTERM)
#   DOWN     when `down` stops it: 1 (front ends and watchers), 2, 3 (last:
#            the database, so that nothing loses it mid-shutdown)
#
# kill-one (SIGKILL, a crash) and freeze-one / thaw-one (SIGSTOP / SIGCONT,
# a pause) mean the same for every backend; stop-one and down thaw a frozen
# one first. Within one SERVICE, `up` starts them in the table's order.
B_NAME=() B_PORTS=() B_SERVICE=() B_START=() B_PROBE=() B_STOP=() B_DOWN=()
backend() {
    B_NAME+=("$1") B_PORTS+=("$2") B_SERVICE+=("$3") B_START+=("$4") B_PROBE+=("$5")
    B_STOP+=("$6") B_DOWN+=("$7")
}
#       NAME              PORTS                  SERVICE     START             PROBE           STOP DOWN
backend mysql             "$MYSQL_PORT"          mysql       start_mysql       probe_mysql     term 3
backend redis             "$REDIS_PORT"          redis       start_redis       probe_redis     save 2
backend redis-replica     "$REDIS_REPLICA_PORT"  redis       start_redis       probe_redis     save 2
backend redlock-PORT      "$REDLOCK_PORTS"       redlock     start_redis       probe_redis     save 2
backend ha-PORT           "$HA_PORTS"            ha          start_redis       probe_redis     save 2
backend sentinel-PORT     "$SENTINEL_PORTS"      ha          start_sentinel    probe_sentinel  term 1
backend zk                "$ZK_PORT"             zk          start_zk          probe_zk        term 2
backend cluster-PORT      "$CLUSTER_PORTS"       cluster     start_cluster_node probe_cluster_node term 3
backend rcluster-PORT     "$RCLUSTER_PORTS"      rcluster    start_rcluster_node probe_redis   save 2
backend prometheus        "$PROMETHEUS_PORT"     prometheus  start_prometheus  probe_ready     term 2
backend nginx             "$NGINX_PORT"          -           start_nginx       probe_health    term 1
backend stockd-PORT       '*'                    -           start_instance    probe_health    term 1

# row_of NAME: the table row of the backend NAME (for NAME-PORT rows, one of
# their ports); fails for a name no row has.
row_of() {
    local i base port
    for i in "${!B_NAME[@]}"; do
        base="${B_NAME[i]%-PORT}"
        if [[ "${B_NAME[i]}" == "$1" && "$base" == "$1" ]]; then echo "$i"; return 0; fi
        [[ "${B_NAME[i]}" != "$base" && "$1" == "$base"-* ]] || continue
        port="${1#"$base"-}"
        if [[ "${B_PORTS[i]}" == '*' ]]; then
            is_port "$port" && [[ "$port" =~ ^[1-9][0-9]*$ ]] && { echo "$i"; return 0; }
        elif [[ " ${B_PORTS[i]} " == *" $port "* ]]; then
            echo "$i"; return 0
        fi
    done
    return 1
}

# names_of ROW: the backends of one row (none for '*').
names_of() {
    local p base="${B_NAME[$1]%-PORT}"
    if [[ "${B_NAME[$1]}" == "$base" ]]; then echo "$base"; return 0; fi
    [[ "${B_PORTS[$1]}" != '*' ]] || return 0
    for p in ${B_PORTS[$1]}; do echo "$base-$p"; done
}

# every_port [BUT]: the ports of every backend with fixed ones (but BUT's).
every_port() {
    local i p
    for i in "${!B_NAME[@]}"; do
        [[ "${B_PORTS[i]}" != '*' && "${B_NAME[i]}" != "${1:-}" ]] || continue
        for p in ${B_PORTS[i]}; do echo "$p"; done
    done
}

for p in $(every_port) "$STOCKD_PORT_BASE"; do
    is_port "$p" || die "not a port number: '$p'"
done
for p in "${CLUSTER_LIST[@]+"${CLUSTER_LIST[@]}"}"; do
    is_port $(( p + 3 )) || die "STACK_CLUSTER_PORTS: $p + 3 is not a port number"
done
for p in "${RCLUSTER_LIST[@]+"${RCLUSTER_LIST[@]}"}"; do
    is_port $(( p + 1 )) || die "STACK_RCLUSTER_PORTS: $p + 1 is not a port number"
done
[[ "$RCLUSTER_NODE_TIMEOUT" =~ ^[0-9]+$ ]] || die "STACK_RCLUSTER_NODE_TIMEOUT must be milliseconds"
if (( ${#CLUSTER_HOST_LIST[@]} && ${#CLUSTER_HOST_LIST[@]} != ${#CLUSTER_LIST[@]} )); then
    die "STACK_CLUSTER_HOSTS names ${#CLUSTER_HOST_LIST[@]} addresses for ${#CLUSTER_LIST[@]} nodes"
fi
for h in "${CLUSTER_HOST_LIST[@]+"${CLUSTER_HOST_LIST[@]}"}"; do
    [[ "$h" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "STACK_CLUSTER_HOSTS: $h is not a 127/8 address"
done
[[ "$CLUSTER_FLUSH" == 1 || "$CLUSTER_FLUSH" == 2 ]] || die "STACK_CLUSTER_FLUSH must be 1 or 2"
[[ "$DURABLE" == 0 || "$DURABLE" == 1 ]] || die "STACK_DURABLE must be 0 or 1"
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "STACK_TIMEOUT must be a number of seconds"
KNOWN_SERVICES="$(printf '%s\n' "${B_SERVICE[@]}" | grep -vx -- - | awk '!seen[$0]++' | tr '\n' ' ')"
for s in $SERVICES; do
    [[ " $KNOWN_SERVICES" == *" $s "* ]] || die "unknown service '$s' in STACK_SERVICES (${KNOWN_SERVICES% })"
done

RUN_DIR="${STOCKD_RUN_DIR:-$STOCKD_REPO/run}"
STACK="$RUN_DIR/stack"
NODES="$RUN_DIR/cluster" # the Galera nodes, which run as the mysql user

# stack_dir: create the stack directory and make STACK absolute (the daemons
# change directory, so every path handed to them must be absolute). It is
# this user's alone (0700): the data, the sockets, the config files the
# servers rewrite with their passwords in them (a Sentinel's).
stack_dir() {
    # RUN_DIR itself with the usual umask: the cluster's nodes, run as the
    # mysql user, must pass through it to their directories beside STACK.
    mkdir -p "$RUN_DIR"
    (umask 077 && mkdir -p "$STACK") && chmod 700 "$STACK"
    STACK="$(cd "$STACK" && pwd)"
}
# For read-only commands: absolute path without creating anything.
if [[ -d "$STACK" ]]; then STACK="$(cd "$STACK" && pwd)"; fi

# wanted_backends: the backends STACK_SERVICES asks for, in `up`'s order.
wanted_backends() {
    local s i
    for s in $SERVICES; do
        for i in "${!B_NAME[@]}"; do
            [[ "${B_SERVICE[i]}" == "$s" ]] && names_of "$i"
        done
    done
    return 0
}

# port_of NAME: the port NAME listens on ("stockd": the one jmeter/compare
# started).
port_of() {
    local i base
    if [[ "$1" == stockd ]]; then compare_stockd_port; return; fi
    i="$(row_of "$1")" || return 0
    base="${B_NAME[i]%-PORT}"
    if [[ "${B_NAME[i]}" == "$base" ]]; then echo "${B_PORTS[i]}"; else echo "${1#"$base"-}"; fi
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
        cluster-*) echo "$NODES/$1/data" ;;
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

# answers NAME: the backend answers a real request on its port (its PROBE).
answers() {
    local i probe=probe_health
    if [[ "$1" != stockd ]]; then
        i="$(row_of "$1")" || return 1
        probe="${B_PROBE[i]}"
    fi
    "$probe" "$1" "$(port_of "$1")"
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

# launched NAME: the pid launch recorded (or the daemon wrote) for NAME.
launched() {
    tr -dc '0-9' <"$(pidfile_of "$1")"
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

# shellcheck source=scripts/backends.sh
. "$(dirname "${BASH_SOURCE[0]}")/backends.sh"

cmd_ha_env() {
    local p list=""
    for p in "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do list+="${list:+,}127.0.0.1:$p"; done
    printf 'export STOCKD_REDIS_SENTINEL=%s\n' "$list"
    printf 'export STOCKD_REDIS_MASTER_NAME=%s\n' "$HA_MASTER_NAME"
}

# cmd_rcluster_env: the export line that points stockd's main Redis at the
# Redis Cluster (after `env`).
cmd_rcluster_env() {
    local p list=""
    for p in "${RCLUSTER_LIST[@]+"${RCLUSTER_LIST[@]}"}"; do list+="${list:+,}127.0.0.1:$p"; done
    printf 'export STOCKD_REDIS_CLUSTER=%s\n' "$list"
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

cmd_instances_up() {
    local n="${1:-}" ports=() p name old want=" " rc=0 conf new
    if ! [[ "$n" =~ ^[0-9]{1,3}$ ]] || (( 10#$n < 1 || 10#$n > MAX_INSTANCES )); then
        die "usage: ${0##*/} instances-up N (N = 1..$MAX_INSTANCES)"
    fi
    n=$(( 10#$n ))
    mapfile -t ports < <(instance_ports "$n")
    (( ${ports[-1]} <= 65535 )) || die "STACK_STOCKD_PORT_BASE $STOCKD_PORT_BASE + $n instances passes port 65535"
    for p in "${ports[@]}" "$NGINX_PORT"; do
        for old in $(every_port nginx); do
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
    local name="$1" pid port f i
    i="$(row_of "$name")" || die "unknown backend '$name'"
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
    "${B_START[i]}" "$name" "$port" || return 1
    say "$name: ready (pid $(pid_of "$name" || echo '?'), $(( SECONDS - t0 ))s)"
}

# stop_one NAME: TERM, wait, then KILL; only ever the pid in our pid file,
# and only when that process is ours.
stop_one() {
    local name="$1" pid f deadline how=term i
    f="$(pidfile_of "$name")"
    if i="$(row_of "$name")"; then how="${B_STOP[i]}"; fi
    if ! pid="$(pid_of "$name")"; then
        if [[ -e "$f" ]]; then rm -f "$f"; fi
        return 0
    fi
    say "$name: stopping pid $pid"
    kill -CONT "$pid" 2>/dev/null || true  # a frozen one (freeze-one) cannot stop
    deadline=$(( SECONDS + TIMEOUT ))
    if [[ "$how" == save ]]; then
        # A graceful stop writes a snapshot (and flushes the stockd Redis's
        # AOF) that the next start loads: stop-one and start-one keep the
        # data, as they do for MariaDB.
        redis_cli -h 127.0.0.1 -p "$(port_of "$name")" shutdown save >/dev/null 2>&1 || true
        while alive "$pid" && (( SECONDS < deadline )); do sleep 0.1; done
    fi
    if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
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

# expand_name NAME: the backends a user-given name stands for: itself, or
# every backend of a NAME-PORT row for its bare NAME (redlock: all three).
expand_name() {
    local i base found=0
    if row_of "$1" >/dev/null; then echo "$1"; return 0; fi
    for i in "${!B_NAME[@]}"; do
        base="${B_NAME[i]%-PORT}"
        if [[ "${B_NAME[i]}" != "$base" && "$1" == "$base" && "${B_PORTS[i]}" != '*' ]]; then
            names_of "$i"
            found=1
        fi
    done
    (( found )) || die "unknown backend '$1' (${B_NAME[*]}; a NAME-PORT row's NAME alone: all of them)"
}

lock_stack() {
    stack_dir
    exec 9>"$STACK/stack.lock"
    flock 9
}

# ----------------------------------------------------------------- commands

# passwordless_running: the first Redis server or Sentinel of this stack that
# runs and answers without the password (started before the stack had them).
passwordless_running() {
    local n i
    for n in $(shown_backends); do
        i="$(row_of "$n")" || continue
        [[ "${B_PROBE[i]}" == probe_redis || "${B_PROBE[i]}" == probe_sentinel ]] || continue
        pid_of "$n" >/dev/null || continue
        if [[ "$(env -u REDISCLI_AUTH timeout 3 redis-cli -h 127.0.0.1 -p "$(port_of "$n")" \
                ping 2>/dev/null)" == PONG ]]; then
            echo "$n"
            return 0
        fi
    done
    return 1
}

cmd_up() {
    local need_zk=0 n rc=0
    [[ " $SERVICES " == *" zk "* ]] && need_zk=1
    if [[ "${STACK_SKIP_DEPS:-}" != 1 ]]; then
        "$STOCKD_REPO/scripts/deps.sh" stack
        if (( need_zk )); then "$STOCKD_REPO/scripts/deps.sh" zk; fi
        if [[ " $SERVICES " == *" cluster "* ]]; then "$STOCKD_REPO/scripts/deps.sh" cluster; fi
    fi
    lock_stack
    # A stack left running from before it had passwords is stopped once and
    # started again with them (its data kept, as by stop-one/start-one).
    if n="$(passwordless_running)"; then
        say "$n runs without a password: restarting the stack with its passwords"
        cmd_down
    fi
    for n in $(wanted_backends); do
        start_one "$n" || { rc=1; echo "${0##*/}: $n FAILED to start" >&2; }
    done
    (( rc == 0 )) || exit 1
    cmd_status
}

cmd_down() {
    local f n i phase order=()
    [[ -d "$STACK" ]] || return 0
    lock_stack
    # Every backend that has a pid file here, whatever the configuration says
    # now, in the order of the table's DOWN column; the stockd jmeter/compare
    # left running goes with the front ends.
    for phase in 1 2 3; do
        for f in "$STACK"/*.pid; do
            [[ -e "$f" ]] || continue
            n="$(basename "$f" .pid)"
            if ! i="$(row_of "$n")"; then
                if (( phase == 1 )); then say "leaving unknown pid file $f alone"; fi
                continue
            fi
            if [[ "${B_DOWN[i]}" == "$phase" ]]; then order+=("$n"); fi
        done
        if (( phase == 1 )) && [[ -e "$(pidfile_of stockd)" ]]; then order+=(stockd); fi
    done
    for n in "${order[@]+"${order[@]}"}"; do
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
            if row_of "$n" >/dev/null; then echo "$n"; fi
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
    printf 'STOCKD_MYSQL_PASSWORD_FILE=%s\n' "$(secret_file mysql)"
    printf 'STOCKD_MYSQL_DB=stockd\n'
    printf 'STOCKD_REDIS_HOST=127.0.0.1\n'
    printf 'STOCKD_REDIS_PORT=%s\n' "$REDIS_PORT"
    printf 'STOCKD_REDIS_PASSWORD_FILE=%s\n' "$(secret_file redis)"
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

# env: also REDISCLI_AUTH, with which every redis-cli of the shell that
# evaluates it (the tests', the lab's) gives the stack's Redis password.
cmd_env() {
    stack_dir
    secret mysql >/dev/null
    { env_pairs; printf 'REDISCLI_AUTH=%s\n' "$(secret redis)"; } | sed 's/^/export /'
}

cmd_mysql() {
    if [[ "${1:-}" == --root ]]; then
        shift
        exec mariadb --no-defaults --socket="$(mysql_socket)" -u"$(mysql_admin)" "$@"
    fi
    MYSQL_PWD="$(secret mysql)" exec mariadb --no-defaults --protocol=TCP -h127.0.0.1 \
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
    rcluster-env) cmd_rcluster_env ;;
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
        rm -rf "$STACK" "$NODES" ;;
    -h|--help|help|"") usage ;;
    *) echo "${0##*/}: unknown command '$cmd'" >&2; usage ;;
esac
