"""lab.client.outcomes and lab.judges.gate: answers counted by outcome, the ledger rule, the
comparison's and the bench's verdicts, and the driver-bound marking."""

import types
import unittest

from fakestockd import document, strategy
from lab.client import facts
from lab.client.outcomes import Outcomes, classify, ledger_problem
from lab.drivers import jmeter
from lab.judges import gate, plan
from lab.runs import compare
from lab.runs.bench import mean_batch, order_problem, order_subjects

SETTINGS = {"lock_wait_ms": 5000}


def results(sold=0, sold_out=0, busy=0, unknown=0, errors=(), fastest_busy_ms=None, rps=100.0):
    res = jmeter.Results()
    res.outcomes.add(200, "none", sold)
    res.outcomes.add(409, "sold_out", sold_out)
    res.outcomes.add(409, "busy", busy)
    res.outcomes.add(503, "outcome_unknown", unknown)
    for status, word in errors:
        res.outcomes.add(status, word)
    res.fastest_busy_ms, res.throughput_rps = fastest_busy_ms, rps
    return res


def acct(sold, initial=100, oversold=0, lost=0):
    return {"sold": sold, "remaining": initial - sold + lost, "oversold": oversold,
            "lost_updates": lost}


def row_of(entry, kind="normal", instances=1):
    f = facts.parse(document([entry]))
    a = types.SimpleNamespace(threads=20, loops=10, stock=100, hold_ms=0, exposed_hold_ms=20,
                              exposed_ttl_ms=5, exposed_pause_ms=20, exposed_requests=1000,
                              instances=instances)
    row = next(r for r in plan.plan(a, f.strategies) if r.kind == kind)
    return row, f.strategies[0]


class OutcomesTest(unittest.TestCase):
    def test_classify(self):
        self.assertEqual([classify(*a) for a in [(200, ""), ("409", "sold_out"), (409, "busy"),
                                                 (503, "outcome_unknown"), (503, "overloaded"),
                                                 (503, "timeout"), (503, "shutting_down"),
                                                 (409, "other"), ("", "")]],
                         ["sold", "sold_out", "busy", "outcome_unknown", "errors", "errors",
                          "errors", "errors", "errors"])

    def test_error_detail_by_word(self):
        o = Outcomes()
        o.add(503, "overloaded", 3)
        o.add(502, "none")
        o.add("", "", 2, what="socket read (wrk)")
        o.add(503, "outcome_unknown", 4)
        self.assertEqual((o["errors"], o["outcome_unknown"], o.requests), (6, 4, 10))
        self.assertEqual(o.detail(), "503 overloaded x3; socket read (wrk) x2; 502 x1")

    def test_ledger_rule(self):
        self.assertIsNone(ledger_problem(10, 0, 1, 10))
        self.assertIsNone(ledger_problem(10, 3, 1, 12))
        self.assertIsNone(ledger_problem(10, 3, 2, 26))
        self.assertIn("store sold 14", ledger_problem(10, 3, 1, 14))
        self.assertIn("store sold 9", ledger_problem(10, 3, 1, 9))
        self.assertIsNotNone(ledger_problem(10, 0, 1, None))


