"""MySQL's half of the partition debate (`make partition`, after the Redis locks' run):
a Galera node cut from the other two under load, in a network namespace of the run's
own (lab.nemesis.netns: root only; only loopback, checked before anything starts).

Inside it: the stack's three Galera nodes (scripts/stack.sh, the service `cluster`,
under run/partition_galera), each on its own address (STACK_CLUSTER_HOSTS: N1..N3 on
127.0.0.31..33: client port, gcomm, IST and SST all there; Galera connects to its peers
from its gcomm address, so a rule between two addresses cuts exactly one link), and one
stockd per node: A on 127.0.0.2 (its node first: N1, then N2, N3), B on 127.0.0.3 (N2
first), C on 127.0.0.4 (N3 first), each listening there and connecting from there
(--bind-source), as the cluster run (lab.runs.cluster) configures its instances.

A row is a strategy whose cluster fact claims it sells safely on the cluster (safe,
conflicts_at_commit: the rows the cluster run kills a node under) and that needs MySQL
alone; and the two_holders rows that are safe with several instances on one server
(safe_multi): their lock is one node's (GET_LOCK), the lock the partition splits (the
majority's two nodes each grant it), where a process's mutex (not safe_multi) has two
holders with or without a cut. On endless stock, buyers on A, B and C
(lab.drivers.buyers); a moment in, N1 and A are cut from N2 and N3 (nftables "reject":
a link that fails at once, so A's attempts at the other nodes fail fast and only N1 is
left to it): N1 leaves the primary component (wsrep_ready=OFF) and refuses every
query. After --cut-s the cut heals; N1 rejoins (IST: only what it missed) and the load
goes on until A has sold again. Rule:

  minority   A sells nothing while it is out (no 200 answered between the cut and the
             heal to a sale started after the cut: one whose COMMIT waited out the cut
             and was answered after the heal is counted apart), and answers only
             what the contract allows for a backend it cannot use: 503
             backend_unavailable (busy, 409, for a transaction the node aborted as it
             left; 503 outcome_unknown for a COMMIT whose outcome the node cannot know); never
             500
  majority   B and C sell on while N1 is out
  heal       N1 back in the primary component, A selling again, within HEAL_GOAL_S;
             every acknowledged sale in the ledger (ledger >= the 200s), and nothing
             there beyond them but what was answered outcome_unknown (a COMMIT that
             went out as the link broke may have been certified by the majority: the
             contract's "the ledger is the truth"), 0 oversold, 0 lost updates (the
             row's cluster fact), and the clients' history linearizable
  two_holders (such a row) the same minority and heal rules, but A's refusals are
             mostly 409 busy (GET_LOCK on a non-primary node fails as a lock-wait
             timeout), so 503 or busy shows the cut; and the fact instead of safety:
             B and C each take GET_LOCK on their own node, so while N1 is out some
             count is answered by a 200 of B and a 200 of C (two holders sold the
             same unit: hold_ms keeps every sale in its critical section long enough
             for that to happen every run), and the ledger shows it - on endless
             stock nothing can be oversold, so as a lost update (lost > 0, the
             history not linearizable); the ledger still holds every 200

Writes results/partition_galera-<timestamp>/ (galera.json, galera.csv, galera.md: the
table for docs/cluster.md, timeline.svg: the first row along its real clock, junit.xml)
and points results/partition_galera-latest at it.
Exit status 1 when a row breaks the rule or its fact, 2 when the run cannot be made
(not root: it says so).

--retrying-buyers N (PARTITION_GALERA_RETRYING_BUYERS; lab.scaffold.retrying_mode): on
each row, beside its buyers and through its cut, N buyers with an Idempotency-Key and N
without, on two products of their own, each purchase's first try sent to A and each
retry to the next stockd in turn (B, C, A...), as a load balancer sends a request whose
answer was lost to another instance: A's refusals while its node is out, its COMMITs
that wait out the cut, and the client's own timeouts are retried through the majority.
The row gains each kind's double buys; a keyed double buy on a strategy that claims
keys fails it. Off (0) by default: the run is then as it was.

--quick (the test gate): the first row of each of the two safe facts, a shorter cut; no
two_holders row."""

import os
import subprocess
import sys
import time

