"""The comparison's outputs: its row fields, the text table, and report.html (the
run's parameters, bar charts of oversold units, lost updates and throughput against
the driver's ceiling, and the full table)."""

from ..judges import history
from . import html as h, race_report
from .html import esc, fmt

ROW_FIELDS = [
    "label", "strategy", "kind", "store", "instances", "threads", "loops", "requests",
    "qty", "stock", "hold_ms", "ttl_ms", "pause_ms",
    "sold", "sold_out", "busy", "outcome_unknown", "errors", "store_sold", "oversold",
    "lost_updates", "remaining", "throughput_rps", "throughput_vs_ceiling", "driver_bound",
    "p50_ms", "p95_ms", "p99_ms", "max_ms", "duration_s", "peak_in_flight", "lock_wait_p99_ms",
    "stockd_rss_kib",
    "stockd_rss_by_instance", "instances_seen", "expected_safe", "verdict", "reason",
    "error_detail", "jtl", "history", "history_linearizable", "history_ops",
    "history_searched", "history_how", "history_s",
]
CHARTS = ("chart-oversold", "chart-lost", "chart-throughput")


def params_text(r):
    shown = [f"{k[:-3]} {r[k]}" for k in ("hold_ms", "ttl_ms", "pause_ms") if r.get(k)]
    return ",".join(shown) or "-"


def claim_text(r):
    if r.get("kind") == "calibration":
        return "ceiling"
    return "safe" if r.get("expected_safe") else "unsafe"


TABLE = [  # (heading, field, align)
    ("row", "label", "<"), ("params", params_text, "<"), ("store", "store", "<"),
    ("inst", "instances", ">"), ("thr", "threads", ">"), ("stock", "stock", ">"),
    ("req", "requests", ">"), ("sold", "sold", ">"), ("sold_out", "sold_out", ">"),
    ("busy", "busy", ">"), ("unknown", "outcome_unknown", ">"), ("err", "errors", ">"),
    ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"), ("remain", "remaining", ">"),
    ("req/s", "throughput_rps", ">"), ("x ceil", "throughput_vs_ceiling", ">"),
    ("driver", lambda r: "bound" if r.get("driver_bound") else None, "<"),
    ("p50", "p50_ms", ">"), ("p95", "p95_ms", ">"), ("p99", "p99_ms", ">"),
    ("inflight", "peak_in_flight", ">"), ("lock p99", "lock_wait_p99_ms", ">"),
    ("claim", claim_text, "<"), ("history", history.short, "<"), ("verdict", "verdict", "<"),
]

COLUMNS = [  # heading, field, left-aligned (threads and instances: in the Run card)
    ("row, and why", "label", True), ("claim", "expected_safe", True),
    ("verdict", "verdict", True), ("history (second witness)", "history", True),
    ("stock", "stock", False), ("requests", "requests", False),
    ("sold", "sold", False), ("sold out", "sold_out", False), ("busy", "busy", False),
    ("outcome unknown", "outcome_unknown", False), ("errors", "errors", False),
    ("oversold", "oversold", False), ("lost updates", "lost_updates", False),
    ("remaining", "remaining", False), ("req/s", "throughput_rps", False),
    ("× ceiling", "throughput_vs_ceiling", False), ("driver", "driver_bound", True),
    ("p50 ms", "p50_ms", False), ("p95 ms", "p95_ms", False), ("p99 ms", "p99_ms", False),
    ("in flight, peak", "peak_in_flight", False), ("lock wait p99 ms", "lock_wait_p99_ms", False),
]


def cell_html(r, f):
    v = r.get(f)
    if f == "verdict":
        return [], h.badge(v, str(v).upper())
    if f == "expected_safe":
        kind = claim_text(r)
        return [], h.badge({"ceiling": "info"}.get(kind, kind), kind)
    if f == "driver_bound":
        return [], h.badge("bound", "driver-bound") if v else ""
    if f == "history":
        said = r.get("history_linearizable")
        if r.get("history_ops") is None:
            return [], esc(r.get("history") or "–")
        cls = ["bad"] if said is False else []
        shown = "history: linearizable" if said else f"history: {r.get('history')}"
        return cls, esc(f"{shown} ({r['history_ops']} ops, {r.get('history_s')} s)")
    if f == "label":
        bits = [r.get("strategy") if r.get("strategy") != v else None, r.get("store")]
        bits += [f"{k} {r[k]}" for k in ("hold_ms", "ttl_ms", "pause_ms") if r.get(k)]
        return h.label_cell(r, bits)
    bad = h.race_shown(f, v) or (f == "remaining" and isinstance(v, int) and v < 0)
    return ["bad"] if bad else [], esc(fmt(v))


def expectations(rows):
    """What lab.reports.browser must find: table#results rows, and bars per chart."""
    return {"table": "results", "rows": [r.get("label") for r in rows],
            "charts": {c: ("bar", len(rows)) for c in CHARTS}}


def memory_figure(p):
    """The run card's stockd memory: the peak resident size over the run."""
    kib = p.get("stockd_peak_rss_kib")
    return f"{kib / 1024:.1f} MiB peak" if kib else "–"


def memory_origin(p):
    """Where memory_figure() came from, for the legend."""
    if not p.get("stockd_peak_rss_kib"):
        return "not measured (no /proc of a stockd this run started, no /metrics answer)"
    if p.get("stockd_memory_source") == "/proc":
        return ("the peak resident size (VmHWM in /proc/PID/status) of the stockd this "
                "run started")
    return ("the largest total, over the rows, of process_resident_memory_bytes from "
            "each instance's GET /metrics, read after every row")


