"""Buyers of orders: many concurrent buyers (threads, each with its keep-alive
connection to one stockd of several) that hold an order, then, as real shoppers and a
real payment provider do:

    pay       with probability pay_p, after a delay drawn around the TTL (from half of
              it to one and a half: some before the deadline, some after), the
              provider's callback delivered 1 to 5 times with one payment id: the
              repeats some at once (each on a connection of its own, racing the first)
              and some late (up to another TTL on); now and then a second, different
              payment for the same order (a buyer who paid twice)
    cancel    with probability cancel_p, once or twice
    abandon   the rest: the hold is left to its expiry mechanism

racing (a plan with cancel_hold_ms, each cancel's return staying that long inside its
strategy's critical section): the cancels go in pairs and nothing else writes the
stock beside them, so that an unsafe strategy's race shows in the units every time,
and in one direction. An order drawn to cancel waits for the next one drawn, by any
buyer, and that buyer cancels the two at once, each on a connection of its own, both
sent past a threading.Barrier(2): both returns read the count before either writes
it (each holds cancel_hold_ms between the two), so on an unsafe strategy one return
of every pair is overwritten and its unit vanishes; a safe one serialises the pair.
The buyers write one at a time meanwhile (a lock they share around each hold and
each pair; payments write no stock and go on beside them), so no sale is in flight
beside a return and none is overwritten: no unit appears to offset the vanished ones
in the store's net figures. (An expiry's return is the store's own: the racing row
gives its holds a TTL that outlasts the buying, lab.runs.orders.) An order still
waiting for a partner when the buying stops is left to its expiry.

at_deadline: every first callback is sent at the deadline itself (within a few
milliseconds either side, by the client's clock): payments bursting at the expiry.

Every request and its answer is one op of the clients' history (lab.judges.orders):
kind (hold, pay, cancel), order, payment, invoke and complete (monotonic
microseconds; complete None when no answer came), wall_ms (the client's wall clock at
the send), status (0: no HTTP answer), word (the error word, or what happened
instead), duplicate (the answer said so), and for a hold its expires_at_ms. Nothing is
retried. The random draws come from one seeded generator per buyer, so a row can be
run again the same way."""

import contextlib
import http.client
import random
import threading
import time
from urllib.parse import urlencode

from .load import NO_ANSWER, body_of, failure_word

SECOND_PAYMENT_P = 0.1   # a paying buyer who also pays a second time, with another id
CONCURRENT_REPEAT_P = 0.5  # a repeated callback sent at once rather than late
AT_DEADLINE_SPREAD_S = 0.005


class Plan:
    """What the buyers do: strategy, product, qty, ttl_ms, expiry mechanism, and the
    probabilities."""

    def __init__(self, strategy, product, qty=1, ttl_ms=1500, expiry=None, pay_p=0.6,
                 cancel_p=0.1, at_deadline=False, seed=46, cancel_hold_ms=0):
        self.strategy, self.product, self.qty = strategy, product, qty
        self.ttl_ms, self.expiry = ttl_ms, expiry
        self.pay_p, self.cancel_p, self.at_deadline, self.seed = pay_p, cancel_p, at_deadline, seed
        self.cancel_hold_ms = cancel_hold_ms

    @property
    def racing(self):
        """Whether the cancels race (cancel_hold_ms): they go in pairs, the writes one
        at a time."""
        return bool(self.cancel_hold_ms)

    def hold_path(self):
        query = {"product": self.product, "qty": self.qty, "ttl_ms": self.ttl_ms}
        if self.expiry:
            query["expiry"] = self.expiry
        return f"/orders/{self.strategy}?{urlencode(query)}"

    def cancel_path(self, order):
        held = f"?hold_ms={self.cancel_hold_ms}" if self.cancel_hold_ms else ""
        return f"/orders/{order}/cancel{held}"


