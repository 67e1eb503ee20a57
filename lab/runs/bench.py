"""What each strategy costs: every strategy driven by wrk (keep-alive) at several
concurrencies against a stock that never sells out, next to the raw limits of the
same run:

    http      a private nginx serving the exact bytes of GET /strategies as a static
              file, and stockd's own GET /strategies (no backend)
    redis     redis-benchmark running the `lua` strategy's sale script by EVALSHA,
              and (after the `lua` rows) pipelined by as many calls per write as
              stockd's loops sent at that concurrency (`lua`'s mean batch)
    mariadb   sysbench running the `sql` strategy's sale transaction

And the peer (bench/peer/, lab/drivers/peer.py): the `lua` and `sql` sales and GET
/strategies served by Node.js (fastify, ioredis, mysql2) on the same stack, with the
same script and statements, at every concurrency; its sales are checked by the same
accounting as a safe strategy's. Without node or npm the peer rows are skipped, with
a line that says why. The OpenResty peer (bench/openresty/, lab/drivers/openresty.py),
nginx with its Lua module and lua-resty-redis from Debian's packages, serves the `lua`
sale and GET /strategies the same way, and is skipped the same way without them.

Then the headline ratios once more, at one concurrency (64, or the highest below
it), each subject alternated with its limit --pairs times: stockd's GET /strategies
with nginx, the `lua` strategy with EVALSHA unpipelined and pipelined, the `sql`
strategy with the sale transaction, each of the three with the peer's, and `lua`
with trace=1 on every sale against `lua` without (what a trace costs), `lua` and `sql`
with a fresh Idempotency-Key on every sale against the same sales without (what a key
costs; bench/keyed.lua on both sides), each peer's
against stockd's, and a sold-out product's `lua` sale refused from memory by a stockd
with --sold-out-flag against nginx answering the same 409 from its config. A pair
row's x limit is the median of its pairs' ratios: two measures seconds apart share
the host's mood, two minutes apart may not.

And per store, orders held then paid (bench/order.lua, two requests an order) against
the plain sale of the same strategy, the first of the store that holds orders and
claims safety with several instances, alternated the same way: x limit is orders per
second over sales per second; after each order run the store must show every held
unit paid and nothing held, returned, oversold or lost.

Then the stores made durable while they run (lab/stack/durability.py): the disk's own
fdatasync rate, the raw limits and the flash sale's strategies in each --durable mode,
and the hot row (--hot-strategies on one product at each --hot-conns, each
--hot-modes, with `sql-batch` paired with `sql` at each), every such row with its
store's flushes and its sales per flush.

A row during which the host stole more than --steal-max percent of the CPU (a
neighbour on a virtual machine: lab/stack/host.py) is measured again, up to --retries more
times while --retry-budget seconds of re-measuring last; every row reports the steal
it saw and its attempts.

Each strategy row is also a correctness run: afterwards the store's ledger must show
nothing oversold and nothing lost for a strategy that claims safety, and at least the
units of its 200 answers (exit status 1 otherwise). And it has a second witness: a
pass of its own (--history-duration seconds, same concurrency, bench/history.lua)
records every request's send and answer times and answer, the checker judges that
history (lab.judges.history, lab.judges.linearize), and the row fails when the history and that
pass's ledger disagree (one says oversold or lost, the other not), with both figures.
The pass is separate because recording needs a wrk thread per connection, which
slows wrk (bench/README.md has the figures). Exit status 2: the bench could not
be made. Writes results/bench-<timestamp>/ (bench.json, bench.csv, bench.html, the
tools' consoles) and points results/bench-latest at it; checks bench.html in headless
Chromium; prints the table and the elapsed time.

--quick (the test gate): the first strategy claiming safety of each store, one
concurrency, one second per row, no pairs, no peers, no durable rows, no hot row."""

import contextlib
import os
import sys
import threading
import time
from statistics import median

from ..base.common import (ENDLESS_STOCK, SETTLE_S, SetupError, comma_list, elapsed_line, now_iso,
                           write_text)
from ..client import facts as facts_mod, sources
from ..client.api import Api
from ..client.outcomes import Outcomes
from ..client.sales import deduct_path
from ..stack import durability, host
from ..stack.service import (StaticServer, launch_stockd, run_dir, stack_env, stop_process,
                             wait_healthy)
from ..drivers import openresty as openresty_mod, peer as peer_mod, raw, wrk
from ..judges import history
from ..judges.gate import bench_verdict, witnesses_problem
from ..reports import bench_report, browser, junit, tables
from ..scaffold.runner import Runner

LIMIT_OF_STORE = {"mysql": "mariadb", "redis": "redis"}
# The raw limits' rows: each limit's name, and the row that defines it.
LIMIT_ROWS = {"http": "nginx static /strategies", "redis": "redis EVALSHA sale script",
              "redis-pipelined": "redis EVALSHA sale script, pipelined",
              "mariadb": "mariadb sale transaction"}
STOCKD_HTTP_ROW = "stockd GET /strategies"


def strategy_of(c_file):
    """The name the strategy of server/sale/strategies/`c_file` registers."""
    return sources.strategy_name(os.path.join(sources.STRATEGIES, c_file))


# The durable rows' strategies, and the hot row's: the flash sale's sales, on one product.
DURABLE_FILES = ("lua.c", "lua_stream.c", "sql.c", "sql_batch.c")
HOT_FILES = ("sql.c", "sql_batch.c", "for_update.c", "cas.c", "lua.c")
BATCH_FILE = "sql_batch.c"  # paired with sql.c in the hot row
# The sold-out pair: a sold-out product's sale refused from memory by a stockd with
# --sold-out-flag, against nginx answering the same bytes from its config.
SOLD_OUT_ROW = "nginx fixed 409 sold_out"
# The peer's rows: what it serves, its row's name, the store and limit it is judged by.
PEER_HTTP = ("/strategies", "peer GET /strategies", None, "http")
PEER_SALES = {sources.LUA_FILE: ("peer lua", "redis", "redis"),
              sources.SQL_STRATEGY_FILE: ("peer sql", "mysql", "mariadb")}
# The OpenResty-style peer's rows (bench/openresty/, lab/drivers/openresty.py), the same way.
OPENRESTY_HTTP = ("/strategies", "openresty GET /strategies", None, "http")
OPENRESTY_SALES = {sources.LUA_FILE: ("openresty lua", "redis", "redis")}
# The hold-then-pay rows (bench/order.lua): a deadline far beyond any row, so that every
# hold is paid before it and none is returned; and wrk's time past the row's window for
# the payments of the last holds.
ORDER_TTL_MS = 60000
ORDER_SETTLE_S = 1


