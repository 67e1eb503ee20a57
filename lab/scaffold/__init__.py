"""The scaffold: what a run is built from, just below the runs. The runner every run
declares, and the sequences more than one run drives, written once so that no run
borrows another's insides.

    runner        a run's scaffold, written once: --host, --port, --results-dir, the admin
                  client, progress, the service, the guarded run (exit 2, 130), the report
    failover_window  the failover window made to happen on demand, for make failover and
                  make redis-cluster's kill rows
    setup_retry   a fault run's row whose setup failed, run once more, then reported as
                  setup apart from the verdicts: for the failover window and the Sentinel
                  and Galera partitions
    auditing      the audit of one target, for make audit and make audit-stockd
    retrying_mode  the retrying client mode of a fault run: buyers with and without
                  Idempotency-Keys beside each row's clients, their double buys and verdict
"""
