"""The raw limits of the backends, measured with their own tools and the same work
stockd gives them:

    Redis    redis-benchmark running the `lua` strategy's sale script by EVALSHA,
             with the keys and arguments stockd sends (stock:{P}, ledger:{P}, qty),
             one call at a time per connection or pipelined (-P) as stockd's loops
             pipeline a turn's sales
    MariaDB  sysbench running the `sql` strategy's transaction (bench/sale.lua):
             START TRANSACTION; SQL_DEDUCT_IF_ENOUGH; SQL_INSERT_ORDER; COMMIT

Both texts come from the C sources (lab.client.sources)."""

import csv
import io
import os
import re
import shutil
import subprocess

from ..base.common import REPO, SetupError
from ..stack.service import secret

SALE_LUA = os.path.join(REPO, "bench", "sale.lua")


class Measure:
    """Throughput and latencies of one raw run (milliseconds)."""

    def __init__(self, requests, rps, p50, p95, p99, top):
        self.requests, self.rps = requests, rps
        self.sent = requests      # requests sent to get this measure, probes included
        self.p50_ms, self.p95_ms, self.p99_ms, self.max_ms = p50, p95, p99, top


def tool(name, group="bench"):
    path = shutil.which(name)
    if not path:
        raise SetupError(f"{name} not found (scripts/deps.sh {group})")
    return path


def _run(cmd, timeout, log_path, env=None, hide=""):
    """Runs `cmd` (with `env`'s variables added), logs its command line (`hide`, a
    password, shown as ***) and output, and returns the output."""
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout,
                              env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{os.path.basename(cmd[0])} did not finish in {timeout}s") from None
    shown = " ".join(cmd)
    with open(log_path, "a") as f:
        f.write((shown.replace(hide, "***") if hide else shown) + "\n" + proc.stdout + "\n")
    if proc.returncode != 0 or "Error" in proc.stdout or "FATAL" in proc.stdout:
        last = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()][-1:] or ["no output"]
        raise SetupError(f"{os.path.basename(cmd[0])} failed (exit {proc.returncode}): "
                         f"{last[0].strip()[:200]}; see {log_path}")
    return proc.stdout


# ----------------------------------------------------------------------------- Redis
def parse_redis_csv(text):
    """A Measure from `redis-benchmark --csv` (7.x: rps and latency columns)."""
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r.get("rps")]
    if not rows:
        return None
    r = rows[-1]
    return Measure(None, float(r["rps"]), float(r["p50_latency_ms"]), float(r["p95_latency_ms"]),
                   float(r["p99_latency_ms"]), float(r["max_latency_ms"]))


def redis_evalsha(port, sha, keys, args, conns, n, log_path, pipeline=1):
    """n EVALSHA calls of `sha` over `conns` connections, `pipeline` calls in flight
    on each (redis-benchmark -P: one write of that many calls, then their replies).
    redis-benchmark takes a password only by -a, on its command line (it reads no
    REDISCLI_AUTH): the stack's is there for the run's seconds, and out of the log."""
    password = os.environ.get("REDISCLI_AUTH", "")
    auth = ["-a", password] if password else []
    cmd = [tool("redis-benchmark"), "-h", "127.0.0.1", "-p", str(port)] + auth + \
        ["-c", str(conns), "-n", str(n), "-P", str(pipeline), "--threads", str(min(2, conns)),
         "--csv", "EVALSHA", sha, str(len(keys))] + list(keys) + [str(a) for a in args]
    m = parse_redis_csv(_run(cmd, 120, log_path, hide=password))
    if m is None:
        raise SetupError(f"redis-benchmark gave no result; see {log_path}")
    m.requests = n
    return m


def redis_for(seconds, port, sha, keys, args, conns, log_path, pipeline=1):
    """EVALSHA for about `seconds`: redis-benchmark counts requests, not time, and
    its short runs are slow to start, so runs grow until one lasts 80% of `seconds`;
    that one is the measure (its .sent counts every run). A pipelined client takes its
    requests `pipeline` at a time, so n is kept a multiple of it: then it sends n."""
    n, sent = max(2000, 50 * conns), 0
    while True:
        n = -(-n // pipeline) * pipeline
        m = redis_evalsha(port, sha, keys, args, conns, n, log_path, pipeline)
        sent += n
        took = n / m.rps
        if took >= 0.8 * seconds or n >= 10 ** 7:
            m.sent = sent
            return m
        n = int(n * min(8.0, max(1.2, 1.1 * seconds / took)))


def redis_call(port, *words):
    """One redis-cli command's reply text."""
    cmd = [tool("redis-cli", "bench"), "-h", "127.0.0.1", "-p", str(port)] + list(words)
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=10)
    return proc.stdout.strip()


def script_loaded(port, sha):
    """Whether Redis has a script of this SHA1 (SCRIPT EXISTS)."""
    return redis_call(port, "SCRIPT", "EXISTS", sha).split() == ["1"]


# --------------------------------------------------------------------------- MariaDB
_HIST = re.compile(r"^\s*([0-9.]+)\s*\|\**\s+(\d+)\s*$")


def histogram_percentiles(text, ps):
    """Nearest-rank percentiles (ms) from sysbench's --histogram lines."""
    buckets = [(float(m.group(1)), int(m.group(2)))
               for m in (_HIST.match(ln) for ln in text.splitlines()) if m]
    total = sum(n for _, n in buckets)
    out = {}
    for p in ps:
        rank, seen = max(1, -(-p * total // 100)), 0
        out[p] = None
        for value, n in buckets:
            seen += n
            if seen >= rank:
                out[p] = value
                break
    return out


def parse_sysbench(text):
    """A Measure from sysbench's report (transactions, rate, histogram, max)."""
    tx = re.search(r"transactions:\s+(\d+)\s+\(([0-9.]+) per sec", text)
    top = re.search(r"max:\s+([0-9.]+)", text)
    if not tx:
        return None
    pct = histogram_percentiles(text, (50, 95, 99))
    return Measure(int(tx.group(1)), float(tx.group(2)), pct[50], pct[95], pct[99],
                   float(top.group(1)) if top else None)


def mariadb_sale(db, deduct_sql, insert_sql, product, strategy, conns, seconds, log_path):
    """The sale transaction at `conns` threads for `seconds`. `db`: the stack's
    STOCKD_MYSQL_* settings. The password reaches sysbench as MYSQL_PWD, which its
    MariaDB client library reads when no --mysql-password is given: not on the
    command line, which every local user can read in ps."""
    cmd = [tool("sysbench"), SALE_LUA, f"--deduct-sql={deduct_sql}", f"--insert-sql={insert_sql}",
           f"--product={product}", "--qty=1", f"--strategy={strategy}", "--db-driver=mysql",
           f"--mysql-host={db['STOCKD_MYSQL_HOST']}", f"--mysql-port={db['STOCKD_MYSQL_PORT']}",
           f"--mysql-user={db['STOCKD_MYSQL_USER']}",
           f"--mysql-db={db['STOCKD_MYSQL_DB']}", f"--threads={conns}", f"--time={seconds}",
           "--histogram=on", "run"]
    m = parse_sysbench(_run(cmd, 60 + 3 * seconds, log_path,
                            env={"MYSQL_PWD": secret(db, "STOCKD_MYSQL_PASSWORD_FILE")}))
    if m is None:
        raise SetupError(f"sysbench gave no result; see {log_path}")
    return m