def options(o):
    o.add("--strategies", ["STRATEGIES"], "", comma_list,
          "comma list; empty: all from GET /strategies")
    o.add("--conns", ["CONNS"], "", str,
          "concurrencies, keep-alive connections (empty: 1,16,64,256; with --quick: 16)")
    o.add("--duration", ["DURATION"], 2, int, "seconds per row", 1)
    o.add("--warmup", ["WARMUP"], 1, int, "seconds of unrecorded load per strategy first", 0)
    o.add("--steal-max", ["STEAL_MAX"], 5.0, float,
          "percent of the CPU the host may steal during a row before it is measured again", 0)
    o.add("--retries", ["RETRIES"], 2, int, "at most this many more attempts per disturbed row", 0)
    o.add("--pairs", ["PAIRS"], 5, int, "alternating pairs per headline ratio (0: none)", 0)
    o.add("--retry-budget", ["RETRY_BUDGET"], 45, int,
          "seconds the whole run may spend measuring disturbed rows again", 0)
    o.add("--http-port", ["BENCH_HTTP_PORT"], 0, int, "the private nginx's port (0: --port + 1)", 0)
    o.add("--peer-port", ["BENCH_PEER_PORT"], 0, int, "the Node.js peer's port (0: --port + 2)", 0)
    o.add("--peer-workers", ["PEER_WORKERS"], 1, int,
          "the peer's processes (cluster module; bench/README.md says why one here)", 1)
    o.add("--openresty-port", ["BENCH_OPENRESTY_PORT"], 0, int,
          "the OpenResty peer's port (0: --port + 3)", 0)
    o.add("--openresty-pool", ["OPENRESTY_POOL"], 16, int,
          "the OpenResty peer's Redis keepalive connections per nginx worker", 1)
    o.add("--sold-out-port", ["BENCH_SOLD_OUT_PORT"], 0, int,
          "the sold-out pair's own stockd, started with --sold-out-flag (0: --port + 4)", 0)
    o.add("--peer-warmup", ["PEER_WARMUP"], 10, int,
          "seconds of unrecorded load on each of the peer's routes first (V8 compiles as it "
          "runs)", 0)
    o.add("--history-duration", ["HISTORY_DURATION"], 1, int,
          "seconds of each strategy row's history pass (0: no history)", 0)
    o.add("--history-max", ["HISTORY_MAX"], 200000, int,
          "the most requests a history pass records (past it: a window, judged as one)", 1)
    o.add("--product", ["PRODUCT"], 1001, int, "product id used for the runs", 1)
    o.add("--durable", ["DURABLE"], "fast,everysec,durable", comma_list,
          "the stores' modes of the durable rows (lab/stack/durability.py; empty: none)")
    o.add("--hot-conns", ["HOT_CONNS"], "16,64,256,512", str,
          "the hot row's concurrencies (empty: no hot row)")
    o.add("--hot-modes", ["HOT_MODES"], "fast,durable", comma_list,
          "the stores' modes of the hot row")
    o.add("--hot-strategies", ["HOT_STRATEGIES"], ",".join(map(strategy_of, HOT_FILES)),
          comma_list, "the hot row's strategies (those of them the run has)")
    o.flag("--no-peer", "leave out the Node.js peer's rows (bench/peer/)")
    o.flag("--no-openresty", "leave out the OpenResty peer's rows (bench/openresty/)")
    o.flag("--quick", "the first strategy claiming safety of each store, 1 s per row, "
                      "no warm-up, no peers (the test gate's bench)")


def after_parse(ns, error):
    try:
        ns.conns = [int(c) for c in comma_list(ns.conns or ("16" if ns.quick else "1,16,64,256"))]
    except ValueError:
        error(f"--conns: not a comma list of numbers: {ns.conns!r}")
    if not ns.conns or min(ns.conns) < 1:
        error("--conns: at least one concurrency, each at least 1")
    try:
        ns.hot_conns = [int(c) for c in comma_list(ns.hot_conns)]
    except ValueError:
        error(f"--hot-conns: not a comma list of numbers: {ns.hot_conns!r}")
    wrong = [m for m in ns.durable + ns.hot_modes if m not in durability.MODES]
    if wrong:
        error(f"--durable, --hot-modes: unknown {', '.join(wrong)} "
              f"(of {', '.join(durability.MODES)})")
    if ns.quick:
        ns.duration, ns.warmup, ns.pairs, ns.no_peer, ns.no_openresty = 1, 0, 0, True, True
        ns.durable, ns.hot_conns = [], []
    ns.http_port = ns.http_port or ns.port + 1
    ns.peer_port = ns.peer_port or ns.port + 2
    ns.openresty_port = ns.openresty_port or ns.port + 3
    ns.sold_out_port = ns.sold_out_port or ns.port + 4


def ratio(rps, limit):
    return round(rps / limit, 3) if rps and limit else None


