"""The orders judge on synthetic rows: a clean row passes, and each check fails on a
history, records or accounting made to break it, with its words; the figures (lags,
stranded unit-seconds, duplicates) from known records; the stranding row passes only
when it strands. Then the buyers driver against a stand-in for the orders routes
(tests/lab/fakeorders.py): a sound store passes, one whose sweeper returns paid orders
or returns early is caught; a racing plan's cancels arrive in pairs, nothing written
beside them, and lose one unit a pair where returns read before they write."""

import csv
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

from fakeorders import FakeOrders
from lab.client import orders as orders_client
from lab.client.api import Api
from lab.drivers.order_buyers import OrderBuyers, Plan
from lab.base.common import REPO, SetupError
from lab.judges import orders
from lab.reports import orders_report
from lab.runs import orders as orders_run

DEADLINE = 10_000
LAG = 1200
ROW = {"lag_ms": LAG, "strands_when": None, "strands": False}
KEYSPACE = {"lag_ms": None, "strands_when": "no subscriber is connected when the key expires",
            "strands": True}


def op(n, kind, order, status, word="", payment=None, duplicate=False):
    return {"id": n, "kind": kind, "order": order, "payment": payment, "invoke": n * 10,
            "complete": n * 10 + 5 if status else None, "status": status, "word": word,
            "duplicate": duplicate}


def record(state, qty=1, returned=0, returned_at=None, payment=None, refunds=0):
    return {"state": state, "qty": qty, "expires_at_ms": DEADLINE, "payment": payment,
            "returned": returned, "returned_at_ms": returned_at, "refunds_due": refunds}


def clean():
    """Four orders of 1 unit out of 10: A paid (its callback twice, then a late other
    payment refused), B expired and returned (its late payment refused), C cancelled
    (twice), D expired with no payment."""
    history = [
        op(1, "hold", "A", 201), op(2, "hold", "B", 201), op(3, "hold", "C", 201),
        op(4, "hold", "D", 201),
        op(5, "pay", "A", 200, payment="pa"),
        op(6, "pay", "A", 200, payment="pa", duplicate=True),
        op(7, "pay", "A", 409, "already_paid", payment="pa2"),
        op(8, "pay", "B", 409, "expired", payment="pb"),
        op(9, "pay", "B", 409, "expired", payment="pb", duplicate=True),
        op(10, "cancel", "C", 200), op(11, "cancel", "C", 200, duplicate=True),
    ]
    records = {
        "A": record("paid", payment="pa", refunds=1),
        "B": record("expired", returned=1, returned_at=DEADLINE + 150, refunds=1),
        "C": record("cancelled", returned=1, returned_at=DEADLINE - 900),
        "D": record("expired", returned=1, returned_at=DEADLINE + 300),
    }
    stock = {"remaining": 9, "held": 0, "paid": 1, "returned": 3, "refunds_due": 2,
             "oversold": 0, "stranded": 0}
    return history, records, stock


def verdict(row=ROW, history=None, records=None, stock=None, now_ms=DEADLINE + 5000):
    h, r, s = clean()
    return orders.judge(row, 10, h if history is None else history,
                        r if records is None else records, s if stock is None else stock,
                        now_ms)


class CleanRowTest(unittest.TestCase):
    def test_passes_with_its_figures(self):
        v = verdict()
        self.assertEqual(v["verdict"], "pass", v["reason"])
        self.assertEqual((v["held"], v["paid"], v["returned"], v["stranded"]), (0, 1, 3, 0))
        self.assertEqual((v["lag_p50_ms"], v["lag_max_ms"]), (150, 300))
        self.assertEqual((v["duplicates"], v["refunds_due"], v["oversold"]), (3, 2, 0))
        self.assertEqual((v["returned_twice"], v["paid_and_returned"]), (0, 0))

    def test_an_unanswered_payment_may_or_may_not_be_a_refund(self):
        h, r, s = clean()
        h.append(op(12, "pay", "D", 0, "client timeout", payment="pd"))
        self.assertEqual(verdict(history=h)["verdict"], "pass")
        r["D"]["refunds_due"], s["refunds_due"] = 1, 3
        self.assertEqual(verdict(history=h, records=r, stock=s)["verdict"], "pass")


