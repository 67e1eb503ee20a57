"""The stack and the services a run starts on it: the private stack (scripts/stack.sh),
the stockd instances a run starts itself, the namespace lab's nodes, and what the host
and the stack's Prometheus say about them.

    service       the private stack (scripts/stack.sh), one stockd or N behind nginx,
                  a private nginx serving a static file, the one wait for a healthy
                  stockd, the Galera nodes' names
    instances     a stockd a run starts itself: started, looked into, frozen, stopped
    nodes         the namespace lab's nodes, each on its own 127.0.0.N: stockd, Redis with
                  its own clock, MariaDB open to them
    prometheus    the stack's Prometheus: in-flight peaks and lock wait p99 per row
    host          CPU steal from /proc/stat, a process's CPU time from /proc/PID/stat
    durability    the stores' flushes: switched while they run (fast, everysec,
                  durable), counted per row, and the disk's own fdatasync rate
    consumer      the order stream's consumer as a process of its own (stockd --consume
                  1), held with its batch at a point to be killed there
"""
