"""The strategies' facts, as GET /strategies publishes them. The lab learns everything
it plans and expects from these fields, never from a strategy's name:

    store         where the stock and the ledger live ("mysql", "redis", "segments")
    safe_single   claims oversold = lost = 0 with one instance
    safe_multi    ... with several instances
    contention    "waits" (a contended request waits its turn: busy only past
                  lock_wait_ms), "retries" (optimistic: may answer busy), "none"
    lease         null, or {"busy_holder", "paused_holder"}: "safe" | "oversells",
                  and, when the row states them (make partition), what its own
                  servers do to it while it is held: "clock_jump" (a server's wall
                  clock jumps past the TTL), "empty_restart" (a server restarts
                  without its data), "late_grant" (the grant is answered after the
                  TTL); a case it does not state has no row
    exposed_by    request parameters that make an unsafe strategy's race show
    needs         the backends it needs to answer
    failover      what a failover of the Redis primary does to it: "safe",
                  "loses_sales" (acknowledged sales vanish with the primary) or
                  "two_holders" (its lock vanishes: a second holder oversells);
                  published by every row that keeps anything in Redis (stockd
                  refuses to start with a row that does not), absent from the others
    partition     what a partition of the Redis group does to it (the primary and one
                  stockd cut from the rest, the replica promoted, healed) where that
                  is not its failover fact: "oversells" (a row that settles later:
                  each side's consumer settles its side's orders into MySQL, more
                  than the stock counted); absent elsewhere, where .partition is
                  the failover fact
    settles       "async": a 200 is accepted in Redis and reaches MySQL later, once
                  (lua-stream); absent from the rows whose 200 is settled at once.
                  Such a row is judged by its MySQL ledger after the stream drains
    cluster       what a multi-primary MySQL (Galera) cluster does to it, one stockd
                  per node: "safe", "conflicts_at_commit" (safe, but a conflict with
                  another node fails the commit: busy while stock remains),
                  "two_holders" (its lock is one node's: oversells) or "loses_updates";
                  published by every row whose stock is in MySQL, absent from the others
    undersells    "split_qty" (a qty no one segment of its stock holds is refused,
                  though together they hold it) or "any_qty" (even qty 1: the one
                  segment it asks is empty); absent: refused only when the product
                  lacks the units. A "waits" row with split_qty is not held to sell
                  every unit when qty > 1
    orders        true when it holds orders (POST /orders/{strategy}); false, with
                  `orders_why`, when its write cannot hold one yet; absent: false
    idempotent    true when it keeps an Idempotency-Key in its sale's atomic step;
                  false, with `idempotent_why`, the reason it cannot; absent: false

A field that is missing is an error that says so (the run cannot be made): the lab
never falls back to a guess."""

from ..base.common import SetupError

REQUIRED = ("store", "safe_single", "safe_multi", "contention", "lease", "exposed_by", "needs")
CONTENTION = ("waits", "retries", "none")
LEASE_CASES = ("busy_holder", "paused_holder")
PARTITION_CASES = ("clock_jump", "empty_restart", "late_grant")
LEASE_VALUES = ("safe", "oversells")
FAILOVER_VALUES = ("safe", "loses_sales", "two_holders")
CLUSTER_VALUES = ("safe", "conflicts_at_commit", "two_holders", "loses_updates")
# The cluster facts that claim nothing is oversold or lost, and those that announce it.
CLUSTER_SAFE = ("safe", "conflicts_at_commit")
CLUSTER_UNSAFE = ("two_holders", "loses_updates")
UNDERSELLS_VALUES = ("split_qty", "any_qty")
REQUEST_PARAMS = ("hold_ms", "ttl_ms", "pause_ms")
SETTINGS = ("lock_wait_ms",)


class Strategy:
    def __init__(self, doc):
        self.name = doc["name"]
        self.store = doc["store"]
        self.safe_single = doc["safe_single"]
        self.safe_multi = doc["safe_multi"]
        self.contention = doc["contention"]
        self.lease = doc["lease"]
        self.exposed_by = list(doc["exposed_by"])
        self.needs = list(doc["needs"])
        self.caveat = doc.get("caveat")
        self.summary = doc.get("summary")
        self.lock = doc.get("lock")  # the lock it takes, or None
        self.failover = doc.get("failover")  # None: it keeps nothing in Redis
        self.settles = doc.get("settles")  # "async", or None: settled at once
        self.partition = doc.get("partition", self.failover)  # a partition of the group
        self.cluster = doc.get("cluster")  # None: its stock is not in MySQL
        # None: refused only when the product lacks qty; "split_qty": a qty no
        # one segment holds; "any_qty": even qty 1 (its one segment is empty)
        self.undersells = doc.get("undersells")
        self.orders = doc.get("orders") is True  # it holds orders (POST /orders/{name})
        self.orders_why = doc.get("orders_why")  # why not, when it does not
        # it keeps an Idempotency-Key with its sale; else why it cannot
        self.idempotent = doc.get("idempotent") is True
        self.idempotent_why = doc.get("idempotent_why")

    def safe_for(self, instances):
        """The claim judged for this number of instances."""
        return self.safe_single if instances <= 1 else self.safe_multi


