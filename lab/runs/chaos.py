"""Faults injected under load (`make chaos`): does stockd stay alive, answer 503
instead of hanging while a backend is gone, sell again soon after it returns, and keep
its ledger straight?

For each fault (lab.nemesis.faults: MariaDB and Redis killed with -9 and restarted, Redis
frozen with SIGSTOP, one and then two of the three Redlock servers stopped, ZooKeeper
killed) the run resets one product per strategy to a stock that never runs out and
drives a safe strategy of each store, the lockless safe strategies of the faulted
backend and its lock zoo (lab.nemesis.faults says which), with
keep-alive connections back to back and a probe every 50 ms (lab.drivers.load); after
--before seconds it injects the fault, keeps it --hold seconds, brings the backend
back, and goes on for --after seconds (up to 15 s while a strategy has not sold
again). Each (fault, strategy) row is judged by lab.judges.chaos_gate: stockd alive (never
restarted), no request past the deadline plus --margin-ms, 503 while the backend was
gone (judged by when each request was sent), the first 200 within 2 s of its return and no 503 after that, 0 oversold and 0
lost, a ledger equal to the 200s plus at most the outcome_unknown answers, and a
second witness that agrees with the ledger: the clients' history of the row (every
answer with its send and answer times, the stock its reply said it left, and the
store's counter read at the end; history-<fault>-<strategy>.jsonl) is linearizable
exactly when nothing was oversold or lost (lab.judges.history, lab.judges.linearize).

It starts its own stockd on host:port (refusing a port where something answers), with
a short deadline and backend timeouts (--request-timeout-ms, --io-timeout-ms), and a
lock TTL and lock wait shorter than the 2 s of recovery (--lock-ttl-ms: a lock granted
to a request that gave up, e.g. a SET queued in a frozen Redis, lives until it
expires; --lock-wait-ms: a fair lock's waiter that gave up keeps its place in the
queue that long), brings the private stack up (scripts/stack.sh up) and leaves it
running. Writes results/chaos-<timestamp>/ (chaos.json, chaos.csv, junit.xml) and points
results/chaos-latest at it; prints the table. Exit status 1 on any violation, 2 when
the run cannot be made.

--quick (the test gate): Redis killed, Redis frozen for 2 s, one Redlock server
stopped, with shorter phases, each under the same strategies but only the first of
the lock zoo."""

import os
import sys
import time

from ..base.common import (ENDLESS_STOCK, SETTLE_S, SetupError, comma_list, elapsed_line, now_iso,
                           slug, tail, write_text)
from ..client import facts as facts_mod
from ..client.sales import deduct_path
from ..stack.service import stack_env, wait_healthy
from ..drivers.load import Load
from ..nemesis import faults as faults_mod
from ..judges import history
from ..judges.chaos_gate import RECOVER_S, Timeline, figures, problems
from ..judges.gate import with_witnesses
from ..reports import junit, tables
from ..scaffold.runner import Runner

HEALTHY_S = 60
RECOVER_WAIT_S = 15
CLIENT_EXTRA_S = 5  # the driver gives up this long after the deadline plus margin

ROW_FIELDS = [
    "fault", "strategy", "store", "hit", "expect", "requests", "ok", "ok_before", "ok_during",
    "refused_during", "conflict", "unavailable", "timeout", "unknown", "overloaded",
    "late_refused", "unexpected", "max_ms", "recover_s", "gone_s", "store_sold", "oversold",
    "lost_updates", "ledger", "history", "history_ops", "history_s", "error_detail", "verdict",
    "reason",
]
TABLE = [
    ("fault", "fault", "<"), ("strategy", "strategy", "<"), ("store", "store", "<"),
    ("hit", "hit", "<"), ("200", "ok", ">"), ("409", "conflict", ">"),
    ("unavail", "unavailable", ">"), ("timeout", "timeout", ">"), ("unknown", "unknown", ">"),
    ("other", lambda r: len(r["unexpected"].split("; ")) if r["unexpected"] else 0, ">"),
    ("max ms", "max_ms", ">"), ("gone s", "gone_s", ">"), ("recover s", "recover_s", ">"),
    ("oversold", "oversold", ">"), ("lost", "lost_updates", ">"),
    ("ledger", lambda r: r["ledger"] if r["ledger"] in ("ok", None) else "WRONG", "<"),
    ("history", history.short, "<"),
    ("verdict", lambda r: r["verdict"].upper(), "<"),
]


