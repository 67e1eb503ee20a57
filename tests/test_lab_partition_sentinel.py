"""The Sentinel partition's judging, which needs no root: acknowledged sales lost from
the ledger, each row against its failover fact, the min-replicas window's bound, and
which rows each partition runs."""

import types
import unittest

from lab import facts as facts_mod, sources, tables
from lab import partition_sentinel as ps


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


if __name__ == "__main__":
    unittest.main()
