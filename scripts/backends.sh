# shellcheck shell=bash
# scripts/backends.sh: how each backend of the private stack starts and how
# it is asked whether it answers, one START and one PROBE function per row of
# scripts/stack.sh's table. Sourced by scripts/stack.sh, not run.
#
# A START function gets the backend's NAME and PORT; it launches the process
# (launch: detached, in the backend's own directory, logging to its log, pid
# recorded) and waits until it answers (wait_ready), then does whatever makes
# it usable (a schema, a seed, a replica's first sync). A PROBE function gets
# NAME and PORT and succeeds when the backend answers a real request.

# ------------------------------------------------------------------ probes

# probe_mysql: ping succeeds as soon as the server answers, even "access
# denied"; before the stockd account exists no account may connect from
# 127.0.0.1, and the server says so: that is an answer too.
probe_mysql() {
    local out
    out="$(mariadb-admin --no-defaults --connect-timeout=2 --protocol=TCP \
        -h127.0.0.1 -P"$2" -ustockd ping 2>&1)" && return 0
    [[ "$out" == *"is not allowed to connect"* ]]
}

probe_redis() {
    [[ "$(redis_cli -h 127.0.0.1 -p "$2" ping 2>/dev/null)" == PONG ]]
}

# probe_sentinel: a Sentinel is of use once it names the group's primary.
probe_sentinel() {
    [[ -n "$(sentinel_ask "$2" get-master-addr-by-name "$HA_MASTER_NAME")" ]]
}

# probe_zk: ruok says imok even while not serving; srvr shows the mode only then.
probe_zk() {
    tcp_ask 127.0.0.1 "$2" srvr | grep -q '^Mode: '
}

probe_ready() {
    [[ "$(http_status 127.0.0.1 "$2" /-/ready)" == 200 ]]
}

# probe_health: a stockd (or nginx in front of some) is healthy: every backend
# it needs answers (through nginx: whichever instance gets the request).
probe_health() {
    [[ "$(http_status 127.0.0.1 "$2" /health)" == 200 ]]
}

MYSQL_SOCKET_NAME="mysql.sock"

# ---------------------------------------------------------------- secrets
#
# The stack's two passwords, generated at its first start into files only
# this user can read (the directory 0700, each file 0600), so that another
# local user cannot reach the data: `redis` is every Redis server's and
# Sentinel's requirepass, `mysql` the stockd account's. They reach the
# servers through config files and stdin, and stockd through
# --redis-password-file and --mysql-password-file: never through a command
# line, which every user can read in ps.

secrets_dir() { echo "$STACK/secrets"; }
secret_file() { echo "$(secrets_dir)/$1.password"; }

# secret NAME: the password NAME, generated the first time (cheap after
# that: the tests' and the lab's redis-cli calls ask for it often).
secret() {
    local f="$STACK/secrets/$1.password" pw
    if [[ ! -s "$f" ]]; then
        (umask 077 && mkdir -p "$(secrets_dir)" && chmod 700 "$(secrets_dir)" &&
            od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$f.new" && mv -f "$f.new" "$f") ||
            die "cannot write $f"
    fi
    read -r pw <"$f" || [[ -n "$pw" ]] || die "cannot read $f"
    printf '%s' "$pw"
}

# redis_cli ARGS...: redis-cli with the stack's password (REDISCLI_AUTH: the
# environment, not the command line), for at most 3 s.
redis_cli() {
    REDISCLI_AUTH="$(secret redis)" timeout 3 redis-cli "$@"
}

# ------------------------------------------------------------------ mysql

mysql_socket() { echo "$STACK/$MYSQL_SOCKET_NAME"; }

# MariaDB's administrators are root and the user who installed it, both
# authenticated by the unix socket (their uid), so only through a socket and
# only as that system user; over TCP nobody is root.
mysql_admin() { id -un; }

# mysql_root ARGS...: mariadb as the administrator, on MYSQL_ROOT_SOCKET when
# set (a cluster node being provisioned), else on the stack's MariaDB.
mysql_root() {
    mariadb --no-defaults --socket="${MYSQL_ROOT_SOCKET:-$(mysql_socket)}" -u"$(mysql_admin)" "$@"
}

# mysql_files: the only directory LOAD DATA and SELECT ... INTO OUTFILE may
# touch (secure_file_priv).
mysql_files() { echo "$STACK/mysql/files"; }

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
                --auth-root-socket-user="$(mysql_admin)" --skip-test-db \
                >>"$(logfile_of mysql)" 2>&1; then
            echo "${0##*/}: mariadb-install-db failed" >&2
            log_tail mysql
            return 1
        fi
        touch "$marker" "$STACK/mysql/socket-auth"
    fi
    (umask 077 && mkdir -p "$(mysql_files)") || return 1

    rm -f "$sock"
    launch mysql mariadbd --no-defaults \
        --datadir="$data" --socket="$sock" --port="$MYSQL_PORT" \
        --bind-address=127.0.0.1 "${as_user[@]+"${as_user[@]}"}" \
        --secure-file-priv="$(mysql_files)" \
        --pid-file="$(pidfile_of mysql)" --log-error="$(logfile_of mysql)" \
        --skip-name-resolve --max-connections=500 --max-connect-errors=1000000 \
        --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
        --innodb-flush-log-at-trx-commit="$( ((DURABLE)) && echo 1 || echo 2)" --skip-log-bin \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci
    pid="$(tr -dc '0-9' <"$(pidfile_of mysql)")"
    wait_ready mysql "$pid" || return 1
    provision_mysql
}

