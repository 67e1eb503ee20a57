"""lab.client.facts and lab.judges.plan: the strategies' facts from a /strategies document, and the
comparison rows planned from them (names here are made up: nothing is known by name)."""

import types
import unittest

from fakestockd import document, strategy
from lab.base.common import SetupError
from lab.client import facts
from lab.judges import plan

LEASE_BOTH_OVERSELL = {"busy_holder": "oversells", "paused_holder": "oversells"}
LEASE_WATCHDOG = {"busy_holder": "safe", "paused_holder": "oversells"}


def args(**over):
    base = dict(threads=20, loops=10, stock=100, hold_ms=0, exposed_hold_ms=20, exposed_ttl_ms=5,
                exposed_pause_ms=30, exposed_requests=1000, instances=1)
    base.update(over)
    return types.SimpleNamespace(**base)


def parsed(*entries):
    return facts.parse(document(list(entries)))


class FactsTest(unittest.TestCase):
    def test_parse_keeps_the_fields(self):
        f = parsed(strategy("alpha", lease=LEASE_WATCHDOG, needs=["mysql", "redis"]),
                   strategy("beta", store="redis", safe=False, contention="none"))
        a, b = f.strategies
        self.assertEqual((a.name, a.store, a.contention, a.lease), ("alpha", "mysql", "waits",
                                                                    LEASE_WATCHDOG))
        self.assertEqual((b.safe_for(1), b.exposed_by), (False, ["hold_ms"]))
        self.assertEqual(f.needs([a, b]), ["mysql", "redis"])
        self.assertEqual(f.settings["lock_wait_ms"], 5000)

    def test_missing_fields_are_an_error_naming_them(self):
        entry = strategy("alpha")
        del entry["contention"], entry["lease"]
        with self.assertRaises(SetupError) as e:
            facts.parse(document([entry]))
        self.assertIn("contention, lease", str(e.exception))
        self.assertIn("does not publish", str(e.exception))

    def test_unusable_values_are_an_error(self):
        for field, value in (("contention", "sometimes"), ("safe_single", "yes"),
                             ("lease", {"busy_holder": "maybe", "paused_holder": "safe"}),
                             ("exposed_by", ["colour"]), ("needs", "mysql")):
            entry = dict(strategy("alpha"), **{field: value})
            with self.subTest(field=field), self.assertRaises(SetupError) as e:
                facts.parse(document([entry]))
            self.assertIn(field, str(e.exception))

    def test_the_failover_fact_of_rows_on_redis(self):
        f = parsed(strategy("alpha"), strategy("beta", store="redis", failover="loses_sales"),
                   strategy("gamma", needs=["mysql", "redis"], failover="two_holders"))
        self.assertEqual([s.failover for s in f.strategies], [None, "loses_sales", "two_holders"])

    def test_the_cluster_fact_of_rows_on_mysql(self):
        f = parsed(strategy("alpha", cluster="conflicts_at_commit"),
                   strategy("beta", store="redis"))
        self.assertEqual([s.cluster for s in f.strategies], ["conflicts_at_commit", None])

    def test_an_unknown_cluster_fact_is_an_error(self):
        with self.assertRaises(SetupError) as e:
            parsed(strategy("alpha", cluster="mostly"))
        self.assertIn("unusable cluster", str(e.exception))

    def test_an_unknown_failover_fact_is_an_error(self):
        with self.assertRaises(SetupError) as e:
            parsed(strategy("alpha", store="redis", failover="sometimes"))
        self.assertIn("unusable failover", str(e.exception))

    def test_unsafe_without_exposed_by_is_an_error(self):
        with self.assertRaises(SetupError) as e:
            parsed(strategy("alpha", safe=False, exposed_by=[]))
        self.assertIn("exposed_by", str(e.exception))

    def test_missing_lock_wait_setting_is_an_error(self):
        doc = document([strategy("alpha")])
        del doc["settings"]["lock_wait_ms"]
        with self.assertRaises(SetupError):
            facts.parse(doc)

    def test_select_and_first_safe_per_store(self):
        f = parsed(strategy("u1", safe=False), strategy("m1", safe=True, safe_multi=False),
                   strategy("m2"), strategy("r0", store="redis", safe=False),
                   strategy("r1", store="redis"))
        self.assertEqual([s.name for s in f.select(["r1", "u1"])], ["r1", "u1"])
        self.assertEqual(len(f.select([])), 5)
        with self.assertRaises(SetupError):
            f.select(["nope"])
        self.assertEqual([s.name for s in f.first_safe_per_store(1)], ["m1", "r1"])
        self.assertEqual([s.name for s in f.first_safe_per_store(2)], ["m2", "r1"])


