"""The audit checked against stockd's own ledger (make audit-stockd): every strategy
of GET /strategies (or --strategies) audited through audit/targets/stockd.toml, as a
foreign client sees it (its answers, the stock it reports, the stock read after the
run), then the same run's ledger read from the strategy's store. A strategy whose
exposed_by names request parameters runs with them (as the comparison's exposed rows
do), so that the unsafe ones race.

A row passes when the two verdicts are the same: the audit finds a violation
(oversold, lost updates, unexplained units, a history that is not linearizable)
exactly when the ledger counts units oversold or lost. Each strategy's audit keeps
its own results (report.html, junit.xml, history) in a directory named after it;
results.json and junit.xml hold the rows. Exit status 1 when a row disagrees, 2 when
the run cannot be made (stockd not reachable or startable, a needed backend down).

With --peer it also audits the bench's Node.js peer (bench/peer/, lab.drivers.peer) through
audit/targets/peer.toml: its conditional-UPDATE sale on the stack's MySQL, which must
pass (a peer that cannot run here, without Node.js 20 or npm, is skipped with the
reason, as the bench skips it); and its OpenResty peer (bench/openresty/,
lab.drivers.openresty) through audit/targets/openresty.toml: its `lua` sale on the
stack's Redis, which must pass too (skipped without Debian's packages).

When nothing answers at host:port (and host is local) it starts the private stack and
a stockd there, and stops that stockd at the end."""

import os
import sys

from ..base.common import REPO, SETTLE_S, comma_list, slug, write_text
from ..client import facts as facts_mod
from ..client.api import Api
from ..client.target import Target
from ..stack.service import run_dir, stack_env
from ..drivers import openresty as openresty_mod, peer as peer_mod
from ..judges.gate import race_text, raced
from ..judges.settlement import settled_account
from ..reports import junit, tables
from ..scaffold.runner import Runner
from ..scaffold.auditing import Audit, knobs

TARGET = os.path.join(REPO, "audit", "targets", "stockd.toml")
PEER_TARGET = os.path.join(REPO, "audit", "targets", "peer.toml")
OPENRESTY_TARGET = os.path.join(REPO, "audit", "targets", "openresty.toml")
TABLE = [("strategy", "strategy", "<"), ("store", "store", "<"), ("knobs", "knobs", "<"),
         ("req", "requests", ">"), ("sold", "sold", ">"), ("oversold", "oversold", ">"),
         ("lost", "lost_updates", ">"), ("audit", "audit", "<"),
         ("ledger oversold", "ledger_oversold", ">"), ("ledger lost", "ledger_lost", ">"),
         ("ledger", "ledger", "<"), ("verdict", "verdict", "<")]


def options(o):
    o.add("--strategies", ["STRATEGIES"], "", comma_list,
          "comma list; empty: all from GET /strategies")
    o.add("--target", ["AUDIT_STOCKD_TARGET"], TARGET, str, "stockd's target file")
    for knob in ("threads", "loops", "rampup", "stock", "product", "qty"):
        o.add(f"--{knob}", [knob.upper()], "", str, f"{knob}; empty: the target's [load]")
    o.add("--exposed-hold-ms", ["EXPOSED_HOLD_MS"], 20, int,
          "hold_ms of a strategy whose exposed_by names it", 0)
    o.add("--exposed-ttl-ms", ["EXPOSED_TTL_MS"], 5, int,
          "ttl_ms of a strategy whose exposed_by names it", 0)
    o.add("--exposed-pause-ms", ["EXPOSED_PAUSE_MS"], 20, int,
          "pause_ms of a strategy whose exposed_by names it", 0)
    o.add("--jmeter", ["JMETER"], os.path.join(REPO, "jmeter", "jmeter"), str, "the jmeter command")
    o.add("--jmeter-timeout", ["JMETER_TIMEOUT"], 300, int,
          "seconds before a JMeter run is stopped", 1)
    o.flag("--peer", "also audit the bench's peers: Node.js (bench/peer/) on --port + 1, "
                     "OpenResty (bench/openresty/) on --port + 2")


def peer_row(run, out_dir):
    """The Node.js peer's conditional-UPDATE sale audited (it must pass), or None when
    the peer cannot run here."""
    a, api = run.args, run.api
    env = stack_env()
    texts = peer_mod.stockd_texts(4, 1)
    port = a.port + 1
    peer = peer_mod.Peer(port, env, texts, api.strategies().raw,
                         os.path.join(run_dir(), "audit-peer", "strategies.json"),
                         os.path.join(out_dir, "peer.log"))
    row = {"strategy": "peer " + texts["sql_name"], "store": "mysql", "knobs": "-",
           "ledger": "-"}
    try:
        peer.start(Api(a.host, port))
    except peer_mod.PeerMissing as e:
        run.say(f"the peer is skipped: {e}")
        return None
    try:
        mysql = (f"{env['STOCKD_MYSQL_USER']}@{env['STOCKD_MYSQL_HOST']}:"
                 f"{env['STOCKD_MYSQL_PORT']}/{env['STOCKD_MYSQL_DB']}")
        return audit_peer(run, row, os.path.join(out_dir, "peer"), PEER_TARGET,
                          {"port": str(port), "strategy": texts["sql_name"], "mysql": mysql,
                           "password_file": env["STOCKD_MYSQL_PASSWORD_FILE"]})
    finally:
        peer.stop()