from ..base.common import ENDLESS_STOCK, SetupError, comma_list, write_text
from ..client import facts as facts_mod, sources
from ..client.api import wait_reset_seen
from ..client.facts import CLUSTER_SAFE, CLUSTER_UNSAFE
from ..client.sales import deduct_path
from ..stack.nodes import ADDRESS, Node, RedisServer
from ..stack.service import node_names, run_dir, secret, stack, stack_env, stack_script
from ..drivers.buyers import Buyers
from ..nemesis import netns
from ..judges.gate import judge_history
from ..reports import failover_report, junit, tables
from ..scaffold.runner import Runner, report_fact_rows
from ..scaffold import setup_retry
from ..scaffold.retrying_mode import (RetryingClients, claims_of, folded, retrying_options,
                                      with_columns)

NODE_HOSTS = ("127.0.0.31", "127.0.0.32", "127.0.0.33")
STOCKD_HOSTS = {"A": "127.0.0.2", "B": "127.0.0.3", "C": "127.0.0.4"}
STOCKD_PORT = 8080
HEAL_GOAL_S = 30.0
# How long N1 may stay in the primary component after the cut before the row says its
# cut did not take (Galera notices a silent peer after its suspect timeout; a loaded
# machine has taken longer than the row's whole cut to).
OUT_GOAL_S = 15.0
# The retrying buyers' products: row i's are product + RETRYING_PRODUCTS + 2i and the next.
RETRYING_PRODUCTS = 100

ROW_FIELDS = ["strategy", "fact", "cut_s", "ok_before", "ok_minority", "minority_503",
              "minority_busy", "minority_unknown", "minority_other", "minority_held",
              "ok_majority", "majority_first_ok_s", "majority_twins", "rejoin_s",
              "a_first_ok_s", "state_transfer", "ok", "unknown", "sold", "acked_missing",
              "extra_in_ledger", "oversold", "lost_updates", "history", "history_ops",
              "seconds", "verdict", "reason"]
