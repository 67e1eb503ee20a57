"""HTTP client for stockd (standard library only): GET /strategies, /stock/{p},
/health and /metrics, POST /stock/reset with the admin token, and which instance
answered (the X-Stockd-Instance header of every reply)."""

import http.client
import json
import os
import re
import time

from ..base.common import SetupError

INSTANCE_HEADER = "X-Stockd-Instance"


class Reply:
    def __init__(self, status, raw, headers):
        self.status = status
        self.raw = raw            # the body's exact bytes
        self.headers = headers    # lower-case names
        text = raw.decode("utf-8", "replace")
        try:
            self.body = json.loads(text)  # parsed JSON, or the text when it is not JSON
        except ValueError:
            self.body = text

    @property
    def instance(self):
        return self.headers.get(INSTANCE_HEADER.lower())


class Api:
    def __init__(self, host, port, token=None, timeout=10):
        self.host, self.port, self.token, self.timeout = host, port, token, timeout

    @classmethod
    def with_admin_token(cls, host, port):
        """A run's client: its resets carry STOCKD_ADMIN_TOKEN when that is set."""
        return cls(host, port, os.environ.get("STOCKD_ADMIN_TOKEN") or None)

    def where(self):
        return f"{self.host}:{self.port}"

    def call(self, method, path, timeout=None, admin=False):
        """One request on a fresh connection. Raises OSError when nothing answers."""
        headers = {"Accept": "application/json"}
        if method == "POST":
            headers["Content-Length"] = "0"
        if admin and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return self.send(method, path, headers, None, timeout)

    def post_json(self, path, doc, timeout=None):
        """POST a JSON body with the admin token. Raises OSError when nothing answers."""
        body = json.dumps(doc).encode()
        headers = {"Accept": "application/json", "Content-Type": "application/json",
                   "Content-Length": str(len(body))}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return self.send("POST", path, headers, body, timeout)

    def send(self, method, path, headers, body, timeout):
        """One request on a fresh connection; its Reply. OSError when nothing answers."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            names = {k.lower(): v for k, v in resp.getheaders()}
        except http.client.HTTPException as e:
            raise OSError(str(e)) from e
        finally:
            conn.close()
        return Reply(resp.status, raw, names)

    def answers(self):
        try:
            self.call("GET", "/health", timeout=3)
            return True
        except OSError:
            return False

    def healthy(self):
        try:
            return self.call("GET", "/health", timeout=3).status == 200
        except OSError:
            return False

    def health(self):
        """The /health document (200 or 503), or None."""
        try:
            body = self.call("GET", "/health", timeout=5).body
        except OSError:
            return None
        return body if isinstance(body, dict) else None

    def strategies(self):
        """The GET /strategies reply (its .body is the document, .raw its bytes)."""
        try:
            r = self.call("GET", "/strategies")
        except OSError as e:
            raise SetupError(f"GET /strategies at {self.where()} failed: {e}") from None
        if r.status != 200 or not isinstance(r.body, dict):
            raise SetupError(f"GET /strategies at {self.where()} answered {r.status}")
        return r

    def reset(self, product, count, timeout=None):
        """None when the reset worked, else why not (one line). A reset deletes the
        product's orders: `timeout` for one that may have many."""
        try:
            r = self.call("POST", f"/stock/reset?product={product}&count={count}",
                          timeout=timeout, admin=True)
        except OSError as e:
            return f"reset failed: {e}"
        if r.status == 200:
            return None
        hint = " (set STOCKD_ADMIN_TOKEN)" if r.status == 401 else ""
        return f"reset answered {r.status}: {str(r.body)[:160]}{hint}"

    def must_reset(self, product, count, timeout=None):
        """reset(), raising why not as a SetupError."""
        err = self.reset(product, count, timeout)
        if err:
            raise SetupError(err)

    def account(self, product, store):
        """The store's accounting of the product ({remaining, sold, oversold,
        lost_updates}), or None when it cannot be read."""
        try:
            r = self.call("GET", f"/stock/{product}")
        except OSError:
            return None
        if r.status == 200 and isinstance(r.body, dict) and isinstance(r.body.get(store), dict):
            return r.body[store]
        return None

    def metrics(self):
        """GET /metrics, parsed: (reply, samples); (None, []) when it does not answer
        200 with text."""
        try:
            r = self.call("GET", "/metrics", timeout=5)
        except OSError:
            return None, []
        if r.status != 200 or not isinstance(r.body, str):
            return None, []
        return r, parse_metrics(r.body)

    def wait_idle(self, seconds):
        """Wait (at most `seconds`) until stockd has no request in flight but the
        /metrics request itself (a driver stops with some still queued), so that a
        ledger read next is final; one second when there is no gauge to ask."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            flying = metric(self.metrics()[1], "stockd_in_flight_requests")
            if flying is None:
                time.sleep(1.0)
                return
            if flying <= 1:
                return
            time.sleep(0.1)

    def batch_totals(self, strategy):
        """(sales, batches) so far of a strategy that batches its sales (the
        stockd_batch_size histogram's sum and count), or None when it has none."""
        samples = self.metrics()[1]
        sales = metric(samples, "stockd_batch_size_sum", strategy=strategy)
        batches = metric(samples, "stockd_batch_size_count", strategy=strategy)
        return None if sales is None or batches is None else (sales, batches)

    def instance_names(self, probes):
        """The distinct X-Stockd-Instance names of `probes` GET /health replies (each
        on a new connection, so a round-robin balancer spreads them); None stands for
        a reply without the header."""
        names = set()
        for _ in range(probes):
            try:
                names.add(self.call("GET", "/health", timeout=5).instance)
            except OSError:
                continue
        return names

    def memory_by_instance(self, instances):
        """{instance name: resident KiB} from process_resident_memory_bytes of
        /metrics, asking until every one of `instances` answered (or 4x as often)."""
        found = {}
        for _ in range(max(2, 4 * instances)):
            r, samples = self.metrics()
            rss = metric(samples, "process_resident_memory_bytes")
            if rss is not None:
                found[r.instance or "?"] = int(rss // 1024)
            if len(found) >= instances:
                break
        return found


_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text format 0.0.4 -> [(name, {label: value}, float)]."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\")
                  for k, v in _LABEL.findall(m.group(3) or "")}
        samples.append((m.group(1), labels, value))
    return samples


def metric(samples, name, **labels):
    """The value of the first sample `name` whose labels include `labels`, or None."""
    for n, have, value in samples:
        if n == name and all(have.get(k) == v for k, v in labels.items()):
            return value
    return None


def wait_reset_seen(apis, product, count, store, seconds=10):
    """Until each of `apis` reads the product's reset (`count` remaining, none sold)
    from its own node of a replicated store: a node is killed or cut only once it holds
    what the row will sell, or the row would judge a setup that did not complete.
    SetupError past `seconds`, naming the ones that never did."""
    deadline = time.monotonic() + seconds
    while True:
        behind = [a.where() for a in apis
                  if (a.account(product, store) or {}).get("remaining") != count]
        if not behind:
            return
        if time.monotonic() >= deadline:
            raise SetupError(f"product {product}'s reset to {count} was not read through "
                             f"{', '.join(behind)} within {seconds} s")
        time.sleep(0.05)
