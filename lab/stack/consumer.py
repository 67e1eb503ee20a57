"""The order stream's consumer as a process of its own: `stockd --consume 1`, which
settles the stream into MySQL and serves no HTTP. The runs that kill a consumer in the
middle of a batch (the stream's chaos, the retry run's consumer-kill) start it here:
--stream-hold makes it say that it holds its batch at a point (before its COMMIT,
or after it and before its XACK) and wait there to be killed, and a short
--stream-claim-ms lets the next one take over the dead one's batch at once."""

import os
import subprocess
import time

from ..base.common import REPO, SetupError
from .service import run_dir, stack_env, stop_process


class Consumer:
    """One `stockd --consume 1` process, its log in the run directory; `say`, when
    given, is told its command line."""

    def __init__(self, say, batch, hold=None):
        self.log = os.path.join(run_dir(), "stockd-consumer.log")
        binary = os.environ.get("STOCKD_BIN") or os.path.join(REPO, "build", "stockd")
        cmd = [os.path.realpath(binary), "--consume", "1", "--stream-claim-ms", "500",
               "--stream-batch", str(batch)] + (["--stream-hold", hold] if hold else [])
        env = dict(os.environ)
        env.update(stack_env())
        self.offset = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        if say:
            say(f"starting {' '.join(cmd[1:])}")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def wait_line(self, needle, seconds=60):
        """The first line this process logged that holds `needle`."""
        t0 = time.time()
        while time.time() - t0 < seconds:
            with open(self.log, errors="replace") as f:
                f.seek(self.offset)
                found = [ln for ln in f.read().splitlines() if needle in ln]
            if found:
                return found[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise SetupError(f"the consumer did not log '{needle}' (see {self.log})")

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            stop_process(self.proc)
