"""The partition lab's parts that need no root: which routes its namespace may have,
the delay proxy, which must hold a real server's replies for the delay it is set
to, and pass them at once without one, and where a row's retrying buyers go."""

import os
import socket
import threading
import time
import types
import unittest

from lab.client import sources
from lab.nemesis import netns
from lab.nemesis.delay_proxy import DelayProxy
from lab.runs import partition

BASE = int(os.environ.get("TEST_PORT_BASE", "38000"))


class Routes(unittest.TestCase):
    def test_loopback_only(self):
        for dst in ("127.0.0.0/8", "127.0.0.1", "127.255.255.255"):
            self.assertTrue(netns.route_inside({"dst": dst}, "4"), dst)
        self.assertTrue(netns.route_inside({"dst": "::1"}, "6"))
        for dst, family in (("default", "4"), ("10.0.0.0/8", "4"), ("0.0.0.0/0", "4"),
                            ("fe80::/64", "6"), ("default", "6")):
            self.assertFalse(netns.route_inside({"dst": dst}, family), dst)


class ClockJumpPicture(unittest.TestCase):
    def test_marks_and_picture(self):
        first = ((200, None, {}, 2.0), 100.0, 102.0)
        second = ((200, None, {}, 0.1), 100.5, 100.6)
        m = partition.clock_jump_marks(first, second, {"held": 100.2, "jump": 100.4,
                                                       "thawed": 100.7})
        self.assertEqual(m, {"held": 0.2, "jump": 0.4, "thawed": 0.7, "b_start": 0.5,
                             "b_end": 0.6, "a_end": 2.0, "a_answer": "200",
                             "b_answer": "200"})
        svg = partition.clock_jump_svg("quorumlock", m)
        for text in ("clock +TTL+2 s", "takes R2, R3 (a majority): 200",
                     "writes: 200", ">R3<", "two holders"):
            self.assertIn(text, svg)


class Echo(threading.Thread):
    """A server on 127.0.0.1 that answers every line with itself."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.sock = socket.create_server(("127.0.0.1", port))

    def run(self):
        conn, _ = self.sock.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)


class Proxy(unittest.TestCase):
    def round_trip(self, port):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            t0 = time.monotonic()
            c.sendall(b"ping\n")
            self.assertEqual(c.recv(16), b"ping\n")
            return time.monotonic() - t0

    def test_holds_replies_for_the_delay(self):
        echo = Echo(BASE + 71)
        echo.start()
        proxy = DelayProxy(("127.0.0.1", BASE + 72), ("127.0.0.1", BASE + 71), "127.0.0.1")
        proxy.start()
        try:
            self.assertLess(self.round_trip(BASE + 72), 0.2)
        finally:
            proxy.stop()
        echo.sock.close()

    def test_delay_set_at_run_time(self):
        echo = Echo(BASE + 73)
        echo.start()
        proxy = DelayProxy(("127.0.0.1", BASE + 74), ("127.0.0.1", BASE + 73), "127.0.0.1")
        proxy.start()
        proxy.delay_ms = 400
        try:
            took = self.round_trip(BASE + 74)
            self.assertGreaterEqual(took, 0.4)
            self.assertLess(took, 1.5)
        finally:
            proxy.stop()
        echo.sock.close()


class Clients:
    """A stand-in for a row's RetryingClients: what it was asked, and a failing keyed
    verdict."""

    def __init__(self, args, claims):
        self.started, self.stopped = None, False

    def start(self, *started):
        self.started = started

    def stop(self):
        self.stopped = True

    def finish(self, api, out_dir, label):
        return {"double_buys_keys": 1, "retry_verdict": "fail",
                "retry_reason": "1 units sold beyond one per purchase", "label": label}


class RetryingMode(unittest.TestCase):
    def setUp(self):
        self.saved = partition.RetryingClients
        partition.RetryingClients = Clients

    def tearDown(self):
        partition.RetryingClients = self.saved

    def run_row(self, case):
        api = types.SimpleNamespace(host="127.0.0.2", port=8080, must_reset=lambda *a: None,
                                    account=lambda product, store: {"sold": 1, "oversold": 0,
                                                                    "lost_updates": 0,
                                                                    "remaining": 0})
        p = partition.Partition(types.SimpleNamespace(product=8501), None, None, None,
                                types.SimpleNamespace(api=api), types.SimpleNamespace(api=api),
                                lambda line: None, {}, "/nonexistent")
        sale = ((200, "", {"remaining": 0}), 1.0, 1.1), ((409, "busy", {}), 1.2, 1.3)

        def row(s, row, product, *rest):
            row["fault"] = "a fault"
            p.frozen_buyers(s, product)
            return sale
        p.holder_row = p.late_row = row
        p.mend = lambda: None
        s = types.SimpleNamespace(name="locked", store="mysql", lease={case: "safe"},
                                  needs=[sources.backend_name("redis.c")])
        return p, p.run_row(s, case, True, 8503)

    def test_a_holder_row_s_buyers_go_to_frozen_a_on_products_of_their_own(self):
        p, row = self.run_row("clock_jump")
        self.assertEqual(p.retrying.started[:2], ("127.0.0.2", 8080))
        self.assertEqual(p.retrying.started[3:], ("locked", "mysql", 8501 + 1000 + 4))
        self.assertTrue(p.retrying.stopped)
        self.assertEqual((row["double_buys_keys"], row["label"]), (1, "locked-clock_jump"))
        self.assertEqual(row["verdict"], "fail")
        self.assertIn("retrying clients", row["reason"])

    def test_a_late_grant_row_has_none(self):
        _, row = self.run_row("late_grant")
        self.assertNotIn("double_buys_keys", row)
        self.assertEqual(row["verdict"], "pass")

    def test_off_by_default(self):
        self.assertEqual(partition.parse_args([]).retrying_buyers, 0)


if __name__ == "__main__":
    unittest.main()
