"""Compare stockd's strategies under the same JMeter load: who oversells, at what cost.

First a calibration row: the same plan against GET /ping, which touches no backend
and answers a few dozen bytes as a sale does; it runs again after the last strategy,
and the better of the two is the driver's ceiling for this run. Then for each strategy
(default: every one GET /strategies lists) its rows, each on a product of its own
(--product + the row's place in the plan, the calibration's first: no reset between
rows): every product reset, then one JMeter process runs every row one after another
(lab.drivers.jmeter.write_plan: a ThreadGroup per row, made from jmeter/deduct.jmx), its
JTL is split by row, then each row's GET /stock/{product} is read. What runs
and what each row must show comes from the strategies' facts in GET /strategies
(lab.judges.plan): strategies that do not claim safety for this number of instances get an
"exposed" row with the request parameters their exposed_by names; strategies with a
lease get "hold>ttl" and "pause>ttl" rows.

Writes results/<timestamp>/ and points results/latest at it:
    results.json   array of rows        results.csv   the same rows
    params.json    the run's parameters report.html   table, charts, race timelines
    junit.xml      one test case per row, for CI
    <row>.jtl      JMeter's CSV results of each row, split out of the one run's
    jmeter-plan.jmx  the plan that run ran (jmeter-plan.log, jmeter-plan.out: its log, console)
    history-<row>.jsonl  the row's clients' history, one op per line (lab.judges.history)
    races.json     the race driver's answers behind the timelines (lab.drivers.race_runs)
and prints the table on stdout; progress goes to stderr.

The gate (lab.judges.gate), exit status 1: a row contradicts its claim (a safe row oversold
or lost updates, its ledger disagrees with its answers, a "waits" strategy answered
busy early; an exposed row or a lease that oversells did not show its race; JMeter
produced no results), or its two witnesses disagree: the store's ledger says nothing
was oversold or lost and the clients' history (the JTL, with the store's counter read
after it) is not linearizable (lab.judges.linearize), or the reverse. Throughput is reported, never gated; rows within 20% of the
ceiling are marked driver_bound, unless a row beat it by more than 10%: then the
ceiling is reported suspect, with the rows that beat it, and no row is marked. Exit status 2: the run could not be
made (stockd not reachable or startable, a fact missing from /strategies, a needed
backend down, a number of instances other than --instances, unknown strategy, results
directory not writable, bad arguments).

When nothing answers at host:port (and host is local) it brings the private stack up
(scripts/stack.sh up), starts build/stockd in the background (log in
$STOCKD_RUN_DIR/stockd.log, pid in $STOCKD_RUN_DIR/stockd.pid) and stops it at the end
(with --keep-stockd, as make demo runs it, that stockd stays up for its live page, GET /,
until make stack-down); the stack is left running. With --instances N >= 2 it starts N instances behind a
private nginx listening on host:port instead (scripts/stack.sh instances-up N, instance
ports from STACK_STOCKD_PORT_BASE) and stops them and nginx at the end. With
STOCKD_ADMIN_TOKEN set, resets carry it (Authorization: Bearer) and so does the plan.

With --retrying-buyers N (COMPARE_RETRYING_BUYERS; lab.scaffold.retrying_mode; 0, the
default, leaves the run as it was) each strategy row also has, while it runs, N buyers
who retry every lost answer with an Idempotency-Key and N who retry without one, each
kind on a product of its own after the plan's, through the same host:port (RowBuyers):
no fault is injected, but a try's 0.3 s runs out in a lock row's queue. Each row gains
their double buys, and a strategy that claims keys fails its row with one (the race of
a strategy that does not claim safety is its own row's to show: racy_verdict).

Every flag also reads an environment variable (so `make compare THREADS=20` works);
an empty value means the default."""

import os
import sys
import time

from ..base.common import REPO, SetupError, comma_list, now_iso, slug, tail, write_text
from ..base.waiting import Periodic
from ..client import facts as facts_mod
from ..stack.prometheus import SCRAPE_S, Prometheus
from ..drivers import jmeter, race_runs
from ..judges import history, plan as plan_mod
from ..judges.gate import (ceiling_text, compare_verdict, mark_driver_bound, race_check,
                          with_witnesses)
from ..judges.settlement import SETTLED_IN, settled_account
from ..reports import compare_report, junit, tables
from ..scaffold.retrying_mode import (COLUMNS, RetryingClients, folded, retrying_options,
                                     table_columns)