TABLE = [
    ("strategy", "strategy", "<"), ("fact", "fact", "<"), ("cut s", "cut_s", ">"),
    ("A 200 out", "ok_minority", ">"), ("A 503", "minority_503", ">"),
    ("A busy", "minority_busy", ">"), ("A unknown", "minority_unknown", ">"),
    ("A other", "minority_other", ">"), ("A 200 at heal", "minority_held", ">"),
    ("B+C 200 out", "ok_majority", ">"), ("B+C first s", "majority_first_ok_s", ">"),
    ("B=C count", "majority_twins", ">"),
    ("rejoin s", "rejoin_s", ">"), ("A again s", "a_first_ok_s", ">"),
    ("transfer", "state_transfer", "<"), ("200", "ok", ">"), ("unknown", "unknown", ">"),
    ("ledger", "sold", ">"),
    ("missing", "acked_missing", ">"), ("oversold", "oversold", ">"),
    ("lost", "lost_updates", ">"), ("history", lambda r: r["history"] or "-", "<"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["PARTITION_GALERA_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy safe on the cluster that needs MySQL alone")
    o.add("--cut-s", ["PARTITION_GALERA_CUT_S"], 8.0, float, "how long N1 and A stay cut", 2)
    o.add("--conns", ["PARTITION_GALERA_CONNS"], 2, int, "buyers' connections per instance", 1)
    o.add("--hold-ms", ["PARTITION_GALERA_HOLD_MS"], 5, int,
          "every sale's stay in its critical section", 0)
    o.add("--product", ["PARTITION_GALERA_PRODUCT"], 8701, int, "first product id", 1)
    o.flag("--quick", "the test gate's version: the first row of each fact, a 4 s cut")
    retrying_options(o, "PARTITION_GALERA_RETRYING_")


def after_parse(args, error):
    if args.quick:
        args.cut_s = min(args.cut_s, 4.0)


def chosen(facts, args):
    """The rows: a safe cluster fact, or two_holders by a lock one node grants (safe
    with several instances on one server); MySQL the only backend. --quick: the first
    safe row of each fact."""
    mysql = sources.backend_name("mysql.c")
    rows, seen = [], set()
    for s in facts.select(args.strategies):
        node_lock = s.cluster == "two_holders" and s.safe_multi
        if not (s.cluster in CLUSTER_SAFE or node_lock) or s.needs != [mysql]:
            continue
        if args.quick and (s.cluster in seen or node_lock):
            continue
        seen.add(s.cluster)
        rows.append(s)
    if not rows:
        raise SetupError("no chosen strategy is safe on the cluster with MySQL alone")
    return rows


# ------------------------------------------------------------ pure judging


def phase_counts(answers, cut, heal):
    """Per side, what was answered to sales that started while N1 was cut (for A, a 200
    answered after the heal apart: its COMMIT waited out the cut): `answers`
    are (instance index, lab.drivers.load.Answer), instance 0 being A (the minority)."""
    out = {"ok_before": 0, "ok_minority": 0, "minority_503": 0, "minority_busy": 0,
           "minority_unknown": 0, "minority_other": 0, "minority_held": 0, "ok_majority": 0,
           "majority_first_ok_s": None}
    others = set()
    for i, a in answers:
        if a.start < cut:
            out["ok_before"] += a.status == 200
            continue
        if a.start >= heal:
            continue
        if i != 0:
            if a.status == 200:
                out["ok_majority"] += 1
                first = round(a.end - cut, 2)
                if out["majority_first_ok_s"] is None or first < out["majority_first_ok_s"]:
                    out["majority_first_ok_s"] = first
        elif a.status == 200 and a.end >= heal:
            out["minority_held"] += 1  # a COMMIT that waited out the cut
        elif a.status == 200:
            out["ok_minority"] += 1
        elif (a.status, a.word) == (503, "backend_unavailable"):
            out["minority_503"] += 1
        elif (a.status, a.word) == (409, "busy"):
            out["minority_busy"] += 1
        elif (a.status, a.word) == (503, "outcome_unknown"):
            out["minority_unknown"] += 1
        else:
            out["minority_other"] += 1
            others.add(f"{a.status} {a.word}".strip())
    out["minority_answers_seen"] = sorted(others)
    out["majority_twins"] = majority_twins(answers, cut, heal)
    return out


def majority_twins(answers, cut, heal):
    """How many counts left were answered by a 200 of B and a 200 of C both started while
    N1 was cut: each one is two holders, one on each node of the majority, that sold the
    same unit."""
    by_instance = {1: set(), 2: set()}
    for i, a in answers:
        if i in by_instance and a.status == 200 and cut <= a.start < heal \
                and a.remaining is not None:
            by_instance[i].add(a.remaining)
    return len(by_instance[1] & by_instance[2])


def judge(row):
    """The rule of the module's docstring, and the row's cluster fact; the reasons. A row
    whose cut never took (row["setup"]) is not judged: its verdict is setup."""
    if row.get("setup"):
        return setup_retry.setup_verdict(row, row["setup"])
    problems = []
    if row["ok_minority"]:
        problems.append(f"A sold {row['ok_minority']} while its node was out")
    if row["minority_other"]:
        problems.append(f"A answered outside the contract while out: "
                        f"{row.get('minority_answers_seen')}")
    if row["fact"] == "two_holders" and not row["minority_503"] + row["minority_busy"]:
        # GET_LOCK on a node out of the primary component fails as a lock-wait timeout
        # (A's log shows it for RELEASE_LOCK), which stockd reads as contention (409)
        problems.append("A never answered 503 or busy while its node was out (was it cut?)")
    elif row["fact"] != "two_holders" and not row["minority_503"]:
        problems.append("A never answered 503 while its node was out (was it cut?)")
    if not row["ok_majority"]:
        problems.append("B and C sold nothing while N1 was out")
    if row["rejoin_s"] is None or row["a_first_ok_s"] is None:
        problems.append(f"N1 or A not back within {HEAL_GOAL_S:.0f} s of the heal")
    if row["sold"] is None:
        problems.append("the ledger could not be read")
    else:
        if row["acked_missing"]:
            problems.append(f"{row['acked_missing']} acknowledged sales missing from the ledger")
        if row["extra_in_ledger"] > (row["unknown"] or 0):
            problems.append(f"{row['extra_in_ledger']} sales in the ledger beyond the 200s, "
                            f"but only {row['unknown']} answers outcome_unknown")
        broke = (row["oversold"] or 0) + (row["lost_updates"] or 0)
        if row["fact"] in CLUSTER_UNSAFE and not broke:
            problems.append(f"claims {row['fact']}, but nothing was oversold or lost")
        elif row["fact"] not in CLUSTER_UNSAFE and broke:
            problems.append(f"claims {row['fact']}, but oversold {row['oversold']}, lost "
                            f"{row['lost_updates']}")
    if row["fact"] == "two_holders" and not row.get("majority_twins"):
        problems.append("claims two_holders, but no count was answered by both B and C "
                        "while N1 was out")
    if row.get("witnesses"):
        problems.append(row["witnesses"])
    row["verdict"] = "fail" if problems else "pass"
    row["reason"] = "; ".join(problems)
    return row


def timeline_marks(answers, t0, marks, row, seconds):
    """The row's moments, seconds from the load's start: the cut, A's first 503 after
    it (N1 out of the primary component), B's and C's first 200 after it, the heal, N1
    back, A's first 200 after it, the end."""
    cut, heal = marks["cut"], marks["heal"]
    out = [a.end for i, a in answers if i == 0 and a.start >= cut and a.status == 503]

    def since(base, delta):
        return None if delta is None else round(base - t0 + delta, 3)

    return {"cut": round(cut - t0, 3), "out": round(min(out) - t0, 3) if out else None,
            "majority_again": since(cut, row["majority_first_ok_s"]),
            "heal": round(heal - t0, 3), "rejoined": since(heal, row["rejoin_s"]),
            "a_again": since(heal, row["a_first_ok_s"]), "end": round(seconds, 3)}


def timeline_svg(row):
    """One row along its real clock: N1 cut and out, the majority's stall and its sales
    on, the heal, N1's return, A's 503s and its sales again (lab.reports.failover_report's
    primitives)."""
    m = row["timeline"]
    lanes = ("N1", "N2, N3", "stockd A", "stockd B, C")
    axis = failover_report.Axis(0, m["end"], lanes)
    bar, mark = failover_report.bar, failover_report.mark
    out = m["out"] or m["heal"]
    back = m["rejoined"] or m["end"]
    again = m["a_again"] or m["end"]
    majority = m["majority_again"] or m["heal"]
    parts = [
        bar(axis, "N1", 0, m["cut"], "alive", "primary component"),
        bar(axis, "N1", m["cut"], out, "gap", "cut: suspects N2, N3"),
        bar(axis, "N1", out, m["heal"], "held", "non-primary: wsrep_ready=OFF"),
        bar(axis, "N1", m["heal"], back, "new", "IST"),
        bar(axis, "N1", back, m["end"], "alive", "back"),
        mark(axis, "N2, N3", m["heal"], "heal"),
        bar(axis, "N2, N3", 0, m["cut"], "alive", "primary component"),
        bar(axis, "N2, N3", m["cut"], majority, "gap", "evicting N1"),
        bar(axis, "N2, N3", majority, m["end"], "alive", "primary component of two"),
        bar(axis, "stockd A", 0, m["cut"], "sold", "sells"),
        bar(axis, "stockd A", m["cut"], out, "gap", "its commits wait"),
        bar(axis, "stockd A", out, m["heal"], "held",
            f"503 backend_unavailable x{row['minority_503']}, 200 x{row['ok_minority']}"),
        bar(axis, "stockd A", again, m["end"], "sold", "sells"),
        bar(axis, "stockd B, C", 0, m["cut"], "sold", "sell"),
        bar(axis, "stockd B, C", m["cut"], majority, "gap", "their commits wait"),
        bar(axis, "stockd B, C", majority, m["end"], "sold",
            f"sell on: 200 x{row['ok_majority']} while N1 is out"),
    ]
    title = (f"{row['strategy']}: one Galera node and its stockd cut from the other two "
             f"for {row['cut_s']:g} s - the minority sells nothing, the majority sells on")
    return failover_report.picture(axis, 0, title, parts)


def transfer_kind(log_text):
    """How a rejoining node caught up, from the lines its log gained: IST, SST or none."""
    if "IST received" in log_text or "Receiving IST" in log_text:
        return "IST"
    if "State transfer required" in log_text or "SST" in log_text:
        return "SST"
    return "none"


def table_md(rows):
    """The table of docs/cluster.md's partition section."""
    cols = [("strategy", "strategy"), ("fact", "fact"),
            ("A while out: 200 / 503 / busy / unknown / other",
             lambda r: f"{r['ok_minority']} / {r['minority_503']} / {r['minority_busy']} / "
                       f"{r['minority_unknown']} / {r['minority_other']}"),
            ("B+C: 200 while out", "ok_majority"), ("B+C first 200 s", "majority_first_ok_s"),
            ("B+C: same count", "majority_twins"),
            ("N1 rejoined s", "rejoin_s"), ("A sells again s", "a_first_ok_s"),
            ("transfer", "state_transfer"),
            ("200s / unknown / ledger", lambda r: f"{r['ok']} / {r['unknown']} / {r['sold']}"),
            ("oversold", "oversold"), ("lost", "lost_updates"), ("verdict", "verdict")]
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        cells = [f(r) if callable(f) else r.get(f) for _, f in cols]
        cells[0] = f"`{cells[0]}`"
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------ the run


class Galera:
    def __init__(self, args, nodes, instances, cuts, say, claims, out_dir):
        self.args, self.nodes, self.instances = args, nodes, instances
        self.cuts, self.say, self.claims, self.out_dir = cuts, say, claims, out_dir
        self.n1 = nodes[0]

    def cut(self):
        """N1 and A on one side, N2 and N3 on the other: every link between them fails."""
        minority = (NODE_HOSTS[0], STOCKD_HOSTS["A"])
        self.cuts.apply([(x, y) for x in minority for y in NODE_HOSTS[1:]], "reject")

    def ready(self, node):
        out = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={node_socket(node)}", "-uroot", "-N",
             "-e", "SHOW STATUS LIKE 'wsrep_ready'"], stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, universal_newlines=True, timeout=5).stdout
        return out.split()[-1:] == ["ON"]

    def run_row(self, s, product):
        self.say(f"{s.name}: N1 and A cut for {self.args.cut_s} s under load "
                 f"(fact on a cluster: {s.cluster})")
        api = self.instances[1].api
        api.must_reset(product, ENDLESS_STOCK)  # the cut comes once every node holds it
        wait_reset_seen([i.api for i in self.instances], product, ENDLESS_STOCK, "mysql")
        buyers = Buyers([STOCKD_PORT] * 3, deduct_path(s.name, product, hold_ms=self.args.hold_ms),
                        self.args.conns, hosts=[i.api.host for i in self.instances],
                        timeout_s=30)
        retrying = RetryingClients(self.args, self.claims)
        log = node_log(self.n1)
        log_at = os.path.getsize(log)
        # A's first, then B's and C's: a retry goes to the next stockd, as a balancer's does
        hosts = [i.api.host for i in self.instances]
        first = self.args.product + RETRYING_PRODUCTS + 2 * (product - self.args.product)
        retrying.start(hosts[0], STOCKD_PORT, self.instances[0].api, s.name, s.store, first,
                       also=[(h, STOCKD_PORT) for h in hosts[1:]])
        t0 = buyers.start()
        marks = {}
        try:
            time.sleep(1.5)
            self.cut()
            marks["cut"] = time.monotonic()
            self.wait_out(marks["cut"])  # the row's cut_s are counted once N1 is out
            time.sleep(self.args.cut_s)
            marks["out_ready"] = self.ready(self.n1)
            # the mark before the rules go: an answer the healed link carried while nft
            # was still exiting must not count as sold while out
            marks["heal"] = time.monotonic()
            self.cuts.heal()
            marks.update(self.wait_back(buyers, marks["heal"]))
            time.sleep(1.0)
        finally:
            self.cuts.heal()
            buyers.stop()
            retrying.stop()
            buyers.join()
        seconds = time.monotonic() - t0
        with open(log, errors="replace") as f:
            f.seek(log_at)
            gained = f.read()
        row = {f: None for f in ROW_FIELDS}
        row.update(strategy=s.name, fact=s.cluster, cut_s=self.args.cut_s,
                   seconds=round(seconds, 1), state_transfer=transfer_kind(gained),
                   rejoin_s=marks.get("rejoin_s"), a_first_ok_s=marks.get("a_first_ok_s"),
                   n1_ready_while_out=marks["out_ready"])
        row.update(phase_counts(buyers.answers, marks["cut"], marks["heal"]))
        # the evidence of a failing row: each sale A answered while out (seconds from the cut)
        row["minority_sales"] = [[round(a.start - marks["cut"], 3), round(a.end - marks["cut"], 3)]
                                 for i, a in buyers.answers if i == 0 and a.status == 200
                                 and marks["cut"] <= a.start < a.end < marks["heal"]]
        row["timeline"] = timeline_marks(buyers.answers, t0, marks, row, seconds)
        row["ok"] = sum(a.status == 200 for _, a in buyers.answers)
        row["unknown"] = sum(a.word == "outcome_unknown" for _, a in buyers.answers)
        account = api.account(product, s.store) or {}
        row.update(sold=account.get("sold"), oversold=account.get("oversold"),
                   lost_updates=account.get("lost_updates"))
        if row["sold"] is not None:
            row["acked_missing"] = max(0, row["ok"] - row["sold"])
            row["extra_in_ledger"] = max(0, row["sold"] - row["ok"])
        if account.get("initial") is not None:
            judge_history(row, buyers.answers, account)
        row.update(retrying.finish(api, self.out_dir, s.name))
        return row

    def wait_out(self, cut):
        """Until N1 has left the primary component after the cut; SetupError past
        OUT_GOAL_S (the cut did not take: not the strategy's doing)."""
        while self.ready(self.n1):
            if time.monotonic() - cut > OUT_GOAL_S:
                raise SetupError(f"N1 was still in the primary component {OUT_GOAL_S:.0f} s "
                                 "after the cut")
            time.sleep(0.05)

    def tried_row(self, s, product):
        """run_row, run once more when its setup failed (lab.scaffold.setup_retry); a row
        whose setup fails twice comes back with row["setup"] saying why, to be reported
        apart from the verdicts."""
        row, _ = setup_retry.tried(lambda: self.row_or_setup(s, product),
                                   lambda row: row.get("setup"), self.say,
                                   f"{s.name}: the row's setup failed")
        return row

    def row_or_setup(self, s, product):
        """One try of the row: run_row's, or, when its setup failed, a row whose
        row["setup"] says why."""
        try:
            return self.run_row(s, product)
        except SetupError as e:
            row = {f: None for f in ROW_FIELDS}
            row.update(strategy=s.name, fact=s.cluster, cut_s=self.args.cut_s, setup=str(e))
            return row

    def wait_back(self, buyers, heal):
        """Seconds from the heal until N1 is in the primary component again, and until A's
        first 200 that started after the heal."""
        out, deadline = {}, heal + HEAL_GOAL_S
        while time.monotonic() < deadline and len(out) < 2:
            if "rejoin_s" not in out and self.ready(self.n1):
                out["rejoin_s"] = round(time.monotonic() - heal, 2)
            firsts = [a.end for i, a in list(buyers.answers) if i == 0 and a.status == 200
                      and a.start >= heal]
            if firsts:
                out["a_first_ok_s"] = round(min(firsts) - heal, 2)
            time.sleep(0.1)
        return out


