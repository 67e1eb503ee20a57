"""The orders run's results: orders.json (the run and its rows), orders.csv, orders.md
(the table docs/orders.md shows), junit.xml, and timeline.svg: one order whose
payment raced its expiry, drawn along the wall clock around its deadline (the hold,
each callback as it was sent and answered, the deadline, the return)."""

import os
from html import escape

from ..base.common import write_text
from . import junit, tables

COLUMNS = [
    ("strategy", "strategy", "<"), ("expiry", "expiry", "<"), ("fault", "fault", "<"),
    ("orders", "orders", ">"), ("held", "held", ">"), ("paid", "paid", ">"),
    ("returned", "returned", ">"), ("stranded", "stranded", ">"),
    ("stranded unit-s", "stranded_unit_s", ">"),
    ("lag p50 ms", "lag_p50_ms", ">"), ("p99", "lag_p99_ms", ">"), ("max", "lag_max_ms", ">"),
    ("twice", "returned_twice", ">"), ("paid+returned", "paid_and_returned", ">"),
    ("dups", "duplicates", ">"), ("refunds", "refunds_due", ">"),
    ("oversold", "oversold", ">"), ("verdict", lambda r: r["verdict"].upper(), "<"),
]
FIELDS = ["strategy", "expiry", "fault", "orders", "held", "paid", "returned", "stranded",
          "stranded_unit_s", "lag_p50_ms", "lag_p99_ms", "lag_max_ms", "returned_twice",
          "paid_and_returned", "duplicates", "refunds_due", "oversold", "verdict", "reason",
          "seconds"]

WIDTH, LEFT, RIGHT, TOP, LANE_H = 900, 110, 30, 40, 46
LANES = ("hold", "callbacks", "store")
COLOURS = {200: "#3f8f4f", 409: "#c0504d", 201: "#8fb3e0", 0: "#999999"}


def name_of(r):
    return f"{r['strategy']} {r['expiry']} {r['fault']}"


def write(out_dir, doc):
    rows = doc["rows"]
    write_text(os.path.join(out_dir, "orders.json"), tables.json_text(doc))
    write_text(os.path.join(out_dir, "orders.csv"), tables.csv_text(rows, FIELDS))
    write_text(os.path.join(out_dir, "orders.md"), tables.markdown_table(rows, COLUMNS) + "\n")
    junit.write(os.path.join(out_dir, "junit.xml"), "orders", rows, name_of,
                lambda r: r.get("seconds"), {"quick": doc.get("quick")})
    race = doc.get("race")
    if race:
        write_text(os.path.join(out_dir, "timeline.svg"), timeline_svg(**race))


def racing_order(history, records):
    """The order whose callbacks came closest to its deadline from both sides (one
    before it, one after), with its ops: (record, ops) or None."""
    best = None
    for oid, r in records.items():
        pays = [op for op in history if op.get("order") == oid and op["kind"] == "pay"
                and op.get("status")]
        before = [r["expires_at_ms"] - op["wall_ms"] for op in pays
                  if op["wall_ms"] < r["expires_at_ms"]]
        after = [op["wall_ms"] - r["expires_at_ms"] for op in pays
                 if op["wall_ms"] >= r["expires_at_ms"]]
        if before and after:
            gap = min(before) + min(after)
            if best is None or gap < best[0]:
                best = (gap, oid)
    if best is None:
        return None
    oid = best[1]
    return records[oid], [op for op in history if op.get("order") == oid]


def race_of(history, records, row):
    """What timeline_svg draws for a row, or None when no payment raced its expiry."""
    found = racing_order(history, records)
    if not found:
        return None
    record, ops = found
    return {"record": record, "ops": ops, "title": f"{name_of(row)}: a payment racing its "
            f"expiry (order {record['order']})"}


def _x(t, t0, t1):
    return LEFT + (t - t0) * (WIDTH - LEFT - RIGHT) / max(1, t1 - t0)


def _lane_y(lane):
    return TOP + LANES.index(lane) * LANE_H + LANE_H / 2


def _answer_ms(op):
    """The op's answer on the wall clock (its send + its monotonic duration)."""
    if op.get("complete") is None:
        return op["wall_ms"]
    return op["wall_ms"] + (op["complete"] - op["invoke"]) / 1000.0


def _label(op):
    if not op.get("status"):
        return op.get("word") or "no answer"
    words = {200: "paid", 201: "held", 409: op.get("word") or "409"}
    said = words.get(op["status"], str(op["status"]))
    return said + (" (dup)" if op.get("duplicate") else "")


def timeline_svg(record, ops, title):
    """The SVG of one order's life around its deadline."""
    deadline = record["expires_at_ms"]
    times = [op["wall_ms"] for op in ops] + [_answer_ms(op) for op in ops] + [deadline]
    if record.get("returned_at_ms"):
        times.append(record["returned_at_ms"])
    t0, t1 = min(times) - 50, max(times) + 50
    height = TOP + LANE_H * len(LANES) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{LEFT}" y="20" font-size="13">{escape(title)}</text>']
    for lane in LANES:
        y = _lane_y(lane)
        out.append(f'<text x="8" y="{y + 4:.0f}">{lane}</text>')
        out.append(f'<line x1="{LEFT}" y1="{y:.0f}" x2="{WIDTH - RIGHT}" y2="{y:.0f}" '
                   'stroke="#ddd"/>')
    xd = _x(deadline, t0, t1)
    out.append(f'<line x1="{xd:.1f}" y1="{TOP}" x2="{xd:.1f}" y2="{height - 30}" '
               'stroke="#c0504d" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{xd + 3:.1f}" y="{height - 18}">deadline (store clock)</text>')
    for i, op in enumerate(sorted(ops, key=lambda o: o["wall_ms"])):
        lane = "hold" if op["kind"] == "hold" else "callbacks"
        y = _lane_y(lane) + (i % 3 - 1) * 10
        xs, xe = _x(op["wall_ms"], t0, t1), _x(_answer_ms(op), t0, t1)
        colour = COLOURS.get(op.get("status"), "#999999")
        out.append(f'<line x1="{xs:.1f}" y1="{y:.0f}" x2="{max(xe, xs + 2):.1f}" y2="{y:.0f}" '
                   f'stroke="{colour}" stroke-width="5"/>')
        label = f"{op.get('payment') or ''} {_label(op)}".strip()
        out.append(f'<text x="{xs:.1f}" y="{y - 6:.0f}">{escape(label)}</text>')
    if record.get("returned_at_ms"):
        xr = _x(record["returned_at_ms"], t0, t1)
        y = _lane_y("store")
        out.append(f'<circle cx="{xr:.1f}" cy="{y:.0f}" r="5" fill="#e6c36a"/>')
        out.append(f'<text x="{xr + 8:.1f}" y="{y + 4:.0f}">units returned '
                   f'(+{record["returned_at_ms"] - deadline} ms)</text>')
    else:
        y = _lane_y("store")
        out.append(f'<text x="{xd + 8:.1f}" y="{y + 4:.0f}">{escape(record["state"])}: '
                   'never returned</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
