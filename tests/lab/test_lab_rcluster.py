"""The Redis Cluster fault run's pure parts (lab/runs/redis_cluster.py): a product's slot as
Redis computes it, CLUSTER NODES read into shards, the products picked on one shard, the
rows chosen from the facts, and the verdicts of a move row and of a kill row's load."""

import unittest
from types import SimpleNamespace

from lab.base.common import SetupError
from lab.client import sources
from lab.runs import redis_cluster as rc

# CLUSTER NODES of a cluster whose first shard is failed over, slot 6000 being migrated.
NODES = """\
a1 127.0.0.1:7000@17000 master,fail - 0 0 1 disconnected
a2 127.0.0.1:7001@17001 master - 0 0 4 connected 0-5459
b1 127.0.0.1:7002@17002 myself,master - 0 0 2 connected 5461-10922 [6000->-c1]
b2 127.0.0.1:7003@17003 slave b1 0 0 2 connected
c1 127.0.0.1:7004@17004 master - 0 0 3 connected 10923-16383 [6000-<-b1] 5460
c2 127.0.0.1:7005@17005 slave c1 0 0 3 connected
""".splitlines()


def figures(**changed):
    f = {"ok": 10, "unexpected": "", "max_ms": 50.0, "ledger": "ok", "oversold": 0,
         "lost_updates": 0}
    f.update(changed)
    return f


class SlotTest(unittest.TestCase):
    def test_the_hash_tag_slot_is_redis_own(self):
        # CLUSTER KEYSLOT stock:{1001} answers 15391; {8101}: 14424 (asked of Redis 7).
        self.assertEqual(rc.key_slot(1001), 15391)
        self.assertEqual(rc.key_slot(8101), 14424)


class NodesTest(unittest.TestCase):
    def test_parse_nodes_reads_roles_failures_and_ranges(self):
        nodes = rc.parse_nodes(NODES)
        self.assertEqual(len(nodes), 6)
        self.assertTrue(nodes[7000]["failed"])
        self.assertEqual(nodes[7003], {"id": "b2", "role": "replica", "primary_id": "b1",
                                       "failed": False, "slots": []})
        self.assertEqual(nodes[7004]["slots"], [(10923, 16383), (5460, 5460)])

    def test_serving_skips_failed_primaries_and_migration_markers(self):
        nodes = rc.parse_nodes(NODES)
        self.assertEqual(rc.serving(nodes, 0), 7001)
        self.assertEqual(rc.serving(nodes, 6000), 7002)  # its source, until SETSLOT NODE
        self.assertEqual(rc.serving(nodes, 5460), 7004)
        self.assertEqual(rc.serving(nodes, 16383), 7004)
        self.assertIsNone(rc.serving({}, 0))

    def test_products_on_finds_consecutive_ids_on_one_shard(self):
        nodes = rc.parse_nodes(NODES)
        p = rc.products_on(nodes, 7004, 1000, 3)
        self.assertTrue(all(rc.serving(nodes, rc.key_slot(p + i)) == 7004 for i in range(3)))
        self.assertGreaterEqual(p, 1000)

    def test_products_on_refuses_a_shard_that_serves_nothing(self):
        with self.assertRaises(SetupError):
            rc.products_on(rc.parse_nodes(NODES), 7003, 1000, 1)


def strategy(name, failover, lock=True, needs=("mysql", "redis")):
    return SimpleNamespace(name=name, failover=failover, lock=lock, needs=list(needs))


class FakeFacts:
    def __init__(self, rows):
        self.rows = rows

    def select(self, names):
        return [s for s in self.rows if not names or s.name in names]


class ChosenTest(unittest.TestCase):
    # A lockless row, Redis rows of each fact, lock rows, and a Redlock row (quorum).
    ROWS = [strategy("r0", None, lock=False, needs=("mysql",)),
            strategy("r1", "loses_sales", lock=False, needs=("redis",)),
            strategy("r2", "loses_sales", lock=False, needs=("redis",)),
            strategy("r3", "safe", lock=False, needs=("redis",)),
            strategy("r4", "two_holders"),
            strategy("r5", "safe"),
            strategy("r6", "safe"),
            strategy("r7", "safe", needs=("mysql",))]

    def setUp(self):  # the quorum's backend by its source file, as lab.runs.failover knows it
        self.ROWS[-1].needs = ["mysql", sources.backend_name("redlock.c")]

    def test_every_row_with_a_failover_fact_but_the_quorum(self):
        args = SimpleNamespace(strategies=[], quick=False)
        names = [s.name for s in rc.chosen(FakeFacts(self.ROWS), args)]
        self.assertEqual(names, ["r1", "r2", "r3", "r4", "r5", "r6"])

    def test_quick_keeps_the_first_of_each_fact(self):
        args = SimpleNamespace(strategies=[], quick=True)
        names = [s.name for s in rc.chosen(FakeFacts(self.ROWS), args)]
        self.assertEqual(names, ["r1", "r3", "r4"])

    def test_nothing_chosen_is_a_setup_error(self):
        with self.assertRaises(SetupError):
            rc.chosen(FakeFacts(self.ROWS), SimpleNamespace(strategies=["r0"], quick=False))


class MoveVerdictTest(unittest.TestCase):
    def test_a_clean_move_passes(self):
        self.assertEqual(rc.move_problems(figures(), True, 5, 2500), [])

    def test_each_violation_is_named(self):
        why = rc.move_problems(figures(ok=0, unexpected="500 x1", max_ms=3000.0,
                                       ledger="store sold 9 != 10 answers 200 x qty 1",
                                       oversold=1), True, 0, 2500)
        self.assertEqual(len(why), 6)
        self.assertIn("answers outside the contract: 500 x1", why)

    def test_an_unsafe_row_may_oversell_but_never_lose_a_200(self):
        self.assertEqual(rc.move_problems(figures(lost_updates=3), False, 1, 2500), [])
        self.assertTrue(rc.move_problems(figures(ledger="store sold 9 != 10"), False, 1, 2500))


class LoadVerdictTest(unittest.TestCase):
    def test_a_row_that_loses_sales_may_lose_its_loads_200s(self):
        f = figures(ledger="store sold 8 != 10 answers 200 x qty 1")
        self.assertEqual(rc.load_problems(f, "loses_sales", 2500), [])
        self.assertEqual(len(rc.load_problems(f, "safe", 2500)), 1)

    def test_contract_and_bound_hold_for_every_fact(self):
        f = figures(unexpected="no answer (reset) x1", max_ms=2600.0)
        self.assertEqual(len(rc.load_problems(f, "two_holders", 2500)), 2)


if __name__ == "__main__":
    unittest.main()