def mean_batch(before, after):
    """Sales per batch between two batch_totals() readings, or None."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 1)


def headline_conc(conns):
    """The concurrency of the pairs and the /metrics cost rows: 64, or the highest
    below it, or the lowest there is."""
    return max([c for c in conns if c <= 64] or [min(conns)])


def disturbance_note(seen):
    """What a row's progress line adds about the host: its steal when there was
    any, and its attempts when there were several."""
    note = f"; the host stole {seen['steal_pct']}% of the CPU" if seen.get("steal_pct") else ""
    return note + (f" (attempt {seen['attempts']})" if seen.get("attempts", 1) > 1 else "")


class Bench:
    def __init__(self, args, api, facts, claim_instances, out_dir, say, stockd_pid=None):
        self.args, self.api, self.facts, self.say = args, api, facts, say
        self.stockd_pid = stockd_pid  # the stockd this run started, if it did
        self.instances = claim_instances
        self.out_dir = out_dir
        self.log = lambda name: os.path.join(out_dir, name + ".log")
        self.rows = []
        self.retry_spent_s = 0.0
        self.history_spent_s = 0.0  # the history passes, judging included
        self.limits = {}  # a backend's limit -> run(conc), its measure: for the pairs
        self.batches = {}  # concurrency -> the `lua` row's mean sales per write
        self.peer = None   # the running peer (lab.drivers.peer.Peer), if any
        self.peer_note = "not run"
        self.openresty = None  # the running OpenResty peer (lab.drivers.openresty), if any
        self.openresty_note = "not run"
        self.cpu_of = {}  # port -> the pids serving it, for the sold-out pair's CPU

    # ------------------------------------------------------------------ rows
    def add(self, name, kind, store, claim, conc, measure, outcomes, limit, acct, verdict, reason,
            seen, instances=(), witness=None):
        a = self.args
        r = {"label": f"{name} c={conc}", "name": name, "kind": kind, "store": store,
             "claim": claim, "concurrency": conc, "duration_s": a.duration,
             "requests": outcomes.requests, "throughput_rps": measure.rps,
             "p50_ms": measure.p50_ms, "p95_ms": measure.p95_ms, "p99_ms": measure.p99_ms,
             "max_ms": measure.max_ms, "limit": limit, "store_sold": (acct or {}).get("sold"),
             "oversold": (acct or {}).get("oversold"),
             "lost_updates": (acct or {}).get("lost_updates"),
             "remaining": (acct or {}).get("remaining"), "mean_batch": None, "pipeline": None,
             "cpu_us": None, "limit_cpu_us": None, "durability": None, "fsyncs": None,
             "sales_per_fsync": None, "row_lock_waits": None, "row_lock_ms": None,
             "instances_seen": sorted(instances),
             "verdict": verdict, "reason": reason}
        r.update(outcomes.fields())
        r.update(seen)
        r.update(witness or history.not_judged("not a strategy row"))
        self.rows.append(r)
        p99 = "" if measure.p99_ms is None else f", p99 {measure.p99_ms} ms"
        said = f"; history ({r['history_ops']} requests): {r['history']}" \
            if r["history_ops"] is not None else ""
        self.say(f"{r['label']}: {measure.rps} req/s{p99}; "
                 f"{verdict.upper()} - {reason}{said}{disturbance_note(seen)}")
        return r

    def reset(self):
        self.api.must_reset(self.args.product, ENDLESS_STOCK)

    def url(self, port, path):
        return f"http://{self.args.host}:{port}{path}"

    def sale_path(self, strategy, trace=False):
        """One unit of the bench's product with `strategy` (and its trace)."""
        return deduct_path(strategy, self.args.product, trace=trace)

    def wrk(self, url, conns, seconds, counting=True):
        return wrk.run(url, conns, seconds, self.log("wrk"), counting)

    def measured(self, attempt):
        """attempt() measures a row once; it is run again while the host stole more
        than --steal-max percent of the CPU during it, at most --retries more times and
        while the retry budget lasts. Returns the last attempt's result and what was
        seen: {"steal_pct", "attempts"} (steal_pct None where /proc/stat is missing)."""
        a, attempts = self.args, 0
        while True:
            before, started = host.cpu_times(), time.monotonic()
            result = attempt()
            steal = host.steal_pct(before, host.cpu_times())
            attempts += 1
            seen = {"steal_pct": steal, "attempts": attempts}
            if (steal is None or steal <= a.steal_max or attempts > a.retries
                    or self.retry_spent_s >= a.retry_budget):
                return result, seen
            self.retry_spent_s += time.monotonic() - started
            self.say(f"the host stole {steal}% of the CPU during that row: measuring it again")

    # ------------------------------------------------------------ raw limits
    @contextlib.contextmanager
    def static_strategies(self):
        """The private nginx serving GET /strategies' bytes, for the time of a with."""
        static = StaticServer(os.path.join(run_dir(), "bench-nginx"), self.args.http_port,
                              "/strategies", self.api.strategies().raw)
        static.start(lambda port: Api(self.args.host, port))
        try:
            yield
        finally:
            static.stop()

    def http_limit(self):
        with self.static_strategies():
            for c in self.args.conns:
                self.http_row(LIMIT_ROWS["http"], self.args.http_port, c)
        for c in self.args.conns:
            self.http_row(STOCKD_HTTP_ROW, self.args.port, c)

    def http_row(self, name, port, conc, kind="raw"):
        url = self.url(port, "/strategies")
        res, seen = self.measured(lambda: self.wrk(url, conc, self.args.duration))
        ok = res.outcomes["sold"] == res.requests and res.requests > 0
        self.add(name, kind, None, None, conc, res, res.outcomes, "http", None,
                 "pass" if ok else "fail",
                 "every answer 200" if ok else f"not every answer 200: {res.outcomes.detail()}",
                 seen, res.instances)

    def ledger_sold(self, store):
        acct = self.api.account(self.args.product, store)
        if acct is None:
            raise SetupError(f"could not read the {store} accounting of product "
                             f"{self.args.product}")
        return acct

    def raw_row(self, name, store, limit, conc, run, kind="raw"):
        """A raw row (run() measures it): its sales are what the store's ledger gained.
        Returns the row."""
        def attempt():
            sold_before = self.ledger_sold(store)["sold"]
            return sold_before, run(), self.ledger_sold(store)

        (before, measure, acct), seen = self.measured(attempt)
        gained = acct["sold"] - before
        missing = measure.sent - gained
        outcomes = Outcomes()
        outcomes.add(200, "", measure.requests - max(0, missing))
        if missing > 0:
            outcomes.add("", "", missing, what="not in the ledger")
        ok = missing == 0 and not acct.get("oversold") and not acct.get("lost_updates")
        return self.add(name, kind, store, None, conc, measure, outcomes, limit, acct,
                        "pass" if ok else "fail",
                        "ledger gained one sale per request" if ok else
                        f"ledger gained {gained} for {measure.sent} requests", seen)

    def redis_limit(self):
        lua = sources.strategy_name(sources.LUA_FILE)
        if lua not in self.facts.by_name:
            raise SetupError(f"server/sale/strategies/lua.c registers '{lua}', which GET /strategies "
                             "does not list")
        script = sources.redis_script(sources.SALE_SCRIPT_FILE, sources.SALE_SCRIPT)
        sha = sources.sha1(script)
        port = int(stack_env()["STOCKD_REDIS_PORT"])
        self.reset()
        r = self.api.call("GET", self.sale_path(lua))
        if r.status != 200:
            raise SetupError(f"one '{lua}' sale answered {r.status}: {str(r.body)[:160]}")
        if not raw.script_loaded(port, sha):
            raise SetupError(f"after a '{lua}' sale, Redis has no script {sha}: the sale script "
                             "read from server/sale/strategies/lua.c is not the one stockd runs "
                             "(rebuild stockd?)")
        self.say(f"redis: SCRIPT EXISTS {sha} after one '{lua}' sale: yes")
        keys, log = [f"stock:{{{self.args.product}}}", f"ledger:{{{self.args.product}}}"], \
            self.log("redis-benchmark")
        self.evalsha = lambda c, pipeline: raw.redis_for(self.args.duration, port, sha, keys, [1],
                                                         c, log, pipeline)
        self.limit_rows("redis", "redis", lambda c: self.evalsha(c, 1))

    def pipeline_at(self, conc):
        """redis-benchmark's -P at a concurrency: the `lua` row's mean sales per write
        there, rounded (1 when it had no batch)."""
        return max(1, round(self.batches.get(conc) or 1))

    def pipelined_limit(self):
        """The sale script pipelined as stockd's loops pipeline it: at each concurrency
        the `lua` strategy ran, as many EVALSHA per write as its mean batch there."""
        if "redis" not in self.limits or not self.batches:
            return
        self.limits["redis-pipelined"] = lambda c: self.evalsha(c, self.pipeline_at(c))
        self.reset()  # an unsafe strategy's row may have left lost updates in the ledger
        for c in self.args.conns:
            if c in self.batches:
                self.raw_row(LIMIT_ROWS["redis-pipelined"], "redis", "redis-pipelined", c,
                             lambda: self.evalsha(c, self.pipeline_at(c)))
                self.rows[-1]["pipeline"] = self.pipeline_at(c)

    def mariadb_limit(self):
        deduct = sources.sql_statement(sources.SQL_FILE, "SQL_DEDUCT_IF_ENOUGH")
        insert = sources.sql_statement(sources.SQL_FILE, "SQL_INSERT_ORDER")
        name = sources.strategy_name(sources.SQL_STRATEGY_FILE)
        db = stack_env()
        self.reset()
        self.limit_rows("mariadb", "mysql", lambda c: raw.mariadb_sale(
            db, deduct, insert, self.args.product, name, c, self.args.duration,
            self.log("sysbench")))

    def limit_rows(self, limit, store, run):
        """The raw rows of a backend's limit at every concurrency (run(conc) measures
        one); `run` is kept for the pairs."""
        self.limits[limit] = run
        for c in self.args.conns:
            self.raw_row(LIMIT_ROWS[limit], store, limit, c, lambda: run(c))

    # ------------------------------------------------------------ strategies
    def strategy(self, s):
        a = self.args
        safe = s.safe_for(self.instances)
        url = self.url(a.port, self.sale_path(s.name))
        if a.warmup:
            self.reset()
            self.wrk(url, max(a.conns), a.warmup)
            self.api.wait_idle(SETTLE_S)
        for c in a.conns:
            (before, res, acct, after), seen = self.measured(self.strategy_attempt(s, c))
            verdict, reason = bench_verdict(safe, res.outcomes, acct, 1)
            witness = self.history_pass(s, c, safe) if a.history_duration else \
                history.not_judged("no history pass (--history-duration 0)")
            for problem in (witness.pop("pass_problem", None),
                            witnesses_problem(witness.pop("pass_acct", None), witness)):
                if problem:
                    verdict, reason = "fail", (f"history pass: {problem}" if verdict == "pass"
                                               else f"{reason}; history pass: {problem}")
            row = self.add(s.name, "strategy", s.store, "safe" if safe else "unsafe", c, res,
                           res.outcomes, LIMIT_OF_STORE.get(s.store), acct, verdict, reason,
                           seen, res.instances, witness)
            row["mean_batch"] = mean_batch(before, after)
            if s.name == sources.strategy_name(sources.LUA_FILE):
                self.batches[c] = row["mean_batch"]

    def strategy_attempt(self, s, conc, flushes=False):
        """A function that measures strategy `s` once at `conc`: reset, wrk, the
        requests in flight settled; it returns (the batch totals before, wrk's result,
        the store's accounting, the batch totals after). With `flushes`, wrk's result
        carries .flushes, the store's flushes during the load and the settling
        (lab.stack.durability.Flushes)."""
        a = self.args
        url = self.url(a.port, self.sale_path(s.name))

        def load():
            out = self.wrk(url, conc, a.duration)
            self.api.wait_idle(SETTLE_S)
            return out

        def attempt():
            self.reset()
            batches_before = self.api.batch_totals(s.name)
            out = self.flushed(s.store, load) if flushes else load()
            return (batches_before, out, self.api.account(a.product, s.store),
                    self.api.batch_totals(s.name))
        return attempt

    def flushed(self, store, run):
        """run()'s result, with .flushes: `store`'s flushes while it ran."""
        counter = durability.Flushes(store, self.log("perf"))
        counter.start()
        out = run()
        out.flushes = counter.stop()
        return out

    def history_pass(self, s, conc, safe):
        """The second witness of a strategy row: reset, --history-duration seconds at
        `conc` with every request recorded (bench/history.lua: a wrk thread per
        connection, at most --history-max requests), the store's counter read once
        every request had answered, the history judged (history-<strategy>-c<conc>.jsonl
        beside the results). Returns lab.judges.history.judge()'s fields, history_rps (the
        pass's req/s), history_oversold and history_lost (its ledger), pass_acct (its
        accounting, for the witnesses) and pass_problem (its ledger's verdict, when not
        a pass)."""
        a, started = self.args, time.monotonic()
        name = f"history-{s.name}-c{conc}"
        prefix = os.path.join(self.out_dir, name + ".wrk")
        self.reset()
        load = wrk.run(self.url(a.port, self.sale_path(s.name)), conc, a.history_duration,
                       self.log("wrk-history"), history=(prefix, a.history_max))
        self.api.wait_idle(SETTLE_S)
        settled = int(time.monotonic() * 1e6)  # CLOCK_MONOTONIC, history.lua's clock
        acct = self.api.account(a.product, s.store)
        path = os.path.join(self.out_dir, name + ".jsonl")
        ops, cut = history.from_wrk(prefix, conc, path, 1, settled)
        for f in os.listdir(self.out_dir):  # the history is in the .jsonl now
            if f.startswith(name + ".wrk."):
                os.remove(os.path.join(self.out_dir, f))
        final = acct.get("remaining") if cut is None and acct else None
        out = history.judge_final(ENDLESS_STOCK, ops, final, path, future=cut)
        verdict, why = bench_verdict(safe, load.outcomes, acct, 1)
        out.update(history_rps=load.rps, history_oversold=(acct or {}).get("oversold"),
                   history_lost=(acct or {}).get("lost_updates"), pass_acct=acct,
                   pass_problem=None if verdict == "pass" else why)
        self.history_spent_s += time.monotonic() - started
        return out

    # ------------------------------------------------------------------ peer
    @contextlib.contextmanager
    def running(self, attr, left_out, start, missing, words):
        """A peer for the time of a with, as self.<attr> (its note, self.<attr>_note,
        says what happened): none when `left_out` (the note says it), else start()'s;
        when that raises `missing`, the with runs without it and the note says why.
        words: (the rows' name and the peer's, in the progress lines; describe())."""
        rows, name, describe = words
        if left_out:
            setattr(self, attr + "_note", left_out)
            yield
            return
        try:
            peer, port = start()
        except missing as e:
            setattr(self, attr + "_note", f"skipped: {e}")
            self.say(f"{rows} are skipped: {e}")
            yield
            return
        setattr(self, attr, peer)
        setattr(self, attr + "_note", "ran")
        self.say(f"{name} answers at {self.args.host}:{port} ({describe()})")
        try:
            yield
        finally:
            peer.stop()
            setattr(self, attr, None)

    def peer_running(self):
        """The Node.js peer for the time of a with, unless --no-peer; when it cannot
        run here, the with runs without it (self.peer None) and self.peer_note says
        why."""
        a = self.args

        def start():
            texts = peer_mod.stockd_texts((self.facts.settings or {}).get("workers") or 16,
                                          a.peer_workers)
            peer = peer_mod.Peer(a.peer_port, stack_env(), texts, self.api.strategies().raw,
                                 os.path.join(run_dir(), "bench-peer", "strategies.json"),
                                 self.log("peer"))
            peer.start(Api(a.host, a.peer_port))
            return peer, a.peer_port
        return self.running("peer", a.no_peer and "left out (--no-peer, --quick)", start,
                            peer_mod.PeerMissing,
                            ("the peer rows", "the peer", peer_mod.describe))

    def openresty_running(self):
        """The OpenResty peer for the time of a with, unless --no-openresty; when its
        packages are missing, the with runs without it (self.openresty None) and
        self.openresty_note says why."""
        a = self.args

        def start():
            peer = openresty_mod.OpenResty(os.path.join(run_dir(), "bench-openresty"),
                                           a.openresty_port, stack_env(),
                                           self.api.strategies().raw, a.openresty_pool)
            peer.start(lambda port: Api(a.host, port))
            return peer, a.openresty_port
        return self.running("openresty",
                            a.no_openresty and "left out (--no-openresty, --quick)", start,
                            openresty_mod.Missing,
                            ("the OpenResty peer's rows", "the OpenResty peer",
                             openresty_mod.describe))

    def peer_subjects(self, selected, http=PEER_HTTP, sales=None):
        """(path, row name, store, limit) of what a peer serves of this run: the
        Node.js peer's by default, the OpenResty peer's with its own."""
        names = {s.name for s in selected}
        out = [http]
        for source, (name, store, limit) in (sales or PEER_SALES).items():
            strategy = sources.strategy_name(source)
            if strategy in names:
                out.append((self.sale_path(strategy), name, store, limit))
        return out

    def openresty_subjects(self, selected):
        return self.peer_subjects(selected, OPENRESTY_HTTP, OPENRESTY_SALES)

    def peer_settled(self, store):
        """The store's accounting once the peer's last sales landed: it has no
        in-flight gauge, so the ledger is read until two readings agree."""
        last, deadline = None, time.time() + SETTLE_S
        while True:
            acct = self.api.account(self.args.product, store)
            if acct == last or time.time() >= deadline:
                return acct
            last = acct
            time.sleep(0.2)

    def peer_rows(self, port, subjects, warmup):
        """A peer (on `port`, serving `subjects`) at every concurrency, after `warmup`
        seconds of load per route; a sale row is judged as a safe strategy's, and
        answers it should not give (errors) fail it too: either is a bug in the
        peer."""
        a = self.args
        for path, name, store, limit in subjects:
            if warmup:  # V8 (LuaJIT too) compiles a hot path only after it ran a while
                self.reset()
                self.wrk(self.url(port, path), max(a.conns), warmup)
                if store:
                    self.peer_settled(store)
            for c in a.conns:
                if store is None:
                    self.http_row(name, port, c, kind="peer")
                    continue

                def attempt():
                    self.reset()
                    load = self.wrk(self.url(port, path), c, a.duration)
                    return load, self.peer_settled(store)

                (res, acct), seen = self.measured(attempt)
                verdict, reason = bench_verdict(True, res.outcomes, acct, 1)
                if verdict == "pass" and res.outcomes["errors"]:
                    verdict, reason = "fail", f"errors: {res.outcomes.detail()}"
                if verdict != "pass":
                    reason = f"a bug in the peer: {reason}"
                self.add(name, "peer", store, "safe", c, res, res.outcomes, limit, acct, verdict,
                         reason, seen)

    # ----------------------------------------------------------------- pairs
    def pairs(self, selected):
        """The headline ratios, each from --pairs alternating measures of a subject and
        its limit at headline_conc(): stockd's GET /strategies against nginx, the
        strategies of server/sale/strategies/lua.c and server/sale/strategies/sql.c (when selected)
        against EVALSHA and the sale transaction, `lua` against EVALSHA pipelined too,
        and each of the three against the peer's when it runs. wrk runs with
        bench/rate.lua here: its per-answer counting would be charged to stockd
        against tools that count in C."""
        a = self.args
        conc = headline_conc(a.conns)

        def wrk_rate(port, path, store=None):
            return self.paired_wrk(port, path, conc, store)

        with self.static_strategies():
            self.pair_row(STOCKD_HTTP_ROW, None, None, "http", LIMIT_ROWS["http"], conc,
                          wrk_rate(a.http_port, "/strategies"), wrk_rate(a.port, "/strategies"))
        names = {s.name: s for s in selected}
        subjects = {}
        for source, limits in ((sources.LUA_FILE, ("redis", "redis-pipelined")),
                               (sources.SQL_STRATEGY_FILE, ("mariadb",))):
            s = names.get(sources.strategy_name(source))
            if s is None:
                continue
            subjects[source] = s
            claim = "safe" if s.safe_for(self.instances) else "unsafe"
            for limit in (lim for lim in limits if lim in self.limits):
                self.reset()
                self.pair_row(s.name, s.store, claim, limit, LIMIT_ROWS[limit], conc,
                              lambda: self.limits[limit](conc),
                              wrk_rate(a.port, self.sale_path(s.name), s.store))
            if source == sources.LUA_FILE:  # what a trace costs: the same sale without
                self.reset()
                self.pair_row(f"{s.name}, trace=1", s.store, claim, "untraced", s.name, conc,
                              wrk_rate(a.port, self.sale_path(s.name), s.store),
                              wrk_rate(a.port, self.sale_path(s.name, trace=True), s.store))
            # what a key costs: the same sale with a fresh Idempotency-Key on each
            self.reset()
            self.pair_row(f"{s.name}, Idempotency-Key", s.store, claim, "unkeyed", s.name,
                          conc, self.keyed_wrk(self.sale_path(s.name), conc, s.store, False),
                          self.keyed_wrk(self.sale_path(s.name), conc, s.store, True))
        peers = [(peer, port, limit, found) for peer, port, limit, found in (
            (self.peer, a.peer_port, "peer", self.peer_subjects(selected)),
            (self.openresty, a.openresty_port, "openresty", self.openresty_subjects(selected)))
            if peer is not None]
        for _, port, limit, found in peers:
            for path, name, store, _ in found:
                s = next((s for s in subjects.values() if path == self.sale_path(s.name)), None)
                subject, claim = (s.name, "safe" if s.safe_for(self.instances) else "unsafe") \
                    if s else (STOCKD_HTTP_ROW, None)
                if store:
                    self.reset()
                self.pair_row(subject, store, claim, limit, name, conc,
                              wrk_rate(port, path, store), wrk_rate(a.port, path, store))
        self.sold_out_pair(selected, conc)

    def keyed_wrk(self, path, conc, store, keyed):
        """One side of a key-cost pair: wrk on stockd's `path` with bench/keyed.lua, a
        fresh Idempotency-Key on every request when `keyed`, then the sales settled."""
        a = self.args

        def run():
            load = wrk.run(self.url(a.port, path), conc, a.duration, self.log("wrk"),
                           script=wrk.KEYED_SCRIPT,
                           script_args=("key" if keyed else "none",))
            self.api.wait_idle(SETTLE_S)
            return load
        return run

    def paired_wrk(self, port, path, conc, store=None, counting=False):
        """One side of a pair: a function that runs wrk on `port` and `path` (with
        bench/rate.lua unless `counting`), waits until the sales settled in `store`,
        and returns wrk's result with cpu_us, the CPU its server spent per request
        when server_pids() knows it."""
        a = self.args

        def run():
            pids = self.server_pids(port)
            before = host.process_cpu_s(pids) if pids else None
            load = self.wrk(self.url(port, path), conc, a.duration, counting=counting)
            if port == a.port and store:
                self.api.wait_idle(SETTLE_S)
            elif store:
                self.peer_settled(store)
            after = host.process_cpu_s(pids) if pids else None
            load.cpu_us = (round(1e6 * (after - before) / load.requests, 1)
                           if None not in (before, after) and load.requests else None)
            return load
        return run

    @contextlib.contextmanager
    def flagged_stockd(self):
        """A stockd of its own with --sold-out-flag=1 on --sold-out-port, on the same
        stack, for the time of a with: the bench's stockd may have been started by
        someone else, without the flag. Yields its Api."""
        a = self.args
        api = Api(a.host, a.sold_out_port, self.api.token)
        if api.answers():
            raise SetupError(f"port {a.sold_out_port} is taken: the sold-out pair's stockd needs "
                             "it (--sold-out-port / BENCH_SOLD_OUT_PORT)")
        log = self.log("stockd-sold-out")
        proc = launch_stockd(a.sold_out_port, ["--listen=127.0.0.1", "--sold-out-flag=1"],
                             {**os.environ, **stack_env()}, log, cwd=os.path.realpath(run_dir()))
        self.cpu_of[a.sold_out_port] = [proc.pid]
        try:
            wait_healthy(api, 30, proc, log)
            yield api
        finally:
            stop_process(proc)
            del self.cpu_of[a.sold_out_port]

    def sold_out_pair(self, selected, conc):
        """The refusal a flash sale answers far more often than a sale: a product
        already sold out, its `lua` sale answered from memory by a stockd with
        --sold-out-flag, paired with nginx answering that answer's bytes (409) from its
        config, the fastest refusal there is. Both under wrk with count.lua, which counts
        a 409 sold_out as such (rate.lua would count it an error)."""
        lua = next((s for s in selected if s.name == sources.strategy_name(sources.LUA_FILE)),
                   None)
        if lua is None:
            return
        a = self.args
        product = a.product + 1  # its own product, sold out for the pair's time
        path = deduct_path(lua.name, product)
        with self.flagged_stockd() as api:
            api.must_reset(product, 0)
            first = api.call("GET", path)  # the store says sold_out; the flag is set
            answer = api.call("GET", path)  # answered from memory
            if (first.status, answer.status) != (409, 409) or \
                    (answer.body or {}).get("error") != "sold_out":
                raise SetupError(f"a sold-out '{lua.name}' sale with --sold-out-flag answered "
                                 f"{first.status} then {answer.status}: {str(answer.body)[:160]}")
            fixed = StaticServer(os.path.join(run_dir(), "bench-nginx-409"), a.http_port,
                                 "/strategies", self.api.strategies().raw,
                                 fixed=(path.split("?")[0], 409, answer.raw.decode()))
            fixed.start(lambda port: Api(a.host, port))
            self.cpu_of[a.http_port] = host.process_tree(fixed.proc.pid)
            try:
                self.pair_row(f"{lua.name}, sold out, --sold-out-flag", lua.store, None,
                              "nginx-409", SOLD_OUT_ROW, conc,
                              self.paired_wrk(a.http_port, path, conc, counting=True),
                              self.paired_wrk(a.sold_out_port, path, conc, counting=True))
            finally:
                fixed.stop()
                del self.cpu_of[a.http_port]
            acct = api.account(product, lua.store)
        if acct is None or acct.get("sold") or acct.get("oversold"):
            row = self.rows[-1]
            row["verdict"], row["reason"] = "fail", f"the sold-out product's ledger: {acct}"

    def server_pids(self, port):
        """The processes serving `port` whose CPU time the pairs read: the stockd this
        run started, the peers' processes, the sold-out pair's stockd and nginx; None
        otherwise."""
        if port == self.args.port and self.stockd_pid:
            return [self.stockd_pid]

        for peer, peer_port in ((self.peer, self.args.peer_port),
                                (self.openresty, self.args.openresty_port)):
            if port == peer_port and peer:
                return host.process_tree(peer.proc.pid)
        return self.cpu_of.get(port)

    def pair_row(self, subject, store, claim, limit, limit_name, conc, run_limit, run_subject):
        """One pair row: --pairs times the limit then the subject, each pair measured
        again if the host stole CPU during it. Its req/s and limit_rps are medians, its
        x limit the median of the pairs' ratios (pair_ratios); its steal is its pairs'
        highest, its attempts 1 + the pairs measured again."""
        limit_rates, rates, ratios, steals, again = [], [], [], [], 0
        cpu, limit_cpu = [], []
        outcomes = Outcomes()
        for _ in range(self.args.pairs):
            (base, load), seen = self.measured(lambda: (run_limit(), run_subject()))
            limit_rates.append(base.rps)
            rates.append(load.rps)
            limit_cpu.append(getattr(base, "cpu_us", None))
            cpu.append(getattr(load, "cpu_us", None))
            ratios.append(round(load.rps / base.rps, 3) if base.rps and load.rps else 0.0)
            outcomes.merge(load.outcomes)
            steals.append(seen["steal_pct"] or 0.0)
            again += seen["attempts"] - 1
        ok = outcomes.requests > 0 and outcomes["errors"] == 0
        measure = raw.Measure(outcomes.requests, median(rates), None, None, None, None)
        row = self.add(f"{subject} paired with {limit_name}", "pair", store, claim, conc,
                       measure, outcomes, limit, None, "pass" if ok else "fail",
                       f"median of {len(ratios)} pairs' ratios {ratios}" if ok else
                       f"errors: {outcomes.detail()}",
                       {"steal_pct": max(steals), "attempts": 1 + again})
        row.update(limit_rps=median(limit_rates), x_limit=median(ratios), pair_ratios=ratios)
        if cpu and None not in cpu + limit_cpu:
            row.update(cpu_us=median(cpu), limit_cpu_us=median(limit_cpu))

    def scrape_cost(self):
        """What /metrics costs: the lua strategy at 64 connections (or the highest
        concurrency below), alternately scraped every second and not, twice each; the
        scraped rows' x limit is their throughput over the unscraped ones'."""
        a = self.args
        lua = sources.strategy_name(sources.LUA_FILE)
        conc = headline_conc(a.conns)
        url = self.url(a.port, self.sale_path(lua))
        for _ in range(2):
            for scraped in (False, True):
                def attempt():
                    self.reset()
                    scraper = Scraper(self.api) if scraped else None
                    load = self.wrk(url, conc, a.duration)
                    if scraper:
                        scraper.stop()
                    self.api.wait_idle(SETTLE_S)
                    return load, scraper

                (res, scraper), seen = self.measured(attempt)
                name = f"{lua}, /metrics every 1 s" if scraped else f"{lua}, not scraped"
                self.add(name, "scrape", "redis", None, conc, res, res.outcomes,
                         "scraped" if scraped else "unscraped", None, "pass",
                         f"{scraper.scrapes} scrapes" if scraper else "no scrape", seen)

    # ---------------------------------------------------------------- orders
    def order_pairs(self, selected):
        """Per store, orders held then paid (bench/order.lua: two requests an order)
        paired with the same strategy's plain sale at headline_conc(), --pairs
        alternating measures: x limit is orders per second over sales per second, p99
        the median of the order runs' (over their requests). After each order run the
        store must show every held unit paid (order_problem)."""
        a = self.args
        conc = headline_conc(a.conns)
        for s in order_subjects(selected):
            problems, p99s = [], []
            self.pair_row(f"{s.name}, hold then pay", s.store, "safe", s.name, s.name, conc,
                          self.paired_wrk(a.port, self.sale_path(s.name), conc, s.store),
                          self.order_run(s, conc, problems, p99s))
            row = self.rows[-1]
            row["p99_ms"] = median(p99s) if None not in p99s else None
            if problems:
                row["verdict"], row["reason"] = "fail", "; ".join(problems)

    def order_run(self, s, conc, problems, p99s):
        """One side of an order pair: a function that resets the product, holds and
        pays orders of strategy `s` for --duration seconds at `conc`, waits until they
        settled, adds the store's disagreement (if any) to `problems` and the run's p99
        to `p99s`, and returns wrk's result (its rate: orders paid per second)."""
        a = self.args
        url = self.url(a.port, f"/orders/{s.name}?product={a.product}&qty=1"
                               f"&ttl_ms={ORDER_TTL_MS}")

        def run():
            self.reset()
            load = wrk.run(url, conc, a.duration + ORDER_SETTLE_S, self.log("wrk-orders"),
                           script=wrk.ORDER_SCRIPT,
                           script_args=(str(1000 * a.duration), "/strategies"))
            self.api.wait_idle(SETTLE_S)
            problem = order_problem(load.outcomes["sold"], self.api.account(a.product, s.store))
            if problem:
                problems.append(problem)
            p99s.append(load.p99_ms)
            return load
        return run

    # ------------------------------------------------------------ durability
    def note_flushes(self, row, flushes, mode):
        """A durable or hot row's flush fields: its mode, the store's flushes during
        it, its sales (answers 200) per flush and, for MariaDB, its row lock waits."""
        sold = row.get("sold") or 0
        row.update(durability=mode, fsyncs=flushes.fsyncs,
                   sales_per_fsync=round(sold / flushes.fsyncs, 1) if flushes.fsyncs else None,
                   row_lock_waits=flushes.row_lock_waits, row_lock_ms=flushes.row_lock_ms)

    def store_row(self, s, conc, mode, kind):
        """Strategy `s` at `conc` with the stores in `mode`: judged as a strategy row
        (without its history pass), its store's flushes counted."""
        safe = s.safe_for(self.instances)
        (before, res, acct, after), seen = self.measured(self.strategy_attempt(s, conc, True))
        verdict, reason = bench_verdict(safe, res.outcomes, acct, 1)
        row = self.add(f"{s.name}, {mode}", kind, s.store, "safe" if safe else "unsafe", conc,
                       res, res.outcomes, LIMIT_OF_STORE.get(s.store), acct, verdict, reason,
                       seen, res.instances)
        row["mean_batch"] = mean_batch(before, after)
        self.note_flushes(row, res.flushes, mode)
        return row

    def disk_row(self):
        """This disk's own flush rate, in the same run: fdatasync() after each 4 KiB
        append, in the run directory, for --duration seconds."""
        (rate, n), seen = self.measured(lambda: durability.disk_fsync_rate(self.args.duration))
        outcomes = Outcomes()
        outcomes.add(200, "", n)
        self.add("disk fdatasync after a 4 KiB append", "disk", None, None, 1,
                 raw.Measure(n, rate, None, None, None, None), outcomes, "disk", None, "pass",
                 f"{n} fdatasync in {self.args.duration} s", seen)

    def durable_rows(self, selected):
        """The raw limits and the strategies of DURABLE_FILES at the headline
        concurrency in each --durable mode, every row with its store's flushes and its
        sales per flush, after the disk's own rate. `everysec` changes Redis only: its
        MariaDB rows would repeat `durable`'s."""
        a = self.args
        conc = headline_conc(a.conns)
        names = set(map(strategy_of, DURABLE_FILES))
        chosen = [s for s in selected if s.name in names]
        self.disk_row()
        for mode in a.durable:
            stores = ("redis",) if mode == "everysec" else ("redis", "mysql")
            with durability.mode(mode):
                for limit, store in (("redis", "redis"), ("mariadb", "mysql")):
                    if limit in self.limits and store in stores:
                        box = {}

                        def run(limit=limit, store=store, box=box):
                            out = self.flushed(store, lambda: self.limits[limit](conc))
                            box["flushes"] = out.flushes
                            return out
                        self.reset()
                        row = self.raw_row(f"{LIMIT_ROWS[limit]}, {mode}", store, limit, conc,
                                           run, kind="durable")
                        self.note_flushes(row, box["flushes"], mode)
                for s in chosen:
                    if s.store in stores:
                        self.store_row(s, conc, mode, "durable")

    def hot_rows(self, selected):
        """The hot row at the concurrencies flash-sale databases publish: each of
        --hot-strategies on one product at each of --hot-conns, in each --hot-modes,
        then `sql-batch` paired with `sql` at each (--pairs alternating measures):
        what batching buys, beside the published ratios (docs/bench.md)."""
        a = self.args
        chosen = [s for s in selected if s.name in a.hot_strategies]
        by_name = {s.name: s for s in chosen}
        for mode in a.hot_modes:
            with durability.mode(mode):
                for s in chosen:
                    for c in a.hot_conns:
                        self.store_row(s, c, mode, "hot")
                batch = by_name.get(strategy_of(BATCH_FILE))
                single = by_name.get(sources.strategy_name(sources.SQL_STRATEGY_FILE))
                if not (batch and single and a.pairs):
                    continue
                claim = "safe" if batch.safe_for(self.instances) else "unsafe"
                for c in a.hot_conns:
                    self.reset()
                    self.pair_row(f"{batch.name}, {mode}", batch.store, claim, single.name,
                                  f"{single.name}, {mode}", c,
                                  self.paired_wrk(a.port, self.sale_path(single.name), c,
                                                  single.store, counting=True),
                                  self.paired_wrk(a.port, self.sale_path(batch.name), c,
                                                  batch.store, counting=True))

    def run(self, selected):
        self.http_limit()
        self.redis_limit()
        self.mariadb_limit()
        for s in selected:
            self.strategy(s)
        self.pipelined_limit()
        with self.peer_running(), self.openresty_running():
            if self.peer:
                self.peer_rows(self.args.peer_port, self.peer_subjects(selected),
                               self.args.peer_warmup)
            if self.openresty:
                self.peer_rows(self.args.openresty_port, self.openresty_subjects(selected),
                               self.args.warmup)
            if self.args.pairs:
                self.pairs(selected)
        if self.args.pairs:
            self.order_pairs(selected)
        if not self.args.quick:
            self.scrape_cost()
        if self.args.durable:
            self.durable_rows(selected)
        if self.args.hot_conns:
            self.hot_rows(selected)
        self.mark_limits()
        return self.rows

    def mark_limits(self):
        """limit_rps and x_limit: each row against the best of its limit's own rows; a
        scraped row against the mean of the unscraped ones."""
        defining = {name: limit for limit, name in LIMIT_ROWS.items()}
        best = {}
        for r in self.rows:
            kind = defining.get(r["name"])
            if kind and r["throughput_rps"]:
                best[kind] = max(best.get(kind, 0), r["throughput_rps"])
        unscraped = [r["throughput_rps"] for r in self.rows
                     if r["limit"] == "unscraped" and r["throughput_rps"]]
        if unscraped:
            best["unscraped"] = sum(unscraped) / len(unscraped)
            best["scraped"] = best["unscraped"]
        for r in self.rows:
            if r["kind"] != "pair":  # a pair row's figures are its own medians
                r["limit_rps"] = best.get(r["limit"])
                r["x_limit"] = ratio(r["throughput_rps"], r["limit_rps"])


