"""A multi-primary MySQL cluster (`make cluster`): every strategy whose stock is in MySQL,
run by N stockd instances each bound to its own node of the stack's three-node Galera
cluster, and judged against its `cluster` fact.

Each node takes its own row locks and GET_LOCKs, checks a transaction against the other
nodes' only at COMMIT (certification: the later one fails with a deadlock error), and
applies their commits a moment after they are certified. What that does to a strategy
is measured here, from the store's ledger and from every answer the clients got:

  single    the same instances, all on the stack's one MariaDB: the baseline
  cluster   instance i on node i: as many buyers as units (each buyer one try, hold_ms
            inside every critical section), so that every unit left at the end is a
            unit a buyer was refused while it was there (undersold); throughput and
            busy answers (certification conflicts) per second against the baseline.
            safe: nothing oversold or lost, nothing undersold; conflicts_at_commit:
            nothing oversold or lost; two_holders and loses_updates: the window
            must show (oversold or lost). No row may answer 500, nor 503 for a
            conflict.
  one try   the rows that retry, again on the cluster with one attempt: what the
            retries buy
  node kill the rows that claim safety, under load on endless stock: one node killed
            (-9) a second in, restarted once the load is over; acknowledged sales
            missing from the ledger after it rejoined (goal 0) and the time from the
            kill to the first 200 from the instance bound to the dead node (it moves
            to the next node)
  all killed the first safe row under load; every node killed within a second,
            restarted (bootstrapped from the node with the newest data), the sales
            acknowledged and missing from the ledger counted: with the stack's
            innodb_flush_log_at_trx_commit=2, then with 1

Writes results/cluster-<timestamp>/ (cluster.json, cluster.csv, cluster.md: the
strategy x {single node, cluster, node killed} table, and history.jsonl: every request's
invocation, completion and answer, one JSON object a line, for a history checker) and
points results/cluster-latest at it. Exit status 1 when a row contradicts its fact, 2
when the run cannot be made.

--quick (the short check): two instances, the first row of each fact and every
conflicts_at_commit row, no all-killed rows."""

import json
import os
import time

from ..base.common import ENDLESS_STOCK, SetupError, comma_list
from ..client import facts as facts_mod
from ..client.api import Api, wait_reset_seen
from ..client.facts import CLUSTER_SAFE, CLUSTER_UNSAFE
from ..client.sales import deduct_path
from ..stack.service import CLUSTER_SERVICE, node_names, stack, wait_healthy
from ..drivers.buyers import Buyers
from ..judges import history as history_mod
from ..judges.gate import judge_history
from ..reports import cluster_report
from ..scaffold.runner import Runner, report_fact_rows

FIRST_OK_GOAL_S = 10.0
# Every row of this fact is in the short check, not only its first: their safety rests on
# the node reporting every abort, whatever statement it lands on. One that reads the count
# under SELECT ... FOR UPDATE and writes it back lost sales when an abort reported after
# the read's row went unseen, and only its node-kill phase showed it within seconds.
QUICK_EVERY = "conflicts_at_commit"

