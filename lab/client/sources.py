"""Texts the raw limits must share with stockd, read from its C sources so that they
stay the same: the `lua` strategy's sale script (a redis_script's concatenated string
literals in server/store/redis_stock.c, which server/sale/strategies/lua.c runs), the
`sql` strategy's statements (SQL_DEDUCT_IF_ENOUGH and SQL_INSERT_ORDER in
server/backend/sql.c), the strategy name a file registers, and the name
of the backend a file defines (a backend may share its name with a strategy)."""

import hashlib
import os
import re

from ..base.common import REPO, SetupError

SERVER = os.path.join(REPO, "server")
STRATEGIES = os.path.join(SERVER, "sale", "strategies")
BACKENDS = os.path.join(SERVER, "backend")
LUA_FILE = os.path.join(STRATEGIES, "lua.c")
SALE_SCRIPT_FILE = os.path.join(SERVER, "store", "redis_stock.c")  # the script LUA_FILE runs
SALE_SCRIPT = "redis_sale_script"
SQL_FILE = os.path.join(BACKENDS, "sql.c")
SQL_STRATEGY_FILE = os.path.join(STRATEGIES, "sql.c")

_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def unescape(body):
    """A C string literal's body as the compiler sees it (the simple escapes)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def literals(text, macros=None):
    """The concatenation of the string literals at the start of `text` (C joins
    adjacent literals separated by white space only); a name in `macros` stands for
    the literals it is #defined as."""
    out, pos = [], 0
    while True:
        m = re.compile(r'\s*("|\w+)').match(text, pos)
        if not m or (m.group(1) != '"' and m.group(1) not in (macros or {})):
            break
        if m.group(1) != '"':
            out.append(macros[m.group(1)])
            pos = m.end()
            continue
        lit = _LITERAL.match(text, m.end() - 1)
        out.append(unescape(lit.group(1)))
        pos = lit.end()
    return "".join(out)


def string_macros(text):
    """Every `#define NAME "..." "..."` of a C file (continued lines included): NAME ->
    the text of its literals."""
    found = {}
    for m in re.finditer(r"^#define\s+(\w+)[ \t]*((?:.*\\\n)*.*)$", text, re.M):
        body = m.group(2).replace("\\\n", "\n")
        if body.lstrip().startswith('"'):
            found[m.group(1)] = literals(body)
    return found


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise SetupError(f"cannot read {path}: {e.strerror}") from None


def redis_script(path, variable):
    """The source of `[static] struct redis_script <variable> = {.source = "..." ...}`."""
    text = read(path)
    m = re.search(r"struct\s+redis_script\s+" + re.escape(variable) + r"\s*=\s*\{\s*\.source\s*=",
                  text)
    source = literals(text[m.end():], string_macros(text)) if m else ""
    if not source:
        raise SetupError(f"{os.path.relpath(path, REPO)}: no redis_script '{variable}' source")
    return source


def sql_statement(path, key):
    """The text of `[KEY] = "..." "..."` in the statement table."""
    text = read(path)
    m = re.search(r"\[\s*" + re.escape(key) + r"\s*\]\s*=", text)
    sql = literals(text[m.end():]) if m else ""
    if not sql:
        raise SetupError(f"{os.path.relpath(path, REPO)}: no statement {key}")
    return sql


def strategy_name(path):
    """The `.name = "..."` a strategy file registers."""
    m = re.search(r'\.name\s*=\s*"([^"]+)"', read(path))
    if not m:
        raise SetupError(f"{os.path.relpath(path, REPO)}: no strategy .name")
    return m.group(1)


def backend_name(filename):
    """The `.name` of the `struct backend` that server/backend/<filename> defines: the
    word GET /strategies' needs and GET /health use for that backend."""
    path = os.path.join(BACKENDS, filename)
    m = re.search(r'struct\s+backend\s+\w+\s*=\s*\{\s*\.name\s*=\s*"([^"]+)"', read(path))
    if not m:
        raise SetupError(f"{os.path.relpath(path, REPO)}: no struct backend .name")
    return m.group(1)


def sha1(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