from ..scaffold.runner import Runner


# Between two rows of the one JMeter run, a wait of one Prometheus scrape: a row
# shorter than a scrape would otherwise see, in the scrape after its end, the next
# row's load (its in-flight peak) or lock waits (its p99).
ROW_GAP_S = SCRAPE_S
# stockd's memory is read this often during the run: several times in a row of a
# second, one request to each instance's /metrics a time.
MEMORY_PERIOD_S = 0.25


def options(o):
    o.add("--strategies", ["STRATEGIES"], "", comma_list,
          "comma list; empty: all from GET /strategies")
    o.add("--threads", ["THREADS"], 100, int, "JMeter threads", 1)
    o.add("--loops", ["LOOPS"], 50, int, "requests per thread", 1)
    o.add("--rampup", ["RAMPUP"], 1, int, "seconds to start all threads", 0)
    o.add("--stock", ["STOCK"], 5000, int, "units at reset", 1)
    o.add("--qty", ["QTY"], 1, int, "units per request", 1)
    o.add("--hold-ms", ["HOLD_MS"], 0, int, "hold_ms of the normal rows", 0)
    o.add("--exposed-hold-ms", ["EXPOSED_HOLD_MS"], 20, int,
          "hold_ms of an exposed row (when its exposed_by names hold_ms)", 0)
    o.add("--exposed-ttl-ms", ["EXPOSED_TTL_MS"], 5, int,
          "ttl_ms of an exposed row (when its exposed_by names ttl_ms), shorter than the hold", 0)
    o.add("--exposed-pause-ms", ["EXPOSED_PAUSE_MS"], 20, int,
          "pause_ms of an exposed row (when its exposed_by names pause_ms)", 0)
    o.add("--exposed-requests", ["EXPOSED_REQUESTS"], 1000, int,
          "at most this many requests (rounded to whole loops) in an exposed row", 1)
    o.add("--instances", ["INSTANCES"], 1, int,
          "stockd instances behind host:port (>1 judges safe_multi)", 1)
    o.add("--product", ["PRODUCT"], 1001, int,
          "the first row's product id; each row has its own, this + its place in the plan", 1)
    o.add("--jmeter", ["JMETER"], os.path.join(REPO, "jmeter", "jmeter"), str, "the jmeter command")
    o.add("--jmeter-timeout", ["JMETER_TIMEOUT"], 900, int,
          "seconds a row may take before the JMeter run is stopped (that many per row)", 1)
    o.flag("--keep-stockd", "leave the stockd (or instances) this run started running at the "
           "end, for the live page (make demo); make stack-down stops them")
    retrying_options(o, "COMPARE_RETRYING_")


def check_instances(api, n):
    """The instance names answering at host:port; SetupError unless there are n."""
    names = api.instance_names(max(4, 3 * n))
    if not names:
        raise SetupError(f"nothing answered GET /health at {api.where()}")
    if None in names:
        raise SetupError(f"stockd at {api.where()} answers without an X-Stockd-Instance "
                         "header: cannot count its instances; refusing to judge")
    if len(names) != n:
        raise SetupError(f"told INSTANCES={n}, but {len(names)} distinct stockd instances "
                         f"answer at {api.where()} ({', '.join(sorted(names))}): "
                         "refusing to judge")
    return sorted(names)


