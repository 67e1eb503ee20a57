"""What a retry costs (`make retry`): buyers who retry a purchase whose answer was
lost buy it twice, unless the service recognises the retry.

For each strategy (--strategies; default: in each store, the first row safe across instances
that takes no lock and waits its turn, from GET /strategies) and each way of sending (without a key, then with an
Idempotency-Key per purchase), the run resets one product to a stock that never runs
out, freezes the strategy's store (SIGSTOP, scripts/stack.sh freeze-one), starts
--buyers buyers at once, each making one purchase of one unit with a --timeout-ms
client timeout and retrying every lost answer (no answer, a 5xx: outcome_unknown,
timeout, backend_unavailable) with backoff (lab.drivers.retrying), thaws the store
after --hold seconds, waits for every buyer and for stockd to be idle, and reads the
store's ledger. Every unit beyond one per purchase is a purchase bought again
(lab.judges.retries). A row sent with keys on a strategy whose row says
`idempotent` must show none; the other rows are measured, not judged: they show what
retries cost.

It starts its own stockd on host:port with short timeouts (like make chaos), brings the
private stack up and leaves it running. Writes results/retry-<timestamp>/ (retry.json,
retry.csv) and prints the table. Exit status 1 when a judged row fails, 2 when the run
cannot be made."""

import os
import sys
import time

from ..base.common import ENDLESS_STOCK, SETTLE_S, SetupError, comma_list, elapsed_line, now_iso
from ..base.common import write_text
from ..client import facts as facts_mod
from ..client.sales import deduct_path
from ..drivers.retrying import RetryingBuyers
from ..judges import retries
from ..nemesis.faults import run_stack
from ..reports import tables
from ..scaffold.runner import Runner
from ..stack.service import wait_healthy

HEALTHY_S = 60
STORE_PROCESS = {"mysql": "mysql", "redis": "redis"}  # store -> scripts/stack.sh NAME

ROW_FIELDS = ["strategy", "store", "keys", "claims", "buyers", "qty", "tries", "retried",
              "first_tries_lost", "lost_as", "ok", "refused", "gave_up", "sold", "extra", "verdict",
              "reason"]
