"""The Galera partition run's judging, which needs no root and no cluster: which
answers count as the minority's sales, which as allowed refusals, and the rule each
row is held to (nothing sold while out, the majority selling, the ledger against the
200s and the outcome_unknown answers); and its retrying client mode, whose retries go
from one stockd to the next as a load balancer's do."""

import http.server
import threading
import unittest

from fakestockd import document, strategy
from lab.client import facts
from lab.drivers.load import Answer
from lab.drivers.retrying import KEY_HEADER, KeepBuying
from lab.runs import partition_galera as pg
from lab.scaffold import retrying_mode
from test_lab_retry import Losing

CUT, HEAL = 10.0, 20.0


def answer(start, end, status, word=""):
    return Answer(start, end, status, word, None)


def counted(answers):
    return pg.phase_counts(answers, CUT, HEAL)


def good_row(**over):
    row = {f: None for f in pg.ROW_FIELDS}
    row.update(strategy="rowsale", fact="conflicts_at_commit", ok_minority=0, minority_503=5,
               minority_busy=0, minority_unknown=0, minority_other=0, minority_held=0,
               ok_majority=40, rejoin_s=1.2, a_first_ok_s=0.1, ok=100, unknown=1, sold=101,
               acked_missing=0, extra_in_ledger=1, oversold=0, lost_updates=0)
    row.update(over)
    return row


class PhaseCounts(unittest.TestCase):
    def test_sides_and_times(self):
        c = counted([
            (0, answer(9.0, 9.1, 200)),                         # before the cut
            (0, answer(11.0, 11.1, 503, "backend_unavailable")),
            (0, answer(11.0, 11.5, 409, "busy")),
            (0, answer(12.0, 14.0, 503, "outcome_unknown")),
            (0, answer(12.0, 12.1, 500, "internal")),
            (0, answer(13.0, 13.1, 200)),                       # sold while out
            (0, answer(19.0, 21.0, 200)),                       # waited out the cut
            (1, answer(10.5, 12.9, 200)),
            (2, answer(11.0, 12.5, 200)),
            (1, answer(21.0, 21.1, 200)),                       # after the heal
        ])
        self.assertEqual(c["ok_before"], 1)
        self.assertEqual((c["minority_503"], c["minority_busy"], c["minority_unknown"]),
                         (1, 1, 1))
        self.assertEqual(c["minority_other"], 1)
        self.assertEqual(c["minority_answers_seen"], ["500 internal"])
        self.assertEqual((c["ok_minority"], c["minority_held"]), (1, 1))
        self.assertEqual(c["ok_majority"], 2)
        self.assertEqual(c["majority_first_ok_s"], 2.5)


class Judge(unittest.TestCase):
    def test_a_good_row_passes(self):
        row = pg.judge(good_row())
        self.assertEqual((row["verdict"], row["reason"]), ("pass", ""))

    def test_each_breach_fails(self):
        for over, why in (
                ({"ok_minority": 1}, "while its node was out"),
                ({"minority_other": 2, "minority_answers_seen": ["500 internal"]},
                 "outside the contract"),
                ({"minority_503": 0}, "never answered 503"),
                ({"ok_majority": 0}, "B and C sold nothing"),
                ({"rejoin_s": None}, "not back"),
                ({"acked_missing": 3}, "3 acknowledged sales missing"),
                ({"extra_in_ledger": 2, "unknown": 1}, "only 1 answers outcome_unknown"),
                ({"oversold": 1}, "oversold 1"),
                ({"sold": None}, "ledger could not be read"),
                ({"witnesses": "witnesses disagree"}, "witnesses disagree")):
            row = pg.judge(good_row(**over))
            self.assertEqual(row["verdict"], "fail", over)
            self.assertIn(why, row["reason"], over)


