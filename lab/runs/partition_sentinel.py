"""Jepsen's 2013 Redis scenario, staged under every strategy that keeps anything in the
main Redis (`make partition`, after lab.runs.partition): a Sentinel-watched primary cut
away from the majority, in a network namespace of the run's own (lab.nemesis.netns).

Inside it, each process on its own 127.0.0.N, listening there and connecting from
there (Redis's bind-source-addr, Sentinel's announce-ip, stockd's --bind-source): two
group servers G1 and G2 (127.0.0.30, .31; one the primary, the other its replica),
three Sentinels S1..S3 (127.0.0.41..43, quorum 2, down after 1 s), MariaDB
(lab.stack.nodes.mysql_env) and two stockd instances, A (127.0.0.2) and B (127.0.0.3),
that follow the group through the Sentinels (--redis-sentinel).

A row, on the group as it stands (the primary of the last row's end):

  cut     nftables drops every packet between {primary, A} and {replica, S1..S3, B}.
          A's connections stay open and unanswered, so A never hears of the
          promotion: it goes on with the primary it has, as Jepsen's minority clients.
  sales   (a strategy whose stock lives in Redis) A sells one unit every 50 ms for
          SELL_S seconds (with min-replicas: a second past the window's bound)
          through the old primary; meanwhile the Sentinels promote
          the replica; B sells --sales units through the new one.
  holder  (a lock around the MySQL sale) A takes the lock on the old primary, reads
          the last unit and is frozen there (SIGSTOP); the replica is promoted; B
          takes the same lock on the new primary and sells; A is thawed and writes.
  heal    the rules go; the Sentinels turn the old primary into the new one's
          replica, which discards what it took alone; the run waits for that.

Measured per row: A's and B's 200s, the ledger, "acknowledged lost" (200s whose sale
the final ledger does not hold), two holders, oversold, and for a row that settles
later the orders MySQL holds. Judged against the row's partition fact (GET
/strategies: `partition` where it has one, else `failover`; strategy_partition()):
what a promotion that the replica did not see coming does to the row is what a
partition does to it - loses_sales rows must lose some of A's 200s, two_holders rows
must oversell, safe rows must do neither (lab.judges.failover_gate.judge) - except for a
row that settles later (lua-stream): A's consumer settles the old primary's orders
into MySQL while they are lost from Redis, so MySQL ends with more orders than the
stock counted ("oversells").

Then the sales rows again with min-replicas-to-write 1 and min-replicas-max-lag
(--max-lag-s) on the primary: it refuses writes once its replica has been silent
that long, so A's 200s stop; what it acknowledged before is still lost. Measured: the
window from the cut to A's last 200 (bound: the lag plus 2 s - the replica's
one-second REPLCONF ACK period, the lag counted in whole seconds, the primary's
once-a-second recount - plus --margin-ms) and the loss inside it.

Each row is judged by the clients' history too (lab.judges.history): every sale A and B sent
on its product, timed, with the `remaining` its reply said, and the store's counter
read at the end. A safe row's must be linearizable; any other's must not (A's 200s
lost from the ledger, or the last unit sold twice, have no order that explains them);
and the history must say what the ledger says, or the row fails.

Writes results/partition_sentinel-<timestamp>/ (partition_sentinel.json, .csv, .md,
timeline.svg: the first partition along its real clock, a loses_sales row and the safe
sales row beside it; junit.xml) and points results/partition_sentinel-latest at it.
Exit status 1 when a row contradicts its fact, 2 when the run cannot be made (not
root: it says so).

--retrying-buyers N (PARTITION_RETRYING_BUYERS; lab.scaffold.retrying_mode): on each
row, from before the cut until the heal, N buyers with an Idempotency-Key and N without,
on two products of their own, through B: the majority's side, where the partition
loses answers (B's connections to the old primary hang until it follows the new one)
and the retries reach the promoted replica. Not through A: what A's old primary
acknowledges is lost at the heal by the row's own fact, not by a retry. The row gains
each kind's double buys; a keyed double buy on a strategy that claims keys fails it.
The rest of the keyed verdict (the ledger against the 200s, the history) fails a safe
row only: a row whose fact loses acknowledged sales may lose a buyer's too, at the
cut, which is its fact and no key's doing. Off (0) by default: the run is as it was.

--quick (the test gate): the first row of each kind, partition fact and frozen-holder
lease (today watch, redis-lock, redis-lock-wait, lua-wait, lua-stream, fenced), and the
first sales row that loses sales again with min-replicas (watch)."""

