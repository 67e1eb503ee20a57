"""The private stack's Prometheus, for figures a run cannot see from outside: the
peak number of requests in flight inside stockd, and the lock wait p99, per row.

    prom = Prometheus.up(["127.0.0.1:8080"], say)   # None when it cannot be had
    prom.peak_in_flight(t0, t1)                     # over a row's wall-clock window
    prom.lock_wait_p99_ms(name, t0, t1)             # name: a lock row of GET /strategies

It is started with `scripts/stack.sh start-one prometheus` (a user process on
loopback, scraping every second) and pointed at the stockds with
`scripts/stack.sh scrape`. Queries go to its HTTP API (GET /api/v1/query)."""

import json
import math
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from .service import stack_script

# Every half second: a comparison waits one scrape between its rows (so that each
# row's figures are its own), and a short row lasts a fraction of a second.
SCRAPE_S = 0.5


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    @classmethod
    def up(cls, targets, say, wait_s=15):
        """Starts the stack's Prometheus (when the prometheus package is there), points
        it at `targets` and waits until it scrapes them all; None, after saying why,
        when any of that fails: the rows then go without its figures."""
        if not shutil.which("prometheus"):
            say("no prometheus installed (scripts/deps.sh prometheus): rows go without the "
                "in-flight peak and the lock wait p99")
            return None
        stack = stack_script()
        for args in (["start-one", "prometheus"], ["scrape", *targets]):
            if subprocess.run([stack, *args], stdout=sys.stderr, stderr=sys.stderr).returncode:
                say(f"scripts/stack.sh {' '.join(args)} failed: rows go without Prometheus' "
                    "figures")
                return None
        port = subprocess.run([stack, "port-of", "prometheus"], stdout=subprocess.PIPE,
                              universal_newlines=True).stdout.strip()
        prom = cls(int(port))
        deadline = time.time() + wait_s
        while time.time() < deadline:
            if prom.scraping(targets):
                say(f"Prometheus at {prom.base} scrapes {', '.join(targets)} every "
                    f"{SCRAPE_S:g} s")
                return prom
            time.sleep(0.5)
        say(f"Prometheus at {prom.base} did not scrape {', '.join(targets)} within {wait_s} s: "
            "rows go without its figures")
        return None

    def query(self, expr, at):
        """The value of a one-result instant query evaluated at `at` (epoch s), or None."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": at})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                doc = json.load(r)
        except (OSError, ValueError):
            return None
        result = (doc.get("data") or {}).get("result") or []
        if len(result) != 1:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or math.isinf(value) else value

    def scraping(self, targets):
        up = self.query('count(up{job="stockd"} == 1)', time.time())
        return up is not None and up >= len(targets)

    @staticmethod
    def window(t0, t1):
        """A range that covers the row, with the scrape after its end."""
        return f"{math.ceil(t1 - t0 + SCRAPE_S)}s"

    def peak_in_flight(self, t0, t1):
        v = self.query(f"max_over_time(sum(stockd_in_flight_requests)"
                       f"[{self.window(t0, t1)}:{round(SCRAPE_S * 1000)}ms])", t1 + SCRAPE_S)
        return None if v is None else int(v)

    def lock_wait_p99_ms(self, strategy, t0, t1):
        v = self.query(f'histogram_quantile(0.99, sum by (le) (increase('
                       f'stockd_lock_wait_seconds_bucket{{strategy="{strategy}"}}'
                       f'[{self.window(t0, t1)}])))', t1 + SCRAPE_S)
        return None if v is None else round(v * 1000, 1)
