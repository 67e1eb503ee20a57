"""The retrying buyers (lab.drivers.retrying) against a tiny server that loses answers,
and the retry run's judge (lab.judges.retries) on made-up purchases."""

import http.server
import json
import threading
import unittest

from lab.drivers.load import NO_ANSWER, Answer
from lab.drivers.retrying import KEY_HEADER, Purchase, RetryingBuyers, retried
from lab.judges import retries


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


def buyers_against(script, with_keys, attempts=8, count=1):
    Losing.script, Losing.keys = list(script), []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Losing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        b = RetryingBuyers("127.0.0.1", server.server_address[1], "/stock/deduct/x", count,
                           with_keys=with_keys, timeout_s=2, attempts=attempts,
                           backoff_s=0.001, backoff_cap_s=0.002)
        b.start()
        assert b.join(10)
        return b
    finally:
        server.shutdown()
        server.server_close()


def answer(status, word=""):
    return Answer(0.0, 0.1, status, word)


def purchase(*statuses):
    p = Purchase("k")
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
                             "gave_up": 1, "first_tries_lost": 3})

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
                            ({"ok": 39}, "39 purchases answered 200")):
            v, why = retries.verdict(self.row(**over))
            self.assertEqual(v, retries.FAIL)
            self.assertIn(words, why)


if __name__ == "__main__":
    unittest.main()