class TwoHolders(unittest.TestCase):
    """get-lock across the cut: B and C each hold their own node's GET_LOCK."""

    FACTS = facts.parse(document([
        strategy("race", safe=False, cluster="loses_updates"),
        strategy("inprocess", safe_multi=False, cluster="two_holders", lock="in memory"),
        strategy("rowsale", cluster="conflicts_at_commit"),
        strategy("nodelock", cluster="two_holders", lock="named"),
        strategy("elsewhere", cluster="safe", needs=["mysql", "redis"], lock="key"),
        strategy("optimistic", contention="retries", cluster="safe")]))

    def test_rows_safe_ones_and_a_node_lock_not_in_quick(self):
        class Args:
            strategies, quick = [], False
        self.assertEqual([s.name for s in pg.chosen(self.FACTS, Args)],
                         ["rowsale", "nodelock", "optimistic"])
        Args.quick = True
        self.assertEqual([s.name for s in pg.chosen(self.FACTS, Args)],
                         ["rowsale", "optimistic"])

    def test_twins_are_counts_both_majority_instances_left_while_out(self):
        answers = [
            (1, Answer(11.0, 11.1, 200, "", 500)), (2, Answer(11.0, 11.2, 200, "", 500)),
            (1, Answer(12.0, 12.1, 200, "", 499)), (1, Answer(12.2, 12.3, 200, "", 498)),
            (2, Answer(12.0, 12.1, 200, "", 498)),
            (2, Answer(9.0, 9.1, 200, "", 497)), (1, Answer(9.0, 9.1, 200, "", 497)),   # before
            (0, Answer(11.0, 11.1, 200, "", 499)),                  # A is not the majority
            (2, Answer(13.0, 13.1, 409, "busy", 499)),              # not a sale
            (2, Answer(21.0, 21.1, 200, "", 499)),                  # after the heal
        ]
        self.assertEqual(pg.majority_twins(answers, CUT, HEAL), 2)
        self.assertEqual(counted(answers)["majority_twins"], 2)

    def two_holders(self, **over):
        base = {"fact": "two_holders", "lost_updates": 30, "majority_twins": 12}
        base.update(over)
        return pg.judge(good_row(**base))

    def test_the_fact_showing_passes(self):
        row = self.two_holders()
        self.assertEqual((row["verdict"], row["reason"]), ("pass", ""))

    def test_the_fact_not_showing_fails(self):
        for over, why in (({"lost_updates": 0}, "nothing was oversold or lost"),
                          ({"majority_twins": 0}, "no count was answered by both B and C"),
                          ({"acked_missing": 1}, "1 acknowledged sales missing"),
                          ({"ok_minority": 2}, "while its node was out"),
                          ({"minority_503": 0, "minority_busy": 0}, "never answered 503 or busy")):
            row = self.two_holders(**over)
            self.assertEqual(row["verdict"], "fail", over)
            self.assertIn(why, row["reason"], over)

    def test_its_minority_may_be_refused_busy_alone(self):
        row = self.two_holders(minority_503=0, minority_busy=900)
        self.assertEqual(row["verdict"], "pass")
        row = pg.judge(good_row(minority_503=0, minority_busy=900))
        self.assertIn("never answered 503 while", row["reason"])

    def test_a_safe_row_is_not_asked_for_twins(self):
        self.assertEqual(pg.judge(good_row(majority_twins=0))["verdict"], "pass")


class Facts(unittest.TestCase):
    def test_transfer_kind(self):
        self.assertEqual(pg.transfer_kind("WSREP: IST received: 3f:120"), "IST")
        self.assertEqual(pg.transfer_kind("WSREP: State transfer required"), "SST")
        self.assertEqual(pg.transfer_kind("WSREP: Member 1.0 synced with group."), "none")

    def test_timeline(self):
        row = pg.judge(good_row(cut_s=8.0, majority_first_ok_s=2.5, rejoin_s=1.2,
                                a_first_ok_s=0.1))
        answers = [(0, answer(10.5, 11.0, 503, "backend_unavailable")),
                   (0, answer(10.1, 14.0, 503, "backend_unavailable"))]
        m = pg.timeline_marks(answers, 2.0, {"cut": CUT, "heal": HEAL}, row, 22.0)
        self.assertEqual(m, {"cut": 8.0, "out": 9.0, "majority_again": 10.5, "heal": 18.0,
                             "rejoined": 19.2, "a_again": 18.1, "end": 22.0})
        row["timeline"] = m
        svg = pg.timeline_svg(row)
        for text in ("non-primary: wsrep_ready=OFF", "503 backend_unavailable x5, 200 x0",
                     "200 x40 while N1 is out", "cut: suspects", ">heal<", ">stockd B, C<"):
            self.assertIn(text, svg)
        m.update(out=None, rejoined=None, a_again=None, majority_again=None)
        self.assertIn("</svg>", pg.timeline_svg(row))  # nothing came back: still drawn

    def test_table(self):
        md = pg.table_md([pg.judge(good_row())])
        self.assertIn("| `rowsale` | conflicts_at_commit | 0 / 5 / 0 / 0 / 0 |", md)
        self.assertIn("| 100 / 1 / 101 |", md)


