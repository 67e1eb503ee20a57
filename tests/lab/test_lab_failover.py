"""The failover run's logic without a stack: which rows run and which sequence each
takes (from the facts only), a row's verdict against its fact from its figures, what
the window's measurements make of a row, and the report's table and picture."""

import contextlib
import io
import unittest
import unittest.mock
import xml.etree.ElementTree as ET

from fakestockd import document, strategy
from lab.client import facts, sources
from lab.judges import failover_gate
from lab.nemesis import redis_group
from lab.reports import failover_report, junit
from lab.runs import failover
from lab.scaffold import failover_window, runner

REDLOCK = sources.backend_name("redlock.c")


def row_doc(name, fact, **kw):
    doc = strategy(name, **kw)
    doc["failover"] = fact
    return doc


FACTS = facts.parse(document([
    strategy("plain", store="mysql"),
    row_doc("optimistic", "loses_sales", store="redis", needs=["redis"]),
    row_doc("keylock", "two_holders", needs=["mysql", "redis"], lock="key",
            lease={"busy_holder": "oversells", "paused_holder": "oversells"}),
    row_doc("script", "loses_sales", store="redis", needs=["redis"]),
    row_doc("quorum", "safe", needs=["mysql", REDLOCK], lock="majority"),
    row_doc("fence", "safe", needs=["mysql", "redis"], lock="fenced",
            lease={"busy_holder": "safe", "paused_holder": "safe"}),
    row_doc("waiting", "safe", store="redis", needs=["redis"]),
]))


class Args:
    strategies = []
    quick = False


def row(kind, fact, **figures):
    r = {f: None for f in failover_window.ROW_FIELDS}
    r.update(strategy="x", kind=kind, fact=fact, problems=[], store_sold=1, **figures)
    return r


def window(**times):
    """Measurements of a row's window, in seconds from the death."""
    m = {"died": 100.0, "cut": 99.0, "link_down": 100.2, "promoted": 100.8,
         "replica_back": 102.0, "first_ok": 101.7, "gap": [], "heal_error": None}
    m.update({k: 100.0 + v if isinstance(v, float) else v for k, v in times.items()})
    return m


class ChoiceTest(unittest.TestCase):
    def test_rows_with_a_fact_and_their_sequences(self):
        rows = failover.chosen(FACTS, Args())
        self.assertEqual([s.name for s in rows],
                         ["optimistic", "keylock", "script", "quorum", "fence", "waiting"])
        self.assertEqual([failover_gate.kind_of(s) for s in rows],
                         ["sales", "holder", "sales", "quorum", "holder", "sales"])

    def test_quick_takes_the_first_row_of_each_kind_and_fact(self):
        args = Args()
        args.quick = True
        self.assertEqual([s.name for s in failover.chosen(FACTS, args)],
                         ["optimistic", "keylock", "quorum", "fence", "waiting"])


class VerdictTest(unittest.TestCase):
    def verdict(self, r):
        failover_gate.judge(r)
        return r["verdict"], r["reason"]

    def test_a_loss_the_fact_announces_passes(self):
        self.assertEqual(self.verdict(row("sales", "loses_sales", acked_lost=5)), ("pass", ""))
        self.assertEqual(self.verdict(row("holder", "two_holders", oversold=1, lost_updates=1)),
                         ("pass", ""))

    def test_a_window_that_did_not_show_fails(self):
        verdict, reason = self.verdict(row("sales", "loses_sales", acked_lost=0))
        self.assertEqual(verdict, "fail")
        self.assertIn("did not show", reason)
        self.assertEqual(self.verdict(row("holder", "two_holders", oversold=0,
                                          lost_updates=0))[0], "fail")

    def test_a_safe_row_that_loses_or_oversells_fails(self):
        self.assertIn("lost 2", self.verdict(row("sales", "safe", acked_lost=2))[1])
        self.assertIn("oversold 1", self.verdict(row("holder", "safe", oversold=1))[1])
        self.assertEqual(self.verdict(row("holder", "safe", oversold=0, lost_updates=0)),
                         ("pass", ""))

    def test_an_unreadable_ledger_fails(self):
        r = row("sales", "safe", acked_lost=0)
        r["store_sold"] = None
        self.assertIn("could not be read", self.verdict(r)[1])


