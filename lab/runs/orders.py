"""Orders under faults (`make orders`): holds that expire, payments that come late or
twice, stock returned exactly once, per strategy, expiry mechanism and fault.

A row is (strategy, expiry mechanism, fault). The mechanisms and their facts come from
GET /expiry (lag_ms: the lag each promises between a deadline and the return, or none;
strands_when: the fault that strands units); each is run with the first strategy of
its store whose `orders` fact is true and that claims safety with several instances
(GET /strategies). Buyers (lab.drivers.order_buyers)
hold, then pay with a probability after a delay drawn around the TTL, their callbacks
delivered 1 to 5 times (some at once, some late), cancel a few and abandon the rest,
for --seconds, against the row's own stockd instances (A on --port, B on the next),
while the fault happens:

  none          one instance
  two-sweepers  two instances, both sweeping (and subscribing) at once, the buyers
                split between them
  sweeper-off   two instances; mid-run B is restarted with --sweep-ms 0 (it sells on,
                it no longer sweeps): A's sweeper alone keeps the promise
  stopped       one instance, killed (-9) mid-run, whatever its sweeper was doing, and
                started again TTL + 1 s later: every sweeper and subscriber gone while
                holds expire. The row whose
                mechanism states a stranding fault (no subscriber connected when the
                key expires) must strand units, and says so; a sweeper catches up
                once back (its lag widened by the time it was down)
  deadline-burst  two instances; every first callback sent at its order's deadline
  mysql-restart   (a MySQL mechanism) MariaDB killed mid-run and started again; the
                lag widened by its downtime
  sentinel-failover  (a Redis mechanism) two instances following the stack's Sentinel
                group; mid-run its primary is killed, Sentinel promotes the replica, the
                dead server comes back as a replica. The lag widened by the time to the
                promotion; a mechanism that names a stranding fault may strand (its
                subscriber reconnects); a strategy whose failover fact says it loses
                acknowledged writes has what they explain said, not failed
  clock-jump    one instance whose wall clock (build/clockshim.so) jumps a minute
                forward mid-run, then a minute back, then home, half a TTL each:
                expiry is decided by the store's clock, so no hold may be released
                early by it
  returns-race  (each store's first mechanism) half the buyers' orders cancelled,
                each cancel with hold_ms: a return goes through its order's strategy,
                so an unsafe strategy's returns race each other. The cancels go in
                pairs sent at once, and the buyers write one at a time beside them
                (lab.drivers.order_buyers); the holds' TTL outlasts the buying, so
                every expiry's return comes after the last sale: no sale is ever
                overwritten, and one return of every pair is. Run with the store's
                first unsafe strategy that holds orders (exposed by hold_ms), judged
                "unsafe, and the race showed" (units vanished), and, beside it, with
                the safe strategy, which serialises each pair and keeps every unit

Then the row settles (the last deadline plus the mechanism's lag, or 1 s when it
promises none) and is judged (lab.judges.orders) from the clients' history, every
order's record (GET /orders/{ID}) and the store's accounting (GET /stock/{P}): each
unit in one place, an order ends at most once, never returned before its deadline nor
later than deadline + lag, every captured payment the order's, every refused payment
one refund due, duplicates without effect.

Writes results/orders-<timestamp>/ (orders.json, orders.csv, orders.md, junit.xml,
timeline.svg: an order whose payment raced its expiry and lost, history-<row>.jsonl
and records-<row>.json: each row's clients' history and its orders' records) and
points results/orders-latest at it. Exit status 1 when a row breaks a check, 2 when
the run cannot be made or a fault did not take.

--quick (the test gate): each mechanism that promises a lag with two sweepers (the
first one also alone, and its unsafe strategy's returns racing, for a shorter while),
and each that states a stranding fault, stopped; 3 s of buyers a row (less for the race)."""

import json
import os
import subprocess
import sys
import threading
import time

