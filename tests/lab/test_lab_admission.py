"""The admission run's judgement, without a stack: which sold_outs are undersell, the
options each mode gives stockd, and each row's verdict."""

import unittest

from lab.drivers.load import Answer
from lab.runs import admission


def answer(start, end, status, word=""):
    return Answer(start, end, status, word)


class AdmissionTest(unittest.TestCase):
    def test_a_sold_out_before_a_later_sale_is_undersell(self):
        answers = [answer(0.0, 0.1, 200), answer(0.2, 0.3, 409, "sold_out"),
                   answer(0.4, 0.5, 200), answer(0.45, 0.6, 409, "sold_out"),
                   answer(0.7, 0.8, 409, "sold_out")]
        # Only the first: the second overlaps the last sale, the third follows it.
        self.assertEqual(admission.undersold(answers), 1)
        self.assertEqual(admission.undersold([answer(0, 1, 409, "sold_out")]), 0)

    def test_each_mode_its_options(self):
        args = admission.parse_args(["--rate", "50", "--burst", "5", "--recheck-ms", "20"])
        self.assertEqual(admission.mode_options("plain", args), [])
        self.assertEqual(admission.mode_options("bucket", args),
                         ["--admit-rate=50", "--admit-burst=5"])
        self.assertEqual(admission.mode_options("bucket+flag", args),
                         ["--admit-rate=50", "--admit-burst=5", "--sold-out-flag=1",
                          "--sold-out-recheck-ms=20"])

    def test_unknown_modes_are_refused(self):
        with self.assertRaises(SystemExit):
            admission.parse_args(["--modes", "plain,gate"])

    def row(self, **over):
        r = {"oversold": 0, "ledger": None, "failed": 0, "undersell": 0,
             "restock_seen_ms": 40, "restock_undersell": 0, "throttled": 3, "from_memory": 9}
        r.update(over)
        return r

    def test_a_row_passes_only_when_its_mode_acted_and_nothing_was_lost(self):
        r = self.row()
        admission.judge(r, "bucket+flag")
        self.assertEqual((r["verdict"], r["reason"]), ("pass", ""))
        for over, mode, why in ((dict(oversold=2), "plain", "oversold 2"),
                                (dict(oversold=None), "plain", "no accounting"),
                                (dict(undersell=4), "flag", "4 buyers refused"),
                                (dict(restock_seen_ms=None), "flag", "nothing sold after"),
                                (dict(restock_undersell=1), "flag", "after the restock was seen"),
                                (dict(throttled=0), "bucket", "the bucket never refused"),
                                (dict(from_memory=0), "flag", "the flag never answered")):
            r = self.row(**over)
            admission.judge(r, mode)
            self.assertEqual(r["verdict"], "fail")
            self.assertIn(why, r["reason"])


if __name__ == "__main__":
    unittest.main()
