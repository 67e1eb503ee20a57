"""stockd's lab: the one orchestrator behind `make compare` (jmeter/compare),
`make bench` (bench/bench), `make chaos` (bench/chaos), `make failover` (bench/failover)
and `make soak` (bench/soak).
Python standard library only.

    common        errors that stop a run (exit 2), progress lines, options read from
                  flags or the environment, the results directory
    api           HTTP client for stockd: /strategies, /stock/{p}, reset, /metrics,
                  the X-Stockd-Instance header
    facts         the strategies' facts from GET /strategies (store, claims,
                  contention, lease, exposed_by, needs, failover): nothing is known by name
    outcomes      answers counted by outcome: sold, sold_out, busy, outcome_unknown,
                  errors by word
    service       the private stack (scripts/stack.sh), one stockd or N behind nginx,
                  a private nginx serving a static file
    jmeter        the JMeter driver (jmeter/deduct.jmx) and its JTL results
    wrk           the wrk driver (bench/count.lua) and its results
    raw           the raw limits: Redis running the sale script by EVALSHA
                  (redis-benchmark), MariaDB running the sale transaction (sysbench)
    sources       the sale script and SQL texts read from server/*.c
    plan          which comparison rows to run, from the facts
    gate          verdicts: safe rows, exposed races, leases, the ledger, contention;
                  driver-bound marking
    tables        rows as text tables, JSON and CSV
    html          the self-contained HTML pieces: page, table, inline SVG charts
    compare_report, bench_report   the two reports
    browser       a report checked in headless Chromium
    compare, bench                 the two runs
    load          a driver that keeps every answer's timing (closed loop or paced)
    faults        the faults chaos injects (scripts/stack.sh), the strategies each
                  one drives, the backends' probes
    chaos_gate    a chaos row's figures and verdict from its timeline
    chaos, soak   faults under load (`make chaos`), a long steady load (`make soak`)
    redis_group   the stack's replicated Redis group: its Sentinels' view, the replica
                  held back (CLIENT PAUSE WRITE), a primary killed and its promotion
    failover, failover_report   a Redis primary failover under every strategy that
                  touches Redis (`make failover`), and its table and timeline picture
"""
