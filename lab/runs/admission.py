"""The admission run (`make admission`): what the token bucket and the sold-out flag
save and cost, each as rows of their own.

For each strategy (--strategies, default lua,sql: one safe row of each store) and each
mode - plain, bucket (--admit-rate, --admit-burst), flag (--sold-out-flag), bucket+flag -
it starts its own stockd with the mode's options at --port (nothing may answer there),
beside a second, plain stockd at --port + 1 that it starts once, and runs two phases on
the row's own product:

  sale      the product reset to --stock units, --conns connections buying one unit
            back to back for --seconds at the first instance: the stock sells out early
            and the rest of the buyers are refused;
  restock   the product reset to --stock again through the second instance, the same
            buyers at the first for --seconds more: how long the first takes to sell
            again (the flag's recheck, --recheck-ms) and how many it refused meanwhile.

Figures per row: requests, 200s, 429s, sold_outs and those answered from the flag's
memory (/metrics), backend calls per request (the sale phase's deducts that reached the
strategy, over its requests), oversold and the ledger (GET /stock/{P}), undersell (a
sold_out answered before a later sale began: the product still had a unit for that
buyer), and for the restock the buyers refused before the first sale and its time.

Verdict per row: pass when oversold is 0, the ledger holds exactly the 200s, no answer is
a 5xx or missing, undersell is 0 in the sale and 0 in the restock once the first instance
sold again, and the mode did what it is for: a bucket row answered 429s, a flag row
answered sold_outs from memory. Exit 1 when a row fails, 2 when the run cannot be made.
Writes results/admission-<timestamp>/ (admission.json, admission.csv)."""

import os
import sys
import time

from ..base.common import SETTLE_S, SetupError, comma_list, now_iso, write_text
from ..client import facts as facts_mod
from ..client.api import Api, metric
from ..client.outcomes import ledger_problem
from ..client.sales import deduct_path
from ..stack.service import Service
from ..drivers.load import NO_ANSWER, Load, outcomes_of
from ..reports import tables
from ..scaffold.runner import Runner, report_fact_rows

CLIENT_TIMEOUT_S = 30
MODES = ("plain", "bucket", "flag", "bucket+flag")

COLUMNS = [("strategy", "strategy", "<"), ("mode", "mode", "<"), ("requests", "requests", ">"),
           ("200", "sold", ">"), ("429", "throttled", ">"), ("sold_out", "sold_out", ">"),
           ("from memory", "from_memory", ">"), ("backend/req", "backend_per_request", ">"),
           ("oversold", "oversold", ">"), ("undersell", "undersell", ">"),
           ("restock refused", "restock_refused", ">"), ("seen ms", "restock_seen_ms", ">"),
           ("verdict", "verdict", "<")]
FIELDS = ["strategy", "store", "mode", "requests", "sold", "throttled", "sold_out",
          "from_memory", "backend_per_request", "oversold", "ledger", "undersell",
          "restock_requests", "restock_refused", "restock_seen_ms", "restock_undersell",
          "failed", "verdict", "reason"]


def options(o):
    o.add("--strategies", ["STRATEGIES"], "lua,sql", comma_list, "comma list of strategies")
    o.add("--modes", ["ADMISSION_MODES"], ",".join(MODES), comma_list,
          f"comma list of {', '.join(MODES)}")
    o.add("--stock", ["ADMISSION_STOCK"], 300, int, "units at each reset", 1)
    o.add("--seconds", ["ADMISSION_S"], 3.0, float, "how long each phase's load lasts", 0.5)
    o.add("--conns", ["ADMISSION_CONNS"], 8, int, "keep-alive connections buying", 1)
    o.add("--rate", ["ADMISSION_RATE"], 200, int, "the bucket rows' --admit-rate", 1)
    o.add("--burst", ["ADMISSION_BURST"], 20, int, "the bucket rows' --admit-burst", 1)
    o.add("--recheck-ms", ["ADMISSION_RECHECK_MS"], 100, int,
          "the flag rows' --sold-out-recheck-ms", 1)
    o.add("--product", ["ADMISSION_PRODUCT"], 7301, int, "first product id (one per row)", 1)