class Scraper:
    """GET /metrics every second from a thread of its own, as Prometheus would."""

    def __init__(self, api):
        self.api, self.scrapes = api, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.done.wait(1.0):
            try:
                self.api.call("GET", "/metrics", timeout=5)
                self.scrapes += 1
            except OSError:
                pass

    def stop(self):
        self.done.set()
        self.thread.join()


def order_subjects(selected):
    """The hold-then-pay rows' strategies: per store, the first of `selected` that
    holds orders and claims safety with several instances."""
    picked = {}
    for s in selected:
        if s.orders and s.safe_for(2) and s.store not in picked:
            picked[s.store] = s
    return list(picked.values())


def order_problem(paid_orders, acct):
    """Why a store's accounting after a hold-then-pay run is wrong, or None: each
    unit held (qty 1) paid once (`paid` the run's paid orders), none still held or
    returned, nothing oversold or lost."""
    if acct is None:
        return "the store's accounting could not be read"
    wrong = [] if acct.get("paid") == paid_orders else \
        [f"store paid {acct.get('paid')} != {paid_orders} orders paid"]
    wrong += [f"{k} {acct[k]}" for k in ("held", "returned", "oversold", "lost_updates")
              if acct.get(k)]
    return "; ".join(wrong) or None


def claim_instances(api):
    names = api.instance_names(4)
    if None in names or not names:
        raise SetupError(f"stockd at {api.where()} answers without an X-Stockd-Instance header: "
                         "cannot tell which claim (safe_single, safe_multi) to judge")
    return sorted(names)


