"""Audit a foreign service: does it oversell under a flash sale, and did this release
make it worse? (make audit TARGET=file, docs/audit.md)

A target file (lab.target) says how to reset a product, how to buy, what the answers
mean and how to read the stock afterwards; the whole file is checked, and the reset
(and the stock read after it) must work, before any load is sent. Then each run:
reset the product to --stock units, drive the purchase with JMeter (jmeter/audit.jmx
filled in with the target's request: plan.jmx beside the results), read the stock,
and judge by what the clients saw:

    oversold        units answered sold beyond the stock there was
    lost updates    units answered sold that the stock read afterwards does not show
    unexplained     units gone from the stock that no sold (or unknown) answer took
    history         the clients' history (every request's times, answer and the stock
                    it says it left) checked for linearizability (lab.linearize):
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
import subprocess
import sys

from ..base.common import REPO, SetupError, comma_list, tail, write_text
from ..client.target import Target, wait_answers
from ..stack.service import stop_process
from ..drivers import audit_plan, jmeter
from ..judges import history
from ..reports import audit_report, junit, tables
from ..scaffold.runner import Runner

# The built-in knobs; a target's [load] table and then the flags override them.
DEFAULTS = {"threads": 100, "loops": 50, "rampup": 1, "stock": 5000, "product": 1001, "qty": 1}
KINDS = ("oversold", "lost_updates", "unexplained", "not_linearizable")
HISTORY_OUTCOME = {"sold": "ok", "sold_out": "sold_out", "refused": "failed",
                   "unknown": "unknown"}


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


def knobs(args, target):
    """The run's threads, loops, rampup, stock, product and qty: the flag, else the
    target's [load], else DEFAULTS."""
    out = {}
    for k, default in DEFAULTS.items():
        given = getattr(args, k)
        try:
            out[k] = int(given) if given not in ("", None) else target.load.get(k, default)
        except ValueError:
            raise SetupError(f"--{k}: not a number: {given!r}") from None
        if out[k] < (0 if k == "rampup" else 1):
            raise SetupError(f"--{k} must be at least {0 if k == 'rampup' else 1}")
    return out


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


