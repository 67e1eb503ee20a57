"""Faults on the Redis Cluster (`make redis-cluster`): what a shard's primary killed
under load, and the hot product's slot migrated to another shard under load, do to every
strategy that keeps something in the main Redis, with stockd routing on the cluster
(--redis-cluster) and never restarted.

  kill   (a row per strategy with a `failover` fact that the cluster serves) the sequence
         of `make failover` (lab.runs.failover: its judge, its window made to happen every
         run) on the shard that serves the row's products: the shard's replica held back
         (CLIENT PAUSE WRITE), sales acknowledged by instance A (or A's first holder
         frozen in its critical section), the primary killed with -9; the replica is
         promoted by the cluster itself after cluster-node-timeout
         (STACK_RCLUSTER_NODE_TIMEOUT), instance B's probe sells through the new primary;
         the killed node is started again and must rejoin as the new primary's replica.
         Judged against the row's `failover` fact like `make failover` (acknowledged sales
         lost, two holders, oversold), every answer while the slot had no primary a 503
         within the deadline plus --margin-ms, the first 200 within 2 s of the promotion
         (or of the replica's return for a row that waits for a replica), and meanwhile
         --conns connections of load on a third product of the shard: every answer a
         contract answer within the bound, and on a row whose fact is `safe` its ledger
         holding every 200.
  move   (a row per strategy the cluster serves) --conns connections of load on the
         row's product while its slot is migrated to the next shard the way
         redis-cli --cluster reshard does it: SETSLOT IMPORTING on the target, MIGRATING
         on the source, MIGRATE of its keys one at a time (--key-pause-ms apart, so that
         the load meets the slot half-moved: ASK, TRYAGAIN), SETSLOT NODE on every
         primary. Judged: every answer a 200 or a contract answer within the bound, 0
         acknowledged sales lost (the ledger holds every 200), 0 oversold and 0 lost on
         a row that claims safety, a 200 after the move; the MOVED and ASK redirects
         stockd met, from GET /health's cluster counters.

A strategy the cluster refuses (a sale before the faults answers 503: lua-stream, whose
stream is not in its product's slot) is listed and not run; one that needs no main
Redis (redlock) has no row.

Starts the stack (scripts/stack.sh up) and its `rcluster` service, and two stockd
instances at --port and --port+1 given --redis-cluster. Writes
results/rcluster-<timestamp>/ (rcluster.json, rcluster.csv, rcluster.md) and points
results/rcluster-latest at it. Exit status 1 when a row fails, 2 when the run cannot
be made.

--quick (the test gate): the kill row of the first strategy of each fact, and the move
rows of the first two strategies."""

import binascii
import os
import subprocess
import sys
import time

from ..base.common import ENDLESS_STOCK, SetupError, comma_list, now_iso, write_text
from ..client import facts as facts_mod
from ..client.sales import deduct, deduct_path
from ..stack.instances import Instance
from ..stack.service import run_dir, stack_env, stack_script
from ..drivers.load import Load
from ..nemesis.faults import run_stack
from ..nemesis.redis_group import Group, info, redis_cli
from ..judges.chaos_gate import Timeline, answer_problems, figures
from ..judges.failover_gate import kind_of
from ..reports import failover_report, tables
from ..scaffold.failover_window import Failover, window_options
from ..scaffold.runner import Runner

SLOTS = 16384
CLIENT_EXTRA_S = 5
SETTLE_TIMEOUT_S = 60
REJOIN_S = 30

KILL_TABLE = failover_report.WINDOW_COLUMNS + [("load", "load", "<"),
                                               failover_report.VERDICT_COLUMN]
MOVE_FIELDS = ["strategy", "store", "fact", "product", "slot", "source", "target", "keys",
               "requests", "ok", "conflict", "unavailable", "timeout", "unknown", "unexpected",
               "max_ms", "moved", "ask", "ok_after", "store_sold", "oversold",
               "lost_updates", "ledger", "verdict", "reason"]
