"""Which rows a comparison runs, and what each must show, from the strategies' facts:

    calibration  first and last: the same plan against GET /ping (no backend, a reply
                 the size of a sale's); the better of the two is the driver's
                 ceiling for this run
    normal       every selected strategy; must be safe when it claims safety for this
                 number of instances (safe_single / safe_multi), else informational
    exposed      a strategy that does not claim safety: run with the request
                 parameters its exposed_by names (hold_ms, ttl_ms, pause_ms), fewer
                 requests and half as much stock; its race must show. Not planned when
                 a lease row of the strategy must oversell: that row shows the race.
    lease        a strategy with a lease: "hold>ttl" (hold_ms 300 > ttl_ms 100: the
                 holder busy) and "pause>ttl" (pause_ms 300: the holder frozen), one
                 request per thread against 10 units; must be safe or must oversell as
                 the lease field says
"""

from ..client.facts import claim_name

# The calibration's endpoint answers a few dozen bytes, as a sale does, and
# touches no backend. /strategies did once, and the ceiling drifted with it as
# its document grew to every fact of every strategy: JMeter then spent its time
# receiving and recording those bodies, and safe rows ran faster than "the driver".
CALIBRATION_PATH = "/ping"
# A lease row's TTL, and how long the holder stays busy or frozen past it. A
# watchdog renews every TTL/3, so a lock it guards survives any stall of its
# thread shorter than 2/3 of the TTL. With 50 ms that was 33 ms, and on a
# two-core virtual machine whose host takes the CPU away now and then (the
# bench's steal column) the gate once saw such a lock oversell by one unit with
# two instances. 100 ms leaves 67 ms; the stay is still three TTLs, so every
# lease that nothing renews runs out under its holder, every run.
LEASE_TTL_MS = 100
LEASE_STAY_MS = 300
LEASE_STOCK = 10
LEASE_CASES = (
    ("busy_holder", "hold_ms", "hold>ttl", "the lease expires under a busy holder"),
    ("paused_holder", "pause_ms", "pause>ttl", "the lease expires under a frozen holder"),
)


class Row:
    """One planned row. expected_safe: True (must not race), False (must race), or
    for a normal row of an unsafe strategy False with nothing required of it."""

    def __init__(self, label, strategy, kind, params, expected_safe, loops, stock, note=""):
        self.label, self.strategy, self.kind = label, strategy, kind
        self.params, self.expected_safe = params, expected_safe
        self.loops, self.stock, self.note = loops, stock, note
        self.product = None  # the comparison gives each row a product of its own

    def __repr__(self):
        return f"Row({self.label!r}, {self.kind}, {self.params}, safe={self.expected_safe})"


def plan(args, strategies):
    """The rows to run, in order: calibration, then per strategy its normal row, its
    exposed row when it does not claim safety, then its lease rows; calibration again.
    args: threads, loops, stock, hold_ms, exposed_hold_ms, exposed_ttl_ms,
    exposed_pause_ms, exposed_requests, instances."""
    base = {"hold_ms": args.hold_ms, "ttl_ms": 0, "pause_ms": 0}
    rows = [calibration_row(args, base, "", "the same plan against a no-backend endpoint: "
                            "the driver's ceiling for this run")]
    for s in strategies:
        safe = s.safe_for(args.instances)
        rows.append(Row(s.name, s.name, "normal", dict(base), safe, args.loops, args.stock))
        leases = lease_rows(args, s, safe, base)
        if not safe and all(r.expected_safe for r in leases):
            rows.append(exposed_row(args, s, base))
        rows.extend(leases)
    # A second sample of the ceiling, at the other end of the run: a host that
    # other work shares moves under a run of many minutes, and a ceiling taken
    # at one busy moment is beaten by rows that ran at a quieter one.
    rows.append(calibration_row(args, base, " again", "the same, after every strategy: the "
                                "better of the two calibrations is the ceiling"))
    return rows


def calibration_row(args, base, tag, note):
    return Row(f"calibration {CALIBRATION_PATH}{tag}", None, "calibration", dict(base), None,
               args.loops, args.stock, note)


def exposed_row(args, s, base):
    # Fewer requests when each one is held: the race shows after a few dozen, and a
    # held request costs a server worker that long. Less stock than requests, so
    # the lost updates also turn into overselling.
    loops = max(1, min(args.loops, args.exposed_requests // max(1, args.threads)))
    stock = max(1, min(args.stock, (loops * args.threads) // 2))
    values = {"hold_ms": args.exposed_hold_ms, "ttl_ms": args.exposed_ttl_ms,
              "pause_ms": args.exposed_pause_ms}
    params = dict(base, **{p: values[p] for p in s.exposed_by})
    shown = ", ".join(s.exposed_by)
    return Row(f"{s.name} exposed", s.name, "exposed", params, False, loops, stock,
               f"not {claim_name(args.instances)}: exposed by {shown}")


def lease_rows(args, s, safe, base):
    """The lease rows the strategy's lease field asks for. A lease that holds
    ("safe") is only judged where the strategy claims safety at all."""
    if not s.lease:
        return []
    rows = []
    for case, param, tag, why in LEASE_CASES:
        holds = s.lease[case] == "safe"
        if holds and not safe:
            continue
        params = dict(base, ttl_ms=LEASE_TTL_MS, **{param: LEASE_STAY_MS})
        note = f"lease {case}: {s.lease[case]}" + ("" if holds else f" ({why})")
        rows.append(Row(f"{s.name} {tag}", s.name, "lease", params, holds, 1, LEASE_STOCK, note))
    return rows