from ..base.common import SetupError, comma_list, now_iso, slug, write_text
from ..client import facts as facts_mod, orders as orders_client
from ..stack.instances import Instance
from ..stack.nodes import clockshim, set_clock_file
from ..stack.service import run_dir, stack_env, stack_script
from ..drivers.order_buyers import OrderBuyers, Plan
from ..nemesis.faults import OUTAGE, Fault, Injection
from ..nemesis.redis_group import Group, sentinel_env
from ..judges import orders as judge_mod
from ..reports import orders_report
from ..scaffold.runner import Runner, report_fact_rows

FAULTS = ("none", "two-sweepers", "sweeper-off", "stopped", "deadline-burst",
          "mysql-restart", "sentinel-failover", "clock-jump", "returns-race")
RACE = "returns-race"
RACE_HOLD_MS = 50     # each racing cancel's stay inside its strategy's critical section
RACE_CANCEL_P = 0.5   # the racing rows' buyers cancel this often...
RACE_PAY_P = 0.2      # ...and pay this often
RACE_QUICK_SECONDS = 2.0  # the gate's racing row: each pair races, a few pairs suffice
FAULT_STORE = {"mysql-restart": "mysql", "sentinel-failover": "redis"}  # others: any
CLOCK_JUMP_MS = 60_000  # far past any hold's TTL: a release by stockd's clock would show
TWO = ("two-sweepers", "sweeper-off", "deadline-burst", "sentinel-failover")
SETTLE_MARGIN_MS = 500
DOWN_MARGIN_S = 1.0  # a stopped instance stays down this long past a TTL
# The gate's rows: twice the default TTL, so that the holds of the first half expire
# while buyers still pay and hold (both sweepers racing them, or the stopped row's one
# instance killed a third of the way in and down past a TTL), and the rest after.
QUICK_SECONDS = 3.0


def options(o):
    o.add("--faults", ["ORDERS_FAULTS"], "", comma_list,
          f"comma list of {', '.join(FAULTS)}; empty: all (the short list with --quick)")
    o.add("--expiry", ["ORDERS_EXPIRY"], "", comma_list,
          "comma list of expiry mechanisms (GET /expiry); empty: every one")
    o.add("--seconds", ["ORDERS_SECONDS"], 6, float, "how long the buyers hold, per row", 1)
    o.add("--buyers", ["ORDERS_BUYERS"], 16, int, "concurrent buyers per row", 1)
    o.add("--ttl-ms", ["ORDERS_TTL_MS"], 1500, int, "each hold's ttl_ms", 100)
    o.add("--pay-p", ["ORDERS_PAY_P"], 0.6, float, "the probability that a buyer pays")
    o.add("--cancel-p", ["ORDERS_CANCEL_P"], 0.1, float, "... that a buyer cancels")
    o.add("--stock", ["ORDERS_STOCK"], 5000, int, "each row's product's stock", 1)
    o.add("--product", ["ORDERS_PRODUCT"], 4601, int, "first product id (one per row)", 1)
    o.flag("--quick", "the test gate's version: two sweepers, one alone, the stranding row; "
           f"{QUICK_SECONDS:g} s a row")


def after_parse(ns, error):
    if ns.quick:
        ns.seconds = QUICK_SECONDS


def quick_faults(mechanism, first):
    """The gate's rows of a mechanism: stopped where it states a stranding fault, else
    two sweepers at once (and, for the first mechanism, one alone and the race)."""
    if mechanism.strands_when:
        return ["stopped"]
    return (["none"] if first else []) + ["two-sweepers"] + ([RACE] if first else [])


def fault_fits(fault, mechanism, first_of_store):
    """Whether `fault` is a row of `mechanism`: a store's fault under that store's
    mechanisms, the race under each store's first."""
    if fault == RACE:
        return first_of_store
    return FAULT_STORE.get(fault, mechanism.store) == mechanism.store


