"""The stack's replicated Redis group (scripts/stack.sh service `ha`): two Redis servers,
one primary and its replica, watched by three Sentinels under the master name the
stack gives them. The failover run reads the group through redis-cli and changes it
only through scripts/stack.sh (kill-one, start-one) and through the one command that
makes the dangerous window happen on demand:

    CLIENT PAUSE <ms> WRITE on the replica. A paused replica goes on reading the
    primary's replication stream but applies none of it, and so acknowledges none
    of it (WAIT counts it out). When the primary dies meanwhile, the replica drops
    the link, and with it the writes it had read but not applied; released then, it
    is promoted by Sentinel without them. (SIGSTOP or DEBUG SLEEP would not do: the
    stream would wait in the socket and be applied on waking.)

The pause also holds back Sentinel's own promotion commands, so the run releases the
replica as soon as its link is down, not before."""

import os
import select
import socket
import subprocess
import threading
import time

from ..base.common import SetupError
from ..stack.service import stack_env
from .faults import run_stack

PAUSE_MS = 60000           # longer than any window the run needs; released explicitly
SETTLE_TIMEOUT_S = 60
POLL_S = 0.01
# A Sentinel that has taken part in a failover starts no new one of that master until
# it has the new configuration: a row waits SENTINEL_QUIET_S after a promotion. After an
# attempt that did not complete (no majority, no good replica, a promotion that timed
# out), none starts within 2 x failover-timeout (3 s in the stack): ABORT_QUIET_S.
SENTINEL_QUIET_S = 2.5
ABORT_QUIET_S = 6.5
# What a Sentinel publishes when a failover attempt ends without a new primary.
UNFINISHED = ("-failover-abort", "-failover-end-for-timeout")


def redis_cli(port, *args, timeout=3):
    """One redis-cli command on 127.0.0.1:port; its reply's lines, or None when
    nothing answered."""
    try:
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *map(str, args)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        return None
    return r.stdout.splitlines()


def info(port, section="replication"):
    """INFO section as a dict, or {} when nothing answered."""
    lines = redis_cli(port, "info", section) or []
    return dict(line.split(":", 1) for line in lines if ":" in line)


def sentinel_env():
    """The STOCKD_* settings that point a stockd at the group (scripts/stack.sh ha-env)."""
    env = stack_env("ha-env")
    if not env.get("STOCKD_REDIS_SENTINEL"):
        raise SetupError("scripts/stack.sh ha-env names no Sentinel")
    return env