class Comparison:
    def __init__(self, args, api, service, facts, selected, out_dir, say, prom=None):
        self.args, self.api, self.service, self.facts = args, api, service, facts
        self.selected, self.out_dir, self.say = selected, out_dir, say
        self.prom = prom

    def jmeter_props(self, row):
        a = self.args
        props = {"host": a.host, "port": a.port, "strategy": row.strategy or "none",
                 "product": row.product, "qty": a.qty, "threads": a.threads,
                 "loops": row.loops, "rampup": a.rampup}
        if row.kind == "calibration":
            props["path"] = plan_mod.CALIBRATION_PATH
        props.update(row.params)
        return props

    def reset(self, row):
        """Resets the row's own product to its stock: None when it worked (or the row
        sells nothing), else why not."""
        if row.kind == "calibration":
            return None
        extra = "".join(f", {k}={v}" for k, v in row.params.items() if v)
        self.say(f"{row.label}: reset product {row.product} to {row.stock}; "
                 f"{self.args.threads} threads x {row.loops} loops{extra}")
        return self.api.reset(row.product, row.stock)

    def run_plan(self, rows):
        """One JMeter run of `rows`, one after another, a scrape interval apart (each
        row's window then ends with a scrape of its own, not of the next row's load);
        each row's JTL split out of the run's. Returns the run (its rc, log, console)."""
        a, name = self.args, "jmeter-plan"
        path = os.path.join(self.out_dir, name + ".jmx")
        jmeter.write_plan(path, [(row.label, self.jmeter_props(row)) for row in rows],
                          gap_ms=int(ROW_GAP_S * 1000))
        self.say(f"one JMeter run of {len(rows)} rows: {os.path.basename(path)}")
        progress = jmeter.Progress(os.path.join(self.out_dir, name + ".jtl"),
                                   [row.label for row in rows], self.say,
                                   self.buyers.started if self.buyers.on else None)
        with MemorySampler(self.service) as memory, progress:
            run = jmeter.run(a.jmeter, self.out_dir, name, {}, a.jmeter_timeout * len(rows),
                             self.api.token, plan=path)
        jmeter.split_jtl(run.jtl, {row.label: self.row_jtl(row) for row in rows})
        if os.path.exists(run.jtl):
            os.unlink(run.jtl)  # every line is in its row's JTL now
        self.memory = memory
        return run

    def row_jtl(self, row):
        return os.path.join(self.out_dir, slug(row.label) + ".jtl")

    def run_row(self, row, reset_error, run):
        a, strategy = self.args, self.facts.by_name.get(row.strategy)
        jtl = self.row_jtl(row)
        res = jmeter.read_jtl(jtl) if not reset_error else jmeter.Results()
        acct = self.api.account(row.product, strategy.store) if strategy else None
        settled_problem = None
        if strategy and strategy.settles and acct:
            acct, settled_problem = settled_account(self.api, row.product, acct)
        verdict, reason = compare_verdict(row, strategy, res, acct, a.qty, self.facts.settings)
        if settled_problem:
            verdict, reason = "fail", settled_problem
        elif strategy and strategy.settles:
            reason += "; judged by MySQL after the stream drained"
        hist = self.history(row, jtl, res, acct, reset_error)
        verdict, reason = with_witnesses(verdict, reason, acct, hist)
        if reset_error:
            verdict, reason = "fail", f"not run: {reset_error}"
        else:
            verdict, reason = with_jmeter(verdict, reason, run, res, a.jmeter_timeout)
        retrying = self.buyers.finish(row)
        verdict, reason = folded(verdict, reason, retrying)
        self.say(f"{row.label}: {verdict.upper()} - {reason} "
                 f"({res.requests} requests in {res.duration_s or 0:.1f}s)")
        window = (res.first_s, res.last_s) if res.first_s is not None else None
        r = self.result(row, strategy, res, acct or {}, verdict, reason, jtl, window)
        r.update(hist)
        r.update(retrying)
        r["window"] = window
        return r

    def history(self, row, jtl, res, acct, reset_error):
        """The row's second witness: its JTL as a history (streamed to
        history-<row>.jsonl) with the store's counter read after it, checked."""
        if row.kind == "calibration":
            return history.not_judged("the calibration sells nothing")
        if reset_error or res.requests == 0:
            return history.not_judged("no requests")
        path = os.path.join(self.out_dir, "history-" + slug(row.label) + ".jsonl")
        ops = history.from_jtl(jtl, path, self.args.qty)
        facts = self.facts.by_name.get(row.strategy)
        ops = history.for_undersells(ops, facts and facts.undersells, self.args.qty)
        hist = history.judge_final(row.stock, ops, (acct or {}).get("remaining"), path)
        self.say(f"{row.label}: history ({hist['history_ops']} ops, {hist['history_s']} s): "
                 f"{hist['history']}")
        return hist

    def inside_figures(self, rows):
        """What Prometheus saw inside stockd during each row: the peak of requests in
        flight, and the lock wait p99 of a lock strategy's row."""
        time.sleep(1.5 * SCRAPE_S)  # the last row's final scrape
        for r in rows:
            window = r.pop("window")
            if window is None:  # no request answered: nothing of its own to see
                r["peak_in_flight"] = r["lock_wait_p99_ms"] = None
                continue
            t0, t1 = window
            strategy = self.facts.by_name.get(r["strategy"])
            r["peak_in_flight"] = self.prom.peak_in_flight(t0, t1) if self.prom else None
            r["lock_wait_p99_ms"] = (self.prom.lock_wait_p99_ms(strategy.name, t0, t1)
                                     if self.prom and strategy and strategy.lock else None)

    def result(self, row, strategy, res, acct, verdict, reason, jtl, window):
        a = self.args
        rss, by_instance = self.memory.after(window) if window else self.service.memory()
        r = {"label": row.label, "strategy": row.strategy, "kind": row.kind,
             "store": strategy.store if strategy else None, "instances": a.instances,
             "threads": a.threads, "loops": row.loops, "requests": res.requests, "qty": a.qty,
             "stock": None if row.kind == "calibration" else row.stock,
             "hold_ms": row.params.get("hold_ms", 0), "ttl_ms": row.params.get("ttl_ms", 0),
             "pause_ms": row.params.get("pause_ms", 0),
             "store_sold": acct.get("sold"), "oversold": acct.get("oversold"),
             "lost_updates": acct.get("lost_updates"), "remaining": acct.get("remaining"),
             "throughput_rps": res.throughput_rps, "p50_ms": res.p50_ms, "p95_ms": res.p95_ms,
             "p99_ms": res.p99_ms, "max_ms": res.max_ms, "duration_s": res.duration_s,
             "stockd_rss_kib": rss, "stockd_rss_by_instance": by_instance,
             "instances_seen": sorted(res.instances - {"none"}),
             "expected_safe": row.expected_safe, "verdict": verdict, "reason": reason,
             "jtl": os.path.basename(jtl)}
        r.update(res.outcomes.fields())
        r["reply_bytes"] = res.reply_bytes
        return r

    def run(self):
        """Every row's product reset, then one JMeter run of the rows whose reset
        worked, then each row read and judged."""
        planned = plan_mod.plan(self.args, self.selected)
        for i, row in enumerate(planned):
            row.product = self.args.product + i  # its own: no reset between rows
        resets = [self.reset(row) for row in planned]
        ran = [row for row, e in zip(planned, resets) if not e]
        self.buyers = RowBuyers(self, ran, self.args.product + len(planned))
        try:
            run = self.run_plan(ran)
        finally:
            self.buyers.plan_over()
        rows = [self.run_row(row, e, run) for row, e in zip(planned, resets)]
        self.inside_figures(rows)
        return rows, judge_ceiling(rows)


