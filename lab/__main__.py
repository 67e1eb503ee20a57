"""python3 -m lab COMMAND ... (from the repository root; `python3 -m lab COMMAND --help`
lists a command's flags, each of which also reads an environment variable):

    compare [FLAGS]            the comparison (make compare, make demo; jmeter/compare
                               is the same run, the JMeter image's entry point)
    bench [FLAGS]              the bench (make bench)
    chaos [FLAGS]              faults injected under load (make chaos)
    failover [FLAGS]           a Redis primary failover under each strategy (make failover)
    cluster [FLAGS]            every MySQL strategy on a multi-primary Galera cluster
                               (make cluster, make cluster-short: --quick)
    redis_cluster [FLAGS]      a shard's primary killed and the hot slot migrated under
                               load, on the Redis Cluster (make redis-cluster)
    partition [FLAGS]          clock jumps, empty restarts and late grants under the
                               Redis locks, in a network namespace (make partition; root)
    partition_sentinel [FLAGS] a Sentinel-watched primary cut from the majority under
                               each Redis row (make partition, after partition; root)
    partition_galera [FLAGS]   a Galera node and its stockd cut from the other two under
                               load, in a network namespace (make partition; root)
    probe [FLAGS]              hostile clients (make probe)
    soak [FLAGS]               the soak (make soak)
    retry [FLAGS]              buyers retrying lost answers while the store is
                               frozen: units bought twice, with and without
                               Idempotency-Key (make retry)
    admission [FLAGS]          the token bucket and the sold-out flag, measured
                               (make admission)
    stream reconcile|chaos|bench  lua-stream's order stream: the exactly-once check
                               order id by order id, its fault rows, its costs
                               (make reconcile, make stream-chaos, make stream-bench)
    audit [FLAGS]              a foreign service audited through a target file: does it
                               oversell? (make audit TARGET=file)
    selfaudit [FLAGS]          every strategy audited as a foreign service, each verdict
                               checked against the ledger (make audit-stockd)
    shards [FLAGS]             one product sold on the Redis Cluster: each primary's
                               sales, script usec and CPU per sale, stockd's CPU per sale
    readme [--check|--write F] the strategy table of docs/strategies.md, from
                               GET /strategies
    check-report [PATH]        check a comparison's report.html or a bench's bench.html
                               in headless Chromium (PATH: the page or its directory;
                               default results/latest); exit 0 fine, 1 wrong, 2 cannot
                               check
    render [DIR]               re-render DIR's report.html or bench.html from its
                               results (default results/latest)
"""

import json
import os
import sys

from .base.common import REPO, SetupError, write_text
from .reports import bench_report, browser, compare_report
from .runs import (admission, audit, bench, chaos, cluster, compare, failover, partition,
                   partition_galera, partition_sentinel, probe, readme, redis_cluster, retry,
                   selfaudit, shards, soak, stream)

KINDS = {  # page -> (results file, report module, rows from the results document)
    "report.html": ("results.json", compare_report, lambda doc: doc),
    "bench.html": ("bench.json", bench_report, lambda doc: doc["rows"]),
}


def locate(path):
    """(page path, results document, report module, rows) of a results directory or page."""
    path = os.path.realpath(path or os.path.join(REPO, "results", "latest"))
    pages = [path] if os.path.isfile(path) else [os.path.join(path, p) for p in KINDS]
    for page in pages:
        kind = KINDS.get(os.path.basename(page))
        results = os.path.join(os.path.dirname(page), kind[0]) if kind else None
        if results and os.path.isfile(results):
            with open(results) as f:
                doc = json.load(f)
            return page, doc, kind[1], kind[2](doc)
    raise SetupError(f"no report.html/results.json or bench.html/bench.json at {path}")


def check_report(argv):
    try:
        page, _, module, rows = locate(argv[0] if argv else None)
        found = browser.check(page, module.expectations(rows))
    except SetupError as e:
        print(f"check-report: {e}", file=sys.stderr)
        return 2
    for p in found:
        print(f"check-report: {p}", file=sys.stderr)
    if found:
        print(f"check-report: FAIL {page}", file=sys.stderr)
        return 1
    print(f"check-report: ok: {len(rows)} rows; screenshot {os.path.splitext(page)[0]}.png")
    return 0


def render(argv):
    try:
        page, doc, module, rows = locate(argv[0] if argv else None)
        params = doc.get("params") if isinstance(doc, dict) else None
        if params is None:
            with open(os.path.join(os.path.dirname(page), "params.json")) as f:
                params = json.load(f)
        write_text(page, module.render(rows, params))
    except (SetupError, OSError) as e:
        print(f"render: {e}", file=sys.stderr)
        return 2
    print(page)
    return 0


# The runs, each declared by its module's RUNNER (lab.scaffold.runner), and two page tools.
RUNS = (compare, bench, chaos, failover, cluster, partition, partition_sentinel, partition_galera,
        probe, soak, admission, retry, stream, readme, audit, selfaudit, redis_cluster, shards)
COMMANDS = {**{m.RUNNER.name: m.main for m in RUNS},
            "check-report": check_report, "render": render}


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
