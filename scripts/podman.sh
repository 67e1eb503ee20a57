#!/usr/bin/env bash
# scripts/podman.sh: a private Podman engine that runs docker-compose.yml on a
# machine without Docker and without a reachable container registry (make
# compose-test). Everything it keeps is under run/podman/ (git-ignored):
#
#   scripts/podman.sh base           make the Debian 12 base image once: a
#                                    debootstrap root with this machine's apt
#                                    configuration, imported as debian:12
#   scripts/podman.sh service-up     the engine's Docker API on run/podman/podman.sock
#   scripts/podman.sh service-down   stop it (by its pid)
#   scripts/podman.sh compose ARGS   docker-compose ARGS against that API
#   scripts/podman.sh health         run every due healthcheck, every second,
#                                    until killed (see below)
#   scripts/podman.sh podman ARGS    podman ARGS on the private storage
#   scripts/podman.sh env            the environment, for eval
#
# Why a private engine: the images, containers, volumes and networks live in
# run/podman/ (its own storage.conf and containers.conf), not in the machine's
# /var/lib/containers, so nothing else using Podman here sees them and
# `rm -rf run/podman` removes every trace. The settings the machine needs:
# runc (crun cannot create containers under this kernel's cgroups),
# cgroupfs (no systemd), limits a container may have (nofile up to 16384,
# within this shell's hard limit, and nproc 4096: the engine's defaults, a
# million each, are refused), and file-based events.
#
# Healthchecks: Podman 4.3 schedules them with systemd timers; without
# systemd they never run and `depends_on: condition: service_healthy` would
# wait forever. `health` runs `podman healthcheck run` for each running
# container with a healthcheck at its own interval, as Docker's daemon does.
#
# The base: no registry is reachable, so debian:12 is made here, as the
# Dockerfiles' FROM names it (on Docker the official debian:12 is the same
# release). It carries this machine's /etc/apt (sources, keys, settings), so
# `apt-get install` in a build reaches Debian's packages as the host does.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${PODMAN_DIR:-$REPO/run/podman}"
ENGINE="$DIR/engine"
SOCK="$DIR/podman.sock"
BASE_TAR="$DIR/debian-12.tar"
BASE_IMAGE="debian:12"

export CONTAINERS_CONF="$ENGINE/containers.conf"
export CONTAINERS_STORAGE_CONF="$ENGINE/storage.conf"
export DOCKER_HOST="unix://$SOCK"

# configure: the engine's two config files (checked each time: a moved
# checkout gets its paths right), replaced whole, never half-written under a
# podman that reads them.
write_if_changed() { # write_if_changed FILE: stdin into FILE, when it differs
    cat >"$1.new"
    if cmp -s "$1.new" "$1"; then rm -f "$1.new"; else mv -f "$1.new" "$1"; fi
}

configure() {
    local nofile
    nofile=$(ulimit -Hn)
    [[ "$nofile" == unlimited || "$nofile" -gt 16384 ]] && nofile=16384
    mkdir -p "$ENGINE/networks" "$ENGINE/tmp"
    write_if_changed "$CONTAINERS_CONF" <<EOF
# written by scripts/podman.sh
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=4096:4096"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$ENGINE/events.log"
# never rotated under a running compose: docker-compose 1.29 fails on the
# event Podman sends when it rotates this file (service-up empties it)
events_logfile_max_size = "1g"
tmp_dir = "$ENGINE/tmp"
volume_path = "$ENGINE/volumes"
static_dir = "$ENGINE/libpod"

[network]
network_backend = "netavark"
network_config_dir = "$ENGINE/networks"
EOF
    write_if_changed "$CONTAINERS_STORAGE_CONF" <<EOF
# written by scripts/podman.sh
[storage]
driver = "overlay"
graphroot = "$ENGINE/storage"
runroot = "$ENGINE/runroot"
EOF
}

pm() { podman "$@"; }

