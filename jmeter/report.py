#!/usr/bin/env python3
"""Render a comparison's report.html: one self-contained page (inline CSS and SVG, no
script, nothing fetched from the network) with the run's parameters, bar charts of
oversold units, lost updates and throughput per row, and the full table.

    jmeter/report.py [RESULTS_DIR]     re-render RESULTS_DIR/report.html from its
                                       results.json and params.json (default:
                                       results/latest)
jmeter/compare imports render() from here.
"""

import html
import json
import os
import sys

CSS = """
:root { --ink:#1d2433; --muted:#5b6478; --line:#d9dee8; --bg:#f6f7fb; --card:#fff;
        --pass:#1f8a4c; --pass-bg:#e3f5ea; --fail:#c62828; --fail-bg:#fde7e7;
        --race:#d9480f; --thru:#3b6fd8; --unsafe:#8a5a00; --unsafe-bg:#fff3d6; }
* { box-sizing: border-box; }
body { margin: 0; padding: 28px 32px 40px; font: 14px/1.45 "DejaVu Sans", "Liberation Sans",
       Arial, sans-serif; color: var(--ink); background: var(--bg); }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 0 0 10px; }
.sub { color: var(--muted); margin: 0 0 18px; }
.verdict-banner { display: flex; align-items: center; gap: 14px; padding: 14px 18px;
       border-radius: 10px; margin-bottom: 18px; font-size: 16px; }
.verdict-banner.pass { background: var(--pass-bg); color: var(--pass); border: 1px solid #b7e2c6; }
.verdict-banner.fail { background: var(--fail-bg); color: var(--fail); border: 1px solid #f3b9b9; }
.verdict-banner > b { font-size: 22px; }
.verdict-banner ul { margin: 4px 0 0; padding-left: 18px; color: var(--ink); font-size: 13px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px;
        padding: 16px 18px; margin-bottom: 18px; }
.params { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr));
          gap: 6px 18px; margin: 0; }
.params div { display: flex; flex-direction: column; }
.params dt { color: var(--muted); font-size: 12px; }
.params dd { margin: 0; font-weight: 600; word-break: break-word; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 18px; }
.charts .card { margin-bottom: 0; }
.chart { display: block; width: 100%; max-width: 560px; height: auto; }
.chart text { font-family: inherit; font-size: 12px; fill: var(--ink); }
.chart .value { font-weight: 700; }
.chart .zero { fill: var(--muted); }
.chart .axis { stroke: var(--line); }
.note { color: var(--muted); font-size: 12px; margin: 8px 0 0; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 6px 7px; border-bottom: 1px solid var(--line); text-align: right;
         white-space: nowrap; }
th { background: #eef1f7; font-weight: 600; white-space: normal; vertical-align: bottom; }
th.l, td.l { text-align: left; }
td.label { white-space: normal; text-align: left; min-width: 210px; max-width: 300px; }
td.label .reason { color: var(--muted); font-size: 12px; line-height: 1.3; margin-top: 2px; }
td.label .strategy { color: var(--muted); font-weight: 400; }
tr.fail td { background: #fff6f6; }
td.bad { color: var(--fail); font-weight: 700; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 700;
         font-size: 12px; }
.badge.pass { background: var(--pass-bg); color: var(--pass); }
.badge.fail { background: var(--fail-bg); color: var(--fail); }
.badge.safe { background: #e8eefc; color: #2a4fa8; }
.badge.unsafe { background: var(--unsafe-bg); color: var(--unsafe); }
.table-wrap { overflow-x: auto; }
.legend span { display: inline-block; margin-right: 16px; }
.sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 5px;
      vertical-align: -1px; }
"""


def esc(v):
    return html.escape("" if v is None else str(v), quote=True)


