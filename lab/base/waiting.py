"""One wait with a deadline, for every part of the lab that waits for something to
become true (a stockd healthy, a stream drained, a server answering, a sale in its
critical section): the probe asked again and again, a pause between two asks, on the
monotonic clock, so that a wall-clock step never lengthens or cuts a wait. A probe that
knows the wait is hopeless (the process it waits for died) raises; what a wait that
timed out means is said by its caller, which knows what it waited for. And its
background twin (Periodic): a look taken every so often while a `with` block runs."""

import threading
import time


def wait_until(seconds, probe, every=0.05):
    """probe()'s first true value, asked every `every` seconds until `seconds` have
    passed (asked at least once, and once more at the deadline); None when it never
    came."""
    assert seconds >= 0 and every > 0
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(every, left))


class Periodic:
    """A context manager that calls self.tick() on a thread of its own while its `with`
    block runs: at once, every `period` seconds, and once more after the block ends,
    so that the last look sees everything the block did."""

    def __init__(self, period):
        assert period > 0
        self.period = period
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def tick(self):
        raise NotImplementedError

    def _run(self):
        self.tick()
        while not self.stop.wait(self.period):
            self.tick()
        self.tick()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
