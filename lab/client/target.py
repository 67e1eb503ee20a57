"""A foreign service, described by a target file (TOML, read with tomllib;
docs/audit.md): how to reset a product to N units, how to buy, what its answers
mean, how to read the stock afterwards, and optionally how to start it. The whole
file is checked before anything is sent: a malformed file, an unknown key, a
template that names an unknown field, a bad status, pointer or regular expression
is a TargetError (a SetupError: exit status 2, one line that names the file and the
key).

Templates are strings in which {name} is replaced: buy requests know {product},
{qty} and {buyer}; a reset knows {product} and {stock}; a stock read {product};
every template also knows the names of the file's [vars] table (a --var NAME=VALUE
overrides one), {here} (the file's directory) and {out} (the run's results
directory). Any other brace is literal, so a JSON body is written as it is sent.

A request's url is absolute (http://host:port/path?query) or a path joined to the
file's base_url. A reset or a stock read may be one SQL statement (statement)
against a dsn instead: sqlite:///PATH (Python's sqlite3) or mysql://USER@HOST:PORT/DB (the
mariadb or mysql command-line client; the password from password_file).

An answer is one of sold, sold_out, refused (the service says nothing changed) or
unknown (anything else, a timeout, no answer: it may or may not have sold). Each
of the three is a rule or a list of rules; a rule holds when all it names hold:
status (an int or a list), pointer (RFC 6901, into a JSON body) with equals (the
value there; without equals, the pointer must lead to a value that is not null or
false), regex (searched in the body). The first of sold, sold_out, refused with a
rule that holds wins. remaining (a pointer, or a regex whose first group is the
number) is the stock the service says a sale left, or a sold out saw.

An optional [retry] table names the service's idempotency header (header =
"Idempotency-Key"): the audit then also buys through retrying clients, one key per
purchase, while every reply is held past their timeout, and counts the purchases the
service sold twice (lab.scaffold.auditing)."""

import http.client
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import tomllib
import urllib.parse

from ..base.common import SetupError
from ..base.waiting import wait_until

OUTCOMES = ("sold", "sold_out", "refused")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
FIELDS = {"buy": ("product", "qty", "buyer"), "reset": ("product", "stock"),
          "stock": ("product",)}
BUILTIN = ("here", "out")
KEYS = {
    "": {"name", "base_url", "vars", "load", "service", "reset", "buy", "answers", "stock",
         "retry"},
    "load": {"threads", "loops", "rampup", "stock", "product", "qty"},
    "service": {"command", "wait_s"},
    "http": {"method", "url", "body", "headers", "ok"},
    "database": {"dsn", "statement", "password_file"},
    "rule": {"status", "pointer", "equals", "regex"},
    "remaining": {"pointer", "regex"},
    "retry": {"header", "attempts", "timeout_ms", "hold_s"},
}
# A [retry] table's defaults: tries per purchase, each try's timeout, the seconds the
# audit holds every reply past that timeout.
RETRY = {"attempts": 8, "timeout_ms": 300, "hold_s": 1.5}
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
TIMEOUT_S = 10


class TargetError(SetupError):
    """The target file cannot be used; one line naming the file and the key."""


class Template:
    """A string with {field} placeholders, checked against the fields it may name."""

    def __init__(self, text, where, fields, file):
        if not isinstance(text, str):
            raise TargetError(f"{file}: {where} must be a string")
        unknown = sorted({m for m in PLACEHOLDER.findall(text) if m not in fields})
        if unknown:
            raise TargetError(f"{file}: {where} names {', '.join('{' + u + '}' for u in unknown)}"
                              f", which is not one of {', '.join(sorted(fields))}")
        self.text, self.where = text, where

    def fill(self, values):
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


