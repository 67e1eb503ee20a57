"""The bench's outputs: its row fields, the text table, and bench.html (throughput
against concurrency per strategy, per raw limit and per route of the Node.js peer, p99
latency against concurrency, p50/p95/p99 at the highest concurrency, and the full
table)."""

from ..judges import history
from . import html as h
from .html import esc, fmt

ROW_FIELDS = [
    "label", "name", "kind", "store", "claim", "concurrency", "duration_s", "requests",
    "throughput_rps", "p50_ms", "p95_ms", "p99_ms", "max_ms", "sold", "sold_out", "busy",
    "outcome_unknown", "errors", "error_detail", "limit", "limit_rps", "x_limit",
    "store_sold", "oversold", "lost_updates", "remaining", "mean_batch", "pipeline",
    "cpu_us", "limit_cpu_us", "instances_seen", "durability", "fsyncs", "sales_per_fsync",
    "row_lock_waits", "row_lock_ms",
    "steal_pct", "attempts", "pair_ratios", "history", "history_linearizable", "history_ops",
    "history_how", "history_s", "history_rps", "history_oversold", "history_lost", "verdict",
    "reason",
]

TABLE = [  # (heading, field, align)
    ("name", "name", "<"), ("store", "store", "<"), ("claim", "claim", "<"),
    ("conc", "concurrency", ">"), ("req/s", "throughput_rps", ">"),
    ("limit", "limit", "<"), ("x limit", "x_limit", ">"),
    ("p50 ms", "p50_ms", ">"), ("p95 ms", "p95_ms", ">"), ("p99 ms", "p99_ms", ">"),
    ("max ms", "max_ms", ">"), ("sold", "sold", ">"), ("sold_out", "sold_out", ">"),
    ("busy", "busy", ">"), ("unknown", "outcome_unknown", ">"), ("err", "errors", ">"),
    ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"), ("batch", "mean_batch", ">"),
    ("steal %", "steal_pct", ">"), ("history", history.short, "<"), ("verdict", "verdict", "<"),
]
# The durable rows and the hot row, printed again with their flushes.
FLUSH_KINDS = ("disk", "durable", "hot")
FLUSH_TABLE = [
    ("name", "name", "<"), ("conc", "concurrency", ">"), ("req/s", "throughput_rps", ">"),
    ("p99 ms", "p99_ms", ">"), ("sold", "sold", ">"), ("batch", "mean_batch", ">"),
    ("fsyncs", "fsyncs", ">"), ("sales/fsync", "sales_per_fsync", ">"),
    ("lock waits", "row_lock_waits", ">"), ("lock ms", "row_lock_ms", ">"),
    ("steal %", "steal_pct", ">"), ("verdict", "verdict", "<"),
]

COLUMNS = [
    ("row, and why", "label", True), ("claim", "claim", True), ("verdict", "verdict", True),
    ("req/s", "throughput_rps", False), ("limit", "limit", True), ("× limit", "x_limit", False),
    ("p50 ms", "p50_ms", False), ("p95 ms", "p95_ms", False), ("p99 ms", "p99_ms", False),
    ("max ms", "max_ms", False), ("sold", "sold", False), ("sold out", "sold_out", False),
    ("busy", "busy", False), ("outcome unknown", "outcome_unknown", False),
    ("errors", "errors", False), ("oversold", "oversold", False),
    ("lost updates", "lost_updates", False), ("sales per batch", "mean_batch", False),
    ("server CPU µs per request", "cpu_us", False), ("its limit's", "limit_cpu_us", False),
    ("fsyncs", "fsyncs", False), ("sales per fsync", "sales_per_fsync", False),
    ("row lock waits", "row_lock_waits", False),
    ("host steal %", "steal_pct", False), ("attempts", "attempts", False),
    ("history (its own pass)", "history", True), ("history requests", "history_ops", False),
]
PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")


def charted(rows):
    """The rows the charts draw: not the pair rows, the /metrics cost rows, the
    durable rows nor the hot row (runs that repeat a charted one with other stores'
    settings or at other concurrencies: the table shows them)."""
    return [r for r in rows if r["kind"] not in ("pair", "scrape") + FLUSH_KINDS]


def series(rows):
    """The distinct names of the charted rows in order of appearance, raw limits first."""
    names = []
    for r in sorted(charted(rows), key=lambda r: r["kind"] != "raw"):
        if r["name"] not in names:
            names.append(r["name"])
    return names


def concurrencies(rows):
    return sorted({r["concurrency"] for r in charted(rows)})


def expectations(rows):
    n = len(series(rows))
    return {"table": "bench", "rows": [r["label"] for r in rows],
            "charts": {"chart-throughput": ("series", n), "chart-p99": ("series", n),
                       "chart-latency": ("bar", n)}}


