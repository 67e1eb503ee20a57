"""The JMeter driver: jmeter/deduct.jmx run non-GUI with jmeter/deduct.properties (or
another plan and its properties: the audit's, lab.drivers.audit_plan), and what a CSV JTL
says (outcomes, latencies, throughput, the instances that answered).

A comparison runs all its rows in one JMeter process: write_plan makes, from deduct.jmx,
one plan with a ThreadGroup per row (the row's knobs written in, its sampler labelled
with the row's name), run one after another; split_jtl cuts the one JTL into each row's.
A JVM's start costs more than a short row's work, and a row per process paid it every
row."""

import copy
import csv
import os
import re
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

from ..base.common import REPO, percentile
from ..base.waiting import Periodic
from ..client.outcomes import Outcomes

HERE = os.path.join(REPO, "jmeter")
PLAN = os.path.join(HERE, "deduct.jmx")
PROPERTIES = os.path.join(HERE, "deduct.properties")


class Run:
    def __init__(self, jtl, rc, seconds):
        self.jtl, self.rc, self.seconds = jtl, rc, seconds

    @property
    def out(self):
        return self.jtl[:-4] + ".out"


def run(jmeter, out_dir, name, props, timeout, token=None, plan=PLAN, properties=PROPERTIES):
    """Run the plan once with `props` (-J); the admin token, when given, goes to
    JMeter in a private properties file rather than on its command line."""
    jtl = os.path.join(out_dir, name + ".jtl")
    cmd = [jmeter, "-n", "-t", plan, "-q", properties, "-l", jtl,
           "-j", os.path.join(out_dir, name + ".log")]
    secret = None
    if token:
        fd, secret = tempfile.mkstemp(prefix="jmeter-token.", suffix=".properties")
        with os.fdopen(fd, "w") as f:
            f.write(f"admin_token={token}\n")
        cmd += ["-q", secret]
    cmd += [f"-J{k}={v}" for k, v in props.items()]
    started = time.time()
    try:
        with open(os.path.join(out_dir, name + ".out"), "wb") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            rc = _wait(proc, timeout)
    finally:
        if secret:
            os.unlink(secret)
    return Run(jtl, rc, time.time() - started)


