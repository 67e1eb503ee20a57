"""The Sentinel partition's judging, which needs no root: acknowledged sales lost from
the ledger, each row against its failover fact, the min-replicas window's bound, which
rows each partition runs, the replica waited for while the retrying buyers write on,
and what their verdict does to a row."""

import contextlib
import html
import io
import re
import types
import unittest

from lab.base.common import SetupError
from lab.client import facts as facts_mod, sources
from lab.reports import tables
from lab.judges import retries
from lab.runs import partition_sentinel as ps
from lab.scaffold import retrying_mode


QUORUM = sources.backend_name("redlock.c")  # the Redlock servers: no replicated group


def args(**kw):
    return types.SimpleNamespace(**{"max_lag_s": 2, "margin_ms": 500, "quick": False,
                                    "strategies": [], **kw})


def row(kind, fact, a_acked, b_acked, sold, oversold=0, min_replicas=False, window_s=None):
    return {"kind": kind, "fact": fact, "store_sold": sold, "oversold": oversold,
            "lost_updates": 0, "acked_lost": ps.acked_lost(a_acked, b_acked, sold),
            "min_replicas": min_replicas, "window_s": window_s, "problems": []}


def judged(r, a=None):
    ps.judge(r, a or args())
    return r["verdict"], r["reason"]


class AckedLost(unittest.TestCase):
    def test_the_200s_the_ledger_does_not_hold(self):
        self.assertEqual(ps.acked_lost(16, 5, 5), 16)  # A's sales on the old primary
        self.assertEqual(ps.acked_lost(0, 5, 5), 0)
        self.assertEqual(ps.acked_lost(0, 0, 5), 0)    # sold without a 200: not a loss
        self.assertIsNone(ps.acked_lost(3, 1, None))


class Judge(unittest.TestCase):
    def test_loses_sales_must_lose(self):
        self.assertEqual(judged(row("sales", "loses_sales", 16, 5, 5))[0], "pass")
        verdict, reason = judged(row("sales", "loses_sales", 0, 5, 5))
        self.assertEqual(verdict, "fail")
        self.assertIn("nothing lost", reason)

    def test_safe_must_lose_nothing(self):
        self.assertEqual(judged(row("sales", "safe", 0, 0, 5))[0], "pass")
        self.assertEqual(judged(row("sales", "safe", 2, 5, 5))[0], "fail")

    def test_holders_are_judged_by_the_oversold_count(self):
        self.assertEqual(judged(row("holder", "two_holders", 1, 1, 2, oversold=1))[0], "pass")
        self.assertEqual(judged(row("holder", "two_holders", 0, 1, 1))[0], "fail")
        self.assertEqual(judged(row("holder", "safe", 0, 1, 1))[0], "pass")
        self.assertEqual(judged(row("holder", "safe", 1, 1, 2, oversold=1))[0], "fail")

    def test_oversells_is_judged_by_mysql_against_the_stock(self):
        settled = row("sales", "oversells", 13, 5, 5)
        settled["settled_sold"] = 18  # A's 13 settled by A's consumer, B's 5
        self.assertEqual(judged(settled)[0], "pass")
        same = row("sales", "oversells", 13, 5, 5)
        same["settled_sold"] = 5
        verdict, reason = judged(same)
        self.assertEqual(verdict, "fail")
        self.assertIn("no more than the 5", reason)
        unread = row("sales", "oversells", 13, 5, 5)
        unread["settled_sold"] = None
        self.assertEqual(judged(unread)[0], "fail")

    def test_an_unread_ledger_fails(self):
        self.assertEqual(judged(row("sales", "safe", 0, 0, None))[0], "fail")

    def test_min_replicas_window(self):
        self.assertEqual(ps.window_bound_s(args()), 4.5)
        inside = row("sales", "loses_sales", 45, 5, 5, min_replicas=True, window_s=2.43)
        self.assertEqual(judged(inside)[0], "pass")
        late = row("sales", "loses_sales", 80, 5, 5, min_replicas=True, window_s=4.9)
        verdict, reason = judged(late)
        self.assertEqual(verdict, "fail")
        self.assertIn("min-replicas should stop it", reason)
        # without min-replicas, A sells to the end: no window to hold
        plain = row("sales", "loses_sales", 80, 5, 5, window_s=3.95)
        self.assertEqual(judged(plain)[0], "pass")


E = ps.ENDLESS_STOCK


def sale(t, status, word=None, remaining=None):
    """One client's answer as timed_sale gives it: (answer, sent, answered)."""
    body = {"remaining": remaining} if remaining is not None else {}
    return (status, word, body, 0.01), float(t), t + 0.01


