"""The chaos run's logic without a stack: which faults run and which strategies each
one drives (from the facts only), the backend probes against tiny TCP servers that
answer like MariaDB, Redis and ZooKeeper (or do not), the load driver against the
fake stockd, and the verdict of a (fault, strategy) row from a recorded timeline."""

import socket
import threading
import time
import unittest

from fakestockd import FakeStockd, document, strategy
from lab.client import facts, sources
from lab.client.api import Api
from lab.drivers.load import NO_ANSWER, Answer, Load, error_word, slot_times
from lab.nemesis import faults
from lab.judges import chaos_gate
from lab.runs import chaos
from test_lab_api import run_main

ENV = {"STOCKD_MYSQL_PORT": "1", "STOCKD_REDIS_PORT": "2", "STOCKD_ZK": "127.0.0.1:3",
       "STOCKD_REDLOCK": "127.0.0.1:4,127.0.0.1:5,127.0.0.1:6"}

REDLOCK = sources.backend_name("redlock.c")  # a strategy has that name too
FACTS = facts.parse(document([
    strategy("plain", store="mysql", safe=False),
    strategy("onelock", store="mysql", lock="process"),
    strategy("rowlock", store="mysql"),
    strategy("optimistic", store="redis", needs=["redis"]),
    strategy("keylock", store="mysql", needs=["mysql", "redis"], lock="key"),
    strategy("leaky", store="mysql", safe=False, needs=["mysql", "redis"], lock="key"),
    strategy("quorum", store="mysql", needs=["mysql", REDLOCK], lock="majority"),
    strategy("znode", store="mysql", needs=["mysql", "zookeeper"], lock="node"),
    strategy("keylock2", store="mysql", needs=["mysql", "redis"], lock="key"),
    strategy("script", store="redis", needs=["redis"]),
    strategy("batch", store="mysql"),
]))


class FaultsTest(unittest.TestCase):
    def test_every_fault_in_order(self):
        names = [f.name for f in faults.all_faults(ENV)]
        self.assertEqual(names, ["mysql-kill", "redis-kill", "redis-freeze", "redlock-stop-1",
                                 "redlock-stop-2", "zk-kill"])
        by = {f.name: f for f in faults.all_faults(ENV, hold_s=2)}
        self.assertEqual(by["redlock-stop-2"].targets, ["redlock-4", "redlock-5"])
        self.assertEqual((by["redlock-stop-1"].expect, by["redlock-stop-2"].expect),
                         (faults.QUORUM, faults.OUTAGE))
        self.assertEqual((by["redis-freeze"].inject, by["redis-freeze"].restore),
                         ("freeze-one", "thaw-one"))
        self.assertIn("2 s", by["redis-freeze"].what)
        self.assertEqual([f.backend for f in by.values()],
                         ["mysql", "redis", "redis", REDLOCK, REDLOCK, "zookeeper"])

    def test_no_redlock_faults_without_three_servers(self):
        env = dict(ENV, STOCKD_REDLOCK="127.0.0.1:4")
        self.assertNotIn("redlock-stop-1", [f.name for f in faults.all_faults(env)])

    def test_quick_faults(self):
        self.assertEqual([f.name for f in faults.quick_faults(ENV)],
                         ["redis-kill", "redis-freeze", "redlock-stop-1"])

    def test_strategies_per_fault_from_the_facts(self):
        by = {f.name: f for f in faults.all_faults(ENV)}
        names = lambda f, zoo_max=None: [s.name for s in faults.strategies_for(FACTS, by[f],
                                                                              zoo_max)]
        # A safe one of each store; the faulted store's lockless safe ones; its lock zoo.
        self.assertEqual(names("mysql-kill"), ["onelock", "optimistic", "rowlock", "batch"])
        self.assertEqual(names("redis-kill"),
                         ["onelock", "optimistic", "script", "keylock", "keylock2"])
        self.assertEqual(names("redis-kill", 1), ["onelock", "optimistic", "script", "keylock"])
        self.assertEqual(names("redlock-stop-2"), ["onelock", "optimistic", "quorum"])
        self.assertEqual(names("zk-kill"), ["onelock", "optimistic", "znode"])


