"""The cluster run's results: cluster.json and cluster.csv (one row per strategy and
phase) and cluster.md, the strategy x {single node, cluster, node killed} table with
the all-killed rows under it."""

import os

from ..base.common import write_text
from ..judges import history
from . import tables


def write(out_dir, doc, fields):
    rows = doc["rows"]
    write_text(os.path.join(out_dir, "cluster.json"), tables.json_text(doc))
    write_text(os.path.join(out_dir, "cluster.csv"), tables.csv_text(rows, fields))
    write_text(os.path.join(out_dir, "cluster.md"), markdown(doc))


def load_cell(r):
    """What one sell-out did: throughput, refusals, and what went wrong."""
    if not r:
        return ""
    what = f"{r['per_s']}/s, {r['busy']} busy"
    if r["unavailable"]:
        what += f", {r['unavailable']} 503"
    broke = (r["oversold"] or 0) + (r["lost_updates"] or 0)
    if broke:
        what += f", **oversold {r['oversold']}, lost {r['lost_updates']}**"
    elif r["undersold"]:
        what += f", undersold {r['undersold']}"
    return what


def kill_cell(r):
    if not r:
        return ""
    first = "none" if r["first_ok_s"] is None else f"{r['first_ok_s']} s"
    what = f"{r['acked_missing']} acked missing, first 200 {first}, {r['unavailable']} 503"
    if (r["oversold"] or 0) + (r["lost_updates"] or 0):
        what += f", **oversold {r['oversold']}, lost {r['lost_updates']}**"
    return what


def histories_cell(phases):
    """The clients' history verdict of each phase, in the table's order."""
    said = [history.short(r) for r in phases.values()]
    return ", ".join(w or "-" for w in said)


def markdown(doc):
    rows = doc["rows"]
    by = {}
    for r in rows:
        by.setdefault(r["strategy"], {})[r["phase"]] = r
    lines = [f"Cluster run of {doc['started']}: {doc['instances']} stockd instances, one per "
             f"node of {len(doc['nodes'])}; {doc['units']} units and as many buyers per row, "
             f"hold_ms={doc['hold_ms']}.", "",
             "| strategy | cluster fact | single node | cluster | one try | node killed | "
             "histories | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, phases in by.items():
        fact = next(iter(phases.values()))["fact"]
        verdicts = [r["verdict"] for r in phases.values()]
        killed = phases.get("node killed")
        lines.append(f"| `{name}` | {fact} | {load_cell(phases.get('single'))} "
                     f"| {load_cell(phases.get('cluster'))} "
                     f"| {load_cell(phases.get('cluster, one try'))} | {kill_cell(killed)} "
                     f"| {histories_cell(phases)} | {'fail' if 'fail' in verdicts else 'pass'} |")
    crashes = [r for r in rows if r["phase"].startswith("all killed")]
    if crashes:
        lines += ["", "| every node killed within a second | strategy | 200s | in the ledger "
                  "| acked missing |", "| --- | --- | --- | --- | --- |"]
        for r in crashes:
            lines.append(f"| {r['phase']} | `{r['strategy']}` | {r['ok']} | {r['sold']} "
                         f"| {r['acked_missing']} |")
    problems = [r for r in rows if r["verdict"] != "pass"]
    if problems:
        lines += ["", "Rows that contradict their fact:", ""]
        lines += [f"- {r['phase']} `{r['strategy']}`: {r['reason']}" for r in problems]
    return "\n".join(lines) + "\n"