class ViolationTest(unittest.TestCase):
    """Each check, broken once: the row fails and the reason names it."""

    def fails(self, words, **given):
        v = verdict(**given)
        self.assertEqual(v["verdict"], "fail")
        self.assertIn(words, v["reason"])
        return v

    def test_the_accounting(self):
        """The store's figures against themselves and against its orders."""
        for change, words in (({"remaining": 10}, "units not in one place"),
                              ({"oversold": 2}, "oversold 2"),
                              ({"returned": 4}, "the store counts returned 4, its orders 3"),
                              ({"held": None}, "has no held")):
            with self.subTest(words=words):
                self.fails(words, stock=dict(clean()[2], **change))

    def test_a_hold_the_store_does_not_know(self):
        h, r, _ = clean()
        h.append(op(12, "hold", "E", 201))
        self.fails("hold E answered 201 but the store does not know it", history=h)

    def test_returned_twice(self):
        _, r, s = clean()
        r["D"]["returned"], s["returned"] = 2, 4
        v = self.fails("order D returned 2 times", records=r, stock=s)
        self.assertEqual(v["returned_twice"], 1)

    def test_paid_and_returned(self):
        _, r, s = clean()
        r["A"]["returned"], r["A"]["returned_at_ms"], s["returned"] = 1, DEADLINE + 10, 4
        v = self.fails("order A paid and returned", records=r, stock=s)
        self.assertEqual(v["paid_and_returned"], 1)

    def test_expired_never_returned(self):
        _, r, s = clean()
        r["D"]["returned"], s["returned"] = 0, 2
        self.fails("order D expired but returned 0 times", records=r, stock=s)

    def test_released_early_or_late(self):
        for at, words in ((DEADLINE - 40, "order D returned 40 ms before its deadline"),
                          (DEADLINE + LAG + 1, f"returned {LAG + 1} ms after its deadline "
                           f"(promised {LAG} ms)")):
            with self.subTest(words=words):
                _, r, _ = clean()
                r["D"]["returned_at_ms"] = at
                self.fails(words, records=r)

    def test_no_lag_promised_no_lag_violation(self):
        _, r, _ = clean()
        r["D"]["returned_at_ms"] = DEADLINE + 60_000
        v = verdict(row=dict(ROW, lag_ms=None), records=r, now_ms=DEADLINE + 70_000)
        self.assertEqual(v["verdict"], "pass", v["reason"])
        self.assertEqual(v["stranded_unit_s"], 59.0)

    def test_a_fault_widens_the_lag_it_took(self):
        _, r, _ = clean()
        r["D"]["returned_at_ms"] = DEADLINE + LAG + 500
        v = verdict(row=dict(ROW, lag_allowance_ms=1000), records=r)
        self.assertEqual(v["verdict"], "pass", v["reason"])
        self.assertEqual(v["stranded_unit_s"], 0.5)  # past the promise, all the same

    def test_a_captured_payment_not_the_orders(self):
        _, r, _ = clean()
        r["A"]["payment"] = "other"
        self.fails("payment pa answered 200 but order A is paid with payment other", records=r)

    def test_two_payments_captured(self):
        h, _, _ = clean()
        h.append(op(12, "pay", "A", 200, payment="pz"))
        self.fails("order A captured 2 payments", history=h)

    def test_refunds_due_once_per_refused_payment(self):
        for due, words in ((0, "order B has 0 refunds due, its refused payments say 1"),
                           (2, "order B has 2 refunds due")):  # the duplicate counted
            with self.subTest(words=words):
                _, r, s = clean()
                r["B"]["refunds_due"], s["refunds_due"] = due, 1 + due
                self.fails(words, records=r, stock=s)

    def test_a_cancel_that_did_not_cancel(self):
        _, r, s = clean()
        r["C"] = record("expired", returned=1, returned_at=DEADLINE + 10)
        self.fails("order C answered 200 to a cancel but is expired", records=r, stock=s)

    def test_units_left_held(self):
        _, r, s = clean()
        r["D"] = record("held")
        s.update(held=1, returned=2, remaining=8)
        v = self.fails("1 units still held after the settle", records=r, stock=s)
        self.assertEqual(v["stranded"], 1)
        self.assertEqual(v["stranded_unit_s"], (5000 - LAG) / 1000.0)

    def test_first_violation_is_said_first(self):
        _, r, s = clean()
        s["oversold"] = 1
        r["D"]["returned_at_ms"] = DEADLINE - 1
        self.fails("oversold 1", records=r, stock=s)


