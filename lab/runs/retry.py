"""What a retry costs (`make retry`): buyers who retry a purchase whose answer was
lost buy it twice, unless the service recognises the retry.

Each row is a strategy under a fault (lab.nemesis.retry_faults: the store frozen,
every reply held past the client's timeout, stockd killed -9 and started again, the
Redis group's primary failed over, a Galera node killed, the order stream's consumer
killed), sent without keys or with an Idempotency-Key per purchase. The strategies:
--strategies, each both ways; by default every row whose GET /strategies row claims
keys (`idempotent`), keyed, and in each store the first row safe across instances
that takes no lock and waits its turn, without keys too: what retries cost (a fault
that reaches none of those sends its first keyed row without keys instead); --quick
(the test gate), those first rows alone, both ways. Each fault takes the rows it can
reach, by their facts. For each row the run resets one
product to a stock that never runs out, starts --buyers buyers at once, each making
one purchase of one unit with a --timeout-ms client timeout and retrying every lost
answer (no answer, a 5xx: outcome_unknown, timeout, backend_unavailable) with backoff
(lab.drivers.retrying), applies the fault for --hold seconds, waits for every buyer
and for stockd to be idle, and reads the store's ledger (MySQL's, once the stream has
drained, under a consumer's kill). Every unit beyond one per
purchase is a purchase bought again: a double buy (lab.judges.retries). A keyed buyer
sends its key once more after its answer: the answers must agree. A row sent with
keys on a strategy whose row says `idempotent` must show no double buy, every key's
answers alike and, when it is safe across instances (safe_multi), a linearizable
history with a key's tries as one operation (a row that is not races on its count
under these faults, keys or not); the other rows are measured, not judged: they show
what retries cost.

It starts its own stockd on host:port with short timeouts (like make chaos), brings the
private stack up and leaves it running; the faults that need it put a delay proxy or a
stockd of their own on the next port (and a proxy in front of that one on the port
after it); a Galera node's kill starts the stack's cluster when it is down. Writes
results/retry-<timestamp>/ (retry.json,
retry.csv, a history per row) and prints the table. Exit status 1 when a judged row
fails, 2 when the run cannot be made."""

import os
import sys
import uuid

from ..base.common import ENDLESS_STOCK, SETTLE_S, SetupError, comma_list, elapsed_line, now_iso
from ..base.common import REPO, write_text
from ..client import facts as facts_mod
from ..client.sales import deduct_path
from ..drivers.retrying import JmeterBuyers, RetryingBuyers, one_try
from ..judges import history, retries
from ..judges.settlement import wait_drained
from ..nemesis import retry_faults
from ..reports import tables
from ..scaffold.runner import Runner
from ..stack.service import wait_healthy

HEALTHY_S = 60
# Why a keyless row's history is written but not checked: each try is a request of its
# own, which may have sold, so any ledger of at most one unit per try explains it.
KEYLESS = "without keys, every try is a purchase of its own"
# Why a keyed row of a strategy that is not safe across instances has its history
# written but not checked: under these faults a stockd that gave up on a frozen store
# (its lock released at its backend timeout), or died, leaves its statements to run
# beside the next tries', as a second instance's would; such a row's count races by
# its own fact, keys or not. Its double buys and its keys' answers are still judged.
RACES = "its count races across instances (safe_multi false), keys or not"
WARM_SALES = 8  # over every HTTP loop (stockd hands out connections in even shares)
LAB, JMETER = "lab", "jmeter"  # the buyers: lab.drivers.retrying's, or jmeter/retry.jmx's
# The faults the plan's buyers run under: a JVM starts its threads seconds after it
# is launched, and only the held replies' hold waits for the buyers' first connection.
JMETER_FAULTS = ("drop",)

ROW_FIELDS = ["fault", "client", "strategy", "store", "keys", "claims", "buyers", "qty",
              "attempts", "tries", "retried", "first_tries_lost", "lost_as", "ok", "refused", "gave_up", "sold",
              "extra", "disagree", "history", "history_linearizable", "verdict", "reason"]
