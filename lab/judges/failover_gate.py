"""A failover row's figures and verdict (make failover, make redis-cluster's kill rows,
make partition's Sentinel rows): which sequence a strategy's row runs, from its facts;
the window's times and answers measured from the primary's death; and the row held to
its `failover` fact.

Measured on every row of a replicated group: from the primary's death to the
promotion, to the replica's return and to the first 200 through the new primary (goal
within RECOVER_GOAL_S of the promotion, or of the replica's return for a row that waits
for a replica, without restarting stockd), and every answer before it (a 503, within
the deadline plus margin). A `loses_sales` row must lose acknowledged sales and a
`two_holders` row must oversell or lose an update: the window must show what the fact
announces; a `safe` row must do neither."""

from ..client import sources
from ..client.sales import answer_word

RECOVER_GOAL_S = 2.0
FACT_KINDS = ("loses_sales", "two_holders", "safe")


def kind_of(s):
    """The sequence a strategy's row runs: from its facts, never from its name."""
    if sources.backend_name("redlock.c") in s.needs:
        return "quorum"
    return "holder" if s.lock else "sales"


def measured(row, m, cut, bound_s):
    """The window's times and answers into row (its problems too); m: the
    measurements of the sequence, cut: when its sales began."""
    died, promoted, first_ok = m["died"], m["promoted"], m["first_ok"]
    row["promote_s"] = round(promoted - died, 2) if promoted else None
    row["first_ok_s"] = round(first_ok - died, 2) if first_ok else None
    back = m["replica_back"]
    row["replica_back_s"] = round(back - died, 2) if back else None
    gap = m["gap"]
    counts = {}
    for _, a in gap:
        counts[answer_word(a)] = counts.get(answer_word(a), 0) + 1
    row["gap_answers"] = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "-"
    row["gap_max_ms"] = round(max((a[3] for _, a in gap), default=0) * 1000)
    if promoted is None:
        row["problems"].append("Sentinel promoted no replica within 20 s")
    if m["heal_error"]:
        row["problems"].append(f"the killed server did not come back at once: "
                               f"{m['heal_error']}")
    if first_ok is None:
        row["problems"].append("no 200 through the new primary within 20 s of the death")
    elif promoted and first_ok - max(promoted, m["replica_back"] or 0) > RECOVER_GOAL_S:
        row["problems"].append(f"first 200 {first_ok - promoted:.2f} s after the promotion "
                               f"and the replica's return (goal {RECOVER_GOAL_S:.0f} s)")
    wrong = [answer_word(a) for _, a in gap if a[0] != 503]
    if wrong:
        row["problems"].append(f"answers other than 503 while no primary existed: "
                               f"{', '.join(sorted(set(wrong)))}")
    if row["gap_max_ms"] > bound_s * 1000:
        row["problems"].append(f"an answer took {row['gap_max_ms']} ms while no primary "
                               f"existed (deadline plus margin {bound_s * 1000:.0f})")
    m["cut"] = cut


def judge(row):
    """The row against its fact."""
    fact, kind = row["fact"], row["kind"]
    broke = (row.get("acked_lost") or 0) if kind == "sales" else \
        (row.get("oversold") or 0) + (row.get("lost_updates") or 0)
    if row["store_sold"] is None:
        row["problems"].append("the store's accounting could not be read")
    elif fact == "safe" and broke:
        row["problems"].append(f"claims safe, but {'lost' if kind == 'sales' else 'oversold'} "
                               f"{broke}")
    elif fact != "safe" and not broke:
        row["problems"].append(f"claims {fact}, but the window did not show it: nothing "
                               "lost or oversold")
    row["verdict"] = "fail" if row["problems"] else "pass"
    row["reason"] = "; ".join(row.pop("problems"))