ROW_FIELDS = [
    "phase", "strategy", "fact", "instances", "buyers", "ok", "busy", "sold_out",
    "unavailable", "other", "seconds", "per_s", "busy_per_s", "sold", "oversold",
    "lost_updates", "undersold", "acked_missing", "first_ok_s", "history", "history_ops",
    "verdict", "reason",
]
TABLE = [
    ("phase", "phase", "<"), ("strategy", "strategy", "<"), ("fact", "fact", "<"),
    ("200", "ok", ">"), ("busy", "busy", ">"), ("sold out", "sold_out", ">"),
    ("503", "unavailable", ">"), ("other", "other", ">"), ("200/s", "per_s", ">"),
    ("busy/s", "busy_per_s", ">"), ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"),
    ("undersold", "undersold", ">"), ("acked missing", "acked_missing", ">"),
    ("first 200 s", "first_ok_s", ">"), ("history", history_mod.short, "<"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["CLUSTER_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy with a cluster fact")
    o.add("--instances", ["CLUSTER_INSTANCES"], 3, int, "stockd instances, one per node", 2)
    o.add("--units", ["CLUSTER_UNITS"], 200, int, "stock per row, and as many buyers", 10)
    o.add("--conns", ["CLUSTER_CONNS"], 4, int, "buyers' connections per instance", 1)
    o.add("--hold-ms", ["CLUSTER_HOLD_MS"], 5, int, "every sale's stay in its critical section",
          0)
    o.add("--kill-s", ["CLUSTER_KILL_S"], 8.0, float,
          "the node-kill rows' load after the kill, seconds", 2)
    o.add("--product", ["CLUSTER_PRODUCT"], 9001, int, "first product id", 1)
    o.flag("--quick", "the short check: two instances, the first row of each fact and "
           "every conflicts_at_commit row, no all-killed rows")


def after_parse(ns, error):
    if ns.quick:
        ns.instances = 2


def chosen(facts, args):
    rows = [s for s in facts.select(args.strategies) if s.cluster]
    if args.quick:
        seen, quick = set(), []
        for s in rows:
            if s.cluster not in seen or s.cluster == QUICK_EVERY:
                seen.add(s.cluster)
                quick.append(s)
        rows = quick
    if not rows:
        raise SetupError("no strategy with a cluster fact was chosen")
    return rows


# ------------------------------------------------------------------ the stack


class Instances:
    """N build/stockd behind the stack's nginx (scripts/stack.sh instances-up), bound to
    the stack's one MariaDB or, instance i, to cluster node i."""

    def __init__(self, n, say):
        self.n, self.say = n, say
        base = int(os.environ.get("STACK_STOCKD_PORT_BASE") or 23091)
        self.ports = [base + i for i in range(n)]
        self.nginx = Api.with_admin_token("127.0.0.1",
                                          int(os.environ.get("STACK_NGINX_PORT") or 23080))
        self.on = None

    def must_reset(self, product, count):
        """The reset, through nginx, then read back through every instance (each on its
        own node): the row's fault comes only once every node holds it."""
        self.nginx.must_reset(product, count)
        wait_reset_seen([Api("127.0.0.1", p) for p in self.ports], product, count, "mysql")

    def up(self, on, extra=None):
        """Instances on `on` ("single" or the cluster), restarted when that changes."""
        if self.on == (on, extra):
            return
        stack("instances-down")
        env = {"STOCKD_IO_TIMEOUT_MS": "2000", "STOCKD_CONNECT_TIMEOUT_MS": "300",
               "STOCKD_REQUEST_TIMEOUT_MS": "15000", **(extra or {})}
        if on == CLUSTER_SERVICE:
            env["STACK_INSTANCES_MYSQL"] = CLUSTER_SERVICE
        else:
            env["STACK_INSTANCES_MYSQL"] = ""
        self.say(f"{self.n} instances on {on} {extra or ''}")
        stack("instances-up", str(self.n), env=env)
        self.on = (on, extra)


# ------------------------------------------------------------------ the buyers


class Run:
    def __init__(self, args, inst, history, say):
        self.args, self.inst, self.history, self.say = args, inst, history, say
        self.product = args.product

    def next_product(self):
        self.product += 1
        return self.product

    def record(self, phase, s, product, buyers, t0):
        for i, a in buyers.answers:
            self.history.write(json.dumps({
                "phase": phase, "strategy": s.name, "product": product, "instance": i,
                "invoke_s": round(a.start - t0, 6), "complete_s": round(a.end - t0, 6),
                "status": a.status, "error": a.word or None, "qty": 1,
                "remaining": a.remaining}) + "\n")

    def buy(self, phase, s, product, count=None, during=None, hold_ms=None):
        """The buyers' run on `product`; `during(t0)` runs beside it (and stops it)."""
        hold = self.args.hold_ms if hold_ms is None else hold_ms
        buyers = Buyers(self.inst.ports, deduct_path(s.name, product, hold_ms=hold),
                        self.args.conns, count)
        t0 = buyers.start()
        try:
            extra = during(t0, buyers) if during else None
        finally:
            if during:
                buyers.stop()
            buyers.join()
        seconds = time.monotonic() - t0
        self.record(phase, s, product, buyers, t0)
        return buyers, t0, seconds, extra

    def row(self, phase, s, buyers, seconds, product):
        answers = buyers.answers
        counts = {"ok": 0, "busy": 0, "sold_out": 0, "unavailable": 0, "other": 0}
        others = set()
        for status, word in ((a.status, a.word) for _, a in answers):
            key = {200: "ok"}.get(status) or {"busy": "busy", "sold_out": "sold_out"}.get(word)
            if not key and status == 503:
                key = "unavailable"
            if not key:
                key = "other"
                others.add(f"{status} {word}".strip())
            if status == 503:
                others.add(f"503 {word}")
            counts[key] += 1
        account = self.inst.nginx.account(product, "mysql") or {}
        row = {f: None for f in ROW_FIELDS}
        row.update(phase=phase, strategy=s.name, fact=s.cluster, instances=self.inst.n,
                   buyers=len(answers), seconds=round(seconds, 2),
                   per_s=round(counts["ok"] / seconds, 1) if seconds else None,
                   busy_per_s=round(counts["busy"] / seconds, 1) if seconds else None,
                   sold=account.get("sold"), oversold=account.get("oversold"),
                   lost_updates=account.get("lost_updates"), problems=[], **counts)
        row["answers_seen"] = sorted(others)
        if account.get("sold") is not None:
            row["acked_missing"] = max(0, counts["ok"] - account["sold"])
        judge_history(row, answers, account)
        return row, account

    # ------------------------------------------------------------ the phases

    def sell_out(self, phase, s, hold_ms=None):
        """As many buyers as units; the row and what it left unsold."""
        product = self.next_product()
        self.inst.nginx.must_reset(product, self.args.units)
        buyers, _, seconds, _ = self.buy(phase, s, product, count=self.args.units,
                                         hold_ms=hold_ms)
        row, account = self.row(phase, s, buyers, seconds, product)
        if account.get("remaining") is not None:
            # a unit left while a buyer was refused (each buyer tries once)
            row["undersold"] = min(max(0, account["remaining"]),
                                   row["busy"] + row["unavailable"])
        return row

    @staticmethod
    def judge_load(row):
        fact, broke = row["fact"], (row["oversold"] or 0) + (row["lost_updates"] or 0)
        if row["sold"] is None:
            row["problems"].append("the ledger could not be read")
        elif fact in CLUSTER_SAFE and broke:
            row["problems"].append(f"claims {fact}, but oversold {row['oversold']}, lost "
                                   f"{row['lost_updates']}")
        elif fact == "safe" and row["undersold"]:
            row["problems"].append(f"claims safe, but left {row['undersold']} units unsold "
                                   "while buyers were refused")
        elif fact in CLUSTER_UNSAFE and not broke:
            row["problems"].append(f"claims {fact}, but nothing was oversold or lost")
        if row["other"]:
            row["problems"].append(f"answers outside the contract: {row['answers_seen']}")
        if row["unavailable"]:
            row["problems"].append(f"{row['unavailable']} answers 503 with every node up: "
                                   f"{row['answers_seen']}")

    def node_kill(self, s, victim, dead_instance):
        """Load on endless stock; `victim` killed a second in, restarted after the load."""
        product = self.next_product()
        self.inst.must_reset(product, ENDLESS_STOCK)

        def kill(t0, buyers):
            time.sleep(1.0)
            stack("kill-one", victim)
            killed = time.monotonic()
            time.sleep(self.args.kill_s)
            return killed

        try:
            buyers, t0, seconds, killed = self.buy("node killed", s, product, during=kill)
        finally:
            stack("start-one", victim)
        row, _ = self.row("node killed", s, buyers, seconds, product)
        first = [a.end for i, a in buyers.answers
                 if i == dead_instance and a.status == 200 and a.start >= killed]
        row["first_ok_s"] = round(min(first) - killed, 2) if first else None
        if row["fact"] in CLUSTER_SAFE:
            if row["acked_missing"]:
                row["problems"].append(f"{row['acked_missing']} acknowledged sales missing "
                                       "after the node rejoined")
            if (row["oversold"] or 0) + (row["lost_updates"] or 0):
                row["problems"].append(f"oversold {row['oversold']}, lost "
                                       f"{row['lost_updates']} with a node killed under load")
            if row["first_ok_s"] is None or row["first_ok_s"] > FIRST_OK_GOAL_S:
                row["problems"].append(f"no 200 from the dead node's instance within "
                                       f"{FIRST_OK_GOAL_S:.0f} s")
        if row["other"]:
            row["problems"].append(f"answers outside the contract: {row['answers_seen']}")
        return row

    def all_killed(self, s, nodes, flush):
        """Load; every node killed within a second; the cluster restarted."""
        product = self.next_product()
        self.inst.must_reset(product, ENDLESS_STOCK)
        phase = f"all killed, flush={flush}"

        def kill_all(t0, buyers):
            time.sleep(1.0)
            killed = time.monotonic()
            stack("kill-one", CLUSTER_SERVICE)
            return killed

        env = {"STACK_CLUSTER_FLUSH": str(flush)}
        buyers, _, seconds, killed = self.buy(phase, s, product, during=kill_all)
        stack("start-one", CLUSTER_SERVICE, env=env)
        wait_healthy(self.inst.nginx, 60)  # the instances behind nginx, after the restart
        row, _ = self.row(phase, s, buyers, seconds, product)
        row["first_ok_s"] = None
        if row["acked_missing"] is None:
            row["problems"].append("the ledger could not be read after the restart")
        return row



def restart_cluster(flush, say):
    """Every node restarted with this innodb_flush_log_at_trx_commit (a clean stop)."""
    say(f"cluster: restarting every node with innodb_flush_log_at_trx_commit={flush}")
    stack("stop-one", CLUSTER_SERVICE)
    stack("start-one", CLUSTER_SERVICE, env={"STACK_CLUSTER_FLUSH": str(flush)})


def finish(row):
    witnesses = row.pop("witnesses", None)
    if witnesses:
        row["problems"].append(witnesses)
    row["verdict"] = "fail" if row["problems"] else "pass"
    row["reason"] = "; ".join(row.pop("problems"))
    row.pop("answers_seen", None)
    return row


def brief(row):
    """A row in one progress line."""
    return (f"{row['phase']} {row['strategy']}: {row['ok']} ok, {row['busy']} busy, "
            f"{row['unavailable']} 503, {row['other']} other; oversold {row['oversold']}, lost "
            f"{row['lost_updates']}, undersold {row['undersold']}, acked missing "
            f"{row['acked_missing']}, first 200 {row['first_ok_s']} s: {row['verdict']} "
            f"{row['reason']}")


def work(run):
    args, say = run.args, run.say
    services = os.environ.get("STACK_SERVICES") or "mysql redis redlock zk"
    if CLUSTER_SERVICE not in services.split():
        services += " " + CLUSTER_SERVICE
    os.environ["STACK_SERVICES"] = services
    say(f"scripts/stack.sh up ({services})")
    stack("up")
    nodes = node_names()
    if args.instances > len(nodes):
        raise SetupError(f"{args.instances} instances, but the cluster has {len(nodes)} nodes")
    out_dir = run.out_dir()
    inst = Instances(args.instances, say)
    rows = []

    def add(row):
        rows.append(finish(row))
        say(brief(row))

    with open(os.path.join(out_dir, "history.jsonl"), "w") as history:
        r = Run(args, inst, history, say)
        try:
            inst.up("single")
            facts = facts_mod.parse(inst.nginx.strategies().body)
            strategies = chosen(facts, args)
            for s in strategies:
                say(f"{s.name}: one node (fact on a cluster: {s.cluster})")
                add(r.sell_out("single", s))
            inst.up(CLUSTER_SERVICE)
            for s in strategies:
                say(f"{s.name}: cluster")
                row = r.sell_out("cluster", s)
                r.judge_load(row)
                add(row)
            retrying = [s for s in strategies if s.contention == "retries"]
            if retrying:
                inst.up(CLUSTER_SERVICE, {"STOCKD_OPTIMISTIC_ATTEMPTS": "1"})
                for s in retrying:
                    say(f"{s.name}: cluster, one attempt")
                    row = r.sell_out("cluster, one try", s)
                    row["problems"] = []
                    add(row)
                inst.up(CLUSTER_SERVICE)
            victim, dead_instance = nodes[1], 1
            for s in strategies:
                if s.cluster in CLUSTER_SAFE:
                    say(f"{s.name}: {victim} killed under load")
                    add(r.node_kill(s, victim, dead_instance))
            safe = [s for s in strategies if s.cluster == "safe"]
            if safe and not args.quick:
                for flush in (2, 1):
                    if flush != 2:
                        restart_cluster(flush, say)
                    say(f"{safe[0].name}: every node killed (flush={flush})")
                    add(r.all_killed(safe[0], nodes, flush))
                restart_cluster(2, say)
        finally:
            stack("instances-down", check=False)
    doc = {"started": run.started, "seconds": round(run.elapsed(), 1), "rows": rows,
           "quick": args.quick, "instances": args.instances, "units": args.units,
           "hold_ms": args.hold_ms, "nodes": nodes}
    cluster_report.write(out_dir, doc, ROW_FIELDS)
    return rows, out_dir


def report(run, done):
    return report_fact_rows(run, done, TABLE, "cluster fact",
                            lambda r: f"{r['phase']} {r['strategy']}")


RUNNER = Runner("cluster", __doc__, options=options, after_parse=after_parse, work=work,
                report=report, results="cluster-")
main, parse_args = RUNNER.main, RUNNER.parse