class RowBuyers:
    """The comparison's retrying buyers (lab.scaffold.retrying_mode; none unless asked
    for): each strategy row's on a product pair of its own, from `first` on, through
    the same host:port as JMeter, while its row runs. Every row runs in one JMeter
    process, so a row's window is seen from outside: its buyers start when its first
    answer reaches the JTL and stop when the next row's does, or when the plan ends;
    both ends late by the JTL's buffering and the look taken every second. Their
    figures are read once the plan is over."""

    def __init__(self, comparison, rows, first):
        c = comparison
        self.args, self.api, self.facts, self.out_dir = c.args, c.api, c.facts, c.out_dir
        claims = {s.name: s.idempotent for s in c.facts.strategies}
        selling = [row for row in rows if row.kind != "calibration"]
        self.rows = {row.label: (row, first + 2 * i) for i, row in enumerate(selling)}
        racy = {s.name: not s.safe_for(c.args.instances) for s in c.facts.strategies}
        self.clients = {label: RetryingClients(c.args, claims, racy=racy[row.strategy])
                        for label, (row, _) in self.rows.items()}
        self.running, self.errors = None, {}

    @property
    def on(self):
        return self.args.retrying_buyers > 0

    def started(self, label):
        """A row's first answer reached the JTL: the previous row's buyers stop, its
        own start. Buyers that cannot start stop no run: their row fails once read."""
        self.plan_over()
        if label not in self.rows:
            return
        row, product = self.rows[label]
        strategy = self.facts.by_name[row.strategy]
        store = SETTLED_IN if strategy.settles else strategy.store
        self.running = self.clients[label]
        try:
            self.running.start(self.args.host, self.args.port, self.api, strategy.name,
                               store, product, settles=bool(strategy.settles))
        except SetupError as e:
            self.errors[label] = str(e)

    def plan_over(self):
        if self.running:
            self.running.stop()
            self.running = None

    def finish(self, row):
        """The row's retrying figures and verdict ({} when the row had no buyers)."""
        if not self.on or row.label not in self.rows:
            return {}
        if row.label in self.errors:
            return {"retry_verdict": "fail",
                    "retry_reason": f"its retrying buyers did not start: {self.errors[row.label]}"}
        clients = self.clients[row.label]
        if not clients.buyers:
            return {"retry_verdict": "fail",
                    "retry_reason": "its retrying buyers never started: no answer of the "
                                    "row reached the JTL"}
        return clients.finish(self.api, self.out_dir, slug(row.label))