def openresty_row(run, out_dir):
    """The OpenResty peer's `lua` sale audited (it must pass), or None when its
    packages are missing."""
    a, api = run.args, run.api
    port = a.port + 2
    peer = openresty_mod.OpenResty(os.path.join(run_dir(), "audit-openresty"), port,
                                   stack_env(), api.strategies().raw, 4)
    row = {"strategy": "openresty " + peer.lua_name, "store": "redis", "knobs": "-",
           "ledger": "-"}
    try:
        peer.start(lambda p: Api(a.host, p))
    except openresty_mod.Missing as e:
        run.say(f"the OpenResty peer is skipped: {e}")
        return None
    try:
        return audit_peer(run, row, os.path.join(out_dir, "openresty"), OPENRESTY_TARGET,
                          {"port": str(port), "stockd": f"http://{api.where()}",
                           "strategy": peer.lua_name, "token": api.token or ""})
    finally:
        peer.stop()


def audit_peer(run, row, where, target_file, pairs):
    """One run of a peer's audit through its target file (the product reset first,
    so that its row exists in every store); `row`, filled in: the peer must pass."""
    os.makedirs(where, exist_ok=True)
    target = Target(target_file, pairs, out=where)
    k = knobs(run.args, target)
    run.api.must_reset(k["product"], k["stock"])
    audit = Audit(target, k, None, run.args.jmeter, run.args.jmeter_timeout, where, run.say)
    got = audit.run(1)[0]
    audit.write([got], run.started)
    row.update({f: got.get(f) for f in ("requests", "sold", "oversold", "lost_updates")},
               audit="unsafe" if got.get("kinds") else "safe", results=where,
               verdict=got["verdict"], reason=f"the peer must pass: {got['reason']}")
    run.say(f"{row['strategy']}: {row['verdict'].upper()} - {row['reason']}")
    return row


def row_of(run, strategy, out_dir):
    """Audit one strategy, then read its ledger: the row."""
    a, api = run.args, run.api
    values = {"hold_ms": a.exposed_hold_ms, "ttl_ms": a.exposed_ttl_ms,
              "pause_ms": a.exposed_pause_ms}
    knobs_set = {p: values[p] for p in strategy.exposed_by}
    pairs = dict(host=a.host, port=a.port, strategy=strategy.name, store=strategy.store,
                 token=api.token or "", **{p: str(v) for p, v in knobs_set.items()})
    where = os.path.join(out_dir, slug(strategy.name))
    os.makedirs(where, exist_ok=True)
    target = Target(a.target, pairs, out=where)
    k = knobs(a, target)
    audit = Audit(target, k, None, a.jmeter, a.jmeter_timeout, where, run.say)
    got = audit.run(1)[0]
    audit.write([got], run.started)
    api.wait_idle(SETTLE_S)
    acct = api.account(k["product"], strategy.store)
    problem = None
    if acct and strategy.settles:
        acct, problem = settled_account(api, k["product"], acct)
    row = {"strategy": strategy.name, "store": strategy.store,
           "knobs": ",".join(f"{p} {v}" for p, v in knobs_set.items()) or "-",
           "requests": got.get("requests"), "sold": got.get("sold"),
           "oversold": got.get("oversold"), "lost_updates": got.get("lost_updates"),
           "history": got.get("history"), "kinds": got.get("kinds"),
           "audit": "unsafe" if got.get("kinds") else "safe", "results": where,
           "ledger_oversold": (acct or {}).get("oversold"),
           "ledger_lost": (acct or {}).get("lost_updates"),
           "ledger": None if acct is None else "unsafe" if raced(acct) else "safe"}
    if acct is None or problem:
        row["verdict"], row["reason"] = "fail", problem or "the ledger could not be read"
    elif got["verdict"] == "fail" and not got.get("kinds"):
        row["verdict"], row["reason"] = "fail", f"the audit could not judge: {got['reason']}"
    elif row["audit"] != row["ledger"]:
        row["verdict"], row["reason"] = "fail", (
            f"the audit says {row['audit']} ({got['reason']}), the ledger says "
            f"{race_text(acct)}")
    else:
        row["verdict"], row["reason"] = "pass", (
            f"both say {row['audit']}: ledger {race_text(acct)}; audit {got['reason']}")
    run.say(f"{strategy.name}: {row['verdict'].upper()} - {row['reason']}")
    return row


def work(run):
    facts = facts_mod.parse(run.api.strategies().body)
    selected = facts.select(run.args.strategies)
    facts_mod.check_needs(run.api, facts, selected)
    Target(run.args.target, {"strategy": "-"}, out="")  # the file is checked first
    out_dir = run.out_dir()
    run.say(f"auditing {len(selected)} strategies of stockd at {run.api.where()}; results in "
            f"{out_dir}")
    rows = [row_of(run, s, out_dir) for s in selected]
    peers = [peer_row(run, out_dir), openresty_row(run, out_dir)] if run.args.peer else []
    rows += [p for p in peers if p]
    write_text(os.path.join(out_dir, "results.json"), tables.json_text(rows))
    junit.write(os.path.join(out_dir, "junit.xml"), "stockd.audit", rows,
                lambda r: r["strategy"], lambda r: None, {"target": run.args.target})
    return rows, out_dir


def report(run, done):
    rows, out_dir = done
    print(tables.text_table(rows, TABLE))
    print()
    failed = [r for r in rows if r["verdict"] != "pass"]
    for r in failed:
        print(f"FAIL {r['strategy']}: {r['reason']}")
    print(f"{len(rows) - len(failed)}/{len(rows)} strategies: the audit agrees with the ledger; "
          f"results in {out_dir}")
    return 1 if failed or not rows else 0


RUNNER = Runner("selfaudit", __doc__, options=options, work=work, report=report,
                host=True, port=True, results="selfaudit-", instances=1)
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