import os
import subprocess
import sys
import threading
import time

from ..base.common import ENDLESS_STOCK, SetupError, comma_list, now_iso, write_text
from ..client import facts as facts_mod
from ..client.sales import TimedSale, answer_word, deduct, timed_sale
from ..stack.nodes import ADDRESS, Node, RedisServer, mysql_env, redis_cli
from ..stack.service import run_dir, stack_script
from ..drivers.load import Answer
from ..nemesis import netns
from ..nemesis.redis_group import ABORT_QUIET_S, SENTINEL_QUIET_S, SentinelEvents
from ..judges import failover_gate, history
from ..judges.failover_gate import kind_of
from ..reports import failover_report, junit, tables
from ..scaffold.runner import Runner, report_fact_rows
from ..scaffold import setup_retry
from ..scaffold.retrying_mode import (RetryingClients, claims_of, folded, retrying_options,
                                      with_columns)

GROUP = {"G1": "127.0.0.30", "G2": "127.0.0.31"}
SENTINELS = {"S1": "127.0.0.41", "S2": "127.0.0.42", "S3": "127.0.0.43"}
MASTER = "stockd"
PORT = 6379
SELL_EVERY_S = 0.05
SELL_S = 4.0         # A's selling through the old primary: past the promotion
HOLD_MS = 1000       # a holder's stay between its read and its write: frozen there
SETTLE_S = 30
FOLLOW_S = 20        # a stockd's first sale through the settled primary
B_FOLLOW_S = 3       # B's through the promoted one (a row that waits for a replica never)
# How late past the lag the primary may stop: the replica ACKs once a second (its last
# ACK may precede the cut by that much), and the primary counts the lag in whole
# seconds and recounts its good replicas in its once-a-second cron.
LAG_SLACK_S = 2.0
RETRYING_PRODUCTS = 100  # a row's retrying buyers': its product + this, and the next

ROW_FIELDS = ["strategy", "kind", "min_replicas", "lag", "fact", "old_primary", "new_primary",
              "a_acked", "b_acked", "acked", "store_sold", "acked_lost", "two_holders",
              "oversold", "lost_updates", "settled_sold", "first_holder", "second_holder",
              "promote_s", "window_s", "heal_s", "rejoin_s", "history",
              "history_linearizable", "history_ops", "seconds", "verdict", "reason"]