class Group:
    """The group as its Sentinels see it."""

    def __init__(self, env):
        self.master_name = env["STOCKD_REDIS_MASTER_NAME"]
        self.sentinels = [int(a.rsplit(":", 1)[1])
                          for a in env["STOCKD_REDIS_SENTINEL"].split(",")]
        self.promoted_at = 0.0
        self.events = SentinelEvents([("127.0.0.1", p) for p in self.sentinels],
                                     os.environ.get("REDISCLI_AUTH"))

    def watch(self):
        """Starts recording what the Sentinels publish (stop with unwatch)."""
        self.events.start()

    def unwatch(self):
        self.events.stop()

    def primary_by(self, sentinel):
        reply = redis_cli(sentinel, "sentinel", "get-master-addr-by-name", self.master_name,
                          timeout=1)
        return int(reply[1]) if reply and len(reply) == 2 and reply[1].isdigit() else None

    def primary(self):
        """The primary's port as the first Sentinel that answers names it, or None."""
        for s in self.sentinels:
            p = self.primary_by(s)
            if p:
                return p
        return None

    @staticmethod
    def replica_of(primary):
        """The port of the primary's one online replica, or None."""
        doc = info(primary)
        if doc.get("role") != "master":
            return None
        for k, v in doc.items():
            if k.startswith("slave") and "state=online" in v:
                fields = dict(f.split("=", 1) for f in v.split(",") if "=" in f)
                return int(fields["port"])
        return None

    def sentinels_agree(self, primary, replica):
        """Every Sentinel names `primary` and counts `replica` as a healthy replica."""
        for s in self.sentinels:
            if self.primary_by(s) != primary:
                return False
            lines = redis_cli(s, "sentinel", "replicas", self.master_name, timeout=1) or []
            pairs = dict(zip(lines[0::2], lines[1::2]))
            if pairs.get("port") != str(replica) or pairs.get("flags") != "slave" or \
                    pairs.get("master-link-status") != "ok":
                return False
        return True

    def settled(self):
        """(primary, replica) once the group is whole and quiet: the Sentinels agree,
        the replica is linked and caught up, and no failover is that recent that the
        Sentinels would refuse the next one. Raises SetupError past the timeout."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            p = self.primary()
            r = self.replica_of(p) if p else None
            now = time.monotonic()
            quiet = now - self.promoted_at >= SENTINEL_QUIET_S and \
                now - self.events.last_unfinished() >= ABORT_QUIET_S
            if r and quiet and self.sentinels_agree(p, r) and self.caught_up(p, r):
                return p, r
            time.sleep(0.1)
        raise SetupError(f"the replicated group did not settle within {SETTLE_TIMEOUT_S} s "
                         "(scripts/stack.sh status; its logs under run/stack)")

    @staticmethod
    def caught_up(primary, replica):
        """The replica has applied everything the primary has written."""
        p, r = info(primary), info(replica)
        return bool(p.get("master_repl_offset")) and \
            p.get("master_repl_offset") == r.get("slave_repl_offset")

    def wait_caught_up(self, primary, replica, seconds=10):
        deadline = time.monotonic() + seconds
        while not self.caught_up(primary, replica):
            if time.monotonic() >= deadline:
                raise SetupError(f"the replica {replica} did not catch up with {primary}")
            time.sleep(POLL_S)

    @staticmethod
    def hold_back(replica):
        """The cut: the replica reads the stream and applies none of it."""
        if redis_cli(replica, "client", "pause", PAUSE_MS, "write") != ["OK"]:
            raise SetupError(f"CLIENT PAUSE on the replica {replica} failed")

    @staticmethod
    def release(replica):
        redis_cli(replica, "client", "unpause")

    @staticmethod
    def kill(port):
        """kill -9 of a group server (its pid file names it): a crash."""
        run_stack("kill-one", f"ha-{port}")
        return time.monotonic()

    @staticmethod
    def wait_link_down(replica, seconds=10):
        deadline = time.monotonic() + seconds
        while info(replica).get("master_link_status") != "down":
            if time.monotonic() >= deadline:
                raise SetupError(f"the replica {replica} did not see its primary die")
            time.sleep(POLL_S)
        return time.monotonic()

    def promoted(self, replica):
        """Whether a client could be told that `replica` is the primary: it says so
        (Sentinel's REPLICAOF NO ONE has run) and a Sentinel names it (a failover that
        stops half-way leaves a replica promoted that no Sentinel names)."""
        return info(replica).get("role") == "master" and \
            any(self.primary_by(s) == replica for s in self.sentinels)

    def wait_switched_from(self, port, seconds=20):
        """Until a majority of the Sentinels name a primary other than `port`: the
        failover is complete. Whether it came within `seconds`."""
        deadline = time.monotonic() + seconds
        majority = len(self.sentinels) // 2 + 1
        while time.monotonic() < deadline:
            named = [self.primary_by(s) for s in self.sentinels]
            if sum(p not in (None, port) for p in named) >= majority:
                return True
            time.sleep(POLL_S)
        return False

    def wait_promoted(self, replica, seconds=20):
        """The monotonic time at which `replica` is promoted(); None past `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.promoted(replica):
                self.promoted_at = time.monotonic()
                return self.promoted_at
            time.sleep(POLL_S)
        return None

    def restart(self, port):
        """The dead server back, as a supervisor would: scripts/stack.sh starts it as the
        replica of the server that runs as primary - so only once a majority of the
        Sentinels name another primary (or 20 s have passed). Restarted as the replica
        of a server they do not name, it would be a primary in their eyes that says it
        is a replica, which Sentinel counts as down only after down-after plus two 10 s
        INFO periods: 20 s in which they name no usable primary."""
        self.wait_switched_from(port)
        run_stack("start-one", f"ha-{port}")


def _resp(buf, at=0):
    """One RESP value from buf[at:]: (value, end), or None while it is incomplete."""
    line_end = buf.find(b"\r\n", at)
    if line_end < 0:
        return None
    kind, head = buf[at:at + 1], buf[at + 1:line_end]
    at = line_end + 2
    if kind in (b"+", b"-", b":"):
        return head.decode(errors="replace"), at
    if kind == b"$":
        size = int(head)
        if size < 0:
            return None, at
        if len(buf) < at + size + 2:
            return None
        return buf[at:at + size].decode(errors="replace"), at + size + 2
    if kind == b"*":
        items = []
        for _ in range(max(0, int(head))):
            got = _resp(buf, at)
            if got is None:
                return None
            item, at = got
            items.append(item)
        return items, at
    raise ValueError(f"not RESP: {buf[at - len(head) - 3:at]!r}")


class SentinelEvents(threading.Thread):
    """Every event the group's Sentinels publish (PSUBSCRIBE *: +sdown, +odown,
    +try-failover, +promoted-slave, -failover-abort-*, +switch-master...), each with the
    monotonic time it arrived: the Sentinels' own account of a row.

    A row reads from it the failovers inside its window. It causes one, by its kill or
    its cut; any other - a Sentinel that marks a healthy primary down because the first
    PING of its new link came late, an attempt abandoned half-way because a loaded
    machine answered slowly - is the lab's setup failing, not the row's strategy, and a
    failing row prints the whole account."""

    def __init__(self, sentinels, password=None):
        """`sentinels`: (host, port) pairs; `password`: their AUTH, if any."""
        super().__init__(daemon=True)
        self.sentinels, self.password = list(sentinels), password
        self.events = []  # (monotonic, "host:port", channel, payload)
        self.lock = threading.Lock()
        self.stopping = False

    def subscribe(self, host, port):
        try:
            s = socket.create_connection((host, port), timeout=1)
            if self.password:
                s.sendall(b"AUTH %s\r\n" % self.password.encode())
            s.sendall(b"PSUBSCRIBE *\r\n")
            s.setblocking(False)
            return s
        except OSError:
            return None

    def run(self):
        links = {}  # socket -> [name, unread bytes]
        while not self.stopping:
            named = {v[0] for v in links.values()}
            for host, port in self.sentinels:
                if f"{host}:{port}" not in named:
                    s = self.subscribe(host, port)
                    if s:
                        links[s] = [f"{host}:{port}", b""]
            readable = select.select(list(links), [], [], 0.2)[0] if links else []
            if not links:
                time.sleep(0.2)
            for s in readable:
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    s.close()
                    del links[s]
                    continue
                self.take(links[s], data)
        for s in links:
            s.close()

    def take(self, link, data):
        """Records each whole pmessage in link's bytes; keeps the incomplete rest."""
        now = time.monotonic()
        link[1] += data
        while True:
            got = _resp(link[1])
            if got is None:
                return
            value, end = got
            link[1] = link[1][end:]
            if isinstance(value, list) and len(value) == 4 and value[0] == "pmessage":
                with self.lock:
                    self.events.append((now, link[0], value[2], value[3]))

    def stop(self):
        self.stopping = True
        self.join(2)

    def since(self, t0, t1=None):
        with self.lock:
            return [e for e in self.events if e[0] >= t0 and (t1 is None or e[0] <= t1)]

    def switches(self, t0, t1=None):
        """The primaries the Sentinels switched to from t0 on, in order, one entry per
        failover (each Sentinel announces the same switch): [(time, "host:port")]."""
        seen = []
        for t, _, channel, payload in self.since(t0, t1):
            if channel == "+switch-master":
                new = ":".join(payload.split()[3:5])
                if not seen or seen[-1][1] != new:
                    seen.append((t, new))
        return seen

    def last_unfinished(self):
        """When an attempt last ended without a new primary, and no switch came after it
        (0.0: none). A switch resets every Sentinel's record of the group, and with it
        the pause an abandoned attempt imposes; a Sentinel that lost the election to
        another says so (-failover-abort-not-elected) in every ordinary failover."""
        last = 0.0
        with self.lock:
            for t, _, channel, _ in self.events:
                if channel.startswith(UNFINISHED):
                    last = t
                elif channel == "+switch-master":
                    last = 0.0
        return last

    def account(self, t0, t1, origin):
        """The events of [t0, t1] as lines, their times in seconds from `origin`."""
        return [f"{t - origin:+8.3f} s  sentinel {who}  {channel} {payload}"
                for t, who, channel, payload in self.since(t0, t1)]