def planned(mechanisms, args):
    """[(mechanism, fault)] in the order they run."""
    unknown = sorted(set(args.expiry) - {m.name for m in mechanisms})
    bad = sorted(set(args.faults) - set(FAULTS))
    said = ([f"expiry {', '.join(unknown)}"] if unknown else []) + \
        ([f"faults {', '.join(bad)}"] if bad else [])
    if said:
        raise SetupError("unknown " + " ".join(said))
    chosen = [m for m in mechanisms if not args.expiry or m.name in args.expiry]
    firsts = {next(x for x in mechanisms if x.store == m.store).name for m in mechanisms}
    rows = []
    for i, m in enumerate(chosen):
        if args.quick and not args.faults:
            faults = quick_faults(m, i == 0)
        else:
            faults = [f for f in (args.faults or FAULTS) if fault_fits(f, m, m.name in firsts)]
        rows += [(m, f) for f in faults]
    if not rows:
        raise SetupError("no row to run (no expiry mechanism or fault chosen)")
    return rows


def strategy_for(facts, mechanism):
    """The first strategy of the mechanism's store that holds orders and claims safety
    with several instances: the row judges the mechanism, not a sale's race."""
    for s in facts.strategies:
        if s.orders and s.safe_multi and s.store == mechanism.store:
            return s
    raise SetupError(f"no strategy of store {mechanism.store} that claims safety holds "
                     f"orders (the `orders` fact of GET /strategies), for {mechanism.name}")


def unsafe_for(facts, mechanism):
    """The first strategy of the mechanism's store that holds orders, claims no safety
    even with one instance and is exposed by hold_ms: the racing row's."""
    for s in facts.strategies:
        if s.orders and not s.safe_single and "hold_ms" in s.exposed_by and \
                s.store == mechanism.store:
            return s
    raise SetupError(f"no unsafe strategy of store {mechanism.store} exposed by hold_ms "
                     f"holds orders, for the {RACE} row of {mechanism.name}")


def strategies_of(facts, mechanism, fault, quick):
    """The strategies a (mechanism, fault) row runs with: the safe one; for the race,
    the unsafe one first, then (but in the gate) the safe one beside it."""
    if fault != RACE:
        return [strategy_for(facts, mechanism)]
    return [unsafe_for(facts, mechanism)] + ([] if quick else [strategy_for(facts, mechanism)])


