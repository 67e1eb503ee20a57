"""What retries cost: a retrying run's figures and, for a row whose strategy claims
to keep idempotency keys, its verdict.

Each buyer makes one logical purchase of `qty` units and retries it until it gets an
answer it can act on (lab.drivers.retrying). Whatever the strategy, a purchase should
have one effect at most, so the ledger can hold at most purchases x qty units: every
unit beyond that is a purchase bought again by a retry (`extra`, counted from the
store's ledger, never inferred from the clients' answers): the double buys. A row
sent without keys shows what retries cost today; a row sent with keys, on a strategy
whose row in GET /strategies says `idempotent`, must show 0 double buys, no purchase
left without an answer, every key's answers alike (`disagree`: keys whose answers,
the confirming try's among them, differ) and a linearizable history in which each
key's tries are one operation (lab.judges.history.from_purchases)."""

from collections import Counter

from ..drivers.retrying import retried
from . import history

PASS, FAIL, MEASURED = "pass", "fail", "measured"


def tally(purchases):
    """{purchases, tries, retried, ok, refused, gave_up} of a run's purchases."""
    finals = [p.final() for p in purchases]
    return {
        "purchases": len(purchases),
        "tries": sum(len(p.tries) for p in purchases),
        "retried": sum(1 for p in purchases if len(p.tries) > 1),
        "ok": sum(1 for f in finals if f is not None and f.status == 200),
        "refused": sum(1 for f in finals if f is not None and f.status != 200),
        "gave_up": sum(1 for f in finals if f is None),
        "first_tries_lost": sum(1 for p in purchases if p.tries and retried(p.tries[0])),
        "disagree": sum(1 for p in purchases if p.key and not p.agrees()),
    }


def lost_as(purchases):
    """{what a lost try got: count}: "client timeout", "reset", or the 5xx's word."""
    return dict(Counter(t.word or str(t.status) for p in purchases for t in p.tries
                        if retried(t)))


def extra_units(sold, purchases, qty):
    """Units in the ledger beyond one effect per purchase."""
    return max(0, sold - purchases * qty)


def from_ledger(purchases, made, before, after, path, checked, why_not):
    """A retrying run's figures: its purchases' tally, the units the ledger sold between
    `before` and `after` (the product's accounting, {sold, remaining}) and the double
    buys beyond one unit for each of the `made` purchases; the history, a key's tries
    one operation, written to `path` and checked when `checked`, else not, for
    `why_not`."""
    sold = after["sold"] - before["sold"]
    figures = {"qty": 1, "sold": sold, **tally(purchases),
               "extra": extra_units(sold, made, 1)}
    ops = history.from_purchases(purchases, path, 1)
    figures.update(history.judge_final(before["remaining"], ops, after["remaining"], path)
                   if checked else history.not_judged(why_not))
    return figures


def verdict(row):
    """(verdict, reason) of a row with its figures: only a keyed row on a strategy
    that claims keys is judged."""
    if not (row["keys"] and row["claims"]):
        return MEASURED, ""
    if row["extra"]:
        return FAIL, (f"{row['extra']} units sold beyond one per purchase, with a key "
                      "on every try")
    if row["gave_up"]:
        return FAIL, f"{row['gave_up']} purchases never got an answer to act on"
    if row["ok"] * row["qty"] != row["sold"]:
        return FAIL, (f"the ledger holds {row['sold']} units for {row['ok']} purchases "
                      "answered 200")
    if row.get("disagree"):
        return FAIL, f"{row['disagree']} keys were answered two ways"
    if row.get("history_linearizable") is False:
        return FAIL, f"the clients' history, a key's tries as one operation: {row['history']}"
    return PASS, ""
