"""An audit run's row and verdict (make audit, make audit-stockd): a foreign service
judged by what its clients saw, as its target file maps the answers. The counts of
each outcome, the units sold beyond the stock (oversold), the units sold that the stock
read afterwards does not show (lost updates), the units gone that no answer sold
(unexplained), the clients' history checked; pass, known (only kinds of violation an
earlier audit of the same target showed: the baseline) or fail."""

from . import history

# The kinds of violation an audit names (a row's `kinds`).
KINDS = ("oversold", "lost_updates", "unexplained", "not_linearizable")
# An answer's outcome as the target maps it, as the history checker names it.
HISTORY_OUTCOME = {"sold": "ok", "sold_out": "sold_out", "refused": "failed",
                   "unknown": "unknown"}


def judge(target, k, answers, final, final_why, hist_path):
    """One run's row: the counts, the three figures, the history, the verdict."""
    qty, stock = k["qty"], k["stock"]
    counts = {o: sum(1 for a in answers if a["outcome"] == o)
              for o in ("sold", "sold_out", "refused", "unknown")}
    units = counts["sold"] * qty
    row = dict(counts, requests=len(answers), stock=stock, qty=qty, units_sold=units,
               oversold=max(0, units - stock), remaining=final, lost_updates=None,
               unexplained=None, stock_read=final_why or "read")
    if final is not None:
        taken = stock - final
        row["lost_updates"] = max(0, units - taken)
        row["unexplained"] = max(0, taken - units - counts["unknown"] * qty)
    w = history.Writer(hist_path)
    for a in answers:
        op = {"id": a["id"], "invoke": a["invoke_ms"], "complete": a["complete_ms"],
              "qty": qty, "outcome": HISTORY_OUTCOME[a["outcome"]]}
        if a["remaining"] is not None and a["outcome"] in ("sold", "sold_out"):
            op["remaining"] = a["remaining"]
        w.add(op)
    ops = w.close()
    row.update(history.judge_final(stock, ops, final, hist_path) if ops else
               history.not_judged("no requests"))
    kinds = [kind for kind, shown in (
        ("oversold", row["oversold"]), ("lost_updates", row["lost_updates"]),
        ("unexplained", row["unexplained"]),
        ("not_linearizable", row["history_linearizable"] is False)) if shown]
    row["kinds"] = kinds
    latencies = sorted(a["ms"] for a in answers)
    row["p50_ms"] = latencies[len(latencies) // 2] if latencies else None
    row["p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] \
        if latencies else None
    return row


def verdict(row, known):
    """(verdict, reason) of a row: pass, known (only kinds the baseline showed), fail."""
    if row["requests"] == 0:
        return "fail", "JMeter produced no results"
    if row["sold"] == 0 and row["sold_out"] == 0:
        return "fail", ("no answer was recognised as sold or sold out: the target's [answers] "
                        "does not describe what the service answered")
    said = []
    if row["oversold"]:
        said.append(f"oversold {row['oversold']} units ({row['units_sold']} sold of "
                    f"{row['stock']})")
    if row["lost_updates"]:
        said.append(f"{row['lost_updates']} units sold that the stock does not show "
                    f"(lost updates; {row['remaining']} left)")
    if row["unexplained"]:
        said.append(f"{row['unexplained']} units gone from the stock that no answer sold")
    if row["history_linearizable"] is False:
        said.append(f"not linearizable: {row['history']}")
    if not said:
        return "pass", ("nothing oversold" + ("" if row["lost_updates"] is None else
                                               " or lost") + "; history: " + row["history"])
    if known is None:
        return "fail", "; ".join(said)
    new = [k for k in row["kinds"] if k not in known]
    if not new:
        return "known", "as in the baseline: " + "; ".join(said)
    return "fail", (f"regression: {', '.join(new)} where the baseline showed none; "
                    + "; ".join(said))