class CompareVerdictTest(unittest.TestCase):
    def verdict(self, entry, res, account, kind="normal", instances=1):
        row, s = row_of(entry, kind, instances)
        return gate.compare_verdict(row, s, res, account, 1, SETTINGS)

    def test_safe_row(self):
        v = self.verdict(strategy("a"), results(sold=100, sold_out=100), acct(100))
        self.assertEqual(v[0], "pass")
        v = self.verdict(strategy("a"), results(sold=100, sold_out=100), acct(103, oversold=3))
        self.assertEqual(v, ("fail", "claims safe, but oversold 3, lost 0"))

    def test_outcome_unknown_may_have_sold(self):
        entry = strategy("a", contention="retries")
        self.assertEqual(self.verdict(entry, results(sold=98, unknown=2, sold_out=100),
                                      acct(99))[0], "pass")
        v = self.verdict(entry, results(sold=98, unknown=2, sold_out=100), acct(97))
        self.assertEqual(v[0], "fail")
        self.assertIn("ledger", v[1])

    def test_ledger_is_checked_for_unsafe_rows_too(self):
        entry = strategy("u", safe=False, contention="none")
        v = self.verdict(entry, results(sold=50, sold_out=150), acct(49))
        self.assertEqual(v[0], "fail")

    def test_waits_busy_only_past_lock_wait(self):
        waits = strategy("w", contention="waits")
        early = results(sold=100, busy=5, sold_out=95, fastest_busy_ms=120)
        self.assertIn("lock_wait_ms", self.verdict(waits, early, acct(100))[1])
        late = results(sold=100, busy=5, sold_out=95, fastest_busy_ms=5003)
        self.assertEqual(self.verdict(waits, late, acct(100))[0], "pass")
        retries = strategy("r", contention="retries")
        self.assertEqual(self.verdict(retries, early, acct(100))[0], "pass")

    def test_a_safe_lease_may_refuse_a_stale_holder_with_busy(self):
        tokens = strategy("t", lease={"busy_holder": "safe", "paused_holder": "safe"})
        refused = results(sold=1, busy=19, fastest_busy_ms=205)
        self.assertEqual(self.verdict(tokens, refused, acct(1, initial=10), kind="lease")[0],
                         "pass")

    def test_waits_sells_every_unit_when_demand_exceeds_stock(self):
        v = self.verdict(strategy("w"), results(sold=90, sold_out=110), acct(90))
        self.assertEqual(v[0], "fail")
        self.assertIn("left unsold", v[1])

    def test_a_split_qty_row_may_leave_what_no_segment_holds_when_qty_is_above_1(self):
        split = dict(strategy("s", store="segments", needs=["redis"]), undersells="split_qty")
        row, s = row_of(split, "normal", 1)
        left = results(sold=45, sold_out=155)
        self.assertEqual(gate.compare_verdict(row, s, left, acct(90), 2, SETTINGS)[0], "pass")
        v = gate.compare_verdict(row, s, results(sold=90, sold_out=110), acct(90), 1, SETTINGS)
        self.assertIn("left unsold", v[1])  # qty 1: every unit must sell

    def test_exposed_row_must_race(self):
        entry = strategy("u", safe=False, contention="none")
        raced = self.verdict(entry, results(sold=120, sold_out=80), acct(120, initial=100,
                                                                         oversold=20, lost=30),
                             kind="exposed")
        self.assertEqual(raced[0], "pass")
        calm = self.verdict(entry, results(sold=100, sold_out=100), acct(100), kind="exposed")
        self.assertEqual(calm[0], "fail")
        self.assertIn("did not show", calm[1])
        self.assertEqual(self.verdict(entry, results(sold=100, sold_out=100), acct(100))[0], "pass")

    def test_no_results_or_no_contract_answer(self):
        self.assertEqual(self.verdict(strategy("a"), results(), acct(0))[0], "fail")
        all_errors = results(errors=[(503, "overloaded")] * 5)
        self.assertIn("no request", self.verdict(strategy("a"), all_errors, acct(0))[1])
        self.assertIn("accounting", self.verdict(strategy("a"), results(sold=1), None)[1])

    def test_calibration(self):
        row, _ = row_of(strategy("a"), "calibration")
        self.assertEqual(row.label, "calibration /ping")
        res = results(sold=500, rps=3000.0)
        res.reply_bytes = 150
        verdict, reason = gate.compare_verdict(row, None, res, None, 1, SETTINGS)
        self.assertEqual(verdict, "pass")
        self.assertIn("150 bytes a reply", reason)
        self.assertEqual(gate.compare_verdict(row, None, results(errors=[(404, "not_found")]),
                                              None, 1, SETTINGS)[0], "fail")