def node_dir(node):
    return os.path.join(run_dir(), "cluster", node)


def node_socket(node):
    return os.path.join(node_dir(node), "node.sock")


def node_log(node):
    return os.path.join(run_dir(), "stack", f"{node}.log")


def start_instances(nodes, out_dir, say, instances):
    """A, B, C, added to `instances` as each starts (so that the caller stops those that
    did when one does not): instance i on node i first, then the others in turn
    (--mysql-nodes), as the cluster run configures them; the stockd user allowed from
    every 127.0.0.N."""
    env = stack_env()
    pw = secret(env, "STOCKD_MYSQL_PASSWORD_FILE").replace("\\", "\\\\").replace("'", "\\'")
    grant = (f"CREATE USER IF NOT EXISTS 'stockd'@'127.0.0.%' IDENTIFIED BY '{pw}'; "
             "GRANT ALL PRIVILEGES ON stockd.* TO 'stockd'@'127.0.0.%';")
    if subprocess.run(["mariadb", "--no-defaults", f"--socket={node_socket(nodes[0])}",
                       "-uroot", "-e", grant]).returncode:
        raise SetupError("granting the stockd user 127.0.0.% failed")
    base = {k: v for k, v in env.items() if k.startswith("STOCKD_MYSQL_")}
    ports = [int(n.split("-")[1]) for n in nodes]
    for i, name in enumerate(STOCKD_HOSTS):
        order = [(i + k) % len(nodes) for k in range(len(nodes))]
        listed = ",".join(f"{NODE_HOSTS[j]}:{ports[j]}" for j in order)
        say(f"stockd {name} on {STOCKD_HOSTS[name]}: --mysql-nodes={listed}")
        inst = Node(name, STOCKD_PORT, base,
                    [f"--mysql-nodes={listed}", f"--redis-host={ADDRESS['R0']}",
                     "--connect-timeout-ms=300",
                     "--io-timeout-ms=10000", "--request-timeout-ms=15000"], out_dir,
                    STOCKD_HOSTS[name])
        instances.append(inst)
        inst.start()