class Canned:
    """A TCP server on 127.0.0.1 that sends `reply` to every connection (after reading
    one chunk when `read` is set), then closes it."""

    def __init__(self, reply, read=True):
        self.reply, self.read = reply, read
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                if self.read:
                    conn.recv(1024)
                conn.sendall(self.reply)

    def close(self):
        self.sock.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProbeTest(unittest.TestCase):
    def check(self, probe, reply, read, expected):
        server = Canned(reply, read)
        try:
            self.assertEqual(probe(server.port), expected)
        finally:
            server.close()

    def test_redis(self):
        self.check(faults.redis_answers, b"+PONG\r\n", True, True)
        self.check(faults.redis_answers, b"-LOADING Redis is loading\r\n", True, False)
        self.assertFalse(faults.redis_answers(free_port()))

    def test_redis_aof(self):
        self.check(faults.redis_keeps_writes, b"*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n", True,
                   True)
        self.check(faults.redis_keeps_writes, b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", True,
                   False)

    def test_mysql_greeting(self):
        self.check(faults.mysql_answers, b"\x4a\x00\x00\x00\x0a5.5.5-10.11.6-MariaDB\x00",
                   False, True)
        self.check(faults.mysql_answers, b"\x17\x00\x00\x00\xff\x13\x04Too many", False, False)
        self.assertFalse(faults.mysql_answers(free_port()))

    def test_zookeeper_serving(self):
        self.check(faults.zk_answers, b"Zookeeper version: 3.8.0\nMode: standalone\n", True,
                   True)
        self.check(faults.zk_answers,
                   b"This ZooKeeper instance is not currently serving requests\n", True, False)

    def test_probe_of_names(self):
        self.assertIsNotNone(faults.probe_of("redlock-4", ENV))
        with self.assertRaises(ValueError):
            faults.probe_of("nginx", ENV)


class LoadTest(unittest.TestCase):
    def test_closed_loop_and_paced(self):
        doc = document([strategy("alpha")])
        rate = 50
        with FakeStockd(doc) as fake:
            Api("127.0.0.1", fake.port).reset(5, 10)
            load = Load("127.0.0.1", fake.port, 5)
            load.add("a", "/stock/deduct/alpha?product=5&qty=1", 2)
            load.add("p", "/strategies", 1, rate=rate)
            t0 = load.start()
            # Until the stock is out and the paced stream has sent a few: no
            # fixed sleep, so a slow machine only makes it take longer.
            deadline = time.monotonic() + 20
            while not (any(a.status == 409 for a in load.answers("a"))
                       and len(load.answers("p")) >= 5) and time.monotonic() < deadline:
                threading.Event().wait(0.02)
            load.stop()
            sold = [a for a in load.answers("a") if a.status == 200]
            out = [a for a in load.answers("a") if a.status == 409]
            self.assertEqual(len(sold), 10)
            self.assertGreater(len(out), 0)
            self.assertEqual({a.word for a in out}, {"sold_out"})
            self.assertTrue(all(a.end >= a.start for a in sold))
            # Paced: the i-th request never leaves before its slot, t0 + i / rate.
            paced = load.answers("p")
            self.assertGreaterEqual(len(paced), 5)
            for i, a in enumerate(paced):
                self.assertGreaterEqual(a.start, t0 + i / rate - 1e-6, i)

    def test_refused(self):
        load = Load("127.0.0.1", free_port(), 1)
        load.add("x", "/health", 1)
        load.start()
        threading.Event().wait(0.1)
        load.stop()
        answers = load.answers("x")
        self.assertGreater(len(answers), 0)
        self.assertEqual({(a.status, a.word) for a in answers}, {(NO_ANSWER, "refused")})

    def test_words_and_slots(self):
        self.assertEqual(error_word(503, b'{"ok":false,"error":"timeout"}'), "timeout")
        self.assertEqual(error_word(502, b"<html>bad gateway</html>"), "")
        self.assertEqual(error_word(200, b'{"error":"x"}'), "")
        slots = slot_times(100.0, 10, 1, 3)
        self.assertEqual([round(next(slots), 3) for _ in range(3)], [100.1, 100.4, 100.7])