MOVE_TABLE = [
    ("strategy", "strategy", "<"), ("slot", "slot", ">"),
    ("from", "source", ">"), ("to", "target", ">"), ("keys", "keys", ">"),
    ("requests", "requests", ">"), ("200", "ok", ">"), ("409", "conflict", ">"),
    ("503", lambda r: r["unavailable"] + r["timeout"] + r["unknown"], ">"),
    ("other", lambda r: r["unexpected"] or "-", "<"), ("max ms", "max_ms", ">"),
    ("MOVED", "moved", ">"), ("ASK", "ask", ">"), ("oversold", "oversold", ">"),
    ("lost", "lost_updates", ">"), ("ledger", "ledger", "<"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["FAILOVER_STRATEGIES", "STRATEGIES"], "", comma_list,
          "comma list; empty: every strategy with a failover fact")
    window_options(o)
    o.add("--product", ["FAILOVER_PRODUCT"], 8001, int, "first product id (two per row)", 1)
    o.flag("--quick", "the test gate's version: the kill row of the first strategy of each "
           "fact, the move rows of the first two")
    o.add("--rows", ["RCLUSTER_ROWS"], "kill,move", comma_list, "kill, move or both")
    o.add("--conns", ["RCLUSTER_CONNS"], 2, int, "keep-alive connections of load per row", 1)
    o.add("--before", ["RCLUSTER_BEFORE_S"], 1.0, float, "seconds of load before a move", 0.2)
    o.add("--after", ["RCLUSTER_AFTER_S"], 1.5, float, "seconds of load after a move", 0.5)
    o.add("--key-pause-ms", ["RCLUSTER_KEY_PAUSE_MS"], 150, int,
          "the pause between two keys' MIGRATE (the slot stays half-moved that long)", 0)


def after_parse(args, error):
    if any(r not in ("kill", "move") for r in args.rows):
        error("--rows: kill, move")


# ------------------------------------------------------------------ the cluster


def key_slot(product):
    """The slot of every key of a product: CRC16/XMODEM of its hash tag {P}."""
    return binascii.crc_hqx(str(product).encode(), 0) % SLOTS


def parse_nodes(lines):
    """CLUSTER NODES as {port: {id, role, primary_id, failed, slots: [(from, to), ...]}};
    a slot being migrated ("[5->-id]") is not counted as served."""
    nodes = {}
    for line in lines:
        f = line.split()
        if len(f) < 8:
            continue
        port = int(f[1].split("@")[0].rsplit(":", 1)[1])
        flags = f[2].split(",")
        ranges = []
        for r in f[8:]:
            if r.startswith("["):
                continue
            a, _, b = r.partition("-")
            ranges.append((int(a), int(b or a)))
        nodes[port] = {"id": f[0], "role": "primary" if "master" in flags else "replica",
                       "primary_id": None if f[3] == "-" else f[3],
                       "failed": "fail" in flags or "fail?" in flags, "slots": ranges}
    return nodes


def serving(nodes, slot):
    """The port of the healthy primary serving `slot`, or None."""
    for port, n in nodes.items():
        if n["role"] == "primary" and not n["failed"] and \
                any(a <= slot <= b for a, b in n["slots"]):
            return port
    return None


def products_on(nodes, shard_port, start, count, step=1):
    """The first id P >= start whose P .. P+count-1 all live on the shard of `shard_port`."""
    p = start
    while p < start + 100000:
        if all(serving(nodes, key_slot(p + i * step)) == shard_port for i in range(count)):
            return p
        p += 1
    raise SetupError(f"no product id from {start} lives on the shard of {shard_port}")


class Cluster(Group):
    """The stack's Redis Cluster, read with redis-cli, changed through scripts/stack.sh
    (kill-one, start-one) and CLUSTER SETSLOT / MIGRATE. As lab.nemesis.redis_group.Group for the
    failover sequence: one shard, the one serving `slot`, as its replicated group."""

    def __init__(self, ports, node_timeout_ms):
        self.ports, self.node_timeout_s = ports, node_timeout_ms / 1000
        self.promoted_at = 0.0
        self.slot = None
        self.on_hold = None  # called once the replica is held back: the row's load starts
        self.events = None  # no Sentinels: the shard's own nodes elect its new primary

    @staticmethod
    def promoted(replica):
        """A replica that has taken its shard over says so, and the cluster's nodes
        redirect to it from then on."""
        return info(replica).get("role") == "master"

    def hold_back(self, replica):
        Group.hold_back(replica)
        if self.on_hold:
            self.on_hold()

    def nodes(self):
        """CLUSTER NODES of the first node that answers ({} when none does)."""
        for port in self.ports:
            lines = redis_cli(port, "cluster", "nodes", timeout=2)
            if lines:
                return parse_nodes(lines)
        return {}

    def settled(self):
        """(primary, replica) of the slot's shard once the cluster is whole and quiet:
        every node up and none failed, cluster_state ok, the replica linked and caught
        up, the last promotion two node timeouts ago (a primary's voters give one vote
        per shard per that long)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            nodes = self.nodes()
            p = serving(nodes, self.slot)
            r = self.replica_of(p) if p else None
            quiet = time.monotonic() - self.promoted_at >= 2 * self.node_timeout_s + 0.5
            whole = len(nodes) == len(self.ports) and not any(n["failed"] for n in nodes.values())
            if r and quiet and whole and self.caught_up(p, r) and \
                    "cluster_state:ok" in (redis_cli(p, "cluster", "info") or []):
                return p, r
            time.sleep(0.1)
        raise SetupError(f"the Redis Cluster did not settle within {SETTLE_TIMEOUT_S} s "
                         "(scripts/stack.sh status; the rcluster logs under run/stack)")

    @staticmethod
    def kill(port):
        run_stack("kill-one", f"rcluster-{port}")
        return time.monotonic()

    def restart(self, port):
        """The killed node started again: it must rejoin as its shard's new primary's
        replica (nodes.conf), linked, within REJOIN_S."""
        run_stack("start-one", f"rcluster-{port}")
        deadline = time.monotonic() + REJOIN_S
        while time.monotonic() < deadline:
            doc = info(port)
            if doc.get("role") == "slave" and doc.get("master_link_status") == "up":
                return
            time.sleep(0.1)
        raise SetupError(f"node {port} did not rejoin as a linked replica within {REJOIN_S} s")

    def move_slot(self, slot, target, key_pause_s):
        """The slot from its primary to `target`'s shard, the way a reshard does it;
        (source port, keys moved)."""
        nodes = self.nodes()
        source = serving(nodes, slot)
        if source is None or source == target:
            raise SetupError(f"slot {slot}: no primary to move it from, or already on {target}")
        sid, tid = nodes[source]["id"], nodes[target]["id"]
        try:
            keys = self.migrate_keys(slot, source, target, sid, tid, key_pause_s)
        except BaseException:  # the slot back to its source, whole, for the next run
            for p in (target, source):
                redis_cli(p, "cluster", "setslot", slot, "stable")
            raise
        primaries = [target, source] + [p for p, n in nodes.items()
                                        if n["role"] == "primary" and p not in (target, source)]
        for p in primaries:
            self.must(p, "cluster", "setslot", slot, "node", tid)
        return source, keys

    def migrate_keys(self, slot, source, target, sid, tid, key_pause_s):
        """IMPORTING, MIGRATING, then the slot's keys one at a time; how many."""
        self.must(target, "cluster", "setslot", slot, "importing", sid)
        self.must(source, "cluster", "setslot", slot, "migrating", tid)
        keys = 0
        while True:
            batch = redis_cli(source, "cluster", "getkeysinslot", slot, 100)
            if batch is None:
                raise SetupError(f"CLUSTER GETKEYSINSLOT {slot} on {source}: no answer")
            batch = [k for k in batch if k]  # an empty array is one empty line
            if not batch:
                break
            for key in batch:
                self.migrate(source, target, key)
                keys += 1
                time.sleep(key_pause_s)
        return keys

    @staticmethod
    def must(port, *args):
        if redis_cli(port, *args) != ["OK"]:
            raise SetupError(f"{' '.join(map(str, args))} on {port} failed")

    @staticmethod
    def migrate(source, target, key):
        """MIGRATE of one key, the password on redis-cli's input (never its command
        line); a key gone meanwhile (NOKEY) is fine."""
        line = (f'MIGRATE 127.0.0.1 {target} "" 0 5000 AUTH "{os.environ["REDISCLI_AUTH"]}" '
                f'KEYS "{key}"\n')
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(source)], input=line,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=10)
        if r.stdout.strip() not in ("OK", "NOKEY"):
            raise SetupError(f"MIGRATE of {key} from {source} to {target}: {r.stdout.strip()}")

    def next_primary(self, port):
        """The primary after `port`'s shard, in port order."""
        primaries = sorted(p for p, n in self.nodes().items() if n["role"] == "primary")
        return primaries[(primaries.index(port) + 1) % len(primaries)]


