"""The order stream of the row that settles later (GET /strategies: settles "async"),
proved and measured: every 200 a client saw reaches MySQL exactly once, through faults
(`make stream-chaos`, part of `make chaos`), and what the design costs
(`make stream-bench`).

    python3 -m lab stream reconcile --product P --orders FILE
        waits for the stream to drain, then checks order id by order id that every id
        in FILE (one per line: the `order` of each 200 a client saw) is in MySQL once
        and that MySQL has no other lua-stream order of P. Prints missing, duplicated
        and extra; exit 1 on any drift. Nothing is repaired.
    python3 -m lab stream chaos [--rows a,b]
        each row drives lua-stream with keep-alive clients that keep every 200's order
        id, injects its fault, drains and reconciles:
          none              no fault (the baseline)
          kill-before-commit  the consumer process, held by --stream-hold commit with
                            a batch in its open transaction, killed -9
          kill-before-ack   the same, held after its COMMIT and before its XACK
          mysql-down        MariaDB stopped for --hold seconds: sales go on being
                            accepted, the stream grows, and drains after
          redis-kill        Redis killed -9 and restarted: what the stack's persistence
                            (appendonly, appendfsync: stated in the row) loses
        A row passes with 0 missing, 0 duplicated and no extra order beyond the
        answers whose outcome the client could not know.
        --retrying-buyers N (STREAM_RETRYING_BUYERS; lab.scaffold.retrying_mode):
        each row also runs, from before its fault until after it, N buyers who
        retry every lost answer with an Idempotency-Key and N who retry without
        one, on --product + 1 and + 2; their ledgers are read in MySQL once the
        stream has drained (what the row settles into), and the row gains their
        double buys (a double buy with keys fails the row).
    python3 -m lab stream bench
        accepted sales/s of the stream row beside the two it is measured against, the
        sql batch and the lua script (their names read from their C files), in one run
        (wrk); the stream row and lua alternated --pairs times, their ratio the median
        of the pairs'; the drain rate of a consumer (orders/s, its batch size) over the
        stream those pairs filled while no consumer ran, and the lag under a load
        above that rate.

chaos and bench start their own stockd (with no consumer inside: the consumers are
`stockd --consume 1` processes they start and kill) on --port, and the stack when it is
down; reconcile asks the stockd that answers at --port (whose consumers drain the
stream), or starts one and a consumer when none does. Results go to results/stream-<timestamp>/stream.json."""

import json
import os
import subprocess
import sys
import threading
import time
import http.client
from statistics import median

from ..base.common import SetupError, comma_list, now_iso, write_text
from ..client import facts as facts_mod, sources
from ..client.sales import deduct_path
from ..stack.consumer import Consumer
from ..stack.service import stack_env, stack_script
from ..drivers import wrk
from ..judges.settlement import SETTLED_IN, reconcile, stream_figures, wait_drained
from ..scaffold.retrying_mode import RetryingClients, claims_of, folded, retrying_options
from ..scaffold.runner import Runner

# The strategies the stream row is measured against: the same script without the
# stream, and MySQL's group commit (the drain's yardstick).
LUA_RIVAL = os.path.join(sources.STRATEGIES, "lua.c")
SQL_RIVAL = os.path.join(sources.STRATEGIES, "sql_batch.c")
PRODUCT = 9801
STOCK = 1_000_000_000
# A bench leaves hundreds of thousands of orders, which a reset deletes: about 10 s a
# million here. The bench's stockd waits for MySQL that long (--io-timeout-ms), and the
# bench deletes its orders when it ends, so that the next run starts from none.
RESET_TIMEOUT_S = 60
BENCH_TIMEOUTS = ["--io-timeout-ms", "60000", "--request-timeout-ms", "60000"]
CHAOS_TIMEOUTS = ["--io-timeout-ms", "2000", "--request-timeout-ms", "5000"]
ROWS = ("none", "kill-before-commit", "kill-before-ack", "mysql-down", "redis-kill")
HOLD_LINES = {"commit": "before commit", "ack": "committed, before ack"}


