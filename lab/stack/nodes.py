"""The namespace lab's nodes (partition, partition_sentinel, partition_galera): inside a
network namespace of its own (lab.nemesis.netns) every process listens on, and connects
from, its own 127.0.0.N, so that a cut between two addresses is a cut between two
machines. Here: the addresses, a stockd on its own address (Node), a redis-server on
its own address with its own clock (the clock shim reads its offset from a file at every
call, so a fault moves one server's clock and no other's), and the stack's MariaDB opened
to every 127.0.0.N."""

import os
import subprocess
import sys

from ..base.common import REPO, SetupError, write_text
from ..base.waiting import wait_until
from ..client.api import Api
from .instances import Instance
from .service import secret, stack_env, stack_script

ADDRESS = {"A": "127.0.0.2", "B": "127.0.0.3", "R0": "127.0.0.10", "R1": "127.0.0.11",
           "R2": "127.0.0.12", "R3": "127.0.0.13"}
REDIS_PORT = 6379
OFFSET_WIDTH = 31  # the clock file's text, written in place (lab/nemesis/clockshim.c)


def clockshim():
    """The clock shim's library (LD_PRELOAD), built by make build/clockshim.so."""
    path = os.path.join(REPO, "build", "clockshim.so")
    if not os.path.exists(path):
        raise SetupError(f"{path} is missing: make build/clockshim.so")
    return path


def set_clock_file(path, offset_ms):
    """The wall clock of a process started with CLOCKSHIM_FILE=path moved to now +
    offset_ms, at once (the file written in place, never truncated)."""
    mode = "r+" if os.path.exists(path) else "w"
    with open(path, mode) as f:
        f.write(f"{offset_ms:<{OFFSET_WIDTH}d}\n")


def redis_cli(host, *args, timeout=3):
    """One redis-cli command; its reply's lines, or None when nothing answered."""
    env = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
    try:
        r = subprocess.run(["redis-cli", "-h", host, "-p", str(REDIS_PORT), *map(str, args)],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return r.stdout.splitlines() if r.returncode == 0 else None


class RedisServer:
    """One redis-server of the run: its own address, its own clock, no persistence
    (a restart is a restart without its data)."""

    def __init__(self, name, work_dir, host=None, extra=(), conf=None):
        """`extra`: more redis-server options; `conf`: a config file's text to start
        from (a Sentinel's: it rewrites its file as the group changes)."""
        self.name, self.host, self.extra, self.conf = name, host or ADDRESS[name], extra, conf
        self.dir = os.path.join(work_dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.clock_file = os.path.join(self.dir, "clock-offset-ms")
        self.proc = None
        self.set_clock(0)

    def set_clock(self, offset_ms):
        """The server's wall clock moved to now + offset_ms, at once."""
        set_clock_file(self.clock_file, offset_ms)

    def start(self):
        env = {**os.environ, "LD_PRELOAD": clockshim(), "CLOCKSHIM_FILE": self.clock_file}
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        head = ["redis-server"]
        if self.conf is not None:
            head.append(os.path.join(self.dir, "redis.conf"))
            write_text(head[-1], self.conf)
        self.proc = subprocess.Popen(
            head + ["--bind", self.host, "--port", str(REDIS_PORT),
             "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", self.dir,
                    *self.extra],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()
        def up():
            if self.proc.poll() is not None:
                raise SetupError(f"redis {self.name} on {self.host} exited at its start "
                                 f"(its log: {self.dir}/redis.log)")
            return redis_cli(self.host, "ping", timeout=1) == ["PONG"]

        if not wait_until(10, up, 0.02):
            raise SetupError(f"redis {self.name} on {self.host} did not start "
                             f"(its log: {self.dir}/redis.log)")

    def kill(self):
        """kill -9: a crash; what it held is gone with it."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def expiring_keys(self):
        """How many keys with a TTL the server holds (INFO keyspace), None when it does
        not answer."""
        lines = redis_cli(self.host, "info", "keyspace", timeout=1)
        if lines is None:
            return None
        return sum(int(f.split("=")[1]) for line in lines if line.startswith("db")
                   for f in line.split(":", 1)[1].split(",") if f.startswith("expires="))

    def client_hosts(self):
        lines = redis_cli(self.host, "client", "list") or []
        return {w.split("=", 1)[1].rsplit(":", 1)[0] for line in lines for w in line.split()
                if w.startswith("addr=")}


class Node(Instance):
    """A stockd of the run: listening on its own address and connecting from it."""

    def __init__(self, name, port, env, options, out_dir, addr=None):
        addr = addr or ADDRESS[name]
        super().__init__(name, port, env, options + [f"--listen={addr}",
                                                     f"--bind-source={addr}"], out_dir)
        self.api = Api(addr, port)


def mysql_env():
    """The run's MariaDB: the stack's service `mysql` in run/partition, with the stockd
    user allowed from every 127.0.0.N (the stack grants it 127.0.0.1 only)."""
    if subprocess.run([stack_script(), "up"], stdout=sys.stderr, stderr=sys.stderr).returncode:
        raise SetupError("scripts/stack.sh up (mysql) failed")
    env = stack_env()
    pw = secret(env, "STOCKD_MYSQL_PASSWORD_FILE").replace("\\", "\\\\").replace("'", "\\'")
    grant = (f"CREATE USER IF NOT EXISTS 'stockd'@'127.0.0.%' IDENTIFIED BY '{pw}'; "
             "GRANT ALL PRIVILEGES ON stockd.* TO 'stockd'@'127.0.0.%';")
    if subprocess.run([stack_script(), "mysql", "--root", "-e", grant]).returncode:
        raise SetupError("granting the stockd user 127.0.0.% failed")
    return {k: v for k, v in env.items() if k.startswith("STOCKD_MYSQL_")}