def with_jmeter(verdict, reason, run, res, timeout):
    """A row's verdict and reason with what the JMeter run did wrong: stopped after
    `timeout` s a row (the row fails), or exited non-zero leaving the row no request
    (its status and last console line named in the reason)."""
    if run.rc == "timeout":
        return "fail", f"JMeter timed out after {timeout}s a row; {reason}"
    if run.rc != 0 and res.requests == 0:
        last = [ln.strip() for ln in tail(run.out, 5).splitlines() if ln.strip()]
        reason += (f" (jmeter exit status {run.rc}: {last[-1][:160] if last else 'no output'}"
                   f"; see {os.path.basename(run.out)})")
    return verdict, reason


class MemorySampler(Periodic):
    """stockd's resident memory sampled in the background while JMeter runs, the rows
    following each other too closely to be read between them: after(window) is what
    a row left, as it was read once the row was over."""

    def __init__(self, service):
        super().__init__(MEMORY_PERIOD_S)
        self.service, self.samples = service, []

    def tick(self):
        rss, by_instance = self.service.memory()
        self.samples.append((time.time(), rss, by_instance))

    def after(self, window):
        """(KiB, {instance: KiB}) of the first sample after the window's end (in the
        gap before the next row), else of the last one before it; (None, {}) when
        none was read."""
        end = window[1]
        later = [s for s in self.samples if s[0] > end]
        earlier = [s for s in self.samples if s[0] <= end]
        sample = later[0] if later else (earlier[-1] if earlier else (0, None, {}))
        return sample[1], sample[2]


def judge_ceiling(rows):
    """Marks the rows driver-bound against the better calibration, or the ceiling
    suspect (in that calibration's reason); returns the ceiling's figures."""
    samples = [r for r in rows if r["kind"] == "calibration" and r["verdict"] == "pass"]
    best = max(samples, key=lambda r: r["throughput_rps"], default=None)
    beaten = mark_driver_bound(rows, best and best["throughput_rps"])
    if beaten:
        best["reason"] += "; " + ceiling_text(beaten)
    return ceiling_figures(best, samples, beaten)


def ceiling_figures(best, samples, beaten):
    """The driver's ceiling as params.json and the report tell it: what the calibrations
    requested, each one's throughput, the better one's reply size, whether it held."""
    if not best:
        return {"driver_ceiling_rps": None}
    return {"driver_ceiling_rps": best["throughput_rps"],
            "driver_ceiling_samples_rps": [r["throughput_rps"] for r in samples],
            "driver_ceiling_request": f"GET {plan_mod.CALIBRATION_PATH}",
            "driver_ceiling_reply_bytes": best.get("reply_bytes"),
            "driver_ceiling_holds": not beaten,
            "driver_ceiling_beaten_by": {r["label"]: r["throughput_vs_ceiling"] for r in beaten}}


def write_outputs(out_dir, rows, params, races=None, retrying=False):
    """Every file of the run; retrying: the retrying buyers' columns in results.csv."""
    path = os.path.join(out_dir, "report.html")
    write_text(os.path.join(out_dir, "results.json"), tables.json_text(rows))
    write_text(os.path.join(out_dir, "params.json"), tables.json_text(params))
    if races:
        write_text(os.path.join(out_dir, "races.json"), tables.json_text(races))
    write_text(os.path.join(out_dir, "results.csv"),
               tables.csv_text(rows, compare_report.ROW_FIELDS + (COLUMNS if retrying else [])))
    write_text(path, compare_report.render(rows, params, races))
    junit.write(os.path.join(out_dir, "junit.xml"), "stockd.compare", rows,
                lambda r: r["label"], lambda r: r.get("duration_s"), params)
    return path


