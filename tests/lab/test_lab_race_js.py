"""web/race.js's findings, under node, on hand-made races: sales answered 200 that read
the same count are named, an oversell names the sales that committed past the initial
stock in commit order, a refused write is not a lost update, and a clean race says so.
The drawing itself is checked in headless Chromium by tests/checks/lab-page-check."""

import json
import os
import shutil
import subprocess
import unittest

from lab.base.common import REPO

JS = os.path.join(REPO, "web", "race.js")

SCRIPT = """
const race = require(process.argv[1]);
const f = race.findings(JSON.parse(process.argv[2]));
console.log(JSON.stringify({words: f.words, lost: f.lost, oversold: f.oversold,
                            marked: [...f.marked].sort((a, b) => a - b)}));
"""


def sale(i, status, read=None, wrote=None, commit=None, error=None):
    t_us = {"arrival": 100 + i}
    trace = {"t_us": t_us}
    if read is not None:
        t_us["read"] = 200 + i
        trace["read"] = read
    if commit is not None:
        t_us["write"] = commit - 1
        t_us["commit"] = commit
    if wrote is not None:
        trace["wrote"] = wrote
    return {"id": i, "invoke_us": 90 + i, "complete_us": 5000 + i, "qty": 1, "status": status,
            "error": error, "trace": trace}


def race(history, initial, oversold=0, lost=0):
    return {"strategy": "unsafe-row", "initial": initial, "buyers": len(history),
            "history": history, "ledger": {"oversold": oversold, "lost_updates": lost}}


class RaceFindings(unittest.TestCase):
    def setUp(self):
        self.node = shutil.which("node")
        if not self.node:
            self.skipTest("node is not installed: web/race.js not checked")

    def findings(self, data):
        out = subprocess.run([self.node, "-e", SCRIPT, JS, json.dumps(data)], check=True,
                             capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout)

    def test_two_sales_that_read_the_same_count(self):
        f = self.findings(race([sale(0, 200, 4, 3, 1000), sale(1, 200, 4, 3, 1100),
                                sale(2, 200, 3, 2, 1200)], 4, lost=1))
        self.assertEqual(f["lost"], [{"read": 4, "ids": [0, 1]}])
        self.assertEqual(f["words"], ["#0 and #1 both read 4: 1 of their deductions vanished"])
        self.assertEqual(f["marked"], [0, 1])

    def test_an_oversell_names_the_sales_past_the_stock_in_commit_order(self):
        history = [sale(i, 200, 2, 1, 3000 - 100 * i) for i in range(4)]
        f = self.findings(race(history, 2, oversold=2, lost=3))
        self.assertEqual([o["id"] for o in f["oversold"]], [1, 0])
        self.assertEqual(f["words"][0],
                         "#0, #1, #2 and #3 all read 2: 3 of their deductions vanished")
        self.assertEqual(f["words"][1], "oversold 2 of 2 units: #1 and #0 committed after "
                                        "the stock was gone")

    def test_refused_and_sold_out_sales_are_not_lost_updates(self):
        f = self.findings(race([sale(0, 200, 5, 4, 1000), sale(1, 409, 5, error="busy"),
                                sale(2, 409, 0, error="sold_out")], 5))
        self.assertEqual(f["lost"], [])
        self.assertEqual(f["marked"], [])
        self.assertEqual(f["words"], ["no two sales read the same count; nothing oversold "
                                      "(1 sold of 5)"])

    def test_a_sale_with_no_read_is_never_grouped(self):
        f = self.findings(race([sale(0, 200, commit=1000), sale(1, 200, commit=1100)], 6))
        self.assertEqual(f["lost"], [])
        self.assertEqual(f["words"][0], "no two sales read the same count; nothing oversold "
                                        "(2 sold of 6)")


if __name__ == "__main__":
    unittest.main()