class UnsafeRowTest(unittest.TestCase):
    """An unsafe strategy's racing returns: the race must show in the units, and only
    there."""

    UNSAFE = dict(ROW, unsafe=True)

    def test_passes_when_returns_vanished(self):
        v = verdict(row=self.UNSAFE, stock=dict(clean()[2], remaining=7))
        self.assertEqual(v["verdict"], "pass", v["reason"])
        self.assertIn("unsafe, and the race showed: 2 units vanished, 0 appeared",
                      v["reason"])
        self.assertEqual((v["vanished"], v["appeared"]), (2, 0))

    def test_passes_when_sales_were_overwritten(self):
        v = verdict(row=self.UNSAFE, stock=dict(clean()[2], remaining=10))
        self.assertEqual(v["verdict"], "pass", v["reason"])
        self.assertEqual((v["vanished"], v["appeared"]), (0, 1))

    def test_fails_when_the_race_did_not_show(self):
        v = verdict(row=self.UNSAFE)
        self.assertEqual(v["verdict"], "fail")
        self.assertIn("the race did not show", v["reason"])

    def test_a_double_return_is_no_race_it_may_show(self):
        _, r, s = clean()
        r["C"]["returned"] = 2
        v = verdict(row=self.UNSAFE, records=r, stock=dict(s, remaining=7))
        self.assertEqual(v["verdict"], "fail")
        self.assertIn("order C returned 2 times", v["reason"])


class StrandingRowTest(unittest.TestCase):
    def stranded_row(self):
        _, r, s = clean()
        r["D"] = record("held")
        s.update(held=1, returned=2, remaining=8)
        return r, s

    def test_passes_when_it_strands_and_says_why(self):
        r, s = self.stranded_row()
        v = verdict(row=KEYSPACE, records=r, stock=s)
        self.assertEqual(v["verdict"], "pass")
        self.assertIn("strands 1 units as its facts state: no subscriber", v["reason"])

    def test_a_fault_that_did_not_strand_is_setup(self):
        v = verdict(row=KEYSPACE)
        self.assertEqual(v["verdict"], "setup")
        self.assertIn("none stranded", v["reason"])

    def test_stranding_is_no_excuse_for_a_double_return(self):
        r, s = self.stranded_row()
        r["B"]["returned"], s["returned"] = 2, 3
        v = verdict(row=KEYSPACE, records=r, stock=s)
        self.assertEqual(v["verdict"], "fail")
        self.assertIn("order B returned 2 times", v["reason"])


class FailoverRowTest(unittest.TestCase):
    """A failover of a store whose strategy loses acknowledged writes (its failover
    fact): what lost writes explain is said, not failed; the rest still fails."""

    LOSES = dict(ROW, loses_writes=True, may_strand=True,
                 strands_when="no subscriber is connected when the key expires")

    def test_a_lost_hold_is_said_not_failed(self):
        h, _, _ = clean()
        h.append(op(12, "hold", "E", 201))
        v = verdict(row=self.LOSES, history=h)
        self.assertEqual(v["verdict"], "pass")
        self.assertIn("acknowledged writes lost, as the strategy's failover fact says: "
                      "hold E answered 201", v["reason"])
        self.assertEqual(verdict(history=h)["verdict"], "fail")

    def test_a_double_return_still_fails(self):
        h, r, s = clean()
        h.append(op(12, "hold", "E", 201))
        r["D"]["returned"], s["returned"] = 2, 4
        v = verdict(row=self.LOSES, history=h, records=r, stock=s)
        self.assertEqual(v["verdict"], "fail")
        self.assertIn("hold E answered 201", v["reason"])  # the first words, all the same

    def test_it_may_strand(self):
        _, r, s = clean()
        r["D"] = record("held")
        s.update(held=1, returned=2, remaining=8)
        v = verdict(row=self.LOSES, records=r, stock=s)
        self.assertEqual(v["verdict"], "pass")
        self.assertIn("strands 1 units, as its facts allow", v["reason"])
        self.assertEqual(verdict(row=self.LOSES)["verdict"], "pass")  # or not