class Row:
    """One row: its instances, its buyers, its fault, its settle and its verdict."""

    def __init__(self, args, env, strategy, mechanism, fault, product):
        self.args = args
        self.env = {**env, **sentinel_env()} if fault == "sentinel-failover" else env
        self.strategy, self.mechanism, self.fault = strategy, mechanism, fault
        self.product = product
        self.instances = []
        self.down_ms = 0  # how long every sweeper of the row was gone
        self.fault_error = None

    def instance(self, name, port, options=()):
        env = self.env
        if self.fault == "clock-jump":
            env = {**env, "LD_PRELOAD": clockshim(), "CLOCKSHIM_FILE": self.clock_file()}
        inst = Instance(name, port, env, list(options), self.out_dir)
        inst.start()
        return inst

    def clock_file(self):
        return os.path.join(self.out_dir, "clock-offset-ms")

    def start(self, out_dir):
        self.out_dir = out_dir
        if self.fault == "clock-jump":
            set_clock_file(self.clock_file(), 0)
        count = 2 if self.fault in TWO else 1
        self.instances = [self.instance(n, self.args.port + i)
                          for i, n in enumerate("AB"[:count])]
        self.instances[0].api.must_reset(self.product, self.args.stock)

    def stop(self):
        for inst in self.instances:
            inst.stop()

    def apply_fault(self):
        """The fault, mid-run (on its own thread); any error kept for the verdict."""
        act = {"sweeper-off": self.sweeper_off, "stopped": self.stopped,
               "mysql-restart": self.mysql_restart, "sentinel-failover": self.fail_over,
               "clock-jump": self.clock_jump}.get(self.fault)
        try:
            time.sleep(self.seconds() / 3.0)
            if act:
                act()
        except SetupError as e:
            self.fault_error = str(e)

    def sweeper_off(self):
        self.instances[1].stop()
        self.instances[1] = self.instance("B", self.args.port + 1, ["--sweep-ms=0"])

    def stopped(self):
        t0 = time.monotonic()
        self.instances[0].kill()
        time.sleep(self.args.ttl_ms / 1000.0 + DOWN_MARGIN_S)
        self.instances[0] = self.instance("A", self.args.port)
        self.down_ms = int((time.monotonic() - t0) * 1000)

    def mysql_restart(self):
        fault = Fault("mysql-restart", "kill -9 MariaDB, restart it", "mysql", ["mysql"],
                      "kill-one", "start-one", 0, OUTAGE)
        injection = Injection(fault, self.env)
        t0 = injection.inject()
        back = injection.restore()
        if back is None:
            raise SetupError("MariaDB did not answer again after its restart")
        self.down_ms = int((back - t0) * 1000)

    def clock_jump(self):
        for offset in (CLOCK_JUMP_MS, -CLOCK_JUMP_MS, 0):
            set_clock_file(self.clock_file(), offset)
            time.sleep(self.args.ttl_ms / 2000.0)

    def fail_over(self):
        """The group's primary killed, the replica promoted, the dead one back."""
        group = Group(self.env)
        group.watch()
        try:
            primary, replica = group.settled()
            killed = group.kill(primary)
            promoted = group.wait_promoted(replica)
            if promoted is None:
                raise SetupError(f"Sentinel did not promote the replica {replica}")
            self.down_ms = int((promoted - killed) * 1000)
            group.restart(primary)
        finally:
            group.unwatch()

    def seconds(self):
        quick = self.fault == RACE and self.args.quick
        return min(self.args.seconds, RACE_QUICK_SECONDS) if quick else self.args.seconds

    def ttl_ms(self):
        """The holds' TTL: --ttl-ms, and on the racing row the buying's time besides,
        so that every deadline, and every expiry's return, comes after its last sale."""
        racing = int(self.seconds() * 1000) if self.fault == RACE else 0
        return racing + self.args.ttl_ms

    def plan(self):
        racing = self.fault == RACE
        return Plan(self.strategy.name, self.product, ttl_ms=self.ttl_ms(),
                    expiry=self.mechanism.name,
                    pay_p=RACE_PAY_P if racing else self.args.pay_p,
                    cancel_p=RACE_CANCEL_P if racing else self.args.cancel_p,
                    at_deadline=self.fault == "deadline-burst", seed=self.product,
                    cancel_hold_ms=RACE_HOLD_MS if racing else 0)

    def drive(self):
        buyers = OrderBuyers([i.api.port for i in self.instances], self.plan(),
                             self.args.buyers)
        faulting = threading.Thread(target=self.apply_fault, daemon=True)
        buyers.start()
        faulting.start()
        try:
            time.sleep(self.seconds())
            faulting.join()
            return buyers.finish()
        except BaseException:
            buyers.abort()
            raise

    def settle(self, history):
        """Wait until the last deadline plus the mechanism's lag has passed."""
        deadlines = [op["expires_at_ms"] for op in history
                     if op["kind"] == "hold" and isinstance(op.get("expires_at_ms"), int)]
        if not deadlines:
            raise SetupError(f"{self.label()}: no hold answered 201")
        until = (max(deadlines) + judge_mod.grace_ms(self.mechanism.lag_ms) + self.down_ms
                 + SETTLE_MARGIN_MS)
        time.sleep(max(0.0, until / 1000.0 - time.time()))

    def label(self):
        return f"{self.strategy.name} {self.mechanism.name} {self.fault}"

    def judged(self, history):
        api = self.instances[0].api
        records = orders_client.records(api, history)
        stock = api.account(self.product, self.mechanism.store)
        if stock is None:
            raise SetupError(f"GET /stock/{self.product} has no {self.mechanism.store} figures")
        failover = self.fault == "sentinel-failover"
        facts = {"lag_ms": self.mechanism.lag_ms, "strands_when": self.mechanism.strands_when,
                 "unsafe": not self.strategy.safe_single,
                 "strands": self.fault == "stopped" and bool(self.mechanism.strands_when),
                 "may_strand": failover and bool(self.mechanism.strands_when),
                 "loses_writes": failover and self.strategy.failover == "loses_sales",
                 "lag_allowance_ms": self.down_ms}
        verdict = judge_mod.judge(facts, self.args.stock, history, records, stock,
                                  int(time.time() * 1000))
        if self.fault_error:
            verdict.update(verdict="setup", reason=f"the fault failed: {self.fault_error}")
        return verdict, records


