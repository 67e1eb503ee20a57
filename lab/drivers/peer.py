"""The bench's peer (bench/peer/): the same `lua` and `sql` sales and GET /strategies
served by Node.js with fastify, ioredis and mysql2, as a team that does not write C
would build them. This module installs it (`npm ci` from its lockfile), starts it on
the bench's stack with the texts stockd runs (the sale script and the two statements
read from server/*.c by lab.client.sources, the exact bytes of stockd's GET /strategies), and
stops it.

The peer is optional: without node or npm, with a Node.js older than the framework
needs, or when `npm ci` fails, Peer.start() raises PeerMissing with the line the bench
prints before it skips the peer rows; the rest of the run goes on."""

import json
import os
import re
import shutil
import subprocess
import time

from ..base.common import REPO
from ..client import sources
from ..stack.service import stop_process

PEER_DIR = os.path.join(REPO, "bench", "peer")
NODE_MAJOR = 20  # fastify 5's oldest supported Node.js


PACKAGES = ("fastify", "ioredis", "mysql2")


def describe():
    """Node.js's version and the pinned versions of the peer's packages, in words."""
    node = shutil.which("node")
    words = [f"Node.js {node_version(node)}" if node else "no Node.js"]
    try:
        with open(os.path.join(PEER_DIR, "package-lock.json")) as f:
            pinned = json.load(f).get("packages", {})
    except (OSError, ValueError):
        pinned = {}
    words += [f"{p} {pinned.get('node_modules/' + p, {}).get('version', '?')}" for p in PACKAGES]
    return ", ".join(words)


def stockd_texts(connections, workers):
    """What the peer is started with: the names of the `lua` and `sql` strategies and
    the texts they run (the sale script, the statements), each read from the C file
    stockd is built from, so that the peer can run nothing else; its MySQL pool's
    `connections` and its processes, `workers`. SetupError when a text is gone."""
    sql_strategy = sources.strategy_name(sources.SQL_STRATEGY_FILE)
    return {"lua_name": sources.strategy_name(sources.LUA_FILE),
            "sql_name": sql_strategy,
            "script": sources.redis_script(sources.SALE_SCRIPT_FILE, sources.SALE_SCRIPT),
            "deduct": sources.sql_statement(sources.SQL_FILE, "SQL_DEDUCT_IF_ENOUGH"),
            "insert": sources.sql_statement(sources.SQL_FILE, "SQL_INSERT_ORDER"),
            "read": sources.sql_statement(sources.SQL_FILE, "SQL_READ_STOCK"),
            "strategy": "peer-" + sql_strategy,
            "connections": connections,
            "workers": workers}


class PeerMissing(Exception):
    """The peer cannot run here; the message says why and what to do."""


def node_version(node):
    """`node --version`'s answer, e.g. v20.19.2."""
    return subprocess.run([node, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=30).stdout.strip()


def node_major(node):
    m = re.match(r"v(\d+)\.", node_version(node))
    return int(m.group(1)) if m else 0


def install(log_path):
    """`npm ci` in bench/peer unless its node_modules already holds this lockfile's
    install (npm writes node_modules/.package-lock.json); returns the node binary."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        raise PeerMissing(f"node or npm not found: the peer needs Node.js {NODE_MAJOR} or newer "
                          "with npm (Debian 13's nodejs and npm; Debian 12's nodejs is 18, too "
                          "old: bench/README.md)")
    major = node_major(node)
    if major < NODE_MAJOR:
        raise PeerMissing(f"Node.js {major or '?'} is older than the peer's fastify needs "
                          f"({NODE_MAJOR} or newer: bench/README.md)")
    lock = os.path.join(PEER_DIR, "package-lock.json")
    installed = os.path.join(PEER_DIR, "node_modules", ".package-lock.json")
    if os.path.exists(installed) and os.path.getmtime(installed) >= os.path.getmtime(lock):
        return node
    with open(log_path, "a") as log:
        try:
            proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PEER_DIR,
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=600)
        except subprocess.TimeoutExpired:
            raise PeerMissing("npm ci in bench/peer took more than 10 minutes") from None
    if proc.returncode != 0:
        raise PeerMissing(f"npm ci in bench/peer failed (exit {proc.returncode}); "
                          f"see {log_path}")
    return node


class Peer:
    """The peer on 127.0.0.1:port. `db`: the stack's STOCKD_* settings; `texts`: the
    two strategies' names, the sale script, the three statements, the ledger rows'
    strategy, the MySQL connections and the processes; `static`: GET
    /strategies' bytes, written to static_path."""

    def __init__(self, port, db, texts, static, static_path, log_path):
        self.port, self.db, self.texts = port, db, texts
        self.static, self.static_path, self.log_path = static, static_path, log_path
        self.proc = None

    def env(self):
        d, t = self.db, self.texts
        env = dict(os.environ)
        env.update(PEER_HOST="127.0.0.1", PEER_PORT=str(self.port),
                   PEER_REDIS_HOST=d["STOCKD_REDIS_HOST"], PEER_REDIS_PORT=d["STOCKD_REDIS_PORT"],
                   PEER_MYSQL_HOST=d["STOCKD_MYSQL_HOST"], PEER_MYSQL_PORT=d["STOCKD_MYSQL_PORT"],
                   PEER_MYSQL_USER=d["STOCKD_MYSQL_USER"],
                   PEER_MYSQL_PASSWORD_FILE=d["STOCKD_MYSQL_PASSWORD_FILE"],
                   PEER_REDIS_PASSWORD_FILE=d["STOCKD_REDIS_PASSWORD_FILE"],
                   PEER_MYSQL_DB=d["STOCKD_MYSQL_DB"],
                   PEER_MYSQL_CONNECTIONS=str(t["connections"]), PEER_WORKERS=str(t["workers"]),
                   PEER_LUA_NAME=t["lua_name"], PEER_SQL_NAME=t["sql_name"],
                   PEER_SALE_SCRIPT=t["script"], PEER_DEDUCT_SQL=t["deduct"],
                   PEER_INSERT_SQL=t["insert"], PEER_READ_SQL=t["read"],
                   PEER_SQL_STRATEGY=t["strategy"],
                   PEER_STATIC_FILE=self.static_path, NODE_ENV="production")
        return env

    def start(self, probe):
        """Install, start, and wait until `probe` (an Api on the peer's port) gets
        GET /strategies' exact bytes. PeerMissing when it cannot run here."""
        node = install(self.log_path)
        if probe.answers():
            raise PeerMissing(f"port {self.port} is taken (--peer-port / BENCH_PEER_PORT)")
        os.makedirs(os.path.dirname(self.static_path), exist_ok=True)
        with open(self.static_path, "wb") as f:
            f.write(self.static)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([node, os.path.join(PEER_DIR, "server.js")],
                                         cwd=PEER_DIR, env=self.env(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            try:
                r = probe.call("GET", "/strategies", timeout=2)
                if r.status == 200 and r.raw == self.static:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise PeerMissing(f"the peer did not serve GET /strategies on port {self.port}; "
                          f"see {self.log_path}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            stop_process(self.proc)
        self.proc = None