# ------------------------------------------------------------------ the judges


def load_problems(f, fact, bound_ms):
    """Why a kill row's background load fails (empty: it holds): answers outside the
    contract, one past the bound, and on a `safe` row 200s the ledger lost or oversold."""
    p = answer_problems(f, bound_ms, "load: ")
    if fact == "safe":
        if f["ledger"] != "ok":
            p.append(f"load: claims safe, but ledger: {f['ledger']}")
        if f["oversold"] or f["lost_updates"]:
            p.append(f"load: claims safe, but oversold {f['oversold']}, lost "
                     f"{f['lost_updates']}")
    return p


def move_problems(f, safe, ok_after, bound_ms):
    """Why a move row fails (empty: it passes)."""
    p = answer_problems(f, bound_ms)
    if f["ok"] == 0:
        p.append("no 200 at all: the run shows nothing")
    if f["ledger"] != "ok":
        p.append(f"ledger: {f['ledger']}")
    if safe and (f["oversold"] or f["lost_updates"]):
        p.append(f"claims safe, but oversold {f['oversold']}, lost {f['lost_updates']}")
    if not ok_after:
        p.append("no 200 after the move")
    return p


def redirects(api):
    """(moved, ask) of GET /health's cluster counters."""
    c = ((api.health() or {}).get("backends", {}).get("redis", {}).get("cluster")) or {}
    return c.get("moved", 0), c.get("ask", 0)


