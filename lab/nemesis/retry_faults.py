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
    galera-kill   a Galera node frozen with the tries in its socket, then killed;
                  the stockd bound to it moves to the next node of its --mysql-nodes,
                  where the retries sell; the node restarted after the hold and
                  waited for until it is Synced again (IST)
    consumer-kill the order stream's consumer killed -9 with a batch in its open
                  transaction while every reply is held past the client's timeout
                  (the buyers retrying), a new consumer started; the ledger is
                  MySQL's, once the stream has drained

A fault knows which strategies it can reach (from their facts, never their names),
what serves the buyers (the run's own stockd, a proxy in front of it, or a stockd of
its own on the next port, a proxy in front of that on the port after), what it does
around the buyers, and where a row's ledger is read; it never judges. Faults are
used one at a time: `serve` brings up what the fault's rows are sent to and `close`
takes it down."""

import os
import subprocess
import time

from ..base.common import SetupError
from ..base.waiting import wait_until
from ..client.api import Api
from ..client.facts import CLUSTER_SAFE
from ..stack.consumer import Consumer
from ..stack.instances import Instance
from ..stack.service import CLUSTER_SERVICE, node_names, run_dir, stack_env
from .delay_proxy import DelayProxy
from .faults import run_stack
from .redis_group import Group, sentinel_env

STORE_PROCESS = {"mysql": "mysql", "redis": "redis"}  # store -> scripts/stack.sh NAME
FIRST_TRIES_S = 0.3  # how long the buyers get to send their first tries into a frozen store
PROMOTION_S = 20
FIRST_LINK_S = 60
# What every stockd of a run with the consumer-kill fault is started with: the order
# stream's consumers are that fault's processes alone.
NO_CONSUMERS = ["--stream-consumers", "0"]
LONG_ATTEMPTS = 16  # 8 tries with backoff last about 4 s; 16 about 10 s; 32 about 21 s
LEASE_ATTEMPTS = 32
SYNCED_S = 300  # a joiner's state transfer on a loaded machine
HELD_BATCH_S = 30  # a consumer's start, its first read and its batch's INSERTs
STREAM_BATCH = 256  # the consumers' --stream-batch: stockd's default, a hold's orders at once


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
    purchase at most; `before_row()`: what serves the buyers made ready for a row;
    `around(s, buyers, args)`: the buyers started and the fault applied and undone;
    `ledger_store(s)`: the store whose ledger a row is judged by, read once the
    order stream has drained when `drains`; `close()`: what serve started, stopped."""

    name = what = ""
    drains = False

    def picks(self, default):
        return [s for s in default if frozen_store(s)]

    def attempts(self, args):
        """Tries per purchase at most under this fault."""
        return args.attempts

    def serve(self, run_api, options, out_dir):
        return Served(run_api.host, run_api.port, run_api)

    def before_row(self):
        pass

    def around(self, s, buyers, args):
        raise NotImplementedError

    @staticmethod
    def ledger_store(s):
        return s.store

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


class HeldReplies:
    """A delay proxy on `port` in front of host:upstream that passes the requests at
    once and, during `hold`, holds every reply past the client's timeout: each try is
    committed before its buyer gives up on it."""

    def __init__(self, port, host, upstream):
        self.proxy = DelayProxy(("127.0.0.1", port), (host, upstream), source="127.0.0.1")
        self.proxy.start()

    def hold(self, buyers, args, during):
        """The buyers started and every reply held from their first connection (a
        JVM's buyers take seconds to send theirs) while `during()` runs."""
        self.proxy.delay_ms = args.timeout_ms * 2
        self.proxy.linked.clear()
        try:
            buyers.start()
            if not self.proxy.linked.wait(FIRST_LINK_S):
                raise SetupError(f"no buyer reached the delay proxy within {FIRST_LINK_S} s")
            during()
        finally:
            self.proxy.delay_ms = 0

    def stop(self):
        self.proxy.stop()