TABLE = [
    ("strategy", "strategy", "<"), ("min-replicas", "lag", "<"),
    ("fact", "fact", "<"), ("A", "first_holder", "<"), ("B", "second_holder", "<"),
    ("A 200s", "a_acked", ">"), ("B 200s", "b_acked", ">"), ("ledger", "store_sold", ">"),
    ("acked lost", "acked_lost", ">"), ("two holders", "two_holders", "<"),
    ("oversold", "oversold", ">"), ("in MySQL", "settled_sold", ">"),
    ("promote s", "promote_s", ">"), ("A's last 200 s", "window_s", ">"),
    ("rejoin s", "rejoin_s", ">"), ("history", history.short, "<"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["PARTITION_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy with a failover fact on the main Redis")
    o.add("--sales", ["PARTITION_SALES"], 5, int, "B's sales through the new primary", 1)
    o.add("--max-lag-s", ["PARTITION_MAX_LAG_S"], 2, int, "min-replicas-max-lag", 1)
    o.add("--margin-ms", ["PARTITION_MARGIN_MS"], 500, int,
          "how far past the lag and the ACK period A's last 200 may come", 0)
    o.add("--product", ["PARTITION_PRODUCT"], 8701, int, "first product id (two per row)", 1)
    o.flag("--quick", "the test gate's version: the first row of each kind, partition fact "
           "and frozen-holder lease; one sales row with min-replicas")
    retrying_options(o, "PARTITION_RETRYING_")


def plan(facts, args):
    """The rows of the two partitions: the strategies with a failover fact on the main
    Redis (not Redlock's servers, which are no replicated group), and the sales rows
    again, with min-replicas. --quick: the first row of each kind, partition fact and
    frozen-holder lease (a fenced lock's differs), and the first sales row that loses
    sales again."""
    chosen = [s for s in facts.select(args.strategies)
              if s.failover and kind_of(s) != "quorum"]
    if not chosen:
        raise SetupError("no strategy with a failover fact on the main Redis was chosen")
    again = [s for s in chosen if kind_of(s) == "sales"]
    if args.quick:
        seen, quick = set(), []
        for s in chosen:
            key = (kind_of(s), s.partition, (s.lease or {}).get("paused_holder"))
            if key not in seen:
                seen.add(key)
                quick.append(s)
        chosen, again = quick, [s for s in again if s.partition == "loses_sales"][:1]
    return chosen, again


def window_bound_s(args):
    """How long after the cut the primary may still acknowledge with min-replicas: the
    lag, LAG_SLACK_S and a margin."""
    return args.max_lag_s + LAG_SLACK_S + args.margin_ms / 1000


def judge(row, args):
    """The row against its partition fact: its failover fact (failover_gate.judge), or
    "oversells" for a row that settles later, judged by MySQL's orders against what
    the stock counted; a min-replicas row also against its window; and by the
    clients' history (judge_history)."""
    judge_history(row)
    if row["min_replicas"] and row["window_s"] is not None and \
            row["window_s"] > window_bound_s(args):
        row["problems"].append(f"A's last 200 came {row['window_s']} s after the cut: "
                               f"min-replicas should stop it within {window_bound_s(args)} s")
    if row["fact"] != "oversells":
        failover_gate.judge(row)
        return
    if row["store_sold"] is None or row["settled_sold"] is None:
        row["problems"].append("the store's or MySQL's accounting could not be read")
    elif row["settled_sold"] <= row["store_sold"]:
        row["problems"].append(f"claims oversells, but MySQL holds {row['settled_sold']} "
                               f"orders, no more than the {row['store_sold']} the stock counted")
    row["verdict"] = "fail" if row["problems"] else "pass"
    row["reason"] = "; ".join(row.pop("problems"))


def fold_retrying(row):
    """The row's verdict with its retrying buyers' folded in (retrying_mode.folded): any
    row's by a keyed double buy, a safe row's by the rest of the keyed verdict too (a
    row whose fact loses acknowledged sales may lose a buyer's at the cut)."""
    if row["fact"] == "safe" or row.get("double_buys_keys"):
        row["verdict"], row["reason"] = folded(row["verdict"], row["reason"], row)


def judge_history(row):
    """The second witness: a safe row's history must be linearizable, any other's not
    (an acknowledged sale the store lost, or a unit sold twice, has no order that
    explains it), and the history must say what the ledger says."""
    said = row.get("history_linearizable")
    if row.get("history_ops") is None:
        return
    if said is None:
        row["problems"].append(f"the history is undecided: {row['history']}")
        return
    if said != (row["fact"] == "safe"):
        row["problems"].append(f"claims {row['fact']}, but the history is "
                               f"{'' if said else 'not '}linearizable ({row['history']})")
    if row["store_sold"] is not None and row["acked_lost"] is not None:
        broke = row["acked_lost"] + (row["oversold"] or 0) + (row["lost_updates"] or 0)
        if said != (not broke):
            row["problems"].append("the history and the ledger disagree")


def row_history(row, initial, remaining):
    """The row's history fields from its clients' answers ((answer, sent, answered)
    from timed_sale), with the store's counter read at the end. No HTTP answer (status
    0) is a client timeout: it may take effect at any time after it was sent."""
    answers = [Answer(t0, t1, a[0], "client timeout" if a[0] == 0 else a[1] or "",
                      (a[2] or {}).get("remaining"))
               for a, t0, t1 in sorted(row.pop("answers"), key=lambda x: x[1])]
    return history.judge_final(initial, history.from_answers(answers, None, 1), remaining)


def acked_lost(a_acked, b_acked, sold):
    """The acknowledged sales the final ledger does not hold: every 200 is one unit."""
    return None if sold is None else max(0, a_acked + b_acked - sold)


def sentinel_conf(host, primary):
    return "\n".join([
        f"port {PORT}", "sentinel resolve-hostnames no", f"sentinel announce-ip {host}",
        f"bind-source-addr {host}", f"sentinel monitor {MASTER} {primary} {PORT} 2",
        f"sentinel down-after-milliseconds {MASTER} 1000",  # the stack's timings, and why:
        f"sentinel failover-timeout {MASTER} 3000",  # scripts/backends.sh start_sentinel
        f"sentinel parallel-syncs {MASTER} 1", ""])


def role(host):
    """(role, the primary it follows or None, its link up) of a group server."""
    lines = redis_cli(host, "info", "replication", timeout=1) or []
    doc = dict(line.split(":", 1) for line in lines if ":" in line)
    return (doc.get("role"), doc.get("master_host"), doc.get("master_link_status") == "up",
            doc.get("master_repl_offset"), doc.get("slave_repl_offset"))


def primary_by(sentinel):
    reply = redis_cli(sentinel, "sentinel", "get-master-addr-by-name", MASTER, timeout=1)
    return reply[0] if reply and len(reply) == 2 else None


class Group:
    """G1, G2 and the three Sentinels of the namespace."""

    def __init__(self, work):
        self.servers = {n: RedisServer(n, work, h, ["--bind-source-addr", h])
                        for n, h in GROUP.items()}
        self.sentinels = {n: RedisServer(n, work, h, ["--sentinel"], sentinel_conf(h, GROUP["G1"]))
                          for n, h in SENTINELS.items()}
        self.promoted_at = 0.0
        self.events = SentinelEvents((h, PORT) for h in SENTINELS.values())

    def start(self):
        self.servers["G1"].start()
        self.servers["G2"].extra += ["--replicaof", GROUP["G1"], str(PORT)]
        self.servers["G2"].start()
        for s in self.sentinels.values():
            s.start()
        self.events.start()

    def kill(self):
        if self.events.is_alive():
            self.events.stop()
        for r in list(self.sentinels.values()) + list(self.servers.values()):
            r.kill()

    def settled(self):
        """(primary, replica) hosts once every Sentinel names the primary, the replica
        is linked to it and caught up, and the last failover is past its quiet time."""
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            named = {primary_by(h) for h in SENTINELS.values()}
            if len(named) == 1 and None not in named:
                p = named.pop()
                r = next(h for h in GROUP.values() if h != p)
                pr, rr = role(p), role(r)
                now = time.monotonic()
                if pr[0] == "master" and rr[0] == "slave" and rr[1] == p and rr[2] and \
                        pr[3] == rr[4] and now - self.promoted_at > SENTINEL_QUIET_S and \
                        now - self.events.last_unfinished() > ABORT_QUIET_S:
                    return p, r
            time.sleep(0.1)
        raise SetupError(f"the group did not settle within {SETTLE_S} s (logs under "
                         f"{run_dir()}/sentinel-group)")

    def wait_promoted(self, replica, seconds=20):
        """The time a majority of Sentinels named `replica` and it answered as primary,
        or None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if sum(primary_by(h) == replica for h in SENTINELS.values()) >= 2 and \
                    role(replica)[0] == "master":
                self.promoted_at = time.monotonic()
                return self.promoted_at
            time.sleep(0.02)
        return None

    @staticmethod
    def wait_caught_up(primary, replica, seconds=10):
        """Until the replica has applied all the primary wrote so far (the rows' resets
        and the sales that checked them; the retrying buyers' writes go on meanwhile):
        a cut before that would leave the promoted replica without the rows' products,
        and every sale through it a 404. SetupError past `seconds`."""
        deadline = time.monotonic() + seconds
        offset = None
        while True:
            offset = offset or role(primary)[3]  # read once it answers
            applied = role(replica)[4]
            if offset and applied and int(applied) >= int(offset):
                return
            if time.monotonic() >= deadline:
                raise SetupError(f"the replica {replica} had not applied the rows' resets "
                                 f"{seconds} s after them (its offset {applied}, the "
                                 f"primary's {offset})")
            time.sleep(0.02)

    @staticmethod
    def wait_rejoined(old, new, seconds=30):
        """The time the old primary was the new one's replica with its link up, or None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            r = role(old)
            if r[0] == "slave" and r[1] == new and r[2]:
                return time.monotonic()
            time.sleep(0.05)
        return None

    @staticmethod
    def min_replicas(host, on, lag_s):
        for k, v in (("min-replicas-max-lag", lag_s), ("min-replicas-to-write", int(on))):
            if redis_cli(host, "config", "set", k, v) != ["OK"]:
                raise SetupError(f"CONFIG SET {k} on {host} failed")


class Promotion(threading.Thread):
    """Watches for the replica's promotion from the cut on: .at once joined."""

    def __init__(self, group, replica):
        super().__init__(daemon=True)
        self.group, self.replica, self.at = group, replica, None

    def run(self):
        self.at = self.group.wait_promoted(self.replica)


class SentinelPartition:
    """One partition (a cut, the promotion, the heal, the old primary's return) and
    every row of one min-replicas setting inside it: A sells or holds on each row's
    own product, B on the same product through the new primary."""

    def __init__(self, args, group, cuts, a, b, say, claims, out_dir):
        self.args, self.group, self.cuts, self.a, self.b, self.say = args, group, cuts, a, b, say
        self.claims, self.out_dir = claims, out_dir

    def cut(self, primary, replica):
        minority = [primary, ADDRESS["A"]]
        majority = [replica, ADDRESS["B"], *SENTINELS.values()]
        self.cuts.apply([(x, y) for x in minority for y in majority], "drop")
        return time.monotonic()

    @staticmethod
    def follows(node, s, probe, seconds):
        """Until `node` sells through the group's primary (the probe product): whether
        it did (a row that waits for a replica cannot while the replica is cut off)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if deduct(node.api, s, probe, timeout=5)[0] == 200:
                return True
            time.sleep(SELL_EVERY_S)
        return False

    def b_sells(self, row, count):
        """B's sales on the row's product once it follows the new primary."""
        s, product, probe = row["s"], row["product"], row["product"] + 1
        self.follows(self.b, s, probe, B_FOLLOW_S)
        timed = [timed_sale(self.b.api, s, product, timeout=5) for _ in range(count)]
        row["answers"] += timed
        row["b_marks"] = marks(timed)
        answers = [a for a, _, _ in timed]
        row["b_acked"] = sum(a[0] == 200 for a in answers)
        row["second_holder"] = words(answers)

    def sales(self, rows, cut, sell_s):
        """A sells on every sales row in turn, through the old primary, for sell_s s."""
        answers = {id(r): [] for r in rows}
        while rows and time.monotonic() - cut < sell_s:
            sent = time.monotonic()
            for r in rows:
                a = timed_sale(self.a.api, r["s"], r["product"], timeout=5)
                answers[id(r)].append(a)
                if a[0][0] == 200:
                    r["window_s"] = round(a[2] - cut, 2)
            time.sleep(max(0.0, SELL_EVERY_S - (time.monotonic() - sent)))
        for r in rows:
            timed = answers[id(r)]
            r["answers"] += timed
            r.update(a_acked=sum(a[0] == 200 for a, _, _ in timed), a_marks=marks(timed),
                     first_holder=words([a for a, _, _ in timed]), window_s=r["window_s"] or 0)

    def holder(self, row):
        """A holds the row's lock on the old primary, frozen; B sells through the new
        one; A is thawed and writes."""
        first = TimedSale(self.a.api, row["s"], row["product"], HOLD_MS)
        first.start()
        holding = self.a.wait_holding(first)
        if holding:
            self.a.freeze(True)
        try:
            self.b_sells(row, 1)
        finally:
            if holding:
                self.a.freeze(False)
        first.join(60)
        if first.answer:
            row["answers"].append(first.answer)
        answer = first.answer[0] if first.answer else None
        row.update(a_acked=int(bool(answer and answer[0] == 200)),
                   first_holder=answer_word(answer) if answer else "no answer")

    def new_row(self, s, min_replicas, product):
        row = {f: None for f in ROW_FIELDS}
        row.update(strategy=s.name, kind=kind_of(s), fact=s.partition, problems=[], s=s,
                   product=product, min_replicas=min_replicas, answers=[],
                   lag=f"1, lag {self.args.max_lag_s} s" if min_replicas else "off")
        return row

    def run(self, plan_rows, min_replicas, first_product):
        """The partition with min-replicas on or off, and its rows, judged; made once more
        when its setup failed (the group did not do what the partition asked of it), and
        its rows reported as setup, apart from the verdicts, when it fails again. Rows
        that do not pass carry the Sentinels' account of the partition and each stockd's
        log lines (lab.scaffold.setup_retry)."""
        (rows, window, _), setup = setup_retry.tried(
            lambda: self.attempt(plan_rows, min_replicas, first_product),
            lambda tried: tried[2], self.say, "the partition's setup failed",
            "making it again")
        for r in rows:
            if setup:
                r.pop("s", None)
                r.pop("problems", None)
                setup_retry.setup_verdict(r, setup)
            if r["verdict"] != "pass":
                r["diagnosis"] = self.diagnosis(window, r.get("cut_at"))
        return rows

    def attempt(self, plan_rows, min_replicas, first_product):
        """One try of the partition: (its rows, its window, why its setup failed or
        None); the rows not yet run when it failed on the way."""
        t0, wall0 = time.monotonic(), time.time()
        try:
            rows = self.partition(plan_rows, min_replicas, first_product)
            setup = self.group_misbehaved(rows, t0)
        except SetupError as e:
            rows, setup = [self.new_row(s, min_replicas, first_product + 2 * i)
                           for i, s in enumerate(plan_rows)], str(e)
        return rows, (t0, wall0, time.monotonic(), time.time()), setup

    def group_misbehaved(self, rows, t0):
        """Why the partition's failover was not the one the cut asked for, or None: any
        switch but the one to the cut-off primary's replica."""
        wanted = f"{rows[0]['new_primary']}:{PORT}"
        cut = rows[0]["cut_at"]
        switches = [new for _, new in self.group.events.switches(cut)]
        if switches != [wanted]:
            return (f"the Sentinels switched the primary to {', '.join(switches) or 'nothing'}"
                    f" after the cut, which called for one switch, to {wanted}")
        return None

    def diagnosis(self, window, cut):
        """The Sentinels' events and each stockd's log lines of the partition, times in
        seconds from the cut (or the partition's start)."""
        return setup_retry.diagnosis("the partition", window, ("the cut", cut) if cut else None,
                                     self.group.events, (self.a, self.b))

    def partition(self, plan_rows, min_replicas, first_product):
        """One try of the partition: its rows, judged."""
        t0 = time.monotonic()
        rows = [self.new_row(s, min_replicas, first_product + 2 * i)
                for i, s in enumerate(plan_rows)]
        primary, replica = self.group.settled()
        self.say(f"partition, min-replicas {rows[0]['lag']}: {primary} and A cut from "
                 f"{replica}, the Sentinels and B; rows {', '.join(r['strategy'] for r in rows)}")
        for r in rows:
            r.update(old_primary=primary, new_primary=replica)
            self.b.api.must_reset(r["product"], 1 if r["kind"] == "holder" else ENDLESS_STOCK)
            self.b.api.must_reset(r["product"] + 1, ENDLESS_STOCK)
            for node in (self.a, self.b):  # both on the primary before the cut
                if not self.follows(node, r["s"], r["product"] + 1, FOLLOW_S):
                    raise SetupError(f"{node.name} sells nothing with {r['strategy']} "
                                     f"through the primary {primary}")
        retrying = []
        try:
            for r in rows:
                retrying.append(self.retrying(r))
            self.group.wait_caught_up(primary, replica)
            self.group.min_replicas(primary, min_replicas, self.args.max_lag_s)
            cut = self.cut(primary, replica)
            for r in rows:
                r["cut_at"] = cut
            promotion = Promotion(self.group, replica)
            promotion.start()
            # with min-replicas, past the window's bound: a late 200 must be seen
            sell_s = window_bound_s(self.args) + 1 if min_replicas else SELL_S
            self.sales([r for r in rows if r["kind"] == "sales"], cut, sell_s)
            promotion.join()
            if promotion.at:
                for r in rows:
                    if r["kind"] == "holder":
                        self.holder(r)
                    else:
                        self.b_sells(r, self.args.sales)
        finally:
            self.cuts.heal()
            for clients in retrying:
                clients.stop()
            self.group.min_replicas(primary, False, self.args.max_lag_s)
        healed = time.monotonic()
        rejoined = self.group.wait_rejoined(primary, replica)
        for r, clients in zip(rows, retrying):
            label = r["strategy"] + ("-min-replicas" if min_replicas else "")
            r.update(clients.finish(self.b.api, self.out_dir, label))
            self.settle_row(r, cut, promotion.at, healed, rejoined)
            fold_retrying(r)
            r["seconds"] = round(time.monotonic() - t0, 2)
        return rows

    def retrying(self, row):
        """The row's retrying buyers (lab.scaffold.retrying_mode), started through B on
        their own two products."""
        clients = RetryingClients(self.args, self.claims)
        s = row["s"]
        clients.start(self.b.api.host, self.b.api.port, self.b.api, s.name, s.store,
                      row["product"] + RETRYING_PRODUCTS)
        return clients

    def settled(self, product, acked, seconds=10):
        """MySQL's count of the product's orders once it holds at least `acked` (the
        stream drained), or what it holds after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            sold = (self.b.api.account(product, "mysql") or {}).get("sold")
            if (sold is not None and sold >= acked) or time.monotonic() > deadline:
                return sold
            time.sleep(0.1)

    def settle_row(self, row, cut, promoted, healed, rejoined):
        """The row's figures from the final ledger, and its verdict."""
        row["promote_s"] = round(promoted - cut, 2) if promoted else None
        row["heal_s"] = round(healed - cut, 2)
        row["rejoin_s"] = round(rejoined - healed, 2) if rejoined else None
        for k in ("a_marks", "b_marks"):  # the picture's moments: seconds from the cut
            if row.get(k):
                row[k] = {m: round(v - cut, 3) if isinstance(v, float) else v
                          for m, v in row[k].items()}
        if promoted is None:
            row["problems"].append("the Sentinels promoted no replica within 20 s of the cut")
        if rejoined is None:
            row["problems"].append("the old primary did not rejoin as the new one's replica "
                                   "within 30 s of the heal")
        s = row.pop("s")
        account = self.b.api.account(row["product"], s.store) or {}
        a_acked, b_acked = row["a_acked"] or 0, row["b_acked"] or 0
        if row["kind"] == "holder":  # the one unit sold by both
            row["two_holders"] = a_acked == 1 and b_acked == 1
        if s.settles:  # what its orders became in MySQL, once every 200's order is there
            row["settled_sold"] = self.settled(row["product"], a_acked + b_acked)
        row.update(acked=a_acked + b_acked, store_sold=account.get("sold"),
                   oversold=account.get("oversold"), lost_updates=account.get("lost_updates"),
                   acked_lost=acked_lost(a_acked, b_acked, account.get("sold")))
        initial = 1 if row["kind"] == "holder" else ENDLESS_STOCK
        row.update(row_history(row, initial, account.get("remaining")))
        judge(row, self.args)


def marks(timed):
    """A client's moments on a row ((answer, sent, answered) from timed_sale): its first
    request sent, its last answered, its first and last 200 answered, its answers."""
    ok = [t1 for a, _, t1 in timed if a[0] == 200]
    return {"from": timed[0][1], "to": timed[-1][2], "ok_from": ok[0] if ok else None,
            "ok_to": ok[-1] if ok else None,
            "words": words([a for a, _, _ in timed])} if timed else None


def words(answers):
    """Answers counted by their word: "200 x12, 503 backend_unavailable x3"."""
    counts = {}
    for a in answers:
        counts[answer_word(a)] = counts.get(answer_word(a), 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def drawn_rows(rows):
    """The picture's rows, from the partition without min-replicas: a loses_sales sales
    row and the safe sales row beside it (or None), the one that waits for its
    replica; the loses_sales row it is a variant of (its name's stem: `lua` for
    `lua-wait`) when there is one, else the first."""
    plain = [r for r in rows if not r["min_replicas"] and r.get("a_marks") and
             r.get("b_marks") and r["promote_s"] is not None]
    lost = [r for r in plain if r["fact"] == "loses_sales"]
    if not lost:
        return None, None
    safe = next((r for r in plain if r["fact"] == "safe" and r["kind"] == "sales"), None)
    stem = next((r for r in lost if safe and safe["strategy"].startswith(r["strategy"] + "-")),
                lost[0])
    return stem, safe


def client_bars(axis, lane, m, what):
    """A client's sales on one row: its 200s in green, the rest of its requests grey."""
    bar = failover_report.bar
    if m["ok_from"] is None:
        return [bar(axis, lane, m["from"], m["to"], "held", f"{what}: {m['words']}")]
    parts = [bar(axis, lane, m["ok_from"], m["ok_to"], "sold", f"{what}: {m['words']}")]
    if m["to"] - m["ok_to"] > 0.05:
        parts.append(bar(axis, lane, m["ok_to"], m["to"], "held", ""))
    return parts


def timeline_svg(row, safe=None):
    """The partition along its real clock, seconds from the cut (lab.reports.failover_report's
    primitives): A's sales through the old primary, the promotion, B's through the new
    one, the heal, the old primary's rejoin that discards A's; `safe` (lua-wait), when
    given, in two lanes of its own."""
    a, b = row["a_marks"], row["b_marks"]
    heal, promoted = row["heal_s"], row["promote_s"]
    rejoin = heal + row["rejoin_s"] if row["rejoin_s"] is not None else None
    end = (rejoin or heal) + 0.5
    name = row["strategy"]
    lanes = ["old primary", "replica", "Sentinels", f"A {name}", f"B {name}"]
    if safe:
        lanes += [f"A {safe['strategy']}", f"B {safe['strategy']}"]
    axis = failover_report.Axis(-0.3, end, tuple(lanes))
    bar, mark = failover_report.bar, failover_report.mark
    parts = [  # the cut and the promotion said under the Sentinels' bar: no label over another
        bar(axis, "old primary", 0, heal, "gap", "cut off with A: acknowledges A alone"),
        bar(axis, "old primary", heal, rejoin or end, "held", "healed, still a primary"),
        bar(axis, "Sentinels", 0, promoted, "gap",
            f"the cut at 0 s; the replica promoted at {promoted} s"),
        bar(axis, "replica", 0, promoted, "alive", ""),  # the Sentinels' label says it
        bar(axis, "replica", promoted, end, "new", "the new primary: none of A's sales"),
        mark(axis, "Sentinels", heal, f"heal ({heal} s)"),
    ]
    if rejoin:
        parts += [mark(axis, "old primary", rejoin,
                       f"rejoins: A's {row['a_acked']} sales discarded")]
    parts += client_bars(axis, f"A {name}", a, "through the old primary")
    parts += client_bars(axis, f"B {name}", b, "through the new primary")
    if safe:
        parts += client_bars(axis, f"A {safe['strategy']}", safe["a_marks"],
                             "WAIT for the replica")
        parts += client_bars(axis, f"B {safe['strategy']}", safe["b_marks"],
                             "WAIT for a replica there is none of")
    title = (f"{name}: a Sentinel-watched primary cut from the majority - "
             f"{row['acked_lost']} of {row['acked']} acknowledged sales lost")
    return failover_report.picture(axis, 0, title, parts)


def work(run):
    args, say = run.args, run.say
    routes = netns.prepare(run.say, "partition_sentinel", STACK_SERVICES="mysql")
    cuts, out_dir = netns.Cuts(), run.out_dir()
    group = Group(os.path.join(run_dir(), "sentinel-group"))
    rows = []
    a = b = None
    try:
        group.start()
        say("MariaDB of the namespace (scripts/stack.sh up, service mysql)")
        env = mysql_env()
        sentinels = ",".join(f"{h}:{PORT}" for h in SENTINELS.values())
        common = [f"--redis-sentinel={sentinels}", f"--redis-master-name={MASTER}",
                  "--connect-timeout-ms=300", "--io-timeout-ms=10000",
                  "--request-timeout-ms=30000"]
        a, b = (Node(n, 8080, env, common, out_dir) for n in ("A", "B"))
        a.start()
        b.start()
        doc = b.api.strategies().body
        facts = facts_mod.parse(doc)
        p = SentinelPartition(args, group, cuts, a, b, say, claims_of(doc), out_dir)
        plain, again = plan(facts, args)
        rows += p.run(plain, False, args.product)
        if again:
            rows += p.run(again, True, args.product + 2 * len(plain))
    finally:
        cuts.heal()
        for inst in (a, b):
            if inst:
                inst.stop()
        group.kill()
        subprocess.run([stack_script(), "clean"], stdout=sys.stderr, stderr=sys.stderr)
    doc = {"started": now_iso(), "seconds": round(run.elapsed(), 1), "rows": rows,
           "quick": args.quick, "routes": routes, "max_lag_s": args.max_lag_s,
           "sell_s": SELL_S, "hold_ms": HOLD_MS}
    name = "partition_sentinel"
    write_text(os.path.join(out_dir, f"{name}.json"), tables.json_text(doc))
    fields, table = with_columns(args, ROW_FIELDS, TABLE)
    write_text(os.path.join(out_dir, f"{name}.csv"), tables.csv_text(rows, fields))
    write_text(os.path.join(out_dir, f"{name}.md"), tables.markdown_table(rows, table))
    lost, safe = drawn_rows(rows)
    if lost:
        write_text(os.path.join(out_dir, "timeline.svg"), timeline_svg(lost, safe))
    junit.write(os.path.join(out_dir, "junit.xml"), name, rows,
                lambda r: f"{r['strategy']} min-replicas {r['lag']}",
                lambda r: r["seconds"], {"max_lag_s": args.max_lag_s, "sell_s": SELL_S})
    return rows, out_dir


def report(run, done):
    _, table = with_columns(run.args, ROW_FIELDS, TABLE)
    return report_fact_rows(run, done, table, "partition fact",
                            lambda r: f"{r['strategy']} (min-replicas {r['lag']})")


RUNNER = Runner("partition_sentinel", __doc__, options=options, work=work, report=report,
                results="partition_sentinel-")
parse_args = RUNNER.parse


def main(argv):
    return netns.main(RUNNER, argv)
