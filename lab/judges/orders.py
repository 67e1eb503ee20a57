"""An orders row's judge: the whole life of every order (held, then paid, cancelled or
returned by its expiry mechanism), from three witnesses read once the row has settled
(every deadline plus its mechanism's lag has passed):

    history   the clients' requests and answers (lab.drivers.orders: one op per hold,
              payment callback or cancel, client times in monotonic microseconds)
    records   GET /orders/{ID} of every order the history names (the store's word on
              each: state, deadline, payment, returns, refunds due)
    stock     GET /stock/{P} after the settle (the store's accounting: remaining,
              held, paid, returned, refunds_due, stranded, returned_twice,
              paid_and_returned, oversold)

and the row's facts: its expiry mechanism's `lag_ms` and `strands_when` (GET /expiry)
and whether the row's fault is the one that strands (the keyspace row without a
subscriber). Pure functions: nothing here sends a request.

The checks, in the order the first violation is said:

  units      initial = remaining + held + paid; nothing oversold; the store's held,
             paid, returned and refunds_due are the sums over its orders
  held       every 201 hold is an order the store knows
  ends once  no order returned twice; no order both paid and returned; a cancelled or
             expired order returned once, a paid or held one never
  deadline   an expired order never returned before its deadline (store clock)
  lag        nor later than deadline + lag_ms (rows whose mechanism promises one)
  payments   every 200 payment (first or duplicate) is the order's payment, the order
             paid; no two payments captured for one order
  refunds    every payment refused 409 expired or already_paid counted once in the
             order's refunds_due (a payment never answered may or may not be)
  cancels    every 200 cancel left the order cancelled
  stranded   after the settle no unit is still held, except on the row whose fault is
             its mechanism's `strands_when`: there it must strand (the fault took) and
             the verdict says so (after a failover it may)

An unsafe strategy's row (`unsafe`: its cancels' returns race, hold_ms inside its
critical section; lab.drivers.order_buyers sends them in pairs, nothing written beside
them) passes only when the race shows in the units and in nothing else: "unsafe, and
the race showed", with the units that vanished (returns overwritten) or appeared
(sales overwritten), as the comparison judges an exposed row; every order still ends
once.

A failover of the store may lose acknowledged writes where the strategy's failover
fact says so (`loses_sales`): such a row's violations that lost writes explain are said
in its reason, not failed; an order returned twice or early, or an oversell, still
fails it.

A payment a client never got an answer for is "unknown": it may have taken effect or
not, and the judge allows both, as lab.judges.history does for sales; one whose
connection was refused never reached stockd and did nothing."""

from ..base.common import percentile

KEYSPACE_GRACE_MS = 1000  # a mechanism that promises no lag is judged stranded this late
REFUSED_PAYMENT_WORDS = ("expired", "already_paid")
RETURNED_STATES = ("cancelled", "expired")
ACCOUNTING = ("remaining", "held", "paid", "returned", "refunds_due", "oversold")
# What no lost write explains: a row whose strategy loses acknowledged writes in a
# failover is still held to these.
NEVER_EXCUSED = ("oversold", "ends once", "deadline")


def answered(op):
    """Whether the client got an HTTP answer (status 0: none; it may have taken effect)."""
    return bool(op.get("status"))


def unsent(op):
    """A request whose connection was refused: it never reached stockd, so it did nothing."""
    return not answered(op) and op.get("word") == "refused"


def grace_ms(lag_ms):
    """How long after its deadline a held order counts as stranded."""
    return KEYSPACE_GRACE_MS if lag_ms is None else lag_ms


def _by_order(history):
    ops = {}
    for op in history:
        if op.get("order"):
            ops.setdefault(op["order"], []).append(op)
    return ops


def _sum(records, field, states=None):
    return sum(r.get(field) or 0 for r in records.values()
               if states is None or r.get("state") in states)


def check_units(initial, stock, records, all_known=True):
    """The store's accounting against itself and, when every hold was answered (all_known:
    the clients know every order there is), against its orders: a violation or None."""
    for field in ACCOUNTING:
        if not isinstance(stock.get(field), int):
            return f"the store's accounting has no {field}"
    remaining, held, paid = stock["remaining"], stock["held"], stock["paid"]
    if remaining + held + paid != initial:
        return (f"units not in one place: initial {initial} != remaining {remaining} + "
                f"held {held} + paid {paid}")
    if not all_known:
        return None
    for field, states in (("held", ("held",)), ("paid", ("paid",))):
        units = sum(r["qty"] for r in records.values() if r.get("state") in states)
        if stock.get(field) != units:
            return f"the store counts {field} {stock.get(field)}, its orders {units}"
    returned = sum(r["qty"] * (r.get("returned") or 0) for r in records.values())
    if stock.get("returned") != returned:
        return f"the store counts returned {stock.get('returned')}, its orders {returned}"
    if stock.get("refunds_due") != _sum(records, "refunds_due"):
        return (f"the store counts refunds_due {stock.get('refunds_due')}, its orders "
                f"{_sum(records, 'refunds_due')}")
    return None


