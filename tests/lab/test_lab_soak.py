"""The soak's logic without a stack: the verdict from the samples (the reference after
the warm-up against the last one, within the tolerance; no 5xx), the gauges read from
/metrics of a fake stockd, and the arguments it refuses."""

import contextlib
import io
import types
import unittest

from fakestockd import FakeStockd, document, strategy
from lab.client.api import Api
from lab.drivers.load import NO_ANSWER, Answer
from lab.runs import soak


def samples(*rows):
    return [{"t_s": t, "rss_kib": rss, "open_fds": fds} for t, rss, fds in rows]


class VerdictTest(unittest.TestCase):
    def test_steady_after_the_warm_up(self):
        s = samples((0, 9000, 30), (60, 12000, 40), (120, 12500, 40), (180, 12400, 41))
        figures, problems = soak.verdict(s, 60, 5.0, 0)
        self.assertEqual(problems, [])
        self.assertEqual((figures["reference_t_s"], figures["last_t_s"]), (60, 180))
        self.assertEqual((figures["rss_kib_change_pct"], figures["open_fds_change_pct"]),
                         (3.33, 2.5))

    def test_growth_past_the_tolerance(self):
        s = samples((0, 9000, 30), (60, 12000, 40), (600, 12700, 40))
        _, problems = soak.verdict(s, 60, 5.0, 0)
        self.assertEqual(problems, ["rss_kib: 12000 after the warm-up, 12700 at the end "
                                    "(+5.83% > 5%)"])

    def test_shrinking_fds_and_failures(self):
        s = samples((0, 9000, 30), (10, 9000, 40), (20, 9000, 30))
        _, problems = soak.verdict(s, 10, 5.0, 3)
        self.assertEqual(problems, ["open_fds: 40 after the warm-up, 30 at the end "
                                    "(-25.00% > 5%)",
                                    "3 answers were a 5xx or missing (none planned)"])

    def test_no_sample_after_the_warm_up(self):
        _, problems = soak.verdict(samples((0, 9000, None)), 60, 5.0, 0)
        self.assertEqual(problems, ["rss_kib: no sample after the warm-up to compare",
                                    "open_fds: no sample after the warm-up to compare"])

    def test_failed_answers(self):
        ans = [Answer(0, 1, 200, ""), Answer(0, 1, 409, "busy"), Answer(0, 1, 503, "timeout"),
               Answer(0, 1, 502, ""), Answer(0, 1, NO_ANSWER, "reset")]
        self.assertEqual(soak.failed(ans), 3)


class GaugesTest(unittest.TestCase):
    def test_from_metrics(self):
        with FakeStockd(document([strategy("alpha")]), rss=20 << 20, fds=57) as fake:
            g = soak.Gauges(Api("127.0.0.1", fake.port), types.SimpleNamespace(proc=None))
            self.assertEqual(g.source(), "/metrics")
            self.assertEqual(g.read(), (20 * 1024, 57))


class ArgsTest(unittest.TestCase):
    def test_needs_a_sample_after_the_warm_up(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            soak.parse_args(["--seconds", "60", "--warmup", "60"])
        ns = soak.parse_args(["--seconds", "70", "--warmup", "60"])
        self.assertEqual((ns.seconds, ns.interval, ns.rate, ns.tolerance), (70, 10, 200, 5.0))


if __name__ == "__main__":
    unittest.main()
