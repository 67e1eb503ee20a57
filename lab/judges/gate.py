"""Verdicts. A row passes or fails by what the strategy claims (its facts) and what
the store's ledger shows afterwards; throughput is reported, never judged.

Comparison rows:
    calibration  passes once the driver got answers (its throughput is the ceiling)
    any row      fails without results, without a contract answer, with an unreadable
                 ledger, or with a ledger that disagrees with the answers (store sold =
                 the 200s' units + at most the outcome_unknown answers' units)
    expected safe  fails on oversold or lost updates; a normal row of a strategy with
                 contention "waits" also on a busy answer sooner than lock_wait_ms, or
                 on units left unsold while demand exceeded stock and nothing was busy
                 or failed (unless it undersells split_qty and qty > 1: the units
                 no one segment holds are left by design) (a lease row breaks the lease on purpose: a safe lease may
                 refuse a stale holder with busy)
    exposed, or a lease that oversells   fails unless the race shows
    normal row of an unsafe strategy     informational
Bench rows: a strategy claiming safety fails on oversold or lost updates; every
strategy fails when its ledger holds fewer units than the 200s it answered.
Driver-bound: a row within DRIVER_BOUND of the calibration's throughput measured
the driver more than the strategy. That holds only while the calibration is a
ceiling: a row that beats it by more than CEILING_NOISE shows that the calibration
measured something slower than the driver (a reply bigger than a sale's, a moment
the host took the cores away), so then no row is called driver-bound and the rows
that beat it are named instead.
Two witnesses (compare and chaos rows): the ledger's verdict (nothing oversold or
lost) and the clients' history's (lab.judges.linearize: linearizable) must agree; a row
where one says safe and the other not fails with both figures, whatever the
strategy claims (its claim is judged on the ledger above). A history the checker
could not decide is reported, never counted as agreement or disagreement."""

from ..client.outcomes import ledger_problem
from . import history as history_mod

DRIVER_BOUND = 0.8
# The calibration is one measurement of a load that moves with the host: a row
# may beat it by this factor and the ceiling still hold; beyond, it does not.
CEILING_NOISE = 1.1


def raced(acct):
    return bool(acct.get("oversold") or acct.get("lost_updates"))


def race_text(acct):
    return f"oversold {acct.get('oversold')}, lost {acct.get('lost_updates')}"


def contention_problem(strategy, outcomes, fastest_busy_ms, acct, demand, stock, qty, settings):
    """Why a safe row contradicts contention "waits", or None."""
    if strategy.contention != "waits":
        return None
    wait_ms = settings["lock_wait_ms"]
    if outcomes["busy"] and fastest_busy_ms is not None and fastest_busy_ms < wait_ms:
        return (f"contention 'waits', but {outcomes['busy']} busy answers, one after "
                f"{fastest_busy_ms} ms < lock_wait_ms {wait_ms}")
    quiet = not (outcomes["busy"] or outcomes["errors"] or outcomes["outcome_unknown"])
    left = acct.get("remaining")
    # a qty > 1 that no one segment holds is refused by a split_qty row: not
    # every unit can sell, and the units left are its undersell, not a failure
    split = strategy.undersells == "split_qty" and qty > 1
    if quiet and not split and demand >= stock and isinstance(left, int) and left >= qty:
        return (f"contention 'waits' and demand {demand} >= stock {stock}, but {left} units "
                "were left unsold with no busy or failed answer")
    return None


def compare_verdict(row, strategy, res, acct, qty, settings):
    """(verdict, reason) of one comparison row. res: jmeter.Results; acct: the
    store's accounting or None; strategy: its facts (None for the calibration)."""
    o = res.outcomes
    if res.requests == 0:
        return "fail", "JMeter produced no results"
    if row.kind == "calibration":
        if o["sold"] == 0:
            return "fail", f"no answer 200 from {row.label.split()[-1]} ({o.detail()})"
        return "pass", (f"driver ceiling: {res.throughput_rps} req/s without a backend, "
                        f"{res.reply_bytes} bytes a reply")
    if acct is None:
        return "fail", "could not read the store's accounting"
    if o.answered == 0:
        return "fail", "no request got a contract answer (all errors)"
    if row.expected_safe and raced(acct):
        return "fail", f"claims safe, but {race_text(acct)}"
    ledger = ledger_problem(o["sold"], o["outcome_unknown"], qty, acct.get("sold"))
    if ledger:
        return "fail", f"ledger: {ledger}"
    if row.expected_safe:
        demand = res.requests * qty
        why = row.kind == "normal" and contention_problem(
            strategy, o, res.fastest_busy_ms, acct, demand, row.stock, qty, settings)
        if why:
            return "fail", why
        return "pass", "safe: nothing oversold or lost, ledger matches the answers"
    if row.kind == "normal":
        return "pass", ("unsafe: race showed even without help" if raced(acct) else
                        "unsafe: no race this time (the exposed row checks it)")
    if raced(acct):
        return "pass", f"unsafe, and the race showed: {race_text(acct)}"
    shown = ", ".join(f"{k}={v}" for k, v in row.params.items() if v) or "no parameters"
    return "fail", f"unsafe, but the race did not show at {shown}"