def check_oversold(stock):
    return f"oversold {stock['oversold']}" if stock.get("oversold") else None


def check_holds(history, records):
    for op in history:
        if op["kind"] == "hold" and op.get("status") == 201 and op.get("order") not in records:
            return f"hold {op.get('order')} answered 201 but the store does not know it"
    return None


def check_ends_once(records):
    for oid, r in sorted(records.items()):
        n, state = r.get("returned") or 0, r.get("state")
        if n > 1:
            return f"order {oid} returned {n} times"
        if state == "paid" and n:
            return f"order {oid} paid and returned"
        if state in RETURNED_STATES and n != 1:
            return f"order {oid} {state} but returned {n} times"
        if state == "held" and n:
            return f"order {oid} still held but returned {n} times"
    return None


def check_deadlines(records, lag_ms):
    """An expired order returned before its deadline, or (lag_ms promised) after its
    deadline + lag_ms: a violation or None."""
    for oid, r in sorted(records.items()):
        if r.get("state") != "expired" or r.get("returned_at_ms") is None:
            continue
        late = r["returned_at_ms"] - r["expires_at_ms"]
        if late < 0:
            return f"order {oid} returned {-late} ms before its deadline"
        if lag_ms is not None and late > lag_ms:
            return f"order {oid} returned {late} ms after its deadline (promised {lag_ms} ms)"
    return None


def check_payments(ops_of, records):
    for oid, ops in sorted(ops_of.items()):
        r = records.get(oid) or {}
        took = {op["payment"] for op in ops if op["kind"] == "pay" and op.get("status") == 200}
        if len(took) > 1:
            return f"order {oid} captured {len(took)} payments: {', '.join(sorted(took))}"
        for pid in took:
            if r.get("state") != "paid" or r.get("payment") != pid:
                return (f"payment {pid} answered 200 but order {oid} is {r.get('state')} "
                        f"with payment {r.get('payment')}")
    return None


def refund_bounds(ops):
    """(fewest, most) refunds due an order's payments may have left: each payment id
    refused 409 counts once; one never answered (and never captured) may count."""
    refused = {op["payment"] for op in ops if op["kind"] == "pay" and op.get("status") == 409
               and op.get("word") in REFUSED_PAYMENT_WORDS}
    captured = {op["payment"] for op in ops if op["kind"] == "pay" and op.get("status") == 200}
    maybe = {op["payment"] for op in ops
             if op["kind"] == "pay" and not answered(op) and not unsent(op)}
    return len(refused), len(refused | (maybe - captured))


def check_refunds(ops_of, records):
    for oid, ops in sorted(ops_of.items()):
        fewest, most = refund_bounds(ops)
        due = (records.get(oid) or {}).get("refunds_due") or 0
        if not fewest <= due <= most:
            want = fewest if fewest == most else f"{fewest}..{most}"
            return f"order {oid} has {due} refunds due, its refused payments say {want}"
    return None


def check_cancels(ops_of, records):
    for oid, ops in sorted(ops_of.items()):
        if any(op["kind"] == "cancel" and op.get("status") == 200 for op in ops):
            state = (records.get(oid) or {}).get("state")
            if state != "cancelled":
                return f"order {oid} answered 200 to a cancel but is {state}"
    return None


def stranded(records, lag_ms, now_ms):
    """(units, unit-seconds) held past deadline + the mechanism's lag at now_ms (store
    clock), and the unit-seconds returned orders spent there before their return."""
    units, unit_ms, grace = 0, 0, grace_ms(lag_ms)
    for r in records.values():
        end = now_ms if r.get("state") == "held" else r.get("returned_at_ms")
        if end is None or r.get("state") == "cancelled":
            continue
        past = end - r["expires_at_ms"] - grace
        if past > 0:
            unit_ms += r["qty"] * past
            units += r["qty"] if r.get("state") == "held" else 0
    return units, round(unit_ms / 1000.0, 1)


def return_lags(records):
    """The ms each expired order's return came after its deadline, ascending."""
    return sorted(r["returned_at_ms"] - r["expires_at_ms"] for r in records.values()
                  if r.get("state") == "expired" and r.get("returned_at_ms") is not None)


def drift(initial, stock):
    """(vanished, appeared): the units the store lacks, or has beyond, initial =
    remaining + held + paid - a return overwritten by a sale or another return makes
    its units vanish; a sale overwritten by a return makes units appear. Net figures:
    both at once show as their difference."""
    here = sum(stock.get(f) or 0 for f in ("remaining", "held", "paid"))
    return max(0, initial - here), max(0, here - initial)


