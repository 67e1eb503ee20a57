"""The runs, each `python3 -m lab NAME` (a RUNNER of lab.scaffold.runner, named in
lab/__main__.py's RUNS). A run imports from the floors below, never another run.

    compare, bench  the comparison (`make compare`) and the bench (`make bench`)
    chaos, soak   faults under load (`make chaos`), a long steady load (`make soak`)
    admission     the token bucket and the sold-out flag, each mode its own rows: backend
                  calls per request, 429s, sold_outs from memory, undersell, a restock
                  through another instance (`make admission`)
    retry         buyers who retry every lost answer under each fault that loses one:
                  units bought twice, without and with Idempotency-Key (`make retry`)
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
    orders        holds that expire, payments late or twice, stock returned once: each
                  expiry mechanism under its faults, every order's life judged
                  (`make orders`)
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
