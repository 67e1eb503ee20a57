"""The comparison's one JMeter run: the plan made from jmeter/deduct.jmx (a ThreadGroup
per row, its knobs written in, the admin token left a property, the rows run one after
another), the one JTL split into each row's (a row boundary, a row with no sample), and
a failed run named in a row's reason."""

import csv
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

from lab.drivers import jmeter
from lab.runs import compare

HEADER = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,bytes,outcome,instance"


def plan_of(rows, gap_ms=0):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plan.jmx")
        jmeter.write_plan(path, rows, gap_ms)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return text, ET.fromstring(text.encode("utf-8"))


def prop(el, name):
    return el.find(f".//*[@name='{name}']").text


class PlanTest(unittest.TestCase):
    ROWS = [("calibration /ping", {"path": "/ping", "threads": 2, "loops": 3, "product": 1001}),
            ("alpha hold>ttl", {"strategy": "alpha", "threads": 4, "loops": 1, "product": 1002,
                                "hold_ms": 300, "ttl_ms": 100, "port": 9999})]

    def test_a_group_per_row_with_its_knobs_run_one_after_another(self):
        text, root = plan_of(self.ROWS)
        self.assertEqual(prop(root, "TestPlan.serialize_threadgroups"), "true")
        groups = root.findall(".//ThreadGroup")
        self.assertEqual([g.get("testname") for g in groups], [r[0] for r in self.ROWS])
        samplers = root.findall(".//HTTPSamplerProxy")
        self.assertEqual([s.get("testname") for s in samplers], [r[0] for r in self.ROWS])
        self.assertEqual([prop(g, "ThreadGroup.num_threads") for g in groups], ["2", "4"])
        self.assertEqual([prop(g, "LoopController.loops") for g in groups], ["3", "1"])
        self.assertEqual([prop(s, "HTTPSampler.path") for s in samplers],
                         ["/ping", "/stock/deduct/alpha"])
        self.assertEqual([prop(s, "HTTPSampler.port") for s in samplers], ["8080", "9999"])
        args = [{a.find("stringProp[@name='Argument.name']").text:
                 a.find("stringProp[@name='Argument.value']").text
                 for a in s.findall(".//elementProp[@elementType='HTTPArgument']")}
                for s in samplers]
        self.assertEqual(args[1], {"product": "1002", "qty": "1", "hold_ms": "300",
                                   "ttl_ms": "100", "pause_ms": "0"})
        self.assertEqual(args[0]["product"], "1001")

    def test_only_the_admin_token_stays_a_property(self):
        text, _ = plan_of(self.ROWS)
        self.assertEqual(text.count("${__P("), 2)
        self.assertEqual(text.count("Bearer ${__P(admin_token,)}"), 2)

    def test_the_plan_by_hand_is_unchanged(self):
        with open(jmeter.PLAN, encoding="utf-8") as f:
            text = f.read()
        self.assertIn('<boolProp name="TestPlan.serialize_threadgroups">false</boolProp>', text)
        self.assertEqual(text.count("<ThreadGroup "), 1)

    def test_a_gap_between_rows_records_nothing(self):
        _, root = plan_of(self.ROWS, gap_ms=1000)
        groups = root.findall(".//ThreadGroup")
        self.assertEqual([g.get("testname") for g in groups],
                         ["calibration /ping", "gap", "alpha hold>ttl"])
        self.assertEqual(prop(groups[1], "ThreadGroup.num_threads"), "1")
        pause = root.find(".//TestAction")
        self.assertEqual(prop(pause, "ActionProcessor.duration"), "1000")
        self.assertEqual(len(root.findall(".//HTTPSamplerProxy")), 2)

    def test_knobs_resolve_innermost_first(self):
        self.assertEqual(jmeter.resolve("${__P(path,/d/${__P(strategy,nolock)})}", {}),
                         "/d/nolock")
        self.assertEqual(jmeter.resolve("${__P(path,/d/${__P(strategy,nolock)})}",
                                        {"strategy": "x"}), "/d/x")
        self.assertEqual(jmeter.resolve("${__P(path,/d/${__P(strategy,nolock)})}",
                                        {"path": "/ping", "strategy": "x"}), "/ping")


