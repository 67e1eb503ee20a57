"""junit.xml: a run's rows as JUnit XML, the format every CI system reads (Jenkins,
GitLab, GitHub Actions reporters...), beside results.json. One <testcase> per row;
a failed row carries a <failure> whose message is the gate's reason, a row that could
not be set up (verdict "setup": not judged) an <error> with why; the run's
parameters go in <properties>. The document is valid against tests/junit.xsd (the
Ant/Jenkins JUnit schema), which `make test` checks."""

import datetime
import socket
import xml.etree.ElementTree as ET

from ..base.common import write_text


def _seconds(v):
    return f"{v:.3f}" if isinstance(v, (int, float)) and v >= 0 else "0"


def document(suite, rows, name_of, seconds_of, params=None, verdict="verdict",
             reason="reason"):
    """The JUnit XML text of `rows` (name_of(row): its test name, seconds_of(row): its
    duration or None)."""
    failed = [r for r in rows if r.get(verdict) not in ("pass", "setup")]
    unset = [r for r in rows if r.get(verdict) == "setup"]  # not judged: an error
    total = sum(s for s in (seconds_of(r) for r in rows) if isinstance(s, (int, float)))
    root = ET.Element("testsuite", {
        "name": suite, "tests": str(len(rows)), "failures": str(len(failed)),
        "errors": str(len(unset)),
        "time": _seconds(total), "hostname": socket.gethostname() or "localhost",
        "timestamp": datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")})
    props = ET.SubElement(root, "properties")
    for k, v in sorted((params or {}).items()):
        if v is not None and not isinstance(v, (dict, list)):
            ET.SubElement(props, "property", {"name": k, "value": str(v)})
    for r in rows:
        case = ET.SubElement(root, "testcase", {"name": str(name_of(r)), "classname": suite,
                                                "time": _seconds(seconds_of(r))})
        if r.get(verdict) != "pass":
            why = str(r.get(reason) or r.get(verdict))
            setup = r.get(verdict) == "setup"
            f = ET.SubElement(case, "error" if setup else "failure",
                              {"message": why, "type": "setup" if setup else "gate"})
            f.text = why
    ET.SubElement(root, "system-out").text = ""
    ET.SubElement(root, "system-err").text = ""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def write(path, suite, rows, name_of, seconds_of, params=None):
    write_text(path, document(suite, rows, name_of, seconds_of, params))
    return path
