"""lab.judges.history, the two-witness gate, lab.reports.junit and the report's race section: a JTL
and the chaos driver's answers become histories on disk, the ledger and the history
must agree, junit.xml is valid against tests/junit.xsd, and report.html embeds each
race with the checker's verdict (or says that stockd lacks the race driver)."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest
from types import SimpleNamespace
from unittest import mock

from fakestockd import document, strategy
from lab.base.common import REPO
from lab.client import facts
from lab.client.outcomes import Outcomes
from lab.drivers import race_runs
from lab.drivers.load import Answer
from lab.judges import gate, history
from lab.reports import compare_report, junit, race_report
from lab.runs import bench, chaos, compare

XSD = os.path.join(REPO, "tests", "junit.xsd")

JTL_HEAD = ("timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,"
            "success,failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,"
            "IdleTime,Connect,outcome,instance,remaining\n")


def jtl_line(ts, ms, code, word, left):
    return f"{ts},{ms},deduct,{code},,t 1-1,text,true,,10,10,1,1,null,1,0,0,{word},i,{left}\n"


class UndersellsTest(unittest.TestCase):
    OPS = [{"id": 1, "invoke": 0, "complete": 1, "qty": 1, "outcome": "sold_out"},
           {"id": 2, "invoke": 2, "complete": 3, "qty": 1, "outcome": "ok"}]

    def test_a_segment_short_says_nothing_of_the_product(self):
        # a refusal while 1 unit was left, then that unit sold: not linearizable for a
        # counter, but a strict segmented row's refusal only says its segment was short
        self.assertFalse(history.judge(1, self.OPS)["history_linearizable"])
        ops = history.for_undersells(self.OPS, "any_qty", 1)
        self.assertEqual([o["outcome"] for o in ops], ["failed", "ok"])
        self.assertTrue(history.judge(1, ops)["history_linearizable"])

    def test_a_qty_1_refusal_of_the_fall_through_row_stays(self):
        self.assertIs(history.for_undersells(self.OPS, "split_qty", 1), self.OPS)
        self.assertIs(history.for_undersells(self.OPS, None, 3), self.OPS)
        ops = history.for_undersells(self.OPS, "split_qty", 2)
        self.assertEqual(ops[0]["outcome"], "failed")


class Histories(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def jtl(self, lines):
        path = os.path.join(self.dir, "row.jtl")
        with open(path, "w") as f:
            f.write(JTL_HEAD + "".join(lines))
        return path

    def test_outcomes(self):
        self.assertEqual(history.outcome_of(200, ""), "ok")
        self.assertEqual(history.outcome_of("409", "sold_out"), "sold_out")
        self.assertEqual(history.outcome_of("409", "busy"), "failed")
        self.assertEqual(history.outcome_of(503, "outcome_unknown"), "unknown")
        self.assertEqual(history.outcome_of(503, "backend_unavailable"), "failed")
        self.assertEqual(history.outcome_of("Non HTTP response code: java.net.Socket", ""),
                         "unknown")
        self.assertEqual(history.outcome_of(0, "reset"), "unknown")

    def test_jtl_lost_update_streams_to_disk_and_is_caught(self):
        path = self.jtl([jtl_line(1000, 5, 200, "none", 1), jtl_line(1001, 5, 200, "none", 1),
                         jtl_line(1010, 2, 409, "sold_out", 0),
                         jtl_line(1011, 2, 409, "busy", 1)])
        out = os.path.join(self.dir, "history.jsonl")
        ops = history.with_final_read(history.from_jtl(path, out, 1), 1, out)
        with open(out) as f:
            on_disk = [json.loads(line) for line in f]
        self.assertEqual(on_disk, ops)
        self.assertEqual(ops[0], {"id": 1, "invoke": 1000, "complete": 1006, "qty": 1,
                                  "outcome": "ok", "remaining": 1})
        self.assertNotIn("remaining", ops[3])  # busy: its remaining says nothing
        self.assertEqual(ops[-1]["id"], "final")
        h = history.judge(2, ops)
        self.assertIs(h["history_linearizable"], False)
        self.assertIn("#1", h["history"])
        self.assertIn("#2", h["history"])

    def test_jtl_without_remaining_column_still_checks(self):
        path = os.path.join(self.dir, "old.jtl")
        with open(path, "w") as f:
            f.write("timeStamp,elapsed,responseCode,outcome\n1000,5,200,none\n1001,5,200,none\n")
        ops = history.with_final_read(history.from_jtl(path, None, 1), 0)
        self.assertIs(history.judge(2, ops)["history_linearizable"], True)
        ops = history.with_final_read(history.from_jtl(path, None, 1), 1)
        self.assertIs(history.judge(2, ops)["history_linearizable"], False)

    def test_chaos_answers(self):
        answers = [Answer(1.0, 1.5, 200, "", 9), Answer(1.1, 1.2, 503, "outcome_unknown"),
                   Answer(1.3, 2.0, 0, "client timeout"), Answer(2.1, 2.2, 200, "", 7)]
        ops = history.from_answers(answers, None, 1)
        self.assertIsNone(ops[2]["complete"])
        self.assertEqual(ops[1]["outcome"], "unknown")
        # 10 units; #1 left 9, #4 left 7: one of the unknowns sold in between
        self.assertIs(history.judge(10, history.with_final_read(ops, 7))[
            "history_linearizable"], True)
        self.assertIs(history.judge(10, history.with_final_read(ops, 6))[
            "history_linearizable"], True)  # the pending one sold after #4
        self.assertIs(history.judge(10, history.with_final_read(ops, 5))[
            "history_linearizable"], False)

    def wrk_files(self, threads, end):
        prefix = os.path.join(self.dir, "history-lua-c2.wrk")
        for n, lines in threads.items():
            with open(f"{prefix}.{n}", "w") as f:
                f.write("".join(lines))
        with open(f"{prefix}.end", "w") as f:
            f.write("".join(end))
        return prefix

    def test_wrk_pass(self):
        # bench/history.lua's files: two threads, one request lost with its
        # connection, one in flight when wrk stopped, a busy answer
        prefix = self.wrk_files({1: ["100 150 200 9 -\n", "160 - 0 - -\n",
                                     "180 200 409 - busy\n"],
                                 2: ["110 140 200 8 -\n"]}, ["210 - 0 - -\n"])
        out = os.path.join(self.dir, "history.jsonl")
        ops, cut = history.from_wrk(prefix, 2, out, 1, settled=500)
        self.assertIsNone(cut)
        self.assertEqual([o["id"] for o in ops], ["1.1", "1.2", "1.3", "2.1", "end.1"])
        self.assertEqual(ops[0], {"id": "1.1", "invoke": 100, "complete": 150, "qty": 1,
                                  "outcome": "ok", "remaining": 9})
        self.assertEqual((ops[1]["outcome"], ops[1]["complete"]), ("unknown", 500))
        self.assertEqual(ops[2]["outcome"], "failed")
        ops = history.with_final_read(ops, 7, out)
        with open(out) as f:
            self.assertEqual([json.loads(line) for line in f], ops)
        self.assertIs(history.judge(10, ops)["history_linearizable"], True)  # 1 unknown sold
        self.assertIs(history.judge(10, history.with_final_read(ops[:-1], 6))[
            "history_linearizable"], True)  # both did
        self.assertIs(history.judge(10, history.with_final_read(ops[:-1], 5))[
            "history_linearizable"], False)

    def test_wrk_window(self):
        prefix = self.wrk_files({1: ["100 150 200 9 -\n", "300 350 200 5 -\n"],
                                 2: ["110 140 200 8 -\n"]}, ["cut 250\n", "cut 260\n"])
        ops, cut = history.from_wrk(prefix, 2, None, 1)
        self.assertEqual((cut, len(ops)), (250, 2))  # sent after the cut: not in it
        h = history.judge(10, ops, future=cut)
        self.assertIs(h["history_linearizable"], True)
        self.assertIn("a window: the first 2 requests", h["history"])


class BenchWitnesses(unittest.TestCase):
    """A bench strategy row against its history pass: both witnesses must agree."""

    def row(self, claim_safe, acct, pass_acct, linearizable):
        args = SimpleNamespace(warmup=0, conns=[64], duration=1, history_duration=1,
                               product=1001, host="127.0.0.1", port=1, steal_max=5.0,
                               retries=0, retry_budget=0)
        api = mock.Mock()
        api.account.return_value = acct
        api.batch_totals.return_value = None
        b = bench.Bench(args, api, None, 1, tempfile.gettempdir(), lambda text: None)
        outcomes = Outcomes()
        outcomes.add(200, "", 100)
        load = SimpleNamespace(rps=1000.0, outcomes=outcomes, p50_ms=1, p95_ms=2, p99_ms=3,
                               max_ms=4, instances={"a": 100}, requests=100)
        said = {"history": "linearizable" if linearizable else "#1.1 and #2.1 both left 9",
                "history_linearizable": linearizable, "history_ops": 101,
                "history_how": "order", "history_searched": 0, "history_s": 0.01,
                "history_rps": 900.0, "history_oversold": pass_acct["oversold"],
                "history_lost": pass_acct["lost_updates"], "pass_acct": pass_acct,
                "pass_problem": None}
        s = SimpleNamespace(name="x", store="redis", safe_for=lambda n: claim_safe)
        with mock.patch.object(bench.wrk, "run", return_value=load), \
                mock.patch.object(bench.host, "cpu_times", return_value=None), \
                mock.patch.object(bench.Bench, "history_pass", return_value=said):
            b.strategy(s)
        return b.rows[-1]

    def test_agreeing_witnesses(self):
        clean = {"sold": 100, "oversold": 0, "lost_updates": 0, "remaining": 10**9 - 100}
        raced = dict(clean, lost_updates=40)
        r = self.row(True, clean, clean, True)
        self.assertEqual((r["verdict"], r["history"]), ("pass", "linearizable"))
        r = self.row(False, raced, raced, False)  # an unsafe row that raced, seen twice
        self.assertEqual(r["verdict"], "pass", r["reason"])
        self.assertIs(r["history_linearizable"], False)

    def test_disagreeing_witnesses_fail_with_both_figures(self):
        clean = {"sold": 100, "oversold": 0, "lost_updates": 0, "remaining": 10**9 - 100}
        r = self.row(True, clean, clean, False)
        self.assertEqual(r["verdict"], "fail")
        self.assertIn("history pass: witnesses disagree: the ledger says oversold 0, lost 0",
                      r["reason"])
        self.assertIn("both left 9", r["reason"])
        r = self.row(False, clean, dict(clean, lost_updates=7), True)
        self.assertEqual(r["verdict"], "fail")
        self.assertIn("lost 7", r["reason"])
        self.assertIn("history of 101 requests is linearizable", r["reason"])


class TwoWitnesses(unittest.TestCase):
    def hist(self, said):
        return {"history_linearizable": said, "history_ops": 10,
                "history": "linearizable" if said else "#1 and #2 both left 4"}

    def test_agreement(self):
        clean = {"oversold": 0, "lost_updates": 0}
        raced = {"oversold": 2, "lost_updates": 3}
        self.assertIsNone(gate.witnesses_problem(clean, self.hist(True)))
        self.assertIsNone(gate.witnesses_problem(raced, self.hist(False)))
        self.assertIsNone(gate.witnesses_problem(raced, self.hist(None)))  # undecided
        why = gate.witnesses_problem(clean, self.hist(False))
        self.assertIn("oversold 0, lost 0", why)
        self.assertIn("#1 and #2 both left 4", why)
        why = gate.witnesses_problem(raced, self.hist(True))
        self.assertIn("oversold 2, lost 3", why)
        self.assertIn("10 requests is linearizable", why)

    def test_disagreement_fails_a_passing_row(self):
        clean = {"oversold": 0, "lost_updates": 0}
        verdict, reason = gate.with_witnesses("pass", "safe", clean, self.hist(False))
        self.assertEqual(verdict, "fail")
        self.assertIn("witnesses disagree", reason)
        self.assertEqual(gate.with_witnesses("pass", "safe", clean, self.hist(True)),
                         ("pass", "safe"))
        verdict, reason = gate.with_witnesses("fail", "ledger: x", clean, self.hist(False))
        self.assertTrue(reason.startswith("ledger: x; witnesses disagree"))


class JUnit(unittest.TestCase):
    ROWS = [{"label": "a safe row", "verdict": "pass", "reason": "safe", "duration_s": 1.5},
            {"label": "unsafe <exposed> & \"quoted\"", "verdict": "fail",
             "reason": "unsafe, but the race did not show at hold_ms=20", "duration_s": None}]

    def test_one_case_per_row_and_failure_message(self):
        text = junit.document("stockd.compare", self.ROWS, lambda r: r["label"],
                              lambda r: r["duration_s"], {"threads": 20, "skip": None})
        self.assertIn('tests="2" failures="1"', text)
        self.assertIn('message="unsafe, but the race did not show at hold_ms=20"', text)
        self.assertEqual(text.count("<testcase "), 2)

    def test_every_run_writes_it(self):
        for write in (bench.write_outputs, chaos.write_outputs, compare.write_outputs):
            with tempfile.TemporaryDirectory() as d:
                write(d, [], {})
                with open(os.path.join(d, "junit.xml")) as f:
                    self.assertIn('tests="0" failures="0"', f.read())

    def test_valid_against_the_schema(self):
        xmllint = shutil.which("xmllint")
        if not xmllint:
            self.skipTest("xmllint (libxml2-utils, scripts/deps.sh lint) is not installed")
        with tempfile.TemporaryDirectory() as d:
            path = junit.write(os.path.join(d, "junit.xml"), "stockd.compare", self.ROWS,
                               lambda r: r["label"], lambda r: r["duration_s"], {"qty": 1})
            ok = subprocess.run([xmllint, "--noout", "--schema", XSD, path],
                                capture_output=True, text=True)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            bad = os.path.join(d, "bad.xml")
            with open(bad, "w") as f:
                f.write('<testsuite name="x" tests="1"><testcase name="y"/></testsuite>')
            no = subprocess.run([xmllint, "--noout", "--schema", XSD, bad],
                                capture_output=True, text=True)
            self.assertNotEqual(no.returncode, 0)


RACE = {"strategy": "s-unsafe", "product": 1999, "initial": 2, "buyers": 2, "qty": 1,
        "history": [{"id": 0, "invoke_us": 100, "complete_us": 900, "qty": 1, "status": 200,
                     "error": None, "remaining": 1, "trace": {"read": 2, "wrote": 1}},
                    {"id": 1, "invoke_us": 120, "complete_us": 950, "qty": 1, "status": 200,
                     "error": None, "remaining": 1, "trace": {"read": 2, "wrote": 1}}],
        "ledger": {"sold": 2, "remaining": 1, "oversold": 0, "lost_updates": 1}}


class Races(unittest.TestCase):
    def facts(self):
        return facts.parse(document([strategy("s-unsafe", safe=False),
                                     strategy("s-lease", lease={"busy_holder": "oversells",
                                                                "paused_holder": "oversells"}),
                                     strategy("s-safe"),
                                     strategy("r-unsafe", store="redis", safe=False,
                                              exposed_by=["hold_ms", "ttl_ms"]),
                                     strategy("r-safe", store="redis")]))

    def test_each_unsafe_strategy_and_its_safe_counterpart(self):
        f = self.facts()
        races = race_runs.races_for(f, f.strategies, 1)
        self.assertEqual([n for n, _ in races], ["s-unsafe", "r-unsafe", "s-safe", "r-safe"])
        self.assertEqual(races[1][1], {"hold_ms": 50, "ttl_ms": 20, "pause_ms": 0})

    def test_race_checked_against_its_ledger(self):
        check = gate.race_check(RACE, race_runs.UNITS)
        self.assertIs(check["history_linearizable"], False)
        self.assertIn("#0", check["history"])
        self.assertIsNone(check["agree"])

    def test_report_embeds_the_race_or_says_it_is_missing(self):
        entry = {"strategy": "s-unsafe", "params": {"buyers": 2, "units": 2, "hold_ms": 50},
                 "race": dict(RACE, note="</script><b>"),
                 "check": gate.race_check(RACE, race_runs.UNITS)}
        html = compare_report.render([], {}, {"available": True, "note": "1 race",
                                              "races": [entry]})
        self.assertIn('<figure class="race" data-strategy="s-unsafe" '
                      'data-verdict="not linearizable">', html)
        self.assertNotIn("</script><b>", html)
        self.assertIn("StockdLinearize", html)
        missing = race_report.section({"available": False, "races": [],
                                       "note": "this stockd lacks the race driver"})
        self.assertIn("lacks the race driver", missing)


class ReportInChromium(unittest.TestCase):
    def test_the_page_checks_the_race_again(self):
        chromium = shutil.which("chromium")
        if not chromium:
            self.skipTest("chromium is not installed: the report's scripts not run")
        entry = {"strategy": "s-unsafe", "params": {"buyers": 2, "units": 2, "hold_ms": 50},
                 "race": RACE, "check": gate.race_check(RACE, race_runs.UNITS)}
        with tempfile.TemporaryDirectory() as d:
            page = os.path.join(d, "report.html")
            with open(page, "w") as f:
                f.write(compare_report.render([], {}, {"available": True, "note": "1 race",
                                                       "races": [entry]}))
            dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                  f"--user-data-dir={d}/profile", "--dump-dom",
                                  "file://" + page], capture_output=True, text=True,
                                 timeout=120).stdout
        self.assertIn('data-verdict="not linearizable" data-js-linearizable="false"', dom)


class JavaScriptRace(unittest.TestCase):
    def test_from_race_agrees_with_python(self):
        node = shutil.which("node")
        if not node:
            self.skipTest("node is not installed: web/linearize.js not checked")
        js = os.path.join(REPO, "web", "linearize.js")
        script = ("const L = require(process.argv[1]); const r = JSON.parse(process.argv[2]);"
                  "console.log(JSON.stringify(L.check(r.initial, L.fromRace(r))));")
        out = subprocess.run([node, "-e", script, os.path.abspath(js), json.dumps(RACE)],
                             capture_output=True, text=True, check=True).stdout
        py = gate.race_check(RACE, race_runs.UNITS)
        self.assertEqual(json.loads(out)["violation"], py["history"])


if __name__ == "__main__":
    unittest.main()