class OrderBuyers:
    """`buyers` threads spread over the instances at `ports` (127.0.0.1), holding
    until stop_holding() (or `orders` holds each, when given)."""

    def __init__(self, ports, plan, buyers, orders=None, timeout_s=10, host="127.0.0.1"):
        self.ports, self.plan, self.buyers, self.orders = ports, plan, buyers, orders
        self.timeout_s, self.host = timeout_s, host
        self.history = []      # list.append is atomic: every thread shares it
        self.ids = iter(range(1, 1 << 62))
        self.lock = threading.Lock()
        self.writing = threading.Lock()  # a racing plan's holds and pairs, one at a time
        self.waiting = None  # a racing plan's order to cancel, waiting for a partner
        self.stopping = threading.Event()
        self.threads = []

    def next_id(self):
        with self.lock:
            return next(self.ids)

    def connect(self, port):
        return http.client.HTTPConnection(self.host, port, timeout=self.timeout_s)

    def send(self, conn, kind, path, order=None, payment=None):
        """One POST on conn, its op recorded; (whether conn may be used again, the
        answer's document or None)."""
        op = {"id": self.next_id(), "kind": kind, "order": order, "payment": payment,
              "wall_ms": int(time.time() * 1000), "invoke": int(time.monotonic() * 1e6)}
        doc, alive = None, True
        try:
            conn.request("POST", path, headers={"Content-Length": "0"})
            resp = conn.getresponse()
            doc = body_of(resp.read())
            op.update(complete=int(time.monotonic() * 1e6) + 1, status=resp.status,
                      word=doc.get("error") or "", duplicate=doc.get("duplicate") is True)
        except (OSError, http.client.HTTPException) as e:
            word = failure_word(e)
            op.update(complete=None if word == "client timeout" else
                      int(time.monotonic() * 1e6) + 1, status=NO_ANSWER, word=word,
                      duplicate=False)
            conn.close()
            alive = False
        if kind == "hold" and doc:
            op["order"] = doc.get("order")
            op["expires_at_ms"] = doc.get("expires_at_ms")
        self.history.append(op)
        return alive, doc

    def pay(self, port, order, payment, at):
        """A callback delivered at monotonic time `at` on a connection of its own."""
        if self.stopping.wait(max(0.0, at - time.monotonic())):
            return  # aborted: the callbacks not yet sent are never sent
        conn = self.connect(port)
        self.send(conn, "pay", f"/orders/{order}/pay?payment={payment}", order, payment)
        conn.close()

    def callbacks(self, rnd, port, order, name, t_hold):
        """The threads of one order's payment callbacks, started."""
        ttl_s = self.plan.ttl_ms / 1000.0
        first = t_hold + (ttl_s + rnd.uniform(-AT_DEADLINE_SPREAD_S, AT_DEADLINE_SPREAD_S)
                          if self.plan.at_deadline else rnd.uniform(0.5, 1.5) * ttl_s)
        times = [first]
        for _ in range(rnd.randint(1, 5) - 1):
            times.append(first if rnd.random() < CONCURRENT_REPEAT_P
                         else first + rnd.uniform(0, ttl_s))
        sent = [(at, f"{name}-a") for at in times]
        if rnd.random() < SECOND_PAYMENT_P:
            sent.append((first + rnd.uniform(0, ttl_s), f"{name}-b"))
        threads = [threading.Thread(target=self.pay, args=(port, order, pid, at), daemon=True)
                   for at, pid in sent]
        for t in threads:
            t.start()
        return threads

    def writes(self):
        """What a hold is sent under: alone, in a racing plan; beside the others if not."""
        return self.writing if self.plan.racing else contextlib.nullcontext()

    def cancel(self, conn, port, order, times, barrier=None):
        """`times` cancels of `order` on conn, one after the other, the first past
        `barrier` when one is given: the connection to go on with."""
        if barrier:
            barrier.wait()
        for _ in range(times):
            alive, _ = self.send(conn, "cancel", self.plan.cancel_path(order), order)
            conn = conn if alive else self.connect(port)
        return conn

    def cancel_apart(self, port, order, times, barrier):
        self.cancel(self.connect(port), port, order, times, barrier).close()

    def cancel_paired(self, conn, port, kept):
        """A racing plan's order to cancel, kept = (order, times): cancelled with the
        one waiting for a partner, or, when none is, left waiting in its turn. The
        connection to go on with."""
        with self.lock:
            other, self.waiting = self.waiting, None if self.waiting else kept
        return self.cancel_pair(conn, port, kept, other) if other else conn

    def cancel_pair(self, conn, port, kept, other):
        """Two orders to cancel, (order, times) each, cancelled at once, the other on
        a connection of its own, both first cancels sent past one Barrier(2), and no
        other write sent until both are answered: the connection to go on with."""
        (first, first_times), (second, second_times) = kept, other
        barrier = threading.Barrier(2)
        partner = threading.Thread(target=self.cancel_apart,
                                   args=(port, second, second_times, barrier), daemon=True)
        with self.writing:
            partner.start()
            conn = self.cancel(conn, port, first, first_times, barrier)
            partner.join()
        return conn

    def holding(self, k):
        with self.lock:
            return not self.stopping.is_set() and (self.orders is None or k < self.orders)

    def buyer(self, n):
        rnd = random.Random(self.plan.seed * 1000003 + n)
        port = self.ports[n % len(self.ports)]
        conn, waiting, k = self.connect(port), [], 0
        while self.holding(k):
            k += 1
            t_hold = time.monotonic()
            with self.writes():
                alive, doc = self.send(conn, "hold", self.plan.hold_path())
            conn = conn if alive else self.connect(port)
            order = (doc or {}).get("order")
            if not order:
                self.stopping.wait(0.05)  # a refusal: do not spin on it
                continue
            draw = rnd.random()
            if draw < self.plan.pay_p:
                waiting += self.callbacks(rnd, port, order, f"p{n}x{k}", t_hold)
            elif draw < self.plan.pay_p + self.plan.cancel_p:
                kept = (order, rnd.randint(1, 2))
                conn = (self.cancel_paired(conn, port, kept) if self.plan.racing
                        else self.cancel(conn, port, *kept))
            self.stopping.wait(rnd.uniform(0, self.plan.ttl_ms / 2000.0))
        conn.close()
        for t in waiting:
            t.join()

    def start(self):
        for n in range(self.buyers):
            t = threading.Thread(target=self.buyer, args=(n,), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop_holding(self):
        """No new hold from now on; the callbacks already drawn are still delivered,
        each at its time."""
        with self.lock:
            self.orders = 0

    def finish(self):
        """stop_holding(), then every buyer's last callback: the history."""
        self.stop_holding()
        for t in self.threads:
            t.join()
        return self.history

    def abort(self):
        """Stop at once: the callbacks not yet sent are never sent."""
        self.stopping.set()
        return self.finish()
