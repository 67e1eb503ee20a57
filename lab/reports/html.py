"""The pieces of a self-contained report page: inline CSS, no script, nothing fetched
from the network, charts as inline SVG. Charts and tables carry the ids and classes
that lab.reports.browser checks in the rendered DOM: svg#<id> with one g.bar per bar or one
g.series per line, table#<id> with one tr.row per row."""

import html
import math

from . import tables

CSS = """
:root { --ink:#1d2433; --muted:#5b6478; --line:#d9dee8; --bg:#f6f7fb; --card:#fff;
        --pass:#1f8a4c; --pass-bg:#e3f5ea; --fail:#c62828; --fail-bg:#fde7e7;
        --unsafe:#8a5a00; --unsafe-bg:#fff3d6; }
* { box-sizing: border-box; }
body { margin: 0; padding: 28px 32px 40px; font: 14px/1.45 "DejaVu Sans", "Liberation Sans",
       Arial, sans-serif; color: var(--ink); background: var(--bg); }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 0 0 10px; }
.sub { color: var(--muted); margin: 0 0 18px; max-width: 1100px; }
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
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(340px, 1fr)); gap: 18px;
          margin-bottom: 18px; }
.charts.wide { grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); }
.charts.single { grid-template-columns: minmax(340px, 560px); }
.charts .card { margin-bottom: 0; }
.chart { display: block; width: 100%; max-width: 720px; height: auto; }
.chart text { font-family: inherit; font-size: 12px; fill: var(--ink); }
.chart .value { font-weight: 700; }
.chart .zero, .chart .tick { fill: var(--muted); }
.chart .axis { stroke: var(--line); }
.chart .ceiling { stroke: #8a5a00; stroke-dasharray: 4 3; }
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
.badge.unsafe, .badge.bound { background: var(--unsafe-bg); color: var(--unsafe); }
.badge.info { background: #eef1f7; color: var(--muted); }
.table-wrap { overflow-x: auto; }
.legend span { display: inline-block; margin-right: 16px; }
.sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 5px;
      vertical-align: -1px; }
"""


def esc(v):
    return html.escape("" if v is None else str(v), quote=True)


def fmt(v):
    return tables.cell(v, grouped=True, missing="–")


def palette(i, n):
    """The i-th of n distinct colours."""
    return f"hsl({int(360 * i / max(1, n)) % 360}, 62%, {42 if i % 2 else 52}%)"


def page(title, heading, intro, body):
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{esc(heading)}</h1>
<p class="sub">{intro}</p>
{body}
</body>
</html>
"""


def card(title, inner, note=""):
    note = f'<p class="note">{note}</p>' if note else ""
    return f'<div class="card"><h2>{esc(title)}</h2>{inner}{note}</div>'


def params_card(pairs):
    inner = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in pairs)
    return card("Run", f'<dl class="params">{inner}</dl>')


def banner(failed, total, what):
    """The pass/fail banner (#gate). failed: [(label, reason)]."""
    if total and not failed:
        return (f'<div class="verdict-banner pass" id="gate"><b>PASS</b><div>all {total} rows '
                f'{esc(what)}</div></div>')
    items = "".join(f"<li><b>{esc(label)}</b>: {esc(reason)}</li>"
                    for label, reason in failed) or "<li>no rows</li>"
    return (f'<div class="verdict-banner fail" id="gate"><b>FAIL</b><div>{len(failed)} of '
            f'{total} rows fail<ul>{items}</ul></div></div>')


def _svg_open(chart_id, title, width, height):
    return (f'<svg class="chart" id="{esc(chart_id)}" role="img" aria-label="{esc(title)}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>')


def bar_chart(chart_id, title, bars, zero_note="", ceiling=None):
    """Horizontal bars: [(label, value or None, colour)], one g.bar each; `ceiling`
    (a value) draws a dashed line across."""
    label_w, bar_w, value_w, bar_h, gap, top = 170, 190, 72, 20, 8, 6
    width = label_w + bar_w + value_w
    height = top * 2 + len(bars) * (bar_h + gap)
    values = [v if isinstance(v, (int, float)) else 0 for _, v, _ in bars]
    vmax = max(values + [ceiling or 0]) or 1
    out = [_svg_open(chart_id, title, width, height),
           f'<line class="axis" x1="{label_w}" y1="0" x2="{label_w}" y2="{height}" />']
    for i, ((label, raw, colour), v) in enumerate(zip(bars, values)):
        y = top + i * (bar_h + gap)
        w = 0 if v <= 0 else max(2.0, bar_w * v / vmax)
        short = label if len(label) <= 24 else label[:23] + "…"
        out.append(f'<g class="bar" data-label="{esc(label)}" data-value="{esc(v)}">'
                   f'<text x="{label_w - 8}" y="{y + bar_h * 0.72:.1f}" text-anchor="end">'
                   f'{esc(short)}</text>')
        if w:
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" rx="3" '
                       f'fill="{colour}" />')
        out.append(f'<text class="{"value" if v > 0 else "value zero"}" x="{label_w + w + 6:.1f}" '
                   f'y="{y + bar_h * 0.72:.1f}">{esc(fmt(raw))}</text></g>')
    if ceiling:
        x = label_w + bar_w * ceiling / vmax
        out.append(f'<line class="ceiling" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" />')
    out.append("</svg>")
    note = esc(zero_note) if zero_note and not any(v > 0 for v in values) else ""
    return card(title, "".join(out), note)