def fmt(v):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def bar_chart(chart_id, title, rows, field, color, unit="", zero_note=""):
    """Horizontal bar chart, one bar per row, as inline SVG."""
    label_w, bar_w, value_w, bar_h, gap, top = 150, 180, 62, 20, 8, 6
    width = label_w + bar_w + value_w
    height = top * 2 + len(rows) * (bar_h + gap)
    values = [r.get(field) if isinstance(r.get(field), (int, float)) else 0 for r in rows]
    vmax = max(values) if values and max(values) > 0 else 1
    out = [f'<svg class="chart" id="{esc(chart_id)}" role="img" aria-label="{esc(title)}" '
           f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<title>{esc(title)}</title>',
           f'<line class="axis" x1="{label_w}" y1="0" x2="{label_w}" y2="{height}" />']
    for i, (r, v) in enumerate(zip(rows, values)):
        y = top + i * (bar_h + gap)
        w = 0 if v <= 0 else max(2.0, bar_w * v / vmax)
        fill = color(r, v) if callable(color) else color
        label = r.get("label", "")
        short = label if len(label) <= 22 else label[:21] + "…"
        out.append(f'<g class="bar" data-label="{esc(label)}" data-value="{esc(v)}">'
                   f'<text x="{label_w - 8}" y="{y + bar_h * 0.72:.1f}" text-anchor="end">'
                   f'{esc(short)}</text>')
        if w:
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" rx="3" '
                       f'fill="{fill}" />')
        raw = r.get(field)
        text = "–" if raw is None else fmt(v) + unit
        cls = "value" if v > 0 else "value zero"
        out.append(f'<text class="{cls}" x="{label_w + w + 6:.1f}" y="{y + bar_h * 0.72:.1f}">'
                   f'{esc(text)}</text></g>')
    out.append("</svg>")
    note = ""
    if zero_note and not any(v > 0 for v in values):
        note = f'<p class="note">{esc(zero_note)}</p>'
    return (f'<div class="card"><h2>{esc(title)}</h2>' + "".join(out) + note + "</div>")


COLUMNS = [  # heading, field, left-aligned (threads and instances: in the Run card)
    ("row, and why", "label", True),
    ("claim", "expected_safe", True), ("verdict", "verdict", True),
    ("stock", "stock", False), ("requests", "requests", False),
    ("sold", "sold", False), ("sold out", "sold_out", False), ("busy", "busy", False),
    ("errors", "errors", False), ("oversold", "oversold", False),
    ("lost updates", "lost_updates", False), ("remaining", "remaining", False),
    ("req/s", "throughput_rps", False), ("× nolock", "throughput_vs_nolock", False),
    ("p50 ms", "p50_ms", False),
    ("p95 ms", "p95_ms", False), ("p99 ms", "p99_ms", False),
]


