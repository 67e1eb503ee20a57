"""The retrying client mode inside the runs that carry it (make failover, make
stream-chaos, make compare), without a stack: a failover row's buyers start once the
group is settled and before its fault, and their verdict folds into the row's; a row
whose fact loses acknowledged sales judges its keys by their double buys; a row that
settles later is read once its stream has drained; the comparison's buyers follow the
rows of its one JMeter run."""

import os
import tempfile
import unittest
import unittest.mock
from types import SimpleNamespace

from fakestockd import document, strategy
from lab.client import facts
from lab.drivers import jmeter
from lab.judges import plan, retries
from lab.runs import compare, failover, stream
from lab.scaffold import failover_window, retrying_mode


def keyed(**kw):
    fig = {"keys": True, "claims": True, "qty": 1, "purchases": 10, "tries": 12, "ok": 10,
           "sold": 10, "refused": 0, "gave_up": 0, "extra": 0, "disagree": 0,
           "first_tries_lost": 2, "history_linearizable": True, "history_ops": 10}
    fig.update(kw)
    return fig


class LossyVerdictTest(unittest.TestCase):
    def test_a_key_lost_with_its_sale_passes(self):
        lost = keyed(sold=7, disagree=2, history_linearizable=False, history="NOT lin")
        self.assertEqual(retries.verdict(lost)[0], retries.FAIL)
        self.assertEqual(retrying_mode.lossy_verdict(lost), (retries.PASS, ""))

    def test_a_double_buy_or_an_unanswered_purchase_still_fails(self):
        self.assertEqual(retrying_mode.lossy_verdict(keyed(sold=11, extra=1))[0], retries.FAIL)
        self.assertEqual(retrying_mode.lossy_verdict(keyed(ok=9, gave_up=1, sold=9))[0],
                         retries.FAIL)

    def test_an_unsafe_strategy_s_race_is_its_row_s(self):
        raced = keyed(history_linearizable=False, history="NOT lin")
        self.assertEqual(retrying_mode.racy_verdict(raced), (retries.PASS, ""))
        self.assertEqual(retrying_mode.racy_verdict(keyed(disagree=1))[0], retries.FAIL)
        self.assertEqual(retrying_mode.racy_verdict(keyed(sold=11, extra=1))[0], retries.FAIL)
        clients = retrying_mode.RetryingClients(None, {}, racy=True)
        self.assertIs(clients.judge, retrying_mode.racy_verdict)

    def test_keyless_figures_are_measured(self):
        self.assertEqual(retrying_mode.lossy_verdict(keyed(keys=False, extra=3))[0],
                         retries.MEASURED)

    def test_a_lossy_row_is_judged_so(self):
        figures = {"keys": keyed(sold=8), "nokeys": keyed(keys=False, extra=4)}
        clients = retrying_mode.RetryingClients(SimpleNamespace(retrying_buyers=1), {},
                                                lossy=True)
        row = clients.row(figures, clients.judge)
        self.assertEqual((row["retry_verdict"], row["double_buys_nokeys"]), (retries.PASS, 4))
        self.assertEqual(retrying_mode.RetryingClients.row(figures)["retry_verdict"],
                         retries.FAIL)

    def test_failover_defaults_wait_past_the_promotion(self):
        args = failover.parse_args(["--retrying-buyers", "2"])
        self.assertEqual((args.retrying_buyers, args.retrying_attempts,
                          args.retrying_timeout_ms), (2, 16, 2500))
        self.assertEqual(failover.parse_args([]).retrying_buyers, 0)


class Buyers:
    """A kind of buyers that bought nothing."""

    def __init__(self):
        self.purchases = []

    def stop(self):
        pass

    def join(self, seconds):
        return True

    def resolve(self):
        pass


class StreamApi:
    """GET /stock with a stream that drains after `busy` looks."""

    def __init__(self, busy):
        self.busy, self.looked = busy, []

    def wait_idle(self, seconds):
        pass

    def call(self, method, path):
        self.looked.append(path)
        self.busy -= 1
        length = 1 if self.busy >= 0 else 0
        return SimpleNamespace(status=200, body={"stream": {"length": length, "pending": 0}})

    def account(self, product, store):
        self.read = (product, store, len(self.looked))
        return {"sold": 0, "remaining": 100}


class SettlesTest(unittest.TestCase):
    def test_a_row_that_settles_later_is_read_after_the_drain(self):
        clients = retrying_mode.RetryingClients(SimpleNamespace(retrying_buyers=1,
                                                                retrying_attempts=1), {})
        clients.buyers = {"keys": Buyers(), "nokeys": Buyers()}
        clients.before = {k: {"sold": 0, "remaining": 100} for k in clients.buyers}
        clients.product, clients.store, clients.settles = 7, "mysql", True
        api = StreamApi(busy=2)
        with tempfile.TemporaryDirectory() as d, \
                unittest.mock.patch("lab.base.waiting.time.sleep"):
            row = clients.finish(api, d, "row")
        self.assertEqual(row["double_buys_keys"], 0)
        self.assertEqual(api.looked[:3], ["/stock/7"] * 3)
        self.assertEqual(api.read, (8, "mysql", len(api.looked)))

    def test_stream_chaos_declares_the_mode(self):
        args = stream.parse_args(["chaos", "--retrying-buyers", "3"])
        self.assertEqual((args.retrying_buyers, args.retrying_timeout_ms), (3, 300))