class PlanTest(unittest.TestCase):
    def rows(self, *entries, **over):
        return plan.plan(args(**over), parsed(*entries).strategies)

    def test_calibration_first_and_last_then_a_safe_strategy_once(self):
        rows = self.rows(strategy("alpha"))
        self.assertEqual([(r.label, r.kind) for r in rows],
                         [("calibration /ping", "calibration"), ("alpha", "normal"),
                          ("calibration /ping again", "calibration")])
        self.assertIsNone(rows[0].strategy)
        self.assertEqual(rows[0].params, rows[-1].params)
        self.assertTrue(rows[1].expected_safe)

    def test_exposed_row_uses_exposed_by(self):
        rows = self.rows(strategy("gamma", safe=False, exposed_by=["hold_ms", "pause_ms"]))
        normal, exposed = rows[1], rows[2]
        self.assertFalse(normal.expected_safe)
        self.assertEqual(exposed.label, "gamma exposed")
        self.assertEqual(exposed.params, {"hold_ms": 20, "ttl_ms": 0, "pause_ms": 30})
        self.assertFalse(exposed.expected_safe)
        self.assertEqual((exposed.loops, exposed.stock), (10, 100))

    def test_exposed_row_size_capped(self):
        rows = self.rows(strategy("gamma", safe=False, exposed_by=["ttl_ms"]), threads=100,
                         loops=50, stock=5000, exposed_requests=1000)
        exposed = rows[2]
        self.assertEqual((exposed.loops, exposed.stock), (10, 500))
        self.assertEqual(exposed.params, {"hold_ms": 0, "ttl_ms": 5, "pause_ms": 0})

    def test_instances_choose_the_claim(self):
        entry = strategy("local", safe=True, safe_multi=False, exposed_by=["hold_ms"])
        self.assertEqual([r.kind for r in self.rows(entry)][:-1], ["calibration", "normal"])
        self.assertEqual([r.kind for r in self.rows(entry, instances=2)][:-1],
                         ["calibration", "normal", "exposed"])

    def test_lease_rows_from_the_lease_field(self):
        rows = self.rows(strategy("leased", lease=LEASE_WATCHDOG))
        hold, pause = rows[2], rows[3]
        self.assertEqual((hold.label, hold.kind, hold.expected_safe),
                         ("leased hold>ttl", "lease", True))
        self.assertEqual(hold.params, {"hold_ms": 300, "ttl_ms": 100, "pause_ms": 0})
        self.assertEqual((pause.label, pause.expected_safe), ("leased pause>ttl", False))
        self.assertEqual(pause.params, {"hold_ms": 0, "ttl_ms": 100, "pause_ms": 300})
        self.assertEqual((hold.loops, hold.stock), (1, 10))

    def test_a_lease_that_oversells_exposes_an_unsafe_strategy(self):
        entry = strategy("shaky", safe=False, lease=LEASE_WATCHDOG,
                         exposed_by=["hold_ms", "ttl_ms"])
        self.assertEqual([r.label for r in self.rows(entry)][:-1],
                         ["calibration /ping", "shaky", "shaky pause>ttl"])
        both = strategy("brittle", safe=False, lease=LEASE_BOTH_OVERSELL,
                        exposed_by=["hold_ms", "ttl_ms"])
        self.assertEqual([r.label for r in self.rows(both)][2:-1],
                         ["brittle hold>ttl", "brittle pause>ttl"])

    def test_a_lease_that_holds_is_judged_only_where_the_strategy_claims_safety(self):
        fenced = {"busy_holder": "safe", "paused_holder": "safe"}
        safe_here = strategy("tokens", lease=fenced)
        self.assertEqual([r.expected_safe for r in self.rows(safe_here)][2:-1], [True, True])
        local = strategy("local", safe=True, safe_multi=False, lease=fenced,
                         exposed_by=["hold_ms"])
        self.assertEqual([r.label for r in self.rows(local, instances=2)][:-1],
                         ["calibration /ping", "local", "local exposed"])


if __name__ == "__main__":
    unittest.main()
