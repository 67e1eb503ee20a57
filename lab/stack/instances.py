"""A stockd a run starts itself, beside the stack's (two clients' instances A and B of a
failover, the nodes of the namespace lab): started on its port with its environment and
options, waited for until healthy, looked into while it serves (is a sale sleeping in
its critical section?), frozen and thawed, killed, and stopped, its exit status checked."""

import os
import signal
import time

from ..base.common import SetupError
from ..base.waiting import wait_until
from ..client.api import Api
from .service import launch_stockd, stop_process, wait_healthy

SLEEPING_SYSCALLS = ("35", "230")  # nanosleep, clock_nanosleep: hold_ms's sleep_ms()


def log_stamp(wall):
    """A wall-clock time as stockd's log stamps it (UTC, milliseconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + \
        f".{int(wall * 1000) % 1000:03d}Z"


class Instance:
    """One build/stockd of the run's own, with the environment it is given (the group's
    Sentinels, the cluster's nodes, the namespace lab's addresses)."""

    def __init__(self, name, port, env, options, out_dir):
        self.name, self.api = name, Api("127.0.0.1", port, os.environ.get("STOCKD_ADMIN_TOKEN"))
        self.env, self.options, self.out_dir = env, options, out_dir
        self.proc = None

    def start(self):
        if self.api.answers():
            raise SetupError(f"something answers at {self.api.where()} already: pick another "
                             "--port (instance B takes the next one)")
        options = ["--listen=127.0.0.1", "--io-timeout-ms=1000",
                   "--connect-timeout-ms=300"] + self.options
        self.proc = launch_stockd(self.api.port, options, {**os.environ, **self.env},
                                  self.log_file())
        wait_healthy(self.api, 30, self.proc, self.log_file())

    def log_file(self):
        return os.path.join(self.out_dir, f"stockd-{self.name}.log")

    def log_window(self, wall0, wall1, most=30):
        """This stockd's log lines written between the wall-clock times wall0 and wall1,
        a run of one message (its timestamp aside) said once with its count; the last
        `most` of them."""
        start, end = log_stamp(wall0), log_stamp(wall1)
        said = []  # [first line, message, count, last stamp]
        try:
            with open(self.log_file(), errors="replace") as f:
                for line in f:
                    stamp, _, message = line.rstrip("\n").partition(" ")
                    if not start <= stamp <= end:
                        continue
                    if said and said[-1][1] == message:
                        said[-1][2:] = [said[-1][2] + 1, stamp]
                    else:
                        said.append([line.rstrip("\n"), message, 1, stamp])
        except OSError as e:
            return [f"(its log could not be read: {e})"]
        return [first if n == 1 else f"{first}  (x{n}, the last at {last[11:]})"
                for first, _, n, last in said[-most:]]

    def sleeping(self):
        """Whether a thread of this stockd sleeps in nanosleep: with no other request and
        no contention, that is a sale inside its critical section, past its read."""
        base = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(base):
            try:
                with open(f"{base}/{tid}/syscall") as f:
                    if f.read().split(" ", 1)[0] in SLEEPING_SYSCALLS:
                        return True
            except OSError:
                continue
        return False

    def wait_holding(self, sale, seconds=10):
        """Until this stockd's `sale` (a Sale sent to it) sits between its read and its
        write (hold_ms): True; False when it answered first (a lock that waits for its
        replica gives up before it reads)."""
        seen = wait_until(seconds, lambda: "answered" if not sale.is_alive() else
                          "holding" if self.sleeping() else None, 0.002)
        if not seen:
            raise SetupError(f"{self.name}'s sale neither reached its critical section nor "
                             f"answered in {seconds} s")
        return seen == "holding"

    def freeze(self, on):
        os.kill(self.proc.pid, signal.SIGSTOP if on else signal.SIGCONT)

    def kill(self):
        """kill -9: a crash, in the middle of whatever it was doing; waited for."""
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            stop_process(self.proc)
        if self.proc and self.proc.returncode not in (0, None):
            raise SetupError(f"stockd {self.name} exited with status {self.proc.returncode}")
