"""The faults: the nemeses a run turns on the stack under load (Jepsen's word). A fault
knows what it breaks and how it is undone, never how a row is judged.

    faults        the faults chaos injects (scripts/stack.sh), the strategies each
                  one drives, the backends' probes
    redis_group   the stack's replicated Redis group: its Sentinels' view, the replica
                  held back (CLIENT PAUSE WRITE), a primary killed and its promotion
    netns         the partition lab's network namespace: only loopback, no route out
                  (checked before anything starts), links cut and healed by nftables
    delay_proxy   a link whose replies are held for a delay that can change at run time
    retry_faults  the faults under which a client retries (store frozen, replies held
                  past its timeout, stockd killed, a Sentinel failover, a Galera node
                  killed, the order stream's consumer killed), for make retry

(clockshim.c beside them is the clock shim, build/clockshim.so: a wall clock a fault
moves, per process, at run time.)
"""
