"""The audit (lab/runs/audit.py, lab/client/target.py, lab/drivers/audit_plan.py): a target file is checked
whole before any load (every mistake one line, exit 2); answers are mapped by status,
JSON pointer and regular expression; a run's figures and verdict come from its
answers and the stock read after it; the filled plan is a JMeter plan with the
target's request. Then, with JMeter against the shipped shops (audit/services/shop.py,
started by their target files): the plain-text shop passes through its regular
expressions, and a release that starts to oversell fails against the baseline of the
release before it while the same violation against its own baseline is only known;
with a [retry] table, retrying buyers whose replies are held past their timeout buy
once from the safe shop, which keeps their key, and twice when the header it names is
one the shop ignores. (The gate runs the naive and the safe shop, and stockd against
its ledger.)"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab.base.common import REPO
from lab.client.target import Target, TargetError
from lab.drivers import audit_plan
from lab.drivers.load import NO_ANSWER, Answer
from lab.drivers.retrying import Purchase
from lab.judges import audit_gate
from lab.scaffold.auditing import retry_figures

TARGETS = os.path.join(REPO, "audit", "targets")
PORT = int(os.environ.get("TEST_PORT_BASE") or 24000) + 71

GOOD = """
name = "shop"
base_url = "http://127.0.0.1:{port}"
[vars]
port = "1"
[reset]
method = "POST"
url = "/reset?product={product}&stock={stock}"
[buy]
method = "POST"
url = "/buy/{product}?qty={qty}"
body = '{"buyer": "{buyer}", "qty": {qty}}'
headers = { Content-Type = "application/json" }
[answers]
sold = { status = 200 }
sold_out = [{ status = 409, pointer = "/error", equals = "sold_out" }, { regex = "^SOLD OUT" }]
refused = { status = [400, 429] }
remaining = { pointer = "/left/0" }
[stock]
url = "/stock/{product}"
pointer = "/count"
"""


def write(text):
    fd, path = tempfile.mkstemp(suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


class TargetFileTest(unittest.TestCase):
    def load(self, text, overrides=None):
        path = write(text)
        self.addCleanup(os.unlink, path)
        return Target(path, overrides, out="/tmp")

    def refused(self, text, words, overrides=None):
        with self.assertRaises(TargetError) as e:
            self.load(text, overrides)
        self.assertRegex(str(e.exception), words)
        self.assertNotIn("\n", str(e.exception))

    def test_a_good_file_fills_its_templates(self):
        t = self.load(GOOD, {"port": "8123"})
        self.assertEqual(t.buy_request(audit_plan.JMETER_FIELDS), (
            "http", "127.0.0.1", 8123, "/buy/${__P(product,1001)}?qty=${__P(qty,1)}",
            '{"buyer": "${buyer}", "qty": ${__P(qty,1)}}', {"Content-Type": "application/json"}))

    def test_every_mistake_is_one_line_naming_it(self):
        self.refused("name = [", r"not valid TOML")
        self.refused(GOOD.replace("[stock]", "[stocks]"), r"unknown key\(s\) stocks")
        self.refused(GOOD.replace("{qty}\"", "{quantity}\""), r"buy.url names \{quantity\}")
        self.refused(GOOD.replace('"{buyer}"', '"{user}"'), r"buy.body names \{user\}")
        self.refused(GOOD.replace("stock={stock}", "stock={buyer}"), r"reset.url names \{buyer\}")
        self.refused(GOOD.replace("status = 200", "status = 2000"), r"answers.sold\[0\].status")
        self.refused(GOOD.replace('"/count"', '"count"'), r"stock.pointer .* not a JSON pointer")
        self.refused(GOOD.replace('"^SOLD OUT"', '"(SOLD"'), r"answers.sold_out\[1\].regex")
        self.refused(GOOD.replace('method = "POST"\nurl = "/buy', 'method = "BUY"\nurl = "/buy'),
                     r"buy.method 'BUY'")
        self.refused(GOOD.replace("[buy]", "[buy]\nretries = 3"), r"buy has unknown key")
        self.refused(GOOD.replace("sold = { status = 200 }\n", ""), r"no sold rule")
        self.refused(GOOD, r"declares no color", {"color": "red"})
        self.refused(GOOD.replace('base_url = "http://127.0.0.1:{port}"', ""),
                     r"is a path, and the file has no base_url")
        self.refused(GOOD.replace('url = "/stock/{product}"', 'dsn = "postgres://x/y"\n'
                                  'statement = "SELECT 1"').replace('pointer = "/count"', ""),
                     r"is not sqlite:///PATH or mysql://")

    def test_a_retry_table_names_a_header_and_has_defaults(self):
        t = self.load(GOOD + '[retry]\nheader = "Idempotency-Key"\nattempts = 4\n')
        self.assertEqual(t.retry, {"header": "Idempotency-Key", "attempts": 4,
                                   "timeout_ms": 300, "hold_s": 1.5})
        self.assertIsNone(self.load(GOOD).retry)
        self.refused(GOOD + "[retry]\nattempts = 4\n", r"retry.header must name an HTTP header")
        self.refused(GOOD + '[retry]\nheader = "a key"\n', r"retry.header must name")
        self.refused(GOOD + '[retry]\nheader = "K"\nattempts = 0\n',
                     r"retry.attempts must be a positive integer")
        self.refused(GOOD + '[retry]\nheader = "K"\ntries = 3\n', r"\[retry\] has unknown key")

    def test_answers_are_mapped_by_status_pointer_and_regex(self):
        a = self.load(GOOD).answers
        self.assertEqual(a.classify(200, '{"left": [41]}'), ("sold", 41))
        self.assertEqual(a.classify(409, '{"error": "sold_out", "left": [0]}'), ("sold_out", 0))
        self.assertEqual(a.classify(409, '{"error": "busy"}'), ("unknown", None))
        self.assertEqual(a.classify(503, "SOLD OUT"), ("sold_out", None))
        self.assertEqual(a.classify(429, ""), ("refused", None))
        self.assertEqual(a.classify(None, ""), ("unknown", None))

    def test_the_shipped_targets_load(self):
        for name in sorted(os.listdir(TARGETS)):
            with self.subTest(name):
                Target(os.path.join(TARGETS, name), out="/tmp")


class JudgeTest(unittest.TestCase):
    K = {"qty": 1, "stock": 3}

    def row(self, answers, final):
        fd, path = tempfile.mkstemp(suffix=".jsonl")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        ops = [dict(id=i, invoke_ms=10 * i, complete_ms=10 * i + 5, ms=5, status=200,
                    word="200", outcome=o, remaining=r) for i, (o, r) in enumerate(answers, 1)]
        row = audit_gate.judge(None, self.K, ops, final, None, path)
        row["verdict"], row["reason"] = audit_gate.verdict(row, None)
        return row

    def test_a_safe_run_passes(self):
        r = self.row([("sold", 2), ("sold", 1), ("sold", 0), ("sold_out", 0)], 0)
        self.assertEqual((r["verdict"], r["oversold"], r["lost_updates"]), ("pass", 0, 0))

    def test_a_lost_update_is_named_with_its_two_sales(self):
        r = self.row([("sold", 2), ("sold", 2), ("sold", 1)], 1)
        self.assertEqual(r["verdict"], "fail")
        self.assertEqual(r["lost_updates"], 1)
        self.assertRegex(r["reason"], r"#1 \(sold 1, read 3, left 2\) and #2 .* both left 2")

    def test_an_oversell_without_remaining_or_stock_read(self):
        r = self.row([("sold", None)] * 4, None)
        self.assertEqual((r["verdict"], r["oversold"], r["lost_updates"]), ("fail", 1, None))
        self.assertIn("oversold 1 units", r["reason"])

    def test_unexplained_units(self):
        r = self.row([("sold", None), ("sold_out", None)], 0)
        self.assertEqual(r["unexplained"], 2)
        self.assertEqual(r["verdict"], "fail")

    def test_no_recognised_answer_fails(self):
        r = self.row([("unknown", None)] * 3, 3)
        self.assertIn("no answer was recognised", r["reason"])

    def test_a_baseline_knows_a_kind_and_refuses_a_new_one(self):
        r = self.row([("sold", None)] * 4, None)
        self.assertEqual(audit_gate.verdict(r, set(r["kinds"]))[0], "known")
        self.assertRegex(audit_gate.verdict(r, set())[1], r"^regression: oversold")


def bought(*words):
    p = Purchase("k")
    p.tries = [Answer(0, 0.1, NO_ANSWER if w is None else 200, w) for w in words]
    return p


class RetryFiguresTest(unittest.TestCase):
    def test_units_beyond_one_per_purchase_are_double_buys(self):
        ps = [bought(None, "sold"), bought("sold"), bought(None, None)]
        r = retry_figures(ps, 1, 3)
        self.assertEqual((r["double_buys"], r["gave_up"], r["sold"], r["lost"]), (0, 1, 2, 3))
        self.assertEqual(r["verdict"], "fail")  # a purchase never answered
        r = retry_figures(ps[:2], 1, 4)
        self.assertEqual((r["double_buys"], r["verdict"]), (2, "fail"))
        self.assertIn("2 purchases bought again", r["reason"])
        r = retry_figures(ps[:2], 2, 4)
        self.assertEqual((r["double_buys"], r["verdict"]), (0, "pass"))

    def test_a_sold_out_takes_nothing(self):
        r = retry_figures([bought("sold"), bought("sold_out")], 1, 1)
        self.assertEqual((r["double_buys"], r["verdict"]), (0, "pass"))


class PlanTest(unittest.TestCase):
    def test_the_plan_carries_the_request(self):
        path = write(GOOD)
        self.addCleanup(os.unlink, path)
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out)
        plan = audit_plan.plan(Target(path, {"port": "9"}, out=out), os.path.join(out, "p.jmx"))
        root = ET.parse(plan).getroot()
        props = {e.get("name"): e.text for e in root.iter("stringProp")}
        self.assertEqual(props["HTTPSampler.method"], "POST")
        self.assertEqual(props["HTTPSampler.port"], "9")
        self.assertEqual(props["Argument.value"], '{"buyer": "${buyer}", "qty": ${__P(qty,1)}}')
        self.assertEqual(props["Header.name"], "Content-Type")


def audit_cli(*args):
    """python3 -m lab audit ARGS: (exit status, stdout + stderr)."""
    p = subprocess.run([sys.executable, "-B", "-m", "lab", "audit", *args], cwd=REPO,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout


@unittest.skipUnless(shutil.which("java"), "JMeter needs Java (scripts/deps.sh jmeter)")
class ShippedShopsTest(unittest.TestCase):
    """JMeter against the shipped shops, each started by its target file."""

    def setUp(self):
        self.results = tempfile.mkdtemp(prefix="audit-test.")
        self.addCleanup(shutil.rmtree, self.results)

    def test_a_bad_target_is_refused_before_any_load(self):
        path = write(GOOD.replace("{qty}\"", "{quantity}\""))
        self.addCleanup(os.unlink, path)
        status, out = audit_cli("--target", path, "--results-dir", self.results)
        self.assertEqual(status, 2, out)
        self.assertRegex(out, r"audit: .*buy.url names \{quantity\}")
        self.assertEqual(os.listdir(self.results), [])

    def test_a_reset_nobody_answers_is_refused_before_any_load(self):
        path = write(GOOD)
        self.addCleanup(os.unlink, path)
        status, out = audit_cli("--target", path, "--vars", f"port={PORT}",
                                "--results-dir", self.results)
        self.assertEqual(status, 2, out)
        self.assertRegex(out, r"the reset got no answer")
        self.assertFalse([f for f in os.listdir(os.path.join(self.results, "audit-latest"))
                          if f.endswith(".jtl")])

    def test_the_plain_text_shop_passes_through_its_regexes(self):
        status, out = audit_cli("--target", os.path.join(TARGETS, "text.toml"), "--vars",
                                f"port={PORT}", "--results-dir", self.results)
        self.assertEqual(status, 0, out)
        with open(os.path.join(self.results, "audit-latest", "audit.json")) as f:
            doc = json.load(f)
        row = doc["rows"][0]
        self.assertEqual((row["sold"], row["sold_out"], row["unknown"], row["remaining"]),
                         (100, 100, 0, 0))
        self.assertTrue(row["history_linearizable"])

    def test_retries_buy_once_where_the_key_is_kept_and_again_where_it_is_not(self):
        safe = os.path.join(TARGETS, "safe.toml")
        status, out = audit_cli("--target", safe, "--vars", f"port={PORT}", "--threads", "4",
                                "--loops", "5", "--results-dir", self.results)
        self.assertEqual(status, 0, out)
        self.assertRegex(out, r"retries PASS: 4 purchases, .* 0 double buys")
        with open(safe) as f:
            ignored = write(f.read().replace('header = "Idempotency-Key"', 'header = "X-Not-Kept"')
                            .replace("{here}/..", os.path.join(REPO, "audit")))
        self.addCleanup(os.unlink, ignored)
        status, out = audit_cli("--target", ignored, "--vars", f"port={PORT}", "--threads",
                                "4", "--loops", "5", "--results-dir", self.results)
        self.assertEqual(status, 1, out)
        self.assertRegex(out, r"retries FAIL: 4 purchases, .* [1-9]\d* double buys")

    def test_a_release_that_starts_to_oversell_fails_against_its_baseline(self):
        naive = os.path.join(TARGETS, "naive.toml")
        status, out = audit_cli("--target", naive, "--vars", f"port={PORT},sale=conditional",
                                "--results-dir", self.results)
        self.assertEqual(status, 0, out)
        before = os.path.join(os.path.realpath(os.path.join(self.results, "audit-latest")),
                              "audit.json")
        status, out = audit_cli("--target", naive, "--vars", f"port={PORT}",
                                "--results-dir", self.results, "--baseline", before)
        self.assertEqual(status, 1, out)
        self.assertRegex(out, r"FAIL run 1: regression: .*oversold")
        self.assertRegex(out, r"both left \d+: .*a lost update")
        caught = os.path.join(os.path.realpath(os.path.join(self.results, "audit-latest")),
                              "audit.json")
        status, out = audit_cli("--target", naive, "--vars", f"port={PORT}",
                                "--results-dir", self.results, "--baseline", caught)
        self.assertEqual(status, 0, out)
        self.assertRegex(out, r"KNOWN run 1: as in the baseline: oversold")
        with open(os.path.join(self.results, "audit-latest", "report.html")) as f:
            page = f.read()
        self.assertEqual(len(re.findall(r'<figure class="race"', page)), 1)


if __name__ == "__main__":
    unittest.main()
