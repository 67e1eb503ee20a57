"""stockd's lab: the runs behind `make compare`, `make demo`, `make bench`, `make chaos`,
`make failover`, `make cluster`, `make redis-cluster`, `make probe`, `make soak`,
`make admission`, the `make stream-*` targets, `make reconcile` and `make audit`, each
`python3 -m lab NAME` (lab/__main__.py lists them; `jmeter/compare` is the comparison's
entry point in the JMeter image). Python standard library only.

The lab is in floors, one folder each, listed here bottom to top. A module imports
only from its own floor and the floors below it; a run imports no other run (what
several runs share moves down to where it belongs); and there is no circle.
tests/lab/test_lab_layers.py keeps that rule, and tests/lab/test_lab_map.py keeps
this map and each folder's own (its __init__.py's docstring names its modules) in step
with the files.

    base          what every floor stands on: errors, progress, options, results
                  directories, the one wait with a deadline
    client        the client side of the contract: the HTTP client, the facts, sales
                  and answers, a foreign service's target file
    stack         the stack and the services it starts: the private stack, a run's own
                  stockd instances, the namespace lab's nodes, Prometheus, the host
    drivers       the load drivers: JMeter, wrk, the Python drivers, the raw limits,
                  the Node.js peer, the audit's plan, the races stockd runs itself
    nemesis       the faults: kills, freezes, the Redis group's held-back replica, the
                  network namespace and its nftables cuts, the delay proxy, the clock
                  shim
    judges        the judges: plans, verdicts, chaos, failover and audit rows, the
                  settlement, the clients' history and the linearizability checker
    reports       the reports: tables, HTML, pictures, junit.xml, the headless browser
    scaffold      what a run is built from: the runner, and the sequences several runs
                  drive (the failover window, the audit of a target)
    runs          the runs, each python3 -m lab NAME

    __main__      python3 -m lab COMMAND: the runs by name, check-report, render
"""
