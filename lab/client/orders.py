"""The client side of orders: the expiry mechanisms' facts (GET /expiry) and the
store's record of each order a history names (GET /orders/{ID}), read once a row
has settled.

A mechanism's facts: name, store, summary, `lag_ms` (the lag it promises between a
deadline and the return, or None: none promised) and `strands_when` (the fault that
strands units, or None). Which strategies hold orders is their `orders` fact
(lab.client.facts). A field that is missing is an error that says so."""

from ..base.common import SetupError

MECHANISM_FIELDS = ("name", "store", "lag_ms", "strands_when")


class Mechanism:
    def __init__(self, doc):
        self.name, self.store = doc["name"], doc["store"]
        self.lag_ms, self.strands_when = doc["lag_ms"], doc["strands_when"]
        self.summary = doc.get("summary")


def mechanisms(doc):
    """The mechanisms of a GET /expiry document, in the server's order."""
    rows = doc.get("expiry") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise SetupError("GET /expiry lists no expiry mechanism")
    for i, m in enumerate(rows):
        missing = [f for f in MECHANISM_FIELDS if not isinstance(m, dict) or f not in m]
        if missing:
            raise SetupError(f"GET /expiry: mechanism {i} has no {', '.join(missing)}")
    return [Mechanism(m) for m in rows]


def read_mechanisms(api):
    try:
        r = api.call("GET", "/expiry")
    except OSError as e:
        raise SetupError(f"GET /expiry at {api.where()} failed: {e}") from None
    if r.status != 200:
        raise SetupError(f"GET /expiry at {api.where()} answered {r.status}")
    return mechanisms(r.body)


def record(api, order):
    """The store's record of an order (GET /orders/{ID}), or None when it has none."""
    try:
        r = api.call("GET", f"/orders/{order}")
    except OSError as e:
        raise SetupError(f"GET /orders/{order} failed: {e}") from None
    if r.status == 404:
        return None
    if r.status != 200 or not isinstance(r.body, dict):
        raise SetupError(f"GET /orders/{order} answered {r.status}: {str(r.body)[:160]}")
    return r.body


def records(api, history):
    """{order id: record} of every order a history names that the store knows."""
    ids = sorted({op["order"] for op in history if op.get("order")})
    found = {oid: record(api, oid) for oid in ids}
    return {oid: r for oid, r in found.items() if r is not None}