def after_parse(ns, error):
    wrong = [m for m in ns.modes if m not in MODES]
    if wrong:
        error(f"--modes: unknown {', '.join(wrong)} (of {', '.join(MODES)})")


def mode_options(mode, args):
    """The stockd options of a mode."""
    out = []
    if "bucket" in mode:
        out += [f"--admit-rate={args.rate}", f"--admit-burst={args.burst}"]
    if "flag" in mode:
        out += ["--sold-out-flag=1", f"--sold-out-recheck-ms={args.recheck_ms}"]
    return out


def drive(args, name, product, meanwhile=None):
    """--conns buyers of one unit for --seconds: their answers, by start time; with
    `meanwhile`, it is called a third of the way through and its value returned too."""
    load = Load(args.host, args.port, CLIENT_TIMEOUT_S)
    load.add(name, deduct_path(name, product), args.conns)
    load.start()
    done = None
    try:
        if meanwhile:
            time.sleep(args.seconds / 3)
            done = meanwhile()
            time.sleep(args.seconds * 2 / 3)
        else:
            time.sleep(args.seconds)
    finally:
        load.stop()
    return load.answers(name), done


def undersold(answers):
    """sold_outs answered before a later sale began: a unit was still there."""
    starts = [a.start for a in answers if a.status == 200]
    last = max(starts) if starts else None
    return sum(1 for a in answers if a.word == "sold_out" and last is not None and a.end < last)


def counters(api, name):
    """(deducts answered, 429s, sold_outs from the flag) of strategy `name` so far."""
    samples = api.metrics()[1]
    total = sum(v for n, labels, v in samples
                if n == "stockd_requests_total" and labels.get("strategy") == name)
    throttled = metric(samples, "stockd_requests_total", strategy=name, outcome="throttled")
    memory = metric(samples, "stockd_sold_out_flag_answers_total", strategy=name)
    return total, throttled or 0, memory or 0


def restock(run, second, s, product):
    """The restock phase: the buyers already refused (from memory, with the flag) when
    the second instance resets the product. (answers, buyers refused after the reset
    answered and before the first sale, the ms from sending the reset to that sale's
    answer, undersell once it was seen)."""
    def reset():
        sent = time.monotonic()
        second.must_reset(product, run.args.stock)
        return sent, time.monotonic()

    answers, (sent, done) = drive(run.args, s.name, product, reset)
    first = next((a for a in answers if a.status == 200 and a.start >= sent), None)
    if first is None:
        return answers, None, None, None
    refused = sum(1 for a in answers
                  if a.word == "sold_out" and a.start >= done and a.end <= first.start)
    seen_ms = round((first.end - sent) * 1000)
    return answers, refused, seen_ms, undersold([a for a in answers if a.start >= first.end])


def judge(row, mode):
    """The row's verdict and why."""
    why = []
    if row["oversold"] != 0:
        why.append(f"oversold {row['oversold']}" if row["oversold"] else "no accounting")
    if row["ledger"]:
        why.append(row["ledger"])
    if row["failed"]:
        why.append(f"{row['failed']} answers were a 5xx or missing")
    if row["undersell"]:
        why.append(f"{row['undersell']} buyers refused sold_out while a unit was left")
    if row["restock_seen_ms"] is None:
        why.append("nothing sold after the restock")
    elif row["restock_undersell"]:
        why.append(f"{row['restock_undersell']} refused after the restock was seen")
    if "bucket" in mode and not row["throttled"]:
        why.append("the bucket never refused: the load stayed under --rate")
    if "flag" in mode and not row["from_memory"]:
        why.append("the flag never answered")
    row["verdict"], row["reason"] = ("fail", "; ".join(why)) if why else ("pass", "")