def ceiling_figure(p):
    """The run card's driver ceiling: its throughput, what the calibration requested
    and each reply's size, and whether it held."""
    ceiling = p.get("driver_ceiling_rps")
    if not ceiling:
        return "–"
    said = f"{fmt(ceiling)} req/s"
    if p.get("driver_ceiling_request"):
        samples = " and ".join(fmt(x) for x in p.get("driver_ceiling_samples_rps") or [])
        said += (f" ({p['driver_ceiling_request']}, "
                 f"{fmt(p.get('driver_ceiling_reply_bytes'))} bytes a reply; the better of "
                 f"{samples})")
    beaten = p.get("driver_ceiling_beaten_by")
    if beaten:
        said += (f"; suspect: beaten by more than the noise by {len(beaten)} row(s), so no "
                 "row is called driver-bound")
    return said


def render(rows, params, races=None):
    failed = [(r.get("label"), r.get("reason")) for r in rows if r.get("verdict") != "pass"]
    when = str(params.get("started") or "").replace("T", " ")
    p = params
    ceiling = p.get("driver_ceiling_rps")
    shown = [
        ("started", when), ("target", f"{p.get('host')}:{p.get('port')}"),
        ("instances", p.get("instances")),
        ("instance names", ", ".join(p.get("instance_names") or [])),
        ("claim judged", p.get("claim")),
        ("threads × loops", f"{p.get('threads')} × {p.get('loops')}"),
        ("ramp-up", f"{p.get('rampup')} s"), ("stock at reset", fmt(p.get("stock"))),
        ("qty per request", p.get("qty")), ("hold_ms", p.get("hold_ms")),
        ("exposed hold / ttl / pause ms", f"{p.get('exposed_hold_ms')} / "
         f"{p.get('exposed_ttl_ms')} / {p.get('exposed_pause_ms')}"),
        ("driver ceiling", ceiling_figure(p)),
        ("product", p.get("product")), ("JMeter", p.get("jmeter") or "–"),
        ("stockd memory", memory_figure(p)),
    ]

    def race(r):
        # a race in a row that claims safety is red (a bug); the expected one orange
        return "#c62828" if r.get("expected_safe") else "#f08c00"

    def thru(r):
        return "#b08900" if r.get("driver_bound") else "#3b6fd8"

    charts = (
        h.bar_chart("chart-oversold", "Oversold units (sold − stock)",
                    [(r["label"], r.get("oversold"), race(r)) for r in rows],
                    zero_note="Nothing oversold in any row.")
        + h.bar_chart("chart-lost", "Lost updates (sold − stock taken)",
                      [(r["label"], r.get("lost_updates"), race(r)) for r in rows],
                      zero_note="No lost updates in any row.")
        + h.bar_chart("chart-throughput", "Throughput (requests per second)",
                      [(r["label"], r.get("throughput_rps"), thru(r)) for r in rows],
                      ceiling=ceiling))
    legend = ('<p class="note legend"><span><i class="sw" style="background:#c62828"></i>'
              'race in a row that claims to be safe (a bug)</span><span><i class="sw" '
              'style="background:#f08c00"></i>race in an unsafe row (expected: what it '
              'demonstrates)</span><span><i class="sw" style="background:#3b6fd8"></i>'
              'throughput (reported, never gated)</span><span><i class="sw" '
              'style="background:#b08900"></i>driver-bound: within 20% of the driver\'s '
              'ceiling (dashed line), so it measured JMeter more than the strategy</span>'
              f'<span>stockd memory (run card): {esc(memory_origin(p))}</span></p>')
    table = h.table("results", COLUMNS, rows, cell_html,
                    lambda r: (r.get("verdict") or "", r.get("label")))
    notes = ("sold / sold out / busy / outcome unknown / errors count answers (200, 409 sold_out, "
             "409 busy, 503 outcome_unknown: the sale may have happened, anything else); "
             "oversold, lost updates and remaining come from the store's accounting; latency "
             "percentiles from JMeter's results. The calibration rows, first and last, run the "
             "same plan against GET /ping, which touches no backend and answers a few dozen "
             "bytes as a sale does: the better one's throughput is what the driver can do on "
             "this machine in this run; a row that beats it by more than 10% makes it suspect, and then no row is "
             "called driver-bound. Raw JMeter results: the .jtl files "
             "beside this page. History: the second witness, independent of the ledger: "
             "each row's JMeter requests (sent, answered, the stock the reply left) and the "
             "store's counter read after them, checked for linearizability (lab/judges/linearize.py; "
             "history-&lt;row&gt;.jsonl beside this page); a row where it and the ledger "
             "disagree fails.")
    intro = ("Same JMeter load on every strategy: reset the stock, sell through the strategy's "
             "endpoint, then read the store's ledger. Oversold = units sold that never existed; "
             "lost updates = sales whose deduction vanished. Strategies that do not claim safety "
             "also run \"exposed\", with the request parameters their <code>exposed_by</code> "
             "names; strategies with a lease run with a <code>ttl_ms</code> shorter than a busy "
             "or a frozen holder. What each row must show comes from <code>GET "
             "/strategies</code>.")
    body = (h.banner(failed, len(rows), "behave as their strategy claims")
            + h.params_card(shown) + f'<div class="charts">{charts}</div>' + legend
            + h.card("All rows", table, notes) + race_report.section(races))
    return h.page(f"stockd comparison {when}",
                  "stockd — which strategies oversell, and what each costs", intro, body)
