"""The lab's outputs: text tables, CSV, and the two HTML reports checked by the same
DOM rules lab.reports.browser applies to Chromium's rendering (the pages have no script, so
their source is their DOM)."""

import csv
import io
import unittest

from lab.reports import bench_report, browser, compare_report, tables


def compare_rows():
    base = {"strategy": "alpha", "store": "mysql", "instances": 1, "threads": 20, "loops": 10,
            "requests": 200, "qty": 1, "stock": 100, "hold_ms": 0, "ttl_ms": 0, "pause_ms": 0,
            "sold": 100, "sold_out": 98, "busy": 0, "outcome_unknown": 2, "errors": 0,
            "store_sold": 101, "oversold": 0, "lost_updates": 0, "remaining": 0,
            "throughput_rps": 900.0, "p50_ms": 5, "p95_ms": 9, "p99_ms": 12, "max_ms": 30,
            "expected_safe": True, "verdict": "pass", "reason": "safe",
            "stockd_rss_by_instance": {"h:1": 5000, "h:2": 5100}, "instances_seen": ["h:1", "h:2"]}
    return [
        dict(base, label="calibration /ping", strategy=None, kind="calibration", store=None,
             stock=None, throughput_rps=1000.0, expected_safe=None, driver_bound=None,
             throughput_vs_ceiling=1.0),
        dict(base, label="alpha", kind="normal", driver_bound=True, throughput_vs_ceiling=0.9),
        dict(base, label="beta exposed", strategy="beta", kind="exposed", hold_ms=20,
             expected_safe=False, oversold=7, lost_updates=9, verdict="fail",
             reason="something <odd> & \"quoted\"", driver_bound=False, throughput_vs_ceiling=0.1,
             error_detail="503 overloaded x2"),
    ]


def bench_rows():
    rows = []
    for name, kind, store, claim, limit in (("nginx static /strategies", "raw", None, None, "http"),
                                            ("alpha", "strategy", "mysql", "safe", "mariadb")):
        for c, rps in ((1, 100.0), (16, 900.0)):
            rows.append({"label": f"{name} c={c}", "name": name, "kind": kind, "store": store,
                         "claim": claim, "concurrency": c, "throughput_rps": rps, "p50_ms": 1.0,
                         "p95_ms": 2.0, "p99_ms": 3.0, "max_ms": 9.0, "requests": 1000,
                         "sold": 1000, "errors": 0, "limit": limit, "x_limit": 0.5,
                         "verdict": "pass", "reason": "ok"})
    return rows


class TablesTest(unittest.TestCase):
    def test_text_table_aligns_and_marks_driver_bound(self):
        text = tables.text_table(compare_rows(), compare_report.TABLE)
        lines = text.splitlines()
        self.assertEqual(len(lines), 5)
        self.assertEqual(len({len(l) for l in lines[:2]}), 1)
        self.assertIn("unknown", lines[0])
        self.assertIn("bound", lines[3])
        self.assertIn("ceiling", lines[2])
        self.assertIn("hold 20", lines[4])

    def test_csv_has_every_field(self):
        text = tables.csv_text(compare_rows(), compare_report.ROW_FIELDS)
        rows = list(csv.DictReader(io.StringIO(text)))
        self.assertEqual(rows[1]["outcome_unknown"], "2")
        self.assertEqual(rows[1]["driver_bound"], "true")
        self.assertEqual(rows[0]["driver_bound"], "")
        self.assertEqual(rows[1]["stockd_rss_by_instance"], "h:1=5000;h:2=5100")
        self.assertEqual(list(rows[0]), compare_report.ROW_FIELDS)


class ReportsTest(unittest.TestCase):
    def check(self, page, expect):
        return browser.problems(page, page, expect)

    def test_compare_report(self):
        rows = compare_rows()
        page = compare_report.render(rows, {"started": "2026-01-01T00:00:00",
                                            "driver_ceiling_rps": 1000.0})
        self.assertEqual(self.check(page, compare_report.expectations(rows)), [])
        self.assertIn("driver-bound", page)
        self.assertIn("outcome unknown", page)
        self.assertIn("something &lt;odd&gt; &amp; &quot;quoted&quot;", page)
        self.assertIn('class="verdict-banner fail"', page)

    def test_run_card_tells_the_ceiling_and_whether_it_held(self):
        rows = compare_rows()
        held = compare_report.render(rows, {"driver_ceiling_rps": 1000.0,
                                            "driver_ceiling_samples_rps": [1000.0, 940.0],
                                            "driver_ceiling_request": "GET /ping",
                                            "driver_ceiling_reply_bytes": 150,
                                            "driver_ceiling_beaten_by": {}})
        self.assertIn("<dd>1,000 req/s (GET /ping, 150 bytes a reply; the better of 1,000 and 940)</dd>", held)
        suspect = compare_report.render(rows, {"driver_ceiling_rps": 1000.0,
                                               "driver_ceiling_request": "GET /ping",
                                               "driver_ceiling_reply_bytes": 150,
                                               "driver_ceiling_beaten_by": {"alpha": 1.5}})
        self.assertIn("suspect: beaten by more than the noise by 1 row(s)", suspect)

    def test_run_card_shows_the_memory_figure_and_its_origin(self):
        rows = compare_rows()
        own = compare_report.render(rows, {"stockd_peak_rss_kib": 16179,
                                           "stockd_memory_source": "/proc"})
        self.assertIn("<dt>stockd memory</dt><dd>15.8 MiB peak</dd>", own)
        self.assertIn("VmHWM", own)
        scraped = compare_report.render(rows, {"stockd_peak_rss_kib": 10240,
                                               "stockd_memory_source": "/metrics"})
        self.assertIn("<dd>10.0 MiB peak</dd>", scraped)
        self.assertIn("process_resident_memory_bytes", scraped)
        self.assertIn("not measured", compare_report.render(rows, {}))

    def test_bench_report(self):
        rows = bench_rows()
        page = bench_report.render(rows, {"conns": [1, 16]})
        self.assertEqual(self.check(page, bench_report.expectations(rows)), [])
        self.assertEqual(page.count('<g class="series"'), 4)
        self.assertIn('class="verdict-banner pass"', page)

    def test_bench_report_charts_leave_the_scrape_rows_to_the_table(self):
        rows = bench_rows()
        for scraped in ("alpha, not scraped", "alpha, /metrics every 1 s"):
            rows.append(dict(rows[-1], label=f"{scraped} c=16", name=scraped, kind="scrape",
                             limit="scraped"))
        page = bench_report.render(rows, {"conns": [1, 16]})
        self.assertEqual(self.check(page, bench_report.expectations(rows)), [])
        self.assertEqual(page.count('<g class="series"'), 4)  # 2 lines x 2 charts

    def test_checks_catch_what_is_wrong(self):
        rows = compare_rows()
        page = compare_report.render(rows, {})
        expect = compare_report.expectations(rows)
        missing_row = dict(expect, rows=expect["rows"] + ["ghost"])
        self.assertIn("table rows", self.check(page, missing_row)[0])
        fewer_bars = dict(expect, charts={"chart-lost": ("bar", 2)})
        self.assertIn("svg#chart-lost has 3 bar", self.check(page, fewer_bars)[0])
        lying = page.replace('verdict-banner fail', 'verdict-banner pass')
        self.assertIn("banner says pass", self.check(lying, expect)[0])
        remote = page.replace("</head>", '<script src="https://example.com/x.js"></script></head>')
        self.assertIn("network", self.check(remote, expect)[0])


if __name__ == "__main__":
    unittest.main()