def write_outputs(out_dir, rows, params):
    page = os.path.join(out_dir, "bench.html")
    write_text(os.path.join(out_dir, "bench.json"), tables.json_text({"params": params,
                                                                      "rows": rows}))
    write_text(os.path.join(out_dir, "bench.csv"), tables.csv_text(rows, bench_report.ROW_FIELDS))
    write_text(page, bench_report.render(rows, params))
    junit.write(os.path.join(out_dir, "junit.xml"), "stockd.bench", rows,
                lambda r: r["label"], lambda r: r.get("duration_s"), params)
    return page


def work(run):
    args, api, service, say = run.args, run.api, run.service, run.say
    facts = facts_mod.parse(api.strategies().body)
    names = claim_instances(api)
    selected = (facts.first_safe_per_store(len(names)) if args.quick and not args.strategies
                else facts.select(args.strategies))
    facts_mod.check_needs(api, facts, selected)
    out_dir = run.out_dir()
    say(f"results in {out_dir}; strategies: {', '.join(s.name for s in selected)}; "
        f"concurrencies {args.conns}, {args.duration} s each")
    bench = Bench(args, api, facts, len(names), out_dir, say,
                  service.proc.pid if service.proc else None)
    rows = bench.run(selected)
    params = {"started": run.started, "finished": now_iso(), "host": args.host,
              "port": args.port, "instance_names": names,
              "claim": facts_mod.claim_name(len(names)), "conns": args.conns,
              "duration_s": args.duration, "warmup_s": args.warmup, "stock": ENDLESS_STOCK,
              "product": args.product, "strategies": [s.name for s in selected],
              "settings": facts.settings, "elapsed_s": round(run.elapsed()),
              "driver": "wrk (keep-alive), redis-benchmark, sysbench",
              "stockd_started_by_bench": service.started, "steal_max_pct": args.steal_max,
              "pairs": args.pairs, "peer": bench.peer_note,
              "openresty": bench.openresty_note, "openresty_stack": openresty_mod.describe(),
              "peer_warmup_s": args.peer_warmup, "peer_workers": args.peer_workers,
              "peer_stack": peer_mod.describe(),
              "retries": args.retries, "retry_budget_s": args.retry_budget,
              "retry_spent_s": round(bench.retry_spent_s, 1),
              "history_duration_s": args.history_duration, "history_max": args.history_max,
              "history_spent_s": round(bench.history_spent_s, 1),
              "durable": args.durable, "hot_conns": args.hot_conns, "hot_modes": args.hot_modes,
              "hot_strategies": args.hot_strategies}
    page = write_outputs(out_dir, rows, params)
    return rows, page, browser.check(page, bench_report.expectations(rows))


