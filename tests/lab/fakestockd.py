"""A small stand-in for stockd's HTTP API, for the lab's unit tests (which run without
any stack): it answers GET /strategies with the document it is given, /health, /metrics,
/stock/{p}, POST /stock/reset (with an optional admin token) and GET
/stock/deduct/{strategy} from an in-memory store, and stamps every reply with
X-Stockd-Instance, taking the names in turn as a round-robin balancer would.

    with FakeStockd(doc, instances=["a:1", "b:2"]) as fake:
        Api("127.0.0.1", fake.port) ...
"""

import http.server
import json
import threading
import urllib.parse


def strategy(name, store="mysql", safe=True, safe_multi=None, contention="waits", lease=None,
             exposed_by=None, needs=None, lock=None, failover=None, cluster=None):
    """One /strategies entry with every fact the lab reads (a failover or cluster
    fact only when given)."""
    safe_multi = safe if safe_multi is None else safe_multi
    entry = {"name": name, "store": store, "safe_single": safe, "safe_multi": safe_multi,
            "contention": contention, "lease": lease, "lock": lock,
            "exposed_by": ([] if safe and safe_multi else ["hold_ms"]) if exposed_by is None
            else exposed_by,
            "needs": [store] if needs is None else needs, "summary": f"{name} summary"}
    if failover is not None:
        entry["failover"] = failover
    if cluster is not None:
        entry["cluster"] = cluster
    return entry


def document(strategies, lock_wait_ms=5000):
    return {"ok": True, "instance": "fake:1", "strategies": strategies,
            "settings": {"lock_wait_ms": lock_wait_ms, "threads": 2, "workers": 16}}


class FakeStockd:
    def __init__(self, doc, instances=("fake:1",), token=None, backends=None, rss=(50 << 20),
                 fds=40):
        self.doc, self.instances, self.token, self.rss = doc, list(instances), token, rss
        self.fds = fds
        self.backends = backends or {"mysql": "up", "redis": "up"}
        self.lock = threading.Lock()
        self.turn = 0
        self.stock = {}          # (store, product) -> [initial, remaining, sold]
        self.resets = []         # Authorization headers seen on resets

    def next_instance(self):
        with self.lock:
            name = self.instances[self.turn % len(self.instances)] if self.instances else None
            self.turn += 1
            return name

    def __enter__(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, status, body, content_type="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                name = fake.next_instance()
                if name:
                    self.send_header("X-Stockd-Instance", name)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                if url.path == "/strategies":
                    self.reply(200, fake.doc)
                elif url.path == "/health":
                    up = all(v == "up" for v in fake.backends.values())
                    self.reply(200 if up else 503, {"ok": up, "backends": {
                        k: {"state": v} for k, v in fake.backends.items()}})
                elif url.path == "/metrics":
                    text = (f"# TYPE process_resident_memory_bytes gauge\n"
                            f"process_resident_memory_bytes {fake.rss}\n"
                            f"process_open_fds {fake.fds}\n"
                            f"stockd_in_flight_requests 1\n")
                    self.reply(200, text.encode(), "text/plain; version=0.0.4")
                elif url.path.startswith("/stock/deduct/"):
                    self.deduct(url.path.rsplit("/", 1)[1], int(q.get("product", 1001)))
                elif url.path.startswith("/stock/"):
                    self.account(int(url.path.rsplit("/", 1)[1]))
                else:
                    self.reply(404, {"ok": False, "error": "not_found"})

            def do_POST(self):
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                if url.path != "/stock/reset":
                    return self.reply(404, {"ok": False, "error": "not_found"})
                auth = self.headers.get("Authorization")
                fake.resets.append(auth)
                if fake.token and auth != f"Bearer {fake.token}":
                    return self.reply(401, {"ok": False, "error": "unauthorized"})
                p, n = int(q["product"]), int(q["count"])
                with fake.lock:
                    for store in ("mysql", "redis"):
                        fake.stock[(store, p)] = [n, n, 0]
                self.reply(200, {"ok": True, "product": p, "count": n})

            def deduct(self, name, p):
                s = next((x for x in fake.doc["strategies"] if x["name"] == name), None)
                if s is None:
                    return self.reply(404, {"ok": False, "error": "unknown_strategy"})
                with fake.lock:
                    row = fake.stock.get((s["store"], p))
                    if row and row[1] >= 1:
                        row[1] -= 1
                        row[2] += 1
                        sold = True
                    else:
                        sold = False
                if sold:
                    self.reply(200, {"ok": True, "strategy": name, "product": p, "qty": 1})
                else:
                    self.reply(409, {"ok": False, "error": "sold_out"})

            def account(self, p):
                out = {"product": p}
                with fake.lock:
                    for store in ("mysql", "redis"):
                        initial, left, sold = fake.stock.get((store, p), [0, 0, 0])
                        out[store] = {"initial": initial, "remaining": left, "sold": sold,
                                      "oversold": max(0, sold - initial),
                                      "lost_updates": max(0, sold - (initial - left))}
                self.reply(200, out)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
