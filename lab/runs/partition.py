"""The Redlock debate's faults, staged whole (`make partition`): a server's clock that
jumps, a server restarted without its data, a grant answered late, each under a lock
that is held, in a network namespace of the run's own (lab.nemesis.netns: root only; only
loopback, checked before anything starts).

Inside it: MariaDB (scripts/stack.sh, the service `mysql`, under run/partition), four
Redis servers the run starts itself, each on its own address and with its own wall
clock (build/clockshim.so: an offset in a file, read at every call) - R0, the main
Redis, on 127.0.0.10, and the three Redlock servers R1..R3 on 127.0.0.11..13 - two
delay proxies (lab.nemesis.delay_proxy), and two stockd instances: A on 127.0.0.2 and B on
127.0.0.3, each listening there and making every backend connection from there
(--bind-source), so that nftables rules between addresses cut exactly one stockd
from one server. A reaches R0 and R3 through the proxies (127.0.0.20, 127.0.0.23).
Before the rows, the run checks that R3 sees A's and B's connections from their
own addresses (CLIENT LIST).

A row is a strategy whose lease states the case (GET /strategies: lease.clock_jump,
lease.empty_restart, lease.late_grant), on the servers its lock uses: the three
Redlock servers when it needs them, else R0. A's sale takes the lock and reads the
last unit, then stays between its read and its write (hold_ms); the fault happens;
B's sale comes; A writes. Judged by the ledger (oversold) and by the clients'
history (lab.judges.history: linearizable exactly when nothing was oversold):

  clock_jump     Kleppmann's scenario. Redlock: A cut from R3, B cut from R1; A holds
                 R1 and R2; R2's clock jumps past the TTL (the key expires at once);
                 B takes R2 and R3, a majority. One server (R0): its clock jumps.
                 The row must do what its fact says; the control row (no jump) must
                 refuse B and oversell nothing: the jump is the cause.
  empty_restart  antirez's caveat: R2 (or R0) is killed and started again without
                 its data at once: as its fact says. The control: started again
                 only after a TTL (the delayed restart): B refused, nothing oversold.
  late_grant     A's lock reply from the last server it asks (R3, or R0) held by
                 the proxy for TTL + 1 s; once every key of A's has expired, B takes
                 the lock and stays between its read and its write (hold_ms) while
                 A's grant arrives. "oversells": A sells on a lock it no longer
                 has; "safe": A does not sell (Redlock's validity check refuses the
                 lock; fencing refuses the write).

Writes results/partition-<timestamp>/ (partition.json, partition.csv, partition.md:
the debate table's new columns, clock-jump.svg: the first Redlock clock-jump row along
its real clock, junit.xml) and points results/partition-latest at it.
Exit status 1 when a row contradicts its fact, 2 when the run cannot be made (not
root: it says so).

--retrying-buyers N (PARTITION_RETRYING_BUYERS; lab.scaffold.retrying_mode): on each
clock_jump and empty_restart row, N buyers with an Idempotency-Key and N without, on two
products of their own, sent to A once the row has frozen it: each try waits in A's
socket past the client's timeout and is retried, and the thaw runs every one of them.
Started only then, since before, a buyer asleep in its own critical section would pass
for A's sale holding its lock. A late_grant row has none: it watches the lock servers'
keys expire, which the buyers' locks would keep there, and A's way to its lock is
delayed. The row gains each kind's double buys; a keyed double buy on a strategy that
claims keys fails it. Off (0) by default: the run is then as it was.

--quick (the test gate): the first row of each case, fact and kind of servers, with
its control."""

import os
import subprocess
import sys
import threading
import time

from ..base.common import SetupError, comma_list, now_iso, write_text
from ..client import facts as facts_mod, sources
from ..client.sales import TimedSale, answer_word, deduct, timed_sale
from ..stack.nodes import ADDRESS, REDIS_PORT, Node, RedisServer, mysql_env
from ..stack.service import run_dir, stack_script
from ..drivers.load import Answer
from ..nemesis import netns
from ..nemesis.delay_proxy import DelayProxy
from ..judges import history
from ..reports import failover_report, junit, tables
from ..scaffold.runner import Runner, report_fact_rows
from ..scaffold.retrying_mode import (RetryingClients, claims_of, folded, retrying_options,
                                      with_columns)

