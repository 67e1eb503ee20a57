"""lab.judges.linearize, the history checker: the hand-made histories of tests/lab/histories.json
(linearizable and not, mixed qty, pending requests, unknown outcomes, sold_out answers
against the real-time order), the same fixtures through web/linearize.js under node,
and large histories decided within seconds."""

import json
import os
import random
import shutil
import subprocess
import time
import unittest

from lab.base.common import REPO
from lab.judges import linearize

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "histories.json")
JS = os.path.join(REPO, "web", "linearize.js")


def cases():
    with open(FIXTURES, encoding="utf-8") as f:
        return json.load(f)["cases"]


def simulated(n, clients, stock, qtys=(1,), remaining=True, seed=7):
    """A history that is linearizable by construction: each op takes effect at an
    instant inside its interval, in instant order, on a real counter."""
    rng = random.Random(seed)
    free, placed = [0] * clients, []
    for i in range(n):
        c = i % clients
        invoke = free[c] + rng.randint(0, 3)
        at = invoke + rng.randint(0, 20)
        complete = at + rng.randint(0, 20)
        free[c] = complete + 1
        placed.append((at, i, invoke, complete))
    ops, s = [], stock
    for at, i, invoke, complete in sorted(placed):
        q = rng.choice(qtys)
        op = {"id": i, "invoke": invoke, "complete": complete, "qty": q,
              "outcome": "ok" if s >= q else "sold_out"}
        s -= q if s >= q else 0
        if remaining:
            op["remaining"] = s
        ops.append(op)
    return ops, s


class Fixtures(unittest.TestCase):
    def test_every_fixture(self):
        for c in cases():
            with self.subTest(c["name"]):
                r = linearize.check(c["initial"], c["ops"])
                self.assertEqual(r["linearizable"], c["linearizable"], r)
                if c["linearizable"]:
                    self.assertIsNone(r["violation"])
                for name in c.get("violation_names", []):
                    self.assertIn(name, r["violation"])

    def test_fixtures_cover_the_cases(self):
        ops = [o for c in cases() for o in c["ops"]]
        self.assertTrue(any(o["complete"] is None for o in ops))
        self.assertTrue({"ok", "sold_out", "unknown", "failed"} <= {o["outcome"] for o in ops})
        self.assertTrue(any(len({o["qty"] for o in c["ops"]}) > 1 for c in cases()))
        verdicts = {c["linearizable"] for c in cases()}
        self.assertEqual(verdicts, {True, False})

    def test_bad_op_is_refused(self):
        with self.assertRaises(ValueError):
            linearize.check(1, [{"invoke": 0, "complete": 1, "qty": 1, "outcome": "sold"}])
        with self.assertRaises(ValueError):
            linearize.check(1, [{"invoke": 0, "complete": 1, "qty": 0, "outcome": "sold_out"}])