TABLE = [
    ("fault", "fault", "<"), ("client", "client", "<"), ("strategy", "strategy", "<"),
    ("store", "store", "<"),
    ("keys", lambda r: "yes" if r["keys"] else "no", "<"),
    ("claims keys", lambda r: "yes" if r["claims"] else "no", "<"),
    ("buyers", "buyers", ">"), ("tries", "tries", ">"), ("lost 1st", "first_tries_lost", ">"),
    ("200", "ok", ">"), ("refused", "refused", ">"), ("gave up", "gave_up", ">"),
    ("units sold", "sold", ">"), ("double buys", "extra", ">"),
    ("disagree", lambda r: r["disagree"] if r["keys"] else "-", ">"),
    ("history", lambda r: history.short(r) or "-", "<"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["RETRY_STRATEGIES"], "", comma_list,
          "comma list of strategies, each with and without keys; empty: every row that "
          "claims keys, and a safe one-step row of each store without keys too")
    o.add("--faults", ["RETRY_FAULTS"], ",".join(retry_faults.NAMES), comma_list,
          f"comma list of faults ({', '.join(retry_faults.NAMES)})")
    o.add("--clients", ["RETRY_CLIENTS"], f"{LAB},{JMETER}", comma_list,
          f"the buyers: {LAB} (the lab's own) and {JMETER} (jmeter/retry.jmx, under "
          f"{', '.join(JMETER_FAULTS)} only)")
    o.add("--jmeter", ["JMETER"], os.path.join(REPO, "jmeter", "jmeter"), str,
          "the jmeter command")
    o.add("--buyers", ["RETRY_BUYERS"], 40, int, "purchases, all started at once", 1)
    o.add("--timeout-ms", ["RETRY_TIMEOUT_MS"], 300, int, "each try's client timeout", 10)
    o.add("--hold", ["RETRY_HOLD_S"], 1.5, float, "seconds the fault lasts", 0.1)
    o.add("--attempts", ["RETRY_ATTEMPTS"], 8, int, "tries per purchase at most", 1)
    o.add("--request-timeout-ms", ["RETRY_REQUEST_TIMEOUT_MS"], 2000, int,
          "stockd's request deadline", 100)
    o.add("--io-timeout-ms", ["RETRY_IO_TIMEOUT_MS"], 1000, int, "stockd's backend timeout",
          100)
    o.add("--product", ["RETRY_PRODUCT"], 7501, int, "first product id (one per row)", 1)
    o.flag("--quick", "the test gate's version: the first safe row of each store alone, "
           "with and without keys")


def stockd_options(args):
    """The run's stockds' options: short timeouts, and no consumer of the order stream
    when a fault kills the consumer (its own processes consume)."""
    kills_consumer = retry_faults.ConsumerKill.name in args.faults
    return [f"--request-timeout-ms={args.request_timeout_ms}",
            f"--io-timeout-ms={args.io_timeout_ms}"] + (
                retry_faults.NO_CONSUMERS if kills_consumer else [])


def first_of_each_store(facts):
    """In each store a freeze can reach, the first row safe across instances that takes
    no lock and waits its turn (one atomic step: the sale a retry repeats most
    plainly)."""
    first = {}
    for s in facts.strategies:
        if (retry_faults.frozen_store(s) and s.safe_multi and not s.lock
                and s.contention == "waits" and not s.settles):
            first.setdefault(s.store, s)
    return list(first.values())


def choose(args, facts, claims):
    """The run's strategies as (keyless, keyed): the named ones both ways; --quick,
    the first safe row of each store both ways; else those and every row that
    claims keys, keyed. A fault that reaches none of the keyless rows takes the first
    keyed row it reaches without keys too (what_each_fault_sends)."""
    if args.strategies:
        named = facts.select(args.strategies)
        return named, named
    first = first_of_each_store(facts)
    if args.quick:
        return first, first
    names = {s.name for s in first}
    return first, [s for s in facts.strategies if claims.get(s.name) or s.name in names]


def what_each_fault_sends(fault, keyless, keyed):
    """[(strategy, keys)] of one fault, keyless then keyed per strategy, in the
    facts' order: its keyless baseline (the keyless rows it reaches, or else the
    first keyed one) and every keyed row it reaches."""
    plain = fault.picks(keyless) or fault.picks(keyed)[:1]
    names = {s.name for s in plain}
    ordered = plain + [s for s in fault.picks(keyed) if s.name not in names]
    return [(s, keys) for s in ordered for keys in (False, True)
            if keys or s.name in names]


class Retry:
    def __init__(self, run, claims, out_dir):
        self.args, self.say, self.out_dir = run.args, run.say, out_dir
        self.claims = claims  # strategy name -> its row says it keeps keys
        self.product = run.args.product  # the next row's product

    def buyers(self, client, fault, served, s, keys, product):
        """The row's buyers: the lab's own, or jmeter/retry.jmx's threads."""
        a = self.args
        if client == JMETER:
            name = f"jmeter-{fault.name}-{s.name}-{'keys' if keys else 'nokeys'}"
            return JmeterBuyers(a.jmeter, self.out_dir, name, served.host, served.port,
                                s.name, product, a.buyers, with_keys=keys,
                                timeout_s=a.timeout_ms / 1000, attempts=fault.attempts(a),
                                token=served.api.token)
        return RetryingBuyers(served.host, served.port, deduct_path(s.name, product),
                              a.buyers, with_keys=keys, timeout_s=a.timeout_ms / 1000,
                              attempts=fault.attempts(a), confirm=True)

    def row(self, fault, served, s, keys, product, client=LAB):
        a = self.args
        fault.before_row()
        wait_healthy(served.api, HEALTHY_S)
        served.api.must_reset(product, ENDLESS_STOCK)
        self.warm(served, s, product)
        before = self.account(fault, served.api, product, s)
        buyers = self.buyers(client, fault, served, s, keys, product)
        fault.around(s, buyers, a)
        if not buyers.join(SETTLE_S + buyers.attempts * 2):
            raise SetupError(f"{s.name}: buyers still trying {SETTLE_S} s after {fault.name}")
        wait_healthy(served.api, HEALTHY_S)
        served.api.wait_idle(SETTLE_S)
        after = self.account(fault, served.api, product, s)
        path = os.path.join(self.out_dir, f"history-{fault.name}-{client}-{s.name}-"
                            f"{'keys' if keys else 'nokeys'}.jsonl")
        row = {"fault": fault.name, "client": client, "strategy": s.name, "store": s.store,
               "keys": keys,
               "claims": bool(self.claims.get(s.name)), "buyers": a.buyers,
               "attempts": buyers.attempts,
               **retries.from_ledger(buyers.purchases, a.buyers, before, after, path,
                                     keys and s.safe_multi, RACES if keys else KEYLESS),
               "lost_as": retries.lost_as(buyers.purchases)}
        row["verdict"], row["reason"] = retries.verdict(row)
        self.say(f"{fault.name}, {client}, {s.name} {'with' if keys else 'without'} keys: "
                 f"{row['ok']} answered 200, {row['sold']} units sold for {a.buyers} purchases")
        return row

    @staticmethod
    def warm(served, s, product):
        """A few sales, keyless and keyed, one connection each, before the fault:
        each HTTP loop's pipe to its store opened and its scripts loaded, as on a
        stockd that has been serving (a fresh one would still be connecting when its
        store froze, and send nothing). The ledger is read after them."""
        for n in range(WARM_SALES):
            key = str(uuid.uuid4()) if n % 2 else None
            one_try(served.host, served.port, deduct_path(s.name, product), key, HEALTHY_S)

    @staticmethod
    def account(fault, api, product, s):
        """The product's accounting where the fault's row is judged: once the order
        stream has drained, under a fault that settles it."""
        if fault.drains:
            wait_drained(api, product)
        store = fault.ledger_store(s)
        account = api.account(product, store)
        if account is None:
            raise SetupError(f"GET /stock/{product} has no {store} accounting")
        return account

    def fault_rows(self, fault, sends, run_api):
        """The rows of one fault: its [(strategy, keys)] with the lab's buyers, and
        those of the keyless rows with JMeter's under a fault JMeter runs under; a
        product each."""
        keyless = {s.name for s, keys in sends if not keys}
        plans = [(LAB, s, keys) for s, keys in sends if LAB in self.args.clients]
        if JMETER in self.args.clients and fault.name in JMETER_FAULTS:
            plans += [(JMETER, s, keys) for s, keys in sends if s.name in keyless]
        served = fault.serve(run_api, stockd_options(self.args), self.out_dir)
        try:
            return [self.row(fault, served, s, keys, self.next_product(), client)
                    for client, s, keys in plans]
        finally:
            fault.close()

    def next_product(self):
        self.product += 1
        return self.product - 1


def work(run):
    args = run.args
    doc = run.api.strategies().body
    facts = facts_mod.parse(doc)
    claims = {r["name"]: r.get("idempotent") for r in doc["strategies"]}
    unknown = [c for c in args.clients if c not in (LAB, JMETER)]
    if unknown:
        raise SetupError(f"unknown clients: {', '.join(unknown)} (there are: {LAB}, {JMETER})")
    keyless, keyed = choose(args, facts, claims)
    out_dir = run.out_dir()
    retry = Retry(run, claims, out_dir)
    rows, skipped = [], []
    for fault in retry_faults.named(args.faults):
        sends = what_each_fault_sends(fault, keyless, keyed)
        if not sends:
            skipped.append(fault.name)
            run.say(f"{fault.name}: none of {', '.join(s.name for s in keyed)} is a row "
                    "it can reach")
            continue
        run.say(f"{fault.name}: {fault.what}")
        rows += retry.fault_rows(fault, sends, run.api)
    params = {"started": run.started, "finished": now_iso(), "buyers": args.buyers,
              "timeout_ms": args.timeout_ms, "hold_s": args.hold, "attempts": args.attempts,
              "request_timeout_ms": args.request_timeout_ms, "io_timeout_ms": args.io_timeout_ms,
              "faults": args.faults, "clients": args.clients, "skipped": skipped,
              "quick": args.quick}
    write_text(os.path.join(out_dir, "retry.json"),
               tables.json_text({"params": params, "rows": rows}))
    write_text(os.path.join(out_dir, "retry.csv"), tables.csv_text(rows, ROW_FIELDS))
    return rows, out_dir


def report(run, done):
    rows, out_dir = done
    print(tables.text_table(rows, TABLE))
    judged = [r for r in rows if r["verdict"] != retries.MEASURED]
    failed = [r for r in judged if r["verdict"] != retries.PASS]
    print(f"\n{len(judged) - len(failed)}/{len(judged)} rows that claim keys hold; "
          f"{len(rows) - len(judged)} measured; {elapsed_line(run.elapsed())}; "
          f"results in {out_dir}")
    for r in failed:
        print(f"  FAIL {r['fault']}, {r['strategy']} with keys: {r['reason']}")
    return 1 if failed else 0


RUNNER = Runner("retry", __doc__, options=options, work=work, report=report, host=True,
                port="its port (nothing may answer there)", results="retry-", instances=1,
                stockd=stockd_options,
                own_port="the retry run starts its own stockd there with short timeouts "
                         "(its faults use the next port)")
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