def answers(*spec):
    """Answers from (start, seconds, status, word) tuples."""
    return [Answer(s, s + d, st, w) for s, d, st, w in spec]


# The fault's command ran from 9.9 s to 10 s, back at 13 s, stopped at 17 s.
T = chaos_gate.Timeline(8.0, 9.9, 10.0, 13.0, 17.0)
GOOD = answers((8.0, 0.01, 200, ""), (9.0, 0.01, 200, ""), (10.5, 0.01, 503, "backend_unavailable"),
               (11.0, 1.9, 503, "outcome_unknown"), (12.0, 0.2, 503, "timeout"),
               (13.1, 0.05, 200, ""), (14.0, 0.01, 200, ""), (16.0, 0.01, 409, "busy"))
ACCT = {"sold": 5, "oversold": 0, "lost_updates": 0}


def judge(ans=GOOD, acct=ACCT, expect=faults.OUTAGE, hit=True, safe=True, alive=True):
    f = chaos_gate.figures(ans, T, acct)
    return f, chaos_gate.problems(f, expect, hit, safe, 2500, alive)


class VerdictTest(unittest.TestCase):
    def test_a_good_row(self):
        f, p = judge()
        self.assertEqual(p, [])
        self.assertEqual((f["ok"], f["unavailable"], f["unknown"], f["timeout"], f["conflict"]),
                         (4, 1, 1, 1, 1))
        self.assertEqual((f["ok_before"], f["refused_during"], f["recover_s"], f["ledger"]),
                         (2, 3, 0.15, "ok"))
        self.assertEqual(f["max_ms"], 1900.0)

    def test_ledger_holds_at_most_the_unknown_ones(self):
        self.assertEqual(judge(acct=dict(ACCT, sold=4))[1], [])
        _, p = judge(acct=dict(ACCT, sold=6))
        self.assertEqual(p, ["ledger: store sold 6 != 4 answers 200 + up to 1 "
                             "outcome_unknown x qty 1"])
        self.assertIn("ledger: store sold 3", judge(acct=dict(ACCT, sold=3))[1][0])
        self.assertEqual(judge(acct=None)[1], ["the store's accounting could not be read"])

    def test_oversold_only_for_a_safe_claim(self):
        acct = dict(ACCT, oversold=2, lost_updates=1)
        self.assertEqual(judge(acct=acct)[1], ["claims safe, but oversold 2, lost 1"])
        self.assertEqual(judge(acct=acct, safe=False)[1], [])

    def test_a_hang_past_the_deadline(self):
        _, p = judge(GOOD + answers((12.5, 2.6, 503, "backend_unavailable")),
                     acct=ACCT)
        self.assertEqual(p, ["a request took 2600 ms > deadline + margin 2500 ms"])

    def test_late_recovery_and_late_refusals(self):
        ans = answers((9.0, 0.01, 200, ""), (10.5, 0.01, 503, "backend_unavailable"),
                      (13.5, 0.01, 503, "backend_unavailable"),
                      (15.1, 0.01, 503, "backend_unavailable"), (15.5, 0.1, 200, ""))
        f, p = judge(ans, acct=dict(ACCT, sold=2))
        self.assertEqual(f["recover_s"], 2.6)
        self.assertEqual(p, ["first 200 2.60 s after the backend came back (> 2 s)",
                             "1 requests sent more than 2 s after the return answered 503"])
        _, p = judge(ans[:3], acct=dict(ACCT, sold=1))
        self.assertEqual(p, ["no 200 after the backend came back"])

    def test_the_fault_must_show(self):
        ans = answers((9.0, 0.01, 200, ""), (11.0, 0.01, 200, ""), (13.5, 0.01, 200, ""))
        acct = dict(ACCT, sold=3)
        self.assertEqual(judge(ans, acct)[1],
                         ["no 503 to a request that met the outage: the fault did not show"])
        self.assertEqual(judge(ans, acct, hit=False)[1], [])
        self.assertEqual(judge(ans, acct, expect=faults.QUORUM)[1], [])
        # A 503 to a request sent while the backend was gone counts, whenever it ends.
        late = ans + answers((12.9, 1.0, 503, "timeout"))
        self.assertEqual(judge(late, acct)[1], [])
        # So does one sent while the fault's command ran, answered much later.
        landing = ans + answers((9.95, 2.1, 503, "timeout"))
        self.assertEqual(judge(landing, acct)[1], [])
        # And one sent just before the fault, still unanswered when it began.
        in_flight = ans + answers((9.85, 2.0, 503, "timeout"))
        self.assertEqual(judge(in_flight, acct)[1], [])
        # Not one answered before the fault began, nor one sent after the return.
        unrelated = ans + answers((9.0, 0.5, 503, "timeout"), (13.2, 0.1, 503, "timeout"))
        self.assertEqual(judge(unrelated, dict(acct))[1],
                         ["no 503 to a request that met the outage: the fault did not show"])

    def test_the_quorum_must_keep_selling(self):
        ans = answers((9.0, 0.01, 200, ""), (11.0, 0.01, 503, "backend_unavailable"),
                      (13.5, 0.01, 200, ""))
        self.assertEqual(judge(ans, dict(ACCT, sold=2), expect=faults.QUORUM)[1],
                         ["no 200 while the quorum stayed"])

    def test_answers_outside_the_contract(self):
        ans = GOOD + answers((11.0, 0.01, 500, "internal"), (11.1, 0.01, NO_ANSWER, "reset"),
                             (11.2, 0.01, 503, "shutting_down"))
        f, p = judge(ans)
        self.assertEqual(f["unexpected"], "500 internal x1; 503 shutting_down x1; "
                                          "no answer (reset) x1")
        self.assertEqual(p, [f"answers outside the contract: {f['unexpected']}"])

    def test_stockd_died_and_nothing_before(self):
        _, p = judge(GOOD[2:], acct=dict(ACCT, sold=2), alive=False)
        self.assertEqual(p, ["stockd died", "no 200 before the fault: the run shows nothing"])

    def test_backend_never_back(self):
        t = chaos_gate.Timeline(8.0, 9.9, 10.0, None, 17.0)
        f = chaos_gate.figures(GOOD, t, ACCT)
        self.assertIsNone(f["recover_s"])
        self.assertIn("no 200 after the backend came back",
                      chaos_gate.problems(f, faults.OUTAGE, True, True, 2500, True))


class RefusalTest(unittest.TestCase):
    def test_refuses_a_port_where_something_answers(self):
        with FakeStockd(document([strategy("alpha")])) as fake:
            status, err = run_main(chaos.main, ["--port", str(fake.port), "--results-dir",
                                                "/tmp"])
        self.assertEqual(status, 2)
        self.assertIn("something answers at", err)

    def test_unknown_fault(self):
        args = chaos.parse_args(["--faults", "mysql-kill,disk-full"])
        with self.assertRaises(chaos.SetupError):
            chaos.choose_faults(args, ENV)
        self.assertEqual([f.name for f in chaos.choose_faults(chaos.parse_args([]), ENV)][:1],
                         ["mysql-kill"])


if __name__ == "__main__":
    unittest.main()