def options(o):
    o.add("--faults", ["CHAOS_FAULTS", "FAULTS"], "", comma_list,
          "comma list of mysql-kill, redis-kill, redis-freeze, redlock-stop-1, redlock-stop-2, "
          "zk-kill; empty: all")
    o.add("--conns", ["CHAOS_CONNS"], 4, int,
          "keep-alive connections per strategy, back to back", 1)
    o.add("--probe-rate", ["CHAOS_PROBE_RATE"], 20, int,
          "probe requests per second per strategy", 1)
    o.add("--before", ["CHAOS_BEFORE_S"], 2.0, float, "seconds of load before the fault", 0.5)
    o.add("--hold", ["CHAOS_HOLD_S"], 3.0, float, "seconds the fault lasts", 0.5)
    o.add("--after", ["CHAOS_AFTER_S"], 4.0, float,
          "seconds of load after the backend is back", RECOVER_S + 1)
    o.add("--margin-ms", ["CHAOS_MARGIN_MS"], 500, int,
          "how far past --request-timeout-ms an answer may come", 0)
    o.add("--request-timeout-ms", ["CHAOS_REQUEST_TIMEOUT_MS"], 2000, int,
          "stockd's request deadline", 100)
    o.add("--io-timeout-ms", ["CHAOS_IO_TIMEOUT_MS"], 1000, int, "stockd's backend timeout", 100)
    o.add("--lock-ttl-ms", ["CHAOS_LOCK_TTL_MS"], 1000, int, "stockd's lock TTL", 10)
    o.add("--lock-wait-ms", ["CHAOS_LOCK_WAIT_MS"], 1000, int,
          "stockd's longest wait for a lock", 0)
    o.add("--product", ["CHAOS_PRODUCT"], 7001, int, "first product id (one per strategy)", 1)
    o.flag("--quick", "the test gate's version: Redis killed, Redis frozen 3 s, one Redlock "
                      "server stopped; 1.5 s before, 3 s of fault, 3 s after")


def after_parse(ns, error):
    if ns.quick:
        # A fault must outlast the backend timeout (--io-timeout-ms, 1 s) by as much
        # again: the requests in flight when it starts fail about 1 s in, and only
        # the ones sent after them show the outage as requests started during it.
        ns.before, ns.hold, ns.after = 1.5, 3.0, 3.0


def stockd_options(args):
    return [f"--request-timeout-ms={args.request_timeout_ms}",
            f"--io-timeout-ms={args.io_timeout_ms}", f"--lock-ttl-ms={args.lock_ttl_ms}",
            f"--lock-wait-ms={args.lock_wait_ms}"]


def choose_faults(args, env):
    every = (faults_mod.quick_faults(env, args.hold) if args.quick
             else faults_mod.all_faults(env, args.hold))
    if not args.faults:
        return every
    known = {f.name: f for f in faults_mod.all_faults(env, args.hold)}
    unknown = [n for n in args.faults if n not in known]
    if unknown:
        raise SetupError(f"unknown faults: {', '.join(unknown)} (known: {', '.join(known)})")
    return [known[n] for n in args.faults]


def check_durable(faults, env):
    """A Redis killed with -9 keeps its sales only with its AOF on (scripts/stack.sh
    starts it so); an older stack's Redis would lose the ledger the run judges."""
    if any(f.inject == "kill-one" and "redis" in f.targets for f in faults) and \
            not faults_mod.redis_keeps_writes(int(env["STOCKD_REDIS_PORT"])):
        raise SetupError("the stack's Redis runs without its AOF (started by an older "
                         "scripts/stack.sh): kill -9 would lose its ledger; restart it with "
                         "scripts/stack.sh stop-one redis && scripts/stack.sh start-one redis")