def with_history(r, answers, initial, remaining):
    """A row judged by its ledger figures and by the history of `answers`."""
    r["answers"] = answers
    r.update(ps.row_history(r, initial, remaining))
    return r


class History(unittest.TestCase):
    """Each row's second witness: lost 200s or a unit sold twice are not linearizable,
    and the history must agree with the fact and with the ledger."""

    A_LOST = [sale(t, 200, remaining=E - 1 - t) for t in range(3)]  # on the old primary
    B_KEPT = [sale(10 + t, 200, remaining=E - 1 - t) for t in range(2)]

    def test_lost_acknowledged_sales_are_not_linearizable(self):
        r = with_history(row("sales", "loses_sales", 3, 2, 2), self.A_LOST + self.B_KEPT,
                         E, E - 2)
        self.assertFalse(r["history_linearizable"])
        self.assertEqual(judged(r)[0], "pass")
        self.assertEqual(history_short(r), "NOT lin")

    def test_lost_sales_without_their_remaining_are_still_not_linearizable(self):
        answers = [sale(t, 200) for t in range(3)] + [sale(10 + t, 200) for t in range(2)]
        r = with_history(row("sales", "loses_sales", 3, 2, 2), answers, E, E - 2)
        self.assertFalse(r["history_linearizable"])

    def test_a_safe_row_is_linearizable(self):
        waits = [sale(t, 503, "outcome_unknown") for t in range(3)] + \
            [sale(10 + t, 503, "outcome_unknown") for t in range(2)]
        r = with_history(row("sales", "safe", 0, 0, 2), waits, E, E - 2)
        self.assertTrue(r["history_linearizable"])
        self.assertEqual(judged(r)[0], "pass")

    def test_holders(self):
        twice = with_history(row("holder", "two_holders", 1, 1, 2, oversold=1),
                             [sale(0, 200, remaining=0), sale(0.5, 200, remaining=0)], 1, -1)
        self.assertFalse(twice["history_linearizable"])
        self.assertEqual(judged(twice)[0], "pass")
        fenced = with_history(row("holder", "safe", 0, 1, 1),
                              [sale(0, 409, "busy"), sale(0.5, 200, remaining=0)], 1, 0)
        self.assertTrue(fenced["history_linearizable"])
        self.assertEqual(judged(fenced)[0], "pass")

    def test_no_answer_may_take_effect_after(self):
        # A's request never answered (a client timeout), its sale made after B's read
        answers = [sale(0, 0, "timed out"), sale(1, 200, remaining=E - 1)]
        r = with_history(row("sales", "safe", 0, 1, 2), answers, E, E - 2)
        self.assertTrue(r["history_linearizable"])

    def test_a_history_against_the_fact_fails(self):
        # a loses_sales row whose 200s all held: linearizable, so the fact did not show
        r = with_history(row("sales", "loses_sales", 0, 2, 2), self.B_KEPT, E, E - 2)
        verdict, reason = judged(r)
        self.assertEqual(verdict, "fail")
        self.assertIn("the history is linearizable", reason)

    def test_a_history_against_the_ledger_fails(self):
        # the ledger counts 3 lost, the history (its remaining) holds every 200
        answers = [sale(t, 200, remaining=E - 1 - t) for t in range(5)]
        r = with_history(row("sales", "safe", 3, 2, 2), answers, E, E - 5)
        self.assertTrue(r["history_linearizable"])
        self.assertIn("the history and the ledger disagree", judged(r)[1])


def history_short(r):
    return ps.history.short(r)