def table(rows):
    head = "".join(f'<th class="{"l" if left else ""}">{esc(h)}</th>' for h, _, left in COLUMNS)
    body = []
    for r in rows:
        tds = []
        for _, f, left in COLUMNS:
            v = r.get(f)
            cls = ["l"] if left else []
            if f == "verdict":
                inner = f'<span class="badge {esc(v)}">{esc(str(v).upper())}</span>'
            elif f == "expected_safe":
                inner = ('<span class="badge safe">safe</span>' if v else
                         '<span class="badge unsafe">unsafe</span>')
            elif f == "label":
                cls = ["label"]
                bits = [r.get("strategy") if r.get("strategy") != v else None, r.get("store")]
                bits += [f"{k} {r[k]}" for k in ("hold_ms", "ttl_ms", "pause_ms") if r.get(k)]
                extra = " <span class=\"strategy\">· " + esc(" · ".join(b for b in bits if b)) + "</span>"
                errs = (f'<br>errors: {esc(r["error_detail"])}' if r.get("error_detail") else "")
                inner = (f'<b>{esc(v)}</b>{extra}<div class="reason">{esc(r.get("reason"))}'
                         f'{errs}</div>')
            else:
                inner = esc(fmt(v))
                if f in ("oversold", "lost_updates", "errors") and isinstance(v, int) and v > 0:
                    cls.append("bad")
                if f == "remaining" and isinstance(v, int) and v < 0:
                    cls.append("bad")
            tds.append(f'<td class="{" ".join(cls)}">{inner}</td>')
        body.append(f'<tr class="row {esc(r.get("verdict"))}" data-label="{esc(r.get("label"))}" '
                    f'data-verdict="{esc(r.get("verdict"))}">' + "".join(tds) + "</tr>")
    return (f'<div class="table-wrap"><table id="results"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def render(rows, params):
    failed = [r for r in rows if r.get("verdict") != "pass"]
    ok = bool(rows) and not failed
    title = "stockd — which strategies oversell, and what each costs"
    when = str(params.get("started") or "").replace("T", " ")

    if ok:
        banner = (f'<div class="verdict-banner pass" id="gate"><b>PASS</b><div>all {len(rows)} rows '
                  f'behave as their strategy claims</div></div>')
    else:
        items = "".join(f"<li><b>{esc(r.get('label'))}</b>: {esc(r.get('reason'))}</li>"
                        for r in failed) or "<li>no rows</li>"
        banner = (f'<div class="verdict-banner fail" id="gate"><b>FAIL</b><div>{len(failed)} of '
                  f'{len(rows)} rows contradict their claim<ul>{items}</ul></div></div>')

    p = params
    shown = [
        ("started", when), ("target", f"{p.get('host')}:{p.get('port')}"),
        ("instances", p.get("instances")), ("claim judged", p.get("claim")),
        ("threads × loops", f"{p.get('threads')} × {p.get('loops')}"),
        ("ramp-up", f"{p.get('rampup')} s"), ("stock at reset", fmt(p.get("stock"))),
        ("qty per request", p.get("qty")), ("hold_ms", p.get("hold_ms")),
        ("exposed hold / ttl ms", f"{p.get('exposed_hold_ms')} / {p.get('exposed_ttl_ms', '–')}"),
        ("product", p.get("product")),
        ("JMeter", p.get("jmeter") or "–"),
    ]
    params_html = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in shown)

    def race_color(r, v):
        # a race that a safe row should never have is red; the expected one of an
        # unsafe row is orange
        return "#c62828" if r.get("expected_safe") else "#f08c00"

    charts = (
        bar_chart("chart-oversold", "Oversold units (sold − stock)", rows, "oversold", race_color,
                  zero_note="Nothing oversold in any row.")
        + bar_chart("chart-lost", "Lost updates (sold − stock taken)", rows, "lost_updates",
                    race_color, zero_note="No lost updates in any row.")
        + bar_chart("chart-throughput", "Throughput (requests per second)", rows,
                    "throughput_rps", "#3b6fd8")
    )
    legend = ('<p class="note legend"><span><i class="sw" style="background:#c62828"></i>'
              'race in a row that claims to be safe (a bug)</span><span><i class="sw" '
              'style="background:#f08c00"></i>race in an unsafe row (expected: what it '
              'demonstrates)</span><span><i class="sw" style="background:#3b6fd8"></i>'
              'throughput (reported, never gated)</span></p>')

    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stockd comparison {esc(when)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{esc(title)}</h1>
<p class="sub">Same JMeter load on every strategy: reset the stock, sell through the
strategy's endpoint, then read the store's ledger. Oversold = units sold that never existed;
lost updates = sales whose deduction vanished. Unsafe strategies also run "exposed": with
<code>hold_ms</code> inside the critical section (and a lock <code>ttl_ms</code> shorter than
it), so that their race shows every time.</p>
{banner}
<div class="card"><h2>Run</h2><dl class="params">{params_html}</dl></div>
<div class="charts">{charts}</div>
{legend}
<div class="card"><h2>All rows</h2>{table(rows)}
<p class="note">sold / sold out / busy / errors count responses (200, 409 sold_out, 409 busy,
anything else); oversold, lost updates and remaining come from the store's accounting;
latency percentiles from JMeter's results. Raw JMeter results: the .jtl files beside this
page.</p></div>
</body>
</html>
"""


def main(argv):
    here = os.path.dirname(os.path.realpath(__file__))
    d = argv[0] if argv else os.path.join(os.path.dirname(here), "results", "latest")
    with open(os.path.join(d, "results.json")) as f:
        rows = json.load(f)
    try:
        with open(os.path.join(d, "params.json")) as f:
            params = json.load(f)
    except OSError:
        params = {}
    out = os.path.join(d, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(render(rows, params))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