class BoundsTest(unittest.TestCase):
    def test_refund_bounds(self):
        ops = [op(1, "pay", "A", 409, "expired", payment="p1"),
               op(2, "pay", "A", 409, "expired", payment="p1", duplicate=True),
               op(3, "pay", "A", 0, "reset", payment="p2"),
               op(4, "pay", "A", 200, payment="p3"), op(5, "pay", "A", 0, payment="p3")]
        self.assertEqual(orders.refund_bounds(ops), (1, 2))
        self.assertEqual(orders.refund_bounds(ops[:1] + [op(3, "pay", "A", 0, "refused",
                                                           payment="p2")]), (1, 1))

    def test_unanswered_hold_skips_the_sums_not_the_balance(self):
        h, r, s = clean()
        h.append(op(12, "hold", None, 0, "client timeout"))
        s2 = dict(s, held=1, remaining=8)
        self.assertEqual(verdict(history=h, stock=s2)["verdict"], "fail")  # held 1 after settle
        self.assertEqual(orders.check_units(10, s2, r, all_known=False), None)
        self.assertIn("held", orders.check_units(10, s2, r, all_known=True))
        h[-1]["word"] = "refused"  # never sent: the clients know every order there is
        self.assertIn("the store counts held 1, its orders 0",
                      verdict(history=h, stock=s2)["reason"])


class DriverTest(unittest.TestCase):
    """Buyers against the stand-in, settled, read back and judged."""

    def row(self, flaw=None, ttl_ms=300, at_deadline=False):
        with FakeOrders(sweep_ms=20, flaw=flaw) as fake:
            api = Api("127.0.0.1", fake.port)
            api.must_reset(7, 500)
            (mechanism,) = orders_client.read_mechanisms(api)
            buyers = OrderBuyers([fake.port], Plan("s1", 7, ttl_ms=ttl_ms, expiry=mechanism.name,
                                                   at_deadline=at_deadline, seed=3), buyers=6)
            buyers.start()
            time.sleep(0.6)
            history = buyers.finish()
            time.sleep((ttl_ms + 200) / 1000.0)
            records = orders_client.records(api, history)
            stock = api.account(7, "mysql")
            row = {"lag_ms": mechanism.lag_ms, "strands_when": mechanism.strands_when}
            return history, orders.judge(row, 500, history, records, stock,
                                         int(time.time() * 1000))

    def test_a_sound_store_passes_with_every_kind_of_answer(self):
        history, v = self.row()
        self.assertEqual(v["verdict"], "pass", v["reason"])
        kinds = {(op["kind"], op["status"], op["word"]) for op in history}
        for seen in (("hold", 201, ""), ("pay", 200, ""), ("pay", 409, "expired"),
                     ("cancel", 200, "")):
            self.assertIn(seen, kinds)
        self.assertGreater(v["duplicates"], 0)
        self.assertGreater(v["returned"], 0)
        self.assertTrue(all(op["complete"] >= op["invoke"] for op in history))

    def test_a_sweeper_that_returns_paid_orders_is_caught(self):
        _, v = self.row(flaw="unconditional", at_deadline=True)
        self.assertEqual(v["verdict"], "fail")  # paid units back in stock: the first words
        self.assertIn("units not in one place", v["reason"])
        self.assertGreater(v["paid_and_returned"], 0)

    def test_a_sweeper_that_returns_early_is_caught(self):
        _, v = self.row(flaw="early")
        self.assertEqual(v["verdict"], "fail")
        self.assertIn("before its deadline", v["reason"])

    def test_mechanisms_need_their_facts(self):
        with self.assertRaises(Exception) as e:
            orders_client.mechanisms({"expiry": [{"name": "x", "store": "mysql"}]})
        self.assertIn("has no lag_ms, strands_when", str(e.exception))