class Timeline(unittest.TestCase):
    def rows(self):
        lost = row("sales", "loses_sales", 3, 2, 2)
        safe = row("sales", "safe", 0, 0, 2)
        for r, name, a in ((lost, "stem", [sale(t / 10, 200) for t in range(3)]),
                           (safe, "stem-waits", [sale(t / 10, 503, "outcome_unknown")
                                               for t in range(3)])):
            r.update(strategy=name, promote_s=1.5, heal_s=4.2, rejoin_s=15.0, acked=5, a_acked=3,
                     a_marks=ps.marks(a), b_marks=ps.marks([sale(2 + t, 200) for t in range(2)]))
        return [lost, safe]

    def test_the_loses_sales_row_the_safe_one_is_a_variant_of(self):
        first, stem, safe = (row("sales", f, 3, 2, 2) for f in ("loses_sales",) * 2 + ("safe",))
        for r, name in ((first, "other"), (stem, "stem"), (safe, "stem-waits")):
            r.update(strategy=name, promote_s=1.5, a_marks={"from": 0}, b_marks={"from": 0})
        self.assertEqual(ps.drawn_rows([first, stem, safe]), (stem, safe))
        self.assertEqual(ps.drawn_rows([first, stem]), (first, None))

    def test_marks(self):
        m = ps.marks([sale(0, 503, "backend_unavailable"), sale(1, 200), sale(2, 200)])
        self.assertEqual((m["from"], m["ok_from"], m["ok_to"], m["to"]), (0.0, 1.01, 2.01, 2.01))
        self.assertEqual(m["words"], "200 x2, 503 backend_unavailable x1")
        self.assertIsNone(ps.marks([sale(0, 409, "busy")])["ok_from"])

    def test_the_loses_sales_row_and_lua_wait_are_drawn(self):
        lost, safe = ps.drawn_rows(self.rows())
        self.assertEqual((lost["strategy"], safe["strategy"]), ("stem", "stem-waits"))
        svg = ps.timeline_svg(lost, safe)
        self.assertTrue(svg.startswith("<svg") and svg.endswith("</svg>\n"))
        for words in ("the cut at 0 s; the replica promoted at 1.5 s", "heal (4.2 s)",
                      "rejoins: A&#x27;s 3 sales discarded", "A stem-waits"):
            self.assertIn(words, svg)

    def test_no_label_runs_over_another(self):
        lost, safe = ps.drawn_rows(self.rows())
        lost.update(promote_s=1.26, heal_s=17.49, rejoin_s=15.84)  # a real run's moments
        svg = ps.timeline_svg(lost, safe)
        spans = {}
        for x, y, anchor, text in re.findall(
                r'<text x="([\d.]+)" y="(\d+)" font-size="11" fill="[^"]+" '
                r'text-anchor="(\w+)">([^<]*)</text>', svg):
            width = len(html.unescape(text)) * ps.failover_report.CHAR_W
            x0 = float(x) - (width if anchor == "end" else 0)
            spans.setdefault(y, []).append((x0, x0 + width, text))
        for y, row_spans in spans.items():
            row_spans.sort()
            for (_, end, left), (start, _, right) in zip(row_spans, row_spans[1:]):
                self.assertLessEqual(end, start, f"{left!r} runs over {right!r} at y {y}")

    def test_nothing_to_draw_without_a_loses_sales_row(self):
        self.assertEqual(ps.drawn_rows(self.rows()[1:]), (None, None))


def strategy(name, store, needs, lock=None, failover=None, **more):
    return {"name": name, "store": store, "safe_single": True, "safe_multi": True,
            "contention": "x", "lease": None, "exposed_by": [], "needs": needs,
            "lock": lock, "failover": failover, **more}


class Plan(unittest.TestCase):
    def setUp(self):
        lease = {"busy_holder": "oversells", "paused_holder": "oversells"}
        docs = [strategy("in-mysql", "mysql", ["mysql"]),
                strategy("in-redis", "redis", ["redis"], failover="loses_sales"),
                strategy("in-redis-too", "redis", ["redis"], failover="loses_sales"),
                strategy("waits", "redis", ["redis"], failover="safe"),
                strategy("streams", "redis", ["redis", "mysql"], failover="loses_sales",
                         settles="async", partition="oversells"),
                strategy("lock", "mysql", ["mysql", "redis"], "redis", "two_holders",
                         lease=lease),
                strategy("lock-waits", "mysql", ["mysql", "redis"], "redis", "safe",
                         lease=lease),
                strategy("quorum", "mysql", ["mysql", QUORUM], QUORUM, "safe"),
                strategy("fencing", "mysql", ["mysql", "redis"], "redis", "safe",
                         lease={"busy_holder": "safe", "paused_holder": "safe"})]
        self.facts = facts_mod.Facts([facts_mod.Strategy(d) for d in docs], {})

    @staticmethod
    def names(rows):
        return [s.name for s in rows]

    def test_every_main_redis_row_and_the_sales_rows_again(self):
        plain, again = ps.plan(self.facts, args())
        self.assertEqual(self.names(plain), ["in-redis", "in-redis-too", "waits", "streams",
                                             "lock", "lock-waits", "fencing"])
        self.assertEqual(self.names(again), ["in-redis", "in-redis-too", "waits", "streams"])

    def test_the_partition_fact_is_failover_s_unless_stated(self):
        self.assertEqual(self.facts.by_name["in-redis"].partition, "loses_sales")
        self.assertEqual(self.facts.by_name["streams"].partition, "oversells")

    def test_quick(self):
        plain, again = ps.plan(self.facts, args(quick=True))
        self.assertEqual(self.names(plain),
                         ["in-redis", "waits", "streams", "lock", "lock-waits", "fencing"])
        self.assertEqual(self.names(again), ["in-redis"])