def options(o):
    o.add("--product", ["STREAM_PRODUCT"], PRODUCT, int, "the product sold", 1)
    o.add("--orders", ["STREAM_ORDERS"], "", str, "reconcile: the file of order ids")
    o.add("--rows", ["STREAM_ROWS"], "", str, "chaos: comma list of " + ", ".join(ROWS))
    o.add("--clients", ["STREAM_CLIENTS"], 4, int, "chaos: keep-alive clients", 1)
    o.add("--hold", ["STREAM_HOLD_S"], 4.0, float, "chaos: seconds a fault lasts", 0.5)
    o.add("--seconds", ["STREAM_SECONDS"], 10, int, "bench: seconds per measurement", 1)
    o.add("--conns", ["STREAM_CONNS"], 32, int, "bench: wrk connections", 1)
    o.add("--pairs", ["STREAM_PAIRS"], 5, int,
          "bench: alternating measures of the stream row and the lua script", 1)
    o.add("--pair-seconds", ["STREAM_PAIR_SECONDS"], 4, int, "bench: seconds per paired measure",
          1)
    o.add("--batch", ["STREAM_BATCH"], 256, int, "the consumers' --stream-batch", 1)
    retrying_options(o, "STREAM_RETRYING_", attempts=16)  # past Redis's restart


# ------------------------------------------------------------------ the stores