class ServiceProcess:
    """The service a target file's [service] starts, stopped at the end."""

    def __init__(self, target, out_dir, say):
        self.target, self.log = target, os.path.join(out_dir, "service.log")
        self.say, self.proc = say, None

    def start(self):
        spec = self.target.service
        if not spec:
            return
        _, host, port, _ = self.target.buy.parts(self.target.sample(), self.target.base_url)
        if wait_answers(host, port, 0.2, None):
            raise SetupError(f"something already answers at {host}:{port}, where the target's "
                             "[service] would start (choose another port with --vars)")
        self.say(f"starting the target's service: {' '.join(spec['command'])}")
        with open(self.log, "ab") as log:
            try:
                self.proc = subprocess.Popen(spec["command"], stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            except OSError as e:
                raise SetupError(f"cannot start the target's service: {e}") from None
        if not wait_answers(host, port, spec["wait_s"], self.proc):
            last = tail(self.log, 3).strip().splitlines()
            raise SetupError(f"the target's service did not answer at {host}:{port} within "
                             f"{spec['wait_s']} s ({last[-1] if last else 'no output'}; "
                             f"see {self.log})")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            stop_process(self.proc)


def preflight(target, k, say):
    """The reset, and the stock read after it, must work before any load is sent."""
    why = target.do_reset(k["product"], k["stock"])
    if why:
        raise SetupError(f"{target.file}: {why}")
    if target.stock is None:
        say("no [stock] in the target: lost updates cannot be counted, only oversold units "
            "and the history")
        return
    seen, why = target.read_stock(k["product"])
    if why:
        raise SetupError(f"{target.file}: after the reset, {why}")
    if seen != k["stock"]:
        raise SetupError(f"{target.file}: the reset to {k['stock']} answered, but the stock "
                         f"then reads {seen}")


def judge(target, k, answers, final, final_why, hist_path):
    """One run's row: the counts, the three figures, the history, the verdict."""
    qty, stock = k["qty"], k["stock"]
    counts = {o: sum(1 for a in answers if a["outcome"] == o)
              for o in ("sold", "sold_out", "refused", "unknown")}
    units = counts["sold"] * qty
    row = dict(counts, requests=len(answers), stock=stock, qty=qty, units_sold=units,
               oversold=max(0, units - stock), remaining=final, lost_updates=None,
               unexplained=None, stock_read=final_why or "read")
    if final is not None:
        taken = stock - final
        row["lost_updates"] = max(0, units - taken)
        row["unexplained"] = max(0, taken - units - counts["unknown"] * qty)
    w = history.Writer(hist_path)
    for a in answers:
        op = {"id": a["id"], "invoke": a["invoke_ms"], "complete": a["complete_ms"],
              "qty": qty, "outcome": HISTORY_OUTCOME[a["outcome"]]}
        if a["remaining"] is not None and a["outcome"] in ("sold", "sold_out"):
            op["remaining"] = a["remaining"]
        w.add(op)
    ops = w.close()
    row.update(history.judge_final(stock, ops, final, hist_path) if ops else
               history.not_judged("no requests"))
    kinds = [kind for kind, shown in (
        ("oversold", row["oversold"]), ("lost_updates", row["lost_updates"]),
        ("unexplained", row["unexplained"]),
        ("not_linearizable", row["history_linearizable"] is False)) if shown]
    row["kinds"] = kinds
    latencies = sorted(a["ms"] for a in answers)
    row["p50_ms"] = latencies[len(latencies) // 2] if latencies else None
    row["p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] \
        if latencies else None
    return row


def verdict(row, known):
    """(verdict, reason) of a row: pass, known (only kinds the baseline showed), fail."""
    if row["requests"] == 0:
        return "fail", "JMeter produced no results"
    if row["sold"] == 0 and row["sold_out"] == 0:
        return "fail", ("no answer was recognised as sold or sold out: the target's [answers] "
                        "does not describe what the service answered")
    said = []
    if row["oversold"]:
        said.append(f"oversold {row['oversold']} units ({row['units_sold']} sold of "
                    f"{row['stock']})")
    if row["lost_updates"]:
        said.append(f"{row['lost_updates']} units sold that the stock does not show "
                    f"(lost updates; {row['remaining']} left)")
    if row["unexplained"]:
        said.append(f"{row['unexplained']} units gone from the stock that no answer sold")
    if row["history_linearizable"] is False:
        said.append(f"not linearizable: {row['history']}")
    if not said:
        return "pass", ("nothing oversold" + ("" if row["lost_updates"] is None else
                                               " or lost") + "; history: " + row["history"])
    if known is None:
        return "fail", "; ".join(said)
    new = [k for k in row["kinds"] if k not in known]
    if not new:
        return "known", "as in the baseline: " + "; ".join(said)
    return "fail", (f"regression: {', '.join(new)} where the baseline showed none; "
                    + "; ".join(said))


def race_of(target, k, answers, row, label):
    """The timeline's JSON (web/race.js) of one run, from what its answers said."""
    qty, hist = k["qty"], []
    for a in answers:
        h = {"id": a["id"], "invoke_us": a["invoke_ms"] * 1000,
             "complete_us": a["complete_ms"] * 1000, "qty": qty}
        if a["outcome"] == "sold":
            h["status"] = 200
        elif a["outcome"] == "sold_out":
            h.update(status=409, error="sold_out")
        elif a["outcome"] == "refused":
            h.update(status=409, error=f"refused ({a['word']})")
        else:
            h.update(status=503 if a["status"] else 0, error="outcome_unknown")
        if a["remaining"] is not None and a["outcome"] in ("sold", "sold_out"):
            h["remaining"] = a["remaining"]
            if a["outcome"] == "sold":
                h["trace"] = {"read": a["remaining"] + qty, "wrote": a["remaining"]}
        hist.append(h)
    race = {"strategy": f"{target.name}, {label}", "buyers": len(answers),
            "initial": k["stock"], "qty": qty, "history": hist,
            "ledger": {"oversold": row["oversold"], "lost_updates": row["lost_updates"] or 0,
                       "remaining": row["remaining"]}}
    check = {"history_linearizable": row["history_linearizable"], "history": row["history"],
             "ledger": f"the stock read afterwards: {row['remaining']}",
             "agree": "the answers as the target file maps them"}
    return {"strategy": label, "race": race, "check": check,
            "params": {"buyers": len(answers), "units": k["stock"]}}


class Audit:
    """The audit of one target: its knobs, the baseline's kinds (or None), JMeter."""

    def __init__(self, target, k, known, jmeter_cmd, timeout, out_dir, say):
        self.target, self.k, self.known = target, k, known
        self.jmeter, self.timeout, self.out_dir, self.say = jmeter_cmd, timeout, out_dir, say
        self.races = []

    def run(self, runs):
        """The rows of `runs` runs (the target's service started and stopped around
        them; the reset checked first)."""
        target = self.target
        self.plan = audit_plan.plan(target, os.path.join(self.out_dir, "plan.jmx"))
        self.say(f"auditing {target.name} ({target.buy.method} {target.buy.url.text}); "
                 f"results in {self.out_dir}")
        service = ServiceProcess(target, self.out_dir, self.say)
        try:
            service.start()
            preflight(target, self.k, self.say)
            return [self.one(n, runs) for n in range(1, runs + 1)]
        finally:
            service.stop()

    def one(self, n, runs):
        target, k, label = self.target, self.k, f"run {n}"
        why = target.do_reset(k["product"], k["stock"]) if n > 1 else None
        if why:
            row = {"label": label, "requests": 0, "kinds": [], "verdict": "fail",
                   "reason": f"not run: {why}"}
            self.say(f"{label}: FAIL - {row['reason']}")
            return row
        self.say(f"{label}: {k['threads']} threads x {k['loops']} loops against {k['stock']} "
                 f"units of product {k['product']}, qty {k['qty']}")
        props = {x: k[x] for x in ("threads", "loops", "rampup", "product", "qty")}
        jm = jmeter.run(self.jmeter, self.out_dir, f"run-{n}", props, self.timeout,
                        plan=self.plan, properties=audit_plan.PROPERTIES)
        answers = audit_plan.answers(jm.jtl, target.answers)
        final, final_why = target.read_stock(k["product"])
        row = judge(target, k, answers, final, final_why,
                    os.path.join(self.out_dir, f"history-run-{n}.jsonl"))
        row.update(label=label, seconds=round(jm.seconds, 3), jtl=os.path.basename(jm.jtl))
        row["verdict"], row["reason"] = verdict(row, self.known)
        if jm.rc == "timeout":
            row["verdict"], row["reason"] = "fail", f"JMeter timed out; {row['reason']}"
        elif jm.rc != 0 and not answers:
            row["reason"] += f" (jmeter exit status {jm.rc}; see {os.path.basename(jm.out)})"
        self.say(f"{label}: {row['verdict'].upper()} - {row['reason']}")
        shown = any(a["remaining"] is not None for a in answers)
        if shown and not self.races and (row["kinds"] or n == runs):
            self.races.append(race_of(target, k, answers, row, label))
        return row

    def write(self, rows, started, baseline=None):
        """audit.json, report.html and junit.xml of the rows."""
        target, out_dir = self.target, self.out_dir
        params = dict(self.k, target=target.name, file=os.path.abspath(target.file),
                      method=target.buy.method, url=target.buy.url.text, runs=len(rows),
                      baseline=baseline, started=started,
                      reports_remaining=target.answers.reports_remaining,
                      stock_read=target.stock is not None, jmeter=jmeter.version(out_dir))
        write_text(os.path.join(out_dir, "audit.json"),
                   tables.json_text({"params": params, "rows": rows}))
        write_text(os.path.join(out_dir, "report.html"),
                   audit_report.render(rows, params, self.races))
        junit.write(os.path.join(out_dir, "junit.xml"), "audit." + target.name, rows,
                    lambda r: r["label"], lambda r: r.get("seconds"), params)


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
    return rows, out_dir


def report(run, done):
    rows, out_dir = done
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
    return 1 if failed or not rows else 0


RUNNER = Runner("audit", __doc__, options=options, work=work, report=report, results="audit-",
                after_parse=after_parse)
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