class WindowTest(unittest.TestCase):
    def measure(self, m):
        r = row("sales", "loses_sales")
        failover_gate.measured(r, m, m["cut"], 2.5)
        return r

    def test_the_times_from_the_death(self):
        r = self.measure(window(gap=[(100.1, (503, "backend_unavailable", {}, 0.01))]))
        self.assertEqual((r["promote_s"], r["replica_back_s"], r["first_ok_s"]), (0.8, 2.0, 1.7))
        self.assertEqual(r["gap_answers"], "503 backend_unavailable x1")
        self.assertEqual(r["problems"], [])

    def test_other_answers_or_slow_ones_while_no_primary_are_problems(self):
        r = self.measure(window(gap=[(100.1, (500, "internal", {}, 0.01)),
                                     (100.2, (503, "timeout", {}, 3.0))]))
        self.assertTrue(any("other than 503" in p for p in r["problems"]))
        self.assertTrue(any("3000 ms" in p for p in r["problems"]))

    def test_a_late_first_sale_is_a_problem(self):
        r = self.measure(window(first_ok=5.0))
        self.assertTrue(any("after the promotion" in p for p in r["problems"]))
        self.assertTrue(any("no 200" in p for p in self.measure(window(first_ok=None))["problems"]))

    def test_no_promotion_is_a_problem(self):
        r = self.measure(window(promoted=None))
        self.assertTrue(any("promoted no replica" in p for p in r["problems"]))


class ReportTest(unittest.TestCase):
    def test_the_debate_table_has_every_column(self):
        r = row("holder", "two_holders", oversold=1, lost_updates=1, acked=2)
        r.update(strategy="keylock", first_holder="200", second_holder="200", verdict="pass")
        table = failover_report.debate_table([r], FACTS)
        self.assertIn("| `keylock` | safe | oversells | oversells | two_holders | "
                      "A 200, B 200: oversold 1 (pass) |", table)
        r = row("sales", "safe", acked_lost=0, acked=0)
        r.update(strategy="waiting", first_holder="503 outcome_unknown", verdict="pass")
        self.assertIn("| `waiting` | safe | no lease | no lease | safe | A's sales answered 503 "
                      "outcome_unknown: 0 of 0 acknowledged lost (pass) |",
                      failover_report.debate_table([r], FACTS))

    def test_the_timeline_names_the_two_holders(self):
        m = window()
        m.update(second=(101.9, (200, None, {}, 0.05)), held_at=99.05, thawed=102.0,
                 first=(200, None, {}, 3.0))
        svg = failover_report.timeline_svg("keylock", m)
        for words in ("kill -9", "Sentinel promotes the replica", "frozen between its read",
                      "same lock on the new primary: 200", "writes: 200"):
            self.assertIn(words, svg)


def pmessage(channel, payload):
    """What a Sentinel sends a PSUBSCRIBE * client for one event."""
    parts = [b"pmessage", b"*", channel.encode(), payload.encode()]
    return b"*4\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def switch(old, new):
    return pmessage("+switch-master", f"stockd 127.0.0.1 {old} 127.0.0.1 {new}")


def heard(*messages, t=100.0):
    """SentinelEvents that heard `messages` (bytes, each cut in two to show that a
    message split across reads is still one event), one every 0.1 s from t."""
    events = redis_group.SentinelEvents([])
    link = ["127.0.0.1:26379", b""]
    for i, m in enumerate(messages):
        with unittest.mock.patch("time.monotonic", return_value=t + i / 10):
            events.take(link, m[:7])
            events.take(link, m[7:])
    return events


class SentinelEventsTest(unittest.TestCase):
    def test_each_switch_once_in_order_whoever_announced_it(self):
        events = heard(b"+OK\r\n*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n",
                       pmessage("+sdown", "master stockd 127.0.0.1 1"),
                       switch(1, 2), switch(1, 2), switch(2, 1))
        self.assertEqual(events.switches(0), [(100.2, "127.0.0.1:2"), (100.4, "127.0.0.1:1")])
        self.assertEqual(events.switches(100.35), [(100.4, "127.0.0.1:1")])
        self.assertEqual(events.account(100.1, 100.1, 100.0),
                         ["  +0.100 s  sentinel 127.0.0.1:26379  +sdown master stockd 127.0.0.1 1"])

    def test_an_abandoned_attempt_counts_until_a_switch(self):
        abort = pmessage("-failover-abort-slave-timeout", "master stockd 127.0.0.1 1")
        self.assertEqual(heard(abort).last_unfinished(), 100.0)
        self.assertEqual(heard(abort, switch(1, 2)).last_unfinished(), 0.0)
        self.assertEqual(heard(switch(1, 2)).last_unfinished(), 0.0)


