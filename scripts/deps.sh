#!/usr/bin/env bash
# Install the Debian packages a part of stockd needs, by group.
#
#   scripts/deps.sh GROUP...        groups: build stack zk cluster jmeter nginx chromium compose
#                                   containers prometheus lint bench openresty perf fuzz all
#   scripts/deps.sh --list          print each group and its packages
#
# Fast and silent when everything is already installed. When something is
# missing it runs apt-get update + apt-get install (as root), or, when not
# root, prints the sudo command to run and exits 1.
#
# Installing a server package never starts or enables its system service:
# while apt runs, /usr/sbin/policy-rc.d forbids it (a temporary one is created
# when none exists, and removed afterwards).
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GROUPS_ALL="build stack zk cluster partition jmeter nginx chromium compose containers prometheus lint bench openresty perf fuzz"

# group_packages GROUP: the group's packages, one word each; "a|b" means
# "a, or b when a does not exist in this release".
group_packages() {
    case "$1" in
        build)    echo "gcc make pkg-config libmicrohttpd-dev libjansson-dev libhiredis-dev libmariadb-dev libcmocka-dev libcurl4-openssl-dev libzookeeper-mt-dev" ;;
        # the private stack, and python3: every target that drives it is a lab
        # run (python3 -m lab), and a new Debian 12 root may have no Python.
        stack)    echo "mariadb-server mariadb-client redis-server redis-sentinel python3" ;;
        # zookeeper: the server's jars and a JRE; stack.sh runs it as a private
        # process, so zookeeperd (the system service wrapper) is not wanted.
        zk)       echo "zookeeper libzookeeper-mt-dev" ;;
        # the opt-in Galera cluster (make cluster): the replication library
        # and rsync, which moves a joining node's state transfer.
        cluster)  echo "galera-4 rsync" ;;
        # make partition: its namespace's cuts (nft), ip and unshare, and
        # redis-cli for the Redis servers it starts itself.
        partition) echo "nftables iproute2 util-linux redis-tools" ;;
        # Debian splits JMeter: the HTTP sampler and the header and cookie
        # managers the plans use are in jmeter-http, which jmeter does not pull in.
        jmeter)   echo "jmeter jmeter-http default-jdk-headless python3" ;;
        nginx)    echo "nginx-light|nginx" ;;
        chromium) echo "chromium" ;;
        compose)  echo "docker-compose" ;;
        # make compose-test: a container engine (Podman, with runc, netavark's
        # networks and aardvark's DNS between containers), debootstrap for the
        # base image that no registry provides, and docker-compose to drive it.
        containers) echo "podman runc netavark aardvark-dns iptables slirp4netns uidmap catatonit debootstrap docker-compose" ;;
        # promtool (tests/checks/compose-check validates deploy/prometheus.yml); the
        # server it also ships is never started.
        prometheus) echo "prometheus" ;;
        # lint: the formatter, and xmllint (libxml2-utils), which validates the
        # junit.xml that compare, bench and chaos write against tests/junit.xsd;
        # Node.js for the OpenAPI linter (group_npm_dir below) and python3,
        # which fetches npm itself where no npm comes with Node.js (find_npm).
        lint)     echo "clang-format libxml2-utils nodejs python3" ;;
        # make bench: the HTTP load generator, the MariaDB and Redis raw limits,
        # and the private nginx that serves the HTTP-path limit.
        bench)    echo "wrk sysbench redis-tools nginx-light|nginx python3" ;;
        # make bench's OpenResty-style peer (bench/openresty/): nginx with the
        # Lua module (nginx-extras brings libnginx-mod-http-lua and
        # lua-resty-core) and lua-resty-redis (Debian's lua-nginx-redis). A
        # group of its own, installed by make bench and make audit-stockd only,
        # so that make test does not pay for nginx-extras' twenty modules.
        openresty) echo "nginx-extras lua-nginx-redis" ;;
        # make bench's durable rows: perf counts the stockd Redis's fsync and
        # fdatasync calls (MariaDB counts its own).
        perf)     echo "linux-perf" ;;
        # fuzz: libFuzzer and clang's sanitizer runtimes are in compiler-rt
        # (libclang-rt-dev, 14 on Debian 12), which clang only pulls in as a
        # recommendation; llvm has the llvm-symbolizer that puts function
        # names and lines in the reports.
        fuzz)     echo "clang libclang-rt-dev llvm" ;;
        *)        return 1 ;;
    esac
}

# group_npm_dir GROUP: the directory whose package-lock.json the group
# installs with `npm ci` once its Debian packages are there (none: no output).
group_npm_dir() {
    case "$1" in
        lint) echo "tests/checks/openapi" ;; # @redocly/cli, which tests/checks/openapi-check runs
    esac
}

