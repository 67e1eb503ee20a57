"""The load drivers: what sends the sales and keeps the answers, never a verdict.

    jmeter        the JMeter driver (jmeter/deduct.jmx, or a plan of many rows made from it)
                  and its JTL results, split by row
    wrk           the wrk driver (bench/count.lua, bench/history.lua) and its results
    load          a driver that keeps every answer's timing (closed loop or paced)
    buyers        keep-alive buyers bound to instances, every answer kept with its instance
    retrying      buyers who retry a lost answer, with or without an Idempotency-Key
    order_buyers  buyers of orders: hold, pay around the deadline (callbacks repeated,
                  some at once, some late), cancel or abandon; every request kept
    raw           the raw limits: Redis running the sale script by EVALSHA
                  (redis-benchmark), MariaDB running the sale transaction (sysbench)
    peer          the bench's Node.js peer (bench/peer/): installed, started, stopped
    openresty     the bench's OpenResty-style peer (bench/openresty/): nginx with its
                  Lua module, checked for, started, stopped
    audit_plan    the audit's plan (jmeter/audit.jmx filled in from a target) and its
                  JTL's answers mapped by the target's rules
    race_runs     the comparison's races, run by stockd itself (POST /lab/race), each
                  checked by the judge its run hands in
"""