class Drop(RetryFault):
    """The replies held past the client's timeout by a proxy on the next port; the
    requests pass at once, so each try is committed before its buyer gives up."""

    name, what = "drop", "every reply held past the client's timeout for the hold"

    def __init__(self):
        self.held = None

    def picks(self, default):
        return list(default)

    def serve(self, run_api, options, out_dir):
        port = run_api.port + 1
        self.held = HeldReplies(port, run_api.host, run_api.port)
        return Served("127.0.0.1", port, run_api)

    def around(self, s, buyers, args):
        self.held.hold(buyers, args, lambda: time.sleep(args.hold))

    def close(self):
        if self.held:
            self.held.stop()
            self.held = None


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

    def attempts(self, args):
        """Enough tries to outlast what the dead stockd left in a lock's store: a lock
        it held, or a place it queued for one, lives out its lease before the new
        stockd's sales get it - a Redis lock's TTL (--lock-ttl-ms, 5 s), a ZooKeeper
        lock's session (--zk-session-ms, 10 s)."""
        return max(args.attempts, LEASE_ATTEMPTS)

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
        then elects and promotes)."""
        return max(args.attempts, LONG_ATTEMPTS)

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


def node_status(node, variable):
    """A Galera node's SHOW STATUS value of `variable`, asked as root on its socket (the
    stack's nodes live under the run directory's cluster/); None when it does not
    answer."""
    socket = os.path.join(run_dir(), CLUSTER_SERVICE, node, "node.sock")
    try:
        out = subprocess.run(["mariadb", "--no-defaults", f"--socket={socket}", "-uroot", "-N",
                              "-e", f"SHOW STATUS LIKE '{variable}'"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, timeout=5)
    except subprocess.TimeoutExpired:
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and len(words) == 2 else None


class GaleraKill(OwnStockd):
    """A node of the stack's Galera cluster killed under the buyers. The fault's stockd
    lists every node in --mysql-nodes, the victim first, as a cluster's instance lists
    its own node: its workers move to the next node when theirs dies, as a balancer in
    front of the cluster sends a lost answer's retry to another one. The victim is
    frozen first, for the buyers' first tries to reach it (a sale on the cluster takes
    milliseconds: a kill alone would find none in flight), then killed; the tries
    stockd had queued behind them and the retries sell on a survivor once the
    others have evicted the dead node. After the hold the node is started again and
    rejoins (IST: only what it missed); the row waits until every node says Synced,
    and reads its ledger through the stockd, from the survivor it moved to."""

    name, what = ("galera-kill", "a Galera node frozen with the tries in its socket, killed "
                  "-9, restarted after the hold; the retries sell on a survivor")

    def __init__(self):
        super().__init__()
        self.nodes, self.moved = [], False

    def picks(self, default):
        return [s for s in default if s.store == "mysql" and s.cluster in CLUSTER_SAFE]

    def attempts(self, args):
        """Enough tries to outlast the eviction (the survivors wait out their suspect
        timeout before they commit without the dead node) and the sales queued behind
        it in a lock's fair queue, each a key's first try answered `in_progress` until
        it is through (a lock row's wait, --lock-wait-ms, 5 s)."""
        return max(args.attempts, LEASE_ATTEMPTS)

    def env(self):
        listed = ",".join(f"127.0.0.1:{node.split('-', 1)[1]}" for node in self.nodes)
        return {**stack_env(), "STOCKD_MYSQL_NODES": listed}

    def serve(self, run_api, options, out_dir):
        run_stack("start-one", CLUSTER_SERVICE)  # opt-in in the stack: started when down
        self.nodes = node_names()
        return super().serve(run_api, options, out_dir)

    def before_row(self):
        """The stockd started again when the last row moved it off the victim, so that
        this row's tries go to the victim once more."""
        if self.moved:
            port = self.instance.api.port
            self.instance.stop()
            self.instance = self.started(port)
            self.moved = False

    def around(self, s, buyers, args):
        victim = self.nodes[0]
        run_stack("freeze-one", victim)
        try:
            buyers.start()
            time.sleep(FIRST_TRIES_S)
        finally:
            run_stack("kill-one", victim)
        self.moved = True
        time.sleep(args.hold)
        run_stack("start-one", victim)
        self.wait_whole()

    def wait_whole(self):
        """Until every node says Synced and counts them all: the cluster whole again."""
        size = str(len(self.nodes))

        def whole():
            return all(node_status(n, "wsrep_local_state_comment") == "Synced"
                       and node_status(n, "wsrep_cluster_size") == size for n in self.nodes)

        if not wait_until(SYNCED_S, whole, 0.5):
            raise SetupError(f"the Galera cluster not whole and Synced {SYNCED_S} s after "
                             f"{self.nodes[0]} was started again")


class ConsumerKill(OwnStockd):
    """The consumer of the row that settles later killed -9 with a batch in its open
    transaction (--stream-hold commit) while the buyers retry, and a new consumer
    started. No stockd of the run consumes anything itself (its options given
    NO_CONSUMERS): a consumer process of the fault's own settles between rows, and a
    proxy in front of the stockd holds every reply past the client's timeout, so that
    the buyers retry through the kill. A keyed order carries its key into MySQL, kept
    with the settled order: the batch the new consumer settles again keeps one order
    per key. The ledger is MySQL's, read once the stream has drained."""

    name, what = ("consumer-kill", "the stream's consumer killed -9 with a batch in its open "
                  "transaction while every reply is held, a new one started")
    HOLD_LINE = "before commit"  # what the consumer logs at --stream-hold commit
    drains = True

    def __init__(self):
        super().__init__()
        self.held = self.consumer = None

    def picks(self, default):
        return [s for s in default if s.settles]

    def serve(self, run_api, options, out_dir):
        served = super().serve(run_api, options, out_dir)
        self.consumer = Consumer(None, STREAM_BATCH)
        self.held = HeldReplies(served.port + 1, served.host, served.port)
        return Served("127.0.0.1", served.port + 1, served.api)

    def around(self, s, buyers, args):
        self.consumer.stop()
        self.held.hold(buyers, args, lambda: self.kill_held(args))

    def kill_held(self, args):
        """A consumer started once the first tries are in the stream, killed once it
        holds its batch, a new one started; the rest of the hold."""
        start = time.monotonic()
        time.sleep(FIRST_TRIES_S)
        held = Consumer(None, STREAM_BATCH, "commit")
        try:
            held.wait_line(self.HOLD_LINE, HELD_BATCH_S)
        finally:
            held.kill()
        self.consumer = Consumer(None, STREAM_BATCH)
        time.sleep(max(0.0, args.hold - (time.monotonic() - start)))

    @staticmethod
    def ledger_store(s):
        return "mysql"  # where the stream settles

    def close(self):
        if self.held:
            self.held.stop()
            self.held = None
        if self.consumer:
            self.consumer.stop()
            self.consumer = None
        super().close()


FAULTS = [Freeze, Drop, StockdKill, Failover, GaleraKill, ConsumerKill]
NAMES = [f.name for f in FAULTS]


def named(names):
    """New faults of those names, in the table's order."""
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise SetupError(f"unknown faults: {', '.join(unknown)} (there are: {', '.join(NAMES)})")
    return [f() for f in FAULTS if f.name in names]