def bench_verdict(claims_safe, outcomes, acct, qty):
    """(verdict, reason) of one bench row of a strategy."""
    if outcomes.requests == 0:
        return "fail", "no answer at all"
    if acct is None:
        return "fail", "could not read the store's accounting"
    if claims_safe and raced(acct):
        return "fail", f"claims safe, but {race_text(acct)}"
    sold = acct.get("sold")
    if not isinstance(sold, int) or sold < outcomes["sold"] * qty:
        return "fail", f"ledger: store sold {sold} < {outcomes['sold']} answers 200 x qty {qty}"
    if claims_safe:
        return "pass", "safe: nothing oversold or lost"
    return "pass", ("unsafe: " + race_text(acct)) if raced(acct) else "unsafe: no race this time"


def witnesses_problem(acct, hist):
    """Why the ledger and the history disagree, or None. hist: lab.judges.history.judge()."""
    said = hist.get("history_linearizable")
    if said is None or acct is None:
        return None
    if raced(acct) and said:
        return (f"witnesses disagree: the ledger says {race_text(acct)}, but the history "
                f"of {hist['history_ops']} requests is linearizable")
    if not raced(acct) and not said:
        return (f"witnesses disagree: the ledger says oversold 0, lost 0, but the history "
                f"says: {hist['history']}")
    return None


def with_witnesses(verdict, reason, acct, hist):
    """A row's (verdict, reason) once the two witnesses are compared."""
    why = witnesses_problem(acct, hist)
    if not why:
        return verdict, reason
    return "fail", why if verdict == "pass" else f"{reason}; {why}"


def ceiling_beaten(rows, ceiling, field="throughput_rps"):
    """The rows (the calibration aside) whose throughput beats the ceiling by more
    than CEILING_NOISE: while there is one, the calibration is no ceiling."""
    if not ceiling:
        return []
    return [r for r in rows if r.get("kind") != "calibration"
            and (r.get(field) or 0) > CEILING_NOISE * ceiling]


def mark_driver_bound(rows, ceiling, field="throughput_rps"):
    """Set throughput_vs_ceiling on every row, and driver_bound on every row but the
    calibrations, against a ceiling that holds: when a row beats it by more than the
    noise, driver_bound is None (unknown) everywhere. Returns the rows that beat it."""
    beaten = ceiling_beaten(rows, ceiling, field)
    for r in rows:
        rps = r.get(field)
        if not ceiling or not rps:
            r["driver_bound"], r["throughput_vs_ceiling"] = None, None
            continue
        r["throughput_vs_ceiling"] = round(rps / ceiling, 2)
        calibration = r.get("kind") == "calibration"
        r["driver_bound"] = None if beaten or calibration else rps >= DRIVER_BOUND * ceiling
    return beaten


def ceiling_text(beaten, field="throughput_rps"):
    """What a suspect calibration is told with: the rows that beat it, fastest first."""
    worst = sorted(beaten, key=lambda r: -r[field])
    named = ", ".join(f"{r['label']} {r['throughput_vs_ceiling']}x" for r in worst[:5])
    more = f" and {len(worst) - 5} more" if len(worst) > 5 else ""
    return (f"suspect: {len(worst)} row(s) beat it by more than "
            f"{round((CEILING_NOISE - 1) * 100)}% ({named}{more}); no row is called driver-bound")


def judge_history(row, answers, account):
    """The second witness of a row of buyers bound to instances (answers: (instance,
    Answer) pairs, lab.drivers.buyers): the row's clients' history (every answer, with
    the store's counter read after the last) checked for linearizability, and a
    disagreement with the ledger kept for the verdict."""
    if account.get("initial") is None:
        row.update(history_mod.not_judged("the ledger could not be read"))
        return
    ops = history_mod.from_answers([a for _, a in answers], None, 1)
    row.update(history_mod.judge_final(account["initial"], ops, account.get("remaining")))
    row["witnesses"] = witnesses_problem(account, row)


def race_check(race, units):
    """A race's checker fields (POST /lab/race's answer: lab.drivers.race_runs) and
    whether its two witnesses agree; units: its stock when the answer does not say."""
    ledger = race.get("ledger") or {}
    hist = history_mod.judge_final(race.get("initial", units), history_mod.from_race(race),
                                   ledger.get("remaining"))
    hist["ledger"] = race_text(ledger) if raced(ledger) else "nothing oversold or lost"
    hist["agree"] = witnesses_problem(ledger, hist)
    return hist