# ------------------------------------------------------------------ the rows


class Faults:
    def __init__(self, args, cluster, a, b, say):
        self.args, self.cluster, self.a, self.b, self.say = args, cluster, a, b, say
        self.bound_ms = args.request_timeout_ms + args.margin_ms
        self.failover = Failover(args, cluster, a, b, say)
        self.hot = args.product  # the hot product; each kill row's products are its own

    def load(self, s, product):
        load = Load("127.0.0.1", self.b.api.port, self.bound_ms / 1000 + CLIENT_EXTRA_S)
        self.b.api.must_reset(product, ENDLESS_STOCK)
        load.add(s.name, deduct_path(s.name, product), self.args.conns)
        return load

    def kill_row(self, s, i, hot_port):
        """The failover window's row (lab.scaffold.failover_window) on the hot product's
        shard, on its first two products, under load on a third."""
        nodes = self.cluster.nodes()
        first = products_on(nodes, hot_port, self.hot + 1000 + 10 * i, 3)
        self.cluster.slot = key_slot(first)
        load = self.load(s, first + 2)
        started = []
        self.cluster.on_hold = lambda: started.append(load.start())
        try:
            row = self.failover.run_row(s, first, {})
        finally:
            self.cluster.on_hold = None
            load.stop()
        answers = load.answers(s.name)
        t0, end = (started or [time.monotonic()])[0], time.monotonic()
        f = figures(answers, Timeline(t0, t0, t0, end, end), self.b.api.account(first + 2,
                                                                                 s.store))
        why = load_problems(f, s.failover, self.bound_ms)
        row["product"], row["slot"] = first, key_slot(first)
        row["load"] = f"{f['ok']}/{f['requests']} 200, max {f['max_ms']:.0f} ms"
        if why:
            row["verdict"] = "fail"
            row["reason"] = "; ".join(filter(None, [row["reason"]] + why))
        return row

    def move_row(self, s, product):
        slot = key_slot(product)
        source = serving(self.cluster.nodes(), slot)
        target = self.cluster.next_primary(source)
        load = self.load(s, product)
        moved0, ask0 = redirects(self.b.api)
        started = load.start()
        try:
            time.sleep(self.args.before)
            injecting = time.monotonic()
            _, keys = self.cluster.move_slot(slot, target, self.args.key_pause_ms / 1000)
            back = time.monotonic()
            time.sleep(self.args.after)
        finally:
            load.stop()
        answers = load.answers(s.name)
        stopped = time.monotonic()
        f = figures(answers, Timeline(started, injecting, injecting, back, stopped),
                    self.b.api.account(product, s.store))
        moved1, ask1 = redirects(self.b.api)
        ok_after = sum(1 for a in answers if a.status == 200 and a.start >= back)
        row = {"strategy": s.name, "store": s.store, "fact": s.failover, "product": product,
               "slot": slot, "source": source, "target": target, "keys": keys,
               "moved": moved1 - moved0, "ask": ask1 - ask0, "ok_after": ok_after}
        row.update({k: f[k] for k in MOVE_FIELDS if k in f})
        why = move_problems(f, s.safe_single, ok_after, self.bound_ms)
        row["verdict"] = "fail" if why else "pass"
        row["reason"] = "; ".join(why)
        self.say(f"move / {s.name}: slot {slot} {source} -> {target}, {keys} keys: "
                 f"{row['verdict'].upper()} {row['reason']}")
        return row


def served(b, strategies, product):
    """(the strategies the cluster serves, the ones it refuses: a 503 to a first sale)."""
    ok, refused = [], []
    for s in strategies:
        b.api.must_reset(product, ENDLESS_STOCK)
        answer = deduct(b.api, s, product, timeout=10)
        (refused if answer[0] == 503 else ok).append(s)
    return ok, refused


