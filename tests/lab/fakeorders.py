"""A small stand-in for stockd's orders routes, for the lab's unit tests: one store in
memory, holds with a deadline by its own clock, pay, cancel, GET /orders/{ID},
GET /stock/{P} with the orders' accounting, GET /expiry and a sweeper thread that
returns expired holds every sweep_ms, each transition conditional on the state it
leaves, as the contract says. `flaw` breaks it the way shops break:

    "unconditional"  the sweeper returns every order past its deadline that it has not
                     returned yet, paid or not (a payment racing it ends paid and
                     returned)
    "early"          the sweeper returns holds 200 ms before their deadline
    "read-then-write"  a racing cancel (one with hold_ms) reads the count, waits for
                     its pair's, then writes what it read plus its units, as an
                     unsafe strategy's return does: one return of every pair is
                     overwritten

A racing cancel of a held order waits at a Barrier(2) for its pair's (with or without a
flaw): one whose partner never came is counted in `unpaired`, and a hold or a cancel
that arrives while the other kind is being answered in `beside`.

    with FakeOrders(sweep_ms=20) as fake:
        OrderBuyers([fake.port], Plan("s1", 1), buyers=4) ...
"""

import http.server
import json
import contextlib
import threading
import time
import urllib.parse

PAIR_WAIT_S = 5  # a racing cancel's partner comes at once, or never

MECHANISM = {"name": "fake-sweeper", "store": "mysql", "summary": "a sweeper",
             "lag_ms": 1000, "strands_when": None}


def now_ms():
    return int(time.time() * 1000)