class Events:
    """A group whose Sentinels announced `switches` (new ports) and `channels`."""

    def __init__(self, switches=(), channels=()):
        self.events = [(101.0, "s", c, "") for c in channels]
        self.switched = [(101.0, f"127.0.0.1:{p}") for p in switches]

    def switches(self, t0, t1=None):
        return self.switched

    def since(self, t0, t1=None):
        return self.events


SALE = unittest.mock.Mock()
SALE.name = "x"


class SetupTest(unittest.TestCase):
    def failover(self, events=None, attempts=()):
        run = failover_window.Failover.__new__(failover_window.Failover)
        run.group, run.timeline, run.say = unittest.mock.Mock(events=events), None, print
        tries = iter(attempts)
        run.attempt = lambda s, i, env: next(tries)
        run.diagnosis = lambda window, m: ["the account"]
        return run

    def misbehaved(self, events, verdict="pass"):
        r = row("holder", "two_holders", verdict=verdict)
        return self.failover(events).group_misbehaved(r, {"died": 100.0, "replica": 2},
                                                      (99.0, 0, 110.0, 0))

    def test_one_switch_to_the_replica_is_the_row_s_own(self):
        self.assertIsNone(self.misbehaved(Events([2])))
        self.assertIsNone(self.misbehaved(Events([2], ["-failover-abort-not-elected"])))

    def test_any_other_switch_is_the_setup_s(self):
        self.assertIn("to 127.0.0.1:2, 127.0.0.1:1 in the row",
                      self.misbehaved(Events([2, 1])))
        self.assertIn("to nothing", self.misbehaved(Events([])))

    def test_an_abandoned_attempt_explains_a_failed_row(self):
        events = Events([2], ["-failover-abort-slave-timeout"])
        self.assertIn("ended half-way", self.misbehaved(events, "fail"))

    def attempted(self, setup, verdict="pass"):
        r = row("sales", "safe", verdict=verdict, setup=setup, reason="")
        return r, None, (99.0, 0, 110.0, 0)

    def test_a_failed_setup_is_tried_once_more(self):
        with contextlib.redirect_stdout(io.StringIO()):
            r = self.failover(attempts=[self.attempted("a switch"), self.attempted(None)]) \
                .run_row(SALE, 0, {})
        self.assertEqual((r["verdict"], "diagnosis" in r), ("pass", False))

    def test_twice_is_reported_as_setup_with_its_diagnosis(self):
        with contextlib.redirect_stdout(io.StringIO()):
            r = self.failover(attempts=[self.attempted("a switch")] * 2).run_row(SALE, 0, {})
        self.assertEqual((r["verdict"], r["reason"], r["diagnosis"]),
                         ("setup", "setup: a switch", ["the account"]))

    def test_a_failed_row_carries_its_diagnosis(self):
        r = self.failover(attempts=[self.attempted(None, "fail")]).run_row(SALE, 0, {})
        self.assertEqual(r["diagnosis"], ["the account"])


class SetupReportTest(unittest.TestCase):
    ROWS = [{"strategy": "a", "verdict": "pass", "reason": ""},
            {"strategy": "b", "verdict": "setup", "reason": "setup: a switch",
             "diagnosis": ["the Sentinels' events:"]}]

    def report(self, rows):
        run = unittest.mock.Mock(elapsed=lambda: 1.0)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = runner.report_fact_rows(run, (rows, "dir"), [("s", "strategy", "<")],
                                             "fact", lambda r: r["strategy"])
        return status, out.getvalue()

    def test_a_row_not_set_up_is_not_judged_and_says_why(self):
        status, out = self.report(self.ROWS)
        self.assertEqual(status, 2)
        self.assertIn("1/1 rows hold their fact; 1 could not be set up", out)
        self.assertIn("    the Sentinels' events:", out)
        fail = dict(self.ROWS[0], verdict="fail")
        self.assertEqual(self.report([fail] + self.ROWS[1:])[0], 1)
        self.assertEqual(self.report(self.ROWS[:1])[0], 0)

    def test_junit_calls_it_an_error_not_a_failure(self):
        doc = ET.fromstring(junit.document("s", self.ROWS, lambda r: r["strategy"],
                                           lambda r: 1).split("\n", 1)[1])
        self.assertEqual((doc.get("failures"), doc.get("errors")), ("0", "1"))
        self.assertEqual(doc.find("testcase[@name='b']/error").get("type"), "setup")


if __name__ == "__main__":
    unittest.main()