def write_witnesses(out_dir, label, history, records):
    """The row's clients' history (history-<row>.jsonl, one op a line) and the store's
    records of its orders (records-<row>.json)."""
    with open(os.path.join(out_dir, f"history-{slug(label)}.jsonl"), "w",
              encoding="utf-8") as f:
        for op in history:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")
    write_text(os.path.join(out_dir, f"records-{slug(label)}.json"), json.dumps(records))


def run_row(run, env, out_dir, strategy, mechanism, fault, product):
    row = Row(run.args, env, strategy, mechanism, fault, product)
    run.say(f"{row.label()}: {run.args.buyers} buyers for {row.seconds():g} s")
    t0 = time.monotonic()
    try:
        row.start(out_dir)
        history = row.drive()
        row.settle(history)
        verdict, records = row.judged(history)
    finally:
        row.stop()
    write_witnesses(out_dir, row.label(), history, records)
    out = {"strategy": strategy.name, "expiry": mechanism.name, "fault": fault,
           "product": product, "down_ms": row.down_ms, **verdict,
           "seconds": round(time.monotonic() - t0, 1)}
    run.say(f"{row.label()}: {out['verdict']}: {out['reason']}")
    return out, orders_report.race_of(history, records, out)


def work(run):
    args, say = run.args, run.say
    say("scripts/stack.sh up")
    if subprocess.run([stack_script(), "up"], stdout=sys.stderr, stderr=sys.stderr).returncode:
        raise SetupError("scripts/stack.sh up failed")
    env = stack_env()
    out_dir = run.out_dir()
    os.makedirs(run_dir(), exist_ok=True)
    probe = Instance("probe", args.port, env, [], out_dir)
    probe.start()
    try:
        facts = facts_mod.parse(probe.api.strategies().body)
        plan = [(s, m, f) for m, f in planned(orders_client.read_mechanisms(probe.api), args)
                for s in strategies_of(facts, m, f, args.quick)]
    finally:
        probe.stop()
    rows, race = [], None
    for i, (s, m, f) in enumerate(plan):
        row, raced = run_row(run, env, out_dir, s, m, f, args.product + i)
        rows.append(row)
        race = race or raced
    doc = {"started": run.started, "finished": now_iso(), "seconds": round(run.elapsed(), 1),
           "quick": args.quick, "ttl_ms": args.ttl_ms, "buyers": args.buyers,
           "rows": rows, "race": race}
    orders_report.write(out_dir, doc)
    return rows, out_dir


def report(run, done):
    return report_fact_rows(run, done, orders_report.COLUMNS, "checks",
                            orders_report.name_of)


RUNNER = Runner("orders", __doc__, options=options, after_parse=after_parse, work=work,
                report=report,
                port="instance A's port; B listens on the next (nothing may answer there)",
                results="orders-")
main, parse_args = RUNNER.main, RUNNER.parse
