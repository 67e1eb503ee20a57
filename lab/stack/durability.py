"""How durable the stack's two stores are, switched while they run, and what that
costs the disk: the bench's durable rows and its hot row.

    fast       the private stack as scripts/stack.sh starts it: MariaDB writes each
               commit's redo log and flushes it about once a second
               (innodb_flush_log_at_trx_commit=2), Redis appends every write to its
               AOF and leaves the flush to the kernel (appendfsync no). A crash of the
               machine may lose the last second of sales.
    everysec   MariaDB flushes every commit; Redis flushes its AOF once a second
               (appendfsync everysec): Redis's own default, a second at risk.
    durable    MariaDB flushes every commit (innodb_flush_log_at_trx_commit=1), Redis
               every write before it answers (appendfsync always): what a shop that
               must not lose a sale runs.

Both settings are dynamic, so a run switches them without a restart: SET GLOBAL as
MariaDB's administrator (scripts/stack.sh mysql --root, by the unix socket) and
CONFIG SET on Redis; mode() puts back what it found.

A sale is only as durable as the flush that covers it, so the rows count the flushes:
MariaDB counts its own (Innodb_data_fsyncs in SHOW GLOBAL STATUS: 10.11 counts the redo
log's flushes there too, one per flushed commit group); Redis does not, so perf counts the fsync and fdatasync system calls of its
process (the syscalls tracepoints), and the count is None where perf cannot run. The
disk's own rate: 4 KiB appended then fdatasync(), in a loop, as an AOF is written."""

import contextlib
import os
import shutil
import signal
import subprocess
import time

from ..base.common import SetupError
from .service import run_dir, stack_env, stack_script

# mode -> (innodb_flush_log_at_trx_commit, appendfsync)
MODES = {"fast": (2, "no"), "everysec": (1, "everysec"), "durable": (1, "always")}
# The MariaDB counters a row reads before and after its load.
MYSQL_COUNTERS = ("Innodb_data_fsyncs", "Innodb_row_lock_waits", "Innodb_row_lock_time")


def mysql_root(sql):
    """One statement as MariaDB's administrator; its rows, tab-separated lines."""
    r = subprocess.run([stack_script(), "mysql", "--root", "-N", "-B", "-e", sql],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    if r.returncode != 0:
        raise SetupError(f"MariaDB as its administrator refused {sql!r}: {r.stderr.strip()}")
    return r.stdout.splitlines()


def redis_cli(*words):
    """One command to the stack's Redis (its password is in REDISCLI_AUTH: stack_env)."""
    port = stack_env()["STOCKD_REDIS_PORT"]
    r = subprocess.run(["redis-cli", "-p", port, *words], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    if r.returncode != 0 or r.stdout.startswith("ERR"):
        raise SetupError(f"redis-cli {' '.join(words)}: {(r.stdout + r.stderr).strip()}")
    return r.stdout.splitlines()


def current():
    """(innodb_flush_log_at_trx_commit, appendfsync) as the stores run now."""
    flush = mysql_root("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")[0]
    fsync = redis_cli("CONFIG", "GET", "appendfsync")[1]
    return int(flush), fsync


def apply(flush, fsync):
    mysql_root(f"SET GLOBAL innodb_flush_log_at_trx_commit = {int(flush)}")
    if redis_cli("CONFIG", "GET", "appendonly")[1] != "yes":
        raise SetupError("the stack's Redis keeps no AOF (appendonly no): appendfsync "
                         "would change nothing")
    redis_cli("CONFIG", "SET", "appendfsync", fsync)


@contextlib.contextmanager
def mode(name):
    """The stores in mode `name` (MODES) for the time of a with, then as they were."""
    found = current()
    apply(*MODES[name])
    try:
        yield
    finally:
        apply(*found)


def mysql_counters():
    rows = mysql_root("SHOW GLOBAL STATUS WHERE Variable_name IN ("
                      + ", ".join(f"'{c}'" for c in MYSQL_COUNTERS) + ")")
    return {k: int(v) for k, v in (row.split("\t") for row in rows)}


def redis_pid():
    for line in redis_cli("INFO", "server"):
        if line.startswith("process_id:"):
            return int(line.split(":")[1])
    raise SetupError("redis INFO server names no process_id")


class Flushes:
    """The flushes a store makes while a with runs: start() before a load, stop()
    after; then .fsyncs (None when they could not be counted) and, for MariaDB,
    .row_lock_waits and .row_lock_ms."""

    def __init__(self, store, log_path):
        self.store, self.log_path = store, log_path
        self.fsyncs = self.row_lock_waits = self.row_lock_ms = None
        self.before, self.perf, self.out = None, None, None

    def start(self):
        if self.store == "mysql":
            self.before = mysql_counters()
            return
        perf = shutil.which("perf")
        if not perf:
            return
        self.out = os.path.join(run_dir(), "bench-perf.csv")
        events = "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync"
        with open(self.log_path, "a") as log:
            self.perf = subprocess.Popen([perf, "stat", "-x", ",", "-o", self.out, "-e", events,
                                          "-p", str(redis_pid())], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log)
        time.sleep(0.3)  # perf attaches before the load begins

    def stop(self):
        if self.store == "mysql":
            after = mysql_counters()
            d = {k: after[k] - self.before[k] for k in MYSQL_COUNTERS}
            self.fsyncs = d["Innodb_data_fsyncs"]
            self.row_lock_waits, self.row_lock_ms = d["Innodb_row_lock_waits"], \
                d["Innodb_row_lock_time"]
            return self
        if self.perf is None:
            return self
        self.perf.send_signal(signal.SIGINT)
        try:
            self.perf.wait(30)
        except subprocess.TimeoutExpired:
            self.perf.kill()
            self.perf.wait()
            return self
        self.fsyncs = perf_count(self.out)  # perf exits 130 on SIGINT, its counts written
        return self


def perf_count(path):
    """The sum of the counts of `perf stat -x ,`'s output; None when it has none."""
    try:
        with open(path) as f:
            counts = [line.split(",")[0] for line in f if line.strip() and line[0].isdigit()]
    except OSError:
        return None
    return sum(int(c) for c in counts) if counts else None


def disk_fsync_rate(seconds):
    """This disk's fdatasync() per second, each after a 4 KiB append, in the run
    directory (the stores' disk), for `seconds`; and the count."""
    path = os.path.join(run_dir(), "bench-fsync.tmp")
    block, n = b"\0" * 4096, 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            os.write(fd, block)
            os.fdatasync(fd)
            n += 1
        elapsed = time.monotonic() - started
    finally:
        os.close(fd)
        os.remove(path)
    return round(n / elapsed, 1), n
