"""The faults the chaos run injects into the private stack, and which strategies each
one is judged on.

A fault names the backend it hits, as GET /strategies' `needs` spells it (the name
of its `struct backend` in server/backend/, read from there), the stack processes it acts on
(scripts/stack.sh names), how it starts (kill-one: kill -9; stop-one: a clean stop;
freeze-one: SIGSTOP) and ends (start-one, or thaw-one: SIGCONT), and whether the
backend is gone meanwhile ("outage") or still there for the strategies that need it
(one Redlock server of three: the quorum stays). The stack's processes are only ever
signalled through scripts/stack.sh, which acts on the pids of its own pid files.

Strategies, from the facts only: a safe strategy of each store; every lockless
strategy claiming safety that stores in the fault's backend, because each reaches it
its own way (a transaction on a worker, an optimistic retry, a batch led by one
worker, a script on the HTTP loop's own pipe); and the "lock zoo" of the fault's
backend: the strategies claiming safety that need that backend without storing in it
(they lock with it). The short version takes the zoo's first."""

import os
import socket
import subprocess
import sys
import time

from ..base.common import SetupError
from ..client import sources
from ..stack.service import stack_script

OUTAGE, QUORUM = "outage", "quorum"
# Where stockd defines its backends (their names are read from there).
BACKEND_FILES = ("mysql.c", "redis.c", "redlock.c", "zookeeper.c")
POLL_S = 0.02
PROBE_TIMEOUT_S = 0.5


class Fault:
    def __init__(self, name, what, backend, targets, inject, restore, hold_s, expect):
        self.name, self.what, self.backend = name, what, backend
        self.targets = list(targets)   # scripts/stack.sh NAMEs
        self.inject, self.restore = inject, restore  # stack.sh commands
        self.hold_s, self.expect = hold_s, expect

    def doc(self):
        return {"fault": self.name, "what": self.what, "backend": self.backend,
                "targets": self.targets, "hold_s": self.hold_s, "expect": self.expect}


def redlock_names(env):
    """The stack names of the Redlock servers (redlock-PORT), from stack.sh's env."""
    servers = [s for s in env.get("STOCKD_REDLOCK", "").split(",") if s]
    return [f"redlock-{s.rsplit(':', 1)[1]}" for s in servers]


def all_faults(env, hold_s=3.0):
    """Every fault of `make chaos`, in the order they run."""
    mysql, redis, redlock, zookeeper = (sources.backend_name(f) for f in BACKEND_FILES)
    servers = redlock_names(env)
    faults = [
        Fault("mysql-kill", "kill -9 MariaDB, restart it", mysql, ["mysql"],
              "kill-one", "start-one", hold_s, OUTAGE),
        Fault("redis-kill", "kill -9 Redis, restart it", redis, ["redis"],
              "kill-one", "start-one", hold_s, OUTAGE),
        Fault("redis-freeze", f"SIGSTOP Redis for {hold_s:g} s, SIGCONT", redis, ["redis"],
              "freeze-one", "thaw-one", hold_s, OUTAGE),
    ]
    if len(servers) >= 3:
        faults += [
            Fault("redlock-stop-1", f"stop 1 of {len(servers)} Redlock servers, restart it",
                  redlock, servers[:1], "stop-one", "start-one", hold_s, QUORUM),
            Fault("redlock-stop-2", f"stop 2 of {len(servers)} Redlock servers, restart them",
                  redlock, servers[:2], "stop-one", "start-one", hold_s, OUTAGE),
        ]
    faults.append(Fault("zk-kill", "kill -9 ZooKeeper, restart it", zookeeper, ["zk"],
                        "kill-one", "start-one", hold_s, OUTAGE))
    return faults


def quick_faults(env, hold_s=2.0):
    """The short version in `make test`: Redis killed, Redis frozen, one Redlock
    server stopped."""
    wanted = ("redis-kill", "redis-freeze", "redlock-stop-1")
    return [f for f in all_faults(env, hold_s) if f.name in wanted]


def lock_zoo(facts, backend):
    """The strategies claiming safety that lock with `backend` (need it, store elsewhere)."""
    return [s for s in facts.strategies
            if s.safe_single and backend in s.needs and s.store != backend]


def lockless_in(facts, backend):
    """The strategies claiming safety that store in `backend` and take no lock."""
    return [s for s in facts.strategies
            if s.safe_single and s.store == backend and not s.lock]


