"""stockd's lab: the runs behind `make compare`, `make demo`, `make bench`, `make chaos`,
`make failover`, `make cluster`, `make redis-cluster`, `make probe`, `make soak`,
`make admission`, the `make stream-*` targets, `make reconcile` and `make audit`, each
`python3 -m lab NAME` (lab/__main__.py lists them; `jmeter/compare` is the comparison's
entry point in the JMeter image). Python standard library only.
Every module, by what it is for (tests/lab/test_lab_map.py keeps this map in step with the
files):

  the command and the scaffold
    __main__      python3 -m lab COMMAND: the runs below by name, check-report, render
    auditing      the audit of one target, for make audit and make audit-stockd
    failover_window  the failover window made to happen on demand, for make failover and
                  make redis-cluster's kill rows
    runner        a run's scaffold, written once: --host, --port, --results-dir, the admin
                  client, progress, the service, the guarded run (exit 2, 130), the report
    common        errors that stop a run (exit 2), progress lines, options read from
                  flags or the environment, the results directory
    waiting       one wait with a deadline (wait_until) for every part that waits
    service       the private stack (scripts/stack.sh), one stockd or N behind nginx,
                  a private nginx serving a static file

  what stockd says
    api           HTTP client for stockd: /strategies, /stock/{p}, reset, /metrics,
                  the X-Stockd-Instance header
    facts         the strategies' facts from GET /strategies (store, claims,
                  contention, lease, exposed_by, needs, failover, cluster): nothing is
                  known by name
    outcomes      answers counted by outcome: sold, sold_out, busy, outcome_unknown,
                  errors by word
    sales         the one deduct path, one sale and its answer, a sale in the background
    sources       the sale script and SQL texts, and strategy names, read from server/*.c
    prometheus    the stack's Prometheus: in-flight peaks and lock wait p99 per row
    host          CPU steal from /proc/stat, a process's CPU time from /proc/PID/stat
    instances     a stockd a run starts itself: started, looked into, frozen, stopped
    nodes         the namespace lab's nodes, each on its own 127.0.0.N: stockd, Redis with
                  its own clock, MariaDB open to them

  what a foreign service says
    target        a target file (TOML): how to reset, buy, read the answers and the
                  stock of a service that is not stockd, checked before any load

  the drivers
    jmeter        the JMeter driver (jmeter/deduct.jmx) and its JTL results
    wrk           the wrk driver (bench/count.lua, bench/history.lua) and its results
    load          a driver that keeps every answer's timing (closed loop or paced)
    buyers        keep-alive buyers bound to instances, every answer kept with its instance
    raw           the raw limits: Redis running the sale script by EVALSHA
                  (redis-benchmark), MariaDB running the sale transaction (sysbench)
    peer          the bench's Node.js peer (bench/peer/): installed, started, stopped
    audit_plan    the audit's plan (jmeter/audit.jmx filled in from a target) and its
                  JTL's answers mapped by the target's rules
    race_runs     the comparison's races, run by stockd itself (POST /lab/race)
    faults        the faults chaos injects (scripts/stack.sh), the strategies each
                  one drives, the backends' probes
    redis_group   the stack's replicated Redis group: its Sentinels' view, the replica
                  held back (CLIENT PAUSE WRITE), a primary killed and its promotion
    netns         the partition lab's network namespace: only loopback, no route out
                  (checked before anything starts), links cut and healed by nftables
    delay_proxy   a link whose replies are held for a delay that can change at run time

  the judges
    plan          which comparison rows to run, from the facts
    gate          verdicts: safe rows, exposed races, leases, the ledger, contention;
                  driver-bound marking
    chaos_gate    a chaos row's figures and verdict from its timeline
    failover_gate  a failover row's sequence, figures and verdict against its fact
    history       the clients' history of a row, the second witness beside the ledger
    linearize     is a history linearizable for a stock counter (or its first violation)
    audit_gate    an audit run's row and verdict from what its clients saw
    settlement    a row that settles later, judged once its order stream has drained

  the reports
    tables        rows as text tables, JSON and CSV
    html          the self-contained HTML pieces: page, table, inline SVG charts
    junit         a run's rows as junit.xml (tests/junit.xsd)
    compare_report, bench_report   report.html and bench.html
    race_report   report.html's race timelines (web/race.js)
    audit_report  the audit's table and report.html
    failover_report, cluster_report   the failover's and the cluster's tables and
                  pictures
    browser       a report checked in headless Chromium
    devtools      one page in headless Chromium over the DevTools protocol (a pipe)

  the runs (each a RUNNER of lab.scaffold.runner)
    compare, bench  the comparison (`make compare`) and the bench (`make bench`)
    chaos, soak   faults under load (`make chaos`), a long steady load (`make soak`)
    admission     the token bucket and the sold-out flag, each mode its own rows: backend
                  calls per request, 429s, sold_outs from memory, undersell, a restock
                  through another instance (`make admission`)
    failover      a Redis primary failover under every strategy that touches Redis
                  (`make failover`)
    cluster       every MySQL strategy on a multi-primary Galera cluster (`make cluster`)
    redis_cluster  a shard's primary killed and the hot slot migrated under load, on the
                   Redis Cluster, each Redis row judged (`make redis-cluster`)
    partition     the Redlock debate's faults in a namespace of their own: a clock that
                  jumps, a server restarted empty, a grant answered late (`make partition`)
    partition_sentinel  Jepsen 2013's partition: a Sentinel-watched primary and one stockd
                  cut from the majority, with and without min-replicas (`make partition`)
    partition_galera  MySQL's half: a Galera node and its stockd cut from the other two
                  under load, in a namespace of their own (`make partition`)
    probe         hostile clients against two instances behind nginx (`make probe`)
    stream        lua-stream's order stream: reconcile, its fault rows, its costs
    readme        docs/strategies.md's strategy table, from GET /strategies
    audit         a foreign service through a target file: oversold, lost updates,
                  the history, against a baseline (`make audit TARGET=file`)
    selfaudit     stockd audited as a foreign service, strategy by strategy, each
                  verdict checked against its ledger (`make audit-stockd`)
    shards        one product sold on the Redis Cluster: each primary's sales, script
                  usec_per_call and CPU per sale, and stockd's CPU per sale
"""
