"""The retrying buyers (lab.drivers.retrying) against a tiny server that loses answers,
the retry run's judge (lab.judges.retries) on made-up purchases, their history with a
key's tries as one operation (lab.judges.history.from_purchases), and which rows each
of the retry run's faults (lab.nemesis.retry_faults) takes."""

import http.server
import json
import os
import tempfile
import threading
import unittest
import xml.etree.ElementTree as ET
from types import SimpleNamespace

from lab.drivers.load import NO_ANSWER, Answer
from lab.drivers.retrying import (KEY_HEADER, PLAN, KeepBuying, Purchase, RetryingBuyers,
                                  purchases_from_jtl, retried)
from lab.base.common import SetupError
from lab.judges import history, retries
from lab.nemesis import retry_faults
from lab.scaffold import retrying_mode
from lab.runs import retry


class Losing(http.server.BaseHTTPRequestHandler):
    """Answers `script` in order (a status, or None: no answer at all, the connection
    closed), recording each request's Idempotency-Key."""
    script, keys = [], []

    def do_POST(self):
        Losing.keys.append(self.headers.get(KEY_HEADER))
        status = Losing.script.pop(0) if Losing.script else 200
        if status is None:
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        body = json.dumps({"ok": status == 200, "error": "" if status == 200 else
                           "outcome_unknown"}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def losing_server(script):
    """A Losing server on a free port of 127.0.0.1, serving in the background."""
    Losing.script, Losing.keys = list(script), []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Losing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def buyers_against(script, with_keys, attempts=8, count=1, confirm=False):
    server = losing_server(script)
    try:
        b = RetryingBuyers("127.0.0.1", server.server_address[1], "/stock/deduct/x", count,
                           with_keys=with_keys, timeout_s=2, attempts=attempts,
                           backoff_s=0.001, backoff_cap_s=0.002, confirm=confirm)
        b.start()
        assert b.join(10)
        return b
    finally:
        server.shutdown()
        server.server_close()


def keep_buying_against(script, with_keys, purchases):
    """One KeepBuying buyer of 3 tries a purchase, stopped once it has begun
    `purchases` purchases; resolved, then the server closed."""
    server = losing_server(script)
    try:
        b = KeepBuying("127.0.0.1", server.server_address[1], "/stock/deduct/x", 1,
                       with_keys=with_keys, timeout_s=2, attempts=3, confirm=False)
        b.backoff_s = b.backoff_cap_s = 0.001
        b.start()
        while len(b.purchases) < purchases:
            threading.Event().wait(0.001)
        b.stop()
        assert b.join(10)
        b.resolve()
        return b
    finally:
        server.shutdown()
        server.server_close()


def answer(status, word="", remaining=None, start=0.0):
    return Answer(start, start + 0.1, status, word, remaining)


def purchase(*statuses, key="k"):
    p = Purchase(key)
    p.tries = [answer(s) for s in statuses]
    return p


class RetryingBuyersTest(unittest.TestCase):
    def test_a_lost_answer_is_tried_again_with_the_same_key(self):
        b = buyers_against([503, None, 200], with_keys=True)
        p = b.purchases[0]
        self.assertEqual([a.status for a in p.tries], [503, NO_ANSWER, 200])
        self.assertEqual(len(set(Losing.keys)), 1)
        self.assertEqual(Losing.keys[0], p.key)
        self.assertEqual(p.final().status, 200)

    def test_without_keys_no_header_is_sent(self):
        buyers_against([503, 200], with_keys=False)
        self.assertEqual(Losing.keys, [None, None])

    def test_a_refusal_is_final(self):
        b = buyers_against([409, 200], with_keys=True)
        self.assertEqual([a.status for a in b.purchases[0].tries], [409])

    def test_a_buyer_gives_up_after_its_attempts(self):
        b = buyers_against([503] * 5, with_keys=True, attempts=3)
        self.assertEqual(len(b.purchases[0].tries), 3)
        self.assertIsNone(b.purchases[0].final())

    def test_each_purchase_has_its_own_key(self):
        b = buyers_against([], with_keys=True, count=5)
        self.assertEqual(len({p.key for p in b.purchases}), 5)

    def test_a_keyed_purchase_confirms_its_answer_with_its_key(self):
        b = buyers_against([503, 200, 200], with_keys=True, confirm=True)
        p = b.purchases[0]
        self.assertEqual([a.status for a in p.tries], [503, 200])
        self.assertEqual(p.check.status, 200)
        self.assertEqual(Losing.keys, [p.key] * 3)
        self.assertTrue(p.agrees())

    def test_a_keyless_purchase_never_confirms(self):
        b = buyers_against([200, 200], with_keys=False, confirm=True)
        self.assertIsNone(b.purchases[0].check)
        self.assertEqual(Losing.keys, [None])


class KeepBuyingTest(unittest.TestCase):
    def test_a_buyer_buys_until_stopped_each_purchase_with_its_own_key(self):
        b = keep_buying_against([], with_keys=True, purchases=5)
        self.assertGreaterEqual(len(b.purchases), 5)
        self.assertEqual(len({p.key for p in b.purchases}), len(b.purchases))
        self.assertTrue(all(p.final().status == 200 for p in b.purchases))

    def test_a_keyed_purchase_that_gave_up_is_resolved_with_its_key(self):
        b = keep_buying_against([503, 503, 503], with_keys=True, purchases=1)
        first = b.purchases[0]
        self.assertEqual([a.status for a in first.tries], [503, 503, 503, 200])
        self.assertEqual(Losing.keys.count(first.key), 4)

    def test_a_keyless_purchase_that_gave_up_is_left(self):
        b = keep_buying_against([503, 503, 503], with_keys=False, purchases=1)
        self.assertEqual([a.status for a in b.purchases[0].tries], [503, 503, 503])
        self.assertIsNone(b.purchases[0].final())


def figures(extra=0, keys=True, gave_up=0, disagree=0):
    return {"keys": keys, "claims": True, "qty": 1, "purchases": 10, "tries": 14,
            "first_tries_lost": 3, "ok": 10 - gave_up, "sold": 10 + extra - gave_up,
            "refused": 0, "gave_up": gave_up, "extra": extra, "disagree": disagree,
            "history_linearizable": True, "history_ops": 10}


class RetryingModeTest(unittest.TestCase):
    def test_a_row_gains_each_kinds_double_buys(self):
        row = retrying_mode.RetryingClients.row({"keys": figures(),
                                                 "nokeys": figures(extra=4, keys=False)})
        self.assertEqual((row["double_buys_keys"], row["double_buys_nokeys"]), (0, 4))
        self.assertEqual((row["retry_purchases"], row["retry_tries"], row["retry_lost"]),
                         (20, 28, 6))
        self.assertEqual(row["retry_verdict"], retries.PASS)

    def test_a_keyed_double_buy_fails_a_row_that_passed(self):
        row = retrying_mode.RetryingClients.row({"keys": figures(extra=1),
                                                 "nokeys": figures(keys=False)})
        self.assertEqual(row["retry_verdict"], retries.FAIL)
        verdict, reason = retrying_mode.folded(retries.PASS, "", row)
        self.assertEqual(verdict, retries.FAIL)
        self.assertIn("retrying clients", reason)
        self.assertEqual(retrying_mode.folded("setup", "why", row), ("setup", "why"))

    def test_the_mode_is_inert_without_buyers(self):
        clients = retrying_mode.RetryingClients(SimpleNamespace(retrying_buyers=0), {})
        clients.start("127.0.0.1", 1, None, "s", "mysql", 1)
        self.assertEqual(clients.finish(None, "/nonexistent", "row"), {})


class JudgeTest(unittest.TestCase):
    def test_retried_answers(self):
        self.assertTrue(retried(answer(NO_ANSWER, "client timeout")))
        self.assertTrue(retried(answer(503, "outcome_unknown")))
        self.assertFalse(retried(answer(409, "sold_out")))
        self.assertTrue(retried(answer(409, "in_progress")))
        self.assertFalse(retried(answer(200)))

    def test_tally(self):
        t = retries.tally([purchase(503, 200), purchase(200), purchase(503, 409),
                           purchase(503, 503)])
        self.assertEqual(t, {"purchases": 4, "tries": 7, "retried": 3, "ok": 2, "refused": 1,
                             "gave_up": 1, "first_tries_lost": 3, "disagree": 0})

    def test_a_key_answered_two_ways_disagrees(self):
        p = purchase(503, 200)
        p.check = answer(409, "sold_out")
        q = purchase(200)
        q.check = answer(200)
        self.assertFalse(p.agrees())
        self.assertTrue(q.agrees())
        self.assertEqual(retries.tally([p, q])["disagree"], 1)

    def test_a_replay_with_another_remaining_disagrees(self):
        p = Purchase("k")
        p.tries = [answer(200, remaining=7)]
        p.check = answer(200, remaining=6)
        self.assertFalse(p.agrees())

    def test_a_keyless_purchase_is_never_counted_as_disagreeing(self):
        p = purchase(200, 409, key=None)
        self.assertEqual(retries.tally([p])["disagree"], 0)

    def test_lost_as_counts_what_each_lost_try_got(self):
        p = purchase(503, 200)
        p.tries[0] = answer(503, "outcome_unknown")
        q = purchase(NO_ANSWER, NO_ANSWER, 200)
        q.tries[:2] = [answer(NO_ANSWER, "client timeout")] * 2
        self.assertEqual(retries.lost_as([p, q]), {"outcome_unknown": 1, "client timeout": 2})

    def test_extra_units_are_beyond_one_per_purchase(self):
        self.assertEqual(retries.extra_units(56, 40, 1), 16)
        self.assertEqual(retries.extra_units(30, 40, 1), 0)
        self.assertEqual(retries.extra_units(9, 4, 2), 1)

    def row(self, **over):
        r = {"keys": True, "claims": True, "extra": 0, "gave_up": 0, "ok": 40, "qty": 1,
             "sold": 40}
        r.update(over)
        return r

    def test_only_a_keyed_row_that_claims_keys_is_judged(self):
        self.assertEqual(retries.verdict(self.row(keys=False, extra=16))[0], retries.MEASURED)
        self.assertEqual(retries.verdict(self.row(claims=False, extra=16))[0], retries.MEASURED)
        self.assertEqual(retries.verdict(self.row()), (retries.PASS, ""))

    def test_a_claiming_row_fails_on_each_violation(self):
        for over, words in (({"extra": 3, "sold": 43}, "beyond one per purchase"),
                            ({"gave_up": 1, "ok": 39, "sold": 39}, "never got an answer"),
                            ({"ok": 39}, "39 purchases answered 200"),
                            ({"disagree": 2}, "2 keys were answered two ways"),
                            ({"history_linearizable": False, "history": "lost"},
                             "one operation: lost")):
            v, why = retries.verdict(self.row(**over))
            self.assertEqual(v, retries.FAIL)
            self.assertIn(words, why)


class HistoryOfPurchasesTest(unittest.TestCase):
    def keyed(self, *tries, key="k"):
        p = Purchase(key)
        p.tries = list(tries)
        return p

    def test_a_keys_tries_are_one_operation_with_the_answer_acted_on(self):
        p = self.keyed(answer(NO_ANSWER, "client timeout", start=1.0),
                       answer(503, "outcome_unknown", start=1.5),
                       answer(200, remaining=9, start=2.0))
        [op] = history.from_purchases([p], None, 1)
        self.assertEqual(op["outcome"], "ok")
        self.assertEqual(op["remaining"], 9)
        self.assertEqual(op["invoke"], 1_000_000)
        self.assertEqual(op["complete"], 2_100_001)

    def test_a_key_that_gave_up_may_have_sold_at_any_time(self):
        p = self.keyed(answer(503, "outcome_unknown", start=1.0))
        [op] = history.from_purchases([p], None, 1)
        self.assertEqual((op["outcome"], op["complete"]), ("unknown", None))

    def test_a_keyless_try_is_an_operation_of_its_own(self):
        p = self.keyed(answer(NO_ANSWER, "client timeout"), answer(200, remaining=8), key=None)
        ops = history.from_purchases([p], None, 1)
        self.assertEqual([o["outcome"] for o in ops], ["unknown", "ok"])
        self.assertEqual([o["id"] for o in ops], ["1.1", "1.2"])

    def test_a_key_sold_twice_is_not_linearizable(self):
        ps = [self.keyed(answer(NO_ANSWER, "client timeout", start=float(n)),
                         answer(200, start=n + 0.5), key=str(n)) for n in range(3)]
        ops = history.from_purchases(ps, None, 1)
        self.assertTrue(history.judge_final(10, ops, 7)["history_linearizable"])
        self.assertFalse(history.judge_final(10, ops, 6)["history_linearizable"])


JTL = """timeStamp,elapsed,label,responseCode,success,outcome,remaining,key
1000,300,buy,Non HTTP response code: java.net.SocketTimeoutException,false,none,none,a
1000,5,buy,200,true,none,41,b
1400,7,buy,503,false,outcome_unknown,none,a
1500,6,buy,200,true,none,40,a
"""


class JmeterPlanTest(unittest.TestCase):
    """jmeter/retry.jmx as it is, and its JTL read back as purchases (the retry run
    drives the plan against stockd itself: make retry's jmeter rows)."""

    def test_the_plan_retries_one_key_per_purchase(self):
        root = ET.parse(PLAN).getroot()
        [sampler] = list(root.iter("HTTPSamplerProxy"))
        props = {e.get("name"): e.text for e in sampler.iter("stringProp")}
        self.assertEqual(props["HTTPSampler.method"], "POST")
        self.assertEqual(props["HTTPSampler.response_timeout"], "${__P(timeout_ms,300)}")
        values = [e.text for e in root.iter("stringProp")]
        self.assertIn("${__UUID()}", values)
        self.assertIn("${__P(key_header,Idempotency-Key)}", values)
        self.assertIn("${__P(attempts,8)}", values)
        self.assertEqual([e.find("stringProp[@name='IfController.condition']").text
                          for e in root.iter("IfController")], ["${pending}"] * 2)

    def test_a_jtl_is_one_purchase_per_key_its_tries_in_order(self):
        fd, path = tempfile.mkstemp(suffix=".jtl")
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, "w") as f:
            f.write(JTL)
        a, b = purchases_from_jtl(path, keyed=True)
        self.assertEqual((a.key, b.key), ("a", "b"))
        self.assertEqual([(t.status, t.word) for t in a.tries],
                         [(NO_ANSWER, "client timeout"), (503, "outcome_unknown"), (200, None)])
        self.assertEqual((a.final().remaining, b.final().remaining), (40, 41))
        self.assertEqual(retries.tally([a, b])["first_tries_lost"], 1)
        [c, _] = purchases_from_jtl(path, keyed=False)
        self.assertIsNone(c.key)


