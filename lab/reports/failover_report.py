"""The failover run's results: failover.json and failover.csv (one row per strategy),
failover.md (the strategy x {plain load, lease expiry, frozen holder, primary failover}
table: the Redlock-versus-fencing debate in one place, the last column measured by this
run, the others the facts that make compare and chaos judge them), and timeline.svg,
the window of one two-holder row drawn along its real clock."""

import os
from html import escape

from ..base.common import write_text
from . import tables

LANES = ("primary", "replica", "Sentinel", "client A", "client B")
WIDTH, LEFT, RIGHT, LANE_H, TOP = 1000, 90, 40, 58, 40
CHAR_W = 6.2  # the labels' average glyph width at 11 px
COLOURS = {"alive": "#7fb77e", "held": "#c9c9c9", "gap": "#f2b8a2", "lock": "#8fb3e0",
           "frozen": "#5a7bb0", "new": "#e6c36a", "sold": "#3f8f4f"}
# A failover window row's columns (tables.text_table's (header, field, align)), which each
# run's table names and follows with its own (make failover: the verdict; make
# redis-cluster's kill rows: the load on the shard, then the verdict).
WINDOW_COLUMNS = [
    ("strategy", "strategy", "<"), ("kind", "kind", "<"), ("fact", "fact", "<"),
    ("200s", "acked", ">"), ("ledger", "store_sold", ">"), ("acked lost", "acked_lost", ">"),
    ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"),
    ("A", "first_holder", "<"), ("B", "second_holder", "<"),
    ("promote s", "promote_s", ">"), ("replica s", "replica_back_s", ">"),
    ("first 200 s", "first_ok_s", ">"),
    ("no-primary answers", "gap_answers", "<"), ("max ms", "gap_max_ms", ">"),
]
VERDICT_COLUMN = ("verdict", lambda r: r["verdict"].upper(), "<")


def write(out_dir, doc, fields, facts, timeline):
    rows = doc["rows"]
    write_text(os.path.join(out_dir, "failover.json"), tables.json_text(doc))
    write_text(os.path.join(out_dir, "failover.csv"), tables.csv_text(rows, fields))
    write_text(os.path.join(out_dir, "failover.md"), debate_table(rows, facts))
    if timeline:
        write_text(os.path.join(out_dir, "timeline.svg"), timeline_svg(*timeline))


def measured_cell(r):
    """What the window did to the row, in words."""
    if r["kind"] == "quorum":
        what = r["first_holder"]
    elif r["kind"] == "sales":
        what = f"A's sales answered {r['first_holder']}: {r['acked_lost']} of {r['acked']} " \
               "acknowledged lost"
    else:
        what = f"A {r['first_holder']}, B {r['second_holder']}: oversold {r['oversold']}"
    return f"{what} ({r['verdict']})"


def lease_cell(s, case):
    return s.lease[case] if s.lease else "no lease"