def run_params(args, selected, service, names, ceiling, peak, out_dir, started):
    return {
        "started": started, "finished": now_iso(), "host": args.host, "port": args.port,
        "instances": args.instances, "instance_names": names, "threads": args.threads,
        "loops": args.loops, "rampup": args.rampup, "stock": args.stock, "qty": args.qty,
        "hold_ms": args.hold_ms, "exposed_hold_ms": args.exposed_hold_ms,
        "exposed_ttl_ms": args.exposed_ttl_ms, "exposed_pause_ms": args.exposed_pause_ms,
        "product": args.product, "strategies": [s.name for s in selected],
        "claim": facts_mod.claim_name(args.instances), **ceiling,
        "stockd_started_by_compare": service.started, "jmeter": jmeter.version(out_dir),
        "stockd_memory_source": service.memory_source(), "stockd_peak_rss_kib": peak,
    }


def peak_memory(service, rows):
    """Peak resident KiB over the run: the stockd we started's VmHWM, else the
    largest total any row recorded."""
    own = service.own_memory_kib("VmHWM")
    if own is not None:
        return own
    seen = [r["stockd_rss_kib"] for r in rows if r.get("stockd_rss_kib")]
    return max(seen) if seen else None


def kept(api, service):
    """What --keep-stockd leaves: the live page's URL, and how to stop what serves it."""
    line = f"The live page: http://{api.where()}/"
    if service.instances_started:
        line += (" (the stockd instances and nginx this run started keep running for it; "
                 "make stack-down stops them)")
    elif service.started:
        line += " (the stockd this run started keeps running for it; make stack-down stops it)"
    return line


def work(run):
    args, api, service, say = run.args, run.api, run.service, run.say
    say(f"watch it live: http://{api.where()}/")
    facts = facts_mod.parse(api.strategies().body)
    selected = facts.select(args.strategies)
    facts_mod.check_needs(api, facts, selected)
    names = check_instances(api, args.instances)
    out_dir = run.out_dir()
    say(f"results in {out_dir}")
    prom = Prometheus.up(service.scrape_targets(), say)
    rows, ceiling = Comparison(args, api, service, facts, selected, out_dir, say, prom).run()
    races = race_runs.run(api, facts, selected, args.instances, say, race_check)
    peak = peak_memory(service, rows)
    seen = sorted({n for r in rows for n in r["instances_seen"]})
    params = run_params(args, selected, service, seen or names, ceiling, peak, out_dir,
                        run.started)
    page = write_outputs(out_dir, rows, params, races, args.retrying_buyers > 0)
    return rows, page, peak, ceiling, seen


def ceiling_line(rows, ceiling):
    """The driver's ceiling in one line: what it requested, each reply's size, and
    the driver-bound rows, or why none is called so."""
    samples = " and ".join(f"{x:.0f}" for x in ceiling["driver_ceiling_samples_rps"])
    said = (f"driver ceiling (calibration, {ceiling['driver_ceiling_request']}, "
            f"{ceiling['driver_ceiling_reply_bytes']} bytes a reply): "
            f"{ceiling['driver_ceiling_rps']:.0f} req/s, the better of {samples}; ")
    if not ceiling["driver_ceiling_holds"]:
        return said + ceiling_text([r for r in rows if r["label"] in
                                    ceiling["driver_ceiling_beaten_by"]])
    bound = sum(1 for r in rows if r.get("driver_bound"))
    return said + f"{bound} row(s) driver-bound (within 20% of it)"


def report(run, done):
    rows, path, peak, ceiling, seen = done
    args = run.args
    retrying = table_columns() if args.retrying_buyers else []
    print(tables.text_table(rows, compare_report.TABLE + retrying))
    failed = [r for r in rows if r["verdict"] != "pass"]
    print()
    for r in rows:
        if r.get("history_ops") is not None:
            print(f"history {r['label']}: {r['history']}")
    for r in failed:
        print(f"FAIL {r['label']}: {r['reason']}")
    if ceiling["driver_ceiling_rps"]:
        print(ceiling_line(rows, ceiling))
    if peak:
        print(f"stockd peak resident memory over the run: {peak / 1024:.1f} MiB")
    print(f"{len(rows) - len(failed)}/{len(rows)} rows pass; report: {path}")
    if args.keep_stockd:
        print(kept(run.api, run.service))
    if seen and len(seen) != args.instances:
        print(f"told INSTANCES={args.instances}, but the plan's answers came from {len(seen)} "
              f"distinct instances ({', '.join(seen)}): refusing to judge")
        return 2
    return 1 if failed else 0


RUNNER = Runner("compare", __doc__, options=options, work=work, report=report,
                host="where stockd (or its balancer) listens", port=True, results="",
                instances=lambda args: args.instances, keep=lambda args: args.keep_stockd)
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