class Chaos:
    def __init__(self, args, api, service, facts, env, say, out_dir):
        self.args, self.api, self.service, self.facts = args, api, service, facts
        self.env, self.say, self.out_dir = env, say, out_dir
        self.deadline_ms = facts.settings.get("request_timeout_ms") or args.request_timeout_ms
        self.bound_ms = self.deadline_ms + args.margin_ms

    def product(self, s):
        return self.args.product + self.facts.strategies.index(s)

    def path(self, s):
        return deduct_path(s.name, self.product(s))

    def load_for(self, selected):
        a = self.args
        load = Load(a.host, a.port, self.bound_ms / 1000 + CLIENT_EXTRA_S)
        for s in selected:
            self.api.must_reset(self.product(s), ENDLESS_STOCK)
            load.add(s.name, self.path(s), a.conns)
            load.add(s.name, self.path(s), 1, rate=a.probe_rate)
        return load

    def drive(self, fault, load):
        """Load before, during and after the fault: its Timeline."""
        a = self.args
        injection = faults_mod.Injection(fault, self.env)
        try:
            started = load.start()
            time.sleep(a.before)
            injecting = time.monotonic()
            injected = injection.inject()
            time.sleep(max(0.0, injected + a.hold - time.monotonic()))
            back = injection.restore()
            time.sleep(max(0.0, (back or time.monotonic()) + a.after - time.monotonic()))
            self.wait_recovered(load, back)
            stopped = time.monotonic()
        finally:
            load.stop()
            injection.undo()
        return Timeline(started, injecting, injected, back, stopped)

    def wait_recovered(self, load, back):
        """Past --after, go on (up to RECOVER_WAIT_S after the return) while a strategy
        has not answered 200 since, so that the table shows how late it did."""
        if back is None:
            return
        while time.monotonic() < back + RECOVER_WAIT_S and not all(
                any(x.status == 200 and x.end >= back for x in load.answers(key))
                for key in load.streams):
            time.sleep(0.1)

    def run_fault(self, fault):
        selected = faults_mod.strategies_for(self.facts, fault, 1 if self.args.quick else None)
        if not any(fault.backend in s.needs for s in selected):
            self.say(f"{fault.name}: skipped: no strategy claiming safety needs {fault.backend}")
            return []
        wait_healthy(self.api, HEALTHY_S)  # after the last fault
        self.say(f"{fault.name}: {fault.what}; under load: {', '.join(s.name for s in selected)}")
        load = self.load_for(selected)
        t = self.drive(fault, load)
        alive = self.alive()
        if alive:
            self.api.wait_idle(SETTLE_S)
        else:
            self.say(f"{fault.name}: stockd DIED (exit status {self.service.proc.returncode}); "
                     f"the end of {self.service.log_file}:\n{tail(self.service.log_file)}")
        gone = t.gone_s()
        self.say(f"{fault.name}: backend gone {gone:.2f} s" if gone is not None else
                 f"{fault.name}: the backend did not answer again")
        return [self.row(fault, s, load.answers(s.name), t, alive) for s in selected]

    def row(self, fault, s, answers, timeline, alive):
        acct = self.api.account(self.product(s), s.store)
        f = figures(answers, timeline, acct)
        hit = fault.backend in s.needs
        why = problems(f, fault.expect, hit, s.safe_single, self.bound_ms, alive)
        gone = timeline.gone_s()
        r = {"fault": fault.name, "strategy": s.name, "store": s.store, "hit": hit,
             "expect": fault.expect if hit else "unaffected",
             "gone_s": None if gone is None else round(gone, 2)}
        r.update(f)
        path = os.path.join(self.out_dir, f"history-{slug(fault.name)}-{slug(s.name)}.jsonl")
        r.update(history.judge_final(ENDLESS_STOCK, history.from_answers(answers, path, 1),
                                     (acct or {}).get("remaining"), path))
        verdict = "fail" if why else "pass"
        reason = "; ".join(why) if why else "alive, no hang, recovered, ledger straight"
        r["verdict"], r["reason"] = with_witnesses(verdict, reason, acct, r)
        self.say(f"{fault.name} / {s.name}: {r['verdict'].upper()} - {r['reason']}")
        return r

    def alive(self):
        return self.service.proc is not None and self.service.proc.poll() is None

    def run(self, faults):
        """The rows of every fault; the faults after one that killed stockd do not run."""
        rows = []
        for fault in faults:
            rows += self.run_fault(fault)
            if not self.alive():
                break
        return rows


def write_outputs(out_dir, rows, params):
    write_text(os.path.join(out_dir, "chaos.json"),
               tables.json_text({"params": params, "rows": rows}))
    write_text(os.path.join(out_dir, "chaos.csv"), tables.csv_text(rows, ROW_FIELDS))
    junit.write(os.path.join(out_dir, "junit.xml"), "stockd.chaos", rows,
                lambda r: f"{r['fault']} / {r['strategy']}", lambda r: None, params)


def report(run, done):
    rows, out_dir, params = done
    print(tables.text_table(rows, TABLE))
    print()
    print(f"deadline {params['request_timeout_ms']} ms + margin {params['margin_ms']} ms; "
          f"recovery within {RECOVER_S:g} s; io timeout {params['io_timeout_ms']} ms, "
          f"lock TTL {params['lock_ttl_ms']} ms, lock wait {params['lock_wait_ms']} ms")
    failed = [r for r in rows if r["verdict"] != "pass"]
    for r in failed:
        print(f"FAIL {r['fault']} / {r['strategy']}: {r['reason']}")
    print(f"{len(rows) - len(failed)}/{len(rows)} rows pass; results in {out_dir}")
    print(elapsed_line(run.elapsed()))
    return 1 if failed or not rows else 0


def work(run):
    args, api, say = run.args, run.api, run.say
    env = stack_env()
    faults = choose_faults(args, env)
    check_durable(faults, env)
    facts = facts_mod.parse(api.strategies().body)
    out_dir = run.out_dir()
    say(f"results in {out_dir}")
    chaos = Chaos(args, api, run.service, facts, env, say, out_dir)
    rows = chaos.run(faults)
    params = {"started": run.started, "finished": now_iso(), "host": args.host,
              "port": args.port, "faults": [f.doc() for f in faults],
              "conns": args.conns, "probe_rate": args.probe_rate, "before_s": args.before,
              "hold_s": args.hold, "after_s": args.after, "margin_ms": args.margin_ms,
              "request_timeout_ms": chaos.deadline_ms, "io_timeout_ms": args.io_timeout_ms,
              "lock_ttl_ms": args.lock_ttl_ms, "lock_wait_ms": args.lock_wait_ms,
              "recover_s": RECOVER_S, "stock": ENDLESS_STOCK,
              "quick": args.quick, "settings": facts.settings}
    write_outputs(out_dir, rows, params)
    return rows, out_dir, params


RUNNER = Runner("chaos", __doc__, options=options, after_parse=after_parse, work=work,
                report=report, host=True, port="its port (nothing may answer there)",
                results="chaos-", instances=1, stockd=stockd_options,
                own_port="the chaos run starts its own stockd there with short timeouts")
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
