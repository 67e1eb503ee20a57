"""lab.host (CPU steal from /proc/stat) and the bench's policy for rows during which
the host stole CPU: measured again while disturbed, within --retries and the budget."""

import os
import tempfile
import unittest
from types import SimpleNamespace
from unittest import mock

from lab import bench, host

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

    def test_steal_pct(self):
        self.assertEqual(host.steal_pct((400, 10000), (460, 10600)), 10.0)
        self.assertEqual(host.steal_pct((400, 10000), (400, 10600)), 0.0)
        self.assertIsNone(host.steal_pct(None, (400, 10600)))
        self.assertIsNone(host.steal_pct((400, 10000), (400, 10000)))


def bench_with(steal_max=5.0, retries=2, retry_budget=60):
    args = SimpleNamespace(steal_max=steal_max, retries=retries, retry_budget=retry_budget)
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


if __name__ == "__main__":
    unittest.main()
