"""The strategy table of docs/strategies.md, generated from GET /strategies, so that it can
never say something the server does not:
    python3 -m lab readme [--port P]                   print the table
    python3 -m lab readme --check docs/strategies.md   exit 1 when its table differs
    python3 -m lab readme --write docs/strategies.md   put the table into it
The table sits in the document between the two marker lines below. When nothing answers
at host:port, a build/stockd (and the stack) is brought up for the time it takes, as
the comparison does."""

import difflib
import sys

from ..client import facts as facts_mod
from ..scaffold.runner import Runner

BEGIN = "<!-- strategies table: generated from GET /strategies by `python3 -m lab readme` -->"
END = "<!-- end of the strategies table -->"

CONTENTION = {"waits": "waits its turn", "retries": "retries, then busy", "none": "nothing waits"}


def yes_no(flag):
    return "yes" if flag else "no"


def claim(s):
    """yes/no for one and for N instances; a "yes" that rests on a caveat gets a star."""
    def one(flag):
        return yes_no(flag) + ("\\*" if flag and s.caveat else "")
    return f"{one(s.safe_single)} / {one(s.safe_multi)}"


def cell(text):
    """Text as a markdown table cell shows it: no tags, no column breaks."""
    return (text or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
        .replace("|", "\\|")


def lease(s):
    if not s.lease:
        return ""
    return f"{s.lease['busy_holder']} / {s.lease['paused_holder']}"


def partition(s):
    """What a lock server's fault does to its lease, where the row states it: a clock that
    jumps past the TTL, a restart without its data, a grant that comes late."""
    if not s.lease or not any(case in s.lease for case in facts_mod.PARTITION_CASES):
        return ""
    return " / ".join(s.lease.get(case, "-") for case in facts_mod.PARTITION_CASES)


FAILOVER = {"safe": "safe", "loses_sales": "loses acknowledged sales",
            "two_holders": "two holders: oversells"}


# A partition of the Redis group, where it does other than a failover (its own fact).
PARTITION = {"oversells": "both sides' orders settled: oversells"}


def failover(s):
    """What a failover does, and a partition where that differs."""
    if not s.failover:
        return ""
    if s.partition != s.failover:
        return f"{FAILOVER[s.failover]}; cut off from the Sentinels: {PARTITION[s.partition]}"
    return FAILOVER[s.failover]


def store(s):
    """Where it sells; a row that settles later names where its orders land too."""
    return f"{s.store}, settled into mysql after the 200" if s.settles else s.store


CLUSTER = {"safe": "safe", "conflicts_at_commit": "safe, conflicts fail at commit",
           "two_holders": "two holders: oversells", "loses_updates": "loses updates"}


def cluster(s):
    return CLUSTER[s.cluster] if s.cluster else ""


def idempotent(s):
    """Whether a retry with the same Idempotency-Key buys once, or why the row cannot."""
    return "yes" if s.idempotent else f"no: {cell(s.idempotent_why)}"


def table(f):
    """The markdown table of every strategy, in the server's order."""
    lines = ["| name | store | safe, 1 / N instances | contended | lease runs out: busy / "
             "frozen holder | a lock server's clock jumps / it restarts empty / a grant "
             "comes late | Redis primary fails over | MySQL cluster, a stockd per node "
             "| what it is | keeps an Idempotency-Key |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in f.strategies:
        lines.append(f"| `{s.name}` | {store(s)} | {claim(s)} | {CONTENTION[s.contention]} "
                     f"| {lease(s)} | {partition(s)} | {failover(s)} | {cluster(s)} "
                     f"| {cell(s.summary)} | {idempotent(s)} |")
    return "\n".join(lines)


def block(text):
    """The generated lines between the markers of `text`, or None."""
    try:
        start = text.index(BEGIN) + len(BEGIN)
        end = text.index(END, start)
    except ValueError:
        return None
    return text[start:end].strip("\n")


def replace_block(text, new):
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return text[:start] + "\n" + new + "\n" + text[end:]


def options(o):
    o.add("--check", [], "", str, "document to check (docs/strategies.md)")
    o.add("--write", [], "", str, "document to update (docs/strategies.md)")


def work(run):
    return table(facts_mod.parse(run.api.strategies().body))


def report(run, generated):
    args, say = run.args, run.say
    path = args.check or args.write
    if not path:
        print(generated)
        return 0
    with open(path) as f:
        text = f.read()
    current = block(text)
    if current is None:
        say(f"{path} has no strategies table between its markers:\n{BEGIN}\n{END}")
        return 2
    if args.write:
        with open(path, "w") as f:
            f.write(replace_block(text, generated))
        say(f"{path}: strategies table written")
        return 0
    if current == generated:
        say(f"{path}: the strategies table is what GET /strategies says")
        return 0
    say(f"{path}: the strategies table differs from GET /strategies "
        f"(python3 -m lab readme --write {path}):")
    sys.stderr.writelines(difflib.unified_diff(current.splitlines(True),
                                               generated.splitlines(True), path,
                                               "GET /strategies"))
    return 1


RUNNER = Runner("readme", __doc__, options=options, work=work, report=report, host=True,
                port=True, instances=1)
main, parse_args = RUNNER.main, RUNNER.parse
