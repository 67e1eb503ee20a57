"""The audit of one target, which make audit and make audit-stockd both run: the knobs
(the flag, else the target's [load], else the defaults), the target's own [service]
started and stopped around the runs, the reset checked before any load, then each run:
JMeter driving the target's purchase request (lab.drivers.audit_plan), its answers
mapped by the target's rules, judged (lab.judges.audit_gate); and audit.json,
report.html and junit.xml written.

When the target names its idempotency header ([retry]), one check more: retrying
buyers (lab.drivers.retrying), each with a key of its own on every try, buy through
a delay proxy that holds every reply past their timeout for the hold, so that each
sale happens and its answer is lost; they retry every answer the target's rules call
unknown. The stock read afterwards says how many units went; every purchase beyond
one effect is a double buy, and the check fails on any (or on a purchase never
answered). The buyers are few enough that the stock covers every try they may make,
so that a sold out never hides a double buy."""

import os
import socket
import subprocess
import time

from ..base.common import SetupError, tail, write_text
from ..client.target import wait_answers
from ..stack.service import stop_process
from ..drivers import audit_plan, jmeter
from ..drivers.load import NO_ANSWER, Answer, failure_word
from ..drivers.retrying import RetryingBuyers
from ..nemesis.delay_proxy import DelayProxy
from ..judges.audit_gate import judge, verdict
from ..reports import audit_report, junit, tables

# The built-in knobs; a target's [load] table and then the flags override them.
DEFAULTS = {"threads": 100, "loops": 50, "rampup": 1, "stock": 5000, "product": 1001, "qty": 1}


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


class Audit:
    """The audit of one target: its knobs, the baseline's kinds (or None), JMeter."""

    def __init__(self, target, k, known, jmeter_cmd, timeout, out_dir, say):
        self.target, self.k, self.known = target, k, known
        self.jmeter, self.timeout, self.out_dir, self.say = jmeter_cmd, timeout, out_dir, say
        self.races = []
        self.retries = None  # the [retry] check's figures, when the target names a header

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
            rows = [self.one(n, runs) for n in range(1, runs + 1)]
            if target.retry:
                self.retries = retry_check(target, self.k, self.say)
            return rows
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
            self.races.append(audit_report.race_of(target, k, answers, row, label))
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
                   tables.json_text({"params": params, "rows": rows, "retries": self.retries}))
        write_text(os.path.join(out_dir, "report.html"),
                   audit_report.render(rows, params, self.races))
        junit.write(os.path.join(out_dir, "junit.xml"), "audit." + target.name, rows,
                    lambda r: r["label"], lambda r: r.get("seconds"), params)


class TargetBuyers(RetryingBuyers):
    """Retrying buyers of a foreign target: each try is the target's buy request, with
    the purchase's own {buyer} and its key in the [retry] header, sent through `via`;
    an answer the target's rules call unknown (or none at all) is tried again."""

    def __init__(self, target, via, product, qty, count):
        spec = target.retry
        super().__init__(None, None, None, count, with_keys=True,
                         timeout_s=spec["timeout_ms"] / 1000, attempts=spec["attempts"])
        self.target, self.via = target, via
        self.values = {id(p): target.values(product=product, qty=qty, buyer=n)
                       for n, p in enumerate(self.purchases, 1)}

    def one(self, purchase):
        t, start = self.target, time.monotonic()
        try:
            status, body = t.buy.send(self.values[id(purchase)], t.base_url, self.timeout_s,
                                      {t.retry["header"]: purchase.key}, self.via)
        except OSError as e:
            return Answer(start, time.monotonic(), NO_ANSWER, failure_word(e))
        outcome, remaining = t.answers.classify(status, body)
        return Answer(start, time.monotonic(), NO_ANSWER if outcome == "unknown" else status,
                      outcome, remaining)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def retry_check(target, k, say):
    """The [retry] check (see the top): its figures and verdict."""
    spec, product, qty = target.retry, k["product"], k["qty"]
    if target.stock is None:
        raise SetupError(f"{target.file}: [retry] needs a [stock] read to count double buys")
    scheme, host, port, _ = target.buy.parts(target.sample(), target.base_url)
    if scheme != "http":
        raise SetupError(f"{target.file}: [retry] needs an http:// buy url (its replies are "
                         "held by a TCP proxy)")
    why = target.do_reset(product, k["stock"])
    if why:
        raise SetupError(f"{target.file}: before the retry check, {why}")
    before, _ = target.read_stock(product)
    count = max(1, min(k["threads"], k["stock"] // (qty * spec["attempts"])))
    via = ("127.0.0.1", free_port())
    proxy = DelayProxy(via, (host, port), source="127.0.0.1")
    proxy.start()
    say(f"retries: {count} purchases, each with its own {spec['header']}, every reply held "
        f"past their {spec['timeout_ms']} ms timeout for {spec['hold_s']:g} s")
    buyers = TargetBuyers(target, via, product, qty, count)
    try:
        proxy.delay_ms = spec["timeout_ms"] * 2
        buyers.start()
        if not proxy.linked.wait(30):
            raise SetupError("no retrying buyer reached the delay proxy within 30 s")
        time.sleep(spec["hold_s"])
        proxy.delay_ms = 0
        if not buyers.join(spec["attempts"] * (buyers.timeout_s + buyers.backoff_cap_s) + 30):
            raise SetupError("the retrying buyers were still trying 30 s after their last try")
    finally:
        proxy.stop()
    after, why = target.read_stock(product)
    if why:
        raise SetupError(f"{target.file}: after the retry check, {why}")
    return retry_figures(buyers.purchases, qty, before - after)


def retry_figures(purchases, qty, gone):
    """The check's figures from its purchases and the units gone from the stock: each
    purchase answered sold, or never answered, may have taken qty units once."""
    finals = [p.final() for p in purchases]
    charged = sum(1 for f in finals if f is None or f.word == "sold")
    double = max(0, gone - charged * qty) // qty
    r = {"purchases": len(purchases), "tries": sum(len(p.tries) for p in purchases),
         "lost": sum(1 for p in purchases for t in p.tries if t.status == NO_ANSWER),
         "sold": sum(1 for f in finals if f is not None and f.word == "sold"),
         "gave_up": finals.count(None), "units_gone": gone, "double_buys": double}
    r["verdict"] = "fail" if double or r["gave_up"] else "pass"
    r["reason"] = (f"{double} purchases bought again by their retries" if double else
                   f"{r['gave_up']} purchases never answered" if r["gave_up"] else
                   "every purchase bought once")
    return r
