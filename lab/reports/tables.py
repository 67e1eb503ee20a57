"""Rows (dicts) as a text table, a Markdown table, JSON and CSV."""

import csv
import io
import json


def cell(v, grouped=False, missing="-"):
    """A value as a table shows it: floats to a sensible precision, booleans as
    yes/no; `grouped` puts thousands separators in numbers of 100 and over."""
    if v is None:
        return missing
    if isinstance(v, bool):
        return "yes" if v else "no"
    sep = "," if grouped else ""
    if isinstance(v, float):
        return f"{v:{sep}.0f}" if v >= 100 else f"{v:.2f}" if v < 10 else f"{v:.1f}"
    if isinstance(v, int):
        return f"{v:{sep}}"
    return str(v)


def _value(r, f):
    return f(r) if callable(f) else r.get(f)


def text_table(rows, columns):
    """columns: [(heading, field, "<" or ">")]; a field may be a function of the row."""
    cells = [[h for h, _, _ in columns]] + [[cell(_value(r, f)) for _, f, _ in columns]
                                             for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(f"{x:{columns[i][2]}{widths[i]}}" for i, x in enumerate(c)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows, columns):
    """The same rows and columns as a Markdown table."""
    lines = ["| " + " | ".join(h for h, _, _ in columns) + " |",
             "|" + "|".join(" --- " if a == "<" else " ---: " for _, _, a in columns) + "|"]
    lines += ["| " + " | ".join(cell(_value(r, f)) for _, f, _ in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def json_text(value):
    return json.dumps(value, indent=2) + "\n"


def csv_value(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, dict):
        return ";".join(f"{k}={x}" for k, x in sorted(v.items()))
    if isinstance(v, (list, tuple, set)):
        return ";".join(str(x) for x in v)
    return v


def csv_text(rows, fields):
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: csv_value(r.get(k)) for k in fields})
    return out.getvalue()