def cell_html(r, f):
    v = r.get(f)
    if f == "verdict":
        return [], h.badge(v, str(v).upper())
    if f == "claim":
        return [], h.badge(v or "info", v or "limit")
    if f == "label":
        return h.label_cell(r, [r.get("store"), f"{r.get('requests') or 0:,} requests"])
    return ["bad"] if h.race_shown(f, v) else [], esc(fmt(v))


def render(rows, params):
    failed = [(r["label"], r["reason"]) for r in rows if r.get("verdict") != "pass"]
    names, xs = series(rows), concurrencies(rows)
    by = {(r["name"], r["concurrency"]): r for r in charted(rows)}
    colours = {n: h.palette(i, len(names)) for i, n in enumerate(names)}
    raw = {r["name"] for r in rows if r["kind"] == "raw"}

    def lines(field):
        return [(n, {c: by[(n, c)].get(field) for c in xs if (n, c) in by}, colours[n], n in raw)
                for n in names]

    top = xs[-1] if xs else None
    groups = [(n, {p: by[(n, top)].get(p) for p in PERCENTILES}) for n in names if (n, top) in by]
    lines_html = (h.line_chart("chart-throughput", "Throughput against concurrency (req/s, log "
                               "scale)", xs, lines("throughput_rps"), "dashed: the raw limits "
                               "(nginx static file, Redis unpipelined and pipelined, MariaDB); "
                               "peer: the Node.js peer", log=True)
                  + h.line_chart("chart-p99", "p99 latency against concurrency (ms, log scale)",
                                 xs, lines("p99_ms"), log=True))
    bars_html = h.grouped_bar_chart("chart-latency", f"Latency percentiles at concurrency {top} "
                                    "(ms)", groups, PERCENTILES, ("#9db7ee", "#3b6fd8", "#1d3f8a"))
    p = params
    shown = [("started", str(p.get("started") or "").replace("T", " ")),
             ("target", f"{p.get('host')}:{p.get('port')}"),
             ("instances", ", ".join(p.get("instance_names") or [])),
             ("claim judged", p.get("claim")), ("concurrencies", ", ".join(map(str, xs))),
             ("duration per row", f"{p.get('duration_s')} s"),
             ("warm-up per strategy", f"{p.get('warmup_s')} s"),
             ("stock at reset", fmt(p.get("stock"))), ("product", p.get("product")),
             ("stockd workers", (p.get("settings") or {}).get("workers")),
             ("elapsed", f"{p.get('elapsed_s')} s"), ("driver", p.get("driver")),
             ("peer", f"{p.get('peer')}: {p.get('peer_stack')}")]
    table = h.table("bench", COLUMNS, rows, cell_html,
                    lambda r: (r.get("verdict") or "", r["label"]))
    notes = ("Each strategy row: wrk with keep-alive connections for the duration, against "
             "a stock that never sells out; the ledger is read after the in-flight requests "
             "finished. × limit: the row's throughput over its raw limit, the best of that "
             "limit's rows in this run: http (nginx serving GET /strategies' bytes) for the "
             "no-backend endpoint, redis (the lua strategy's script by EVALSHA) for "
             "redis-store strategies, mariadb (the sql strategy's transaction) for mysql-store "
             "ones; redis-pipelined is the same script sent as many per write as the lua rows "
             "sent (the pipeline field in bench.json). The peer rows: the same sales and GET "
             "/strategies served by Node.js (fastify, ioredis, mysql2; bench/peer/), judged by "
             "the same accounting. A pair row: the median of alternating measures of a subject "
             "and its limit (or the peer), seconds apart; against the peer it also reads the CPU "
             "time the two servers spent per request (user and system, from /proc), which a "
             "busy neighbour moves much less than a rate. History: each strategy row's own pass "
             "at the same concurrency, every request's send and answer times and answer "
             "recorded (bench/history.lua) and judged linearizable or not by the checker; "
             "the row fails when it disagrees with that pass's ledger. Everything ran on one "
             "machine, load generator included.")
    intro = ("What each strategy costs: throughput and latency at several concurrencies, next "
             "to what the HTTP path, Redis and MariaDB can do by themselves with the same work, "
             "and to a Node.js peer doing the same sales. "
             "A strategy that claims safety must still oversell nothing and lose nothing.")
    body = (h.banner(failed, len(rows), "pass") + h.params_card(shown)
            + f'<div class="charts wide">{lines_html}</div>'
            + f'<div class="charts single">{bars_html}</div>'
            + h.card("All rows", table, notes))
    return h.page(f"stockd bench {shown[0][1]}", "stockd — what each strategy costs", intro, body)