# base: import debian:12 from the cached root tarball, debootstrapping it first
# when there is none.
base() {
    pm image exists "$BASE_IMAGE" && return 0
    if [[ ! -s "$BASE_TAR" ]]; then
        command -v debootstrap >/dev/null || die "debootstrap not found (scripts/deps.sh containers)"
        local root="$DIR/base-root" mirror
        # the mirror this machine's apt uses (its first Debian source)
        mirror=$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' \
            /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list 2>/dev/null || true)
        [[ -n "$mirror" ]] || mirror=http://deb.debian.org/debian
        rm -rf "$root"
        say "debootstrap: a Debian 12 root from $mirror (once; log in $DIR/debootstrap.log)"
        debootstrap --variant=minbase bookworm "$root" "$mirror" >"$DIR/debootstrap.log" 2>&1 ||
            { tail -5 "$DIR/debootstrap.log" >&2; die "debootstrap failed"; }
        carry_apt "$root"
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        tar -C "$root" --numeric-owner -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR"
        rm -rf "$root"
    fi
    say "importing $BASE_TAR as $BASE_IMAGE"
    pm import --quiet "$BASE_TAR" "$BASE_IMAGE" >/dev/null
}

# carry_apt ROOT: this machine's apt configuration into ROOT (sources, keys,
# pins, settings), and each keyring a source names from outside /etc/apt.
carry_apt() {
    local root="$1" key
    rm -rf "$root/etc/apt"
    cp -a /etc/apt "$root/etc/apt"
    for key in $(sed -n 's/^[[:space:]]*Signed-By:[[:space:]]*\(\/[^[:space:]]*\)/\1/p' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null; \
        sed -n 's/^deb[^#]*signed-by=\([^] ]*\).*/\1/p' /etc/apt/sources.list \
        /etc/apt/sources.list.d/*.list 2>/dev/null); do
        [[ -e "$key" && ! -e "$root$key" ]] || continue
        mkdir -p "$root$(dirname "$key")"
        cp -a "$key" "$root$key"
    done
}

service_up() {
    local pidfile="$DIR/service.pid"
    if [[ -S "$SOCK" ]] && [[ -s "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        return 0
    fi
    rm -f "$SOCK"
    : >"$ENGINE/events.log"
    podman system service --time=0 "unix://$SOCK" >>"$DIR/service.log" 2>&1 &
    echo $! >"$pidfile"
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -S "$SOCK" ]] && return 0
        kill -0 "$(cat "$pidfile")" 2>/dev/null || break
        sleep 0.1
    done
    tail -5 "$DIR/service.log" >&2
    die "podman system service did not open $SOCK"
}

service_down() {
    local pidfile="$DIR/service.pid" pid
    [[ -s "$pidfile" ]] || return 0
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$pidfile" "$SOCK"
}

# health: each running container's healthcheck, at its interval (whole
# seconds, at least one).
health() {
    declare -A due=()
    local now id every
    while :; do
        now=$(date +%s)
        while read -r id every; do
            [[ -n "$id" && "$every" != "-" ]] || continue
            every=${every%%.*}
            if ((${due[$id]:-0} <= now)); then
                pm healthcheck run "$id" >/dev/null 2>&1 &
                due[$id]=$((now + (every > 1 ? every : 1)))
            fi
        done < <(pm ps -q | xargs -r podman inspect --format \
            '{{.Id}} {{if .Config.Healthcheck}}{{.Config.Healthcheck.Interval.Seconds}}{{else}}-{{end}}' \
            2>/dev/null || true)
        wait
        sleep 1
    done
}

mkdir -p "$DIR"
configure
cmd="${1:-}"
shift || true
case "$cmd" in
    base) base ;;
    service-up) service_up ;;
    service-down) service_down ;;
    compose) exec docker-compose --project-directory "$REPO" -f "$REPO/docker-compose.yml" "$@" ;;
    health) health ;;
    podman) exec podman "$@" ;;
    env) printf 'export CONTAINERS_CONF=%q CONTAINERS_STORAGE_CONF=%q DOCKER_HOST=%q\n' \
        "$CONTAINERS_CONF" "$CONTAINERS_STORAGE_CONF" "$DOCKER_HOST" ;;
    *) sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