class Setup(unittest.TestCase):
    """A cut that never took is tried once more, then reported as setup, not judged."""

    def galera(self, *tries):
        g = pg.Galera.__new__(pg.Galera)
        g.say, g.args = (lambda line: None), type("Args", (), {"cut_s": 4.0})()
        outcomes = iter(tries)

        def run_row(s, product):
            outcome = next(outcomes)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        g.run_row = run_row
        return g

    def test_a_second_try_that_works_is_judged(self):
        row = self.galera(pg.SetupError("N1 was still in the primary component"),
                          {"strategy": "x"}).tried_row(STRATEGY, 1)
        self.assertEqual(row, {"strategy": "x"})

    def test_twice_is_setup_not_a_verdict(self):
        row = pg.judge(self.galera(*[pg.SetupError("N1 was still in the primary component")]
                                   * 2).tried_row(STRATEGY, 1))
        self.assertEqual((row["verdict"], row["reason"]),
                         ("setup", "setup: N1 was still in the primary component"))


STRATEGY = type("Strategy", (), {"name": "plain", "cluster": "safe"})()


class Instance(Losing):
    """Losing's answers, on as many servers as a test starts, each request's port
    recorded with its key."""
    seen = []

    def do_POST(self):
        Instance.seen.append((self.server.server_address[1], self.headers.get(KEY_HEADER)))
        super().do_POST()


def instances(count, script):
    """`count` Instance servers on free ports of 127.0.0.1 that answer `script` in turn
    between them, serving in the background."""
    Losing.script, Losing.keys, Instance.seen = list(script), [], []
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Instance)
               for _ in range(count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return servers


class RetryingMode(unittest.TestCase):
    def test_a_retry_goes_to_the_next_instance_with_its_key(self):
        cut, majority = instances(2, [503, 200, 200])
        try:
            b = KeepBuying("127.0.0.1", cut.server_address[1], "/stock/deduct/x", 1,
                           with_keys=True, timeout_s=2, attempts=3,
                           also=[("127.0.0.1", majority.server_address[1])])
            b.backoff_s = b.backoff_cap_s = 0.001
            b.start()
            while not b.purchases or b.purchases[0].check is None:
                threading.Event().wait(0.001)
            b.stop()
            self.assertTrue(b.join(10))
        finally:
            for server in (cut, majority):
                server.shutdown()
                server.server_close()
        first = b.purchases[0]
        self.assertEqual([a.status for a in first.tries], [503, 200])
        ports = [cut.server_address[1], majority.server_address[1], majority.server_address[1]]
        # the confirming try goes where the answer came from
        self.assertEqual(Instance.seen[:3], [(port, first.key) for port in ports])

    def test_off_by_default_and_its_columns_only_when_on(self):
        off = pg.parse_args([])
        self.assertEqual(retrying_mode.with_columns(off, pg.ROW_FIELDS, pg.TABLE),
                         (pg.ROW_FIELDS, pg.TABLE))
        on = pg.parse_args(["--retrying-buyers", "2"])
        fields, table = retrying_mode.with_columns(on, pg.ROW_FIELDS, pg.TABLE)
        self.assertEqual(fields, pg.ROW_FIELDS + retrying_mode.COLUMNS)
        self.assertEqual([c[0] for c in table[len(pg.TABLE):]],
                         [c[0] for c in retrying_mode.table_columns()])


if __name__ == "__main__":
    unittest.main()