def _wait(proc, timeout):
    """JMeter's exit status, or "timeout" after stopping its process group."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return "timeout"
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


class Results:
    """What one JTL says."""

    def __init__(self):
        self.outcomes = Outcomes()
        self.p50_ms = self.p95_ms = self.p99_ms = self.max_ms = None
        self.throughput_rps = self.duration_s = None
        self.instances = set()        # X-Stockd-Instance names ("none": no header)
        self.fastest_busy_ms = None   # the quickest busy answer
        self.reply_bytes = None       # JMeter's bytes received per reply, head and body (mean)
        self.first_s = self.last_s = None  # the first request's start, the last answer (epoch s)

    @property
    def requests(self):
        return self.outcomes.requests


def read_jtl(path):
    """Results of a CSV JTL written with deduct.properties (columns outcome and
    instance come from the plan's extractors); empty when there is none."""
    res = Results()
    if not os.path.exists(path):
        return res
    elapsed, first, last, received = [], None, None, []
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or "responseCode" not in reader.fieldnames:
            return res
        for rec in reader:
            code = (rec.get("responseCode") or "").strip()
            word = (rec.get("outcome") or "").strip()
            what = None if code.isdigit() else (rec.get("responseMessage") or code)[:80]
            res.outcomes.add(code, word, what=what)
            if rec.get("instance") is not None:
                res.instances.add(rec["instance"].strip() or "none")
            if code.isdigit() and (rec.get("bytes") or "").strip().isdigit():
                received.append(int(rec["bytes"]))
            try:
                ms, ts = int(rec["elapsed"]), int(rec["timeStamp"])
            except (KeyError, TypeError, ValueError):
                continue
            if code == "409" and word == "busy":
                fastest = res.fastest_busy_ms
                res.fastest_busy_ms = ms if fastest is None else min(ms, fastest)
            elapsed.append(ms)
            first = ts if first is None else min(first, ts)
            last = ts + ms if last is None else max(last, ts + ms)
    if elapsed:
        elapsed.sort()
        res.p50_ms, res.p95_ms = percentile(elapsed, 50), percentile(elapsed, 95)
        res.p99_ms, res.max_ms = percentile(elapsed, 99), elapsed[-1]
        span = max(1, last - first) / 1000.0
        res.first_s, res.last_s = first / 1000.0, last / 1000.0
        res.duration_s = round(span, 3)
        res.throughput_rps = round(res.requests / span, 1)
    if received:
        res.reply_bytes = round(sum(received) / len(received))
    return res


# A knob of deduct.jmx: ${__P(name,default)}, innermost first (path's default holds
# strategy's). The admin token stays a property: a plan is left in the results.
KNOB = re.compile(r"\$\{__P\((\w+),([^(){}$]*)\)\}")
SECRET_KNOBS = ("admin_token",)


def resolve(text, props):
    """`text` with every knob but the secret ones replaced by its value in `props`,
    else by the plan's default."""
    def value(m):
        name, default = m.group(1), m.group(2)
        if name in SECRET_KNOBS:
            return m.group(0)
        return str(props.get(name, default))

    while True:
        done = KNOB.sub(value, text)
        if done == text:
            return done
        text = done


def write_plan(path, rows, gap_ms=0, plan=PLAN):
    """Writes to `path` the plan that runs `rows` ([(label, props)]) one after another:
    for each, a copy of `plan`'s ThreadGroup with its knobs resolved by the row's props
    and its sampler labelled `label` (the JTL's label column); between two rows, with
    `gap_ms`, a one-thread group that only waits that long."""
    tree = ET.parse(plan)
    top = tree.getroot().find("hashTree")
    top.find("TestPlan/boolProp[@name='TestPlan.serialize_threadgroups']").text = "true"
    groups = top.find("hashTree")
    group, body = list(groups)
    assert group.tag == "ThreadGroup" and body.tag == "hashTree", "one ThreadGroup in the plan"
    groups.clear()
    for i, (label, props) in enumerate(rows):
        if i and gap_ms:
            groups.extend(gap_group(group, gap_ms))
        g, b = copy.deepcopy(group), copy.deepcopy(body)
        for el in list(g.iter()) + list(b.iter()):
            if el.text:
                el.text = resolve(el.text, props)
        g.set("testname", label)
        b.find("HTTPSamplerProxy").set("testname", label)
        groups.extend((g, b))
    tree.write(path, encoding="UTF-8", xml_declaration=True)


def gap_group(group, gap_ms):
    """A one-thread, one-loop group whose only sampler pauses `gap_ms` (a Test Action:
    it records no sample)."""
    g = copy.deepcopy(group)
    for el in g.iter():
        if el.text:
            el.text = resolve(el.text, {"threads": 1, "loops": 1, "rampup": 0})
    g.set("testname", "gap")
    pause = ET.Element("TestAction", guiclass="TestActionGui", testclass="TestAction",
                       testname="gap", enabled="true")
    for kind, name, text in (("intProp", "ActionProcessor.action", "1"),
                             ("intProp", "ActionProcessor.target", "0"),
                             ("stringProp", "ActionProcessor.duration", str(gap_ms))):
        ET.SubElement(pause, kind, name=name).text = text
    b = ET.Element("hashTree")
    b.extend((pause, ET.Element("hashTree")))
    return g, b


def split_jtl(jtl, paths):
    """Writes each label's lines of `jtl` (the header first) to paths[label]; every
    path is written, with the header only when its label has no line (or no JTL was
    written: then nothing). Lines of other labels are left out."""
    if not os.path.exists(jtl):
        return
    with open(jtl, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        lines = {label: [] for label in paths}
        at = header.index("label") if header and "label" in header else None
        for rec in reader if at is not None else ():
            if len(rec) > at and rec[at] in lines:
                lines[rec[at]].append(rec)
    for label, path in paths.items():
        with open(path, "w", newline="", encoding="utf-8") as out:
            if header:
                w = csv.writer(out, lineterminator="\n")
                w.writerow(header)
                w.writerows(lines[label])


class Progress(Periodic):
    """Says each row of a one-process run as its first answer reaches the JTL (JMeter
    writes it in buffered blocks: the line comes a little late), so that a long run
    is not silent until its end. A context manager around the run: every PERIOD_S it
    reads the lines the JTL gained since its last look. started, when given, is called
    with each row's label as it is said."""

    PERIOD_S = 1.0

    def __init__(self, jtl, labels, say, started=None):
        super().__init__(self.PERIOD_S)
        self.jtl, self.labels, self.say = jtl, list(labels), say
        self.started = started
        self.seen, self.at, self.offset, self.rest = set(), None, 0, b""

    def tick(self):
        try:
            with open(self.jtl, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return  # not written yet
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        for rec in csv.reader(ln.decode("utf-8", "replace") for ln in lines):
            if self.at is None:
                self.at = rec.index("label") if "label" in rec else -1
            elif 0 <= self.at < len(rec) and rec[self.at] not in self.seen:
                self.seen.add(rec[self.at])
                if rec[self.at] in self.labels:
                    n = self.labels.index(rec[self.at]) + 1
                    self.say(f"{rec[self.at]}: running (row {n} of {len(self.labels)})")
                    if self.started:
                        self.started(rec[self.at])


def version(out_dir):
    """JMeter's version, best effort, from the logs of a run."""
    try:
        for name in sorted(os.listdir(out_dir)):
            if name.endswith(".log"):
                with open(os.path.join(out_dir, name), errors="replace") as f:
                    m = re.search(r"Version (\d[^\s,]*)", f.read(20000))
                if m:
                    return m.group(1)
    except OSError:
        pass
    return None