# find_npm ROOT: sets npm_cmd to the npm that `npm ci` runs. NodeSource's
# nodejs carries its npm; Debian's does not, and Debian 12's npm package brings
# some three hundred node-* packages (minutes of dpkg on a new machine) for the
# one `npm ci` the lint group makes. Without an npm on PATH, npm's own release
# tarball is fetched from the registry once, checked against the sha512 the
# registry publishes for it (pinned below), and unpacked under build/.
NPM_VERSION=10.9.2
NPM_SHA512="iriPEPIkoMYUy3F6f3wwSZAU93E0Eg6cHwIR6jzzOXWSy+SD/rOODEs74cVONHKSx2obXtuUoyidVEhISrisgQ=="
find_npm() {
    local root="$1" dir
    npm_cmd=(npm)
    command -v npm >/dev/null && return
    npm_cmd=()
    dir="$root/build/npm-$NPM_VERSION"
    if [[ ! -e "$dir/package/bin/npm-cli.js" ]]; then
        say "fetching npm $NPM_VERSION from the registry into ${dir#"$root"/}"
        python3 - "https://registry.npmjs.org/npm/-/npm-$NPM_VERSION.tgz" "$NPM_SHA512" \
            "$dir" <<'PY' || return 1
import base64, hashlib, io, os, shutil, sys, tarfile, urllib.request
url, sha512, dest = sys.argv[1:]
data = urllib.request.urlopen(url, timeout=120).read()
if base64.b64encode(hashlib.sha512(data).digest()).decode() != sha512:
    sys.exit(f"{url}: not the sha512 the registry published for it")
safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
shutil.rmtree(dest + ".tmp", ignore_errors=True)  # an earlier fetch cut short
tarfile.open(fileobj=io.BytesIO(data)).extractall(dest + ".tmp", **safe)
os.rename(dest + ".tmp", dest)
PY
    fi
    npm_cmd=(node "$dir/package/bin/npm-cli.js")
}

# npm_installs GROUP...: `npm ci` in each group's directory whose
# node_modules does not hold its lockfile's install yet (npm writes
# node_modules/.package-lock.json, newer than the lockfile, when it has).
# A registry that cannot be reached (no network, a certificate this machine
# does not trust) is said, not fatal: what the packages were for says it
# skipped (tests/checks/openapi-check), and everything else still installs.
npm_installs() {
    local g dir root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    for g in "$@"; do
        [[ "$g" == all ]] && { npm_installs $GROUPS_ALL; continue; }
        dir="$(group_npm_dir "$g")"
        [[ -n "$dir" ]] || continue
        dir="$root/$dir"
        [[ -e "$dir/node_modules/.package-lock.json" &&
            ! "$dir/node_modules/.package-lock.json" -ot "$dir/package-lock.json" ]] && continue
        say "npm ci in ${dir#"$root"/}"
        find_npm "$root" || true
        (( ${#npm_cmd[@]} )) && (cd "$dir" && "${npm_cmd[@]}" ci --no-audit --no-fund --loglevel=error) ||
            say "npm ci in ${dir#"$root"/} failed: the npm registry could not be reached"
    done
}

usage() {
    echo "usage: ${0##*/} GROUP...   (groups: $GROUPS_ALL all; --list shows the packages)" >&2
    exit 2
}

installed() {
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

has_candidate() {
    local c
    c="$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p')"
    [[ -n "$c" && "$c" != "(none)" ]]
}

[[ $# -gt 0 ]] || usage
if [[ "$1" == "--list" ]]; then
    for g in $GROUPS_ALL; do
        printf '%-9s %s\n' "$g" "$(group_packages "$g")"
    done
    exit 0
fi

wanted=()
for g in "$@"; do
    if [[ "$g" == all ]]; then
        for a in $GROUPS_ALL; do
            read -ra pk <<<"$(group_packages "$a")"
            wanted+=("${pk[@]}")
        done
        continue
    fi
    pkgs="$(group_packages "$g")" || { echo "${0##*/}: unknown group '$g'" >&2; usage; }
    read -ra pk <<<"$pkgs"
    wanted+=("${pk[@]}")
done

# Which entries are missing (an "a|b" entry is satisfied by any alternative).
missing=()
for entry in "${wanted[@]}"; do
    ok=0
    IFS='|' read -ra alts <<<"$entry"
    for p in "${alts[@]}"; do
        if installed "$p"; then ok=1; break; fi
    done
    if (( ! ok )); then
        dup=0
        for m in "${missing[@]+"${missing[@]}"}"; do [[ "$m" == "$entry" ]] && dup=1; done
        (( dup )) || missing+=("$entry")
    fi
done

(( ${#missing[@]} == 0 )) && { npm_installs "$@"; exit 0; }

if (( EUID != 0 )); then
    # Without root we cannot refresh the lists; name the first alternative.
    names=()
    for entry in "${missing[@]}"; do names+=("${entry%%|*}"); done
    echo "${0##*/}: missing packages: ${names[*]}" >&2
    echo "run:  sudo apt-get install -y --no-install-recommends ${names[*]}" >&2
    exit 1
fi

# Forbid service starts while apt runs, unless a policy already exists.
POLICY=/usr/sbin/policy-rc.d
if [[ ! -e "$POLICY" ]]; then
    cleanup_policy() { rm -f "$POLICY"; }
    trap cleanup_policy EXIT
    trap 'exit 130' INT TERM
    printf '#!/bin/sh\n# temporary: no service starts while stockd deps install\nexit 101\n' >"$POLICY"
    chmod 0755 "$POLICY"
fi

export DEBIAN_FRONTEND=noninteractive
# needrestart (when installed) must not restart services either.
export NEEDRESTART_SUSPEND=1 NEEDRESTART_MODE=l
say "installing: ${missing[*]}"
apt-get update -qq

names=()
for entry in "${missing[@]}"; do
    IFS='|' read -ra alts <<<"$entry"
    pick=""
    for p in "${alts[@]}"; do
        if has_candidate "$p"; then pick="$p"; break; fi
    done
    [[ -n "$pick" ]] || die "no installable package for '$entry' in the configured apt sources"
    names+=("$pick")
done

apt-get install -y -q --no-install-recommends "${names[@]}"

for p in "${names[@]}"; do
    installed "$p" || die "package $p is still not installed"
done
say "installed: ${names[*]}"
npm_installs "$@"