class RacingPairsTest(unittest.TestCase):
    """A racing plan's cancels against the stand-in, whose racing cancels each wait at a
    Barrier(2) for their pair's: every pair in flight at once, nothing written beside
    it; on a store whose returns read the count, then write it ("read-then-write"), one
    unit vanishes per pair and none appears; on a sound one, none either way."""

    BUYERS = 16

    def race(self, flaw=None):
        with FakeOrders(sweep_ms=20, flaw=flaw) as fake:
            api = Api("127.0.0.1", fake.port)
            api.must_reset(7, 500)
            plan = Plan("s1", 7, ttl_ms=1000, expiry="fake-sweeper", pay_p=0, cancel_p=0.5,
                        seed=5, cancel_hold_ms=50)
            self.assertTrue(plan.racing)
            history = OrderBuyers([fake.port], plan, buyers=self.BUYERS, orders=1).start().finish()
            records = orders_client.records(api, history)
            stock = api.account(7, "mysql")
            self.assertEqual((fake.unpaired, fake.beside), (0, 0))  # pairs, alone
        cancelled = [op for op in history if op["kind"] == "cancel" and not op["duplicate"]]
        self.assertTrue(all(op["status"] == 200 for op in cancelled))
        self.assertEqual(len(cancelled) % 2, 0)  # an order left without a partner waits
        self.assertGreaterEqual(len(cancelled), 4)
        return len(cancelled) // 2, orders.drift(500, stock), \
            orders.violations(500, history, records, stock, None)

    def test_each_pair_loses_one_return_on_an_unsafe_store(self):
        pairs, drift, said = self.race("read-then-write")
        self.assertEqual(drift, (pairs, 0))
        self.assertEqual([check for check, _ in said], ["units"])

    def test_a_sound_store_keeps_every_unit(self):
        pairs, drift, said = self.race()
        self.assertEqual((drift, said), ((0, 0), []))


MECHANISMS = orders_client.mechanisms({"expiry": [
    {"name": "m-sweep", "store": "mysql", "lag_ms": 1200, "strands_when": None},
    {"name": "r-zset", "store": "redis", "lag_ms": 1200, "strands_when": None},
    {"name": "r-keys", "store": "redis", "lag_ms": None, "strands_when": "no subscriber"}]})


class PlanTest(unittest.TestCase):
    def plan(self, *argv):
        args = orders_run.parse_args(list(argv))
        return [(m.name, f) for m, f in orders_run.planned(MECHANISMS, args)]

    def test_the_short_form(self):
        self.assertEqual(self.plan("--quick"), [
            ("m-sweep", "none"), ("m-sweep", "two-sweepers"), ("m-sweep", "returns-race"),
            ("r-zset", "two-sweepers"), ("r-keys", "stopped")])

    def test_the_whole_run_puts_a_stores_fault_under_its_mechanisms_only(self):
        rows = self.plan()
        self.assertEqual(len(rows), 3 * len(orders_run.FAULTS) - 4)
        self.assertIn(("r-zset", "returns-race"), rows)  # each store's first mechanism
        self.assertNotIn(("r-keys", "returns-race"), rows)
        self.assertIn(("m-sweep", "mysql-restart"), rows)
        self.assertNotIn(("r-zset", "mysql-restart"), rows)
        self.assertIn(("r-keys", "sentinel-failover"), rows)
        self.assertNotIn(("m-sweep", "sentinel-failover"), rows)

    def test_chosen_rows_and_unknown_names(self):
        self.assertEqual(self.plan("--expiry", "r-keys", "--faults", "stopped,none"),
                         [("r-keys", "stopped"), ("r-keys", "none")])
        with self.assertRaises(SetupError) as e:
            self.plan("--expiry", "nope", "--faults", "late")
        self.assertIn("unknown expiry nope faults late", str(e.exception))