def claim_name(instances):
    return "safe_single" if instances <= 1 else "safe_multi"


class Facts:
    """The parsed /strategies document."""

    def __init__(self, strategies, settings):
        self.strategies = strategies        # in the server's order
        self.settings = settings
        self.by_name = {s.name: s for s in strategies}

    def select(self, names):
        """The named strategies (all of them when `names` is empty), in that order."""
        if not names:
            return list(self.strategies)
        unknown = [n for n in names if n not in self.by_name]
        if unknown:
            raise SetupError(f"unknown strategies: {', '.join(unknown)} "
                             f"(the server has: {', '.join(self.by_name)})")
        return [self.by_name[n] for n in names]

    def first_safe_per_store(self, instances):
        """For each store, in order of first appearance, the first strategy that
        claims safety for this number of instances."""
        picked = {}
        for s in self.strategies:
            if s.safe_for(instances) and s.store not in picked:
                picked[s.store] = s
        return list(picked.values())

    def needs(self, strategies):
        return sorted({b for s in strategies for b in s.needs})


def _problem(doc, i):
    """Why the i-th strategy entry cannot be used, or None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        return f"strategy #{i + 1} has no name"
    name = doc["name"]
    checks = [
        ("store", lambda v: isinstance(v, str) and v),
        ("safe_single", lambda v: isinstance(v, bool)),
        ("safe_multi", lambda v: isinstance(v, bool)),
        ("contention", lambda v: v in CONTENTION),
        ("lease", lambda v: v is None or (isinstance(v, dict) and all(
            v.get(k) in LEASE_VALUES for k in LEASE_CASES) and all(
            v[k] in LEASE_VALUES for k in PARTITION_CASES if k in v))),
        ("exposed_by", lambda v: isinstance(v, list) and all(p in REQUEST_PARAMS for p in v)),
        ("needs", lambda v: isinstance(v, list) and all(isinstance(b, str) for b in v)),
    ]
    for field, ok in checks:
        if not ok(doc[field]):
            return f"strategy '{name}' has an unusable {field}: {doc[field]!r}"
    if "failover" in doc and doc["failover"] not in FAILOVER_VALUES:
        return f"strategy '{name}' has an unusable failover: {doc['failover']!r}"
    if "partition" in doc and doc["partition"] != "oversells":
        return f"strategy '{name}' has an unusable partition: {doc['partition']!r}"
    if "settles" in doc and doc["settles"] != "async":
        return f"strategy '{name}' has an unusable settles: {doc['settles']!r}"
    if "cluster" in doc and doc["cluster"] not in CLUSTER_VALUES:
        return f"strategy '{name}' has an unusable cluster: {doc['cluster']!r}"
    if "undersells" in doc and doc["undersells"] not in UNDERSELLS_VALUES:
        return f"strategy '{name}' has an unusable undersells: {doc['undersells']!r}"
    if not (doc["safe_single"] and doc["safe_multi"]) and not doc["exposed_by"]:
        return (f"strategy '{name}' is not safe everywhere but lists no exposed_by "
                "parameters to show its race with")
    return None


def parse(doc):
    """Facts from a GET /strategies document; SetupError (one line) when a field
    the lab reads is missing or unusable."""
    entries = doc.get("strategies") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise SetupError("GET /strategies lists no strategies")
    missing = []
    for e in entries:
        for field in REQUIRED:
            if isinstance(e, dict) and field not in e and field not in missing:
                missing.append(field)
    if missing:
        raise SetupError(f"GET /strategies has no {', '.join(missing)} for some strategies: "
                         "this stockd does not publish the facts the lab plans and judges "
                         "from (build stockd from a main that has them)")
    settings = doc.get("settings")
    absent = [k for k in SETTINGS if not isinstance((settings or {}).get(k), int)]
    if absent:
        raise SetupError(f"GET /strategies has no settings.{', settings.'.join(absent)}")
    for i, e in enumerate(entries):
        why = _problem(e, i)
        if why:
            raise SetupError(f"GET /strategies: {why}")
    return Facts([Strategy(e) for e in entries], settings)


def check_needs(api, facts, strategies):
    """SetupError when a backend the selected strategies need is not up (GET /health)."""
    backends = (api.health() or {}).get("backends") or {}
    down = [b for b in facts.needs(strategies)
            if not isinstance(backends.get(b), dict) or backends[b].get("state") != "up"]
    if down:
        raise SetupError(f"the selected strategies need {', '.join(down)}, which GET /health at "
                         f"{api.where()} does not report up")