def ledger_of(api, s, product, sold):
    """(oversold, what is wrong with the ledger or None) of the product's epoch now."""
    account = api.account(product, s.store)
    return (account and account.get("oversold"),
            ledger_problem(sold, 0, 1, account and account.get("sold")))


def one_row(run, second, s, mode, product):
    args, say = run.args, run.say
    service = Service(run.api, 1, say, mode_options(mode, args))
    try:
        service.ensure()
        run.api.must_reset(product, args.stock)
        sale = drive(args, s.name, product)[0]
        run.api.wait_idle(SETTLE_S)
        o = outcomes_of(sale)
        total, throttled, memory = counters(run.api, s.name)
        oversold, ledger = ledger_of(run.api, s, product, o["sold"])
        again, refused, seen_ms, restock_under = restock(run, second, s, product)
        run.api.wait_idle(SETTLE_S)
        o_again = outcomes_of(again)
        oversold_again, ledger_again = ledger_of(run.api, s, product, o_again["sold"])
    finally:
        service.stop()
    row = {"strategy": s.name, "store": s.store, "mode": mode, "requests": len(sale),
           "sold": o["sold"], "throttled": int(throttled), "sold_out": o["sold_out"],
           "from_memory": int(memory),
           "backend_per_request": round((total - throttled - memory) / total, 4) if total else None,
           "oversold": max(oversold, oversold_again) if None not in (oversold, oversold_again)
           else None,
           "ledger": "; ".join(p for p in (ledger, ledger_again) if p) or None,
           "undersell": undersold(sale), "restock_requests": len(again),
           "restock_refused": refused, "restock_seen_ms": seen_ms,
           "restock_undersell": restock_under,
           "failed": sum(1 for a in sale + again if a.status == NO_ANSWER or a.status >= 500)}
    judge(row, mode)
    say(f"{s.name} {mode}: {row['requests']} requests, {row['sold']} sold, "
        f"{row['throttled']} throttled, {row['from_memory']} from memory, backend/req "
        f"{row['backend_per_request']}, restock seen in {seen_ms} ms: {row['verdict']}")
    return row


def work(run):
    args = run.args
    out_dir = run.out_dir()
    run.say(f"results in {out_dir}")
    second_api = Api.with_admin_token(args.host, args.port + 1)
    if second_api.answers():
        raise SetupError(f"something answers at {second_api.where()}: the run starts its "
                         "second stockd there; choose a free --port")
    second = Service(second_api, 1, run.say)
    rows = []
    try:
        second.ensure()
        facts = facts_mod.parse(second_api.strategies().body)
        selected = facts.select(args.strategies)
        facts_mod.check_needs(second_api, facts, selected)
        product = args.product
        for s in selected:
            for mode in args.modes:
                rows.append(one_row(run, second_api, s, mode, product))
                product += 1
    finally:
        second.stop()
    params = {"started": run.started, "finished": now_iso(), "host": args.host,
              "port": args.port, "stock": args.stock, "seconds": args.seconds,
              "conns": args.conns, "rate": args.rate, "burst": args.burst,
              "recheck_ms": args.recheck_ms}
    write_text(os.path.join(out_dir, "admission.json"),
               tables.json_text({"params": params, "rows": rows}))
    write_text(os.path.join(out_dir, "admission.csv"), tables.csv_text(rows, FIELDS))
    return rows, out_dir


def report(run, done):
    return report_fact_rows(run, done, COLUMNS, "claims",
                            lambda r: f"{r['strategy']} {r['mode']}")


RUNNER = Runner("admission", __doc__, options=options, after_parse=after_parse, work=work,
                report=report, host=True, port="its port (nothing may answer there, nor at "
                "the next port)", results="admission-",
                own_port="the admission run starts its own stockd there, one per mode")
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