def facts_of(*strategies):
    return [SimpleNamespace(name=n, store=store, failover=failover, cluster=cluster,
                            settles=settles)
            for n, store, failover, cluster, settles in strategies]


class RetryFaultsTest(unittest.TestCase):
    ROWS = facts_of(("m", "mysql", None, "conflicts_at_commit", None),
                    ("r", "redis", "loses_sales", None, None),
                    ("z", "zookeeper", None, None, None), ("p", "redis", None, None, None),
                    ("h", "mysql", None, "two_holders", None),
                    ("s", "redis", "loses_sales", None, "async"))

    def picked(self, name):
        [fault] = retry_faults.named([name])
        return [s.name for s in fault.picks(self.ROWS)]

    def test_each_fault_takes_the_rows_it_can_reach(self):
        self.assertEqual(self.picked("freeze"), ["m", "r", "p", "h", "s"])
        self.assertEqual(self.picked("drop"), ["m", "r", "z", "p", "h", "s"])
        self.assertEqual(self.picked("stockd-kill"), ["m", "r", "p", "h", "s"])
        self.assertEqual(self.picked("failover"), ["r", "s"])
        self.assertEqual(self.picked("galera-kill"), ["m"])
        self.assertEqual(self.picked("consumer-kill"), ["s"])

    def test_a_consumer_kill_is_judged_by_mysql_once_drained(self):
        freeze, kill = retry_faults.named(["consumer-kill", "freeze"])
        self.assertTrue(kill.drains)
        self.assertEqual(kill.ledger_store(self.ROWS[-1]), "mysql")
        self.assertFalse(freeze.drains)
        self.assertEqual(freeze.ledger_store(self.ROWS[-1]), "redis")

    def sends(self, name, keyless, keyed):
        [fault] = retry_faults.named([name])
        return [(s.name, keys) for s, keys in retry.what_each_fault_sends(fault, keyless, keyed)]

    def test_a_fault_sends_its_baseline_both_ways_and_every_keyed_row_it_reaches(self):
        m, r, _, _, h, s = self.ROWS
        self.assertEqual(self.sends("freeze", [m, r], [m, r, h, s]),
                         [("m", False), ("m", True), ("r", False), ("r", True),
                          ("h", True), ("s", True)])
        self.assertEqual(self.sends("galera-kill", [m, r], [m, r, h, s]),
                         [("m", False), ("m", True)])

    def test_a_fault_that_reaches_no_baseline_row_sends_its_first_keyed_row_without_keys(self):
        m, r, _, _, h, s = self.ROWS
        self.assertEqual(self.sends("consumer-kill", [m, r], [m, r, h, s]),
                         [("s", False), ("s", True)])
        self.assertEqual(self.sends("consumer-kill", [m, r], [m, r]), [])

    def test_the_run_without_a_consumer_kill_keeps_its_stockds_consumers(self):
        args = SimpleNamespace(request_timeout_ms=2000, io_timeout_ms=1000, faults=["drop"])
        self.assertNotIn(retry_faults.NO_CONSUMERS[0], retry.stockd_options(args))
        args.faults = ["drop", "consumer-kill"]
        self.assertIn(retry_faults.NO_CONSUMERS[0], retry.stockd_options(args))

    def test_a_failover_outlasts_the_promotion(self):
        [fault] = retry_faults.named(["failover"])
        self.assertGreater(fault.attempts(SimpleNamespace(attempts=8)), 8)
        [freeze] = retry_faults.named(["freeze"])
        self.assertEqual(freeze.attempts(SimpleNamespace(attempts=8)), 8)
        for name in ("stockd-kill", "galera-kill"):
            [fault] = retry_faults.named([name])
            self.assertGreater(fault.attempts(SimpleNamespace(attempts=8)), 8)

    def test_faults_come_in_the_tables_order_and_unknown_ones_are_refused(self):
        self.assertEqual([f.name for f in retry_faults.named(["drop", "freeze"])],
                         ["freeze", "drop"])
        self.assertEqual(retry_faults.NAMES, ["freeze", "drop", "stockd-kill", "failover",
                                              "galera-kill", "consumer-kill"])
        with self.assertRaisesRegex(SetupError, "unknown faults: nope"):
            retry_faults.named(["nope"])


if __name__ == "__main__":
    unittest.main()
