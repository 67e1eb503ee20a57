"""Audit a foreign service: does it oversell under a flash sale, and did this release
make it worse? (make audit TARGET=file, docs/audit.md)

A target file (lab.client.target) says how to reset a product, how to buy, what the answers
mean and how to read the stock afterwards; the whole file is checked, and the reset
(and the stock read after it) must work, before any load is sent. Then each run:
reset the product to --stock units, drive the purchase with JMeter (jmeter/audit.jmx
filled in with the target's request: plan.jmx beside the results), read the stock,
and judge by what the clients saw:

    oversold        units answered sold beyond the stock there was
    lost updates    units answered sold that the stock read afterwards does not show
    unexplained     units gone from the stock that no sold (or unknown) answer took
    history         the clients' history (every request's times, answer and the stock
                    it says it left) checked for linearizability (lab.judges.linearize):
                    linearizable, or the first violation in words

A run fails on any of them (and when no answer was recognised as sold or sold out:
the target's [answers] does not describe the service). With --baseline FILE (the
audit.json of an earlier audit of the same target) a kind of violation the baseline
already showed is reported as known and does not fail; a new one does: a release
that starts to oversell fails.

Writes results/audit-<timestamp>/ (results/audit-latest points at it):
    audit.json      the rows and the run's parameters (the next run's --baseline)
    report.html     the verdict, the table, and the race timeline of a run when the
                    service reports the stock a sale left
    junit.xml       one test case per run, for CI
    plan.jmx        the filled plan; run-N.jtl, .log, .out: JMeter's results of run N
    history-run-N.jsonl  the clients' history of run N, one op per line
    service.log     the output of the service the target file starts, if any
Exit status: 0 every run passes, 1 a violation (or a regression against the
baseline), 2 the audit cannot be made (the target file, its service, its reset)."""

import json
import os
import sys

from ..base.common import REPO, SetupError, comma_list
from ..client.target import Target
from ..reports import audit_report, tables
from ..scaffold.auditing import DEFAULTS, Audit, knobs
from ..scaffold.runner import Runner


def options(o):
    o.add("--target", ["TARGET"], "", str, "the target file (TOML, docs/audit.md)")
    o.add("--vars", ["VARS"], "", comma_list, "NAME=VALUE,... overriding the file's [vars]")
    for knob, help in (("threads", "JMeter threads"), ("loops", "requests per thread"),
                       ("rampup", "seconds to start all threads"), ("stock", "units at reset"),
                       ("product", "the product bought"), ("qty", "units per request")):
        o.add(f"--{knob}", [knob.upper()], "", str,
              f"{help}; empty: the target's [load], else {DEFAULTS[knob]}")
    o.add("--runs", ["AUDIT_RUNS"], 1, int, "runs of the same load, each judged", 1)
    o.add("--baseline", ["BASELINE"], "", str,
          "an earlier audit.json of this target: fail only on a new kind of violation")
    o.add("--jmeter", ["JMETER"], os.path.join(REPO, "jmeter", "jmeter"), str, "the jmeter command")
    o.add("--jmeter-timeout", ["JMETER_TIMEOUT"], 900, int,
          "seconds before a JMeter run is stopped", 1)


def after_parse(args, error):
    if not args.target:
        error("--target FILE (or TARGET=file) is required")
    pairs = {}
    for word in args.vars:
        name, eq, value = word.partition("=")
        if not eq or not name:
            error(f"--vars: {word!r} is not NAME=VALUE")
        pairs[name.strip()] = value
    args.vars = pairs


def read_baseline(path, target):
    """The kinds of violation an earlier audit of this target showed."""
    try:
        with open(path) as f:
            doc = json.load(f)
        rows, name = doc["rows"], doc["params"]["target"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SetupError(f"--baseline {path}: not an audit.json ({e})") from None
    if name != target.name:
        raise SetupError(f"--baseline {path} audits {name!r}, not {target.name!r}")
    return {k for r in rows for k in r.get("kinds", [])}


def work(run):
    args = run.args
    Target(args.target, args.vars, out="")  # every check, before anything is made
    out_dir = run.out_dir()
    target = Target(args.target, args.vars, out=out_dir)
    k = knobs(args, target)
    known = read_baseline(args.baseline, target) if args.baseline else None
    audit = Audit(target, k, known, args.jmeter, args.jmeter_timeout, out_dir, run.say)
    rows = audit.run(args.runs)
    audit.write(rows, run.started, args.baseline or None)
    return rows, out_dir, audit.retries


def report(run, done):
    rows, out_dir, retried = done
    print(tables.text_table(rows, audit_report.TABLE))
    print()
    for r in rows:
        if r.get("history_ops") is not None:
            print(f"history {r['label']}: {r['history']}")
    failed = [r for r in rows if r["verdict"] == "fail"]
    for r in rows:
        if r["verdict"] != "pass":
            print(f"{r['verdict'].upper()} {r['label']}: {r['reason']}")
    print(f"{len(rows) - len(failed)}/{len(rows)} runs pass; report: "
          f"{os.path.join(out_dir, 'report.html')}; junit: {os.path.join(out_dir, 'junit.xml')}")
    if retried:
        print(f"retries {retried['verdict'].upper()}: {retried['purchases']} purchases, "
              f"{retried['tries']} tries ({retried['lost']} answers lost), {retried['sold']} "
              f"sold, {retried['units_gone']} units gone, {retried['double_buys']} double "
              f"buys: {retried['reason']}")
    return 1 if failed or not rows or (retried and retried["verdict"] != "pass") else 0


RUNNER = Runner("audit", __doc__, options=options, work=work, report=report, results="audit-",
                after_parse=after_parse)
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
