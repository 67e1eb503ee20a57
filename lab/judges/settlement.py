"""The settlement of a row that settles later (GET /strategies: settles "async"): its
sales are accepted in Redis and reach MySQL through the order stream. A row is judged
once the stream has drained: MySQL's accounting against Redis's ledger (the comparison,
the self-audit), and order id by order id, every 200's order in MySQL once (the stream's
own run)."""

import time

from ..base.common import SetupError
from ..base.waiting import wait_until

# The longest wait for the stream to drain before a row is judged.
DRAIN_S = 120
# The store a row that settles later settles into: its ledger once the stream drained.
SETTLED_IN = "mysql"


def stream_figures(api, product):
    """GET /stock/{product}: (the "stream" object, the whole reply), or (None, None)."""
    try:
        r = api.call("GET", f"/stock/{product}")
    except OSError:
        return None, None
    if r.status != 200 or not isinstance(r.body, dict):
        return None, None
    return r.body.get("stream"), r.body


def wait_drained(api, product, seconds=DRAIN_S):
    """Seconds until the stream is empty and nothing is pending; SetupError past
    `seconds`."""
    t0, last = time.monotonic(), [None]

    def drained():
        s = last[0] = stream_figures(api, product)[0]
        return s and s["length"] == 0 and s["pending"] == 0

    if not wait_until(seconds, drained, 0.1):
        raise SetupError(f"the stream did not drain within {seconds}s: {last[0]}")
    return time.monotonic() - t0


def settled_account(api, product, accepted, seconds=DRAIN_S):
    """A row that settles later, as the comparison judges it: once its stream has
    drained, MySQL's accounting (what was settled), and a problem when it differs from
    Redis's `accepted` ledger. (accounting, problem or None)."""
    try:
        wait_drained(api, product, seconds)
    except SetupError as e:
        return accepted, str(e)
    settled = api.account(product, SETTLED_IN)
    if settled is None:
        return accepted, "could not read MySQL's accounting after the drain"
    if settled["sold"] != accepted["sold"] or settled["orders"] != accepted["orders"]:
        return settled, (f"after the drain MySQL has {settled['orders']} orders "
                         f"({settled['sold']} units), Redis accepted {accepted['orders']} "
                         f"({accepted['sold']} units)")
    return settled, None


def reconcile(ok_ids, unknown, in_mysql):
    """Drift between the 200s' order ids and MySQL's rows, in numbers."""
    seen = {}
    for order in ok_ids:
        seen[order] = seen.get(order, 0) + 1
    missing = sum(1 for o in seen if o not in in_mysql)
    duplicated = sum(n - 1 for n in in_mysql.values() if n > 1) + \
        sum(n - 1 for n in seen.values() if n > 1)
    extra = sum(1 for o in in_mysql if o not in seen)
    ok = missing == 0 and duplicated == 0 and extra <= unknown
    return {"accepted": len(ok_ids), "in_mysql": sum(in_mysql.values()), "missing": missing,
            "duplicated": duplicated, "extra": extra, "unknown": unknown,
            "verdict": "pass" if ok else "fail"}