class ReportTest(unittest.TestCase):
    def test_the_racing_order_and_its_picture(self):
        h, r, _ = clean()
        for n, o in enumerate(h):
            o["wall_ms"] = DEADLINE - 1000 + 50 * n
        h[7]["wall_ms"], h[8]["wall_ms"] = DEADLINE - 20, DEADLINE + 30  # B's callbacks
        for oid in r:
            r[oid]["order"] = oid
        row = {"strategy": "s1", "expiry": "m-sweep", "fault": "none"}
        race = orders_report.race_of(h, r, row)
        self.assertEqual(race["record"]["order"], "B")  # its callbacks either side
        svg = orders_report.timeline_svg(**race)
        self.assertTrue(svg.startswith("<svg") and svg.rstrip().endswith("</svg>"))
        self.assertIn("deadline (the store's clock: expired after it)", svg)
        self.assertIn("units returned (+150 ms)", svg)
        self.assertIn("409 expired (duplicate) (+30 ms)", svg)

    def test_the_table_and_junit(self):
        v = dict(verdict(), strategy="s1", expiry="m-sweep", fault="none", seconds=3.0)
        self.assertIn("PASS", orders_report.tables.text_table([v], orders_report.COLUMNS))
        xml = orders_report.junit.document("orders", [v, dict(v, verdict="fail")],
                                           orders_report.name_of, lambda x: x["seconds"])
        self.assertIn('failures="1"', xml)


PLAN = os.path.join(REPO, "jmeter", "orders.jmx")


class JmeterPlanTest(unittest.TestCase):
    """jmeter/orders.jmx as it is: its samplers, then run by the JMeter that make deps
    installs (jmeter/jmeter) against the stand-in, as the gate runs deduct.jmx."""

    def test_the_plan_holds_pays_and_repeats_the_callback(self):
        root = ET.parse(PLAN).getroot()
        paths = {e.get("testname"): e.find("stringProp[@name='HTTPSampler.path']").text
                 for e in root.iter("HTTPSamplerProxy")}
        self.assertEqual(sorted(paths), ["duplicate", "hold", "pay"])
        self.assertTrue(paths["hold"].startswith("/orders/${__P(strategy,"))
        self.assertIn("ttl_ms=${__P(ttl_ms,1500)}", paths["hold"])
        self.assertEqual(paths["pay"], paths["duplicate"])  # the same payment id again
        self.assertEqual(paths["pay"], "/orders/${order}/pay?payment=j-${order}")

    @unittest.skipUnless(shutil.which("java"), "JMeter needs Java (scripts/deps.sh jmeter)")
    def test_it_runs_as_it_is(self):
        out = tempfile.mkdtemp(prefix="orders-jmx.")
        self.addCleanup(shutil.rmtree, out)
        jtl = os.path.join(out, "orders.jtl")
        with FakeOrders() as fake:
            Api("127.0.0.1", fake.port).must_reset(1001, 1000)
            p = subprocess.run(
                [os.path.join(REPO, "jmeter", "jmeter"), "-n", "-t", PLAN, "-q",
                 os.path.join(REPO, "jmeter", "deduct.properties"), "-l", jtl,
                 "-j", os.path.join(out, "jmeter.log"), f"-Jport={fake.port}",
                 "-Jthreads=4", "-Jloops=6", "-Jttl_ms=300", "-Jpay_after_ms=150",
                 "-Jpay_spread_ms=300", "-Jpay_percent=80", "-Jstrategy=s1"],
                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout)
            with open(jtl, newline="") as f:
                rows = list(csv.DictReader(f))
            paid = [o for o in fake.orders.values() if o["state"] == "paid"]
        self.assertEqual(sum(r["label"] == "hold" for r in rows), 24)
        self.assertTrue(all(r["success"] == "true" for r in rows), rows)
        answers = {(r["label"], r["responseCode"], r["outcome"]) for r in rows}
        self.assertIn(("hold", "201", "none"), answers)
        self.assertIn(("pay", "200", "none"), answers)
        self.assertTrue({("duplicate", "200", "none"), ("duplicate", "409", "expired")}
                        & answers)
        self.assertTrue(paid and all(o["payment"] == "j-" + o["order"] for o in paid))


if __name__ == "__main__":
    unittest.main()
