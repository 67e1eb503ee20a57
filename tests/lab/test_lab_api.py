"""lab.client.api and the comparison's and the bench's refusals, against a fake stockd over
real HTTP: instances counted by X-Stockd-Instance, the admin token on resets, memory
from /metrics per instance, and the one-line exit 2 when a run cannot be made."""

import contextlib
import io
import os
import tempfile
import unittest

from fakestockd import FakeStockd, document, strategy
from lab.base.common import SetupError, make_out_dir
from lab.client import facts
from lab.client.api import Api, wait_reset_seen
from lab.runs import bench, compare

DOC = document([strategy("alpha"), strategy("beta", store="redis", needs=["redis"])])


def run_main(main, argv, env=None):
    """(exit status, stderr) of a lab main()."""
    err = io.StringIO()
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(argv)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return status, err.getvalue()


class ApiTest(unittest.TestCase):
    def test_instances_counted_by_header(self):
        with FakeStockd(DOC, instances=["h:1", "h:2"]) as fake:
            api = Api("127.0.0.1", fake.port)
            self.assertEqual(compare.check_instances(api, 2), ["h:1", "h:2"])
            with self.assertRaises(SetupError) as e:
                compare.check_instances(api, 1)
            self.assertIn("told INSTANCES=1, but 2 distinct", str(e.exception))
        with FakeStockd(DOC, instances=[]) as fake:
            with self.assertRaises(SetupError) as e:
                compare.check_instances(Api("127.0.0.1", fake.port), 1)
            self.assertIn("without an X-Stockd-Instance header", str(e.exception))

    def test_reset_carries_the_admin_token(self):
        with FakeStockd(DOC, token="s3cret") as fake:
            self.assertIsNone(Api("127.0.0.1", fake.port, token="s3cret").reset(1001, 10))
            err = Api("127.0.0.1", fake.port).reset(1001, 10)
            self.assertIn("401", err)
            self.assertIn("STOCKD_ADMIN_TOKEN", err)
            self.assertEqual(fake.resets, ["Bearer s3cret", None])

    def test_memory_per_instance_from_metrics(self):
        with FakeStockd(DOC, instances=["h:1", "h:2"], rss=64 << 20) as fake:
            by = Api("127.0.0.1", fake.port).memory_by_instance(2)
        self.assertEqual(by, {"h:1": 65536, "h:2": 65536})

    def test_account_and_strategies(self):
        with FakeStockd(DOC) as fake:
            api = Api("127.0.0.1", fake.port)
            self.assertEqual(api.strategies().body, DOC)
            api.reset(7, 5)
            api.call("GET", "/stock/deduct/beta?product=7")
            self.assertEqual(api.account(7, "redis")["sold"], 1)
            self.assertEqual(api.account(7, "mysql")["sold"], 0)

    def test_needs_checked_against_health(self):
        f = facts.parse(DOC)
        with FakeStockd(DOC, backends={"mysql": "up", "redis": "down"}) as fake:
            api = Api("127.0.0.1", fake.port)
            facts.check_needs(api, f, f.select(["alpha"]))
            with self.assertRaises(SetupError) as e:
                facts.check_needs(api, f, f.strategies)
            self.assertIn("need redis", str(e.exception))


class RefusalTest(unittest.TestCase):
    def test_missing_facts_exit_2(self):
        entry = strategy("alpha")
        del entry["exposed_by"]
        with FakeStockd(document([entry])) as fake, tempfile.TemporaryDirectory() as d:
            for main in (compare.main, bench.main):
                status, err = run_main(main, ["--port", str(fake.port), "--results-dir", d])
                self.assertEqual(status, 2)
                self.assertIn("no exposed_by", err)
                self.assertNotIn("Traceback", err)

    def test_other_number_of_instances_exit_2(self):
        with FakeStockd(DOC, instances=["h:1", "h:2"]) as fake, tempfile.TemporaryDirectory() as d:
            status, err = run_main(compare.main, ["--port", str(fake.port), "--results-dir", d,
                                                  "--instances", "1"])
            self.assertEqual(status, 2)
            self.assertEqual(len([l for l in err.splitlines() if "error:" in l]), 1)
            self.assertIn("refusing to judge", err)
            self.assertEqual(os.listdir(d), [])

    def test_unwritable_results_exit_2(self):
        with FakeStockd(DOC) as fake, tempfile.NamedTemporaryFile() as f:
            status, err = run_main(compare.main, ["--port", str(fake.port),
                                                  "--results-dir", f.name + "/results"])
            self.assertEqual(status, 2)
            self.assertIn("cannot write results under", err)
            self.assertNotIn("Traceback", err)
            with self.assertRaises(SetupError):
                make_out_dir(f.name + "/results")


class Node:
    """An instance whose node shows a product's reset after `late` reads."""

    def __init__(self, late, name):
        self.late, self.name = late, name

    def where(self):
        return self.name

    def account(self, product, store):
        self.late -= 1
        return {"remaining": 5 if self.late < 0 else 1, "sold": 0}


class ResetSeenTest(unittest.TestCase):
    def test_the_fault_waits_until_every_node_holds_the_reset(self):
        nodes = [Node(0, "a"), Node(3, "b")]
        wait_reset_seen(nodes, 1, 5, "mysql", seconds=5)
        self.assertEqual([n.late for n in nodes], [-4, -1])  # four reads each

    def test_a_node_that_never_does_is_named(self):
        with self.assertRaisesRegex(SetupError, r"not read through b within 0.2 s"):
            wait_reset_seen([Node(0, "a"), Node(10**6, "b")], 1, 5, "mysql", seconds=0.2)


if __name__ == "__main__":
    unittest.main()