class FakeOrders:
    def __init__(self, sweep_ms=20, flaw=None):
        self.sweep_ms, self.flaw = sweep_ms, flaw
        self.lock = threading.Lock()
        self.stock = {}     # product -> [initial, remaining]
        self.orders = {}    # id -> record
        self.payments = {}  # id -> {payment id: outcome}
        self.n = 0
        self.stopping = threading.Event()
        self.pair = threading.Barrier(2, timeout=PAIR_WAIT_S)
        self.in_flight = {"hold": 0, "cancel": 0}
        self.unpaired = self.beside = 0

    def hold(self, q):
        p, qty, ttl = int(q["product"]), int(q.get("qty", 1)), int(q["ttl_ms"])
        with self.lock:
            row = self.stock.setdefault(p, [0, 0])
            if row[1] < qty:
                return 409, {"ok": False, "error": "sold_out"}
            row[1] -= qty
            self.n += 1
            oid = f"m{p}-{self.n:016x}"
            self.orders[oid] = {"order": oid, "state": "held", "product": p, "qty": qty,
                                "expiry": MECHANISM["name"], "expires_at_ms": now_ms() + ttl,
                                "payment": None, "returned": 0, "returned_at_ms": None,
                                "refunds_due": 0}
            self.payments[oid] = {}
            return 201, dict(self.orders[oid], ok=True, remaining=row[1])

    def give_back(self, o, state):
        o["state"] = state if o["state"] == "held" else o["state"]
        o["returned"] += 1
        o["returned_at_ms"] = now_ms()
        self.stock[o["product"]][1] += o["qty"]

    def pay(self, oid, pid):
        with self.lock:
            o, seen = self.orders[oid], self.payments[oid]
            if pid in seen:
                status, word = seen[pid]
                return status, {"ok": status == 200, "error": word, "duplicate": True}
            if o["state"] == "held" and now_ms() < o["expires_at_ms"]:
                o["state"], o["payment"] = "paid", pid
                seen[pid] = (200, None)
                return 200, {"ok": True, "order": oid, "state": "paid", "payment": pid}
            word = "already_paid" if o["state"] == "paid" else "expired"
            seen[pid] = (409, word)
            o["refunds_due"] += 1
            return 409, {"ok": False, "error": word}

    @contextlib.contextmanager
    def writing(self, kind):
        """A hold or a cancel being answered; `beside` counts one that comes while the
        other kind is."""
        with self.lock:
            self.beside += any(n for k, n in self.in_flight.items() if k != kind)
            self.in_flight[kind] += 1
        try:
            yield
        finally:
            with self.lock:
                self.in_flight[kind] -= 1

    def racing_cancel(self, o):
        """A cancel with hold_ms of a held order: the count read, the pair's other
        cancel waited for, then the return (with flaw "read-then-write", over what was
        read)."""
        with self.lock:
            seen = self.stock[o["product"]][1]
        try:
            self.pair.wait()
        except threading.BrokenBarrierError:
            self.unpaired += 1
            self.pair.reset()
        with self.lock:
            if o["state"] == "held":
                self.give_back(o, "cancelled")
                if self.flaw == "read-then-write":
                    self.stock[o["product"]][1] = seen + o["qty"]
                return 200, {"ok": True, "order": o["order"], "state": "cancelled"}
        return self.cancel(o["order"])  # taken meanwhile: answered as the state says

    def cancel(self, oid, racing=False):
        if racing and self.orders[oid]["state"] == "held":
            return self.racing_cancel(self.orders[oid])
        with self.lock:
            o = self.orders[oid]
            if o["state"] == "held":
                self.give_back(o, "cancelled")
                return 200, {"ok": True, "order": oid, "state": "cancelled"}
            if o["state"] == "cancelled":
                return 200, {"ok": True, "order": oid, "state": "cancelled", "duplicate": True}
            return 409, {"ok": False, "error": o["state"]}

    def sweep(self):
        early = 200 if self.flaw == "early" else 0
        with self.lock:
            for o in self.orders.values():
                due = now_ms() >= o["expires_at_ms"] - early
                if self.flaw == "unconditional":
                    if due and not o["returned"] and o["state"] != "cancelled":
                        self.give_back(o, "expired")
                elif due and o["state"] == "held":
                    self.give_back(o, "expired")

    def account(self, p):
        initial, remaining = self.stock.get(p, [0, 0])
        mine = [o for o in self.orders.values() if o["product"] == p]

        def units(state):
            return sum(o["qty"] for o in mine if o["state"] == state)

        returned = sum(o["qty"] * o["returned"] for o in mine)
        sold = sum(o["qty"] for o in mine)
        return {"mysql": {"initial": initial, "remaining": remaining, "sold": sold,
                          "held": units("held"), "paid": units("paid"), "returned": returned,
                          "refunds_due": sum(o["refunds_due"] for o in mine),
                          "oversold": max(0, sold - returned - initial)}}

    def answer(self, method, path, q):
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/expiry":
            return 200, {"ok": True, "expiry": [MECHANISM]}
        if method == "GET" and parts[0] == "stock":
            with self.lock:
                return 200, self.account(int(parts[1]))
        if method == "POST" and path == "/stock/reset":
            with self.lock:
                self.stock[int(q["product"])] = [int(q["count"])] * 2
            return 200, {"ok": True}
        if parts[0] != "orders" or len(parts) < 2:
            return 404, {"ok": False, "error": "not_found"}
        if method == "POST" and len(parts) == 2:
            with self.writing("hold"):
                return self.hold(q)
        if parts[1] not in self.orders:
            return 404, {"ok": False, "error": "unknown_order"}
        if method == "GET":
            with self.lock:
                return 200, dict(self.orders[parts[1]], ok=True)
        if parts[2] == "pay":
            return self.pay(parts[1], q["payment"])
        with self.writing("cancel"):
            return self.cancel(parts[1], "hold_ms" in q)

    def sweeper(self):
        while not self.stopping.wait(self.sweep_ms / 1000.0):
            self.sweep()

    def __enter__(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.fake = self
        self.port = self.server.server_address[1]
        for target in (self.server.serve_forever, self.sweeper):
            threading.Thread(target=target, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


class Handler(http.server.BaseHTTPRequestHandler):
    """Each request answered by the server's FakeOrders, silently."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, method):
        url = urllib.parse.urlsplit(self.path)
        status, body = self.server.fake.answer(method, url.path,
                                               dict(urllib.parse.parse_qsl(url.query)))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer("GET")

    def do_POST(self):
        self.answer("POST")