def debate_table(rows, facts):
    lines = ["| strategy | plain load, N instances | lease expiry (hold_ms > ttl) | "
             "frozen holder (pause_ms > ttl) | primary failover: fact | measured |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        s = facts.by_name[r["strategy"]]
        lines.append(f"| `{s.name}` | {'safe' if s.safe_multi else 'oversells'} | "
                     f"{lease_cell(s, 'busy_holder')} | {lease_cell(s, 'paused_holder')} | "
                     f"{s.failover} | {measured_cell(r)} |")
    return "\n".join(lines) + "\n"


class Axis:
    """A picture's clock (seconds, left to right) and its lanes (top to bottom)."""

    def __init__(self, start, end, lanes=LANES):
        self.start, self.end, self.span = start, end, max(end - start, 0.001)
        self.lanes = lanes

    def x(self, t):
        return LEFT + (t - self.start) / self.span * (WIDTH - LEFT - RIGHT)


def lane_y(axis, lane):
    return TOP + axis.lanes.index(lane) * LANE_H


def label(x, y, text, colour="#000"):
    """A label starting at x, or ending there when it would run off the picture."""
    anchor = "start"
    if x + len(text) * CHAR_W > WIDTH - 4:
        x, anchor = min(x, WIDTH - 4), "end"
    return (f'<text x="{x:.1f}" y="{y}" font-size="11" fill="{colour}" '
            f'text-anchor="{anchor}">{escape(text)}</text>')


def bar(axis, lane, t0, t1, colour, text):
    """A segment of a lane; its label inside when it fits, else under its start.
    Returns (shape, label): labels are drawn over every shape."""
    x0, x1 = axis.x(t0), axis.x(t1)
    y = lane_y(axis, lane)
    shape = (f'<rect x="{x0:.1f}" y="{y + 8}" width="{max(x1 - x0, 2):.1f}" height="22" '
             f'fill="{COLOURS[colour]}"><title>{escape(text)}</title></rect>')
    inside = len(text) * CHAR_W + 8 <= x1 - x0
    return shape, label(x0 + 4, y + 24 if inside else y + 44, text)


def mark(axis, lane, t, text):
    x, y = axis.x(t), lane_y(axis, lane)
    return (f'<line x1="{x:.1f}" y1="{y + 2}" x2="{x:.1f}" y2="{y + 36}" stroke="#b22" '
            f'stroke-width="2"/>', label(x + 4, y + 24, text, "#b22"))


def timeline_svg(name, m):
    """The window of one two-holder row: the write only the primary saw, the cut, the
    death, the promotion, the second holder, the first holder's late write."""
    start = m["cut"]
    second_at, second = m["second"]
    end = max(m["thawed"], second_at) + 0.2
    axis = Axis(start - 0.1, end)
    parts = [
        bar(axis, "primary", start, m["died"], "alive", "primary: A's lock is written here only"),
        mark(axis, "primary", m["died"], "kill -9"),
        bar(axis, "replica", start, m["link_down"], "held",
            "held back: reads the stream, applies nothing"),
        bar(axis, "replica", m["link_down"], m["promoted"] or end, "gap",
            "link down, released: no primary"),
        mark(axis, "Sentinel", m["promoted"] or end, "Sentinel promotes the replica"),
        bar(axis, "client A", start, m["held_at"] or m["thawed"], "lock",
            "takes the lock on the primary, reads the last unit"),
        bar(axis, "client B", m["died"], m["first_ok"] or end, "gap", "503 until stockd finds the new primary"),
        bar(axis, "client B", second_at - second[3], second_at, "new",
            f"same lock on the new primary: {second[0]}"),
    ]
    if m["promoted"]:
        parts.insert(4, bar(axis, "replica", m["promoted"], end, "new",
                            "the new primary: no trace of A's lock"))
    if m["held_at"]:
        parts.append(bar(axis, "client A", m["held_at"], m["thawed"], "frozen",
                         "frozen between its read and its write"))
    first = m["first"]
    parts.append(mark(axis, "client A", m["thawed"],
                      f"writes: {first[0] if first else 'no answer'}"))
    title = (f"{name}: a lock taken on the primary, lost in the failover, taken again "
             "- two holders")
    return picture(axis, start, title, parts)


def picture(axis, start, title, parts):
    """The SVG of a timeline: its title, the lanes' names, the bars and marks `parts`
    ((shape, label) pairs: every label over every shape), a tick a second from `start`."""
    lanes = axis.lanes
    labels = "".join(f'<text x="8" y="{lane_y(axis, lane) + 24}" font-size="12" '
                     f'font-weight="bold">{escape(lane)}</text>' for lane in lanes)
    ticks = "".join(
        f'<text x="{axis.x(start + t):.1f}" y="{TOP + len(lanes) * LANE_H + 14}" '
        f'font-size="10">{t:.0f} s</text>'
        for t in range(0, int(axis.end - start) + 1))
    height = TOP + len(lanes) * LANE_H + 24
    shapes = "".join(shape for shape, _ in parts)
    texts = "".join(text for _, text in parts)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">'
            f'<rect width="100%" height="100%" fill="white"/>'
            f'<text x="8" y="20" font-size="14" font-weight="bold">{escape(title)}</text>'
            f"{labels}{shapes}{texts}{ticks}</svg>\n")

