"""The audit's outputs: its printed table and report.html (the verdict, the run's
parameters, bar charts of oversold units and lost updates per run, the table, and a
race timeline drawn from the answers when the service reports the stock a sale
left)."""

from ..judges import history
from . import html as h, race_report
from .html import esc, fmt

TABLE = [  # (heading, field, align)
    ("run", "label", "<"), ("req", "requests", ">"), ("sold", "sold", ">"),
    ("sold_out", "sold_out", ">"), ("refused", "refused", ">"), ("unknown", "unknown", ">"),
    ("stock", "stock", ">"), ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"),
    ("unexpl", "unexplained", ">"), ("left", "remaining", ">"), ("p50", "p50_ms", ">"),
    ("p99", "p99_ms", ">"), ("history", history.short, "<"), ("verdict", "verdict", "<"),
]

COLUMNS = [  # heading, field, left-aligned
    ("run, and why", "label", True), ("verdict", "verdict", True),
    ("history (linearizability)", "history", True), ("requests", "requests", False),
    ("sold", "sold", False), ("sold out", "sold_out", False), ("refused", "refused", False),
    ("unknown", "unknown", False), ("stock", "stock", False), ("oversold", "oversold", False),
    ("lost updates", "lost_updates", False), ("unexplained", "unexplained", False),
    ("stock after", "remaining", False), ("p50 ms", "p50_ms", False),
    ("p99 ms", "p99_ms", False),
]
CHARTS = ("chart-oversold", "chart-lost")


def cell_html(r, f):
    v = r.get(f)
    if f == "verdict":
        return [], h.badge({"known": "unsafe"}.get(v, v), str(v).upper())
    if f == "label":
        return h.label_cell(r, [])
    if f == "history":
        cls = ["bad"] if r.get("history_linearizable") is False else []
        return ["label"] + cls, esc(v or "–")
    bad = h.race_shown(f, v) or (f == "unexplained" and isinstance(v, int) and v > 0)
    return ["bad"] if bad else [], esc(fmt(v))


def render(rows, params, races):
    p = params
    failed = [(r.get("label"), r.get("reason")) for r in rows if r.get("verdict") == "fail"]
    when = str(p.get("started") or "").replace("T", " ")
    shown = [
        ("started", when), ("target", p.get("target")), ("file", p.get("file")),
        ("request", f"{p.get('method')} {p.get('url')}"),
        ("threads × loops", f"{p.get('threads')} × {p.get('loops')}"),
        ("ramp-up", f"{p.get('rampup')} s"), ("stock at reset", fmt(p.get("stock"))),
        ("qty per request", p.get("qty")), ("product", p.get("product")),
        ("runs", p.get("runs")), ("baseline", p.get("baseline") or "–"),
        ("remaining in answers", "yes" if p.get("reports_remaining") else "no"),
        ("stock read afterwards", "yes" if p.get("stock_read") else "no"),
        ("JMeter", p.get("jmeter") or "–"),
    ]
    colour = "#c62828"
    charts = (
        h.bar_chart("chart-oversold", "Oversold units (sold − stock)",
                    [(r["label"], r.get("oversold"), colour) for r in rows],
                    zero_note="Nothing oversold in any run.")
        + h.bar_chart("chart-lost", "Lost updates (sold − stock taken)",
                      [(r["label"], r.get("lost_updates"), colour) for r in rows],
                      zero_note="No lost updates in any run (or no stock read)."))
    table = h.table("results", COLUMNS, rows, cell_html,
                    lambda r: (r.get("verdict") or "", r.get("label")))
    notes = ("sold / sold out / refused / unknown count the answers as the target file maps "
             "them (unknown: anything else, a timeout or no answer; it may or may not have "
             "sold). Oversold: units answered sold beyond the stock. Lost updates: units "
             "answered sold that the stock read afterwards does not show. Unexplained: units "
             "gone from the stock that no sold or unknown answer took. History: every "
             "request's times and answer, with the stock it says it left and the stock read "
             "afterwards, checked for linearizability (lab/judges/linearize.py; "
             "history-run-N.jsonl beside this page). A verdict KNOWN is a violation the "
             "baseline already showed.")
    timeline = ""
    if races:
        timeline = race_report.section({"races": races, "note": (
            "200 sold, 409 sold_out, 409 refused, 503 outcome_unknown for an answer the "
            "mapping could not place; a sale's read is the stock it says it left plus its "
            "qty")}, intro=(
            "The audit's requests, one lane each on one time axis, drawn from what each "
            "answer said (the service is not traced): when each was sent and answered, the "
            "stock it read and left; two sales that left the same stock are marked lost."))
    intro = ("A foreign service driven by JMeter through its own purchase request and judged "
             "only by what its clients saw: the answers, the stock it reports, and the stock "
             "read afterwards. No access to its code or its database internals.")
    body = (h.banner(failed, len(rows), "show no violation (or only the baseline's)")
            + h.params_card(shown) + f'<div class="charts">{charts}</div>'
            + h.card("All runs", table, notes) + timeline)
    return h.page(f"audit of {p.get('target')} {when}", f"Audit — {p.get('target')}", intro,
                  body)


def race_of(target, k, answers, row, label):
    """The timeline's JSON (web/race.js) of one run, from what its answers said."""
    qty, hist = k["qty"], []
    for a in answers:
        h = {"id": a["id"], "invoke_us": a["invoke_ms"] * 1000,
             "complete_us": a["complete_ms"] * 1000, "qty": qty}
        if a["outcome"] == "sold":
            h["status"] = 200
        elif a["outcome"] == "sold_out":
            h.update(status=409, error="sold_out")
        elif a["outcome"] == "refused":
            h.update(status=409, error=f"refused ({a['word']})")
        else:
            h.update(status=503 if a["status"] else 0, error="outcome_unknown")
        if a["remaining"] is not None and a["outcome"] in ("sold", "sold_out"):
            h["remaining"] = a["remaining"]
            if a["outcome"] == "sold":
                h["trace"] = {"read": a["remaining"] + qty, "wrote": a["remaining"]}
        hist.append(h)
    race = {"strategy": f"{target.name}, {label}", "buyers": len(answers),
            "initial": k["stock"], "qty": qty, "history": hist,
            "ledger": {"oversold": row["oversold"], "lost_updates": row["lost_updates"] or 0,
                       "remaining": row["remaining"]}}
    check = {"history_linearizable": row["history_linearizable"], "history": row["history"],
             "ledger": f"the stock read afterwards: {row['remaining']}",
             "agree": "the answers as the target file maps them"}
    return {"strategy": label, "race": race, "check": check,
            "params": {"buyers": len(answers), "units": k["stock"]}}