def line_chart(chart_id, title, xs, series, note="", log=False):
    """Lines over the categories `xs` (equally spaced): series = [(name, {x: value},
    colour, dashed)], one g.series each with one circle per point; a legend below.
    log: a logarithmic value axis (ticks at powers of ten), for values that span
    several orders of magnitude."""
    left, right, top, bottom, plot_w, plot_h = 64, 16, 12, 34, 560, 280
    width, height = left + plot_w + right, top + plot_h + bottom
    values = [v for _, pts, _, _ in series for v in pts.values() if v and v > 0]
    if log and values:
        low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
        high = max(high, low + 1)
        ticks = [10.0 ** e for e in range(low, high + 1)]

        def frac(v):
            return (math.log10(v) - low) / (high - low) if v > 0 else 0.0
    else:
        vmax = max(values + [0]) or 1
        ticks = [vmax * k / 4 for k in range(5)]

        def frac(v):
            return v / vmax
    step = plot_w / max(1, len(xs) - 1)

    def at(x, v):
        return (left + (xs.index(x) * step if len(xs) > 1 else plot_w / 2),
                top + plot_h * (1 - frac(v)))

    out = [_svg_open(chart_id, title, width, height)]
    for v in ticks:
        y = top + plot_h * (1 - frac(v))
        out.append(f'<line class="axis" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" '
                   f'y2="{y:.1f}" /><text class="tick" x="{left - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{esc(fmt(float(v)))}</text>')
    for x in xs:
        px, _ = at(x, ticks[0])
        out.append(f'<text class="tick" x="{px:.1f}" y="{top + plot_h + 18}" '
                   f'text-anchor="middle">{esc(x)}</text>')
    legend = []
    for name, pts, colour, dashed in series:
        coords = [at(x, pts[x]) for x in xs if pts.get(x)]
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        dots = "".join(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}" />'
                       for x, y in coords)
        out.append(f'<g class="series" data-name="{esc(name)}"><polyline points="{path}" '
                   f'fill="none" stroke="{colour}" stroke-width="2"{dash} />{dots}</g>')
        legend.append(f'<span><i class="sw" style="background:{colour}"></i>{esc(name)}</span>')
    out.append("</svg>")
    legend_html = f'<p class="note legend">{"".join(legend)}</p>'
    return card(title, "".join(out) + legend_html, esc(note))


def table(table_id, columns, rows, cell_html, row_attrs):
    """columns: [(heading, key, left-aligned)]; cell_html(row, key) -> (classes, inner);
    row_attrs(row) -> (classes, label)."""
    head = "".join(f'<th class="{"l" if left else ""}">{esc(h)}</th>' for h, _, left in columns)
    body = []
    for r in rows:
        tds = []
        for _, key, left in columns:
            classes, inner = cell_html(r, key)
            classes = (["l"] if left else []) + classes
            tds.append(f'<td class="{" ".join(classes)}">{inner}</td>')
        classes, label = row_attrs(r)
        body.append(f'<tr class="row {esc(classes)}" data-label="{esc(label)}" '
                    f'data-verdict="{esc(r.get("verdict"))}">' + "".join(tds) + "</tr>")
    return (f'<div class="table-wrap"><table id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def badge(kind, text):
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


def label_cell(r, bits):
    """A result row's label cell: (classes, html): the label, the `bits` that qualify
    it, then why it passed or failed and its errors."""
    errs = f'<br>errors: {esc(r["error_detail"])}' if r.get("error_detail") else ""
    return ["label"], (f'<b>{esc(r.get("label"))}</b> <span class="strategy">· '
                       f'{esc(" · ".join(b for b in bits if b))}</span>'
                       f'<div class="reason">{esc(r.get("reason"))}{errs}</div>')


def race_shown(field, v):
    """A count that should be 0 in a clean row (oversold, lost updates, errors) and
    is not: its cell is marked bad."""
    return field in ("oversold", "lost_updates", "errors") and isinstance(v, int) and v > 0


def grouped_bar_chart(chart_id, title, groups, keys, colours):
    """Horizontal bar groups: [(label, {key: value})], one g.bar per group holding one
    bar per key (e.g. p50, p95, p99), on a common scale; a legend of the keys."""
    label_w, bar_w, value_w, bar_h, gap, top = 170, 190, 72, 9, 10, 6
    group_h = bar_h * len(keys)
    width = label_w + bar_w + value_w
    height = top * 2 + len(groups) * (group_h + gap)
    vmax = max([v for _, vals in groups for v in vals.values() if v] + [0]) or 1
    out = [_svg_open(chart_id, title, width, height),
           f'<line class="axis" x1="{label_w}" y1="0" x2="{label_w}" y2="{height}" />']
    for i, (label, vals) in enumerate(groups):
        y0 = top + i * (group_h + gap)
        short = label if len(label) <= 24 else label[:23] + "…"
        out.append(f'<g class="bar" data-label="{esc(label)}">'
                   f'<text x="{label_w - 8}" y="{y0 + group_h * 0.6:.1f}" text-anchor="end">'
                   f'{esc(short)}</text>')
        for k, (key, colour) in enumerate(zip(keys, colours)):
            v = vals.get(key) or 0
            w = 0 if v <= 0 else max(2.0, bar_w * v / vmax)
            y = y0 + k * bar_h
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 1}" '
                       f'fill="{colour}" />')
        last = vals.get(keys[-1])
        out.append(f'<text class="value" x="{label_w + bar_w * (last or 0) / vmax + 6:.1f}" '
                   f'y="{y0 + group_h * 0.6:.1f}">{esc(fmt(last))}</text></g>')
    out.append("</svg>")
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{esc(k.split("_")[0])}'
                     '</span>' for k, c in zip(keys, colours))
    return card(title, "".join(out) + f'<p class="note legend">{legend}</p>')