class HttpCall:
    """One HTTP request of the target: method, url, body and headers, as templates."""

    def __init__(self, doc, where, fields, t):
        t.only(doc, KEYS["http"], where)
        self.file = t.file
        self.method = doc.get("method", "GET")
        if self.method not in METHODS:
            raise TargetError(f"{t.file}: {where}.method {self.method!r} is not one of "
                              f"{', '.join(METHODS)}")
        if "url" not in doc:
            raise TargetError(f"{t.file}: {where} has no url")
        self.url = t.template(doc["url"], f"{where}.url", fields)
        self.body = t.template(doc.get("body", ""), f"{where}.body", fields)
        headers = doc.get("headers", {})
        if not isinstance(headers, dict):
            raise TargetError(f"{t.file}: {where}.headers must be a table")
        self.headers = {k: t.template(v, f"{where}.headers.{k}", fields)
                        for k, v in headers.items()}
        self.ok = t.statuses(doc.get("ok", list(range(200, 300))), f"{where}.ok")
        # The url must parse once filled, whatever the values.
        self.parts(t.sample(), t.base_url)

    def parts(self, values, base_url):
        """(scheme, host, port, path with query) of the filled url."""
        url = self.url.fill(values)
        if url.startswith("/"):
            if not base_url:
                raise TargetError(f"{self.file}: {self.url.where} is a path, and the file has "
                                  "no base_url")
            url = base_url.rstrip("/") + url
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise TargetError(f"{self.file}: {self.url.where}: {url!r} is not an http:// or "
                              "https:// url")
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            raise TargetError(f"{self.file}: {self.url.where}: {url!r} has a bad port") from None
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        return u.scheme, u.hostname, port, path

    def send(self, values, base_url, timeout=TIMEOUT_S, more_headers=None, via=None):
        """(status, body text) of the request; OSError when nothing answers. via: the
        (host, port) to connect to instead (a proxy in front of the service)."""
        scheme, host, port, path = self.parts(values, base_url)
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = cls(*(via or (host, port)), timeout=timeout)
        body = self.body.fill(values).encode()
        headers = {k: v.fill(values) for k, v in self.headers.items()}
        headers.update(more_headers or {})
        try:
            conn.request(self.method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read().decode("utf-8", "replace")
        except http.client.HTTPException as e:
            raise OSError(str(e) or type(e).__name__) from e
        finally:
            conn.close()


class SqlCall:
    """One SQL statement of the target against its dsn."""

    def __init__(self, doc, where, fields, t):
        t.only(doc, KEYS["database"], where)
        self.where = f"{t.file}: {where}"
        if "statement" not in doc:
            raise TargetError(f"{self.where} has a dsn and no statement")
        self.dsn = t.template(doc.get("dsn", ""), f"{where}.dsn", ())
        self.statement = t.template(doc["statement"], f"{where}.statement", fields)
        self.password_file = t.template(doc.get("password_file", ""),
                                        f"{where}.password_file", ())
        self.kind(t.sample())

    def kind(self, values):
        dsn = self.dsn.fill(values)
        u = urllib.parse.urlsplit(dsn)
        if u.scheme == "sqlite" and u.path:
            return "sqlite", u.path
        if u.scheme == "mysql" and u.hostname and u.path.strip("/"):
            return "mysql", u
        raise TargetError(f"{self.where}.dsn {dsn!r} is not sqlite:///PATH or "
                          "mysql://USER@HOST:PORT/DB")

    def run(self, values):
        """The first column of the first row the statement returns (None when it
        returns none). OSError when the database cannot be reached or refuses."""
        kind, where = self.kind(values)
        sql = self.statement.fill(values)
        if kind == "sqlite":
            if not os.path.exists(where):
                raise OSError(f"no database file {where}")
            try:
                with sqlite3.connect(where, timeout=TIMEOUT_S) as db:
                    row = db.execute(sql).fetchone()
                return row[0] if row else None
            except sqlite3.Error as e:
                raise OSError(f"sqlite: {e}") from e
        return self.mysql(where, sql, values)

    def mysql(self, u, sql, values):
        client = shutil.which("mariadb") or shutil.which("mysql")
        if not client:
            raise OSError("no mariadb or mysql client (scripts/deps.sh stack installs it)")
        password = ""
        path = self.password_file.fill(values)
        if path:
            with open(path) as f:
                password = f.readline().rstrip("\r\n")
        fd, conf = tempfile.mkstemp(prefix="audit-client.", suffix=".cnf")
        with os.fdopen(fd, "w") as f:
            f.write(f"[client]\npassword={password}\n" if password else "[client]\n")
        try:
            proc = subprocess.run(
                [client, f"--defaults-extra-file={conf}", "--protocol=TCP",
                 "-h", u.hostname, "-P", str(u.port or 3306), "-u", u.username or "root",
                 "-D", u.path.strip("/"), "--batch", "--skip-column-names", "-e", sql],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise OSError(f"{client} took more than {TIMEOUT_S} s") from None
        finally:
            os.unlink(conf)
        if proc.returncode != 0:
            raise OSError(f"{os.path.basename(client)}: {proc.stderr.strip()[:200]}")
        first = proc.stdout.split("\n", 1)[0].split("\t", 1)[0]
        return first if first else None


class Rule:
    """A rule of the answer mapping: every condition it names holds."""

    def __init__(self, doc, where, t):
        if not isinstance(doc, dict):
            raise TargetError(f"{t.file}: {where} must be a table")
        t.only(doc, KEYS["rule"], where)
        if not doc:
            raise TargetError(f"{t.file}: {where} names no condition")
        self.status = t.statuses(doc["status"], f"{where}.status") if "status" in doc else None
        self.pointer = t.pointer(doc["pointer"], f"{where}.pointer") if "pointer" in doc else None
        if "equals" in doc and self.pointer is None:
            raise TargetError(f"{t.file}: {where}.equals needs a pointer")
        self.has_equals, self.equals = "equals" in doc, doc.get("equals")
        self.regex = t.regex(doc["regex"], f"{where}.regex", 0) if "regex" in doc else None

    def holds(self, status, body, doc):
        if self.status is not None and status not in self.status:
            return False
        if self.pointer is not None:
            found, value = resolve(doc, self.pointer)
            if not found:
                return False
            if self.has_equals and value != self.equals:
                return False
            if not self.has_equals and (value is None or value is False):
                return False
        return self.regex is None or bool(self.regex.search(body))


class Answers:
    """The answer mapping: sold, sold_out, refused (rules), unknown, and remaining."""

    def __init__(self, doc, t):
        if not isinstance(doc, dict):
            raise TargetError(f"{t.file}: [answers] must be a table")
        t.only(doc, set(OUTCOMES) | {"remaining"}, "answers")
        if "sold" not in doc:
            raise TargetError(f"{t.file}: [answers] has no sold rule: no sale could be counted")
        self.rules = {}
        for o in OUTCOMES:
            given = doc.get(o, [])
            given = given if isinstance(given, list) else [given]
            self.rules[o] = [Rule(r, f"answers.{o}[{i}]", t) for i, r in enumerate(given)]
        self.remaining_pointer = self.remaining_regex = None
        rem = doc.get("remaining")
        if rem is not None:
            where = "answers.remaining"
            if not isinstance(rem, dict) or len(rem) != 1:
                raise TargetError(f"{t.file}: {where} must be {{pointer = ...}} or {{regex = ...}}")
            t.only(rem, KEYS["remaining"], where)
            if "pointer" in rem:
                self.remaining_pointer = t.pointer(rem["pointer"], f"{where}.pointer")
            else:
                self.remaining_regex = t.regex(rem["regex"], f"{where}.regex", 1)

    @property
    def reports_remaining(self):
        return self.remaining_pointer is not None or self.remaining_regex is not None

    def classify(self, status, body):
        """(outcome, remaining or None) of one answer; status None: no HTTP answer."""
        if status is None:
            return "unknown", None
        doc = parse_json(body)
        for o in OUTCOMES:
            if any(r.holds(status, body, doc) for r in self.rules[o]):
                return o, self.remaining(body, doc) if o != "refused" else None
        return "unknown", None

    def remaining(self, body, doc):
        if self.remaining_pointer is not None:
            found, value = resolve(doc, self.remaining_pointer)
            return as_int(value) if found else None
        if self.remaining_regex is not None:
            m = self.remaining_regex.search(body)
            return as_int(m.group(1)) if m else None
        return None


class StockRead:
    """How to read the stock afterwards: an HTTP request and a pointer or regex, or SQL."""

    def __init__(self, doc, t):
        where = "stock"
        if "dsn" in doc:
            self.call, self.pointer, self.regex = SqlCall(doc, where, FIELDS["stock"] + t.names,
                                                          t), None, None
            return
        rest = {k: v for k, v in doc.items() if k not in ("pointer", "regex")}
        self.call = HttpCall(rest, where, FIELDS["stock"] + t.names, t)
        if ("pointer" in doc) == ("regex" in doc):
            raise TargetError(f"{t.file}: [stock] over HTTP needs a pointer or a regex "
                              "(one of the two)")
        self.pointer = t.pointer(doc["pointer"], "stock.pointer") if "pointer" in doc else None
        self.regex = t.regex(doc["regex"], "stock.regex", 1) if "regex" in doc else None

    def read(self, values, base_url):
        """The stock as an int; OSError (why) when it cannot be read."""
        if isinstance(self.call, SqlCall):
            value = self.call.run(values)
            if as_int(value) is None:
                raise OSError(f"the stock's SQL returned {value!r}, not a number")
            return as_int(value)
        status, body = self.call.send(values, base_url)
        if status not in self.call.ok:
            raise OSError(f"the stock read answered {status}: {body[:120]!r}")
        if self.pointer is not None:
            found, value = resolve(parse_json(body), self.pointer)
        else:
            m = self.regex.search(body)
            found, value = m is not None, m.group(1) if m else None
        if not found or as_int(value) is None:
            raise OSError(f"the stock read's answer has no number where [stock] says: "
                          f"{body[:120]!r}")
        return as_int(value)


class Target:
    """A checked target file. Fields: file, name, base_url, vars, load (defaults),
    service (command templates, wait_s), reset (HttpCall or SqlCall), buy (HttpCall),
    answers (Answers), stock (StockRead or None), retry (header, attempts, timeout_ms,
    hold_s, or None)."""

    def __init__(self, path, overrides=None, out=""):
        self.file = path
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except OSError as e:
            raise TargetError(f"cannot read target file {path}: {e.strerror or e}") from None
        except tomllib.TOMLDecodeError as e:
            raise TargetError(f"{path}: not valid TOML: {e}") from None
        self.only(doc, KEYS[""], "the file")
        declared = doc.get("vars", {})
        if not isinstance(declared, dict):
            raise TargetError(f"{path}: [vars] must be a table")
        overrides = overrides or {}
        for k in overrides:
            if k not in declared:
                raise TargetError(f"{path}: --var {k}: the file's [vars] declares no {k}")
        clash = sorted(set(declared) & (set(BUILTIN) | {f for fs in FIELDS.values() for f in fs}))
        if clash:
            raise TargetError(f"{path}: [vars] may not name {', '.join(clash)}")
        self.vars = {k: str(overrides.get(k, v)) for k, v in declared.items()}
        self.vars.update(here=os.path.dirname(os.path.abspath(path)), out=out)
        self.names = tuple(self.vars)
        self.name = (self.template(doc["name"], "name", ()).fill(self.vars) if "name" in doc
                     else os.path.splitext(os.path.basename(path))[0])
        self.base_url = (self.template(doc["base_url"], "base_url", ()).fill(self.vars)
                         if "base_url" in doc else None)
        self.load = self.load_defaults(doc.get("load", {}))
        self.service = self.service_of(doc.get("service"))
        for part in ("reset", "buy", "answers"):
            if not isinstance(doc.get(part), dict):
                raise TargetError(f"{path}: no [{part}] table (docs/audit.md)")
        self.reset = self.call(doc["reset"], "reset")
        if not isinstance(self.reset, (HttpCall, SqlCall)):
            raise TargetError(f"{path}: [reset] must be an HTTP request or SQL")
        self.buy = HttpCall(doc["buy"], "buy", FIELDS["buy"] + self.names, self)
        self.answers = Answers(doc["answers"], self)
        stock = doc.get("stock")
        if stock is not None and not isinstance(stock, dict):
            raise TargetError(f"{path}: [stock] must be a table")
        self.stock = StockRead(stock, self) if stock else None
        self.retry = self.retry_of(doc.get("retry"))

    # --- checks, each raising a TargetError that names the file and the key

    def only(self, doc, allowed, where):
        extra = sorted(set(doc) - set(allowed))
        if extra:
            raise TargetError(f"{self.file}: {where} has unknown key(s) {', '.join(extra)} "
                              f"(known: {', '.join(sorted(allowed))})")

    def template(self, text, where, fields):
        return Template(text, where, set(fields) | set(self.vars), self.file)

    def sample(self):
        return dict(self.vars, **{f: 1 for f in ("product", "qty", "buyer", "stock")})

    def statuses(self, value, where):
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and
                                 100 <= v <= 599 for v in values):
            raise TargetError(f"{self.file}: {where} must be an HTTP status (100..599) or a "
                              f"list of them, not {value!r}")
        return frozenset(values)

    def pointer(self, value, where):
        value = self.template(value, where, ()).fill(self.vars)
        if value and not value.startswith("/"):
            raise TargetError(f"{self.file}: {where} {value!r} is not a JSON pointer "
                              "(\"\" or \"/a/b/0\", RFC 6901)")
        return value

    def regex(self, value, where, groups):
        try:
            r = re.compile(self.template(value, where, ()).fill(self.vars))
        except (re.error, TypeError) as e:
            raise TargetError(f"{self.file}: {where} is not a regular expression: {e}") from None
        if r.groups < groups:
            raise TargetError(f"{self.file}: {where} needs a group ( ) around the number")
        return r

    def load_defaults(self, doc):
        if not isinstance(doc, dict):
            raise TargetError(f"{self.file}: [load] must be a table")
        self.only(doc, KEYS["load"], "[load]")
        for k, v in doc.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == "rampup" else 1):
                raise TargetError(f"{self.file}: load.{k} must be a positive integer")
        return dict(doc)

    def optional_table(self, doc, name):
        """An optional table `name` with known keys only; None when the file has none."""
        if doc is not None and not isinstance(doc, dict):
            raise TargetError(f"{self.file}: [{name}] must be a table")
        if doc is not None:
            self.only(doc, KEYS[name], f"[{name}]")
        return doc

    def service_of(self, doc):
        if self.optional_table(doc, "service") is None:
            return None
        cmd = doc.get("command")
        if not isinstance(cmd, list) or not cmd:
            raise TargetError(f"{self.file}: service.command must be a list of words")
        words = [self.template(w, f"service.command[{i}]", ()).fill(self.vars)
                 for i, w in enumerate(cmd)]
        wait = doc.get("wait_s", 30)
        if not isinstance(wait, (int, float)) or wait <= 0:
            raise TargetError(f"{self.file}: service.wait_s must be a positive number")
        return {"command": words, "wait_s": wait}

    def retry_of(self, doc):
        """The [retry] table with its defaults, or None: the service's idempotency
        header (a retry carrying the same value must not buy again)."""
        if self.optional_table(doc, "retry") is None:
            return None
        header = doc.get("header")
        if not isinstance(header, str) or not HEADER_NAME.fullmatch(header):
            raise TargetError(f"{self.file}: retry.header must name an HTTP header "
                              "(Idempotency-Key, say)")
        spec = dict(RETRY, header=header)
        for k in RETRY:
            v = doc.get(k, RETRY[k])
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0 or \
                    (k != "hold_s" and not isinstance(v, int)):
                raise TargetError(f"{self.file}: retry.{k} must be a positive "
                                  f"{'number' if k == 'hold_s' else 'integer'}")
            spec[k] = v
        return spec

    def call(self, doc, where):
        if "dsn" in doc:
            return SqlCall(doc, where, FIELDS[where] + self.names, self)
        return HttpCall(doc, where, FIELDS[where] + self.names, self)

    # --- what the audit does with it

    def values(self, **fields):
        return dict(self.vars, **fields)

    def do_reset(self, product, stock):
        """Reset the product to `stock` units; None, or why not (one line)."""
        values = self.values(product=product, stock=stock)
        if isinstance(self.reset, SqlCall):
            try:
                self.reset.run(values)
            except OSError as e:
                return f"the reset's SQL failed: {e}"
            return None
        try:
            status, body = self.reset.send(values, self.base_url)
        except OSError as e:
            return f"the reset got no answer: {e}"
        if status not in self.reset.ok:
            return f"the reset answered {status}: {body[:160]!r}"
        return None

    def read_stock(self, product):
        """(stock or None, why not or None)."""
        if self.stock is None:
            return None, "the target file has no [stock]"
        try:
            return self.stock.read(self.values(product=product), self.base_url), None
        except OSError as e:
            return None, f"reading the stock failed: {e}"

    def buy_request(self, jmeter_values):
        """(scheme, host, port, path, body, headers) of the buy request with JMeter's
        expressions for its fields (lab.drivers.audit_plan)."""
        values = self.values(**jmeter_values)
        scheme, host, port, path = self.buy.parts(values, self.base_url)
        return (scheme, host, port, path, self.buy.body.fill(values),
                {k: v.fill(values) for k, v in self.buy.headers.items()})


def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def resolve(doc, pointer):
    """(found, value) of an RFC 6901 pointer in a parsed JSON document."""
    if pointer == "":
        return doc is not None, doc
    value = doc
    for raw in pointer[1:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return False, None
    return True, value


def as_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def wait_answers(host, port, seconds, proc):
    """True once something accepts TCP connections at host:port within `seconds`
    (False at once when `proc` exits)."""
    def answers():
        if proc is not None and proc.poll() is not None:
            return "exited"
        try:
            socket.create_connection((host, port), timeout=1).close()
            return "answers"
        except OSError:
            return None

    return wait_until(seconds, answers, 0.1) == "answers"