CASES = ("clock_jump", "empty_restart", "late_grant")
CONTROLS = {"clock_jump": "no jump", "empty_restart": "delayed restart"}
PROXIED = {"R0": "127.0.0.20", "R3": "127.0.0.23"}  # A's way to these servers
HOLD_MS = 1000  # the holder's stay between its read and its write: it is frozen there
WARM_UP = 500  # a late_grant row's undelayed first sale: on its product + WARM_UP
RETRYING_PRODUCTS = 1000  # row i's retrying buyers': first product + this + 2i, and the next

ROW_FIELDS = ["strategy", "case", "fault", "servers", "fact", "first_holder", "second_holder",
              "store_sold", "oversold", "lost_updates", "history", "history_linearizable",
              "seconds", "verdict", "reason"]
TABLE = [
    ("strategy", "strategy", "<"), ("case", "case", "<"), ("fault", "fault", "<"),
    ("servers", "servers", "<"), ("expect", "fact", "<"), ("A", "first_holder", "<"),
    ("B", "second_holder", "<"), ("ledger", "store_sold", ">"), ("oversold", "oversold", ">"),
    ("history", history.short, "<"), ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["PARTITION_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy whose lease states a partition case")
    o.add("--ttl-ms", ["PARTITION_TTL_MS"], 4000, int, "the locks' TTL (--lock-ttl-ms)", 2000)
    o.add("--wait-ms", ["PARTITION_WAIT_MS"], 800, int,
          "how long A and B wait for a lock before busy (--lock-wait-ms)", 100)
    o.add("--product", ["PARTITION_PRODUCT"], 8501, int, "first product id (one per row)", 1)
    o.flag("--quick", "the test gate's version: the first row of each case, fact and "
           "kind of servers, with its control")
    retrying_options(o, "PARTITION_RETRYING_")


def after_parse(args, error):
    if not HOLD_MS + 2 * args.wait_ms < args.ttl_ms:
        error(f"{HOLD_MS} ms of hold plus twice --wait-ms must stay below --ttl-ms: the "
              "control rows need A's lock alive until B gives up and A has written")


def servers_of(s):
    """Where the row's lock lives: 'quorum' (the three Redlock servers, R1..R3) or
    'single' (R0)."""
    if sources.backend_name("redlock.c") in s.needs:
        return "quorum"
    if sources.backend_name("redis.c") in s.needs:
        return "single"
    raise SetupError(f"{s.name} states a partition case but needs no Redis server")


def plan(facts, args):
    """(strategy, case, fault) of every row: each case a strategy states, its fault and,
    for the cases that have one, its control."""
    chosen = [s for s in facts.select(args.strategies)
              if s.lease and any(c in s.lease for c in CASES)]
    rows, seen = [], set()
    for case in CASES:
        for s in chosen:
            if case not in s.lease:
                continue
            key = (case, s.lease[case], servers_of(s))
            if args.quick and key in seen:
                continue
            seen.add(key)
            rows.append((s, case, True))
            if case in CONTROLS:
                rows.append((s, case, False))
    if not rows:
        raise SetupError("no strategy states a partition case (lease.clock_jump, "
                         "lease.empty_restart, lease.late_grant)")
    return rows


class Partition:
    def __init__(self, args, redis, proxies, cuts, a, b, say, claims, out_dir):
        self.args, self.redis, self.proxies, self.cuts = args, redis, proxies, cuts
        self.a, self.b, self.say = a, b, say
        self.claims, self.out_dir = claims, out_dir
        self.retrying = None  # the row's RetryingClients

    def frozen_buyers(self, s, product):
        """The row's retrying buyers, sent to A (just frozen) on their two products,
        which B resets."""
        first = self.args.product + RETRYING_PRODUCTS + 2 * (product - self.args.product)
        self.retrying.start(self.a.api.host, self.a.api.port, self.b.api, s.name, s.store,
                            first)

    def lock_servers(self, kind):
        return [self.redis[n] for n in (("R1", "R2", "R3") if kind == "quorum" else ("R0",))]

    def mend(self):
        """Every link whole, every clock true, every server up, no delay."""
        self.cuts.heal()
        for r in self.redis.values():
            r.set_clock(0)
            if r.proc.poll() is not None:
                r.start()
        for p in self.proxies.values():
            p.delay_ms = 0

    def holder_row(self, s, row, product, kind, fault):
        """clock_jump and empty_restart: A takes the lock, reads the last unit and is
        frozen there (SIGSTOP) while the fault (or its control) happens and B's sale
        comes; then A is thawed and writes."""
        servers = self.lock_servers(kind)
        if kind == "quorum":  # A reaches R1, R2; B reaches R2, R3
            self.cuts.apply([(ADDRESS["A"], a_way("R3")), (ADDRESS["B"], ADDRESS["R1"])],
                            "reject")
        victim = servers[1] if kind == "quorum" else servers[0]
        jump = self.args.ttl_ms + 2000
        first = TimedSale(self.a.api, s, product, HOLD_MS)
        first.start()
        holding = self.a.wait_holding(first)
        moments = {"held": time.monotonic()}
        if not holding:
            row["problems"].append(f"A answered before it held the lock: {first.answer}")
        restarter = None
        if holding:
            self.a.freeze(True)
        try:
            self.frozen_buyers(s, product)
            if row["case"] == "clock_jump" and fault:
                victim.set_clock(jump)
                moments["jump"] = time.monotonic()
            elif row["case"] == "empty_restart":
                victim.kill()
                if fault:
                    victim.start()
                else:  # back only once a TTL has passed: every lock it granted is over
                    restarter = threading.Timer(self.args.ttl_ms / 1000, victim.start)
                    restarter.start()
            second = timed_sale(self.b.api, s, product)
        finally:
            if holding:
                self.a.freeze(False)
            moments["thawed"] = time.monotonic()
        first.join(60)
        if row["case"] == "clock_jump" and fault and kind == "quorum" and first.answer:
            row["timeline"] = clock_jump_marks(first.answer, second, moments)
        if restarter:
            restarter.join()
        if not fault:
            row["fault"] = CONTROLS[row["case"]]
        elif row["case"] == "clock_jump":
            row["fault"] = f"{victim.name}'s clock +{jump} ms"
        else:
            row["fault"] = f"{victim.name} restarted empty at once"
        return first.answer, second

    @staticmethod
    def wait_keys(servers, until, seconds, why):
        """Until every server's count of keys with a TTL satisfies `until`."""
        deadline = time.monotonic() + seconds
        while not all(until(r.expiring_keys() or 0) for r in servers):
            if time.monotonic() > deadline:
                raise SetupError(why)
            time.sleep(0.005)

    def late_row(self, s, row, product, kind):
        """late_grant: A's reply from the last lock server it asks held past the TTL;
        once A's keys have expired, B takes the lock, reads the last unit and is
        frozen there until A has answered."""
        servers = self.lock_servers(kind)
        last = servers[-1].name
        proxy = self.proxies[last]
        # one sale first, undelayed: A's scripts are loaded on the server, so that the
        # one reply held back is the grant
        warm = product + WARM_UP
        self.b.api.must_reset(warm, 1)
        if deduct(self.a.api, s, warm)[0] != 200:
            raise SetupError(f"A's undelayed sale on {warm} did not sell")
        proxy.delay_ms = self.args.ttl_ms + 1000
        first = TimedSale(self.a.api, s, product, 0)
        first.start()
        self.wait_keys(servers, lambda n: n > 0, 2, "A's lock was never written")
        self.wait_keys(servers, lambda n: n == 0, self.args.ttl_ms / 1000 + 0.9,
                       "A's lock did not expire before its grant came")
        second = TimedSale(self.b.api, s, product, HOLD_MS)
        second.start()
        holding = self.b.wait_holding(second)
        if holding:
            self.b.freeze(True)
        try:
            first.join(60)
        finally:
            if holding:
                self.b.freeze(False)
        second.join(60)
        row["fault"] = f"{last}'s reply to A held {proxy.delay_ms} ms"
        return first.answer, second.answer

    def run_row(self, s, case, fault, product):
        row = {f: None for f in ROW_FIELDS}
        kind = servers_of(s)
        expect = s.lease[case] if fault else "safe"
        row.update(strategy=s.name, case=case, servers=kind, fact=expect, problems=[])
        self.say(f"{s.name}: {case}{'' if fault else ' (' + CONTROLS[case] + ')'} "
                 f"on {kind} (expect {expect})")
        t0 = time.monotonic()
        self.b.api.must_reset(product, 1)
        self.retrying = RetryingClients(self.args, self.claims)
        try:
            if case == "late_grant":
                first, second = self.late_row(s, row, product, kind)
            else:
                first, second = self.holder_row(s, row, product, kind, fault)
        finally:
            self.retrying.stop()
            self.mend()
        account = self.b.api.account(product, s.store) or {}
        row.update(first_holder=answer_word(first[0]) if first else "no answer",
                   second_holder=answer_word(second[0]), store_sold=account.get("sold"),
                   oversold=account.get("oversold"), lost_updates=account.get("lost_updates"),
                   seconds=round(time.monotonic() - t0, 2))
        answers = [Answer(start, end, a[0], a[1] or "", (a[2] or {}).get("remaining"))
                   for a, start, end in (x for x in (first, second) if x)]
        row.update(history.judge_final(1, history.from_answers(answers, None, 1),
                                       account.get("remaining")))
        self.judge(row, fault, second)
        if case != "late_grant":  # it has no retrying buyers: see the module's docstring
            row.update(self.retrying.finish(self.b.api, self.out_dir,
                                            f"{s.name}-{case}{'' if fault else '-control'}"))
            row["verdict"], row["reason"] = folded(row["verdict"], row["reason"], row)
        return row

    @staticmethod
    def judge(row, fault, second):
        broke = (row["oversold"] or 0) + (row["lost_updates"] or 0)
        if row["store_sold"] is None:
            row["problems"].append("the store's accounting could not be read")
        elif row["fact"] == "safe" and broke:
            row["problems"].append(f"expected safe, but oversold {broke}")
        elif row["fact"] == "oversells" and not broke:
            row["problems"].append("expected it to oversell, but nothing was oversold")
        if not fault and second[0][0] == 200:
            row["problems"].append("the control row let B sell: its lock was not held")
        if row["history_linearizable"] is not None and row["store_sold"] is not None and \
                row["history_linearizable"] != (not broke):
            row["problems"].append("the history and the ledger disagree")
        row["verdict"] = "fail" if row["problems"] else "pass"
        row["reason"] = "; ".join(row.pop("problems"))


def clock_jump_marks(first, second, moments):
    """A Redlock clock-jump row's moments, seconds from A's sale's start: A holding
    (frozen), R2's jump, B's sale, A thawed, A's answer; and both answers."""
    t0 = first[1]
    at = {k: round(v - t0, 3) for k, v in moments.items()}
    at.update(b_start=round(second[1] - t0, 3), b_end=round(second[2] - t0, 3),
              a_end=round(first[2] - t0, 3), a_answer=answer_word(first[0][:2]),
              b_answer=answer_word(second[0][:2]))
    return at


def clock_jump_svg(name, m):
    """Kleppmann's scenario along its real clock (lab.reports.failover_report's primitives): A
    holds R1 and R2, R2's clock jumps past the TTL, B takes R2 and R3, A writes."""
    lanes = ("R1", "R2", "R3", "client A", "client B")
    end = max(m["a_end"], m["b_end"]) + 0.1
    axis = failover_report.Axis(0, end, lanes)
    bar, mark = failover_report.bar, failover_report.mark
    thawed = m.get("thawed", m["a_end"])
    parts = [
        bar(axis, "R1", 0, end, "lock", "A's key (B is cut from R1)"),
        bar(axis, "R2", 0, m["jump"], "lock", "A's key"),
        mark(axis, "R2", m["jump"], "clock +TTL+2 s: A's key expires, B's is written"),
        bar(axis, "R2", m["b_start"], end, "new", ""),  # the jump's label says it
        bar(axis, "R3", m["b_start"], end, "new", "B's key (A is cut from R3)"),
        bar(axis, "client A", 0, thawed, "frozen", "holds R1, R2; read the last unit; frozen"),
        bar(axis, "client A", thawed, m["a_end"], "lock",
            "thawed: the rest of its stay between read and write (hold_ms)"),
        mark(axis, "client A", m["a_end"], f"writes: {m['a_answer']}"),
        bar(axis, "client B", m["b_start"], m["b_end"], "new",
            f"takes R2, R3 (a majority): {m['b_answer']}"),
    ]
    title = f"{name}: one Redlock server's clock jumps - a second majority, two holders"
    return failover_report.picture(axis, 0, title, parts)


def a_way(name):
    """The address A reaches server `name` at: its proxy's, or its own."""
    return PROXIED.get(name, ADDRESS[name])


def redlock_list(way):
    return ",".join(f"{way(n)}:{REDIS_PORT}" for n in ("R1", "R2", "R3"))


def check_sources(redis):
    """The namespace's addresses are the processes': R2 sees A and B from theirs."""
    seen = redis["R2"].client_hosts()
    missing = [n for n in ("A", "B") if ADDRESS[n] not in seen]
    if missing:
        raise SetupError(f"R2 sees no connection from {', '.join(missing)}'s address "
                         f"(--bind-source): it sees {', '.join(sorted(seen))}")
    return sorted(seen)


def start_all(args, out_dir, say):
    work = os.path.join(run_dir(), "redis")
    redis = {n: RedisServer(n, work) for n in ("R0", "R1", "R2", "R3")}
    for r in redis.values():
        r.start()
    proxies = {n: DelayProxy((addr, REDIS_PORT), (ADDRESS[n], REDIS_PORT), addr)
               for n, addr in PROXIED.items()}
    for p in proxies.values():
        p.start()
    say("MariaDB of the namespace (scripts/stack.sh up, service mysql)")
    env = mysql_env()
    common = [f"--lock-ttl-ms={args.ttl_ms}", f"--lock-wait-ms={args.wait_ms}",
              "--connect-timeout-ms=300",
              "--io-timeout-ms=10000", "--request-timeout-ms=30000"]
    a = Node("A", 8080, env, common + [f"--redis-host={a_way('R0')}",
                                       f"--redlock={redlock_list(a_way)}"], out_dir)
    b = Node("B", 8080, env, common + [f"--redis-host={ADDRESS['R0']}",
                                       f"--redlock={redlock_list(ADDRESS.get)}"], out_dir)
    return redis, proxies, a, b


def work(run):
    args, say = run.args, run.say
    routes = netns.prepare(say, "partition", STACK_SERVICES="mysql")
    cuts = netns.Cuts()
    out_dir = run.out_dir()
    redis, proxies, a, b = start_all(args, out_dir, say)
    rows = []
    try:
        a.start()
        b.start()
        doc = b.api.strategies().body
        facts = facts_mod.parse(doc)
        rows_planned = plan(facts, args)
        sources_seen = check_sources(redis)
        say(f"R2 sees connections from {', '.join(sources_seen)}")
        p = Partition(args, redis, proxies, cuts, a, b, say, claims_of(doc), out_dir)
        for i, (s, case, fault) in enumerate(rows_planned):
            rows.append(p.run_row(s, case, fault, args.product + i))
    finally:
        for inst in (a, b):
            inst.stop()
        for pr in proxies.values():
            pr.stop()
        for r in redis.values():
            r.kill()
        # the namespace's stack goes with it: the next run starts from nothing
        subprocess.run([stack_script(), "clean"], stdout=sys.stderr, stderr=sys.stderr)
    doc = {"started": now_iso(), "seconds": round(run.elapsed(), 1), "rows": rows,
           "quick": args.quick, "routes": routes, "sources_seen": sources_seen,
           "ttl_ms": args.ttl_ms, "hold_ms": HOLD_MS, "wait_ms": args.wait_ms}
    write_text(os.path.join(out_dir, "partition.json"), tables.json_text(doc))
    fields, _ = with_columns(args, ROW_FIELDS, TABLE)
    write_text(os.path.join(out_dir, "partition.csv"), tables.csv_text(rows, fields))
    write_text(os.path.join(out_dir, "partition.md"), debate_columns(rows))
    drawn = [r for r in rows if r.get("timeline")]
    if drawn:
        write_text(os.path.join(out_dir, "clock-jump.svg"),
                   clock_jump_svg(drawn[0]["strategy"], drawn[0]["timeline"]))
    junit.write(os.path.join(out_dir, "junit.xml"), "partition", rows,
                lambda r: f"{r['strategy']} {r['case']} {r['fault']}", lambda r: r["seconds"],
                {"ttl_ms": args.ttl_ms, "hold_ms": HOLD_MS, "wait_ms": args.wait_ms})
    return rows, out_dir


def debate_columns(rows):
    """The debate table's new columns: per strategy, each case's fault and control."""
    by = {}
    for r in rows:
        cell = f"{r['fault']}: A {r['first_holder']}, B {r['second_holder']}, oversold " \
               f"{r['oversold']} ({r['verdict']})"
        by.setdefault(r["strategy"], {}).setdefault(r["case"], []).append(cell)
    lines = ["| strategy | clock jump | empty restart | delayed reply |",
             "| --- | --- | --- | --- |"]
    for name, cases in by.items():
        lines.append(f"| `{name}` | " + " | ".join("<br>".join(cases.get(c, ["-"]))
                                                   for c in CASES) + " |")
    return "\n".join(lines) + "\n"


def report(run, done):
    _, table = with_columns(run.args, ROW_FIELDS, TABLE)
    return report_fact_rows(run, done, table, "fact",
                            lambda r: f"{r['strategy']} {r['case']} ({r['fault']})")


RUNNER = Runner("partition", __doc__, options=options, work=work, report=report,
                results="partition-", after_parse=after_parse)
parse_args = RUNNER.parse


def main(argv):
    return netns.main(RUNNER, argv)
