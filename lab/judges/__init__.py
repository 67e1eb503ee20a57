"""The judges: which rows to run, and what a row's figures, ledger and clients' history
say about its strategy's claim. A judge reads what the drivers kept and what the
faults did; it sends nothing.

    plan          which comparison rows to run, from the facts
    gate          verdicts: safe rows, exposed races, leases, the ledger, contention;
                  driver-bound marking; the second witness (the history) beside the
                  ledger; a race's check
    chaos_gate    a chaos row's figures and verdict from its timeline
    failover_gate  a failover row's sequence, figures and verdict against its fact
    audit_gate    an audit run's row and verdict from what its clients saw
    retries       what retries cost: double buys, from the ledger; a keyed row's
                  verdict (every key's answers alike, its history linearizable)
    settlement    a row that settles later, judged once its order stream has drained
    history       the clients' history of a row, the second witness beside the ledger
    orders        an orders row: every order's life from the clients' history, the
                  orders' records and the accounting, against its expiry mechanism
    linearize     is a history linearizable for a stock counter (or its first violation)
"""
