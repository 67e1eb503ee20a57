"""Redis primary failover (`make failover`): what a Sentinel-promoted replica does to
every strategy that touches Redis, with the dangerous window made to happen every run.

The window is the one the seed articles argue about: a write reaches the primary but
not the replica, the primary dies, Sentinel promotes the replica, a second client
comes. lab.nemesis.redis_group makes it happen on demand (the replica held back with CLIENT
PAUSE WRITE, released once its link to the dead primary is down). Two stockd
instances follow the group through its Sentinels (--redis-sentinel): A, the first
client's, and B, the second client's and the probe's. Each row runs the sequence its
strategy's kind calls for and is judged against its `failover` fact:

  sales      (a strategy whose stock lives in Redis) --sales sales answered 200 by A
             while the replica is held back; then the failover. "Acknowledged, lost"
             is what those 200s sold minus what the new primary's ledger holds:
             loses_sales rows must lose some, safe rows none.
  holder     (a lock around the MySQL sale) A's request takes the lock on the primary,
             reads the stock (1 unit) and stays between its read and its write
             (hold_ms); there the run freezes instance A (SIGSTOP), kills the primary,
             lets Sentinel promote the replica, and sends B's request, which takes the
             same lock on the new primary and sells; then it thaws A, which writes
             too. two_holders rows must oversell, safe rows must not.
  quorum     (Redlock: independent servers, not a replicated group) under load, one of the
             three servers is killed: it must go on selling and oversell nothing.

Once a majority of the Sentinels name the promoted replica, the dead server is
restarted, as a supervisor would, and comes back as the new primary's replica. Measured
on every row of the group: from the primary's death to the promotion (the replica says
it is the primary and a Sentinel names it), to the replica's return and to the first
200 through the new primary (B's probe, one sale every 50 ms on a product of its own:
goal within 2 s of the promotion, or of the replica's return for a row that waits for
a replica, without restarting stockd), and every answer before it (503, within the
deadline plus --margin-ms).

Writes results/failover-<timestamp>/ (failover.json, failover.csv, failover.md with
the strategy x {plain load, lease expiry, frozen holder, primary failover} table,
timeline.svg of the first two-holder row) and points results/failover-latest at it.
Exit status 1 when a row contradicts its fact, 2 when the run cannot be made or a row
could not be set up twice (lab.scaffold.failover_window: a row whose group did not do
what it asked is run once more, then reported as setup, apart from the verdicts).

--quick (the test gate): the first row of each kind and fact.

--retrying-buyers N (FAILOVER_RETRYING_BUYERS; lab.scaffold.retrying_mode): each row
also runs N buyers who retry every lost answer through B with an Idempotency-Key and N
who retry without one, from just before its fault until the group is whole again, each
kind on a product of its own (after every row's pair). The row gains their double
buys, and a strategy that claims keys fails the row with one; a loses_sales row loses
keys with their sales, so its keys are judged by their double buys and unanswered
purchases only (lab.scaffold.retrying_mode.lossy_verdict), and an unsafe strategy's
race is left to its own row (racy_verdict)."""

import os
import subprocess
import sys

from ..base.common import SetupError, comma_list, now_iso
from ..client import facts as facts_mod
from ..stack.instances import Instance
from ..stack.service import run_dir, stack_env, stack_script
from ..nemesis.redis_group import Group, sentinel_env
from ..judges.failover_gate import FACT_KINDS, kind_of
from ..reports import failover_report
from ..scaffold.failover_window import ROW_FIELDS, Failover, window_options
from ..scaffold.retrying_mode import (COLUMNS, RetryingClients, claims_of, retrying_options,
                                     table_columns)
from ..scaffold.runner import Runner, report_fact_rows

TABLE = failover_report.WINDOW_COLUMNS + [failover_report.VERDICT_COLUMN]


def options(o):
    o.add("--strategies", ["FAILOVER_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy with a failover fact")
    window_options(o)
    o.add("--product", ["FAILOVER_PRODUCT"], 8001, int, "first product id (two per row)", 1)
    o.flag("--quick", "the test gate's version: the first row of each kind and fact")
    # Tries past a promotion's 2 s of quick refusals, each waiting past B's deadline and
    # margin: a lost answer is the fault's, not a queue's behind a lock (lost answers
    # under a short timeout are the comparison's to show).
    retrying_options(o, "FAILOVER_RETRYING_", attempts=16, timeout_ms=2500)


def chosen(facts, args):
    rows = [s for s in facts.select(args.strategies) if s.failover]
    for s in rows:
        if s.failover not in FACT_KINDS:
            raise SetupError(f"{s.name}: unknown failover fact '{s.failover}'")
    if args.quick:
        seen, quick = set(), []
        for s in rows:
            if (kind_of(s), s.failover) not in seen:
                seen.add((kind_of(s), s.failover))
                quick.append(s)
        rows = quick
    if not rows:
        raise SetupError("no strategy with a failover fact was chosen")
    return rows


def stockd_options(args):
    return [f"--request-timeout-ms={args.request_timeout_ms}"]


def work(run):
    args, say = run.args, run.say
    say("scripts/stack.sh up (the replicated group included)")
    if subprocess.run([stack_script(), "up"], stdout=sys.stderr, stderr=sys.stderr).returncode:
        raise SetupError("scripts/stack.sh up failed")
    env = {**stack_env(), **sentinel_env()}
    group = Group(env)
    out_dir = run.out_dir()
    os.makedirs(run_dir(), exist_ok=True)
    a = Instance("A", args.port, env, ["--request-timeout-ms=30000"], out_dir)
    b = Instance("B", args.port + 1, env, stockd_options(args), out_dir)
    rows = []
    group.watch()
    try:
        a.start()
        b.start()
        strategies_doc = b.api.strategies().body
        facts = facts_mod.parse(strategies_doc)
        strategies = chosen(facts, args)
        failover = Failover(args, group, a, b, say)
        for i, s in enumerate(strategies):
            retrying = RetryingClients(args, claims_of(strategies_doc),
                                       lossy=s.failover == "loses_sales",
                                       racy=not s.safe_for(1))  # all through B
            buyers = (retrying, args.product + 2 * (len(strategies) + i), out_dir)
            try:
                rows.append(failover.run_row(s, args.product + 2 * i, env, buyers))
            finally:
                retrying.stop()
    finally:
        group.unwatch()
        for inst in (a, b):
            inst.stop()
    doc = {"started": now_iso(), "seconds": round(run.elapsed(), 1), "rows": rows,
           "quick": args.quick}
    fields = ROW_FIELDS + (COLUMNS if args.retrying_buyers else [])
    failover_report.write(out_dir, doc, fields, facts, failover.timeline)
    return rows, out_dir


def report(run, done):
    table = TABLE + (table_columns() if run.args.retrying_buyers else [])
    return report_fact_rows(run, done, table, "failover fact", lambda r: r["strategy"])


RUNNER = Runner("failover", __doc__, options=options, work=work, report=report,
                port="instance A's port; B listens on the next (nothing may answer there)",
                results="failover-")
main, parse_args = RUNNER.main, RUNNER.parse