# socket_auth_mysql: a data dir installed when root had no password over
# TCP gets the administrators of a fresh install (see mysql_admin), once.
socket_auth_mysql() {
    local marker="$STACK/mysql/socket-auth" me
    [[ ! -e "$marker" ]] || return 0
    me="$(mysql_admin)"
    say "mysql: root only through the unix socket from now on"
    mariadb --no-defaults --socket="$(mysql_socket)" -uroot <<SQL || return 1
CREATE USER IF NOT EXISTS '$me'@'localhost' IDENTIFIED VIA unix_socket;
GRANT ALL PRIVILEGES ON *.* TO '$me'@'localhost' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket;
DROP USER IF EXISTS 'root'@'127.0.0.1', 'root'@'::1', 'root'@'$(hostname)';
SQL
    touch "$marker"
}

# provision_mysql: database, user and schema; every step is idempotent.
provision_mysql() {
    local deadline pw
    deadline=$(( SECONDS + TIMEOUT ))
    # A cluster node's root is the socket's user from its install on
    # (--auth-root-socket-user): only the stack's MariaDB has a root to lock.
    until { [[ -n "${MYSQL_ROOT_SOCKET:-}" ]] || socket_auth_mysql >/dev/null 2>&1; } &&
        mysql_root -e 'SELECT 1' >/dev/null 2>&1; do
        if (( SECONDS >= deadline )); then
            echo "${0##*/}: mysql: root cannot connect on ${MYSQL_ROOT_SOCKET:-$(mysql_socket)}" >&2
            log_tail mysql
            return 1
        fi
        sleep 0.2
    done
    pw="$(secret mysql)" # hex: nothing to quote
    if ! mysql_root <<SQL
CREATE DATABASE IF NOT EXISTS stockd;
CREATE USER IF NOT EXISTS 'stockd'@'127.0.0.1' IDENTIFIED BY '$pw';
CREATE USER IF NOT EXISTS 'stockd'@'localhost' IDENTIFIED BY '$pw';
ALTER USER 'stockd'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER 'stockd'@'localhost' IDENTIFIED BY '$pw';
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

# redis_auth_conf NAME: the password in a config file of its own (0600), not
# on the command line; a replica also gives it to its primary. Prints its path.
redis_auth_conf() {
    local conf
    conf="$(workdir_of "$1")/auth.conf"
    mkdir -p "$(workdir_of "$1")"
    (umask 077 && printf 'requirepass %s\nmasterauth %s\n' "$(secret redis)" "$(secret redis)" \
        >"$conf") || return 1
    echo "$conf"
}

start_redis() {
    local name="$1" port pid primary
    port="$(port_of "$name")"
    command -v redis-server >/dev/null || die "redis-server not found (scripts/deps.sh stack)"
    # The stockd Redis keeps an AOF (see the header), rewritten past 16 MB so
    # that a restart after kill-one loads it quickly.
    local aof=(--appendonly no) role=()
    if [[ "$name" == redis ]]; then
        aof=(--appendonly yes --appendfsync "$( ((DURABLE)) && echo always || echo no)"
            --auto-aof-rewrite-min-size 16mb)
    fi
    case "$name" in
        redis-replica) role=(--replicaof 127.0.0.1 "$REDIS_PORT") ;;
        ha-*) if primary="$(ha_running_primary "$name")"; then role=(--replicaof 127.0.0.1 "$primary"); fi ;;
    esac
    local conf
    conf="$(redis_auth_conf "$name")" || return 1
    # DEBUG SLEEP, from this machine only and with the password, is how the
    # tests freeze Redis with a request in flight, to make a lost reply
    # happen on demand. Expired-key events: the redis-keyspace expiry
    # mechanism's subscribers (docs/orders-api.md).
    launch "$name" redis-server "$conf" --port "$port" --bind 127.0.0.1 \
        --save '' "${aof[@]}" "${role[@]+"${role[@]}"}" --daemonize no \
        --dir "$(workdir_of "$name")" --logfile "$(logfile_of "$name")" \
        --pidfile "$(pidfile_of "$name")" --maxclients 4000 --repl-diskless-sync-delay 0 \
        --enable-debug-command local --notify-keyspace-events Ex
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid" || return 1
    if (( ${#role[@]} )); then wait_replica_linked "$name" || return 1; fi
    [[ "$name" == redis ]] && seed_redis "$port"
    return 0
}

# redis_role PORT: master or slave (empty when nothing answers).
redis_role() {
    redis_cli -h 127.0.0.1 -p "$1" role 2>/dev/null | head -n 1
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
    until redis_cli -h 127.0.0.1 -p "$port" info replication 2>/dev/null |
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
    redis_cli -h 127.0.0.1 -p "$port" sentinel "$@" 2>/dev/null
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

# start_sentinel NAME: one Sentinel of the group. Its timings are a lab's,
# short but not shorter than a loaded machine allows: the primary is down
# after 1 s of silence, and a failover-timeout of 3 s. Both were halved once,
# and a machine busy installing packages then made the Sentinels fail over by
# themselves: a Sentinel counts a new primary's silence from the switch, so
# a first PING answered late marked a healthy primary down; and one whose
# promoted replica did not report in within the timeout abandoned the
# failover half-way, leaving a replica promoted that no Sentinel named. An
# abandoned attempt also means no new one within 2 x failover-timeout.
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
    # A config from before the group had a password is written anew too.
    if [[ ! -s "$conf" ]] || (( alone )) || ! grep -q '^requirepass ' "$conf"; then
        primary="$(ha_running_primary "")" || primary="${HA_LIST[0]}"
        (umask 077 && : >"$conf") || return 1
        printf '%s\n' \
            "# written by scripts/stack.sh; the Sentinel rewrites it as the group changes" \
            "port $port" "bind 127.0.0.1" "daemonize no" "dir $dir" \
            "sentinel resolve-hostnames no" \
            "sentinel monitor $HA_MASTER_NAME 127.0.0.1 $primary 2" \
            "sentinel down-after-milliseconds $HA_MASTER_NAME 1000" \
            "sentinel failover-timeout $HA_MASTER_NAME 3000" \
            "sentinel parallel-syncs $HA_MASTER_NAME 1" \
            "requirepass $(secret redis)" \
            "sentinel auth-pass $HA_MASTER_NAME $(secret redis)" >"$conf" || return 1
    fi
    chmod 600 "$conf" || return 1
    launch "$name" redis-sentinel "$conf" --logfile "$(logfile_of "$name")" \
        --pidfile "$(pidfile_of "$name")"
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid"
}

# seed_redis PORT: the Redis side of sql/seed.sql - product 1001 with 5000
# units, unless the product is already there.
seed_redis() {
    redis_cli -p "$1" SET 'stock:{1001}:initial' 5000 NX >/dev/null &&
        redis_cli -p "$1" SET 'stock:{1001}' 5000 NX >/dev/null
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
        "# the stockds that 'scripts/stack.sh scrape' names, every half second" \
        "# (lab/stack/prometheus.py's SCRAPE_S)." \
        "global:" \
        "  scrape_interval: 500ms" \
        "  scrape_timeout: 500ms" \
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

# ------------------------------------------- stockd instances behind nginx

stockd_bin() {
    local bin="${STOCKD_BIN:-$STOCKD_REPO/build/stockd}"
    [[ -x "$bin" ]] || die "$bin does not exist or is not executable (make build)"
    echo "$bin"
}

# start_instance stockd-PORT: one build/stockd on 127.0.0.1:PORT with this
# stack's settings (and STOCKD_THREADS as its --threads when set). With
# STACK_INSTANCES_MYSQL=cluster, instance i uses cluster node i (modulo the
# nodes), and the other nodes after it when it dies.
start_instance() {
    local name="$1" port bin pid pairs=() threads=()
    port="$(port_of "$name")"
    bin="$(stockd_bin)"
    mapfile -t pairs < <(env_pairs)
    if [[ "${STACK_INSTANCES_MYSQL:-}" == cluster ]]; then
        pairs+=("STOCKD_MYSQL_NODES=$(cluster_nodes_from $(( port - STOCKD_PORT_BASE )))")
    fi
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

ha_names() { local p; for p in "${HA_LIST[@]+"${HA_LIST[@]}"}"; do echo "ha-$p"; done; }
sentinel_names() { local p; for p in "${SENTINEL_LIST[@]+"${SENTINEL_LIST[@]}"}"; do echo "sentinel-$p"; done; }

# ------------------------------------------------------ the Galera cluster

# cluster_host I: node I's address (STACK_CLUSTER_HOSTS), 127.0.0.1 by default.
cluster_host() {
    echo "${CLUSTER_HOST_LIST[$1]:-127.0.0.1}"
}

# cluster_host_of NAME: the address of the node cluster-PORT.
cluster_host_of() {
    local i
    for i in "${!CLUSTER_LIST[@]}"; do
        if [[ "cluster-${CLUSTER_LIST[$i]}" == "$1" ]]; then cluster_host "$i"; return; fi
    done
    echo 127.0.0.1
}

# cluster_nodes_from I: the nodes' host:port list, from node I (modulo the
# nodes) round to the one before it: what stockd's --mysql-nodes takes.
cluster_nodes_from() {
    local n=${#CLUSTER_LIST[@]} k i list=""
    for (( k = 0; k < n; k++ )); do
        i=$(( ($1 + k) % n ))
        list+="${list:+,}$(cluster_host "$i"):${CLUSTER_LIST[$i]}"
    done
    echo "$list"
}

cluster_names() { local p; for p in "${CLUSTER_LIST[@]+"${CLUSTER_LIST[@]}"}"; do echo "cluster-$p"; done; }
cluster_socket() { echo "$NODES/$1/node.sock"; }

# cluster_root NAME ARGS...: mariadb as root on one node's socket.
cluster_root() {
    local name="$1"
    shift
    mariadb --no-defaults --socket="$(cluster_socket "$name")" -uroot "$@"
}

# probe_cluster_node: a node is of use once it is synced with the cluster
# (a joiner answers pings during its state transfer, and refuses queries).
probe_cluster_node() {
    [[ "$(cluster_root "$1" -N -e "SHOW STATUS LIKE 'wsrep_ready'" 2>/dev/null)" == *ON ]]
}

# cluster_position NAME: uuid:seqno, the newest transaction the node's
# datadir holds (grastate.dat after a clean stop, --wsrep-recover after a
# crash); empty when it holds none.
cluster_position() {
    local data uuid seqno
    data="$(workdir_of "$1")"
    uuid="$(sed -n 's/^uuid: *//p' "$data/grastate.dat" 2>/dev/null)"
    seqno="$(sed -n 's/^seqno: *//p' "$data/grastate.dat" 2>/dev/null)"
    if [[ -n "$uuid" && -n "$seqno" && "$seqno" != -1 ]]; then
        echo "$uuid:$seqno"
    elif [[ -e "$NODES/$1/installed" ]]; then
        mariadbd --no-defaults --datadir="$data" --user=mysql \
            --wsrep-provider=/usr/lib/galera/libgalera_smm.so --wsrep-on=ON \
            --wsrep-cluster-address=gcomm:// --wsrep-sst-method=rsync \
            --binlog-format=ROW --skip-networking --socket="$NODES/$1/recover.sock" \
            --pid-file="$NODES/$1/recover.pid" --innodb-buffer-pool-size=64M \
            --innodb-log-file-size=32M --wsrep-recover 2>&1 |
            sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:-\{0,1\}[0-9]*\).*/\1/p' | tail -n 1
    fi
}

# cluster_seqno POSITION: its seqno (-1 for none).
cluster_seqno() {
    local seqno="${1##*:}"
    [[ "$seqno" =~ ^-?[0-9]+$ ]] || seqno=-1
    echo "$seqno"
}

# cluster_running_peers NAME: the galera addresses of the other nodes that run.
cluster_running_peers() {
    local other list=""
    for other in $(cluster_names); do
        [[ "$other" != "$1" ]] && pid_of "$other" >/dev/null || continue
        list+="${list:+,}$(cluster_host_of "$other"):$(( $(port_of "$other") + 1 ))"
    done
    echo "$list"
}

# cluster_newest: of the stopped cluster, the node with the newest data.
cluster_newest() {
    local n best="" best_seqno=-2 seqno
    for n in $(cluster_names); do
        seqno="$(cluster_seqno "$(cluster_position "$n")")"
        say "$n: newest transaction $seqno"
        if (( seqno > best_seqno )); then best="$n" best_seqno="$seqno"; fi
    done
    echo "$best"
}

# cluster_install NAME: a fresh system database for the bootstrap node; a
# joiner's datadir stays empty and is filled by its state transfer.
cluster_install() {
    local data
    data="$(workdir_of "$1")"
    rm -rf "$data"
    mkdir -p "$data"
    chown mysql: "$NODES/$1" "$data"
    say "$1: initialising $data"
    if ! mariadb-install-db --no-defaults --datadir="$data" --user=mysql \
            --auth-root-socket-user="$(mysql_admin)" --skip-test-db \
            >>"$(logfile_of "$1")" 2>&1; then
        echo "${0##*/}: mariadb-install-db failed for $1" >&2
        log_tail "$1"
        return 1
    fi
}

# start_cluster_node NAME: join the running nodes, or bootstrap the cluster
# from the node with the newest data (started first when that is not NAME).
start_cluster_node() {
    local name="$1" port host data peers newest bootstrap=() pid as_user=() position start_at=()
    # A joiner's full state transfer takes longer than most backends' start.
    local TIMEOUT=$(( TIMEOUT > 120 ? TIMEOUT : 120 ))
    port="$(port_of "$name")"
    host="$(cluster_host_of "$name")"
    data="$(workdir_of "$name")"
    command -v mariadbd >/dev/null || die "mariadbd not found (scripts/deps.sh stack)"
    [[ -r /usr/lib/galera/libgalera_smm.so ]] || die "galera-4 not installed (scripts/deps.sh cluster)"
    command -v rsync >/dev/null || die "rsync not found (scripts/deps.sh cluster)"
    id mysql >/dev/null 2>&1 || die "the cluster's nodes run as the mysql user, and there is none"
    # The mysql user must reach its datadir; rsync's state transfer refuses root.
    if (( EUID == 0 )); then as_user=(--user=mysql); fi
    # The stack directory is this user's alone; the nodes, run as mysql, live
    # beside it, each in a directory of the mysql user's own.
    (mkdir -p "$NODES/$name" && chmod 711 "$NODES") || return 1
    peers="$(cluster_running_peers "$name")"
    if [[ -z "$peers" ]]; then
        newest="$(cluster_newest)"
        if [[ ! -e "$NODES/$name/installed" && ! -e "$NODES/$newest/installed" ]]; then
            cluster_install "$name" || return 1
            touch "$NODES/$name/installed"
        elif [[ "$newest" != "$name" && -e "$NODES/$newest/installed" ]]; then
            say "$name: $newest holds the newest data: it bootstraps the cluster"
            start_one "$newest" || return 1
            peers="$(cluster_running_peers "$name")"
        fi
    fi
    if [[ -z "$peers" ]]; then
        sed -i 's/^safe_to_bootstrap: *0/safe_to_bootstrap: 1/' "$data/grastate.dat" 2>/dev/null || true
        bootstrap=(--wsrep-new-cluster)
    else
        # A joiner takes the cluster's state: only what it misses (IST) when
        # it knows where it stopped, even after a crash; else a whole copy.
        position="$(cluster_position "$name")"
        if [[ -n "$position" ]]; then start_at=(--wsrep-start-position="$position"); fi
        mkdir -p "$data"
        touch "$NODES/$name/installed"
    fi
    (umask 077 && mkdir -p "$NODES/$name/files") || return 1
    chown -R mysql: "$NODES/$name" && chmod 700 "$NODES/$name" || return 1
    rm -f "$(cluster_socket "$name")"
    launch "$name" mariadbd --no-defaults "${as_user[@]+"${as_user[@]}"}" \
        --datadir="$data" --socket="$(cluster_socket "$name")" --port="$port" \
        --bind-address="$host" --pid-file="$NODES/$name/node.pid" \
        --secure-file-priv="$NODES/$name/files" \
        --skip-name-resolve --max-connections=500 --max-connect-errors=1000000 \
        --innodb-buffer-pool-size=64M --innodb-log-file-size=32M \
        --innodb-flush-log-at-trx-commit="$CLUSTER_FLUSH" \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
        --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2 \
        --wsrep-on=ON --wsrep-provider=/usr/lib/galera/libgalera_smm.so \
        --wsrep-cluster-name=stockd --wsrep-node-name="$name" \
        --wsrep-cluster-address="gcomm://$peers" \
        --wsrep-node-address="$host:$(( port + 1 ))" \
        --wsrep-sst-receive-address="$host:$(( port + 3 ))" --wsrep-sst-method=rsync \
        --wsrep-provider-options="gmcast.listen_addr=tcp://$host:$(( port + 1 ));ist.recv_addr=$host:$(( port + 2 ));gcache.size=32M;evs.keepalive_period=PT0.3S;evs.inactive_check_period=PT0.5S;evs.suspect_timeout=PT1.5S;evs.inactive_timeout=PT3S;evs.install_timeout=PT3S" \
        "${bootstrap[@]+"${bootstrap[@]}"}" "${start_at[@]+"${start_at[@]}"}"
    pid="$(launched "$name")"
    wait_ready "$name" "$pid" || return 1
    if (( ${#bootstrap[@]} )); then MYSQL_ROOT_SOCKET="$(cluster_socket "$name")" provision_mysql; fi
}

# ------------------------------------------------------ the Redis Cluster

rcluster_names() { local p; for p in "${RCLUSTER_LIST[@]+"${RCLUSTER_LIST[@]}"}"; do echo "rcluster-$p"; done; }

# rcluster_info PORT FIELD: one field of CLUSTER INFO on a node ("" when it
# does not answer).
rcluster_info() {
    redis_cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

# start_rcluster_node NAME: one node of the Redis Cluster, its bus on PORT+1
# and its state (nodes.conf, the AOF) in its own directory, so that a node
# stopped or killed comes back as the member it was. The last node to answer
# forms the cluster when no node serves a slot yet.
start_rcluster_node() {
    local name="$1" port conf pid
    command -v redis-server >/dev/null || die "redis-server not found (scripts/deps.sh stack)"
    port="$(port_of "$name")"
    conf="$(redis_auth_conf "$name")" || return 1
    launch "$name" redis-server "$conf" --port "$port" --bind 127.0.0.1 \
        --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port $(( port + 1 )) \
        --cluster-node-timeout "$RCLUSTER_NODE_TIMEOUT" --cluster-require-full-coverage no \
        --save '' --appendonly yes --appendfsync no --auto-aof-rewrite-min-size 16mb \
        --daemonize no --dir "$(workdir_of "$name")" --logfile "$(logfile_of "$name")" \
        --pidfile "$(pidfile_of "$name")" --maxclients 4000 --repl-diskless-sync-delay 0 \
        --enable-debug-command local
    pid="$(tr -dc '0-9' <"$(pidfile_of "$name")")"
    wait_ready "$name" "$pid" || return 1
    rcluster_form
}

# rcluster_form: once every node answers, creates the cluster (one replica
# per primary from six nodes on) unless a node serves slots already, then
# waits until every node says the cluster is ok and every replica has synced.
rcluster_form() {
    local n port slots addrs=() formed=0 replicas=0 deadline
    for n in $(rcluster_names); do
        answers "$n" || return 0
        port="$(port_of "$n")"
        addrs+=("127.0.0.1:$port")
        slots="$(rcluster_info "$port" cluster_slots_assigned)"
        (( ${slots:-0} > 0 )) && formed=1
    done
    if (( !formed )); then
        (( ${#addrs[@]} >= 6 )) && replicas=1
        say "rcluster: creating the cluster of ${#addrs[@]} nodes, $replicas replica(s) per primary"
        if ! REDISCLI_AUTH="$(secret redis)" timeout "$TIMEOUT" redis-cli --cluster create \
                "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes \
                >>"$(logfile_of rcluster-create)" 2>&1; then
            echo "${0##*/}: rcluster: redis-cli --cluster create failed" >&2
            log_tail rcluster-create
            return 1
        fi
    fi
    deadline=$(( SECONDS + TIMEOUT ))
    for n in $(rcluster_names); do
        port="$(port_of "$n")"
        until [[ "$(rcluster_info "$port" cluster_state)" == ok ]]; do
            if (( SECONDS >= deadline )); then
                echo "${0##*/}: $n does not say cluster_state:ok within ${TIMEOUT}s" >&2
                return 1
            fi
            sleep 0.1
        done
        if [[ "$(redis_role "$port")" == slave ]]; then wait_replica_linked "$n" || return 1; fi
    done
}