class Tables(unittest.TestCase):
    def test_words_and_markdown(self):
        self.assertEqual(ps.words([(200, None), (503, "busy"), (200, None)]),
                         "200 x2, 503 busy x1")
        md = tables.markdown_table([{"a": "x", "n": 1.5}], [("A", "a", "<"), ("N", "n", ">")])
        self.assertEqual(md, "| A | N |\n| --- | ---: |\n| x | 1.50 |\n")


class Setup(unittest.TestCase):
    """A partition whose setup failed is made once more, then its rows are reported
    as setup, with the account that diagnoses them."""

    def partition(self, *tries):
        p = ps.SentinelPartition.__new__(ps.SentinelPartition)
        p.say = print
        outcomes = iter(tries)

        def attempt(plan_rows, min_replicas, first_product):
            outcome = next(outcomes)
            if isinstance(outcome, Exception):
                raise outcome
            return [dict(p.new_row(s, min_replicas, first_product), verdict=outcome,
                         new_primary="127.0.0.31", cut_at=1.0) for s in plan_rows]
        p.partition = attempt
        p.args = args()
        p.group_misbehaved = lambda rows, t0: None
        p.diagnosis = lambda window, cut: ["the account"]
        with contextlib.redirect_stdout(io.StringIO()):
            return p.run([types.SimpleNamespace(name="optimistic", partition="loses_sales",
                                                needs=["redis"], lock=None)],
                         False, 1)

    def test_a_replica_without_the_reset_is_tried_again(self):
        rows = self.partition(SetupError("the replica had not applied the rows' resets"),
                              "pass")
        self.assertEqual([r["verdict"] for r in rows], ["pass"])
        self.assertNotIn("diagnosis", rows[0])

    def test_twice_is_setup_not_a_verdict(self):
        rows = self.partition(SetupError("no reset"), SetupError("no reset"))
        self.assertEqual((rows[0]["verdict"], rows[0]["reason"], rows[0]["diagnosis"]),
                         ("setup", "setup: no reset", ["the account"]))


def retried_row(fact, double_buys_keys, reason="the ledger holds 9 units for 10 purchases"):
    return {"fact": fact, "verdict": "pass", "reason": "", "double_buys_keys": double_buys_keys,
            "retry_verdict": retries.FAIL, "retry_reason": reason}


class RetryingMode(unittest.TestCase):
    def test_a_keyed_double_buy_fails_every_row(self):
        for fact in ("safe", "loses_sales", "oversells"):
            r = retried_row(fact, 1)
            ps.fold_retrying(r)
            self.assertEqual(r["verdict"], "fail", fact)

    def test_a_lost_sale_of_the_buyers_fails_a_safe_row_only(self):
        safe, losing = retried_row("safe", 0), retried_row("loses_sales", 0)
        ps.fold_retrying(safe)
        ps.fold_retrying(losing)
        self.assertEqual((safe["verdict"], losing["verdict"]), ("fail", "pass"))
        self.assertIn("retrying clients", safe["reason"])

    def test_off_by_default_and_its_columns_only_when_on(self):
        self.assertEqual(ps.parse_args([]).retrying_buyers, 0)
        on = ps.parse_args(["--retrying-buyers", "2"])
        fields, table = retrying_mode.with_columns(on, ps.ROW_FIELDS, ps.TABLE)
        self.assertEqual(fields, ps.ROW_FIELDS + retrying_mode.COLUMNS)
        self.assertEqual(len(table), len(ps.TABLE) + len(retrying_mode.table_columns()))

    def test_the_replica_is_waited_for_up_to_the_offset_read_once(self):
        # the primary's offset goes on growing; the replica reaches what it was at first
        offsets = {"primary": iter(["100", "150", "200"]), "replica": iter(["90", "120", "180"])}
        saved = ps.role

        def role(host):
            offset = next(offsets[host])
            return None, None, True, offset, offset
        ps.role = role
        try:
            ps.Group.wait_caught_up("primary", "replica", seconds=5)
        finally:
            ps.role = saved
        self.assertEqual(list(offsets["replica"]), ["180"])  # 120 >= 100 sufficed


if __name__ == "__main__":
    unittest.main()