class SplitTest(unittest.TestCase):
    def split(self, lines, labels):
        with tempfile.TemporaryDirectory() as d:
            jtl = os.path.join(d, "all.jtl")
            with open(jtl, "w") as f:
                f.write("\n".join([HEADER] + lines) + "\n")
            paths = {label: os.path.join(d, f"row{i}.jtl") for i, label in enumerate(labels)}
            jmeter.split_jtl(jtl, paths)
            read = {label: jmeter.read_jtl(p) for label, p in paths.items()}
            with open(paths[labels[0]], newline="") as f:
                first = list(csv.reader(f))
        return read, first

    def test_rows_split_at_their_boundary_each_with_its_own_window(self):
        lines = ["1000,10,a,200,OK,t 1-1,true,150,none,h:1",
                 "1005,20,a,409,Conflict,t 1-2,true,150,sold_out,h:1",
                 # the next row's first request starts before this row's last answer is logged
                 "3000,5,\"b, hold>ttl\",200,OK,t 2-1,true,150,none,h:2",
                 "1010,30,a,409,Conflict,t 1-1,true,150,busy,h:1",
                 "3010,40,\"b, hold>ttl\",503,Service Unavailable,t 2-1,false,150,outcome_unknown,h:2"]
        read, first = self.split(lines, ["a", "b, hold>ttl"])
        a, b = read["a"], read["b, hold>ttl"]
        self.assertEqual(first[0], HEADER.split(","))
        self.assertEqual(len(first), 4)
        self.assertEqual((a.requests, a.outcomes.fields()["busy"]), (3, 1))
        self.assertEqual((a.first_s, a.last_s), (1.0, 1.04))
        self.assertEqual((b.requests, b.first_s, b.last_s), (2, 3.0, 3.05))
        self.assertEqual(a.instances, {"h:1"})

    def test_a_row_with_no_sample_has_an_empty_jtl(self):
        read, _ = self.split(["1000,10,a,200,OK,t 1-1,true,150,none,h:1"], ["quiet", "a"])
        self.assertEqual(read["quiet"].requests, 0)
        self.assertIsNone(read["quiet"].first_s)
        self.assertEqual(read["a"].requests, 1)

    def test_no_jtl_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            jmeter.split_jtl(os.path.join(d, "none.jtl"), {"a": os.path.join(d, "a.jtl")})
            self.assertEqual(os.listdir(d), [])


class FailedRunTest(unittest.TestCase):
    def test_a_jmeter_failure_is_named_in_the_rows_reason(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "jmeter")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'An error occurred: no such plan' >&2\nexit 3\n")
            os.chmod(fake, 0o755)
            run = jmeter.run(fake, d, "jmeter-plan", {}, 30)
            self.assertEqual(run.rc, 3)
            res = jmeter.read_jtl(run.jtl)
            verdict, reason = compare.with_jmeter("fail", "no requests", run, res, 900)
        self.assertEqual(verdict, "fail")
        self.assertIn("jmeter exit status 3: An error occurred: no such plan", reason)
        self.assertIn("see jmeter-plan.out", reason)

    def test_a_timeout_fails_the_row(self):
        run = jmeter.Run("/nonexistent/p.jtl", "timeout", 5.0)
        verdict, reason = compare.with_jmeter("pass", "safe", run, jmeter.Results(), 900)
        self.assertEqual((verdict, reason), ("fail", "JMeter timed out after 900s a row; safe"))


class MemoryTest(unittest.TestCase):
    def test_a_row_gets_the_memory_read_after_it(self):
        m = compare.MemorySampler(None)
        m.samples = [(1.0, 100, {}), (2.0, 200, {"h:1": 200}), (3.0, 300, {})]
        self.assertEqual(m.after((1.1, 1.5)), (200, {"h:1": 200}))
        self.assertEqual(m.after((2.5, 3.5)), (300, {}))
        self.assertEqual(compare.MemorySampler(None).after((1, 2)), (None, {}))


class ProgressTest(unittest.TestCase):
    def test_each_row_said_once_when_its_first_line_is_whole(self):
        said = []
        with tempfile.TemporaryDirectory() as d:
            jtl = os.path.join(d, "plan.jtl")
            p = jmeter.Progress(jtl, ["calibration /ping", "a row"], said.append)
            p.tick()  # no JTL yet: nothing
            with open(jtl, "w") as f:
                f.write(HEADER + "\n1,2,calibration /ping,200,OK,t,true,9,none,a\n1,2,a r")
            p.tick()
            with open(jtl, "a") as f:
                f.write("ow,200,OK,t,true,9,none,a\n1,2,a row,200,OK,t,true,9,none,a\n")
            p.tick()
        self.assertEqual(said, ["calibration /ping: running (row 1 of 2)",
                                "a row: running (row 2 of 2)"])


if __name__ == "__main__":
    unittest.main()
