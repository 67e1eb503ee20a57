"""Redis primary failover (`make failover`): what a Sentinel-promoted replica does to
every strategy that touches Redis, with the dangerous window made to happen every run.

The window is the one the seed articles argue about: a write reaches the primary but
not the replica, the primary dies, Sentinel promotes the replica, a second client
comes. lab.redis_group makes it happen on demand (the replica held back with CLIENT
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

Once Sentinel has promoted the replica, the dead server is restarted, as a supervisor
would, and comes back as the new primary's replica. Measured on every row of the group:
from the primary's death to the promotion, to the replica's return and to the first
200 through the new primary (B's probe, one sale every 50 ms on a product of its own:
goal within 2 s of the promotion, or of the replica's return for a row that waits for
a replica, without restarting stockd), and every answer before it (503, within the
deadline plus --margin-ms).

Writes results/failover-<timestamp>/ (failover.json, failover.csv, failover.md with
the strategy x {plain load, lease expiry, frozen holder, primary failover} table,
timeline.svg of the first two-holder row) and points results/failover-latest at it.
Exit status 1 when a row contradicts its fact, 2 when the run cannot be made.

--quick (the test gate): the first row of each kind and fact."""

import os
import subprocess
import sys
import threading
import time

from ..base.common import ENDLESS_STOCK, SetupError, comma_list, now_iso
from ..client import facts as facts_mod, sources
from ..client.sales import Sale, answer_word, deduct
from ..stack.instances import Instance
from ..stack.service import run_dir, stack_env, stack_script
from ..nemesis import faults as faults_mod
from ..nemesis.redis_group import Group, sentinel_env
from ..reports import failover_report
from ..scaffold.runner import Runner, report_fact_rows

PROBE_EVERY_S = 0.05
RECOVER_GOAL_S = 2.0
FACT_KINDS = ("loses_sales", "two_holders", "safe")