class BenchAndBoundTest(unittest.TestCase):
    def test_bench_verdict(self):
        o = Outcomes()
        o.add(200, "", 1000)
        self.assertEqual(gate.bench_verdict(True, o, acct(1010, initial=10**9), 1)[0], "pass")
        self.assertEqual(gate.bench_verdict(True, o, acct(1010, initial=10**9, lost=4), 1)[0],
                         "fail")
        self.assertEqual(gate.bench_verdict(False, o, acct(1010, initial=10**9, lost=4), 1)[0],
                         "pass")
        self.assertIn("ledger", gate.bench_verdict(True, o, acct(990, initial=10**9), 1)[1])
        self.assertEqual(gate.bench_verdict(True, Outcomes(), acct(0), 1)[0], "fail")

    def test_driver_bound_within_20_percent(self):
        rows = [{"kind": "calibration", "throughput_rps": 1000.0},
                {"kind": "normal", "throughput_rps": 850.0},
                {"kind": "normal", "throughput_rps": 800.0},
                {"kind": "normal", "throughput_rps": 799.0},
                {"kind": "lease", "throughput_rps": None}]
        self.assertEqual(gate.mark_driver_bound(rows, 1000.0), [])
        self.assertEqual([r["driver_bound"] for r in rows], [None, True, True, False, None])
        self.assertEqual(rows[1]["throughput_vs_ceiling"], 0.85)

    def test_a_row_within_the_noise_above_the_ceiling_is_driver_bound(self):
        rows = [{"kind": "calibration", "throughput_rps": 1000.0},
                {"kind": "normal", "throughput_rps": 1100.0},
                {"kind": "normal", "throughput_rps": 500.0}]
        self.assertEqual(gate.mark_driver_bound(rows, 1000.0), [])
        self.assertEqual([r["driver_bound"] for r in rows], [None, True, False])
        self.assertEqual(rows[1]["throughput_vs_ceiling"], 1.1)

    def test_a_row_beyond_the_noise_makes_the_ceiling_suspect(self):
        # issue 49: a calibration on a 10 KB reply ran at 623 req/s, safe rows at 1,506
        rows = [{"label": "calibration /ping", "kind": "calibration", "throughput_rps": 623.0},
                {"label": "alpha", "kind": "normal", "throughput_rps": 1506.0},
                {"label": "beta", "kind": "normal", "throughput_rps": 1446.0},
                {"label": "gamma", "kind": "normal", "throughput_rps": 600.0},
                {"label": "nolock exposed", "kind": "exposed", "throughput_rps": 90.0}]
        beaten = gate.mark_driver_bound(rows, 623.0)
        self.assertEqual([r["label"] for r in beaten], ["alpha", "beta"])
        # no row is called driver-bound against a ceiling that does not hold...
        self.assertEqual([r["driver_bound"] for r in rows], [None] * 5)
        # ...and every row still says how it stood against it
        self.assertEqual([r["throughput_vs_ceiling"] for r in rows], [1.0, 2.42, 2.32, 0.96, 0.14])
        said = gate.ceiling_text(beaten)
        self.assertIn("suspect: 2 row(s) beat it by more than 10%", said)
        self.assertLess(said.index("alpha 2.42x"), said.index("beta 2.32x"))

    def test_every_calibration_is_measured_against_the_ceiling_and_none_is_bound(self):
        rows = [{"kind": "calibration", "throughput_rps": 1000.0},
                {"kind": "normal", "throughput_rps": 900.0},
                {"kind": "calibration", "throughput_rps": 800.0}]
        gate.mark_driver_bound(rows, 1000.0)
        self.assertEqual([r["throughput_vs_ceiling"] for r in rows], [1.0, 0.9, 0.8])
        self.assertEqual([r["driver_bound"] for r in rows], [None, True, None])

    def test_the_comparison_judges_against_the_better_calibration(self):
        def row(label, kind, rps, verdict="pass"):
            return {"label": label, "kind": kind, "throughput_rps": rps, "verdict": verdict,
                    "reason": "r", "reply_bytes": 193}
        rows = [row("calibration /ping", "calibration", 600.0), row("alpha", "normal", 700.0),
                row("beta", "normal", 400.0), row("calibration /ping again", "calibration", 680.0)]
        said = compare.judge_ceiling(rows)
        self.assertEqual((said["driver_ceiling_rps"], said["driver_ceiling_samples_rps"]),
                         (680.0, [600.0, 680.0]))
        self.assertTrue(said["driver_ceiling_holds"])  # 700 / 680 = 1.03: within the noise
        self.assertEqual([r["driver_bound"] for r in rows], [None, True, False, None])
        self.assertIn("the better of 600 and 680", compare.ceiling_line(rows, said))
        rows[1]["throughput_rps"] = 800.0  # 1.18: the ceiling does not hold
        said = compare.judge_ceiling(rows)
        self.assertEqual((said["driver_ceiling_holds"], said["driver_ceiling_beaten_by"]),
                         (False, {"alpha": 1.18}))
        self.assertIn("suspect", rows[3]["reason"])
        self.assertIn("suspect: 1 row(s)", compare.ceiling_line(rows, said))
        self.assertEqual([r["driver_bound"] for r in rows], [None] * 4)

    def test_no_ceiling_marks_nothing(self):
        rows = [{"kind": "normal", "throughput_rps": 900.0}]
        self.assertEqual(gate.mark_driver_bound(rows, None), [])
        self.assertEqual((rows[0]["driver_bound"], rows[0]["throughput_vs_ceiling"]), (None, None))


class MeanBatchTest(unittest.TestCase):
    def test_sales_per_batch_between_two_readings(self):
        self.assertEqual(mean_batch((100.0, 10.0), (1100.0, 50.0)), 25.0)
        self.assertIsNone(mean_batch((100.0, 10.0), (100.0, 10.0)))  # no batch meanwhile
        self.assertIsNone(mean_batch(None, (5.0, 1.0)))  # the strategy does not batch

    def test_order_subjects_hold_and_claim_safety_with_several_instances(self):
        rows = [dict(strategy("a"), orders=False),
                dict(strategy("b", safe_multi=False), orders=True),
                dict(strategy("c"), orders=True), dict(strategy("d"), orders=True),
                dict(strategy("e", store="redis"), orders=True)]
        chosen = order_subjects(facts.parse(document(rows)).strategies)
        self.assertEqual([s.name for s in chosen], ["c", "e"])

    def test_order_problem(self):
        settled = {"paid": 500, "held": 0, "returned": 0, "oversold": 0, "lost_updates": 0}
        self.assertIsNone(order_problem(500, settled))
        self.assertEqual(order_problem(490, dict(settled, held=10)),
                         "store paid 500 != 490 orders paid; held 10")
        self.assertIn("could not be read", order_problem(500, None))


if __name__ == "__main__":
    unittest.main()
