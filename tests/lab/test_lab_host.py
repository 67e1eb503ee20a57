"""lab.stack.host (CPU steal from /proc/stat) and how the bench measures on a noisy host: a
row during which the host stole CPU is measured again, within --retries and the
budget; a headline ratio is the median of alternating pairs."""

import os
import subprocess
import tempfile
import time
import unittest
from types import SimpleNamespace
from unittest import mock

from lab.client.outcomes import Outcomes
from lab.stack import host
from lab.runs import bench

STAT = ("cpu  1000 10 500 8000 40 0 50 400 30 0\n"
        "cpu0 500 5 250 4000 20 0 25 200 15 0\n")


class HostTest(unittest.TestCase):
    def stat_file(self, text):
        fd, path = tempfile.mkstemp()
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def test_cpu_times_reads_the_first_line(self):
        # steal is the 8th value; guest (30) is already inside user and not added
        self.assertEqual(host.cpu_times(self.stat_file(STAT)), (400, 10000))

    def test_cpu_times_without_steal_or_stat(self):
        self.assertEqual(host.cpu_times(self.stat_file("cpu 10 0 5 85\n")), (0, 100))
        self.assertIsNone(host.cpu_times(self.stat_file("intr 1 2 3\n")))
        self.assertIsNone(host.cpu_times("/nonexistent/stat"))

    def test_process_cpu_counts_this_process_and_finds_its_children(self):
        me = os.getpid()
        before = host.process_cpu_s([me])
        deadline = time.process_time() + 0.05
        while time.process_time() < deadline:
            pass
        self.assertGreaterEqual(host.process_cpu_s([me]) - before, 0.03)
        child = subprocess.Popen(["sleep", "10"])
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        self.assertEqual(host.process_tree(me)[0], me)
        self.assertIn(child.pid, host.process_tree(me))
        self.assertIsNone(host.process_cpu_s([me, 2 ** 22 + 1]))  # above pid_max: gone

    def test_steal_pct(self):
        self.assertEqual(host.steal_pct((400, 10000), (460, 10600)), 10.0)
        self.assertEqual(host.steal_pct((400, 10000), (400, 10600)), 0.0)
        self.assertIsNone(host.steal_pct(None, (400, 10600)))
        self.assertIsNone(host.steal_pct((400, 10000), (400, 10000)))


def bench_with(steal_max=5.0, retries=2, retry_budget=60, pairs=3):
    args = SimpleNamespace(steal_max=steal_max, retries=retries, retry_budget=retry_budget,
                           pairs=pairs, duration=2)
    return bench.Bench(args, None, None, 1, tempfile.gettempdir(), lambda text: None)


def readings(*steals):
    """cpu_times() values such that successive attempts see these steal percents
    (each attempt spans 1000 jiffies)."""
    out, stolen, total = [], 0, 0
    for pct in steals:
        out.append((stolen, total))
        stolen, total = stolen + pct * 10, total + 1000
        out.append((stolen, total))
    return out


class MeasuredTest(unittest.TestCase):
    def run_with(self, b, steals):
        calls = []

        def attempt():
            calls.append(len(calls) + 1)
            return f"result {len(calls)}"

        with mock.patch.object(host, "cpu_times", side_effect=readings(*steals)):
            result, seen = b.measured(attempt)
        return result, seen, calls

    def test_an_undisturbed_row_is_measured_once(self):
        result, seen, calls = self.run_with(bench_with(), [1])
        self.assertEqual((result, seen, calls), ("result 1", {"steal_pct": 1.0, "attempts": 1},
                                                 [1]))

    def test_a_disturbed_row_is_measured_again_until_it_is_not(self):
        result, seen, calls = self.run_with(bench_with(), [14, 3])
        self.assertEqual((result, seen), ("result 2", {"steal_pct": 3.0, "attempts": 2}))

    def test_retries_are_bounded(self):
        result, seen, calls = self.run_with(bench_with(retries=2), [14, 12, 9])
        self.assertEqual((result, seen), ("result 3", {"steal_pct": 9.0, "attempts": 3}))
        result, seen, calls = self.run_with(bench_with(retries=0), [14])
        self.assertEqual(seen["attempts"], 1)

    def test_a_spent_budget_stops_retrying(self):
        b = bench_with(retry_budget=0)
        result, seen, calls = self.run_with(b, [14])
        self.assertEqual(seen, {"steal_pct": 14.0, "attempts": 1})
        b = bench_with(retry_budget=60)
        self.run_with(b, [14, 1])
        self.assertGreater(b.retry_spent_s, 0)

    def test_no_stat_means_no_retry(self):
        b = bench_with()
        with mock.patch.object(host, "cpu_times", return_value=None):
            self.assertEqual(b.measured(lambda: "r"), ("r", {"steal_pct": None, "attempts": 1}))


def load(rps, answers=None):
    """A wrk-like result: its rate and its answers ({(status, word): n})."""
    outcomes = Outcomes()
    for (status, word), n in (answers or {(200, ""): 100}).items():
        outcomes.add(status, word, n)
    return SimpleNamespace(rps=rps, outcomes=outcomes)


class PairTest(unittest.TestCase):
    def pair(self, limit_rates, subject_loads):
        b = bench_with(pairs=len(limit_rates))
        limits, subjects = iter(limit_rates), iter(subject_loads)
        with mock.patch.object(host, "cpu_times", return_value=None):
            b.pair_row("s", "redis", "safe", "redis", "raw limit", 64,
                       lambda: SimpleNamespace(rps=next(limits)), lambda: next(subjects))
        return b.rows[-1]

    def test_the_ratio_is_the_median_of_the_pairs(self):
        # a slow moment (the second pair) moves both sides and not the median
        row = self.pair([50000.0, 25000.0, 40000.0], [load(40000.0), load(10000.0), load(30000.0)])
        self.assertEqual(row["pair_ratios"], [0.8, 0.4, 0.75])
        self.assertEqual(row["x_limit"], 0.75)
        self.assertEqual((row["throughput_rps"], row["limit_rps"]), (30000.0, 40000.0))
        self.assertEqual((row["kind"], row["verdict"], row["requests"]), ("pair", "pass", 300))
        self.assertEqual(row["label"], "s paired with raw limit c=64")

    def test_errors_fail_the_row(self):
        row = self.pair([100.0], [load(90.0, {(200, ""): 5, (503, "overloaded"): 1})])
        self.assertEqual(row["verdict"], "fail")
        self.assertIn("503 overloaded", row["reason"])

    def test_median_and_headline_concurrency(self):
        self.assertEqual(bench.median([3, 1, 2]), 2)
        self.assertEqual(bench.median([4, 1, 2, 3]), 2.5)
        self.assertEqual(bench.headline_conc([1, 16, 64, 256]), 64)
        self.assertEqual(bench.headline_conc([1, 16, 256]), 16)
        self.assertEqual(bench.headline_conc([128, 256]), 128)

    def test_outcomes_merge(self):
        a, b = Outcomes(), Outcomes()
        a.add(200, "", 3)
        b.add(200, "", 2)
        b.add(503, "timeout", 1)
        a.merge(b)
        self.assertEqual((a["sold"], a["errors"], a.detail()), (5, 1, "503 timeout x1"))


if __name__ == "__main__":
    unittest.main()