class Large(unittest.TestCase):
    def timed(self, initial, ops, seconds=5):
        t0 = time.monotonic()
        r = linearize.check(initial, ops)
        self.assertLess(time.monotonic() - t0, seconds)
        return r

    def test_thousands_of_linearizable_ops(self):
        for qtys, remaining in (((1,), True), ((1,), False), ((1, 2, 3), True),
                                ((1, 2, 3), False)):
            with self.subTest(qtys=qtys, remaining=remaining):
                ops, left = simulated(5000, 100, 4000, qtys, remaining)
                ops.append({"id": "final", "invoke": 10**9, "complete": 10**9, "qty": 0,
                            "outcome": "ok", "remaining": left})
                r = self.timed(4000, ops)
                self.assertIs(r["linearizable"], True, r)

    def test_lost_update_in_thousands(self):
        ops, _ = simulated(5000, 100, 6000)
        ops[4000]["remaining"] = ops[3999]["remaining"]  # two sales left the same stock
        r = self.timed(6000, ops)
        self.assertIs(r["linearizable"], False)
        self.assertIn("lost update", r["violation"])

    def test_vanished_deduction_seen_by_the_final_read(self):
        ops, left = simulated(5000, 100, 6000, remaining=False)
        ops.append({"id": "final", "invoke": 10**9, "complete": 10**9, "qty": 0,
                    "outcome": "ok", "remaining": left + 1})
        r = self.timed(6000, ops)
        self.assertIs(r["linearizable"], False)
        self.assertIn("#final", r["violation"])

    def test_a_bench_row_of_a_hundred_thousand(self):
        # a bench row: qty 1, every 200 with its remaining, a stock that never runs out
        # (tens of thousands of requests a second): the ordering proof, no search
        ops, left = simulated(100000, 64, 10**9)
        ops.append({"id": "final", "invoke": 10**12, "complete": 10**12, "qty": 0,
                    "outcome": "ok", "remaining": left})
        r = self.timed(10**9, ops, seconds=20)
        self.assertEqual((r["linearizable"], r["how"]), (True, "order"), r)
        ops[60000]["remaining"] = ops[59999]["remaining"]
        r = self.timed(10**9, ops, seconds=20)
        self.assertIs(r["linearizable"], False)
        self.assertIn("lost update", r["violation"])

    def test_too_many_to_search_says_undecided(self):
        ops, left = simulated(linearize.SEARCH_MAX + 1, 64, 10**9, qtys=(1, 2))
        ops[5]["remaining"] = None  # no proof applies: only a search could decide
        r = self.timed(10**9, ops)
        self.assertIsNone(r["linearizable"])
        self.assertIn("more than the search takes", r["undecided"])

    def test_a_window(self):
        # #2's level (9 to 8) was taken by a sale the window did not record
        ops = [{"id": 1, "invoke": 0, "complete": 5, "qty": 1, "outcome": "ok", "remaining": 9},
               {"id": 2, "invoke": 10, "complete": 20, "qty": 1, "outcome": "ok",
                "remaining": 7}]
        self.assertIs(linearize.check(10, ops)["linearizable"], False)
        self.assertIs(linearize.check(10, ops, future=15)["linearizable"], True)
        r = linearize.check(10, ops, future=25)  # too late for #2: the proof cannot tell
        self.assertIsNone(r["linearizable"])
        self.assertIn("window", r["undecided"])
        dup = [dict(o, remaining=9) for o in ops]
        self.assertIs(linearize.check(10, dup, future=15)["linearizable"], False)

    def test_a_search_that_gives_up_says_undecided(self):
        # 30 concurrent sales of 1 or 2 take at most 60 of 100: a sold_out of 50
        # cannot be explained, but only trying the orders shows it
        ops = [{"id": i, "invoke": 0, "complete": 100, "qty": 1 + i % 2, "outcome": "ok"}
               for i in range(30)]
        ops.append({"id": "x", "invoke": 50, "complete": 60, "qty": 50, "outcome": "sold_out"})
        r = linearize.check(100, ops, budget=500)
        self.assertIsNone(r["linearizable"])
        self.assertIn("gave up", r["undecided"])


class JavaScriptTwin(unittest.TestCase):
    """web/linearize.js must agree with lab/judges/linearize.py on every fixture."""

    def test_same_verdicts_under_node(self):
        node = shutil.which("node") or shutil.which("nodejs")
        if not node:
            self.skipTest("node is not installed: web/linearize.js not checked")
        script = ("const L = require(process.argv[1]);"
                  "const cases = JSON.parse(require('fs').readFileSync(process.argv[2]))"
                  ".cases;"
                  "console.log(JSON.stringify(cases.map(c => L.check(c.initial, c.ops))));")
        out = subprocess.run([node, "-e", script, os.path.abspath(JS), FIXTURES],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        for c, r in zip(cases(), json.loads(out)):
            with self.subTest(c["name"]):
                py = linearize.check(c["initial"], c["ops"])
                self.assertEqual(r["linearizable"], c["linearizable"], r)
                self.assertEqual(r["violation"], py["violation"])


if __name__ == "__main__":
    unittest.main()
