"""lab.judges.settlement: the reconciliation of the 200s' order ids against MySQL's rows, and
the settles fact the comparison judges a stream row by."""

import unittest

from fakestockd import document, strategy
from lab.base.common import SetupError
from lab.client import facts
from lab.judges import settlement


class ReconcileTest(unittest.TestCase):
    def test_every_200_once_passes(self):
        r = settlement.reconcile(["a-1", "a-2"], 0, {"a-1": 1, "a-2": 1})
        self.assertEqual((r["missing"], r["duplicated"], r["extra"], r["verdict"]),
                         (0, 0, 0, "pass"))

    def test_drift_is_counted_not_repaired(self):
        r = settlement.reconcile(["a-1", "a-2", "a-3"], 0, {"a-1": 2, "a-3": 1, "b-9": 1})
        self.assertEqual((r["missing"], r["duplicated"], r["extra"]), (1, 1, 1))
        self.assertEqual(r["verdict"], "fail")

    def test_an_extra_order_needs_an_unknown_answer(self):
        self.assertEqual(settlement.reconcile(["a-1"], 1, {"a-1": 1, "x": 1})["verdict"], "pass")
        self.assertEqual(settlement.reconcile(["a-1"], 0, {"a-1": 1, "x": 1})["verdict"], "fail")

    def test_an_order_id_seen_twice_by_clients_is_a_duplicate(self):
        self.assertEqual(settlement.reconcile(["a-1", "a-1"], 0, {"a-1": 1})["duplicated"], 1)


class SettlesFactTest(unittest.TestCase):
    def test_settles_is_read_and_checked(self):
        row = strategy("streamed", store="redis")
        row["settles"] = "async"
        f = facts.parse(document([row, strategy("plain")]))
        self.assertEqual([s.settles for s in f.strategies], ["async", None])
        row["settles"] = "later"
        with self.assertRaises(SetupError):
            facts.parse(document([row]))


if __name__ == "__main__":
    unittest.main()
