"""The faults under which a client retries, one per way its answer gets lost, for the
retry run (`make retry`). Each one takes a purchase's answer away while the purchase
may still happen, so that the buyer cannot tell a sale from none and tries again:

    freeze        the strategy's store frozen (SIGSTOP) for the hold, then thawed: the
                  tries wait in its socket past the client's timeout, and the thaw
                  runs them all
    drop          every reply held past the client's timeout for the hold, by a delay
                  proxy in front of stockd: each try is committed at once and its
                  answer never reaches its buyer
    stockd-kill   the store frozen, stockd killed -9 with the tries in the store's
                  socket, the store thawed (it runs what the dead stockd sent), a new
                  stockd started on the same port: the retries reach it
    failover      the Redis group's primary frozen with the tries in its socket, then
                  killed; Sentinel promotes the replica, the old primary comes back
                  as its replica, and the retries reach the new primary through the
                  stockd that follows the group (--redis-sentinel)

A fault knows which strategies it can reach (from their facts, never their names),
what serves the buyers (the run's own stockd, a proxy in front of it, or a stockd of
its own on the next port), and what it does around the buyers; it never judges.
Faults are used one at a time: `serve` brings up what the fault's rows are sent to
and `close` takes it down."""

import time

from ..base.common import SetupError
from ..client.api import Api
from ..stack.instances import Instance
from ..stack.service import stack_env
from .delay_proxy import DelayProxy
from .faults import run_stack
from .redis_group import Group, sentinel_env

STORE_PROCESS = {"mysql": "mysql", "redis": "redis"}  # store -> scripts/stack.sh NAME
FIRST_TRIES_S = 0.3  # how long the buyers get to send their first tries into a frozen store
PROMOTION_S = 20
FIRST_LINK_S = 60
FAILOVER_ATTEMPTS = 16


def frozen_store(s):
    """Whether a freeze of the stack can reach `s`'s store."""
    return s.store in STORE_PROCESS


class Served:
    """Where a fault's buyers send (host, port) and the admin client that resets and
    accounts its products there."""

    def __init__(self, host, port, api):
        self.host, self.port, self.api = host, port, api


class RetryFault:
    """A fault of the retry run. `picks(default)`: its strategies among the run's, by
    their facts; `serve(run_api, options, out_dir)`: a Served (options: the run's
    stockd options, for a stockd of the fault's own); `attempts(args)`: tries per
    purchase at most; `around(s, buyers, args)`: the buyers started and the fault
    applied and undone; `close()`: what serve started, stopped."""

    name = what = ""

    def picks(self, default):
        return [s for s in default if frozen_store(s)]

    def attempts(self, args):
        """Tries per purchase at most under this fault."""
        return args.attempts

    def serve(self, run_api, options, out_dir):
        return Served(run_api.host, run_api.port, run_api)

    def around(self, s, buyers, args):
        raise NotImplementedError

    def close(self):
        pass


class Freeze(RetryFault):
    name, what = "freeze", "the store frozen (SIGSTOP) for the hold, then thawed"

    def around(self, s, buyers, args):
        target = STORE_PROCESS[s.store]
        run_stack("freeze-one", target)
        try:
            buyers.start()
            time.sleep(args.hold)
        finally:
            run_stack("thaw-one", target)


class Drop(RetryFault):
    """The replies held past the client's timeout by a proxy on the next port; the
    requests pass at once, so each try is committed before its buyer gives up."""

    name, what = "drop", "every reply held past the client's timeout for the hold"

    def __init__(self):
        self.proxy = None

    def picks(self, default):
        return list(default)

    def serve(self, run_api, options, out_dir):
        port = run_api.port + 1
        self.proxy = DelayProxy(("127.0.0.1", port), (run_api.host, run_api.port),
                                source="127.0.0.1")
        self.proxy.start()
        return Served("127.0.0.1", port, run_api)

    def around(self, s, buyers, args):
        """The hold starts with the buyers' first connection (a JVM's buyers take
        seconds to send theirs)."""
        self.proxy.delay_ms = args.timeout_ms * 2
        self.proxy.linked.clear()
        try:
            buyers.start()
            if not self.proxy.linked.wait(FIRST_LINK_S):
                raise SetupError(f"no buyer reached the delay proxy within {FIRST_LINK_S} s")
            time.sleep(args.hold)
        finally:
            self.proxy.delay_ms = 0

    def close(self):
        if self.proxy:
            self.proxy.stop()
            self.proxy = None


class OwnStockd(RetryFault):
    """A fault whose rows are sent to a stockd of its own on the next port, started
    with the run's stockd options and the environment `env()` gives."""

    def __init__(self):
        self.instance = None
        self.options = self.out_dir = None

    def env(self):
        return stack_env()

    def serve(self, run_api, options, out_dir):
        self.options, self.out_dir = list(options), out_dir
        self.instance = self.started(run_api.port + 1)
        api = Api("127.0.0.1", run_api.port + 1, run_api.token)
        return Served("127.0.0.1", run_api.port + 1, api)

    def started(self, port):
        inst = Instance(f"retry-{self.name}", port, self.env(), self.options, self.out_dir)
        inst.start()
        return inst

    def close(self):
        if self.instance:
            inst, self.instance = self.instance, None
            inst.stop()


class StockdKill(OwnStockd):
    name, what = ("stockd-kill", "the store frozen, stockd killed -9 with the tries in its "
                  "socket, the store thawed, stockd started again")

    def around(self, s, buyers, args):
        target = STORE_PROCESS[s.store]
        run_stack("freeze-one", target)
        try:
            buyers.start()
            time.sleep(min(args.hold, FIRST_TRIES_S))
            self.instance.kill()
        finally:
            run_stack("thaw-one", target)
        port = self.instance.api.port
        self.instance = None
        self.instance = self.started(port)


class Failover(OwnStockd):
    name, what = ("failover", "the Redis group's primary frozen with the tries in its "
                  "socket, killed -9, its replica promoted by Sentinel")

    def __init__(self):
        super().__init__()
        self.group = None

    def picks(self, default):
        return [s for s in default if s.store == "redis" and s.failover]

    def attempts(self, args):
        """Enough tries to outlast the promotion (Sentinel waits a second of silence,
        then elects and promotes): 8 tries with backoff last about 2.5 s."""
        return max(args.attempts, FAILOVER_ATTEMPTS)

    def env(self):
        return {**stack_env(), **sentinel_env()}

    def serve(self, run_api, options, out_dir):
        served = super().serve(run_api, options, out_dir)
        self.group = Group(self.instance.env)
        self.group.watch()
        return served

    def around(self, s, buyers, args):
        primary, replica = self.group.settled()
        run_stack("freeze-one", f"ha-{primary}")
        buyers.start()
        time.sleep(FIRST_TRIES_S)
        self.group.kill(primary)
        if self.group.wait_promoted(replica, PROMOTION_S) is None:
            raise SetupError(f"Sentinel did not promote {replica} within {PROMOTION_S} s")
        self.group.restart(primary)

    def close(self):
        if self.group:
            self.group.unwatch()
            self.group = None
        super().close()


FAULTS = [Freeze, Drop, StockdKill, Failover]
NAMES = [f.name for f in FAULTS]


def named(names):
    """New faults of those names, in the table's order."""
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise SetupError(f"unknown faults: {', '.join(unknown)} (there are: {', '.join(NAMES)})")
    return [f() for f in FAULTS if f.name in names]