ROW_FIELDS = [
    "strategy", "kind", "fact", "acked", "store_sold", "acked_lost", "oversold",
    "lost_updates", "first_holder", "second_holder", "promote_s", "replica_back_s", "first_ok_s",
    "gap_answers", "gap_max_ms", "verdict", "reason",
]
TABLE = [
    ("strategy", "strategy", "<"), ("kind", "kind", "<"), ("fact", "fact", "<"),
    ("200s", "acked", ">"), ("ledger", "store_sold", ">"), ("acked lost", "acked_lost", ">"),
    ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"),
    ("A", "first_holder", "<"), ("B", "second_holder", "<"),
    ("promote s", "promote_s", ">"), ("replica s", "replica_back_s", ">"),
    ("first 200 s", "first_ok_s", ">"),
    ("no-primary answers", "gap_answers", "<"), ("max ms", "gap_max_ms", ">"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["FAILOVER_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy with a failover fact")
    o.add("--sales", ["FAILOVER_SALES"], 5, int, "sales acknowledged before the death", 1)
    o.add("--hold-ms", ["FAILOVER_HOLD_MS"], 1000, int,
          "the first holder's stay between its read and its write", 50)
    o.add("--request-timeout-ms", ["FAILOVER_REQUEST_TIMEOUT_MS"], 2000, int,
          "instance B's request deadline (A's is 30 s: it is frozen for a while)", 500)
    o.add("--margin-ms", ["FAILOVER_MARGIN_MS"], 500, int,
          "how far past the deadline an answer may come", 0)
    o.add("--product", ["FAILOVER_PRODUCT"], 8001, int, "first product id (two per row)", 1)
    o.flag("--quick", "the test gate's version: the first row of each kind and fact")


def kind_of(s):
    """The sequence a strategy's row runs: from its facts, never from its name."""
    if sources.backend_name("redlock.c") in s.needs:
        return "quorum"
    return "holder" if s.lock else "sales"


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


class Failover:
    def __init__(self, args, group, a, b, say):
        self.args, self.group, self.a, self.b, self.say = args, group, a, b, say
        self.bound_s = (args.request_timeout_ms + args.margin_ms) / 1000
        self.timeline = None
        self.dead = None  # the group server this row killed, until it is back
        self.held = None  # the replica this row held back, until it is released

    def reset(self, product, count):
        self.b.api.must_reset(product, count)

    def probe_until_ok(self, s, product, died):
        """B's probe, one sale every 50 ms from the death until a 200: every answer
        before it, and the time of the first 200 (None when none came in 20 s)."""
        gap = []
        deadline = died + 20
        while time.monotonic() < deadline:
            sent = time.monotonic()
            answer = deduct(self.b.api, s, product, timeout=self.bound_s + 5)
            if answer[0] == 200:
                return gap, time.monotonic()
            gap.append((sent, answer))
            time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - sent)))
        return gap, None

    def heal(self, replica, times):
        """Awaits the promotion, then restarts the dead server as the new primary's
        replica, as a supervisor would: the rows that wait for a replica sell again
        only then."""
        times["promoted"] = self.group.wait_promoted(replica)
        if times["promoted"] and self.dead:
            try:
                self.group.restart(self.dead)
            except SetupError as e:  # mend() tries again, and stops the run if it fails
                times["heal_error"] = str(e)
                return
            self.dead = None
            times["replica_back"] = time.monotonic()

    def fail_over(self, s, primary, replica, probe_product):
        """Kill the primary, release the held-back replica once its link is down, and
        follow the promotion, the dead server's return and B's probe. Returns the
        measurements."""
        died = self.group.kill(primary)
        self.dead = primary
        link_down = self.group.wait_link_down(replica)
        self.group.release(replica)
        self.held = None
        times = {}
        healer = threading.Thread(target=self.heal, args=(replica, times), daemon=True)
        healer.start()
        gap, first_ok = self.probe_until_ok(s, probe_product, died)
        return {"died": died, "link_down": link_down, "healer": healer, "times": times,
                "first_ok": first_ok, "gap": gap}

    @staticmethod
    def healed(m):
        """The promotion's and the replica's return's times into m, once both are over."""
        m.pop("healer").join()
        times = m.pop("times")
        m.update(promoted=times.get("promoted"), replica_back=times.get("replica_back"),
                 heal_error=times.get("heal_error"))

    def sales_row(self, s, row, product, probe):
        primary, replica = self.group.settled()
        self.reset(product, ENDLESS_STOCK)
        self.reset(probe, ENDLESS_STOCK)
        self.group.wait_caught_up(primary, replica)
        self.group.hold_back(replica)
        self.held = replica
        cut = time.monotonic()
        answers = [deduct(self.a.api, s, product) for _ in range(self.args.sales)]
        acked = sum(1 for a in answers if a[0] == 200)
        row["first_holder"] = ", ".join(sorted({answer_word(a) for a in answers}))
        m = self.fail_over(s, primary, replica, probe)
        account = self.b.api.account(product, s.store) or {}
        row.update(acked=acked, store_sold=account.get("sold"))
        if account.get("sold") is not None:
            row["acked_lost"] = max(0, acked - account["sold"])
        row.update(oversold=account.get("oversold"), lost_updates=account.get("lost_updates"))
        return m, cut

    def holder_row(self, s, row, product, probe):
        primary, replica = self.group.settled()
        self.reset(product, 1)
        self.reset(probe, ENDLESS_STOCK)
        self.group.wait_caught_up(primary, replica)
        self.group.hold_back(replica)
        self.held = replica
        cut = time.monotonic()
        first = Sale(self.a.api, s, product, self.args.hold_ms)
        first.start()
        holding = self.a.wait_holding(first)
        if holding:
            self.a.freeze(True)
        held_at = time.monotonic()
        try:
            m = self.fail_over(s, primary, replica, probe)
            second = deduct(self.b.api, s, product, timeout=self.bound_s + 5)
            m["second"] = (time.monotonic(), second)
        finally:
            if holding:
                self.a.freeze(False)
        first.join(60)
        thawed = time.monotonic()
        m.update(held_at=held_at if holding else None, thawed=thawed, first=first.answer)
        account = self.b.api.account(product, "mysql") or {}
        answers = [first.answer, second]
        row.update(first_holder=answer_word(first.answer) if first.answer else "no answer",
                   second_holder=answer_word(second),
                   acked=sum(1 for a in answers if a and a[0] == 200),
                   store_sold=account.get("sold"), oversold=account.get("oversold"),
                   lost_updates=account.get("lost_updates"))
        return m, cut

    def quorum_row(self, s, row, product, env):
        """Sales through Redlock while one of its three servers is killed and restarted."""
        self.reset(product, ENDLESS_STOCK)
        victim = faults_mod.redlock_names(env)[0]
        before = [deduct(self.b.api, s, product) for _ in range(5)]
        faults_mod.run_stack("kill-one", victim)
        try:
            during = [deduct(self.b.api, s, product, timeout=self.bound_s + 5)
                      for _ in range(10)]
        finally:
            faults_mod.run_stack("start-one", victim)
        account = self.b.api.account(product, "mysql") or {}
        ok_during = sum(1 for a in during if a[0] == 200)
        row.update(acked=sum(1 for a in before + during if a[0] == 200),
                   store_sold=account.get("sold"), oversold=account.get("oversold"),
                   lost_updates=account.get("lost_updates"),
                   first_holder=f"{ok_during}/10 sold with {victim} dead")
        if ok_during == 0:
            row["problems"].append(f"no sale with one of three servers ({victim}) dead")

    def measured(self, row, m, cut):
        died, promoted, first_ok = m["died"], m["promoted"], m["first_ok"]
        row["promote_s"] = round(promoted - died, 2) if promoted else None
        row["first_ok_s"] = round(first_ok - died, 2) if first_ok else None
        back = m["replica_back"]
        row["replica_back_s"] = round(back - died, 2) if back else None
        gap = m["gap"]
        counts = {}
        for _, a in gap:
            counts[answer_word(a)] = counts.get(answer_word(a), 0) + 1
        row["gap_answers"] = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "-"
        row["gap_max_ms"] = round(max((a[3] for _, a in gap), default=0) * 1000)
        if promoted is None:
            row["problems"].append("Sentinel promoted no replica within 20 s")
        if m["heal_error"]:
            row["problems"].append(f"the killed server did not come back at once: "
                                   f"{m['heal_error']}")
        if first_ok is None:
            row["problems"].append("no 200 through the new primary within 20 s of the death")
        elif promoted and first_ok - max(promoted, m["replica_back"] or 0) > RECOVER_GOAL_S:
            row["problems"].append(f"first 200 {first_ok - promoted:.2f} s after the promotion "
                                   f"and the replica's return (goal {RECOVER_GOAL_S:.0f} s)")
        wrong = [answer_word(a) for _, a in gap if a[0] != 503]
        if wrong:
            row["problems"].append(f"answers other than 503 while no primary existed: "
                                   f"{', '.join(sorted(set(wrong)))}")
        if row["gap_max_ms"] > self.bound_s * 1000:
            row["problems"].append(f"an answer took {row['gap_max_ms']} ms while no primary "
                                   f"existed (deadline plus margin {self.bound_s * 1000:.0f})")
        m["cut"] = cut

    @staticmethod
    def judge(row):
        """The row against its fact."""
        fact, kind = row["fact"], row["kind"]
        broke = (row.get("acked_lost") or 0) if kind == "sales" else \
            (row.get("oversold") or 0) + (row.get("lost_updates") or 0)
        if row["store_sold"] is None:
            row["problems"].append("the store's accounting could not be read")
        elif fact == "safe" and broke:
            row["problems"].append(f"claims safe, but {'lost' if kind == 'sales' else 'oversold'} "
                                   f"{broke}")
        elif fact != "safe" and not broke:
            row["problems"].append(f"claims {fact}, but the window did not show it: nothing "
                                   "lost or oversold")
        row["verdict"] = "fail" if row["problems"] else "pass"
        row["reason"] = "; ".join(row.pop("problems"))

    def run_row(self, s, i, env):
        product = self.args.product + 2 * i
        row = {f: None for f in ROW_FIELDS}
        row.update(strategy=s.name, kind=kind_of(s), fact=s.failover, problems=[])
        self.say(f"{s.name}: {row['kind']} row (fact: {s.failover})")
        if row["kind"] == "quorum":
            self.quorum_row(s, row, product, env)
        else:
            sequence = self.sales_row if row["kind"] == "sales" else self.holder_row
            try:
                m, cut = sequence(s, row, product, product + 1)
                self.healed(m)
            finally:
                self.mend()
            self.measured(row, m, cut)
            if row["kind"] == "holder" and row["fact"] == "two_holders" and not self.timeline:
                self.timeline = (s.name, m)
        self.judge(row)
        return row

    def mend(self):
        """The group whole again: no replica held back, the killed server back (as the
        new primary's replica)."""
        if self.held:
            self.group.release(self.held)
            self.held = None
        if self.dead:
            self.group.restart(self.dead)
            self.dead = None


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
    try:
        a.start()
        b.start()
        facts = facts_mod.parse(b.api.strategies().body)
        strategies = chosen(facts, args)
        failover = Failover(args, group, a, b, say)
        for i, s in enumerate(strategies):
            rows.append(failover.run_row(s, i, env))
    finally:
        for inst in (a, b):
            inst.stop()
    doc = {"started": now_iso(), "seconds": round(run.elapsed(), 1), "rows": rows,
           "quick": args.quick}
    failover_report.write(out_dir, doc, ROW_FIELDS, facts, failover.timeline)
    return rows, out_dir


def report(run, done):
    return report_fact_rows(run, done, TABLE, "failover fact", lambda r: r["strategy"])


RUNNER = Runner("failover", __doc__, options=options, work=work, report=report,
                port="instance A's port; B listens on the next (nothing may answer there)",
                results="failover-")
main, parse_args = RUNNER.main, RUNNER.parse
