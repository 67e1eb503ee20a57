"""The cluster run's logic without a stack: which rows run (from the facts only), a
sell-out's verdict against its row's cluster fact, and the report's table."""

import unittest

from fakestockd import document, strategy
from lab.client import facts
from lab.drivers.load import Answer
from lab.judges import gate
from lab.reports import cluster_report
from lab.runs import cluster

FACTS = facts.parse(document([
    strategy("race", safe=False, cluster="loses_updates"),
    strategy("local", safe_multi=False, cluster="two_holders"),
    strategy("oneshot", cluster="conflicts_at_commit"),
    strategy("another", cluster="conflicts_at_commit"),
    strategy("locked-read", cluster="conflicts_at_commit"),
    strategy("optimistic", contention="retries", cluster="safe"),
    strategy("script", store="redis"),
]))


class Args:
    strategies = []
    quick = False


def sale_row(fact, **figures):
    r = {f: None for f in cluster.ROW_FIELDS}
    r.update(phase="cluster", strategy="x", fact=fact, ok=10, busy=0, unavailable=0, other=0,
             sold=10, oversold=0, lost_updates=0, undersold=0, problems=[], answers_seen=[])
    r.update(figures)
    return r


def judged(r):
    cluster.Run.judge_load(r)
    return cluster.finish(r)


class ClusterTest(unittest.TestCase):
    def test_every_row_with_a_cluster_fact_and_only_those(self):
        names = [s.name for s in cluster.chosen(FACTS, Args())]
        self.assertEqual(names, ["race", "local", "oneshot", "another", "locked-read",
                                 "optimistic"])

    def test_quick_takes_the_first_row_of_each_fact_and_every_conflicting_row(self):
        args = Args()
        args.quick = True
        names = [s.name for s in cluster.chosen(FACTS, args)]
        self.assertEqual(names, ["race", "local", "oneshot", "another", "locked-read",
                                 "optimistic"])

    def test_a_safe_row_must_neither_break_nor_undersell(self):
        self.assertEqual(judged(sale_row("safe"))["verdict"], "pass")
        self.assertEqual(judged(sale_row("safe", undersold=3, busy=3))["verdict"], "fail")
        self.assertEqual(judged(sale_row("safe", lost_updates=1))["verdict"], "fail")

    def test_a_conflicting_row_may_undersell_but_not_break(self):
        self.assertEqual(judged(sale_row("conflicts_at_commit", undersold=9, busy=9))["verdict"],
                         "pass")
        self.assertEqual(judged(sale_row("conflicts_at_commit", oversold=1))["verdict"], "fail")

    def test_an_unsafe_row_must_show_its_window(self):
        self.assertEqual(judged(sale_row("two_holders"))["verdict"], "fail")
        self.assertEqual(judged(sale_row("two_holders", lost_updates=4))["verdict"], "pass")
        self.assertEqual(judged(sale_row("loses_updates", oversold=2))["verdict"], "pass")

    def test_a_conflict_answered_as_an_outage_fails_any_row(self):
        r = judged(sale_row("conflicts_at_commit", unavailable=1,
                            answers_seen=["503 backend_unavailable"]))
        self.assertEqual(r["verdict"], "fail")
        self.assertIn("503", r["reason"])

    def test_the_history_is_a_second_witness(self):
        # Two buyers both read 5 and left 4: a lost update the ledger must see too.
        answers = [(0, Answer(1.0, 2.0, 200, "", 4)), (1, Answer(1.1, 2.1, 200, "", 4))]
        lost = {"initial": 5, "remaining": 4, "sold": 2, "oversold": 0, "lost_updates": 1}
        r = sale_row("loses_updates", lost_updates=1)
        gate.judge_history(r, answers, lost)
        self.assertFalse(r["history_linearizable"])
        self.assertEqual(judged(r)["verdict"], "pass")
        # The same history with a ledger that saw nothing: the witnesses disagree.
        r = sale_row("safe")
        gate.judge_history(r, answers, dict(lost, lost_updates=0))
        r = judged(r)
        self.assertEqual(r["verdict"], "fail")
        self.assertIn("witnesses disagree", r["reason"])
        # One after the other, each leaving one less: both witnesses say safe.
        answers = [(0, Answer(1.0, 2.0, 200, "", 4)), (1, Answer(2.5, 3.0, 200, "", 3))]
        r = sale_row("safe")
        gate.judge_history(r, answers, dict(lost, remaining=3, lost_updates=0))
        self.assertTrue(r["history_linearizable"])
        self.assertEqual(judged(r)["verdict"], "pass")

    def test_the_report_has_one_line_per_strategy(self):
        rows = [dict(sale_row("safe", phase=p, strategy="optimistic", per_s=5.0,
                              acked_missing=0, first_ok_s=1.5), verdict="pass", reason="")
                for p in ("single", "cluster", "node killed")]
        doc = {"started": "now", "instances": 3, "nodes": ["a", "b", "c"], "units": 10,
               "hold_ms": 5, "rows": rows}
        text = cluster_report.markdown(doc)
        lines = [line for line in text.splitlines() if line.startswith("| `optimistic`")]
        self.assertEqual(len(lines), 1)
        self.assertIn("0 acked missing, first 200 1.5 s", lines[0])


if __name__ == "__main__":
    unittest.main()