TABLE = [
    ("strategy", "strategy", "<"), ("store", "store", "<"),
    ("keys", lambda r: "yes" if r["keys"] else "no", "<"),
    ("claims keys", lambda r: "yes" if r["claims"] else "no", "<"),
    ("buyers", "buyers", ">"), ("tries", "tries", ">"), ("lost 1st", "first_tries_lost", ">"),
    ("200", "ok", ">"), ("refused", "refused", ">"), ("gave up", "gave_up", ">"),
    ("units sold", "sold", ">"), ("bought twice", "extra", ">"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--strategies", ["RETRY_STRATEGIES"], "", comma_list,
          "comma list of strategies; empty: a safe one-step row of each store")
    o.add("--buyers", ["RETRY_BUYERS"], 40, int, "purchases, all started at once", 1)
    o.add("--timeout-ms", ["RETRY_TIMEOUT_MS"], 300, int, "each try's client timeout", 10)
    o.add("--hold", ["RETRY_HOLD_S"], 1.5, float, "seconds the store stays frozen", 0.1)
    o.add("--attempts", ["RETRY_ATTEMPTS"], 8, int, "tries per purchase at most", 1)
    o.add("--request-timeout-ms", ["RETRY_REQUEST_TIMEOUT_MS"], 2000, int,
          "stockd's request deadline", 100)
    o.add("--io-timeout-ms", ["RETRY_IO_TIMEOUT_MS"], 1000, int, "stockd's backend timeout",
          100)
    o.add("--product", ["RETRY_PRODUCT"], 7501, int, "first product id (one per row)", 1)


def stockd_options(args):
    return [f"--request-timeout-ms={args.request_timeout_ms}",
            f"--io-timeout-ms={args.io_timeout_ms}"]


def choose(args, facts):
    """The strategies of the run: the named ones, or, in each store a freeze can
    reach, the first row safe across instances that takes no lock and waits its turn
    (one atomic step: the sale a retry repeats most plainly)."""
    if not args.strategies:
        first = {}
        for s in facts.strategies:
            if (s.store in STORE_PROCESS and s.safe_multi and not s.lock
                    and s.contention == "waits" and not s.settles):
                first.setdefault(s.store, s)
        return list(first.values())
    by_name = {s.name: s for s in facts.strategies}
    unknown = [n for n in args.strategies if n not in by_name]
    if unknown:
        raise SetupError(f"unknown strategies: {', '.join(unknown)}")
    frozen_out = [n for n in args.strategies if by_name[n].store not in STORE_PROCESS]
    if frozen_out:
        raise SetupError(f"no store to freeze for {', '.join(frozen_out)} (stores: "
                         f"{', '.join(STORE_PROCESS)})")
    return [by_name[n] for n in args.strategies]


class Retry:
    def __init__(self, run, claims):
        self.args, self.api, self.say = run.args, run.api, run.say
        self.claims = claims  # strategy name -> its row says it keeps keys

    def row(self, s, keys, product):
        a = self.args
        wait_healthy(self.api, HEALTHY_S)
        self.api.must_reset(product, ENDLESS_STOCK)
        before = self.sold(product, s.store)
        buyers = RetryingBuyers(a.host, a.port, deduct_path(s.name, product), a.buyers,
                                with_keys=keys, timeout_s=a.timeout_ms / 1000,
                                attempts=a.attempts)
        target = STORE_PROCESS[s.store]
        run_stack("freeze-one", target)
        try:
            buyers.start()
            time.sleep(a.hold)
        finally:
            run_stack("thaw-one", target)
        if not buyers.join(SETTLE_S + a.attempts * 2):
            raise SetupError(f"{s.name}: buyers still trying {SETTLE_S} s after the thaw")
        self.api.wait_idle(SETTLE_S)
        sold = self.sold(product, s.store) - before
        row = {"strategy": s.name, "store": s.store, "keys": keys,
               "claims": bool(self.claims.get(s.name)), "buyers": a.buyers, "qty": 1,
               "sold": sold, **retries.tally(buyers.purchases)}
        row["extra"] = retries.extra_units(sold, a.buyers, 1)
        row["lost_as"] = retries.lost_as(buyers.purchases)
        row["verdict"], row["reason"] = retries.verdict(row)
        self.say(f"{s.name} {'with' if keys else 'without'} keys: {row['ok']} answered 200, "
                 f"{sold} units sold for {a.buyers} purchases")
        return row

    def sold(self, product, store):
        account = self.api.account(product, store)
        if account is None:
            raise SetupError(f"GET /stock/{product} has no {store} accounting")
        return account["sold"]


def work(run):
    args = run.args
    doc = run.api.strategies().body
    facts = facts_mod.parse(doc)
    claims = {r["name"]: r.get("idempotent") for r in doc["strategies"]}
    selected = choose(args, facts)
    out_dir = run.out_dir()
    retry = Retry(run, claims)
    rows = [retry.row(s, keys, args.product + 2 * i + keys)
            for i, s in enumerate(selected) for keys in (False, True)]
    params = {"started": run.started, "finished": now_iso(), "buyers": args.buyers,
              "timeout_ms": args.timeout_ms, "hold_s": args.hold, "attempts": args.attempts,
              "request_timeout_ms": args.request_timeout_ms, "io_timeout_ms": args.io_timeout_ms}
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
        print(f"  FAIL {r['strategy']} with keys: {r['reason']}")
    return 1 if failed else 0


RUNNER = Runner("retry", __doc__, options=options, work=work, report=report, host=True,
                port="its port (nothing may answer there)", results="retry-", instances=1,
                stockd=stockd_options,
                own_port="the retry run starts its own stockd there with short timeouts")
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
