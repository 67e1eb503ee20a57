"""The audit's JMeter plan and what its JTL says. jmeter/audit.jmx is a template:
plan() fills in one target's purchase request (protocol, host, port, method, path,
body, headers), with its {product}, {qty} and {buyer} as JMeter expressions
(properties product and qty, the plan's shared buyer counter), and writes the
result beside the run's results (plan.jmx), where it runs with one's own JMeter.

answers() reads the CSV JTL (written with jmeter/audit.properties: the answer's
body in column `body`) and maps every answer with the target's rules (lab.client.target):
one dict per request with when it was sent and answered (epoch ms), its status (None
when no HTTP answer came), its outcome (sold, sold_out, refused, unknown), the
stock it says it left or saw, and its latency."""

import csv
import os
import xml.etree.ElementTree as ET

from ..base.common import REPO

TEMPLATE = os.path.join(REPO, "jmeter", "audit.jmx")
PROPERTIES = os.path.join(REPO, "jmeter", "audit.properties")
JMETER_FIELDS = {"product": "${__P(product,1001)}", "qty": "${__P(qty,1)}", "buyer": "${buyer}"}


def _prop(parent, tag, name, value):
    e = ET.SubElement(parent, tag, {"name": name})
    e.text = value
    return e


def _set(root, tag, name, value):
    for e in root.iter(tag):
        if e.get("name") == name:
            e.text = value
            return
    raise ValueError(f"{TEMPLATE} has no {tag} {name}")


def plan(target, path):
    """Write the target's plan to `path`; its path."""
    scheme, host, port, url_path, body, headers = target.buy_request(JMETER_FIELDS)
    tree = ET.parse(TEMPLATE)
    root = tree.getroot()
    sampler = root.find(".//HTTPSamplerProxy")
    sampler.set("testname", f"buy from {target.name}")
    for name, value in (("HTTPSampler.protocol", scheme), ("HTTPSampler.domain", host),
                        ("HTTPSampler.port", str(port)), ("HTTPSampler.path", url_path),
                        ("HTTPSampler.method", target.buy.method)):
        _set(sampler, "stringProp", name, value)
    if body:
        _set(sampler, "boolProp", "HTTPSampler.postBodyRaw", "true")
        args = sampler.find("./elementProp[@name='HTTPsampler.Arguments']/collectionProp")
        arg = ET.SubElement(args, "elementProp", {"name": "", "elementType": "HTTPArgument"})
        _prop(arg, "boolProp", "HTTPArgument.always_encode", "false")
        _prop(arg, "stringProp", "Argument.value", body)
        _prop(arg, "stringProp", "Argument.metadata", "=")
    rows = root.find(".//HeaderManager/collectionProp")
    for name, value in headers.items():
        h = ET.SubElement(rows, "elementProp", {"name": "", "elementType": "Header"})
        _prop(h, "stringProp", "Header.name", name)
        _prop(h, "stringProp", "Header.value", value)
    tree.write(path, encoding="UTF-8", xml_declaration=True)
    return path


def _int(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def answers(jtl, rules):
    """The answers of a CSV JTL, mapped with `rules` (a lab.client.target.Answers)."""
    out = []
    if not os.path.exists(jtl):
        return out
    with open(jtl, newline="", encoding="utf-8", errors="replace") as f:
        for n, rec in enumerate(csv.DictReader(f), 1):
            ts, ms = _int(rec.get("timeStamp")), _int(rec.get("elapsed"))
            if ts is None or ms is None:
                continue
            code = (rec.get("responseCode") or "").strip()
            status = int(code) if code.isdigit() and code != "0" else None
            outcome, left = rules.classify(status, rec.get("body") or "")
            out.append({"id": n, "invoke_ms": ts, "complete_ms": ts + ms + 1, "ms": ms,
                        "status": status, "outcome": outcome, "remaining": left,
                        "word": code if status else (rec.get("responseMessage") or code)[:80]})
    return out