def chosen(facts, args):
    """The rows' strategies: a failover fact and the main Redis (Redlock's servers are
    not the cluster); --quick: the first row of each fact."""
    rows = [s for s in facts.select(args.strategies)
            if s.failover and kind_of(s) != "quorum"]
    if args.quick:
        rows = [s for i, s in enumerate(rows) if s.failover not in {r.failover for r in rows[:i]}]
    if not rows:
        raise SetupError("no strategy with a failover fact was chosen")
    return rows


def start_stack(say):
    say("scripts/stack.sh up, and its Redis Cluster (rcluster)")
    for verb in (["up"], ["start-one", "rcluster"]):
        if subprocess.run([stack_script(), *verb], stdout=sys.stderr,
                          stderr=sys.stderr).returncode:
            raise SetupError(f"scripts/stack.sh {' '.join(verb)} failed")
    env = {**stack_env(), **stack_env("rcluster-env")}
    ports = [int(a.rsplit(":", 1)[1]) for a in env["STOCKD_REDIS_CLUSTER"].split(",")]
    return env, ports


def work(run):
    args, say = run.args, run.say
    env, ports = start_stack(say)
    cluster = Cluster(ports, int(os.environ.get("STACK_RCLUSTER_NODE_TIMEOUT", "2000")))
    out_dir = run.out_dir()
    os.makedirs(run_dir(), exist_ok=True)
    a = Instance("A", args.port, env, ["--request-timeout-ms=30000"], out_dir)
    b = Instance("B", args.port + 1, env, [f"--request-timeout-ms={args.request_timeout_ms}"],
                 out_dir)
    kills, moves, refused = [], [], []
    try:
        a.start()
        b.start()
        facts = facts_mod.parse(b.api.strategies().body)
        strategies, refused = served(b, chosen(facts, args), args.product)
        for s in refused:
            say(f"{s.name}: refused on the cluster (503 to a first sale): no row")
        hot = args.product
        cluster.slot = key_slot(hot)
        hot_port = serving(cluster.nodes(), cluster.slot)
        say(f"hot product {hot}: slot {cluster.slot}, shard of {hot_port}")
        faults = Faults(args, cluster, a, b, say)
        if "kill" in args.rows:
            for i, s in enumerate(strategies):
                kills.append(faults.kill_row(s, i, serving(cluster.nodes(), key_slot(hot))))
        if "move" in args.rows:
            for i, s in enumerate(strategies[:2] if args.quick else strategies):
                moves.append(faults.move_row(s, hot + 100 + i))
    finally:
        for inst in (a, b):
            inst.stop()
    doc = {"started": run.started, "finished": now_iso(), "seconds": round(run.elapsed(), 1),
           "quick": args.quick, "kill": kills, "move": moves,
           "refused": [s.name for s in refused], "node_timeout_ms": cluster.node_timeout_s * 1000}
    write_outputs(out_dir, doc)
    return doc, out_dir


def markdown_table(rows, columns):
    """rows as a Markdown table of `columns` (text_table's (header, field, align))."""
    lines = ["| " + " | ".join(h for h, _, _ in columns) + " |",
             "| " + " | ".join("---:" if a == ">" else "---" for _, _, a in columns) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(tables.cell(f(r) if callable(f) else r.get(f))
                                       for _, f, _ in columns) + " |")
    return "\n".join(lines)


def write_outputs(out_dir, doc):
    write_text(os.path.join(out_dir, "rcluster.json"), tables.json_text(doc))
    write_text(os.path.join(out_dir, "rcluster.csv"),
               tables.csv_text(doc["move"], MOVE_FIELDS))
    md = ["## A shard's primary killed", "", markdown_table(doc["kill"], KILL_TABLE), "",
          "## The hot slot migrated", "", markdown_table(doc["move"], MOVE_TABLE), ""]
    write_text(os.path.join(out_dir, "rcluster.md"), "\n".join(md))


def report(run, done):
    doc, out_dir = done
    rows = doc["kill"] + doc["move"]
    if doc["kill"]:
        print(tables.text_table(doc["kill"], KILL_TABLE))
    if doc["move"]:
        print(tables.text_table(doc["move"], MOVE_TABLE))
    bad = [r for r in rows if r["verdict"] != "pass"]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} rows hold; refused on the cluster: "
          f"{', '.join(doc['refused']) or 'none'}; {doc['seconds']} s; results in {out_dir}")
    for r in bad:
        print(f"  {r['strategy']}: {r['reason']}")
    return 1 if bad or not rows else 0


RUNNER = Runner("redis_cluster", __doc__, options=options, after_parse=after_parse, work=work,
                report=report,
                port="instance A's port; B listens on the next (nothing may answer there)",
                results="rcluster-")
main, parse_args = RUNNER.main, RUNNER.parse