def figures(initial, history, records, stock, lag_ms, now_ms):
    """The row's figures (units, orders and answers)."""
    lags = return_lags(records)
    units, unit_s = stranded(records, lag_ms, now_ms)
    vanished, appeared = drift(initial, stock)
    return {
        "orders": len(records),
        "held": stock.get("held"), "paid": stock.get("paid"),
        "returned": stock.get("returned"), "stranded": units, "stranded_unit_s": unit_s,
        "lag_p50_ms": percentile(lags, 50), "lag_p99_ms": percentile(lags, 99),
        "lag_max_ms": lags[-1] if lags else None,
        "returned_twice": sum(1 for r in records.values() if (r.get("returned") or 0) > 1),
        "vanished": vanished, "appeared": appeared,
        "paid_and_returned": sum(1 for r in records.values()
                                 if r.get("state") == "paid" and r.get("returned")),
        "duplicates": sum(1 for op in history if op.get("duplicate")),
        "refunds_due": stock.get("refunds_due"), "oversold": stock.get("oversold"),
    }


def violations(initial, history, records, stock, lag_ms):
    """[(check, words)] of every check that fails, in the order they are said."""
    ops_of = _by_order(history)
    all_known = all(answered(op) or unsent(op) for op in history if op["kind"] == "hold")
    said = [("oversold", check_oversold(stock)),
            ("units", check_units(initial, stock, records, all_known)),
            ("holds", check_holds(history, records)), ("ends once", check_ends_once(records)),
            ("deadline", check_deadlines(records, lag_ms)),
            ("payments", check_payments(ops_of, records)),
            ("refunds", check_refunds(ops_of, records)),
            ("cancels", check_cancels(ops_of, records))]
    return [(check, words) for check, words in said if words]


RACE_SHOWS_IN = ("oversold", "units")  # the checks an unsafe row's race may break


def unsafe_verdict(out, said):
    """An unsafe row's verdict: the race must show in the units, and only there."""
    other = [words for check, words in said if check not in RACE_SHOWS_IN]
    if other:
        return dict(out, verdict="fail", reason=other[0])
    if not said:
        return dict(out, verdict="fail", reason="unsafe, and the race did not show: every "
                    "unit is in one place")
    return dict(out, verdict="pass", reason=f"unsafe, and the race showed: {out['vanished']} "
                f"units vanished, {out['appeared']} appeared ({said[0][1]})")


def judge(row, initial, history, records, stock, now_ms):
    """The row's figures and verdict. row: mechanism's `lag_ms`, `strands_when`,
    `unsafe` (the strategy's returns race: unsafe_verdict()), and `strands` (this row's fault is the one its mechanism names in strands_when: it
    must strand) or `may_strand` (the fault may be it: a failover); `loses_writes`
    (the strategy's failover fact says a failover loses acknowledged writes: a
    violation they explain is said, not failed, but never an order returned twice or
    early, nor an oversell); an
    extra `lag_allowance_ms` widens the lag promise by what the fault itself took (a
    store restarted: its downtime) for the check; the stranded unit-seconds count
    from the promise itself. now_ms: the store's clock when the records were
    read."""
    promised = lag = row.get("lag_ms")
    if lag is not None:
        lag += row.get("lag_allowance_ms") or 0
    out = figures(initial, history, records, stock, promised, now_ms)
    said = violations(initial, history, records, stock, lag)
    if row.get("unsafe"):
        return unsafe_verdict(out, said)
    if said and row.get("loses_writes") and \
            not any(check in NEVER_EXCUSED for check, _ in said):
        return dict(out, verdict="pass", reason="acknowledged writes lost, as the strategy's "
                    f"failover fact says: {said[0][1]}")
    if said:
        return dict(out, verdict="fail", reason=said[0][1])
    if row.get("may_strand") and out["stranded"]:
        return dict(out, verdict="pass", reason=f"strands {out['stranded']} units, as its "
                    f"facts allow: {row.get('strands_when')}")
    if row.get("strands"):
        if not out["stranded"]:
            return dict(out, verdict="setup", reason="the fault was to strand units "
                        f"({row.get('strands_when')}) and none stranded: it did not take")
        return dict(out, verdict="pass", reason=f"strands {out['stranded']} units as its "
                    f"facts state: {row.get('strands_when')}")
    if out["held"] or out["stranded"]:
        return dict(out, verdict="fail", reason=f"{out['held']} units still held after the "
                    f"settle ({out['stranded']} stranded past deadline + lag)")
    return dict(out, verdict="pass", reason="every unit returned once or paid")
