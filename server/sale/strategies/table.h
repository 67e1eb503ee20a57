/*
 * table.h - every strategy, one row each, in presentation order: from the
 * race itself to the safest fix. /strategies, the comparison run and
 * docs/strategies.md list them in this order.
 *
 * Adding a strategy is its file in this folder, which defines
 * `const struct strategy strategy_<id>` (sale/strategy.h says what a row
 * states), and one line here (docs/adding-a-strategy.md). strategy.c
 * includes this table twice, to declare the rows and to list them: there
 * is no other list to keep in step. No include guard, on purpose.
 */
STRATEGY(nolock)           /* SELECT then UPDATE: the race itself */
STRATEGY(mutex)            /* a process mutex: one instance only */
STRATEGY(sql)              /* one conditional UPDATE */
STRATEGY(for_update)       /* SELECT ... FOR UPDATE: pessimistic */
STRATEGY(cas)              /* version compare-and-set: optimistic */
STRATEGY(watch)            /* Redis WATCH/MULTI/EXEC */
STRATEGY(redis_lock)       /* SET NX PX lease, compare-and-delete release */
STRATEGY(redis_lock_wait)  /* redis-lock, its acquisition WAITed for */
STRATEGY(redis_nolock)     /* GET then SET: the race on Redis */
STRATEGY(lua)              /* the whole sale in one Lua script */
STRATEGY(lua_wait)         /* lua, then WAIT for a replica */
STRATEGY(lua_stream)       /* lua, the order streamed to MySQL */
STRATEGY(segmented)        /* lua over segments on several shards */
STRATEGY(segmented_strict) /* segmented, a segment's refusal final */
STRATEGY(setnx_expire)     /* SETNX then EXPIRE, DEL without owner check */
STRATEGY(getset)           /* the SETNX/GETSET timestamp lock */
STRATEGY(reentrant_lock)   /* Redisson-style: re-entrant, watchdog */
STRATEGY(redlock)          /* a majority of independent Redis servers */
STRATEGY(fenced)           /* a lease plus a fencing token checked by SQL */
STRATEGY(mutex_tx)         /* a mutex released before COMMIT */
STRATEGY(zk_lock)          /* ZooKeeper sequential node, Curator recipe */
STRATEGY(mysql_lock)       /* a unique-key row in a lock table */
STRATEGY(get_lock)         /* MySQL GET_LOCK / RELEASE_LOCK */
STRATEGY(sql_batch)        /* many sales in one transaction: group commit */