def work(run):
    args, say = run.args, run.say
    routes = netns.prepare(say, "partition_galera", STACK_SERVICES="cluster",
                           STACK_CLUSTER_HOSTS=" ".join(NODE_HOSTS))
    cuts = netns.Cuts()
    out_dir = run.out_dir()
    rows, instances = [], []
    # stockd's health wants its main Redis, though no row here uses it
    redis = RedisServer("R0", os.path.join(run_dir(), "redis"))
    try:
        redis.start()
        say("the Galera cluster of the namespace (scripts/stack.sh up, service cluster)")
        stack("up")
        nodes = node_names()
        if len(nodes) != len(NODE_HOSTS):
            raise SetupError(f"the cluster has {len(nodes)} nodes, the run wants 3")
        start_instances(nodes, out_dir, say, instances)
        doc = instances[1].api.strategies().body
        facts = facts_mod.parse(doc)
        g = Galera(args, nodes, instances, cuts, say, claims_of(doc), out_dir)
        for i, s in enumerate(chosen(facts, args)):
            row = judge(g.tried_row(s, args.product + i))
            row["verdict"], row["reason"] = folded(row["verdict"], row["reason"], row)
            row.pop("minority_answers_seen", None)
            row.pop("witnesses", None)
            rows.append(row)
            say(f"{s.name}: A {row['ok_minority']} 200 / {row['minority_503']} 503 while out, "
                f"B+C {row['ok_majority']} 200, {row['majority_twins']} counts both; rejoined {row['rejoin_s']} s "
                f"({row['state_transfer']}); 200s {row['ok']}, ledger {row['sold']}: "
                f"{row['verdict']} {row['reason']}")
    finally:
        unclean = []
        for inst in instances:
            try:
                inst.stop()
            except SetupError as e:  # a stockd that did not exit 0: said once all is down
                unclean.append(str(e))
        redis.kill()
        # the namespace's stack goes with it: the next run starts from nothing
        subprocess.run([stack_script(), "clean"], stdout=sys.stderr, stderr=sys.stderr)
    if unclean:
        raise SetupError("; ".join(unclean))
    doc = {"started": run.started, "seconds": round(run.elapsed(), 1), "rows": rows,
           "quick": args.quick, "routes": routes, "cut_s": args.cut_s,
           "hold_ms": args.hold_ms, "conns": args.conns, "nodes": list(NODE_HOSTS),
           "stockds": STOCKD_HOSTS}
    write_text(os.path.join(out_dir, "galera.json"), tables.json_text(doc))
    fields, _ = with_columns(args, ROW_FIELDS, TABLE)
    write_text(os.path.join(out_dir, "galera.csv"), tables.csv_text(rows, fields))
    write_text(os.path.join(out_dir, "galera.md"), table_md(rows))
    if rows:
        write_text(os.path.join(out_dir, "timeline.svg"), timeline_svg(rows[0]))
    junit.write(os.path.join(out_dir, "junit.xml"), "partition_galera", rows,
                lambda r: f"{r['strategy']} N1 cut {r['cut_s']} s", lambda r: r["seconds"],
                {"cut_s": args.cut_s, "hold_ms": args.hold_ms})
    return rows, out_dir


def report(run, done):
    _, table = with_columns(run.args, ROW_FIELDS, TABLE)
    return report_fact_rows(run, done, table, "rule and cluster fact",
                            lambda r: f"{r['strategy']} N1 cut")


RUNNER = Runner("partition_galera", __doc__, options=options, work=work, report=report,
                results="partition_galera-", after_parse=after_parse)
parse_args = RUNNER.parse


def main(argv):
    """Outside the namespace: checks root, then runs again inside a fresh one."""
    return netns.main(RUNNER, argv)