def mysql_orders(product, strategy):
    """{order id: rows} of the product's orders of `strategy` in MySQL."""
    sql = (f"SELECT order_id, COUNT(*) FROM orders WHERE product_id = {int(product)} "
           f"AND strategy = '{strategy}' GROUP BY order_id")
    out = subprocess.run([stack_script(), "mysql", "-N", "-e", sql], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    if out.returncode != 0:
        raise SetupError(f"reading MySQL's orders failed: {out.stderr.strip()[:200]}")
    rows = {}
    for line in out.stdout.splitlines():
        order, n = line.split("\t")
        rows[order] = int(n)
    return rows


def stack(*words):
    r = subprocess.run([stack_script()] + list(words), stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise SetupError(f"scripts/stack.sh {' '.join(words)} failed")


class Clients:
    """Keep-alive clients selling one unit each, back to back, keeping every 200's
    order id."""

    def __init__(self, api, product, n, strategy):
        self.api, self.product, self.n, self.strategy = api, product, n, strategy
        self.stop_flag = threading.Event()
        self.ok_ids, self.unknown, self.other = [], 0, {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client, daemon=True) for _ in range(n)]

    def start(self):
        for t in self.threads:
            t.start()

    def client(self):
        conn, path = None, deduct_path(self.strategy, self.product)
        while not self.stop_flag.is_set():
            try:
                conn = conn or http.client.HTTPConnection(self.api.host, self.api.port, timeout=10)
                conn.request("POST", path, headers={"Content-Length": "0"})
                resp = conn.getresponse()
                body = json.loads(resp.read() or b"{}")
                if not self.count(resp.status, body):
                    time.sleep(0.01)  # a refusal: no busy loop while a backend is gone
            except (OSError, http.client.HTTPException, ValueError):
                conn = None
                with self.lock:  # no answer: the sale may have happened
                    self.unknown += 1
                time.sleep(0.05)

    def count(self, status, body):
        """Keeps one answer; whether it was a 200."""
        with self.lock:
            if status == 200:
                self.ok_ids.append(body["order"])
            elif body.get("error") == "outcome_unknown":
                self.unknown += 1
            else:
                key = f"{status} {body.get('error', '')}"
                self.other[key] = self.other.get(key, 0) + 1
        return status == 200

    def finish(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(15)


# ---------------------------------------------------------------------- chaos


def redis_cli(env, *words):
    port = env.get("STOCKD_REDIS_PORT", "6379")
    return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", port] + list(words),
                          stdout=subprocess.PIPE, universal_newlines=True).stdout.split()


def stream_length(env):
    out = redis_cli(env, "XLEN", "orders:stream")
    return int(out[0]) if out else None


def redis_persistence(env):
    """The main Redis's appendonly and appendfsync settings, as it says them."""
    got = {}
    for key in ("appendonly", "appendfsync"):
        out = redis_cli(env, "CONFIG", "GET", key)
        got[key] = out[1] if len(out) == 2 else "?"
    return got


def chaos_row(name, args, api, say, env, retrying, out_dir):
    """Runs one row: load (and the retrying buyers, when asked for), its fault, the
    drain, the reconciliation."""
    api.must_reset(args.product, STOCK, RESET_TIMEOUT_S)
    clients = Clients(api, args.product, args.clients, args.strategy)
    row = {"row": name}
    consumer = None if name.startswith("kill-") else Consumer(say, args.batch)
    retrying.start(api.host, api.port, api, args.strategy, SETTLED_IN, args.product + 1,
                   settles=True)
    clients.start()
    time.sleep(1.0)
    if name.startswith("kill-"):
        hold = name.split("-")[-1]
        held = Consumer(say, args.batch, hold)
        line = held.wait_line(HOLD_LINES[hold])
        row["killed_batch"] = int(line.split("holding ")[1].split()[0])
        held.kill()
        say(f"{name}: consumer killed -9 holding a batch {HOLD_LINES[hold]}")
        consumer = Consumer(say, args.batch)
    elif name == "mysql-down":
        stack("stop-one", "mysql")
        before = len(clients.ok_ids)
        time.sleep(args.hold)
        row["accepted_while_down"] = len(clients.ok_ids) - before
        row["stream_length_at_return"] = stream_length(env)  # /stock needs MySQL
        stack("start-one", "mysql")
    elif name == "redis-kill":
        row.update(redis_persistence(env))
        stack("kill-one", "redis")
        stack("start-one", "redis")
    time.sleep(1.0)
    clients.finish()
    stopped = time.monotonic()
    row.update(retrying.finish(api, out_dir, name))  # its purchases drained too
    wait_drained(api, args.product)
    row["drain_s"] = round(time.monotonic() - stopped, 2)
    consumer.stop()
    row.update(reconcile(clients.ok_ids, clients.unknown, mysql_orders(args.product, args.strategy)))
    row["verdict"], _ = folded(row["verdict"], "", row)
    row["other_answers"] = clients.other
    say(f"{name}: {row['accepted']} accepted, {row['in_mysql']} in MySQL: missing "
        f"{row['missing']}, duplicated {row['duplicated']}, extra {row['extra']} "
        f"(unknown {row['unknown']}) - {row['verdict'].upper()}")
    if retrying.on:
        say(f"{name}: retrying buyers' double buys {row['double_buys_keys']} with keys, "
            f"{row['double_buys_nokeys']} without - {row['retry_verdict'].upper()}"
            + (f" ({row['retry_reason']})" if row["retry_reason"] else ""))
    return row


def chaos_rows(name, args, api, say, env, out_dir):
    """One chaos row with the run's retrying buyers (none unless asked for)."""
    retrying = RetryingClients(args, claims_of(api.strategies().body))
    try:
        return chaos_row(name, args, api, say, env, retrying, out_dir)
    finally:
        retrying.stop()


# ---------------------------------------------------------------------- bench


def accepted(args, api, strategy, seconds, log):
    """(sales/s accepted, p99 ms) of `strategy` under wrk for `seconds`."""
    r = wrk.run(f"http://{api.where()}{deduct_path(strategy, args.product)}", args.conns, seconds,
                log, counting=True)
    return round(r.outcomes["sold"] / seconds, 1), r.p99_ms


def bench(args, api, say, out_dir):
    log = os.path.join(out_dir, "wrk.log")
    res = {"batch": args.batch, "conns": args.conns, "seconds": args.seconds}
    sql, lua = sources.strategy_name(SQL_RIVAL), sources.strategy_name(LUA_RIVAL)
    api.must_reset(args.product, STOCK, RESET_TIMEOUT_S)
    rate, p99 = accepted(args, api, sql, args.seconds, log)
    res[sql] = {"accepted_per_s": rate, "p99_ms": p99}
    say(f"{sql}: {rate} sales/s accepted (p99 {p99} ms)")
    # The stream row against the same script without its XADD: alternating pairs,
    # since two measures seconds apart share the host's noise. One reset for all of
    # them, so that every order in the stream afterwards is of the current epoch.
    api.must_reset(args.product, STOCK, RESET_TIMEOUT_S)
    runs = {lua: [], args.strategy: []}
    for _ in range(args.pairs):
        for strategy in runs:
            runs[strategy].append(accepted(args, api, strategy, args.pair_seconds, log))
    for strategy, measures in runs.items():
        res[strategy] = {"accepted_per_s": median(r for r, _ in measures),
                         "p99_ms": median(p for _, p in measures),
                         "runs": [r for r, _ in measures]}
        say(f"{strategy}: {res[strategy]['accepted_per_s']} sales/s accepted "
            f"(median of {len(measures)} runs of {args.pair_seconds} s: {res[strategy]['runs']})")
    ratios = [round(s / b, 3) if b else 0.0 for (b, _), (s, _) in zip(*runs.values())]
    res["pairs"] = {"subject": args.strategy, "base": lua, "ratios": ratios,
                    "median": median(ratios)}
    say(f"{args.strategy} / {lua}: {res['pairs']['median']} (pairs {ratios})")
    # What sat in the stream (no consumer ran): the drain rate of one consumer.
    s, _ = stream_figures(api, args.product)
    backlog = s["length"]
    consumer = Consumer(say, args.batch)
    drain = wait_drained(api, args.product, 600)
    consumer.stop()
    res["drain"] = {"orders": backlog, "seconds": round(drain, 2),
                    "orders_per_s": round(backlog / drain, 1) if drain else None}
    say(f"drain: {backlog} orders in {drain:.1f}s = {res['drain']['orders_per_s']} orders/s, "
        f"batches of at most {args.batch}")
    # The lag while a consumer runs under the full accepted rate.
    api.must_reset(args.product, STOCK, RESET_TIMEOUT_S)
    consumer = Consumer(say, args.batch)
    lags, done = [], threading.Event()

    def sample():
        while not done.is_set():
            f, _ = stream_figures(api, args.product)
            if f:
                lags.append((f["length"], f["lag_ms"]))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rate, _ = accepted(args, api, args.strategy, args.seconds, log)
    done.set()
    sampler.join()
    after = wait_drained(api, args.product, 600)
    consumer.stop()
    res["under_load"] = {"accepted_per_s": rate,
                         "max_length": max((n for n, _ in lags), default=0),
                         "max_lag_ms": max((ms for _, ms in lags), default=0),
                         "drained_after_s": round(after, 2)}
    say(f"under load: {res['under_load']}")
    api.must_reset(args.product, STOCK, RESET_TIMEOUT_S)  # its orders deleted
    return res


# ----------------------------------------------------------------------- main


def work(run):
    args, api, say, command = run.args, run.api, run.say, run.args.command
    streamed = [s for s in facts_mod.parse(api.strategies().body).strategies if s.settles]
    if not streamed:
        raise SetupError("GET /strategies has no row that settles later")
    args.strategy = streamed[0].name
    out_dir = run.out_dir()
    doc = {"command": command, "started": now_iso()}
    if command == "reconcile":
        with open(args.orders) as f:
            ids = [ln.strip() for ln in f if ln.strip()]
        consumer = Consumer(say, args.batch) if run.service.started else None
        wait_drained(api, args.product)
        if consumer:
            consumer.stop()
        doc["rows"] = [reconcile(ids, 0, mysql_orders(args.product, args.strategy))]
    elif command == "chaos":
        env = stack_env()
        names = comma_list(args.rows) or list(ROWS)
        doc["rows"] = [chaos_rows(n, args, api, say, env, out_dir) for n in names]
    else:
        doc["bench"] = bench(args, api, say, out_dir)
        doc["rows"] = []
    doc["finished"] = now_iso()
    write_text(os.path.join(out_dir, "stream.json"), json.dumps(doc, indent=1) + "\n")
    say(f"results in {out_dir}")
    return doc


def report(run, doc):
    print(json.dumps(doc.get("bench") or doc["rows"], indent=1))
    return 1 if any(r["verdict"] != "pass" for r in doc["rows"]) else 0


# chaos and bench start their own stockd, with no consumer inside; reconcile asks the
# stockd that answers at --port, if one does.
RUNNER = Runner("stream", __doc__, options=options, work=work, report=report,
                commands=("reconcile", "chaos", "bench"), host="stockd's address",
                port="the port of the stockd this run starts",
                where=(["STREAM_HOST"], ["STREAM_PORT"], 23089), results="stream-", instances=1,
                stockd=lambda args: ["--stream-consumers", "0"] + (
                    BENCH_TIMEOUTS if args.command == "bench" else CHAOS_TIMEOUTS),
                own_port=lambda args: (args.command != "reconcile"
                                       and "this run starts its own stockd there"))
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