class FailoverWindowTest(unittest.TestCase):
    def window(self):
        calls = unittest.mock.Mock()
        run = failover_window.Failover.__new__(failover_window.Failover)
        run.args, run.held, run.dead = SimpleNamespace(sales=1), None, None
        run.group, run.a, run.b = calls.group, calls.a, calls.b
        run.group.settled.return_value = (1, 2)
        run.b.api.account.return_value = {"sold": 1, "oversold": 0, "lost_updates": 0}
        run.b.api.host, run.b.api.port = "127.0.0.1", 9
        run.retrying = (calls.clients, 9001, "out")
        run.fail_over = lambda *a: {}
        return run, calls

    def test_the_buyers_start_once_the_replica_caught_up_and_before_the_cut(self):
        run, calls = self.window()
        s = SimpleNamespace(name="x", store="redis")
        with unittest.mock.patch.object(failover_window, "deduct", return_value=(200, None)):
            run.sales_row(s, {}, 1, 2)
        order = [c[0] for c in calls.mock_calls]
        self.assertLess(order.index("group.wait_caught_up"), order.index("clients.start"))
        self.assertLess(order.index("clients.start"), order.index("group.hold_back"))
        calls.clients.start.assert_called_once_with("127.0.0.1", 9, run.b.api, "x", "redis",
                                                    9001)

    def test_their_verdict_folds_into_the_row_s(self):
        run, calls = self.window()
        calls.clients.finish.return_value = {"retry_verdict": retries.FAIL,
                                             "retry_reason": "1 units sold beyond one"}
        row = {"verdict": "pass", "reason": ""}
        run.retrying_figures(SimpleNamespace(name="x"), row)
        self.assertEqual(row["verdict"], retries.FAIL)
        self.assertIn("retrying clients", row["reason"])
        calls.clients.finish.assert_called_once_with(run.b.api, "out", "x")

    def test_without_buyers_nothing_changes(self):
        run, _ = self.window()
        run.retrying = None
        row = {"verdict": "pass", "reason": ""}
        run.start_retrying(SimpleNamespace(name="x", store="redis"))
        run.retrying_figures(SimpleNamespace(name="x"), row)
        self.assertEqual(row, {"verdict": "pass", "reason": ""})


class Clients:
    """RetryingClients as the comparison drives it, recorded."""

    log = []

    def __init__(self, args, claims, racy=False):
        self.buyers, self.racy = {}, racy

    def start(self, host, port, api, strategy, store, product, settles=False):
        self.buyers = {"keys": None}
        Clients.log.append(("start", strategy, store, product, settles))

    def stop(self):
        Clients.log.append(("stop",))

    def finish(self, api, out_dir, label):
        return {"retry_verdict": retries.PASS, "label": label}


FACTS = facts.parse(document([strategy("plain", store="mysql"),
                              dict(strategy("later", store="redis", safe=False),
                                   settles="async")]))


class CompareBuyersTest(unittest.TestCase):
    def buyers(self, n):
        rows = [plan.Row("calibration /ping", None, "calibration", {}, None, 1, None),
                plan.Row("plain", "plain", "normal", {}, True, 1, 10),
                plan.Row("later hold", "later", "exposed", {}, False, 1, 10)]
        c = SimpleNamespace(args=SimpleNamespace(retrying_buyers=n, host="h", port=1,
                                                 instances=1),
                            api=None, facts=FACTS, out_dir="out")
        return rows, compare.RowBuyers(c, rows, 100)

    def test_each_row_s_buyers_span_its_window_on_products_of_their_own(self):
        Clients.log = []
        with unittest.mock.patch.object(compare, "RetryingClients", Clients):
            rows, b = self.buyers(2)
            for label in ("calibration /ping", "plain", "later hold"):
                b.started(label)
            b.plan_over()
            self.assertEqual(Clients.log, [("start", "plain", "mysql", 100, False), ("stop",),
                                           ("start", "later", "mysql", 102, True), ("stop",)])
            self.assertEqual(b.finish(rows[2])["label"], "later_hold")
            self.assertEqual(b.finish(rows[0]), {})
            self.assertEqual([b.clients[r.label].racy for r in rows[1:]], [False, True])

    def test_a_row_whose_buyers_never_started_fails(self):
        with unittest.mock.patch.object(compare, "RetryingClients", Clients):
            rows, b = self.buyers(2)
            self.assertEqual(b.finish(rows[1])["retry_verdict"], retries.FAIL)

    def test_off_the_buyers_are_inert(self):
        with unittest.mock.patch.object(compare, "RetryingClients", Clients):
            rows, b = self.buyers(0)
            self.assertFalse(b.on)
            self.assertEqual(b.finish(rows[1]), {})

    def test_progress_tells_each_row_s_start(self):
        started = []
        with tempfile.TemporaryDirectory() as d:
            jtl = os.path.join(d, "plan.jtl")
            with open(jtl, "w") as f:
                f.write("timeStamp,elapsed,label\n1,2,a row\n1,2,a row\n1,2,b row\n")
            jmeter.Progress(jtl, ["a row", "b row"], lambda line: None, started.append).tick()
        self.assertEqual(started, ["a row", "b row"])


if __name__ == "__main__":
    unittest.main()
