"""What sharding a hot product costs per shard, measured where this machine's cores
cannot show what it buys: one product sold by one strategy (by default the first
whose store is "segments", its stock split over --segments K shards) on the stack's
Redis Cluster, and around the sales each primary's INFO commandstats (the sale
script's EVALSHA calls and microseconds) and INFO cpu (the server's user + system
seconds), and stockd's own CPU seconds (/proc/PID/stat of the stockd the run
started, or of run/stockd.pid's).

Per primary it reports the sales that ran there, the script's usec_per_call, and the
server's CPU per sale (all of its work: the script, the protocol, the event loop);
per run stockd's CPU per sale. The capacity model for K shards on K cores (in
docs/redis-cluster.md) is made from these figures, not from this machine's throughput.

Point stockd at the cluster first, as the comparison on the cluster does:
    make redis-cluster-up; eval "$(scripts/stack.sh rcluster-env)"
    python3 -m lab shards --segments 3 --port 8090"""

import json
import os
import time

from ..base.common import SetupError
from ..client import facts as facts_mod
from ..client.sales import deduct_path
from ..stack.service import run_dir
from ..drivers.load import Load, outcomes_of
from ..nemesis import redis_group
from ..scaffold.runner import Runner

PRODUCT = 1001
CPU_FIELDS = ("used_cpu_user", "used_cpu_sys")
SEGMENTS_STORE = "segments"


def options(o):
    o.add("--segments", ["SEGMENTS"], 3, int, "segments of the product (stockd's --segments)",
          1)
    o.add("--strategy", ["STRATEGY"], "", str,
          'the strategy that sells (default: the first whose store is "segments")')
    o.add("--seconds", ["SECONDS"], 20, int, "how long the sales run", 1)
    o.add("--conns", ["CONNS"], 16, int, "closed-loop connections", 1)
    o.add("--stock", ["STOCK"], 10_000_000, int, "units at reset (more than will sell)", 1)


def primaries(run):
    """The cluster's primaries as stockd's /health names them, {"host:port": port}."""
    r = run.api.call("GET", "/health")
    cluster = (((r.body or {}).get("backends") or {}).get("redis") or {}).get("cluster")
    if not isinstance(cluster, dict) or not cluster.get("primaries"):
        raise SetupError("stockd's main Redis is not a Redis Cluster: set "
                         'STOCKD_REDIS_CLUSTER (eval "$(scripts/stack.sh rcluster-env)")')
    return {name: int(name.rsplit(":", 1)[1]) for name in cluster["primaries"]}


def server_figures(port):
    """(EVALSHA calls, EVALSHA usec, CPU seconds) of the server at port."""
    stats = redis_group.info(port, "commandstats").get("cmdstat_evalsha", "")
    fields = dict(kv.split("=", 1) for kv in stats.split(",") if "=" in kv)
    cpu = redis_group.info(port, "cpu")
    return (int(fields.get("calls", 0)), int(fields.get("usec", 0)),
            sum(float(cpu.get(f, 0)) for f in CPU_FIELDS))


def stockd_pid(run):
    proc = run.service and run.service.proc
    if proc:
        return proc.pid
    try:
        with open(os.path.join(run_dir(), "stockd.pid")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def cpu_seconds(pid):
    """utime + stime of the process, in seconds; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seller(run):
    """The strategy named by --strategy, or the first on the segments store."""
    facts = facts_mod.parse(run.api.strategies().body)
    if run.args.strategy:
        return facts.select([run.args.strategy])[0]
    for s in facts.strategies:
        if s.store == SEGMENTS_STORE:
            return s
    raise SetupError(f'no strategy of this stockd sells from a "{SEGMENTS_STORE}" store')


def work(run):
    a = run.args
    nodes = primaries(run)
    strategy = seller(run)
    run.api.must_reset(PRODUCT, a.stock)
    pid = stockd_pid(run)
    before = {name: server_figures(port) for name, port in nodes.items()}
    own_before = cpu_seconds(pid)
    load = Load(a.host, a.port, 10)
    load.add("sales", deduct_path(strategy.name, PRODUCT), a.conns)
    run.say(f"{strategy.name}, {a.segments} segments: {a.conns} connections for {a.seconds} s")
    load.start()
    time.sleep(a.seconds)
    load.stop()
    own_after = cpu_seconds(pid)
    after = {name: server_figures(port) for name, port in nodes.items()}
    outcomes = outcomes_of(load.answers("sales"))
    sold = outcomes["sold"]
    shards = []
    for name in sorted(nodes):
        calls = after[name][0] - before[name][0]
        usec = after[name][1] - before[name][1]
        cpu = after[name][2] - before[name][2]
        shards.append({"primary": name, "sales": calls,
                       "usec_per_call": round(usec / calls, 2) if calls else None,
                       "cpu_us_per_sale": round(cpu * 1e6 / calls, 1) if calls else None})
    own = own_after - own_before if own_before is not None and own_after is not None else None
    done = {"strategy": strategy.name, "segments": a.segments, "seconds": a.seconds,
            "conns": a.conns, "sold": sold, "answers": outcomes.requests, "shards": shards,
            "stockd_cpu_us_per_sale": round(own * 1e6 / sold, 1) if own and sold else None,
            "account": run.api.account(PRODUCT, strategy.store)}
    out_dir = run.out_dir()
    with open(os.path.join(out_dir, "shards.json"), "w") as f:
        json.dump(done, f, indent=2)
    done["out_dir"] = out_dir
    return done


def report(run, done):
    print(f"{done['strategy']}, {done['segments']} segments: {done['sold']} sold of "
          f"{done['answers']} answers in {done['seconds']} s on {done['conns']} connections; "
          f"stockd CPU per sale {done['stockd_cpu_us_per_sale']} us")
    print("| primary | sales | EVALSHA usec_per_call | server CPU us per sale |")
    print("| --- | ---: | ---: | ---: |")
    for s in done["shards"]:
        print(f"| {s['primary']} | {s['sales']} | {s['usec_per_call']} | "
              f"{s['cpu_us_per_sale']} |")
    acct = done["account"] or {}
    bad = acct.get("oversold", 0) or acct.get("lost_updates", 0)
    print(f"ledger: {json.dumps(acct)}; results in {done['out_dir']}")
    return 1 if bad else 0


RUNNER = Runner("shards", __doc__, options=options, work=work, report=report, host=True,
                port=True, results="shards-", instances=1,
                stockd=lambda args: ["--segments", str(args.segments)])
main, parse_args = RUNNER.main, RUNNER.parse
