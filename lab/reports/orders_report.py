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
    ("twice", "returned_twice", ">"), ("vanished", "vanished", ">"),
    ("appeared", "appeared", ">"), ("paid+returned", "paid_and_returned", ">"),
    ("dups", "duplicates", ">"), ("refunds", "refunds_due", ">"),
    ("oversold", "oversold", ">"), ("verdict", lambda r: r["verdict"].upper(), "<"),
]
FIELDS = ["strategy", "expiry", "fault", "orders", "held", "paid", "returned", "stranded",
          "stranded_unit_s", "lag_p50_ms", "lag_p99_ms", "lag_max_ms", "returned_twice",
          "vanished", "appeared", "paid_and_returned", "duplicates", "refunds_due",
          "oversold", "verdict", "reason", "seconds"]

WIDTH, LEFT, RIGHT, TOP, ROW_H = 900, 150, 190, 52, 24
COLOURS = {200: "#3f8f4f", 409: "#c0504d"}  # else grey: no answer
MARGIN_MS = 150  # drawn either side of the callbacks and the return


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
    """The expired order whose first refused payment was sent closest to its deadline
    (either side of it, by the client's clock), with its ops: (record, ops) or None."""
    best = None
    for oid, r in records.items():
        if r.get("state") != "expired" or r.get("returned_at_ms") is None:
            continue
        refused = [op["wall_ms"] for op in history if op.get("order") == oid
                   and op["kind"] == "pay" and op.get("word") == "expired"]
        if refused:
            gap = abs(min(refused) - r["expires_at_ms"])
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


def _answer_ms(op):
    """The op's answer on the wall clock (its send + its monotonic duration)."""
    if op.get("complete") is None:
        return op["wall_ms"]
    return op["wall_ms"] + (op["complete"] - op["invoke"]) / 1000.0


def _said(op):
    if not op.get("status"):
        return op.get("word") or "no answer"
    word = "paid" if op["status"] == 200 else f"{op['status']} {op.get('word') or ''}".strip()
    return word + (" (duplicate)" if op.get("duplicate") else "")


def timeline_svg(record, ops, title):
    """The SVG of one order's callbacks around its deadline: a row per callback (a bar
    from its send to its answer), the deadline, the return, in ms from the deadline."""
    deadline, back = record["expires_at_ms"], record.get("returned_at_ms")
    hold = next((op for op in ops if op["kind"] == "hold"), None)
    calls = sorted((op for op in ops if op["kind"] != "hold"), key=lambda o: o["wall_ms"])
    times = [deadline] + [op["wall_ms"] for op in calls] + [_answer_ms(op) for op in calls]
    times += [back] if back is not None else []
    t0, t1 = min(times) - MARGIN_MS, max(times) + MARGIN_MS

    def x(t):
        return LEFT + (t - t0) * (WIDTH - LEFT - RIGHT) / max(1, t1 - t0)

    rows = len(calls) + 1
    height = TOP + ROW_H * rows + 44
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>',
           f'<text x="10" y="18" font-size="13">{escape(title)}</text>']
    if hold is not None:
        out.append(f'<text x="10" y="36">held {deadline - hold["wall_ms"]} ms before its '
                   f'deadline (ttl); every time below in ms from the deadline</text>')
    for i, op in enumerate(calls):
        y = TOP + ROW_H * i + ROW_H / 2
        xs, xe = x(op["wall_ms"]), max(x(_answer_ms(op)), x(op["wall_ms"]) + 3)
        colour = COLOURS.get(op.get("status"), "#999999")
        out.append(f'<text x="10" y="{y + 4:.0f}">{escape(op["kind"])} '
                   f'{escape(op.get("payment") or "")}</text>')
        out.append(f'<line x1="{xs:.1f}" y1="{y:.0f}" x2="{xe:.1f}" y2="{y:.0f}" '
                   f'stroke="{colour}" stroke-width="8"/>')
        out.append(f'<text x="{xe + 6:.1f}" y="{y + 4:.0f}">{escape(_said(op))} '
                   f'({op["wall_ms"] - deadline:+d} ms)</text>')
    y = TOP + ROW_H * len(calls) + ROW_H / 2
    out.append(f'<text x="10" y="{y + 4:.0f}">the store</text>')
    if back is not None:
        out.append(f'<circle cx="{x(back):.1f}" cy="{y:.0f}" r="6" fill="#e6c36a"/>')
        out.append(f'<text x="{x(back) + 10:.1f}" y="{y + 4:.0f}">units returned '
                   f'({back - deadline:+d} ms)</text>')
    xd, bottom = x(deadline), TOP + ROW_H * rows
    out.append(f'<line x1="{xd:.1f}" y1="{TOP - 6}" x2="{xd:.1f}" y2="{bottom + 6}" '
               'stroke="#c0504d" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{xd:.1f}" y="{bottom + 22}" text-anchor="middle">deadline '
               f'(the store\'s clock: {escape(record.get("state") or "")} after it)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