def report(run, done):
    rows, page, found = done
    print(tables.text_table(rows, bench_report.TABLE))
    print()
    flushed = [r for r in rows if r["kind"] in bench_report.FLUSH_KINDS]
    if flushed:
        print("The stores' flushes (the durable rows and the hot row):")
        print(tables.text_table(flushed, bench_report.FLUSH_TABLE))
        print()
    failed = [r for r in rows if r["verdict"] != "pass"]
    for r in failed:
        print(f"FAIL {r['label']}: {r['reason']}")
    for p in found:
        print(f"FAIL bench.html in Chromium: {p}")
    again = [r for r in rows if r.get("attempts", 1) > 1]
    if again:
        rows_word = "rows" if len(again) > 1 else "row"
        print(f"{len(again)} {rows_word} measured again: the host stole more than "
              f"{run.args.steal_max}% of the CPU during them (steal % column)")
    print(f"{len(rows) - len(failed)}/{len(rows)} rows pass; bench.html "
          f"{'checked in Chromium' if not found else 'WRONG'}: {page}")
    print(elapsed_line(run.elapsed()))
    return 1 if failed or found else 0


def stockd_options(args):
    """The stockd this run starts takes every connection of the hot row from this one
    address: by default it takes a sixteenth of --max-connections per address (512),
    shared among its loops, and wrk's 512 connections came close enough to it that a
    few were refused."""
    most = max(args.conns + args.hot_conns)
    return [f"--max-per-ip={max(1024, 4 * most)}"]


RUNNER = Runner("bench", __doc__, options=options, after_parse=after_parse, work=work,
                report=report, host=True, port=True, results="bench-", instances=1,
                stockd=stockd_options)
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
