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

import subprocess
import time

from ..base.common import SetupError
from ..stack.service import stack_env
from .faults import run_stack

PAUSE_MS = 60000           # longer than any window the run needs; released explicitly
SETTLE_TIMEOUT_S = 60
POLL_S = 0.01
# Sentinel starts no new failover of a master within 2 x failover-timeout (1 s in the
# stack) of the last one: a row waits that long after a promotion.
SENTINEL_QUIET_S = 2.5


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
            quiet = time.monotonic() - self.promoted_at >= SENTINEL_QUIET_S
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

    def wait_promoted(self, replica, seconds=20):
        """The monotonic time at which `replica` first says it is the primary (Sentinel's
        REPLICAOF NO ONE has run: the earliest moment a client could be told); None past
        `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if info(replica).get("role") == "master":
                self.promoted_at = time.monotonic()
                return self.promoted_at
            time.sleep(POLL_S)
        return None

    @staticmethod
    def restart(port):
        """The dead server back: scripts/stack.sh starts it as the new primary's replica."""
        run_stack("start-one", f"ha-{port}")