def strategies_for(facts, fault, zoo_max=None):
    """A safe strategy of each store, the lockless safe ones of the fault's backend,
    then its lock zoo (its first zoo_max ones when given); each once."""
    picked = (facts.first_safe_per_store(1) + lockless_in(facts, fault.backend) +
              lock_zoo(facts, fault.backend)[:zoo_max])
    return list({s.name: s for s in picked}.values())


# ------------------------------------------------------------- the backends

def _ask(port, send, enough, timeout=PROBE_TIMEOUT_S):
    """Connect to 127.0.0.1:port, send `send`, read until enough(data) or EOF."""
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            if send:
                s.sendall(send)
            while not enough(data):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    return data


def _redis_ask(port, command, lines):
    """`command` on the Redis at port, after an AUTH with the stack's password when
    there is one (REDISCLI_AUTH, which lab.stack.service.stack_env sets); the reply's bytes
    once it has `lines` lines, the AUTH's +OK not counted."""
    password = os.environ.get("REDISCLI_AUTH", "")
    auth = f"AUTH {password}\r\n".encode() if password else b""
    return _ask(port, auth + command, lambda d: d.count(b"\r\n") >= lines + bool(auth)) or b""


def redis_answers(port):
    return b"+PONG\r\n" in _redis_ask(port, b"PING\r\n", 1)


def redis_keeps_writes(port):
    """The Redis at port appends its writes to an AOF (survives kill -9)."""
    return _redis_ask(port, b"CONFIG GET appendonly\r\n", 5).rstrip().endswith(b"yes")


def mysql_answers(port):
    """The server's greeting: a packet (3-byte length, sequence 0) of protocol 10."""
    data = _ask(port, b"", lambda d: len(d) >= 5) or b""
    return len(data) >= 5 and data[3] == 0 and data[4] == 10


def zk_answers(port):
    """ZooKeeper serves (srvr shows its mode only then)."""
    return b"Mode: " in (_ask(port, b"srvr", lambda d: False) or b"")


def probe_of(name, env):
    """A function telling whether the stack process `name` answers again."""
    if name == "mysql":
        return lambda: mysql_answers(int(env["STOCKD_MYSQL_PORT"]))
    if name == "redis":
        return lambda: redis_answers(int(env["STOCKD_REDIS_PORT"]))
    if name == "zk":
        return lambda: zk_answers(int(env["STOCKD_ZK"].rsplit(":", 1)[1]))
    if name.startswith("redlock-"):
        return lambda: redis_answers(int(name.split("-", 1)[1]))
    raise ValueError(f"no probe for {name}")


def stack(command, name):
    """scripts/stack.sh COMMAND NAME; its progress goes to stderr."""
    return subprocess.Popen([stack_script(), command, name], stdin=subprocess.DEVNULL,
                            stdout=sys.stderr, stderr=sys.stderr)


def run_stack(command, name):
    rc = stack(command, name).wait()
    if rc != 0:
        raise SetupError(f"scripts/stack.sh {command} {name} failed (exit {rc})")


class Injection:
    """One fault applied: inject() takes the targets away, restore() brings them back
    and returns the monotonic time at which every one of them answered again."""

    def __init__(self, fault, env, patience_s=60):
        self.fault, self.patience_s = fault, patience_s
        self.probes = [probe_of(t, env) for t in fault.targets]
        self.injected = False

    def inject(self):
        self.injected = True
        for t in self.fault.targets:
            run_stack(self.fault.inject, t)
        return time.monotonic()

    def restore(self):
        """Start the restore commands, poll until every target answers, then wait for
        the commands (start-one also re-provisions); None when one never answered."""
        self.injected = False
        procs = [stack(self.fault.restore, t) for t in self.fault.targets]
        deadline = time.monotonic() + self.patience_s
        back = None
        while time.monotonic() < deadline:
            if all(p() for p in self.probes):
                back = time.monotonic()
                break
            time.sleep(POLL_S)
        failed = [f"{self.fault.restore} {t} (exit {p.wait()})"
                  for t, p in zip(self.fault.targets, procs) if p.wait() != 0]
        if failed:
            raise SetupError(f"scripts/stack.sh {', '.join(failed)} failed")
        return back

    def undo(self):
        """After an interruption: bring the targets back, best effort."""
        if self.injected:
            self.injected = False
            for t in self.fault.targets:
                stack(self.fault.restore, t).wait()
