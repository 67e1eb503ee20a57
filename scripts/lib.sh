# shellcheck shell=bash
# Helpers shared by the scripts in this directory. Source it, do not run it.

# The repository root: the parent of the directory holding this file.
STOCKD_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export STOCKD_REPO

# say MESSAGE...: a progress line on stderr, prefixed with the script's name.
say() {
    printf '%s: %s\n' "${0##*/}" "$*" >&2
}

# die MESSAGE...: an error line on stderr, then exit 1.
die() {
    printf '%s: error: %s\n' "${0##*/}" "$*" >&2
    exit 1
}

# is_port NUMBER: true when NUMBER is a TCP port number.
is_port() {
    [[ "$1" =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= 65535 ))
}

# tcp_open HOST PORT: true when something accepts TCP connections there.
tcp_open() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# tcp_ask HOST PORT WORD: send WORD on a fresh connection, print the reply
# (used for ZooKeeper's four-letter words, which need no client).
tcp_ask() {
    # shellcheck disable=SC2016 # expanded by the inner bash
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "%s" "$3" >&3
        cat <&3' _ "$1" "$2" "$3" 2>/dev/null
}
